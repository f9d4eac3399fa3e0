/* SPDX-License-Identifier: MIT */
/* real_rocm.c: Debian's real ROCm 5.2.3 runtime, loaded through the daemon's own search. */
/*
 * scripts/rocm-runtime.sh unpacks libamdhip64.so.5, libhsa-runtime64.so.1 and
 * librocm_smi64.so.1 (with what they need) into the build tree, without installing them. This
 * program puts that tree on LD_LIBRARY_PATH and runs again, so that it and every daemon it
 * starts find the libraries through the dynamic loader's own search, as on a machine with the
 * packages installed: the SONAME search of common/gpu/hip_api.c and
 * daemon/platform/telemetry/smi.c, with nothing forcing a path. Every function the HIP backend and
 * the rocm-smi source look up must resolve, or be one that appeared after 5.2.3 and is optional;
 * without /dev/kfd the runtime's own error must reach the daemon's log, `--backend hip` must exit 1
 * with it, and
 * `--backend auto` must fall back to host memory and say why. Skipped (77) when the runtime
 * could not be unpacked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
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

#include "harness.h"
#include "hip_api.h"
#include "platform/telemetry/rsmi_api.h"
#include "platform/telemetry/registry.h"

#define HIP_DIR ROCM_RUNTIME_DIR "/usr/lib/x86_64-linux-gnu"
#define SMI_DIR ROCM_RUNTIME_DIR "/usr/lib"

/* What HIP 5.2.3 lacks of what the backend looks up: dma-buf export came with 6.0. */
static const char *const hip_after_523[] = {"hipMemGetHandleForAddressRange"};
/* What rocm-smi-lib 5.2.3 lacks of what telemetry looks up. */
static const char *const smi_after_523[] = {"rsmi_dev_current_socket_power_get"};

/* A GPU's kernel driver: with it the runtime would find a device, and the no-device cases
 * do not apply. */
static bool have_kfd(void)
{
	return access("/dev/kfd", F_OK) == 0;
}

static bool listed(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* loaded_from fails unless the library handle was loaded from dir (the unpacked tree). */
static void loaded_from(void *lib, const char *dir)
{
	struct link_map *map = NULL;

	assert_int_equal(dlinfo(lib, RTLD_DI_LINKMAP, &map), 0);
	if (strncmp(map->l_name, dir, strlen(dir)) != 0)
		fail_msg("loaded %s, not the runtime unpacked in %s", map->l_name, dir);
	print_message("loaded %s\n", map->l_name);
}

/*
 * check_symbols looks each function up the way the loaders do: a required one must resolve;
 * one that does not must be optional and listed as newer than 5.2.3, and every listed one
 * must indeed be missing (the list says exactly what 5.2.3 lacks).
 */
static void check_symbols(void *lib, const char *const *names, const int *required, size_t n,
			  const char *const *newer, size_t n_newer)
{
	size_t missing = 0;

	for (size_t i = 0; i < n; i++) {
		bool found = dlsym(lib, names[i]) != NULL;

		if (found && listed(names[i], newer, n_newer))
			fail_msg("%s is there: it was expected only after 5.2.3", names[i]);
		if (found)
			continue;
		if (required[i])
			fail_msg("the required function %s does not resolve", names[i]);
		if (!listed(names[i], newer, n_newer))
			fail_msg("%s does not resolve and is not known to be newer than 5.2.3",
				 names[i]);
		print_message("%s: missing in 5.2.3, optional\n", names[i]);
		missing++;
	}
	assert_int_equal(missing, n_newer);
}

#define HIP_NAME(name, required, ret, params) #name,
#define HIP_REQUIRED(name, required, ret, params) required,
#define HIP_FILL(name, required, ret, params) *(void **)&api.name = dlsym(lib, #name);

/*
 * Every function of HIPAPI_FUNCTIONS resolves in the real libamdhip64.so.5 but dma-buf export;
 * so at 5.2 the sharing ladder has neither VMM fds (6.2) nor dma-buf and falls to IPC handles,
 * whose functions are all there.
 */
static void test_hip_functions(void **state)
{
	static const char *const names[] = {HIPAPI_FUNCTIONS(HIP_NAME)};
	static const int required[] = {HIPAPI_FUNCTIONS(HIP_REQUIRED)};
	struct hipapi api;
	void *lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);

	(void)state;
	if (!lib)
		fail_msg("libamdhip64.so.5 does not load: %s", dlerror());
	loaded_from(lib, HIP_DIR);
	check_symbols(lib, names, required, sizeof(names) / sizeof(names[0]), hip_after_523,
		      sizeof(hip_after_523) / sizeof(hip_after_523[0]));
	memset(&api, 0, sizeof(api));
	HIPAPI_FUNCTIONS(HIP_FILL)
	api.runtime_version = HIPAPI_VERSION(5, 2);
	assert_false(hipapi_has_vmm_fd(&api));
	assert_false(hipapi_has_dmabuf(&api));
	assert_non_null(api.hipIpcGetMemHandle);
	assert_non_null(api.hipIpcOpenMemHandle);
	assert_non_null(api.hipIpcCloseMemHandle);
}

