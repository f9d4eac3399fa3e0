/* SPDX-License-Identifier: MIT */
/* flood.c: clients that never read their replies, and long pipelines of requests. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "wire.h"

/*
 * heap_grew_less checks the daemon's growth in heap in use (what it holds: its queues among
 * it). Unknown (0) in sanitized builds, which keep their own books: then it is not judged.
 */
static bool heap_grew_less(long before, long after, long limit_kib)
{
	return before <= 0 || after <= 0 || after - before < limit_kib;
}

/* daemon_heap_kib reads the daemon's heap in use in KiB (its status), or 0. */
static long daemon_heap_kib(void)
{
	return harness_daemon_heap_kib(&hostile.d);
}

/*
 * flooder opens a greeted, non-blocking connection: a daemon that stops reading it makes a
 * send fail with EAGAIN instead of hanging the test.
 */
static int flooder(const char *name)
{
	int fd = hostile_greeted(name);

	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return fd;
}

/* room waits after EAGAIN for the flooder's socket to take more; false if it does not. */
static bool room(int fd, int rc)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	return rc == -EAGAIN && poll(&p, 1, 1000) == 1;
}

/* A well-behaved client that keeps asking while another floods; results read after join. */
struct watcher {
	pthread_t thread;
	atomic_bool stop;
	long ops;
	long errors;
	long max_latency_ms;
	char error[256];
};

static void *watch(void *arg)
{
	struct watcher *w = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MIB, .timeout_ms = 2000, .tag = "watcher"};
	rocmmem_client *c = NULL;
	int err = rocmmem_connect(hostile.d.sock, "watcher", 5000, &c);

	if (err) {
		w->errors++;
		snprintf(w->error, sizeof(w->error), "connect: %s", rocmmem_strerror(err));
		return NULL;
	}
	while (!atomic_load(&w->stop)) {
		long start = harness_now_ms(), took;
		rocmmem_status *st = NULL;
		rocmmem_lease *l = NULL;

		err = rocmmem_status_get(c, &st);
		if (!err) {
			rocmmem_status_free(st);
			err = rocmmem_lease_acquire(c, &req, &l);
		}
		if (!err)
			err = rocmmem_lease_release(l);
		took = harness_now_ms() - start;
		if (err) {
			w->errors++;
			snprintf(w->error, sizeof(w->error), "%s (%s)", rocmmem_strerror(err),
				 rocmmem_last_error());
			break;
		}
		w->ops++;
		if (took > w->max_latency_ms)
			w->max_latency_ms = took;
	}
	rocmmem_disconnect(c);
	return NULL;
}

static void watcher_start(struct watcher *w)
{
	memset(w, 0, sizeof(*w));
	atomic_init(&w->stop, false);
	assert_int_equal(pthread_create(&w->thread, NULL, watch, w), 0);
}

static void watcher_stop(struct watcher *w)
{
	atomic_store(&w->stop, true);
	assert_int_equal(pthread_join(w->thread, NULL), 0);
	print_message("watcher: %ld rounds, slowest %ld ms, %ld errors %s\n", w->ops,
		      w->max_latency_ms, w->errors, w->error);
	if (w->errors)
		fail_msg("the well-behaved client failed during the flood: %s", w->error);
	assert_true(w->ops > 0);
	/* Timely: a status and an acquire/release round within half a second, flood or not. */
	assert_true(w->max_latency_ms < 500);
}

/*
 * A client that sends 5000 status requests and reads none of the replies: the daemon must
 * not buffer without bound. While its replies wait unsent it stops reading that client's
 * requests (backpressure), so the flooder stalls itself: its sends block in its own socket.
 * A second, well-behaved client keeps getting timely answers meanwhile.
 */
