/* SPDX-License-Identifier: MIT */
/*
 * gpu.c: the GPU backends' allocation and export path failing at each step in turn, over the
 * stand-in runtimes (FAKEHIP_FAIL / FAKECUDA_FAIL): for every sharing method, the first
 * allocation call refused, out of memory through every chunk count, a later chunk's creation
 * or export failing after earlier ones succeeded. Each time the client gets the runtime's
 * error as a negative errno with a message naming the call, the daemon holds no charge, no
 * fd and no device memory for it (read from the stand-in's own usage file), counts the
 * failure, and serves the next request. And a failed allocation of a waiting request wakes
 * the queue behind it.
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
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "fake_common.h"
#include "fakegpu_paths.h"
#include "fault.h"

static char state_dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(state_dir, sizeof(state_dir), "/tmp/rocmmem-fault-gpu-XXXXXX");
	return mkdtemp(state_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s-dev0", state_dir, i ? "cuda" : "hip");
		unlink(path);
	}
	return rmdir(state_dir) == 0 ? 0 : -1;
}

/* device_used reads the stand-in runtime's usage of device 0 by process pid (its state file). */
static uint64_t device_used(bool cuda, pid_t pid)
{
	char path[128];
	struct fake_shared sh;
	uint64_t used = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s-dev0", state_dir, cuda ? "cuda" : "hip");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &sh, sizeof(sh), 0), (ssize_t)sizeof(sh));
	close(fd);
	for (int i = 0; i < FAKE_SLOTS; i++)
		if (sh.slot[i].pid == (int32_t)pid)
			used += sh.slot[i].used;
	return used;
}

/* One step of the path made to fail. */
struct step {
	const char *what;
	bool cuda;
	const char *sharing; /* the stand-in's features: "vmm", "dmabuf" or "ipc" */
	const char *fail;    /* FAKEHIP_FAIL / FAKECUDA_FAIL (the probe at start is call 1) */
	uint64_t size;
	int err;
	const char *call; /* named in the client's message */
	int chunks;	  /* of the next, successful lease (VMM) */
};

#define OOM_LADDER                                                                    \
	"hipMemCreate=2,hipMemCreate=3,hipMemCreate=4,hipMemCreate=5,hipMemCreate=6," \
	"hipMemCreate=7"

static const struct step steps[] = {
    /* HIP, VMM fds: create (after a trim, then in 2, 4, 8, 16 chunks), export. */
    {"hipMemCreate refused", false, "vmm", "hipMemCreate=2:801", 16 * MIB, -EOPNOTSUPP,
     "hipMemCreate", 1},
    {"hipMemCreate out of memory at every chunk count", false, "vmm", OOM_LADDER, 64 * MIB, -ENOMEM,
     "hipMemCreate", 1},
    {"the second chunk's hipMemCreate refused", false, "vmm",
     "hipMemCreate=2,hipMemCreate=3,hipMemCreate=5:801", 64 * MIB, -EOPNOTSUPP, "hipMemCreate", 1},
    {"the second chunk's export refused", false, "vmm",
     "hipMemCreate=2,hipMemCreate=3,hipMemExportToShareableHandle=3:801", 64 * MIB, -EOPNOTSUPP,
     "hipMemExportToShareableHandle", 1},
    {"the second chunk's export failing otherwise", false, "vmm",
     "hipMemCreate=2,hipMemCreate=3,hipMemExportToShareableHandle=3:1", 64 * MIB, -EINVAL,
     "hipMemExportToShareableHandle", 1},
    /* HIP, dma-buf: hipMalloc (retried after a trim), then the export of its range. */
    {"hipMalloc refused (dma-buf)", false, "dmabuf", "hipMalloc=2:801", 16 * MIB, -EOPNOTSUPP,
     "hipMalloc", 0},
    {"hipMalloc out of memory, also after a trim (dma-buf)", false, "dmabuf",
     "hipMalloc=2,hipMalloc=3", 16 * MIB, -ENOMEM, "hipMalloc", 0},
    {"hipMemGetHandleForAddressRange refused", false, "dmabuf",
     "hipMemGetHandleForAddressRange=2:801", 16 * MIB, -EOPNOTSUPP,
     "hipMemGetHandleForAddressRange", 0},
    /* HIP, IPC handles: hipMalloc, hipIpcGetMemHandle. */
    {"hipMalloc refused (IPC)", false, "ipc", "hipMalloc=3:801", 16 * MIB, -EOPNOTSUPP, "hipMalloc",
     0},
    {"hipIpcGetMemHandle refused", false, "ipc", "hipIpcGetMemHandle=2:801", 16 * MIB, -EOPNOTSUPP,
     "hipIpcGetMemHandle", 0},
    /* CUDA, VMM fds (no trim: out of memory goes straight to 2 chunks). */
    {"cuMemCreate refused", true, "vmm", "cuMemCreate=2:801", 16 * MIB, -EOPNOTSUPP, "cuMemCreate",
     1},
    {"the second chunk's cuMemCreate refused", true, "vmm", "cuMemCreate=2,cuMemCreate=4:801",
     64 * MIB, -EOPNOTSUPP, "cuMemCreate", 1},
    {"cuMemExportToShareableHandle refused", true, "vmm", "cuMemExportToShareableHandle=2:801",
     16 * MIB, -EOPNOTSUPP, "cuMemExportToShareableHandle", 1},
    {"the second chunk's cuMemExportToShareableHandle refused", true, "vmm",
     "cuMemCreate=2,cuMemExportToShareableHandle=3:801", 64 * MIB, -EOPNOTSUPP,
     "cuMemExportToShareableHandle", 1},
};

