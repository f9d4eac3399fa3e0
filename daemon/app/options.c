/* SPDX-License-Identifier: MIT */
/* options.c: rocmmemd's settings: names, value checks, the command line, and merging sources. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "args.h"
#include "platform/backend/registry.h"
#include "metrics_file.h"
#include "state/model.h"
#include "size.h"
#include "text.h"
#include "sockpath.h"
#include "version.h"
#include "wire.h"

/* Long options without a short form start here. */
#define LONG_ONLY 256

static const struct option_name names[OPTION_COUNT] = {
    [OPTION_SOCKET] = {OPTION_SOCKET, "--socket", "daemon", "socket", false},
    [OPTION_BACKEND] = {OPTION_BACKEND, "--backend", "daemon", "backend", false},
    [OPTION_SHARING] = {OPTION_SHARING, "--sharing", "daemon", "sharing", false},
    [OPTION_LOG_LEVEL] = {OPTION_LOG_LEVEL, "--log-level", "daemon", "log_level", true},
    [OPTION_SHUTDOWN_TIMEOUT] = {OPTION_SHUTDOWN_TIMEOUT, "--shutdown-timeout", "daemon",
				 "shutdown_timeout", true},
    [OPTION_EVICT_DEADLINE] = {OPTION_EVICT_DEADLINE, "--evict-deadline", "policy",
			       "evict_deadline", true},
    [OPTION_EXCLUSIVE] = {OPTION_EXCLUSIVE, "--exclusive", "policy", "exclusive", true},
    [OPTION_MAX_CLIENTS] = {OPTION_MAX_CLIENTS, "--max-clients", "limits", "clients", true},
    [OPTION_MAX_PENDING] = {OPTION_MAX_PENDING, "--max-pending", "limits", "pending", true},
    [OPTION_MAX_LEASES] = {OPTION_MAX_LEASES, "--max-leases", "limits", "leases", true},
    [OPTION_MAX_QUEUED] = {OPTION_MAX_QUEUED, "--max-queued", "limits", "queued", true},
    [OPTION_METRICS_TEXTFILE] = {OPTION_METRICS_TEXTFILE, "--metrics-textfile", "metrics",
				 "textfile", false},
    [OPTION_METRICS_INTERVAL] = {OPTION_METRICS_INTERVAL, "--metrics-interval", "metrics",
				 "interval", false},
    [OPTION_SOCKET_USER] = {OPTION_SOCKET_USER, "--socket-user", "access", "socket_user", false},
    [OPTION_SOCKET_GROUP] = {OPTION_SOCKET_GROUP, "--socket-group", "access", "socket_group",
			     false},
    [OPTION_SOCKET_MODE] = {OPTION_SOCKET_MODE, "--socket-mode", "access", "socket_mode", false},
    [OPTION_ALLOWED_USERS] = {OPTION_ALLOWED_USERS, "--allowed-users", "access", "allowed_users",
			      true},
    [OPTION_ALLOWED_GROUPS] = {OPTION_ALLOWED_GROUPS, "--allowed-groups", "access",
			       "allowed_groups", true},
    [OPTION_ADMIN_GROUP] = {OPTION_ADMIN_GROUP, "--admin-group", "access", "admin_group", true},
    [OPTION_MAX_CLIENTS_PER_UID] = {OPTION_MAX_CLIENTS_PER_UID, "--max-clients-per-uid", "limits",
				    "clients_per_uid", true},
    [OPTION_MAX_BYTES_PER_UID] = {OPTION_MAX_BYTES_PER_UID, "--max-bytes-per-uid", "limits",
				  "bytes_per_uid", true},
    [OPTION_MAX_MESSAGE] = {OPTION_MAX_MESSAGE, "--max-message-size", "limits", "message_size",
			    true},
    [OPTION_HANDSHAKE_TIMEOUT] = {OPTION_HANDSHAKE_TIMEOUT, "--handshake-timeout", "limits",
				  "handshake_timeout", true},
    [OPTION_MAX_SUBSCRIBERS] = {OPTION_MAX_SUBSCRIBERS, "--max-subscribers", "limits",
				"subscribers", true},
    [OPTION_RESTART_GRACE] = {OPTION_RESTART_GRACE, "--restart-grace", "daemon", "restart_grace",
			      false},
    [OPTION_BUDGET] = {OPTION_BUDGET, "--budget", "devices", "budget", true},
    [OPTION_HEADROOM] = {OPTION_HEADROOM, "--headroom", "devices", "headroom", true},
};

