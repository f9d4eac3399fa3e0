/* SPDX-License-Identifier: MIT */
/* test_gpu_fake.c: the HIP and CUDA backends end to end over the stand-in GPU runtimes. */
#include <errno.h>
#include <fcntl.h>
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

#include "cuda_api.h"
#include "fake_tree.h"
#include "fakegpu_paths.h"
#include "gpuclient.h"
#include "harness.h"
#include "hip_api.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/*
 * The parent never loads a runtime (a loaded runtime stays loaded, with the environment it
 * saw): the daemon and every client are processes of their own, configured by environment.
 */
static char state_dir[64];

static const char *const fake_vars[] = {
    "FAKEHIP_VERSION",	 "FAKEHIP_DEVICES",	"FAKEHIP_INTEGRATED",	    "FAKEHIP_VMM",
    "FAKEHIP_DMABUF",	 "FAKEHIP_FAIL",	"FAKECUDA_DEVICES",	    "FAKECUDA_VMM",
    "FAKECUDA_FAIL",	 "FAKECUDA_INTEGRATED", "ROCMMEM_HIP_LIBRARY",	    "ROCMMEM_CUDA_LIBRARY",
    "FAKEGPU_STATE_DIR", "ROCMMEM_SYSFS_ROOT",	"ROCMMEM_ROCM_SMI_LIBRARY", "ROCMMEM_NVML_LIBRARY",
    "LD_LIBRARY_PATH",
};

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fake_vars) / sizeof(fake_vars[0]); i++)
		unsetenv(fake_vars[i]);
	snprintf(state_dir, sizeof(state_dir), "/tmp/rocmmem-fakegpu-XXXXXX");
	if (!mkdtemp(state_dir))
		return -1;
	setenv("FAKEGPU_STATE_DIR", state_dir, 1);
	/* No real telemetry source on a test machine: an empty sysfs keeps it quiet. */
	setenv("ROCMMEM_SYSFS_ROOT", state_dir, 1);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so", 1);
	setenv("ROCMMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	for (size_t i = 0; i < sizeof(fake_vars) / sizeof(fake_vars[0]); i++)
		unsetenv(fake_vars[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* env sets NAME=VALUE pairs, NULL-terminated. */
static void env(const char *first, ...)
{
	va_list ap;

	va_start(ap, first);
	for (const char *kv = first; kv; kv = va_arg(ap, const char *)) {
		char name[64];
		const char *eq = strchr(kv, '=');

		assert_non_null(eq);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
		setenv(name, eq + 1, 1);
	}
	va_end(ap);
}

static void start(struct daemon_proc *d, const char *const *args)
{
	if (harness_daemon_start(d, args) != 0)
		fail_msg("rocmmemd did not start with the stand-in runtime");
}

static void stop(struct daemon_proc *d)
{
	assert_int_equal(harness_daemon_stop(d), 0);
}

/* device_facts copies what the tests check about a device from a status. */
struct facts {
	char name[64], pci[32], sharing[16], state[128];
	int integrated;
	uint64_t budget, leased, total;
	uint32_t valid;
	uint64_t runtime_total, runtime_free, external;
	size_t ndevices;
};

static void facts(const struct daemon_proc *d, unsigned index, struct facts *f)
{
	rocmmem_client *c = harness_connect(d, "facts");
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	memset(f, 0, sizeof(*f));
	f->ndevices = rocmmem_status_device_count(st);
	v = rocmmem_status_device(st, index);
	assert_non_null(v);
	snprintf(f->name, sizeof(f->name), "%s", v->name);
	snprintf(f->pci, sizeof(f->pci), "%s", v->pci_bus_id);
	snprintf(f->sharing, sizeof(f->sharing), "%s", v->sharing);
	snprintf(f->state, sizeof(f->state), "%s", v->state);
	f->integrated = v->integrated;
	f->budget = v->budget_bytes;
	f->leased = v->leased_bytes;
	f->total = v->total_bytes;
	f->valid = v->valid;
	f->runtime_total = v->runtime_total_bytes;
	f->runtime_free = v->runtime_free_bytes;
	f->external = v->external_bytes;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

/* wait_runtime polls until the sampler reports runtime figures satisfying free <= / >=. */
static void wait_runtime_free(const struct daemon_proc *d, unsigned index, uint64_t lo, uint64_t hi,
			      struct facts *f)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (harness_now_ms() < end) {
		facts(d, index, f);
		if ((f->valid & ROCMMEM_DEVICE_HAS_RUNTIME) && f->runtime_free >= lo &&
		    f->runtime_free <= hi)
			return;
		usleep(20000);
	}
	fail_msg("runtime free on device %u stayed at %llu, wanted %llu..%llu", index,
		 (unsigned long long)f->runtime_free, (unsigned long long)lo,
		 (unsigned long long)hi);
}

/* client runs one GPU client to its report; the caller releases it. */
static void client(struct child *ch, struct gpu_job *job, struct gpu_report *r)
{
	assert_int_equal(child_start(ch, gpu_client_run, job), 0);
	assert_true(gpu_client_report(ch, r, HARNESS_WAIT_MS));
}

static void client_ok(const struct daemon_proc *d, bool cuda, unsigned device, uint64_t size,
		      int expect_kind, int64_t expect_chunks)
{
	struct gpu_job job = {
	    .socket = d->sock, .device = device, .size = size, .timeout_ms = 10000, .cuda = cuda};
	struct gpu_report r;
	struct child ch;

	client(&ch, &job, &r);
	if (r.result != 0)
		fail_msg("client failed at step %lld: %s", (long long)r.step,
			 rocmmem_strerror((int)r.result));
	assert_int_equal(r.step, GPU_STEP_DONE);
	assert_int_equal(r.kind, expect_kind);
	if (expect_chunks >= 0)
		assert_int_equal(r.chunks, expect_chunks);
	assert_int_equal(gpu_client_release(&ch), 0);
}

static void test_hip_vmm_two_clients(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 64 * MiB};
	struct gpu_report r1, r2;
	struct child c1, c2;
	struct daemon_proc d;
	struct facts f;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	facts(&d, 0, &f);
	assert_string_equal(f.sharing, "vmm-fd");
	assert_string_equal(f.pci, "0000:03:00.0");
	assert_string_equal(f.name, "Fake Radeon RX 7900 XTX");
	assert_int_equal(f.integrated, 0);
	assert_int_equal(f.budget, GiB);
	assert_int_equal(f.total, 2 * GiB);
	job.socket = d.sock;
	/* Two processes at once, each writing and reading its own lease on the device. */
	client(&c1, &job, &r1);
	client(&c2, &job, &r2);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_int_equal(r1.kind, ROCMMEM_HANDLE_VMM_FD);
	assert_int_equal(r1.chunks, 1);
	assert_true(r1.lease_id != r2.lease_id);
	/* The runtime sees the daemon's allocations: 128 MiB fewer free. */
	wait_runtime_free(&d, 0, 2 * GiB - 128 * MiB, 2 * GiB - 128 * MiB, &f);
	assert_int_equal(f.leased, 128 * MiB);
	assert_int_equal(f.external, 0);
	assert_int_equal(gpu_client_release(&c1), 0);
	assert_int_equal(gpu_client_release(&c2), 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	wait_runtime_free(&d, 0, 2 * GiB, 2 * GiB, &f);
	stop(&d);
}

static void test_hip_version_ladder(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	static const struct {
		const char *version;
		const char *dmabuf;
		const char *sharing;
		int kind;
	} cases[] = {
	    {"50700000", "1", "ipc", ROCMMEM_HANDLE_IPC},
	    {"60000000", "1", "dmabuf", ROCMMEM_HANDLE_DMABUF},
	    {"60000000", "0", "ipc", ROCMMEM_HANDLE_IPC},
	    {"60100000", "1", "dmabuf", ROCMMEM_HANDLE_DMABUF},
	    {"60200000", "1", "vmm-fd", ROCMMEM_HANDLE_VMM_FD},
	    {"70000000", "1", "vmm-fd", ROCMMEM_HANDLE_VMM_FD}, /* import takes a pointer */
	    {"70100000", "1", "vmm-fd", ROCMMEM_HANDLE_VMM_FD}, /* import takes the fd */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct daemon_proc d;
		struct facts f;

		env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
		setenv("FAKEHIP_VERSION", cases[i].version, 1);
		setenv("FAKEHIP_DMABUF", cases[i].dmabuf, 1);
		start(&d, args);
		facts(&d, 0, &f);
		if (strcmp(f.sharing, cases[i].sharing) != 0)
			fail_msg("HIP %s (dma-buf %s): sharing by %s, expected %s",
				 cases[i].version, cases[i].dmabuf, f.sharing, cases[i].sharing);
		client_ok(&d, false, 0, 32 * MiB, cases[i].kind, -1);
		stop(&d);
	}
}

/* start_fails runs rocmmemd expecting it to refuse to start; returns its log. */
static void start_fails(const char *const *args, int expect_status, const char *needle)
{
	char sock[128], log[128], line[1024];
	const char *argv[16];
	bool found = false;
	int n = 0, status, fd;
	pid_t pid;
	FILE *f;

	snprintf(sock, sizeof(sock), "%s/fail.sock", state_dir);
	snprintf(log, sizeof(log), "%s/fail.log", state_dir);
	argv[n++] = harness_daemon_bin();
	argv[n++] = "--socket";
	argv[n++] = sock;
	for (int i = 0; args[i] && n < 14; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), expect_status);
	f = fopen(log, "r");
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	if (!found)
		fail_msg("the log does not say '%s'", needle);
}

static void test_hip_forced_sharing(void **state)
{
	static const char *const ipc[] = {"--backend", "hip", "--sharing", "ipc",
					  "--budget",  "1G",  NULL};
	static const char *const vmm[] = {"--backend", "hip", "--sharing", "vmm", NULL};
	struct daemon_proc d;
	struct facts f;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, ipc);
	facts(&d, 0, &f);
	assert_string_equal(f.sharing, "ipc");
	client_ok(&d, false, 0, 8 * MiB, ROCMMEM_HANDLE_IPC, 0);
	stop(&d);
	/* VMM forced on a runtime without fd export: no device can share, the daemon says why. */
	env("FAKEHIP_VERSION=60100000", NULL);
	start_fails(vmm, 1, "needs 6.2");
}

static void test_hip_chunked_lease(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct daemon_proc d;

	(void)state;
	/* The probe is call 1; the lease's single piece (2) and its retry after a trim (3) fail
	 * as a fragmented device would: the lease comes in two chunks, mapped contiguously. */
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G",
	    "FAKEHIP_FAIL=hipMemCreate=2,hipMemCreate=3", NULL);
	start(&d, args);
	client_ok(&d, false, 0, 96 * MiB, ROCMMEM_HANDLE_VMM_FD, 2);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	client_ok(&d, false, 0, 96 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	stop(&d);
}

static void test_hip_export_failure(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 16 * MiB};
	struct gpu_report r;
	struct daemon_proc d;
	struct child ch;
	int base;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G",
	    "FAKEHIP_FAIL=hipMemExportToShareableHandle=2", NULL);
	start(&d, args);
	base = harness_fd_count_settled(d.pid);
	job.socket = d.sock;
	client(&ch, &job, &r);
	assert_int_equal(r.step, GPU_STEP_ACQUIRE);
	assert_true(r.result < 0);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	assert_true(harness_log_wait(&d, "hipMemExportToShareableHandle", HARNESS_WAIT_MS));
	/* Nothing half-done: no lease, no charge, no fd; the next request works. */
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_fd_count_settled(d.pid), base);
	client_ok(&d, false, 0, 16 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	stop(&d);
}

