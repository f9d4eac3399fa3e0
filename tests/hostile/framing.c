/* SPDX-License-Identifier: MIT */
/* framing.c: hostile packets: garbage, truncated, oversized and empty ones, and stray fds. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "wire.h"

/* The kernel's cap on fds in one SCM_RIGHTS message (SCM_MAX_FD). */
#define KERNEL_MAX_FDS 253

/* Fixed garbage that no protobuf decoder accepts. */
static const struct {
	const char *what;
	size_t len;
	uint8_t bytes[40];
} patterns[] = {
    {"one zero byte (field 0)", 1, {0x00}},
    {"sixteen zero bytes", 16, {0}},
    {"0xff bytes (endless varint)",
     16,
     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff}},
    {"HTTP request", 18, "GET / HTTP/1.1\r\n\r\n"},
    {"tag without value", 1, {0x08}},
    {"hello claiming 127 bytes", 2, {0x12, 0x7f}},
    {"hello claiming 4 GiB", 6, {0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}},
    {"overlong varint id",
     12,
     {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
    {"start group", 3, {0x0b, 0x08, 0x01}},
    {"end group", 1, {0x0c}},
    {"wire type 6", 2, {0x0e, 0x01}},
    {"hello that is a varint", 3, {0x08, 0x01, 0x10}},
    {"fixed64 cut short", 5, {0x08, 0x01, 0x09, 0x01, 0x02}},
};

static uint64_t rng_state;

/* rng returns the next number of a fixed-seed xorshift sequence: failures are reproducible. */
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* send_with_fds sends buf with n copies of fd attached (up to the kernel's 253). */
static int send_with_fds(int sock, const void *buf, size_t len, int fd, unsigned n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KERNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	int fds[KERNEL_MAX_FDS];

	assert_true(n > 0 && n <= KERNEL_MAX_FDS);
	for (unsigned i = 0; i < n; i++)
		fds[i] = fd;
	memset(&control, 0, sizeof(control));
	msg.msg_control = control.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Garbage as the first packet: -EBADMSG (when the reply can be read) and a disconnect. */
static void test_garbage_first_packet(void **state)
{
	uint8_t buf[4096];

	(void)state;
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		int fd = hostile_connect();

		print_message("garbage: %s\n", patterns[i].what);
		assert_int_equal(
		    harness_raw_send_bytes(fd, patterns[i].bytes, patterns[i].len, NULL, 0), 0);
		hostile_expect_error_closed(fd, 0, -EBADMSG, "decode");
		close(fd);
	}
	/* Random packets: some may decode by chance, but none is a hello, so all are refused. */
	rng_state = 0x5eed0001;
	for (int i = 0; i < 200; i++) {
		size_t len = 1 + rng() % (i < 150 ? 64 : sizeof(buf));
		int fd = hostile_connect();

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rng();
		assert_int_equal(harness_raw_send_bytes(fd, buf, len, NULL, 0), 0);
		hostile_expect_refused_closed(fd, 0);
		close(fd);
	}
	hostile_assert_healthy();
}

/* Garbage after a good hello: the same refusal; random bytes are refused or answered. */
static void test_garbage_after_hello(void **state)
{
	uint8_t buf[4096];

	(void)state;
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		int fd = hostile_greeted("garbage");

		assert_int_equal(
		    harness_raw_send_bytes(fd, patterns[i].bytes, patterns[i].len, NULL, 0), 0);
		hostile_expect_error_closed(fd, 0, -EBADMSG, "decode");
		close(fd);
	}
	rng_state = 0x5eed0002;
	for (int i = 0; i < 100; i++) {
		size_t len = 1 + rng() % (i < 70 ? 48 : sizeof(buf));
		int fd = hostile_greeted("garbage");

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rng();
		assert_int_equal(harness_raw_send_bytes(fd, buf, len, NULL, 0), 0);
		/* A packet that decodes by chance is a request like any other: just hang up. */
		close(fd);
	}
	hostile_assert_healthy();
}

/* A valid hello cut short at every length: the daemon must refuse it and hang up. */
static void test_truncated_first_packet(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	uint8_t *buf;
	size_t len;

	(void)state;
	hello.has_protocol_version = true;
	hello.protocol_version = 1;
	hello.client_name = (char *)"truncated-client";
	msg.has_id = true;
	msg.id = 300; /* a two-byte varint, so that a cut can split it */
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	buf = hostile_pack(&msg, &len);
	for (size_t cut = 1; cut < len; cut++) {
		int fd = hostile_connect();

		assert_int_equal(harness_raw_send_bytes(fd, buf, cut, NULL, 0), 0);
		/* Cut at a field boundary it decodes, but without a hello in it. */
		hostile_expect_refused_closed(fd, 0);
		close(fd);
	}
	free(buf);
	hostile_assert_healthy();
}

/* A lease request cut short after hello: -EBADMSG and a disconnect; never a grant. */
static void test_truncated_after_hello(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	uint8_t *buf;
	size_t len, body;

	(void)state;
	acq.has_size = true;
	acq.size = 2 * MIB;
	acq.has_timeout_ms = true;
	acq.timeout_ms = 0;
	acq.tag = (char *)"truncated";
	msg.has_id = true;
	msg.id = 300;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	buf = hostile_pack(&msg, &len);
	/* id 300 is 0x08 0xac 0x02, then the lease_acquire tag 0x1a at offset 3. */
	assert_int_equal(buf[3], 0x1a);
	body = 3;
	for (size_t cut = 2; cut < len; cut++) {
		int fd;

		if (cut == body)
			continue; /* just the id: a well-formed request of no known type */
		fd = hostile_greeted("truncated");
		assert_int_equal(harness_raw_send_bytes(fd, buf, cut, NULL, 0), 0);
		hostile_expect_error_closed(fd, 0, -EBADMSG, "decode");
		close(fd);
	}
	free(buf);
	hostile_assert_healthy();
}

/* A packet over WIRE_MAX_FRAME: -EMSGSIZE if the reply can be read, then a disconnect. */
static void test_oversized_packet(void **state)
{
	static const size_t sizes[] = {WIRE_MAX_FRAME + 1, WIRE_MAX_FRAME + 4096, 192 * 1024};
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	size_t big = 192 * 1024;
	uint8_t *buf = calloc(1, big);
	char *name;
	int fd;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int rc;

		fd = hostile_connect();
		rc = harness_raw_send_bytes(fd, buf, sizes[i], NULL, 0);
		if (rc == -EMSGSIZE || rc == -ENOBUFS) {
			/* Larger than this kernel's socket buffer: nothing reached the daemon. */
			close(fd);
			continue;
		}
		assert_int_equal(rc, 0);
		hostile_expect_error_closed(fd, 0, -EMSGSIZE, "65536");
		close(fd);

		fd = hostile_greeted("oversized");
		assert_int_equal(harness_raw_send_bytes(fd, buf, sizes[i], NULL, 0), 0);
		hostile_expect_error_closed(fd, 0, -EMSGSIZE, "65536");
		close(fd);
	}
	/* A well-formed hello, too large only because of its name. */
	name = malloc(70000);
	assert_non_null(name);
	memset(name, 'n', 69999);
	name[69999] = '\0';
	hello.has_protocol_version = true;
	hello.protocol_version = 1;
	hello.client_name = name;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	fd = hostile_connect();
	assert_int_equal(hostile_send(fd, true, 1, &msg), 0);
	hostile_expect_error_closed(fd, 0, -EMSGSIZE, "65536");
	close(fd);
	free(name);
	free(buf);
	hostile_assert_healthy();
}