/* start_gpu_daemon starts rocmmemd over a stand-in with fail injected; budget 1G or 64M. */
static void start_gpu_daemon(struct daemon_proc *d, bool cuda, const char *sharing,
			     const char *fail, const char *budget)
{
	const char *args[] = {"--backend", cuda ? "cuda" : "hip", "--budget", budget, NULL};
	static char state_env[128], sysfs_env[128], fail_env[512];
	const char *env[16];
	int n = 0;

	snprintf(state_env, sizeof(state_env), "FAKEGPU_STATE_DIR=%s", state_dir);
	/* No telemetry source: an empty sysfs, no rocm-smi, no NVML. */
	snprintf(sysfs_env, sizeof(sysfs_env), "ROCMMEM_SYSFS_ROOT=%s", state_dir);
	snprintf(fail_env, sizeof(fail_env), "%s=%s", cuda ? "FAKECUDA_FAIL" : "FAKEHIP_FAIL",
		 fail);
	env[n++] = state_env;
	env[n++] = sysfs_env;
	env[n++] = fail_env;
	env[n++] = "ROCMMEM_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so";
	env[n++] = "ROCMMEM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1";
	if (cuda) {
		env[n++] = "ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH;
		env[n++] = "FAKECUDA_DEVICES=2G";
	} else {
		env[n++] = "ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH;
		env[n++] = "FAKEHIP_DEVICES=2G";
		if (strcmp(sharing, "vmm") != 0)
			env[n++] = "FAKEHIP_VMM=0";
		if (strcmp(sharing, "ipc") == 0)
			env[n++] = "FAKEHIP_DMABUF=0";
	}
	env[n] = NULL;
	if (fault_daemon_start(d, NULL, env, args, HARNESS_WAIT_MS) != 0)
		fail_msg("rocmmemd did not start over the stand-in %s runtime (%s)",
			 cuda ? "CUDA" : "HIP", fail);
}

/* nomap_lease acquires without mapping: this process never loads a GPU runtime. */
static int nomap_lease(rocmmem_client *c, uint64_t size, int64_t timeout_ms, rocmmem_lease **l)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = size,
					    .timeout_ms = timeout_ms,
					    .tag = "fault",
					    .flags = ROCMMEM_LEASE_NOMAP};

	return rocmmem_lease_acquire(c, &req, l);
}

/* expect_used waits (up to HARNESS_WAIT_MS) for the daemon's device usage to be want. */
static void expect_used(const struct step *s, pid_t pid, uint64_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	uint64_t used;

	while ((used = device_used(s->cuda, pid)) != want && harness_now_ms() < end)
		fault_sleep_us(5000);
	if (used != want)
		fail_msg("%s: the daemon holds %" PRIu64 " bytes of the device, want %" PRIu64,
			 s->what, used, want);
}

