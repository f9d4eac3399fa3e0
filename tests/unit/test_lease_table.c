/* SPDX-License-Identifier: MIT */
/* test_lease_table.c: unit tests of daemon/lease: ids, lookup, ordered iteration, spares. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "state/lease.h"

#define MANY 100000u

struct fixture {
	struct lease_table table;
	struct lease *leases; /* MANY of them */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->leases = calloc(MANY, sizeof(*f->leases));
	if (!f->leases) {
		free(f);
		return -1;
	}
	lease_table_init(&f->table);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	free(f->table.ids.slots);
	free(f->leases);
	free(f);
	return 0;
}

static void add(struct lease_table *t, struct lease *l, uint64_t want_id)
{
	l->id = 0;
	assert_int_equal(lease_table_add(t, l), 0);
	assert_int_equal(l->id, want_id);
}

static void test_init_finish_empty(void **state)
{
	struct lease_table t;

	(void)state;
	memset(&t, 0xff, sizeof(t));
	lease_table_init(&t);
	assert_int_equal(t.ids.count, 0);
	assert_int_equal(t.ids.next_id, 1);
	assert_null(lease_table_find(&t, 0));
	assert_null(lease_table_find(&t, 1));
	assert_null(lease_table_next(&t, 0));
	assert_null(lease_table_next(&t, UINT64_MAX));
	lease_table_finish(&t);
	assert_null(t.ids.slots);
	assert_int_equal(t.ids.len, 0);
	assert_int_equal(t.ids.cap, 0);
}

/* New leases are zeroed, released ones come back zeroed, and no more than LEASE_SPARES wait:
 * the rest are freed, as the spares are at finish (a leak checker sees any left). */
static void test_spares(void **state)
{
	static const struct lease zero;
	struct lease *l[LEASE_SPARES + 3], *again;
	struct lease_table t;

	(void)state;
	lease_table_init(&t);
	for (unsigned i = 0; i < LEASE_SPARES + 3; i++) {
		l[i] = lease_table_new(&t);
		assert_non_null(l[i]);
		assert_memory_equal(l[i], &zero, sizeof(zero));
		assert_int_equal(lease_table_add(&t, l[i]), 0);
		l[i]->size = 1u << 21;
		memset(l[i]->tag, 'x', sizeof(l[i]->tag));
	}
	for (unsigned i = 0; i < LEASE_SPARES + 3; i++) {
		lease_table_remove(&t, l[i]);
		lease_table_dispose(&t, l[i]);
		assert_int_equal(t.nspare, i < LEASE_SPARES ? i + 1 : LEASE_SPARES);
	}
	/* The newest spare first, wiped. */
	again = lease_table_new(&t);
	assert_ptr_equal(again, l[LEASE_SPARES - 1]);
	assert_memory_equal(again, &zero, sizeof(zero));
	assert_int_equal(t.nspare, LEASE_SPARES - 1);
	assert_int_equal(lease_table_add(&t, again), 0);
	assert_int_equal(again->id, LEASE_SPARES + 4); /* ids are never reused */
	lease_table_remove(&t, again);
	free(again); /* a plain free is fine too */
	lease_table_finish(&t);
	assert_int_equal(t.nspare, 0);
}

static void test_ids(void **state)
{
	struct fixture *f = *state;
	struct lease_table *t = &f->table;
	struct lease *l = f->leases;

	add(t, &l[0], 1);
	add(t, &l[1], 2);
	add(t, &l[2], 3);
	assert_int_equal(t->ids.count, 3);

	/* Removing the newest does not give its id back. */
	lease_table_remove(t, &l[2]);
	add(t, &l[3], 4);
	lease_table_remove(t, &l[0]);
	lease_table_remove(t, &l[1]);
	lease_table_remove(t, &l[3]);
	assert_int_equal(t->ids.count, 0);
	add(t, &l[4], 5);
	assert_int_equal(t->ids.count, 1);
	lease_table_remove(t, &l[4]);

	/* Finishing an emptied table frees its index. */
	lease_table_finish(t);
	assert_null(t->ids.slots);
	assert_int_equal(t->ids.len, 0);
}

