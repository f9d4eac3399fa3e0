/* SPDX-License-Identifier: MIT */
/* harness.c: real-daemon test fixtures: spawn, wait, inspect, raw protocol, and stop. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "wire.h"

long harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

const char *harness_daemon_bin(void)
{
	const char *bin = getenv("ROCMMEMD");

	return bin && bin[0] ? bin : ROCMMEMD_BIN;
}

/* Daemons still running when a failed test longjmps away are killed at exit, so that no
 * orphan holds the test runner's pipes open. */
static pid_t started[64];

static void kill_leftovers(void)
{
	for (size_t i = 0; i < sizeof(started) / sizeof(started[0]); i++) {
		if (started[i] > 0 && waitpid(started[i], NULL, WNOHANG) == 0) {
			kill(started[i], SIGKILL);
			waitpid(started[i], NULL, 0);
		}
	}
}

static void remember(pid_t pid)
{
	static bool registered;

	if (!registered)
		registered = atexit(kill_leftovers) == 0;
	for (size_t i = 0; i < sizeof(started) / sizeof(started[0]); i++) {
		if (started[i] <= 0 || waitpid(started[i], NULL, WNOHANG) != 0) {
			started[i] = pid;
			return;
		}
	}
}

/* print_log_tail shows the end of the daemon's log (why it failed to start) on stderr. */
static void print_log_tail(const struct daemon_proc *d, const char *what)
{
	char tail[4096];
	FILE *f = fopen(d->log, "r");
	size_t n = 0;

	if (f) {
		if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof(tail) - 1)
			fseek(f, -(long)sizeof(tail) + 1, SEEK_END);
		else
			rewind(f);
		n = fread(tail, 1, sizeof(tail) - 1, f);
		fclose(f);
	}
	tail[n] = '\0';
	fprintf(stderr, "%s; the end of %s:\n%s\n", what, d->log, tail);
}

/* exec_daemon is the child's side of harness_daemon_spawn: never returns. */
static void exec_daemon(const struct daemon_proc *d, const char *const *extra_args,
			const struct harness_exec *how, int logfd)
{
	const char *argv[96];
	int n = 0, null = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; how && how->wrapper && how->wrapper[i] && n < 40; i++)
		argv[n++] = how->wrapper[i];
	argv[n++] = harness_daemon_bin();
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	/* Never the machine's own configuration file (a later --config wins). */
	argv[n++] = "--config";
	argv[n++] = "/dev/null";
	/* Host memory unless the test names a backend (a later --backend wins): the tests mean
	 * the same thing on a machine that happens to have a GPU. */
	argv[n++] = "--backend";
	argv[n++] = "host";
	for (int i = 0; extra_args && extra_args[i] && n < 94; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;
	for (int i = 0; how && how->env && how->env[i]; i++)
		putenv((char *)(uintptr_t)how->env[i]);
	/* Nothing of the test runner's stays open in the daemon. */
	dup2(null, STDIN_FILENO);
	dup2(logfd, STDOUT_FILENO);
	dup2(logfd, STDERR_FILENO);
	unsetenv("ROCMMEM_SOCKET");
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

int harness_daemon_spawn(struct daemon_proc *d, const char *const *extra_args,
			 const struct harness_exec *how, int log_flags)
{
	long end, timeout_ms = how && how->timeout_ms > 0 ? how->timeout_ms : HARNESS_WAIT_MS;
	int logfd;

	logfd = open(d->log, O_WRONLY | O_CREAT | O_CLOEXEC | log_flags, 0600);
	if (logfd < 0)
		return -1;
	d->pid = fork();
	if (d->pid == 0)
		exec_daemon(d, extra_args, how, logfd);
	close(logfd);
	if (d->pid < 0) {
		d->pid = 0;
		return -1;
	}
	remember(d->pid);
	end = harness_now_ms() + timeout_ms;
	while (harness_now_ms() < end) {
		int fd = harness_raw_connect(d);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (!harness_daemon_alive(d)) {
			d->pid = 0;
			print_log_tail(d, "rocmmemd exited at start");
			return -2;
		}
		sleep_ms(5);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	print_log_tail(d, "rocmmemd did not accept connections in time");
	return -2;
}

int harness_daemon_dir(struct daemon_proc *d, const char *prefix)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->sock, sizeof(d->sock), "%s/rocmmemd.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/rocmmemd.log", d->dir);
	return 0;
}

int harness_daemon_start(struct daemon_proc *d, const char *const *extra_args)
{
	if (harness_daemon_dir(d, "rocmmem-test") != 0)
		return -1;
	return harness_daemon_spawn(d, extra_args, NULL, O_TRUNC) == 0 ? 0 : -1;
}

