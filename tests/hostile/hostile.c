/* SPDX-License-Identifier: MIT */
/* hostile.c: the hostile tests' daemon fixture, raw message helpers and "still healthy" check. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "wire.h"

struct hostile hostile;

static bool teardown_failed;

void hostile_sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

const char *const *hostile_daemon_args;

int hostile_group_setup(void **state)
{
	static const char *const plain[] = {"--backend", "host", "--budget", "64M", NULL};
	const char *const *args = hostile_daemon_args ? hostile_daemon_args : plain;
	struct harness_totals t;

	(void)state;
	if (harness_daemon_start(&hostile.d, args) != 0) {
		fprintf(stderr, "could not start rocmmemd\n");
		return -1;
	}
	/* A round trip first, so that the start-up probe connection is surely gone. */
	if (harness_totals(&hostile.d, &t) != 0 || t.budget_bytes != HOSTILE_BUDGET) {
		fprintf(stderr, "rocmmemd does not answer status with the expected budget\n");
		harness_daemon_stop(&hostile.d);
		return -1;
	}
	hostile.fd_baseline = harness_fd_count_settled(hostile.d.pid);
	if (hostile.fd_baseline <= 0) {
		harness_daemon_stop(&hostile.d);
		return -1;
	}
	/* What one greeted connection costs in fds (1, or 2 with a pidfd). */
	{
		int fd = harness_raw_connect(&hostile.d);

		if (fd < 0 || harness_raw_hello(fd, 1, "fd-probe") != 0) {
			harness_daemon_stop(&hostile.d);
			return -1;
		}
		hostile.fds_per_connection =
		    harness_fd_count_settled(hostile.d.pid) - hostile.fd_baseline;
		close(fd);
		if (hostile.fds_per_connection < 1 || hostile.fds_per_connection > 2 ||
		    harness_fd_count_settled(hostile.d.pid) != hostile.fd_baseline) {
			fprintf(stderr, "a connection costs the daemon %d fds\n",
				hostile.fds_per_connection);
			harness_daemon_stop(&hostile.d);
			return -1;
		}
	}
	return 0;
}

int hostile_group_teardown(void **state)
{
	bool alive = harness_daemon_alive(&hostile.d);
	int rc;

	(void)state;
	rc = harness_daemon_stop(&hostile.d);
	if (!alive || rc != 0) {
		fprintf(stderr,
			"rocmmemd %s (exit status %d); expected a clean exit 0 on SIGTERM\n",
			alive ? "did not stop cleanly" : "was no longer running", rc);
		teardown_failed = true;
		return -1;
	}
	return 0;
}

int hostile_run_result(int cmocka_rc)
{
	return cmocka_rc != 0 || teardown_failed ? 1 : 0;
}

/* well_behaved acquires, touches and releases 2 MiB with librocmmem, and reads a status. */
static void well_behaved(void)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MIB, .timeout_ms = 2000, .tag = "healthy"};
	rocmmem_client *c = harness_connect(&hostile.d, "healthy");
	rocmmem_lease *l = NULL;
	rocmmem_status *st = NULL;
	int err;
	char *p;

	err = rocmmem_lease_acquire(c, &req, &l);
	if (err)
		fail_msg("a well-behaved acquire failed: %s (%s)", rocmmem_strerror(err),
			 rocmmem_last_error());
	assert_int_equal(rocmmem_lease_size(l), 2 * MIB);
	p = rocmmem_lease_ptr(l);
	assert_non_null(p);
	p[0] = 1;
	p[2 * MIB - 1] = 2;
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_true(rocmmem_status_device_count(st) >= 1);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

static bool totals_match(const struct harness_totals *t, uint64_t leased, size_t leases,
			 size_t clients)
{
	return t->leased_bytes == leased && t->lease_bytes_sum == leased && t->leases == leases &&
	       t->device_leases == leases && t->waiters == 0 && t->clients == clients &&
	       t->budget_bytes == HOSTILE_BUDGET && t->free_bytes == HOSTILE_BUDGET - leased;
}

/* wait_totals polls the accounting for up to timeout_ms; returns the last reading's match. */
static bool wait_totals(struct harness_totals *t, uint64_t leased, size_t leases, size_t clients,
			long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	for (;;) {
		bool ok = harness_totals(&hostile.d, t) == 0;

		if (ok && totals_match(t, leased, leases, clients))
			return true;
		if (harness_now_ms() > end)
			return false;
		hostile_sleep_ms(10);
	}
}

