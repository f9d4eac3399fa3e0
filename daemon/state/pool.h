/* SPDX-License-Identifier: MIT */
/*
 * pool.h: a device's pool of VMM chunks kept after release: the books of what the daemon
 * holds there for a client to be granted again without an allocation (daemon/service/pool.c
 * moves memory in and out; docs/backends.md, "The chunk pool", says why and for whom).
 */
#ifndef ROCMMEMD_POOL_H
#define ROCMMEMD_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "platform/backend/backend.h"

/* The most allocations one device's pool keeps (each holds up to BACKEND_MAX_CHUNKS fds). */
#define POOL_MAX_ENTRIES 64u

/* The settings: the most bytes per device (POOL_AUTO: a quarter of its budget; 0: no pool),
 * and how long an allocation may sit unused before it is released. */
#define POOL_AUTO UINT64_MAX
#define POOL_DEFAULT_IDLE_MS 30000u
struct pool_config {
	uint64_t max_bytes;
	uint64_t idle_ms;
	uint64_t keep_fds; /* exported fds kept after their grants; POOL_AUTO: from the limit */
};

/*
 * One released lease's memory. It goes back only to the connection that held it (holder):
 * that client may still map it, so nobody else may ever be given it.
 */
struct pool_entry {
	uint64_t holder;
	uint64_t size;
	uint64_t since_ms;	    /* when it was released into the pool */
	bool ready;		    /* exported again: alloc.fds can be granted */
	bool dropped;		    /* to be released as soon as its export is back */
	struct backend_alloc alloc; /* the daemon's handles (and, once ready, fresh fds) */
	TAILQ_ENTRY(pool_entry) link;
};

TAILQ_HEAD(pool_list, pool_entry);

struct device_pool {
	struct pool_list entries; /* oldest first */
	unsigned count;
	uint64_t bytes;		/* held by entries, exported or not */
	uint64_t chunks;	/* their runtime allocations */
	uint64_t warm_grants;	/* grants served from the pool */
	uint64_t dropped_bytes; /* released from it (idle, pressure, trims, departures) */
};

void pool_init(struct device_pool *p);

/* pool_add links e (size and alloc set) as the newest entry. */
void pool_add(struct device_pool *p, struct pool_entry *e, uint64_t now_ms);

/* pool_unlink takes e out of the books (the caller frees or grants its memory). */
void pool_unlink(struct device_pool *p, struct pool_entry *e);

/* pool_find returns holder's oldest ready entry of exactly size bytes, or NULL. */
struct pool_entry *pool_find(const struct device_pool *p, uint64_t holder, uint64_t size);

/* pool_room says whether size more bytes fit under max_bytes and the entry cap. */
bool pool_room(const struct device_pool *p, uint64_t max_bytes, uint64_t size);

#endif
