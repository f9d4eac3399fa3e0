/* SPDX-License-Identifier: MIT */
/*
 * test_lane.c: the request lane (common/lane.h) through librocmmem and a real daemon: requests
 * answered in the shared page, a reply never ahead of an event sent before it, a request that
 * waits, one given up on, the lane turned off, a restart, threads sharing a connection. What
 * librocmmem never does is in test_lane_raw.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/time.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "lane.h"
#include "wire.h"

#define MiB ((uint64_t)1 << 20)

/* lane_requests reads rocmmemd_lane_requests_total through a connection of its own. */
static uint64_t lane_requests(void)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane-metrics");
	unsigned long long v = 0;
	char *text = NULL;
	const char *at;

	assert_non_null(c);
	assert_int_equal(rocmmem_metrics(c, &text), 0);
	at = strstr(text, "\nrocmmemd_lane_requests_total ");
	assert_non_null(at);
	assert_int_equal(sscanf(at, "\nrocmmemd_lane_requests_total %llu", &v), 1);
	free(text);
	rocmmem_disconnect(c);
	return v;
}

static rocmmem_lease *acquire(rocmmem_client *c, uint64_t size, int64_t timeout_ms)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = timeout_ms};
	rocmmem_lease *l = NULL;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("acquire %" PRIu64 ": %s (%s)", size, rocmmem_strerror(err),
			 rocmmem_last_error());
	return l;
}

/* cycles leases and releases n times on c, writing and checking each lease's first bytes. */
static void cycles(rocmmem_client *c, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		rocmmem_lease *l = acquire(c, 2 * MiB, 0);
		volatile uint32_t *p = rocmmem_lease_ptr(l);

		assert_non_null(p);
		p[0] = i;
		p[(2 * MiB) / sizeof(uint32_t) - 1] = ~i;
		assert_int_equal(p[0], i);
		assert_int_equal(p[(2 * MiB) / sizeof(uint32_t) - 1], ~i);
		assert_int_equal(rocmmem_lease_release(l), 0);
	}
}

/* Requests go through the lane: the daemon counts them, and the memory is the lease's. */
static void test_requests_go_through_the_lane(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane");
	uint64_t before, after;

	(void)state;
	assert_non_null(c);
	before = lane_requests();
	cycles(c, 100);
	after = lane_requests();
	/* Every acquire and release but the first grant (it carries the arena's fd: socket). */
	assert_true(after - before >= 2 * 100 - 1);
	rocmmem_disconnect(c);
}

/* ROCMMEM_LANE=0: hello offers no lane and every request goes on the socket. */
static void test_lane_turned_off(void **state)
{
	rocmmem_client *c;
	uint64_t before, after;

	(void)state;
	setenv("ROCMMEM_LANE", "0", 1);
	c = harness_connect(&harness_group, "test_lane-off");
	unsetenv("ROCMMEM_LANE");
	assert_non_null(c);
	before = lane_requests();
	cycles(c, 50);
	after = lane_requests();
	/* Only the metrics connections' own requests may have used a lane. */
	assert_true(after - before <= 2);
	rocmmem_disconnect(c);
}

/*
 * A reply in the lane never overtakes what the daemon sent on the socket before it. An
 * operator evicts a model of the client's that it does not unload: at the deadline (1 s here)
 * the daemon revokes it and the lease counted towards it, telling the client on its socket.
 * The client's next request goes through the lane; once it returns, the lease is known
 * revoked, though nothing read the socket in between.
 */
static void test_reply_after_earlier_event(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane-order");
	rocmmem_client *op = harness_connect(&harness_group, "test_lane-operator");
	struct rocmmem_model_desc desc = ROCMMEM_MODEL_DESC_INIT;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	struct rocmmem_evict_result res = ROCMMEM_EVICT_RESULT_INIT;
	rocmmem_lease *l = NULL, *other;
	uint64_t model;

	(void)state;
	assert_non_null(c);
	assert_non_null(op);
	cycles(c, 2); /* the arena is there: what follows goes through the lane */
	other = acquire(c, 2 * MiB, 0);
	desc.name = "test_lane-model";
	desc.size = 4 * MiB;
	assert_int_equal(rocmmem_model_register(c, &desc, &model), 0);
	assert_int_equal(rocmmem_model_acquire(c, model, 0), 0);
	req.model_id = model;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
	assert_int_equal(rocmmem_model_release(c, model), 0);
	assert_int_equal(rocmmem_lease_revoked(l), 0);
	/* Nobody dispatches c's events: the evict request goes unanswered, and is revoked. */
	assert_int_equal(rocmmem_model_evict(op, model, &res), 0);
	assert_true(res.revoked);
	assert_int_equal(rocmmem_lease_revoked(l), 0); /* in c's socket, not read yet */
	assert_int_equal(rocmmem_lease_release(other), 0);
	assert_int_equal(rocmmem_lease_revoked(l), 1);
	rocmmem_lease_release(l);
	rocmmem_model_unregister(c, model);
	rocmmem_disconnect(op);
	rocmmem_disconnect(c);
}