static void test_find(void **state)
{
	struct fixture *f = *state;
	struct lease_table *t = &f->table;
	struct lease *l = f->leases;

	for (unsigned i = 0; i < 4; i++)
		add(t, &l[i], i + 1);
	lease_table_remove(t, &l[1]);

	assert_ptr_equal(lease_table_find(t, 1), &l[0]);
	assert_null(lease_table_find(t, 2)); /* removed */
	assert_ptr_equal(lease_table_find(t, 3), &l[2]);
	assert_ptr_equal(lease_table_find(t, 4), &l[3]);
	assert_null(lease_table_find(t, 0)); /* never issued */
	assert_null(lease_table_find(t, 5));
	assert_null(lease_table_find(t, 1000));
	assert_null(lease_table_find(t, UINT64_MAX));
	assert_int_equal(t->ids.count, 3);

	lease_table_remove(t, &l[0]);
	lease_table_remove(t, &l[2]);
	lease_table_remove(t, &l[3]);
}

static void test_next(void **state)
{
	struct fixture *f = *state;
	struct lease_table *t = &f->table;
	struct lease *l = f->leases;

	for (unsigned i = 0; i < 6; i++)
		add(t, &l[i], i + 1);
	lease_table_remove(t, &l[0]);
	lease_table_remove(t, &l[2]);
	lease_table_remove(t, &l[3]);
	lease_table_remove(t, &l[5]);
	/* Live: 2 and 5. */
	assert_ptr_equal(lease_table_next(t, 0), &l[1]);
	assert_ptr_equal(lease_table_next(t, 1), &l[1]);
	assert_ptr_equal(lease_table_next(t, 2), &l[4]);
	assert_ptr_equal(lease_table_next(t, 3), &l[4]); /* resumes after a removed id */
	assert_ptr_equal(lease_table_next(t, 4), &l[4]);
	assert_null(lease_table_next(t, 5));
	assert_null(lease_table_next(t, 6));
	assert_null(lease_table_next(t, 1000));
	assert_null(lease_table_next(t, UINT64_MAX - 1));
	assert_null(lease_table_next(t, UINT64_MAX));

	lease_table_remove(t, &l[1]);
	lease_table_remove(t, &l[4]);
	assert_null(lease_table_next(t, 0));
	assert_int_equal(t->ids.count, 0);
}

/* assert_live checks find, next and count against the expected set of live leases. */
static void assert_live(const struct fixture *f, const bool *live, unsigned issued)
{
	const struct lease_table *t = &f->table;
	uint64_t count = 0, after = 0;

	for (unsigned i = 0; i < issued; i++) {
		struct lease *got = lease_table_find(t, i + 1);

		if (live[i]) {
			count++;
			if (got != &f->leases[i])
				fail_msg("lease %u not found", i + 1);
		} else if (got) {
			fail_msg("lease %u found after removal", i + 1);
		}
	}
	assert_int_equal(t->ids.count, count);
	/* Iteration visits exactly the live leases, in id order. */
	for (unsigned i = 0; i < issued; i++) {
		struct lease *got;

		if (!live[i])
			continue;
		got = lease_table_next(t, after);
		if (got != &f->leases[i])
			fail_msg("next(%llu) is not lease %u", (unsigned long long)after, i + 1);
		after = got->id;
	}
	assert_null(lease_table_next(t, after));
}