/*
 * hipapi_load, the backend's loader, finds the runtime by its SONAME, resolves what it
 * requires and calls hipInit: without a kernel driver that fails with the runtime's own error,
 * named by the runtime's own hipGetErrorString.
 */
static void test_hip_loader_reports_the_runtime_error(void **state)
{
	struct hipapi api;
	char why[256] = "";
	int rc;

	(void)state;
	if (have_kfd())
		skip();
	rc = hipapi_load(&api, why, sizeof(why));
	print_message("hipapi_load: %d: %s\n", rc, why);
	assert_int_equal(rc, -ENODEV);
	assert_non_null(strstr(why, "hipInit failed: hipErrorInvalidDevice (101)"));
	/* It stays loaded (an initialised runtime is never closed): from the unpacked tree. */
	{
		void *lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);

		assert_non_null(lib);
		loaded_from(lib, HIP_DIR);
		dlclose(lib);
	}
}

#define SMI_NAME(name, required, ret, params) #name,
#define SMI_REQUIRED(name, required, ret, params) required,

/*
 * librocm_smi64.so.1 has every function telemetry looks up but socket power (6.x; telemetry
 * then reads average power); the source opens it through its SONAME search and, with no GPU
 * in sysfs, reports rsmi_init's own error and passes on to the sysfs reader.
 */
static void test_smi(void **state)
{
	static const char *const names[] = {RSMIAPI_FUNCTIONS(SMI_NAME)};
	static const int required[] = {RSMIAPI_FUNCTIONS(SMI_REQUIRED)};
	struct telemetry *t = NULL;
	char why[512] = "", root[] = "/tmp/rocmmem-realsmi-XXXXXX";
	void *lib = dlopen("librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
	int rc;

	(void)state;
	if (!lib)
		fail_msg("librocm_smi64.so.1 does not load: %s", dlerror());
	loaded_from(lib, SMI_DIR);
	check_symbols(lib, names, required, sizeof(names) / sizeof(names[0]), smi_after_523,
		      sizeof(smi_after_523) / sizeof(smi_after_523[0]));
	dlclose(lib);
	if (have_kfd() || access("/sys/class/drm", F_OK) == 0) {
		print_message("this machine has a DRM tree: rocm-smi may initialise here\n");
		return;
	}
	/* An empty sysfs for the reader that comes after rocm-smi: nothing to read there either. */
	assert_non_null(mkdtemp(root));
	setenv("ROCMMEM_SYSFS_ROOT", root, 1);
	rc = telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why));
	unsetenv("ROCMMEM_SYSFS_ROOT");
	rmdir(root);
	print_message("telemetry_open: %d: %s\n", rc, why);
	assert_true(rc < 0);
	assert_null(t);
	assert_non_null(strstr(why, "rocm-smi: rsmi_init failed: An error occurred during "
				    "initialization"));
	assert_non_null(strstr(why, "(8)"));
	assert_non_null(strstr(why, "; sysfs: "));
}

