/* SPDX-License-Identifier: MIT */
/*
 * test_policy_backfill.c: backfilling (docs/residency.md, "Backfilling"): a later request that
 * fits now is granted when it delays nobody ahead of it, never when it would delay the head's
 * start, and not past a request passed over as often or as long as the bounds allow.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

/* setup is the fixture with backfilling on, as the daemon starts (passes and wait as given). */
static void setup(struct fx *f, unsigned passes, uint64_t wait_ms)
{
	fx_init(f, 1, 64 * MiB);
	f->cfg.sched.backfill = true;
	f->cfg.sched.backfill_passes = passes;
	f->cfg.sched.backfill_wait_ms = wait_ms;
}

/* grant_of applies a backfill grant as the service does: the passed-over counted, the lease
 * charged, the waiter gone. */
static void apply_grant(struct fx *f, const struct policy_decision *d)
{
	struct waiter *w = state_waiter_find(&f->s, d->waiter);

	assert_non_null(w);
	if (d->backfill)
		queue_pass_over(&f->s.devices[w->device].queue, w, f->now);
	fx_lease(f, w->holder, w->device, d->bytes, NULL);
	state_waiter_drop(&f->s, w);
}

/* evicting makes a resident idle model of its own holder one being evicted. */
static struct model *evicting(struct fx *f, const char *name, unsigned cls, uint64_t size)
{
	struct model *m = fx_model(f, fx_holder(f, 1009, 99, name), 0, name, cls, size, 0);

	fx_load(f, m, 0);
	m->evicting = true;
	m->evict_started_ms = f->now;
	return m;
}

/* The head's need counted against what its pending eviction frees: a request that fits in the
 * surplus is granted at once, ahead of the queue; one larger than the surplus is not, even
 * though it fits in the memory free now (it would delay the head). */
static void test_grants_what_delays_nobody(void **state)
{
	struct waiter *head, *small, *larger;
	struct policy_decision d;
	struct holder *a, *c;
	struct fx f;

	(void)state;
	setup(&f, 16, 5000);
	a = fx_holder(&f, 1000, 10, "a");
	c = fx_holder(&f, 1002, 12, "c");
	fx_lease(&f, a, 0, 32 * MiB, NULL);
	evicting(&f, "stuck", VAE, 16 * MiB); /* free 16; 16 coming */
	head = fx_wait(&f, c, 0, 24 * MiB, -1);
	larger = fx_wait(&f, fx_holder(&f, 1003, 13, "d"), 0, 10 * MiB, -1);
	small = fx_wait(&f, fx_holder(&f, 1004, 14, "e"), 0, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.backfill);
	assert_false(d.bypass);
	assert_int_equal(d.waiter, small->seq);
	assert_int_equal(d.bytes, 8 * MiB);
	assert_int_equal(d.for_holder, c->id);
	apply_grant(&f, &d);
	/* 8 MiB free, 16 coming, 24 needed: nothing more may go. */
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	assert_int_equal(larger->passed, 1); /* passed over once, the head never */
	assert_int_equal(head->passed, 0);
	fx_finish(&f);
}

