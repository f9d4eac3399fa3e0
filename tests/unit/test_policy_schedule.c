/* SPDX-License-Identifier: MIT */
/*
 * test_policy_schedule.c: what the queues call for: grants in arrival order, exclusive classes,
 * lost devices, what a waiter needs, and the eviction plans (docs/residency.md steps 1 and 2).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

/* apply carries a decision out on the books as the service would, enough for these tests. */
static void apply(struct fx *f, const struct policy_decision *d)
{
	struct waiter *w = d->waiter ? state_waiter_find(&f->s, d->waiter) : NULL;

	if (d->verdict == POLICY_EVICT) {
		for (unsigned i = 0; i < d->nvictims; i++)
			state_model_find(&f->s, d->victims[i])->evicting = true;
		return;
	}
	assert_non_null(w);
	if (d->verdict == POLICY_GRANT && w->kind == WAIT_LEASE)
		fx_lease(f, w->holder, w->device, d->bytes, NULL);
	else if (d->verdict == POLICY_GRANT) {
		device_reserve(&f->s.devices[w->device], d->bytes);
		w->model->reservation += d->bytes;
	}
	state_waiter_drop(&f->s, w);
}

/* Heads are granted in arrival order while they fit; with backfilling off (the fixture's
 * default; test_policy_backfill.c has it on), a head that does not fit stops the queue, even
 * when a later request would fit. */
static void test_arrival_order_and_no_backfill(void **state)
{
	struct waiter *w1, *w2, *w3;
	struct policy_decision d;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, a, 0, 40 * MiB, NULL);
	w1 = fx_wait(&f, b, 0, 8 * MiB, -1);
	w2 = fx_wait(&f, b, 0, 8 * MiB, -1);
	w3 = fx_wait(&f, b, 0, 16 * MiB, -1);
	(void)fx_wait(&f, b, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.waiter, w1->seq);
	apply(&f, &d);
	fx_next(&f, &d);
	assert_int_equal(d.waiter, w2->seq);
	apply(&f, &d);
	/* 8 MiB free: the 16 MiB head waits, and the 2 MiB behind it with it. */
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	assert_int_equal(queue_head(&f.s.devices[0].queue), w3);
	fx_finish(&f);
}

/* Each device's queue is its own: a stuck head elsewhere does not hold this one back. */
static void test_devices_are_independent(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct waiter *w;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, a, 0, 64 * MiB, NULL);
	fx_wait(&f, b, 0, 8 * MiB, -1);
	w = fx_wait(&f, b, 1, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.waiter, w->seq);
	assert_int_equal(d.device, 1);
	fx_finish(&f);
}

/* The waiters of a lost device are refused, in order, with -ENODEV. */
static void test_lost_device_refuses_its_waiters(void **state)
{
	struct policy_decision d;
	struct waiter *w;
	struct holder *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	b = fx_holder(&f, 1001, 11, "b");
	w = fx_wait(&f, b, 0, 8 * MiB, -1);
	fx_wait(&f, b, 0, 8 * MiB, -1);
	state_device_lost(&f.s, 0, "fell off the bus");
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	assert_int_equal(d.refusal.err, -ENODEV);
	assert_int_equal(d.waiter, w->seq);
	fx_contains(d.refusal.text, "device 0 (gpu0) became unusable: fell off the bus");
	apply(&f, &d);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	apply(&f, &d);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* Nothing is granted while the daemon stops. */
static void test_nothing_while_stopping(void **state)
{
	struct policy_decision d;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	fx_wait(&f, fx_holder(&f, 1001, 11, "b"), 0, 8 * MiB, -1);
	f.cfg.stopping = true;
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.cfg.stopping = false;
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	fx_finish(&f);
}

/* A model request needs its target less what it holds; all of it while being evicted; a
 * resize that grew meanwhile is granted nothing more. */
static void test_need(void **state)
{
	struct policy_decision d;
	struct waiter *w;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "m", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, m, 1);
	w = fx_wait_model(&f, m, WAIT_MODEL_RESIZE, 20 * MiB, -1);
	assert_int_equal(policy_need(w), 12 * MiB);
	m->evicting = true;
	assert_int_equal(policy_need(w), 20 * MiB);
	m->evicting = false;
	device_reserve(&f.s.devices[0], 16 * MiB);
	m->reservation = 24 * MiB;
	assert_int_equal(policy_need(w), 0);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.grant, GRANT_MODEL_GROW);
	assert_int_equal(d.bytes, 0);
	fx_finish(&f);
}

