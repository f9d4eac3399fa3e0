/* SPDX-License-Identifier: MIT */
/* denials.h: the latest refused requests, kept for status as the clients were told. */
#ifndef ROCMMEMD_DENIALS_H
#define ROCMMEMD_DENIALS_H

#include <stddef.h>
#include <stdint.h>

#include "bus.h"
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

/* denials_record keeps d (copied), dropping the oldest when full. */
void denials_record(struct denials *ring, const struct denial *d);

/* denials_get returns the i-th kept refusal, oldest first (i < ring->count). */
const struct denial *denials_get(const struct denials *ring, unsigned i);

/* denials_subscribe has ring keep every LEASE_DENIED event of b, as its clients were told. */
int denials_subscribe(struct denials *ring, struct bus *b);

#endif
