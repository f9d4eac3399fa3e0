/* SPDX-License-Identifier: MIT */
/* requests.c: hostile values in well-formed requests: lease ids, sizes, devices, text, timeouts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

/* expect_release_ok reads the successful reply to a release. */
static void expect_release_ok(int fd, uint64_t id)
{
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, NULL, NULL);

	if (m->reply->has_error && m->reply->error != 0)
		fail_msg("release %llu refused: %d (%s)", (unsigned long long)id, m->reply->error,
			 m->reply->message ? m->reply->message : "");
	assert_int_equal(m->reply->id, id);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

/* expect_silence checks that nothing arrives on fd for ms (a request that waits). */
static void expect_silence(int fd, int ms)
{
	Rocmmem__Wire__ServerMessage *m = NULL;
	enum hostile_rx rx = hostile_recv(fd, ms, &m, NULL, NULL);

	if (m) {
		fail_msg("expected the request to wait, got a reply: error %d (%s)",
			 m->reply ? m->reply->error : 0,
			 m->reply && m->reply->message ? m->reply->message : "");
	}
	assert_int_equal(rx, HOSTILE_RX_TIMEOUT);
}

/* wait_waiters polls status until `want` requests wait (up to 2 s). */
static void wait_waiters(uint32_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	uint32_t n;

	while ((n = hostile_status_waiters()) != want && harness_now_ms() < end)
		hostile_sleep_ms(5);
	if (n != want)
		fail_msg("%u requests wait, expected %u", n, want);
}

/* Releasing a lease that does not exist: -ENOENT, and the connection keeps working. */
static void test_release_unknown(void **state)
{
	static const uint64_t ids[] = {0, 12345, UINT64_MAX, UINT64_MAX - 1, (uint64_t)1 << 63};
	int fd = hostile_greeted("release-unknown");
	uint64_t lease;

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		assert_int_equal(hostile_send_release(fd, 10 + i, true, ids[i]), 0);
		hostile_expect_error(fd, 10 + i, -ENOENT, "no lease");
	}
	/* A lease released twice: the second time it is unknown. */
	assert_int_equal(hostile_send_acquire(fd, 20, 0, 2 * MIB, 0, "twice"), 0);
	lease = hostile_expect_grant(fd, 20, 2 * MIB);
	assert_int_equal(hostile_send_release(fd, 21, true, lease), 0);
	expect_release_ok(fd, 21);
	assert_int_equal(hostile_send_release(fd, 22, true, lease), 0);
	hostile_expect_error(fd, 22, -ENOENT, "no lease");
	hostile_expect_serving(fd, 23);
	close(fd);
	hostile_assert_healthy();
}

/*
 * Releasing another client's lease: -EPERM; the lease still exists and is still accounted, and
 * its owner can release it.
 */
static void test_release_foreign(void **state)
{
	int owner = hostile_greeted("owner");
	int thief = hostile_greeted("thief");
	struct harness_totals t;
	uint64_t lease;

	(void)state;
	assert_int_equal(hostile_send_acquire(owner, 1, 0, 4 * MIB, 0, "owned"), 0);
	lease = hostile_expect_grant(owner, 1, 4 * MIB);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hostile_send_release(thief, 2 + i, true, lease), 0);
		hostile_expect_error(thief, 2 + i, -EPERM, "belongs to");
	}
	hostile_expect_serving(thief, 9);
	assert_true(hostile_status_has_lease(lease, NULL));
	assert_int_equal(harness_totals(&hostile.d, &t), 0);
	assert_int_equal(t.leased_bytes, 4 * MIB);
	assert_int_equal(t.leases, 1);
	close(thief);
	/* Healthy with the owner still connected and holding its lease. */
	hostile_assert_healthy_with(4 * MIB, 1, 1);
	assert_true(hostile_status_has_lease(lease, NULL));
	assert_int_equal(hostile_send_release(owner, 10, true, lease), 0);
	expect_release_ok(owner, 10);
	assert_false(hostile_status_has_lease(lease, NULL));
	close(owner);
	hostile_assert_healthy();
}