/* external holds memory with the runtime directly, outside rocmmemd, until told to stop. */
static int external(void *arg, int in, int out)
{
	struct hipapi hip;
	char why[256];
	void *p = NULL;
	int64_t go;

	(void)arg;
	if (hipapi_load(&hip, why, sizeof(why)) != 0 || hip.hipMalloc(&p, (size_t)GiB) != 0)
		return 60;
	pipe_put(out, 1);
	pipe_get(in, &go, 60000);
	return 0;
}

static void test_hip_external_usage(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1536M", NULL};
	struct gpu_job job = {.size = 1280 * MiB};
	struct daemon_proc d;
	struct gpu_report r;
	struct child ext, ch;
	struct facts f;
	int64_t ready;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	assert_int_equal(child_start(&ext, external, NULL), 0);
	assert_true(pipe_get(ext.from_child, &ready, HARNESS_WAIT_MS));
	/* Another process's own hipMalloc shows as used outside rocmmemd. */
	wait_runtime_free(&d, 0, GiB, GiB, &f);
	assert_int_equal(f.external, GiB);
	/* Within the budget, but the device itself is short: a clear error, nothing charged. */
	job.socket = d.sock;
	client(&ch, &job, &r);
	assert_int_equal(r.step, GPU_STEP_ACQUIRE);
	assert_int_equal(r.result, -ENOMEM);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	pipe_put(ext.to_child, 1);
	assert_int_equal(child_wait(&ext, HARNESS_WAIT_MS), 0);
	/* The external process is gone: the same request fits now. */
	wait_runtime_free(&d, 0, 2 * GiB, 2 * GiB, &f);
	client_ok(&d, false, 0, 1280 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	stop(&d);
}

static void test_hip_trim_returns_cache(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	rocmmem_client *c;
	struct daemon_proc d;
	struct facts f;
	uint64_t released = 0;

	(void)state;
	/* IPC sharing is one hipMalloc per lease; the runtime keeps freed blocks cached. */
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=1G", "FAKEHIP_VERSION=50700000",
	    NULL);
	start(&d, args);
	client_ok(&d, false, 0, 768 * MiB, ROCMMEM_HANDLE_IPC, 0);
	wait_runtime_free(&d, 0, 0, 256 * MiB, &f);
	/* Released, yet cached: a second 768 MiB would fail in hipMalloc. The daemon trims and
	 * retries by itself instead of failing with "out of memory" while memory is free. */
	client_ok(&d, false, 0, 768 * MiB, ROCMMEM_HANDLE_IPC, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	/* And an explicit trim hands the cache back, reporting what it released. */
	c = harness_connect(&d, "trimmer");
	assert_int_equal(rocmmem_trim(c, 0, &released), 0);
	assert_int_equal(released, 768 * MiB);
	assert_int_equal(rocmmem_trim(c, ROCMMEM_ALL_DEVICES, &released), 0);
	assert_int_equal(released, 0);
	assert_int_equal(rocmmem_trim(c, 4, &released), -ENODEV);
	rocmmem_disconnect(c);
	wait_runtime_free(&d, 0, GiB, GiB, &f);
	stop(&d);
}

static void test_hip_pipelined_trims(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__TrimRequest trim = ROCMMEM__WIRE__TRIM_REQUEST__INIT;
	enum { N = 500 };
	unsigned ok = 0, busy = 0;
	struct daemon_proc d;
	int fd, base;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	base = harness_fd_count_settled(d.pid);
	fd = harness_raw_connect(&d);
	assert_true(fd >= 0);
	assert_int_equal(harness_raw_hello(fd, 1, "trim-flood"), 0);
	/* Replies to trims come later, so the daemon's backpressure cannot stop this client:
	 * one trim per device at a time does, and every request is answered. */
	trim.has_device = true;
	trim.device = 0;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
	msg.trim = &trim;
	for (uint64_t i = 0; i < N; i++) {
		msg.has_id = true;
		msg.id = 100 + i;
		assert_int_equal(harness_raw_send(fd, &msg, NULL, 0), 0);
	}
	while (ok + busy < N) {
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(fd, 10000, NULL, NULL, NULL);
		int err;

		assert_non_null(m);
		assert_int_equal(m->kind_case, ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY);
		err = m->reply->has_error ? m->reply->error : 0;
		if (err == 0) {
			assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_TRIM);
			ok++;
		} else {
			assert_int_equal(err, -EBUSY);
			busy++;
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	assert_true(ok > 0);
	close(fd);
	client_ok(&d, false, 0, 8 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	assert_int_equal(harness_fd_count_settled(d.pid), base);
	stop(&d);
}

static void test_hip_kill9_reclaims(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 256 * MiB};
	struct daemon_proc d;
	struct gpu_report r;
	struct child ch;
	struct facts f;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	job.socket = d.sock;
	client(&ch, &job, &r);
	assert_int_equal(r.result, 0);
	wait_runtime_free(&d, 0, 2 * GiB - 256 * MiB, 2 * GiB - 256 * MiB, &f);
	child_kill(&ch);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	/* The daemon released its allocation: the device is whole again. */
	wait_runtime_free(&d, 0, 2 * GiB, 2 * GiB, &f);
	stop(&d);
}

/* ipc_mode_child connects and reports (exit 0) whether HIP's IPC mode was set to 0. */
static int ipc_mode_child(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	rocmmem_client *c = NULL;
	const char *mode;

	(void)in;
	(void)out;
	unsetenv("HSA_ENABLE_IPC_MODE_LEGACY");
	if (rocmmem_connect(d->sock, "ipc-mode", 5000, &c) != 0)
		return 2;
	mode = getenv("HSA_ENABLE_IPC_MODE_LEGACY");
	rocmmem_disconnect(c);
	if (!mode || strcmp(mode, "0") != 0)
		return 1;
	/* An explicit choice is the user's: left alone. */
	setenv("HSA_ENABLE_IPC_MODE_LEGACY", "1", 1);
	if (rocmmem_connect(d->sock, "ipc-mode", 5000, &c) != 0)
		return 2;
	mode = getenv("HSA_ENABLE_IPC_MODE_LEGACY");
	rocmmem_disconnect(c);
	return strcmp(mode, "1") == 0 ? 0 : 3;
}

static void test_hip_client_sets_ipc_mode(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct daemon_proc d;
	struct child ch;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	assert_int_equal(child_start(&ch, ipc_mode_child, &d), 0);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	stop(&d);
}

static void test_vmm_memory_survives_the_daemon(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 64 * MiB, .timeout_ms = 5000};
	struct daemon_proc d;
	struct gpu_report r;
	struct child ch;
	int status;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	job.socket = d.sock;
	client(&ch, &job, &r);
	assert_int_equal(r.result, 0);
	assert_int_equal(r.kind, ROCMMEM_HANDLE_VMM_FD);
	/* The daemon dies: the client's imported VMM handles keep the memory alive and usable. */
	kill(d.pid, SIGKILL);
	assert_int_equal(waitpid(d.pid, &status, 0), d.pid);
	d.pid = 0;
	assert_true(gpu_client_verify(&ch, &r));
	assert_int_equal(r.result, 0);
	assert_int_equal(r.step, GPU_STEP_DONE);
	/* Releasing cannot tell a dead daemon, but frees everything locally. */
	assert_int_equal(gpu_client_release(&ch), 52);
	harness_daemon_stop(&d);
}

/* vmm_restart: a VMM lease outlives a SIGKILL of its daemon and is taken over by the next. */
static void vmm_restart(const char *const *args, bool cuda, uint64_t size, int64_t chunks,
			const char *client_env)
{
	struct gpu_job job = {.size = size, .timeout_ms = 5000, .cuda = cuda};
	struct daemon_proc d;
	struct gpu_report r;
	struct facts f;
	struct child ch;

	start(&d, args);
	job.socket = d.sock;
	/* The client alone may get a runtime of its own (set while it forks). */
	if (client_env)
		env(client_env, NULL);
	client(&ch, &job, &r);
	if (client_env) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)strcspn(client_env, "="), client_env);
		unsetenv(name);
	}
	assert_int_equal(r.result, 0);
	assert_int_equal(r.kind, ROCMMEM_HANDLE_VMM_FD);
	assert_int_equal(r.chunks, chunks);
	kill(d.pid, SIGKILL);
	assert_int_equal(waitpid(d.pid, NULL, 0), d.pid);
	d.pid = 0;
	if (harness_daemon_restart(&d, args) != 0)
		fail_msg("rocmmemd did not start again");
	/* The client reconnects, re-declares the lease (its chunks exported from the imported
	 * handles, or the fds it kept) and its memory is intact and usable. */
	assert_true(gpu_client_reconnect(&ch, &r));
	if (r.result != 0)
		fail_msg("after the restart, step %lld: %s", (long long)r.step,
			 rocmmem_strerror((int)r.result));
	assert_true(harness_log_wait(&d, "took over lease", HARNESS_WAIT_MS));
	facts(&d, 0, &f);
	assert_int_equal(f.leased, size);
	/* Released through the new daemon, which frees what it imported. */
	assert_int_equal(gpu_client_release(&ch), 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	stop(&d);
}

