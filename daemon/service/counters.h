/* SPDX-License-Identifier: MIT */
/* counters.h: what happened since the start, counted from the events alone (status, metrics). */
#ifndef ROCMMEMD_COUNTERS_H
#define ROCMMEMD_COUNTERS_H

#include <stdint.h>

#include "bus.h"
#include "policy/limits.h"

struct counters {
	uint64_t grants;
	uint64_t denials;
	uint64_t timeouts;
	uint64_t releases;
	uint64_t reclaimed; /* leases reclaimed from clients that went away */
	uint64_t failures;  /* allocations the backend refused */
	uint64_t trims;
	uint64_t bytes_trimmed;
	uint64_t evictions;	    /* evict requests sent */
	uint64_t revocations;	    /* models whose owner missed the deadline */
	uint64_t connections;	    /* clients that said hello */
	uint64_t bypasses;	    /* requests granted ahead of a head stuck on their holder */
	uint64_t hits[LIMIT_COUNT]; /* times a client ran into each limit */
	uint64_t peers_refused;	    /* connections from users and groups not allowed */
	uint64_t requests_refused;  /* requests refused with -EPERM: not the owner, not an admin */
	uint64_t undeclared;	    /* clients found using more than they declared */
	uint64_t lane_requests;	    /* requests answered in a request lane (net/lane_io.h) */
};

/* counters_subscribe has k count b's events from now on. Returns 0 or -ENOSPC. */
int counters_subscribe(struct counters *k, struct bus *b);

#endif
