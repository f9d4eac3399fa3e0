/* SPDX-License-Identifier: MIT */
/*
 * test_policy_bypass.c: the hold-and-wait rule (docs/residency.md, step 3; commit c32205e): a
 * request behind a stuck head is let through only when the head waits for its holder's memory.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy_fixture.h"

struct scene {
	struct fx f;
	struct holder *comfy, *framepack;
	struct model *te1, *te2;
	struct waiter *head;
};

/*
 * framepack_scene: FramePack holds text_encoder (40 MiB) in use and asks for text_encoder_2
 * (te2_size); ComfyUI asked first, for 32 MiB, which only FramePack's memory could give.
 */
static void framepack_scene(struct scene *sc, uint64_t te2_size)
{
	struct fx *f = &sc->f;

	fx_init(f, 1, 64 * MiB);
	sc->comfy = fx_holder(f, 1000, 10, "comfyui");
	sc->framepack = fx_holder(f, 1001, 11, "framepack");
	sc->te1 = fx_model(f, sc->framepack, 0, "text_encoder", TEXT, 40 * MiB, 0);
	fx_load(f, sc->te1, 1);
	sc->te2 = fx_model(f, sc->framepack, 0, "text_encoder_2", TEXT, te2_size, 0);
	sc->head = fx_wait(f, sc->comfy, 0, 32 * MiB, -1);
}

/* The hold-and-wait cycle is broken: FramePack's acquire goes first. */
static void test_holder_behind_head_is_let_through(void **state)
{
	struct policy_decision d;
	struct waiter *w;
	struct scene sc;

	(void)state;
	framepack_scene(&sc, 16 * MiB);
	w = fx_wait_model(&sc.f, sc.te2, WAIT_MODEL_ACQUIRE, 16 * MiB, -1);
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.bypass);
	assert_int_equal(d.waiter, w->seq);
	assert_int_equal(d.grant, GRANT_MODEL_LOAD);
	assert_int_equal(d.bytes, 16 * MiB);
	assert_int_equal(d.for_holder, sc.comfy->id);
	fx_finish(&sc.f);
}

/* Another holder that waits for nothing could free enough: no bypass. */
static void test_no_bypass_when_others_can_free_enough(void **state)
{
	struct policy_decision d;
	struct scene sc;

	(void)state;
	framepack_scene(&sc, 8 * MiB);
	/* FramePack holds 24 MiB, another holder 24 MiB it may release: 16 free + 24 >= 32. */
	device_unreserve(&sc.f.s.devices[0], 16 * MiB);
	sc.te1->reservation = 24 * MiB;
	fx_lease(&sc.f, fx_holder(&sc.f, 1002, 12, "other"), 0, 24 * MiB, NULL);
	fx_wait_model(&sc.f, sc.te2, WAIT_MODEL_ACQUIRE, 8 * MiB, -1);
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	/* The other holder gone, only FramePack can free the rest: it goes first. */
	{
		struct holder *other = state_holder_next(&sc.f.s, sc.framepack->id);
		struct lease *l = TAILQ_FIRST(&other->leases);

		device_uncharge(&sc.f.s.devices[0], l->size);
		state_lease_unlink(&sc.f.s, l);
		free(l);
		fx_lease(&sc.f, sc.comfy, 0, 24 * MiB, NULL);
	}
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.bypass);
	fx_finish(&sc.f);
}

/* Only a holder's first request behind the head; its later ones keep their order. */
static void test_only_first_request_of_a_holder(void **state)
{
	struct policy_decision d;
	struct scene sc;

	(void)state;
	framepack_scene(&sc, 16 * MiB);
	fx_wait(&sc.f, sc.framepack, 0, 30 * MiB, -1); /* does not fit: 24 MiB free */
	fx_wait_model(&sc.f, sc.te2, WAIT_MODEL_ACQUIRE, 16 * MiB, -1);
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&sc.f);
}

/* The head's own holder never overtakes itself; a holder with nothing in use is not let
 * through either. */
