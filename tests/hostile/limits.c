/* SPDX-License-Identifier: MIT */
/*
 * limits.c: clients that run into the per-connection limits and the caps on subscribers,
 * message size and the handshake, on a daemon started with small ones: each gets the limit's
 * errno and a message naming it, the hit is counted in status, and everyone else is served.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "wire.h"

static const char *const args[] = {"--backend",
				   "host",
				   "--budget",
				   "64M",
				   "--max-pending",
				   "2",
				   "--max-leases",
				   "4",
				   "--max-subscribers",
				   "2",
				   "--max-message-size",
				   "2K",
				   "--handshake-timeout",
				   "1",
				   NULL};

/* send_subscribe asks for events (and samples every 1 s when samples). */
static int send_subscribe(int fd, uint64_t id, bool samples)
{
	return hostile_send_subscribe(fd, id, samples, samples, true, true, samples, 1000);
}

static int send_register(int fd, uint64_t id, const char *name)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;

	reg.name = (char *)name;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	return hostile_send(fd, true, id, &msg);
}

/* expect_ok reads the next reply (events skipped): success for id. */
static void expect_ok(int fd, uint64_t id)
{
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, NULL, NULL);

	if (m->reply->has_error && m->reply->error != 0)
		fail_msg("request %llu refused: %d: %s", (unsigned long long)id, m->reply->error,
			 m->reply->message ? m->reply->message : "");
	assert_int_equal(m->reply->id, id);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

/* ----------------------------------------------------------------------------------------- */

/* The fifth lease of a connection: -EDQUOT naming "leases"; another connection still leases. */
static void test_leases_per_connection(void **state)
{
	int fd = hostile_greeted("hoarder"), other = hostile_greeted("neighbour");
	uint64_t value = 0, before = hostile_limit_hits("leases", &value), lease;

	(void)state;
	assert_int_equal(value, 4);
	for (uint64_t i = 1; i <= 4; i++) {
		assert_int_equal(hostile_send_acquire(fd, i, 0, 2 * MIB, 0, "mine"), 0);
		hostile_expect_grant(fd, i, 2 * MIB);
	}
	for (uint64_t i = 5; i <= 7; i++) {
		assert_int_equal(hostile_send_acquire(fd, i, 0, 2 * MIB, 0, "one too many"), 0);
		hostile_expect_error(fd, i, -EDQUOT, "4 leases, the most allowed (leases)");
	}
	assert_int_equal(hostile_limit_hits("leases", NULL), before + 3);
	assert_int_equal(hostile_send_acquire(other, 1, 0, 2 * MIB, 0, "theirs"), 0);
	lease = hostile_expect_grant(other, 1, 2 * MIB);
	assert_int_equal(hostile_send_release(other, 2, true, lease), 0);
	expect_ok(other, 2);
	close(fd);
	close(other);
	hostile_assert_healthy();
}

/* A third waiting request of a connection: -EBUSY naming "pending"; the first two are served. */
static void test_pending_per_connection(void **state)
{
	int filler = hostile_greeted("filler"), fd = hostile_greeted("waiter");
	uint64_t leases[4], value = 0, before = hostile_limit_hits("pending", &value);

	(void)state;
	assert_int_equal(value, 2);
	for (uint64_t i = 0; i < 4; i++) {
		assert_int_equal(hostile_send_acquire(filler, 1 + i, 0, 16 * MIB, 0, "full"), 0);
		leases[i] = hostile_expect_grant(filler, 1 + i, 16 * MIB);
	}
	/* The budget is full: these wait. */
	assert_int_equal(hostile_send_acquire(fd, 1, 0, 2 * MIB, 30000, "wait 1"), 0);
	assert_int_equal(hostile_send_acquire(fd, 2, 0, 2 * MIB, 30000, "wait 2"), 0);
	while (hostile_status_waiters() < 2)
		hostile_sleep_ms(10);
	assert_int_equal(hostile_send_acquire(fd, 3, 0, 2 * MIB, 30000, "wait 3"), 0);
	hostile_expect_error(fd, 3, -EBUSY, "2 requests waiting, the most allowed (pending)");
	assert_int_equal(hostile_limit_hits("pending", NULL), before + 1);
	/* Room made: the two that waited are granted. */
	assert_int_equal(hostile_send_release(filler, 10, true, leases[0]), 0);
	expect_ok(filler, 10);
	hostile_expect_grant(fd, 1, 2 * MIB);
	hostile_expect_grant(fd, 2, 2 * MIB);
	close(fd);
	close(filler);
	hostile_assert_healthy();
}

