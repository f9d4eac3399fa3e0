/* SPDX-License-Identifier: MIT */
/* eventlog.h: the log's subscription to the bus: one line per event, journal fields, rate limits.
 */
#ifndef ROCMMEMD_EVENTLOG_H
#define ROCMMEMD_EVENTLOG_H

#include "base/log.h"
#include "bus.h"

/*
 * What one client causes at will (its requests refused or timed out, limits hit, access
 * refused, acks of no eviction) is logged at most EVENTLOG_CLIENT_BURST lines per
 * EVENTLOG_CLIENT_INTERVAL_MS per client, and all clients together at most LOG_RATELIMIT_BURST
 * lines per LOG_RATELIMIT_INTERVAL_MS; the next line written says how many were held back, and
 * so does a summary line when the client leaves (or its slot is taken). The clients followed
 * at once are the EVENTLOG_CLIENTS that warned last: the memory is fixed.
 */
#define EVENTLOG_CLIENT_BURST 10u
#define EVENTLOG_CLIENT_INTERVAL_MS 10000u
#define EVENTLOG_CLIENTS 64u

struct eventlog_client {
	uint64_t holder;  /* its id; 0: a free slot */
	uint64_t used_ms; /* its last line, written or not: the least recent slot is taken */
	char label[96];	  /* "pid 123 'name'", for the summary */
	struct log_ratelimit rl;
};

struct eventlog {
	struct log_ratelimit limits;	  /* lines about limits hit, of no client (peers) */
	struct log_ratelimit refusals;	  /* lines about access refused, of no client (peers) */
	struct log_ratelimit all_clients; /* every client's lines together */
	struct eventlog_client clients[EVENTLOG_CLIENTS];
};

/*
 * eventlog_subscribe adds the log to b: an event of the wire's types is a line at its level
 * with its journal fields (ROCMMEM_EVENT, ROCMMEM_CLIENT_PID, ...); the daemon's own are plain
 * lines; what a client can cause at will is rate-limited per client (above), refused peers
 * and limits hit before a hello together. Returns 0 or -ENOSPC.
 */
int eventlog_subscribe(struct eventlog *l, struct bus *b);

#endif
