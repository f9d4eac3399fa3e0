/* SPDX-License-Identifier: MIT */
/* suballoc.c: segregated-fit sub-allocation of leases with out-of-band block records. */
#include "suballoc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest size served: far beyond any device, small enough that rounding never wraps. */
#define SUBALLOC_MAX_SIZE (UINT64_C(1) << 62)
#define SLAB_BLOCKS 1024u
#define TABLE_MIN_BITS 10u

struct sa_slab {
	struct sa_slab *next;
	struct sa_block blocks[SLAB_BLOCKS];
};

/* ---------------------------------------------------------------------------------------- */
/* Block records */

static struct sa_block *block_new(struct suballoc *sa)
{
	struct sa_block *b;

	if (!sa->spare) {
		struct sa_slab *slab = calloc(1, sizeof(*slab));

		if (!slab)
			return NULL;
		slab->next = sa->slabs;
		sa->slabs = slab;
		for (unsigned i = 0; i < SLAB_BLOCKS; i++) {
			slab->blocks[i].next_free = sa->spare;
			sa->spare = &slab->blocks[i];
		}
	}
	b = sa->spare;
	sa->spare = b->next_free;
	memset(b, 0, sizeof(*b));
	return b;
}

static void block_put(struct suballoc *sa, struct sa_block *b)
{
	b->next_free = sa->spare;
	sa->spare = b;
}

/* ---------------------------------------------------------------------------------------- */
/* Size classes */

static unsigned msb64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

/* mapping gives the class of a size: below 16 units of SUBALLOC_ALIGN one class per unit,
 * above that 16 classes per power of two. */
void suballoc_mapping(uint64_t size, unsigned *fl, unsigned *sl)
{
	uint64_t u = size / SUBALLOC_ALIGN;
	unsigned msb;

	if (u < SUBALLOC_SL) {
		*fl = 0;
		*sl = (unsigned)u;
		return;
	}
	msb = msb64(u);
	*fl = msb - SUBALLOC_SL_LOG + 1;
	*sl = (unsigned)(u >> (msb - SUBALLOC_SL_LOG)) - SUBALLOC_SL;
}

/* search_size rounds a size up to its class's upper bound: any block of the class found for
 * it is large enough, so the search never walks a list. */
static uint64_t search_size(uint64_t size)
{
	uint64_t u = size / SUBALLOC_ALIGN, step;

	if (u < SUBALLOC_SL)
		return size;
	step = UINT64_C(1) << (msb64(u) - SUBALLOC_SL_LOG);
	u = (u + step - 1) & ~(step - 1);
	return u * SUBALLOC_ALIGN;
}

uint64_t suballoc_round(uint64_t size)
{
	if (size == 0 || size > SUBALLOC_MAX_SIZE)
		return 0;
	return (size + SUBALLOC_ALIGN - 1) & ~(uint64_t)(SUBALLOC_ALIGN - 1);
}

static void list_insert(struct sa_arena *a, struct sa_block *b)
{
	unsigned fl, sl;

	suballoc_mapping(b->size, &fl, &sl);
	b->prev_free = NULL;
	b->next_free = a->heads[fl][sl];
	if (b->next_free)
		b->next_free->prev_free = b;
	a->heads[fl][sl] = b;
	a->fl_bitmap |= UINT64_C(1) << fl;
	a->sl_bitmap[fl] |= 1u << sl;
	a->free_bytes += b->size;
	b->free = true;
}

static void list_remove(struct sa_arena *a, struct sa_block *b)
{
	unsigned fl, sl;

	suballoc_mapping(b->size, &fl, &sl);
	if (b->prev_free)
		b->prev_free->next_free = b->next_free;
	else
		a->heads[fl][sl] = b->next_free;
	if (b->next_free)
		b->next_free->prev_free = b->prev_free;
	if (!a->heads[fl][sl]) {
		a->sl_bitmap[fl] &= ~(1u << sl);
		if (!a->sl_bitmap[fl])
			a->fl_bitmap &= ~(UINT64_C(1) << fl);
	}
	a->free_bytes -= b->size;
	b->prev_free = b->next_free = NULL;
	b->free = false;
}

