/* SPDX-License-Identifier: MIT */
/*
 * test_gpu_pool.c: the VMM chunk pool (daemon/service/pool.c) over the stand-in runtimes: a
 * warm lease makes no runtime call, pooled memory goes back only to the client that released
 * it, trims, pressure and departures empty the pool, and status shows it. The daemon's runtime
 * calls are counted by the fakes themselves (tests/fakegpu/fake_calls.c).
 */
#include <errno.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cuda_api.h"
#include "fake_common.h"
#include "fakegpu_paths.h"
#include "harness.h"
#include "hip_api.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)
#define PEEK ((size_t)1 << 20)

static char state_dir[64];

static const char *const fake_vars[] = {
    "FAKEHIP_DEVICES",	    "FAKECUDA_DEVICES",		"ROCMMEM_HIP_LIBRARY",
    "ROCMMEM_CUDA_LIBRARY", "FAKEGPU_STATE_DIR",	"ROCMMEM_SYSFS_ROOT",
    "FAKEHIP_FAIL",	    "ROCMMEM_ROCM_SMI_LIBRARY", "ROCMMEM_NVML_LIBRARY",
    "FAKEGPU_COUNT_CALLS",  "FAKEHIP_VERSION",		"FAKEHIP_DMABUF",
    "FAKEHIP_SLOW",
};

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fake_vars) / sizeof(fake_vars[0]); i++)
		unsetenv(fake_vars[i]);
	snprintf(state_dir, sizeof(state_dir), "/tmp/rocmmem-pool-XXXXXX");
	if (!mkdtemp(state_dir))
		return -1;
	setenv("FAKEGPU_STATE_DIR", state_dir, 1);
	setenv("FAKEGPU_COUNT_CALLS", "1", 1);
	setenv("ROCMMEM_SYSFS_ROOT", state_dir, 1);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so", 1);
	setenv("ROCMMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fake_vars) / sizeof(fake_vars[0]); i++)
		unsetenv(fake_vars[i]);
	harness_remove_dir(state_dir);
	return 0;
}

/* What a pool client does, one command at a time (the parent never loads a runtime). */
enum { CMD_LEASE = 1, CMD_FILL, CMD_PEEK, CMD_RELEASE, CMD_TRIM, CMD_EXIT };

struct pool_client {
	const char *socket;
	bool cuda;
};

/* copy moves n bytes between the host and the lease with the fake runtime. */
static int copy(bool cuda, struct hipapi *hip, struct cuapi *cu, void *dst, const void *src,
		size_t n, bool to_device)
{
	if (cuda) {
		cuapi_ctx_t ctx;
		cuapi_device_t dev;
		int rc = cu->cuDeviceGet(&dev, 0);

		if (rc == 0)
			rc = cu->cuDevicePrimaryCtxRetain(&ctx, dev);
		if (rc == 0)
			rc = cu->cuCtxSetCurrent(ctx);
		if (rc == 0)
			rc = to_device
				 ? cu->cuMemcpyHtoD((cuapi_deviceptr_t)(uintptr_t)dst, src, n)
				 : cu->cuMemcpyDtoH(dst, (cuapi_deviceptr_t)(uintptr_t)src, n);
		return rc ? -EIO : 0;
	}
	return hip->hipMemcpy(dst, src, n,
			      to_device ? HIPAPI_MEMCPY_HOST_TO_DEVICE
					: HIPAPI_MEMCPY_DEVICE_TO_HOST) == HIPAPI_SUCCESS
		   ? 0
		   : -EIO;
}

/* peek returns the byte the first MiB of the lease is filled with, or -EBADMSG if mixed. */
static int64_t peek(const struct pool_client *pc, struct hipapi *hip, struct cuapi *cu,
		    rocmmem_lease *l, unsigned char *buf)
{
	if (copy(pc->cuda, hip, cu, buf, rocmmem_lease_ptr(l), PEEK, false))
		return -EIO;
	for (size_t i = 1; i < PEEK; i++)
		if (buf[i] != buf[0])
			return -EBADMSG;
	return buf[0];
}