static void test_hip_vmm_lease_survives_a_restart(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	vmm_restart(args, false, 64 * MiB, 1, NULL);
	/* A runtime that cannot export imported handles: the client kept the fds. */
	vmm_restart(args, false, 32 * MiB, 1, "FAKEHIP_FAIL=hipMemExportToShareableHandle=*");
}

static void test_cuda_chunked_lease_survives_a_restart(void **state)
{
	static const char *const args[] = {"--backend", "cuda", "--budget", "1G", NULL};

	(void)state;
	/* Two chunks (the single piece fails), re-declared as two fds. */
	env("ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_DEVICES=4G",
	    "FAKECUDA_FAIL=cuMemCreate=2", NULL);
	vmm_restart(args, true, 96 * MiB, 2, NULL);
}

static void test_hip_device_lost(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 8 * MiB};
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 8 * MiB};
	struct daemon_proc d;
	struct gpu_report r;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	struct child ch;
	struct facts f;
	char path[128];
	int fd;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	client_ok(&d, false, 0, 8 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	snprintf(path, sizeof(path), "%s/lost-hip-0", state_dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	job.socket = d.sock;
	client(&ch, &job, &r);
	assert_int_equal(r.step, GPU_STEP_ACQUIRE);
	assert_int_equal(r.result, -ENODEV);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	/* Marked unusable: later requests fail at once, everything else keeps working. */
	facts(&d, 0, &f);
	assert_string_not_equal(f.state, "ok");
	c = harness_connect(&d, "after-loss");
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -ENODEV);
	assert_non_null(strstr(rocmmem_last_error(), "unusable"));
	rocmmem_disconnect(c);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	unlink(path);
	stop(&d);
}

