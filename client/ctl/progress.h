/* SPDX-License-Identifier: MIT */
/* progress.h: what a queued lease request says on stderr while it waits. */
#ifndef ROCMMEMCTL_PROGRESS_H
#define ROCMMEMCTL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "rocmmem.h"

struct ctl_progress;

/*
 * ctl_progress_start watches the daemon's queue (through client, from a thread) for this
 * process's request of bytes on device and, once it is seen waiting, says so on stderr: one
 * line rewritten in place on a terminal, a line per change when piped, with what it waits for
 * as the daemon reports it (the request's progress callback). With json, each of the daemon's
 * reports is a JSON line on stderr instead. Returns 0 or a negative errno (then no progress is
 * shown; the lease goes ahead).
 */
int ctl_progress_start(rocmmem_client *client, unsigned device, uint64_t bytes, bool json,
		       struct ctl_progress **out);

/*
 * ctl_progress_stop ends the watch and frees p (NULL is ignored). When the wait was shown and
 * the request was granted after waited_ms, says so; on a terminal the line is cleared first.
 */
void ctl_progress_stop(struct ctl_progress *p, bool granted, uint64_t waited_ms);

#endif
