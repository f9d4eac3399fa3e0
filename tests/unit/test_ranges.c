/* SPDX-License-Identifier: MIT */
/* test_ranges.c: the arena's range allocator against a bitmap reference, and its arena. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "state/arena.h"
#include "state/ranges.h"

#define SPACE 509u /* not a power of two: the last range ends short of one */

struct ref {
	bool taken[SPACE];
};

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rnd(uint64_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state % n;
}

/* ref_first_fit is the lowest start of n free granules in the reference, or -1. */
static long ref_first_fit(const struct ref *f, uint64_t n)
{
	uint64_t run = 0;

	for (uint64_t i = 0; i < SPACE; i++) {
		run = f->taken[i] ? 0 : run + 1;
		if (run == n)
			return (long)(i + 1 - n);
	}
	return -1;
}

/* ref_stats counts the reference's free granules and its longest free run. */
static void ref_stats(const struct ref *f, uint64_t *free, uint64_t *longest)
{
	uint64_t run = 0;

	*free = *longest = 0;
	for (uint64_t i = 0; i < SPACE; i++) {
		run = f->taken[i] ? 0 : run + 1;
		*free += !f->taken[i];
		if (run > *longest)
			*longest = run;
	}
}

struct held {
	uint64_t start, n;
};

/* Random churn: every answer equals the reference's, and the invariants hold at every step. */
static void test_churn_matches_reference(void **state)
{
	static struct held held[SPACE];
	struct ranges r;
	struct ref f = {0};
	unsigned nheld = 0, fits = 0, nofit_fragmented = 0;

	(void)state;
	assert_int_equal(ranges_init(&r, SPACE), 0);
	for (unsigned step = 0; step < 40000; step++) {
		uint64_t free, longest, start;

		if (nheld > 0 && rnd(100) < 45) {
			unsigned k = (unsigned)rnd(nheld);

			assert_int_equal(ranges_free(&r, held[k].start, held[k].n), 0);
			/* The same range again is a double free: refused, nothing changes. */
			assert_int_equal(ranges_free(&r, held[k].start, held[k].n), -EINVAL);
			memset(&f.taken[held[k].start], 0, held[k].n);
			held[k] = held[--nheld];
		} else {
			uint64_t n = 1 + rnd(rnd(4) == 0 ? 64 : 8);
			long want = ref_first_fit(&f, n);
			int err = ranges_alloc(&r, n, &start);

			if (want < 0) {
				assert_int_equal(err, -ENOSPC);
				ref_stats(&f, &free, &longest);
				nofit_fragmented += free >= n;
			} else {
				assert_int_equal(err, 0);
				assert_int_equal(start, (uint64_t)want);
				memset(&f.taken[start], 1, n);
				held[nheld++] = (struct held){start, n};
				fits++;
			}
		}
		ref_stats(&f, &free, &longest);
		assert_int_equal(r.free, free);
		assert_int_equal(ranges_largest(&r), longest);
		assert_int_equal(ranges_check(&r), 0);
	}
	/* The churn reached both answers, and the fragmented refusal among them. */
	assert_true(fits > 1000);
	assert_true(nofit_fragmented > 0);
	while (nheld > 0) {
		nheld--;
		assert_int_equal(ranges_free(&r, held[nheld].start, held[nheld].n), 0);
	}
	/* Everything back: one range again. */
	assert_int_equal(r.count, 1);
	assert_int_equal(ranges_largest(&r), SPACE);
	assert_int_equal(ranges_check(&r), 0);
	ranges_finish(&r);
}

/* Claims take exactly what was recorded, and refuse overlaps and the outside. */
static void test_claim(void **state)
{
	struct ranges r;
	uint64_t start;

	(void)state;
	assert_int_equal(ranges_init(&r, 100), 0);
	assert_int_equal(ranges_claim(&r, 10, 5), 0);
	assert_int_equal(ranges_claim(&r, 12, 1), -EBUSY);
	assert_int_equal(ranges_claim(&r, 5, 6), -EBUSY);  /* overlaps its start */
	assert_int_equal(ranges_claim(&r, 14, 3), -EBUSY); /* overlaps its end */
	assert_int_equal(ranges_claim(&r, 0, 10), 0);	   /* right below: fine */
	assert_int_equal(ranges_claim(&r, 99, 2), -ERANGE);
	assert_int_equal(ranges_claim(&r, 100, 1), -ERANGE);
	assert_int_equal(ranges_claim(&r, 3, 0), -ERANGE);
	assert_int_equal(ranges_claim(&r, UINT64_MAX, 2), -ERANGE);
	assert_int_equal(ranges_check(&r), 0);
	assert_int_equal(ranges_alloc(&r, 1, &start), 0);
	assert_int_equal(start, 15);
	assert_int_equal(ranges_free(&r, 0, 16), 0); /* several grants freed as one range */
	assert_int_equal(ranges_free(&r, 50, 1), -EINVAL);
	assert_int_equal(ranges_free(&r, 99, 5), -EINVAL);
	assert_int_equal(r.count, 1);
	assert_int_equal(ranges_check(&r), 0);
	ranges_finish(&r);
}

/*
 * The documented answer to a lease that fits no free range while enough is free in all: the
 * arena says -ENOSPC, its fragmentation shows why, and the daemon serves that lease from a
 * memfd of its own (counted in arena_fallbacks; docs/protocol.md).
 */
