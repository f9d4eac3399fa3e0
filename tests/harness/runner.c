/* SPDX-License-Identifier: MIT */
/* runner.c: every cmocka case of a test program in a child process of its own, under a limit. */
/*
 * Every C test program is linked with -Wl,--wrap=_cmocka_run_group_tests (rocmmem_test in
 * tests/CMakeLists.txt), so its cmocka_run_group_tests call lands here. Each case then runs in
 * a forked child, in a process group of its own, with the group's setup and teardown around
 * it: its own daemon, its own globals, its own fds. A case that fails, crashes or hangs ends
 * with its child (and whatever the child started: the whole process group is killed), and the
 * next case starts from the state main() left, as libuv's test runner does it.
 *
 * Environment:
 *   ROCMMEM_TEST_TIMEOUT  the program's own time limit in s (rocmmem_test sets CTest's
 *                         TIMEOUT): a case still running when it is nearly spent is killed
 *                         and named, rather than the whole program being killed by CTest
 *   ROCMMEM_CASE_TIMEOUT  one case's limit in s (default: what is left of the program's)
 *   ROCMMEM_TEST_SHARD    K/N: only the cases whose index is K-1 modulo N (CTest runs one
 *                         long program as N tests: rocmmem_test's SHARDS)
 *   ROCMMEM_TEST_CASE     a shell pattern (fnmatch): only the cases whose name matches
 *   ROCMMEM_TEST_INLINE   1: no children, cmocka's own loop (for a debugger)
 */
#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
				   const size_t num_tests, CMFixtureFunction group_setup,
				   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
				   const size_t num_tests, CMFixtureFunction group_setup,
				   CMFixtureFunction group_teardown);

/* How one case ended. */
enum outcome { CASE_PASSED, CASE_FAILED, CASE_SIGNALLED, CASE_TIMED_OUT, CASE_NOT_RUN };

struct verdict {
	enum outcome outcome;
	int detail; /* the exit status or the signal */
	double seconds;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* env_seconds reads a positive number of seconds from the environment, or returns 0. */
static double env_seconds(const char *name)
{
	const char *v = getenv(name);
	char *end;
	double s;

	if (!v || !*v)
		return 0;
	s = strtod(v, &end);
	return *end == '\0' && s > 0 ? s : 0;
}

/* shard reads ROCMMEM_TEST_SHARD ("K/N", 1 <= K <= N); without it the one shard is 1/1. */
static void shard(size_t *k, size_t *n)
{
	const char *v = getenv("ROCMMEM_TEST_SHARD");
	unsigned long a, b;

	*k = 0;
	*n = 1;
	if (v && sscanf(v, "%lu/%lu", &a, &b) == 2 && a >= 1 && a <= b) {
		*k = a - 1;
		*n = b;
	} else if (v && *v) {
		fprintf(stderr, "[ harness  ] ROCMMEM_TEST_SHARD=%s is not K/N: every case runs\n",
			v);
	}
}

/* selected says whether case i of the program runs in this invocation. */
static bool selected(const struct CMUnitTest *t, size_t i, size_t k, size_t n)
{
	const char *pattern = getenv("ROCMMEM_TEST_CASE");

	if (i % n != k)
		return false;
	return !pattern || !*pattern || fnmatch(pattern, t->name, 0) == 0;
}

/*
 * cmocka (1.1) prints a failed group teardown but leaves it out of its result, and group
 * teardowns are where a test daemon's exit status is judged (a clean 0 at SIGTERM; under the
 * sanitizers, no leak): the child runs the group's teardown through this, which remembers.
 */
static CMFixtureFunction child_teardown_fn;
static bool child_teardown_failed;

static int child_teardown(void **state)
{
	int rc = child_teardown_fn(state);

	child_teardown_failed |= rc != 0;
	return rc;
}

/* run_child is the child's side: one case between the group's fixtures. Never returns. */
static void run_child(const struct CMUnitTest *t, CMFixtureFunction setup,
		      CMFixtureFunction teardown)
{
	int rc;

	setpgid(0, 0);
	/* A case killed at its limit has printed what it had printed so far. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	child_teardown_fn = teardown;
	rc = __real__cmocka_run_group_tests(t->name, t, 1, setup, teardown ? child_teardown : NULL);
	if (child_teardown_failed)
		printf("[  FAILED  ] %s: the group teardown failed\n", t->name);
	/* exit, not _exit: atexit handlers stop the daemons the case started, and the
	 * sanitizers' leak check runs over the case. */
	exit(rc == 0 && !child_teardown_failed ? 0 : 1);
}

/* wait_child waits for pid until deadline (CLOCK_MONOTONIC s); false when it is still there. */
static bool wait_child(pid_t pid, double deadline, int *status)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	for (;;) {
		pid_t got = waitpid(pid, status, WNOHANG);
		double left = deadline - now_s();

		if (got == pid)
			break;
		if (got < 0 && errno != EINTR) {
			*status = 0xff00; /* not ours to wait for: a failure */
			break;
		}
		if (left <= 0) {
			if (pidfd >= 0)
				close(pidfd);
			return false;
		}
		if (pidfd >= 0) {
			struct pollfd p = {.fd = pidfd, .events = POLLIN};

			poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
		} else {
			/* Kernels before 5.3: poll the child's status. */
			struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return true;
}

/* run_case runs case t in a child until deadline and says how it ended. */
static struct verdict run_case(const struct CMUnitTest *t, CMFixtureFunction setup,
			       CMFixtureFunction teardown, double deadline)
{
	struct verdict v = {.outcome = CASE_FAILED};
	double start = now_s();
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "[ harness  ] %s: fork: %s\n", t->name, strerror(errno));
		return v;
	}
	if (pid == 0)
		run_child(t, setup, teardown);
	setpgid(pid, pid); /* also here: no window in which a kill of the group misses it */
	if (!wait_child(pid, deadline, &status)) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		v.outcome = CASE_TIMED_OUT;
	} else if (WIFSIGNALED(status)) {
		v.outcome = CASE_SIGNALLED;
		v.detail = WTERMSIG(status);
	} else {
		v.detail = WEXITSTATUS(status);
		v.outcome = v.detail == 0 ? CASE_PASSED : CASE_FAILED;
	}
	/* Whatever the case started and left behind (a daemon, a client) goes with it. */
	kill(-pid, SIGKILL);
	v.seconds = now_s() - start;
	return v;
}