/* A release that names no lease: -EINVAL, connection kept. */
static void test_release_without_id(void **state)
{
	int fd = hostile_greeted("release-none");

	(void)state;
	assert_int_equal(hostile_send_release(fd, 5, false, 0), 0);
	hostile_expect_error(fd, 5, -EINVAL, "lease id");
	hostile_expect_serving(fd, 6);
	close(fd);
	hostile_assert_healthy();
}

/* send_acquire_nosize sends an acquire without a size field. */
static void send_acquire_nosize(int fd, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	assert_int_equal(hostile_send(fd, true, id, &msg), 0);
}

/*
 * Sizes: 0 or none is -EINVAL; more than the budget, including sizes whose rounding to the
 * granule overflows, is -E2BIG whatever the timeout (never a grant, never a wait), and the
 * message names the budget.
 */
static void test_acquire_sizes(void **state)
{
	static const uint64_t too_big[] = {
	    HOSTILE_BUDGET + 1,	      HOSTILE_BUDGET + 2 * MIB,
	    (uint64_t)1 << 40,	      (uint64_t)1 << 63,
	    ((uint64_t)1 << 63) - 1,  UINT64_MAX - MIB,
	    UINT64_MAX - 2 * MIB + 1, UINT64_MAX - 2 * MIB + 2,
	    UINT64_MAX - 1,	      UINT64_MAX,
	};
	static const int64_t timeouts[] = {0, -1, 5000, INT64_MAX};
	int fd = hostile_greeted("sizes");
	uint64_t id = 1, lease;

	(void)state;
	assert_int_equal(hostile_send_acquire(fd, id, 0, 0, 0, "zero"), 0);
	hostile_expect_error(fd, id++, -EINVAL, "size");
	assert_int_equal(hostile_send_acquire(fd, id, 0, 0, -1, "zero"), 0);
	hostile_expect_error(fd, id++, -EINVAL, "size");
	send_acquire_nosize(fd, id);
	hostile_expect_error(fd, id++, -EINVAL, "size");
	for (size_t i = 0; i < sizeof(too_big) / sizeof(too_big[0]); i++) {
		for (size_t j = 0; j < sizeof(timeouts) / sizeof(timeouts[0]); j++) {
			assert_int_equal(
			    hostile_send_acquire(fd, id, 0, too_big[i], timeouts[j], "too-big"), 0);
			hostile_expect_error(fd, id++, -E2BIG, "budget of " HOSTILE_BUDGET_TEXT);
		}
	}
	/* Nothing waits, nothing is leased. */
	assert_int_equal(hostile_status_waiters(), 0);
	/* The edges that do fit: 1 byte is a granule, budget - 1 rounds up to the budget. */
	assert_int_equal(hostile_send_acquire(fd, id, 0, 1, 0, "one-byte"), 0);
	lease = hostile_expect_grant(fd, id++, 2 * MIB);
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_release_ok(fd, id++);
	assert_int_equal(hostile_send_acquire(fd, id, 0, HOSTILE_BUDGET - 1, 0, "all-but-one"), 0);
	lease = hostile_expect_grant(fd, id++, HOSTILE_BUDGET);
	/* With the whole budget held, one more byte is -ENOMEM now, not -E2BIG. */
	assert_int_equal(hostile_send_acquire(fd, id, 0, 1, 0, "one-more"), 0);
	hostile_expect_error(fd, id++, -ENOMEM, "budget");
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_release_ok(fd, id++);
	assert_int_equal(hostile_send_acquire(fd, id, 0, HOSTILE_BUDGET, 0, "all"), 0);
	lease = hostile_expect_grant(fd, id++, HOSTILE_BUDGET);
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_release_ok(fd, id++);
	close(fd);
	hostile_assert_healthy();
}

