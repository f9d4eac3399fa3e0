/* SPDX-License-Identifier: MIT */
/*
 * descriptors.c: owns the daemon's file descriptors as a shared resource (issue 13, F3): a
 * daemon under RLIMIT_NOFILE 160 (prlimit), one client taking host leases until refused with
 * -EMFILE and the numbers, clients of the same and another uid still served, and a flood of
 * connections refused with the spare descriptor, its log line rate-limited.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "wire.h"

#define NOFILE 160
#define NOFILE_TEXT "160"
#define NOBODY 65534

/* count_in_log counts the lines of the daemon's log that contain text. */
static unsigned count_in_log(const char *text)
{
	FILE *f = fopen(hostile.d.log, "re");
	char line[4096];
	unsigned n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

/* acquire_reply sends a 2 MiB acquire (timeout 0) and returns the reply; a granted fd is
 * closed (the daemon keeps its own). */
static Rocmmem__Wire__Reply *acquire_reply(int fd, uint64_t id, Rocmmem__Wire__ServerMessage **m)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, "fd-hog"), 0);
	*m = hostile_recv_reply(fd, 5000, fds, &nfds);
	wire_close_fds(fds, nfds);
	assert_int_equal((*m)->reply->id, id);
	return (*m)->reply;
}

/* take_until_refused acquires host leases on fd until one is refused; returns how many. */
static unsigned take_until_refused(int fd, uint64_t *id, char *message, size_t len)
{
	unsigned held = 0;

	for (;;) {
		Rocmmem__Wire__ServerMessage *m;
		Rocmmem__Wire__Reply *r = acquire_reply(fd, (*id)++, &m);

		if (r->has_error && r->error != 0) {
			if (r->error != -EMFILE)
				fail_msg("lease %u refused with %d (%s): %s, not EMFILE", held + 1,
					 r->error, strerror(-r->error), r->message);
			snprintf(message, len, "%s", r->message);
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			return held;
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		held++;
		if (held > NOFILE)
			fail_msg("%u host leases granted under a limit of %d descriptors", held,
				 NOFILE);
	}
}

/* Exit codes of the uid 65534 child, one per step. */
enum { NOBODY_OK, NOBODY_SETUID = 10, NOBODY_CONNECT, NOBODY_HELLO, NOBODY_STATUS, NOBODY_LEASE };

/* nobody_served: as uid 65534, connect, say hello, read a status, get a host lease. */
static int nobody_served(void)
{
	Rocmmem__Wire__ServerMessage *m = NULL;
	int fd, lease_fd = -1;

	if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) != 0)
		return NOBODY_SETUID;
	fd = harness_raw_connect(&hostile.d);
	if (fd < 0)
		return NOBODY_CONNECT;
	if (harness_raw_hello(fd, 1, "other-uid") != 0)
		return NOBODY_HELLO;
	if (hostile_send_status(fd, 2) != 0 ||
	    hostile_recv(fd, 5000, &m, NULL, NULL) != HOSTILE_RX_MSG ||
	    m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY || m->reply->error != 0)
		return NOBODY_STATUS;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	m = harness_raw_acquire(fd, 3, 0, 2 * MIB, 0, &lease_fd);
	if (!m || m->reply->error != 0 || lease_fd < 0)
		return NOBODY_LEASE;
	return NOBODY_OK;
}

/*
 * F3 as found: one client took 284 host leases under a limit of 300 descriptors and nobody of
 * any uid could connect any more (the same happens here under 160). Now its connection is refused
 * at its share with -EMFILE and the numbers, another connection of its uid gets no more, and the
 * daemon still serves both and another uid, which may take a lease of its own.
 */
