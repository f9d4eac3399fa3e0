/* SPDX-License-Identifier: MIT */
/* fault.h: the fault tests' fixture: a daemon started under a wrapper or with preloads, its
 * baseline (fds, memory, accounting) and the check that it came back to it, a seeded PRNG. */
#ifndef ROCMMEM_TEST_FAULT_H
#define ROCMMEM_TEST_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

#define MIB ((uint64_t)1 << 20)

/*
 * fault_daemon_start is harness_daemon_start (a fresh directory, --socket, --config /dev/null,
 * --log-level debug, --backend host, then args) with two additions: the daemon runs under
 * wrapper (NULL, or a NULL-terminated argv such as valgrind and its options; the daemon's
 * own argv follows it) and with env (NULL, or NULL-terminated "NAME=VALUE" strings set in
 * its environment only). It waits up to timeout_ms for the daemon to accept connections.
 * Returns 0, or -1 with nothing left running.
 */
int fault_daemon_start(struct daemon_proc *d, const char *const *wrapper, const char *const *env,
		       const char *const *args, long timeout_ms);

/*
 * fault_daemon_stop sends SIGTERM and waits up to timeout_ms (then SIGKILL), and removes the
 * directory unless keep_dir. Returns the exit status, -1 when killed or dead by a signal, 0
 * when it was no longer running (fault_daemon_wait_exit saw it go).
 */
int fault_daemon_stop(struct daemon_proc *d, long timeout_ms, bool keep_dir);

/*
 * fault_daemon_wait_exit waits up to timeout_ms for the daemon to exit by itself. Returns its
 * exit status (the process is then gone: fault_daemon_stop only removes the directory), -1
 * when it died by a signal, or -2 when it still runs.
 */
int fault_daemon_wait_exit(struct daemon_proc *d, long timeout_ms);

/* fault_rss_kib reads a process's VmRSS in KiB, or -1 (printed, never judged: see below). */
long fault_rss_kib(pid_t pid);

/* The daemon's books as one status snapshot shows them (device 0 and every table). */
struct fault_books {
	uint64_t budget, leased, reserved, free_bytes, device_leases;
	uint32_t device_waiters;
	size_t clients; /* other than the reader's own connection */
	size_t leases, models, queue;
	uint64_t lease_sum;   /* sum of the lease table's sizes */
	uint64_t failures;    /* the counter of allocations the backend refused */
	uint64_t revocations; /* the counter of models revoked at their eviction deadline */
	uint64_t heap;	      /* the daemon's heap in use (status), 0: unknown (sanitized) */
};

/* fault_books reads the books through a fresh connection. Returns 0 or a negative errno. */
int fault_books(const struct daemon_proc *d, struct fault_books *out);

/* What a daemon must come back to once every test client is gone. */
/*
 * Memory is judged by the daemon's heap in use as its status reports it (malloc's own count of
 * bytes allocated and not freed), never by RSS: RSS also counts what malloc keeps after a
 * burst, fragmentation and code pages first touched, all of which depend on how the machine
 * scheduled the work, not on what the daemon still holds. Sanitized builds report no heap
 * (their leak check at exit judges memory instead).
 */
struct fault_baseline {
	int fds;
	long rss_kib;  /* for the record only */
	uint64_t heap; /* 0: unknown, memory is not judged */
	uint64_t budget;
};

/* fault_baseline_take measures the baseline of an idle daemon (fds settled, then its heap). */
void fault_baseline_take(const struct daemon_proc *d, struct fault_baseline *b);

/*
 * fault_assert_baseline fails the test unless, within a few seconds, the daemon still runs,
 * its books are empty (nothing leased or reserved, no lease, client, model or waiter), it has
 * exactly its baseline of fds, a well-behaved client gets the whole budget at once (and
 * touches its first and last page) and, when heap_slack >= 0 (and the daemon reports its
 * heap), its heap in use is at most the baseline's plus heap_slack bytes. what names the
 * moment in the failure message.
 */
void fault_assert_baseline(struct daemon_proc *d, const struct fault_baseline *b,
			   int64_t heap_slack, const char *what);

/*
 * fault_wait_books waits (up to timeout_ms) until the books are empty but for `clients`
 * connected clients holding nothing; fails the test, showing them, if not. fault_wait_idle
 * is the same with no client.
 */
void fault_wait_books(const struct daemon_proc *d, size_t clients, long timeout_ms,
		      const char *what);
void fault_wait_idle(const struct daemon_proc *d, long timeout_ms, const char *what);

/* A seeded PRNG (splitmix64): every random choice of a run follows from its seed. */
struct fault_rng {
	uint64_t state;
};

/*
 * fault_seed returns $ROCMMEM_TEST_SEED if set, else a seed from the clock, and prints it with
 * how to repeat the run.
 */
uint64_t fault_seed(const char *test);

uint64_t fault_next(struct fault_rng *r);

/* fault_below returns a number in [0, n) (0 when n is 0). */
uint64_t fault_below(struct fault_rng *r, uint64_t n);

/* fault_sleep_us sleeps; fault_now_us reads CLOCK_MONOTONIC in microseconds. */
void fault_sleep_us(long us);
int64_t fault_now_us(void);

/* fault_iterations returns the count given as --iterations N in argv, else dflt. */
long fault_iterations(int argc, char **argv, long dflt);

#endif
