/* SPDX-License-Identifier: MIT */
/*
 * options.c: rocmmemd's settings: their names on the command line and in the file, their
 * defaults (options_set.c checks values, options_merge.c combines sources, options_cli.c
 * reads the command line).
 */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "metrics_file.h"
#include "wire.h"

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
    [OPTION_MAX_HOLD] = {OPTION_MAX_HOLD, "--max-hold", "policy", "max_hold", true},
    [OPTION_BACKFILL] = {OPTION_BACKFILL, "--backfill", "policy", "backfill", true},
    [OPTION_BACKFILL_PASSES] = {OPTION_BACKFILL_PASSES, "--backfill-passes", "policy",
				"backfill_passes", true},
    [OPTION_BACKFILL_WAIT] = {OPTION_BACKFILL_WAIT, "--backfill-wait", "policy", "backfill_wait",
			      true},
    [OPTION_GPU_POOL] = {OPTION_GPU_POOL, "--gpu-pool", "devices", "gpu_pool", true},
    [OPTION_GPU_POOL_IDLE] = {OPTION_GPU_POOL_IDLE, "--gpu-pool-idle", "devices", "gpu_pool_idle",
			      true},
    [OPTION_GPU_POOL_FDS] = {OPTION_GPU_POOL_FDS, "--gpu-pool-fds", "devices", "gpu_pool_fds",
			     true},
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
	o->backfill = true;
	o->backfill_passes = OPTIONS_BACKFILL_PASSES;
	o->backfill_wait_ms = OPTIONS_BACKFILL_WAIT_MS;
	o->metrics_interval_ms = METRICS_INTERVAL_DEFAULT_MS;
	o->max_clients = 4096;
	o->max_pending = 64;
	o->max_leases = 65536;
	o->max_queued = (uint64_t)1 << 20;
	o->max_clients_per_uid = OPTIONS_MAX_CLIENTS_PER_UID;
	o->max_message = WIRE_MAX_FRAME;
	o->handshake_timeout_ms = OPTIONS_HANDSHAKE_TIMEOUT_MS;
	o->max_subscribers = OPTIONS_MAX_SUBSCRIBERS;
	o->gpu_pool = POOL_AUTO;
	o->gpu_pool_idle_ms = POOL_DEFAULT_IDLE_MS;
	o->gpu_pool_fds = POOL_AUTO;
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
