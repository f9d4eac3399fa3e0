/* SPDX-License-Identifier: MIT */
/* test_policy_admit.c: a new request: granted, queued or refused, each rule and their order. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

static void admit(struct fx *f, const struct policy_request *r, struct policy_decision *d)
{
	policy_admit(&f->s, &f->cfg, r, f->now, d);
}

static void assert_refused(const struct policy_decision *d, int err, enum policy_refusal_kind kind)
{
	assert_int_equal(d->verdict, POLICY_REFUSE);
	assert_int_equal(d->refusal.err, err);
	assert_int_equal(d->refusal.kind, kind);
}

/* Nothing waits and it fits: granted now, the size rounded up to the granule. */
static void test_grant_when_queue_empty_and_fits(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	r = fx_lease_request(fx_holder(&f, 1000, 10, "a"), 0, 3 * MiB, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.grant, GRANT_LEASE);
	assert_int_equal(d.bytes, 4 * MiB);
	fx_finish(&f);
}

/* First come, first served: a request that fits still queues behind an earlier one. */
static void test_queue_behind_earlier_even_if_fits(void **state)
{
	struct holder *a, *b;
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, a, 0, 40 * MiB, NULL);
	fx_wait(&f, a, 0, 40 * MiB, -1);
	r = fx_lease_request(b, 0, 2 * MiB, 5000);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	assert_int_equal(d.bytes, 2 * MiB);
	fx_finish(&f);
}

/* Timeout 0 never waits: refused with what was free, who held it and a suggestion. */
static void test_timeout0_refused_enomem_with_explanation(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "holder-b");
	fx_lease(&f, b, 0, 60 * MiB, NULL);
	r = fx_lease_request(a, 0, 8 * MiB, 0);
	admit(&f, &r, &d);
	assert_refused(&d, -ENOMEM, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "requested 8 MiB on device 0");
	fx_contains(d.refusal.text, "4 MiB of its 64 MiB budget is free");
	fx_contains(d.refusal.text, "held by pid 11 'holder-b' 60 MiB");
	fx_contains(d.refusal.text, "suggestion: ");
	assert_int_equal(d.bytes, 8 * MiB);
	fx_finish(&f);
}

/* Timeout 0 with others waiting ahead: refused even though it would fit. */
static void test_timeout0_refused_when_others_wait_ahead(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	fx_lease(&f, a, 0, 40 * MiB, NULL);
	fx_wait(&f, a, 0, 40 * MiB, -1);
	r = fx_lease_request(fx_holder(&f, 1001, 11, "b"), 0, 2 * MiB, 0);
	admit(&f, &r, &d);
	assert_refused(&d, -ENOMEM, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "1 earlier request(s)");
	fx_finish(&f);
}

/* A queued request is due timeout ms from now; a negative timeout is never due. */
static void test_queue_due_is_now_plus_timeout(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, a, 0, 64 * MiB, NULL);
	r = fx_lease_request(b, 0, 8 * MiB, 2500);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	assert_int_equal(d.due_ms, f.now + 2500);
	r.timeout_ms = -1;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	assert_int_equal(d.due_ms, UINT64_MAX);
	fx_finish(&f);
}

/* More than the whole budget, or more than 64 bits can round: -E2BIG, a denial. */
static void test_too_big_e2big(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	r = fx_lease_request(fx_holder(&f, 1000, 10, "a"), 0, 66 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -E2BIG, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "more than its whole budget of 64 MiB");
	r.requested = UINT64_MAX;
	admit(&f, &r, &d);
	assert_refused(&d, -E2BIG, REFUSE_DENIAL);
	fx_finish(&f);
}

/* Beside what pinned models hold it can never fit: -E2BIG naming the model to unpin. */
static void test_too_big_beside_pinned_e2big(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, b, 0, "big", TRANSFORMER, 40 * MiB, 0);
	fx_load(&f, m, 0);
	m->pinned = true;
	r = fx_lease_request(a, 0, 32 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -E2BIG, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "pinned models hold 40 MiB");
	fx_contains(d.refusal.text, "unpin model 'big'");
	/* Without the pin it would only wait (the model is idle, evictable). */
	m->pinned = false;
	admit(&f, &r, &d);
	assert_int_not_equal(d.verdict, POLICY_REFUSE);
	fx_finish(&f);
}