/* A third subscriber: -EUSERS naming "subscribers"; replacing a subscription is no new one. */
static void test_subscribers(void **state)
{
	int a = hostile_greeted("sub-a"), b = hostile_greeted("sub-b"),
	    c = hostile_greeted("sub-c");
	uint64_t value = 0, before = hostile_limit_hits("subscribers", &value);

	(void)state;
	assert_int_equal(value, 2);
	assert_int_equal(send_subscribe(a, 1, false), 0);
	expect_ok(a, 1);
	assert_int_equal(send_subscribe(b, 1, true), 0);
	expect_ok(b, 1);
	assert_int_equal(send_subscribe(c, 1, false), 0);
	hostile_expect_error(c, 1, -EUSERS, "at most 2 at once (subscribers)");
	assert_int_equal(hostile_limit_hits("subscribers", NULL), before + 1);
	/* A second Subscribe replaces the first: allowed at the cap. */
	assert_int_equal(send_subscribe(a, 2, true), 0);
	expect_ok(a, 2);
	/* One leaves: there is room again. */
	assert_int_equal(hostile_send_unsubscribe(b, 2), 0);
	expect_ok(b, 2);
	assert_int_equal(send_subscribe(c, 2, false), 0);
	expect_ok(c, 2);
	/* A subscriber that disconnects frees its place too. */
	close(a);
	for (long end = harness_now_ms() + HARNESS_WAIT_MS;; hostile_sleep_ms(20)) {
		Rocmmem__Wire__ServerMessage *m;
		int err;

		assert_int_equal(send_subscribe(b, 3, false), 0);
		m = hostile_recv_reply(b, 3000, NULL, NULL);
		err = m->reply->has_error ? m->reply->error : 0;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (err == 0)
			break;
		assert_int_equal(err, -EUSERS);
		assert_true(harness_now_ms() < end);
	}
	close(b);
	close(c);
	hostile_assert_healthy();
}

