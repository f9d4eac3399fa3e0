/* SPDX-License-Identifier: MIT */
/*
 * test_lane_raw.c: the request lane over a raw connection, what librocmmem never does: a page
 * that cannot be resized, a raw client's request answered in the page, oversized and garbage
 * requests, a doorbell rung for nothing, a false count of packets sent, a lane request after
 * more socket requests than the daemon reads at once, a client that dies with a request in the
 * lane.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "lane.h"
#include "wire.h"

#define MiB ((uint64_t)1 << 20)

struct raw_lane {
	int sock;
	int memfd;
	int doorbell;
	struct lane_page *page;
	uint32_t seq;
};

/* raw_lane_open says hello offering a lane and maps what the reply brings. */
static void raw_lane_open(struct raw_lane *r)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	uint32_t taken = 0;

	memset(r, 0, sizeof(*r));
	r->sock = harness_raw_connect(&harness_group);
	assert_true(r->sock >= 0);
	assert_int_equal(harness_raw_hello_fds(r->sock, 1, "test_lane-raw", true,
					       ROCMMEM__WIRE__FEATURE__FEATURE_LANE, &taken, fds,
					       &nfds),
			 0);
	assert_true(taken & ROCMMEM__WIRE__FEATURE__FEATURE_LANE);
	assert_int_equal(nfds, 2);
	r->memfd = fds[0];
	r->doorbell = fds[1];
	r->page = lane_map(r->memfd);
	assert_non_null(r->page);
}

static void raw_lane_close(struct raw_lane *r)
{
	lane_unmap(r->page);
	close(r->memfd);
	close(r->doorbell);
	close(r->sock);
}

/* raw_ring writes len bytes as the request (claiming sock_sent packets before it) and rings. */
static void raw_ring(struct raw_lane *r, const void *buf, uint32_t len, uint64_t id,
		     uint64_t sock_sent)
{
	uint64_t one = 1;

	memcpy(r->page->req_data, buf, len < LANE_SLOT ? len : LANE_SLOT);
	r->page->req.len = len;
	r->page->req.id = id;
	r->page->req.sock_sent = sock_sent;
	atomic_store(&r->page->req.seq, ++r->seq);
	assert_int_equal(write(r->doorbell, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* raw_answer waits for the daemon's answer to the latest request: its kind, or 0 if none. */
static unsigned raw_answer(struct raw_lane *r, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	while (atomic_load(&r->page->rep.seq) != r->seq) {
		long left = end - harness_now_ms();

		if (left <= 0)
			return 0;
		lane_futex_wait(&r->page->rep.seq, atomic_load(&r->page->rep.seq),
				left > 100 ? 100 : left);
	}
	return r->page->rep.kind;
}

/* raw_acquire_bytes packs a lease request of size bytes (no wait). */
static size_t raw_acquire_bytes(uint8_t *buf, uint64_t id, uint64_t size)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;

	acq.has_size = true;
	acq.size = size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = 0;
	msg.has_id = true;
	msg.id = id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	assert_true(protobuf_c_message_get_packed_size(&msg.base) <= LANE_SLOT);
	return protobuf_c_message_pack(&msg.base, buf);
}

/* raw_closed says whether the daemon closed the raw connection within timeout_ms. */
static bool raw_closed(int sock, int timeout_ms)
{
	bool eof = false;
	long end = harness_now_ms() + timeout_ms;

	while (!eof && harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(sock, 100, &eof, NULL, NULL);

		if (m)
			rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	return eof;
}

/* The page is sealed at one page: the client cannot resize what the daemon has mapped. */
static void test_page_is_sealed(void **state)
{
	struct raw_lane r;

	(void)state;
	raw_lane_open(&r);
	assert_int_equal(ftruncate(r.memfd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(r.memfd, 2 * LANE_PAGE), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(r.memfd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	raw_lane_close(&r);
}

/* A raw client's request is answered in the page, a Reply to its id with the lease. */
static void test_raw_request_answered_in_page(void **state)
{
	struct raw_lane r;
	uint8_t buf[LANE_SLOT];
	Rocmmem__Wire__ServerMessage *m;

	(void)state;
	raw_lane_open(&r);
	raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 5, 2 * MiB), 5, 1);
	/* No arena was offered: the grant carries a memfd, so it comes on the socket. */
	assert_int_equal(raw_answer(&r, HARNESS_WAIT_MS), LANE_ON_SOCKET);
	m = harness_raw_recv(r.sock, HARNESS_WAIT_MS, NULL, NULL, NULL);
	assert_non_null(m);
	assert_int_equal(m->reply->id, 5);
	assert_int_equal(m->reply->error, 0);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_LEASE);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	/* A request the daemon refuses at once (size 0) is answered in the page. */
	raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 6, 0), 6, 1);
	assert_int_equal(raw_answer(&r, HARNESS_WAIT_MS), LANE_REPLY);
	m = rocmmem__wire__server_message__unpack(NULL, r.page->rep.len, r.page->rep_data);
	assert_non_null(m);
	assert_int_equal(m->kind_case, ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY);
	assert_int_equal(m->reply->id, 6);
	assert_true(m->reply->error < 0);
	/* Everything the daemon sent on the socket before: the hello reply and the grant. */
	assert_int_equal(r.page->rep.sock_seq, 2);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	raw_lane_close(&r);
}

/* A request longer than the slot, or bytes that are no message: a protocol error. */
static void test_oversized_and_garbage_requests(void **state)
{
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x08};
	static uint8_t big[LANE_SLOT];
	struct raw_lane r;

	(void)state;
	memset(big, 0x2a, sizeof(big));
	raw_lane_open(&r);
	raw_ring(&r, big, LANE_SLOT + 1, 7, 1); /* the slot's bytes, and a length past them */
	assert_true(raw_closed(r.sock, HARNESS_WAIT_MS));
	raw_lane_close(&r);

	raw_lane_open(&r);
	raw_ring(&r, garbage, sizeof(garbage), 7, 1);
	assert_true(raw_closed(r.sock, HARNESS_WAIT_MS));
	raw_lane_close(&r);

	raw_lane_open(&r);
	raw_ring(&r, big, 0, 7, 1);
	assert_true(raw_closed(r.sock, HARNESS_WAIT_MS));
	raw_lane_close(&r);
}