const struct option_name *options_name(enum option_id id)
{
	return (unsigned)id < OPTION_COUNT ? &names[id] : NULL;
}

const struct option_name *options_named(const char *section, const char *key)
{
	/* [device N] takes what applies to one device. */
	if (strcmp(section, "device") == 0) {
		if (strcmp(key, "budget") == 0)
			return &names[OPTION_BUDGET];
		if (strcmp(key, "headroom") == 0)
			return &names[OPTION_HEADROOM];
		if (strcmp(key, "exclusive") == 0)
			return &names[OPTION_EXCLUSIVE];
		return NULL;
	}
	for (unsigned i = 0; i < OPTION_COUNT; i++)
		if (strcmp(names[i].section, section) == 0 && strcmp(names[i].key, key) == 0)
			return &names[i];
	return NULL;
}

const char *options_source_name(enum option_source from)
{
	switch (from) {
	case FROM_FILE:
		return "file";
	case FROM_FLAG:
		return "command line";
	default:
		return "default";
	}
}

void options_defaults(struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->log_level = LOG_LEVEL_INFO;
	o->shutdown_timeout_ms = OPTIONS_SHUTDOWN_TIMEOUT_MS;
	o->restart_grace_ms = OPTIONS_RESTART_GRACE_MS;
	o->evict_deadline_ms = OPTIONS_EVICT_DEADLINE_MS;
	o->metrics_interval_ms = METRICS_INTERVAL_DEFAULT_MS;
	o->max_clients = 4096;
	o->max_pending = 64;
	o->max_leases = 65536;
	o->max_queued = (uint64_t)1 << 20;
	o->max_clients_per_uid = OPTIONS_MAX_CLIENTS_PER_UID;
	o->max_message = WIRE_MAX_FRAME;
	o->handshake_timeout_ms = OPTIONS_HANDSHAKE_TIMEOUT_MS;
	o->max_subscribers = OPTIONS_MAX_SUBSCRIBERS;
}

void options_free(struct options *o)
{
	free(o->socket_path);
	free(o->backend);
	free(o->sharing);
	free(o->metrics_textfile);
	free(o->socket_user);
	free(o->socket_group);
	free(o->allowed_users);
	free(o->allowed_groups);
	free(o->admin_group);
	o->socket_path = o->backend = o->sharing = o->metrics_textfile = NULL;
	o->socket_user = o->socket_group = o->allowed_users = o->allowed_groups = NULL;
	o->admin_group = NULL;
}

/* ----------------------------------------------------------------------------------------- */
/* Values */

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

