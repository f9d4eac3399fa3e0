/* SPDX-License-Identifier: MIT */
/* test_concurrency.c: the budget holds while many client processes acquire and release. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)
#define CLIENTS 8
#define ROUNDS 150

static struct daemon_proc daemon_;

static int setup(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--log-level", "info", NULL};

	(void)state;
	return harness_daemon_start(&daemon_, args);
}

static int teardown(void **state)
{
	(void)state;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

/* churn acquires random sizes (waiting as long as needed), touches, holds briefly, releases. */
static int churn(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	rocmmem_client *c = NULL;
	unsigned seed = (unsigned)getpid();

	(void)in;
	if (rocmmem_connect(d->sock, "churn", 5000, &c))
		return 40;
	for (int i = 0; i < ROUNDS; i++) {
		struct rocmmem_lease_request req = {.struct_size = sizeof(req), .timeout_ms = -1};
		rocmmem_lease *l = NULL;
		unsigned char *p;
		int err;

		req.size = (1 + (uint64_t)(rand_r(&seed) % 24)) * MiB;
		err = rocmmem_lease_acquire(c, &req, &l);
		if (err) {
			fprintf(stderr, "churn: %s\n", rocmmem_last_error());
			return 41;
		}
		p = rocmmem_lease_ptr(l);
		p[0] = (unsigned char)i;
		p[rocmmem_lease_size(l) - 1] = (unsigned char)i;
		if (rand_r(&seed) % 4 == 0)
			usleep(rand_r(&seed) % 2000);
		if (rocmmem_lease_release(l))
			return 42;
	}
	pipe_put(out, 1);
	rocmmem_disconnect(c);
	return 0;
}

/* check_sample reads status once and checks the budget and the books agree. */
static bool check_sample(unsigned *samples, uint64_t *peak)
{
	rocmmem_client *c = NULL;
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *dev;
	uint64_t sum = 0;

	if (rocmmem_connect(daemon_.sock, "monitor", 5000, &c))
		return false;
	if (rocmmem_status_get(c, &st)) {
		rocmmem_disconnect(c);
		return false;
	}
	dev = rocmmem_status_device(st, 0);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++)
		sum += rocmmem_status_lease(st, i)->bytes;
	assert_true(dev->leased_bytes <= dev->budget_bytes);
	assert_int_equal(dev->leased_bytes, sum);
	assert_int_equal(dev->leases, rocmmem_status_lease_count(st));
	assert_int_equal(dev->free_bytes, dev->budget_bytes - dev->leased_bytes);
	if (dev->leased_bytes > *peak)
		*peak = dev->leased_bytes;
	(*samples)++;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return true;
}

static void test_budget_holds_under_concurrency(void **state)
{
	struct child kids[CLIENTS];
	unsigned samples = 0, done = 0;
	uint64_t peak = 0;
	long end = harness_now_ms() + 90000;

	(void)state;
	for (int i = 0; i < CLIENTS; i++)
		assert_int_equal(child_start(&kids[i], churn, &daemon_), 0);
	while (done < CLIENTS && harness_now_ms() < end) {
		int64_t v;

		check_sample(&samples, &peak);
		done = 0;
		for (int i = 0; i < CLIENTS; i++) {
			if (kids[i].pid == 0) {
				done++;
			} else if (pipe_get(kids[i].from_child, &v, 0)) {
				assert_int_equal(child_wait(&kids[i], 5000), 0);
				done++;
			}
		}
	}
	assert_int_equal(done, CLIENTS);
	/* The monitor saw the daemon busy, not only idle. */
	assert_true(samples > 5);
	assert_true(peak > 0);
	assert_true(harness_wait_totals(&daemon_, 0, 0, HARNESS_WAIT_MS) >= 0);
}

static void test_kills_during_churn(void **state)
{
	struct child kids[CLIENTS];
	struct harness_totals t;

	(void)state;
	for (int i = 0; i < CLIENTS; i++)
		assert_int_equal(child_start(&kids[i], churn, &daemon_), 0);
	usleep(100000);
	/* Half the clients die mid-flight, wherever they are: holding, waiting, or mid-call. */
	for (int i = 0; i < CLIENTS; i += 2)
		child_kill(&kids[i]);
	for (int i = 1; i < CLIENTS; i += 2)
		assert_int_equal(child_wait(&kids[i], 90000), 0);
	assert_true(harness_wait_totals(&daemon_, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_totals(&daemon_, &t), 0);
	assert_int_equal(t.waiters, 0);
	assert_int_equal(t.clients, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_budget_holds_under_concurrency),
	    cmocka_unit_test(test_kills_during_churn),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
