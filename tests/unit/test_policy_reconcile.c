/* SPDX-License-Identifier: MIT */
/* test_policy_reconcile.c: the reconciled books: smoothing, tolerance, charges, refusals. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy/reconcile.h"
#include "policy_fixture.h"

#define GiB ((uint64_t)1 << 30)

/* refresh does what the service does before each decision: the device's undeclared totals. */
static void refresh(struct fx *f, unsigned dev)
{
	struct device *d = &f->s.devices[dev];

	policy_truth_totals(&f->s, d, &d->truth.undeclared, &d->truth.outside,
			    &d->truth.outside_procs);
}

/*
 * measure records that pid holds bytes on dev, read for a whole window (so the level is
 * there), matched to holder h (NULL: outside rocmmemd), declared as it stands now.
 */
static struct truth_proc *measure(struct fx *f, unsigned dev, int32_t pid, const struct holder *h,
				  uint64_t bytes)
{
	struct device *d = &f->s.devices[dev];
	struct truth_proc *p = truth_find(&d->truth, pid);
	struct policy_charge c;

	d->truth.measurable = true;
	if (!p)
		p = truth_add(&d->truth, pid);
	assert_non_null(p);
	p->holder = h ? h->id : 0;
	for (unsigned i = 0; i < TRUTH_WINDOW; i++)
		policy_truth_push(p, bytes);
	assert_int_equal(p->level, bytes);
	if (policy_truth_charge(&f->s, d, p, &c))
		p->declared_at_sample = c.declared;
	refresh(f, dev);
	return p;
}

static void admit(struct fx *f, const struct policy_request *r, struct policy_decision *d)
{
	policy_admit(&f->s, &f->cfg, r, f->now, d);
}

/* The tolerance is 64 MiB, or 5 % of what is declared when that is more. */
static void test_tolerance(void **state)
{
	(void)state;
	assert_int_equal(policy_truth_tolerance(0), 64 * MiB);
	assert_int_equal(policy_truth_tolerance(GiB), 64 * MiB);
	assert_int_equal(policy_truth_tolerance(20 * GiB), GiB);
}

/* A spike shorter than the window does not raise the level; a sustained rise does, to the
 * least reading of the window; a dip does not lower it, a sustained fall does. */
static void test_smoothing(void **state)
{
	struct truth_proc p;

	(void)state;
	memset(&p, 0, sizeof(p));
	policy_truth_push(&p, GiB);
	policy_truth_push(&p, GiB);
	assert_int_equal(p.level, 0); /* not a whole window yet */
	policy_truth_push(&p, GiB);
	assert_int_equal(p.level, GiB);
	policy_truth_push(&p, 8 * GiB); /* a spike */
	assert_int_equal(p.level, GiB);
	policy_truth_push(&p, GiB);
	policy_truth_push(&p, 3 * GiB);
	policy_truth_push(&p, 4 * GiB);
	assert_int_equal(p.level, GiB); /* 8, 1, 3 then 1, 3, 4: not all above 1 */
	policy_truth_push(&p, 5 * GiB);
	assert_int_equal(p.level, 3 * GiB); /* 3, 4, 5: the least of them */
	policy_truth_push(&p, 0);	    /* a dip */
	assert_int_equal(p.level, 3 * GiB);
	policy_truth_push(&p, 2 * GiB);
	policy_truth_push(&p, GiB);
	assert_int_equal(p.level, 2 * GiB); /* 0, 2, 1: all below 3, the largest of them */
	for (unsigned i = 0; i < TRUTH_WINDOW; i++)
		policy_truth_push(&p, 0); /* gone */
	assert_int_equal(p.level, 0);
}

/* A reading beyond twice the device is garbage; anything up to it may be true. */
static void test_plausible(void **state)
{
	struct fx f;

	(void)state;
	fx_init(&f, 1, 4 * GiB);
	f.s.devices[0].total = 4 * GiB;
	assert_true(policy_truth_plausible(&f.s.devices[0], 8 * GiB));
	assert_false(policy_truth_plausible(&f.s.devices[0], 8 * GiB + 1));
	assert_false(policy_truth_plausible(&f.s.devices[0], UINT64_MAX));
	fx_finish(&f);
}

