/* SPDX-License-Identifier: MIT */
/* test_policy_expire.c: passed deadlines: a waiting request times out, an owner is revoked. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

static void expired(struct fx *f, struct policy_decision *d)
{
	policy_expired(&f->s, &f->cfg, f->now, d);
}

/* Nothing before its time; then the earliest first, with the explanation and the wait. */
static void test_waiter_times_out_earliest_first(void **state)
{
	struct policy_decision d;
	struct waiter *w1, *w2;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, a, 0, 64 * MiB, NULL);
	w1 = fx_wait(&f, b, 0, 8 * MiB, 500);
	f.now -= 100;
	w2 = fx_wait(&f, b, 0, 8 * MiB, 500); /* queued earlier in time: due first */
	f.now += 100;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.now += 450;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	assert_int_equal(d.refusal.err, -ETIMEDOUT);
	assert_int_equal(d.refusal.kind, REFUSE_DENIAL);
	assert_int_equal(d.waiter, w2->seq);
	assert_int_equal(d.waited_ms, 550);
	fx_contains(d.refusal.text, "timed out after 500 ms: requested 8 MiB on device 0");
	fx_contains(d.refusal.text, "held by pid 10 'a' 64 MiB");
	state_waiter_drop(&f.s, w2);
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.now += 50;
	expired(&f, &d);
	assert_int_equal(d.waiter, w1->seq);
	fx_finish(&f);
}

/* A model request's timeout names the model. */
static void test_model_request_times_out_by_name(void **state)
{
	struct policy_decision d;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	fx_lease(&f, fx_holder(&f, 1001, 11, "b"), 0, 64 * MiB, NULL);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "unet", TRANSFORMER, 8 * MiB, 0);
	fx_wait_model(&f, m, WAIT_MODEL_ACQUIRE, 8 * MiB, 100);
	f.now += 100;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	fx_contains(d.refusal.text, "model 'unet': timed out after 100 ms: ");
	assert_int_equal(d.model, m->id);
	fx_finish(&f);
}

/* An owner that did not unload by its deadline is revoked, saying why; an acked eviction has
 * no deadline left. */
static void test_eviction_past_due_revokes(void **state)
{
	struct policy_decision d;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "vae", VAE, 8 * MiB, 0);
	fx_load(&f, m, 0);
	m->evicting = true;
	m->evict_started_ms = f.now; /* as the service asks */
	assert_int_equal(
	    state_deadline_set(&f.s, DUE_EVICTION, m->id, f.now + 20000, &m->heap_slot), 0);
	f.now += 19999;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.now += 1;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_REVOKE);
	assert_int_equal(d.model, m->id);
	assert_string_equal(d.reason, "did not unload within 20 s of being asked");
	/* Acked: its deadline went with the eviction. */
	state_deadline_clear(&f.s, &m->heap_slot);
	m->evicting = false;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_waiter_times_out_earliest_first),
	    cmocka_unit_test(test_model_request_times_out_by_name),
	    cmocka_unit_test(test_eviction_past_due_revokes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
