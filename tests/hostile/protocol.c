/* SPDX-License-Identifier: MIT */
/* protocol.c: hostile tests of the conversation: hello, request ids, unknown and unsupported. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

/* Hello with a version this daemon does not speak: -EPROTONOSUPPORT, then a disconnect. */
static void test_hello_wrong_version(void **state)
{
	static const uint32_t versions[] = {0, 2, 3, 0x80000000u, UINT32_MAX};

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		int fd = hostile_connect();

		assert_int_equal(hostile_send_hello(fd, 1, true, versions[i], "old-client"), 0);
		/* The reply must say which version the daemon speaks. */
		hostile_expect_error_closed(fd, 1, -EPROTONOSUPPORT, "version 1");
		close(fd);
	}
	hostile_assert_healthy();
}

static void test_hello_without_version(void **state)
{
	int fd = hostile_connect();

	(void)state;
	assert_int_equal(hostile_send_hello(fd, 7, false, 0, "versionless"), 0);
	hostile_expect_error_closed(fd, 7, -EPROTO, "version");
	close(fd);
	/* An empty hello: no field at all. */
	fd = hostile_connect();
	assert_int_equal(hostile_send_hello(fd, 8, false, 0, NULL), 0);
	hostile_expect_error_closed(fd, 8, -EPROTO, "version");
	close(fd);
	hostile_assert_healthy();
}

/* Any request before hello is a protocol error: -EPROTO and a disconnect, and nothing granted. */
static void test_request_before_hello(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__TrimRequest trim = ROCMMEM__WIRE__TRIM_REQUEST__INIT;
	int fd;

	(void)state;
	fd = hostile_connect();
	assert_int_equal(hostile_send_acquire(fd, 11, 0, 2 * MIB, 0, "early"), 0);
	hostile_expect_error_closed(fd, 11, -EPROTO, "hello");
	close(fd);

	fd = hostile_connect();
	assert_int_equal(hostile_send_acquire(fd, 12, 0, 2 * MIB, -1, "early"), 0);
	/* The daemon may have hung up already: a late hello changes nothing either way. */
	(void)hostile_send_hello(fd, 13, true, 1, "late-hello");
	hostile_expect_error_closed(fd, 12, -EPROTO, "hello");
	close(fd);

	fd = hostile_connect();
	assert_int_equal(hostile_send_status(fd, 14), 0);
	hostile_expect_error_closed(fd, 14, -EPROTO, "hello");
	close(fd);

	fd = hostile_connect();
	assert_int_equal(hostile_send_release(fd, 15, true, 1), 0);
	hostile_expect_error_closed(fd, 15, -EPROTO, "hello");
	close(fd);

	fd = hostile_connect();
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
	msg.trim = &trim;
	assert_int_equal(hostile_send(fd, true, 16, &msg), 0);
	hostile_expect_error_closed(fd, 16, -EPROTO, "hello");
	close(fd);

	/* A request id with no body at all, before hello. */
	fd = hostile_connect();
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY__NOT_SET;
	assert_int_equal(hostile_send(fd, true, 17, &msg), 0);
	hostile_expect_error_closed(fd, 17, -EPROTO, "hello");
	close(fd);
	hostile_assert_healthy();
}

static void test_hello_twice(void **state)
{
	int fd = hostile_greeted("twice");

	(void)state;
	assert_int_equal(hostile_send_hello(fd, 2, true, 1, "twice-again"), 0);
	hostile_expect_error_closed(fd, 2, -EPROTO, "twice");
	close(fd);

	/* A second hello with another version is no way to renegotiate either. */
	fd = hostile_greeted("twice");
	assert_int_equal(hostile_send_hello(fd, 3, true, 2, "twice-again"), 0);
	hostile_expect_refused_closed(fd, 0);
	close(fd);
	hostile_assert_healthy();
}

/* Request id 0 (or none) is a protocol error, before and after hello; the reply carries id 0. */
static void test_request_id_zero(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest st = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	int fd;

	(void)state;
	fd = hostile_connect();
	assert_int_equal(hostile_send_hello(fd, 0, true, 1, "zero"), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "id");
	close(fd);

	/* Hello without an id field at all. */
	fd = hostile_connect();
	{
		Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;

		hello.has_protocol_version = true;
		hello.protocol_version = 1;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
		msg.hello = &hello;
		assert_int_equal(hostile_send(fd, false, 0, &msg), 0);
		hostile_expect_error_closed(fd, 0, -EPROTO, "id");
	}
	close(fd);

	fd = hostile_greeted("zero");
	assert_int_equal(hostile_send_status(fd, 0), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "id");
	close(fd);

	/* An acquire with id 0 must not be granted: the lease could never be matched. */
	fd = hostile_greeted("zero");
	assert_int_equal(hostile_send_acquire(fd, 0, 0, 2 * MIB, 0, "zero"), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "id");
	close(fd);

	fd = hostile_greeted("zero");
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &st;
	assert_int_equal(hostile_send(fd, false, 0, &msg), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "id");
	close(fd);

	/* The largest id is an id like any other and is echoed exactly. */
	fd = hostile_greeted("max-id");
	hostile_expect_serving(fd, UINT64_MAX);
	close(fd);
	hostile_assert_healthy();
}

