/* SPDX-License-Identifier: MIT */
/*
 * gen_corpus.c: writes the fuzz targets' seed corpus (tests/fuzz/corpus/): a valid message of
 * every request kind and the edge cases around each check, and configuration files using
 * every section and key. `gen_corpus DIR` writes DIR/frame and DIR/config; `gen_corpus --check
 * DIR` says whether DIR holds exactly what would be written (the committed corpus is current).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rocmmem.pb-c.h"
#include "version.h"

#define MIB ((uint64_t)1 << 20)

static const char *out_dir;
static bool checking;
static int problems;
/* The names written, to find stale files in --check. */
static char *written[512];
static unsigned nwritten;

/* text lends a literal to a generated struct, which never writes through it. */
static char *text(const char *s)
{
	return (char *)s;
}

/* emit writes (or, checking, compares) DIR/sub/name. */
static void emit(const char *sub, const char *name, const void *data, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, sub, name);
	if (nwritten < sizeof(written) / sizeof(written[0])) {
		char rel[PATH_MAX];

		snprintf(rel, sizeof(rel), "%s/%s", sub, name);
		written[nwritten++] = strdup(rel);
	}
	if (checking) {
		uint8_t *have = malloc(len + 1);
		size_t n = 0;

		f = fopen(path, "rb");
		if (f) {
			n = fread(have, 1, len + 1, f);
			fclose(f);
		}
		if (!f || n != len || memcmp(have, data, len) != 0) {
			fprintf(stderr, "%s: %s\n", path, f ? "differs" : "missing");
			problems++;
		}
		free(have);
		return;
	}
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "Could not write %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* frame writes msg, with id, as frame/<name>.bin; id 0 leaves the id out. */
static void frame(const char *name, uint64_t id, Rocmmem__Wire__ClientMessage *msg)
{
	uint8_t buf[4096];
	char file[128];
	size_t len;

	msg->has_id = id != 0;
	msg->id = id;
	len = rocmmem__wire__client_message__get_packed_size(msg);
	if (len > sizeof(buf)) {
		fprintf(stderr, "seed %s is too large\n", name);
		exit(1);
	}
	rocmmem__wire__client_message__pack(msg, buf);
	snprintf(file, sizeof(file), "%s.bin", name);
	emit("frame", file, buf, len);
}

static void raw(const char *name, const void *bytes, size_t len)
{
	char file[128];

	snprintf(file, sizeof(file), "%s.bin", name);
	emit("frame", file, bytes, len);
}

static void hellos(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello h = ROCMMEM__WIRE__HELLO__INIT;
	char name64[65], name65[66];

	memset(name64, 'n', 64);
	name64[64] = '\0';
	memset(name65, 'n', 65);
	name65[65] = '\0';
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	m.hello = &h;
	h.has_protocol_version = true;
	h.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	h.client_name = text("comfyui");
	frame("hello", 1, &m);
	h.client_name = text("Größe 日本語 🙂");
	frame("hello-utf8", 1, &m);
	h.client_name = name64;
	frame("hello-name64", 1, &m);
	h.client_name = name65;
	frame("hello-name65", 1, &m);
	h.client_name = text("\x1b[31mred");
	frame("hello-name-escape", 1, &m);
	h.client_name = text("\xc0\xaf");
	frame("hello-name-overlong", 1, &m);
	h.client_name = NULL;
	frame("hello-noname", 1, &m);
	frame("hello-noid", 0, &m);
	h.protocol_version = 2;
	frame("hello-version2", 7, &m);
	h.has_protocol_version = false;
	frame("hello-noversion", 1, &m);
}