static void test_never_the_heads_own_nor_empty_holders(void **state)
{
	struct policy_decision d;
	struct scene sc;

	(void)state;
	struct waiter *w;

	framepack_scene(&sc, 16 * MiB);
	fx_wait(&sc.f, sc.comfy, 0, 2 * MiB, -1);
	fx_wait(&sc.f, fx_holder(&sc.f, 1003, 13, "empty"), 0, 2 * MiB, -1);
	w = fx_wait_model(&sc.f, sc.te2, WAIT_MODEL_ACQUIRE, 16 * MiB, -1);
	/* Both fit, and come first: neither goes; FramePack's, which holds memory, does. */
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.bypass);
	assert_int_equal(d.waiter, w->seq);
	fx_finish(&sc.f);
}

/* Only a request that fits now, without any eviction. */
static void test_only_requests_that_fit_now(void **state)
{
	struct policy_decision d;
	struct scene sc;

	(void)state;
	framepack_scene(&sc, 28 * MiB);
	fx_wait_model(&sc.f, sc.te2, WAIT_MODEL_ACQUIRE, 28 * MiB, -1);
	fx_next(&sc.f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&sc.f);
}

/*
 * With only an exclusive rival in the way (the bytes would do), a request behind is let
 * through only out of the surplus beyond the head's bytes: never what the head needs.
 */
static void test_rival_only_block_takes_only_the_surplus(void **state)
{
	struct model *unet, *vae;
	struct policy_decision d;
	struct holder *c, *fp;
	struct waiter *w;
	struct fx f;

	(void)state;
	fx_init(&f, 1, 64 * MiB);
	class_exclusion_add(&f.s.devices[0].exclusive, (1u << TRANSFORMER) | (1u << VAE));
	c = fx_holder(&f, 1000, 10, "comfyui");
	fp = fx_holder(&f, 1001, 11, "framepack");
	vae = fx_model(&f, fp, 0, "vae", VAE, 8 * MiB, 0);
	fx_load(&f, vae, 1);
	unet = fx_model(&f, c, 0, "unet", TRANSFORMER, 40 * MiB, 0);
	fx_wait_model(&f, unet, WAIT_MODEL_ACQUIRE, 40 * MiB, -1);
	/* 56 MiB free, the head needs 40: 16 MiB of surplus. */
	w = fx_wait(&f, fp, 0, 20 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	state_waiter_drop(&f.s, w);
	w = fx_wait(&f, fp, 0, 16 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_GRANT);
	assert_true(d.bypass);
	assert_int_equal(d.waiter, w->seq);
	fx_finish(&f);
}

/* The rule looks at one device at a time: a cycle across two devices is left to the
 * timeouts (the documented limit). */
static void test_cross_device_cycle_is_not_broken(void **state)
{
	struct policy_decision d;
	struct holder *a, *b;
	struct model *ma, *mb;
	struct fx f;

	(void)state;
	fx_init(&f, 2, 64 * MiB);
	a = fx_holder(&f, 1000, 10, "a");
	b = fx_holder(&f, 1001, 11, "b");
	ma = fx_model(&f, a, 0, "ma", TEXT, 48 * MiB, 0);
	fx_load(&f, ma, 1);
	mb = fx_model(&f, b, 1, "mb", TEXT, 48 * MiB, 0);
	fx_load(&f, mb, 1);
	fx_wait(&f, b, 0, 32 * MiB, -1);
	fx_wait(&f, a, 1, 32 * MiB, -1);
	fx_next(&f, &d);
	assert_int_equal(d.verdict, POLICY_NONE);
	fx_finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_holder_behind_head_is_let_through),
	    cmocka_unit_test(test_no_bypass_when_others_can_free_enough),
	    cmocka_unit_test(test_only_first_request_of_a_holder),
	    cmocka_unit_test(test_never_the_heads_own_nor_empty_holders),
	    cmocka_unit_test(test_only_requests_that_fit_now),
	    cmocka_unit_test(test_rival_only_block_takes_only_the_surplus),
	    cmocka_unit_test(test_cross_device_cycle_is_not_broken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
