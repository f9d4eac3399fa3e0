/* SPDX-License-Identifier: MIT */
/* harness.h: starting a real rocmmemd for tests, raw protocol access, and process helpers. */
#ifndef ROCMMEM_TEST_HARNESS_H
#define ROCMMEM_TEST_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rocmmem.h"
#include "rocmmem.pb-c.h"

/*
 * HARNESS_WAIT_MS is how long a test waits for something that must happen: a daemon to accept
 * or to exit, books to settle, a child to report, a log line to appear. Generous on purpose: a
 * wait ends as soon as the thing happens, so only a broken daemon ever waits this long, and a
 * machine busy with other work does not fail a test. (A window in which something must NOT
 * happen is short and chosen by its test.)
 */
#define HARNESS_WAIT_MS 60000

struct daemon_proc {
	pid_t pid;
	char dir[64];	/* a fresh temporary directory, removed by harness_daemon_stop */
	char sock[108]; /* dir/rocmmemd.sock */
	char log[128];	/* dir/rocmmemd.log: the daemon's stderr */
};

/*
 * harness_daemon_bin names the daemon the tests start: $ROCMMEMD when set (a copied build, as
 * in scripts/gpu-bundle.sh's bundle, where the build tree's path does not exist), else the
 * rocmmemd this build made.
 */
const char *harness_daemon_bin(void);

/*
 * harness_daemon_start starts the built rocmmemd with --socket in a fresh temporary directory,
 * --log-level debug, --config /dev/null (never the machine's file), --backend host, and the
 * given extra arguments (NULL-terminated, may be NULL; a --backend or --config there wins),
 * and waits
 * until it accepts connections (up to HARNESS_WAIT_MS). Returns 0 or -1 (the daemon is then
 * not running).
 */
int harness_daemon_start(struct daemon_proc *d, const char *const *extra_args);

/*
 * harness_daemon_stop sends SIGTERM, waits (up to HARNESS_WAIT_MS, then SIGKILL) and removes the
 * directory. Returns the daemon's exit status, or -1 if it had to be killed or died by signal.
 */
int harness_daemon_stop(struct daemon_proc *d);

/*
 * harness_daemon_restart starts the daemon again on the same socket, in the same directory
 * (its state file, if any, with it), its log appended to the same file; the previous daemon
 * must have ended (a killed one is reaped here). Returns as harness_daemon_start.
 */
int harness_daemon_restart(struct daemon_proc *d, const char *const *extra_args);

/*
 * One daemon for a group of test cases (cmocka's group fixtures): the file sets
 * harness_group_args before cmocka_run_group_tests(tests, harness_group_setup,
 * harness_group_teardown); each case uses harness_group and ends with harness_case_idle, which
 * fails it unless the daemon is alive with nothing leased.
 */
extern struct daemon_proc harness_group;
extern const char *const *harness_group_args;
int harness_group_setup(void **state);
int harness_group_teardown(void **state);
int harness_case_idle(void **state);

/* How harness_daemon_spawn runs the daemon, beyond its arguments. */
struct harness_exec {
	const char *const *wrapper; /* NULL, or a NULL-terminated argv the daemon runs under
				     * (valgrind and its options; found in PATH) */
	const char *const *env;	    /* NULL, or NULL-terminated "NAME=VALUE" strings set in the
				     * daemon's environment only */
	long timeout_ms;	    /* how long to wait for it to accept connections; 0:
				     * HARNESS_WAIT_MS */
};

/*
 * harness_daemon_dir fills d (zeroed first) with a fresh directory /tmp/PREFIX-XXXXXX, its
 * socket and log paths. Returns 0 or -1.
 */
int harness_daemon_dir(struct daemon_proc *d, const char *prefix);

/*
 * harness_daemon_spawn starts the daemon of harness_daemon_start in d's directory (filled by
 * harness_daemon_dir), as how says (NULL: no wrapper, no environment, HARNESS_WAIT_MS), its log
 * opened with log_flags (O_TRUNC or O_APPEND), and waits until it accepts connections. Returns 0,
 * -1 when it could not be started, or -2 when it started but died or did not accept in time
 * (then it is not running; its log may say why). The directory is left as it is.
 */
int harness_daemon_spawn(struct daemon_proc *d, const char *const *extra_args,
			 const struct harness_exec *how, int log_flags);

/*
 * harness_daemon_halt sends SIGTERM and waits up to timeout_ms (then SIGKILL). Returns the
 * exit status, or -1 when it had to be killed, died by a signal or was not running; d->pid is
 * then 0. The directory stays.
 */
int harness_daemon_halt(struct daemon_proc *d, long timeout_ms);

/* harness_remove_dir removes a daemon's directory and the files in it. */
void harness_remove_dir(const char *dir);