/* A well-formed request of exactly WIRE_MAX_FRAME bytes is within the limit: it is served. */
static void test_max_frame_accepted(void **state)
{
	uint8_t *buf = calloc(1, WIRE_MAX_FRAME + 1);
	size_t data = WIRE_MAX_FRAME - 7;
	int fd = hostile_greeted("max-frame");

	(void)state;
	assert_non_null(buf);
	/* id 9, then field 100 (unknown) as bytes of a length that fills the frame exactly. */
	buf[0] = 0x08;
	buf[1] = 0x09;
	buf[2] = 0xa2;
	buf[3] = 0x06;
	buf[4] = (uint8_t)(0x80 | (data & 0x7f));
	buf[5] = (uint8_t)(0x80 | ((data >> 7) & 0x7f));
	buf[6] = (uint8_t)(data >> 14);
	memset(buf + 7, 'x', data);
	assert_int_equal(harness_raw_send_bytes(fd, buf, WIRE_MAX_FRAME, NULL, 0), 0);
	hostile_expect_error(fd, 9, -EOPNOTSUPP, NULL);
	hostile_expect_serving(fd, 10);

	/* 64 KiB of tiny unknown fields: many unknown-field entries for the decoder. */
	for (size_t i = 2; i + 3 <= WIRE_MAX_FRAME; i += 3) {
		buf[i] = 0x98; /* field 99, varint 0 */
		buf[i + 1] = 0x06;
		buf[i + 2] = 0x00;
	}
	buf[1] = 0x0b; /* id 11 */
	assert_int_equal(harness_raw_send_bytes(fd, buf, 2 + (WIRE_MAX_FRAME - 2) / 3 * 3, NULL, 0),
			 0);
	hostile_expect_error(fd, 11, -EOPNOTSUPP, NULL);
	hostile_expect_serving(fd, 12);

	/* One byte more than the frame: refused. */
	buf[1] = 0x0d;
	assert_int_equal(harness_raw_send_bytes(fd, buf, WIRE_MAX_FRAME + 1, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EMSGSIZE, "65536");
	close(fd);
	free(buf);
	hostile_assert_healthy();
}

/*
 * An empty packet is a protocol error (docs/protocol.md): the daemon answers -EPROTO, then
 * drops the connection, whether it came before hello or after.
 */
static void test_empty_packet(void **state)
{
	int fd = hostile_connect();

	(void)state;
	assert_int_equal(harness_raw_send_bytes(fd, "", 0, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "empty packet");
	close(fd);

	fd = hostile_greeted("empty");
	assert_int_equal(harness_raw_send_bytes(fd, "", 0, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "empty packet");
	close(fd);

	/* An empty packet while holding a lease: the lease is reclaimed with the connection. */
	fd = hostile_greeted("empty");
	assert_int_equal(hostile_send_acquire(fd, 2, 0, 4 * MIB, 0, "empty"), 0);
	hostile_expect_grant(fd, 2, 4 * MIB);
	assert_int_equal(harness_raw_send_bytes(fd, "", 0, NULL, 0), 0);
	hostile_expect_error_closed(fd, 0, -EPROTO, "empty packet");
	close(fd);
	hostile_assert_healthy();
}

/*
 * send_probe sends payload with the write end of a fresh pipe attached (n copies), closes our
 * copy, and returns the read end: it reports hang-up once the daemon has closed every copy.
 */
static int send_probe(int sock, const void *payload, size_t len, unsigned n)
{
	int p[2];

	hostile_pipe(p);
	assert_int_equal(send_with_fds(sock, payload, len, p[1], n), 0);
	close(p[1]);
	return p[0];
}

/*
 * send_two sends first, then second with n copies of a pipe's write end attached, in one
 * sendmmsg call. Returns the pipe's read end, or -1 when the second packet was not sent.
 */
static int send_two(int sock, const void *first, size_t first_len, const void *second,
		    size_t second_len, unsigned n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KERNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov[2] = {{.iov_base = (void *)(uintptr_t)first, .iov_len = first_len},
			       {.iov_base = (void *)(uintptr_t)second, .iov_len = second_len}};
	struct mmsghdr msgs[2];
	struct cmsghdr *c;
	int p[2], rc;

	hostile_pipe(p);
	memset(msgs, 0, sizeof(msgs));
	memset(&control, 0, sizeof(control));
	msgs[0].msg_hdr.msg_iov = &iov[0];
	msgs[0].msg_hdr.msg_iovlen = 1;
	msgs[1].msg_hdr.msg_iov = &iov[1];
	msgs[1].msg_hdr.msg_iovlen = 1;
	msgs[1].msg_hdr.msg_control = control.buf;
	msgs[1].msg_hdr.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(&msgs[1].msg_hdr);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	for (unsigned i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &p[1], sizeof(int));
	rc = sendmmsg(sock, msgs, 2, MSG_NOSIGNAL);
	close(p[1]);
	if (rc != 2) {
		close(p[0]);
		return -1;
	}
	return p[0];
}

/* stop_daemon stops the daemon with SIGSTOP and waits (up to 10 s) until it is stopped. */
static void stop_daemon(void)
{
	char path[64], buf[512], *state;
	ssize_t n;

	assert_int_equal(kill(hostile.d.pid, SIGSTOP), 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)hostile.d.pid);
	for (int i = 0; i < 10000; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		assert_true(n > 0);
		buf[n] = '\0';
		state = strrchr(buf, ')'); /* the name may hold blanks and parentheses */
		if (state && state[1] == ' ' && state[2] == 'T')
			return;
		usleep(1000);
	}
	fail_msg("the daemon did not stop within 10 s of SIGSTOP");
}

static void expect_probe_closed(int probe, const char *what)
{
	if (!hostile_wait_hup(probe, 1500))
		fail_msg("the daemon kept the fd attached to %s open", what);
	close(probe);
}

/* pack_request packs a request of the given body (its member set by the caller) with id. */
static uint8_t *pack_request(Rocmmem__Wire__ClientMessage *msg, uint64_t id, size_t *len)
{
	msg->has_id = true;
	msg->id = id;
	return hostile_pack(msg, len);
}

static uint8_t *pack_hello(uint64_t id, size_t *len)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;

	hello.has_protocol_version = true;
	hello.protocol_version = 1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	return pack_request(&msg, id, len);
}

static uint8_t *pack_status(uint64_t id, size_t *len)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest st = ROCMMEM__WIRE__STATUS_REQUEST__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &st;
	return pack_request(&msg, id, len);
}