static void test_hip_multi_gpu(void **state)
{
	static const char *const args[] = {"--backend", "hip", NULL};
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 2, .size = 8 * MiB};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	struct facts f0, f1;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G,8G", "FAKEHIP_INTEGRATED=0,1",
	    NULL);
	start(&d, args);
	facts(&d, 0, &f0);
	facts(&d, 1, &f1);
	assert_int_equal(f0.ndevices, 2);
	assert_string_equal(f0.pci, "0000:03:00.0");
	assert_string_equal(f1.pci, "0000:04:00.0");
	assert_int_equal(f0.integrated, 0);
	assert_int_equal(f1.integrated, 1);
	/* Default budgets: a discrete card keeps 512 MiB (5%, at least 512 MiB) aside. */
	assert_int_equal(f0.budget, 2 * GiB - 512 * MiB);
	assert_true(f1.budget > 0 && f1.budget < 8 * GiB);
	/* Each device is its own accounting domain; the lease lands where it was asked. */
	client_ok(&d, false, 1, 64 * MiB, ROCMMEM_HANDLE_VMM_FD, 1);
	c = harness_connect(&d, "wrong-device");
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -ENODEV);
	req.device = 0;
	req.size = 4 * GiB;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -E2BIG);
	rocmmem_disconnect(c);
	stop(&d);
}

