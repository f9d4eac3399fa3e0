/* SPDX-License-Identifier: MIT */
/* dying.c: clients killed with SIGKILL at the worst moments; nothing they held may linger. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

#define ROUNDS 20

enum { CHILD_NO_LEASE = HOSTILE_CHILD_FIRST };

/* child_acquire sends an acquire that would be granted and dies before reading the reply. */
static void child_acquire(int sync, int self_kill)
{
	int fd = hostile_child_greeted("doomed-acquire");

	if (hostile_send_acquire(fd, 2, 0, 8 * MIB, 0, "doomed") != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	if (self_kill)
		raise(SIGKILL);
	hostile_signal_ready(sync);
	for (;;)
		pause();
}

/* wait_totals waits until the daemon's books show exactly leased bytes in leases leases. */
static void wait_totals(uint64_t leased, size_t leases)
{
	if (harness_wait_totals(&hostile.d, leased, leases, HARNESS_WAIT_MS) < 0) {
		struct harness_totals t;

		harness_totals(&hostile.d, &t);
		fail_msg("the daemon shows %llu bytes in %zu leases, expected %llu in %zu",
			 (unsigned long long)t.leased_bytes, t.leases, (unsigned long long)leased,
			 leases);
	}
}

static void wait_waiters(uint32_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	uint32_t n;

	while ((n = hostile_status_waiters()) != want && harness_now_ms() < end)
		hostile_sleep_ms(2);
	if (n != want)
		fail_msg("%u requests wait, expected %u", n, want);
}

/*
 * Killed right after sending an acquire that is granted, before reading the reply (which
 * carries the lease's fd): the lease must be reclaimed, leased bytes back to 0.
 */
static void test_die_after_acquire(void **state)
{
	(void)state;
	for (int i = 0; i < ROUNDS; i++) {
		bool self_kill = i % 2 == 0;
		struct hostile_child c = hostile_spawn(child_acquire, self_kill);

		if (!self_kill) {
			hostile_child_ready(&c);
			/* The grant is made and its reply sits unread in the child's socket. */
			wait_totals(8 * MIB, 1);
		}
		hostile_child_kill(&c);
		wait_totals(0, 0);
	}
	hostile_assert_healthy();
}

/* child_wait sends an acquire that cannot fit and must wait, then waits to be killed. */
static void child_wait(int sync, int variant)
{
	static const int64_t timeouts[] = {-1, INT64_MAX, 60000, INT64_MIN};
	int fd = hostile_child_greeted("doomed-waiter");

	if (hostile_send_acquire(fd, 2, 0, 32 * MIB, timeouts[variant % 4], "doomed") != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	hostile_signal_ready(sync);
	for (;;)
		pause();
}

/*
 * Killed while its request waits at the head of the queue: the waiter vanishes, and the
 * request queued behind it, which fits, is granted at once (a dead waiter blocks no one).
 */
static void test_die_while_waiting(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 60 * MIB, .timeout_ms = 0, .tag = "holder"};
	rocmmem_client *holder = harness_connect(&hostile.d, "holder");
	rocmmem_lease *hold = NULL;
	int fd = hostile_greeted("behind");

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &hold), 0);
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_wait, i);
		Rocmmem__Wire__ServerMessage *m = NULL;
		uint64_t id = 100 + 2 * (uint64_t)i, lease;

		hostile_child_ready(&c);
		wait_waiters(1);
		/* 60 + 2 MiB fits, but first come, first served: it queues behind the child. */
		assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 10000, "behind"), 0);
		wait_waiters(2);
		assert_int_equal(hostile_recv(fd, 5, &m, NULL, NULL), HOSTILE_RX_TIMEOUT);
		hostile_child_kill(&c);
		lease = hostile_expect_grant(fd, id, 2 * MIB);
		assert_int_equal(hostile_status_waiters(), 0);
		assert_int_equal(hostile_send_release(fd, id + 1, true, lease), 0);
		m = hostile_recv_reply(fd, 3000, NULL, NULL);
		assert_int_equal(m->reply->error, 0);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	/* Killed alone in the queue: afterwards a request that fits is granted with no wait. */
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_wait, i);
		uint64_t id = 1000 + 2 * (uint64_t)i, lease;
		Rocmmem__Wire__ServerMessage *m;

		hostile_child_ready(&c);
		wait_waiters(1);
		hostile_child_kill(&c);
		wait_waiters(0);
		assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, "after"), 0);
		lease = hostile_expect_grant(fd, id, 2 * MIB);
		assert_int_equal(hostile_send_release(fd, id + 1, true, lease), 0);
		m = hostile_recv_reply(fd, 3000, NULL, NULL);
		assert_int_equal(m->reply->error, 0);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	close(fd);
	assert_int_equal(rocmmem_lease_release(hold), 0);
	rocmmem_disconnect(holder);
	hostile_assert_healthy();
}