/* A resident exclusive rival blocks a head that fits, and asks the rival to unload; an
 * evicting rival still blocks; the same class, a plain lease, another device do not. */
static void test_exclusive_classes(void **state)
{
	struct model *unet, *vae, *vae2, *text;
	struct policy_decision d;
	struct holder *a, *b;
	struct waiter *w;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	class_exclusion_add(&f.s.devices[0].exclusive, (1u << TRANSFORMER) | (1u << VAE));
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	vae = fx_model(&f, b, 0, "vae", VAE, 4 * MiB, 0);
	fx_load(&f, vae, 0);
	unet = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	w = fx_wait_model(&f, unet, WAIT_MODEL_ACQUIRE, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.nvictims, 1);
	assert_int_equal(d.victims[0], vae->id);
	assert_int_equal(d.waiter, w->seq);
	apply(&f, &d);
	/* Being evicted, it still stands in the way; nothing more to ask. */
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	vae->evicting = false;
	device_unreserve(&f.s.devices[0], vae->reservation);
	vae->reservation = 0;
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	apply(&f, &d);
	/* The same class never excludes itself; a plain lease ignores classes. */
	vae2 = fx_model(&f, b, 0, "vae2", VAE, 4 * MiB, 0);
	fx_load(&f, vae2, 0);
	text = fx_model(&f, a, 0, "text", TEXT, 4 * MiB, 0);
	fx_wait_model(&f, text, WAIT_MODEL_ACQUIRE, 4 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	apply(&f, &d);
	fx_wait(&f, a, 0, 2 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	apply(&f, &d);
	/* Device 1 has no rules. */
	unet = fx_model(&f, a, 1, "unet1", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, fx_model(&f, b, 1, "vae1", VAE, 4 * MiB, 0), 0);
	fx_wait_model(&f, unet, WAIT_MODEL_ACQUIRE, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	fx_finish(&f);
}

/* Victims: idle and unpinned, lowest priority first, then least recently used, then oldest;
 * only as many as the bytes need; never the request's own, pinned, in use or evicting. */
static void test_victim_order_and_count(void **state)
{
	struct model *keep, *hi, *lru, *mru, *pinned, *busy;
	struct policy_decision d;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	hi = fx_model(&f, b, 0, "hi", TEXT, 8 * MiB, 5);
	fx_load(&f, hi, 0);
	f.now -= 100;
	lru = fx_model(&f, b, 0, "lru", TEXT, 8 * MiB, 0);
	fx_load(&f, lru, 0);
	f.now += 50;
	mru = fx_model(&f, b, 0, "mru", TEXT, 8 * MiB, 0);
	fx_load(&f, mru, 0);
	f.now += 50;
	pinned = fx_model(&f, b, 0, "pinned", TEXT, 8 * MiB, -5);
	fx_load(&f, pinned, 0);
	pinned->pinned = true;
	busy = fx_model(&f, b, 0, "busy", TEXT, 8 * MiB, -5);
	fx_load(&f, busy, 1);
	keep = fx_model(&f, a, 0, "own", TEXT, 8 * MiB, -9);
	fx_load(&f, keep, 0);
	fx_lease(&f, b, 0, 16 * MiB, NULL); /* 64 MiB used: 6 x 8 + 16 */
	fx_wait(&f, a, 0, 12 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	/* 12 MiB: two models. A lease spares no model of its holder (only a model request's
	 * own model is spared): "own" (priority -9) first, then "lru" before "mru". */
	assert_int_equal(d.nvictims, 2);
	assert_int_equal(d.victims[0], keep->id);
	assert_int_equal(d.victims[1], lru->id);
	assert_int_equal(d.bytes, 12 * MiB);
	assert_int_equal(d.due_ms, f.now + f.cfg.evict_deadline_ms);
	assert_int_equal(d.for_holder, a->id);
	apply(&f, &d);
	/* Being evicted counts as coming: no second plan for the same room. */
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	(void)hi, (void)mru, (void)busy;
	fx_finish(&f);
}

/* When evicting every candidate would still be too little, none is asked (rivals still are). */
static void test_no_victims_when_not_enough(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, b, 0, "idle", TEXT, 8 * MiB, 0);
	fx_load(&f, m, 0);
	fx_lease(&f, b, 0, 56 * MiB, NULL);
	fx_wait(&f, a, 0, 16 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* A plan asks at most 64 models at once; the rest come in the next plan. */
static void test_at_most_64_victims(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 160 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	for (unsigned i = 0; i < 80; i++)
		fx_load(&f, fx_model(&f, b, 0, "small", TEXT, 2 * MiB, 0), 0);
	fx_wait(&f, a, 0, 160 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.nvictims, PLACEMENT_MAX_VICTIMS);
	apply(&f, &d);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.nvictims, 80 - PLACEMENT_MAX_VICTIMS);
	fx_finish(&f);
}

/* A model request's own model is never its victim; its owner's being evicted blocks it. */
static void test_own_model_never_victim(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *m, *other;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 16 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, a, 0, "m", TEXT, 8 * MiB, -9);
	fx_load(&f, m, 0);
	other = fx_model(&f, b, 0, "o", TEXT, 8 * MiB, 9);
	fx_load(&f, other, 0);
	fx_wait_model(&f, m, WAIT_MODEL_RESIZE, 16 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.nvictims, 1);
	assert_int_equal(d.victims[0], other->id);
	fx_finish(&f);
}

/* policy_next ends: applying its decisions leaves nothing after a bounded number of them. */
static void test_terminates(void **state)
{
	unsigned steps = 0, waiting = 0;
	struct policy_decision d;
	struct holder *h[4];
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	for (unsigned i = 0; i < 4; i++)
		h[i] = fx_holder(&f, 1000 + i, 10 + (pid_t)i, "h");
	for (unsigned i = 0; i < 12; i++) {
		struct model *m = fx_model(&f, h[i % 4], i % 2, "m", 1 + i % 3, 4 * MiB, (int)i);

		if (i % 3)
			fx_load(&f, m, i % 2);
	}
	for (unsigned i = 0; i < 20; i++, waiting++)
		fx_wait(&f, h[i % 4], i % 2, (2 + i % 7) * MiB, -1);
	do {
		fx_next(&f, &d);
		if (d.verdict != POLICY_NONE)
			apply(&f, &d);
		assert_true(++steps <= waiting + 2 + 12 + 1);
	} while (d.verdict != POLICY_NONE);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arrival_order_and_no_backfill),
	    cmocka_unit_test(test_devices_are_independent),
	    cmocka_unit_test(test_lost_device_refuses_its_waiters),
	    cmocka_unit_test(test_nothing_while_stopping),
	    cmocka_unit_test(test_need),
	    cmocka_unit_test(test_exclusive_classes),
	    cmocka_unit_test(test_victim_order_and_count),
	    cmocka_unit_test(test_no_victims_when_not_enough),
	    cmocka_unit_test(test_at_most_64_victims),
	    cmocka_unit_test(test_own_model_never_victim),
	    cmocka_unit_test(test_terminates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
