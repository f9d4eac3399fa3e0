/* SPDX-License-Identifier: MIT */
/* proc.h: running test clients as real child processes and talking to them over pipes. */
#ifndef ROCMMEM_TEST_PROC_H
#define ROCMMEM_TEST_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct child {
	pid_t pid;
	int to_child;	/* parent writes commands */
	int from_child; /* parent reads reports */
};

/*
 * child_start forks a process running fn(arg, in, out), where in/out are its ends of the two
 * pipes; the child exits with fn's return value. Returns 0 or -1.
 */
int child_start(struct child *c, int (*fn)(void *arg, int in, int out), void *arg);

/* child_wait waits (up to timeout_ms, then SIGKILL) and returns the exit status, or -1. */
int child_wait(struct child *c, long timeout_ms);

/* child_kill sends SIGKILL and reaps. */
void child_kill(struct child *c);

/* pipe_put / pipe_get move one 64-bit value; pipe_get waits up to timeout_ms. */
bool pipe_put(int fd, int64_t value);
bool pipe_get(int fd, int64_t *value, long timeout_ms);

#endif
