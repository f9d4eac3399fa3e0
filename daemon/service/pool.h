/* SPDX-License-Identifier: MIT */
/*
 * pool.h: the VMM chunk pool: a released GPU lease's memory kept, exported again, for the
 * same client's next lease of that size, and released when idle or under pressure
 * (docs/backends.md, "The chunk pool").
 */
#ifndef ROCMMEMD_SVC_POOL_H
#define ROCMMEMD_SVC_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "svc.h"

/* svc_pool_limit is the most bytes the pool may hold on device d now (0: no pool). */
uint64_t svc_pool_limit(const struct svc *svc, const struct device *d);

/*
 * svc_pool_park takes lease l (released by its owner) into the pool instead of freeing it:
 * l is unlinked and freed, its bytes leave the device's leased books for its pool, and its
 * memory is exported again on a worker thread; the release (request_id) is answered then, so
 * that the client's next lease of that size finds it ready. Returns false, with nothing done,
 * when the pool does not take it (no pool, not VMM memory, no room, pressure): the caller
 * frees it and answers.
 */
bool svc_pool_park(struct svc *svc, struct lease *l, uint64_t request_id);

/*
 * svc_pool_take fills out with a ready allocation of exactly size bytes that holder released
 * on device, taking it out of the pool (exported, its fds transient). Returns false if none.
 */
bool svc_pool_take(struct svc *svc, uint64_t holder, unsigned device, uint64_t size,
		   struct backend_alloc *out);

/*
 * svc_pool_make_room hands job (an allocation about to run on device) the pooled memory it
 * must release first so that leases, reservations and pool stay within the budget.
 */
void svc_pool_make_room(struct svc *svc, unsigned device, struct job *job);

/* svc_pool_trim hands job (a trim on device) every pooled allocation to release first. */
void svc_pool_trim(struct svc *svc, unsigned device, struct job *job);

/* svc_pool_release_drops releases a job's drops that could not ride with it (not run). */
void svc_pool_release_drops(struct svc *svc, struct job *job);

/* svc_pool_check releases what sat idle past the setting, the oldest while the pool is above
 * its limit, and everything under pressure: a waiting request, the runtime short of memory,
 * the books past the budget, a lost device, a stop. */
void svc_pool_check(struct svc *svc, unsigned device);

/* svc_pool_holder_gone releases every allocation kept for holder (it can be nobody else's). */
void svc_pool_holder_gone(struct svc *svc, uint64_t holder);

/* svc_pool_finish releases everything at the daemon's end (no job in flight). */
void svc_pool_finish(struct svc *svc);

#endif