static void test_never_reads(void **state)
{
	/* Long names and tags make every status reply larger: it lists every client and lease. */
	static const char name[] =
	    "flooder-that-never-reads-its-replies-xxxxxxxxxxxxxxxxxxxxxxxxxx";
	static const char tag[] =
	    "a-tag-of-sixty-four-bytes-to-make-status-replies-larger-xxxxxxxx";
	int holder = hostile_greeted(name);
	struct watcher w;
	long heap_before, heap_max;
	int fd, sent = 0, rc = 0;

	(void)state;
	for (uint64_t i = 0; i < 8; i++) {
		assert_int_equal(hostile_send_acquire(holder, 1 + i, 0, 2 * MIB, 0, tag), 0);
		hostile_expect_grant(holder, 1 + i, 2 * MIB);
	}
	watcher_start(&w);
	fd = flooder(name);
	heap_before = daemon_heap_kib();
	heap_max = heap_before;
	for (sent = 0; sent < 5000; sent++) {
		while (room(fd, rc = hostile_send_status(fd, 1 + (uint64_t)sent)))
			;
		if (rc)
			break;
		if (sent % 100 == 0) {
			long heap = daemon_heap_kib();

			heap_max = heap > heap_max ? heap : heap_max;
		}
	}
	print_message("flooder: %d status requests sent (%s); daemon heap %ld -> %ld KiB\n", sent,
		      rc ? strerror(-rc) : "all", heap_before, heap_max);
	/* Pushed back (its socket full for a whole second) long before 5000 requests. */
	assert_int_equal(rc, -EAGAIN);
	assert_true(sent < 5000);
	/* Let the watcher run a while beside the stuck client before it is let go. */
	hostile_sleep_ms(200);
	heap_max = daemon_heap_kib() > heap_max ? daemon_heap_kib() : heap_max;
	close(fd);
	watcher_stop(&w);
	/* At most one burst of replies is queued: well under 1 MiB of growth. */
	assert_true(heap_grew_less(heap_before, heap_max, 1024));
	close(holder);
	hostile_assert_healthy();
}

/* expect_reply reads one reply for id with the given error; returns the lease id of a grant. */
static uint64_t expect_reply(int fd, uint64_t id, int err)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 5000, fds, &nfds);
	Rocmmem__Wire__Reply *r = m->reply;
	uint64_t lease = 0;

	if (r->id != id || (r->has_error ? r->error : 0) != err)
		fail_msg("expected reply %llu with error %d, got reply %llu with error %d: %s",
			 (unsigned long long)id, err, (unsigned long long)r->id,
			 r->has_error ? r->error : 0, r->message ? r->message : "");
	if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_LEASE)
		lease = r->lease->lease_id;
	wire_close_fds(fds, nfds);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return lease;
}

struct pipeline {
	int fd;
	uint64_t first;	  /* the lease id before the first pipelined grant */
	uint64_t replies; /* replies read and checked so far, in order */
};

/* read_replies reads and checks whatever replies are ready, waiting up to timeout_ms first. */
static void read_replies(struct pipeline *p, int timeout_ms)
{
	struct pollfd pf = {.fd = p->fd, .events = POLLIN};

	while (poll(&pf, 1, timeout_ms) == 1) {
		uint64_t k = p->replies / 2, id = 1000 + 2 * k;

		if (p->replies % 2 == 0)
			assert_int_equal(expect_reply(p->fd, id, 0), p->first + 1 + k);
		else
			expect_reply(p->fd, id + 1, 0);
		p->replies++;
		timeout_ms = 0;
	}
}

/* send_or_read sends one request, reading replies whenever the daemon pushes back. */
static void send_or_read(struct pipeline *p, int (*send)(struct pipeline *, uint64_t), uint64_t k)
{
	int rc;

	while ((rc = send(p, k)) == -EAGAIN)
		read_replies(p, 1000);
	assert_int_equal(rc, 0);
}

static int send_acquire(struct pipeline *p, uint64_t k)
{
	return hostile_send_acquire(p->fd, 1000 + 2 * k, 0, 2 * MIB, 0, "pipelined");
}

static int send_release(struct pipeline *p, uint64_t k)
{
	return hostile_send_release(p->fd, 1000 + 2 * k + 1, true, p->first + 1 + k);
}

/*
 * 10000 acquire + release pairs pipelined on one connection, replies read only when the
 * daemon pushes back: every grant is matched by its release, in order, the books end at 0
 * while still connected, and the daemon never holds more than a burst of queued grants (fds)
 * or memory. The lease ids are predicted from a first grant: the daemon numbers leases in
 * order and nobody else acquires meanwhile.
 */