int harness_daemon_restart(struct daemon_proc *d, const char *const *extra_args)
{
	if (d->pid > 0) {
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
	return harness_daemon_spawn(d, extra_args, NULL, O_APPEND) == 0 ? 0 : -1;
}

bool harness_daemon_alive(struct daemon_proc *d)
{
	char path[64], buf[512], *state;
	int status, fd;
	ssize_t n;
	pid_t rc;

	if (d->pid <= 0)
		return false;
	rc = waitpid(d->pid, &status, WNOHANG);
	if (rc >= 0 || errno != ECHILD)
		return rc == 0;
	/*
	 * Not this process's child: a case running in a child of its own (runner.c) checks on a
	 * daemon its parent started. Alive is then: there, and not a zombie.
	 */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	state = strrchr(buf, ')'); /* the name may hold blanks and parentheses */
	return state && state[1] == ' ' && state[2] != 'Z' && state[2] != 'X';
}

void harness_remove_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 256];

	if (!dp)
		return;
	while ((e = readdir(dp))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(dp);
	rmdir(dir);
}

int harness_daemon_halt(struct daemon_proc *d, long timeout_ms)
{
	int status = 0, rc = -1;
	long end = harness_now_ms() + timeout_ms;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (;;) {
			pid_t p = waitpid(d->pid, &status, WNOHANG);

			if (p == d->pid) {
				rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
				break;
			}
			if (harness_now_ms() >= end) {
				kill(d->pid, SIGKILL);
				waitpid(d->pid, NULL, 0);
				break;
			}
			sleep_ms(5);
		}
		d->pid = 0;
	}
	return rc;
}

struct daemon_proc harness_group;
const char *const *harness_group_args;

int harness_group_setup(void **state)
{
	(void)state;
	return harness_daemon_start(&harness_group, harness_group_args);
}

int harness_group_teardown(void **state)
{
	(void)state;
	return harness_daemon_stop(&harness_group) == 0 ? 0 : -1;
}

int harness_case_idle(void **state)
{
	(void)state;
	if (!harness_daemon_alive(&harness_group))
		return -1;
	return harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0 ? 0 : -1;
}

int harness_daemon_stop(struct daemon_proc *d)
{
	int rc = harness_daemon_halt(d, HARNESS_WAIT_MS);

	if (getenv("ROCMMEM_TEST_KEEP_LOGS")) {
		char cmd[PATH_MAX + 32];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not print %s)\n", d->log);
	}
	harness_remove_dir(d->dir);
	return rc;
}

int harness_fd_count(pid_t pid)
{
	char path[64];
	DIR *dp;
	struct dirent *e;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dp = opendir(path);
	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dp);
	return n;
}

void harness_print_fds(pid_t pid)
{
	char dir[64];
	DIR *dp;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return;
	while ((e = readdir(dp))) {
		char path[PATH_MAX], target[PATH_MAX];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		print_message("  daemon fd %s -> %s\n", e->d_name, target);
	}
	closedir(dp);
}

int harness_fd_count_settled(pid_t pid)
{
	int last = harness_fd_count(pid), same = 0;
	long end = harness_now_ms() + 10000;

	/*
	 * Connections just closed (the start-up probe, a status query) go away asynchronously:
	 * the count must hold for 100 ms, since on a loaded machine the daemon may not run for
	 * tens of milliseconds.
	 */
	while (same < 10 && harness_now_ms() < end) {
		int n;

		sleep_ms(10);
		n = harness_fd_count(pid);
		same = n == last ? same + 1 : 0;
		last = n;
	}
	return last;
}

bool harness_log_contains(const struct daemon_proc *d, const char *text)
{
	FILE *f = fopen(d->log, "r");
	char line[2048];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

bool harness_log_wait(const struct daemon_proc *d, const char *text, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	while (!harness_log_contains(d, text)) {
		if (harness_now_ms() >= end)
			return false;
		sleep_ms(10);
	}
	return true;
}

rocmmem_client *harness_connect(const struct daemon_proc *d, const char *name)
{
	rocmmem_client *c = NULL;
	int err = rocmmem_connect(d->sock, name, HARNESS_WAIT_MS, &c);

	if (err)
		fail_msg("could not connect to %s: %s (%s)", d->sock, rocmmem_strerror(err),
			 rocmmem_last_error());
	return c;
}

int harness_totals(const struct daemon_proc *d, struct harness_totals *out)
{
	rocmmem_client *c = NULL;
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *dev;

	memset(out, 0, sizeof(*out));
	if (rocmmem_connect(d->sock, "harness", HARNESS_WAIT_MS, &c) != 0)
		return -1;
	if (rocmmem_status_get(c, &st) != 0) {
		rocmmem_disconnect(c);
		return -1;
	}
	dev = rocmmem_status_device(st, 0);
	if (dev) {
		out->leased_bytes = dev->leased_bytes;
		out->free_bytes = dev->free_bytes;
		out->budget_bytes = dev->budget_bytes;
		out->device_leases = dev->leases;
		out->waiters = dev->waiters;
	}
	out->heap_bytes = rocmmem_status_daemon(st)->heap_bytes;
	out->leases = rocmmem_status_lease_count(st);
	for (size_t i = 0; i < out->leases; i++)
		out->lease_bytes_sum += rocmmem_status_lease(st, i)->bytes;
	/* The harness's own connection is not one of the test's clients. */
	out->clients = rocmmem_status_client_count(st) - 1;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return 0;
}

long harness_daemon_heap_kib(const struct daemon_proc *d)
{
	struct harness_totals t;

	return harness_totals(d, &t) == 0 ? (long)(t.heap_bytes / 1024) : 0;
}

long harness_wait_totals(const struct daemon_proc *d, uint64_t leased, size_t leases,
			 long timeout_ms)
{
	long start = harness_now_ms();

	for (;;) {
		struct harness_totals t;
		long now = harness_now_ms();

		if (harness_totals(d, &t) == 0 && t.leased_bytes == leased && t.leases == leases)
			return now - start;
		if (now - start > timeout_ms)
			return -1;
		sleep_ms(5);
	}
}

int harness_raw_connect(const struct daemon_proc *d)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", d->sock);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int harness_raw_send_bytes(int fd, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 64)];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds > 64)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	/* Not wire_send: tests must be able to send more than the daemon accepts. */
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

int harness_raw_send(int fd, const Rocmmem__Wire__ClientMessage *msg, const int *fds, unsigned nfds)
{
	size_t len = rocmmem__wire__client_message__get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);
	int rc;

	if (!buf)
		return -ENOMEM;
	rocmmem__wire__client_message__pack(msg, buf);
	rc = harness_raw_send_bytes(fd, buf, len, fds, nfds);
	free(buf);
	return rc;
}

