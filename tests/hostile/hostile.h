/* SPDX-License-Identifier: MIT */
/* hostile.h: shared fixture of the hostile-input tests: one daemon, raw messages, health check. */
#ifndef ROCMMEM_TEST_HOSTILE_H
#define ROCMMEM_TEST_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* Every hostile executable runs one daemon with this budget on the host backend. */
#define HOSTILE_BUDGET ((uint64_t)64 << 20)
#define HOSTILE_BUDGET_TEXT "64 MiB"
#define MIB ((uint64_t)1 << 20)

/*
 * The daemon under test, its open-fd count with no client connected, and what one connection
 * adds to it: its socket, and a pidfd of the peer where the kernel offers one.
 */
struct hostile {
	struct daemon_proc d;
	int fd_baseline;
	int fds_per_connection;
};

extern struct hostile hostile;

/*
 * hostile_group_setup starts the daemon (host backend, --budget 64M) and measures its fd
 * baseline; hostile_group_teardown stops it and fails unless it exited 0 (clean SIGTERM stop).
 * An executable that needs other settings points hostile_daemon_args at its own arguments
 * (NULL-terminated, which must keep --backend host --budget 64M) before the group runs.
 */
extern const char *const *hostile_daemon_args;

int hostile_group_setup(void **state);
int hostile_group_teardown(void **state);

/* hostile_run_result folds a teardown failure into cmocka's result for main's exit status. */
int hostile_run_result(int cmocka_rc);

/*
 * hostile_assert_healthy checks, once every test connection has been closed, that the daemon
 * still runs and serves a well-behaved librocmmem client (acquire and release 2 MiB, status),
 * that its fd count returns to the baseline (polled: teardown is asynchronous), and that its
 * accounting is exact: nothing leased, no lease, no waiter, no client left.
 */
void hostile_assert_healthy(void);

/*
 * hostile_assert_healthy_with is hostile_assert_healthy while `clients` test connections stay
 * open and hold `leases` leases of `leased` bytes in all (host backend: one fd per lease).
 */
void hostile_assert_healthy_with(uint64_t leased, size_t leases, size_t clients);

/* Child processes killed at chosen moments. */

/* Exit codes of a child that failed before it could be killed; files add theirs from _FIRST. */
enum {
	HOSTILE_CHILD_NO_CONNECT = 10,
	HOSTILE_CHILD_NO_HELLO,
	HOSTILE_CHILD_NO_SEND,
	HOSTILE_CHILD_FIRST
};

struct hostile_child {
	pid_t pid;
	int sync; /* read end: the child writes one byte when it is where it should be killed */
};

/* hostile_spawn forks a child that runs fn(sync_fd, arg) and never returns into cmocka. */
struct hostile_child hostile_spawn(void (*fn)(int sync, int arg), int arg);

/* hostile_child_ready waits for the child's byte; fails with its exit status if it died. */
void hostile_child_ready(struct hostile_child *c);

/* hostile_child_kill kills the child with SIGKILL, reaps it, and fails if it ended by itself. */
void hostile_child_kill(struct hostile_child *c);

/* In the child: hostile_signal_ready writes the byte; hostile_child_greeted connects and says
 * hello (exiting with the codes above on failure). */
void hostile_signal_ready(int sync);
int hostile_child_greeted(const char *name);

/* Raw protocol. Every helper below fails the test on anything unexpected. */

/* hostile_connect opens a raw connection; hostile_greeted also says a successful hello. */
int hostile_connect(void);
int hostile_greeted(const char *name);

/* hostile_send sends msg with id (has_id set when id_present). Returns 0 or -errno. */
int hostile_send(int fd, bool id_present, uint64_t id, Rocmmem__Wire__ClientMessage *msg);

/*
 * hostile_send_subscribe sends Subscribe with id; each has_ flag says whether its field is on
 * the wire. hostile_send_unsubscribe sends Unsubscribe. Both return as hostile_send.
 */
