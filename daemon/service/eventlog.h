/* SPDX-License-Identifier: MIT */
/* eventlog.h: the log's subscription to the bus: one line per event, journal fields, rate limits.
 */
#ifndef ROCMMEMD_EVENTLOG_H
#define ROCMMEMD_EVENTLOG_H

#include "base/log.h"
#include "bus.h"

struct eventlog {
	struct log_ratelimit limits;   /* lines about limits hit */
	struct log_ratelimit refusals; /* lines about access refused */
};

/*
 * eventlog_subscribe adds the log to b: an event of the wire's types is a line at its level
 * with its journal fields (ROCMMEM_EVENT, ROCMMEM_CLIENT_PID, ...); the daemon's own are plain
 * lines; limits hit and access refused are rate-limited (a client can cause them at will), the
 * next line written saying how many were held back. Returns 0 or -ENOSPC.
 */
int eventlog_subscribe(struct eventlog *l, struct bus *b);

#endif