/* run_command performs one command; returns its result for the parent. */
static int64_t run_command(const struct pool_client *pc, rocmmem_client *c, rocmmem_lease **l,
			   int64_t cmd, int64_t arg, struct hipapi *hip, struct cuapi *cu,
			   unsigned char *buf)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 0, .size = (uint64_t)arg, .timeout_ms = 10000};
	char why[256];
	uint64_t released = 0;
	int64_t rc;

	switch (cmd) {
	case CMD_LEASE:
		rc = rocmmem_lease_acquire(c, &req, l);
		if (rc == 0)
			rc = pc->cuda ? cuapi_load(cu, why, sizeof(why))
				      : hipapi_load(hip, why, sizeof(why));
		return rc;
	case CMD_FILL:
		memset(buf, (int)arg, PEEK);
		return copy(pc->cuda, hip, cu, rocmmem_lease_ptr(*l), buf, PEEK, true);
	case CMD_PEEK:
		return peek(pc, hip, cu, *l, buf);
	case CMD_RELEASE:
		rc = rocmmem_lease_release(*l);
		*l = NULL;
		return rc;
	case CMD_TRIM:
		rc = rocmmem_trim(c, 0, &released);
		return rc ? rc : (int64_t)released;
	default:
		return -EINVAL;
	}
}

static int pool_client_run(void *arg, int in, int out)
{
	const struct pool_client *pc = arg;
	static unsigned char buf[PEEK];
	struct hipapi hip;
	struct cuapi cu;
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	int64_t cmd, value;

	if (rocmmem_connect(pc->socket, "pool-client", 5000, &c) != 0)
		return 40;
	while (pipe_get(in, &cmd, 60000) && cmd != CMD_EXIT && pipe_get(in, &value, 60000))
		pipe_put(out, run_command(pc, c, &l, cmd, value, &hip, &cu, buf));
	rocmmem_disconnect(c);
	return cmd == CMD_EXIT ? 0 : 41;
}

/* client_on starts a pool client process on d's socket (a CUDA one when cuda). */
static void client_on(const struct daemon_proc *d, bool cuda, struct child *ch)
{
	struct pool_client pc = {.socket = d->sock, .cuda = cuda};

	assert_int_equal(child_start(ch, pool_client_run, &pc), 0);
}

/* ask has client ch run cmd and returns its result. */
static int64_t ask(struct child *ch, int64_t cmd, int64_t arg)
{
	int64_t result = -ETIMEDOUT;

	assert_true(pipe_put(ch->to_child, cmd));
	assert_true(pipe_put(ch->to_child, arg));
	assert_true(pipe_get(ch->from_child, &result, HARNESS_WAIT_MS));
	return result;
}

static void finish(struct child *ch)
{
	assert_true(pipe_put(ch->to_child, CMD_EXIT));
	assert_int_equal(child_wait(ch, HARNESS_WAIT_MS), 0);
}

/* The pool as status shows it. */
struct pool_view {
	uint64_t bytes, chunks, limit, warm, dropped, free_bytes, budget, runtime_free;
	bool has_runtime;
};

