/* SPDX-License-Identifier: MIT */
/* test_heap.c: the deadline heap: order, ties, removal by handle, against a sorted reference. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/heap.h"

/* assert_same compares two entries field by field (the struct has padding). */
static void assert_same(const struct heap_entry *a, const struct heap_entry *b)
{
	assert_int_equal(a->due_ms, b->due_ms);
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->id, b->id);
}

/* Pops everything, checking that each entry comes after the one before it. */
static unsigned drain_in_order(struct heap *h)
{
	struct heap_entry prev = {0}, e;
	unsigned n = 0;

	while (heap_pop(h, &e)) {
		if (n > 0) {
			assert_true(prev.due_ms <= e.due_ms);
			if (prev.due_ms == e.due_ms) {
				assert_true(prev.kind <= e.kind);
				if (prev.kind == e.kind)
					assert_true(prev.id < e.id);
			}
		}
		prev = e;
		n++;
	}
	return n;
}

static void test_pop_order(void **state)
{
	static const uint64_t due[] = {50, 10, 40, 10, 30, 20, 60, 5, 5, 100};
	struct heap h;
	uint32_t k;

	(void)state;
	heap_init(&h);
	assert_null(heap_top(&h, NULL));
	for (unsigned i = 0; i < sizeof(due) / sizeof(due[0]); i++) {
		struct heap_entry e = {.due_ms = due[i], .kind = 1, .id = i + 1};

		assert_int_equal(heap_push(&h, &e, &k), 0);
		assert_int_not_equal(k, 0);
	}
	assert_int_equal(heap_size(&h), 10);
	assert_int_equal(heap_top(&h, NULL)->due_ms, 5);
	assert_int_equal(heap_top(&h, NULL)->id, 8); /* the first of the two due at 5 */
	assert_int_equal(drain_in_order(&h), 10);
	assert_int_equal(heap_size(&h), 0);
	heap_finish(&h);
}

/* Ties are broken by kind, then by id, whatever the order of pushes. */
static void test_ties(void **state)
{
	struct heap_entry in[] = {
	    {7, 2, 1}, {7, 1, 9}, {7, 1, 3}, {7, 2, 0}, {6, 9, 9},
	};
	struct heap_entry want[] = {
	    {6, 9, 9}, {7, 1, 3}, {7, 1, 9}, {7, 2, 0}, {7, 2, 1},
	};
	struct heap h;
	uint32_t k;

	(void)state;
	heap_init(&h);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(heap_push(&h, &in[i], &k), 0);
	for (unsigned i = 0; i < 5; i++) {
		struct heap_entry e;

		assert_true(heap_pop(&h, &e));
		assert_same(&e, &want[i]);
	}
	heap_finish(&h);
}

/* Any entry can be removed by its handle; a handle removed is refused after. */
static void test_remove_any(void **state)
{
	struct heap h;
	uint32_t k[32];

	(void)state;
	heap_init(&h);
	for (unsigned i = 0; i < 32; i++) {
		struct heap_entry e = {.due_ms = (i * 7919u) % 101u, .kind = 1, .id = i};

		assert_int_equal(heap_push(&h, &e, &k[i]), 0);
	}
	for (unsigned i = 0; i < 32; i += 3) {
		const struct heap_entry *e = heap_get(&h, k[i]);

		assert_non_null(e);
		assert_int_equal(e->id, i);
		assert_int_equal(heap_remove(&h, k[i]), 0);
		assert_null(heap_get(&h, k[i]));
		assert_int_equal(heap_remove(&h, k[i]), -ENOENT);
	}
	assert_int_equal(heap_remove(&h, 0), -ENOENT);
	assert_int_equal(heap_remove(&h, 1000), -ENOENT);
	for (unsigned i = 0; i < 32; i++)
		if (i % 3 != 0)
			assert_int_equal(heap_get(&h, k[i])->id, i);
	assert_int_equal(drain_in_order(&h), 32 - 11);
	heap_finish(&h);
}