Rocmmem__Wire__ServerMessage *harness_raw_recv(int fd, int timeout_ms, bool *eof, int *fds,
					       unsigned *nfds)
{
	static uint8_t buf[WIRE_MAX_FRAME];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int got[WIRE_MAX_FDS];
	unsigned ngot = 0;
	ssize_t n;

	if (eof)
		*eof = false;
	if (nfds)
		*nfds = 0;
	if (poll(&p, 1, timeout_ms) <= 0)
		return NULL;
	n = wire_recv(fd, buf, sizeof(buf), got, &ngot, MSG_DONTWAIT);
	if (n <= 0) {
		if (eof && (n == 0 || n == -ECONNRESET))
			*eof = true;
		return NULL;
	}
	if (fds && nfds) {
		memcpy(fds, got, ngot * sizeof(int));
		*nfds = ngot;
	} else {
		wire_close_fds(got, ngot);
	}
	return rocmmem__wire__server_message__unpack(NULL, (size_t)n, buf);
}

int harness_raw_hello(int fd, uint32_t version, const char *name)
{
	return harness_raw_hello_features(fd, version, name, false, 0);
}

int harness_raw_hello_features(int fd, uint32_t version, const char *name, bool has_features,
			       uint32_t features)
{
	return harness_raw_hello_fds(fd, version, name, has_features, features, NULL, NULL, NULL);
}

int harness_raw_hello_fds(int fd, uint32_t version, const char *name, bool has_features,
			  uint32_t features, uint32_t *taken, int *fds, unsigned *nfds)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	Rocmmem__Wire__ServerMessage *reply;
	int err = -EPROTO;

	hello.has_protocol_version = true;
	hello.protocol_version = version;
	hello.client_name = (char *)(uintptr_t)name;
	hello.has_features = has_features;
	hello.features = features;
	msg.has_id = true;
	msg.id = 1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	if (nfds)
		*nfds = 0;
	if (harness_raw_send(fd, &msg, NULL, 0) < 0)
		return -EPIPE;
	reply = harness_raw_recv(fd, HARNESS_WAIT_MS, NULL, fds, nfds);
	if (reply && reply->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
		err = reply->reply->has_error ? reply->reply->error : 0;
		if (taken)
			*taken = reply->reply->body_case == ROCMMEM__WIRE__REPLY__BODY_HELLO &&
					 reply->reply->hello->has_features
				     ? reply->reply->hello->features
				     : 0;
	}
	if (reply)
		rocmmem__wire__server_message__free_unpacked(reply, NULL);
	return err;
}

Rocmmem__Wire__ServerMessage *harness_raw_acquire(int fd, uint64_t id, unsigned device,
						  uint64_t size, int64_t timeout_ms, int *lease_fd)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *reply;
	int wait;

	acq.has_device = true;
	acq.device = device;
	acq.has_size = true;
	acq.size = size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = timeout_ms;
	msg.has_id = true;
	msg.id = id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	if (lease_fd)
		*lease_fd = -1;
	if (harness_raw_send(fd, &msg, NULL, 0) < 0)
		return NULL;
	/* Wait the request's own timeout and some, clamped to what poll takes. */
	wait = timeout_ms < 0 || timeout_ms > 600000 ? 605000 : (int)timeout_ms + HARNESS_WAIT_MS;
	reply = harness_raw_recv(fd, wait, NULL, fds, &nfds);
	if (lease_fd && nfds > 0) {
		*lease_fd = fds[0];
		wire_close_fds(fds + 1, nfds - 1);
	} else {
		wire_close_fds(fds, nfds);
	}
	return reply;
}