/* Killed just as its wait ends: the grant races the death; either way nothing is left. */
static void test_die_as_grant_arrives(void **state)
{
	rocmmem_client *holder = harness_connect(&hostile.d, "holder");

	(void)state;
	for (int i = 0; i < ROUNDS; i++) {
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 60 * MIB, .tag = "holder"};
		rocmmem_lease *hold = NULL;
		struct hostile_child c;

		assert_int_equal(rocmmem_lease_acquire(holder, &req, &hold), 0);
		c = hostile_spawn(child_wait, i);
		hostile_child_ready(&c);
		wait_waiters(1);
		if (i % 2)
			kill(c.pid, SIGKILL);
		assert_int_equal(rocmmem_lease_release(hold), 0);
		hostile_child_kill(&c);
		wait_totals(0, 0);
		wait_waiters(0);
	}
	rocmmem_disconnect(holder);
	hostile_assert_healthy();
}

/* child_hold holds several leases (after some coming and going), then waits to be killed. */
static void child_hold(int sync, int arg)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .timeout_ms = 0, .tag = "doomed"};
	rocmmem_lease *l[5] = {NULL};
	rocmmem_client *c = NULL;

	(void)arg;
	if (rocmmem_connect(hostile.d.sock, "doomed-holder", 5000, &c) != 0)
		_exit(HOSTILE_CHILD_NO_CONNECT);
	for (int i = 0; i < 4; i++) {
		req.size = (uint64_t)(i + 1) * 2 * MIB; /* 2, 4, 6, 8 MiB */
		if (rocmmem_lease_acquire(c, &req, &l[i]) != 0)
			_exit(CHILD_NO_LEASE);
	}
	rocmmem_lease_release(l[1]);
	req.size = 10 * MIB;
	if (rocmmem_lease_acquire(c, &req, &l[4]) != 0)
		_exit(CHILD_NO_LEASE);
	hostile_signal_ready(sync); /* holding 2 + 6 + 8 + 10 MiB in 4 leases */
	for (;;)
		pause();
}

/* child_churn acquires and releases without pause until it is killed. */
static void child_churn(int sync, int seed)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .timeout_ms = 1000, .tag = "churn"};
	rocmmem_lease *held[3] = {NULL};
	rocmmem_client *c = NULL;
	unsigned r = (unsigned)seed;

	if (rocmmem_connect(hostile.d.sock, "doomed-churn", 5000, &c) != 0)
		_exit(HOSTILE_CHILD_NO_CONNECT);
	hostile_signal_ready(sync);
	for (unsigned n = 0;; n++) {
		r = r * 1103515245u + 12345u;
		rocmmem_lease_release(held[n % 3]);
		held[n % 3] = NULL;
		req.size = (uint64_t)(1 + (r >> 16) % 8) * MIB;
		if (rocmmem_lease_acquire(c, &req, &held[n % 3]) != 0)
			held[n % 3] = NULL;
	}
}

/* Killed while holding several leases, or in the middle of acquiring and releasing. */
static void test_die_holding_leases(void **state)
{
	(void)state;
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_hold, 0);

		hostile_child_ready(&c);
		wait_totals(26 * MIB, 4);
		hostile_child_kill(&c);
		wait_totals(0, 0);
	}
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_churn, i);

		hostile_child_ready(&c);
		hostile_sleep_ms(i % 8);
		hostile_child_kill(&c);
		wait_totals(0, 0);
	}
	hostile_assert_healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_die_after_acquire),
	    cmocka_unit_test(test_die_while_waiting),
	    cmocka_unit_test(test_die_as_grant_arrives),
	    cmocka_unit_test(test_die_holding_leases),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