/*
 * keeps_current is a host computing on device 0 of its own (a PyTorch thread): a lease on
 * device 1, imported and released by librocmmem on the same thread, leaves device 0 (HIP) or
 * device 0's context (CUDA) current. Exit 0, or the step that went wrong.
 */
static int keeps_current(void *arg, int in, int out)
{
	const char *sock = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 1, .size = 8 * MiB};
	bool cuda = getenv("ROCMMEM_CUDA_LIBRARY") != NULL;
	struct hipapi hip;
	struct cuapi cu;
	cuapi_ctx_t ctx0 = NULL, now = NULL;
	cuapi_device_t dev0;
	rocmmem_client *c;
	rocmmem_lease *l;
	char why[256];
	int device = -1;

	(void)in;
	(void)out;
	if (cuda) {
		if (cuapi_load(&cu, why, sizeof(why)) != 0 || cu.cuDeviceGet(&dev0, 0) != 0 ||
		    cu.cuDevicePrimaryCtxRetain(&ctx0, dev0) != 0 || cu.cuCtxSetCurrent(ctx0) != 0)
			return 10;
	} else if (hipapi_load(&hip, why, sizeof(why)) != 0 || hip.hipSetDevice(0) != 0) {
		return 10;
	}
	if (rocmmem_connect(sock, "keeps-current", 5000, &c) != 0)
		return 11;
	if (rocmmem_lease_acquire(c, &req, &l) != 0)
		return 12;
	if (cuda ? cu.cuCtxGetCurrent(&now) != 0 || now != ctx0
		 : hip.hipGetDevice(&device) != 0 || device != 0)
		return 13; /* the import left device 1 current */
	if (rocmmem_lease_release(l) != 0)
		return 14;
	if (cuda ? cu.cuCtxGetCurrent(&now) != 0 || now != ctx0
		 : hip.hipGetDevice(&device) != 0 || device != 0)
		return 15; /* the release did */
	rocmmem_disconnect(c);
	return 0;
}

