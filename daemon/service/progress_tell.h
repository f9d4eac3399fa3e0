/* SPDX-License-Identifier: MIT */
/*
 * progress_tell.h: progress events for the waiting requests that asked for them: what each
 * waits for (policy/waitfor.h), told when it starts waiting, when that changes, and when the
 * eviction it waited for ends; at most one per PROGRESS_INTERVAL_MS per request, the latest
 * state once the interval is over. The table is svc->progress (progress.h).
 */
#ifndef ROCMMEMD_PROGRESS_TELL_H
#define ROCMMEMD_PROGRESS_TELL_H

#include "svc.h"

/* svc_progress_init sets up the table and subscribes to the bus (an eviction's end). */
void svc_progress_init(struct svc *svc);

/* svc_progress_finish frees the table. */
void svc_progress_finish(struct svc *svc);

/* svc_progress_track tells w's holder about w from now on. Returns 0 or -ENOMEM (untold). */
int svc_progress_track(struct svc *svc, const struct waiter *w);

/*
 * svc_progress_update tells each tracked request what changed for it, as the rate allows, and
 * forgets those no longer waiting (granted, refused, gone with their holder). Call it after
 * the books changed and when progress_due(&svc->progress) says.
 */
void svc_progress_update(struct svc *svc);

#endif