/* Charged is the larger of declared and measured, past the tolerance only. */
static void test_charge(void **state)
{
	struct holder *a;
	struct truth_proc *p;
	struct policy_charge c;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 8 * GiB);
	a = fx_holder(&f, 1000, 10, "a");
	fx_load(&f, fx_model(&f, a, 0, "m", TRANSFORMER, GiB, 0), 0);
	p = measure(&f, 0, 10, a, GiB + 64 * MiB); /* within the tolerance */
	assert_true(policy_truth_charge(&f.s, &f.s.devices[0], p, &c));
	assert_int_equal(c.declared, GiB);
	assert_int_equal(c.charged, GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	p = measure(&f, 0, 10, a, 3 * GiB);
	assert_true(policy_truth_charge(&f.s, &f.s.devices[0], p, &c));
	assert_ptr_equal(c.holder, a);
	assert_int_equal(c.charged, 3 * GiB);
	assert_int_equal(c.undeclared, 2 * GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 2 * GiB);
	assert_int_equal(device_free(&f.s.devices[0]), 5 * GiB);
	assert_int_equal(device_declared_free(&f.s.devices[0]), 7 * GiB);
	/* Less measured than declared: charged what it declared, nothing more. */
	p = measure(&f, 0, 10, a, 100 * MiB);
	assert_true(policy_truth_charge(&f.s, &f.s.devices[0], p, &c));
	assert_int_equal(c.charged, GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	fx_finish(&f);
}

/* A client that declares 1 GiB and holds 3 GiB: a request the declarations alone would grant is
 * refused, and the refusal names the process with both figures. */
static void test_refusal_names_the_process(void **state)
{
	struct holder *a, *b;
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 4 * GiB);
	a = fx_holder(&f, 1000, 4242, "ComfyUI");
	b = fx_holder(&f, 1001, 11, "b");
	fx_load(&f, fx_model(&f, a, 0, "sdxl", TRANSFORMER, GiB, 0), 0);
	r = fx_lease_request(b, 0, 2 * GiB, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT); /* the declared books alone */
	measure(&f, 0, 4242, a, 3 * GiB);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	assert_int_equal(d.refusal.err, -ENOMEM);
	fx_contains(d.refusal.text, "ComfyUI (pid 4242) holds 3 GiB, declared 1 GiB");
	/* Allowed to wait, it waits instead of being granted. */
	r = fx_lease_request(b, 0, 2 * GiB, 5000);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_QUEUE);
	/* What still fits is granted. */
	r = fx_lease_request(b, 0, GiB, 0);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	fx_finish(&f);
}

/* Processes outside rocmmemd shrink what can be granted, and a refusal says how much. */
static void test_outside_shrinks_grantable(void **state)
{
	struct policy_decision d;
	struct policy_request r;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 4 * GiB);
	r = fx_lease_request(fx_holder(&f, 1000, 10, "a"), 0, 2 * GiB, 0);
	measure(&f, 0, 777, NULL, 3 * GiB);
	assert_int_equal(f.s.devices[0].truth.outside, 3 * GiB);
	assert_int_equal(f.s.devices[0].truth.outside_procs, 1);
	assert_int_equal(device_largest_grantable(&f.s.devices[0]), GiB);
	admit(&f, &r, &d);
	assert_int_equal(d.verdict, POLICY_REFUSE);
	fx_contains(d.refusal.text, "processes outside rocmmemd hold 3 GiB");
	/* Outside processes get no tolerance: every byte of theirs is memory nobody granted. */
	measure(&f, 0, 777, NULL, 32 * MiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 32 * MiB);
	fx_finish(&f);
}

/* The daemon's own memory (the leases) and a client that left count nothing; a device that is
 * not measurable counts nothing at all. */
static void test_self_and_gone_count_nothing(void **state)
{
	struct truth_proc *p;
	struct holder *a;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 4 * GiB);
	a = fx_holder(&f, 1000, 10, "a");
	p = measure(&f, 0, 99, NULL, 3 * GiB);
	p->self = true;
	refresh(&f, 0);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	measure(&f, 0, 10, a, 2 * GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 2 * GiB);
	state_holder_leave(&f.s, a);
	refresh(&f, 0);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	state_holder_free(a);
	measure(&f, 0, 777, NULL, GiB);
	f.s.devices[0].truth.measurable = false;
	refresh(&f, 0);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	fx_finish(&f);
}

/* Two connections of one process: its reading is compared with what both declared. */
static void test_one_process_two_connections(void **state)
{
	struct holder *a1, *a2;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 8 * GiB);
	a1 = fx_holder(&f, 1000, 10, "a");
	a2 = fx_holder(&f, 1000, 10, "a");
	fx_lease(&f, a1, 0, GiB, NULL);
	fx_lease(&f, a2, 0, 2 * GiB, NULL);
	measure(&f, 0, 10, a1, 3 * GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, 0);
	measure(&f, 0, 10, a1, 4 * GiB);
	assert_int_equal(f.s.devices[0].truth.undeclared, GiB);
	fx_finish(&f);
}

/* What a client declares after its last reading is memory the reading cannot show yet: a grant
 * always takes from the free budget, however far its process is over. */