/* A request larger than the configured 2 KiB: -EMSGSIZE naming "message_size", disconnected. */
static void test_message_size(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	Rocmmem__Wire__ServerMessage *m;
	uint64_t value = 0, before = hostile_limit_hits("message_size", &value);
	uint8_t big[3000];
	int fd = hostile_connect();

	(void)state;
	assert_int_equal(value, 2048);
	/* The hello reply says what the daemon accepts. */
	hello.has_protocol_version = true;
	hello.protocol_version = ROCMMEM_PROTOCOL_VERSION_1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	assert_int_equal(hostile_send(fd, true, 1, &msg), 0);
	m = hostile_recv_reply(fd, 3000, NULL, NULL);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_HELLO);
	assert_true(m->reply->hello->has_max_frame);
	assert_int_equal(m->reply->hello->max_frame, 2048);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	/* Just within: garbage of 2048 bytes is read (and refused as garbage, not for its size). */
	memset(big, 0xff, sizeof(big));
	assert_int_equal(harness_raw_send_bytes(fd, big, 2048, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EBADMSG, "decode");
	close(fd);
	assert_int_equal(hostile_limit_hits("message_size", NULL), before);
	/* Beyond: refused for its size before anything else. */
	fd = hostile_greeted("too-big");
	assert_int_equal(harness_raw_send_bytes(fd, big, 2049, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EMSGSIZE, "larger than 2048 bytes (message_size)");
	close(fd);
	fd = hostile_connect(); /* before hello as well */
	assert_int_equal(harness_raw_send_bytes(fd, big, sizeof(big), NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EMSGSIZE, "(message_size)");
	close(fd);
	assert_int_equal(hostile_limit_hits("message_size", NULL), before + 2);
	assert_true(harness_log_wait(&hostile.d, "packet larger than 2048 bytes", HARNESS_WAIT_MS));
	hostile_assert_healthy();
}

/* A connection that never says hello is closed after the 1 s handshake timeout, and logged. */
static void test_handshake_timeout(void **state)
{
	uint64_t value = 0, before = hostile_limit_hits("handshake_timeout", &value);
	int quiet = hostile_connect(), greeted = hostile_greeted("says-hello");
	long start = harness_now_ms(), took;
	Rocmmem__Wire__ServerMessage *m = NULL;
	enum hostile_rx rx;
	char line[128];

	(void)state;
	assert_int_equal(value, 1000);
	rx = hostile_recv(quiet, 5000, &m, NULL, NULL);
	took = harness_now_ms() - start;
	if (m)
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_int_equal(rx, HOSTILE_RX_EOF);
	if (took < 900 || took > 3000)
		fail_msg("closed after %ld ms, with a handshake timeout of 1000 ms", took);
	close(quiet);
	/* A connection that said hello may stay quiet for longer. */
	hostile_sleep_ms(1200);
	hostile_expect_serving(greeted, 1);
	close(greeted);
	assert_int_equal(hostile_limit_hits("handshake_timeout", NULL), before + 1);
	snprintf(line, sizeof(line), "no hello within 1000 ms (handshake_timeout)");
	assert_true(harness_log_wait(&hostile.d, line, HARNESS_WAIT_MS));
	/* Several at once: each goes at its own deadline, and hello in time keeps one open. */
	{
		int fds[5];

		for (int i = 0; i < 5; i++) {
			fds[i] = hostile_connect();
			hostile_sleep_ms(100);
		}
		assert_int_equal(hostile_send_hello(fds[4], 1, true, ROCMMEM_PROTOCOL_VERSION_1,
						    "late-but-in-time"),
				 0);
		expect_ok(fds[4], 1);
		for (int i = 0; i < 4; i++) {
			m = NULL;
			rx = hostile_recv(fds[i], 5000, &m, NULL, NULL);
			if (m)
				rocmmem__wire__server_message__free_unpacked(m, NULL);
			assert_int_equal(rx, HOSTILE_RX_EOF);
			close(fds[i]);
		}
		hostile_sleep_ms(500);
		hostile_expect_serving(fds[4], 2);
		close(fds[4]);
	}
	assert_int_equal(hostile_limit_hits("handshake_timeout", NULL), before + 5);
	hostile_assert_healthy();
}

/* The 257th model of a connection: -EDQUOT naming "models" (a fixed limit), counted. */
static void test_models_per_connection(void **state)
{
	uint64_t value = 0, before = hostile_limit_hits("models", &value), id = 1;
	int fd = hostile_greeted("registers");
	char name[64];

	(void)state;
	assert_int_equal(value, 256);
	for (int i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "model-%03d", i);
		assert_int_equal(send_register(fd, id, name), 0);
		expect_ok(fd, id);
		id++;
	}
	assert_int_equal(send_register(fd, id, "one-too-many"), 0);
	hostile_expect_error(fd, id, -EDQUOT, "256 models");
	assert_int_equal(hostile_limit_hits("models", NULL), before + 1);
	close(fd);
	hostile_assert_healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_leases_per_connection),
	    cmocka_unit_test(test_pending_per_connection),
	    cmocka_unit_test(test_subscribers),
	    cmocka_unit_test(test_message_size),
	    cmocka_unit_test(test_handshake_timeout),
	    cmocka_unit_test(test_models_per_connection),
	};

	signal(SIGPIPE, SIG_IGN);
	hostile_daemon_args = args;
	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
