/* SPDX-License-Identifier: MIT */
/* test_daemon_lifecycle.c: daemon lifecycle seen from clients: start-up, large status, shutdown. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define MiB ((uint64_t)1 << 20)

struct events_seen {
	int shutdown;
	int disconnected;
	char reason[256];
};

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct events_seen *seen = userdata;

	(void)c;
	if (ev->type == ROCMMEM_EVENT_SHUTDOWN) {
		seen->shutdown++;
		snprintf(seen->reason, sizeof(seen->reason), "%s", ev->reason);
	} else if (ev->type == ROCMMEM_EVENT_DISCONNECTED) {
		seen->disconnected++;
	}
}

static void test_shutdown_tells_clients(void **state)
{
	/* The client holds a lease and reads nothing: the daemon drains it for 0.5 s. */
	static const char *const args[] = {"--budget", "64M", "--shutdown-timeout", "0.5", NULL};
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 8 * MiB};
	struct events_seen seen = {0};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_lease *l = NULL, *late = NULL;
	struct pollfd p;
	struct stat st;
	int status = 0, rc;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "listener");
	assert_int_equal(rocmmem_set_event_callback(c, on_event, &seen), 0);
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
	assert_int_equal(rocmmem_dispatch(c), 0);
	kill(d.pid, SIGTERM);
	assert_int_equal(waitpid(d.pid, &status, 0), d.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	d.pid = 0;
	/* The socket is gone, the event fd wakes up, and the reason arrives before the end. */
	assert_int_equal(stat(d.sock, &st), -1);
	p.fd = rocmmem_event_fd(c);
	p.events = POLLIN;
	assert_int_equal(poll(&p, 1, 2000), 1);
	rc = rocmmem_dispatch(c);
	assert_true(rc >= 2);
	assert_int_equal(seen.shutdown, 1);
	assert_non_null(strstr(seen.reason, "SIGTERM"));
	assert_int_equal(seen.disconnected, 1);
	assert_int_equal(rocmmem_dispatch(c), -ECONNRESET);
	/* Requests fail cleanly now. The daemon took the lease back as it stopped: it is
	 * revoked, and releasing it frees it locally without asking anyone. */
	assert_int_equal(rocmmem_lease_acquire(c, &req, &late) < 0, 1);
	assert_null(late);
	assert_int_equal(rocmmem_lease_revoked(l), 1);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), -1); /* already gone: nothing to stop */
}

static void test_connect_waits_for_a_starting_daemon(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct daemon_proc d;
	rocmmem_client *c = NULL;
	char path[128];
	long start;
	pid_t starter;

	(void)state;
	/* Find a free socket path by starting and stopping a daemon once. */
	assert_int_equal(harness_daemon_start(&d, args), 0);
	snprintf(path, sizeof(path), "%s", d.sock);
	kill(d.pid, SIGTERM);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	start = harness_now_ms();
	assert_int_equal(rocmmem_connect(path, "early", 0, &c), -ENOENT);
	assert_true(harness_now_ms() - start < 1000);
	assert_non_null(strstr(rocmmem_last_error(), "no rocmmemd is listening"));

	starter = fork();
	assert_true(starter >= 0);
	if (starter == 0) {
		usleep(300000);
		execl(ROCMMEMD_BIN, ROCMMEMD_BIN, "--socket", path, "--budget", "64M",
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(rocmmem_connect(path, "patient", 10000, &c), 0);
	assert_true(harness_now_ms() - start >= 250);
	rocmmem_disconnect(c);
	kill(starter, SIGTERM);
	waitpid(starter, NULL, 0);
	harness_daemon_stop(&d);
}

static void test_large_status_is_streamed(void **state)
{
	static const char *const args[] = {"--budget", "8G", NULL};
	enum { N = 1500 };
	static rocmmem_lease *leases[N];
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .flags = ROCMMEM_LEASE_NOMAP};
	struct rlimit rl;
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_status *st = NULL;
	uint64_t last = 0;

	(void)state;
	/* Each host lease keeps an fd here: lift the soft limit like the daemon does. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < N + 64)
		skip();
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (harness_daemon_start(&d, args) != 0)
		skip(); /* less than 8 GiB of memory available: the budget would be refused */
	c = harness_connect(&d, "hoarder");
	for (int i = 0; i < N; i++)
		assert_int_equal(rocmmem_lease_acquire(c, &req, &leases[i]), 0);
	/* N leases need several reply parts (256 items each): all must arrive, in id order. */
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_lease_count(st), N);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, N * 2 * MiB);
	assert_int_equal(rocmmem_status_device_count(st), 1);
	for (size_t i = 0; i < N; i++) {
		const struct rocmmem_lease_info *li = rocmmem_status_lease(st, i);

		assert_true(li->id > last);
		last = li->id;
	}
	assert_null(rocmmem_status_lease(st, N));
	rocmmem_status_free(st);
	for (int i = 0; i < N; i += 2)
		assert_int_equal(rocmmem_lease_release(leases[i]), 0);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_lease_count(st), N / 2);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

static void test_fd_count_returns_to_baseline(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	rocmmem_client *clients[20];
	rocmmem_status *st = NULL;
	struct daemon_proc d;
	int base, during, pidfds = 0;
	long end;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	base = harness_fd_count_settled(d.pid);
	assert_true(base > 0);
	for (int i = 0; i < 20; i++) {
		rocmmem_lease *l = NULL;

		clients[i] = harness_connect(&d, "fd");
		assert_int_equal(rocmmem_lease_acquire(clients[i], &req, &l), 0);
	}
	/* Per connection: its socket, its arena (the host leases), its request lane's doorbell;
	 * and one per pidfd the daemon holds. */
	assert_int_equal(rocmmem_status_get(clients[0], &st), 0);
	assert_int_equal(rocmmem_status_client_count(st), 20);
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		pidfds += rocmmem_status_client(st, i)->pidfd ? 1 : 0;
	rocmmem_status_free(st);
	during = harness_fd_count(d.pid);
	assert_int_equal(during, base + 60 + pidfds);
	for (int i = 0; i < 20; i++)
		rocmmem_disconnect(clients[i]);
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (harness_fd_count(d.pid) != base && harness_now_ms() < end)
		usleep(2000);
	assert_int_equal(harness_fd_count(d.pid), base);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shutdown_tells_clients),
	    cmocka_unit_test(test_connect_waits_for_a_starting_daemon),
	    cmocka_unit_test(test_large_status_is_streamed),
	    cmocka_unit_test(test_fd_count_returns_to_baseline),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
