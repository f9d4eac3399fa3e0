/* SPDX-License-Identifier: MIT */
/*
 * handshake.h: connections that have not said hello yet, and the deadline by which they must:
 * one timer for them all, since every connection gets the same time in the order it came.
 */
#ifndef ROCMMEMD_HANDSHAKE_H
#define ROCMMEMD_HANDSHAKE_H

#include <uv.h>

#include "net.h"

/* handshake_init sets up the timer; nobody waits yet. Returns 0 or a negative errno. */
int handshake_init(struct handshake *h, struct server *s, uv_loop_t *loop);

/* handshake_stop closes the timer (the daemon stops listening); later calls do nothing. */
void handshake_stop(struct handshake *h);

/*
 * handshake_begin starts c's wait for hello (at c->connected_ms); handshake_end ends it (hello
 * said, or the connection torn down). A connection that has not said hello within
 * limits.handshake_timeout_ms is logged, counted and closed.
 */
void handshake_begin(struct handshake *h, struct client *c);
void handshake_end(struct handshake *h, struct client *c);

/* handshake_rearm applies a new timeout to the connections that wait (after a reload). */
void handshake_rearm(struct handshake *h);

#endif