static void test_pipelined_pairs(void **state)
{
	enum { PAIRS = 10000 };
	struct harness_totals t;
	struct pipeline p = {.fd = flooder("pipeline")};
	int fds_max = 0;
	long heap_before = daemon_heap_kib(), heap_max = heap_before;

	(void)state;
	assert_int_equal(hostile_send_acquire(p.fd, 1, 0, 2 * MIB, 0, "probe"), 0);
	p.first = hostile_expect_grant(p.fd, 1, 2 * MIB);
	assert_int_equal(hostile_send_release(p.fd, 2, true, p.first), 0);
	expect_reply(p.fd, 2, 0);
	for (uint64_t k = 0; k < PAIRS; k++) {
		send_or_read(&p, send_acquire, k);
		send_or_read(&p, send_release, k);
		if (k % 250 == 0) {
			int n = harness_fd_count(hostile.d.pid);
			long heap = daemon_heap_kib();

			fds_max = n > fds_max ? n : fds_max;
			heap_max = heap > heap_max ? heap : heap_max;
		}
	}
	while (p.replies < 2 * PAIRS) {
		uint64_t before = p.replies;

		read_replies(&p, 5000);
		assert_true(p.replies > before);
	}
	print_message("pipeline: daemon fds up to %d (baseline %d), heap %ld -> %ld KiB\n", fds_max,
		      hostile.fd_baseline, heap_before, heap_max);
	/* A burst is at most 32 requests: a few queued grant fds beyond this connection's. */
	assert_true(fds_max <= hostile.fd_baseline + 40);
	assert_true(heap_grew_less(heap_before, heap_max, 1024));
	/* Still connected: nothing leased, nothing waiting. */
	assert_int_equal(harness_totals(&hostile.d, &t), 0);
	assert_int_equal(t.leased_bytes, 0);
	assert_int_equal(t.leases, 0);
	assert_int_equal(t.waiters, 0);
	close(p.fd);
	hostile_assert_healthy();
}

/*
 * Tiny replies never read: the cap on queued replies (1 MiB per client) must bound the
 * daemon's memory too. Each "no lease" error reply packs to about 27 bytes, so it takes some
 * 39000 of them to reach the cap; what the daemon keeps for each must not multiply that.
 */
static void test_tiny_replies_memory(void **state)
{
	int fd = flooder("tiny-flooder");
	long heap_before = daemon_heap_kib(), heap_max = heap_before;
	int sent, rc = 0;

	(void)state;
	for (sent = 0; sent < 100000; sent++) {
		while (room(fd, rc = hostile_send_release(fd, 1 + (uint64_t)sent, true, 5)))
			;
		if (rc)
			break;
		if (sent % 1000 == 0) {
			long heap = daemon_heap_kib();

			heap_max = heap > heap_max ? heap : heap_max;
		}
	}
	hostile_sleep_ms(50); /* what the daemon had still to read */
	heap_max = daemon_heap_kib() > heap_max ? daemon_heap_kib() : heap_max;
	print_message("tiny replies: %d requests sent (%s); daemon heap %ld -> %ld KiB\n", sent,
		      rc ? strerror(-rc) : "all", heap_before, heap_max);
	/* Disconnected for not reading, or pushed back: either way memory is what counts. */
	close(fd);
	hostile_assert_healthy();
	if (!heap_grew_less(heap_before, heap_max, 4 * 1024))
		fail_msg("one client that does not read grew the daemon by %ld KiB, more than "
			 "4 times its 1 MiB cap on queued replies",
			 heap_max - heap_before);
}

/* daemon_fd_limit reads the daemon's soft RLIMIT_NOFILE from /proc, or -1. */
static long daemon_fd_limit(void)
{
	char path[64], line[256];
	long soft = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)hostile.d.pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Max open files %ld", &soft) == 1)
			break;
	fclose(f);
	return soft;
}

/* Each flooder stays well under the 1 MiB cap: 15000 pairs queue about 650 KB of replies. */
enum { MAX_FLOODERS = 8, PAIRS_PER_FLOODER = 15000, SPARES = 16 };

/* flood_pair pipelines acquire + release (of the lease id the grant will carry). */
static bool flood_pair(int fd, uint64_t id, uint64_t lease)
{
	int rc;

	while (room(fd, rc = hostile_send_acquire(fd, id, 0, 2 * MIB, 0, "flood")))
		;
	if (rc)
		return false;
	while (room(fd, rc = hostile_send_release(fd, id + 1, true, lease)))
		;
	return rc == 0;
}

