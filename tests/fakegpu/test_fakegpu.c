/* SPDX-License-Identifier: MIT */
/* test_fakegpu.c: the fake HIP runtime and CUDA driver, loaded through rocmmem's own loaders. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda_api.h"
#include "fakegpu_paths.h"
#include "hip_api.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define GRAN (2 * MiB)
#define SEGV_STATUS (128 + SIGSEGV)
#define SKIP_STATUS 77

/* The library as loaded by the test process (children load their own). */
static struct hipapi hip;
static struct cuapi cu;
static char state_dir[64];

static const char *const fake_env[] = {
    "FAKEHIP_VERSION",	"FAKEHIP_DEVICES",     "FAKEHIP_INTEGRATED", "FAKEHIP_VMM",
    "FAKEHIP_DMABUF",	"FAKEHIP_GRANULARITY", "FAKEHIP_FAIL",	     "FAKECUDA_VERSION",
    "FAKECUDA_DEVICES", "FAKECUDA_INTEGRATED", "FAKECUDA_VMM",	     "FAKECUDA_GRANULARITY",
    "FAKECUDA_FAIL",	"FAKEGPU_STATE_DIR",
};

/* ---- Helpers of the test process ---- */

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fake_env) / sizeof(fake_env[0]); i++)
		unsetenv(fake_env[i]);
	setenv(HIPAPI_LIBRARY_ENV, FAKEHIP_PATH, 1);
	setenv(CUAPI_LIBRARY_ENV, FAKECUDA_PATH, 1);
	return 0;
}

/*
 * drop_fake unloads a fake completely, references leaked by failed loads included: the loaders
 * keep an initialised runtime loaded for good, but each test wants the fake to start afresh and
 * read the environment it set (the fake reads it once per process, and again after dlopen).
 */
static void drop_fake(const char *path)
{
	void *lib;

	for (int i = 0; i < 16 && (lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD)); i++) {
		dlclose(lib);
		dlclose(lib);
	}
	if (dlopen(path, RTLD_NOW | RTLD_NOLOAD))
		fail_msg("%s stays loaded", path);
}

static void remove_state_dir(void)
{
	DIR *d;
	struct dirent *e;
	char path[512];

	if (!state_dir[0])
		return;
	d = opendir(state_dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", state_dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(state_dir);
	state_dir[0] = '\0';
}

static int teardown(void **state)
{
	(void)state;
	hipapi_unload(&hip);
	cuapi_unload(&cu);
	drop_fake(FAKEHIP_PATH);
	drop_fake(FAKECUDA_PATH);
	remove_state_dir();
	return 0;
}

static void make_state_dir(void)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/fakegpu-test-XXXXXX");
	assert_non_null(mkdtemp(state_dir));
	setenv("FAKEGPU_STATE_DIR", state_dir, 1);
}

static void touch_state(const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", state_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
}

static void set_version(const char *var, int version)
{
	char text[16];

	snprintf(text, sizeof(text), "%d", version);
	setenv(var, text, 1);
}

static void load_hip(int version)
{
	char why[256];
	int rc;

	set_version("FAKEHIP_VERSION", version);
	rc = hipapi_load(&hip, why, sizeof(why));
	if (rc)
		fail_msg("hipapi_load: %d: %s", rc, why);
}

static void unload_hip(void)
{
	hipapi_unload(&hip);
	drop_fake(FAKEHIP_PATH);
}

static void load_cuda(void)
{
	char why[256];
	int rc = cuapi_load(&cu, why, sizeof(why));

	if (rc)
		fail_msg("cuapi_load: %d: %s", rc, why);
}

static void unload_cuda(void)
{
	cuapi_unload(&cu);
	drop_fake(FAKECUDA_PATH);
}

/* cuda_context makes device dev's primary context current on this thread. */
static cuapi_ctx_t cuda_context(const struct cuapi *api, int dev)
{
	cuapi_ctx_t ctx = NULL;

	if (api->cuDevicePrimaryCtxRetain(&ctx, dev) || api->cuCtxSetCurrent(ctx))
		return NULL;
	return ctx;
}

static struct hipapi_alloc_prop hip_prop(int dev)
{
	struct hipapi_alloc_prop prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = HIPAPI_MEM_ALLOCATION_PINNED;
	prop.requested_handle_type = HIPAPI_MEM_HANDLE_POSIX_FD;
	prop.location.type = HIPAPI_MEM_LOCATION_DEVICE;
	prop.location.id = dev;
	return prop;
}

static struct cuapi_alloc_prop cuda_prop(int dev)
{
	struct cuapi_alloc_prop prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CUAPI_MEM_ALLOCATION_PINNED;
	prop.requested_handle_types = CUAPI_MEM_HANDLE_POSIX_FD;
	prop.location.type = CUAPI_MEM_LOCATION_DEVICE;
	prop.location.id = dev;
	return prop;
}

static hipapi_error_t hip_create(const struct hipapi *api, hipapi_mem_handle_t *h, size_t size)
{
	struct hipapi_alloc_prop prop = hip_prop(0);

	return api->hipMemCreate(h, size, &prop, 0);
}

static hipapi_error_t hip_access(const struct hipapi *api, void *va, size_t size)
{
	struct hipapi_access_desc desc = {{HIPAPI_MEM_LOCATION_DEVICE, 0},
					  HIPAPI_MEM_ACCESS_READWRITE};

	return api->hipMemSetAccess(va, size, &desc, 1);
}

/* hip_map reserves size bytes, maps h there and, with access, makes it readable and writable. */
static hipapi_error_t hip_map(const struct hipapi *api, hipapi_mem_handle_t h, size_t size,
			      bool access, void **va)
{
	hipapi_error_t err = api->hipMemAddressReserve(va, size, 0, NULL, 0);

	if (err)
		return err;
	err = api->hipMemMap(*va, size, 0, h, 0);
	if (!err && access)
		err = hip_access(api, *va, size);
	if (err)
		api->hipMemAddressFree(*va, size);
	return err;
}

static void hip_unmap(const struct hipapi *api, void *va, size_t size)
{
	assert_int_equal(api->hipMemUnmap(va, size), 0);
	assert_int_equal(api->hipMemAddressFree(va, size), 0);
}

static size_t hip_free_bytes(void)
{
	size_t free_bytes = 0, total = 0;

	assert_int_equal(hip.hipMemGetInfo(&free_bytes, &total), 0);
	return free_bytes;
}

static size_t cuda_free_bytes(void)
{
	size_t free_bytes = 0, total = 0;

	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), 0);
	return free_bytes;
}

static void fill(unsigned char *p, size_t size, unsigned seed)
{
	for (size_t i = 0; i < size; i++)
		p[i] = (unsigned char)((i * 7 + seed) % 251);
}

static bool filled(const unsigned char *p, size_t size, unsigned seed)
{
	for (size_t i = 0; i < size; i++)
		if (p[i] != (unsigned char)((i * 7 + seed) % 251))
			return false;
	return true;
}

/* ---- Child processes: plain checks, an exit status, never cmocka ---- */

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "child %s:%d: %s\n", __func__, __LINE__, #cond); \
			return 1;                                                        \
		}                                                                        \
	} while (0)

#define CHECK_EQ(a, b)                                                                        \
	do {                                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);                           \
		if (a_ != b_) {                                                               \
			fprintf(stderr, "child %s:%d: %s is %lld, expected %lld\n", __func__, \
				__LINE__, #a, a_, b_);                                        \
			return 1;                                                             \
		}                                                                             \
	} while (0)

typedef int (*child_fn)(int sock, void *arg);