/* A moved deadline takes its new place, earlier or later. */
static void test_update(void **state)
{
	struct heap h;
	uint32_t k[4], top;

	(void)state;
	heap_init(&h);
	for (unsigned i = 0; i < 4; i++) {
		struct heap_entry e = {.due_ms = 10 * (i + 1), .kind = 1, .id = i};

		assert_int_equal(heap_push(&h, &e, &k[i]), 0);
	}
	assert_int_equal(heap_update(&h, k[3], 1), 0);
	assert_int_equal(heap_top(&h, &top)->id, 3);
	assert_int_equal(top, k[3]);
	assert_int_equal(heap_update(&h, k[3], 1000), 0);
	assert_int_equal(heap_top(&h, NULL)->id, 0);
	assert_int_equal(heap_update(&h, 99, 5), -ENOENT);
	heap_finish(&h);
}

/* A tiny generator, so that every run does the same operations. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct ref {
	struct heap_entry e;
	uint32_t handle;
	bool live;
};

static int cmp_ref(const void *pa, const void *pb)
{
	const struct heap_entry *a = &((const struct ref *)pa)->e,
				*b = &((const struct ref *)pb)->e;

	if (a->due_ms != b->due_ms)
		return a->due_ms < b->due_ms ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* reference_min is the earliest live entry of the reference, by a plain scan. */
static const struct ref *reference_min(const struct ref *r, size_t n)
{
	const struct ref *best = NULL;

	for (size_t i = 0; i < n; i++)
		if (r[i].live && (!best || cmp_ref(&r[i], best) < 0))
			best = &r[i];
	return best;
}

/* 100,000 random pushes, pops, removals and updates, each checked against the reference. */
static void test_random_against_reference(void **state)
{
	enum { OPS = 100000, MAX = 1024 };
	struct ref *r = calloc(MAX, sizeof(*r));
	uint64_t seed = 0x5eedULL, next_id = 1;
	size_t nref = 0, live = 0;
	struct heap h;

	(void)state;
	assert_non_null(r);
	heap_init(&h);
	for (unsigned op = 0; op < OPS; op++) {
		unsigned what = (unsigned)(next_rand(&seed) % 10);
		const struct ref *min;

		if ((what < 4 || live == 0) && nref < MAX) {
			struct ref *x = &r[nref++];

			x->e.due_ms = next_rand(&seed) % 500;
			x->e.kind = (uint32_t)(next_rand(&seed) % 3);
			x->e.id = next_id++;
			x->live = true;
			assert_int_equal(heap_push(&h, &x->e, &x->handle), 0);
			live++;
		} else if (what < 6 && live > 0) {
			struct heap_entry e;

			min = reference_min(r, nref);
			assert_true(heap_pop(&h, &e));
			assert_same(&e, &min->e);
			((struct ref *)min)->live = false;
			live--;
		} else if (what < 8 && live > 0) {
			size_t i = next_rand(&seed) % nref;

			/* (a dead one's handle may be another entry's by now) */
			if (r[i].live) {
				assert_int_equal(heap_remove(&h, r[i].handle), 0);
				r[i].live = false;
				live--;
			}
		} else if (live > 0) {
			size_t i = next_rand(&seed) % nref;

			if (r[i].live) {
				r[i].e.due_ms = next_rand(&seed) % 500;
				assert_int_equal(heap_update(&h, r[i].handle, r[i].e.due_ms), 0);
			}
		}
		/* Dead references are compacted away now and then; handles may be reused. */
		if (nref == MAX) {
			size_t out = 0;

			for (size_t i = 0; i < nref; i++)
				if (r[i].live)
					r[out++] = r[i];
			nref = out;
		}
		assert_int_equal(heap_size(&h), live);
		min = reference_min(r, nref);
		if (min)
			assert_same(heap_top(&h, NULL), &min->e);
		else
			assert_null(heap_top(&h, NULL));
	}
	heap_finish(&h);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pop_order),
	    cmocka_unit_test(test_ties),
	    cmocka_unit_test(test_remove_any),
	    cmocka_unit_test(test_update),
	    cmocka_unit_test(test_random_against_reference),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
