/* SPDX-License-Identifier: MIT */
/*
 * test_policy_waitfor.c: what a waiting request waits for (policy/waitfor.c): its position, the
 * eviction under way and its deadline, an exclusive rival, the holder whose bytes it needs, the
 * budget; and which differences count as a change worth telling the waiter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy/waitfor.h"
#include "policy_fixture.h"

/* evicting marks m as asked to unload, due at due_ms. */
static void evicting(struct model *m, uint64_t due_ms)
{
	m->evicting = true;
	m->evict_due_ms = due_ms;
}

/* Behind an eviction: every waiter names the model, its owner, its bytes and its deadline,
 * and its own place in the queue; the eviction due first is named, all are counted. */
static void test_eviction_with_deadline(void **state)
{
	struct waiter *w1, *w2;
	struct holder *a, *b, *c;
	struct model *m, *m2;
	struct waitfor wf;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "owner");
	b = fx_holder(&f, 1001, 11, "waiter");
	c = fx_holder(&f, 1002, 12, "other");
	m = fx_model(&f, a, 0, "flux", TRANSFORMER, 32 * MiB, 0);
	fx_load(&f, m, 0);
	fx_lease(&f, c, 0, 24 * MiB, NULL);
	evicting(m, f.now + 20000);
	w1 = fx_wait(&f, b, 0, 16 * MiB, -1);
	w2 = fx_wait(&f, c, 0, 4 * MiB, -1);
	waitfor_compute(&f.s, w1, &wf);
	assert_int_equal(wf.reason, WAITFOR_EVICTION);
	assert_int_equal(wf.model, m->id);
	assert_int_equal(wf.owner, a->id);
	assert_int_equal(wf.due_ms, f.now + 20000);
	assert_int_equal(wf.bytes, 32 * MiB);
	assert_int_equal(wf.position, 0);
	assert_int_equal(wf.queued, 2);
	assert_int_equal(wf.need, 16 * MiB);
	assert_int_equal(wf.free, 8 * MiB);
	assert_int_equal(wf.evictions, 1);
	waitfor_compute(&f.s, w2, &wf);
	assert_int_equal(wf.reason, WAITFOR_EVICTION);
	assert_int_equal(wf.position, 1);
	/* A second eviction due earlier is the one named; both are counted. */
	m2 = fx_model(&f, a, 0, "vae", VAE, 4 * MiB, 0);
	fx_load(&f, m2, 0);
	evicting(m2, f.now + 5000);
	waitfor_compute(&f.s, w1, &wf);
	assert_int_equal(wf.model, m2->id);
	assert_int_equal(wf.due_ms, f.now + 5000);
	assert_int_equal(wf.evictions, 2);
	fx_finish(&f);
}

/* A model's own acquire waits for its own eviction to end before anything else. */
static void test_own_model_evicting(void **state)
{
	struct holder *a, *c;
	struct waitfor wf;
	struct waiter *w;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "host");
	c = fx_holder(&f, 1001, 11, "big");
	fx_lease(&f, c, 0, 16 * MiB, NULL);
	m = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, m, 0);
	evicting(m, f.now + 1000);
	w = fx_wait_model(&f, m, WAIT_MODEL_ACQUIRE, 8 * MiB, -1);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_EVICTION);
	assert_int_equal(wf.model, m->id);
	assert_int_equal(wf.owner, a->id);
	assert_int_equal(wf.due_ms, f.now + 1000);
	fx_finish(&f);
}

/* With no eviction under way, the waiter needs the bytes of the client holding the most. */
static void test_holder(void **state)
{
	struct holder *a, *b, *c;
	struct waitfor wf;
	struct waiter *w;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "small");
	b = fx_holder(&f, 1001, 11, "big");
	c = fx_holder(&f, 1002, 12, "waiter");
	fx_lease(&f, a, 0, 16 * MiB, NULL);
	fx_lease(&f, b, 0, 16 * MiB, NULL);
	m = fx_model(&f, b, 0, "in-use", TRANSFORMER, 24 * MiB, 0);
	fx_load(&f, m, 1); /* in use: not evictable; counts as b's */
	w = fx_wait(&f, c, 0, 32 * MiB, -1);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_HOLDER);
	assert_int_equal(wf.owner, b->id);
	assert_int_equal(wf.bytes, 40 * MiB);
	assert_int_equal(wf.model, 0);
	assert_int_equal(wf.due_ms, 0);
	assert_int_equal(wf.evictions, 0);
	fx_finish(&f);
}