int options_set(struct options *o, enum option_id id, int device, const char *value, char *why,
		size_t len)
{
	const char *rest = value;
	uint64_t size;
	unsigned mask;
	int rc = 0;

	if (!value)
		return text_why(why, len, -EINVAL, "needs a value");
	switch (id) {
	case OPTION_SOCKET:
		if (!value[0])
			return text_why(why, len, -EINVAL, "needs a non-empty path");
		if (strlen(value) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return text_why(why, len, -EINVAL,
					"too long for a socket path (at most %zu bytes)",
					sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		rc = replace_string(&o->socket_path, value, why, len);
		break;
	case OPTION_BACKEND:
		if (!backend_known(value))
			return text_why(why, len, -EINVAL, "unknown backend (choose from %s)",
					backend_names());
		rc = replace_string(&o->backend, value, why, len);
		break;
	case OPTION_SHARING:
		if (strcmp(value, "auto") && strcmp(value, "vmm") && strcmp(value, "dmabuf") &&
		    strcmp(value, "ipc"))
			return text_why(why, len, -EINVAL,
					"unknown sharing method (auto, vmm, dmabuf or ipc)");
		rc = replace_string(&o->sharing, value, why, len);
		break;
	case OPTION_LOG_LEVEL:
		if (log_level_parse(value, &o->log_level))
			return text_why(why, len, -EINVAL,
					"a log level: error, warn, info or debug");
		break;
	case OPTION_SHUTDOWN_TIMEOUT:
		rc = parse_seconds(value, 0, 600000, &o->shutdown_timeout_ms, why, len);
		break;
	case OPTION_RESTART_GRACE:
		rc = parse_seconds(value, 0, 3600000, &o->restart_grace_ms, why, len);
		break;
	case OPTION_EVICT_DEADLINE:
		rc = parse_seconds(value, 1, 3600000, &o->evict_deadline_ms, why, len);
		break;
	case OPTION_EXCLUSIVE:
		rc = device_prefix(value, &device, &rest, why, len);
		if (rc == 0)
			rc = parse_classes(rest, &mask, why, len);
		if (rc == 0)
			class_exclusion_add(device < 0 ? &o->exclusive_all : &o->exclusive[device],
					    mask);
		break;
	case OPTION_MAX_CLIENTS:
		rc = parse_count(value, 1, 1u << 20, &o->max_clients, why, len);
		break;
	case OPTION_MAX_PENDING:
		rc = parse_count(value, 1, 1u << 16, &o->max_pending, why, len);
		break;
	case OPTION_MAX_LEASES:
		rc = parse_count(value, 1, 1u << 24, &o->max_leases, why, len);
		break;
	case OPTION_MAX_QUEUED:
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && (size < ((uint64_t)64 << 10) || size > ((uint64_t)1 << 30)))
			rc = text_why(why, len, -EINVAL, "from 64K to 1G");
		if (rc == 0)
			o->max_queued = size;
		break;
	case OPTION_METRICS_TEXTFILE:
		rc = check_textfile(value, why, len);
		if (rc == 0)
			rc = replace_string(&o->metrics_textfile, value, why, len);
		break;
	case OPTION_METRICS_INTERVAL:
		rc = parse_seconds(value, METRICS_INTERVAL_MIN_MS, METRICS_INTERVAL_MAX_MS,
				   &o->metrics_interval_ms, why, len);
		break;
	case OPTION_SOCKET_USER:
		rc = ids_user_id(value, &o->socket_uid, why, len);
		if (rc == 0)
			rc = replace_string(&o->socket_user, value, why, len);
		break;
	case OPTION_SOCKET_GROUP:
		rc = ids_group_id(value, &o->socket_gid, why, len);
		if (rc == 0)
			rc = replace_string(&o->socket_group, value, why, len);
		break;
	case OPTION_SOCKET_MODE:
		rc = parse_mode(value, &o->socket_mode, why, len);
		break;
	case OPTION_ALLOWED_USERS:
		rc = ids_parse_users(value, &o->allowed_uids, why, len);
		if (rc == 0)
			rc = replace_string(&o->allowed_users, value, why, len);
		break;
	case OPTION_ALLOWED_GROUPS:
		rc = ids_parse_groups(value, &o->allowed_gids, why, len);
		if (rc == 0)
			rc = replace_string(&o->allowed_groups, value, why, len);
		break;
	case OPTION_ADMIN_GROUP:
		rc = ids_group_id(value, &o->admin_gid, why, len);
		if (rc == 0)
			rc = replace_string(&o->admin_group, value, why, len);
		break;
	case OPTION_MAX_CLIENTS_PER_UID:
		rc = parse_count(value, 1, 1u << 20, &o->max_clients_per_uid, why, len);
		break;
	case OPTION_MAX_BYTES_PER_UID:
		if (strcmp(value, "unlimited") == 0) {
			o->max_bytes_per_uid = 0;
			break;
		}
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && size == 0)
			rc = text_why(why, len, -EINVAL, "more than 0 bytes, or unlimited");
		if (rc == 0)
			o->max_bytes_per_uid = size;
		break;
	case OPTION_MAX_MESSAGE:
		rc = parse_size_value(value, &size, why, len);
		if (rc == 0 && (size < OPTIONS_MIN_MESSAGE || size > WIRE_MAX_FRAME))
			rc = text_why(why, len, -EINVAL,
				      "from 1K to 64K (the protocol's largest packet)");
		if (rc == 0)
			o->max_message = (uint32_t)size;
		break;
	case OPTION_HANDSHAKE_TIMEOUT:
		rc = parse_seconds(value, 1, 3600000, &o->handshake_timeout_ms, why, len);
		break;
	case OPTION_MAX_SUBSCRIBERS:
		rc = parse_count(value, 1, 1u << 16, &o->max_subscribers, why, len);
		break;
	case OPTION_BUDGET:
	case OPTION_HEADROOM:
		rc = device_prefix(value, &device, &rest, why, len);
		if (rc == 0)
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
		break;
	default:
		return text_why(why, len, -EINVAL, "unknown setting");
	}
	if (rc == 0)
		o->set |= 1u << id;
	return rc;
}