/*
 * A request type from a newer client: the daemon sees a ClientMessage with an id and only a
 * field it does not know (protobuf-c keeps it as an unknown field). It must answer
 * -EOPNOTSUPP and keep serving the connection.
 */
static void test_unknown_request_type(void **state)
{
	static const struct {
		const char *what;
		size_t len;
		uint8_t bytes[24];
	} unknown[] = {
	    /* id 5, field 99 varint 1 */
	    {"field 99 varint", 5, {0x08, 0x05, 0x98, 0x06, 0x01}},
	    /* id 5, field 100 length-delimited "abc" */
	    {"field 100 bytes", 8, {0x08, 0x05, 0xa2, 0x06, 0x03, 'a', 'b', 'c'}},
	    /* id 5, field 101 fixed64 */
	    {"field 101 fixed64", 12, {0x08, 0x05, 0xa9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8}},
	    /* id 5, field 102 fixed32 */
	    {"field 102 fixed32", 8, {0x08, 0x05, 0xb5, 0x06, 1, 2, 3, 4}},
	    /* id 5, the largest field number (2^29 - 1), varint 0 */
	    {"field 2^29-1", 8, {0x08, 0x05, 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00}},
	    /* id 5, field 63 (a oneof member a newer proto could add), empty message */
	    {"field 63 message", 5, {0x08, 0x05, 0xfa, 0x03, 0x00}},
	    /* the unknown field first, the id after it */
	    {"unknown before id", 5, {0x98, 0x06, 0x01, 0x08, 0x05}},
	};
	int fd = hostile_greeted("newer-client");

	(void)state;
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		uint8_t buf[32];
		size_t len = unknown[i].len;

		memcpy(buf, unknown[i].bytes, len);
		print_message("unknown request: %s\n", unknown[i].what);
		assert_int_equal(harness_raw_send_bytes(fd, buf, len, NULL, 0), 0);
		hostile_expect_error(fd, 5, -EOPNOTSUPP, NULL);
		/* The connection keeps working. */
		hostile_expect_serving(fd, 6);
	}
	close(fd);

	/* Before hello, though, anything but hello is still a protocol error. */
	fd = hostile_connect();
	{
		static const uint8_t early[] = {0x08, 0x05, 0x98, 0x06, 0x01};

		assert_int_equal(harness_raw_send_bytes(fd, early, sizeof(early), NULL, 0), 0);
		hostile_expect_error_closed(fd, 5, -EPROTO, "hello");
	}
	close(fd);
	hostile_assert_healthy();
}

/* Known requests with unknown fields inside them are served as if the fields were absent. */
static void test_unknown_fields_inside_known_request(void **state)
{
	/* id 21, status { field 50 varint 7 } */
	static const uint8_t status[] = {0x08, 0x15, 0x2a, 0x03, 0x90, 0x03, 0x07};
	int fd = hostile_greeted("newer-fields");
	bool more = true;

	(void)state;
	assert_int_equal(harness_raw_send_bytes(fd, status, sizeof(status), NULL, 0), 0);
	while (more) {
		Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, NULL, NULL);

		assert_int_equal(m->reply->id, 21);
		assert_int_equal(m->reply->error, 0);
		assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_STATUS);
		more = m->reply->more;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	close(fd);
	hostile_assert_healthy();
}

/* Every request of a later milestone: -EOPNOTSUPP with an explanation, connection kept. */
static void test_unsupported_requests(void **state)
{
	Rocmmem__Wire__AdminRequest admin_empty = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminRequest admin_budget = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminSetBudget set_budget = ROCMMEM__WIRE__ADMIN_SET_BUDGET__INIT;
	Rocmmem__Wire__AdminRequest admin_kick = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminDisconnectClient kick = ROCMMEM__WIRE__ADMIN_DISCONNECT_CLIENT__INIT;
	Rocmmem__Wire__ClientMessage msgs[3];
	int fd = hostile_greeted("future-client");
	size_t n = 0;

	(void)state;
	set_budget.has_budget = true;
	set_budget.budget = UINT64_MAX;
	admin_budget.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_SET_BUDGET;
	admin_budget.set_budget = &set_budget;
	kick.has_pid = true;
	kick.pid = (int32_t)getpid();
	admin_kick.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_DISCONNECT_CLIENT;
	admin_kick.disconnect_client = &kick;
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
		rocmmem__wire__client_message__init(&msgs[i]);
#define ADD(field, value, CASE)                                                 \
	do {                                                                    \
		msgs[n].body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_##CASE; \
		msgs[n].field = (value);                                        \
		n++;                                                            \
	} while (0)
	ADD(admin, &admin_empty, ADMIN);
	ADD(admin, &admin_budget, ADMIN);
	ADD(admin, &admin_kick, ADMIN);
#undef ADD
	for (size_t i = 0; i < n; i++) {
		uint64_t id = 100 + i;

		assert_int_equal(hostile_send(fd, true, id, &msgs[i]), 0);
		hostile_expect_error(fd, id, -EOPNOTSUPP, "not supported");
		hostile_expect_serving(fd, 1000 + i);
	}
	close(fd);
	hostile_assert_healthy();
}

