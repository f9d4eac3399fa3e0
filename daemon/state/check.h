/* SPDX-License-Identifier: MIT */
/*
 * check.h: the books' own consistency, recounted from scratch: for tests and the simulator
 * (O(everything): never on the daemon's paths).
 */
#ifndef ROCMMEMD_CHECK_H
#define ROCMMEMD_CHECK_H

#include <stddef.h>

#include "state.h"

/*
 * state_check recounts the books and compares: every device's queue, models, reservations and
 * lease count with what is linked to it; every holder's counts and bytes (per device) with its
 * lists; every model's tagged lease bytes and waiters; the waiting requests' table and every
 * deadline with what they belong to; each lease's owner and model. What the books cannot know
 * alone (allocations and releases in flight, which device.leased and device.leases count
 * beside the leases) is left to the caller: here they only cover the leases. Returns 0, or -EUCLEAN
 * with the first difference in why.
 */
int state_check(const struct state *s, char *why, size_t why_len);

#endif