/* Off: the queue is strictly in arrival order again. */
static void test_off(void **state)
{
	struct policy_decision d;
	struct fx f;

	(void)state;
	setup(&f, 16, 5000);
	f.cfg.sched.backfill = false;
	fx_lease(&f, fx_holder(&f, 1000, 10, "a"), 0, 32 * MiB, NULL);
	evicting(&f, "stuck", VAE, 16 * MiB);
	fx_wait(&f, fx_holder(&f, 1002, 12, "c"), 0, 24 * MiB, -1);
	fx_wait(&f, fx_holder(&f, 1004, 14, "e"), 0, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/*
 * A head that waits for memory in use: its start is the first release that brings its deficit
 * (8 MiB here). A model in use comes back whole (40 MiB), so a grant that leaves that release
 * enough is granted; plain leases may come back in pieces, so with the same bytes held as
 * leases a grant could make the release that would have started the head too small: refused.
 */
static void test_deficit_whole_models_and_loose_leases(void **state)
{
	struct policy_decision d;
	struct holder *a, *c, *e;
	struct waiter *w;
	struct model *m;
	struct fx f;

	(void)state;
	setup(&f, 16, 5000);
	a = fx_holder(&f, 1000, 10, "a");
	c = fx_holder(&f, 1002, 12, "c");
	e = fx_holder(&f, 1004, 14, "e");
	m = fx_model(&f, a, 0, "unet", TRANSFORMER, 40 * MiB, 0);
	fx_load(&f, m, 1); /* in use: free 24 */
	fx_wait(&f, c, 0, 32 * MiB, -1);
	w = fx_wait(&f, e, 0, 24 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.backfill);
	assert_int_equal(d.waiter, w->seq);
	fx_finish(&f);

	setup(&f, 16, 5000);
	a = fx_holder(&f, 1000, 10, "a");
	c = fx_holder(&f, 1002, 12, "c");
	e = fx_holder(&f, 1004, 14, "e");
	for (int i = 0; i < 5; i++)
		fx_lease(&f, a, 0, 8 * MiB, NULL); /* 40 MiB in five pieces */
	fx_wait(&f, c, 0, 32 * MiB, -1);
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* A model in use smaller than deficit + request may be the release that starts the head:
 * the request would delay it and is not granted; a smaller request is. */
static void test_no_grant_that_delays_the_head(void **state)
{
	struct policy_decision d;
	struct holder *a, *c;
	struct waiter *w;
	struct model *m;
	struct fx f;

	(void)state;
	setup(&f, 16, 5000);
	a = fx_holder(&f, 1000, 10, "a");
	c = fx_holder(&f, 1002, 12, "c");
	m = fx_model(&f, a, 0, "unet", TRANSFORMER, 24 * MiB, 0);
	fx_load(&f, m, 1);		   /* in use: free 40 */
	fx_lease(&f, a, 0, 8 * MiB, NULL); /* free 32 */
	fx_wait(&f, c, 0, 48 * MiB, -1);   /* deficit 16 (a's lease may come in pieces) */
	fx_wait(&f, fx_holder(&f, 1004, 14, "e"), 0, 10 * MiB, -1);
	/* Releasing unet (24) starts the head now (32 + 24 >= 48); after a 10 MiB grant it
	 * would not (22 + 24 < 48): refused. */
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	/* A 2 MiB request: unet (24 >= 16 + 2) still starts the head alone, and a's lease (8)
	 * alone never could: granted. */
	w = fx_wait(&f, fx_holder(&f, 1005, 15, "g"), 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.backfill);
	assert_int_equal(d.waiter, w->seq);
	fx_finish(&f);
}

/* After the bound of passes, nothing behind a request passes it again. */
static void test_pass_bound_stops_passing(void **state)
{
	struct policy_decision d;
	struct waiter *big;
	struct holder *e;
	struct fx f;

	(void)state;
	setup(&f, 2, 600000);
	fx_lease(&f, fx_holder(&f, 1000, 10, "a"), 0, 32 * MiB, NULL);
	evicting(&f, "stuck", VAE, 16 * MiB);
	fx_wait(&f, fx_holder(&f, 1002, 12, "c"), 0, 24 * MiB, -1); /* 8 surplus */
	big = fx_wait(&f, fx_holder(&f, 1003, 13, "d"), 0, 20 * MiB, -1);
	e = fx_holder(&f, 1004, 14, "e");
	for (unsigned i = 0; i < 2; i++) {
		fx_wait(&f, e, 0, 2 * MiB, -1);
		fx_next(&f, &d);
		assert_int_equal(d.verdict, POLICY_GRANT);
		assert_true(d.backfill);
		apply_grant(&f, &d);
		assert_int_equal(big->passed, i + 1);
	}
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	assert_int_equal(big->passed, 2);
	fx_finish(&f);
}

/* The time bound: once a request was first passed over that long ago, it is passed no more. */
static void test_wait_bound_stops_passing(void **state)
{
	struct policy_decision d;
	struct waiter *big;
	struct holder *e;
	struct fx f;

	(void)state;
	setup(&f, 1000, 5000);
	fx_lease(&f, fx_holder(&f, 1000, 10, "a"), 0, 32 * MiB, NULL);
	evicting(&f, "stuck", VAE, 16 * MiB);
	fx_wait(&f, fx_holder(&f, 1002, 12, "c"), 0, 24 * MiB, -1);
	big = fx_wait(&f, fx_holder(&f, 1003, 13, "d"), 0, 20 * MiB, -1);
	e = fx_holder(&f, 1004, 14, "e");
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_true(d.backfill);
	apply_grant(&f, &d);
	assert_int_equal(big->first_passed_ms, f.now);
	f.now += 4999;
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_true(d.backfill);
	apply_grant(&f, &d);
	f.now += 1;
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* A model of a class that excludes the head's is never backfilled (it would block the head),
 * and a client's own requests keep their order. */
static void test_rivals_and_own_order(void **state)
{
	struct policy_decision d;
	struct holder *c, *e;
	struct model *vae, *te;
	struct waiter *w;
	struct fx f;

	(void)state;
	setup(&f, 16, 5000);
	class_exclusion_add(&f.s.devices[0].exclusive, (1u << TRANSFORMER) | (1u << VAE));
	fx_lease(&f, fx_holder(&f, 1000, 10, "a"), 0, 40 * MiB, NULL); /* free 8, 8 surplus */
	evicting(&f, "stuck", TEXT, 16 * MiB);
	c = fx_holder(&f, 1002, 12, "c");
	fx_wait_model(&f, fx_model(&f, c, 0, "unet", TRANSFORMER, 16 * MiB, 0), WAIT_MODEL_ACQUIRE,
		      16 * MiB, -1);
	e = fx_holder(&f, 1004, 14, "e");
	vae = fx_model(&f, e, 0, "vae", VAE, 4 * MiB, 0);
	fx_wait_model(&f, vae, WAIT_MODEL_ACQUIRE, 4 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE); /* the vae would exclude the head's unet */
	/* e's next request (plain, 2 MiB) stays behind e's vae. */
	fx_wait(&f, e, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	/* Another client's model of a class that does not exclude: granted. */
	te = fx_model(&f, fx_holder(&f, 1005, 15, "g"), 0, "te", TEXT, 4 * MiB, 0);
	w = fx_wait_model(&f, te, WAIT_MODEL_ACQUIRE, 4 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.backfill);
	assert_int_equal(d.waiter, w->seq);
	assert_int_equal(d.grant, GRANT_MODEL_LOAD);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grants_what_delays_nobody),
	    cmocka_unit_test(test_off),
	    cmocka_unit_test(test_deficit_whole_models_and_loose_leases),
	    cmocka_unit_test(test_no_grant_that_delays_the_head),
	    cmocka_unit_test(test_pass_bound_stops_passing),
	    cmocka_unit_test(test_wait_bound_stops_passing),
	    cmocka_unit_test(test_rivals_and_own_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