/* ----------------------------------------------------------------------------------------- */
/* Merging */

static bool given(const struct options *o, enum option_id id)
{
	return o && (o->set & (1u << id));
}

static const struct options *source_of(const struct options *flags, const struct options *file,
				       enum option_id id, enum option_source *from)
{
	if (given(flags, id)) {
		*from = FROM_FLAG;
		return flags;
	}
	if (given(file, id)) {
		*from = FROM_FILE;
		return file;
	}
	*from = FROM_DEFAULT;
	return NULL;
}

static int copy_string(char **dst, const char *src)
{
	free(*dst);
	*dst = NULL;
	if (src && !(*dst = strdup(src)))
		return -ENOMEM;
	return 0;
}

/* decide picks a device's size policy: the first source in precedence order that has one. */
static struct size_policy decide(const struct size_policy *order[4], const bool specific[4],
				 const enum option_source from[4])
{
	struct size_policy none = {0};

	for (unsigned i = 0; i < 4; i++) {
		const struct size_policy *p = order[i];

		if (p && (p->has_budget || p->has_headroom)) {
			struct size_policy out = *p;

			out.from = from[i];
			out.device_specific = specific[i];
			return out;
		}
	}
	return none;
}

int options_merge(struct options *eff, const struct options *flags, const struct options *file)
{
	enum option_source from;
	const struct options *src;
	int rc = 0;

	options_defaults(eff);
	for (unsigned id = 0; id < OPTION_COUNT; id++) {
		src = source_of(flags, file, (enum option_id)id, &from);
		eff->from[id] = from;
		if (!src)
			continue;
		eff->set |= 1u << id;
		switch ((enum option_id)id) {
		case OPTION_SOCKET:
			rc |= copy_string(&eff->socket_path, src->socket_path);
			break;
		case OPTION_BACKEND:
			rc |= copy_string(&eff->backend, src->backend);
			break;
		case OPTION_SHARING:
			rc |= copy_string(&eff->sharing, src->sharing);
			break;
		case OPTION_METRICS_TEXTFILE:
			rc |= copy_string(&eff->metrics_textfile, src->metrics_textfile);
			break;
		case OPTION_LOG_LEVEL:
			eff->log_level = src->log_level;
			break;
		case OPTION_SHUTDOWN_TIMEOUT:
			eff->shutdown_timeout_ms = src->shutdown_timeout_ms;
			break;
		case OPTION_RESTART_GRACE:
			eff->restart_grace_ms = src->restart_grace_ms;
			break;
		case OPTION_EVICT_DEADLINE:
			eff->evict_deadline_ms = src->evict_deadline_ms;
			break;
		case OPTION_EXCLUSIVE:
			eff->exclusive_all = src->exclusive_all;
			memcpy(eff->exclusive, src->exclusive, sizeof(eff->exclusive));
			break;
		case OPTION_MAX_CLIENTS:
			eff->max_clients = src->max_clients;
			break;
		case OPTION_MAX_PENDING:
			eff->max_pending = src->max_pending;
			break;
		case OPTION_MAX_LEASES:
			eff->max_leases = src->max_leases;
			break;
		case OPTION_MAX_QUEUED:
			eff->max_queued = src->max_queued;
			break;
		case OPTION_METRICS_INTERVAL:
			eff->metrics_interval_ms = src->metrics_interval_ms;
			break;
		case OPTION_SOCKET_USER:
			rc |= copy_string(&eff->socket_user, src->socket_user);
			eff->socket_uid = src->socket_uid;
			break;
		case OPTION_SOCKET_GROUP:
			rc |= copy_string(&eff->socket_group, src->socket_group);
			eff->socket_gid = src->socket_gid;
			break;
		case OPTION_SOCKET_MODE:
			eff->socket_mode = src->socket_mode;
			break;
		case OPTION_ALLOWED_USERS:
			rc |= copy_string(&eff->allowed_users, src->allowed_users);
			eff->allowed_uids = src->allowed_uids;
			break;
		case OPTION_ALLOWED_GROUPS:
			rc |= copy_string(&eff->allowed_groups, src->allowed_groups);
			eff->allowed_gids = src->allowed_gids;
			break;
		case OPTION_ADMIN_GROUP:
			rc |= copy_string(&eff->admin_group, src->admin_group);
			eff->admin_gid = src->admin_gid;
			break;
		case OPTION_MAX_CLIENTS_PER_UID:
			eff->max_clients_per_uid = src->max_clients_per_uid;
			break;
		case OPTION_MAX_BYTES_PER_UID:
			eff->max_bytes_per_uid = src->max_bytes_per_uid;
			break;
		case OPTION_MAX_MESSAGE:
			eff->max_message = src->max_message;
			break;
		case OPTION_HANDSHAKE_TIMEOUT:
			eff->handshake_timeout_ms = src->handshake_timeout_ms;
			break;
		case OPTION_MAX_SUBSCRIBERS:
			eff->max_subscribers = src->max_subscribers;
			break;
		case OPTION_BUDGET:
		case OPTION_HEADROOM:
		case OPTION_COUNT:
			break; /* per device, below */
		}
	}
	/* The defaults of the strings that have one. */
	if (!eff->backend)
		rc |= copy_string(&eff->backend, "auto");
	if (!eff->sharing)
		rc |= copy_string(&eff->sharing, "auto");
	/* Budget and headroom: one decision per device, in precedence order. */
	{
		const bool specific[4] = {true, false, true, false};
		const enum option_source order_from[4] = {FROM_FLAG, FROM_FLAG, FROM_FILE,
							  FROM_FILE};
		const struct size_policy *all_order[4] = {flags ? &flags->devices : NULL,
							  file ? &file->devices : NULL, NULL, NULL};
		const bool all_specific[4] = {false, false, false, false};
		const enum option_source all_from[4] = {FROM_FLAG, FROM_FILE, FROM_DEFAULT,
							FROM_DEFAULT};

		eff->devices = decide(all_order, all_specific, all_from);
		for (unsigned d = 0; d < BACKEND_MAX_DEVICES; d++) {
			const struct size_policy *order[4] = {
			    flags ? &flags->device[d] : NULL, flags ? &flags->devices : NULL,
			    file ? &file->device[d] : NULL, file ? &file->devices : NULL};

			eff->device[d] = decide(order, specific, order_from);
		}
	}
	if (rc) {
		options_free(eff);
		return -ENOMEM;
	}
	return 0;
}

