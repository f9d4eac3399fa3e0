/* SPDX-License-Identifier: MIT */
/*
 * memfd.c: the host backend's system calls made to fail inside a real rocmmemd (the
 * librocmmem_failinject.so preload): memfd_create, ftruncate and F_ADD_SEALS one at a time,
 * for a request granted at once and for one granted after waiting; the hole punch at release;
 * then all of them at random under load. Each failure reaches its client as a negative errno
 * with a message naming the call, leaves nothing leased and no fd open, is counted, and the
 * next request succeeds once failures stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fault.h"

#define BUDGET (64 * MIB)

static struct daemon_proc daemon_;
static struct fault_baseline baseline;
static char fault_dir[64], fault_file[128];
static uint64_t seed;

/* set_faults makes spec the failures in force in the daemon from its next call on. */
static void set_faults(const char *spec)
{
	static unsigned generation;
	char tmp[160];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", fault_file);
	f = fopen(tmp, "w");
	assert_non_null(f);
	/* The generation makes the text new even when spec is the same: counts start over. */
	fprintf(f, "# %u\n%s\n", ++generation, spec);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, fault_file), 0);
}

static int setup(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	static char preload[PATH_MAX + 512], file_env[160];
	const char *env[] = {preload, file_env, NULL};

	(void)state;
	/* The per-lease path's calls, one memfd per lease: this client asks for no arena (whose
	 * memfd, made once per connection, would take the first failure only). */
	setenv("ROCMMEM_HOST_ARENA", "0", 1);
	seed = fault_seed("fault_memfd");
	snprintf(fault_dir, sizeof(fault_dir), "/tmp/rocmmem-failinject-XXXXXX");
	if (!mkdtemp(fault_dir))
		return -1;
	snprintf(fault_file, sizeof(fault_file), "%s/faults", fault_dir);
	snprintf(file_env, sizeof(file_env), "ROCMMEM_FAILINJECT_FILE=%s", fault_file);
	/* A sanitized daemon needs its sanitizer runtimes first in the preload list. */
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s%s%s", FAULT_SANITIZER_PRELOAD,
		 FAULT_SANITIZER_PRELOAD[0] ? ":" : "", FAILINJECT_PATH);
	return fault_daemon_start(&daemon_, NULL, env, args, HARNESS_WAIT_MS);
}

static int teardown(void **state)
{
	int rc;

	(void)state;
	rc = fault_daemon_stop(&daemon_, HARNESS_WAIT_MS, false);
	unlink(fault_file);
	rmdir(fault_dir);
	return rc == 0 ? 0 : -1;
}

/* One failure made to happen, and what its client must be told. */
struct call_fault {
	const char *spec;
	int err;
	const char *call; /* in the message */
};

static const struct call_fault call_faults[] = {
    {"memfd_create=1:EMFILE", -EMFILE, "memfd_create"},
    {"memfd_create=1:ENFILE", -ENFILE, "memfd_create"},
    {"memfd_create=1:ENOMEM", -ENOMEM, "memfd_create"},
    {"ftruncate=1:ENOSPC", -ENOSPC, "sizing and sealing a memfd"},
    {"ftruncate=1:EFBIG", -EFBIG, "sizing and sealing a memfd"},
    {"add_seals=1:EPERM", -EPERM, "sizing and sealing a memfd"},
    {"add_seals=1:EBUSY", -EBUSY, "sizing and sealing a memfd"},
};

/* expect_failure checks a refusal: err, and a message naming the call and the errno. */
static void expect_failure(int got, const char *message, const struct call_fault *f)
{
	if (got != f->err)
		fail_msg("with %s the acquire returned %d (%s), want %d: %s", f->spec, got,
			 rocmmem_strerror(got), f->err, message);
	if (!strstr(message, f->call) || !strstr(message, strerror(-f->err)))
		fail_msg("with %s the message does not name '%s' and '%s': '%s'", f->spec, f->call,
			 strerror(-f->err), message);
}

/*
 * expect_clean checks the daemon is back where it was, but for `clients` connections holding
 * nothing (open_fds: its fd count with them, as measured before), with `failures` failed
 * allocations counted in all.
 */
