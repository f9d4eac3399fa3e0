/* SPDX-License-Identifier: MIT */
/*
 * paths.c: owns the files a root daemon creates on paths other users can reach (issue 13,
 * F2): socket directories it must refuse, a symlink renamed over the socket while the daemon
 * starts again and again, and links planted at the lock, state and metrics files. The daemon
 * runs as root, the attacker as uid 65534. Needs root (exit 77 otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define NOBODY 65534
/* The race's bounds: starts and seconds (ROCMMEM_RACE_STARTS, ROCMMEM_RACE_SECONDS). */
#define STARTS 300
#define RACE_SECONDS 20

static char top[64];	/* a 0755 directory of root's holding each case's files */
static char victim[96]; /* a root-owned 0600 file the attacker would like to open up */

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* victim_intact says whether the victim is still root's, 0600, a regular file. */
static bool victim_intact(void)
{
	struct stat st;

	return lstat(victim, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
	       st.st_uid == 0 && st.st_gid == 0;
}

static void make_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(chown(path, uid, gid), 0);
	assert_int_equal(chmod(path, mode), 0); /* after chown, which may clear bits */
}

static bool log_has(const char *log, const char *text)
{
	char buf[65536];
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/*
 * start_once runs rocmmemd on sock as root (log truncated first) until it says it listens or
 * exits. Returns 1 when it came up (it is then stopped, and must exit 0), 0 when it refused
 * to start (a non-zero exit), and fails the test when it does neither within 10 s.
 */
static int start_once(const char *sock, const char *const *extra, const char *log)
{
	const char *argv[32];
	long end = harness_now_ms() + 10000;
	int n = 0, status, logfd;
	pid_t pid;

	argv[n++] = ROCMMEMD_BIN;
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n++] = "--config";
	argv[n++] = "/dev/null";
	argv[n++] = "--backend";
	argv[n++] = "host";
	argv[n++] = "--budget";
	argv[n++] = "16M";
	for (int i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(logfd >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		unsetenv("ROCMMEM_SOCKET");
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	while (harness_now_ms() < end) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
			return 0;
		}
		if (log_has(log, "listening on")) {
			kill(pid, SIGTERM);
			assert_int_equal(waitpid(pid, &status, 0), pid);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				fail_msg("rocmmemd did not stop cleanly (status %d)", status);
			return 1;
		}
		sleep_ms(2);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fail_msg("rocmmemd neither listened nor exited within 10 s");
	return -1;
}

/* become_nobody drops to uid and gid 65534 with the supplementary groups given. */
static void become_nobody(const gid_t *groups, size_t n)
{
	if (setgroups(n, groups) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) != 0)
		_exit(99);
}

