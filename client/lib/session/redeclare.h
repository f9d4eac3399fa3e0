/* SPDX-License-Identifier: MIT */
/*
 * redeclare.h: one reconnection attempt: a new connection, private to the attempting thread
 * until it is installed, on which the models and leases the client holds are declared again.
 */
#ifndef ROCMMEM_LIB_REDECLARE_H
#define ROCMMEM_LIB_REDECLARE_H

#include "conn/client.h"

/* What one model needs to be declared again, and what the new daemon answered. */
struct snap_model {
	struct lib_model m; /* a copy */
	uint64_t new_id;
	uint64_t reservation; /* accounted again */
	int err;
	char why[256];
};

/* One lease to re-declare: its fds (the caller's copies) and what the new daemon answered. */
struct snap_lease {
	const struct rocmmem_lease *l; /* identity only: never dereferenced once unlocked */
	uint64_t id;
	rocmmem_device_index device;
	uint64_t size;
	enum rocmmem_handle_kind kind;
	uint64_t model_id; /* the host's */
	unsigned nfds;
	int fds[LEASE_MAX_FDS];
	unsigned nchunks;
	uint64_t chunk_sizes[LEASE_MAX_FDS];
	bool revoked;		  /* before the attempt: nothing to declare, nothing to tell */
	struct snap_arena *arena; /* a lease in an arena: re-declared by offset, no fd */
	uint64_t offset;
	int err;
	char why[256];
};

/* One arena to re-declare before its leases: its fd (the caller's copy) and the answer. */
struct snap_arena {
	uint64_t id;
	uint64_t size;
	rocmmem_device_index device;
	int fd;
	int err;
	char why[256];
};

/* One attempt: a new connection, private to the attempting thread until installed. */
struct attempt {
	int fd;
	uint8_t *rx;
	uint64_t next_id;
	struct inmsg *events, **events_tail; /* events that came meanwhile, in order */
	char *daemon_version, *backend;
	rocmmem_device_index device_count;
	pid_t daemon_pid;
	struct snap_model *models;
	size_t nmodels;
	struct snap_lease *leases;
	size_t nleases;
	struct snap_arena *arenas;
	size_t narenas;
	uint32_t features;	 /* what the new daemon's hello said it uses */
	struct inmsg *hello;	 /* its hello reply, with the lane's fds when it gave one */
	uint64_t sent, received; /* packets on the new socket so far (the lane's order) */
	unsigned sub_what;
	uint32_t sub_interval_ms;
	char path[108];
	char *name;
	char why[256];
};

/* redeclare_take snapshots what the attempt declares (at->fd -1, events_tail set before);
 * lock held. Returns 0 or -ENOMEM. */
int redeclare_take(rocmmem_client *c, struct attempt *at);

/* redeclare_run makes the attempt: connect, hello, models, leases, done, telemetry; lock not
 * held. Returns 0, or a negative errno with at->why saying what failed. */
int redeclare_run(struct attempt *at);

/* redeclare_free closes and frees what the attempt still holds. */
void redeclare_free(struct attempt *at);

#endif
