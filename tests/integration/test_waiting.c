/* SPDX-License-Identifier: MIT */
/* test_waiting.c: waiting for memory: grants on release, timeouts, FIFO order, threads, kill -9. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

/* A child that asks for size (bytes, timeout ms come from the pipe) and reports the outcome:
 * the lease id (> 0) or the negative errno, then waits for "release" before releasing. */
static int asker(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req)};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	int64_t size, timeout, go;
	int err;

	if (!pipe_get(in, &size, 10000) || !pipe_get(in, &timeout, 10000))
		return 20;
	if (rocmmem_connect(d->sock, "asker", 5000, &c))
		return 21;
	req.size = (uint64_t)size;
	req.timeout_ms = timeout;
	err = rocmmem_lease_acquire(c, &req, &l);
	pipe_put(out, err ? err : (int64_t)rocmmem_lease_id(l));
	if (err)
		return 0;
	pipe_put(out, (int64_t)rocmmem_lease_waited_ms(l));
	if (!pipe_get(in, &go, 30000))
		return 22;
	if (rocmmem_lease_release(l))
		return 23;
	rocmmem_disconnect(c);
	return 0;
}

static void start_asker(struct child *ch, uint64_t size, int64_t timeout_ms)
{
	assert_int_equal(child_start(ch, asker, &harness_group), 0);
	assert_true(pipe_put(ch->to_child, (int64_t)size));
	assert_true(pipe_put(ch->to_child, timeout_ms));
}

/* wait_waiters polls until the device's queue holds n requests. */
static void wait_waiters(uint32_t n)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct harness_totals t;

	while (harness_now_ms() < end) {
		if (harness_totals(&harness_group, &t) == 0 && t.waiters == n)
			return;
		usleep(2000);
	}
	fail_msg("the queue never reached %u waiters", n);
}

/*
 * granted_when_released: a request waits (timeout_ms) while another connection holds the
 * memory; nothing comes back for quiet_ms; then the holder releases and the request is granted,
 * having waited at least that long.
 */
static void granted_when_released(int64_t timeout_ms, int64_t quiet_ms)
{
	rocmmem_client *holder = harness_connect(&harness_group, "holder");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 48 * MiB};
	rocmmem_lease *held = NULL;
	struct child ch;
	int64_t id, waited;

	assert_int_equal(rocmmem_lease_acquire(holder, &req, &held), 0);
	start_asker(&ch, 32 * MiB, timeout_ms);
	wait_waiters(1);
	/* Still waiting: nothing may have come back yet. */
	assert_false(pipe_get(ch.from_child, &id, (long)quiet_ms));
	assert_int_equal(rocmmem_lease_release(held), 0);
	assert_true(pipe_get(ch.from_child, &id, 5000));
	assert_true(id > 0);
	assert_true(pipe_get(ch.from_child, &waited, 5000));
	assert_true(waited >= quiet_ms);
	pipe_put(ch.to_child, 1);
	assert_int_equal(child_wait(&ch, 5000), 0);
	rocmmem_disconnect(holder);
}

static void test_granted_when_another_releases(void **state)
{
	(void)state;
	granted_when_released(10000, 100);
}

/* A wait longer than librocmmem's receive timeout (the reader wakes up at least once a second,
 * then receives again) still ends with the grant, and nothing comes back before it. */
static void test_granted_after_a_long_wait(void **state)
{
	(void)state;
	granted_when_released(20000, 2500);
}

static void test_timeout_honoured(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "holder");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 48 * MiB};
	rocmmem_lease *held = NULL, *got = NULL;
	long start, elapsed;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &held), 0);
	req.size = 32 * MiB;
	req.timeout_ms = 300;
	start = harness_now_ms();
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &got), -ETIMEDOUT);
	elapsed = harness_now_ms() - start;
	/* Not before the deadline; the upper bound only catches a wait that never ends. */
	assert_true(elapsed >= 290);
	assert_true(elapsed < 5000);
	assert_non_null(strstr(rocmmem_last_error(), "timed out after 300 ms"));
	/* Timeout 0 fails at once. */
	req.timeout_ms = 0;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &got), -ENOMEM);
	assert_int_equal(rocmmem_lease_release(held), 0);
	rocmmem_disconnect(holder);
}

