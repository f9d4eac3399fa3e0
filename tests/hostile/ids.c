/* SPDX-License-Identifier: MIT */
/*
 * ids.c: owns client-chosen ids on the raw protocol: the four messages that once wrapped the
 * model id counter (issue 13, F1), re-declarations naming edge ids, other clients' ids and ids
 * never issued, lease re-declarations of made-up ids, a use count at its top, and which
 * re-declared ids a restarted daemon honours.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "wire.h"

#define TOP (UINT64_MAX - 1)

/* A model re-declaration; has_prev says whether previous_id is on the wire. */
static int send_redeclare(int fd, uint64_t id, bool has_prev, uint64_t prev, const char *name,
			  uint32_t use_count)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRedeclare req = ROCMMEM__WIRE__MODEL_REDECLARE__INIT;

	req.has_previous_id = has_prev;
	req.previous_id = prev;
	req.has_device = true;
	req.device = 0;
	req.name = (char *)(uintptr_t)name;
	req.has_use_count = use_count != 0;
	req.use_count = use_count;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REDECLARE;
	msg.model_redeclare = &req;
	return hostile_send(fd, true, id, &msg);
}

static int send_register(int fd, uint64_t id, const char *name)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;

	reg.name = (char *)(uintptr_t)name;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	return hostile_send(fd, true, id, &msg);
}

/* send_model_op sends an acquire (timeout 0) or an unregister of model. */
static int send_model_op(int fd, uint64_t id, bool acquire, uint64_t model)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	Rocmmem__Wire__ModelUnregister unr = ROCMMEM__WIRE__MODEL_UNREGISTER__INIT;

	if (acquire) {
		acq.has_model_id = true;
		acq.model_id = model;
		acq.has_timeout_ms = true;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
		msg.model_acquire = &acq;
	} else {
		unr.has_model_id = true;
		unr.model_id = model;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
		msg.model_unregister = &unr;
	}
	return hostile_send(fd, true, id, &msg);
}

/* expect_model reads the reply to id: success with a model id, which it returns. */
static uint64_t expect_model(int fd, uint64_t id)
{
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 5000, NULL, NULL);
	Rocmmem__Wire__Reply *r = m->reply;
	uint64_t model;

	if (r->has_error && r->error != 0)
		fail_msg("request %llu refused: %d (%s): %s", (unsigned long long)id, r->error,
			 strerror(-r->error), r->message ? r->message : "");
	assert_int_equal(r->id, id);
	assert_int_equal(r->body_case, ROCMMEM__WIRE__REPLY__BODY_MODEL);
	assert_true(r->model->has_model_id);
	model = r->model->model_id;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_true(model != 0 && model < UINT64_MAX);
	return model;
}

static void expect_ok(int fd, uint64_t id)
{
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 5000, NULL, NULL);
	Rocmmem__Wire__Reply *r = m->reply;

	if (r->has_error && r->error != 0)
		fail_msg("request %llu refused: %d (%s): %s", (unsigned long long)id, r->error,
			 strerror(-r->error), r->message ? r->message : "");
	assert_int_equal(r->id, id);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

/* models_listed counts the models in a status, and finds the one with this id (or NULL). */
static size_t models_listed(const struct daemon_proc *d, uint64_t id, int32_t *owner)
{
	rocmmem_client *c = harness_connect(d, "ids-check");
	rocmmem_status *st = NULL;
	size_t n;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	n = rocmmem_status_model_count(st);
	for (size_t i = 0; owner && i < n; i++)
		if (rocmmem_status_model(st, i)->id == id)
			*owner = rocmmem_status_model(st, i)->owner_pid;
	assert_int_equal(rocmmem_status_device(st, 0)->reserved_bytes, 0);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return n;
}

/*
 * F1 as found: a model re-declared under 2^64-2 used to move the counter there, so that the
 * next two registrations got 2^64-1 and 0 and the sorted id table broke: the disconnect that
 * follows aborted the daemon. Now the id is not the client's to pick.
 */