/* Every model counts, however many a device has (listed on the stack up to 16, beyond on
 * the heap): the pinned total names them all. */
static void test_too_big_beside_many_pinned(void **state)
{
	static const unsigned counts[] = {1, 16, 17, 40};
	char want[64], name[16];

	(void)state;
	for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		struct policy_decision d;
		struct policy_request r;
		struct holder *a, *b;
		struct fx f;

		fx_init(&f, 1, 256 * MiB);
		a = fx_holder(&f, 1000, 10, "a");
		b = fx_holder(&f, 1001, 11, "b");
		for (unsigned i = 0; i < counts[c]; i++) {
			struct model *m;

			snprintf(name, sizeof(name), "m%u", i);
			m = fx_model(&f, b, 0, name, TRANSFORMER, 4 * MiB, 0);
			fx_load(&f, m, 0);
			m->pinned = true;
		}
		r = fx_lease_request(a, 0, 254 * MiB, -1);
		admit(&f, &r, &d);
		assert_refused(&d, -E2BIG, REFUSE_DENIAL);
		snprintf(want, sizeof(want), "pinned models hold %u MiB", 4 * counts[c]);
		fx_contains(d.refusal.text, want);
		fx_finish(&f);
	}
}

/* An exclusive rival that is pinned, or in use by the requester itself: -EDEADLK. */
static void test_exclusive_rival_edeadlk(void **state)
{
	struct model *mine, *vae, *other_vae;
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	class_exclusion_add(&f.s.devices[0].exclusive, (1u << TRANSFORMER) | (1u << VAE));
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	mine = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	other_vae = fx_model(&f, b, 0, "vae-b", VAE, 4 * MiB, 0);
	fx_load(&f, other_vae, 0);
	other_vae->pinned = true;
	r = fx_model_request(mine, POLICY_MODEL_ACQUIRE, 0, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -EDEADLK, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "model 'unet': ");
	fx_contains(d.refusal.text, "'vae-b' is pinned");
	other_vae->pinned = false;
	vae = fx_model(&f, a, 0, "vae-a", VAE, 4 * MiB, 0);
	fx_load(&f, vae, 1);
	admit(&f, &r, &d);
	assert_refused(&d, -EDEADLK, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "'vae-a' (4 MiB) is in use by this client");
	fx_finish(&f);
}

/* Only the requester's own models in use could make room: -EDEADLK, release them first. */
static void test_own_inuse_models_fill_budget_edeadlk(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	m = fx_model(&f, a, 0, "mine", TRANSFORMER, 60 * MiB, 0);
	fx_load(&f, m, 1);
	r = fx_lease_request(a, 0, 8 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -EDEADLK, REFUSE_DENIAL);
	fx_contains(d.refusal.text, "this client's models in use hold 60 MiB");
	/* Another client asking the same only waits: the owner may release. */
	r = fx_lease_request(fx_holder(&f, 1001, 11, "b"), 0, 8 * MiB, -1);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	fx_finish(&f);
}

/* A lost device refuses at once, before anything else is looked at. */
static void test_lost_device_enodev_first(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	assert_true(state_device_lost(&f.s, 1, "gone in a test"));
	r = fx_lease_request(fx_holder(&f, 1000, 10, "a"), 1, 128 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -ENODEV, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "device 1 (gpu1) is unusable: gone in a test");
	fx_finish(&f);
}

/* The leases limit counts allocations in flight too; too big goes before it. */
static void test_leases_limit_counts_allocations_in_flight(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.cfg.limits.max_leases = 2;
	a = fx_holder(&f, 1000, 10, "a");
	fx_lease(&f, a, 0, 2 * MiB, NULL);
	r = fx_lease_request(a, 0, 2 * MiB, -1);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	a->jobs = 1; /* one allocation under way */
	admit(&f, &r, &d);
	assert_refused(&d, -EDQUOT, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_LEASES);
	fx_contains(d.refusal.text, "already holds 2 leases, the most allowed (leases)");
	r.requested = 128 * MiB;
	admit(&f, &r, &d);
	assert_refused(&d, -E2BIG, REFUSE_DENIAL);
	a->jobs = 0;
	fx_finish(&f);
}

