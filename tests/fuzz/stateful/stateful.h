/* SPDX-License-Identifier: MIT */
/* stateful.h: the stateful protocol fuzzer's types: operations, sequences, the live run. */
#ifndef ROCMMEM_TEST_STATEFUL_H
#define ROCMMEM_TEST_STATEFUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Connection slots a sequence uses. */
#define SF_CONNS 4

/*
 * A sequence is a list of operations, each on one of SF_CONNS connection slots. Most send one
 * request; the others open, close, wait, check, or restart the daemon. An operation's fields
 * are what the request carries; a field that is not set is absent on the wire.
 */
enum op_kind {
	OP_CONNECT, /* (re)open the slot's connection, saying nothing */
	OP_HELLO,
	OP_ACQUIRE,
	OP_RELEASE,
	OP_STATUS,
	OP_REGISTER,
	OP_MODEL_ACQUIRE,
	OP_MODEL_RELEASE,
	OP_RESIZE,
	OP_UNREGISTER,
	OP_EVICT_ACK,
	OP_SUBSCRIBE,
	OP_UNSUBSCRIBE,
	OP_TRIM,
	OP_METRICS,
	OP_ADMIN_EVICT,
	OP_ADMIN_PIN,
	OP_ADMIN_BUDGET,
	OP_ADMIN_REVOKE,
	OP_ADMIN_DISCONNECT,
	OP_ADMIN_LOG_LEVEL,
	OP_LEASE_REDECLARE,
	OP_MODEL_REDECLARE,
	OP_REDECLARE_DONE,
	OP_EMPTY,   /* a request with an id and no body */
	OP_CLOSE,   /* close the slot's connection, replies unread */
	OP_PAUSE,   /* let the daemon's timers run for `ms` */
	OP_CHECK,   /* check the books while the connections stay open */
	OP_RESTART, /* SIGKILL the daemon and start it again over its state file */
	OP_KINDS
};

enum field_id {
	F_DEVICE,
	F_SIZE,
	F_TIMEOUT,
	F_LEASE,
	F_MODEL,
	F_NAME,
	F_CLASS,
	F_PRIORITY,
	F_PINNED,
	F_RESERVATION,
	F_INTERVAL,
	F_SAMPLES,
	F_EVENTS,
	F_VERSION,
	F_HANDLE,
	F_FD_COUNT,
	F_NCHUNKS,
	F_CHUNK,
	F_USE_COUNT,
	F_PID,
	F_BUDGET,
	F_MS,
	F_FIELDS
};

/* How a field's value is read: ids may name what the run has seen instead of a number. */
enum field_type { T_U32, T_U64, T_I32, T_I64, T_BOOL, T_STR, T_LEASE, T_MODEL };

/*
 * A lease or model id by reference, resolved when the operation runs: the k-th id the run
 * issued (any), the k-th one this connection holds (own) or another connection holds
 * (other), the newest issued (last), the newest plus k (next: not yet issued), the k-th one
 * released or unregistered (gone), or the one the connection's latest event named (event).
 */
enum ref_kind { REF_LIT, REF_ANY, REF_OWN, REF_OTHER, REF_LAST, REF_NEXT, REF_GONE, REF_EVENT };

struct val {
	uint8_t set;
	uint8_t ref; /* enum ref_kind; REF_LIT: v is the value, else v is k */
	uint64_t v;
};

/* Descriptors attached to a request: kinds a daemon must never keep. */
enum fd_kind { FD_PIPE, FD_DIR, FD_SOCKET, FD_MEMFD, FD_LEASE, FD_NULL, FD_EVENTFD, FD_KINDS };

#define OP_FD_GROUPS 4
#define OP_STR_MAX 72
/* The kernel's cap on descriptors in one message (SCM_MAX_FD). */
#define OP_FDS_MAX 253

enum op_flag {
	OPF_NOWAIT = 1, /* send and go on: the reply stays unread until the slot is used again */
	OPF_NOID = 2,	/* no request id on the wire */
	/* A re-declaration names what the run knows of the lease or model it refers to (its
	 * device, size, name, memfd), as an honest client would after a restart. */
	OPF_ASGRANTED = 4,
	/* Set by the run, never printed: resolved[] holds what the refs meant last time. */
	OPF_RESOLVED_LEASE = 16,
	OPF_RESOLVED_MODEL = 32,
};

