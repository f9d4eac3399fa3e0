/* SPDX-License-Identifier: MIT */
/*
 * redeclare.h: the re-declaration steps shared by leases of every kind (redeclare.c) and by
 * host arenas and the leases in them (redeclare_arena.c).
 */
#ifndef ROCMMEMD_REDECLARE_H
#define ROCMMEMD_REDECLARE_H

#include <stdbool.h>
#include <stdint.h>

#include "service.h"

/* redeclare_refuse answers a re-declaration that cannot be taken over, and logs why. */
void redeclare_refuse(struct svc *svc, const struct holder *h, uint64_t request_id, int err,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * redeclare_lease_pending finds the record of a lease h re-declares (nfds attached), refusing
 * (NULL) what has no record or does not match it (owner, device, size, kind).
 */
struct pending *redeclare_lease_pending(struct svc *svc, const struct holder *h,
					uint64_t request_id, const struct svc_lease_redeclare *req,
					unsigned nfds);

/*
 * redeclare_adopted makes p's lease h's again with memory alloc (an arena lease: the range of
 * h's arena the caller claimed), and answers. fd: it counts as a kept host fd.
 */
void redeclare_adopted(struct svc *svc, struct holder *h, uint64_t request_id, struct pending *p,
		       const struct backend_alloc *alloc, uint64_t model_id, bool fd);

#endif
