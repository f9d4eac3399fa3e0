/* SPDX-License-Identifier: MIT */
/* lane.h: the request lane, one shared page per connection that carries a request and its reply. */
#ifndef ROCMMEM_COMMON_LANE_H
#define ROCMMEM_COMMON_LANE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A connection that took FEATURE_LANE at hello has, beside its socket, one page shared by the
 * daemon and the client (a sealed memfd the daemon makes) and a doorbell (an eventfd the daemon
 * polls). The client writes one packed ClientMessage into the request slot, bumps req.seq and
 * rings the doorbell; the daemon copies the request out before it decodes it, answers, and
 * either writes the packed ServerMessage{Reply} into the reply slot or says where the answer
 * is instead (lane_kind), then sets rep.seq to the request's seq and wakes the client, which
 * waits on rep.seq with a futex. No system call moves the bytes, and no socket buffer: the
 * round trip costs an eventfd write, a futex wait and wake, and the daemon's eventfd read.
 *
 * Order with the socket, both ways: req.sock_sent is how many packets the client had sent on
 * the socket before this request (the daemon reads those first), rep.sock_seq how many the
 * daemon had sent or queued on it before this reply (the client files those first), so a lane
 * request never overtakes what the same client sent before it, and a reply never overtakes an
 * event (a revocation) the daemon sent before it.
 *
 * Docs: docs/protocol.md "The request lane".
 */

/* The bytes each slot holds: the page is 4096 bytes in all. */
#define LANE_SLOT 1984u
#define LANE_PAGE 4096u

/* What rep.kind says. */
enum lane_kind {
	LANE_REPLY = 1,	    /* the reply is in the reply slot (rep.len bytes) */
	LANE_ON_SOCKET = 2, /* the reply comes on the socket: it waits (a queued lease), carries
			     * fds, streams, or is larger than the slot */
	LANE_RESEND = 3,    /* not taken (the connection has replies queued): send it on the
			     * socket */
};

/* The client's half: written by the client only (the daemon copies it before reading it). */
struct lane_req {
	_Atomic uint32_t seq; /* bumped after the rest is written */
	uint32_t len;	      /* bytes in the request slot, <= LANE_SLOT */
	uint64_t id;	      /* the request's id (its ClientMessage.id) */
	uint64_t sock_sent;   /* packets this client had sent on the socket before it */
	uint8_t pad[40];
};

/* The daemon's half: written by the daemon only. */
struct lane_rep {
	_Atomic uint32_t seq; /* the seq of the request answered; the futex word */
	uint32_t len;	      /* bytes in the reply slot (LANE_REPLY) */
	uint32_t kind;	      /* enum lane_kind */
	uint32_t pad0;
	uint64_t sock_seq; /* packets the daemon had sent or queued on the socket before it */
	uint8_t pad[40];
};

struct lane_page {
	struct lane_req req;
	struct lane_rep rep;
	uint8_t req_data[LANE_SLOT];
	uint8_t rep_data[LANE_SLOT];
};

_Static_assert(sizeof(struct lane_page) == LANE_PAGE, "the lane is one 4 KiB page");

/*
 * lane_futex_wait sleeps while *word == old, at most timeout_ms (< 0: no limit). Returns 0
 * when woken or the word differs, -ETIMEDOUT, or -EINTR (a signal, or any other failure: the
 * caller looks at the word again either way).
 */
int lane_futex_wait(_Atomic uint32_t *word, uint32_t old, int64_t timeout_ms);

/* lane_futex_wake wakes one waiter on word (a lane has one: the thread whose request it is). */
void lane_futex_wake(_Atomic uint32_t *word);

/*
 * lane_map maps a lane's memfd read-write, shared, after checking it is one LANE_PAGE sealed
 * against resizing (a peer cannot shrink it under the mapping). Returns the page or NULL with
 * errno set.
 */
struct lane_page *lane_map(int memfd);

/* lane_unmap undoes lane_map. NULL is ignored. */
void lane_unmap(struct lane_page *p);

#endif
