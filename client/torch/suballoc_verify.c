/* SPDX-License-Identifier: MIT */
/* suballoc_verify.c: the sub-allocator's invariants, checked in full by its tests. */
#include <errno.h>
#include <stdio.h>

#include "suballoc.h"

#define FAIL(...)                                    \
	do {                                         \
		snprintf(why, why_len, __VA_ARGS__); \
		return -EFAULT;                      \
	} while (0)

static int verify_arena(const struct sa_arena *a, char *why, size_t why_len)
{
	uint64_t free_bytes = 0;
	size_t nregions = 0;

	for (unsigned fl = 0; fl < SUBALLOC_FL; fl++) {
		if (!!(a->fl_bitmap & (UINT64_C(1) << fl)) != !!a->sl_bitmap[fl])
			FAIL("arena %p: first-level bit %u disagrees with its lists", (void *)a,
			     fl);
		for (unsigned sl = 0; sl < SUBALLOC_SL; sl++) {
			const struct sa_block *prev = NULL;

			if (!!(a->sl_bitmap[fl] & (1u << sl)) != !!a->heads[fl][sl])
				FAIL("arena %p: bit (%u, %u) disagrees with its list", (void *)a,
				     fl, sl);
			for (const struct sa_block *b = a->heads[fl][sl]; b; b = b->next_free) {
				unsigned f, s;

				suballoc_mapping(b->size, &f, &s);
				if (!b->free || f != fl || s != sl || b->prev_free != prev ||
				    b->region->arena != a)
					FAIL("arena %p: block %#lx (%llu bytes) misfiled in list "
					     "(%u, %u)",
					     (void *)a, (unsigned long)b->addr,
					     (unsigned long long)b->size, fl, sl);
				free_bytes += b->size;
				prev = b;
			}
		}
	}
	if (free_bytes != a->free_bytes)
		FAIL("arena %p: lists hold %llu free bytes, the arena says %llu", (void *)a,
		     (unsigned long long)free_bytes, (unsigned long long)a->free_bytes);
	for (const struct sa_region *r = a->regions; r; r = r->next) {
		if (r->arena != a || (r->next && r->next->prev != r))
			FAIL("arena %p: region list broken at %#lx", (void *)a,
			     (unsigned long)r->base);
		nregions++;
	}
	if (nregions != a->nregions)
		FAIL("arena %p: %zu regions listed, %zu counted", (void *)a, nregions, a->nregions);
	return 0;
}

int suballoc_verify(const struct suballoc *sa, char *why, size_t why_len)
{
	uint64_t live = 0, used = 0, requested = 0, region_bytes = 0;
	size_t in_table = 0;

	for (size_t i = 0; i < sa->nregions; i++) {
		const struct sa_region *r = sa->regions[i];
		uint64_t rlive = 0, rused = 0;
		const struct sa_block *prev = NULL;
		uintptr_t at = r->base;
		int rc;

		if (i > 0 && sa->regions[i - 1]->base + sa->regions[i - 1]->size > r->base)
			FAIL("regions %zu and %zu overlap or are out of order", i - 1, i);
		for (const struct sa_block *b = r->first; b; b = b->next_phys) {
			if (b->addr != at || b->size == 0 || b->size % SUBALLOC_ALIGN ||
			    b->prev_phys != prev || b->region != r)
				FAIL("region %#lx: block %#lx (%llu bytes) breaks the tiling",
				     (unsigned long)r->base, (unsigned long)b->addr,
				     (unsigned long long)b->size);
			if (b->free && prev && prev->free)
				FAIL("region %#lx: free neighbours at %#lx not merged",
				     (unsigned long)r->base, (unsigned long)b->addr);
			if (b->free) {
				if (b->requested)
					FAIL("free block %#lx has a requested size",
					     (unsigned long)b->addr);
			} else {
				if (suballoc_table_find(sa, b->addr) != b)
					FAIL("live block %#lx missing from the table",
					     (unsigned long)b->addr);
				if (suballoc_round(b->requested) != b->size)
					FAIL("live block %#lx: %llu bytes for a request of %llu",
					     (unsigned long)b->addr, (unsigned long long)b->size,
					     (unsigned long long)b->requested);
				rlive++;
				rused += b->size;
				requested += b->requested;
			}
			at += b->size;
			prev = b;
		}
		if (at != r->base + r->size)
			FAIL("region %#lx: blocks end at %#lx, not %#lx", (unsigned long)r->base,
			     (unsigned long)at, (unsigned long)(r->base + r->size));
		if (rlive != r->live || rused != r->used)
			FAIL("region %#lx: %llu live blocks of %llu bytes counted as %llu, %llu",
			     (unsigned long)r->base, (unsigned long long)rlive,
			     (unsigned long long)rused, (unsigned long long)r->live,
			     (unsigned long long)r->used);
		live += rlive;
		used += rused;
		region_bytes += r->size;
		rc = verify_arena(r->arena, why, why_len);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < sa->table_cap; i++) {
		const struct sa_block *b = sa->table[i];

		if (!b)
			continue;
		if (b->free)
			FAIL("free block %#lx in the table", (unsigned long)b->addr);
		in_table++;
	}
	if (in_table != sa->table_count || in_table != live || live != sa->live ||
	    used != sa->used_bytes || requested != sa->requested_bytes ||
	    region_bytes != sa->region_bytes)
		FAIL("totals: %zu in the table (counted %zu), %llu live (counted %llu), %llu bytes "
		     "used (counted %llu), %llu requested (counted %llu), %llu in regions "
		     "(counted %llu)",
		     in_table, sa->table_count, (unsigned long long)live,
		     (unsigned long long)sa->live, (unsigned long long)used,
		     (unsigned long long)sa->used_bytes, (unsigned long long)requested,
		     (unsigned long long)sa->requested_bytes, (unsigned long long)region_bytes,
		     (unsigned long long)sa->region_bytes);
	return 0;
}