/* spawn forks a child running fn with one end of a socket pair; the parent gets the other. */
static pid_t spawn(child_fn fn, void *arg, int *sock)
{
	int sv[2];
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		/* cmocka's handlers would turn an expected fault into a test report. */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		alarm(20);
		_exit(fn(sv[1], arg));
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* reap returns the child's exit status, or 128 + the signal that killed it. */
static int reap(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int send_msg(int sock, const void *data, size_t len, int fd)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {(void *)data, len};
	struct msghdr msg;

	memset(&msg, 0, sizeof(msg));
	memset(control, 0, sizeof(control));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd >= 0) {
		struct cmsghdr *c;

		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* recv_msg receives one message and, when fd is not NULL, the descriptor it carries. */
static ssize_t recv_msg(int sock, void *data, size_t len, int *fd)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {data, len};
	struct msghdr msg;
	struct cmsghdr *c;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (fd) {
		*fd = -1;
		c = CMSG_FIRSTHDR(&msg);
		if (n > 0 && c && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	}
	return n;
}

static int child_load_hip(struct hipapi *api)
{
	char why[256];
	int rc = hipapi_load(api, why, sizeof(why));

	if (rc)
		fprintf(stderr, "child: hipapi_load: %d: %s\n", rc, why);
	return rc;
}

static int child_load_cuda(struct cuapi *api)
{
	char why[256];
	int rc = cuapi_load(api, why, sizeof(why));

	if (rc)
		fprintf(stderr, "child: cuapi_load: %d: %s\n", rc, why);
	return rc;
}

/* child_touch reads one byte at arg: exits 0, or dies of SIGSEGV without access. */
static int child_touch(int sock, void *arg)
{
	(void)sock;
	return *(volatile unsigned char *)arg == 0x99 ? 2 : 0;
}

static int touch_status(void *va)
{
	int sock;
	pid_t pid = spawn(child_touch, va, &sock);

	close(sock);
	return reap(pid);
}

/* ---- HIP: identity, versions and gating ---- */

static void test_hip_identity(void **state)
{
	char text[64], why[256];
	size_t total = 0;
	int value = -1, count = 0;

	(void)state;
	setenv("FAKEHIP_DEVICES", "4G,16G", 1);
	setenv("FAKEHIP_INTEGRATED", "0,1", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_string_equal(hip.path, FAKEHIP_PATH);
	assert_int_equal(hip.runtime_version, 60200000);
	assert_int_equal(hip.hipGetDeviceCount(&count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(hip.hipDeviceGetName(text, sizeof(text), 0), 0);
	assert_string_equal(text, "Fake Radeon RX 7900 XTX");
	assert_int_equal(hip.hipDeviceGetName(text, sizeof(text), 1), 0);
	assert_string_equal(text, "Fake Radeon 8060S APU");
	assert_int_equal(hip.hipDeviceGetPCIBusId(text, sizeof(text), 1), 0);
	assert_string_equal(text, "0000:04:00.0");
	assert_int_equal(hip.hipDeviceTotalMem(&total, 1), 0);
	assert_int_equal(total, 16 * GiB);
	assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_INTEGRATED, 0), 0);
	assert_int_equal(value, 0);
	assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_INTEGRATED, 1), 0);
	assert_int_equal(value, 1);
	assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_MEMORY_POOLS_SUPPORTED, 0),
			 0);
	assert_int_equal(value, 1);
	assert_int_equal(hip.hipDeviceGetAttribute(&value, 12345, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_INTEGRATED, 2),
			 HIPAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(hip.hipSetDevice(2), HIPAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(hip.hipSetDevice(1), 0);
	assert_int_equal(hip_free_bytes(), 16 * GiB);
	assert_int_equal(hip.hipSetDevice(0), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB);
	assert_int_equal(hip.hipDeviceSynchronize(), 0);
	assert_int_equal(hip.hipMemcpy(text, text + 1, 1, 9), 21); /* invalid direction */
	/* From 6.0 hipGetErrorString describes; hipGetErrorName names. */
	assert_string_equal(hip.hipGetErrorString(HIPAPI_ERROR_OUT_OF_MEMORY), "out of memory");
	assert_string_equal(hipapi_strerror(&hip, HIPAPI_ERROR_NOT_SUPPORTED, text, sizeof(text)),
			    "operation not supported (801)");
	unload_hip();

	load_hip(HIPAPI_VERSION(5, 7));
	assert_string_equal(hip.hipGetErrorString(HIPAPI_ERROR_OUT_OF_MEMORY),
			    "hipErrorOutOfMemory");
	assert_string_equal(hip.hipGetErrorString(HIPAPI_ERROR_NO_DEVICE), "hipErrorNoDevice");
	unload_hip();

	/* No device, a runtime too old, a configuration the fake cannot use. */
	setenv("FAKEHIP_DEVICES", "", 1);
	assert_int_equal(hipapi_load(&hip, why, sizeof(why)), -ENODEV);
	unload_hip();
	setenv("FAKEHIP_DEVICES", "4G", 1);
	set_version("FAKEHIP_VERSION", 40500000);
	assert_int_equal(hipapi_load(&hip, why, sizeof(why)), -EPROTONOSUPPORT);
	unload_hip();
	setenv("FAKEHIP_DEVICES", "four", 1);
	assert_int_equal(hipapi_load(&hip, why, sizeof(why)), -ENODEV);
	unload_hip();
}

struct gate {
	int major, minor;
	int vmm_attr;  /* hipDeviceGetAttribute(89) */
	int create;    /* hipMemCreate */
	int export_fd; /* hipMemExportToShareableHandle */
	int dmabuf;    /* hipMemGetHandleForAddressRange */
};

static const struct gate gates[] = {
    {5, 7, HIPAPI_ERROR_INVALID_VALUE, HIPAPI_ERROR_NOT_SUPPORTED, HIPAPI_ERROR_NOT_SUPPORTED,
     HIPAPI_ERROR_NOT_SUPPORTED},
    {6, 0, 0, HIPAPI_ERROR_NOT_SUPPORTED, HIPAPI_ERROR_NOT_SUPPORTED, 0},
    {6, 1, 0, 0, HIPAPI_ERROR_NOT_SUPPORTED, 0},
    {6, 2, 0, 0, 0, 0},
    {7, 0, 0, 0, 0, 0},
    {7, 1, 0, 0, 0, 0},
};

/* check_import: hipapi_import_fd works, the other convention fails, both see one memory. */
static void check_import(int version, hipapi_mem_handle_t h, int fd)
{
	hipapi_mem_handle_t imported = NULL, wrong = NULL;
	unsigned char *a, *b;

	if (version >= HIPAPI_VERSION(7, 1))
		assert_int_equal(
		    hip.hipMemImportFromShareableHandle(&wrong, &fd, HIPAPI_MEM_HANDLE_POSIX_FD),
		    HIPAPI_ERROR_INVALID_VALUE);
	else
		assert_int_equal(hip.hipMemImportFromShareableHandle(&wrong, (void *)(intptr_t)fd,
								     HIPAPI_MEM_HANDLE_POSIX_FD),
				 HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hipapi_import_fd(&hip, &imported, fd), 0);
	assert_int_equal(hip_map(&hip, h, GRAN, true, (void **)&a), 0);
	assert_int_equal(hip_map(&hip, imported, GRAN, true, (void **)&b), 0);
	fill(a, GRAN, 3);
	assert_true(filled(b, GRAN, 3));
	hip_unmap(&hip, a, GRAN);
	hip_unmap(&hip, b, GRAN);
	assert_int_equal(hip.hipMemRelease(imported), 0);
}

static void test_hip_version_gating(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
		const struct gate *g = &gates[i];
		int version = HIPAPI_VERSION(g->major, g->minor), value = -1, fd = -1;
		hipapi_mem_handle_t h = NULL;
		void *p = NULL;

		print_message("HIP %d.%d\n", g->major, g->minor);
		load_hip(version);
		assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_VMM_SUPPORTED, 0),
				 g->vmm_attr);
		if (!g->vmm_attr)
			assert_int_equal(value, 1);
		assert_int_equal(hipapi_has_vmm_fd(&hip), version >= HIPAPI_VERSION(6, 2));
		assert_int_equal(hip_create(&hip, &h, GRAN), g->create);
		if (!g->create)
			assert_int_equal(hip.hipMemExportToShareableHandle(
					     &fd, h, HIPAPI_MEM_HANDLE_POSIX_FD, 0),
					 g->export_fd);
		if (!g->create && !g->export_fd) {
			assert_true(fd >= 0 && fd < 65536);
			check_import(version, h, fd);
			close(fd);
		}
		if (!g->create)
			assert_int_equal(hip.hipMemRelease(h), 0);
		assert_int_equal(hip.hipMalloc(&p, GRAN), 0);
		fd = -1;
		assert_int_equal(hip.hipMemGetHandleForAddressRange(
				     &fd, p, GRAN, HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0),
				 g->dmabuf);
		if (!g->dmabuf)
			close(fd);
		assert_int_equal(hip.hipFree(p), 0);
		unload_hip();
	}

	/* A GPU without virtual memory support, a runtime without dma-buf export. */
	setenv("FAKEHIP_VMM", "0", 1);
	setenv("FAKEHIP_DMABUF", "0", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	{
		struct hipapi_alloc_prop prop = hip_prop(0);
		hipapi_mem_handle_t h = NULL;
		size_t gran = 0;
		int value = -1, fd = -1;
		void *p = NULL;

		assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_VMM_SUPPORTED, 0),
				 0);
		assert_int_equal(value, 0);
		assert_int_equal(hip.hipMemGetAllocationGranularity(&gran, &prop, 0),
				 HIPAPI_ERROR_NOT_SUPPORTED);
		assert_int_equal(hip_create(&hip, &h, GRAN), HIPAPI_ERROR_NOT_SUPPORTED);
		assert_int_equal(hip.hipMalloc(&p, GRAN), 0);
		assert_int_equal(hip.hipMemGetHandleForAddressRange(
				     &fd, p, GRAN, HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0),
				 HIPAPI_ERROR_NOT_SUPPORTED);
		assert_int_equal(hip.hipFree(p), 0);
	}
	unload_hip();
}