static void test_declared_since_reading_counts(void **state)
{
	struct holder *a;
	uint64_t before;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 8 * GiB);
	a = fx_holder(&f, 1000, 10, "a");
	measure(&f, 0, 10, a, 3 * GiB);
	before = device_free(&f.s.devices[0]);
	assert_int_equal(before, 5 * GiB);
	fx_lease(&f, a, 0, GiB, NULL);
	refresh(&f, 0);
	assert_int_equal(device_free(&f.s.devices[0]), before - GiB);
	fx_finish(&f);
}

/*
 * A client's books (status, metrics): its process's, whichever connection of the pid asks; on
 * a device not measured only what it declared; a reading not matched to it yet still shows.
 */
static void test_client_books(void **state)
{
	struct holder *a1, *a2, *b;
	struct policy_charge c;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 8 * GiB);
	a1 = fx_holder(&f, 1000, 10, "a");
	a2 = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1000, 11, "b");
	fx_lease(&f, a1, 0, GiB, NULL);
	fx_lease(&f, a2, 1, GiB, NULL);
	measure(&f, 0, 10, a1, 3 * GiB);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(policy_truth_books(&f.s, &f.s.devices[0], i ? a2 : a1, &c));
		assert_ptr_equal(c.holder, i ? a2 : a1);
		assert_int_equal(c.declared, GiB);
		assert_int_equal(c.measured, 3 * GiB);
		assert_int_equal(c.undeclared, 2 * GiB);
	}
	/* Device 1 is not measured: declared only. */
	assert_false(policy_truth_books(&f.s, &f.s.devices[1], a1, &c));
	assert_int_equal(c.declared, GiB);
	assert_int_equal(c.measured, 0);
	assert_int_equal(c.undeclared, 0);
	/* b's process was read but not matched to it yet (it connected since): charged as a
	 * client would be, within the tolerance nothing. */
	measure(&f, 0, 11, NULL, 32u << 20);
	assert_true(policy_truth_books(&f.s, &f.s.devices[0], b, &c));
	assert_int_equal(c.measured, 32u << 20);
	assert_int_equal(c.undeclared, 0);
	measure(&f, 0, 11, NULL, GiB);
	assert_true(policy_truth_books(&f.s, &f.s.devices[0], b, &c));
	assert_int_equal(c.undeclared, GiB);
	fx_finish(&f);
}

/* declared_on reads the declared bytes of h's process on device 0. */
static uint64_t declared_on(struct fx *f, const struct holder *h)
{
	struct policy_charge c;

	policy_truth_books(&f->s, &f->s.devices[0], h, &c);
	return c.declared;
}

/*
 * A process's declared bytes follow its connections as they come and go, interleaved with
 * another process of the same uid: the first, a middle and the last to connect leave in turn.
 */
static void test_process_books_follow_connections(void **state)
{
	struct holder *p[4], *q = NULL;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * GiB);
	for (unsigned i = 0; i < 4; i++) {
		p[i] = fx_holder(&f, 1000, 20, "p");
		fx_lease(&f, p[i], 0, (i + 1) * GiB, NULL); /* 1 + 2 + 3 + 4 */
		if (i == 1) {
			q = fx_holder(&f, 1000, 21, "q"); /* between them in the uid's list */
			fx_lease(&f, q, 0, 16 * GiB, NULL);
		}
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(declared_on(&f, p[i]), 10 * GiB);
	assert_int_equal(declared_on(&f, q), 16 * GiB);
	fx_drop(&f, p[0]);
	assert_int_equal(declared_on(&f, p[3]), 9 * GiB);
	fx_drop(&f, p[2]);
	assert_int_equal(declared_on(&f, p[1]), 6 * GiB);
	assert_int_equal(declared_on(&f, p[3]), 6 * GiB);
	fx_drop(&f, p[3]);
	assert_int_equal(declared_on(&f, p[1]), 2 * GiB);
	assert_int_equal(declared_on(&f, q), 16 * GiB);
	/* A new connection of the process joins what is left of it. */
	p[0] = fx_holder(&f, 1000, 20, "p");
	assert_int_equal(declared_on(&f, p[0]), 2 * GiB);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tolerance),
	    cmocka_unit_test(test_smoothing),
	    cmocka_unit_test(test_plausible),
	    cmocka_unit_test(test_charge),
	    cmocka_unit_test(test_refusal_names_the_process),
	    cmocka_unit_test(test_outside_shrinks_grantable),
	    cmocka_unit_test(test_self_and_gone_count_nothing),
	    cmocka_unit_test(test_one_process_two_connections),
	    cmocka_unit_test(test_declared_since_reading_counts),
	    cmocka_unit_test(test_client_books),
	    cmocka_unit_test(test_process_books_follow_connections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