int hostile_send_subscribe(int fd, uint64_t id, bool has_samples, bool samples, bool has_events,
			   bool events, bool has_interval, uint32_t interval_ms);
int hostile_send_unsubscribe(int fd, uint64_t id);

int hostile_send_hello(int fd, uint64_t id, bool has_version, uint32_t version, const char *name);
int hostile_send_status(int fd, uint64_t id);
int hostile_send_acquire(int fd, uint64_t id, uint32_t device, uint64_t size, int64_t timeout_ms,
			 const char *tag);
int hostile_send_release(int fd, uint64_t id, bool has_lease_id, uint64_t lease_id);

/* What hostile_recv found. */
enum hostile_rx {
	HOSTILE_RX_MSG,
	HOSTILE_RX_EOF,
	HOSTILE_RX_TIMEOUT,
	HOSTILE_RX_GARBAGE,
};

/*
 * hostile_recv waits up to timeout_ms for one message and unpacks it into *out (free with
 * rocmmem__wire__server_message__free_unpacked). A connection reset (the daemon closed with
 * our packets unread) is skipped: what it had sent before is still read. Fds go to fds/nfds
 * (at most WIRE_MAX_FDS) when given, else are closed.
 */
enum hostile_rx hostile_recv(int fd, int timeout_ms, Rocmmem__Wire__ServerMessage **out, int *fds,
			     unsigned *nfds);

/* hostile_recv_reply returns the next Reply (events are skipped) or fails the test. */
Rocmmem__Wire__ServerMessage *hostile_recv_reply(int fd, int timeout_ms, int *fds, unsigned *nfds);

/*
 * hostile_expect_error reads the next reply and checks it is error err for request id, with a
 * non-empty message containing needle (when not NULL), no body and no fds.
 */
void hostile_expect_error(int fd, uint64_t id, int err, const char *needle);

/* hostile_expect_closed checks the daemon closes fd within 2 s (replies before are drained). */
void hostile_expect_closed(int fd);

/* hostile_expect_error_closed: hostile_expect_error, then hostile_expect_closed. */
void hostile_expect_error_closed(int fd, uint64_t id, int err, const char *needle);

/*
 * hostile_expect_refused_closed accepts what a protocol violation may get: error replies with
 * a negative errno (err when err != 0), then the connection is closed within 2 s.
 */
void hostile_expect_refused_closed(int fd, int err);

/* hostile_expect_grant reads a successful lease grant for id; returns its lease id. */
uint64_t hostile_expect_grant(int fd, uint64_t id, uint64_t size);

/* hostile_expect_serving checks that the connection still answers a status request. */
void hostile_expect_serving(int fd, uint64_t id);

/* hostile_status_waiters counts waiters in a status, hostile_status_has_lease finds a lease. */
uint32_t hostile_status_waiters(void);
bool hostile_status_has_lease(uint64_t lease_id, int32_t *owner_pid);

/*
 * hostile_limit_hits reads from a status how often clients ran into the limit named (its key
 * in [limits]) and, when value is not NULL, the limit in force; fails if there is none.
 */
uint64_t hostile_limit_hits(const char *name, uint64_t *value);

/* hostile_access_refused reads a status's tally of what the access policy refused. */
void hostile_access_refused(uint64_t *peers, uint64_t *requests);

/*
 * hostile_pipe makes a pipe for fd-leak probes: the read end sees POLLHUP once every copy of
 * the write end is closed, wherever those copies are.
 */
void hostile_pipe(int p[2]);

/* hostile_wait_hup says whether fd (a pipe's read end) reports hang-up within timeout_ms. */
bool hostile_wait_hup(int fd, int timeout_ms);

/* hostile_sleep_ms sleeps. */
void hostile_sleep_ms(long ms);

/* hostile_pack packs msg into a malloc'd buffer (free it); *len gets its size. */
uint8_t *hostile_pack(const Rocmmem__Wire__ClientMessage *msg, size_t *len);

#endif