/*
 * A doorbell rung with no new request does nothing; a request claiming packets the socket
 * never carried is sent back (LANE_RESEND) instead of waiting for them.
 */
static void test_idle_rings_and_false_counts(void **state)
{
	struct raw_lane r;
	uint8_t buf[LANE_SLOT];
	uint64_t one = 1;

	(void)state;
	raw_lane_open(&r);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(write(r.doorbell, &one, sizeof(one)), (ssize_t)sizeof(one));
	raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 8, 0), 8, 1);
	assert_int_equal(raw_answer(&r, HARNESS_WAIT_MS), LANE_REPLY);
	raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 9, 0), 9, 1000);
	assert_int_equal(raw_answer(&r, HARNESS_WAIT_MS), LANE_RESEND);
	/* The connection still serves. */
	raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 10, 0), 10, 1);
	assert_int_equal(raw_answer(&r, HARNESS_WAIT_MS), LANE_REPLY);
	raw_lane_close(&r);
}

/*
 * A lane request never overtakes what the client sent on the socket before it. The client
 * sends more requests on the socket than the daemon reads in one turn (40 refused at once,
 * then one for most of the budget), then one through the lane that would fit only if it went
 * first: the daemon reads the rest of the socket first (or sends the lane request back until
 * it has), so the socket's is granted and the lane's refused.
 */
static void test_request_after_socket_requests(void **state)
{
	Rocmmem__Wire__ServerMessage *m;
	uint8_t buf[LANE_SLOT];
	struct raw_lane r;
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	bool granted = false;

	(void)state;
	raw_lane_open(&r);
	for (unsigned i = 0; i <= 40; i++) {
		/* size 0: refused at once (-EINVAL) */
		size_t len = raw_acquire_bytes(buf, 100 + i, i < 40 ? 0 : 60 * MiB);

		assert_int_equal(harness_raw_send_bytes(r.sock, buf, len, NULL, 0), 0);
	}
	/* Sent back (LANE_RESEND) while the daemon has not read them all yet: rung again. */
	for (unsigned kind = LANE_RESEND, tries = 0; kind == LANE_RESEND; tries++) {
		assert_true(tries < 100);
		raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 200, 8 * MiB), 200, 1 + 41);
		kind = raw_answer(&r, HARNESS_WAIT_MS);
		assert_true(kind == LANE_REPLY || kind == LANE_RESEND);
	}
	m = rocmmem__wire__server_message__unpack(NULL, r.page->rep.len, r.page->rep_data);
	assert_non_null(m);
	assert_int_equal(m->reply->id, 200);
	assert_true(m->reply->error < 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	/* Every reply on the socket was sent before the lane's answer, and is counted. */
	assert_int_equal(r.page->rep.sock_seq, 1 + 41);
	for (unsigned i = 0; i <= 40; i++) {
		m = harness_raw_recv(r.sock, HARNESS_WAIT_MS, NULL, fds, &nfds);
		assert_non_null(m);
		assert_int_equal(m->reply->id, 100 + i);
		if (m->reply->id == 140)
			granted = m->reply->error == 0;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
	}
	assert_true(granted);
	raw_lane_close(&r); /* the daemon reclaims the lease */
}

/* A client that dies with a lease request in its lane leaves nothing behind. */
static void test_client_dies_with_request_in_lane(void **state)
{
	int before = harness_fd_count_settled(harness_group.pid);

	(void)state;
	for (int k = 0; k < 20; k++) {
		pid_t child = fork();
		int status;

		assert_true(child >= 0);
		if (child == 0) {
			struct raw_lane r;
			uint8_t buf[LANE_SLOT];

			raw_lane_open(&r);
			raw_ring(&r, buf, (uint32_t)raw_acquire_bytes(buf, 11, 2 * MiB), 11, 1);
			if (k % 2)
				usleep(200); /* sometimes while the daemon is at it */
			_exit(0);
		}
		assert_int_equal(waitpid(child, &status, 0), child);
	}
	assert_true(harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_fd_count_settled(harness_group.pid), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_page_is_sealed, harness_case_idle),
	    cmocka_unit_test_teardown(test_raw_request_answered_in_page, harness_case_idle),
	    cmocka_unit_test_teardown(test_oversized_and_garbage_requests, harness_case_idle),
	    cmocka_unit_test_teardown(test_idle_rings_and_false_counts, harness_case_idle),
	    cmocka_unit_test_teardown(test_request_after_socket_requests, harness_case_idle),
	    cmocka_unit_test_teardown(test_client_dies_with_request_in_lane, harness_case_idle),
	};

	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
