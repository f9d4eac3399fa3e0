/* SPDX-License-Identifier: MIT */
/* status.c: `rocmmemctl status`: the daemon's state as a table or as the stable JSON contract. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "size.h"

/* The version of the JSON below; bump only when a field changes meaning or goes away. */
#define STATUS_SCHEMA_VERSION 1

/* errno_name names the errors a refusal carries ("ENOMEM"); others by number. */
static const char *errno_name(int err, char *buf, size_t len)
{
	static const struct {
		int err;
		const char *name;
	} names[] = {
	    {ENOMEM, "ENOMEM"},	  {ETIMEDOUT, "ETIMEDOUT"}, {E2BIG, "E2BIG"},
	    {EDEADLK, "EDEADLK"}, {ENODEV, "ENODEV"},	    {EIO, "EIO"},
	    {EAGAIN, "EAGAIN"},	  {EBUSY, "EBUSY"},	    {ECANCELED, "ECANCELED"},
	    {EINVAL, "EINVAL"},	  {EPERM, "EPERM"},	    {ENOSPC, "ENOSPC"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].err == -err)
			return names[i].name;
	snprintf(buf, len, "errno %d", -err);
	return buf;
}

static json_object *denials_json(const rocmmem_status *st)
{
	json_object *a = json_object_new_array();
	char name[32];

	for (size_t i = 0; i < rocmmem_status_denial_count(st); i++) {
		const struct rocmmem_denial_info *v = rocmmem_status_denial(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "timestamp_ms", v->timestamp_ms);
		ctl_json_i64(o, "pid", v->pid);
		ctl_json_str(o, "client_name", v->client_name);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_u64(o, "model_id", v->model_id);
		ctl_json_str(o, "model_name", v->model_name);
		ctl_json_str(o, "error", errno_name(v->error, name, sizeof(name)));
		ctl_json_i64(o, "errno", -(int64_t)v->error);
		ctl_json_str(o, "reason", v->reason);
		json_object_array_add(a, o);
	}
	return a;
}

/* limits_json: {"NAME": {"value": N, "unlimited": false, "hits": N}, ...} in the daemon's order. */
static json_object *limits_json(const rocmmem_status *st)
{
	json_object *o = json_object_new_object();

	for (size_t i = 0; i < rocmmem_status_limit_count(st); i++) {
		const struct rocmmem_limit_info *v = rocmmem_status_limit(st, i);
		json_object *l = json_object_new_object();

		ctl_json_u64(l, "value", v->value);
		ctl_json_bool(l, "unlimited", v->unlimited);
		ctl_json_u64(l, "hits", v->hits);
		json_object_object_add(o, v->name, l);
	}
	return o;
}

static json_object *access_json(const rocmmem_status *st)
{
	const struct rocmmem_access_info *v = rocmmem_status_access(st);
	json_object *o = json_object_new_object();

	ctl_json_u64(o, "peers_refused", v->peers_refused);
	ctl_json_u64(o, "requests_refused", v->requests_refused);
	return o;
}

/* awaiting_json: what the previous daemon's clients have not re-declared yet, per process. */
static json_object *awaiting_json(const rocmmem_status *st)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < rocmmem_status_awaiting_count(st); i++) {
		const struct rocmmem_awaiting_info *v = rocmmem_status_awaiting(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "device", v->device);
		ctl_json_i64(o, "pid", v->pid);
		ctl_json_u64(o, "uid", v->uid);
		ctl_json_u64(o, "leases", v->leases);
		ctl_json_u64(o, "lease_bytes", v->lease_bytes);
		ctl_json_u64(o, "models", v->models);
		ctl_json_u64(o, "reserved_bytes", v->reserved_bytes);
		ctl_json_u64(o, "bytes", v->lease_bytes + v->reserved_bytes);
		ctl_json_u64(o, "grace_left_ms", v->grace_left_ms);
		json_object_array_add(a, o);
	}
	return a;
}

/* print_awaiting lists, after a restart, what is accounted for processes still to re-declare. */
static void print_awaiting(const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];

	if (!rocmmem_status_awaiting_count(st))
		return;
	printf("\nAWAITING RE-DECLARATION (held under the previous daemon, counted as leased)\n"
	       "%-8s %-6s %-6s %7s %10s %7s %10s  %s\n",
	       "PID", "UID", "DEVICE", "LEASES", "LEASED", "MODELS", "RESERVED", "FORGOTTEN IN");
	for (size_t i = 0; i < rocmmem_status_awaiting_count(st); i++) {
		const struct rocmmem_awaiting_info *v = rocmmem_status_awaiting(st, i);

		printf("%-8d %-6u %-6u %7u %10s %7u %10s  %.1f s\n", (int)v->pid, v->uid, v->device,
		       v->leases, size_format(v->lease_bytes, a, sizeof(a)), v->models,
		       size_format(v->reserved_bytes, b, sizeof(b)),
		       (double)v->grace_left_ms / 1000.0);
	}
}

