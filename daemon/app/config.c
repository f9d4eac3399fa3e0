/* SPDX-License-Identifier: MIT */
/* config.c: rocmmemd's configuration file, read with libinih; printing what applies. */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options_sched.h"
#include "options_set.h"
#include "policy/access.h"
#include "size.h"

int config_default_path(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int n;

	if (geteuid() == 0)
		n = snprintf(buf, len, "%s", CONFIG_SYSTEM_PATH);
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/rocmmemd/rocmmemd.conf", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.config/rocmmemd/rocmmemd.conf", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Reading state: the line being parsed, and the first error found. */
struct reader {
	FILE *f;
	const char *path;
	unsigned line;	      /* of the line inih has just been given */
	bool long_line;	      /* that line did not fit: refused */
	unsigned error_line;  /* of the first error the handler found; 0: none */
	char error[512];      /* ... and what it was */
	struct options *file; /* what the file sets */
	/* Where each setting was given, per device (index BACKEND_MAX_DEVICES: all), 0: not. */
	unsigned seen[OPTION_COUNT][BACKEND_MAX_DEVICES + 1];
};

static void fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error_line)
		return; /* the first error is the one reported */
	r->error_line = r->line;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

/*
 * read_line feeds inih one line at a time, counting them so that the handler knows where it
 * is (the Debian build of inih does not pass line numbers). A line longer than inih's buffer
 * is refused rather than split into two.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct reader *r = stream;
	char buf[CONFIG_MAX_LINE + 2];
	size_t n;
	int c;

	if (!fgets(buf, sizeof(buf), r->f))
		return NULL;
	r->line++;
	n = strlen(buf);
	r->long_line = n == sizeof(buf) - 1 && buf[n - 1] != '\n';
	if (r->long_line) {
		while ((c = fgetc(r->f)) != EOF && c != '\n')
			;
		fail(r, "line longer than %u bytes", CONFIG_MAX_LINE);
		buf[0] = '\0'; /* inih sees an empty line */
		n = 0;
	}
	/* inih needs no newline: without it a line of CONFIG_MAX_LINE bytes fits its buffer. */
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n + 1 > (size_t)num) {
		fail(r, "line longer than %d bytes", num - 1);
		buf[0] = '\0';
	}
	memcpy(str, buf, strlen(buf) + 1);
	return str;
}

/* parse_section maps a section name: "device N" gives device N; others device -1. */
static const char *parse_section(const char *section, int *device)
{
	static const char *const plain[] = {"daemon", "access",	 "policy",
					    "limits", "metrics", "devices"};
	unsigned long n;
	char *end;

	*device = -1;
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (strcmp(section, plain[i]) == 0)
			return plain[i];
	if (strncmp(section, "device ", 7) != 0)
		return NULL;
	errno = 0;
	n = strtoul(section + 7, &end, 10);
	if (errno || end == section + 7 || *end || section[7] == '-' || section[7] == '+' ||
	    n >= BACKEND_MAX_DEVICES)
		return NULL;
	*device = (int)n;
	return "device";
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
	struct reader *r = user;
	const struct option_name *name;
	const char *kind;
	char why[256];
	unsigned *seen;
	int device;

	if (r->long_line)
		return 1; /* reported already */
	kind = parse_section(section, &device);
	if (!kind) {
		fail(r,
		     "[%s]: unknown section (daemon, access, policy, limits, metrics, devices, "
		     "device N for N below %u)",
		     section, BACKEND_MAX_DEVICES);
		return 0;
	}
	name = options_named(kind, key);
	if (!name) {
		fail(r, "[%s] %s: unknown key", section, key);
		return 0;
	}
	seen = &r->seen[name->id][device < 0 ? BACKEND_MAX_DEVICES : (unsigned)device];
	/* Each use of exclusive is a rule of its own; any other key says one thing. */
	if (*seen && name->id != OPTION_EXCLUSIVE) {
		fail(r, "[%s] %s: given twice (first on line %u)", section, key, *seen);
		return 0;
	}
	*seen = r->line;
	/*
	 * inih reads "key =;x" as ";x" but "key = ;x" as empty: such a value could not be written
	 * back (--check-config), and is most likely a comment put in the wrong place.
	 */
	if (value[0] == ';') {
		fail(r,
		     "[%s] %s: a value cannot start with ';' (a comment needs a line of its own)",
		     section, key);
		return 0;
	}
	if (options_set(r->file, name->id, device, value, why, sizeof(why)) < 0) {
		fail(r, "[%s] %s = %s: %s", section, key, value, why);
		return 0;
	}
	return 1;
}