static void test_leases_capped(void **state)
{
	int hog = hostile_greeted("hog"), same = hostile_greeted("same-uid");
	unsigned held, hits_before = (unsigned)hostile_limit_hits("descriptors", NULL);
	uint64_t id = 2, limit = 0;
	char message[512];
	pid_t pid;
	int status;

	(void)state;
	held = take_until_refused(hog, &id, message, sizeof(message));
	print_message("a connection got %u host leases under %d descriptors, then: %s\n", held,
		      NOFILE, message);
	assert_true(held >= 8 && held < NOFILE / 2);
	{
		char want[128];

		snprintf(want, sizeof(want), "this connection holds %u host lease(s)", held);
		assert_non_null(strstr(message, want));
		snprintf(want, sizeof(want), "%u per connection and per uid", held);
		assert_non_null(strstr(message, want));
	}
	assert_non_null(strstr(message, "descriptor limit of " NOFILE_TEXT));
	assert_non_null(strstr(message, "LimitNOFILE="));
	/* The same uid on another connection: served, but no lease beyond the uid's share. */
	hostile_expect_serving(same, 2);
	assert_int_equal(take_until_refused(same, &id, message, sizeof(message)), 0);
	assert_non_null(strstr(message, "uid 0 holds"));
	assert_non_null(strstr(message, "in 2 connection(s)"));
	hostile_expect_serving(hog, id++);
	/* Another uid: connects, reads a status and gets a lease of its own. */
	assert_int_equal(chmod(hostile.d.dir, 0711), 0);
	assert_int_equal(chmod(hostile.d.sock, 0666), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(nobody_served());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(chmod(hostile.d.sock, 0600), 0);
	assert_int_equal(chmod(hostile.d.dir, 0700), 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != NOBODY_OK)
		fail_msg("the uid 65534 client failed at step %d",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	assert_int_equal(hostile_limit_hits("descriptors", &limit), hits_before + 2);
	assert_int_equal(limit, NOFILE);
	/* Its leases go with its connection, and every share is whole again: the same uid's
	 * other connection now gets exactly as many. */
	close(hog);
	hostile_assert_healthy_with(0, 0, 1);
	assert_int_equal(take_until_refused(same, &id, message, sizeof(message)), held);
	assert_non_null(strstr(message, "this connection holds"));
	close(same);
	hostile_assert_healthy();
}

/*
 * A flood of connections until the daemon has no descriptor left: each one beyond is taken
 * with the spare descriptor and told why (-EMFILE), the accept failure is logged once for the
 * lot (never "pausing"), and once they are gone everyone is served again.
 */
static void test_connection_flood(void **state)
{
	enum { MAX_OPEN = 400, BEYOND = 60 };
	int fds[MAX_OPEN + BEYOND];
	unsigned n = 0, refused = 0, logged_before = count_in_log("Could not accept a connection");
	uint64_t hits_before = hostile_limit_hits("descriptors", NULL);

	(void)state;
	while (n < MAX_OPEN + BEYOND && refused < BEYOND) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx;

		fds[n] = hostile_connect();
		/* Accepted connections hear nothing before hello; refused ones are told why. */
		rx = hostile_recv(fds[n], refused ? 2000 : 30, &m, NULL, NULL);
		if (rx == HOSTILE_RX_MSG) {
			assert_int_equal(m->kind_case, ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY);
			assert_int_equal(m->reply->error, -EMFILE);
			assert_non_null(strstr(m->reply->message, "no file descriptor left"));
			assert_non_null(strstr(m->reply->message, "its limit is " NOFILE_TEXT));
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			refused++;
		} else if (refused) {
			fail_msg("connection %u after the first refusal was not refused (%d)", n,
				 (int)rx);
		}
		n++;
	}
	print_message("%u connections, the last %u refused with the spare descriptor\n", n,
		      refused);
	assert_int_equal(refused, BEYOND);
	assert_true(n - refused > 50);
	/* One line for all of them (the test takes well under the 10 s between lines). */
	assert_int_equal(count_in_log("Could not accept a connection") - logged_before, 1);
	assert_int_equal(count_in_log("pausing"), 0);
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	/* The daemon sees them go as its loop gets to them: only then has it fds to spare. */
	{
		long end = harness_now_ms() + 5000;

		while (harness_fd_count(hostile.d.pid) > hostile.fd_baseline &&
		       harness_now_ms() < end)
			hostile_sleep_ms(10);
	}
	assert_int_equal(hostile_limit_hits("descriptors", NULL), hits_before + BEYOND);
	hostile_assert_healthy();
}

/*
 * descriptors_setup starts the daemon under the low descriptor limit and measures its fds: in
 * each case's own process (runner.c), so that each case has a daemon of its own.
 */
static int descriptors_setup(void **state)
{
	static const char *const wrapper[] = {"prlimit", "--nofile=" NOFILE_TEXT ":" NOFILE_TEXT,
					      "--", NULL};
	static const char *const args[] = {"--budget", "64M", "--handshake-timeout", "120", NULL};
	const struct harness_exec how = {.wrapper = wrapper};
	int fd;

	(void)state;
	if (harness_daemon_dir(&hostile.d, "rocmmem-fds") != 0 ||
	    harness_daemon_spawn(&hostile.d, args, &how, O_TRUNC) != 0) {
		fprintf(stderr, "could not start rocmmemd under prlimit\n");
		return -1;
	}
	hostile.fd_baseline = harness_fd_count_settled(hostile.d.pid);
	fd = harness_raw_connect(&hostile.d);
	if (fd < 0 || harness_raw_hello(fd, 1, "fd-probe") != 0) {
		harness_daemon_stop(&hostile.d);
		return -1;
	}
	hostile.fds_per_connection = harness_fd_count_settled(hostile.d.pid) - hostile.fd_baseline;
	close(fd);
	harness_fd_count_settled(hostile.d.pid);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_leases_capped),
	    cmocka_unit_test(test_connection_flood),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		fprintf(stderr, "hostile_descriptors: needs root (a client of another uid)\n");
		return 77;
	}
	rc = cmocka_run_group_tests(tests, descriptors_setup, hostile_group_teardown);
	return hostile_run_result(rc);
}