/* run_daemon runs rocmmemd with args to its exit (up to HARNESS_WAIT_MS); returns its status. */
static int run_daemon(struct daemon_proc *d, const char *const *args)
{
	const char *argv[16] = {harness_daemon_bin(), "--socket", d->sock, "--config", "/dev/null"};
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	int n = 5, status = 0, log;
	pid_t pid, got;

	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(log >= 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(log, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		execv(argv[0], (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	close(log);
	while ((got = waitpid(pid, &status, WNOHANG)) == 0 && harness_now_ms() < end)
		usleep(10000);
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("rocmmemd %s did not exit in %d ms", args[1], HARNESS_WAIT_MS);
	}
	return status;
}

/* Naming the hip backend makes its failure fatal: exit 1, with the runtime's error logged. */
static void test_daemon_hip_refuses(void **state)
{
	static const char *const args[] = {"--backend", "hip", NULL};
	struct daemon_proc d;
	int status;

	(void)state;
	if (have_kfd())
		skip();
	assert_int_equal(harness_daemon_dir(&d, "rocmmem-realhip"), 0);
	status = run_daemon(&d, args);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	assert_true(harness_log_contains(&d, "Could not open the hip backend: hipInit failed: "
					     "hipErrorInvalidDevice (101)"));
	harness_remove_dir(d.dir);
}

/* auto passes over the real runtime, says why, and serves host memory. */
static void test_daemon_auto_falls_back(void **state)
{
	static const char *const args[] = {"--backend", "auto", NULL};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_status *st = NULL;

	(void)state;
	if (have_kfd())
		skip();
	assert_int_equal(harness_daemon_start(&d, args), 0);
	assert_true(harness_log_wait(&d,
				     "backend hip unavailable: hipInit failed: "
				     "hipErrorInvalidDevice (101)",
				     HARNESS_WAIT_MS));
	assert_true(harness_log_wait(&d, "using the host backend (chosen by --backend auto)",
				     HARNESS_WAIT_MS));
	c = harness_connect(&d, "real-rocm");
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_string_equal(rocmmem_status_daemon(st)->backend, "host");
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* with_runtime_on_the_path runs this program again with the unpacked tree searched first and
 * nothing forcing a library, unless it already runs so. Returns only when it does. */
static void with_runtime_on_the_path(char **argv)
{
	static const char *const forcing[] = {"ROCMMEM_HIP_LIBRARY", "ROCMMEM_ROCM_SMI_LIBRARY",
					      "ROCM_PATH", "HIP_PATH"};
	const char *old = getenv("LD_LIBRARY_PATH");
	char path[4096];

	if (old && strncmp(old, HIP_DIR ":" SMI_DIR, strlen(HIP_DIR ":" SMI_DIR)) == 0)
		return;
	snprintf(path, sizeof(path), "%s:%s%s%s", HIP_DIR, SMI_DIR, old && *old ? ":" : "",
		 old && *old ? old : "");
	setenv("LD_LIBRARY_PATH", path, 1);
	for (size_t i = 0; i < sizeof(forcing) / sizeof(forcing[0]); i++)
		unsetenv(forcing[i]);
	execv("/proc/self/exe", argv);
	perror("real_rocm: exec");
	exit(1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hip_functions),
	    cmocka_unit_test(test_hip_loader_reports_the_runtime_error),
	    cmocka_unit_test(test_smi),
	    cmocka_unit_test(test_daemon_hip_refuses),
	    cmocka_unit_test(test_daemon_auto_falls_back),
	};

	(void)argc;
	if (access(HIP_DIR "/libamdhip64.so.5", F_OK) != 0 ||
	    access(SMI_DIR "/librocm_smi64.so.1", F_OK) != 0) {
		fprintf(stderr,
			"SKIP: Debian's ROCm runtime is not unpacked in %s "
			"(scripts/rocm-runtime.sh does it; it needs apt)\n",
			ROCM_RUNTIME_DIR);
		return 77;
	}
	with_runtime_on_the_path(argv);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