/* ---- HIP: VMM ---- */

static int child_vmm_import(int sock, void *arg)
{
	struct hipapi api;
	hipapi_mem_handle_t h = NULL;
	size_t free_bytes = 0, total = 0;
	unsigned char *va = NULL;
	char byte;
	int fd = -1;

	(void)arg;
	CHECK(child_load_hip(&api) == 0);
	CHECK(recv_msg(sock, &byte, 1, &fd) == 1 && fd >= 0);
	CHECK_EQ(hipapi_import_fd(&api, &h, fd), 0);
	close(fd); /* the import holds its own reference */
	/* Imports are not counted again: only the exporter's 4 MiB are used. */
	CHECK_EQ(api.hipMemGetInfo(&free_bytes, &total), 0);
	CHECK_EQ(free_bytes, total - 4 * MiB);
	CHECK_EQ(hip_map(&api, h, 4 * MiB, true, (void **)&va), 0);
	CHECK(filled(va, 4 * MiB, 11));
	va[0] = 0x5a;
	CHECK(send_msg(sock, "d", 1, -1) == 0);
	CHECK_EQ(api.hipMemUnmap(va, 4 * MiB), 0);
	CHECK_EQ(api.hipMemAddressFree(va, 4 * MiB), 0);
	CHECK_EQ(api.hipMemRelease(h), 0);
	return 0;
}

static void test_hip_vmm_cross_process(void **state)
{
	static const int versions[] = {HIPAPI_VERSION(6, 2), HIPAPI_VERSION(7, 0),
				       HIPAPI_VERSION(7, 1)};

	(void)state;
	make_state_dir();
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		hipapi_mem_handle_t h = NULL;
		unsigned char *va = NULL;
		int fd = -1, sock;
		char byte = 0;
		pid_t pid;

		load_hip(versions[i]);
		assert_int_equal(hip_create(&hip, &h, 4 * MiB), 0);
		assert_int_equal(hip_map(&hip, h, 4 * MiB, true, (void **)&va), 0);
		fill(va, 4 * MiB, 11);
		assert_int_equal(
		    hip.hipMemExportToShareableHandle(&fd, h, HIPAPI_MEM_HANDLE_POSIX_FD, 0), 0);
		assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		pid = spawn(child_vmm_import, NULL, &sock);
		assert_int_equal(send_msg(sock, "f", 1, fd), 0);
		close(fd);
		assert_int_equal(recv_msg(sock, &byte, 1, NULL), 1);
		assert_int_equal(va[0], 0x5a); /* written by the child through its import */
		close(sock);
		assert_int_equal(reap(pid), 0);
		hip_unmap(&hip, va, 4 * MiB);
		assert_int_equal(hip.hipMemRelease(h), 0);
		assert_int_equal(hip_free_bytes(), 4 * GiB);
		unload_hip();
	}
}

