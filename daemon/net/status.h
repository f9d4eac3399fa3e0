/* SPDX-License-Identifier: MIT */
/* status.h: the status reply, streamed in parts so that it never floods a connection. */
#ifndef ROCMMEMD_STATUS_H
#define ROCMMEMD_STATUS_H

#include <stdint.h>

#include "net.h"

/*
 * status_start begins a status reply to request_id and sends as many parts as the socket
 * takes; the connection's drained hook calls status_continue for the rest. Replies -EBUSY if one is
 * already being streamed to this client.
 */
void status_start(struct client *c, uint64_t request_id);

/* status_continue sends further parts while the connection's queue is empty. */
void status_continue(struct client *c);

#endif