static json_object *status_json(const rocmmem_status *st)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	json_object *root = json_object_new_object(), *daemon = json_object_new_object();
	json_object *devices = json_object_new_array(), *clients = json_object_new_array();
	json_object *leases = json_object_new_array(), *models = json_object_new_array();
	json_object *queue = json_object_new_array();

	ctl_json_i64(root, "schema_version", STATUS_SCHEMA_VERSION);
	ctl_json_str(daemon, "version", d->version);
	ctl_json_i64(daemon, "pid", d->pid);
	ctl_json_u64(daemon, "uptime_s", d->uptime_s);
	ctl_json_str(daemon, "backend", d->backend);
	ctl_json_u64(daemon, "protocol_version", d->protocol_version);
	json_object_object_add(root, "daemon", daemon);

	for (size_t i = 0; i < rocmmem_status_device_count(st); i++)
		json_object_array_add(devices, ctl_device_json(st, i));
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		json_object_array_add(clients, ctl_client_json(rocmmem_status_client(st, i)));
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "id", v->id);
		ctl_json_i64(o, "owner_pid", v->owner_pid);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_str(o, "tag", v->tag);
		ctl_json_u64(o, "age_ms", v->age_ms);
		ctl_json_u64(o, "model_id", v->model_id);
		json_object_array_add(leases, o);
	}
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		json_object_array_add(models, ctl_model_json(rocmmem_status_model(st, i)));
	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);
		json_object *o = json_object_new_object();

		ctl_json_i64(o, "owner_pid", v->owner_pid);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_u64(o, "waited_ms", v->waited_ms);
		ctl_json_i64(o, "timeout_ms", v->timeout_ms);
		ctl_json_str(o, "tag", v->tag);
		ctl_json_u64(o, "model_id", v->model_id);
		json_object_array_add(queue, o);
	}
	json_object_object_add(root, "devices", devices);
	json_object_object_add(root, "clients", clients);
	json_object_object_add(root, "leases", leases);
	json_object_object_add(root, "models", models);
	json_object_object_add(root, "queue", queue);
	json_object_object_add(root, "denials", denials_json(st));
	json_object_object_add(root, "counters",
			       ctl_counters_json(rocmmem_status_counters(st), false));
	json_object_object_add(root, "limits", limits_json(st));
	json_object_object_add(root, "access", access_json(st));
	json_object_object_add(root, "awaiting_redeclare", awaiting_json(st));
	return root;
}

const char *ctl_duration(uint64_t s, char *buf, size_t len)
{
	if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	return buf;
}

