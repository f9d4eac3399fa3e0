/* SPDX-License-Identifier: MIT */
/*
 * test_policy_hold.c: deadlines by model class (docs/residency.md): each victim's evict
 * deadline is its class's; a model in use past its maximum hold (off by default) is asked to
 * be released, then revoked; a forced eviction is an administrator's alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

static void expired(struct fx *f, struct policy_decision *d)
{
	policy_expired(&f->s, &f->cfg, f->now, d);
}

/* in_use makes m resident and in use since now, its maximum hold armed as the service does. */
static void in_use(struct fx *f, struct model *m)
{
	uint64_t hold = policy_max_hold(&f->cfg, m);

	fx_load(f, m, 1);
	m->in_use_since_ms = f->now;
	if (hold)
		assert_int_equal(
		    state_deadline_set(&f->s, DUE_HOLD, m->id, f->now + hold, &m->hold_slot), 0);
}

/* Off by default: nothing in the settings sets a hold, and no deadline comes of a model in use. */
static void test_max_hold_off_by_default(void **state)
{
	struct policy_decision d;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	m = fx_model(&f, fx_holder(&f, 1000, 10, "a"), 0, "unet", TRANSFORMER, 8 * MiB, 0);
	in_use(&f, m);
	assert_int_equal(policy_max_hold(&f.cfg, m), 0);
	assert_int_equal(m->hold_slot, 0);
	f.now += 7ull * 24 * 3600 * 1000;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* The default hold, a class's own, and a class turned off. */
static void test_max_hold_per_class(void **state)
{
	struct model *unet, *vae, *te;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.cfg.sched.max_hold_ms = 60000;
	f.cfg.sched.max_hold_class_ms[TRANSFORMER] = 1000;
	f.cfg.sched.max_hold_class_ms[VAE] = POLICY_CLASS_OFF;
	a = fx_holder(&f, 1000, 10, "a");
	unet = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	vae = fx_model(&f, a, 0, "vae", VAE, 8 * MiB, 0);
	te = fx_model(&f, a, 0, "te", TEXT, 8 * MiB, 0);
	assert_int_equal(policy_max_hold(&f.cfg, unet), 1000);
	assert_int_equal(policy_max_hold(&f.cfg, vae), 0);
	assert_int_equal(policy_max_hold(&f.cfg, te), 60000);
	fx_finish(&f);
}

/* Past its hold, the owner is asked to release (EVICT with force, its class's deadline); past
 * that deadline, still in use, it is revoked. A model released before its hold is not asked. */
static void test_max_hold_asks_then_revokes(void **state)
{
	struct policy_decision d;
	struct model *m, *quick;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.cfg.sched.max_hold_ms = 30000;
	f.cfg.sched.evict_deadline_ms[TRANSFORMER] = 4000;
	a = fx_holder(&f, 1000, 10, "a");
	m = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	in_use(&f, m);
	quick = fx_model(&f, a, 0, "te", TEXT, 8 * MiB, 0);
	in_use(&f, quick);
	f.now += 29999;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	/* te released meanwhile (the service disarms; here its count alone says so). */
	quick->use_count = 0;
	f.now += 1;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_true(d.force);
	assert_int_equal(d.nvictims, 1);
	assert_int_equal(d.victims[0], m->id);
	assert_int_equal(d.victim_due_ms[0], f.now + 4000);
	assert_int_equal(d.holder, a->id);
	fx_contains(d.reason, "in use for 30 s, longer than its maximum hold of 30 s (max_hold)");
	/* Applied as the service does: the hold's deadline gone, the eviction's armed. */
	state_deadline_clear(&f.s, &m->hold_slot);
	m->evicting = true;
	m->evict_started_ms = f.now;
	assert_int_equal(
	    state_deadline_set(&f.s, DUE_EVICTION, m->id, d.victim_due_ms[0], &m->heap_slot), 0);
	/* te's deadline comes up now: released, so nothing. */
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	state_deadline_clear(&f.s, &quick->hold_slot);
	f.now += 3999;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.now += 1;
	expired(&f, &d);
	assert_int_equal(d.verdict, POLICY_REVOKE);
	assert_int_equal(d.model, m->id);
	assert_string_equal(d.reason, "did not release and unload it within 4 s of being asked");
	fx_finish(&f);
}

/* Each victim of a plan gets its own class's deadline; an administrator's eviction too. */
static void test_evict_deadline_per_class(void **state)
{
	struct model *unet, *vae, *other;
	struct policy_decision d;
	struct holder *a, *b;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.cfg.evict_deadline_ms = 20000;
	f.cfg.sched.evict_deadline_ms[VAE] = 5000;
	f.cfg.sched.evict_deadline_ms[TRANSFORMER] = 45000;
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	unet = fx_model(&f, a, 0, "unet", TRANSFORMER, 24 * MiB, 0);
	vae = fx_model(&f, a, 0, "vae", VAE, 24 * MiB, 1);
	other = fx_model(&f, a, 0, "up", 0, 16 * MiB, 2);
	fx_load(&f, unet, 0);
	fx_load(&f, vae, 0);
	fx_load(&f, other, 0);
	fx_wait(&f, b, 0, 64 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.nvictims, 3);
	for (unsigned i = 0; i < d.nvictims; i++) {
		const struct model *m = state_model_find(&f.s, d.victims[i]);
		uint64_t want = m == vae ? 5000 : m == unet ? 45000 : 20000;

		assert_int_equal(d.victim_due_ms[i], f.now + want);
	}
	assert_int_equal(d.due_ms, f.now + 45000);
	policy_admin(&f.s, &f.cfg, a, vae->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.victim_due_ms[0], f.now + 5000);
	fx_finish(&f);
}

/* A forced eviction: refused to anyone but root or the admin group, the owner included, with
 * a message saying who may; for an administrator a model in use is asked to be released, an
 * idle one evicted as usual. */
static void test_force_is_for_administrators(void **state)
{
	struct holder *a, *root, *staff;
	struct policy_decision d;
	struct model *m, *idle;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	f.cfg.access.has_admin_group = true;
	f.cfg.access.admin_gid = 777;
	snprintf(f.cfg.access.admin_group_name, sizeof(f.cfg.access.admin_group_name), "gpuadm");
	a = fx_holder(&f, 1000, 10, "a");
	root = fx_holder(&f, 0, 1, "rocmmemctl");
	staff = fx_holder(&f, 777, 12, "rocmmemctl");
	m = fx_model(&f, a, 0, "unet", TRANSFORMER, 8 * MiB, 0);
	fx_load(&f, m, 1);
	idle = fx_model(&f, a, 0, "vae", VAE, 8 * MiB, 0);
	fx_load(&f, idle, 0);
	policy_admin_force(&f.s, &f.cfg, a, m->id, f.now, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	assert_int_equal(d.refusal.err, -EPERM);
	assert_int_equal(d.refusal.kind, REFUSE_ACCESS);
	fx_contains(d.refusal.text, "a forced eviction takes root or a member of group 'gpuadm' "
				    "(admin_group): uid 1000 is not an administrator");
	/* The plain eviction still refuses a model in use, for anyone. */
	policy_admin(&f.s, &f.cfg, root, m->id, true, f.now, &d);
	assert_int_equal(d.refusal.err, -EBUSY);
	policy_admin_force(&f.s, &f.cfg, root, m->id, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_true(d.force);
	assert_int_equal(d.victims[0], m->id);
	assert_int_equal(d.victim_due_ms[0], f.now + 20000);
	fx_contains(d.reason, "an administrator forced its eviction");
	/* The admin group's gid, as a supplementary group or its own. */
	staff->who.gid = 777;
	policy_admin_force(&f.s, &f.cfg, staff, idle->id, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_false(d.force);
	policy_admin_force(&f.s, &f.cfg, root, 999, f.now, &d);
	assert_int_equal(d.refusal.err, -ENOENT);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_max_hold_off_by_default),
	    cmocka_unit_test(test_max_hold_per_class),
	    cmocka_unit_test(test_max_hold_asks_then_revokes),
	    cmocka_unit_test(test_evict_deadline_per_class),
	    cmocka_unit_test(test_force_is_for_administrators),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