/* Devices that do not exist: -ENODEV, connection kept. */
static void test_acquire_devices(void **state)
{
	static const uint32_t devices[] = {1, 2, 15, 16, 64, 255, 0x80000000u, UINT32_MAX};
	int fd = hostile_greeted("devices");

	(void)state;
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		assert_int_equal(hostile_send_acquire(fd, 1 + i, devices[i], 2 * MIB, -1, "dev"),
				 0);
		hostile_expect_error(fd, 1 + i, -ENODEV, "no device");
	}
	hostile_expect_serving(fd, 100);
	assert_int_equal(hostile_status_waiters(), 0);
	close(fd);
	hostile_assert_healthy();
}

/* Lease tags: at most 64 bytes of UTF-8 without control characters, else -EINVAL. */
static void test_acquire_tags(void **state)
{
	static const char *const bad[] = {
	    "\x1b[31mred\x1b[0m", /* terminal escape */
	    "line\nbreak",
	    "carriage\rreturn",
	    "tab\there",
	    "bell\a",
	    "del\x7f",
	    "c1 \xc2\x85 next line",
	    "\xff\xfe",		/* not UTF-8 */
	    "\xc0\xaf",		/* overlong '/' */
	    "\xed\xa0\x80",	/* a UTF-16 surrogate */
	    "\xf4\x90\x80\x80", /* beyond U+10FFFF */
	    "cut \xe6\x97",	/* a sequence cut short */
	};
	char tag65[66], tag64[65];
	int fd = hostile_greeted("tags");
	uint64_t id = 1, lease;

	(void)state;
	memset(tag65, 't', 65);
	tag65[65] = '\0';
	memset(tag64, 't', 64);
	tag64[64] = '\0';
	assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, tag65), 0);
	hostile_expect_error(fd, id++, -EINVAL, "tag");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, -1, bad[i]), 0);
		hostile_expect_error(fd, id++, -EINVAL, "tag");
	}
	assert_int_equal(hostile_status_waiters(), 0);
	/* The longest tag, and UTF-8 beyond ASCII, are fine. */
	assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, tag64), 0);
	lease = hostile_expect_grant(fd, id++, 2 * MIB);
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_release_ok(fd, id++);
	assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, "Größe 日本語 🙂"), 0);
	lease = hostile_expect_grant(fd, id++, 2 * MIB);
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_release_ok(fd, id++);
	close(fd);
	/* No escape sequence reached the daemon's log. */
	assert_false(harness_log_contains(&hostile.d, "\x1b"));
	hostile_assert_healthy();
}

/* Client names: the same rules, but a bad hello is a protocol error: -EINVAL and a disconnect. */
static void test_client_names(void **state)
{
	static const char *const bad[] = {
	    "\x1b[31mevil\x1b[0m", "two\nlines", "nul-free\r",
	    "\x01\x02\x03",	   "\xff\xfe",	 "c1 \xc2\x9b",
	};
	char name200[201], name65[66], name64[65];
	int fd;

	(void)state;
	memset(name200, 'x', 200);
	name200[200] = '\0';
	memset(name65, 'x', 65);
	name65[65] = '\0';
	memset(name64, 'x', 64);
	name64[64] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = hostile_connect();
		assert_int_equal(hostile_send_hello(fd, 1, true, 1, bad[i]), 0);
		hostile_expect_error_closed(fd, 1, -EINVAL, "name");
		close(fd);
	}
	fd = hostile_connect();
	assert_int_equal(hostile_send_hello(fd, 1, true, 1, name200), 0);
	hostile_expect_error_closed(fd, 1, -EINVAL, "name");
	close(fd);
	fd = hostile_connect();
	assert_int_equal(hostile_send_hello(fd, 1, true, 1, name65), 0);
	hostile_expect_error_closed(fd, 1, -EINVAL, "name");
	close(fd);
	/* 64 bytes is the longest name accepted. */
	fd = hostile_connect();
	assert_int_equal(harness_raw_hello(fd, 1, name64), 0);
	hostile_expect_serving(fd, 2);
	close(fd);
	assert_false(harness_log_contains(&hostile.d, "\x1b"));
	hostile_assert_healthy();
}

