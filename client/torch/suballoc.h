/* SPDX-License-Identifier: MIT */
/* suballoc.h: carving large address ranges (leases) into aligned blocks, off to the side. */
#ifndef ROCMMEM_TORCH_SUBALLOC_H
#define ROCMMEM_TORCH_SUBALLOC_H

/*
 * A sub-allocator for memory the CPU may not be able to touch (GPU device addresses): every
 * piece of bookkeeping lives in host memory beside the ranges, never inside them.
 *
 * - A region is one range [base, base + size) the caller owns (one lease). Regions belong to
 *   an arena; an allocation is served only from its arena's regions, so that memory of
 *   different models or streams is never mixed.
 * - Free blocks sit in segregated lists per size class (two-level: the power of two, then 16
 *   linear steps within it) with bitmaps, so finding a block that fits is O(1). A block is
 *   split on allocation; a freed block is merged with its free neighbours in address order,
 *   so a region whose blocks are all free is again one block.
 * - Live blocks are found by address in an open-addressing hash table: O(1) on free, and a
 *   pointer that is not a live block start (unknown, freed twice, inside a block) is refused
 *   without touching anything.
 *
 * Not thread-safe: the caller serialises every call on one suballoc.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Blocks start and end on multiples of this (PyTorch's caching allocator rounds to 512). */
#define SUBALLOC_ALIGN 512u
/* The second level: 2^4 classes between consecutive powers of two. */
#define SUBALLOC_SL_LOG 4u
#define SUBALLOC_SL (1u << SUBALLOC_SL_LOG)
/* First-level classes: enough for any 64-bit size in units of SUBALLOC_ALIGN. */
#define SUBALLOC_FL 56u
/* suballoc_free's size for "do not check the size". */
#define SUBALLOC_ANY_SIZE UINT64_MAX

struct sa_region;
struct sa_arena;

/*
 * One block of a region, free or live; private to suballoc.c and suballoc_verify.c (the
 * caller never looks inside).
 */
struct sa_block {
	uintptr_t addr;
	uint64_t size;	    /* a multiple of SUBALLOC_ALIGN */
	uint64_t requested; /* live: the size asked for; free: 0 */
	struct sa_block *prev_phys, *next_phys;
	struct sa_block *prev_free, *next_free; /* free: its list; spare: the spare list */
	struct sa_region *region;
	bool free;
};

/* One range handed to the sub-allocator (one lease). The caller reads it, never writes it. */
struct sa_region {
	uintptr_t base;
	uint64_t size;
	uint64_t used; /* bytes of its live blocks (rounded) */
	uint64_t live; /* its live blocks */
	struct sa_arena *arena;
	struct sa_region *prev, *next; /* the arena's regions */
	struct sa_block *first;	       /* its block at base: the start of its address order */
	void *user;		       /* the caller's: the lease */
};

/* The free lists of one group of regions. Embedded by the caller; zeroed by sa_arena_init. */
struct sa_arena {
	uint64_t fl_bitmap;		 /* first levels with a non-empty list */
	uint32_t sl_bitmap[SUBALLOC_FL]; /* per first level, its non-empty lists */
	struct sa_block *heads[SUBALLOC_FL][SUBALLOC_SL];
	struct sa_region *regions;
	size_t nregions;
	uint64_t free_bytes;
};

struct sa_slab;

struct suballoc {
	/* Live blocks by address: linear probing, capacity a power of two. */
	struct sa_block **table;
	size_t table_cap, table_count;
	/* Every region, sorted by base: which region an address falls in. */
	struct sa_region **regions;
	size_t nregions, regions_cap;
	/* Block records come from slabs and go back to a spare list. */
	struct sa_slab *slabs;
	struct sa_block *spare;
	/* Totals over every region. */
	uint64_t live;		  /* live blocks */
	uint64_t used_bytes;	  /* their sizes, rounded */
	uint64_t requested_bytes; /* their sizes as asked */
	uint64_t region_bytes;	  /* the regions' sizes */
};