static void test_current_device_is_kept(void **state)
{
	static const char *const hip_args[] = {"--backend", "hip", NULL};
	static const char *const cuda_args[] = {"--backend", "cuda", NULL};
	struct daemon_proc d;
	struct child ch;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G,2G", NULL);
	start(&d, hip_args);
	assert_int_equal(child_start(&ch, keeps_current, d.sock), 0);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	stop(&d);
	unsetenv("ROCMMEM_HIP_LIBRARY");
	env("ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_DEVICES=2G,2G", NULL);
	start(&d, cuda_args);
	assert_int_equal(child_start(&ch, keeps_current, d.sock), 0);
	assert_int_equal(child_wait(&ch, HARNESS_WAIT_MS), 0);
	stop(&d);
}

static void test_hip_soname_search(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	struct daemon_proc d;
	struct facts f;

	(void)state;
	/* No override: the loader's own search finds libamdhip64.so.6 on LD_LIBRARY_PATH. */
	env("FAKEHIP_DEVICES=2G", "LD_LIBRARY_PATH=" FAKEHIP_SEARCH_DIR_V6, NULL);
	start(&d, args);
	facts(&d, 0, &f);
	assert_string_equal(f.sharing, "vmm-fd");
	assert_true(harness_log_wait(&d, "libamdhip64.so.6", HARNESS_WAIT_MS));
	stop(&d);
	unsetenv("LD_LIBRARY_PATH");
}