/* wait_for_waiter polls the books until a request waits on device 0. */
static void wait_for_waiter(void)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct harness_totals t = {0};

	while (harness_now_ms() < end) {
		if (harness_totals(&harness_group, &t) == 0 && t.waiters > 0)
			return;
		usleep(2000);
	}
	fail_msg("no request came to wait");
}

/*
 * A request that must wait (the budget is held) is answered on the socket once it is granted;
 * the lane tells the client so at once, and frees itself for the next request.
 */
static void test_waiting_request_answered_on_socket(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "test_lane-holder");
	rocmmem_lease *big;
	pid_t child;
	int status;

	(void)state;
	assert_non_null(holder);
	big = acquire(holder, 48 * MiB, 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		rocmmem_client *c = harness_connect(&harness_group, "test_lane-waiter");
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 32 * MiB, .timeout_ms = HARNESS_WAIT_MS};
		rocmmem_lease *l = NULL;
		volatile uint8_t *p;
		int ok;

		if (!c)
			_exit(2);
		cycles(c, 1); /* its arena first: the waiting acquire then goes through the lane */
		if (rocmmem_lease_acquire(c, &req, &l) != 0)
			_exit(3);
		p = rocmmem_lease_ptr(l);
		p[0] = 7;
		ok = p[0] == 7;
		/* And the lane is free again: the next request goes through it as before. */
		cycles(c, 3);
		rocmmem_lease_release(l);
		rocmmem_disconnect(c);
		_exit(ok ? 0 : 4);
	}
	wait_for_waiter();
	assert_int_equal(rocmmem_lease_release(big), 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	rocmmem_disconnect(holder);
}

/*
 * A request given up on in the lane (the daemon stopped past the reply's grace) is answered
 * when the daemon goes on; the library takes that answer at its next request (or whatever else
 * it next does on the connection: test_late_answers_taken_without_a_lane_call) and gives the
 * lease granted meanwhile back, so the daemon does not charge it to the client.
 */
static void test_abandoned_request_undone(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane-abandon");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	rocmmem_lease *l = NULL;
	int err;

	(void)state;
	assert_non_null(c);
	cycles(c, 2);
	assert_int_equal(kill(harness_group.pid, SIGSTOP), 0);
	/* No wait asked: the library gives up after its reply grace (10 s). */
	err = rocmmem_lease_acquire(c, &req, &l);
	assert_int_equal(kill(harness_group.pid, SIGCONT), 0);
	assert_int_equal(err, -ETIMEDOUT);
	assert_null(l);
	/* The daemon answers it now: granted, and charged until the library undoes it. */
	assert_true(harness_wait_totals(&harness_group, 2 * MiB, 1, HARNESS_WAIT_MS) >= 0);
	cycles(c, 3);
	assert_true(harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0);
	rocmmem_disconnect(c);
}

struct giving_up {
	pthread_t thread;
	rocmmem_client *c;
	uint32_t flags;
	int err;
};

/* give_up asks for 2 MiB with no wait of its own, while the daemon is stopped. */
static void *give_up(void *arg)
{
	struct giving_up *g = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .flags = g->flags};
	rocmmem_lease *l = NULL;

	g->err = rocmmem_lease_acquire(g->c, &req, &l);
	if (l)
		rocmmem_lease_release(l);
	return NULL;
}

/*
 * abandon_on_each stops the daemon, has each of n clients give up a request in its lane (each
 * from a thread of its own: the one reply grace of 10 s is waited out by all at once), and lets
 * the daemon go on, which then grants them all.
 */