static void test_fifo_order(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "holder");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 60 * MiB};
	rocmmem_lease *held = NULL;
	struct child big, small;
	int64_t big_id, small_id, dummy;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &held), 0);
	start_asker(&big, 32 * MiB, 10000);
	wait_waiters(1);
	/* 4 MiB are free, enough for 2 MiB, but the earlier request waits first: no overtaking
	 * that could starve large requests. */
	start_asker(&small, 2 * MiB, 10000);
	wait_waiters(2);
	assert_false(pipe_get(small.from_child, &small_id, 100));
	assert_int_equal(rocmmem_lease_release(held), 0);
	assert_true(pipe_get(big.from_child, &big_id, 5000));
	assert_true(pipe_get(small.from_child, &small_id, 5000));
	assert_true(big_id > 0 && small_id > 0);
	assert_true(big_id < small_id);
	assert_true(pipe_get(big.from_child, &dummy, 5000));
	assert_true(pipe_get(small.from_child, &dummy, 5000));
	pipe_put(big.to_child, 1);
	pipe_put(small.to_child, 1);
	assert_int_equal(child_wait(&big, 5000), 0);
	assert_int_equal(child_wait(&small, 5000), 0);
	rocmmem_disconnect(holder);
}

static void test_dead_waiter_leaves_queue(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "holder");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 60 * MiB};
	rocmmem_lease *held = NULL;
	struct child dead, next;
	int64_t id;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &held), 0);
	start_asker(&dead, 32 * MiB, -1);
	wait_waiters(1);
	start_asker(&next, 8 * MiB, 10000);
	wait_waiters(2);
	child_kill(&dead);
	wait_waiters(1);
	assert_int_equal(rocmmem_lease_release(held), 0);
	assert_true(pipe_get(next.from_child, &id, 5000));
	assert_true(id > 0);
	pipe_get(next.from_child, &id, 5000);
	pipe_put(next.to_child, 1);
	assert_int_equal(child_wait(&next, 5000), 0);
	rocmmem_disconnect(holder);
}

/* A holder process that takes three leases, touches them, reports and waits to be killed. */
static int holder_proc(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	rocmmem_client *c = NULL;
	int64_t never;

	if (rocmmem_connect(d->sock, "victim", 5000, &c))
		return 30;
	for (int i = 0; i < 3; i++) {
		struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 8 * MiB};
		rocmmem_lease *l = NULL;

		if (rocmmem_lease_acquire(c, &req, &l))
			return 31;
		memset(rocmmem_lease_ptr(l), i + 1, 8 * MiB);
	}
	pipe_put(out, 1);
	pipe_get(in, &never, 60000);
	return 0;
}

static void test_kill9_frees_within_1s(void **state)
{
	struct harness_totals t;
	struct child ch;
	int64_t ready;
	long took;

	(void)state;
	for (int round = 0; round < 5; round++) {
		assert_int_equal(child_start(&ch, holder_proc, &harness_group), 0);
		assert_true(pipe_get(ch.from_child, &ready, 10000));
		assert_int_equal(harness_totals(&harness_group, &t), 0);
		assert_int_equal(t.leased_bytes, 24 * MiB);
		assert_int_equal(t.leases, 3);
		kill(ch.pid, SIGKILL);
		took = harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS);
		assert_true(took >= 0);
		child_kill(&ch);
	}
}

struct shared_client {
	rocmmem_client *client;
	int result;
	uint64_t waited_ms;
};

static void *waiting_thread(void *arg)
{
	struct shared_client *s = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 40 * MiB, .timeout_ms = -1};
	rocmmem_lease *l = NULL;

	s->result = rocmmem_lease_acquire(s->client, &req, &l);
	if (s->result == 0) {
		s->waited_ms = rocmmem_lease_waited_ms(l);
		s->result = rocmmem_lease_release(l);
	}
	return NULL;
}

static void test_threads_share_a_client(void **state)
{
	struct shared_client s = {0};
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 40 * MiB};
	rocmmem_lease *l = NULL;
	rocmmem_status *st = NULL;
	pthread_t t;

	(void)state;
	s.client = harness_connect(&harness_group, "threads");
	assert_int_equal(rocmmem_lease_acquire(s.client, &req, &l), 0);
	assert_int_equal(pthread_create(&t, NULL, waiting_thread, &s), 0);
	wait_waiters(1);
	/* While one thread waits for memory on this connection, the others are not blocked. */
	assert_int_equal(rocmmem_status_get(s.client, &st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->waiters, 1);
	rocmmem_status_free(st);
	usleep(50000);
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.result, 0);
	assert_true(s.waited_ms >= 50);
	rocmmem_disconnect(s.client);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_granted_when_another_releases, harness_case_idle),
	    cmocka_unit_test_teardown(test_granted_after_a_long_wait, harness_case_idle),
	    cmocka_unit_test_teardown(test_timeout_honoured, harness_case_idle),
	    cmocka_unit_test_teardown(test_fifo_order, harness_case_idle),
	    cmocka_unit_test_teardown(test_dead_waiter_leaves_queue, harness_case_idle),
	    cmocka_unit_test_teardown(test_kill9_frees_within_1s, harness_case_idle),
	    cmocka_unit_test_teardown(test_threads_share_a_client, harness_case_idle),
	};

	signal(SIGPIPE, SIG_IGN);
	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