void hostile_assert_healthy_with(uint64_t leased, size_t leases, size_t clients)
{
	struct harness_totals t;
	int want_fds =
		hostile.fd_baseline + (int)leases + (int)clients * hostile.fds_per_connection,
	    fds = -1;
	long end;

	assert_true(harness_daemon_alive(&hostile.d));
	/* The hostile connections are gone and nothing they held is left. */
	if (!wait_totals(&t, leased, leases, clients, HARNESS_WAIT_MS))
		fail_msg("accounting is off: leased %llu (sum of leases %llu, want %llu), "
			 "%zu leases (device says %llu, want %zu), %u waiters (want 0), %zu "
			 "other clients (want %zu), free %llu of %llu",
			 (unsigned long long)t.leased_bytes, (unsigned long long)t.lease_bytes_sum,
			 (unsigned long long)leased, t.leases, (unsigned long long)t.device_leases,
			 leases, t.waiters, t.clients, clients, (unsigned long long)t.free_bytes,
			 (unsigned long long)t.budget_bytes);
	well_behaved();
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (harness_now_ms() < end) {
		fds = harness_fd_count(hostile.d.pid);
		if (fds == want_fds)
			break;
		hostile_sleep_ms(10);
	}
	if (fds != want_fds) {
		harness_print_fds(hostile.d.pid);
		fail_msg("the daemon has %d fds open, want %d (baseline %d + %zu leases + %zu "
			 "connections of %d fd(s))",
			 fds, want_fds, hostile.fd_baseline, leases, clients,
			 hostile.fds_per_connection);
	}
	/* The well-behaved client's lease is gone too: the books are exact again. */
	if (!wait_totals(&t, leased, leases, clients, HARNESS_WAIT_MS))
		fail_msg("accounting is off after a well-behaved client: leased %llu, %zu leases, "
			 "%u waiters, %zu clients",
			 (unsigned long long)t.leased_bytes, t.leases, t.waiters, t.clients);
	assert_true(harness_daemon_alive(&hostile.d));
}

void hostile_assert_healthy(void)
{
	hostile_assert_healthy_with(0, 0, 0);
}

int hostile_connect(void)
{
	int fd = harness_raw_connect(&hostile.d);

	if (fd < 0)
		fail_msg("could not connect to %s: %s", hostile.d.sock, strerror(errno));
	return fd;
}

int hostile_greeted(const char *name)
{
	int fd = hostile_connect();
	int err = harness_raw_hello(fd, 1, name);

	if (err)
		fail_msg("hello failed: %s", strerror(-err));
	return fd;
}

uint8_t *hostile_pack(const Rocmmem__Wire__ClientMessage *msg, size_t *len)
{
	uint8_t *buf;

	*len = rocmmem__wire__client_message__get_packed_size(msg);
	buf = malloc(*len ? *len : 1);
	assert_non_null(buf);
	rocmmem__wire__client_message__pack(msg, buf);
	return buf;
}

int hostile_send(int fd, bool id_present, uint64_t id, Rocmmem__Wire__ClientMessage *msg)
{
	msg->has_id = id_present;
	msg->id = id;
	return harness_raw_send(fd, msg, NULL, 0);
}

int hostile_send_hello(int fd, uint64_t id, bool has_version, uint32_t version, const char *name)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;

	hello.has_protocol_version = has_version;
	hello.protocol_version = version;
	hello.client_name = (char *)(uintptr_t)name;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	return hostile_send(fd, true, id, &msg);
}

int hostile_send_status(int fd, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest st = ROCMMEM__WIRE__STATUS_REQUEST__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &st;
	return hostile_send(fd, true, id, &msg);
}

int hostile_send_acquire(int fd, uint64_t id, uint32_t device, uint64_t size, int64_t timeout_ms,
			 const char *tag)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;

	acq.has_device = true;
	acq.device = device;
	acq.has_size = true;
	acq.size = size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = timeout_ms;
	acq.tag = (char *)(uintptr_t)tag;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	return hostile_send(fd, true, id, &msg);
}

int hostile_send_release(int fd, uint64_t id, bool has_lease_id, uint64_t lease_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;

	rel.has_lease_id = has_lease_id;
	rel.lease_id = lease_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	return hostile_send(fd, true, id, &msg);
}

