/* SPDX-License-Identifier: MIT */
/* run.h: the state of a run, shared by its connections (conn.c), ops (exec.c), checks. */
#ifndef ROCMMEM_TEST_STATEFUL_RUN_H
#define ROCMMEM_TEST_STATEFUL_RUN_H

#include "rocmmem.pb-c.h"
#include "stateful.h"
#include "wire.h"

/* Ids kept for references, and the most items the run follows at once. */
#define ID_KEEP 256
#define LIVE_MAX 256
#define SENT_RING 128
#define POOL_MAX 8
/* Sync requests use ids no operation picks by chance. */
#define PING_BASE ((uint64_t)0x5046 << 48)

/* A lease or model the fuzzer holds (or held when the daemon was restarted: carried). */
struct item {
	uint64_t id;
	uint8_t conn;
	uint32_t device;
	uint64_t size; /* lease: granted bytes; model: registered size */
	int fd;	       /* a lease's memfd, or -1 */
	char name[OP_STR_MAX];
};

struct idbook {
	uint64_t issued[ID_KEEP]; /* a ring of the ids granted, oldest overwritten */
	size_t nissued;
	uint64_t max, last;
	uint64_t gone[ID_KEEP]; /* released or unregistered */
	size_t ngone;
	struct item live[LIVE_MAX];
	size_t nlive;
	struct item carried[LIVE_MAX]; /* held across a restart, not re-declared yet */
	size_t ncarried;
};

struct sent {
	uint64_t rid, arg; /* arg: the lease or model id the request named */
	uint8_t kind;
	bool answered;
	/* What a model registration or re-declaration said, for its re-declaration later. */
	uint32_t device;
	uint64_t size;
	char name[OP_STR_MAX];
};

struct conn {
	int fd; /* -1: closed */
	bool greeted;
	uint64_t next_rid, ping_rid;
	bool ping_answered;
	uint64_t event_model, event_lease, last_seq;
	struct sent sent[SENT_RING];
	size_t nsent;
};

struct run {
	struct target *t;
	bool verbose;
	long deadline_ms; /* for one answer: 0 is 5 s (times the target's scale) */
	struct conn conns[SF_CONNS];
	struct idbook leases, models;
	int pool[POOL_MAX]; /* memfds of leases no longer held: evidence to re-declare */
	size_t npool;
	bool restarted; /* records of a predecessor may wait to be re-declared */
	enum fail_class failed;
	unsigned nfails; /* failures recorded in this sequence */
	char why[1024];
	struct {
		unsigned long seqs, ops, sent, not_taken, replies, errors, grants, models, events,
		    hangups, restarts, checks, fds_sent;
	} stats;
	uint8_t rx[WIRE_MAX_FRAME];
};

/* run_fail records the first failure (later ones are ignored). */
void run_fail(struct run *r, enum fail_class cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The deadline for one answer, in ms, scaled for slow builds. */
long run_deadline(const struct run *r);

/* conn.c */
/* conn_open (re)opens slot c; false on failure (recorded). */
bool conn_open(struct run *r, unsigned c);
/* conn_close closes slot c and forgets what it held (its lease fds go to the pool). */
void conn_close(struct run *r, unsigned c);
/* conn_send sends msg (id set by the caller) with fds; false if it was not taken. */
bool conn_send(struct run *r, unsigned c, Rocmmem__Wire__ClientMessage *msg, const int *fds,
	       unsigned nfds);
/* conn_note remembers what request rid was (op as sent), to read its reply. */
void conn_note(struct run *r, unsigned c, uint64_t rid, const struct op *op, uint64_t arg);
/* conn_drain reads whatever slot c has waiting, without waiting. */
void conn_drain(struct run *r, unsigned c);
/*
 * conn_sync waits until the daemon has handled everything sent on slot c: a request it refuses
 * at once follows (when greeted), else the reply to rid or the hang-up. A hang is a failure.
 */
void conn_sync(struct run *r, unsigned c, uint64_t rid);
/* conn_restarted moves what every slot held to the carried lists and closes the slots. */
void conn_restarted(struct run *r);

/* idbook helpers (conn.c) */
void book_issue(struct idbook *b, uint64_t id);
struct item *book_add(struct idbook *b, uint64_t id, unsigned conn);
struct item *book_find(struct idbook *b, uint64_t id);
/* book_drop forgets a live item; its fd goes to the run's pool. */
void book_drop(struct run *r, struct idbook *b, uint64_t id);
void pool_put(struct run *r, int fd);

/* books.c: the invariants, read from a status on a fresh connection. */
/*
 * books_check compares the daemon's totals with what it lists; with quiet (every fuzzing
 * connection closed) it also waits until nothing is held and the fd count is back at the
 * baseline. Failures are recorded in r.
 */
void books_check(struct run *r, bool quiet);

#endif
