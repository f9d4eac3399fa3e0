/* SPDX-License-Identifier: MIT */
/* proc.c: child processes for tests, and a tiny pipe protocol of 64-bit values. */
#include "proc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int child_start(struct child *c, int (*fn)(void *arg, int in, int out), void *arg)
{
	int down[2], up[2];

	if (pipe(down) < 0)
		return -1;
	if (pipe(up) < 0) {
		close(down[0]);
		close(down[1]);
		return -1;
	}
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		close(down[1]);
		close(up[0]);
		_exit(fn(arg, down[0], up[1]));
	}
	close(down[0]);
	close(up[1]);
	c->to_child = down[1];
	c->from_child = up[0];
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int child_wait(struct child *c, long timeout_ms)
{
	long end = now_ms() + timeout_ms;
	int status = 0;

	if (c->pid <= 0)
		return -1;
	for (;;) {
		pid_t p = waitpid(c->pid, &status, WNOHANG);

		if (p == c->pid)
			break;
		if (now_ms() > end) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &status, 0);
			status = -1;
			break;
		}
		struct timespec ts = {.tv_nsec = 2000000};
		nanosleep(&ts, NULL);
	}
	c->pid = 0;
	close(c->to_child);
	close(c->from_child);
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

void child_kill(struct child *c)
{
	if (c->pid <= 0)
		return;
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	c->pid = 0;
	close(c->to_child);
	close(c->from_child);
}

bool pipe_put(int fd, int64_t value)
{
	return write(fd, &value, sizeof(value)) == (ssize_t)sizeof(value);
}

bool pipe_get(int fd, int64_t *value, long timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int rc;

	do {
		rc = poll(&p, 1, (int)timeout_ms);
	} while (rc < 0 && errno == EINTR);
	if (rc <= 0)
		return false;
	return read(fd, value, sizeof(*value)) == (ssize_t)sizeof(*value);
}