/* The pending limit applies only to a request that would wait. */
static void test_pending_limit_only_when_queueing(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	f.cfg.limits.max_pending = 1;
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	fx_lease(&f, b, 1, 64 * MiB, NULL);
	fx_wait(&f, a, 1, 8 * MiB, -1);
	r = fx_lease_request(a, 0, 8 * MiB, -1);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	r.device = 1;
	admit(&f, &r, &d);
	assert_refused(&d, -EBUSY, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_PENDING);
	fx_finish(&f);
}

/* A uid's quota counts what all its holders hold and wait for; 0 is unlimited. */
static void test_uid_quota_across_holders(void **state)
{
	struct holder *a1, *a2, *a3;
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	f.cfg.limits.max_bytes_per_uid = 16 * MiB;
	a1 = fx_holder(&f, 1000, 10, "a1");
	a2 = fx_holder(&f, 1000, 11, "a2");
	a3 = fx_holder(&f, 1000, 12, "a3");
	fx_lease(&f, a1, 0, 8 * MiB, NULL);
	fx_lease(&f, fx_holder(&f, 1001, 20, "b"), 1, 64 * MiB, NULL);
	fx_wait(&f, a2, 1, 4 * MiB, -1);
	r = fx_lease_request(a3, 0, 6 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -EDQUOT, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_BYTES_PER_UID);
	fx_contains(d.refusal.text, "it holds 8 MiB and waits for 4 MiB in 3 connection(s)");
	fx_contains(d.refusal.log, "uid 1000 would go over its quota of 16 MiB");
	r.requested = 4 * MiB;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	f.cfg.limits.max_bytes_per_uid = 0;
	r.requested = 40 * MiB;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	fx_finish(&f);
}

/* A lease tagged with a model: unknown (-ENOENT), another's (-EPERM), elsewhere (-EINVAL). */
static void test_tagged_lease_checks(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct model *mb, *ma;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	mb = fx_model(&f, b, 0, "theirs", TRANSFORMER, 0, 0);
	ma = fx_model(&f, a, 1, "mine", TRANSFORMER, 0, 0);
	r = fx_lease_request(a, 0, 2 * MiB, -1);
	r.model_id = 999;
	admit(&f, &r, &d);
	assert_refused(&d, -ENOENT, REFUSE_PLAIN);
	r.model_id = mb->id;
	admit(&f, &r, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	fx_contains(d.refusal.text, "belongs to pid 11 'b'");
	r.model_id = ma->id;
	admit(&f, &r, &d);
	assert_refused(&d, -EINVAL, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "lives on device 1, not 0");
	r.device = 1;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.model, ma->id);
	fx_finish(&f);
}

/* A resident model (or one holding nothing) is in use at once, even with a queue. */
static void test_acquire_resident_at_once(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct model *m, *empty;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, a, 0, "m", TRANSFORMER, 8 * MiB, 0);
	empty = fx_model(&f, a, 0, "leases-only", TRANSFORMER, 0, 0);
	fx_load(&f, m, 0);
	fx_lease(&f, b, 0, 56 * MiB, NULL);
	fx_wait(&f, b, 0, 8 * MiB, -1);
	r = fx_model_request(m, POLICY_MODEL_ACQUIRE, 0, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.grant, GRANT_MODEL_IN_USE);
	assert_int_equal(d.bytes, 0);
	r = fx_model_request(empty, POLICY_MODEL_ACQUIRE, 0, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.grant, GRANT_MODEL_IN_USE);
	fx_finish(&f);
}

/* A model being evicted waits for its memory back, then needs its whole size again. */
static void test_acquire_evicting_waits_for_whole_size(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "m", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, m, 0);
	m->evicting = true;
	r = fx_model_request(m, POLICY_MODEL_ACQUIRE, 0, 1000);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	assert_int_equal(d.bytes, 8 * MiB);
	assert_int_equal(d.target, 8 * MiB);
	m->evicting = false;
	fx_finish(&f);
}

/* An acquire count that would wrap is refused. */
static void test_acquire_count_never_wraps(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "m", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, m, UINT_MAX);
	r = fx_model_request(m, POLICY_MODEL_ACQUIRE, 0, 0);
	admit(&f, &r, &d);
	assert_refused(&d, -EOVERFLOW, REFUSE_PLAIN);
	fx_finish(&f);
}

