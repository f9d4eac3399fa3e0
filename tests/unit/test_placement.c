/* SPDX-License-Identifier: MIT */
/* test_placement.c: the eviction policy: conflicts, victim order, only as much as needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/placement.h"

#define MiB ((uint64_t)1 << 20)
#define TRANSFORMER 1
#define VAE 2
#define TEXT 3
#define IMAGE 4

/* Two stand-in holders: only their addresses matter to the policy. */
static int client_a, client_b;
#define A ((const struct holder *)&client_a)
#define B ((const struct holder *)&client_b)

static struct model make(uint64_t id, const struct holder *owner, unsigned cls, uint64_t resident,
			 int32_t priority, uint64_t last_used)
{
	struct model m;

	memset(&m, 0, sizeof(m));
	m.id = id;
	m.owner = (struct holder *)owner;
	m.model_class = cls;
	m.reservation = resident;
	m.priority = priority;
	m.last_used_ms = last_used;
	snprintf(m.name, sizeof(m.name), "m%llu", (unsigned long long)id);
	return m;
}

static struct placement_request request(uint64_t bytes, uint64_t free_bytes,
					const struct model *want, const struct holder *who)
{
	struct placement_request r = {
	    .bytes = bytes, .free_bytes = free_bytes, .model = want, .requester = who};

	return r;
}

static void test_lowest_priority_then_lru(void **state)
{
	struct model m[4] = {
	    make(1, A, TEXT, 16 * MiB, 5, 100),
	    make(2, A, TEXT, 16 * MiB, 0, 900), /* lowest priority: first, though recent */
	    make(3, B, TEXT, 16 * MiB, 5, 50),	/* same priority as 1, used longer ago */
	    make(4, B, TEXT, 16 * MiB, 9, 10),
	};
	struct model *v[4] = {&m[0], &m[1], &m[2], &m[3]};
	struct placement_request r = request(40 * MiB, 8 * MiB, NULL, A);
	struct placement_plan p;

	(void)state;
	placement_plan(&r, v, 4, &p);
	/* 8 free + 16 + 16 = 40: exactly two victims, in policy order. */
	assert_int_equal(p.nvictims, 2);
	assert_ptr_equal(p.victims[0], &m[1]);
	assert_ptr_equal(p.victims[1], &m[2]);
	assert_false(p.must_wait);
}

static void test_only_as_much_as_needed(void **state)
{
	struct model m[4] = {
	    make(1, A, TEXT, 16 * MiB, 0, 1),
	    make(2, A, TEXT, 16 * MiB, 0, 2),
	    make(3, A, TEXT, 16 * MiB, 0, 3),
	    make(4, A, TEXT, 16 * MiB, 0, 4),
	};
	struct model *v[4] = {&m[0], &m[1], &m[2], &m[3]};
	struct placement_request r = request(24 * MiB, 16 * MiB, NULL, B);
	struct placement_plan p;

	(void)state;
	placement_plan(&r, v, 4, &p);
	assert_int_equal(p.nvictims, 1);
	assert_ptr_equal(p.victims[0], &m[0]);
	/* Already enough coming from an eviction under way: nobody else is asked. */
	r.evicting_bytes = 16 * MiB;
	placement_plan(&r, v, 4, &p);
	assert_int_equal(p.nvictims, 0);
	assert_false(p.must_wait);
}

static void test_never_pinned_in_use_own_or_evicting(void **state)
{
	struct model m[5] = {
	    make(1, A, TEXT, 16 * MiB, 0, 1), make(2, A, TEXT, 16 * MiB, 0, 2),
	    make(3, A, TEXT, 16 * MiB, 0, 3), make(4, A, TEXT, 16 * MiB, 0, 4),
	    make(5, A, TEXT, 16 * MiB, 0, 5),
	};
	struct model *v[5] = {&m[0], &m[1], &m[2], &m[3], &m[4]};
	struct placement_request r = request(32 * MiB, 0, &m[4], A);
	struct placement_plan p;

	(void)state;
	m[0].pinned = true;
	m[1].use_count = 1;
	m[2].evicting = true;
	r.evicting_bytes = 16 * MiB; /* what m3's eviction under way will free */
	placement_plan(&r, v, 5, &p);
	/* Only m4 is evictable (m5 is the request's own model): 16 + 16 coming from m3. */
	assert_int_equal(p.nvictims, 1);
	assert_ptr_equal(p.victims[0], &m[3]);
	r.bytes = 48 * MiB;
	/* Not enough even evicting all that may be evicted: wait, evicting nobody for nothing. */
	placement_plan(&r, v, 5, &p);
	assert_int_equal(p.nvictims, 0);
	assert_true(p.must_wait);
}