enum hostile_rx hostile_recv(int fd, int timeout_ms, Rocmmem__Wire__ServerMessage **out, int *fds,
			     unsigned *nfds)
{
	static uint8_t buf[WIRE_MAX_FRAME];
	long end = harness_now_ms() + timeout_ms;
	int got[WIRE_MAX_FDS];
	unsigned ngot = 0;
	ssize_t n;

	*out = NULL;
	if (nfds)
		*nfds = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long left = end - harness_now_ms();

		if (poll(&p, 1, left > 0 ? (int)left : 0) <= 0)
			return HOSTILE_RX_TIMEOUT;
		n = wire_recv(fd, buf, sizeof(buf), got, &ngot, MSG_DONTWAIT);
		/* ECONNRESET comes before what the daemon sent ahead of closing: read on. */
		if (n == -ECONNRESET || n == -EAGAIN)
			continue;
		if (n == 0 || n == -EPIPE)
			return HOSTILE_RX_EOF;
		if (n < 0)
			return HOSTILE_RX_GARBAGE;
		break;
	}
	if (fds && nfds) {
		memcpy(fds, got, ngot * sizeof(int));
		*nfds = ngot;
	} else {
		wire_close_fds(got, ngot);
	}
	*out = rocmmem__wire__server_message__unpack(NULL, (size_t)n, buf);
	return *out ? HOSTILE_RX_MSG : HOSTILE_RX_GARBAGE;
}

Rocmmem__Wire__ServerMessage *hostile_recv_reply(int fd, int timeout_ms, int *fds, unsigned *nfds)
{
	for (;;) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx = hostile_recv(fd, timeout_ms, &m, fds, nfds);

		if (rx == HOSTILE_RX_EOF)
			fail_msg("the daemon closed the connection instead of replying");
		if (rx == HOSTILE_RX_TIMEOUT)
			fail_msg("no reply within %d ms", timeout_ms);
		if (rx != HOSTILE_RX_MSG)
			fail_msg("the daemon sent an undecodable packet");
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY)
			return m;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
}

void hostile_expect_error(int fd, uint64_t id, int err, const char *needle)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, fds, &nfds);
	Rocmmem__Wire__Reply *r = m->reply;

	wire_close_fds(fds, nfds);
	if (!r->has_error || r->error != err)
		fail_msg("request %llu: expected error %d (%s), got %d (%s): %s",
			 (unsigned long long)id, err, strerror(-err), r->has_error ? r->error : 0,
			 r->has_error ? strerror(-r->error) : "no error",
			 r->message ? r->message : "");
	assert_true(r->has_id);
	assert_int_equal(r->id, id);
	assert_non_null(r->message);
	assert_true(strlen(r->message) > 0);
	if (needle && !strstr(r->message, needle))
		fail_msg("error message '%s' does not mention '%s'", r->message, needle);
	assert_int_equal(r->body_case, ROCMMEM__WIRE__REPLY__BODY__NOT_SET);
	assert_int_equal(nfds, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

void hostile_expect_closed(int fd)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx = hostile_recv(fd, 100, &m, NULL, NULL);

		if (m)
			rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (rx == HOSTILE_RX_EOF)
			return;
	}
	fail_msg("the daemon kept the connection open");
}

void hostile_expect_error_closed(int fd, uint64_t id, int err, const char *needle)
{
	hostile_expect_error(fd, id, err, needle);
	hostile_expect_closed(fd);
}

void hostile_expect_refused_closed(int fd, int err)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx = hostile_recv(fd, 100, &m, NULL, NULL);

		if (rx == HOSTILE_RX_EOF)
			return;
		if (rx == HOSTILE_RX_GARBAGE)
			fail_msg("the daemon sent an undecodable packet");
		if (rx != HOSTILE_RX_MSG)
			continue;
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			Rocmmem__Wire__Reply *r = m->reply;

			if (!r->has_error || r->error >= 0)
				fail_msg("a protocol violation got a successful reply");
			if (err && r->error != err)
				fail_msg("expected error %d (%s), got %d (%s): %s", err,
					 strerror(-err), r->error, strerror(-r->error),
					 r->message ? r->message : "");
			assert_true(r->body_case == ROCMMEM__WIRE__REPLY__BODY__NOT_SET);
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	fail_msg("the daemon kept the connection open");
}

uint64_t hostile_expect_grant(int fd, uint64_t id, uint64_t size)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, fds, &nfds);
	Rocmmem__Wire__Reply *r = m->reply;
	uint64_t lease;

	if (r->has_error && r->error != 0)
		fail_msg("request %llu: expected a grant, got error %d (%s): %s",
			 (unsigned long long)id, r->error, strerror(-r->error),
			 r->message ? r->message : "");
	assert_int_equal(r->id, id);
	assert_int_equal(r->body_case, ROCMMEM__WIRE__REPLY__BODY_LEASE);
	assert_true(r->lease->has_lease_id);
	assert_int_equal(r->lease->size, size);
	assert_int_equal(nfds, 1);
	assert_int_equal(r->lease->fd_count, nfds);
	lease = r->lease->lease_id;
	wire_close_fds(fds, nfds);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return lease;
}