/* Timeouts that fit at once are granted at once, whatever their value. */
static void test_timeouts_granted_at_once(void **state)
{
	static const int64_t timeouts[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX};
	int fd = hostile_greeted("timeouts");
	uint64_t id = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
		uint64_t lease;

		assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, timeouts[i], "t"), 0);
		lease = hostile_expect_grant(fd, id++, 2 * MIB);
		assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
		expect_release_ok(fd, id++);
	}
	close(fd);
	hostile_assert_healthy();
}

/*
 * Timeouts on requests that do not fit: huge and negative ones wait (a disconnect removes the
 * waiter), a huge one is still granted when memory frees up, a tiny one times out.
 */
static void test_timeouts_waiting(void **state)
{
	static const int64_t forever[] = {INT64_MAX, INT64_MAX - 1, INT64_MIN, -1,
					  (int64_t)1 << 62};
	int holder = hostile_greeted("holder");
	uint64_t hold, lease;
	int fd;

	(void)state;
	assert_int_equal(hostile_send_acquire(holder, 1, 0, HOSTILE_BUDGET, 0, "all"), 0);
	hold = hostile_expect_grant(holder, 1, HOSTILE_BUDGET);

	/* Each waits; when its client disconnects the waiter must vanish from status. */
	for (size_t i = 0; i < sizeof(forever) / sizeof(forever[0]); i++) {
		fd = hostile_greeted("waiter");
		assert_int_equal(hostile_send_acquire(fd, 7, 0, 2 * MIB, forever[i], "wait"), 0);
		expect_silence(fd, 50);
		wait_waiters(1);
		close(fd);
		wait_waiters(0);
	}

	/* Several waiting with huge timeouts on one connection, then it disconnects. */
	fd = hostile_greeted("waiters");
	for (uint64_t i = 0; i < 10; i++)
		assert_int_equal(hostile_send_acquire(fd, 10 + i, 0, 2 * MIB,
						      i % 2 ? INT64_MAX : INT64_MIN, "wait"),
				 0);
	wait_waiters(10);
	close(fd);
	wait_waiters(0);

	/* A tiny timeout times out, and says why. */
	fd = hostile_greeted("impatient");
	assert_int_equal(hostile_send_acquire(fd, 8, 0, 2 * MIB, 1, "impatient"), 0);
	hostile_expect_error(fd, 8, -ETIMEDOUT, "budget");
	assert_int_equal(hostile_send_acquire(fd, 9, 0, 2 * MIB, 0, "now"), 0);
	hostile_expect_error(fd, 9, -ENOMEM, "budget");
	wait_waiters(0);

	/* A waiter with INT64_MAX is granted once the holder lets go. */
	assert_int_equal(hostile_send_acquire(fd, 10, 0, 2 * MIB, INT64_MAX, "patient"), 0);
	wait_waiters(1);
	assert_int_equal(hostile_send_release(holder, 2, true, hold), 0);
	expect_release_ok(holder, 2);
	lease = hostile_expect_grant(fd, 10, 2 * MIB);
	assert_int_equal(hostile_send_release(fd, 11, true, lease), 0);
	expect_release_ok(fd, 11);
	close(fd);
	close(holder);
	hostile_assert_healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_release_unknown),
	    cmocka_unit_test(test_release_foreign),
	    cmocka_unit_test(test_release_without_id),
	    cmocka_unit_test(test_acquire_sizes),
	    cmocka_unit_test(test_acquire_devices),
	    cmocka_unit_test(test_acquire_tags),
	    cmocka_unit_test(test_client_names),
	    cmocka_unit_test(test_timeouts_granted_at_once),
	    cmocka_unit_test(test_timeouts_waiting),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
