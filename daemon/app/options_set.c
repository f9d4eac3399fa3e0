/* SPDX-License-Identifier: MIT */
/* options_set.c: one setting's value, checked and stored, as a flag or the file gives it. */
#include "options_set.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "metrics_file.h"
#include "options_sched.h"
#include "platform/backend/registry.h"
#include "platform/ids.h"
#include "size.h"
#include "text.h"
#include "wire.h"

/* replace_string stores a copy of value in *slot. */
static int replace_string(char **slot, const char *value, char *why, size_t len)
{
	char *copy = strdup(value);

	if (!copy)
		return text_why(why, len, -EINVAL, "out of memory");
	free(*slot);
	*slot = copy;
	return 0;
}

static int parse_seconds(const char *value, uint64_t min_ms, uint64_t max_ms, uint64_t *out,
			 char *why, size_t len)
{
	int64_t ms;

	if (duration_parse(value, &ms) < 0 || ms < 0 || (uint64_t)ms < min_ms ||
	    (uint64_t)ms > max_ms) {
		if (min_ms == 0)
			return text_why(why, len, -EINVAL, "seconds, from 0 to %" PRIu64,
					max_ms / 1000);
		if (min_ms < 1000)
			return text_why(why, len, -EINVAL, "seconds, more than 0, at most %" PRIu64,
					max_ms / 1000);
		return text_why(why, len, -EINVAL, "seconds, from %" PRIu64 " to %" PRIu64,
				min_ms / 1000, max_ms / 1000);
	}
	*out = (uint64_t)ms;
	return 0;
}

static int parse_count(const char *value, unsigned min, unsigned max, unsigned *out, char *why,
		       size_t len)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || value[0] == '+' || v < min ||
	    v > max)
		return text_why(why, len, -EINVAL, "a whole number from %u to %u", min, max);
	*out = (unsigned)v;
	return 0;
}

static int parse_size_value(const char *value, uint64_t *out, char *why, size_t len)
{
	int rc = size_parse(value, out);

	if (rc == -ERANGE)
		return text_why(why, len, -EINVAL, "too large");
	if (rc)
		return text_why(why, len, -EINVAL,
				"expected bytes with an optional K, M, G or T suffix, e.g. 512M");
	return 0;
}

/* parse_pool reads gpu_pool: a size, "auto" (POOL_AUTO) or "off" (0). */
static int parse_pool(const char *value, uint64_t *out, char *why, size_t len)
{
	int rc;

	if (strcmp(value, "auto") == 0 || strcmp(value, "off") == 0) {
		*out = value[0] == 'a' ? POOL_AUTO : 0;
		return 0;
	}
	rc = parse_size_value(value, out, why, len);
	if (rc == 0 && *out == POOL_AUTO)
		rc = text_why(why, len, -EINVAL, "too large");
	return rc;
}

/*
 * device_prefix splits "N:rest": the device number goes to *device, *rest after the colon.
 * Without a colon *device stays as it was. Returns 0 or -EINVAL.
 */
static int device_prefix(const char *value, int *device, const char **rest, char *why, size_t len)
{
	const char *colon = strchr(value, ':');
	unsigned long dev;
	char *end;

	*rest = value;
	if (!colon)
		return 0;
	errno = 0;
	dev = strtoul(value, &end, 10);
	if (errno || end == value || end != colon || value[0] == '-' || value[0] == '+' ||
	    dev >= BACKEND_MAX_DEVICES)
		return text_why(why, len, -EINVAL,
				"a device prefix is a device number below %u and a colon",
				BACKEND_MAX_DEVICES);
	if (*device >= 0)
		return text_why(why, len, -EINVAL,
				"no device prefix here: the section names the device");
	*device = (int)dev;
	*rest = colon + 1;
	return 0;
}

/* parse_classes reads "class,class...": at least two different known classes. */
static int parse_classes(const char *text, unsigned *mask, char *why, size_t len)
{
	char buf[256], *save = NULL, *tok;
	unsigned count = 0;

	*mask = 0;
	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		return text_why(why, len, -EINVAL, "too long");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned cls;

		/* Spaces around a class are fine in a file: "transformer, vae". */
		while (*tok == ' ')
			tok++;
		for (size_t n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		if (model_class_parse(tok, &cls) < 0)
			return text_why(
			    why, len, -EINVAL,
			    "unknown class '%s' (other, transformer, vae, text_encoder, "
			    "image_encoder)",
			    tok);
		if (!(*mask & (1u << cls)))
			count++;
		*mask |= 1u << cls;
	}
	if (count < 2)
		return text_why(why, len, -EINVAL,
				"expected [DEVICE:]CLASS,CLASS..., at least two classes, e.g. "
				"transformer,vae");
	return 0;
}