static void test_many(void **state)
{
	struct fixture *f = *state;
	struct lease_table *t = &f->table;
	bool *live = calloc(MANY, sizeof(bool));

	assert_non_null(live);
	for (unsigned i = 0; i < MANY; i++) {
		add(t, &f->leases[i], i + 1);
		live[i] = true;
	}
	assert_int_equal(t->ids.count, MANY);
	assert_live(f, live, MANY);

	/* Every other one, oldest first. */
	for (unsigned i = 0; i < MANY; i += 2) {
		lease_table_remove(t, &f->leases[i]);
		live[i] = false;
	}
	assert_int_equal(t->ids.count, MANY / 2);
	assert_live(f, live, MANY);

	/* All but the last, newest first. */
	for (unsigned i = MANY - 1; i-- > 0;) {
		if (live[i]) {
			lease_table_remove(t, &f->leases[i]);
			live[i] = false;
		}
	}
	assert_int_equal(t->ids.count, 1);
	assert_live(f, live, MANY);
	assert_ptr_equal(lease_table_next(t, 0), &f->leases[MANY - 1]);
	assert_ptr_equal(lease_table_find(t, MANY), &f->leases[MANY - 1]);
	/* Tombstones were dropped along the way. */
	assert_true(t->ids.len < 1000);

	/* Ids keep increasing after compaction. */
	for (unsigned i = 0; i < 10; i++) {
		add(t, &f->leases[i], MANY + 1 + i);
		assert_ptr_equal(lease_table_find(t, MANY + 1 + i), &f->leases[i]);
	}
	assert_ptr_equal(lease_table_next(t, MANY), &f->leases[0]);
	assert_ptr_equal(lease_table_next(t, MANY + 10), NULL);
	assert_int_equal(t->ids.count, 11);
	for (unsigned i = 0; i < 10; i++)
		lease_table_remove(t, &f->leases[i]);
	lease_table_remove(t, &f->leases[MANY - 1]);
	assert_int_equal(t->ids.count, 0);
	assert_null(lease_table_next(t, 0));
	lease_table_finish(t);
	free(live);
}

/* A long-lived lease among many short ones: the table compacts while adding. */
static void test_churn(void **state)
{
	struct fixture *f = *state;
	struct lease_table *t = &f->table;
	struct lease *keep = &f->leases[0], *tmp = &f->leases[1];
	size_t max_cap = 0;

	add(t, keep, 1);
	for (uint64_t id = 2; id < 50000; id++) {
		add(t, tmp, id);
		assert_ptr_equal(lease_table_find(t, id), tmp);
		lease_table_remove(t, tmp);
		assert_null(lease_table_find(t, id));
		if (t->ids.cap > max_cap)
			max_cap = t->ids.cap;
	}
	assert_int_equal(t->ids.count, 1);
	assert_ptr_equal(lease_table_find(t, 1), keep);
	assert_ptr_equal(lease_table_next(t, 0), keep);
	assert_null(lease_table_next(t, 1));
	/* Churn does not grow the index without bound. */
	assert_true(max_cap <= 256);
	lease_table_remove(t, keep);
	lease_table_finish(t);
}

/* A deterministic random mix of adds and removes checked against a model. */
static void test_random(void **state)
{
	struct fixture *f = *state;
	bool *live = calloc(MANY, sizeof(bool));
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned issued = 0;

	assert_non_null(live);
	for (unsigned step = 0; step < 60000; step++) {
		unsigned r;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		r = (unsigned)(x % 100);
		if (issued < MANY && (r < 55 || f->table.ids.count == 0)) {
			add(&f->table, &f->leases[issued], issued + 1);
			live[issued++] = true;
		} else {
			/* Remove a live lease near a random id. */
			unsigned i = (unsigned)((x >> 20) % issued);
			struct lease *l = lease_table_next(&f->table, i);

			if (!l)
				l = lease_table_next(&f->table, 0);
			assert_non_null(l);
			assert_true(live[l->id - 1]);
			lease_table_remove(&f->table, l);
			live[l->id - 1] = false;
		}
		if (step % 5000 == 0)
			assert_live(f, live, issued);
	}
	assert_live(f, live, issued);
	for (unsigned i = 0; i < issued; i++)
		if (live[i])
			lease_table_remove(&f->table, &f->leases[i]);
	assert_int_equal(f->table.ids.count, 0);
	lease_table_finish(&f->table);
	free(live);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_finish_empty),
	    cmocka_unit_test(test_spares),
	    cmocka_unit_test_setup_teardown(test_ids, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_find, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_next, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_churn, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