static void test_exclusive_conflicts_go_first(void **state)
{
	struct model m[3] = {
	    make(1, B, TRANSFORMER, 16 * MiB, 9, 1), /* conflicts: evicted although it fits */
	    make(2, B, TEXT, 16 * MiB, 0, 1),
	    make(3, A, VAE, 0, 0, 1), /* the model that wants to become resident */
	};
	struct model *v[3] = {&m[0], &m[1], &m[2]};
	struct placement_request r = request(16 * MiB, 64 * MiB, &m[2], A);
	struct placement_plan p;
	struct class_exclusion x = {{0}};

	(void)state;
	class_exclusion_add(&x, (1u << TRANSFORMER) | (1u << VAE));
	r.exclusive = &x;
	assert_true(placement_conflicts(&r, v, 3));
	placement_plan(&r, v, 3, &p);
	assert_int_equal(p.nvictims, 1);
	assert_ptr_equal(p.victims[0], &m[0]);
	/* A conflict in use cannot be evicted now: the request waits for its release. */
	m[0].use_count = 1;
	placement_plan(&r, v, 3, &p);
	assert_int_equal(p.nvictims, 0);
	assert_true(p.must_wait);
	/* The same class does not conflict with itself; classes outside the set never do. */
	m[0].use_count = 0;
	m[0].model_class = VAE;
	assert_false(placement_conflicts(&r, v, 3));
	m[0].model_class = TEXT;
	assert_false(placement_conflicts(&r, v, 3));
	/* A second group is a rule of its own: text encoders exclude image encoders, not VAEs. */
	class_exclusion_add(&x, (1u << TEXT) | (1u << IMAGE));
	assert_false(placement_conflicts(&r, v, 3));
	m[2].model_class = IMAGE;
	assert_true(placement_conflicts(&r, v, 3));
	m[2].model_class = VAE;
	/* Nothing resident: no conflict either. */
	m[0].model_class = TRANSFORMER;
	m[0].reservation = 0;
	assert_false(placement_conflicts(&r, v, 3));
}

static void test_impossible_requests(void **state)
{
	char why[256];
	struct model m[3] = {
	    make(1, B, TRANSFORMER, 40 * MiB, 0, 1),
	    make(2, A, TEXT, 16 * MiB, 0, 1),
	    make(3, A, VAE, 0, 0, 1),
	};
	struct model *v[3] = {&m[0], &m[1], &m[2]};
	struct placement_request r = request(32 * MiB, 0, &m[2], A);
	struct class_exclusion x = {{0}};

	(void)state;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), 0);
	/* 40 pinned of 64: 32 can never fit beside it. */
	m[0].pinned = true;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "pinned models hold 40 MiB"));
	/* A pinned model of an exclusive class: never. */
	m[0].reservation = 8 * MiB;
	class_exclusion_add(&x, (1u << TRANSFORMER) | (1u << VAE));
	r.exclusive = &x;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), -EDEADLK);
	assert_non_null(strstr(why, "pinned"));
	/* This client's own model in use stands in the way: a single thread would wait forever. */
	m[0].pinned = false;
	m[0].owner = (struct holder *)A;
	m[0].use_count = 1;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), -EDEADLK);
	assert_non_null(strstr(why, "in use by this client"));
	/* Another client's model in use is only a wait. */
	m[0].owner = (struct holder *)B;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), 0);
	/* Bytes only this client's in-use models could free. */
	r.exclusive = NULL;
	m[0].use_count = 0;
	m[1].use_count = 1;
	m[1].reservation = 40 * MiB;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), -EDEADLK);
	/* Larger than the budget itself. */
	m[1].use_count = 0;
	r.bytes = 65 * MiB;
	assert_int_equal(placement_impossible(&r, v, 3, 64 * MiB, why, sizeof(why)), -E2BIG);
}

static void test_many_candidates_sorted_before_choosing(void **state)
{
	enum { N = 200 };
	static struct model m[N];
	static struct model *v[N];
	struct placement_request r = request(32 * MiB, 0, NULL, A);
	struct placement_plan p;

	(void)state;
	/* The best victims are last in the list: the policy must still find them. */
	for (int i = 0; i < N; i++) {
		m[i] = make((uint64_t)i + 1, B, TEXT, 16 * MiB, i >= N - 2 ? -1 : 3, 1000);
		v[i] = &m[i];
	}
	placement_plan(&r, v, N, &p);
	assert_int_equal(p.nvictims, 2);
	assert_ptr_equal(p.victims[0], &m[N - 2]);
	assert_ptr_equal(p.victims[1], &m[N - 1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lowest_priority_then_lru),
	    cmocka_unit_test(test_only_as_much_as_needed),
	    cmocka_unit_test(test_never_pinned_in_use_own_or_evicting),
	    cmocka_unit_test(test_exclusive_conflicts_go_first),
	    cmocka_unit_test(test_impossible_requests),
	    cmocka_unit_test(test_many_candidates_sorted_before_choosing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