static void test_hip_set_access_required(void **state)
{
	struct hipapi_access_desc desc = {{HIPAPI_MEM_LOCATION_DEVICE, 0},
					  HIPAPI_MEM_ACCESS_READWRITE};
	hipapi_mem_handle_t h = NULL, h2 = NULL;
	unsigned char *va = NULL;
	int on_stack = 0;

	(void)state;
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip_create(&hip, &h, GRAN), 0);
	assert_int_equal(hip_create(&hip, &h2, GRAN), 0);
	assert_int_equal(hip.hipMemAddressReserve((void **)&va, 2 * GRAN, 0, NULL, 0), 0);
	assert_int_equal((uintptr_t)va % GRAN, 0);
	assert_int_equal(hip.hipMemMap(va, GRAN, 0, h, 0), 0);
	assert_int_equal(touch_status(va), SEGV_STATUS);

	/* HIP 6.2's hipMemMap: offset 0, flags 0, the handle's whole size, inside a reservation. */
	assert_int_equal(hip.hipMemMap(va, GRAN, 0, h2, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(va + GRAN, GRAN, GRAN, h2, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(va + GRAN, GRAN, 0, h2, 1), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(va + GRAN, 2 * GRAN, 0, h2, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(va + 4096, GRAN, 0, h2, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(&on_stack, GRAN, 0, h2, 0), HIPAPI_ERROR_INVALID_VALUE);

	desc.flags = 1;
	assert_int_equal(hip.hipMemSetAccess(va, GRAN, &desc, 1), HIPAPI_ERROR_INVALID_VALUE);
	desc.flags = HIPAPI_MEM_ACCESS_READWRITE;
	desc.location.id = 5;
	assert_int_equal(hip.hipMemSetAccess(va, GRAN, &desc, 1), HIPAPI_ERROR_INVALID_DEVICE);
	desc.location.id = 0;
	assert_int_equal(hip.hipMemSetAccess(va, GRAN, &desc, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemSetAccess(va, 2 * GRAN, &desc, 1), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemSetAccess(va, GRAN, &desc, 1), 0);
	assert_int_equal(touch_status(va), 0);
	va[100] = 0x42;

	/* Unmapping keeps the reservation, without access again; the memory keeps its data. */
	assert_int_equal(hip.hipMemUnmap(va, GRAN), 0);
	assert_int_equal(touch_status(va), SEGV_STATUS);
	assert_int_equal(hip.hipMemUnmap(va, GRAN), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemMap(va, GRAN, 0, h, 0), 0);
	assert_int_equal(hip.hipMemMap(va + GRAN, GRAN, 0, h2, 0), 0);
	assert_int_equal(hip.hipMemSetAccess(va, 2 * GRAN, &desc, 1), 0);
	assert_int_equal(va[100], 0x42);
	va[GRAN] = 1;

	/* ROCm: released memory stays used while the reservation that mapped it lives. */
	assert_int_equal(hip_free_bytes(), 4 * GiB - 2 * GRAN);
	assert_int_equal(hip.hipMemRelease(h), 0);
	assert_int_equal(hip.hipMemRelease(h), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemUnmap(va, 2 * GRAN), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB - 2 * GRAN);
	assert_int_equal(hip.hipMemAddressFree(va, GRAN), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemAddressFree(va, 2 * GRAN), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB - GRAN);
	/* Never mapped since that reservation went: released at once. */
	assert_int_equal(hip.hipMemRelease(h2), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB);
	unload_hip();
}

static void test_hip_capacity(void **state)
{
	struct hipapi_alloc_prop prop = hip_prop(0);
	hipapi_mem_handle_t h = NULL;
	hipapi_mem_pool_t pool = NULL;
	void *big = NULL, *tiny = NULL, *again = NULL;
	size_t gran = 0;

	(void)state;
	setenv("FAKEHIP_DEVICES", "64M", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(
	    hip.hipMemGetAllocationGranularity(&gran, &prop, HIPAPI_MEM_GRANULARITY_RECOMMENDED),
	    0);
	assert_int_equal(gran, GRAN);
	assert_int_equal(hip.hipMalloc(&big, 40 * MiB), 0);
	assert_int_equal(hip_free_bytes(), 24 * MiB);
	assert_int_equal(hip.hipMalloc(&again, 30 * MiB), HIPAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(hip.hipMemCreate(&h, 32 * MiB, &prop, 0), HIPAPI_ERROR_OUT_OF_MEMORY);
	/* One byte takes a whole 2 MiB block. */
	assert_int_equal(hip.hipMalloc(&tiny, 1), 0);
	assert_int_equal(hip_free_bytes(), 22 * MiB);

	/* What hipMemCreate refuses. */
	assert_int_equal(hip.hipMemCreate(&h, 3 * MiB, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemCreate(&h, 0, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemCreate(&h, GRAN, &prop, 1), HIPAPI_ERROR_INVALID_VALUE);
	prop.location.id = 3;
	assert_int_equal(hip.hipMemCreate(&h, GRAN, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);
	prop = hip_prop(0);
	prop.type = 0;
	assert_int_equal(hip.hipMemCreate(&h, GRAN, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);
	prop = hip_prop(0);
	prop.requested_handle_type = 2;
	assert_int_equal(hip.hipMemCreate(&h, GRAN, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);
	prop = hip_prop(0);
	prop.location.type = 0;
	assert_int_equal(hip.hipMemCreate(&h, GRAN, &prop, 0), HIPAPI_ERROR_INVALID_VALUE);

	/* Freed blocks stay cached, counted as used, until the pool is trimmed. */
	assert_int_equal(hip.hipFree(big), 0);
	assert_int_equal(hip_free_bytes(), 22 * MiB);
	assert_int_equal(hip.hipMalloc(&again, 60 * MiB), HIPAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(hip.hipDeviceGetDefaultMemPool(&pool, 0), 0);
	assert_int_equal(hip.hipMemPoolTrimTo(pool, 0), 0);
	assert_int_equal(hip.hipMalloc(&again, 60 * MiB), 0);
	assert_int_equal(hip_free_bytes(), 2 * MiB);
	assert_int_equal(hip.hipFree(again), 0);
	assert_int_equal(hip.hipFree(tiny), 0);
	assert_int_equal(hip.hipFree(tiny), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipFree(NULL), 0);
	unload_hip();

	/* FAKEHIP_AUTOTRIM=1: the runtime empties its own cache before failing, as ROCr does. */
	setenv("FAKEHIP_AUTOTRIM", "1", 1);
	prop = hip_prop(0);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip.hipMalloc(&big, 40 * MiB), 0);
	assert_int_equal(hip.hipFree(big), 0);
	assert_int_equal(hip_free_bytes(), 24 * MiB);
	assert_int_equal(hip.hipMemCreate(&h, 32 * MiB, &prop, 0), 0);
	assert_int_equal(hip_free_bytes(), 32 * MiB);
	assert_int_equal(hip.hipMemRelease(h), 0);
	unload_hip();
	unsetenv("FAKEHIP_AUTOTRIM");

	/* HSA_DISABLE_FRAGMENT_ALLOCATOR=1 in the real runtime: 4 KiB blocks. */
	setenv("FAKEHIP_GRANULARITY", "4K", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip.hipMalloc(&tiny, 1), 0);
	assert_int_equal(hip_free_bytes(), 64 * MiB - 4096);
	prop = hip_prop(0);
	assert_int_equal(hip.hipMemGetAllocationGranularity(&gran, &prop, 0), 0);
	assert_int_equal(gran, 4096);
	assert_int_equal(hip.hipFree(tiny), 0);
	unload_hip();
}

static void test_hip_cache_trim(void **state)
{
	hipapi_mem_pool_t pool = NULL;
	void *a = NULL, *b = NULL, *ext = NULL;

	(void)state;
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip.hipMalloc(&a, 16 * MiB), 0);
	assert_int_equal(hip.hipMalloc(&b, 16 * MiB), 0);
	memset(a, 1, 16 * MiB);
	assert_int_equal(hip.hipFree(a), 0);
	assert_int_equal(hip.hipFree(b), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB - 32 * MiB);
	assert_int_equal(hip.hipDeviceGetDefaultMemPool(&pool, 1), HIPAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(hip.hipDeviceGetDefaultMemPool(&pool, 0), 0);
	assert_int_equal(hip.hipMemPoolTrimTo(&ext, 0), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemPoolTrimTo(pool, 8 * MiB), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB - 8 * MiB);
	assert_int_equal(hip.hipMemPoolTrimTo(pool, 0), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB);
	unload_hip();
}

/* ---- HIP: sharing with other processes ---- */

struct usage_msg {
	size_t free_seen;
};

static int child_external_user(int sock, void *arg)
{
	struct hipapi api;
	struct usage_msg msg;
	size_t free_bytes = 0, total = 0;
	hipapi_mem_handle_t h = NULL;
	void *p = NULL;
	char byte;

	(void)arg;
	CHECK(child_load_hip(&api) == 0);
	CHECK_EQ(api.hipMemGetInfo(&free_bytes, &total), 0);
	CHECK_EQ(free_bytes, GiB - 64 * MiB); /* the parent's */
	CHECK_EQ(api.hipMalloc(&p, 120 * MiB), 0);
	CHECK_EQ(hip_create(&api, &h, 8 * MiB), 0);
	CHECK_EQ(api.hipMemGetInfo(&free_bytes, &total), 0);
	msg.free_seen = free_bytes;
	CHECK(send_msg(sock, &msg, sizeof(msg), -1) == 0);
	CHECK(recv_msg(sock, &byte, 1, NULL) == 1);
	return 0; /* exits holding it all: the driver frees a dead process's memory */
}

static void test_hip_shared_accounting(void **state)
{
	struct usage_msg msg;
	void *mine = NULL, *more = NULL;
	hipapi_mem_pool_t pool = NULL;
	char path[512];
	int sock;
	pid_t pid;

	(void)state;
	make_state_dir();
	setenv("FAKEHIP_DEVICES", "1G", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip.hipMalloc(&mine, 64 * MiB), 0);
	snprintf(path, sizeof(path), "%s/hip-dev0", state_dir);
	assert_int_equal(access(path, F_OK), 0);

	pid = spawn(child_external_user, NULL, &sock);
	assert_int_equal(recv_msg(sock, &msg, sizeof(msg), NULL), (ssize_t)sizeof(msg));
	assert_int_equal(msg.free_seen, GiB - 192 * MiB);
	assert_int_equal(hip_free_bytes(), GiB - 192 * MiB);
	assert_int_equal(hip.hipMalloc(&more, 900 * MiB), HIPAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(send_msg(sock, "x", 1, -1), 0);
	close(sock);
	assert_int_equal(reap(pid), 0);
	assert_int_equal(hip_free_bytes(), GiB - 64 * MiB);
	assert_int_equal(hip.hipMalloc(&more, 900 * MiB), 0);
	assert_int_equal(hip.hipFree(more), 0);
	assert_int_equal(hip.hipFree(mine), 0);
	assert_int_equal(hip.hipDeviceGetDefaultMemPool(&pool, 0), 0);
	assert_int_equal(hip.hipMemPoolTrimTo(pool, 0), 0);
	assert_int_equal(hip_free_bytes(), GiB);
	unload_hip();
}

static int child_ipc_open(int sock, void *arg)
{
	int version = *(const int *)arg;
	unsigned int lazy = version >= HIPAPI_VERSION(6, 0) ? 1u : 0u;
	struct hipapi_ipc_handle handle, bad;
	struct hipapi api;
	unsigned char *base = NULL;

	CHECK(child_load_hip(&api) == 0);
	CHECK(recv_msg(sock, &handle, sizeof(handle), NULL) == (ssize_t)sizeof(handle));
	/* hipIpcMemLazyEnablePeerAccess: 0 up to 5.7, 1 from 6.0; the other value fails. */
	CHECK_EQ(api.hipIpcOpenMemHandle((void **)&base, handle, lazy ^ 1u),
		 HIPAPI_ERROR_INVALID_VALUE);
	CHECK_EQ(HIPAPI_IPC_LAZY_PEER_ACCESS(version), lazy);
	bad = handle;
	bad.reserved[0] ^= 0x55;
	CHECK_EQ(api.hipIpcOpenMemHandle((void **)&base, bad, lazy), HIPAPI_ERROR_INVALID_VALUE);
	CHECK_EQ(api.hipIpcOpenMemHandle((void **)&base, handle, lazy), 0);
	/* The base of the whole allocation, although the handle was taken 1 MiB in. */
	CHECK_EQ(base[0], 1);
	CHECK_EQ(base[MiB], 2);
	CHECK_EQ(base[3 * MiB + 7], 4);
	base[MiB + 5] = 0x77;
	CHECK_EQ(api.hipFree(base), HIPAPI_ERROR_INVALID_VALUE);
	CHECK_EQ(api.hipIpcCloseMemHandle(base), 0);
	CHECK_EQ(api.hipIpcCloseMemHandle(base), HIPAPI_ERROR_INVALID_VALUE);
	CHECK(send_msg(sock, "d", 1, -1) == 0);
	return 0;
}

/* child_ipc_stale: a handle to an allocation the exporter freed no longer opens. */
static int child_ipc_stale(int sock, void *arg)
{
	struct hipapi_ipc_handle handle;
	struct hipapi api;
	void *base = NULL;

	(void)arg;
	CHECK(child_load_hip(&api) == 0);
	CHECK(recv_msg(sock, &handle, sizeof(handle), NULL) == (ssize_t)sizeof(handle));
	CHECK_EQ(api.hipIpcOpenMemHandle(&base, handle, 1), HIPAPI_ERROR_INVALID_VALUE);
	return 0;
}

static void test_hip_ipc(void **state)
{
	static const int versions[] = {HIPAPI_VERSION(5, 7), HIPAPI_VERSION(6, 0),
				       HIPAPI_VERSION(7, 1)};

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		int version = versions[i], sock, on_stack = 0;
		struct hipapi_ipc_handle handle;
		unsigned char *base = NULL;
		void *opened = NULL;
		char byte = 0;
		pid_t pid;

		load_hip(version);
		assert_int_equal(hip.hipMalloc((void **)&base, 4 * MiB), 0);
		for (int m = 0; m < 4; m++)
			memset(base + (size_t)m * MiB, m + 1, MiB);
		assert_int_equal(hip.hipIpcGetMemHandle(&handle, &on_stack),
				 HIPAPI_ERROR_INVALID_VALUE);
		assert_int_equal(hip.hipIpcGetMemHandle(&handle, base + MiB), 0);
		/* The exporter cannot open its own handle. */
		assert_int_equal(
		    hip.hipIpcOpenMemHandle(&opened, handle, HIPAPI_IPC_LAZY_PEER_ACCESS(version)),
		    HIPAPI_ERROR_INVALID_VALUE);
		pid = spawn(child_ipc_open, &version, &sock);
		assert_int_equal(send_msg(sock, &handle, sizeof(handle), -1), 0);
		assert_int_equal(recv_msg(sock, &byte, 1, NULL), 1);
		close(sock);
		assert_int_equal(reap(pid), 0);
		assert_int_equal(base[MiB + 5], 0x77);
		assert_int_equal(hip.hipFree(base), 0);
		if (version == HIPAPI_VERSION(7, 1)) {
			/* The same size again, most likely under the same descriptor number. */
			assert_int_equal(hip.hipMalloc((void **)&base, 4 * MiB), 0);
			pid = spawn(child_ipc_stale, NULL, &sock);
			assert_int_equal(send_msg(sock, &handle, sizeof(handle), -1), 0);
			close(sock);
			assert_int_equal(reap(pid), 0);
			assert_int_equal(hip.hipFree(base), 0);
		}
		unload_hip();
	}
}

static int child_dmabuf_import(int sock, void *arg)
{
	struct hipapi_external_memory_handle_desc desc;
	struct hipapi_external_memory_buffer_desc buf;
	hipapi_external_memory_t mem = NULL;
	unsigned char *p = NULL;
	struct hipapi api;
	char byte;
	int fd = -1;

	(void)arg;
	CHECK(child_load_hip(&api) == 0);
	CHECK(hipapi_has_dmabuf(&api));
	CHECK(recv_msg(sock, &byte, 1, &fd) == 1 && fd >= 0);
	memset(&desc, 0, sizeof(desc));
	desc.type = HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD;
	desc.handle.fd = fd;
	desc.size = 4 * MiB;
	CHECK_EQ(api.hipImportExternalMemory(&mem, &desc), 0);
	memset(&buf, 0, sizeof(buf));
	buf.offset = MiB + 100; /* not page aligned */
	buf.size = MiB;
	CHECK_EQ(api.hipExternalMemoryGetMappedBuffer((void **)&p, mem, &buf), 0);
	for (size_t i = 0; i < 64; i++)
		CHECK_EQ(p[i], (unsigned char)(((MiB + 100 + i) * 7 + 5) % 251));
	p[1] = 0x42;
	buf.offset = 3 * MiB;
	buf.size = 2 * MiB; /* past the end */
	CHECK_EQ(api.hipExternalMemoryGetMappedBuffer((void **)&p, mem, &buf),
		 HIPAPI_ERROR_INVALID_VALUE);
	CHECK_EQ(api.hipDestroyExternalMemory(mem), 0);
	/* hipImportExternalMemory owned the fd: destroying the memory closed it. */
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
	CHECK(send_msg(sock, "d", 1, -1) == 0);
	return 0;
}

static void test_hip_dmabuf(void **state)
{
	struct hipapi_external_memory_handle_desc desc;
	struct hipapi_external_memory_buffer_desc buf;
	hipapi_external_memory_t mem = NULL;
	unsigned char *base = NULL, *p = NULL;
	int fd = -1, fd2 = -1, sock;
	char byte = 0;
	size_t before;
	pid_t pid;

	(void)state;
	load_hip(HIPAPI_VERSION(6, 2));
	assert_true(hipapi_has_dmabuf(&hip));
	assert_int_equal(hip.hipMalloc((void **)&base, 4 * MiB), 0);
	fill(base, 4 * MiB, 5);
	assert_int_equal(hip.hipMemGetHandleForAddressRange(&fd, base + MiB, MiB,
							    HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0),
			 HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemGetHandleForAddressRange(&fd, base, 4 * MiB, 2, 0),
			 HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipMemGetHandleForAddressRange(&fd, base, 4 * MiB,
							    HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0),
			 0);
	assert_int_equal(hip.hipMemGetHandleForAddressRange(&fd2, base, 4 * MiB,
							    HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0),
			 0);

	/* In another process, over a socket. */
	pid = spawn(child_dmabuf_import, NULL, &sock);
	assert_int_equal(send_msg(sock, "f", 1, fd), 0);
	close(fd);
	assert_int_equal(recv_msg(sock, &byte, 1, NULL), 1);
	close(sock);
	assert_int_equal(reap(pid), 0);
	assert_int_equal(base[MiB + 101], 0x42);

	/* Here: an imported buffer is no new memory, and hipFree does not cache it. */
	before = hip_free_bytes();
	memset(&desc, 0, sizeof(desc));
	desc.type = HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD;
	desc.handle.fd = fd2;
	desc.size = 8 * MiB;
	assert_int_equal(hip.hipImportExternalMemory(&mem, &desc), HIPAPI_ERROR_INVALID_VALUE);
	desc.size = 4 * MiB;
	assert_int_equal(hip.hipImportExternalMemory(&mem, &desc), 0);
	memset(&buf, 0, sizeof(buf));
	buf.size = 4 * MiB;
	assert_int_equal(hip.hipExternalMemoryGetMappedBuffer((void **)&p, mem, &buf), 0);
	assert_true(filled(p, MiB, 5));
	assert_int_equal(p[MiB + 101], 0x42);
	assert_int_equal(hip_free_bytes(), before);
	assert_int_equal(hip.hipDestroyExternalMemory(mem), 0);
	assert_int_equal(p[7], base[7]); /* mapped until hipFree */
	assert_int_equal(hip.hipFree(p), 0);
	assert_int_equal(hip_free_bytes(), before);
	assert_int_equal(hip.hipDestroyExternalMemory(mem), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipFree(base), 0);
	unload_hip();
}

/* ---- Failures: injected, and devices that disappear ---- */

static void test_hip_fail_injection(void **state)
{
	hipapi_mem_handle_t h[3] = {NULL, NULL, NULL};
	char text[64], why[256];
	void *p = NULL;
	int fd = -1;

	(void)state;
	setenv("FAKEHIP_FAIL",
	       "hipMemCreate=2,hipMemExportToShareableHandle=*,hipMalloc=1:100,"
	       "hipDeviceSynchronize=*:999",
	       1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip_create(&hip, &h[0], GRAN), 0);
	assert_int_equal(hip_create(&hip, &h[1], GRAN), HIPAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(hip_create(&hip, &h[2], GRAN), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(
		    hip.hipMemExportToShareableHandle(&fd, h[0], HIPAPI_MEM_HANDLE_POSIX_FD, 0),
		    HIPAPI_ERROR_NOT_SUPPORTED);
	assert_int_equal(hip.hipMalloc(&p, MiB), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipMalloc(&p, MiB), 0);
	assert_int_equal(hip.hipDeviceSynchronize(), 999);
	assert_string_equal(hipapi_strerror(&hip, 999, text, sizeof(text)), "unknown error (999)");
	assert_int_equal(hip.hipFree(p), 0);
	assert_int_equal(hip.hipMemRelease(h[0]), 0);
	assert_int_equal(hip.hipMemRelease(h[2]), 0);
	unload_hip();

	setenv("FAKEHIP_FAIL", "hipInit=1", 1);
	assert_int_equal(hipapi_load(&hip, why, sizeof(why)), -ENODEV);
	assert_non_null(strstr(why, "hipInit failed"));
	unload_hip();
	setenv("FAKEHIP_FAIL", "hipMalloc", 1); /* not a valid spec: the fake refuses to start */
	assert_int_equal(hipapi_load(&hip, why, sizeof(why)), -ENODEV);
	unload_hip();
}

static void test_hip_device_lost(void **state)
{
	struct hipapi_alloc_prop prop1 = hip_prop(1);
	hipapi_mem_handle_t h = NULL, h2 = NULL, imported = NULL;
	char name[64];
	size_t total = 0;
	void *p = NULL, *q = NULL, *va = NULL;
	int value = 0, fd = -1;

	(void)state;
	make_state_dir();
	setenv("FAKEHIP_DEVICES", "1G,1G", 1);
	load_hip(HIPAPI_VERSION(6, 2));
	assert_int_equal(hip_create(&hip, &h, GRAN), 0);
	assert_int_equal(hip.hipMemExportToShareableHandle(&fd, h, HIPAPI_MEM_HANDLE_POSIX_FD, 0),
			 0);
	assert_int_equal(hip.hipMalloc(&p, GRAN), 0);
	assert_int_equal(hip.hipMemAddressReserve(&va, GRAN, 0, NULL, 0), 0);

	touch_state("lost-hip-1");
	assert_int_equal(hip.hipDeviceGetAttribute(&value, HIPAPI_ATTR_INTEGRATED, 1),
			 HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipSetDevice(1), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipDeviceGetName(name, sizeof(name), 1), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipDeviceTotalMem(&total, 1), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipMemCreate(&h2, GRAN, &prop1, 0), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip_free_bytes(), GiB - 2 * GRAN); /* device 0 still works */

	touch_state("lost-hip-0");
	{
		size_t free_bytes, total_bytes;

		assert_int_equal(hip.hipMemGetInfo(&free_bytes, &total_bytes),
				 HIPAPI_ERROR_NO_DEVICE);
	}
	assert_int_equal(hip.hipMalloc(&q, GRAN), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip_create(&hip, &h2, GRAN), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hipapi_import_fd(&hip, &imported, fd), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipMemMap(va, GRAN, 0, h, 0), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipDeviceSynchronize(), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipInit(0), HIPAPI_ERROR_NO_DEVICE);
	/* Releasing still works and reports the loss. */
	assert_int_equal(hip.hipMemRelease(h), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipMemRelease(h), HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hip.hipFree(p), HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hip.hipMemAddressFree(va, GRAN), 0);
	close(fd);
	unload_hip();
}

/* ---- CUDA ---- */

static void test_cuda_basics(void **state)
{
	cuapi_result_t (*get_count)(int *);
	const char *text = NULL;
	char name[64];
	cuapi_ctx_t ctx = NULL;
	size_t free_bytes = 0, total = 0;
	unsigned char byte = 0;
	int value = -1, count = 0;
	void *lib;

	(void)state;
	/* Before cuInit, as the real driver: only the version and error strings work. */
	lib = dlopen(FAKECUDA_PATH, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(lib);
	*(void **)&get_count = dlsym(lib, "cuDeviceGetCount");
	assert_non_null(get_count);
	assert_int_equal(get_count(&count), CUAPI_ERROR_NOT_INITIALIZED);
	dlclose(lib);
	drop_fake(FAKECUDA_PATH);

	setenv("FAKECUDA_DEVICES", "80G,128G", 1);
	setenv("FAKECUDA_INTEGRATED", "0,1", 1);
	load_cuda();
	assert_string_equal(cu.path, FAKECUDA_PATH);
	assert_int_equal(cu.driver_version, 13000);
	assert_int_equal(cu.cuDeviceGetCount(&count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(cu.cuDeviceGet(&value, 1), 0);
	assert_int_equal(value, 1);
	assert_int_equal(cu.cuDeviceGet(&value, 2), CUAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(cu.cuDeviceGetName(name, sizeof(name), 0), 0);
	assert_string_equal(name, "Fake NVIDIA H100");
	assert_int_equal(cu.cuDeviceGetPCIBusId(name, sizeof(name), 1), 0);
	assert_string_equal(name, "0000:42:00.0");
	assert_int_equal(cu.cuDeviceTotalMem(&total, 1), 0);
	assert_int_equal(total, 128 * GiB);
	assert_int_equal(cu.cuDeviceGetAttribute(&value, CUAPI_ATTR_INTEGRATED, 1), 0);
	assert_int_equal(value, 1);
	assert_int_equal(cu.cuDeviceGetAttribute(&value, CUAPI_ATTR_VMM_SUPPORTED, 0), 0);
	assert_int_equal(value, 1);
	assert_int_equal(cu.cuDeviceGetAttribute(&value, CUAPI_ATTR_POSIX_FD_SUPPORTED, 0), 0);
	assert_int_equal(value, 1);
	assert_int_equal(cu.cuGetErrorString(CUAPI_ERROR_OUT_OF_MEMORY, &text), 0);
	assert_string_equal(text, "out of memory");
	assert_int_equal(cu.cuGetErrorString(123456, &text), CUAPI_ERROR_INVALID_VALUE);
	assert_null(text);

	/* No current context: the context-bound calls fail. */
	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), 201);
	assert_int_equal(cu.cuMemcpyHtoD(0x1000, &byte, 1), 201);
	assert_int_equal(cu.cuCtxSynchronize(), 201);
	assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 1), 0);
	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), 201);
	assert_int_equal(cu.cuCtxSetCurrent(ctx), 0);
	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), 0);
	assert_int_equal(free_bytes, 128 * GiB);
	assert_int_equal(total, 128 * GiB);
	assert_int_equal(cu.cuCtxSynchronize(), 0);
	assert_int_equal(cu.cuDevicePrimaryCtxRelease(1), 0);
	assert_int_equal(cu.cuDevicePrimaryCtxRelease(1), 201);
	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), 201);
	assert_int_equal(cu.cuCtxSetCurrent(ctx), 201);
	assert_int_equal(cu.cuCtxSetCurrent(NULL), 0);
	unload_cuda();

	setenv("FAKECUDA_VMM", "0", 1);
	load_cuda();
	{
		struct cuapi_alloc_prop prop = cuda_prop(0);
		cuapi_mem_handle_t h = 0;

		assert_int_equal(cu.cuDeviceGetAttribute(&value, CUAPI_ATTR_VMM_SUPPORTED, 0), 0);
		assert_int_equal(value, 0);
		assert_int_equal(cu.cuMemCreate(&h, GRAN, &prop, 0), CUAPI_ERROR_NOT_SUPPORTED);
	}
	unload_cuda();
}

struct cuda_child_arg {
	unsigned seed;
};

static int child_cuda_import(int sock, void *arg)
{
	const struct cuda_child_arg *a = arg;
	struct cuapi_access_desc desc = {{CUAPI_MEM_LOCATION_DEVICE, 0},
					 CUAPI_MEM_ACCESS_READWRITE};
	unsigned char check[256];
	cuapi_mem_handle_t h = 0, wrong = 0;
	cuapi_deviceptr_t va = 0;
	struct cuapi api;
	char byte;
	int fd = -1;

	CHECK(child_load_cuda(&api) == 0);
	CHECK(cuda_context(&api, 0) != NULL);
	CHECK(recv_msg(sock, &byte, 1, &fd) == 1 && fd >= 0);
	/* CUDA takes the fd value cast to a pointer, never a pointer to it. */
	CHECK_EQ(api.cuMemImportFromShareableHandle(&wrong, &fd, CUAPI_MEM_HANDLE_POSIX_FD),
		 CUAPI_ERROR_INVALID_VALUE);
	CHECK_EQ(
	    api.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CUAPI_MEM_HANDLE_POSIX_FD),
	    0);
	close(fd);
	CHECK_EQ(api.cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), 0);
	CHECK_EQ(api.cuMemMap(va, 4 * MiB, 0, h, 0), 0);
	CHECK_EQ(api.cuMemSetAccess(va, 4 * MiB, &desc, 1), 0);
	CHECK_EQ(api.cuMemcpyDtoH(check, va + MiB, sizeof(check)), 0);
	for (size_t i = 0; i < sizeof(check); i++)
		CHECK_EQ(check[i], (unsigned char)(((MiB + i) * 7 + a->seed) % 251));
	CHECK_EQ(api.cuMemsetD8(va, 0x33, 16), 0);
	CHECK(send_msg(sock, "d", 1, -1) == 0);
	CHECK_EQ(api.cuMemUnmap(va, 4 * MiB), 0);
	CHECK_EQ(api.cuMemAddressFree(va, 4 * MiB), 0);
	CHECK_EQ(api.cuMemRelease(h), 0);
	return 0;
}

static void test_cuda_vmm(void **state)
{
	struct cuapi_alloc_prop prop = cuda_prop(0);
	struct cuapi_access_desc desc = {{CUAPI_MEM_LOCATION_DEVICE, 0},
					 CUAPI_MEM_ACCESS_READWRITE};
	struct cuda_child_arg arg = {9};
	unsigned char *host_buf;
	cuapi_mem_handle_t h = 0;
	cuapi_deviceptr_t va = 0;
	size_t gran = 0;
	int fd = -1, sock;
	char byte = 0;
	pid_t pid;

	(void)state;
	load_cuda();
	assert_non_null(cuda_context(&cu, 0));
	assert_int_equal(cu.cuMemGetAllocationGranularity(&gran, &prop, 0), 0);
	assert_int_equal(gran, GRAN);
	assert_int_equal(cu.cuMemCreate(&h, 4 * MiB, &prop, 0), 0);
	assert_int_equal(cuda_free_bytes(), 4 * GiB - 4 * MiB);
	assert_int_equal(cu.cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), 0);
	assert_int_equal(cu.cuMemMap(va, 4 * MiB, 2 * MiB, h, 0), CUAPI_ERROR_INVALID_VALUE);
	assert_int_equal(cu.cuMemMap(va, 4 * MiB, 0, h, 0), 0);
	host_buf = malloc(4 * MiB);
	assert_non_null(host_buf);
	fill(host_buf, 4 * MiB, arg.seed);
	/* Mapped without access: the copy faults; outside any mapping: not device memory. */
	assert_int_equal(cu.cuMemcpyHtoD(va, host_buf, 4 * MiB), 700);
	assert_int_equal(cu.cuMemcpyHtoD(va + 4 * MiB, host_buf, 16), CUAPI_ERROR_INVALID_VALUE);
	assert_int_equal(cu.cuMemSetAccess(va, 4 * MiB, &desc, 1), 0);
	assert_int_equal(cu.cuMemcpyHtoD(va, host_buf, 4 * MiB), 0);
	assert_int_equal(cu.cuMemcpyHtoD(va + 4 * MiB - 8, host_buf, 16),
			 CUAPI_ERROR_INVALID_VALUE);

	assert_int_equal(cu.cuMemExportToShareableHandle(&fd, h, CUAPI_MEM_HANDLE_POSIX_FD, 0), 0);
	pid = spawn(child_cuda_import, &arg, &sock);
	assert_int_equal(send_msg(sock, "f", 1, fd), 0);
	close(fd);
	assert_int_equal(recv_msg(sock, &byte, 1, NULL), 1);
	close(sock);
	assert_int_equal(reap(pid), 0);
	memset(host_buf, 0, 16);
	assert_int_equal(cu.cuMemcpyDtoH(host_buf, va, 16), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(host_buf[i], 0x33);
	free(host_buf);

	/* CUDA frees released memory with its last mapping. */
	assert_int_equal(cu.cuMemRelease(h), 0);
	assert_int_equal(cuda_free_bytes(), 4 * GiB - 4 * MiB);
	assert_int_equal(cu.cuMemUnmap(va, 4 * MiB), 0);
	assert_int_equal(cuda_free_bytes(), 4 * GiB);
	assert_int_equal(cu.cuMemAddressFree(va, 8 * MiB), 0);
	unload_cuda();
}

static int child_cuda_user(int sock, void *arg)
{
	struct cuapi_alloc_prop prop = cuda_prop(0);
	cuapi_mem_handle_t h = 0;
	size_t free_bytes = 0, total = 0;
	struct cuapi api;
	char byte;

	(void)arg;
	CHECK(child_load_cuda(&api) == 0);
	CHECK(cuda_context(&api, 0) != NULL);
	CHECK_EQ(api.cuMemGetInfo(&free_bytes, &total), 0);
	CHECK_EQ(free_bytes, total - 2 * MiB);
	CHECK_EQ(api.cuMemCreate(&h, 4 * MiB, &prop, 0), 0);
	CHECK(send_msg(sock, "a", 1, -1) == 0);
	CHECK(recv_msg(sock, &byte, 1, NULL) == 1);
	return 0;
}

static void test_cuda_shared_accounting_and_failures(void **state)
{
	struct cuapi_alloc_prop prop = cuda_prop(0);
	cuapi_mem_handle_t h = 0, h2 = 0;
	size_t free_bytes, total;
	char byte = 0;
	int sock, value;
	pid_t pid;

	(void)state;
	make_state_dir();
	setenv("FAKECUDA_FAIL", "cuMemCreate=2,cuMemsetD8_v2=*:3", 1);
	load_cuda();
	assert_non_null(cuda_context(&cu, 0));
	assert_int_equal(cu.cuMemCreate(&h, 2 * MiB, &prop, 0), 0);
	assert_int_equal(cu.cuMemCreate(&h2, 2 * MiB, &prop, 0), CUAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(cu.cuMemsetD8(0, 0, 0), CUAPI_ERROR_NOT_INITIALIZED);

	pid = spawn(child_cuda_user, NULL, &sock);
	assert_int_equal(recv_msg(sock, &byte, 1, NULL), 1);
	assert_int_equal(cuda_free_bytes(), 4 * GiB - 6 * MiB);
	assert_int_equal(send_msg(sock, "x", 1, -1), 0);
	close(sock);
	assert_int_equal(reap(pid), 0);
	assert_int_equal(cuda_free_bytes(), 4 * GiB - 2 * MiB);

	/* The device disappears. */
	touch_state("lost-cuda-0");
	assert_int_equal(cu.cuMemGetInfo(&free_bytes, &total), CUAPI_ERROR_NO_DEVICE);
	assert_int_equal(cu.cuMemCreate(&h2, 2 * MiB, &prop, 0), CUAPI_ERROR_NO_DEVICE);
	assert_int_equal(cu.cuDeviceGetAttribute(&value, CUAPI_ATTR_INTEGRATED, 0),
			 CUAPI_ERROR_NO_DEVICE);
	assert_int_equal(cu.cuMemRelease(h), CUAPI_ERROR_NO_DEVICE);
	unload_cuda();
}

/* ---- Threads ---- */

static void *hammer(void *arg)
{
	struct hipapi_alloc_prop prop = hip_prop(0);
	long failures = 0;

	(void)arg;
	failures += hip.hipSetDevice(0) != 0;
	for (int i = 0; i < 100; i++) {
		hipapi_mem_handle_t h = NULL;
		unsigned char *p = NULL;

		if (hip.hipMalloc((void **)&p, GRAN)) {
			failures++;
			continue;
		}
		p[i] = (unsigned char)i;
		failures += hip.hipFree(p) != 0;
		failures += hip.hipMemCreate(&h, GRAN, &prop, 0) != 0;
		failures += h && hip.hipMemRelease(h) != 0;
	}
	return (void *)failures;
}

static void test_hip_threads(void **state)
{
	hipapi_mem_pool_t pool = NULL;
	pthread_t threads[4];

	(void)state;
	load_hip(HIPAPI_VERSION(6, 2));
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *failures = NULL;

		assert_int_equal(pthread_join(threads[i], &failures), 0);
		assert_null(failures);
	}
	assert_int_equal(hip_free_bytes(), 4 * GiB - 4 * 100 * GRAN); /* all of it cached */
	assert_int_equal(hip.hipDeviceGetDefaultMemPool(&pool, 0), 0);
	assert_int_equal(hip.hipMemPoolTrimTo(pool, 0), 0);
	assert_int_equal(hip_free_bytes(), 4 * GiB);
	unload_hip();
}

/* ---- Loading: SONAME search and exported symbols ---- */

/* soname_child runs in a re-executed test binary, LD_LIBRARY_PATH set before it started. */
static int soname_child(const char *kind, const char *expected)
{
	char why[256], name[64];

	if (!strcmp(kind, "hip")) {
		struct hipapi api;

		CHECK(child_load_hip(&api) == 0);
		CHECK_EQ(api.hipDeviceGetName(name, sizeof(name), 0), 0);
		if (strncmp(name, "Fake", 4))
			return SKIP_STATUS; /* a real runtime was found first */
		if (strcmp(api.path, expected)) {
			fprintf(stderr, "child: loaded %s, expected %s\n", api.path, expected);
			return 1;
		}
		return 0;
	}
	{
		struct cuapi api;

		CHECK(cuapi_load(&api, why, sizeof(why)) == 0);
		CHECK_EQ(api.cuDeviceGetName(name, sizeof(name), 0), 0);
		CHECK(strncmp(name, "Fake", 4) == 0);
		CHECK(strcmp(api.path, expected) == 0);
		return 0;
	}
}

static int run_search(const char *kind, const char *path, const char *expected)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("LD_LIBRARY_PATH", path, 1);
		unsetenv(HIPAPI_LIBRARY_ENV);
		unsetenv(CUAPI_LIBRARY_ENV);
		execl("/proc/self/exe", "test_fakegpu", "--search-child", kind, expected,
		      (char *)NULL);
		_exit(127);
	}
	return reap(pid);
}

static void test_soname_search(void **state)
{
	static const struct {
		const char *path, *expected;
	} cases[] = {
	    {FAKEHIP_SEARCH_DIR_V5, "libamdhip64.so.5"},
	    {FAKEHIP_SEARCH_DIR_V6, "libamdhip64.so.6"},
	    {FAKEHIP_SEARCH_DIR_V7, "libamdhip64.so.7"},
	    /* .so.7 is tried before .so.6 and .so.5. */
	    {FAKEHIP_SEARCH_DIR_V5 ":" FAKEHIP_SEARCH_DIR_V6 ":" FAKEHIP_SEARCH_DIR_V7,
	     "libamdhip64.so.7"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status = run_search("hip", cases[i].path, cases[i].expected);

		if (status == SKIP_STATUS)
			skip();
		assert_int_equal(status, 0);
	}
	assert_int_equal(run_search("cuda", FAKECUDA_DIR, "libcuda.so.1"), 0);
}

#define HIP_NAME(name, required, ret, params) #name,
#define CUDA_NAME(symbol, field, required, ret, params) #symbol,

static void check_exports(const char *path, const char *const *names, size_t count)
{
	static const char *const hidden[] = {"fake_begin", "fake_end",	   "fake_charge",
					     "fake_memfd", "fake_vmm_map", "fake_teardown"};
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	assert_non_null(lib);
	for (size_t i = 0; i < count; i++)
		if (!dlsym(lib, names[i]))
			fail_msg("%s does not export %s", path, names[i]);
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		if (dlsym(lib, hidden[i]))
			fail_msg("%s exports its internal %s", path, hidden[i]);
	dlclose(lib);
}

static void test_exports(void **state)
{
	static const char *const hip_names[] = {HIPAPI_FUNCTIONS(HIP_NAME)};
	static const char *const cuda_names[] = {CUAPI_FUNCTIONS(CUDA_NAME)};

	(void)state;
	check_exports(FAKEHIP_PATH, hip_names, sizeof(hip_names) / sizeof(hip_names[0]));
	check_exports(FAKECUDA_PATH, cuda_names, sizeof(cuda_names) / sizeof(cuda_names[0]));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_exports, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_identity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_version_gating, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_vmm_cross_process, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_set_access_required, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_capacity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_cache_trim, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_shared_accounting, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_ipc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_dmabuf, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_fail_injection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_device_lost, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hip_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_basics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_vmm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cuda_shared_accounting_and_failures, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_soname_search, setup, teardown),
	};

	if (argc == 4 && !strcmp(argv[1], "--search-child"))
		return soname_child(argv[2], argv[3]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