static void test_fragmented_arena(void **state)
{
	const uint64_t g = 2u << 20;
	struct arena a;
	uint64_t off[8];

	(void)state;
	assert_int_equal(arena_init(&a, 7, 0, 8 * g, g), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(arena_take(&a, g, &off[i]), 0);
		assert_int_equal(off[i], (uint64_t)i * g);
	}
	for (int i = 0; i < 8; i += 2)
		assert_int_equal(arena_give(&a, off[i], g), 0);
	assert_int_equal(arena_free_bytes(&a), 4 * g);
	assert_int_equal(arena_largest_free(&a), g);
	assert_int_equal(arena_fragmentation_permille(&a), 750);
	assert_int_equal(arena_take(&a, 2 * g, &off[0]), -ENOSPC);
	/* One neighbour back: the hole grows to three granules and a 2-granule lease fits. */
	assert_int_equal(arena_give(&a, off[1], g), 0);
	assert_int_equal(arena_take(&a, 2 * g, &off[0]), 0);
	assert_int_equal(off[0], 0);
	assert_int_equal(arena_give(&a, 3, g), -EINVAL);
	assert_int_equal(arena_claim(&a, g / 2, g), -ERANGE);
	assert_int_equal(arena_init(&(struct arena){0}, 1, 0, g + 1, g), -EINVAL);
	arena_finish(&a);
}

/* A large space stays cheap: memory and steps follow the free ranges, not the granules. */
static void test_large_space(void **state)
{
	struct ranges r;
	uint64_t start, prev = 0;

	(void)state;
	assert_int_equal(ranges_init(&r, (uint64_t)1 << 40), 0);
	for (unsigned i = 0; i < 100000; i++) {
		assert_int_equal(ranges_alloc(&r, 1, &start), 0);
		assert_true(i == 0 || start == prev + 1);
		prev = start;
	}
	for (uint64_t i = 0; i < 100000; i += 2)
		assert_int_equal(ranges_free(&r, i, 1), 0);
	assert_int_equal(r.count, 50001);
	assert_int_equal(ranges_check(&r), 0);
	ranges_finish(&r);
}

/*
 * Warm ranges: a released range kept for the next lease of exactly its size (newest first),
 * bounded in count and bytes, popped oldest first by age, and given back unleased.
 */
static void test_warm_ranges(void **state)
{
	const uint64_t g = 2u << 20;
	struct arena_warm w;
	struct arena a;
	uint64_t off[ARENA_WARM_MAX + 2], o;

	(void)state;
	assert_int_equal(arena_init(&a, 9, 0, 64 * g, g), 0);
	for (unsigned i = 0; i < ARENA_WARM_MAX + 2; i++)
		assert_int_equal(arena_take(&a, (i % 2 + 1) * g, &off[i]), 0);
	/* Over the byte cap: not kept, nothing changed. */
	assert_false(arena_warm_keep(&a, off[1], 2 * g, 5, g));
	assert_int_equal(a.leases, ARENA_WARM_MAX + 2);
	for (unsigned i = 0; i < ARENA_WARM_MAX; i++)
		assert_true(arena_warm_keep(&a, off[i], (i % 2 + 1) * g, 10 + i, 64 * g));
	/* Full: the ninth is punched as any release would be. */
	assert_false(arena_warm_keep(&a, off[ARENA_WARM_MAX], g, 30, 64 * g));
	assert_int_equal(a.leases, 2);
	assert_int_equal(a.warm_bytes, (ARENA_WARM_MAX / 2) * 3 * g);
	assert_int_equal(arena_free_bytes(&a) + a.used + a.warm_bytes, a.size);
	/* The newest of that exact size comes back; no size match, no range. */
	assert_true(arena_warm_take(&a, 2 * g, &o));
	assert_int_equal(o, off[ARENA_WARM_MAX - 1]);
	assert_false(arena_warm_take(&a, 3 * g, &o));
	assert_int_equal(a.leases, 3);
	/* Popped oldest first, only when old enough. */
	assert_false(arena_warm_pop(&a, 9, &w));
	assert_true(arena_warm_pop(&a, 11, &w));
	assert_int_equal(w.offset, off[0]);
	assert_int_equal(arena_give_unleased(&a, w.offset, w.bytes), 0);
	assert_true(arena_warm_pop(&a, 11, &w));
	assert_int_equal(w.offset, off[1]);
	assert_int_equal(arena_give_unleased(&a, w.offset, w.bytes), 0);
	assert_false(arena_warm_pop(&a, 11, &w));
	assert_int_equal(arena_give_unleased(&a, off[0], g), -EINVAL); /* given back already */
	while (arena_warm_pop(&a, UINT64_MAX, &w))
		assert_int_equal(arena_give_unleased(&a, w.offset, w.bytes), 0);
	assert_int_equal(a.nwarm, 0);
	assert_int_equal(a.warm_bytes, 0);
	assert_int_equal(arena_free_bytes(&a) + a.used, a.size);
	arena_finish(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_churn_matches_reference),
	    cmocka_unit_test(test_claim),
	    cmocka_unit_test(test_fragmented_arena),
	    cmocka_unit_test(test_large_space),
	    cmocka_unit_test(test_warm_ranges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
