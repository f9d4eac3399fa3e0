/* SPDX-License-Identifier: MIT */
/* explain.h: why a request is not granted now, in the words the client and the log get. */
#ifndef ROCMMEMD_EXPLAIN_H
#define ROCMMEMD_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

struct arbiter;
struct device;

/*
 * explain_refusal explains why a request of requested bytes (size once rounded to granules) is
 * not granted now on d: what was asked, what is free, what waits ahead (ahead requests) and
 * who holds the memory. This text is what users read in their error, and what the log and
 * status keep.
 */
void explain_refusal(const struct arbiter *a, const struct device *d, uint64_t requested,
		     uint64_t size, unsigned ahead, char *buf, size_t len);

#endif
