/* SPDX-License-Identifier: MIT */
/* fault.c: the fault tests' fixture: daemons under wrappers, baselines, books and a PRNG. */
#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

void fault_sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

int64_t fault_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int fault_daemon_start(struct daemon_proc *d, const char *const *wrapper, const char *const *env,
		       const char *const *args, long timeout_ms)
{
	struct harness_exec how = {.wrapper = wrapper, .env = env, .timeout_ms = timeout_ms};
	int rc;

	if (harness_daemon_dir(d, "rocmmem-fault") != 0)
		return -1;
	rc = harness_daemon_spawn(d, args, &how, O_TRUNC);
	if (rc == 0)
		return 0;
	/* -2: it ran and did not come up: its log says why. */
	if (getenv("ROCMMEM_TEST_KEEP_LOGS") || rc == -2) {
		char cmd[PATH_MAX];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not print %s)\n", d->log);
	}
	harness_remove_dir(d->dir);
	return -1;
}

int fault_daemon_stop(struct daemon_proc *d, long timeout_ms, bool keep_dir)
{
	int rc = d->pid > 0 ? harness_daemon_halt(d, timeout_ms) : 0;

	if (getenv("ROCMMEM_TEST_KEEP_LOGS") || rc != 0) {
		char cmd[PATH_MAX];

		fprintf(stderr, "rocmmemd exit status %d; its log (the last 60 lines):\n", rc);
		snprintf(cmd, sizeof(cmd), "tail -n 60 %s >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not print %s)\n", d->log);
	}
	if (!keep_dir)
		harness_remove_dir(d->dir);
	return rc;
}

int fault_daemon_wait_exit(struct daemon_proc *d, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t p = waitpid(d->pid, &status, WNOHANG);

		if (p == d->pid) {
			d->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		if (p < 0 || harness_now_ms() >= end)
			return -2;
		fault_sleep_us(10000);
	}
}

long fault_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int fault_books(const struct daemon_proc *d, struct fault_books *out)
{
	rocmmem_client *c = NULL;
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *dev;
	int err;

	memset(out, 0, sizeof(*out));
	err = rocmmem_connect(d->sock, "fault-books", HARNESS_WAIT_MS, &c);
	if (err)
		return err;
	err = rocmmem_status_get(c, &st);
	if (err) {
		rocmmem_disconnect(c);
		return err;
	}
	dev = rocmmem_status_device(st, 0);
	if (dev) {
		out->budget = dev->budget_bytes;
		out->leased = dev->leased_bytes;
		out->reserved = dev->reserved_bytes;
		out->free_bytes = dev->free_bytes;
		out->device_leases = dev->leases;
		out->device_waiters = dev->waiters;
	}
	out->clients = rocmmem_status_client_count(st) - 1;
	out->leases = rocmmem_status_lease_count(st);
	for (size_t i = 0; i < out->leases; i++)
		out->lease_sum += rocmmem_status_lease(st, i)->bytes;
	out->models = rocmmem_status_model_count(st);
	out->queue = rocmmem_status_waiter_count(st);
	out->failures = rocmmem_status_counters(st)->failures;
	out->revocations = rocmmem_status_counters(st)->revocations;
	out->heap = rocmmem_status_daemon(st)->heap_bytes;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return 0;
}

static bool books_idle(const struct fault_books *b, size_t clients)
{
	return b->leased == 0 && b->reserved == 0 && b->free_bytes == b->budget &&
	       b->device_leases == 0 && b->device_waiters == 0 && b->clients == clients &&
	       b->leases == 0 && b->models == 0 && b->queue == 0 && b->lease_sum == 0;
}

void fault_wait_idle(const struct daemon_proc *d, long timeout_ms, const char *what)
{
	fault_wait_books(d, 0, timeout_ms, what);
}

void fault_wait_books(const struct daemon_proc *d, size_t clients, long timeout_ms,
		      const char *what)
{
	long end = harness_now_ms() + timeout_ms;
	struct fault_books b;
	int err;

	for (;;) {
		err = fault_books(d, &b);
		if (err == 0 && books_idle(&b, clients))
			return;
		if (harness_now_ms() > end)
			break;
		fault_sleep_us(5000);
	}
	if (err)
		fail_msg("%s: no status from the daemon: %s", what, rocmmem_strerror(err));
	fail_msg("%s: the books are not empty: leased %" PRIu64 ", reserved %" PRIu64
		 ", free %" PRIu64 " of %" PRIu64 ", %" PRIu64 " leases on the device, %zu in "
		 "the table (%" PRIu64
		 " bytes), %zu clients (want %zu), %zu models, %zu queued (%u "
		 "on the device)",
		 what, b.leased, b.reserved, b.free_bytes, b.budget, b.device_leases, b.leases,
		 b.lease_sum, b.clients, clients, b.models, b.queue, b.device_waiters);
}

