/* SPDX-License-Identifier: MIT */
/* lane_io.h: the daemon's end of a connection's request lane: its page, its doorbell, its answers.
 */
#ifndef ROCMMEMD_LANE_IO_H
#define ROCMMEMD_LANE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lane.h"

/*
 * One connection's lane (common/lane.h): a page shared with its client and an eventfd the
 * loop polls. The connection handles what the doorbell brings (ring); this unit only moves
 * bytes in and out of the page, never trusting what the client wrote.
 */
struct daemon_lane {
	uv_poll_t poll;
	int efd;
	struct lane_page *page;
	uint32_t seen;	     /* req.seq of the last request taken */
	bool pending;	     /* a request taken and not yet answered */
	uint64_t pending_id; /* its id, as the client gave it */
	/* Called when the doorbell rang (the eventfd is read already). */
	void (*ring)(struct daemon_lane *l);
	void *data;
};

/*
 * daemon_lane_open makes a lane on loop: a sealed one-page memfd (returned in *memfd, for the
 * caller to send and then close), mapped here, and a doorbell eventfd, polled from now on.
 * Returns 0 or a negative errno (nothing left behind).
 */
int daemon_lane_open(uv_loop_t *loop, void (*ring)(struct daemon_lane *l), void *data,
		     struct daemon_lane **out, int *memfd);

/*
 * daemon_lane_close stops the lane: a request still unanswered is told to look for its answer
 * on the socket (which is closing), the page is unmapped, and the lane freed once libuv let go.
 */
void daemon_lane_close(struct daemon_lane *l);

/*
 * daemon_lane_peek says whether a request new since the last one taken waits in the page, and
 * how many packets the client says it sent on the socket before it (*sock_sent: a claim, which
 * the caller bounds what it does with).
 */
bool daemon_lane_peek(const struct daemon_lane *l, uint64_t *sock_sent);

/*
 * daemon_lane_take copies a new request out of the page into buf (cap bytes), before anything
 * reads it, and marks it pending. Returns its length, 0 when there is none (the doorbell rang
 * for nothing), -EBADMSG when the client claims 0 bytes or more than the slot, -EMSGSIZE more
 * than cap.
 */
ssize_t daemon_lane_take(struct daemon_lane *l, uint8_t *buf, size_t cap);

/* daemon_lane_reply_buf is where a reply is packed in place (LANE_SLOT bytes). */
uint8_t *daemon_lane_reply_buf(struct daemon_lane *l);

/*
 * daemon_lane_answer answers the pending request: kind (enum lane_kind), len bytes already
 * in the reply slot for LANE_REPLY, sock_seq the packets sent or queued on the socket before
 * it. The client is woken.
 */
void daemon_lane_answer(struct daemon_lane *l, unsigned kind, size_t len, uint64_t sock_seq);

#endif
