/* SPDX-License-Identifier: MIT */
/* denials.h: the latest refused requests, kept for status as the clients were told. */
#ifndef ROCMMEMD_DENIALS_H
#define ROCMMEMD_DENIALS_H

#include <stddef.h>
#include <stdint.h>

#include "rocmmem.pb-c.h"
#include "version.h"

/* How many refusals status shows, and how much of each explanation. */
#define DENIALS_KEEP 8u
#define DENIAL_REASON_MAX 1024u

struct denial {
	uint64_t timestamp_ms; /* CLOCK_REALTIME */
	int32_t pid;
	char client_name[ROCMMEM_NAME_MAX + 1];
	unsigned device;
	uint64_t bytes;
	uint64_t model_id;
	char model_name[ROCMMEM_NAME_MAX + 1];
	int error; /* negative errno */
	char reason[DENIAL_REASON_MAX];
};

/* A ring of the latest DENIALS_KEEP refusals. */
struct denials {
	struct denial ring[DENIALS_KEEP];
	unsigned next;	/* slot the next refusal goes to */
	unsigned count; /* kept, at most DENIALS_KEEP */
};

/* Wire messages for a status reply, pointing into a struct denials. */
struct denials_wire {
	Rocmmem__Wire__Denial items[DENIALS_KEEP];
	Rocmmem__Wire__Denial *ptrs[DENIALS_KEEP];
};

/* denials_record keeps d (copied), dropping the oldest when full. */
void denials_record(struct denials *ring, const struct denial *d);

/* denials_fill lists the kept refusals oldest first into w and points *items at them. */
void denials_fill(const struct denials *ring, struct denials_wire *w, size_t *n,
		  Rocmmem__Wire__Denial ***items);

#endif