int config_load(const char *path, struct options *file, char *why, size_t why_len)
{
	struct reader *r;
	int rc, err = 0;

	options_defaults(file);
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, why_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	r->f = fopen(path, "re");
	if (!r->f) {
		err = -errno;
		snprintf(why, why_len, "%s: %s", path, strerror(-err));
		free(r);
		return err;
	}
	r->path = path;
	r->file = file;
	rc = ini_parse_stream(read_line, r, on_key, r);
	if (rc == 0 && ferror(r->f)) {
		snprintf(why, why_len, "%s: read error", path);
		err = -EIO;
	} else if (rc < 0) {
		snprintf(why, why_len, "%s: %s", path, rc == -2 ? "out of memory" : "cannot read");
		err = rc == -2 ? -ENOMEM : -EIO;
	} else if (r->error_line && (rc == 0 || r->error_line <= (unsigned)rc)) {
		/* What the handler (or the line reader, which inih does not hear from) found. */
		snprintf(why, why_len, "%s:%u: %s", path, r->error_line, r->error);
		err = -EINVAL;
	} else if (rc > 0) {
		/* A line inih itself could not make sense of. */
		snprintf(why, why_len,
			 "%s:%d: syntax error (expected [section], key = value, or a "
			 "comment starting with ; or #)",
			 path, rc);
		err = -EINVAL;
	}
	fclose(r->f);
	free(r);
	if (err)
		options_free(file);
	return err;
}

/* ----------------------------------------------------------------------------------------- */
/* Printing */

