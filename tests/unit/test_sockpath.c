/* SPDX-License-Identifier: MIT */
/* test_sockpath.c: unit tests of common/sockpath: the socket path of daemon and clients. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sockpath.h"

/* The unprivileged user the non-root cases run as (nobody). */
#define NOBODY 65534

/* Exit statuses of the child that resolves as an unprivileged user. */
enum {
	CHILD_OK = 0,
	CHILD_NO_DROP = 10, /* could not become nobody */
	CHILD_BAD_RC = 11,
	CHILD_BAD_PATH = 12,
	CHILD_STILL_ROOT = 13,
};

struct resolve_case {
	const char *what;
	const char *xdg; /* $XDG_RUNTIME_DIR, NULL: unset */
	const char *env; /* $ROCMMEM_SOCKET, NULL: unset */
	enum sockpath_role role;
	int want_rc;
	const char *want_path; /* when want_rc is 0 */
};

static int clear_env(void **state)
{
	(void)state;
	unsetenv(SOCKPATH_ENV);
	unsetenv("XDG_RUNTIME_DIR");
	return 0;
}

/* make_path returns a heap string "/" followed by n - 1 'a's: an absolute path of n bytes. */
static char *make_path(size_t n)
{
	char *p = malloc(n + 1);

	assert_non_null(p);
	memset(p, 'a', n);
	p[0] = '/';
	p[n] = '\0';
	return p;
}

static void expect_resolve(const char *explicit_path, enum sockpath_role role, int want_rc,
			   const char *want_path)
{
	char out[256];
	int rc;

	memset(out, 0, sizeof(out));
	rc = sockpath_resolve(explicit_path, role, out, sizeof(out));
	assert_int_equal(rc, want_rc);
	if (want_rc == 0)
		assert_string_equal(out, want_path);
}

static void test_explicit_wins(void **state)
{
	(void)state;
	setenv(SOCKPATH_ENV, "/tmp/from-env.sock", 1);
	setenv("XDG_RUNTIME_DIR", "/tmp", 1);
	expect_resolve("/tmp/explicit.sock", SOCKPATH_DAEMON, 0, "/tmp/explicit.sock");
	expect_resolve("/tmp/explicit.sock", SOCKPATH_CLIENT, 0, "/tmp/explicit.sock");
	/* Relative paths are taken as given. */
	expect_resolve("relative.sock", SOCKPATH_CLIENT, 0, "relative.sock");
}

static void test_env_next(void **state)
{
	(void)state;
	setenv(SOCKPATH_ENV, "/tmp/from-env.sock", 1);
	expect_resolve(NULL, SOCKPATH_DAEMON, 0, "/tmp/from-env.sock");
	expect_resolve(NULL, SOCKPATH_CLIENT, 0, "/tmp/from-env.sock");
	/* An empty --socket is no choice at all: the environment decides. */
	expect_resolve("", SOCKPATH_DAEMON, 0, "/tmp/from-env.sock");
	expect_resolve("", SOCKPATH_CLIENT, 0, "/tmp/from-env.sock");
}

static void test_root_default(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	expect_resolve(NULL, SOCKPATH_DAEMON, 0, SOCKPATH_SYSTEM);
	expect_resolve(NULL, SOCKPATH_CLIENT, 0, SOCKPATH_SYSTEM);
	expect_resolve("", SOCKPATH_CLIENT, 0, SOCKPATH_SYSTEM);
	/* An empty $ROCMMEM_SOCKET is unset; root ignores $XDG_RUNTIME_DIR. */
	setenv(SOCKPATH_ENV, "", 1);
	setenv("XDG_RUNTIME_DIR", "/tmp", 1);
	expect_resolve(NULL, SOCKPATH_DAEMON, 0, SOCKPATH_SYSTEM);
	expect_resolve("", SOCKPATH_CLIENT, 0, SOCKPATH_SYSTEM);
}

