/* SPDX-License-Identifier: MIT */
/*
 * options.h: rocmmemd's settings: what each one is called on the command line and in the
 * configuration file, how its values are checked, and how the sources combine (flag > file >
 * default).
 */
#ifndef ROCMMEMD_OPTIONS_H
#define ROCMMEMD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "policy/access.h"
#include "platform/backend/backend.h"
#include "state/device.h"
#include "base/log.h"
#include "state/model.h"

/* Every setting a source can give: bit (1u << id) in struct options.set. */
enum option_id {
	OPTION_SOCKET,
	OPTION_BACKEND,
	OPTION_SHARING,
	OPTION_LOG_LEVEL,
	OPTION_SHUTDOWN_TIMEOUT,
	OPTION_EVICT_DEADLINE,
	OPTION_EXCLUSIVE, /* any rule, for all devices or one */
	OPTION_MAX_CLIENTS,
	OPTION_MAX_PENDING,
	OPTION_MAX_LEASES,
	OPTION_MAX_QUEUED,
	OPTION_METRICS_TEXTFILE,
	OPTION_METRICS_INTERVAL,
	OPTION_SOCKET_USER,
	OPTION_SOCKET_GROUP,
	OPTION_SOCKET_MODE,
	OPTION_ALLOWED_USERS,
	OPTION_ALLOWED_GROUPS,
	OPTION_ADMIN_GROUP,
	OPTION_MAX_CLIENTS_PER_UID,
	OPTION_MAX_BYTES_PER_UID,
	OPTION_MAX_MESSAGE,
	OPTION_HANDSHAKE_TIMEOUT,
	OPTION_MAX_SUBSCRIBERS,
	OPTION_RESTART_GRACE,
	OPTION_BUDGET,	 /* per device, or for all: see struct size_policy */
	OPTION_HEADROOM, /* likewise */
	OPTION_MAX_HOLD,
	OPTION_BACKFILL,
	OPTION_BACKFILL_PASSES,
	OPTION_BACKFILL_WAIT,
	OPTION_GPU_POOL,      /* the VMM chunk pool's size per device (service/pool.c) */
	OPTION_GPU_POOL_IDLE, /* how long pooled memory may sit unused */
	OPTION_GPU_POOL_FDS,  /* exported fds kept open for grants from the pool */
	OPTION_COUNT,
};

/* Where an effective value came from. */
enum option_source {
	FROM_DEFAULT = 0,
	FROM_FILE,
	FROM_FLAG,
};

/* A device's budget or headroom, as one source gives it (or, merged, as it applies). */
struct size_policy {
	bool has_budget;
	bool has_headroom;
	uint64_t budget;
	uint64_t headroom;
	/* Merged options only: the source that decided, and whether it named this device. */
	enum option_source from;
	bool device_specific;
};

struct options {
	uint64_t set;			       /* OPTION_* bits this source gave */
	enum option_source from[OPTION_COUNT]; /* merged options: where each value came from */
	char *socket_path;		       /* owned; NULL: resolved by common/sockpath */
	char *backend;			       /* owned; "auto" or a backend name */
	char *sharing;			       /* owned; "auto", "vmm", "dmabuf" or "ipc" */
	enum log_level log_level;
	uint64_t shutdown_timeout_ms;
	uint64_t restart_grace_ms; /* 0: no state file (leases do not survive a restart) */
	uint64_t evict_deadline_ms;
	uint64_t evict_deadline_class_ms[MODEL_CLASSES]; /* a class's own; 0: the above */
	uint64_t max_hold_ms;				 /* 0: off */
	uint64_t max_hold_class_ms[MODEL_CLASSES];	 /* 0: the above; POLICY_CLASS_OFF: off */
	bool backfill;
	unsigned backfill_passes;
	uint64_t backfill_wait_ms;
	struct class_exclusion exclusive[BACKEND_MAX_DEVICES];
	struct class_exclusion exclusive_all;
	unsigned max_clients;
	unsigned max_pending;	/* waiting requests per connection */
	unsigned max_leases;	/* live leases per connection */
	uint64_t max_queued;	/* bytes of unsent replies per connection */
	char *metrics_textfile; /* owned; NULL: none */
	uint64_t metrics_interval_ms;
	/* [access]: names as given (owned, NULL: not set) and the ids they resolved to. */
	char *socket_user;
	char *socket_group;
	uid_t socket_uid;
	gid_t socket_gid;
	unsigned socket_mode;
	char *allowed_users;
	char *allowed_groups;
	struct id_list allowed_uids;
	struct id_list allowed_gids;
	char *admin_group;
	gid_t admin_gid;
	/* [limits], beyond the above */
	unsigned max_clients_per_uid;
	uint64_t max_bytes_per_uid; /* 0: unlimited */
	uint32_t max_message;	    /* bytes of one request */
	uint64_t handshake_timeout_ms;
	unsigned max_subscribers;
	uint64_t gpu_pool;	    /* bytes per device; POOL_AUTO: a quarter of the budget */
	uint64_t gpu_pool_idle_ms;  /* POOL_DEFAULT_IDLE_MS */
	uint64_t gpu_pool_fds;	    /* POOL_AUTO: from the descriptor limit */
	struct size_policy devices; /* every device */
	struct size_policy device[BACKEND_MAX_DEVICES]; /* one device */
};

/* Defaults. */
#define OPTIONS_EVICT_DEADLINE_MS 20000u
#define OPTIONS_BACKFILL_PASSES 16u
#define OPTIONS_BACKFILL_WAIT_MS 5000u
#define OPTIONS_SHUTDOWN_TIMEOUT_MS 5000u
#define OPTIONS_RESTART_GRACE_MS 60000u
#define OPTIONS_MAX_CLIENTS_PER_UID 256u
#define OPTIONS_HANDSHAKE_TIMEOUT_MS 10000u
#define OPTIONS_MAX_SUBSCRIBERS 64u
#define OPTIONS_MIN_MESSAGE 1024u

/* Exit statuses of rocmmemd. */
#define ROCMMEMD_EXIT_OK 0
#define ROCMMEMD_EXIT_FAILURE 1 /* could not start or run: socket busy, backend failed */
#define ROCMMEMD_EXIT_USAGE 2	/* bad command line or configuration: restarting won't help */

/* options_defaults fills o with every default and nothing marked as set. */
void options_defaults(struct options *o);

/* How a setting is named on the command line and in the configuration file. */
struct option_name {
	enum option_id id;
	const char *flag;    /* "--budget" */
	const char *section; /* "devices"; "device" for [device N] */
	const char *key;     /* "budget" */
	bool reloadable;     /* SIGHUP applies it; else it needs a restart */
};

/* options_named finds a setting by section and key ("device" for [device N]); NULL if none. */
const struct option_name *options_named(const char *section, const char *key);

/* options_name returns the names of a setting (never NULL for a valid id). */
const struct option_name *options_name(enum option_id id);

/* options_free frees what o owns and leaves it empty (defaults not restored). */
void options_free(struct options *o);

/* options_source_name: "default", "file" or "command line". */
const char *options_source_name(enum option_source from);

#endif
