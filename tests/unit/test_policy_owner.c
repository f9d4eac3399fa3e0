/* SPDX-License-Identifier: MIT */
/*
 * test_policy_owner.c: what only an owner or an administrator may do: releases, unregisters,
 * acks (generations: docs/residency.md), evict and pin on request; trims; who may connect.
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

static void assert_refused(const struct policy_decision *d, int err, enum policy_refusal_kind kind)
{
	assert_int_equal(d->verdict, POLICY_REFUSE);
	assert_int_equal(d->refusal.err, err);
	assert_int_equal(d->refusal.kind, kind);
}

/* A lease is released by its owner only. */
static void test_release(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct lease *l;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	l = fx_lease(&f, a, 0, 2 * MiB, NULL);
	policy_release(&f.s, a, 999, &d);
	assert_refused(&d, -ENOENT, REFUSE_PLAIN);
	policy_release(&f.s, b, l->id, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	fx_contains(d.refusal.text, "belongs to pid 10 'a': only its owner may release it");
	policy_release(&f.s, a, l->id, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* A model is released (only when in use) and unregistered by its owner only. */
static void test_model_ops(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, a, 0, "m", TEXT, 8 * MiB, 0);
	policy_model_op(&f.s, a, m->id, OP_RELEASE, &d);
	assert_refused(&d, -EINVAL, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "is not in use");
	fx_load(&f, m, 1);
	policy_model_op(&f.s, a, m->id, OP_RELEASE, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	policy_model_op(&f.s, b, m->id, OP_UNREGISTER, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	policy_model_op(&f.s, a, 12345, OP_UNREGISTER, &d);
	assert_refused(&d, -ENOENT, REFUSE_PLAIN);
	policy_model_op(&f.s, a, m->id, OP_UNREGISTER, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* An ack names the eviction under way (its generation); anything else is refused, a late one
 * with -ESTALE; an older client's ack without a generation takes the one under way. */
static void test_acks_and_generations(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, a, 0, "m", TEXT, 8 * MiB, 0);
	fx_load(&f, m, 0);
	m->generation = 3;
	policy_evict_ack(&f.s, a, m->id, true, 3, &d);
	assert_refused(&d, -EINVAL, REFUSE_ACK);
	fx_contains(d.refusal.text, "was not asked to unload (generation 3)");
	policy_evict_ack(&f.s, a, m->id, false, 0, &d);
	assert_refused(&d, -EINVAL, REFUSE_ACK);
	fx_contains(d.refusal.text, "was not asked to unload (an ack without a generation)");
	m->evicting = true;
	policy_evict_ack(&f.s, a, m->id, true, 2, &d);
	assert_refused(&d, -ESTALE, REFUSE_ACK);
	fx_contains(d.refusal.text, "generation 2 is over");
	policy_evict_ack(&f.s, a, m->id, true, 4, &d);
	assert_refused(&d, -EINVAL, REFUSE_ACK);
	fx_contains(d.refusal.text, "has no generation 4");
	policy_evict_ack(&f.s, a, m->id, true, 0, &d);
	assert_refused(&d, -EINVAL, REFUSE_ACK);
	policy_evict_ack(&f.s, b, m->id, true, 3, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	policy_evict_ack(&f.s, a, m->id, true, 3, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	policy_evict_ack(&f.s, a, m->id, false, 0, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	/* In use again (acquired meanwhile): release it before acking. */
	m->use_count = 1;
	policy_evict_ack(&f.s, a, m->id, true, 3, &d);
	assert_refused(&d, -EBUSY, REFUSE_PLAIN);
	m->use_count = 0;
	m->evicting = false;
	m->evictions = 1;
	policy_evict_ack(&f.s, a, m->id, false, 0, &d);
	fx_contains(d.refusal.text, "(or its eviction is already over)");
	fx_finish(&f);
}

/* Evict on request: the owner, root, or the admin group; others get -EPERM naming them. */
static void test_admin_evict_who(void **state)
{
	struct policy_decision d;
	struct holder *a, *b, *root, *admin;
	gid_t groups[] = {77};
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	root = fx_holder(&f, 0, 12, "root");
	admin = fx_holder(&f, 1002, 13, "admin");
	admin->who.groups = NULL;
	admin->who.ngroups = 0;
	m = fx_model(&f, a, 0, "m", TEXT, 8 * MiB, 0);
	fx_load(&f, m, 0);
	policy_admin(&f.s, &f.cfg, b, m->id, true, f.now, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	fx_contains(d.refusal.text, "only its owner or root may evict or pin it");
	f.cfg.access.has_admin_group = true;
	f.cfg.access.admin_gid = 77;
	snprintf(f.cfg.access.admin_group_name, sizeof(f.cfg.access.admin_group_name), "gpuadm");
	policy_admin(&f.s, &f.cfg, b, m->id, true, f.now, &d);
	fx_contains(d.refusal.text, "root or a member of group 'gpuadm' (admin_group)");
	admin->who.groups = groups;
	admin->who.ngroups = 1;
	policy_admin(&f.s, &f.cfg, admin, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	admin->who.groups = NULL;
	admin->who.ngroups = 0;
	policy_admin(&f.s, &f.cfg, root, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.victims[0], m->id);
	assert_int_equal(d.bytes, 8 * MiB);
	assert_int_equal(d.due_ms, f.now + 20000);
	fx_finish(&f);
}

/* Evict on request by state: done at once when it holds nothing, -EBUSY in use or asked
 * already, joins an eviction under way; works on a pinned model. */
static void test_admin_evict_states(void **state)
{
	struct policy_decision d;
	struct holder *a;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	m = fx_model(&f, a, 0, "m", TEXT, 8 * MiB, 0);
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_DONE);
	fx_load(&f, m, 1);
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_refused(&d, -EBUSY, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "is in use: it can be evicted once released");
	m->use_count = 0;
	m->pinned = true;
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	m->evicting = true;
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	m->evict_requester = a->id;
	policy_admin(&f.s, &f.cfg, a, m->id, true, f.now, &d);
	assert_refused(&d, -EBUSY, REFUSE_PLAIN);
	fx_contains(d.refusal.text, "is already being evicted on request");
	m->evicting = false;
	fx_finish(&f);
}

/* A pinned model is never a victim; unpinned, it is one again. */
static void test_pin_makes_model_no_victim(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *m;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 16 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	m = fx_model(&f, b, 0, "m", TEXT, 16 * MiB, 0);
	fx_load(&f, m, 0);
	m->pinned = true;
	fx_wait(&f, a, 0, 8 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	m->pinned = false;
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_EVICT);
	assert_int_equal(d.victims[0], m->id);
	fx_finish(&f);
}

/* One trim per device at a time; the daemon's own trims only when tight and blocking. */
static void test_trims(void **state)
{
	struct policy_decision d;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	policy_trim(&f.s, false, 1, &d);
	assert_int_equal(d.verdict, POLICY_TRIM);
	f.s.devices[1].trimming = true;
	policy_trim(&f.s, false, 1, &d);
	assert_refused(&d, -EBUSY, REFUSE_PLAIN);
	policy_trim(&f.s, true, 0, &d);
	assert_int_equal(d.verdict, POLICY_TRIM);
	assert_true(d.all);
	policy_auto_trim(&f.s, &f.cfg, 0, true, &d);
	assert_int_equal(d.verdict, POLICY_NONE); /* not tight */
	f.s.devices[0].has_meminfo = true;
	f.s.devices[0].runtime_total = 100;
	f.s.devices[0].runtime_free = 9;
	policy_auto_trim(&f.s, &f.cfg, 0, true, &d);
	assert_int_equal(d.verdict, POLICY_TRIM);
	policy_auto_trim(&f.s, &f.cfg, 0, false, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.s.devices[0].trimming = true;
	policy_auto_trim(&f.s, &f.cfg, 0, true, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.s.devices[0].trimming = false;
	f.cfg.stopping = true;
	policy_auto_trim(&f.s, &f.cfg, 0, true, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

/* Connections: the clients caps, and the allowed users and groups (root and the daemon's own
 * user always); the refusal is what the peer is told and what the log says. */
static void test_connect(void **state)
{
	struct identity alice = {.pid = 5, .uid = 1000, .gid = 1000};
	struct identity root = {.pid = 6, .uid = 0, .gid = 0};
	struct identity daemon = {.pid = 7, .uid = 4242, .gid = 4242};
	gid_t groups[] = {300};
	struct policy_decision d;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	policy_connect(&f.s, &f.cfg, 0, &alice, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	policy_connect(&f.s, &f.cfg, 64, &alice, &d);
	assert_refused(&d, -EUSERS, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_CLIENTS);
	fx_contains(d.refusal.log, "refused a connection from pid 5 uid 1000: too many clients");
	f.cfg.access.users.n = 1;
	f.cfg.access.users.ids[0] = 2000;
	policy_connect(&f.s, &f.cfg, 0, &alice, &d);
	assert_refused(&d, -EPERM, REFUSE_ACCESS);
	fx_contains(d.refusal.text, "uid 1000 is not allowed to use this rocmmemd");
	policy_connect(&f.s, &f.cfg, 0, &root, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	policy_connect(&f.s, &f.cfg, 0, &daemon, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.cfg.access.groups.n = 1;
	f.cfg.access.groups.ids[0] = 300;
	alice.groups = groups;
	alice.ngroups = 1;
	policy_connect(&f.s, &f.cfg, 0, &alice, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	f.cfg.limits.max_clients_per_uid = 2;
	fx_holder(&f, 1000, 8, "a1");
	fx_holder(&f, 1000, 9, "a2");
	policy_connect(&f.s, &f.cfg, 2, &alice, &d);
	assert_refused(&d, -EUSERS, REFUSE_LIMIT);
	assert_int_equal(d.refusal.limit, LIMIT_CLIENTS_PER_UID);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_release),
	    cmocka_unit_test(test_model_ops),
	    cmocka_unit_test(test_acks_and_generations),
	    cmocka_unit_test(test_admin_evict_who),
	    cmocka_unit_test(test_admin_evict_states),
	    cmocka_unit_test(test_pin_makes_model_no_victim),
	    cmocka_unit_test(test_trims),
	    cmocka_unit_test(test_connect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