/* Resizes: smaller at once, larger like an acquire, never while evicting or overflowing. */
static void test_resize(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, a, 0, "m", TRANSFORMER, 16 * MiB, 0);
	fx_load(&f, m, 1);
	r = fx_model_request(m, POLICY_MODEL_RESIZE, 7 * MiB, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.grant, GRANT_MODEL_SHRINK);
	assert_int_equal(d.bytes, 8 * MiB);
	r.requested = 24 * MiB;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_int_equal(d.grant, GRANT_MODEL_GROW);
	assert_int_equal(d.bytes, 8 * MiB);
	fx_lease(&f, b, 0, 40 * MiB, NULL);
	fx_wait(&f, b, 0, 4 * MiB, -1);
	r.timeout_ms = 100;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	assert_int_equal(d.target, 24 * MiB);
	r.requested = UINT64_MAX;
	admit(&f, &r, &d);
	assert_refused(&d, -EINVAL, REFUSE_PLAIN);
	r.requested = 24 * MiB;
	m->evicting = true;
	admit(&f, &r, &d);
	assert_refused(&d, -EBUSY, REFUSE_PLAIN);
	m->evicting = false;
	fx_finish(&f);
}

/* Registration: the size rounded, never beyond the budget, at most 256 per connection. */
static void test_register(void **state)
{
	struct policy_decision d;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	policy_register(&f.s, a, 0, true, 3 * MiB, "m", &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	assert_int_equal(d.bytes, 4 * MiB);
	policy_register(&f.s, a, 0, true, 65 * MiB, "huge", &d);
	assert_refused(&d, -E2BIG, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "model 'huge' needs 65 MiB, more than device 0's whole budget");
	a->model_count = LIMITS_MAX_MODELS;
	policy_register(&f.s, a, 0, false, 0, "m", &d);
	assert_refused(&d, -EDQUOT, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_MODELS);
	a->model_count = 0;
	fx_finish(&f);
}

/* Host leases keep an fd each: the descriptor caps refuse with -EMFILE. */
static void test_descriptor_caps(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.s.devices[0].handle_kind = BACKEND_HANDLE_MEMFD;
	f.cfg.fd_limit = 64 + 3 * 64 + 8; /* room 200: connections 100, total 100, per uid 50 */
	a = fx_holder(&f, 1000, 10, "a");
	a->fd_leases = 50;
	r = fx_lease_request(a, 0, 2 * MiB, -1);
	admit(&f, &r, &d);
	assert_refused(&d, -EMFILE, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_DESCRIPTORS);
	fx_contains(d.refusal.text, "this connection holds 50 host lease(s)");
	a->fd_leases = 0;
	f.s.fd_leases = 100;
	admit(&f, &r, &d);
	assert_refused(&d, -EMFILE, REFUSE_LIMIT);
	fx_contains(d.refusal.text, "the daemon holds 100 host lease(s)");
	f.s.fd_leases = 0;
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grant_when_queue_empty_and_fits),
	    cmocka_unit_test(test_too_big_beside_many_pinned),
	    cmocka_unit_test(test_queue_behind_earlier_even_if_fits),
	    cmocka_unit_test(test_timeout0_refused_enomem_with_explanation),
	    cmocka_unit_test(test_timeout0_refused_when_others_wait_ahead),
	    cmocka_unit_test(test_queue_due_is_now_plus_timeout),
	    cmocka_unit_test(test_too_big_e2big),
	    cmocka_unit_test(test_too_big_beside_pinned_e2big),
	    cmocka_unit_test(test_exclusive_rival_edeadlk),
	    cmocka_unit_test(test_own_inuse_models_fill_budget_edeadlk),
	    cmocka_unit_test(test_lost_device_enodev_first),
	    cmocka_unit_test(test_leases_limit_counts_allocations_in_flight),
	    cmocka_unit_test(test_pending_limit_only_when_queueing),
	    cmocka_unit_test(test_uid_quota_across_holders),
	    cmocka_unit_test(test_tagged_lease_checks),
	    cmocka_unit_test(test_acquire_resident_at_once),
	    cmocka_unit_test(test_acquire_evicting_waits_for_whole_size),
	    cmocka_unit_test(test_acquire_count_never_wraps),
	    cmocka_unit_test(test_resize),
	    cmocka_unit_test(test_register),
	    cmocka_unit_test(test_descriptor_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
