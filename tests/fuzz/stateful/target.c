/* SPDX-License-Identifier: MIT */
/* target.c: the daemon under test: start, restart, stop, watch its fds and its log. */
#include "stateful.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * How the daemon runs: host memory, a budget of 16 granules so that requests contend, a short
 * eviction deadline so that revocations happen within a sequence, low limits so that they are
 * hit, two classes that exclude each other, and a short restart grace period.
 */
static const char *const base_args[] = {"--config",
					"/dev/null",
					"--backend",
					"host",
					"--log-level",
					"debug",
					"--budget",
					"32M",
					"--evict-deadline",
					"0.1",
					"--max-pending",
					"8",
					"--max-leases",
					"12",
					"--max-subscribers",
					"4",
					"--exclusive",
					"transformer,vae",
					"--restart-grace",
					"3",
					"--handshake-timeout",
					"5",
					NULL};

/* The daemon running when the fuzzer exits (a failed assertion of its own) is killed. */
static pid_t running;
static bool registered;

static void kill_running(void)
{
	if (running > 0) {
		kill(running, SIGKILL);
		waitpid(running, NULL, 0);
	}
}

long target_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void target_sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

static void exec_daemon(const struct target *t, int logfd)
{
	const char *argv[96];
	int n = 0, null = open("/dev/null", O_RDWR | O_CLOEXEC);

	argv[n++] = t->bin;
	argv[n++] = "--socket";
	argv[n++] = t->sock;
	for (int i = 0; base_args[i]; i++)
		argv[n++] = base_args[i];
	for (int i = 0; t->args && t->args[i] && n < 94; i++)
		argv[n++] = t->args[i];
	argv[n] = NULL;
	dup2(null, STDIN_FILENO);
	dup2(logfd, STDOUT_FILENO);
	dup2(logfd, STDERR_FILENO);
	unsetenv("ROCMMEM_SOCKET");
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* settle_fds waits until the daemon's fd count holds still for 50 ms (at most 3 s). */
static int settle_fds(const struct target *t)
{
	long end = target_now_ms() + 3000 * t->scale;
	int last = -1, same = 0;

	while (target_now_ms() < end) {
		int n = target_fd_count(t);

		same = n == last ? same + 1 : 0;
		last = n;
		if (same >= 5)
			break;
		target_sleep_ms(10);
	}
	return last;
}

/* spawn starts the daemon in t's directory and waits until it accepts connections. */
static int spawn(struct target *t, char *why, size_t len)
{
	long end = target_now_ms() + 10000 * t->scale;
	int logfd = open(t->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (logfd < 0)
		return fail(why, len, "Could not open %s: %s", t->log, strerror(errno));
	if (!registered)
		registered = atexit(kill_running) == 0;
	t->pid = fork();
	if (t->pid == 0)
		exec_daemon(t, logfd);
	close(logfd);
	if (t->pid < 0)
		return fail(why, len, "Could not fork: %s", strerror(errno));
	running = t->pid;
	while (target_now_ms() < end) {
		struct sockaddr_un addr = {.sun_family = AF_UNIX};
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", t->sock);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
			close(fd);
			t->fd_baseline = settle_fds(t);
			return t->fd_baseline > 0 ? 0 : fail(why, len, "no fd count");
		}
		if (fd >= 0)
			close(fd);
		if (target_dead(t, why, len))
			return -1;
		target_sleep_ms(5);
	}
	return fail(why, len, "rocmmemd did not accept connections in %ld s", 10 * t->scale);
}

int target_start(struct target *t, char *why, size_t len)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/rocmmem-sfuzz-XXXXXX");
	if (!mkdtemp(t->dir))
		return fail(why, len, "Could not make a directory: %s", strerror(errno));
	snprintf(t->sock, sizeof(t->sock), "%s/rocmmemd.sock", t->dir);
	snprintf(t->log, sizeof(t->log), "%s/rocmmemd.log", t->dir);
	t->log_seen = 0;
	return spawn(t, why, len);
}

void target_kill(struct target *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
		t->pid = 0;
		running = 0;
	}
}

