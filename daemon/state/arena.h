/* SPDX-License-Identifier: MIT */
/*
 * arena.h: a holder's host arena on one device: one memfd of `size` bytes (created, punched
 * and closed by platform/arenafd.h) of which each lease is a range handed out by a first-fit
 * allocator in granules (ranges.h). Plain data: this layer never touches the fd.
 */
#ifndef ROCMMEMD_ARENA_H
#define ROCMMEMD_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "ranges.h"

/*
 * The most released ranges an arena keeps warm: taken in the allocator but in no lease,
 * not yet punched, for its client's next lease of the same size (service/arena.c says when).
 */
#define ARENA_WARM_MAX 8u

struct arena_warm {
	uint64_t offset;
	uint64_t bytes;
	uint64_t since_ms; /* when it was released */
};

struct arena {
	uint64_t id; /* stable across a restart of the daemon (the state file keeps it) */
	unsigned device;
	uint64_t size;	  /* bytes, a whole number of granules */
	uint64_t granule; /* bytes per granule of the allocator */
	struct ranges ranges;
	int fd;		  /* the memfd, the daemon's own until the arena goes */
	uint64_t ino_dev; /* its identity, for the state file */
	uint64_t ino;
	bool fd_sent;	     /* the client has the fd (sent with a grant, or re-declared) */
	uint32_t leases;     /* leases in it */
	uint64_t used;	     /* bytes in its leases */
	uint32_t state_slot; /* its record in the state file, 0: none */
	struct arena_warm warm[ARENA_WARM_MAX]; /* oldest first */
	unsigned nwarm;
	uint64_t warm_bytes; /* in warm[] */
};

/*
 * arena_init sets a up for size bytes (a multiple of granule) on device; fd is set to -1.
 * Returns 0, -EINVAL or -ENOMEM.
 */
int arena_init(struct arena *a, uint64_t id, unsigned device, uint64_t size, uint64_t granule);

/* arena_finish frees the allocator (the fd is the caller's to close first). */
void arena_finish(struct arena *a);

/*
 * arena_take hands out bytes (a multiple of the granule) at the lowest offset that fits and
 * writes it to *offset. Returns 0 or -ENOSPC: no free range is that long (arena_free_bytes may
 * still be larger: the arena is fragmented), or -EINVAL.
 */
int arena_take(struct arena *a, uint64_t bytes, uint64_t *offset);

/* arena_claim takes [offset, offset + bytes) as recorded. Returns 0, -ERANGE (outside, or
 * not whole granules), -EBUSY (overlaps what is taken) or -ENOMEM. */
int arena_claim(struct arena *a, uint64_t offset, uint64_t bytes);

/* arena_give hands [offset, offset + bytes) back. Returns 0, -EINVAL (not taken) or -ENOMEM. */
int arena_give(struct arena *a, uint64_t offset, uint64_t bytes);

/*
 * arena_warm_keep keeps the range of a lease given back ([offset, offset + bytes), still
 * taken in the allocator) as warm since now_ms, when fewer than ARENA_WARM_MAX are and
 * warm_bytes stays within cap. Returns true, or false with nothing changed.
 */
bool arena_warm_keep(struct arena *a, uint64_t offset, uint64_t bytes, uint64_t now_ms,
		     uint64_t cap);

/* arena_warm_take makes the newest warm range of exactly bytes a lease again (*offset).
 * Returns true, or false when none is that long. */
bool arena_warm_take(struct arena *a, uint64_t bytes, uint64_t *offset);

/* arena_warm_pop takes the oldest warm range off (*out) when it was released at or before
 * until_ms, leaving it taken in the allocator and in no lease: the caller punches it and gives
 * it back with arena_give_unleased. Returns true, or false when none is that old. */
bool arena_warm_pop(struct arena *a, uint64_t until_ms, struct arena_warm *out);

/* arena_give_unleased hands back a range that is in no lease (one popped from warm).
 * Returns 0 or -EINVAL (not taken). */
int arena_give_unleased(struct arena *a, uint64_t offset, uint64_t bytes);

/* arena_free_bytes and arena_largest_free: all that is free, and the longest free range. */
uint64_t arena_free_bytes(const struct arena *a);
uint64_t arena_largest_free(const struct arena *a);

/*
 * arena_fragmentation_permille is 1000 * (1 - largest free range / free bytes): 0 when what is
 * free is one range (or nothing is free), towards 1000 as it breaks into small pieces.
 */
uint32_t arena_fragmentation_permille(const struct arena *a);

#endif