/*
 * Granted leases whose replies are never read: the daemon keeps a duplicate of each lease fd
 * for every queued grant, even after the lease is released. A few clients that pipeline
 * acquire + release pairs and never read (each well under the 1 MiB cap on queued bytes) can
 * so drive the daemon to its open-files limit, after which a well-behaved client gets no
 * memory. The daemon must keep serving it (by pushing back, capping or disconnecting).
 */
static void test_unread_grants_pin_fds(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MIB, .timeout_ms = 0, .tag = "good"};
	long limit = daemon_fd_limit();
	int flooders[MAX_FLOODERS], spares[SPARES], nflooders, nspares = 0, count = 0, cur = 0;
	int err;
	unsigned pairs = 0;
	uint64_t next_lease, id = 10;
	rocmmem_client *good;
	rocmmem_lease *l = NULL;
	bool stop = false;
	char why[512];

	(void)state;
	if (limit <= 0 || limit > (long)(MAX_FLOODERS - 1) * PAIRS_PER_FLOODER) {
		print_message("skipped: the daemon may open %ld files, too many to fill here\n",
			      limit);
		skip();
	}
	good = harness_connect(&hostile.d, "good");
	assert_int_equal(rocmmem_lease_acquire(good, &req, &l), 0);
	next_lease = rocmmem_lease_id(l) + 1;
	assert_int_equal(rocmmem_lease_release(l), 0);
	/* Enough flooders to go past the limit with one to spare. */
	nflooders = (int)(limit / PAIRS_PER_FLOODER) + 2;
	for (int i = 0; i < nflooders; i++) {
		flooders[i] = flooder("fd-flooder");
	}
	/* Pipelined pairs while far from the limit; then single connections up to it. */
	while (cur < nflooders && !stop) {
		long gap;

		count = harness_fd_count_settled(hostile.d.pid);
		gap = limit - count;
		if (gap <= 0)
			break;
		if (gap <= 10) {
			assert_true(nspares < SPARES);
			spares[nspares] = hostile_connect();
			nspares++;
			continue;
		}
		for (long n = gap - 8 < 200 ? gap - 8 : 200; n > 0 && cur < nflooders; n--) {
			if (pairs == PAIRS_PER_FLOODER) {
				cur++;
				pairs = 0;
				continue;
			}
			if (!flood_pair(flooders[cur], id, next_lease)) {
				/*
				 * The daemon pushed back or hung up, perhaps in the middle of a
				 * pair: drop this flooder and learn the next lease id afresh.
				 */
				close(flooders[cur]);
				flooders[cur++] = -1;
				pairs = 0;
				l = NULL;
				if (rocmmem_lease_acquire(good, &req, &l) != 0) {
					stop = true;
					break;
				}
				next_lease = rocmmem_lease_id(l) + 1;
				rocmmem_lease_release(l);
				continue;
			}
			next_lease++;
			id += 2;
			pairs++;
		}
	}
	print_message("the daemon holds %d fds (its limit %ld) after %llu unread grants\n", count,
		      limit, (unsigned long long)(id - 10) / 2);
	l = NULL;
	err = rocmmem_lease_acquire(good, &req, &l);
	snprintf(why, sizeof(why), "%s", err ? rocmmem_last_error() : "");
	if (!err)
		rocmmem_lease_release(l);
	/* Let the flood go before any verdict, so that later tests find a usable daemon. */
	for (int i = 0; i < nflooders; i++)
		if (flooders[i] >= 0)
			close(flooders[i]);
	for (int i = 0; i < nspares; i++)
		close(spares[i]);
	rocmmem_disconnect(good);
	hostile_assert_healthy();
	if (err)
		fail_msg("a well-behaved client got no lease while clients that do not read "
			 "pinned %d fds in the daemon: %s (%s)",
			 count, rocmmem_strerror(err), why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_never_reads),
	    cmocka_unit_test(test_pipelined_pairs),
	    cmocka_unit_test(test_tiny_replies_memory),
	    cmocka_unit_test(test_unread_grants_pin_fds),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
