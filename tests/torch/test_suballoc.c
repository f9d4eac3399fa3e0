/* SPDX-License-Identifier: MIT */
/* test_suballoc.c: the allocator's sub-allocation structure alone, against a reference. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "suballoc.h"

/*
 * The sub-allocator never touches the ranges it manages (they may be GPU memory), so these
 * tests hand it made-up addresses: nothing is mapped there.
 */
#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define BASE ((uintptr_t)0x100000000000ull)
#define SPACING ((uintptr_t)256 * MiB)

static void check(const struct suballoc *sa)
{
	char why[512] = "";

	if (suballoc_verify(sa, why, sizeof(why)) != 0)
		fail_msg("invariant broken: %s", why);
}

static int setup(void **state)
{
	struct suballoc *sa = calloc(1, sizeof(*sa));

	if (!sa || suballoc_init(sa) != 0) {
		free(sa);
		return -1;
	}
	*state = sa;
	return 0;
}

static int teardown(void **state)
{
	struct suballoc *sa = state[0];

	suballoc_finish(sa);
	free(sa);
	return 0;
}

static void test_rounding_and_alignment(void **state)
{
	struct suballoc *sa = state[0];
	struct sa_arena arena;
	static const uint64_t sizes[] = {1, 2, 511, 512, 513, 1000, 1024, 4095, 4096, 12345, 65536};
	uintptr_t prev = 0;
	struct sa_region *r;

	assert_int_equal(suballoc_round(0), 0);
	assert_int_equal(suballoc_round(1), 512);
	assert_int_equal(suballoc_round(512), 512);
	assert_int_equal(suballoc_round(513), 1024);
	assert_int_equal(suballoc_round(UINT64_MAX), 0);
	sa_arena_init(&arena);
	r = suballoc_add_region(sa, &arena, BASE, 2 * MiB, NULL);
	assert_non_null(r);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sa_region *got = NULL;
		uintptr_t p = suballoc_alloc(sa, &arena, sizes[i], &got);

		assert_true(p != 0);
		assert_ptr_equal(got, r);
		assert_int_equal(p % SUBALLOC_ALIGN, 0);
		assert_true(p >= BASE && p + sizes[i] <= BASE + 2 * MiB);
		/* A fresh region is handed out from the front, block after block. */
		if (prev)
			assert_true(p > prev);
		prev = p;
		assert_int_equal(suballoc_block_size(sa, p), sizes[i]);
	}
	assert_int_equal(sa->live, sizeof(sizes) / sizeof(sizes[0]));
	assert_int_equal(suballoc_alloc(sa, &arena, 0, NULL), 0);
	check(sa);
}

static void test_split_and_coalesce(void **state)
{
	struct suballoc *sa = state[0];
	struct sa_region *r, *got = NULL;
	struct sa_arena arena;
	uintptr_t a, b, c;

	sa_arena_init(&arena);
	r = suballoc_add_region(sa, &arena, BASE, 1 * MiB, NULL);
	a = suballoc_alloc(sa, &arena, 1000, NULL);
	b = suballoc_alloc(sa, &arena, 4096, NULL);
	c = suballoc_alloc(sa, &arena, 512, NULL);
	assert_int_equal(a, BASE);
	assert_int_equal(b, BASE + 1024);
	assert_int_equal(c, BASE + 1024 + 4096);
	assert_int_equal(r->live, 3);
	assert_int_equal(r->used, 1024 + 4096 + 512);
	assert_int_equal(suballoc_largest_free(r), 1 * MiB - 1024 - 4096 - 512);
	check(sa);

	/* The middle block alone: a hole that a block of its size fills again. */
	assert_int_equal(suballoc_free(sa, b, 4096, &got), 0);
	assert_ptr_equal(got, r);
	check(sa);
	assert_int_equal(suballoc_alloc(sa, &arena, 4000, NULL), b);
	assert_int_equal(suballoc_free(sa, b, 4000, NULL), 0);
	/* Its lower neighbour merges with it, then the upper block merges everything. */
	assert_int_equal(suballoc_free(sa, a, 1000, NULL), 0);
	check(sa);
	assert_int_equal(suballoc_largest_free(r), 1 * MiB - 1024 - 4096 - 512);
	assert_int_equal(suballoc_free(sa, c, 512, NULL), 0);
	check(sa);
	assert_int_equal(r->live, 0);
	assert_int_equal(r->used, 0);
	assert_int_equal(suballoc_largest_free(r), 1 * MiB);
	assert_int_equal(arena.free_bytes, 1 * MiB);
	assert_int_equal(suballoc_remove_region(sa, r), 0);
	assert_int_equal(sa->nregions, 0);
	assert_int_equal(arena.free_bytes, 0);
	assert_int_equal(arena.fl_bitmap, 0);
	check(sa);
}