static void leases(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire a = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__LeaseRelease r = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	char tag64[65], tag65[66];

	memset(tag64, 't', 64);
	tag64[64] = '\0';
	memset(tag65, 't', 65);
	tag65[65] = '\0';
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	m.lease_acquire = &a;
	a.has_size = true;
	a.size = 2 * MIB;
	frame("acquire-plain", 2, &m);
	a.has_device = true;
	a.device = 1;
	a.has_timeout_ms = true;
	a.timeout_ms = 5000;
	a.tag = text("weights");
	a.has_model_id = true;
	a.model_id = 1;
	frame("acquire-full", 3, &m);
	/* The edges: 64 bytes of tag pass, 65 do not; devices 0 and 1 of the fuzzers' 2. */
	a.tag = tag64;
	frame("acquire-tag64", 3, &m);
	a.tag = tag65;
	frame("acquire-tag65", 3, &m);
	a.tag = text("weights");
	a.device = 2;
	frame("acquire-device2", 4, &m);
	a.device = 99;
	frame("acquire-device99", 4, &m);
	a.device = UINT32_MAX;
	frame("acquire-device-max", 4, &m);
	a.device = 0;
	a.timeout_ms = -1;
	a.tag = text("line\nbreak");
	frame("acquire-tag-newline", 5, &m);
	a.tag = text("\xed\xa0\x80");
	frame("acquire-tag-surrogate", 5, &m);
	a.tag = NULL;
	a.timeout_ms = INT64_MAX;
	a.size = UINT64_MAX;
	frame("acquire-size-max", 6, &m);
	a.size = 0;
	frame("acquire-size0", 6, &m);
	a.has_size = false;
	frame("acquire-nosize", 6, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	m.lease_release = &r;
	r.has_lease_id = true;
	r.lease_id = 1;
	frame("release", 8, &m);
	r.lease_id = UINT64_MAX;
	frame("release-max", 8, &m);
	r.has_lease_id = false;
	frame("release-noid", 8, &m);
}

static void models(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	Rocmmem__Wire__ModelRelease rel = ROCMMEM__WIRE__MODEL_RELEASE__INIT;
	Rocmmem__Wire__ModelResize rsz = ROCMMEM__WIRE__MODEL_RESIZE__INIT;
	Rocmmem__Wire__ModelUnregister unr = ROCMMEM__WIRE__MODEL_UNREGISTER__INIT;
	Rocmmem__Wire__EvictAck ack = ROCMMEM__WIRE__EVICT_ACK__INIT;
	char name64[65], name65[66];

	memset(name64, 'm', 64);
	name64[64] = '\0';
	/* 63 bytes and a 2-byte character: 65 bytes of clean UTF-8. */
	memset(name65, 'm', 63);
	memcpy(name65 + 63, "\xc3\xa9", 3);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	m.model_register = &reg;
	reg.name = text("flux-dev");
	reg.has_size = true;
	reg.size = 12 * MIB;
	reg.has_class_ = true;
	reg.class_ = ROCMMEM__WIRE__MODEL_CLASS__MODEL_CLASS_TRANSFORMER;
	frame("register", 10, &m);
	reg.has_device = true;
	reg.device = 1;
	reg.has_priority = true;
	reg.priority = -5;
	reg.has_pinned = true;
	reg.pinned = true;
	reg.class_ = ROCMMEM__WIRE__MODEL_CLASS__MODEL_CLASS_IMAGE_ENCODER;
	frame("register-full", 10, &m);
	reg.name = name64;
	frame("register-name64", 10, &m);
	reg.name = name65;
	frame("register-name65-utf8", 10, &m);
	reg.name = text("flux-dev");
	reg.class_ = (Rocmmem__Wire__ModelClass)5;
	frame("register-class5", 10, &m);
	reg.class_ = (Rocmmem__Wire__ModelClass)99;
	frame("register-class99", 10, &m);
	reg.class_ = (Rocmmem__Wire__ModelClass)-1;
	frame("register-class-negative", 10, &m);
	reg.class_ = ROCMMEM__WIRE__MODEL_CLASS__MODEL_CLASS_VAE;
	reg.has_reservation = true;
	reg.reservation = 2 * MIB;
	frame("register-reservation", 10, &m);
	reg.has_reservation = false;
	reg.device = 7;
	frame("register-device7", 10, &m);
	reg.device = 0;
	reg.name = text("");
	frame("register-emptyname", 10, &m);
	reg.name = NULL;
	frame("register-noname", 10, &m);
	reg.name = text("vae");
	reg.size = UINT64_MAX;
	frame("register-size-max", 10, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
	m.model_acquire = &acq;
	acq.has_model_id = true;
	acq.model_id = 1;
	acq.has_timeout_ms = true;
	acq.timeout_ms = -1;
	frame("model-acquire", 11, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
	m.model_release = &rel;
	rel.has_model_id = true;
	rel.model_id = 1;
	frame("model-release", 12, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE;
	m.model_resize = &rsz;
	rsz.has_model_id = true;
	rsz.model_id = 1;
	rsz.has_reservation = true;
	rsz.reservation = 4 * MIB;
	rsz.has_timeout_ms = true;
	rsz.timeout_ms = 100;
	frame("model-resize", 13, &m);
	rsz.reservation = UINT64_MAX;
	frame("model-resize-max", 13, &m);
	rsz.has_reservation = false;
	frame("model-resize-noreservation", 13, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
	m.model_unregister = &unr;
	unr.has_model_id = true;
	unr.model_id = 1;
	frame("model-unregister", 14, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
	m.evict_ack = &ack;
	ack.has_model_id = true;
	ack.model_id = 1;
	frame("evict-ack", 15, &m);
}

static void telemetry(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Subscribe sub = ROCMMEM__WIRE__SUBSCRIBE__INIT;
	Rocmmem__Wire__Unsubscribe unsub = ROCMMEM__WIRE__UNSUBSCRIBE__INIT;
	Rocmmem__Wire__StatusRequest status = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	Rocmmem__Wire__MetricsRequest metrics = ROCMMEM__WIRE__METRICS_REQUEST__INIT;
	Rocmmem__Wire__TrimRequest trim = ROCMMEM__WIRE__TRIM_REQUEST__INIT;

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	m.status = &status;
	frame("status", 20, &m);
	frame("status-noid", 0, &m);
	frame("status-id-max", UINT64_MAX, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_METRICS;
	m.metrics = &metrics;
	frame("metrics", 21, &m);
	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE;
	m.unsubscribe = &unsub;
	frame("unsubscribe", 22, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
	m.subscribe = &sub;
	sub.has_samples = true;
	sub.samples = true;
	sub.has_interval_ms = true;
	sub.interval_ms = 1000;
	sub.has_events = true;
	sub.events = true;
	frame("subscribe", 23, &m);
	sub.interval_ms = 10;
	frame("subscribe-interval10", 23, &m);
	sub.interval_ms = 60000;
	frame("subscribe-interval60000", 23, &m);
	sub.interval_ms = 9;
	frame("subscribe-interval9", 23, &m);
	sub.interval_ms = 60001;
	frame("subscribe-interval60001", 23, &m);
	sub.samples = false;
	frame("subscribe-events", 23, &m);
	sub.events = false;
	frame("subscribe-nothing", 23, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
	m.trim = &trim;
	frame("trim-all", 24, &m);
	trim.has_device = true;
	trim.device = 1;
	frame("trim-device1", 24, &m);
	trim.device = 2;
	frame("trim-device2", 24, &m);
}

static void admin(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest a = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminEvictModel evict = ROCMMEM__WIRE__ADMIN_EVICT_MODEL__INIT;
	Rocmmem__Wire__AdminPinModel pin = ROCMMEM__WIRE__ADMIN_PIN_MODEL__INIT;
	Rocmmem__Wire__AdminSetBudget budget = ROCMMEM__WIRE__ADMIN_SET_BUDGET__INIT;
	Rocmmem__Wire__AdminRevokeLease revoke = ROCMMEM__WIRE__ADMIN_REVOKE_LEASE__INIT;
	Rocmmem__Wire__AdminDisconnectClient disconnect =
	    ROCMMEM__WIRE__ADMIN_DISCONNECT_CLIENT__INIT;
	Rocmmem__Wire__AdminSetLogLevel level = ROCMMEM__WIRE__ADMIN_SET_LOG_LEVEL__INIT;

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	m.admin = &a;
	frame("admin-empty", 30, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
	a.evict_model = &evict;
	evict.has_model_id = true;
	evict.model_id = 1;
	frame("admin-evict", 31, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
	a.pin_model = &pin;
	pin.has_model_id = true;
	pin.model_id = 1;
	pin.has_pinned = true;
	pin.pinned = true;
	frame("admin-pin", 32, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_SET_BUDGET;
	a.set_budget = &budget;
	budget.has_budget = true;
	budget.budget = 64 * MIB;
	frame("admin-set-budget", 33, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_REVOKE_LEASE;
	a.revoke_lease = &revoke;
	revoke.has_lease_id = true;
	revoke.lease_id = 1;
	frame("admin-revoke", 34, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_DISCONNECT_CLIENT;
	a.disconnect_client = &disconnect;
	disconnect.has_pid = true;
	disconnect.pid = 1;
	frame("admin-disconnect", 35, &m);
	a.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_SET_LOG_LEVEL;
	a.set_log_level = &level;
	level.level = text("debug");
	frame("admin-log-level", 36, &m);
}

/* After a restart: leases and models declared again (a lease's fds come with it), then done. */
static void redeclares(void)
{
	Rocmmem__Wire__ClientMessage m = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRedeclare lease = ROCMMEM__WIRE__LEASE_REDECLARE__INIT;
	Rocmmem__Wire__ModelRedeclare model = ROCMMEM__WIRE__MODEL_REDECLARE__INIT;
	Rocmmem__Wire__RedeclareDone done = ROCMMEM__WIRE__REDECLARE_DONE__INIT;
	uint64_t chunks[2] = {2 * MIB, 2 * MIB};

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
	m.lease_redeclare = &lease;
	lease.has_lease_id = true;
	lease.lease_id = 1;
	lease.has_size = true;
	lease.size = 2 * MIB;
	lease.has_handle_kind = true;
	lease.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD;
	lease.has_fd_count = true;
	lease.fd_count = 1;
	frame("redeclare-lease", 50, &m);
	lease.device = 1;
	lease.has_device = true;
	lease.size = 4 * MIB;
	lease.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD;
	lease.fd_count = 2;
	lease.n_chunk_sizes = 2;
	lease.chunk_sizes = chunks;
	lease.has_model_id = true;
	lease.model_id = 1;
	frame("redeclare-lease-vmm", 51, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REDECLARE;
	m.model_redeclare = &model;
	model.has_previous_id = true;
	model.previous_id = 1;
	model.name = text("flux-dev");
	model.has_class_ = true;
	model.class_ = ROCMMEM__WIRE__MODEL_CLASS__MODEL_CLASS_TRANSFORMER;
	model.has_size = true;
	model.size = 12 * MIB;
	model.has_reservation = true;
	model.reservation = 12 * MIB;
	model.has_use_count = true;
	model.use_count = 1;
	frame("redeclare-model", 52, &m);

	m.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
	m.redeclare_done = &done;
	frame("redeclare-done", 53, &m);
}

/* Hand-made packets: what no encoder writes, but a decoder must take or refuse. */
static void odd_packets(void)
{
	/* id 40, then a status body followed by a trim body: the last member of a oneof wins. */
	static const uint8_t two_bodies[] = {0x08, 0x28, 0x2a, 0x00, 0x72, 0x02, 0x08, 0x01};
	/* id 41 and a status body with an unknown field 99 (varint) inside. */
	static const uint8_t unknown_inner[] = {0x08, 0x29, 0x2a, 0x03, 0x98, 0x06, 0x01};
	/* id 42, status, and an unknown field 100 (length-delimited) at the top. */
	static const uint8_t unknown_outer[] = {0x08, 0x2a, 0x2a, 0x00, 0xa2,
						0x06, 0x02, 0x41, 0x42};
	/* The id given twice: the last one counts. */
	static const uint8_t id_twice[] = {0x08, 0x01, 0x08, 0x2b, 0x2a, 0x00};
	/* id 44 and an unknown body field 40 (a newer request): -EOPNOTSUPP. */
	static const uint8_t unknown_body[] = {0x08, 0x2c, 0xc2, 0x02, 0x00};
	/* A priority of -1 as a 5-byte varint (int32 truncated); it packs back as 10 bytes. */
	static const uint8_t short_negative[] = {0x08, 0x2d, 0x32, 0x09, 0x12, 0x01, 0x6d,
						 0x28, 0xff, 0xff, 0xff, 0xff, 0x0f};
	/* A tag with a NUL inside it. */
	static const uint8_t nul_in_tag[] = {0x08, 0x2e, 0x1a, 0x08, 0x10, 0x01,
					     0x22, 0x04, 0x61, 0x00, 0x1b, 0x62};
	/* Cut short: a length that runs past the end, a varint without its end. */
	static const uint8_t cut_length[] = {0x08, 0x2f, 0x1a, 0x10, 0x10, 0x01};
	static const uint8_t cut_varint[] = {0x08, 0xff, 0xff};
	static const uint8_t group[] = {0x08, 0x30, 0x0b, 0x08, 0x01, 0x0c};

	raw("odd-two-bodies", two_bodies, sizeof(two_bodies));
	raw("odd-unknown-inner-field", unknown_inner, sizeof(unknown_inner));
	raw("odd-unknown-outer-field", unknown_outer, sizeof(unknown_outer));
	raw("odd-id-twice", id_twice, sizeof(id_twice));
	raw("odd-unknown-body", unknown_body, sizeof(unknown_body));
	raw("odd-short-negative-varint", short_negative, sizeof(short_negative));
	raw("odd-nul-in-tag", nul_in_tag, sizeof(nul_in_tag));
	raw("odd-cut-length", cut_length, sizeof(cut_length));
	raw("odd-cut-varint", cut_varint, sizeof(cut_varint));
	raw("odd-group", group, sizeof(group));
}

/* Configuration files: every section and key, and the mistakes config_load reports. */
static void configs(void)
{
	static const struct {
		const char *name;
		const char *text;
	} files[] = {
	    {"all-keys", "[daemon]\n"
			 "socket = /run/rocmmemd/rocmmemd.sock\n"
			 "backend = host\n"
			 "sharing = auto\n"
			 "log_level = debug\n"
			 "shutdown_timeout = 2.5\n"
			 "[policy]\n"
			 "evict_deadline = 20\n"
			 "exclusive = transformer,vae\n"
			 "exclusive = text_encoder,image_encoder\n"
			 "[limits]\n"
			 "clients = 16\n"
			 "pending = 8\n"
			 "leases = 1024\n"
			 "queued = 1M\n"
			 "[metrics]\n"
			 "textfile = /var/lib/prometheus/node-exporter/rocmmemd.prom\n"
			 "interval = 0.5\n"
			 "[devices]\n"
			 "budget = 8G\n"
			 "[device 1]\n"
			 "headroom = 512MiB\n"
			 "exclusive = vae,other\n"},
	    {"access-limits", "[daemon]\n"
			      "restart_grace = 30\n"
			      "[access]\n"
			      "socket_user = root\n"
			      "socket_group = root\n"
			      "socket_mode = 0660\n"
			      "allowed_users = root\n"
			      "allowed_groups = root\n"
			      "admin_group = root\n"
			      "[limits]\n"
			      "clients_per_uid = 8\n"
			      "bytes_per_uid = 1G\n"
			      "message_size = 16K\n"
			      "handshake_timeout = 2.5\n"
			      "subscribers = 4\n"},
	    {"comments", "; rocmmemd.conf\n# every line a comment or blank\n\n  ; indented\n"},
	    {"devices", "[devices]\nheadroom = 1G\n[device 0]\nbudget = 4G\n[device 15]\n"
			"budget = 2T\n"},
	    {"empty", ""},
	    {"twice", "[limits]\nclients = 1\nclients = 2\n"},
	    {"unknown-key", "[daemon]\ncolour = blue\n"},
	    {"unknown-section", "[devices]\nbudget = 1G\n[device 16]\nbudget = 1G\n"},
	    {"bad-values", "[devices]\nbudget = -1\n[limits]\npending = 99999999999\n"},
	    {"syntax", "[daemon\nbackend host\n"},
	    {"no-newline", "[policy]\nevict_deadline = 1.25"},
	    {"inline-comment", "[daemon]\nlog_level = warn ; quieter\n"},
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char file[128];

		snprintf(file, sizeof(file), "%s.conf", files[i].name);
		emit("config", file, files[i].text, strlen(files[i].text));
	}
}

/* stale reports files in DIR/sub that this program does not write. */
static void stale(const char *sub)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", out_dir, sub);
	d = opendir(dir);
	if (!d) {
		fprintf(stderr, "Could not read %s: %s\n", dir, strerror(errno));
		problems++;
		return;
	}
	while ((e = readdir(d))) {
		char rel[PATH_MAX];
		bool known = false;

		if (e->d_name[0] == '.')
			continue;
		snprintf(rel, sizeof(rel), "%s/%s", sub, e->d_name);
		for (unsigned i = 0; i < nwritten && !known; i++)
			known = strcmp(written[i], rel) == 0;
		/* Crash reproducers are added by hand (regress-*): kept, never regenerated. */
		if (!known && strncmp(e->d_name, "regress-", 8) != 0) {
			fprintf(stderr, "%s/%s: not written by gen_corpus\n", dir, e->d_name);
			problems++;
		}
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	static const char *const subs[] = {"frame", "config"};

	if (argc == 3 && strcmp(argv[1], "--check") == 0) {
		checking = true;
		out_dir = argv[2];
	} else if (argc == 2 && argv[1][0] != '-') {
		out_dir = argv[1];
	} else {
		fprintf(stderr, "usage: %s [--check] DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]) && !checking; i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/%s", out_dir, subs[i]);
		if (mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "Could not create %s: %s\n", out_dir, strerror(errno));
			return 1;
		}
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "Could not create %s: %s\n", dir, strerror(errno));
			return 1;
		}
	}
	hellos();
	leases();
	models();
	telemetry();
	admin();
	redeclares();
	odd_packets();
	configs();
	if (checking) {
		for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
			stale(subs[i]);
		if (problems)
			fprintf(stderr,
				"the corpus is not what gen_corpus writes: run `%s %s` "
				"(from the build directory) and commit the result\n",
				argv[0], "<source>/tests/fuzz/corpus");
		else
			printf("%u corpus files are current\n", nwritten);
	}
	for (unsigned i = 0; i < nwritten; i++)
		free(written[i]);
	return problems ? 1 : 0;
}
