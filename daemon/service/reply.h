/* SPDX-License-Identifier: MIT */
/* reply.h: answers and notices through the service's sink, for every file of service/. */
#ifndef ROCMMEMD_REPLY_H
#define ROCMMEMD_REPLY_H

#include <stdint.h>

#include "svc.h"

/* svc_reply sends r to holder's request (nothing when the holder has no connection). */
void svc_reply(struct svc *svc, uint64_t holder, uint64_t request_id, const struct svc_reply *r);

/* svc_reply_ok answers success without a body. */
void svc_reply_ok(struct svc *svc, uint64_t holder, uint64_t request_id);

/* svc_reply_error answers err (a negative errno) with the text fmt says. */
void svc_reply_error(struct svc *svc, uint64_t holder, uint64_t request_id, int err,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* svc_reply_residency answers an acquire or resize of m with the residency it belongs to. */
void svc_reply_residency(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct model *m);

/*
 * svc_refuse answers a request d refused (d->refusal) and tells whoever must know: a denial
 * goes to the bus as LEASE_DENIED (with d's device, bytes, model and waited time, and flags),
 * a limit hit as LIMIT_HIT (its log line, if any), an access refusal as ACCESS_REFUSED; a
 * stale ack is logged.
 */
void svc_refuse(struct svc *svc, uint64_t holder, uint64_t request_id,
		const struct policy_decision *d, unsigned flags);

/* svc_notify tells holder n. */
void svc_notify(struct svc *svc, uint64_t holder, const struct svc_notice *n);

/* svc_due_changed tells the sink when the earliest deadline is now, if that moved. */
void svc_due_changed(struct svc *svc);

#endif