int options_validate(const struct options *eff, char *why, size_t why_len)
{
	if ((eff->set & (1u << OPTION_METRICS_INTERVAL)) && !eff->metrics_textfile)
		return text_why(why, why_len, -EINVAL,
				"a metrics interval was given without a metrics textfile to write");
	return 0;
}

void options_budget(const struct options *eff, unsigned device, struct budget_config *out)
{
	const struct size_policy *p = device < BACKEND_MAX_DEVICES ? &eff->device[device] : NULL;

	memset(out, 0, sizeof(*out));
	if (!p)
		return;
	/* Budget wins over headroom within one source (said at start). */
	out->has_budget = p->has_budget;
	out->budget = p->budget;
	out->has_headroom = p->has_headroom && !p->has_budget;
	out->headroom = p->headroom;
	out->named = p->device_specific && (p->has_budget || p->has_headroom);
}

/* ----------------------------------------------------------------------------------------- */
/* The command line */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rocmmemd [OPTION]...\n"
	    "Lease GPU (or host) memory to processes over a Unix socket, under one budget.\n"
	    "\n"
	    "  -c, --config FILE      configuration file (default: /etc/rocmmemd/rocmmemd.conf\n"
	    "                         as root, else $XDG_CONFIG_HOME/rocmmemd/rocmmemd.conf);\n"
	    "                         flags win over the file, the file over the defaults\n"
	    "      --check-config     check the configuration, print it as it applies, exit\n"
	    "  -s, --socket PATH      socket to listen on (default: $%s, else %s as\n"
	    "                         root, else $XDG_RUNTIME_DIR/%s)\n"
	    "  -b, --backend NAME     memory backend: %s (default auto: the first\n"
	    "                         that works of hip, cuda and host)\n"
	    "      --sharing METHOD   how GPU memory reaches clients: auto (the best the\n"
	    "                         device offers), vmm, dmabuf or ipc\n"
	    "      --budget [DEVICE:]SIZE    bytes the daemon may lease on every device (or\n"
	    "                         DEVICE); may be repeated\n"
	    "      --headroom [DEVICE:]SIZE  bytes kept free (budget = total - headroom)\n"
	    "      --evict-deadline SECONDS  how long a model's owner has to unload it when\n"
	    "                         asked before its memory is revoked (default 20)\n"
	    "      --exclusive [DEVICE:]CLASS,CLASS...  classes never resident together on a\n"
	    "                         device (all devices without DEVICE:), e.g. transformer,vae;\n"
	    "                         classes: other, transformer, vae, text_encoder,\n"
	    "                         image_encoder. May be repeated.\n"
	    "      --max-clients N    connections at once (default 4096)\n"
	    "      --max-pending N    waiting requests per connection (default 64)\n"
	    "      --max-leases N     leases per connection (default 65536)\n"
	    "      --max-queued SIZE  unsent replies per connection before it is dropped\n"
	    "                         (default 1M)\n"
	    "      --max-clients-per-uid N  connections at once of one user (default 256)\n"
	    "      --max-bytes-per-uid SIZE  memory one user may hold and wait for, over all\n"
	    "                         its connections (default unlimited)\n"
	    "      --max-message-size SIZE  bytes of one request, 1K to 64K (default 64K)\n"
	    "      --handshake-timeout SECONDS  how long a connection may take to say hello\n"
	    "                         (default 10)\n"
	    "      --max-subscribers N  telemetry subscriptions at once (default 64)\n"
	    "      --socket-user USER, --socket-group GROUP, --socket-mode MODE\n"
	    "                         who owns the socket and its mode (default root,\n"
	    "                         rocmmem, 0660 as root; the user's own and 0600 otherwise)\n"
	    "      --allowed-users USER,...  --allowed-groups GROUP,...  who may connect\n"
	    "                         (default: anyone who can open the socket)\n"
	    "      --admin-group GROUP  members may evict and pin any model (default: root only)\n"
	    "      --shutdown-timeout SECONDS  at stop, how long clients get to leave after\n"
	    "                         being told (default 5)\n"
	    "      --restart-grace SECONDS  after a crash, how long the next daemon keeps the\n"
	    "                         leases of the state file for their holders to\n"
	    "                         re-declare (default 60; 0: keep no state file)\n"
	    "      --metrics-textfile PATH  rewrite PATH (ending in .prom) with Prometheus\n"
	    "                         metrics every interval, for node_exporter's textfile\n"
	    "                         collector; removed when the daemon stops\n"
	    "      --metrics-interval SECONDS  how often (default 15, 1 to 3600)\n"
	    "  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	    "  -h, --help             show this help and exit\n"
	    "  -V, --version          show the version and exit\n"
	    "\n"
	    "SIZE is a number of bytes with an optional binary suffix: K, M, G, T (or KiB, MiB,\n"
	    "GiB, TiB), e.g. 512M or 1.5G. Leases are granted in 2 MiB granules.\n"
	    "Runs in the foreground and logs to stderr (to the journal under systemd).\n"
	    "SIGINT or SIGTERM stop it cleanly; SIGHUP reloads the configuration file.\n"
	    "Exit status: 0 clean stop, 1 failure to start or run, 2 bad usage or configuration.\n",
	    SOCKPATH_ENV, SOCKPATH_SYSTEM, SOCKPATH_USER_NAME, backend_names());
}

