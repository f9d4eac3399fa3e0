/* SPDX-License-Identifier: MIT */
/* test_gpu_real.c: the GPU backends on real hardware (label gpu; skipped without a device). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cuda_api.h"
#include "gpuclient.h"
#include "harness.h"
#include "hip_api.h"

#define MiB ((uint64_t)1 << 20)

static const char *runtime; /* "hip", "cuda", or NULL: no GPU here */
static struct daemon_proc daemon_;

/*
 * probe finds a real runtime with a device, in a child: the test process itself never loads
 * one (clients do, in their own processes).
 */
static const char *probe(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct hipapi hip;
		struct cuapi cuda;
		char why[256];

		if (hipapi_load(&hip, why, sizeof(why)) == 0)
			_exit(10);
		if (cuapi_load(&cuda, why, sizeof(why)) == 0)
			_exit(11);
		_exit(12);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return NULL;
	return WEXITSTATUS(status) == 10 ? "hip" : WEXITSTATUS(status) == 11 ? "cuda" : NULL;
}

static int setup(void **state)
{
	const char *args[] = {"--backend", NULL, NULL};

	(void)state;
	unsetenv("ROCMMEM_HIP_LIBRARY");
	unsetenv("ROCMMEM_CUDA_LIBRARY");
	runtime = probe();
	if (!runtime) {
		fprintf(stderr, "no GPU runtime with a device here: the gpu tests skip\n");
		return 0;
	}
	args[1] = runtime;
	fprintf(stderr, "testing the %s backend on this machine's GPU\n", runtime);
	return harness_daemon_start(&daemon_, args);
}

static int teardown(void **state)
{
	(void)state;
	if (!runtime)
		return 0;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

static struct gpu_job job_for(uint64_t size)
{
	struct gpu_job job = {.socket = daemon_.sock,
			      .size = size,
			      .timeout_ms = 10000,
			      .cuda = strcmp(runtime, "cuda") == 0};

	return job;
}

static void test_status_shows_the_device(void **state)
{
	rocmmem_client *c;
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v;

	(void)state;
	if (!runtime)
		skip();
	c = harness_connect(&daemon_, "gpu-status");
	assert_string_equal(rocmmem_client_backend(c), runtime);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	v = rocmmem_status_device(st, 0);
	assert_non_null(v);
	fprintf(stderr, "device 0: %s %s, %llu MiB, budget %llu MiB, shared by %s\n", v->name,
		v->pci_bus_id, (unsigned long long)(v->total_bytes >> 20),
		(unsigned long long)(v->budget_bytes >> 20), v->sharing);
	assert_true(v->pci_bus_id[0] != '\0');
	assert_true(v->total_bytes > 0 && v->budget_bytes <= v->total_bytes);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

static void test_two_clients_write_and_read(void **state)
{
	struct gpu_job job;
	struct gpu_report r1, r2;
	struct child c1, c2;

	(void)state;
	if (!runtime)
		skip();
	job = job_for(256 * MiB);
	assert_int_equal(child_start(&c1, gpu_client_run, &job), 0);
	assert_int_equal(child_start(&c2, gpu_client_run, &job), 0);
	assert_true(gpu_client_report(&c1, &r1, 60000));
	assert_true(gpu_client_report(&c2, &r2, 60000));
	if (r1.result || r2.result)
		fail_msg("clients failed at steps %lld/%lld: %s / %s", (long long)r1.step,
			 (long long)r2.step, rocmmem_strerror((int)r1.result),
			 rocmmem_strerror((int)r2.result));
	fprintf(stderr,
		"two clients wrote and read 256 MiB each on the device (kind %lld, %lld "
		"chunk(s))\n",
		(long long)r1.kind, (long long)r1.chunks);
	assert_int_equal(gpu_client_release(&c1), 0);
	assert_int_equal(gpu_client_release(&c2), 0);
	assert_true(harness_wait_totals(&daemon_, 0, 0, HARNESS_WAIT_MS) >= 0);
}

static void test_trim_and_kill9(void **state)
{
	struct gpu_job job;
	struct gpu_report r;
	struct child c;
	rocmmem_client *client;
	uint64_t released = UINT64_MAX;

	(void)state;
	if (!runtime)
		skip();
	job = job_for(512 * MiB);
	assert_int_equal(child_start(&c, gpu_client_run, &job), 0);
	assert_true(gpu_client_report(&c, &r, 60000));
	assert_int_equal(r.result, 0);
	child_kill(&c);
	assert_true(harness_wait_totals(&daemon_, 0, 0, HARNESS_WAIT_MS) >= 0);
	client = harness_connect(&daemon_, "gpu-trim");
	assert_int_equal(rocmmem_trim(client, ROCMMEM_ALL_DEVICES, &released), 0);
	assert_true(released != UINT64_MAX);
	fprintf(stderr, "a holder killed with SIGKILL was reclaimed; trim released %llu bytes\n",
		(unsigned long long)released);
	rocmmem_disconnect(client);
}

static void test_lease_survives_a_restart(void **state)
{
	const char *args[] = {"--backend", runtime, NULL};
	struct gpu_job job;
	struct gpu_report r;
	struct child c;

	(void)state;
	if (!runtime)
		skip();
	job = job_for(256 * MiB);
	assert_int_equal(child_start(&c, gpu_client_run, &job), 0);
	assert_true(gpu_client_report(&c, &r, 60000));
	assert_int_equal(r.result, 0);
	/* The daemon dies; the client's imports keep the memory; the next daemon takes the lease
	 * over when the client re-declares it (exported again from its imported handles, or from
	 * the fds it kept where the runtime cannot). */
	kill(daemon_.pid, SIGKILL);
	assert_int_equal(waitpid(daemon_.pid, NULL, 0), daemon_.pid);
	daemon_.pid = 0;
	assert_int_equal(harness_daemon_restart(&daemon_, args), 0);
	assert_true(gpu_client_reconnect(&c, &r));
	if (r.result)
		fail_msg("after the restart, step %lld: %s", (long long)r.step,
			 rocmmem_strerror((int)r.result));
	assert_true(harness_log_wait(&daemon_, "took over lease", HARNESS_WAIT_MS));
	fprintf(stderr, "a %s lease of 256 MiB survived a SIGKILL of its daemon\n", runtime);
	assert_int_equal(gpu_client_release(&c), 0);
	assert_true(harness_wait_totals(&daemon_, 0, 0, HARNESS_WAIT_MS) >= 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_shows_the_device),
	    cmocka_unit_test(test_two_clients_write_and_read),
	    cmocka_unit_test(test_trim_and_kill9),
	    cmocka_unit_test(test_lease_survives_a_restart),
	};

	signal(SIGPIPE, SIG_IGN);
	/* No device: say so and let ctest show the test as skipped rather than passed. */
	if (!probe()) {
		fprintf(stderr,
			"SKIP: no GPU runtime with a device here: the gpu tests need one\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