static void expect_clean(size_t clients, int open_fds, uint64_t failures, const char *what)
{
	struct fault_books b;
	int fds;

	fault_wait_books(&daemon_, clients, HARNESS_WAIT_MS, what);
	assert_int_equal(fault_books(&daemon_, &b), 0);
	if (b.failures != failures)
		fail_msg("%s: the daemon counts %" PRIu64 " failed allocations, want %" PRIu64,
			 what, b.failures, failures);
	fds = harness_fd_count_settled(daemon_.pid);
	if (fds != open_fds) {
		harness_print_fds(daemon_.pid);
		fail_msg("%s: the daemon has %d fds open, want %d (with %zu connections)", what,
			 fds, open_fds, clients);
	}
}

/* acquire_ok acquires size at once, touches it and releases it. */
static void acquire_ok(rocmmem_client *c, uint64_t size, const char *what)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = 0, .tag = "after"};
	rocmmem_lease *l = NULL;
	unsigned char *p;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("%s: the next acquire failed: %s (%s)", what, rocmmem_strerror(err),
			 rocmmem_last_error());
	p = rocmmem_lease_ptr(l);
	p[0] = 1;
	p[size - 1] = 2;
	assert_int_equal(rocmmem_lease_release(l), 0);
}

/* Each call fails once, for a request granted at once: refused cleanly, then served. */
static void test_each_call_fails_once(void **state)
{
	rocmmem_client *c;
	uint64_t failures;
	struct fault_books b;
	int fds;

	(void)state;
	fault_baseline_take(&daemon_, &baseline);
	c = harness_connect(&daemon_, "victim");
	fds = harness_fd_count_settled(daemon_.pid);
	assert_int_equal(fault_books(&daemon_, &b), 0);
	failures = b.failures;
	for (size_t i = 0; i < sizeof(call_faults) / sizeof(call_faults[0]); i++) {
		const struct call_fault *f = &call_faults[i];
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 8 * MIB, .timeout_ms = 0, .tag = "x"};
		rocmmem_lease *l = NULL;
		int err;

		set_faults(f->spec);
		err = rocmmem_lease_acquire(c, &req, &l);
		expect_failure(err, rocmmem_last_error(), f);
		assert_null(l);
		/* Nothing charged, no fd kept: only the client's connection. */
		expect_clean(1, fds, ++failures, f->spec);
		acquire_ok(c, 8 * MIB, f->spec);
		acquire_ok(c, BUDGET, f->spec);
	}
	set_faults("");
	rocmmem_disconnect(c);
	fault_assert_baseline(&daemon_, &baseline, -1, "after each call failed once");
}

/* A waiter: acquires in its own thread and connection, waiting up to 10 s. */
struct waiter {
	pthread_t thread;
	rocmmem_client *c;
	uint64_t size;
	int err;
	char message[512];
	rocmmem_lease *lease;
};

static void *wait_for_memory(void *arg)
{
	struct waiter *w = arg;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = w->size,
					    .timeout_ms = HARNESS_WAIT_MS,
					    .tag = "waiter"};

	w->err = rocmmem_lease_acquire(w->c, &req, &w->lease);
	snprintf(w->message, sizeof(w->message), "%s", w->err ? rocmmem_last_error() : "");
	return NULL;
}

/* wait_queued waits until n requests wait on the device. */
static void wait_queued(uint32_t n)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct fault_books b;

	do {
		assert_int_equal(fault_books(&daemon_, &b), 0);
		if (b.device_waiters == n)
			return;
		fault_sleep_us(2000);
	} while (harness_now_ms() < end);
	fail_msg("%u requests wait, want %u", b.device_waiters, n);
}

/*
 * The allocation fails for a request that waited: it gets the call's error (not a timeout),
 * and the request queued behind it, which fits, is granted at once.
 */