static void pool_view(const struct daemon_proc *d, struct pool_view *p)
{
	rocmmem_client *c = harness_connect(d, "pool-facts");
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	v = rocmmem_status_device(st, 0);
	assert_non_null(v);
	*p = (struct pool_view){.bytes = v->pool_bytes,
				.chunks = v->pool_chunks,
				.limit = v->pool_limit_bytes,
				.warm = v->pool_warm_grants,
				.dropped = v->pool_dropped_bytes,
				.free_bytes = v->free_bytes,
				.budget = v->budget_bytes,
				.runtime_free = v->runtime_free_bytes,
				.has_runtime = (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME) != 0};
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

/* ctl_says runs rocmmemctl with args against d and says whether its output has needle. */
static bool ctl_says(const struct daemon_proc *d, const char *args, const char *needle)
{
	char cmd[512], line[4096];
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s --socket %s %s", ROCMMEMCTL_BIN, d->sock, args);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		found = found || strstr(line, needle) != NULL;
	assert_int_equal(pclose(f), 0);
	return found;
}

/* calls is how often the daemon called fn of its runtime. */
static uint64_t calls(const struct daemon_proc *d, bool cuda, const char *fn)
{
	return fake_calls_read(state_dir, cuda ? "cuda" : "hip", (int)d->pid, fn);
}

/* wait_pool waits until the pool holds bytes (and returns the view). */
static void wait_pool(const struct daemon_proc *d, uint64_t bytes, struct pool_view *p)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	do {
		pool_view(d, p);
		if (p->bytes == bytes)
			return;
		usleep(10000);
	} while (harness_now_ms() < end);
	fail_msg("the pool holds %llu bytes, waited for %llu", (unsigned long long)p->bytes,
		 (unsigned long long)bytes);
}

static void start(struct daemon_proc *d, bool cuda, const char *const *extra)
{
	const char *args[16] = {"--backend", cuda ? "cuda" : "hip", "--budget", "1G"};
	int n = 4;

	for (int i = 0; extra && extra[i] && n < 15; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	if (cuda)
		setenv("ROCMMEM_CUDA_LIBRARY", FAKECUDA_PATH, 1);
	else
		setenv("ROCMMEM_HIP_LIBRARY", FAKEHIP_PATH, 1);
	setenv(cuda ? "FAKECUDA_DEVICES" : "FAKEHIP_DEVICES", "1G", 1);
	if (harness_daemon_start(d, args) != 0)
		fail_msg("rocmmemd did not start with the stand-in runtime");
}

/* wait_fds waits until the daemon has n fds open (a status query opens some for a moment). */
static void wait_fds(const struct daemon_proc *d, int n)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	int now;

	while ((now = harness_fd_count(d->pid)) != n && harness_now_ms() < end)
		usleep(10000);
	if (now != n) {
		harness_print_fds(d->pid);
		fail_msg("rocmmemd has %d fds open, waited for %d", now, n);
	}
}

/*
 * warm_lease: released into the pool, then granted again with no call. keep: the grant's
 * exported fd is kept open, so the release is pooled with no export either; else
 * (--gpu-pool-fds 0) the memory is exported again off the request path.
 */
static void warm_lease(bool cuda, bool keep)
{
	static const char *const no_keep[] = {"--gpu-pool-fds", "0", NULL};
	const char *create = cuda ? "cuMemCreate" : "hipMemCreate";
	const char *export =
	    cuda ? "cuMemExportToShareableHandle" : "hipMemExportToShareableHandle";
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;
	uint64_t creates, exports;
	int fds;

	start(&d, cuda, keep ? NULL : no_keep);
	fds = harness_fd_count_settled(d.pid);
	client_on(&d, cuda, &ch);
	assert_int_equal(ask(&ch, CMD_LEASE, 64 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_FILL, 0x5a), 0);
	exports = calls(&d, cuda, export);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	/* Pooled with its grant's fd (answered at once), or exported again first (answered once
	 * that is done): the daemon's, shown in status, free in the budget's eyes. */
	assert_int_equal(calls(&d, cuda, export), exports + (keep ? 0 : 1));
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 64 * MiB);
	assert_int_equal(p.chunks, 1);
	assert_int_equal(p.limit, 256 * MiB); /* auto: a quarter of the 1 GiB budget */
	assert_int_equal(p.free_bytes, p.budget);
	assert_true(ctl_says(&d, "status", "pool: 64 MiB in 1 chunk(s) of at most 256 MiB"));
	assert_true(ctl_says(&d, "status --json", "\"pool\""));
	assert_true(ctl_says(&d, "metrics", "rocmmemd_device_pool_bytes{device=\"0\","));
	assert_true(ctl_says(&d, "metrics", "} 67108864"));
	/* The pooled memory's fd, kept (or exported again: the pool's entry holds one either
	 * way, but only a kept one counts against --gpu-pool-fds). */
	assert_true(ctl_says(&d, "metrics",
			     keep ? "rocmmemd_gpu_pool_fds 1\n" : "rocmmemd_gpu_pool_fds 0\n"));
	if (!keep)
		assert_true(ctl_says(&d, "metrics", "rocmmemd_gpu_pool_fds_limit 0\n"));
	creates = calls(&d, cuda, create);
	exports = calls(&d, cuda, export);
	assert_int_equal(ask(&ch, CMD_LEASE, 64 * MiB), 0);
	/* Warm: no allocation and no export on the request path. */
	assert_int_equal(calls(&d, cuda, create), creates);
	assert_int_equal(calls(&d, cuda, export), exports);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	assert_int_equal(p.warm, 1);
	/* Its own memory again, usable: what it wrote before is what it reads. */
	assert_int_equal(ask(&ch, CMD_PEEK, 0), 0x5a);
	/* A size the pool does not hold is a cold allocation. */
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	wait_pool(&d, 64 * MiB, &p);
	assert_int_equal(ask(&ch, CMD_LEASE, 32 * MiB), 0);
	assert_int_equal(calls(&d, cuda, create), creates + 1);
	finish(&ch);
	/* The client is gone: what was kept for it is released, with its fds (the socket's,
	 * pidfd's and the pooled memory's alike). */
	wait_pool(&d, 0, &p);
	wait_fds(&d, fds);
	assert_true(ctl_says(&d, "metrics", "rocmmemd_gpu_pool_fds 0\n"));
	assert_int_equal(harness_daemon_stop(&d), 0);
}