struct op {
	uint8_t kind; /* enum op_kind */
	uint8_t conn;
	uint8_t flags;
	uint8_t nfdgroups;
	struct val rid; /* not set: the connection's next id */
	struct val f[F_FIELDS];
	struct {
		uint8_t kind; /* enum fd_kind */
		uint8_t count;
	} fds[OP_FD_GROUPS];
	char str[OP_STR_MAX]; /* F_NAME's value (name, tag or level) */
	uint64_t resolved[2]; /* F_LEASE and F_MODEL as last run, for the printed reproducer */
};

struct seq {
	struct op *ops;
	size_t n, cap;
};

/* seq.c: the kinds and fields, and the text form of a sequence (one operation a line). */
const char *seq_kind_name(unsigned kind);
const char *seq_field_name(unsigned field);
enum field_type seq_field_type(unsigned field);
const char *seq_fd_name(unsigned kind);
/* seq_kind_takes says whether the kind's request carries the field. */
bool seq_kind_takes(unsigned kind, unsigned field);
/* seq_kind_sends says whether the kind sends a request. */
bool seq_kind_sends(unsigned kind);
struct op *seq_push(struct seq *s);
void seq_append(struct seq *s, const struct op *ops, size_t n);
void seq_free(struct seq *s);
/* seq_print writes one line per operation (with resolved ids after '=' when known). */
void seq_print(FILE *out, const struct seq *s, const char *indent);
void seq_print_op(FILE *out, const struct op *op);
/*
 * seq_parse reads a sequence in seq_print's form; '#' starts a comment, and "# finds: WORD"
 * lines put WORD into finds (space-separated, at most len bytes). Returns 0, or -EINVAL with
 * the line in why.
 */
int seq_parse(FILE *in, struct seq *s, char *finds, size_t len, char *why, size_t why_len);

/* gen.c: sequences from a seed. */
struct gen_opts {
	bool avoid_id_wrap; /* never offer a model id within 2^32 of 2^64 (F1's trigger) */
	bool restarts;	    /* may SIGKILL and restart the daemon */
};
void gen_sequence(uint64_t seed, uint64_t index, const struct gen_opts *o, struct seq *out);
uint64_t gen_mix(uint64_t x);

/* target.c: the daemon under test. */
struct target {
	const char *bin;
	const char *const *args; /* extra arguments, NULL-terminated */
	char dir[64], sock[108], log[128];
	pid_t pid;
	int fd_baseline;
	off_t log_seen; /* the log is scanned from here on */
	long scale;	/* deadline multiplier (sanitized builds run slower) */
};
int target_start(struct target *t, char *why, size_t len);
/* target_restart SIGKILLs the daemon and starts it over the same socket and state file. */
int target_restart(struct target *t, char *why, size_t len);
/* target_kill SIGKILLs the daemon (if running) and reaps it. */
void target_kill(struct target *t);
/* target_stop asks it to stop (SIGTERM); 0 when it exited 0 in time, else why. */
int target_stop(struct target *t, char *why, size_t len);
/* target_dead says (in why) whether and how the daemon ended. */
bool target_dead(struct target *t, char *why, size_t len);
int target_fd_count(const struct target *t);
/* target_log_report finds a sanitizer report or a failed assertion in the new log lines. */
bool target_log_report(struct target *t, char *why, size_t len);
void target_log_tail(const struct target *t, FILE *out, int lines);
void target_remove(struct target *t);
long target_now_ms(void);
void target_sleep_ms(long ms);

/*
 * What went wrong, most telling first (a run reports the first of these it saw). The first
 * four are one kind of failure, the daemon broken, seen at different moments: shrinking keeps
 * any of them as the same failure.
 */
enum fail_class {
	FAIL_NONE,
	FAIL_SANITIZER,
	FAIL_DIED,
	FAIL_HANG,
	FAIL_CONNECT,
	FAIL_WIRE,
	FAIL_BOOKS,
	FAIL_FDS,
	FAIL_STOP,
};
const char *fail_class_name(enum fail_class c);
/* fail_alike says whether two failures are the same kind (see above). */
bool fail_alike(enum fail_class a, enum fail_class b);

/* exec.c: running sequences against the target. */
struct run;
struct run *run_create(struct target *t, bool verbose);
/* run_set_deadline sets how long one answer may take (ms, times the target's scale). */
void run_set_deadline(struct run *r, long ms);
void run_destroy(struct run *r);
/* run_reset forgets every id and connection: the target was started afresh. */
void run_reset(struct run *r);
/* run_seq runs ops (resolving refs, recording the ids it resolved), then closes every slot
 * and checks the daemon; returns the first failure's class (why in run_failure). */
enum fail_class run_seq(struct run *r, struct seq *s);
const char *run_failure(const struct run *r);
void run_stats(const struct run *r, FILE *out);

#endif