/* describe writes how a case ended, for the lines after it and the summary. */
static void describe(const struct verdict *v, char *buf, size_t len)
{
	switch (v->outcome) {
	case CASE_PASSED:
		snprintf(buf, len, "passed in %.1f s", v->seconds);
		break;
	case CASE_FAILED:
		snprintf(buf, len, "failed (exit %d) after %.1f s", v->detail, v->seconds);
		break;
	case CASE_SIGNALLED:
		snprintf(buf, len, "died of signal %d (%s) after %.1f s", v->detail,
			 strsignal(v->detail), v->seconds);
		break;
	case CASE_TIMED_OUT:
		snprintf(buf, len, "TIMED OUT: killed, with its process group, after %.1f s",
			 v->seconds);
		break;
	case CASE_NOT_RUN:
		snprintf(buf, len, "not run: the program's time limit was spent");
		break;
	}
}

/* case_deadline is when case i must be over: its own limit, within what the program has left. */
static double case_deadline(double program_end)
{
	double limit = env_seconds("ROCMMEM_CASE_TIMEOUT"), start = now_s();
	double end = limit > 0 ? start + limit : program_end;

	return end < program_end ? end : program_end;
}

/* program_end is when every case must be over: CTest's limit less a margin to report in. */
static double program_end(void)
{
	double limit = env_seconds("ROCMMEM_TEST_TIMEOUT"), margin;

	if (limit <= 0)
		return 1e18;
	margin = limit / 20 < 2 ? 2 : limit / 20 > 10 ? 10 : limit / 20;
	return now_s() + limit - margin;
}

int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
				   const size_t num_tests, CMFixtureFunction group_setup,
				   CMFixtureFunction group_teardown)
{
	double end = program_end();
	size_t k, n, ran = 0, failed = 0;
	char(*why)[112] = calloc(num_tests ? num_tests : 1, sizeof(*why));

	if (getenv("ROCMMEM_TEST_INLINE") && strcmp(getenv("ROCMMEM_TEST_INLINE"), "1") == 0)
		return __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup,
						      group_teardown);
	if (!why)
		return (int)num_tests;
	shard(&k, &n);
	printf("[==========] %s: each case in a process of its own (shard %zu/%zu)\n", group_name,
	       k + 1, n);
	for (size_t i = 0; i < num_tests; i++) {
		struct verdict v = {.outcome = CASE_NOT_RUN};

		if (!selected(&tests[i], i, k, n))
			continue;
		ran++;
		if (now_s() < end)
			v = run_case(&tests[i], group_setup, group_teardown, case_deadline(end));
		describe(&v, why[i], sizeof(why[i]));
		printf("[ harness  ] %s: %s\n", tests[i].name, why[i]);
		if (v.outcome != CASE_PASSED)
			failed++;
		else
			why[i][0] = '\0';
	}
	printf("[==========] %s: %zu case(s) run, %zu passed, %zu failed\n", group_name, ran,
	       ran - failed, failed);
	if (ran == 0 && num_tests > 0) {
		/* A shard or a pattern that picks nothing is a mistake, not a pass. */
		printf(
		    "[  FAILED  ] %s: no case selected (ROCMMEM_TEST_SHARD, ROCMMEM_TEST_CASE)\n",
		    group_name);
		failed = 1;
	}
	for (size_t i = 0; i < num_tests; i++)
		if (why[i][0])
			printf("[  FAILED  ] %s: %s\n", tests[i].name, why[i]);
	fflush(stdout);
	free(why);
	return (int)failed;
}
