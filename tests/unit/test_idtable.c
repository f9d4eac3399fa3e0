/* SPDX-License-Identifier: MIT */
/* test_idtable.c: the id table's edges: ids never wrap, never 0, order never broken. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/idtable.h"

static int items[8];

/* assert_ordered walks the table: ids strictly increasing, below next_id, n live items. */
static void assert_ordered(const struct idtable *t, size_t n)
{
	uint64_t after = 0, id = 0, prev = 0;
	size_t seen = 0;

	while (idtable_next(t, after, &id)) {
		assert_true(id > prev);
		assert_true(id != 0 && id <= IDTABLE_MAX_ID);
		assert_true(id < t->next_id);
		prev = after = id;
		seen++;
		assert_true(seen <= n);
	}
	assert_int_equal(seen, n);
	for (size_t i = 1; i < t->len; i++)
		assert_true(t->slots[i - 1].id < t->slots[i].id);
}

/* The counter stops at the top: -EOVERFLOW, nothing added, never 0, never a wrap. */
static void test_add_never_wraps(void **state)
{
	struct idtable t;
	uint64_t id = 0;

	(void)state;
	idtable_init(&t);
	assert_int_equal(idtable_add(&t, &items[0], &id), 0);
	assert_int_equal(id, 1);
	idtable_skip_to(&t, IDTABLE_MAX_ID - 1);
	assert_int_equal(idtable_add(&t, &items[1], &id), 0);
	assert_int_equal(id, IDTABLE_MAX_ID - 1);
	assert_int_equal(idtable_add(&t, &items[2], &id), 0);
	assert_int_equal(id, IDTABLE_MAX_ID);
	id = 42;
	assert_int_equal(idtable_add(&t, &items[3], &id), -EOVERFLOW);
	assert_int_equal(idtable_add(&t, &items[3], &id), -EOVERFLOW);
	assert_int_equal(id, 42);
	assert_int_equal(t.count, 3);
	assert_ordered(&t, 3);
	/* Removing gives nothing back to the counter: ids are never reused. */
	assert_int_equal(idtable_remove(&t, IDTABLE_MAX_ID), 0);
	assert_int_equal(idtable_add(&t, &items[3], &id), -EOVERFLOW);
	assert_null(idtable_find(&t, 0));
	assert_null(idtable_find(&t, UINT64_MAX));
	assert_int_equal(idtable_remove(&t, 1), 0);
	assert_int_equal(idtable_remove(&t, IDTABLE_MAX_ID - 1), 0);
	idtable_finish(&t);
}

/* skip_to the very top: exhausted at once, still in order. */
static void test_skip_to_top(void **state)
{
	struct idtable t;
	uint64_t id;

	(void)state;
	idtable_init(&t);
	idtable_skip_to(&t, UINT64_MAX);
	assert_int_equal(idtable_add(&t, &items[0], &id), -EOVERFLOW);
	idtable_skip_to(&t, 5); /* never backwards */
	assert_int_equal(t.next_id, UINT64_MAX);
	assert_int_equal(idtable_add(&t, &items[0], &id), -EOVERFLOW);
	assert_int_equal(t.count, 0);
	idtable_finish(&t);
}

/* F1 at the table: a chosen id at or above the counter is refused, so it cannot move it. */
static void test_insert_never_moves_the_counter(void **state)
{
	const uint64_t edges[] = {
	    0, 3, 4, 1000, (uint64_t)1 << 63, UINT64_MAX - 2, IDTABLE_MAX_ID, UINT64_MAX};
	struct idtable t;
	uint64_t id;

	(void)state;
	idtable_init(&t);
	for (int i = 0; i < 3; i++)
		assert_int_equal(idtable_add(&t, &items[i], &id), 0);
	assert_int_equal(t.next_id, 4);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		if (edges[i] != 0 && edges[i] < 4)
			continue;
		assert_int_equal(idtable_insert(&t, edges[i], &items[5]), -EINVAL);
		assert_int_equal(t.next_id, 4);
		assert_null(idtable_find(&t, edges[i]));
	}
	/* The next ids are the counter's, whatever was asked for. */
	assert_int_equal(idtable_add(&t, &items[3], &id), 0);
	assert_int_equal(id, 4);
	assert_int_equal(idtable_add(&t, &items[4], &id), 0);
	assert_int_equal(id, 5);
	assert_ordered(&t, 5);
	for (uint64_t k = 1; k <= 5; k++)
		assert_int_equal(idtable_remove(&t, k), 0);
	idtable_finish(&t);
}