static void test_missing_or_unusable_runtime(void **state)
{
	static const char *const hip[] = {"--backend", "hip", NULL};
	static const char *const cuda[] = {"--backend", "cuda", NULL};

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=/nonexistent/libamdhip64.so", NULL);
	start_fails(hip, 1, "Could not open the hip backend");
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_VERSION=40500000", NULL);
	start_fails(hip, 1, "older than 5.0");
	env("FAKEHIP_VERSION=60200000", "FAKEHIP_FAIL=hipInit=*", NULL);
	start_fails(hip, 1, "hipInit failed");
	env("FAKEHIP_FAIL=", "FAKEHIP_DEVICES=", NULL);
	start_fails(hip, 1, "no usable GPU");
	env("ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_VMM=0", NULL);
	start_fails(cuda, 1, "can share memory");
}

static void test_auto_prefers_hip_then_cuda_then_host(void **state)
{
	static const char *const args[] = {"--backend", "auto", "--budget", "1G", NULL};
	struct daemon_proc d;
	rocmmem_client *c;

	(void)state;
	env("ROCMMEM_HIP_LIBRARY=/nonexistent/libamdhip64.so",
	    "ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_DEVICES=2G", NULL);
	start(&d, args);
	c = harness_connect(&d, "auto");
	assert_string_equal(rocmmem_client_backend(c), "cuda");
	rocmmem_disconnect(c);
	assert_true(harness_log_wait(&d, "backend hip unavailable", HARNESS_WAIT_MS));
	stop(&d);
	env("ROCMMEM_CUDA_LIBRARY=/nonexistent/libcuda.so.1", NULL);
	start(&d, args);
	c = harness_connect(&d, "auto");
	assert_string_equal(rocmmem_client_backend(c), "host");
	rocmmem_disconnect(c);
	assert_true(harness_log_wait(&d, "backend cuda unavailable", HARNESS_WAIT_MS));
	stop(&d);
}

static void test_cuda_two_clients(void **state)
{
	static const char *const args[] = {"--backend", "cuda", "--budget", "1G", NULL};
	struct gpu_job job = {.size = 64 * MiB, .cuda = true};
	struct gpu_report r1, r2;
	struct child c1, c2;
	struct daemon_proc d;
	struct facts f;

	(void)state;
	env("ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_DEVICES=4G", NULL);
	start(&d, args);
	facts(&d, 0, &f);
	assert_string_equal(f.sharing, "vmm-fd");
	assert_string_equal(f.pci, "0000:41:00.0");
	assert_string_equal(f.name, "Fake NVIDIA H100");
	job.socket = d.sock;
	client(&c1, &job, &r1);
	client(&c2, &job, &r2);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_int_equal(r1.kind, ROCMMEM_HANDLE_VMM_FD);
	wait_runtime_free(&d, 0, 4 * GiB - 128 * MiB, 4 * GiB - 128 * MiB, &f);
	assert_int_equal(gpu_client_release(&c1), 0);
	/* One holder killed, the other released: both reclaimed. */
	child_kill(&c2);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	wait_runtime_free(&d, 0, 4 * GiB, 4 * GiB, &f);
	stop(&d);
}