static void test_fails_after_waiting(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = BUDGET, .timeout_ms = 0, .tag = "all"};
	rocmmem_client *holder;
	uint64_t failures;
	struct fault_books b;
	int fds;

	(void)state;
	fault_baseline_take(&daemon_, &baseline);
	holder = harness_connect(&daemon_, "holder");
	fds = harness_fd_count_settled(daemon_.pid);
	assert_int_equal(fault_books(&daemon_, &b), 0);
	failures = b.failures;
	for (size_t i = 0; i < sizeof(call_faults) / sizeof(call_faults[0]); i++) {
		const struct call_fault *f = &call_faults[i];
		struct waiter first = {.size = 48 * MIB}, second = {.size = 16 * MIB};
		rocmmem_lease *all = NULL;
		long t0;

		assert_int_equal(rocmmem_lease_acquire(holder, &req, &all), 0);
		first.c = harness_connect(&daemon_, "first");
		second.c = harness_connect(&daemon_, "second");
		assert_int_equal(pthread_create(&first.thread, NULL, wait_for_memory, &first), 0);
		wait_queued(1);
		assert_int_equal(pthread_create(&second.thread, NULL, wait_for_memory, &second), 0);
		wait_queued(2);
		/* The first grant's allocation fails, the second's succeeds. */
		set_faults(f->spec);
		t0 = harness_now_ms();
		assert_int_equal(rocmmem_lease_release(all), 0);
		pthread_join(first.thread, NULL);
		pthread_join(second.thread, NULL);
		expect_failure(first.err, first.message, f);
		if (second.err)
			fail_msg("with %s the request behind the failed one was refused: %s (%s)",
				 f->spec, rocmmem_strerror(second.err), second.message);
		print_message("%s: the waiter refused and the next granted in %ld ms\n", f->spec,
			      harness_now_ms() - t0);
		assert_int_equal(rocmmem_lease_release(second.lease), 0);
		rocmmem_disconnect(first.c);
		rocmmem_disconnect(second.c);
		set_faults("");
		expect_clean(1, fds, ++failures, f->spec);
	}
	rocmmem_disconnect(holder);
	fault_assert_baseline(&daemon_, &baseline, -1, "after failures of waited-for grants");
}

/* The hole punch at release fails: the lease is released all the same, its fd closed. */
static void test_punch_fails_at_release(void **state)
{
	rocmmem_client *c;
	struct fault_books b;
	uint64_t failures;

	(void)state;
	fault_baseline_take(&daemon_, &baseline);
	c = harness_connect(&daemon_, "puncher");
	assert_int_equal(fault_books(&daemon_, &b), 0);
	failures = b.failures;
	set_faults("fallocate=*:EIO");
	for (int i = 0; i < 16; i++) {
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 4 * MIB, .timeout_ms = 0};
		rocmmem_lease *l[4] = {NULL};

		for (int j = 0; j < 4; j++) {
			assert_int_equal(rocmmem_lease_acquire(c, &req, &l[j]), 0);
			((unsigned char *)rocmmem_lease_ptr(l[j]))[0] = 1;
		}
		for (int j = 0; j < 4; j++)
			assert_int_equal(rocmmem_lease_release(l[j]), 0);
	}
	/* One left held: it goes with the connection, punched or not. */
	acquire_ok(c, 8 * MIB, "punch failing");
	set_faults("");
	rocmmem_disconnect(c);
	expect_clean(0, baseline.fds, failures, "after failed hole punches");
	fault_assert_baseline(&daemon_, &baseline, -1, "after failed hole punches");
}

/* ----------------------------------------------------------------------------------------- */
/* Every call failing at random, under load */

#define CHURNERS 4
#define ATTEMPTS 150

struct churner {
	pthread_t thread;
	struct fault_rng rng;
	rocmmem_client *c;
	unsigned granted, budget_refusals, injected, bad;
	char bad_message[512];
};

/* injected_errno says whether err is one the random specification injects. */
static bool injected_errno(int err)
{
	return err == -EMFILE || err == -ENOSPC || err == -EPERM;
}