/* harness_print_fds lists a process's open fds through cmocka's print_message. */
void harness_print_fds(pid_t pid);

/* harness_daemon_alive says whether the daemon process still runs. */
bool harness_daemon_alive(struct daemon_proc *d);

/* harness_fd_count counts the open fds of a process (from /proc/PID/fd), or -1. */
int harness_fd_count(pid_t pid);

/* harness_fd_count_settled waits (up to 10 s) until the count holds still for 100 ms. */
int harness_fd_count_settled(pid_t pid);

/* harness_log_contains says whether the daemon's log contains text now. */
bool harness_log_contains(const struct daemon_proc *d, const char *text);

/*
 * harness_log_wait waits up to timeout_ms for text to appear in the daemon's log: a daemon
 * may answer a request before it logs what happened. Returns whether it appeared.
 */
bool harness_log_wait(const struct daemon_proc *d, const char *text, long timeout_ms);

/* harness_connect connects with librocmmem as name; aborts the test on failure. */
rocmmem_client *harness_connect(const struct daemon_proc *d, const char *name);

/* Accounting snapshot of device 0 plus table sizes, read with librocmmem. */
struct harness_totals {
	uint64_t leased_bytes;
	uint64_t free_bytes;
	uint64_t budget_bytes;
	uint64_t device_leases;
	uint32_t waiters;
	size_t leases; /* entries in the lease table */
	size_t clients;
	uint64_t lease_bytes_sum; /* sum of the lease table's sizes */
	uint64_t heap_bytes;	  /* the daemon's heap in use; 0: unknown (sanitized builds) */
};

/* harness_totals reads the daemon's accounting through a fresh connection. Returns 0 or -1. */
int harness_totals(const struct daemon_proc *d, struct harness_totals *out);

/*
 * harness_daemon_heap_kib reads the daemon's heap in use (malloc's own count of what it has
 * handed out and not taken back, from its status) in KiB: what memory checks judge, rather
 * than RSS, which also counts what malloc keeps after a burst. 0 when unknown (sanitized
 * builds report none) or when the daemon does not answer.
 */
long harness_daemon_heap_kib(const struct daemon_proc *d);

/*
 * harness_wait_totals polls until device 0's leased bytes equal `leased` and the lease table
 * holds `leases` entries, up to timeout_ms. Returns the elapsed ms, or -1 on timeout.
 */
long harness_wait_totals(const struct daemon_proc *d, uint64_t leased, size_t leases,
			 long timeout_ms);

/* Raw protocol access, for tests that must send what librocmmem never would. */

/* harness_raw_connect opens a plain SOCK_SEQPACKET connection, or returns -1. */
int harness_raw_connect(const struct daemon_proc *d);

/* harness_raw_send packs and sends msg with optional fds. Returns 0 or a negative errno. */
int harness_raw_send(int fd, const Rocmmem__Wire__ClientMessage *msg, const int *fds,
		     unsigned nfds);

/* harness_raw_send_bytes sends len raw bytes as one packet. Returns 0 or a negative errno. */
int harness_raw_send_bytes(int fd, const void *buf, size_t len, const int *fds, unsigned nfds);

/*
 * harness_raw_recv waits up to timeout_ms for one message. Returns it (free with
 * rocmmem__wire__server_message__free_unpacked), or NULL on timeout, EOF or garbage; *eof is
 * set when the daemon closed the connection. Received fds go to fds/nfds when non-NULL, else
 * are closed.
 */
Rocmmem__Wire__ServerMessage *harness_raw_recv(int fd, int timeout_ms, bool *eof, int *fds,
					       unsigned *nfds);

/* harness_raw_hello says hello with the given protocol version; returns the reply's error. */
int harness_raw_hello(int fd, uint32_t version, const char *name);

/* harness_raw_hello_features says hello offering features (Hello.features) when has_features. */
int harness_raw_hello_features(int fd, uint32_t version, const char *name, bool has_features,
			       uint32_t features);

/*
 * harness_raw_hello_fds is harness_raw_hello_features keeping what the reply brings: the
 * features the daemon took (*taken, may be NULL) and its fds (fds/nfds as harness_raw_recv:
 * the request lane's memfd and doorbell when FEATURE_LANE was taken).
 */
int harness_raw_hello_fds(int fd, uint32_t version, const char *name, bool has_features,
			  uint32_t features, uint32_t *taken, int *fds, unsigned *nfds);

/* harness_raw_acquire asks for a lease over a raw connection and returns the reply. */
Rocmmem__Wire__ServerMessage *harness_raw_acquire(int fd, uint64_t id, unsigned device,
						  uint64_t size, int64_t timeout_ms, int *lease_fd);

/* harness_now_ms returns CLOCK_MONOTONIC in ms. */
long harness_now_ms(void);

#endif