/* find_suitable returns the head of the first non-empty list at class (fl, sl) or above. */
static struct sa_block *find_suitable(const struct sa_arena *a, unsigned fl, unsigned sl)
{
	uint32_t slmap = a->sl_bitmap[fl] & (~0u << sl);

	if (!slmap) {
		uint64_t flmap = fl + 1 < 64 ? a->fl_bitmap & (~UINT64_C(0) << (fl + 1)) : 0;

		if (!flmap)
			return NULL;
		fl = (unsigned)__builtin_ctzll(flmap);
		slmap = a->sl_bitmap[fl];
	}
	return a->heads[fl][(unsigned)__builtin_ctz(slmap)];
}

/* ---------------------------------------------------------------------------------------- */
/* Live blocks by address */

static unsigned table_bits(size_t cap)
{
	return (unsigned)__builtin_ctzll((unsigned long long)cap);
}

static size_t table_slot(uintptr_t addr, size_t cap)
{
	/* Fibonacci hashing of the address in units of SUBALLOC_ALIGN: the high bits. */
	uint64_t h = (uint64_t)(addr / SUBALLOC_ALIGN) * UINT64_C(0x9E3779B97F4A7C15);

	return (size_t)(h >> (64u - table_bits(cap)));
}

static void table_put(struct sa_block **table, size_t cap, struct sa_block *b)
{
	size_t i = table_slot(b->addr, cap);

	while (table[i])
		i = (i + 1) & (cap - 1);
	table[i] = b;
}

/* table_reserve makes room for one more entry (load at most one half). */
static int table_reserve(struct suballoc *sa)
{
	struct sa_block **table;
	size_t cap;

	if ((sa->table_count + 1) * 2 <= sa->table_cap)
		return 0;
	cap = sa->table_cap * 2;
	table = calloc(cap, sizeof(*table));
	if (!table)
		return -ENOMEM;
	for (size_t i = 0; i < sa->table_cap; i++)
		if (sa->table[i])
			table_put(table, cap, sa->table[i]);
	free(sa->table);
	sa->table = table;
	sa->table_cap = cap;
	return 0;
}

static size_t table_index(const struct suballoc *sa, uintptr_t addr)
{
	size_t i = table_slot(addr, sa->table_cap);

	while (sa->table[i]) {
		if (sa->table[i]->addr == addr)
			return i;
		i = (i + 1) & (sa->table_cap - 1);
	}
	return SIZE_MAX;
}

struct sa_block *suballoc_table_find(const struct suballoc *sa, uintptr_t addr)
{
	size_t i = table_index(sa, addr);

	return i == SIZE_MAX ? NULL : sa->table[i];
}

/* table_remove deletes slot i and shifts back the entries after it that hashed before it, so
 * that no tombstones accumulate over millions of operations. */
static void table_remove(struct suballoc *sa, size_t i)
{
	size_t mask = sa->table_cap - 1, j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!sa->table[j])
			break;
		k = table_slot(sa->table[j]->addr, sa->table_cap);
		/* The entry at j may move to i unless its home k lies cyclically in (i, j]. */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			sa->table[i] = sa->table[j];
			i = j;
		}
	}
	sa->table[i] = NULL;
	sa->table_count--;
}

/* ---------------------------------------------------------------------------------------- */
/* Regions */