/*
 * An fd attached to a request that takes none (no request does): -EBADMSG, a disconnect, and
 * the daemon must close the fd. Hello, with a pipe and with a memfd (what a lease looks like).
 */
static void test_fd_on_hello(void **state)
{
	size_t len;
	uint8_t *buf = pack_hello(1, &len);
	int fd = hostile_connect(), probe, memfd;

	(void)state;
	probe = send_probe(fd, buf, len, 1);
	hostile_expect_error_closed(fd, 1, -EBADMSG, "descriptor");
	expect_probe_closed(probe, "hello");
	close(fd);

	memfd = memfd_create("hostile", MFD_CLOEXEC);
	assert_true(memfd >= 0);
	assert_int_equal(ftruncate(memfd, 1 << 20), 0);
	fd = hostile_connect();
	assert_int_equal(harness_raw_send_bytes(fd, buf, len, &memfd, 1), 0);
	close(memfd);
	hostile_expect_error_closed(fd, 1, -EBADMSG, "descriptor");
	close(fd);
	free(buf);
	hostile_assert_healthy();
}

/* A status request with an fd: the same. */
static void test_fd_on_status(void **state)
{
	size_t len;
	uint8_t *buf = pack_status(2, &len);
	int fd = hostile_greeted("fd-status"), probe;

	(void)state;
	probe = send_probe(fd, buf, len, 1);
	hostile_expect_error_closed(fd, 2, -EBADMSG, "descriptor");
	expect_probe_closed(probe, "a status request");
	close(fd);
	free(buf);
	hostile_assert_healthy();
}