static void test_too_long(void **state)
{
	char *fits = make_path(sizeof(((struct sockaddr_un *)0)->sun_path) - 1); /* 107 bytes */
	char *too_long = make_path(sizeof(((struct sockaddr_un *)0)->sun_path)); /* 108 bytes */
	char *huge = make_path(5000);
	char out[256];
	size_t n;

	(void)state;
	expect_resolve(fits, SOCKPATH_DAEMON, 0, fits);
	expect_resolve(too_long, SOCKPATH_DAEMON, -ENAMETOOLONG, NULL);
	expect_resolve(too_long, SOCKPATH_CLIENT, -ENAMETOOLONG, NULL);
	expect_resolve(huge, SOCKPATH_CLIENT, -ENAMETOOLONG, NULL);
	setenv(SOCKPATH_ENV, too_long, 1);
	expect_resolve(NULL, SOCKPATH_CLIENT, -ENAMETOOLONG, NULL);
	expect_resolve(fits, SOCKPATH_CLIENT, 0, fits);

	/* The output buffer is a limit too. */
	n = strlen("/tmp/x.sock");
	assert_int_equal(sockpath_resolve("/tmp/x.sock", SOCKPATH_CLIENT, out, n), -ENAMETOOLONG);
	assert_int_equal(sockpath_resolve("/tmp/x.sock", SOCKPATH_CLIENT, out, n + 1), 0);
	assert_string_equal(out, "/tmp/x.sock");
	free(fits);
	free(too_long);
	free(huge);
}

/* resolve_in_child runs in the child as nobody; returns a CHILD_* status. */
static int resolve_in_child(const struct resolve_case *c)
{
	char out[256];
	int rc;

	if (geteuid() == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) != 0)
			return CHILD_NO_DROP;
	}
	if (geteuid() == 0)
		return CHILD_STILL_ROOT;
	if (c->xdg)
		setenv("XDG_RUNTIME_DIR", c->xdg, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
	if (c->env)
		setenv(SOCKPATH_ENV, c->env, 1);
	else
		unsetenv(SOCKPATH_ENV);
	memset(out, 0, sizeof(out));
	rc = sockpath_resolve(NULL, c->role, out, sizeof(out));
	if (rc != c->want_rc) {
		fprintf(stderr, "%s: rc %d, expected %d (path '%s')\n", c->what, rc, c->want_rc,
			out);
		return CHILD_BAD_RC;
	}
	if (rc == 0 && strcmp(out, c->want_path) != 0) {
		fprintf(stderr, "%s: path '%s', expected '%s'\n", c->what, out, c->want_path);
		return CHILD_BAD_PATH;
	}
	return CHILD_OK;
}

/* run_unprivileged resolves c in a child process that dropped root, and checks its result. */
static void run_unprivileged(const struct resolve_case *c)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(resolve_in_child(c));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status))
		fail_msg("%s: child died with status %#x", c->what, status);
	if (WEXITSTATUS(status) != CHILD_OK)
		fail_msg("%s: child exited with %d", c->what, WEXITSTATUS(status));
}