static void abandon_on_each(struct giving_up *g, unsigned n)
{
	unsigned started = 0;

	assert_int_equal(kill(harness_group.pid, SIGSTOP), 0);
	while (started < n && pthread_create(&g[started].thread, NULL, give_up, &g[started]) == 0)
		started++;
	for (unsigned i = 0; i < started; i++)
		pthread_join(g[i].thread, NULL);
	assert_int_equal(kill(harness_group.pid, SIGCONT), 0);
	assert_int_equal(started, n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(g[i].err, -ETIMEDOUT);
	assert_true(harness_wait_totals(&harness_group, n * 2 * MiB, n, HARNESS_WAIT_MS) >= 0);
}

/* readable says whether c's event fd is readable within ms. */
static bool readable(rocmmem_client *c, int ms)
{
	struct pollfd pfd = {.fd = rocmmem_event_fd(c), .events = POLLIN};
	int n = poll(&pfd, 1, ms);

	assert_true(n >= 0);
	return n > 0;
}

/*
 * A late answer is taken as soon as the library next touches the connection, not only at its
 * next lane call. Three clients give up a request during one stop of the daemon: the first two
 * are answered in the page (nothing becomes readable on their event fds), and a status request
 * (on the socket) gives the first one's late grant back, rocmmem_dispatch with nothing to read
 * the second's. The third's grant carries a descriptor (an unmapped lease's own memfd), so it is
 * answered on the socket (LANE_ON_SOCKET): its event fd becomes readable and dispatching gives
 * it back.
 */
static void test_late_answers_taken_without_a_lane_call(void **state)
{
	struct giving_up g[3] = {{.c = harness_connect(&harness_group, "test_lane-late-status")},
				 {.c = harness_connect(&harness_group, "test_lane-late-dispatch")},
				 {.c = harness_connect(&harness_group, "test_lane-late-socket"),
				  .flags = ROCMMEM_LEASE_NOMAP}};
	rocmmem_status *st = NULL;
	long end;

	(void)state;
	for (unsigned i = 0; i < 3; i++)
		assert_non_null(g[i].c);
	cycles(g[0].c, 2); /* their arenas first: the late grants are answered in the page */
	cycles(g[1].c, 2);
	abandon_on_each(g, 3);
	/* The third's answer came on the socket: its event fd says so, with no call made. */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (!readable(g[2].c, 100))
		assert_true(harness_now_ms() < end);
	assert_false(readable(g[0].c, 0));
	assert_false(readable(g[1].c, 0));
	assert_int_equal(rocmmem_status_get(g[0].c, &st), 0);
	rocmmem_status_free(st);
	assert_true(harness_wait_totals(&harness_group, 4 * MiB, 2, HARNESS_WAIT_MS) >= 0);
	assert_true(rocmmem_dispatch(g[1].c) >= 0);
	assert_true(harness_wait_totals(&harness_group, 2 * MiB, 1, HARNESS_WAIT_MS) >= 0);
	assert_true(rocmmem_dispatch(g[2].c) >= 0);
	assert_true(harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0);
	for (unsigned i = 0; i < 3; i++)
		rocmmem_disconnect(g[i].c);
}

/* own_fds counts this process's open descriptors. */
static int own_fds(void)
{
	return harness_fd_count(getpid());
}

/*
 * After restarts of the daemon (killed: no goodbye) the library reconnects, re-declares the
 * lease it holds, and each new connection has a lane of its own; the lanes of the connections
 * before are let go (the process's descriptors do not grow with restarts).
 */
static void test_lane_after_restart(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane-restart");
	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "1", NULL};
	rocmmem_lease *keep;
	volatile uint8_t *p;
	int fds = -1;

	(void)state;
	assert_non_null(c);
	cycles(c, 3);
	keep = acquire(c, 2 * MiB, 0); /* something to come back for */
	p = rocmmem_lease_ptr(keep);
	p[100] = 42;
	for (int round = 0; round < 3; round++) {
		uint64_t before;

		kill(harness_group.pid, SIGKILL);
		assert_int_equal(waitpid(harness_group.pid, NULL, 0), harness_group.pid);
		harness_group.pid = 0;
		assert_int_equal(harness_daemon_restart(&harness_group, args), 0);
		before = lane_requests();
		/* The first call finds the daemon gone, reconnects, and goes on. */
		cycles(c, 20);
		assert_true(lane_requests() - before >= 2 * 20 - 1);
		if (fds < 0)
			fds = own_fds();
		assert_int_equal(own_fds(), fds);
	}
	assert_int_equal(p[100], 42);
	assert_int_equal(rocmmem_lease_revoked(keep), 0);
	assert_int_equal(rocmmem_lease_release(keep), 0);
	rocmmem_disconnect(c);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * A process signalled often (a timer every 20 ms, no SA_RESTART) still gets its answer or its
 * timeout on time: an interrupted wait goes on for what is left, not from the beginning. On
 * the socket (ROCMMEM_LANE=0), with the daemon stopped: the call gives up at its reply wait
 * (10 s) instead of never.
 */
static void test_signals_do_not_stretch_a_wait(void **state)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	struct itimerval every = {.it_interval = {.tv_usec = 20000},
				  .it_value = {.tv_usec = 20000}};
	struct itimerval off = {0};
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	long start, took;
	int err;

	(void)state;
	setenv("ROCMMEM_LANE", "0", 1);
	c = harness_connect(&harness_group, "test_lane-signals");
	unsetenv("ROCMMEM_LANE");
	assert_non_null(c);
	cycles(c, 1);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	assert_int_equal(kill(harness_group.pid, SIGSTOP), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
	start = harness_now_ms();
	err = rocmmem_lease_acquire(c, &req, &l);
	took = harness_now_ms() - start;
	setitimer(ITIMER_REAL, &off, NULL);
	kill(harness_group.pid, SIGCONT);
	sigaction(SIGALRM, &old, NULL);
	assert_int_equal(err, -ETIMEDOUT);
	/* The reply wait is 10 s; woken 50 times a second, it must not be more than doubled. */
	assert_true(took < 20000);
	rocmmem_disconnect(c); /* the late grant goes with the connection */
}

#define THREADS 4
#define THREAD_CYCLES 300

struct worker {
	pthread_t thread;
	rocmmem_client *c;
	unsigned id;
	int failed; /* 0, or the step that failed */
};

/* worker_loop leases, writes its own pattern, checks it, releases: on a shared client. */
static void *worker_loop(void *arg)
{
	struct worker *w = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .timeout_ms = HARNESS_WAIT_MS};

	for (unsigned i = 0; i < THREAD_CYCLES && !w->failed; i++) {
		rocmmem_lease *l = NULL;
		volatile uint32_t *p;
		uint32_t v = w->id << 24 | i;

		if (rocmmem_lease_acquire(w->c, &req, &l) != 0) {
			w->failed = 1;
			break;
		}
		p = rocmmem_lease_ptr(l);
		p[0] = v;
		p[(2 * MiB) / sizeof(uint32_t) - 1] = v;
		sched_yield(); /* let the others in while it holds the lease */
		if (p[0] != v || p[(2 * MiB) / sizeof(uint32_t) - 1] != v)
			w->failed = 2;
		if (rocmmem_lease_release(l) != 0)
			w->failed = 3;
	}
	return NULL;
}