/* as_nobody runs fn(arg) in a child as uid 65534 and returns its exit status (0: done). */
static int as_nobody(int (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		become_nobody(NULL, 0);
		_exit(fn(arg));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int plant_link(const char *at)
{
	return symlink(victim, at) == 0 ? 0 : 1;
}

static int plant_file(const char *at)
{
	int fd = open(at, O_WRONLY | O_CREAT | O_EXCL, 0666);

	return fd >= 0 && close(fd) == 0 ? 0 : 1;
}

static int setup(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	snprintf(top, sizeof(top), "/tmp/rocmmem-paths-XXXXXX");
	if (!mkdtemp(top) || chmod(top, 0755) != 0)
		return -1;
	snprintf(victim, sizeof(victim), "%s/victim", top);
	return plant_file(victim) == 0 && chmod(victim, 0600) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (top[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* One case's socket directory, made with mode, owner and group. */
static void case_dir(const char *name, mode_t mode, uid_t uid, gid_t gid, char *dir, size_t len,
		     char *sock, size_t sock_len)
{
	snprintf(dir, len, "%s/%s", top, name);
	make_dir(dir, mode, uid, gid);
	snprintf(sock, sock_len, "%s/rocmmemd.sock", dir);
}

/* Refused: world-writable without the sticky bit, group-writable by a stranger's group, owned
 * by another user. Nothing is created there; the message names the directory and the fix. */
static void test_unsafe_dirs_refused(void **state)
{
	static const struct {
		const char *name;
		mode_t mode;
		uid_t uid;
		gid_t gid;
		const char *says;
	} cases[] = {
	    {"world", 0777, 0, 0, "without the sticky bit"},
	    {"group", 0770, 0, NOBODY, "writable by the members of its group"},
	    {"owned", 0755, NOBODY, NOBODY, "belongs to uid 65534"},
	};
	char dir[128], sock[160], log[128], fix[192];

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(log, sizeof(log), "%s/refused.log", top);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stat st;

		case_dir(cases[i].name, cases[i].mode, cases[i].uid, cases[i].gid, dir, sizeof(dir),
			 sock, sizeof(sock));
		assert_int_equal(start_once(sock, NULL, log), 0);
		if (!log_has(log, cases[i].says) || !log_has(log, dir))
			fail_msg("%s: the refusal does not say '%s' about %s", cases[i].name,
				 cases[i].says, dir);
		if (i < 2) {
			snprintf(fix, sizeof(fix), "chmod %s %s", i == 0 ? "o-w" : "g-w", dir);
			assert_true(log_has(log, fix));
		}
		assert_int_equal(lstat(sock, &st), -1);
		snprintf(fix, sizeof(fix), "%s.lock", sock);
		assert_int_equal(lstat(fix, &st), -1);
	}
	/* World-writable with the sticky bit (like /tmp), and root's own: served. */
	case_dir("sticky", 01777, 0, 0, dir, sizeof(dir), sock, sizeof(sock));
	assert_int_equal(start_once(sock, NULL, log), 1);
	case_dir("rootgroup", 0775, 0, 0, dir, sizeof(dir), sock, sizeof(sock));
	assert_int_equal(start_once(sock, NULL, log), 1);
	assert_true(victim_intact());
}

/* What the attacker and the test share. */
struct race {
	volatile int stop;
	volatile unsigned long renamed; /* symlinks renamed over a live socket */
	volatile unsigned long tries;
};

/*
 * attacker loops as uid 65534 (with write access to the directory through its group), a
 * symlink to the victim always ready beside the socket: the moment the socket is there, one
 * rename puts the link in its place; a link of its own found at the socket's name is removed
 * so that the next start can bind.
 */
static void attacker(struct race *r, const char *dir, const char *sock)
{
	char link[192];
	struct stat st;

	snprintf(link, sizeof(link), "%s/.planted", dir);
	unlink(link);
	if (symlink(victim, link) != 0)
		_exit(98);
	while (!r->stop) {
		r->tries++;
		if (lstat(sock, &st) != 0)
			continue;
		if (S_ISSOCK(st.st_mode)) {
			if (rename(link, sock) == 0) {
				r->renamed++;
				if (symlink(victim, link) != 0)
					_exit(98);
			}
		} else if (S_ISLNK(st.st_mode)) {
			unlink(sock);
		}
	}
	_exit(0);
}

/*
 * F2 as found: a user who can write the socket's directory renames a symlink to a root-owned
 * 0600 file over the socket while the daemon starts, 300 times (or for 20 s). The old daemon
 * chmod-ed the path after bind, and so the victim: it became 0666 within 27 to 103 starts of
 * this test. Here the directory is root's and group-writable by root's group (allowed), the
 * attacker a member of that group: the victim's mode and owner never change.
 */
static void test_symlink_race(void **state)
{
	static const char *const extra[] = {
	    "--socket-mode", "0666", "--socket-group", "nogroup", "--restart-grace", "0", NULL};
	struct race *r =
	    mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char dir[128], sock[160], log[128];
	unsigned up = 0, refused = 0, replaced = 0, starts = 0;
	const char *env_starts = getenv("ROCMMEM_RACE_STARTS");
	const char *env_seconds = getenv("ROCMMEM_RACE_SECONDS");
	unsigned max_starts = env_starts ? (unsigned)strtoul(env_starts, NULL, 10) : STARTS;
	long begin = harness_now_ms(),
	     end = begin + 1000 * (env_seconds ? strtol(env_seconds, NULL, 10) : RACE_SECONDS);
	gid_t root_group = 0;
	pid_t pid;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_true(r != MAP_FAILED);
	memset((void *)r, 0, sizeof(*r));
	case_dir("race", 0775, 0, 0, dir, sizeof(dir), sock, sizeof(sock));
	snprintf(log, sizeof(log), "%s/race.log", top);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		become_nobody(&root_group, 1);
		attacker(r, dir, sock);
	}
	while (starts < max_starts && harness_now_ms() < end) {
		int rc = start_once(sock, extra, log);

		starts++;
		up += rc == 1;
		refused += rc == 0;
		replaced += log_has(log, "something replaced it after bind");
		if (!victim_intact()) {
			r->stop = 1;
			waitpid(pid, NULL, 0);
			fail_msg("start %u changed the victim's mode or owner", starts);
		}
	}
	r->stop = 1;
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	print_message("%u starts in %ld ms: %u served, %u refused (%u saw the socket replaced "
		      "after bind); the attacker renamed its link over the socket %lu times in "
		      "%lu tries\n",
		      starts, harness_now_ms() - begin, up, refused, replaced, r->renamed,
		      r->tries);
	assert_true(starts >= 10);
	assert_true(r->tries > 0);
	assert_true(victim_intact());
	munmap((void *)r, sizeof(*r));
}

/*
 * Links and files planted by another user in a sticky directory (as in /tmp): at the lock (a
 * start refused, naming it), at the state file (served without one, saying why), at the
 * metrics file (replaced by the daemon's own file, not followed). The victim never changes.
 */
static void test_planted_files(void **state)
{
	char dir[128], sock[160], log[128], at[192], metrics[192];
	const char *extra[] = {"--metrics-textfile", metrics, "--metrics-interval", "1", NULL};
	struct stat st;

	(void)state;
	if (geteuid() != 0)
		skip();
	case_dir("planted", 01777, 0, 0, dir, sizeof(dir), sock, sizeof(sock));
	snprintf(log, sizeof(log), "%s/planted.log", top);
	snprintf(metrics, sizeof(metrics), "%s/rocmmemd.prom", dir);

	snprintf(at, sizeof(at), "%s.lock", sock);
	assert_int_equal(as_nobody(plant_link, at), 0);
	assert_int_equal(start_once(sock, NULL, log), 0);
	/* ELOOP (O_NOFOLLOW), or EACCES where the kernel protects sticky directories itself. */
	assert_true(log_has(log, at));
	assert_true(log_has(log, "it is a symbolic link") || log_has(log, "Permission denied"));
	assert_int_equal(unlink(at), 0);
	assert_int_equal(as_nobody(plant_file, at), 0);
	assert_int_equal(start_once(sock, NULL, log), 0);
	assert_true(log_has(log, "not a regular file of the daemon's own uid"));
	assert_int_equal(unlink(at), 0);
	assert_true(victim_intact());

	snprintf(at, sizeof(at), "%s.state", sock);
	assert_int_equal(as_nobody(plant_link, at), 0);
	assert_int_equal(as_nobody(plant_link, metrics), 0);
	assert_int_equal(start_once(sock, extra, log), 1);
	assert_true(log_has(log, "Could not use the state file"));
	assert_true(log_has(log, "it is a symbolic link") || log_has(log, "Permission denied"));
	assert_true(victim_intact());
	/* The link at the metrics file was replaced (a write) or removed (the stop), never
	 * followed; the one at the state file is left as it was. */
	assert_int_equal(lstat(metrics, &st), -1);
	assert_int_equal(lstat(at, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unsafe_dirs_refused),
	    cmocka_unit_test(test_symlink_race),
	    cmocka_unit_test(test_planted_files),
	};

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		fprintf(stderr,
			"hostile_paths: needs root (to run the attacker as another user)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