static void run_step(const struct step *s)
{
	struct daemon_proc d;
	struct fault_books b;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	uint64_t used0;
	int err, fds0, fds1, fds;

	start_gpu_daemon(&d, s->cuda, s->sharing, s->fail, "1G");
	fds0 = harness_fd_count_settled(d.pid);
	used0 = device_used(s->cuda, d.pid);
	c = harness_connect(&d, "fault-gpu");
	fds1 = harness_fd_count_settled(d.pid);
	err = nomap_lease(c, s->size, 0, &l);
	if (err != s->err)
		fail_msg("%s (%s): the acquire returned %d (%s: %s), want %d", s->what, s->fail,
			 err, rocmmem_strerror(err), err ? rocmmem_last_error() : "granted",
			 s->err);
	if (!strstr(rocmmem_last_error(), s->call))
		fail_msg("%s: the message does not name %s: '%s'", s->what, s->call,
			 rocmmem_last_error());
	assert_null(l);
	/* Nothing half-done: no charge, one failure counted, no fd, no device memory. */
	fault_wait_books(&d, 1, HARNESS_WAIT_MS, s->what);
	assert_int_equal(fault_books(&d, &b), 0);
	assert_int_equal(b.failures, 1);
	fds = harness_fd_count_settled(d.pid);
	if (fds != fds1) {
		harness_print_fds(d.pid);
		fail_msg("%s: the daemon has %d fds, want %d as before the request", s->what, fds,
			 fds1);
	}
	if (strcmp(s->sharing, "vmm") != 0) {
		/* hipFree keeps the bytes in the runtime's cache until a trim. */
		assert_int_equal(rocmmem_trim(c, 0, NULL), 0);
	}
	expect_used(s, d.pid, used0);
	/* The next request is served. */
	err = nomap_lease(c, s->size, 0, &l);
	if (err)
		fail_msg("%s: the next acquire failed: %s (%s)", s->what, rocmmem_strerror(err),
			 rocmmem_last_error());
	assert_int_equal(rocmmem_lease_size(l), s->size);
	if (s->chunks)
		assert_int_equal(rocmmem_lease_chunk_count(l), s->chunks);
	assert_true(device_used(s->cuda, d.pid) >= used0 + s->size);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	fault_wait_idle(&d, HARNESS_WAIT_MS, s->what);
	if (harness_fd_count_settled(d.pid) != fds0)
		fail_msg("%s: the daemon did not return to %d fds", s->what, fds0);
	if (fault_daemon_stop(&d, HARNESS_WAIT_MS, false) != 0)
		fail_msg("%s: rocmmemd did not exit 0 on SIGTERM", s->what);
	print_message("%-58s %s, then served\n", s->what, rocmmem_strerror(s->err));
}

static void test_each_step_fails(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		run_step(&steps[i]);
}

/* A request waiting in its own thread and connection. */
struct waiter {
	pthread_t thread;
	rocmmem_client *c;
	uint64_t size;
	int err;
	long ms;
	char message[512];
	rocmmem_lease *lease;
};

static void *wait_for_memory(void *arg)
{
	struct waiter *w = arg;
	long t0 = harness_now_ms();

	w->err = nomap_lease(w->c, w->size, HARNESS_WAIT_MS, &w->lease);
	w->ms = harness_now_ms() - t0;
	snprintf(w->message, sizeof(w->message), "%s", w->err ? rocmmem_last_error() : "");
	return NULL;
}

static void wait_queued(const struct daemon_proc *d, uint32_t n)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct fault_books b;

	do {
		assert_int_equal(fault_books(d, &b), 0);
		if (b.device_waiters == n)
			return;
		fault_sleep_us(2000);
	} while (harness_now_ms() < end);
	fail_msg("%u requests wait, want %u", b.device_waiters, n);
}

/*
 * On a runtime that allocates off the event loop (HIP), the first waiter's allocation fails
 * after the holder released: the memory it was charged is free again, and the second waiter,
 * which did not fit beside the first, must be granted at once rather than wait out its
 * timeout.
 */
static void test_failed_allocation_wakes_the_queue(void **state)
{
	struct daemon_proc d;
	struct waiter first = {.size = 48 * MIB}, second = {.size = 32 * MIB};
	rocmmem_client *holder;
	rocmmem_lease *all = NULL;

	(void)state;
	/* hipMemCreate: the probe (1), the holder (2), the first waiter (3: refused). */
	start_gpu_daemon(&d, false, "vmm", "hipMemCreate=3:801", "64M");
	holder = harness_connect(&d, "holder");
	assert_int_equal(nomap_lease(holder, 64 * MIB, 0, &all), 0);
	first.c = harness_connect(&d, "first");
	second.c = harness_connect(&d, "second");
	assert_int_equal(pthread_create(&first.thread, NULL, wait_for_memory, &first), 0);
	wait_queued(&d, 1);
	assert_int_equal(pthread_create(&second.thread, NULL, wait_for_memory, &second), 0);
	wait_queued(&d, 2);
	assert_int_equal(rocmmem_lease_release(all), 0);
	pthread_join(first.thread, NULL);
	pthread_join(second.thread, NULL);
	assert_int_equal(first.err, -EOPNOTSUPP);
	if (second.err)
		fail_msg("the request behind a failed allocation was not granted: %s after %ld ms "
			 "(%s)",
			 rocmmem_strerror(second.err), second.ms, second.message);
	print_message("the failed allocation's waiter answered in %ld ms, the next granted in %ld "
		      "ms\n",
		      first.ms, second.ms);
	assert_int_equal(rocmmem_lease_release(second.lease), 0);
	rocmmem_disconnect(first.c);
	rocmmem_disconnect(second.c);
	rocmmem_disconnect(holder);
	fault_wait_idle(&d, HARNESS_WAIT_MS, "after the failed allocation");
	assert_int_equal(fault_daemon_stop(&d, HARNESS_WAIT_MS, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_step_fails),
	    cmocka_unit_test(test_failed_allocation_wakes_the_queue),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
