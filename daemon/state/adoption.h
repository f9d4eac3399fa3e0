/* SPDX-License-Identifier: MIT */
/*
 * adoption.h: what a previous daemon left in the state file and its holders have yet to
 * re-declare: accounted on the devices from the start, belonging to no holder until then.
 */
#ifndef ROCMMEMD_ADOPTION_H
#define ROCMMEMD_ADOPTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/heap.h"
#include "platform/statefile.h"

/* A record of the previous daemon, waiting for its holder. */
struct pending {
	struct statefile_record rec;
	uint32_t slot; /* the record's handle in the file */
	bool adopting; /* a backend job is importing it */
	bool gone;     /* adopted or forgotten */
};

struct pending_set {
	struct pending *v; /* sorted by id */
	size_t n;
};

struct adoption {
	struct pending_set leases, models;
	struct pending_set arenas; /* address space, not memory: not counted in open */
	size_t open;		   /* pending records not adopted or forgotten yet */
	uint32_t grace_slot;	   /* the grace period's end in state.deadlines, 0: none */
	bool grace_over;
};

/* pending_find returns the record of this id in set, or NULL. */
struct pending *pending_find(const struct pending_set *set, uint64_t id);

/* What one process of the previous daemon holds on one device, not re-declared yet. */
struct adopt_awaiting {
	unsigned device;
	int32_t pid;
	uint32_t uid;
	unsigned leases, models;
	uint64_t lease_bytes, reserved_bytes;
};

/*
 * adoption_awaiting fills out (up to max entries, largest first) with what awaits
 * re-declaration, one entry per device and process, on device (< 0: every device); returns how
 * many entries there are in all (more than max when some were left out).
 */
size_t adoption_awaiting(const struct adoption *a, int device, struct adopt_awaiting *out,
			 size_t max);

/* adoption_awaiting_bytes sums what awaits re-declaration on a device. */
uint64_t adoption_awaiting_bytes(const struct adoption *a, unsigned device);

/* adoption_grace_left_ms is the time left at now_ms before what awaits is forgotten. */
uint64_t adoption_grace_left_ms(const struct adoption *a, const struct heap *deadlines,
				uint64_t now_ms);

#endif