/*
 * Threads share one connection: one request at a time goes through the lane, the others
 * through the socket meanwhile; every lease is its own memory, and all of it comes back.
 */
static void test_threads_share_the_lane(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "test_lane-threads");
	struct worker w[THREADS];
	uint64_t before;

	(void)state;
	assert_non_null(c);
	cycles(c, 1);
	before = lane_requests();
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.c = c, .id = i};
		assert_int_equal(pthread_create(&w[i].thread, NULL, worker_loop, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(w[i].thread, NULL), 0);
		assert_int_equal(w[i].failed, 0);
	}
	assert_true(lane_requests() > before);
	rocmmem_disconnect(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_requests_go_through_the_lane, harness_case_idle),
	    cmocka_unit_test_teardown(test_lane_turned_off, harness_case_idle),
	    cmocka_unit_test_teardown(test_reply_after_earlier_event, harness_case_idle),
	    cmocka_unit_test_teardown(test_waiting_request_answered_on_socket, harness_case_idle),
	    cmocka_unit_test_teardown(test_abandoned_request_undone, harness_case_idle),
	    cmocka_unit_test_teardown(test_late_answers_taken_without_a_lane_call,
				      harness_case_idle),
	    cmocka_unit_test_teardown(test_lane_after_restart, harness_case_idle),
	    cmocka_unit_test_teardown(test_threads_share_the_lane, harness_case_idle),
	    cmocka_unit_test_teardown(test_signals_do_not_stretch_a_wait, harness_case_idle),
	};

	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "1", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