static void test_four_messages(void **state)
{
	int fd = hostile_greeted("f1");
	uint64_t a, b, c;

	(void)state;
	assert_int_equal(send_redeclare(fd, 2, true, TOP - 1, "a", 0), 0);
	a = expect_model(fd, 2);
	assert_int_equal(send_register(fd, 3, "b"), 0);
	b = expect_model(fd, 3);
	assert_int_equal(send_register(fd, 4, "c"), 0);
	c = expect_model(fd, 4);
	print_message("re-declared as 2^64-2: got %llu, then %llu and %llu\n",
		      (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
	assert_true(a != TOP - 1);
	assert_true(a < b && b < c && c < ((uint64_t)1 << 32));
	assert_int_equal(models_listed(&hostile.d, 0, NULL), 3);
	close(fd);
	hostile_assert_healthy();
	assert_int_equal(models_listed(&hostile.d, 0, NULL), 0);
	assert_false(harness_log_contains(&hostile.d, "registered model 0 "));
}

/* The variant that used to spin: unregister the top ids, stay connected, let another go. */
static void test_unregister_then_another_leaves(void **state)
{
	int fd = hostile_greeted("f1-stays");
	int other = hostile_greeted("f1-other");
	uint64_t a, b;

	(void)state;
	assert_int_equal(send_redeclare(fd, 2, true, TOP - 1, "a", 0), 0);
	a = expect_model(fd, 2);
	assert_int_equal(send_register(fd, 3, "b"), 0);
	b = expect_model(fd, 3);
	assert_int_equal(send_register(fd, 4, "c"), 0);
	expect_model(fd, 4);
	assert_int_equal(send_model_op(fd, 5, false, a), 0);
	expect_ok(fd, 5);
	assert_int_equal(send_model_op(fd, 6, false, b), 0);
	expect_ok(fd, 6);
	assert_int_equal(send_register(other, 2, "theirs"), 0);
	expect_model(other, 2);
	close(other);
	/* The daemon answers both the one that stayed and newcomers. */
	hostile_expect_serving(fd, 7);
	hostile_assert_healthy_with(0, 0, 1);
	assert_int_equal(models_listed(&hostile.d, 0, NULL), 1);
	close(fd);
	hostile_assert_healthy();
}

/*
 * Edge ids: 0, 1, 2^63, 2^64-2, 2^64-1, another client's live model, the next id not issued
 * yet and one far above: never honoured without a record (the fixture's daemon has no
 * predecessor), never taking another's model, never moving the counter.
 */
static void test_edge_ids(void **state)
{
	int fd = hostile_greeted("edges");
	int other = hostile_greeted("owner");
	uint64_t theirs, edges[9], id = 10, last, got;
	pid_t me = getpid();
	int32_t owner = 0;
	size_t n = 0;

	(void)state;
	assert_int_equal(send_register(other, 2, "theirs"), 0);
	theirs = expect_model(other, 2);
	edges[n++] = 0;
	edges[n++] = 1;
	edges[n++] = (uint64_t)1 << 63;
	edges[n++] = TOP - 1;
	edges[n++] = TOP;
	edges[n++] = UINT64_MAX;
	edges[n++] = theirs;
	edges[n++] = theirs + 1; /* the next one, not issued yet */
	edges[n++] = theirs + 1000;
	last = theirs;
	for (size_t i = 0; i < n; i++, id++) {
		char name[32];

		snprintf(name, sizeof(name), "edge-%zu", i);
		assert_int_equal(send_redeclare(fd, id, i != 0, edges[i], name, 0), 0);
		got = expect_model(fd, id);
		/* Fresh: the counter's next, above every id handed out before. */
		assert_true(got > last);
		assert_true(got < theirs + 100);
		last = got;
	}
	/* Theirs is still theirs: listed under its owner, usable by it, not by us. */
	assert_int_equal(models_listed(&hostile.d, theirs, &owner), n + 1);
	assert_int_equal(owner, me);
	assert_int_equal(send_model_op(other, 3, true, theirs), 0);
	expect_ok(other, 3);
	assert_int_equal(send_model_op(fd, id, false, theirs), 0);
	hostile_expect_error(fd, id, -EPERM, NULL);
	close(fd);
	close(other);
	hostile_assert_healthy();
}

/* A use count re-declared at its top: the next acquire is refused, never wrapped to idle. */
static void test_use_count_top(void **state)
{
	int fd = hostile_greeted("count");
	uint64_t model;

	(void)state;
	assert_int_equal(send_redeclare(fd, 2, false, 0, "counted", UINT32_MAX), 0);
	model = expect_model(fd, 2);
	assert_int_equal(send_model_op(fd, 3, true, model), 0);
	hostile_expect_error(fd, 3, -EOVERFLOW, "release it");
	close(fd);
	hostile_assert_healthy();
}

/* Lease re-declarations of made-up ids, each with a memfd: refused, the fd not kept. */
static void test_lease_redeclare_ids(void **state)
{
	static const uint64_t ids[] = {0, 1, 2, (uint64_t)1 << 63, TOP, UINT64_MAX};
	int fd = hostile_greeted("lease-ids");
	uint64_t id = 2;

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++, id++) {
		Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
		Rocmmem__Wire__LeaseRedeclare req = ROCMMEM__WIRE__LEASE_REDECLARE__INIT;
		int mfd = memfd_create("made-up", MFD_CLOEXEC);

		assert_true(mfd >= 0);
		assert_int_equal(ftruncate(mfd, 2 * MIB), 0);
		req.has_lease_id = true;
		req.lease_id = ids[i];
		req.has_device = req.has_size = req.has_handle_kind = req.has_fd_count = true;
		req.size = 2 * MIB;
		req.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD;
		req.fd_count = 1;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
		msg.lease_redeclare = &req;
		msg.has_id = true;
		msg.id = id;
		assert_int_equal(harness_raw_send(fd, &msg, &mfd, 1), 0);
		close(mfd);
		hostile_expect_error(fd, id, ids[i] == 0 ? -EINVAL : -ESTALE, NULL);
	}
	hostile_expect_serving(fd, id);
	close(fd);
	hostile_assert_healthy();
}

/* restart_after_kill kills d with SIGKILL and starts it again on the same socket. */
static void restart_after_kill(struct daemon_proc *d, const char *const *args)
{
	kill(d->pid, SIGKILL);
	assert_int_equal(waitpid(d->pid, NULL, 0), d->pid);
	d->pid = 0;
	assert_int_equal(harness_daemon_restart(d, args), 0);
}

/*
 * After a restart, an id the state file backs is honoured: one the previous daemon handed
 * out (a model without reservation has no record of its own), once; anything else is fresh.
 */
static void test_restart_honours_issued_ids(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct daemon_proc d;
	uint64_t first, second, got, next;
	int fd;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	fd = harness_raw_connect(&d);
	assert_int_equal(harness_raw_hello(fd, 1, "before"), 0);
	assert_int_equal(send_register(fd, 2, "first"), 0);
	first = expect_model(fd, 2);
	assert_int_equal(send_register(fd, 3, "second"), 0);
	second = expect_model(fd, 3);
	restart_after_kill(&d, args);
	close(fd);
	fd = harness_raw_connect(&d);
	assert_int_equal(harness_raw_hello(fd, 1, "after"), 0);
	/* Handed out before: kept. */
	assert_int_equal(send_redeclare(fd, 2, true, second, "second", 0), 0);
	assert_int_equal(expect_model(fd, 2), second);
	/* The same id again: live now, so a fresh one. */
	assert_int_equal(send_redeclare(fd, 3, true, second, "second-again", 0), 0);
	next = expect_model(fd, 3);
	assert_true(next > second);
	/* Never issued, or the very top: fresh ids, in order, the counter unmoved. */
	assert_int_equal(send_redeclare(fd, 4, true, next + 1000, "far", 0), 0);
	got = expect_model(fd, 4);
	assert_true(got > next && got < next + 10);
	assert_int_equal(send_redeclare(fd, 5, true, TOP - 1, "top", 0), 0);
	next = expect_model(fd, 5);
	assert_true(next > got && next < got + 10);
	assert_int_equal(send_register(fd, 6, "plain"), 0);
	assert_true(expect_model(fd, 6) > next);
	/* The first one's id is free and was handed out: it may still come back. */
	assert_int_equal(send_redeclare(fd, 7, true, first, "first", 0), 0);
	assert_int_equal(expect_model(fd, 7), first);
	close(fd);
	assert_int_equal(harness_wait_totals(&d, 0, 0, 3000) >= 0, 1);
	assert_int_equal(models_listed(&d, 0, NULL), 0);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_four_messages),
	    cmocka_unit_test(test_unregister_then_another_leaves),
	    cmocka_unit_test(test_edge_ids),
	    cmocka_unit_test(test_use_count_top),
	    cmocka_unit_test(test_lease_redeclare_ids),
	    cmocka_unit_test(test_restart_honours_issued_ids),
	};

	signal(SIGPIPE, SIG_IGN);
	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