/* Releasing one's own lease with an fd: refused, the fd closed, the lease reclaimed. */
static void test_fd_on_release(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	int fd = hostile_greeted("fd-release"), probe;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(hostile_send_acquire(fd, 3, 0, 6 * MIB, 0, "fd-release"), 0);
	rel.has_lease_id = true;
	rel.lease_id = hostile_expect_grant(fd, 3, 6 * MIB);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	buf = pack_request(&msg, 4, &len);
	probe = send_probe(fd, buf, len, 1);
	hostile_expect_error_closed(fd, 4, -EBADMSG, "descriptor");
	expect_probe_closed(probe, "a lease release");
	close(fd);
	free(buf);
	hostile_assert_healthy();
}

/*
 * fds on everything else: an acquire carrying the client's own lease fd, an unknown request
 * type, undecodable bytes, an oversized packet, the connection's own socket, and a packet
 * left unread behind a violation (the kernel must drop its fds when the daemon hangs up).
 */
static void test_fd_on_other_packets(void **state)
{
	static const uint8_t unknown[] = {0x08, 0x05, 0x98, 0x06, 0x01};
	static const uint8_t garbage[] = {0xff, 0xff, 0xff};
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__ServerMessage *m;
	int fd, probe, lease_fd = -1;
	uint8_t *buf, *big;
	size_t len;

	(void)state;
	fd = hostile_greeted("fd-acquire");
	m = harness_raw_acquire(fd, 5, 0, 2 * MIB, 0, &lease_fd);
	assert_non_null(m);
	assert_true(lease_fd >= 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	acq.has_size = true;
	acq.size = 2 * MIB;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	buf = pack_request(&msg, 6, &len);
	assert_int_equal(harness_raw_send_bytes(fd, buf, len, &lease_fd, 1), 0);
	close(lease_fd);
	hostile_expect_error_closed(fd, 6, -EBADMSG, "descriptor");
	close(fd);
	free(buf);

	fd = hostile_greeted("fd-unknown");
	probe = send_probe(fd, unknown, sizeof(unknown), 1);
	hostile_expect_error_closed(fd, 5, -EBADMSG, "descriptor");
	expect_probe_closed(probe, "an unknown request");
	close(fd);

	fd = hostile_greeted("fd-garbage");
	probe = send_probe(fd, garbage, sizeof(garbage), 1);
	hostile_expect_error_closed(fd, 0, -EBADMSG, NULL);
	expect_probe_closed(probe, "garbage");
	close(fd);

	big = calloc(1, WIRE_MAX_FRAME + 1);
	assert_non_null(big);
	fd = hostile_greeted("fd-oversized");
	probe = send_probe(fd, big, WIRE_MAX_FRAME + 1, 1);
	hostile_expect_error_closed(fd, 0, -EMSGSIZE, NULL);
	expect_probe_closed(probe, "an oversized packet");
	close(fd);
	free(big);

	fd = hostile_greeted("fd-self");
	buf = pack_status(7, &len);
	assert_int_equal(harness_raw_send_bytes(fd, buf, len, &fd, 1), 0);
	hostile_expect_error_closed(fd, 7, -EBADMSG, "descriptor");
	close(fd);
	free(buf);

	/*
	 * The daemon is stopped while both packets are queued, so that it cannot read the first
	 * and hang up before the second is there: the order is certain, whatever the load.
	 */
	fd = hostile_greeted("fd-queued");
	stop_daemon();
	probe = send_two(fd, garbage, sizeof(garbage), unknown, sizeof(unknown), 3);
	assert_int_equal(kill(hostile.d.pid, SIGCONT), 0);
	assert_true(probe >= 0);
	hostile_expect_refused_closed(fd, -EBADMSG);
	close(fd);
	expect_probe_closed(probe, "a packet left unread");
	hostile_assert_healthy();
}

/*
 * An empty packet that carries fds: a protocol error that drops the connection, and the
 * fds must go with it. Each case runs before any verdict, so that the
 * failure message says how many fds stayed open in the daemon.
 */
static void test_empty_packet_with_fd(void **state)
{
	static const unsigned counts[] = {1, 64, KERNEL_MAX_FDS};
	int before = harness_fd_count(hostile.d.pid), probes[3];
	bool leaked = false;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		int fd = i == 0 ? hostile_connect() : hostile_greeted("empty-fd");

		probes[i] = send_probe(fd, "", 0, counts[i]);
		hostile_expect_closed(fd);
		close(fd);
	}
	for (size_t i = 0; i < 3; i++) {
		if (!hostile_wait_hup(probes[i], 1000)) {
			print_message("an empty packet with %u fd(s) attached: the daemon kept "
				      "them open\n",
				      counts[i]);
			leaked = true;
		}
		close(probes[i]);
	}
	if (leaked)
		fail_msg("empty packets leaked fds in the daemon: %d open before, %d after", before,
			 harness_fd_count(hostile.d.pid));
	hostile_assert_healthy();
}

