/* SPDX-License-Identifier: MIT */
/* ranges.h: a first-fit allocator of ranges in a space of granules, pure data (no fds). */
#ifndef ROCMMEMD_RANGES_H
#define ROCMMEMD_RANGES_H

#include <stdint.h>

struct range_node;

/*
 * The free ranges of a space of `granules` units, ordered by start in a treap (a binary search
 * tree balanced by random priorities) whose nodes also know the longest free range below them:
 * first fit, free (with coalescing) and claiming a given range all take O(log n) expected
 * steps for n free ranges, and memory grows with the free ranges, not the space.
 */
struct ranges {
	struct range_node *root;
	uint64_t granules; /* the space: [0, granules) */
	uint64_t free;	   /* granules in free ranges */
	uint64_t count;	   /* free ranges */
	uint64_t rng;	   /* xorshift state for the priorities */
};

/* ranges_init makes the whole space one free range. Returns 0, -EINVAL (0 granules) or -ENOMEM. */
int ranges_init(struct ranges *r, uint64_t granules);

/* ranges_finish frees the tree; r is empty afterwards. */
void ranges_finish(struct ranges *r);

/*
 * ranges_alloc takes n granules from the free range that starts lowest among those long
 * enough (first fit) and writes its start into *start. Returns 0, -EINVAL (n is 0) or
 * -ENOSPC: no free range is long enough (r->free may still be n or more: fragmentation).
 */
int ranges_alloc(struct ranges *r, uint64_t n, uint64_t *start);

/*
 * ranges_free gives [start, start + n) back, merged with free neighbours. Returns 0, -EINVAL
 * when the range is empty, outside the space or not wholly taken (a double free), or -ENOMEM
 * (the range stays taken).
 */
int ranges_free(struct ranges *r, uint64_t start, uint64_t n);

/*
 * ranges_claim takes exactly [start, start + n) (re-claiming what a previous owner recorded).
 * Returns 0, -ERANGE (empty or outside the space), -EBUSY (not wholly free) or -ENOMEM.
 */
int ranges_claim(struct ranges *r, uint64_t start, uint64_t n);

/* ranges_each calls fn for every free range, in order. */
void ranges_each(const struct ranges *r, void (*fn)(void *ctx, uint64_t start, uint64_t n),
		 void *ctx);

/* ranges_largest is the longest free range (0 when none is free). */
uint64_t ranges_largest(const struct ranges *r);

/*
 * ranges_check walks the whole tree (O(n): for tests and state_check): ordered, disjoint,
 * never adjacent (coalesced), inside the space, heap-ordered, with the right longest-below and
 * the right totals. Returns 0 or -EFAULT.
 */
int ranges_check(const struct ranges *r);

#endif
