/* SPDX-License-Identifier: MIT */
/* pump.h: applying the policy's decisions: the queues' (policy_next) and the deadlines'. */
#ifndef ROCMMEMD_PUMP_H
#define ROCMMEMD_PUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "svc.h"

/*
 * svc_pump grants waiting requests that fit now, asks owners of idle models to make room for
 * the rest, and lets through what the hold-and-wait rule allows: it applies policy_next until
 * nothing is left to do. Re-entered (from a job done at once), it runs again when the outer
 * call is done.
 */
void svc_pump(struct svc *svc);

/*
 * svc_apply_grant applies a grant of d->bytes for request_id of holder h, of a request not
 * queued (waiter NULL) or of waiter w (dropped from the books first); own_memfd: a host lease
 * asked for a memfd of its own (a waiter says so itself).
 */
void svc_apply_grant(struct svc *svc, const struct policy_decision *d, struct holder *h,
		     uint64_t request_id, struct waiter *w, const char *tag, uint64_t target,
		     bool own_memfd);

/* svc_apply_evict asks the owners of d's victims to unload. Returns whether any was asked. */
bool svc_apply_evict(struct svc *svc, const struct policy_decision *d);

/* svc_run_deadlines runs the deadlines passed at the clock's now, earliest first. */
void svc_run_deadlines(struct svc *svc);

#endif