/* 60 and more fds in one packet, up to the kernel's cap: all closed, connection refused. */
static void test_many_fds(void **state)
{
	static const unsigned counts[] = {60, 63, 64, 65, 100, 200, KERNEL_MAX_FDS};
	static const uint8_t status[] = {0x08, 0x09, 0x2a, 0x00}; /* id 9, status {} */

	(void)state;
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		char what[64];
		int fd = hostile_greeted("many-fds");
		int probe = send_probe(fd, status, sizeof(status), counts[i]);

		hostile_expect_refused_closed(fd, -EBADMSG);
		close(fd);
		snprintf(what, sizeof(what), "a status request (%u fds)", counts[i]);
		expect_probe_closed(probe, what);

		/* The same before hello. */
		fd = hostile_connect();
		probe = send_probe(fd, status, sizeof(status), counts[i]);
		hostile_expect_refused_closed(fd, -EBADMSG);
		close(fd);
		expect_probe_closed(probe, what);
	}
	hostile_assert_healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_garbage_first_packet),
	    cmocka_unit_test(test_garbage_after_hello),
	    cmocka_unit_test(test_truncated_first_packet),
	    cmocka_unit_test(test_truncated_after_hello),
	    cmocka_unit_test(test_oversized_packet),
	    cmocka_unit_test(test_max_frame_accepted),
	    cmocka_unit_test(test_empty_packet),
	    cmocka_unit_test(test_fd_on_hello),
	    cmocka_unit_test(test_fd_on_status),
	    cmocka_unit_test(test_fd_on_release),
	    cmocka_unit_test(test_fd_on_other_packets),
	    cmocka_unit_test(test_many_fds),
	    cmocka_unit_test(test_empty_packet_with_fd),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