/*
 * Two members of the body oneof in one message: protobuf keeps the last. The daemon must act
 * on exactly one of them (or drop the connection), never on a mix.
 */
static void test_two_bodies(void **state)
{
	/* id 31, status {}, then lease_release {lease_id 1}: the release wins, -ENOENT. */
	static const uint8_t status_then_release[] = {0x08, 0x1f, 0x2a, 0x00,
						      0x22, 0x02, 0x08, 0x01};
	/* id 32, status {}, then hello {version 1}: a second hello, -EPROTO and closed. */
	static const uint8_t status_then_hello[] = {0x08, 0x20, 0x2a, 0x00, 0x12, 0x02, 0x08, 0x01};
	/* id 33, acquire {size 2 MiB}, then status {}: a status, no lease. */
	static const uint8_t acquire_then_status[] = {0x08, 0x21, 0x1a, 0x05, 0x10, 0x80,
						      0x80, 0x80, 0x01, 0x2a, 0x00};
	int fd = hostile_greeted("two-bodies");
	bool more = true;

	(void)state;
	assert_int_equal(
	    harness_raw_send_bytes(fd, status_then_release, sizeof(status_then_release), NULL, 0),
	    0);
	hostile_expect_error(fd, 31, -ENOENT, NULL);
	assert_int_equal(
	    harness_raw_send_bytes(fd, acquire_then_status, sizeof(acquire_then_status), NULL, 0),
	    0);
	while (more) {
		Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, NULL, NULL);

		assert_int_equal(m->reply->id, 33);
		assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_STATUS);
		more = m->reply->more;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	assert_int_equal(
	    harness_raw_send_bytes(fd, status_then_hello, sizeof(status_then_hello), NULL, 0), 0);
	hostile_expect_error_closed(fd, 32, -EPROTO, NULL);
	close(fd);
	hostile_assert_healthy();
}

/* expect_trimmed reads the reply to a trim: bytes_trimmed must be present. */
static uint64_t expect_trimmed(int fd, uint64_t id)
{
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 5000, NULL, NULL);
	uint64_t bytes;

	assert_int_equal(m->reply->id, id);
	assert_int_equal(m->reply->has_error ? m->reply->error : 0, 0);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_TRIM);
	assert_true(m->reply->trim->has_bytes_trimmed);
	bytes = m->reply->trim->bytes_trimmed;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return bytes;
}

/* Trim: every device or one; the host backend caches nothing, so nothing comes back. */
static void test_trim_requests(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__TrimRequest trim = ROCMMEM__WIRE__TRIM_REQUEST__INIT;
	static const uint32_t bad[] = {1, 7, UINT32_MAX};
	int fd = hostile_greeted("trimmer");

	(void)state;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
	msg.trim = &trim;
	assert_int_equal(hostile_send(fd, true, 200, &msg), 0);
	assert_int_equal(expect_trimmed(fd, 200), 0);
	trim.has_device = true;
	trim.device = 0;
	assert_int_equal(hostile_send(fd, true, 201, &msg), 0);
	assert_int_equal(expect_trimmed(fd, 201), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		trim.device = bad[i];
		assert_int_equal(hostile_send(fd, true, 202 + i, &msg), 0);
		hostile_expect_error(fd, 202 + i, -ENODEV, "no device");
	}
	hostile_expect_serving(fd, 300);
	close(fd);
	hostile_assert_healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hello_wrong_version),
	    cmocka_unit_test(test_hello_without_version),
	    cmocka_unit_test(test_request_before_hello),
	    cmocka_unit_test(test_hello_twice),
	    cmocka_unit_test(test_request_id_zero),
	    cmocka_unit_test(test_unknown_request_type),
	    cmocka_unit_test(test_unknown_fields_inside_known_request),
	    cmocka_unit_test(test_unsupported_requests),
	    cmocka_unit_test(test_trim_requests),
	    cmocka_unit_test(test_two_bodies),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