static void test_cuda_chunked_lease(void **state)
{
	static const char *const args[] = {"--backend", "cuda", "--budget", "1G", NULL};
	struct daemon_proc d;

	(void)state;
	/* Call 1 is the start-up probe; the single piece (2) fails: two chunks, no trim (CUDA
	 * caches nothing). */
	env("ROCMMEM_CUDA_LIBRARY=" FAKECUDA_PATH, "FAKECUDA_DEVICES=4G",
	    "FAKECUDA_FAIL=cuMemCreate=2", NULL);
	start(&d, args);
	client_ok(&d, true, 0, 96 * MiB, ROCMMEM_HANDLE_VMM_FD, 2);
	stop(&d);
}

static void test_hip_telemetry_in_status(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "1G", NULL};
	char root[TREE_PATH_MAX], dev[512];
	rocmmem_client *c;
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v = NULL;
	struct daemon_proc d;
	long end;

	(void)state;
	/* The card the stand-in runtime reports, as sysfs would show it (no rocm-smi here). */
	tree_create(root);
	tree_pci_device(root, "0000:03:00.0", "amdgpu", dev, sizeof(dev));
	tree_card(root, "card0", dev);
	tree_amdgpu_memory(root, dev, 2 * GiB, 300 * MiB, 256 * MiB, 10 * MiB, 16 * GiB, 64 * MiB);
	tree_dev_write(root, dev, "gpu_busy_percent", "42\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp1_input", "51000\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp1_label", "edge\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/power1_average", "87500000\n");
	/* KFD's per-process counters: this test process (a client) and one outside rocmmemd. */
	tree_kfd_node(root, 1, 41000, 0, (3 << 8) | (0 << 3) | 0);
	tree_kfd_vram(root, getpid(), 41000, "8388608\n");
	tree_kfd_vram(root, 4242, 41000, "1073741824\n");
	env("ROCMMEM_HIP_LIBRARY=" FAKEHIP_PATH, "FAKEHIP_DEVICES=2G", NULL);
	start(&d, args);
	c = harness_connect(&d, "telemetry");
	/* Sampled off the event loop every second: poll until the first reading is in. */
	for (end = harness_now_ms() + HARNESS_WAIT_MS; harness_now_ms() < end; usleep(20000)) {
		rocmmem_status_free(st);
		assert_int_equal(rocmmem_status_get(c, &st), 0);
		v = rocmmem_status_device(st, 0);
		if (v->telemetry_source[0])
			break;
	}
	assert_string_equal(v->telemetry_source, "sysfs");
	assert_true(v->valid & ROCMMEM_DEVICE_HAS_VRAM);
	assert_int_equal(v->vram_total_bytes, 2 * GiB);
	assert_int_equal(v->vram_used_bytes, 300 * MiB);
	assert_int_equal(v->gtt_total_bytes, 16 * GiB);
	assert_int_equal(v->temperature_mc, 51000);
	assert_int_equal(v->power_mw, 87500);
	assert_int_equal(v->busy_percent, 42);
	/* Largest first; the outsider is named as such. */
	assert_int_equal(rocmmem_status_process_count(st, 0), 2);
	assert_int_equal(rocmmem_status_process(st, 0, 0)->pid, 4242);
	assert_int_equal(rocmmem_status_process(st, 0, 0)->vram_bytes, GiB);
	assert_false(rocmmem_status_process(st, 0, 0)->client);
	assert_int_equal(rocmmem_status_process(st, 0, 1)->pid, getpid());
	assert_true(rocmmem_status_process(st, 0, 1)->client);
	assert_null(rocmmem_status_process(st, 0, 2));
	assert_null(rocmmem_status_process(st, 5, 0));
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	assert_true(harness_log_wait(&d, "device telemetry from sysfs", HARNESS_WAIT_MS));
	stop(&d);
	tree_destroy(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hip_vmm_two_clients, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_version_ladder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_forced_sharing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_chunked_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_export_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_external_usage, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_trim_returns_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_pipelined_trims, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_kill9_reclaims, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vmm_memory_survives_the_daemon, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_vmm_lease_survives_a_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_chunked_lease_survives_a_restart, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_hip_client_sets_ipc_mode, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_device_lost, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_multi_gpu, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_current_device_is_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_soname_search, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_or_unusable_runtime, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_auto_prefers_hip_then_cuda_then_host, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_two_clients, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_chunked_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_telemetry_in_status, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