/* Nobody holds anything, yet it does not fit: the budget (lowered, or memory being freed). */
static void test_budget(void **state)
{
	struct waitfor wf;
	struct waiter *w;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "waiter");
	device_charge(&f.s.devices[0], 60 * MiB); /* being freed by the backend, nobody's */
	w = fx_wait(&f, a, 0, 8 * MiB, -1);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_BUDGET);
	assert_int_equal(wf.owner, 0);
	device_uncharge(&f.s.devices[0], 60 * MiB);
	/* Now it fits and is first: it is being granted. */
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_GRANTING);
	fx_finish(&f);
}

/* A request that fits but stands behind a head that does not waits for the queue (the head's
 * holder and need); its position goes down as requests ahead leave. */
static void test_queue_position(void **state)
{
	struct waiter *head, *mid, *w;
	struct holder *a, *b, *c;
	struct waitfor wf;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "holder");
	b = fx_holder(&f, 1001, 11, "head");
	c = fx_holder(&f, 1002, 12, "behind");
	fx_lease(&f, a, 0, 48 * MiB, NULL);
	head = fx_wait(&f, b, 0, 32 * MiB, -1);
	mid = fx_wait(&f, b, 0, 32 * MiB, -1);
	w = fx_wait(&f, c, 0, 4 * MiB, -1);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_QUEUE);
	assert_int_equal(wf.position, 2);
	assert_int_equal(wf.queued, 3);
	assert_int_equal(wf.owner, b->id);
	assert_int_equal(wf.bytes, 32 * MiB);
	waitfor_compute(&f.s, head, &wf);
	assert_int_equal(wf.reason, WAITFOR_HOLDER);
	assert_int_equal(wf.owner, a->id);
	state_waiter_drop(&f.s, head);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.position, 1);
	state_waiter_drop(&f.s, mid);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.position, 0);
	assert_int_equal(wf.reason, WAITFOR_GRANTING);
	fx_finish(&f);
}

/* An exclusive rival: idle (about to be asked), in use (its owner is what it waits for), or
 * being evicted (that eviction). */
static void test_exclusive_rival(void **state)
{
	struct model *t, *v;
	struct holder *a, *b;
	struct waitfor wf;
	struct waiter *w;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	class_exclusion_add(&f.s.devices[0].exclusive, (1u << TRANSFORMER) | (1u << VAE));
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	t = fx_model(&f, a, 0, "transformer", TRANSFORMER, 8 * MiB, 0);
	v = fx_model(&f, b, 0, "vae", VAE, 8 * MiB, 0);
	fx_load(&f, t, 1);
	w = fx_wait_model(&f, v, WAIT_MODEL_ACQUIRE, 8 * MiB, -1);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_HOLDER);
	assert_int_equal(wf.model, t->id);
	assert_int_equal(wf.owner, a->id);
	t->use_count = 0;
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_EXCLUSIVE);
	assert_int_equal(wf.model, t->id);
	evicting(t, f.now + 3000);
	waitfor_compute(&f.s, w, &wf);
	assert_int_equal(wf.reason, WAITFOR_EVICTION);
	assert_int_equal(wf.due_ms, f.now + 3000);
	fx_finish(&f);
}

/* What counts as a change: position, reason, model, owner, deadline, evictions; not bytes,
 * free memory or the requests queued behind. */
static void test_changes(void **state)
{
	struct waitfor a = {.device = 0,
			    .position = 2,
			    .queued = 3,
			    .reason = WAITFOR_EVICTION,
			    .need = 8,
			    .free = 4,
			    .model = 5,
			    .owner = 6,
			    .due_ms = 7000,
			    .bytes = 9,
			    .evictions = 1};
	struct waitfor b = a;

	(void)state;
	assert_false(waitfor_changed(&a, &b));
	b.free = 0;
	b.bytes = 1;
	b.need = 2;
	b.queued = 9;
	assert_false(waitfor_changed(&a, &b));
	b = a, b.position = 1;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.reason = WAITFOR_HOLDER;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.model = 4;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.owner = 1;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.due_ms = 1;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.evictions = 2;
	assert_true(waitfor_changed(&a, &b));
	b = a, b.device = 1;
	assert_true(waitfor_changed(&a, &b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_eviction_with_deadline),
	    cmocka_unit_test(test_own_model_evicting),
	    cmocka_unit_test(test_holder),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_queue_position),
	    cmocka_unit_test(test_exclusive_rival),
	    cmocka_unit_test(test_changes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