void fault_baseline_take(const struct daemon_proc *d, struct fault_baseline *b)
{
	struct fault_books books;

	fault_wait_idle(d, HARNESS_WAIT_MS, "before the baseline");
	assert_int_equal(fault_books(d, &books), 0);
	b->budget = books.budget;
	b->fds = harness_fd_count_settled(d->pid);
	b->rss_kib = fault_rss_kib(d->pid);
	assert_int_equal(fault_books(d, &books), 0);
	b->heap = books.heap;
	assert_true(b->fds > 0);
	assert_true(b->rss_kib > 0);
}

/* whole_budget has a well-behaved client take the whole budget at once and touch it. */
static void whole_budget(const struct daemon_proc *d, uint64_t budget, const char *what)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = budget, .timeout_ms = 0, .tag = "whole"};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	unsigned char *p;
	int err = rocmmem_connect(d->sock, "well-behaved", HARNESS_WAIT_MS, &c);

	if (err)
		fail_msg("%s: a well-behaved client cannot connect: %s", what,
			 rocmmem_strerror(err));
	err = rocmmem_lease_acquire(c, &req, &l);
	if (err)
		fail_msg("%s: a well-behaved client does not get the whole budget: %s (%s)", what,
			 rocmmem_strerror(err), rocmmem_last_error());
	assert_int_equal(rocmmem_lease_size(l), budget);
	p = rocmmem_lease_ptr(l);
	assert_non_null(p);
	p[0] = 1;
	p[budget - 1] = 2;
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
}

void fault_assert_baseline(struct daemon_proc *d, const struct fault_baseline *b,
			   int64_t heap_slack, const char *what)
{
	struct fault_books books;
	long end, rss;
	int fds = -1;

	if (!harness_daemon_alive(d))
		fail_msg("%s: the daemon is no longer running", what);
	fault_wait_idle(d, HARNESS_WAIT_MS, what);
	whole_budget(d, b->budget, what);
	fault_wait_idle(d, HARNESS_WAIT_MS, what);
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (harness_now_ms() < end) {
		fds = harness_fd_count(d->pid);
		if (fds == b->fds)
			break;
		fault_sleep_us(10000);
	}
	if (fds != b->fds) {
		harness_print_fds(d->pid);
		fail_msg("%s: the daemon has %d fds open, its baseline is %d", what, fds, b->fds);
	}
	rss = fault_rss_kib(d->pid);
	assert_int_equal(fault_books(d, &books), 0);
	print_message("%s: books empty, %d fds (baseline %d), heap in use %" PRIu64 " bytes "
		      "(baseline %" PRIu64 "%s), RSS %ld KiB (baseline %ld KiB, not judged)\n",
		      what, fds, b->fds, books.heap, b->heap,
		      b->heap && books.heap ? "" : ": unknown, not judged", rss, b->rss_kib);
	if (b->heap && books.heap && heap_slack >= 0 && books.heap > b->heap + (uint64_t)heap_slack)
		fail_msg("%s: the daemon's heap holds %" PRIu64
			 " bytes, more than its baseline %" PRIu64 " + %" PRId64,
			 what, books.heap, b->heap, heap_slack);
	if (!harness_daemon_alive(d))
		fail_msg("%s: the daemon is no longer running", what);
}

uint64_t fault_seed(const char *test)
{
	const char *env = getenv("ROCMMEM_TEST_SEED");
	uint64_t seed;

	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
	}
	printf("%s: seed %" PRIu64 " (ROCMMEM_TEST_SEED=%" PRIu64 " repeats this run)\n", test,
	       seed, seed);
	fflush(stdout);
	return seed;
}

uint64_t fault_next(struct fault_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t fault_below(struct fault_rng *r, uint64_t n)
{
	return n ? fault_next(r) % n : 0;
}

long fault_iterations(int argc, char **argv, long dflt)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--iterations") == 0)
			return strtol(argv[i + 1], NULL, 10);
	return dflt;
}