static void test_size_classes_good_fit(void **state)
{
	struct suballoc *sa = state[0];
	static const uint64_t holes[] = {4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB};
	uintptr_t hole_at[4], sep[5];
	struct sa_arena arena;

	sa_arena_init(&arena);
	assert_non_null(suballoc_add_region(sa, &arena, BASE, 64 * MiB, NULL));
	/* Holes of four sizes, kept apart by live blocks, in front of a large free tail. */
	for (int i = 0; i < 4; i++) {
		sep[i] = suballoc_alloc(sa, &arena, 512, NULL);
		hole_at[i] = suballoc_alloc(sa, &arena, holes[i], NULL);
	}
	sep[4] = suballoc_alloc(sa, &arena, 512, NULL);
	for (int i = 0; i < 4; i++)
		assert_int_equal(suballoc_free(sa, hole_at[i], holes[i], NULL), 0);
	check(sa);
	/* Each request lands in the smallest hole whose class holds it, not in the tail. */
	assert_int_equal(suballoc_alloc(sa, &arena, 3 * KiB, NULL), hole_at[0]);
	assert_int_equal(suballoc_alloc(sa, &arena, 60 * KiB, NULL), hole_at[1]);
	assert_int_equal(suballoc_alloc(sa, &arena, 900 * KiB, NULL), hole_at[2]);
	assert_int_equal(suballoc_alloc(sa, &arena, 7 * MiB, NULL), hole_at[3]);
	/* The leftovers of those holes serve small requests before the tail does. */
	assert_true(suballoc_alloc(sa, &arena, 100 * KiB, NULL) < sep[4]);
	check(sa);
	(void)sep;
}

static void test_exact_class_fallback(void **state)
{
	struct suballoc *sa = state[0];
	struct sa_arena arena;
	uintptr_t p;

	/*
	 * 33 units of 512 bytes: its class spans 32..33 units, so the rounded-up search looks
	 * from the class above and finds nothing; the block of the request's own class fits.
	 */
	sa_arena_init(&arena);
	assert_non_null(suballoc_add_region(sa, &arena, BASE, 33 * 512, NULL));
	p = suballoc_alloc(sa, &arena, 33 * 512, NULL);
	assert_int_equal(p, BASE);
	assert_int_equal(suballoc_alloc(sa, &arena, 1, NULL), 0);
	assert_int_equal(suballoc_free(sa, p, 33 * 512, NULL), 0);
	/* A block one unit short does not fit. */
	assert_int_equal(suballoc_alloc(sa, &arena, 34 * 512, NULL), 0);
	check(sa);
}

static void test_bad_frees(void **state)
{
	struct suballoc *sa = state[0];
	struct sa_region *got;
	struct sa_arena arena;
	uintptr_t a, b;

	sa_arena_init(&arena);
	assert_non_null(suballoc_add_region(sa, &arena, BASE, 4 * MiB, NULL));
	a = suballoc_alloc(sa, &arena, 10000, NULL);
	b = suballoc_alloc(sa, &arena, 20000, NULL);

	/* Not ours at all. */
	got = (struct sa_region *)1;
	assert_int_equal(suballoc_free(sa, BASE - 512, 10000, &got), -ENOENT);
	assert_null(got);
	assert_int_equal(suballoc_free(sa, BASE + SPACING, 10000, NULL), -ENOENT);
	assert_int_equal(suballoc_free(sa, 12345, 1, NULL), -ENOENT);
	/* Inside a live block, or in free space of a region. */
	assert_int_equal(suballoc_free(sa, a + 512, 10000, NULL), -EALREADY);
	assert_int_equal(suballoc_free(sa, a + 1, 10000, NULL), -EALREADY);
	assert_int_equal(suballoc_free(sa, BASE + 3 * MiB, 10000, NULL), -EALREADY);
	/* A size that does not match leaves the block allocated. */
	assert_int_equal(suballoc_free(sa, a, 10001, NULL), -EINVAL);
	assert_int_equal(suballoc_free(sa, a, 0, NULL), -EINVAL);
	assert_int_equal(suballoc_block_size(sa, a), 10000);
	assert_int_equal(sa->live, 2);
	check(sa);
	/* The right size frees it; a second free is refused. */
	assert_int_equal(suballoc_free(sa, a, 10000, NULL), 0);
	assert_int_equal(suballoc_free(sa, a, 10000, NULL), -EALREADY);
	assert_int_equal(suballoc_free(sa, b, SUBALLOC_ANY_SIZE, NULL), 0);
	assert_int_equal(suballoc_free(sa, b, SUBALLOC_ANY_SIZE, NULL), -EALREADY);
	assert_int_equal(sa->live, 0);
	check(sa);
}