static void test_nonroot_daemon(void **state)
{
	char *long_dir = make_path(100);
	const struct resolve_case cases[] = {
	    {"daemon with XDG", "/some/dir", NULL, SOCKPATH_DAEMON, 0, "/some/dir/rocmmemd.sock"},
	    {"daemon without XDG", NULL, NULL, SOCKPATH_DAEMON, -ENOENT, NULL},
	    {"daemon with empty XDG", "", NULL, SOCKPATH_DAEMON, -ENOENT, NULL},
	    {"daemon with relative XDG", "run/user", NULL, SOCKPATH_DAEMON, -ENOENT, NULL},
	    {"daemon with long XDG", long_dir, NULL, SOCKPATH_DAEMON, -ENAMETOOLONG, NULL},
	    {"daemon with env", "/some/dir", "/tmp/e.sock", SOCKPATH_DAEMON, 0, "/tmp/e.sock"},
	    {"daemon with empty env", "/some/dir", "", SOCKPATH_DAEMON, 0,
	     "/some/dir/rocmmemd.sock"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_unprivileged(&cases[i]);
	free(long_dir);
}

/* bind_socket creates a listening-capable Unix socket file at path; returns its fd. */
static int bind_socket(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(addr.sun_path));
	strcpy(addr.sun_path, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

static void test_nonroot_client(void **state)
{
	char with_sock[] = "/tmp/rocmmem-sockpath-XXXXXX";
	char with_file[] = "/tmp/rocmmem-sockpath-XXXXXX";
	char empty[] = "/tmp/rocmmem-sockpath-XXXXXX";
	char hidden[] = "/tmp/rocmmem-sockpath-XXXXXX";
	char sock_path[128], file_path[128], hidden_path[128];
	int sock, hidden_sock, file;

	(void)state;
	assert_non_null(mkdtemp(with_sock));
	assert_non_null(mkdtemp(with_file));
	assert_non_null(mkdtemp(empty));
	assert_non_null(mkdtemp(hidden));
	/* Readable by nobody, except `hidden`, which nobody may not search. */
	assert_int_equal(chmod(with_sock, 0777), 0);
	assert_int_equal(chmod(with_file, 0777), 0);
	assert_int_equal(chmod(empty, 0777), 0);
	assert_int_equal(chmod(hidden, 0700), 0);
	snprintf(sock_path, sizeof(sock_path), "%s/%s", with_sock, SOCKPATH_USER_NAME);
	snprintf(file_path, sizeof(file_path), "%s/%s", with_file, SOCKPATH_USER_NAME);
	snprintf(hidden_path, sizeof(hidden_path), "%s/%s", hidden, SOCKPATH_USER_NAME);
	sock = bind_socket(sock_path);
	hidden_sock = bind_socket(hidden_path);
	file = open(file_path, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
	assert_true(file >= 0);
	close(file);

	{
		const struct resolve_case cases[] = {
		    {"client with a user socket", with_sock, NULL, SOCKPATH_CLIENT, 0, sock_path},
		    {"client with a regular file", with_file, NULL, SOCKPATH_CLIENT, 0,
		     SOCKPATH_SYSTEM},
		    {"client with no user socket", empty, NULL, SOCKPATH_CLIENT, 0,
		     SOCKPATH_SYSTEM},
		    {"client with XDG unset", NULL, NULL, SOCKPATH_CLIENT, 0, SOCKPATH_SYSTEM},
		    {"client with relative XDG", "tmp", NULL, SOCKPATH_CLIENT, 0, SOCKPATH_SYSTEM},
		    {"client with env", with_sock, "/tmp/e.sock", SOCKPATH_CLIENT, 0,
		     "/tmp/e.sock"},
		    /* Last: only meaningful when the child is not the directory's owner. */
		    {"client with a socket it cannot see", hidden, NULL, SOCKPATH_CLIENT, 0,
		     SOCKPATH_SYSTEM},
		};
		size_t n = sizeof(cases) / sizeof(cases[0]) - (geteuid() == 0 ? 0 : 1);

		for (size_t i = 0; i < n; i++)
			run_unprivileged(&cases[i]);
	}

	close(sock);
	close(hidden_sock);
	unlink(sock_path);
	unlink(file_path);
	unlink(hidden_path);
	rmdir(with_sock);
	rmdir(with_file);
	rmdir(empty);
	rmdir(hidden);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_explicit_wins, clear_env),
	    cmocka_unit_test_setup(test_env_next, clear_env),
	    cmocka_unit_test_setup(test_root_default, clear_env),
	    cmocka_unit_test_setup(test_too_long, clear_env),
	    cmocka_unit_test_setup(test_nonroot_daemon, clear_env),
	    cmocka_unit_test_setup(test_nonroot_client, clear_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