int options_parse(int argc, char **argv, struct command_line *cl, FILE *out, FILE *err)
{
	enum {
		OPT_CHECK_CONFIG = LONG_ONLY,
		OPT_SETTING, /* + enum option_id */
	};
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
	    {"socket", required_argument, NULL, 's'},
	    {"backend", required_argument, NULL, 'b'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"sharing", required_argument, NULL, OPT_SETTING + OPTION_SHARING},
	    {"budget", required_argument, NULL, OPT_SETTING + OPTION_BUDGET},
	    {"headroom", required_argument, NULL, OPT_SETTING + OPTION_HEADROOM},
	    {"evict-deadline", required_argument, NULL, OPT_SETTING + OPTION_EVICT_DEADLINE},
	    {"exclusive", required_argument, NULL, OPT_SETTING + OPTION_EXCLUSIVE},
	    {"max-clients", required_argument, NULL, OPT_SETTING + OPTION_MAX_CLIENTS},
	    {"max-pending", required_argument, NULL, OPT_SETTING + OPTION_MAX_PENDING},
	    {"max-leases", required_argument, NULL, OPT_SETTING + OPTION_MAX_LEASES},
	    {"max-queued", required_argument, NULL, OPT_SETTING + OPTION_MAX_QUEUED},
	    {"max-clients-per-uid", required_argument, NULL,
	     OPT_SETTING + OPTION_MAX_CLIENTS_PER_UID},
	    {"max-bytes-per-uid", required_argument, NULL, OPT_SETTING + OPTION_MAX_BYTES_PER_UID},
	    {"max-message-size", required_argument, NULL, OPT_SETTING + OPTION_MAX_MESSAGE},
	    {"handshake-timeout", required_argument, NULL, OPT_SETTING + OPTION_HANDSHAKE_TIMEOUT},
	    {"max-subscribers", required_argument, NULL, OPT_SETTING + OPTION_MAX_SUBSCRIBERS},
	    {"socket-user", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_USER},
	    {"socket-group", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_GROUP},
	    {"socket-mode", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_MODE},
	    {"allowed-users", required_argument, NULL, OPT_SETTING + OPTION_ALLOWED_USERS},
	    {"allowed-groups", required_argument, NULL, OPT_SETTING + OPTION_ALLOWED_GROUPS},
	    {"admin-group", required_argument, NULL, OPT_SETTING + OPTION_ADMIN_GROUP},
	    {"shutdown-timeout", required_argument, NULL, OPT_SETTING + OPTION_SHUTDOWN_TIMEOUT},
	    {"restart-grace", required_argument, NULL, OPT_SETTING + OPTION_RESTART_GRACE},
	    {"metrics-textfile", required_argument, NULL, OPT_SETTING + OPTION_METRICS_TEXTFILE},
	    {"metrics-interval", required_argument, NULL, OPT_SETTING + OPTION_METRICS_INTERVAL},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	char name[64], why[256];
	int c;

	memset(cl, 0, sizeof(*cl));
	options_defaults(&cl->flags);
	optind = 0; /* 0, not 1: glibc then also resets its position inside grouped options */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:s:b:l:hV", longopts, NULL)) != -1) {
		enum option_id id;

		switch (c) {
		case 'c':
			if (!optarg[0]) {
				fprintf(err, "rocmmemd: --config needs a non-empty path\n");
				goto usage_error;
			}
			cl->config_path = optarg;
			continue;
		case OPT_CHECK_CONFIG:
			cl->check_config = true;
			continue;
		case 'h':
			usage(out);
			options_free(&cl->flags);
			return 1;
		case 'V':
			fprintf(out, "rocmmemd %s (protocol %u)\n", ROCMMEM_VERSION_STRING,
				ROCMMEM_PROTOCOL_VERSION);
			options_free(&cl->flags);
			return 1;
		case ':':
			fprintf(err, "rocmmemd: option '%s' needs a value\n",
				args_bad_option(argv, name, sizeof(name)));
			goto usage_error;
		case 's':
			id = OPTION_SOCKET;
			break;
		case 'b':
			id = OPTION_BACKEND;
			break;
		case 'l':
			id = OPTION_LOG_LEVEL;
			break;
		default:
			if (c < OPT_SETTING || c >= OPT_SETTING + OPTION_COUNT) {
				fprintf(err,
					"rocmmemd: unknown option '%s'\nTry 'rocmmemd --help'.\n",
					args_bad_option(argv, name, sizeof(name)));
				goto usage_error;
			}
			id = (enum option_id)(c - OPT_SETTING);
			break;
		}
		if (options_set(&cl->flags, id, -1, optarg, why, sizeof(why)) < 0) {
			fprintf(err, "rocmmemd: invalid %s '%s': %s\n", names[id].flag, optarg,
				why);
			goto usage_error;
		}
	}
	if (optind < argc) {
		fprintf(err, "rocmmemd: unexpected argument '%s'\nTry 'rocmmemd --help'.\n",
			argv[optind]);
		goto usage_error;
	}
	return 0;
usage_error:
	options_free(&cl->flags);
	return -EINVAL;
}