/* Below the counter: live and reserved ids are refused, a gap or a tombstone is taken. */
static void test_insert_below(void **state)
{
	struct idtable t;
	uint64_t id;

	(void)state;
	idtable_init(&t);
	assert_int_equal(idtable_reserve(&t, 3), 0);
	idtable_skip_to(&t, 10);
	assert_int_equal(idtable_add(&t, &items[0], &id), 0);
	assert_int_equal(id, 10);
	assert_int_equal(idtable_insert(&t, 10, &items[1]), -EEXIST); /* live */
	assert_int_equal(idtable_insert(&t, 3, &items[1]), -EEXIST);  /* reserved */
	assert_int_equal(idtable_insert(&t, 7, &items[1]), 0);	      /* a gap */
	assert_ptr_equal(idtable_find(&t, 7), &items[1]);
	assert_int_equal(idtable_remove(&t, 7), 0);
	assert_int_equal(idtable_insert(&t, 7, &items[2]), 0); /* its tombstone */
	assert_ptr_equal(idtable_find(&t, 7), &items[2]);
	assert_int_equal(idtable_insert(&t, 1, &items[3]), 0); /* before everything */
	assert_int_equal(t.next_id, 11);
	assert_ordered(&t, 3);
	assert_int_equal(idtable_unreserve(&t, 3), 0);
	assert_int_equal(idtable_remove(&t, 1), 0);
	assert_int_equal(idtable_remove(&t, 7), 0);
	assert_int_equal(idtable_remove(&t, 10), 0);
	idtable_finish(&t);
}

/* reserve refuses 0, the top and anything out of order, changing nothing. */
static void test_reserve_refuses_disorder(void **state)
{
	struct idtable t;
	uint64_t id;

	(void)state;
	idtable_init(&t);
	assert_int_equal(idtable_reserve(&t, 0), -EINVAL);
	assert_int_equal(idtable_reserve(&t, UINT64_MAX), -EINVAL);
	assert_int_equal(idtable_reserve(&t, 5), 0);
	assert_int_equal(idtable_reserve(&t, 5), -EINVAL); /* twice */
	assert_int_equal(idtable_reserve(&t, 2), -EINVAL); /* below the counter */
	assert_int_equal(t.next_id, 6);
	assert_int_equal(t.count, 1);
	assert_int_equal(idtable_reserve(&t, IDTABLE_MAX_ID), 0);
	assert_int_equal(idtable_add(&t, &items[0], &id), -EOVERFLOW);
	assert_null(idtable_find(&t, 5)); /* reserved is not live */
	assert_null(idtable_next(&t, 0, &id));
	assert_int_equal(idtable_fill(&t, 5, &items[0]), 0);
	assert_ordered(&t, 1);
	assert_int_equal(idtable_remove(&t, 5), 0);
	assert_int_equal(idtable_unreserve(&t, IDTABLE_MAX_ID), 0);
	idtable_finish(&t);
}

/* remove and unreserve of what is not there: -ENOENT, nothing changed (once an assert). */
static void test_remove_missing(void **state)
{
	struct idtable t;
	uint64_t id;

	(void)state;
	idtable_init(&t);
	assert_int_equal(idtable_remove(&t, 1), -ENOENT); /* empty */
	assert_int_equal(idtable_unreserve(&t, 1), -ENOENT);
	assert_int_equal(idtable_add(&t, &items[0], &id), 0);
	assert_int_equal(idtable_reserve(&t, 4), 0);
	assert_int_equal(idtable_remove(&t, 4), -ENOENT);    /* reserved, not live */
	assert_int_equal(idtable_unreserve(&t, 1), -ENOENT); /* live, not reserved */
	assert_int_equal(idtable_remove(&t, 2), -ENOENT);    /* never issued */
	assert_int_equal(idtable_remove(&t, UINT64_MAX), -ENOENT);
	assert_int_equal(idtable_remove(&t, 0), -ENOENT);
	assert_int_equal(t.count, 2);
	assert_int_equal(idtable_remove(&t, 1), 0);
	assert_int_equal(idtable_remove(&t, 1), -ENOENT); /* twice */
	assert_int_equal(idtable_unreserve(&t, 4), 0);
	assert_int_equal(idtable_unreserve(&t, 4), -ENOENT);
	assert_int_equal(t.count, 0);
	idtable_finish(&t);
}

/* each walks what next walks, in the same order, skipping removed and reserved ids. */
static void test_each_in_order(void **state)
{
	struct idtable t;
	static int slots[100];
	uint64_t id, want = 0, got;
	size_t pos = 0;
	void *item;

	(void)state;
	idtable_init(&t);
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(idtable_add(&t, &slots[i], &id), 0);
	for (uint64_t i = 1; i <= 100; i += 3)
		assert_int_equal(idtable_remove(&t, i), 0);
	assert_int_equal(idtable_reserve(&t, 200), 0);
	while ((item = idtable_each(&t, &pos, &got))) {
		assert_ptr_equal(item, idtable_next(&t, want, &want));
		assert_int_equal(got, want);
	}
	assert_null(idtable_next(&t, want, &id));
	for (uint64_t i = 1; i <= 100; i++)
		idtable_remove(&t, i);
	assert_int_equal(idtable_unreserve(&t, 200), 0);
	idtable_finish(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_never_wraps),
	    cmocka_unit_test(test_skip_to_top),
	    cmocka_unit_test(test_insert_never_moves_the_counter),
	    cmocka_unit_test(test_insert_below),
	    cmocka_unit_test(test_reserve_refuses_disorder),
	    cmocka_unit_test(test_remove_missing),
	    cmocka_unit_test(test_each_in_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