/*
 * check_textfile accepts a metrics path: node_exporter's textfile collector reads only files
 * whose names end in .prom, so any other name would be written for nobody.
 */
static int check_textfile(const char *path, char *why, size_t len)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n <= 5 || strcmp(base + n - 5, ".prom") != 0)
		return text_why(why, len, -EINVAL,
				"a file name ending in .prom: node_exporter's textfile collector "
				"reads only those");
	return 0;
}

/* parse_mode reads a socket's permission bits: octal, 3 or 4 digits, at most 0777. */
static int parse_mode(const char *value, unsigned *out, char *why, size_t len)
{
	size_t n = strlen(value);
	unsigned long v;
	char *end;

	if (n < 3 || n > 4 || strspn(value, "01234567") != n)
		return text_why(why, len, -EINVAL,
				"an octal mode of 3 or 4 digits 0 to 7, e.g. 0660");
	v = strtoul(value, &end, 8);
	if (v > 0777)
		return text_why(why, len, -EINVAL,
				"permission bits only (at most 0777): no setuid, setgid "
				"or sticky bit on a socket");
	*out = (unsigned)v;
	return 0;
}

static struct size_policy *policy(struct options *o, int device)
{
	return device < 0 ? &o->devices : &o->device[device];
}

/* A setting the function below does not handle: the next one does. */
#define NOT_MINE 1

/* set_daemon sets what the daemon's process is: its socket, backend, log, metrics file. */
static int set_daemon(struct options *o, enum option_id id, const char *value, char *why,
		      size_t len)
{
	switch (id) {
	case OPTION_SOCKET:
		if (!value[0])
			return text_why(why, len, -EINVAL, "needs a non-empty path");
		if (strlen(value) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return text_why(why, len, -EINVAL,
					"too long for a socket path (at most %zu bytes)",
					sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		return replace_string(&o->socket_path, value, why, len);
	case OPTION_BACKEND:
		if (!backend_known(value))
			return text_why(why, len, -EINVAL, "unknown backend (choose from %s)",
					backend_names());
		return replace_string(&o->backend, value, why, len);
	case OPTION_SHARING:
		if (strcmp(value, "auto") && strcmp(value, "vmm") && strcmp(value, "dmabuf") &&
		    strcmp(value, "ipc"))
			return text_why(why, len, -EINVAL,
					"unknown sharing method (auto, vmm, dmabuf or ipc)");
		return replace_string(&o->sharing, value, why, len);
	case OPTION_LOG_LEVEL:
		if (log_level_parse(value, &o->log_level))
			return text_why(why, len, -EINVAL,
					"a log level: error, warn, info or debug");
		return 0;
	case OPTION_SHUTDOWN_TIMEOUT:
		return parse_seconds(value, 0, 600000, &o->shutdown_timeout_ms, why, len);
	case OPTION_RESTART_GRACE:
		return parse_seconds(value, 0, 3600000, &o->restart_grace_ms, why, len);
	case OPTION_METRICS_TEXTFILE: {
		int rc = check_textfile(value, why, len);

		return rc ? rc : replace_string(&o->metrics_textfile, value, why, len);
	}
	case OPTION_METRICS_INTERVAL:
		return parse_seconds(value, METRICS_INTERVAL_MIN_MS, METRICS_INTERVAL_MAX_MS,
				     &o->metrics_interval_ms, why, len);
	case OPTION_GPU_POOL:
		return parse_pool(value, &o->gpu_pool, why, len);
	case OPTION_GPU_POOL_IDLE:
		return parse_seconds(value, 0, 86400000, &o->gpu_pool_idle_ms, why, len);
	case OPTION_GPU_POOL_FDS: {
		unsigned n;
		int rc;

		if (strcmp(value, "auto") == 0) {
			o->gpu_pool_fds = POOL_AUTO;
			return 0;
		}
		rc = parse_count(value, 0, 1u << 24, &n, why, len);
		if (rc == 0)
			o->gpu_pool_fds = n;
		return rc;
	}
	default:
		return NOT_MINE;
	}
}

/* set_limit sets one of [limits]. */
static int set_limit(struct options *o, enum option_id id, const char *value, char *why, size_t len)
{
	uint64_t size;
	int rc;

	switch (id) {
	case OPTION_MAX_CLIENTS:
		return parse_count(value, 1, 1u << 20, &o->max_clients, why, len);
	case OPTION_MAX_PENDING:
		return parse_count(value, 1, 1u << 16, &o->max_pending, why, len);
	case OPTION_MAX_LEASES:
		return parse_count(value, 1, 1u << 24, &o->max_leases, why, len);
	case OPTION_MAX_QUEUED:
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && (size < ((uint64_t)64 << 10) || size > ((uint64_t)1 << 30)))
			rc = text_why(why, len, -EINVAL, "from 64K to 1G");
		if (rc == 0)
			o->max_queued = size;
		return rc;
	case OPTION_MAX_CLIENTS_PER_UID:
		return parse_count(value, 1, 1u << 20, &o->max_clients_per_uid, why, len);
	case OPTION_MAX_BYTES_PER_UID:
		if (strcmp(value, "unlimited") == 0) {
			o->max_bytes_per_uid = 0;
			return 0;
		}
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && size == 0)
			rc = text_why(why, len, -EINVAL, "more than 0 bytes, or unlimited");
		if (rc == 0)
			o->max_bytes_per_uid = size;
		return rc;
	case OPTION_MAX_MESSAGE:
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && (size < OPTIONS_MIN_MESSAGE || size > WIRE_MAX_FRAME))
			rc = text_why(why, len, -EINVAL,
				      "from 1K to 64K (the protocol's largest packet)");
		if (rc == 0)
			o->max_message = (uint32_t)size;
		return rc;
	case OPTION_HANDSHAKE_TIMEOUT:
		return parse_seconds(value, 1, 3600000, &o->handshake_timeout_ms, why, len);
	case OPTION_MAX_SUBSCRIBERS:
		return parse_count(value, 1, 1u << 16, &o->max_subscribers, why, len);
	default:
		return NOT_MINE;
	}
}