static void *churn(void *arg)
{
	struct churner *t = arg;
	rocmmem_lease *held[2] = {NULL, NULL};

	for (int i = 0; i < ATTEMPTS; i++) {
		unsigned slot = (unsigned)fault_below(&t->rng, 2);
		struct rocmmem_lease_request req = {.struct_size = sizeof(req), .tag = "random"};
		int err;

		if (held[slot]) {
			err = rocmmem_lease_release(held[slot]);
			held[slot] = NULL;
			if (err && !t->bad++)
				snprintf(t->bad_message, sizeof(t->bad_message), "release: %s",
					 rocmmem_strerror(err));
		}
		req.size = (1 + fault_below(&t->rng, 8)) * 2 * MIB;
		req.timeout_ms = fault_below(&t->rng, 2) ? 0 : (int64_t)fault_below(&t->rng, 30);
		err = rocmmem_lease_acquire(t->c, &req, &held[slot]);
		if (err == 0) {
			unsigned char *p = rocmmem_lease_ptr(held[slot]);

			p[0] = p[req.size - 1] = 1;
			t->granted++;
		} else if (err == -ENOMEM || err == -ETIMEDOUT) {
			t->budget_refusals++;
		} else if (injected_errno(err) && strstr(rocmmem_last_error(), "memfd")) {
			t->injected++;
		} else if (!t->bad++) {
			snprintf(t->bad_message, sizeof(t->bad_message), "acquire: %s (%s)",
				 rocmmem_strerror(err), rocmmem_last_error());
		}
	}
	for (int i = 0; i < 2; i++)
		rocmmem_lease_release(held[i]);
	return NULL;
}

/*
 * Four clients acquire and release while memfd_create (EMFILE), ftruncate (ENOSPC),
 * F_ADD_SEALS (EPERM) and the hole punch (EIO) each fail at random. Every refusal is one of
 * the budget's or one injected (with its message), the daemon counts exactly the injected
 * ones, the books add up in every status read meanwhile, and all is clean afterwards.
 */
static void test_random_failures(void **state)
{
	struct churner t[CHURNERS];
	unsigned injected = 0, granted = 0, refusals = 0, snapshots = 0;
	struct fault_books b0, b;
	char spec[256];
	bool running = true, joined[CHURNERS] = {false};

	(void)state;
	fault_baseline_take(&daemon_, &baseline);
	assert_int_equal(fault_books(&daemon_, &b0), 0);
	snprintf(spec, sizeof(spec),
		 "memfd_create=10%%:EMFILE ftruncate=5%%:ENOSPC add_seals=5%%:EPERM "
		 "fallocate=20%%:EIO seed=%" PRIu64,
		 seed);
	set_faults(spec);
	for (int i = 0; i < CHURNERS; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].rng.state = seed + (uint64_t)i + 1;
		t[i].c = harness_connect(&daemon_, "random");
		assert_int_equal(pthread_create(&t[i].thread, NULL, churn, &t[i]), 0);
	}
	while (running) {
		/* One part (few items): each snapshot is the daemon's state at one moment. */
		assert_int_equal(fault_books(&daemon_, &b), 0);
		if (b.lease_sum != b.leased || b.leases != b.device_leases ||
		    b.leased + b.free_bytes != b.budget)
			fail_msg("the books do not add up: %" PRIu64
				 " leased, leases sum to %" PRIu64 ", %zu leases (device %" PRIu64
				 "), free %" PRIu64,
				 b.leased, b.lease_sum, b.leases, b.device_leases, b.free_bytes);
		snapshots++;
		running = false;
		for (int i = 0; i < CHURNERS; i++) {
			joined[i] = joined[i] || pthread_tryjoin_np(t[i].thread, NULL) == 0;
			running |= !joined[i];
		}
		fault_sleep_us(2000);
	}
	for (int i = 0; i < CHURNERS; i++) {
		rocmmem_disconnect(t[i].c);
		if (t[i].bad)
			fail_msg("client %d: %u unexpected results, the first: %s", i, t[i].bad,
				 t[i].bad_message);
		injected += t[i].injected;
		granted += t[i].granted;
		refusals += t[i].budget_refusals;
	}
	set_faults("");
	print_message("%u granted, %u refused by the budget, %u failed by injection; %u status "
		      "snapshots consistent\n",
		      granted, refusals, injected, snapshots);
	/* The seeded draws make failures certain in 600 attempts, and grants too. */
	assert_true(injected > 0);
	assert_true(granted > 0);
	expect_clean(0, baseline.fds, b0.failures + injected, "after random failures");
	fault_assert_baseline(&daemon_, &baseline, -1, "after random failures");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_call_fails_once),
	    cmocka_unit_test(test_fails_after_waiting),
	    cmocka_unit_test(test_punch_fails_at_release),
	    cmocka_unit_test(test_random_failures),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