static void test_regions_and_arenas(void **state)
{
	struct suballoc *sa = state[0];
	struct sa_arena one, two;
	struct sa_region *r1, *r2, *got = NULL;
	uintptr_t p;

	sa_arena_init(&one);
	sa_arena_init(&two);
	/* Misaligned, empty and overlapping ranges are refused. */
	errno = 0;
	assert_null(suballoc_add_region(sa, &one, BASE + 1, 1 * MiB, NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(suballoc_add_region(sa, &one, BASE, 1000, NULL));
	assert_null(suballoc_add_region(sa, &one, BASE, 0, NULL));
	r1 = suballoc_add_region(sa, &one, BASE, 2 * MiB, (void *)0x1);
	assert_non_null(r1);
	assert_null(suballoc_add_region(sa, &two, BASE + 1 * MiB, 2 * MiB, NULL));
	assert_null(suballoc_add_region(sa, &two, BASE - 1 * MiB, 2 * MiB, NULL));
	r2 = suballoc_add_region(sa, &two, BASE + 2 * MiB, 2 * MiB, (void *)0x2);
	assert_non_null(r2);
	assert_ptr_equal(suballoc_find_region(sa, BASE + 2 * MiB - 1), r1);
	assert_ptr_equal(suballoc_find_region(sa, BASE + 2 * MiB), r2);
	assert_null(suballoc_find_region(sa, BASE + 4 * MiB));
	assert_null(suballoc_find_region(sa, BASE - 1));

	/* An arena is served only from its own regions. */
	p = suballoc_alloc(sa, &two, 1 * MiB, &got);
	assert_ptr_equal(got, r2);
	assert_true(p >= r2->base);
	assert_int_equal(suballoc_alloc(sa, &two, 2 * MiB, NULL), 0);
	assert_true(suballoc_alloc(sa, &one, 2 * MiB, &got) != 0);
	assert_ptr_equal(got, r1);
	assert_int_equal(suballoc_alloc(sa, &one, 512, NULL), 0);
	/* suballoc_alloc_in serves from the named region only. */
	assert_int_equal(suballoc_alloc_in(sa, r2, 2 * MiB), 0);
	assert_true(suballoc_alloc_in(sa, r2, 1 * MiB) != 0);
	check(sa);

	/* A region with live blocks stays. */
	assert_int_equal(suballoc_remove_region(sa, r1), -EBUSY);
	assert_int_equal(suballoc_free(sa, r1->base, 2 * MiB, NULL), 0);
	assert_int_equal(suballoc_remove_region(sa, r1), 0);
	assert_null(suballoc_find_region(sa, BASE));
	assert_int_equal(suballoc_free(sa, BASE, 2 * MiB, NULL), -ENOENT);
	check(sa);
}

/* ---------------------------------------------------------------------------------------- */
/* Randomized model check */

#define NREGIONS 9
#define MAX_LIVE 6000
#define UNIT SUBALLOC_ALIGN

/* The reference: one bit per 512-byte unit of each region, set while a block holds it. */
struct ref_region {
	uintptr_t base;
	uint64_t size;
	int arena;
	uint64_t *bits;
	struct sa_region *r; /* NULL while not added */
};

struct ref_live {
	uintptr_t addr;
	uint64_t size;
	int region;
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible across runs and machines. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

/* rnd_size draws a tensor-like size: mostly small, log-uniform up to 4 MiB. */
static uint64_t rnd_size(void)
{
	unsigned bits = (unsigned)rnd_below(23); /* up to 4 MiB */
	uint64_t size = (rnd() & ((UINT64_C(1) << bits) - 1)) + 1;

	if (rnd_below(8) == 0)
		size = (size + 511) & ~UINT64_C(511); /* exact multiples too */
	return size;
}

static bool bit_get(const uint64_t *bits, uint64_t i)
{
	return (bits[i / 64] >> (i % 64)) & 1;
}

static void mark(struct ref_region *rr, uintptr_t addr, uint64_t size, bool set)
{
	uint64_t first = (addr - rr->base) / UNIT, n = (size + UNIT - 1) / UNIT;

	for (uint64_t i = first; i < first + n; i++) {
		if (bit_get(rr->bits, i) == set)
			fail_msg("unit %" PRIu64 " of region %#lx is %s already", i,
				 (unsigned long)rr->base, set ? "in use" : "free");
		rr->bits[i / 64] ^= UINT64_C(1) << (i % 64);
	}
}

/* largest_run returns the largest run of free units, in bytes. */
static uint64_t largest_run(const struct ref_region *rr)
{
	uint64_t best = 0, run = 0, units = rr->size / UNIT;

	for (uint64_t i = 0; i < units; i++) {
		if (bit_get(rr->bits, i)) {
			run = 0;
		} else if (++run > best) {
			best = run;
		}
	}
	return best * UNIT;
}

static void test_randomized_against_reference(void **state)
{
	struct suballoc *sa = state[0];
	static const uint64_t region_sizes[NREGIONS] = {
	    2 * MiB, 8 * MiB, 64 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 2 * MiB, 32 * MiB, 6 * MiB};
	struct ref_region regions[NREGIONS];
	struct sa_arena arenas[3];
	struct ref_live *live = calloc(MAX_LIVE, sizeof(*live));
	uintptr_t recent_freed[64] = {0};
	size_t nlive = 0, ops = 0, fails = 0, bad = 0, removed = 0;
	uint64_t used = 0, requested = 0;
	const size_t total_ops = 1000000;
	struct timespec t0, t1;
	double secs;

	assert_non_null(live);
	for (int a = 0; a < 3; a++)
		sa_arena_init(&arenas[a]);
	for (int i = 0; i < NREGIONS; i++) {
		regions[i].base = BASE + (uintptr_t)i * SPACING;
		regions[i].size = region_sizes[i];
		regions[i].arena = i % 3;
		regions[i].bits = calloc(region_sizes[i] / UNIT / 64 + 1, sizeof(uint64_t));
		assert_non_null(regions[i].bits);
		regions[i].r = suballoc_add_region(sa, &arenas[i % 3], regions[i].base,
						   regions[i].size, &regions[i]);
		assert_non_null(regions[i].r);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (ops = 0; ops < total_ops; ops++) {
		uint64_t roll = rnd_below(1000);

		if (roll < 5) {
			/* A bad free: a recently freed address that is not live again, or an
			 * address inside a live block, or a wrong size. */
			uintptr_t addr = recent_freed[rnd_below(64)];
			bool is_live = false;

			for (size_t i = 0; i < nlive && addr; i++)
				is_live |= live[i].addr == addr;
			if (addr && !is_live) {
				int rc = suballoc_free(sa, addr, 512, NULL);

				assert_true(rc == -EALREADY || rc == -ENOENT);
				bad++;
			}
			if (nlive) {
				struct ref_live *l = &live[rnd_below(nlive)];

				assert_int_equal(suballoc_free(sa, l->addr, l->size + 1, NULL),
						 -EINVAL);
				if (l->size > UNIT)
					assert_int_equal(
					    suballoc_free(sa, l->addr + UNIT, l->size, NULL),
					    -EALREADY);
				bad++;
			}
		} else if (roll < 8) {
			/* Take an empty region away, or give one back. */
			int i = (int)rnd_below(NREGIONS);

			if (regions[i].r && regions[i].r->live == 0) {
				assert_int_equal(suballoc_remove_region(sa, regions[i].r), 0);
				regions[i].r = NULL;
				removed++;
			} else if (!regions[i].r) {
				regions[i].r = suballoc_add_region(sa, &arenas[regions[i].arena],
								   regions[i].base, regions[i].size,
								   &regions[i]);
				assert_non_null(regions[i].r);
			}
		} else if (roll < 540 && nlive < MAX_LIVE) {
			int a = (int)rnd_below(3);
			uint64_t size = rnd_size();
			struct sa_region *got = NULL;
			uintptr_t p = suballoc_alloc(sa, &arenas[a], size, &got);

			if (p) {
				struct ref_region *rr = got->user;

				assert_int_equal(p % SUBALLOC_ALIGN, 0);
				assert_int_equal(rr->arena, a);
				assert_true(p >= rr->base && p + size <= rr->base + rr->size);
				mark(rr, p, size, true);
				live[nlive].addr = p;
				live[nlive].size = size;
				live[nlive].region = (int)(rr - regions);
				nlive++;
				used += suballoc_round(size);
				requested += size;
			} else {
				/* A failure is only allowed when no free run of the arena fits. */
				for (int i = 0; i < NREGIONS; i++)
					if (regions[i].r && regions[i].arena == a &&
					    largest_run(&regions[i]) >= suballoc_round(size))
						fail_msg(
						    "%" PRIu64 " bytes refused in arena %d "
						    "though region %d has a free run of %" PRIu64,
						    size, a, i, largest_run(&regions[i]));
				fails++;
			}
		} else if (nlive) {
			/* Out of order: any live block. */
			size_t k = (size_t)rnd_below(nlive);
			struct ref_live l = live[k];
			struct sa_region *got = NULL;

			assert_int_equal(suballoc_free(sa, l.addr, l.size, &got), 0);
			assert_ptr_equal(got->user, &regions[l.region]);
			mark(&regions[l.region], l.addr, l.size, false);
			live[k] = live[--nlive];
			used -= suballoc_round(l.size);
			requested -= l.size;
			recent_freed[rnd_below(64)] = l.addr;
		}
		if (ops % 50000 == 0) {
			check(sa);
			assert_int_equal(sa->live, nlive);
			assert_int_equal(sa->used_bytes, used);
			assert_int_equal(sa->requested_bytes, requested);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	check(sa);
	assert_int_equal(sa->live, nlive);
	assert_int_equal(sa->used_bytes, used);
	/* Everything freed: every region is one free block again, and can be taken away. */
	while (nlive) {
		struct ref_live l = live[--nlive];

		assert_int_equal(suballoc_free(sa, l.addr, l.size, NULL), 0);
		mark(&regions[l.region], l.addr, l.size, false);
	}
	check(sa);
	assert_int_equal(sa->used_bytes, 0);
	for (int i = 0; i < NREGIONS; i++) {
		if (!regions[i].r)
			continue;
		assert_int_equal(suballoc_largest_free(regions[i].r), regions[i].size);
		assert_int_equal(suballoc_remove_region(sa, regions[i].r), 0);
	}
	for (int a = 0; a < 3; a++) {
		assert_int_equal(arenas[a].free_bytes, 0);
		assert_int_equal(arenas[a].nregions, 0);
	}
	check(sa);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# %zu operations in %.2f s (%.0f ns each, reference checks included): %zu "
	       "refused for want of room, %zu bad frees, %zu regions taken away\n",
	       ops, secs, secs * 1e9 / (double)ops, fails, bad, removed);
	assert_true(fails > 0 && bad > 0 && removed > 0); /* every path was taken */
	for (int i = 0; i < NREGIONS; i++)
		free(regions[i].bits);
	free(live);
}

/* The table grows and shrinks its probe chains over many more live blocks than its first
 * capacity, and keeps finding every one (backward-shift deletion leaves no tombstones). */
static void test_many_live_blocks(void **state)
{
	struct suballoc *sa = state[0];
	const size_t n = 200000;
	uintptr_t *addrs = calloc(n, sizeof(*addrs));
	struct sa_arena arena;

	assert_non_null(addrs);
	sa_arena_init(&arena);
	assert_non_null(suballoc_add_region(sa, &arena, BASE, n * 512, NULL));
	for (size_t i = 0; i < n; i++) {
		addrs[i] = suballoc_alloc(sa, &arena, 512, NULL);
		assert_true(addrs[i] != 0);
	}
	assert_true(sa->table_cap >= 2 * n);
	check(sa);
	/* Free every other, then the rest in reverse: each is found by address. */
	for (size_t i = 0; i < n; i += 2)
		assert_int_equal(suballoc_free(sa, addrs[i], 512, NULL), 0);
	for (size_t i = n - 1; i < n; i -= 2)
		assert_int_equal(suballoc_block_size(sa, addrs[i]), 512);
	for (size_t i = n - 1; i < n; i -= 2)
		assert_int_equal(suballoc_free(sa, addrs[i], 512, NULL), 0);
	assert_int_equal(sa->live, 0);
	assert_int_equal(sa->table_count, 0);
	check(sa);
	free(addrs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rounding_and_alignment, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_split_and_coalesce, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_classes_good_fit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exact_class_fallback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_frees, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_regions_and_arenas, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_randomized_against_reference, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_live_blocks, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