/* suballoc_init prepares an empty sub-allocator. Returns 0 or -ENOMEM. */
int suballoc_init(struct suballoc *sa);

/* suballoc_finish frees every record, region and table. The ranges themselves are the
 * caller's: it must have taken back what it needs (region->user) first. */
void suballoc_finish(struct suballoc *sa);

/* sa_arena_init empties an arena before its first region. */
void sa_arena_init(struct sa_arena *arena);

/* suballoc_round returns size rounded up to SUBALLOC_ALIGN, or 0 for 0 and on overflow. */
uint64_t suballoc_round(uint64_t size);

/*
 * suballoc_add_region hands [base, base + size) to arena as one free block. base and size
 * must be multiples of SUBALLOC_ALIGN, size > 0, and the range must not overlap another
 * region. Returns the region (owned by the sub-allocator until suballoc_remove_region), or
 * NULL: errno EINVAL (bad range) or ENOMEM.
 */
struct sa_region *suballoc_add_region(struct suballoc *sa, struct sa_arena *arena, uintptr_t base,
				      uint64_t size, void *user);

/* suballoc_remove_region takes back a region without live blocks (region->live == 0) and
 * frees it. Returns 0, or -EBUSY (live blocks: nothing is done). */
int suballoc_remove_region(struct suballoc *sa, struct sa_region *region);

/*
 * suballoc_alloc takes size bytes (rounded up to SUBALLOC_ALIGN) from any region of arena,
 * the smallest class that fits first. Returns the block's address (aligned to
 * SUBALLOC_ALIGN) and stores its region in *region (may be NULL), or returns 0 when no free
 * block of the arena is large enough (or size is 0), or on ENOMEM for bookkeeping.
 */
uintptr_t suballoc_alloc(struct suballoc *sa, struct sa_arena *arena, uint64_t size,
			 struct sa_region **region);

/* suballoc_alloc_in takes size bytes from region alone (e.g. the one just added for it).
 * Returns the address, or 0 when none of its free blocks is large enough. */
uintptr_t suballoc_alloc_in(struct suballoc *sa, struct sa_region *region, uint64_t size);

/*
 * suballoc_free frees the live block that starts at addr. size is the size given at
 * allocation (or SUBALLOC_ANY_SIZE). Stores the block's region in *region (may be NULL; set
 * also when the size does not match). Returns 0; -ENOENT (addr is in no region); -EALREADY
 * (addr is inside a region but starts no live block: freed already, or an interior pointer);
 * -EINVAL (the size differs from the allocation's: the block stays allocated). Nothing is
 * changed on an error.
 */
int suballoc_free(struct suballoc *sa, uintptr_t addr, uint64_t size, struct sa_region **region);

/* suballoc_find_region returns the region containing addr, or NULL. O(log regions). */
struct sa_region *suballoc_find_region(const struct suballoc *sa, uintptr_t addr);

/* suballoc_block_size returns the requested size of the live block at addr, or 0. */
uint64_t suballoc_block_size(const struct suballoc *sa, uintptr_t addr);

/* suballoc_largest_free returns the largest free block of region. O(blocks). */
uint64_t suballoc_largest_free(const struct sa_region *region);

/*
 * suballoc_verify checks every invariant (blocks tile each region in address order, no two
 * free neighbours, free lists and bitmaps agree with the blocks, the table holds exactly the
 * live blocks, the totals add up). O(everything): for tests. Returns 0, or -EFAULT with a
 * description in why.
 */
int suballoc_verify(const struct suballoc *sa, char *why, size_t why_len);

/* suballoc_mapping gives the size class (first and second level) of a block of size bytes;
 * suballoc_table_find the live block that starts at addr, or NULL. For suballoc_verify.c. */
void suballoc_mapping(uint64_t size, unsigned *fl, unsigned *sl);
struct sa_block *suballoc_table_find(const struct suballoc *sa, uintptr_t addr);

#endif