static void test_hip_warm_lease(void **state)
{
	(void)state;
	warm_lease(false, true);
}

static void test_cuda_warm_lease(void **state)
{
	(void)state;
	warm_lease(true, true);
}

static void test_cuda_warm_lease_exported_again(void **state)
{
	(void)state;
	warm_lease(true, false);
}

/*
 * A dma-buf grant whose client is killed while the daemon allocates for it: the allocation is
 * freed with the fd exported for the grant (the daemon's fd count comes back to where it was),
 * and the books let go of it.
 */
static void test_dmabuf_grant_for_a_dead_client(void **state)
{
	static const char *const dmabuf[] = {"--sharing", "dmabuf", NULL};
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;
	uint64_t mallocs;
	long end;
	int fds;

	(void)state;
	setenv("FAKEHIP_VERSION", "60100000", 1);
	setenv("FAKEHIP_DMABUF", "1", 1);
	/* Long enough for this process to see the call begin and kill the client even on a busy
	 * machine; were it too short, the client would get its grant first and the case would
	 * test a reclaim at disconnect instead (which it passes too). */
	setenv("FAKEHIP_SLOW", "hipMalloc=800", 1);
	start(&d, false, dmabuf);
	fds = harness_fd_count_settled(d.pid);
	mallocs = calls(&d, false, "hipMalloc");
	client_on(&d, false, &ch);
	assert_true(pipe_put(ch.to_child, CMD_LEASE));
	assert_true(pipe_put(ch.to_child, 16 * MiB));
	/* The stand-in counts the call before it sleeps in it: the client dies meanwhile. */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (calls(&d, false, "hipMalloc") == mallocs && harness_now_ms() < end)
		usleep(2000);
	assert_true(calls(&d, false, "hipMalloc") > mallocs);
	assert_int_equal(kill(ch.pid, SIGKILL), 0);
	child_wait(&ch, HARNESS_WAIT_MS); /* killed: its status says so, nothing to check */
	/* The allocation ends, finds nobody to grant to and is freed: the books first... */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	do {
		pool_view(&d, &p);
	} while (p.free_bytes != p.budget && harness_now_ms() < end && usleep(10000) == 0);
	assert_int_equal(p.free_bytes, p.budget);
	assert_true(calls(&d, false, "hipFree") > 0);
	/* ...then the daemon's fds: the one exported for the grant went with the memory. */
	wait_fds(&d, fds);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* Another client never gets pooled memory: its previous holder may still map it. */
static void test_pool_is_per_client(void **state)
{
	struct daemon_proc d;
	struct pool_view p;
	struct child a, b;
	uint64_t creates;

	(void)state;
	start(&d, false, NULL);
	client_on(&d, false, &a);
	client_on(&d, false, &b);
	assert_int_equal(ask(&a, CMD_LEASE, 16 * MiB), 0);
	assert_int_equal(ask(&a, CMD_FILL, 0xa5), 0);
	assert_int_equal(ask(&a, CMD_RELEASE, 0), 0);
	wait_pool(&d, 16 * MiB, &p);
	creates = calls(&d, false, "hipMemCreate");
	assert_int_equal(ask(&b, CMD_LEASE, 16 * MiB), 0);
	/* b's lease is new memory: created for it, a's data nowhere in it; a's stays pooled. */
	assert_int_equal(calls(&d, false, "hipMemCreate"), creates + 1);
	assert_int_equal(ask(&b, CMD_PEEK, 0), 0);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 16 * MiB);
	assert_int_equal(p.warm, 0);
	finish(&a);
	wait_pool(&d, 0, &p);
	assert_int_equal(p.dropped, 16 * MiB);
	finish(&b);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A trim returns the pool first, counted in what it released; the runtime has it back. */
static void test_trim_empties_the_pool(void **state)
{
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;

	(void)state;
	start(&d, false, NULL);
	client_on(&d, false, &ch);
	assert_int_equal(ask(&ch, CMD_LEASE, 96 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	wait_pool(&d, 96 * MiB, &p);
	assert_true(ask(&ch, CMD_TRIM, 0) >= (int64_t)(96 * MiB));
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	assert_int_equal(p.chunks, 0);
	assert_int_equal(p.dropped, 96 * MiB);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* Pooled memory never pushes the device past its budget: a grant that needs it has it
 * released first, in the same job (the device has exactly the budget: no room otherwise). */
static void test_grant_takes_the_pool_back(void **state)
{
	struct daemon_proc d;
	struct pool_view p;
	struct child a, b;

	(void)state;
	start(&d, false, NULL);
	client_on(&d, false, &a);
	client_on(&d, false, &b);
	assert_int_equal(ask(&a, CMD_LEASE, 256 * MiB), 0);
	assert_int_equal(ask(&a, CMD_RELEASE, 0), 0);
	wait_pool(&d, 256 * MiB, &p);
	assert_int_equal(ask(&b, CMD_LEASE, 896 * MiB), 0);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	assert_int_equal(p.dropped, 256 * MiB);
	finish(&a);
	finish(&b);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* An export that fails while pooling frees the memory: the release still succeeds, nothing
 * stays in the pool or the books, and the next lease is allocated as usual. */
static void test_failed_export_frees(void **state)
{
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;
	uint64_t creates;

	(void)state;
	/* Call 1 is the start's probe, 2 the grant's export, 3 the pool's (none kept). */
	static const char *const no_keep[] = {"--gpu-pool-fds", "0", NULL};

	setenv("FAKEHIP_FAIL", "hipMemExportToShareableHandle=3", 1);
	start(&d, false, no_keep);
	client_on(&d, false, &ch);
	assert_int_equal(ask(&ch, CMD_LEASE, 16 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	assert_true(harness_log_wait(&d, "could not be pooled", HARNESS_WAIT_MS));
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	assert_int_equal(p.dropped, 16 * MiB);
	assert_int_equal(p.free_bytes, p.budget);
	creates = calls(&d, false, "hipMemCreate");
	assert_int_equal(ask(&ch, CMD_LEASE, 16 * MiB), 0);
	assert_int_equal(calls(&d, false, "hipMemCreate"), creates + 1);
	assert_int_equal(ask(&ch, CMD_PEEK, 0), 0);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* outsider holds arg MiB with the runtime directly, outside rocmmemd, until told to stop. */
static int outsider(void *arg, int in, int out)
{
	struct hipapi hip;
	char why[256];
	void *p = NULL;
	int64_t go;

	if (hipapi_load(&hip, why, sizeof(why)) != 0 ||
	    hip.hipMalloc(&p, (size_t)(uintptr_t)arg << 20) != 0)
		return 60;
	pipe_put(out, 1);
	pipe_get(in, &go, 60000);
	return 0;
}

/* The runtime short of memory (under a tenth free) takes the pool back at the next sample. */
static void test_runtime_short_takes_the_pool_back(void **state)
{
	struct daemon_proc d;
	struct pool_view p;
	struct child ch, other;
	int64_t ready;

	(void)state;
	start(&d, false, NULL);
	client_on(&d, false, &ch);
	assert_int_equal(ask(&ch, CMD_LEASE, 256 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 256 * MiB);
	/* 700 MiB outside rocmmemd: 68 MiB of the 1 GiB device left free. */
	assert_int_equal(child_start(&other, outsider, (void *)(uintptr_t)700), 0);
	assert_true(pipe_get(other.from_child, &ready, HARNESS_WAIT_MS));
	wait_pool(&d, 0, &p);
	assert_int_equal(p.dropped, 256 * MiB);
	pipe_put(other.to_child, 1);
	assert_int_equal(child_wait(&other, HARNESS_WAIT_MS), 0);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A reload that lowers the limit lets go of the oldest memory at the next sample. */
static void test_reload_lowers_the_limit(void **state)
{
	char path[128], args_path[160];
	const char *args[] = {"--config", args_path, NULL};
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/pool.conf", state_dir);
	snprintf(args_path, sizeof(args_path), "%s", path);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "[devices]\ngpu_pool = 64M\n");
	fclose(f);
	start(&d, false, args);
	pool_view(&d, &p);
	assert_int_equal(p.limit, 64 * MiB);
	client_on(&d, false, &ch);
	/* Too large for the pool: freed as before. */
	assert_int_equal(ask(&ch, CMD_LEASE, 128 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	assert_int_equal(ask(&ch, CMD_LEASE, 32 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 32 * MiB);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "[devices]\ngpu_pool = off\n");
	fclose(f);
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	assert_true(harness_log_wait(&d, "reloaded the configuration", HARNESS_WAIT_MS));
	wait_pool(&d, 0, &p);
	assert_int_equal(p.dropped, 32 * MiB);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* Idle memory goes back by itself; "off" keeps nothing. */
static void test_idle_and_off(void **state)
{
	static const char *const idle[] = {"--gpu-pool-idle", "0", NULL};
	static const char *const off[] = {"--gpu-pool", "off", NULL};
	struct daemon_proc d;
	struct pool_view p;
	struct child ch;
	uint64_t creates;

	(void)state;
	start(&d, false, idle);
	client_on(&d, false, &ch);
	assert_int_equal(ask(&ch, CMD_LEASE, 8 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	wait_pool(&d, 0, &p); /* released at the next sample */
	assert_int_equal(p.dropped, 8 * MiB);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);

	start(&d, false, off);
	client_on(&d, false, &ch);
	pool_view(&d, &p);
	assert_int_equal(p.limit, 0);
	assert_int_equal(ask(&ch, CMD_LEASE, 8 * MiB), 0);
	assert_int_equal(ask(&ch, CMD_RELEASE, 0), 0);
	creates = calls(&d, false, "hipMemCreate");
	assert_int_equal(ask(&ch, CMD_LEASE, 8 * MiB), 0);
	assert_int_equal(calls(&d, false, "hipMemCreate"), creates + 1);
	pool_view(&d, &p);
	assert_int_equal(p.bytes, 0);
	finish(&ch);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hip_warm_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_warm_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_warm_lease_exported_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dmabuf_grant_for_a_dead_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_is_per_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_trim_empties_the_pool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grant_takes_the_pool_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_and_off, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failed_export_frees, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_short_takes_the_pool_back, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_reload_lowers_the_limit, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
