/* SPDX-License-Identifier: MIT */
/* status.h: the status reply, streamed in parts so that it never floods a connection. */
#ifndef ROCMMEMD_STATUS_H
#define ROCMMEMD_STATUS_H

#include <stdbool.h>
#include <stdint.h>

struct client;

enum status_stage {
	STATUS_IDLE = 0,
	STATUS_CLIENTS,
	STATUS_LEASES,
	STATUS_MODELS,
	STATUS_QUEUE,
};

/* Where a streamed status reply stands: each part resumes after the last id it sent. */
struct status_cursor {
	enum status_stage stage;
	uint64_t request_id;
	uint64_t after;	 /* last client id / lease id / waiter seq sent */
	unsigned device; /* queue stage: the device being listed */
};

/*
 * status_start begins a status reply to request_id and sends as many parts as the socket
 * takes; client_flushed calls status_continue for the rest. Replies -EBUSY if one is already
 * being streamed to this client.
 */
void status_start(struct client *c, uint64_t request_id);

/* status_continue sends further parts while the connection's queue is empty. */
void status_continue(struct client *c);

#endif