void hostile_expect_serving(int fd, uint64_t id)
{
	bool more = true;

	assert_int_equal(hostile_send_status(fd, id), 0);
	while (more) {
		Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 3000, NULL, NULL);
		Rocmmem__Wire__Reply *r = m->reply;

		if (r->has_error && r->error != 0)
			fail_msg("status refused: %d (%s)", r->error, r->message ? r->message : "");
		assert_int_equal(r->id, id);
		assert_int_equal(r->body_case, ROCMMEM__WIRE__REPLY__BODY_STATUS);
		more = r->has_more && r->more;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
}

uint32_t hostile_status_waiters(void)
{
	struct harness_totals t;

	assert_int_equal(harness_totals(&hostile.d, &t), 0);
	return t.waiters;
}

bool hostile_status_has_lease(uint64_t lease_id, int32_t *owner_pid)
{
	rocmmem_client *c = harness_connect(&hostile.d, "hostile-status");
	rocmmem_status *st = NULL;
	bool found = false;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *l = rocmmem_status_lease(st, i);

		if (l->id == lease_id) {
			found = true;
			if (owner_pid)
				*owner_pid = l->owner_pid;
		}
	}
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return found;
}

uint64_t hostile_limit_hits(const char *name, uint64_t *value)
{
	rocmmem_client *c = harness_connect(&hostile.d, "hostile-status");
	rocmmem_status *st = NULL;
	bool found = false;
	uint64_t hits = 0;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_limit_count(st); i++) {
		const struct rocmmem_limit_info *l = rocmmem_status_limit(st, i);

		if (strcmp(l->name, name) == 0) {
			found = true;
			hits = l->hits;
			if (value)
				*value = l->value;
		}
	}
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	if (!found)
		fail_msg("the status lists no limit '%s'", name);
	return hits;
}

void hostile_access_refused(uint64_t *peers, uint64_t *requests)
{
	rocmmem_client *c = harness_connect(&hostile.d, "hostile-status");
	rocmmem_status *st = NULL;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	*peers = rocmmem_status_access(st)->peers_refused;
	*requests = rocmmem_status_access(st)->requests_refused;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

void hostile_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

bool hostile_wait_hup(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLHUP);
}

struct hostile_child hostile_spawn(void (*fn)(int sync, int arg), int arg)
{
	struct hostile_child c;
	int p[2];

	hostile_pipe(p);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(p[0]);
		fn(p[1], arg);
		_exit(0);
	}
	close(p[1]);
	c.sync = p[0];
	return c;
}

void hostile_child_ready(struct hostile_child *c)
{
	struct pollfd p = {.fd = c->sync, .events = POLLIN};
	int status = 0;
	char b;

	if (poll(&p, 1, 5000) == 1 && read(c->sync, &b, 1) == 1)
		return;
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	fail_msg("child %d was not ready (exit status %d)", (int)c->pid,
		 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

void hostile_child_kill(struct hostile_child *c)
{
	int status = 0;

	kill(c->pid, SIGKILL);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		fail_msg("child %d ended by itself (exit status %d) before it was killed",
			 (int)c->pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(c->sync);
}

void hostile_signal_ready(int sync)
{
	if (write(sync, "r", 1) != 1)
		_exit(HOSTILE_CHILD_NO_SEND);
}

int hostile_child_greeted(const char *name)
{
	int fd = harness_raw_connect(&hostile.d);

	if (fd < 0)
		_exit(HOSTILE_CHILD_NO_CONNECT);
	if (harness_raw_hello(fd, 1, name) != 0)
		_exit(HOSTILE_CHILD_NO_HELLO);
	return fd;
}

int hostile_send_subscribe(int fd, uint64_t id, bool has_samples, bool samples, bool has_events,
			   bool events, bool has_interval, uint32_t interval_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Subscribe sub = ROCMMEM__WIRE__SUBSCRIBE__INIT;

	sub.has_samples = has_samples;
	sub.samples = samples;
	sub.has_events = has_events;
	sub.events = events;
	sub.has_interval_ms = has_interval;
	sub.interval_ms = interval_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
	msg.subscribe = &sub;
	return hostile_send(fd, true, id, &msg);
}

int hostile_send_unsubscribe(int fd, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Unsubscribe unsub = ROCMMEM__WIRE__UNSUBSCRIBE__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE;
	msg.unsubscribe = &unsub;
	return hostile_send(fd, true, id, &msg);
}