/* region_slot returns the index of the first region whose base is above addr. */
static size_t region_slot(const struct suballoc *sa, uintptr_t addr)
{
	size_t lo = 0, hi = sa->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sa->regions[mid]->base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct sa_region *suballoc_find_region(const struct suballoc *sa, uintptr_t addr)
{
	size_t i = region_slot(sa, addr);
	struct sa_region *r;

	if (i == 0)
		return NULL;
	r = sa->regions[i - 1];
	return addr - r->base < r->size ? r : NULL;
}

int suballoc_init(struct suballoc *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->table_cap = (size_t)1 << TABLE_MIN_BITS;
	sa->table = calloc(sa->table_cap, sizeof(*sa->table));
	return sa->table ? 0 : -ENOMEM;
}

void suballoc_finish(struct suballoc *sa)
{
	for (size_t i = 0; i < sa->nregions; i++)
		free(sa->regions[i]);
	while (sa->slabs) {
		struct sa_slab *next = sa->slabs->next;

		free(sa->slabs);
		sa->slabs = next;
	}
	free(sa->regions);
	free(sa->table);
	memset(sa, 0, sizeof(*sa));
}

void sa_arena_init(struct sa_arena *arena)
{
	memset(arena, 0, sizeof(*arena));
}

struct sa_region *suballoc_add_region(struct suballoc *sa, struct sa_arena *arena, uintptr_t base,
				      uint64_t size, void *user)
{
	struct sa_region *r;
	struct sa_block *b;
	size_t at;

	if (size == 0 || size > SUBALLOC_MAX_SIZE || base % SUBALLOC_ALIGN ||
	    size % SUBALLOC_ALIGN || base + size < base) {
		errno = EINVAL;
		return NULL;
	}
	at = region_slot(sa, base);
	if ((at > 0 && sa->regions[at - 1]->base + sa->regions[at - 1]->size > base) ||
	    (at < sa->nregions && sa->regions[at]->base < base + size)) {
		errno = EINVAL;
		return NULL;
	}
	if (sa->nregions == sa->regions_cap) {
		size_t cap = sa->regions_cap ? sa->regions_cap * 2 : 16;
		struct sa_region **grown = realloc(sa->regions, cap * sizeof(*grown));

		if (!grown) {
			errno = ENOMEM;
			return NULL;
		}
		sa->regions = grown;
		sa->regions_cap = cap;
	}
	r = calloc(1, sizeof(*r));
	b = r ? block_new(sa) : NULL;
	if (!b) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->base = base;
	r->size = size;
	r->arena = arena;
	r->user = user;
	r->first = b;
	r->next = arena->regions;
	if (r->next)
		r->next->prev = r;
	arena->regions = r;
	arena->nregions++;
	memmove(&sa->regions[at + 1], &sa->regions[at], (sa->nregions - at) * sizeof(*sa->regions));
	sa->regions[at] = r;
	sa->nregions++;
	sa->region_bytes += size;
	b->addr = base;
	b->size = size;
	b->region = r;
	list_insert(arena, b);
	return r;
}

int suballoc_remove_region(struct suballoc *sa, struct sa_region *r)
{
	struct sa_arena *a = r->arena;
	size_t at;

	if (r->live)
		return -EBUSY;
	/* Without live blocks, merging has left one free block spanning the region. */
	list_remove(a, r->first);
	block_put(sa, r->first);
	if (r->prev)
		r->prev->next = r->next;
	else
		a->regions = r->next;
	if (r->next)
		r->next->prev = r->prev;
	a->nregions--;
	at = region_slot(sa, r->base) - 1;
	memmove(&sa->regions[at], &sa->regions[at + 1],
		(sa->nregions - at - 1) * sizeof(*sa->regions));
	sa->nregions--;
	sa->region_bytes -= r->size;
	free(r);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Allocation */

/* take allocates the front rsize bytes of free block b (of size >= rsize). */
static uintptr_t take(struct suballoc *sa, struct sa_block *b, uint64_t rsize, uint64_t size,
		      struct sa_region **region)
{
	struct sa_arena *a = b->region->arena;
	struct sa_block *rest = NULL;

	/* Everything that can fail comes first, so that a failure changes nothing. */
	if (table_reserve(sa))
		return 0;
	if (b->size > rsize && !(rest = block_new(sa)))
		return 0;
	list_remove(a, b);
	if (rest) {
		rest->addr = b->addr + rsize;
		rest->size = b->size - rsize;
		rest->region = b->region;
		rest->prev_phys = b;
		rest->next_phys = b->next_phys;
		if (b->next_phys)
			b->next_phys->prev_phys = rest;
		b->next_phys = rest;
		b->size = rsize;
		list_insert(a, rest);
	}
	b->requested = size;
	table_put(sa->table, sa->table_cap, b);
	sa->table_count++;
	b->region->live++;
	b->region->used += rsize;
	sa->live++;
	sa->used_bytes += rsize;
	sa->requested_bytes += size;
	if (region)
		*region = b->region;
	return b->addr;
}

uintptr_t suballoc_alloc(struct suballoc *sa, struct sa_arena *arena, uint64_t size,
			 struct sa_region **region)
{
	uint64_t rsize = suballoc_round(size);
	struct sa_block *b;
	unsigned fl, sl;

	if (!rsize)
		return 0;
	suballoc_mapping(search_size(rsize), &fl, &sl);
	b = find_suitable(arena, fl, sl);
	if (!b) {
		/* Nothing in the classes above: a block of the request's own class may still be
		 * large enough. */
		suballoc_mapping(rsize, &fl, &sl);
		for (b = arena->heads[fl][sl]; b && b->size < rsize; b = b->next_free)
			;
	}
	return b ? take(sa, b, rsize, size, region) : 0;
}

uintptr_t suballoc_alloc_in(struct suballoc *sa, struct sa_region *region, uint64_t size)
{
	uint64_t rsize = suballoc_round(size);

	if (!rsize)
		return 0;
	for (struct sa_block *b = region->first; b; b = b->next_phys)
		if (b->free && b->size >= rsize)
			return take(sa, b, rsize, size, NULL);
	return 0;
}

int suballoc_free(struct suballoc *sa, uintptr_t addr, uint64_t size, struct sa_region **region)
{
	size_t i = table_index(sa, addr);
	struct sa_block *b, *n, *p;
	struct sa_arena *a;
	struct sa_region *r;

	if (i == SIZE_MAX) {
		r = suballoc_find_region(sa, addr);
		if (region)
			*region = r;
		return r ? -EALREADY : -ENOENT;
	}
	b = sa->table[i];
	r = b->region;
	if (region)
		*region = r;
	if (size != SUBALLOC_ANY_SIZE && size != b->requested)
		return -EINVAL;
	table_remove(sa, i);
	a = r->arena;
	r->live--;
	r->used -= b->size;
	sa->live--;
	sa->used_bytes -= b->size;
	sa->requested_bytes -= b->requested;
	b->requested = 0;
	/* Merge with the free neighbours: the lower record survives. */
	p = b->prev_phys;
	if (p && p->free) {
		list_remove(a, p);
		p->size += b->size;
		p->next_phys = b->next_phys;
		if (b->next_phys)
			b->next_phys->prev_phys = p;
		block_put(sa, b);
		b = p;
	}
	n = b->next_phys;
	if (n && n->free) {
		list_remove(a, n);
		b->size += n->size;
		b->next_phys = n->next_phys;
		if (n->next_phys)
			n->next_phys->prev_phys = b;
		block_put(sa, n);
	}
	list_insert(a, b);
	return 0;
}

uint64_t suballoc_block_size(const struct suballoc *sa, uintptr_t addr)
{
	const struct sa_block *b = suballoc_table_find(sa, addr);

	return b ? b->requested : 0;
}

uint64_t suballoc_largest_free(const struct sa_region *region)
{
	uint64_t best = 0;

	for (const struct sa_block *b = region->first; b; b = b->next_phys)
		if (b->free && b->size > best)
			best = b->size;
	return best;
}