/* set_access sets one of [access]: the socket's owner and mode, who may connect, who is admin. */
static int set_access(struct options *o, enum option_id id, const char *value, char *why,
		      size_t len)
{
	int rc;

	switch (id) {
	case OPTION_SOCKET_USER:
		rc = ids_user_id(value, &o->socket_uid, why, len);
		return rc ? rc : replace_string(&o->socket_user, value, why, len);
	case OPTION_SOCKET_GROUP:
		rc = ids_group_id(value, &o->socket_gid, why, len);
		return rc ? rc : replace_string(&o->socket_group, value, why, len);
	case OPTION_SOCKET_MODE:
		return parse_mode(value, &o->socket_mode, why, len);
	case OPTION_ALLOWED_USERS:
		rc = ids_parse_users(value, &o->allowed_uids, why, len);
		return rc ? rc : replace_string(&o->allowed_users, value, why, len);
	case OPTION_ALLOWED_GROUPS:
		rc = ids_parse_groups(value, &o->allowed_gids, why, len);
		return rc ? rc : replace_string(&o->allowed_groups, value, why, len);
	case OPTION_ADMIN_GROUP:
		rc = ids_group_id(value, &o->admin_gid, why, len);
		return rc ? rc : replace_string(&o->admin_group, value, why, len);
	default:
		return NOT_MINE;
	}
}

/* set_device sets what may name a device: --exclusive, --budget, --headroom. */
static int set_device(struct options *o, enum option_id id, int device, const char *value,
		      char *why, size_t len)
{
	const char *rest = value;
	uint64_t size;
	unsigned mask;
	int rc;

	if (id != OPTION_EXCLUSIVE && id != OPTION_BUDGET && id != OPTION_HEADROOM)
		return NOT_MINE;
	rc = device_prefix(value, &device, &rest, why, len);
	if (rc)
		return rc;
	if (id == OPTION_EXCLUSIVE) {
		rc = parse_classes(rest, &mask, why, len);
		if (rc == 0)
			class_exclusion_add(device < 0 ? &o->exclusive_all : &o->exclusive[device],
					    mask);
		return rc;
	}
	rc = parse_size_value(rest, &size, why, len);
	if (rc == 0 && id == OPTION_BUDGET && size == 0)
		rc = text_why(why, len, -EINVAL, "must be larger than 0");
	if (rc == 0) {
		struct size_policy *p = policy(o, device);

		if (id == OPTION_BUDGET) {
			p->has_budget = true;
			p->budget = size;
		} else {
			p->has_headroom = true;
			p->headroom = size;
		}
	}
	return rc;
}

int options_set(struct options *o, enum option_id id, int device, const char *value, char *why,
		size_t len)
{
	int rc;

	if (!value)
		return text_why(why, len, -EINVAL, "needs a value");
	rc = options_set_sched(o, id, value, why, len);
	if (rc == NOT_MINE)
		rc = set_daemon(o, id, value, why, len);
	if (rc == NOT_MINE)
		rc = set_limit(o, id, value, why, len);
	if (rc == NOT_MINE)
		rc = set_access(o, id, value, why, len);
	if (rc == NOT_MINE)
		rc = set_device(o, id, device, value, why, len);
	if (rc == NOT_MINE)
		return text_why(why, len, -EINVAL, "unknown setting");
	if (rc == 0)
		o->set |= (uint64_t)1 << id;
	return rc;
}