/* print_device_details adds what is known beyond the budget: bus, sharing, runtime, sensors. */
static void print_device_details(const rocmmem_status *st, size_t index,
				 const struct rocmmem_device_info *v)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX];

	if (v->pci_bus_id[0])
		printf("       %s%s, shared by %s\n", v->pci_bus_id,
		       v->integrated ? ", integrated (APU)" : "", v->sharing);
	if (strcmp(v->state, "ok") != 0)
		printf("       UNUSABLE: %s\n", v->state);
	if (v->reserved_bytes)
		printf("       %s reserved for models (not leased, not free)\n",
		       size_format(v->reserved_bytes, a, sizeof(a)));
	if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME)
		printf("       runtime: %s free of %s; %s used outside rocmmemd\n",
		       size_format(v->runtime_free_bytes, a, sizeof(a)),
		       size_format(v->runtime_total_bytes, b, sizeof(b)),
		       size_format(v->external_bytes, c, sizeof(c)));
	if (v->telemetry_source[0]) {
		printf("       %s:", v->telemetry_source);
		if (v->valid & ROCMMEM_DEVICE_HAS_VRAM)
			printf(" vram %s/%s", size_format(v->vram_used_bytes, a, sizeof(a)),
			       size_format(v->vram_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_GTT)
			printf(" gtt %s/%s", size_format(v->gtt_used_bytes, a, sizeof(a)),
			       size_format(v->gtt_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
			printf(" %.1f C", v->temperature_mc / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
			printf(" %.1f W", v->power_mw / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
			printf(" busy %u%%", v->busy_percent);
		printf("\n");
	}
	for (size_t k = 0; k < rocmmem_status_process_count(st, index); k++) {
		const struct rocmmem_process_info *p = rocmmem_status_process(st, index, k);

		printf("       pid %d holds %s%s\n", (int)p->pid,
		       size_format(p->vram_bytes, a, sizeof(a)),
		       p->client ? " (a client)" : " outside rocmmemd");
	}
}

/* waiter_model names the model a request waits for: "flux (3)", "model 3" if not listed, "-". */
static const char *waiter_model(const rocmmem_status *st, const struct rocmmem_waiter_info *w,
				char *buf, size_t len)
{
	snprintf(buf, len, "-");
	if (!w->model_id)
		return buf;
	snprintf(buf, len, "model %llu", (unsigned long long)w->model_id);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->id == w->model_id)
			snprintf(buf, len, "%s (%llu)", m->name, (unsigned long long)m->id);
	}
	return buf;
}

static void print_counters(const struct rocmmem_counters *k)
{
	char a[SIZE_FORMAT_MAX];

	printf("grants %llu, denials %llu, timeouts %llu, releases %llu, reclaimed %llu, "
	       "failures %llu, evictions %llu, revocations %llu, trims %llu (%s)\n\n",
	       (unsigned long long)k->grants, (unsigned long long)k->denials,
	       (unsigned long long)k->timeouts, (unsigned long long)k->releases,
	       (unsigned long long)k->reclaimed, (unsigned long long)k->failures,
	       (unsigned long long)k->evictions, (unsigned long long)k->revocations,
	       (unsigned long long)k->trims, size_format(k->bytes_trimmed, a, sizeof(a)));
}

/*
 * print_limits says which limits clients ran into, and what the access policy refused: a line
 * each, only when something was.
 */
static void print_limits(const rocmmem_status *st)
{
	const struct rocmmem_access_info *acc = rocmmem_status_access(st);
	bool any = false;

	for (size_t i = 0; i < rocmmem_status_limit_count(st); i++) {
		const struct rocmmem_limit_info *v = rocmmem_status_limit(st, i);
		char a[SIZE_FORMAT_MAX];

		if (!v->hits)
			continue;
		if (!any)
			printf("limits hit:");
		if (v->unlimited)
			snprintf(a, sizeof(a), "unlimited");
		else if (strcmp(v->name, "queued") == 0 || strcmp(v->name, "message_size") == 0 ||
			 strcmp(v->name, "bytes_per_uid") == 0)
			size_format(v->value, a, sizeof(a));
		else if (strcmp(v->name, "handshake_timeout") == 0)
			snprintf(a, sizeof(a), "%.3g s", (double)v->value / 1000.0);
		else
			snprintf(a, sizeof(a), "%llu", (unsigned long long)v->value);
		printf("%s %s %llu time(s) (limit %s)", any ? "," : "", v->name,
		       (unsigned long long)v->hits, a);
		any = true;
	}
	if (any)
		printf("\n");
	if (acc->peers_refused || acc->requests_refused)
		printf("access refused: %llu connection(s) of users not allowed, %llu request(s) "
		       "not permitted\n",
		       (unsigned long long)acc->peers_refused,
		       (unsigned long long)acc->requests_refused);
	if (any || acc->peers_refused || acc->requests_refused)
		printf("\n");
}

/* terminal_width is stdout's width in columns when it is a terminal, else 0 (no limit). */
static size_t terminal_width(void)
{
	struct winsize ws;

	if (!isatty(STDOUT_FILENO) || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0)
		return 0;
	return ws.ws_col;
}

/* print_cut prints text in at most width columns (0: all of it), cut at a UTF-8 boundary. */
static void print_cut(const char *text, size_t width)
{
	size_t n = strlen(text), chars = 0, i;

	if (width == 0) {
		puts(text);
		return;
	}
	/* Columns counted as characters: what the names may hold is validated UTF-8. */
	for (i = 0; i < n; i++)
		if (((unsigned char)text[i] & 0xC0) != 0x80)
			chars++;
	if (chars <= width) {
		puts(text);
		return;
	}
	chars = 0;
	for (i = 0; i < n; i++) {
		if (((unsigned char)text[i] & 0xC0) != 0x80 &&
		    ++chars > (width > 3 ? width - 3 : 0))
			break;
	}
	printf("%.*s...\n", (int)i, text);
}

/* print_denials lists the latest refusals, oldest first: when, who, what, and why. */
static void print_denials(const rocmmem_status *st)
{
	size_t width = terminal_width();
	struct timespec ts;
	uint64_t now_ms;

	if (!rocmmem_status_denial_count(st))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	printf("\nRECENT DENIALS\n%-9s %-8s %-16s %-6s %10s %-9s  %s\n", "AGO", "PID", "CLIENT",
	       "DEVICE", "SIZE", "ERROR", "REASON");
	for (size_t i = 0; i < rocmmem_status_denial_count(st); i++) {
		const struct rocmmem_denial_info *v = rocmmem_status_denial(st, i);
		char ago[32], sz[SIZE_FORMAT_MAX], name[32];
		uint64_t age = now_ms > v->timestamp_ms ? now_ms - v->timestamp_ms : 0;
		int used = printf("%-9s %-8d %-16.16s %-6u %10s %-9s  ",
				  ctl_duration(age / 1000, ago, sizeof(ago)), (int)v->pid,
				  v->client_name[0] ? v->client_name : "-", v->device,
				  size_format(v->bytes, sz, sizeof(sz)),
				  errno_name(v->error, name, sizeof(name)));

		print_cut(v->reason, width == 0			? 0
				     : width > (size_t)used + 8 ? width - (size_t)used
								: 8);
	}
}

static void print_table(const rocmmem_status *st)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX], e[SIZE_FORMAT_MAX];
	char t[32];

	printf("rocmmemd %s, pid %d, up %s, backend %s\n", d->version, (int)d->pid,
	       ctl_duration(d->uptime_s, t, sizeof(t)), d->backend);
	print_counters(rocmmem_status_counters(st));
	print_limits(st);
	printf("%-6s %-20s %10s %10s %10s %10s %7s %7s\n", "DEVICE", "NAME", "TOTAL", "BUDGET",
	       "LEASED", "FREE", "LEASES", "WAITING");
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *v = rocmmem_status_device(st, i);

		printf("%-6u %-20.20s %10s %10s %10s %10s %7llu %7u\n", v->index, v->name,
		       size_format(v->total_bytes, a, sizeof(a)),
		       size_format(v->budget_bytes, b, sizeof(b)),
		       size_format(v->leased_bytes, c, sizeof(c)),
		       size_format(v->free_bytes, e, sizeof(e)), (unsigned long long)v->leases,
		       v->waiters);
		print_device_details(st, i, v);
	}
	printf("\n%-8s %-6s %-24s %7s %10s %9s\n", "PID", "UID", "CLIENT", "LEASES", "LEASED",
	       "CONNECTED");
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);

		printf("%-8d %-6u %-24.24s %7u %10s %9s\n", (int)v->pid, v->uid,
		       v->name[0] ? v->name : "-", v->leases,
		       size_format(v->leased_bytes, a, sizeof(a)),
		       ctl_duration(v->connected_s, t, sizeof(t)));
	}
	if (rocmmem_status_lease_count(st)) {
		printf("\n%-8s %-8s %-6s %10s %9s  %s\n", "LEASE", "PID", "DEVICE", "SIZE", "AGE",
		       "TAG");
		for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
			const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);

			printf("%-8llu %-8d %-6u %10s %9s  %s\n", (unsigned long long)v->id,
			       (int)v->owner_pid, v->device, size_format(v->bytes, a, sizeof(a)),
			       ctl_duration(v->age_ms / 1000, t, sizeof(t)), v->tag);
		}
	}
	print_awaiting(st);
	if (rocmmem_status_model_count(st)) {
		printf("\n");
		ctl_models_table(st, -1);
	}
	if (rocmmem_status_waiter_count(st)) {
		printf("\n%-8s %-6s %10s %9s %9s  %-24s %s\n", "WAITING", "DEVICE", "SIZE",
		       "WAITED", "TIMEOUT", "MODEL", "TAG");
		for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
			const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);
			char to[32], model[96];

			if (v->timeout_ms < 0)
				snprintf(to, sizeof(to), "none");
			else
				ctl_duration((uint64_t)v->timeout_ms / 1000, to, sizeof(to));
			printf("%-8d %-6u %10s %9s %9s  %-24s %s\n", (int)v->owner_pid, v->device,
			       size_format(v->bytes, a, sizeof(a)),
			       ctl_duration(v->waited_ms / 1000, t, sizeof(t)), to,
			       waiter_model(st, v, model, sizeof(model)), v->tag);
		}
	}
	print_denials(st);
}

int cmd_status(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = *global;
	rocmmem_client *client;
	rocmmem_status *st;
	int c, rc, err;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":js:", longopts, NULL)) != -1) {
		rc = ctl_common_option("status", c, &ctl, argv);
		if (rc)
			return rc;
	}
	if (optind < argc)
		return ctl_usage("status", "unexpected argument '%s'", argv[optind]);
	rc = ctl_connect(&ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_status_get(client, &st);
	if (err) {
		rc = ctl_fail("status", err);
		rocmmem_disconnect(client);
		return rc;
	}
	if (ctl.json) {
		json_object *root = status_json(st);

		puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(root);
	} else {
		print_table(st);
	}
	rocmmem_status_free(st);
	rocmmem_disconnect(client);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}