/* size_text writes bytes exactly, with the largest suffix that divides them. */
static const char *size_text(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	unsigned u = 0;

	while (u < 4 && bytes && bytes % ((uint64_t)1 << (10 * (u + 1))) == 0)
		u++;
	if (u == 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else
		snprintf(buf, len, "%" PRIu64 "%c", bytes >> (10 * u), units[u - 1]);
	return buf;
}

static const char *seconds_text(uint64_t ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%" PRIu64, ms / 1000);
	else
		snprintf(buf, len, "%" PRIu64 ".%03" PRIu64, ms / 1000, ms % 1000);
	/* No trailing zeros after the point: "0.5", not "0.500". */
	for (size_t n = strlen(buf); strchr(buf, '.') && n > 0 && buf[n - 1] == '0'; n--)
		buf[n - 1] = '\0';
	return buf;
}

/*
 * line writes "key = value" with the value's source in a comment after it. What it writes must
 * load again, so no line is longer than CONFIG_MAX_LINE: a note that does not fit goes on a
 * comment line of its own before the setting, and a setting that fits only without the spaces
 * around '=' (a file's longest line written "key=value") is written without them.
 */
static void line(FILE *out, const char *key, const char *value, const char *note)
{
	size_t kv = strlen(key) + 3 + strlen(value);
	size_t pad = kv < 40 ? 40 - kv : 1;

	if (kv + pad + 2 + strlen(note) <= CONFIG_MAX_LINE) {
		fprintf(out, "%s = %s%*s; %s\n", key, value, (int)pad, "", note);
		return;
	}
	fprintf(out, "; %s: %s\n", key, note);
	if (kv <= CONFIG_MAX_LINE)
		fprintf(out, "%s = %s\n", key, value);
	else
		fprintf(out, "%s=%s\n", key, value);
}

static void setting(FILE *out, const struct options *eff, enum option_id id, const char *value)
{
	line(out, options_name(id)->key, value, options_source_name(eff->from[id]));
}

/* print_rules writes one "exclusive =" line per pair of classes that exclude each other. */
static void print_rules(FILE *out, const struct class_exclusion *x, const char *note)
{
	for (unsigned a = 0; a < MODEL_CLASSES; a++) {
		for (unsigned b = a + 1; b < MODEL_CLASSES; b++) {
			char pair[64];

			if (!class_exclusion_conflict(x, a, b))
				continue;
			snprintf(pair, sizeof(pair), "%s,%s", model_class_name(a),
				 model_class_name(b));
			line(out, "exclusive", pair, note);
		}
	}
}

static void print_policy(FILE *out, const struct size_policy *p)
{
	char v[SIZE_FORMAT_MAX];
	const char *note = options_source_name(p->from);

	if (p->has_budget)
		line(out, "budget", size_text(p->budget, v, sizeof(v)), note);
	if (p->has_headroom)
		line(out, "headroom", size_text(p->headroom, v, sizeof(v)),
		     p->has_budget ? "ignored: budget given in the same place" : note);
}

/*
 * print_access writes [access]: the socket's owner, group and mode as the daemon would give
 * them (settings_socket), who may connect and who administers. The socket's defaults depend on
 * the machine (who runs the daemon, whether the group rocmmem exists): said in comments.
 */
static void print_access(FILE *out, const struct options *eff)
{
	bool system = geteuid() == 0;
	char v[64];
	gid_t gid;

	fprintf(out, "\n[access]\n");
	if (eff->socket_user)
		setting(out, eff, OPTION_SOCKET_USER, eff->socket_user);
	else
		fprintf(out, "; socket_user: %s, the daemon's user (default)\n",
			ids_user_name(geteuid(), v, sizeof(v)));
	if (eff->socket_group)
		setting(out, eff, OPTION_SOCKET_GROUP, eff->socket_group);
	else if (!system)
		fprintf(out, "; socket_group: %s, the daemon's group (default)\n",
			ids_group_name(getegid(), v, sizeof(v)));
	else if (ids_group_id(ACCESS_DEFAULT_GROUP, &gid, v, sizeof(v)) == 0)
		fprintf(out, "; socket_group: " ACCESS_DEFAULT_GROUP " (default)\n");
	else
		fprintf(out,
			"; socket_group: %s, as the group " ACCESS_DEFAULT_GROUP
			" does not exist (default)\n",
			ids_group_name(getegid(), v, sizeof(v)));
	if (eff->set & ((uint64_t)1 << OPTION_SOCKET_MODE)) {
		snprintf(v, sizeof(v), "%04o", eff->socket_mode);
		setting(out, eff, OPTION_SOCKET_MODE, v);
	} else {
		fprintf(out, "; socket_mode: %s (default)\n", system ? "0660" : "0600");
	}
	if (eff->allowed_users)
		setting(out, eff, OPTION_ALLOWED_USERS, eff->allowed_users);
	if (eff->allowed_groups)
		setting(out, eff, OPTION_ALLOWED_GROUPS, eff->allowed_groups);
	if (!eff->allowed_users && !eff->allowed_groups)
		fprintf(out, "; allowed_users, allowed_groups: anyone who can open the socket "
			     "(default)\n");
	if (eff->admin_group)
		setting(out, eff, OPTION_ADMIN_GROUP, eff->admin_group);
	else
		fprintf(out, "; admin_group: none, only root administers (default)\n");
}

/* print_limits prints [limits]. */
static void print_limits(FILE *out, const struct options *eff)
{
	char v[64];

	fprintf(out, "\n[limits]\n");
	snprintf(v, sizeof(v), "%u", eff->max_clients);
	setting(out, eff, OPTION_MAX_CLIENTS, v);
	snprintf(v, sizeof(v), "%u", eff->max_pending);
	setting(out, eff, OPTION_MAX_PENDING, v);
	snprintf(v, sizeof(v), "%u", eff->max_leases);
	setting(out, eff, OPTION_MAX_LEASES, v);
	setting(out, eff, OPTION_MAX_QUEUED, size_text(eff->max_queued, v, sizeof(v)));
	snprintf(v, sizeof(v), "%u", eff->max_clients_per_uid);
	setting(out, eff, OPTION_MAX_CLIENTS_PER_UID, v);
	setting(out, eff, OPTION_MAX_BYTES_PER_UID,
		eff->max_bytes_per_uid ? size_text(eff->max_bytes_per_uid, v, sizeof(v))
				       : "unlimited");
	setting(out, eff, OPTION_MAX_MESSAGE, size_text(eff->max_message, v, sizeof(v)));
	setting(out, eff, OPTION_HANDSHAKE_TIMEOUT,
		seconds_text(eff->handshake_timeout_ms, v, sizeof(v)));
	snprintf(v, sizeof(v), "%u", eff->max_subscribers);
	setting(out, eff, OPTION_MAX_SUBSCRIBERS, v);
}

/* print_pool prints the chunk pool's settings ([devices]). */
static void print_pool(FILE *out, const struct options *eff)
{
	char v[64];

	setting(out, eff, OPTION_GPU_POOL,
		eff->gpu_pool == POOL_AUTO ? "auto"
		: eff->gpu_pool == 0	   ? "off"
					   : size_text(eff->gpu_pool, v, sizeof(v)));
	setting(out, eff, OPTION_GPU_POOL_IDLE, seconds_text(eff->gpu_pool_idle_ms, v, sizeof(v)));
	if (eff->gpu_pool_fds == POOL_AUTO)
		snprintf(v, sizeof(v), "auto");
	else
		snprintf(v, sizeof(v), "%" PRIu64, eff->gpu_pool_fds);
	setting(out, eff, OPTION_GPU_POOL_FDS, v);
}

void config_print(const struct options *eff, const char *socket_path, const char *path, FILE *out)
{
	char v[64];
	bool rules = false;

	fprintf(out, "; rocmmemd %s: the configuration as it applies\n", "--check-config");
	if (path)
		fprintf(out, "; read from %s; each value's source in its comment\n", path);
	else
		fprintf(out, "; no configuration file found: flags and defaults\n");
	fprintf(out, "\n[daemon]\n");
	setting(out, eff, OPTION_SOCKET, socket_path ? socket_path : "(none)");
	setting(out, eff, OPTION_BACKEND, eff->backend ? eff->backend : "auto");
	setting(out, eff, OPTION_SHARING, eff->sharing ? eff->sharing : "auto");
	setting(out, eff, OPTION_LOG_LEVEL, log_level_name(eff->log_level));
	setting(out, eff, OPTION_SHUTDOWN_TIMEOUT,
		seconds_text(eff->shutdown_timeout_ms, v, sizeof(v)));
	setting(out, eff, OPTION_RESTART_GRACE, seconds_text(eff->restart_grace_ms, v, sizeof(v)));

	print_access(out, eff);

	fprintf(out, "\n[policy]\n");
	{
		char t[256];

		for (unsigned id = OPTION_MAX_HOLD; id <= OPTION_BACKFILL_WAIT; id++)
			setting(out, eff, (enum option_id)id,
				options_sched_text(eff, (enum option_id)id, t, sizeof(t)));
		setting(out, eff, OPTION_EVICT_DEADLINE,
			options_sched_text(eff, OPTION_EVICT_DEADLINE, t, sizeof(t)));
	}
	if (class_exclusion_any(&eff->exclusive_all)) {
		print_rules(out, &eff->exclusive_all,
			    options_source_name(eff->from[OPTION_EXCLUSIVE]));
		rules = true;
	}
	if (!rules)
		fprintf(out, "; exclusive: none (%s)\n",
			options_source_name(eff->from[OPTION_EXCLUSIVE]));

	print_limits(out, eff);

	fprintf(out, "\n[metrics]\n");
	if (eff->metrics_textfile) {
		setting(out, eff, OPTION_METRICS_TEXTFILE, eff->metrics_textfile);
		setting(out, eff, OPTION_METRICS_INTERVAL,
			seconds_text(eff->metrics_interval_ms, v, sizeof(v)));
	} else {
		fprintf(out, "; textfile: none (%s)\n",
			options_source_name(eff->from[OPTION_METRICS_TEXTFILE]));
	}

	fprintf(out, "\n[devices]\n");
	if (eff->devices.has_budget || eff->devices.has_headroom)
		print_policy(out, &eff->devices);
	else
		fprintf(out, "; budget: each device's total less its default headroom "
			     "(default)\n");
	print_pool(out, eff);
	for (unsigned d = 0; d < BACKEND_MAX_DEVICES; d++) {
		const struct size_policy *p = &eff->device[d];
		bool own = p->device_specific && (p->has_budget || p->has_headroom);
		bool own_rules = class_exclusion_any(&eff->exclusive[d]);

		if (!own && !own_rules)
			continue;
		fprintf(out, "\n[device %u]\n", d);
		if (own)
			print_policy(out, p);
		if (own_rules)
			print_rules(out, &eff->exclusive[d],
				    options_source_name(eff->from[OPTION_EXCLUSIVE]));
	}
}