int target_restart(struct target *t, char *why, size_t len)
{
	target_kill(t);
	return spawn(t, why, len);
}

bool target_dead(struct target *t, char *why, size_t len)
{
	int status;
	pid_t p;

	if (t->pid <= 0) {
		fail(why, len, "rocmmemd is not running");
		return true;
	}
	p = waitpid(t->pid, &status, WNOHANG);
	if (p == 0)
		return false;
	t->pid = 0;
	running = 0;
	if (p < 0)
		fail(why, len, "Could not wait for rocmmemd: %s", strerror(errno));
	else if (WIFSIGNALED(status))
		fail(why, len, "rocmmemd died of signal %d (%s)", WTERMSIG(status),
		     strsignal(WTERMSIG(status)));
	else
		fail(why, len, "rocmmemd exited with status %d", WEXITSTATUS(status));
	return true;
}

int target_stop(struct target *t, char *why, size_t len)
{
	long end = target_now_ms() + 10000 * t->scale;
	int status = 0;

	if (t->pid <= 0)
		return fail(why, len, "rocmmemd was not running at the end");
	kill(t->pid, SIGTERM);
	while (waitpid(t->pid, &status, WNOHANG) == 0) {
		if (target_now_ms() > end) {
			kill(t->pid, SIGKILL);
			waitpid(t->pid, NULL, 0);
			t->pid = running = 0;
			return fail(why, len, "rocmmemd ignored SIGTERM for %ld s: killed",
				    10 * t->scale);
		}
		target_sleep_ms(5);
	}
	t->pid = running = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return fail(why, len, "rocmmemd died of signal %d while stopping",
			    WTERMSIG(status));
	return fail(why, len, "rocmmemd stopped with exit status %d (a leak report?)",
		    WEXITSTATUS(status));
}

int target_fd_count(const struct target *t)
{
	char path[64];
	struct dirent *e;
	DIR *dp;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)t->pid);
	dp = opendir(path);
	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dp);
	return n;
}

/* What a sanitizer or a failed assert() writes to stderr. */
static const char *const reports[] = {
    "ERROR: AddressSanitizer",	  "ERROR: LeakSanitizer", "runtime error:",
    "UndefinedBehaviorSanitizer", ": Assertion `",	  "SUMMARY: ",
};

bool target_log_report(struct target *t, char *why, size_t len)
{
	int fd = open(t->log, O_RDONLY | O_CLOEXEC);
	char buf[65536];
	bool found = false;
	ssize_t n;

	if (fd < 0)
		return false;
	while (!found && (n = pread(fd, buf, sizeof(buf) - 1, t->log_seen)) > 0) {
		char *end = memrchr(buf, '\n', (size_t)n);

		if (!end)
			break;
		end[1] = '\0';
		t->log_seen += end + 1 - buf;
		for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
			char *at = strstr(buf, reports[i]);

			if (at) {
				while (at > buf && at[-1] != '\n')
					at--;
				at[strcspn(at, "\n")] = '\0';
				fail(why, len, "the daemon's log says: %.400s", at);
				found = true;
				break;
			}
		}
	}
	close(fd);
	return found;
}

void target_log_tail(const struct target *t, FILE *out, int lines)
{
	int fd = open(t->log, O_RDONLY | O_CLOEXEC);
	char buf[16384];
	off_t size;
	ssize_t n;
	char *p;

	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof(buf) - 1, size > (off_t)sizeof(buf) - 1 ? size - 16383 : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	p = buf + n;
	while (p > buf && lines >= 0) {
		p--;
		if (*p == '\n')
			lines--;
	}
	fprintf(out, "--- the last lines of %s ---\n%s--- end of log ---\n", t->log,
		p == buf ? p : p + 1);
}

void target_remove(struct target *t)
{
	DIR *dp = opendir(t->dir);
	struct dirent *e;

	if (!dp)
		return;
	while ((e = readdir(dp))) {
		char path[sizeof(t->dir) + 256];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", t->dir, e->d_name);
		unlink(path);
	}
	closedir(dp);
	rmdir(t->dir);
}
