/* SPDX-License-Identifier: MIT */
/*
 * state.h: the books: devices and their budgets, holders, leases, models and waiting requests,
 * as plain data; every change that must keep them consistent goes through a state_* function.
 */
#ifndef ROCMMEMD_STATE_H
#define ROCMMEMD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adoption.h"
#include "base/heap.h"
#include "base/idtable.h"
#include "device.h"
#include "holder.h"
#include "lease.h"
#include "model.h"
#include "platform/backend/backend.h"
#include "queue.h"

/* What a deadline in state.deadlines is for; its id says which one. */
enum deadline_kind {
	DUE_WAITER = 1, /* a waiting request's timeout (id: its arrival number) */
	DUE_EVICTION,	/* an owner's time to unload a model (id: the model's) */
	DUE_GRACE,	/* after a restart, the time to re-declare (id: 0) */
	DUE_HOLD,	/* a model in use past its maximum hold (id: the model's) */
	DUE_ARENA,	/* a holder's warm arena ranges to punch (id: the holder's) */
};

struct state {
	struct device devices[BACKEND_MAX_DEVICES];
	unsigned ndevices;
	struct lease_table leases;
	struct idtable models;
	struct idtable holders;	  /* by id, which is also its connection's */
	struct uid_accounts uids; /* per uid: its holders (quotas, connections per uid) */
	struct idtable waiters;	  /* waiting requests by arrival number */
	struct heap deadlines;	  /* every deadline: timeouts, evictions, the grace period */
	uint64_t fd_leases;	  /* host fds kept (leases' memfds and arenas), all holders */
	uint64_t arenas;	  /* holders' host arenas open */
	uint64_t arena_fallbacks; /* host leases that fitted no range of their arena */
	struct adoption adoption; /* what a previous daemon left, awaiting re-declaration */
};

/* state_init sets up empty books (no device yet). */
void state_init(struct state *s);

/* state_finish frees the books' indexes; every holder must be gone. */
void state_finish(struct state *s);

/*
 * state_holder_add makes a holder for a new connection: the next id, who (taken over: its
 * groups are the holder's from now on), counted in its uid's account. Returns 0 or -ENOMEM
 * (who left as it was).
 */
int state_holder_add(struct state *s, struct identity *who, uint64_t now_ms, struct holder **out);

/*
 * state_holder_leave takes h out of the books' indexes as its connection goes: it is no longer
 * found by id nor listed, and its uid stops counting it; what it holds is still linked to it
 * until released. state_holder_free frees it then (every lease, model and waiter gone).
 */
void state_holder_leave(struct state *s, struct holder *h);
void state_holder_free(struct holder *h);

/* state_holder_find returns the holder with this id (NULL once it left). */
struct holder *state_holder_find(const struct state *s, uint64_t id);

/* state_holder_next returns the holder with the smallest id above after_id, or NULL. */
struct holder *state_holder_next(const struct state *s, uint64_t after_id);

/* state_model_find returns the model with this id or NULL. */
struct model *state_model_find(const struct state *s, uint64_t model_id);

/*
 * state_lease_link makes l (its id, device, size, allocation and tag filled in) one of h's
 * leases, tagged with model_id when that is h's model on the same device, and counts it; the
 * device's accounting is the caller's (a grant charged it, an adoption held it).
 */
void state_lease_link(struct state *s, struct holder *h, struct lease *l, uint64_t model_id,
		      uint64_t now_ms);

/*
 * state_lease_unlink takes l from the lease table, its owner and its model; the device's
 * accounting and the allocation are the caller's.
 */
void state_lease_unlink(struct state *s, struct lease *l);

/*
 * state_waiter_add queues a copy of template t (kind, holder, request, device, size, model,
 * target, timeout, tag) on its device at now_ms with its deadline due_ms (UINT64_MAX: none):
 * numbered in arrival order, on its device's queue and its holder's list, counted on its
 * model. Returns 0, -ENOMEM or -EOVERFLOW (nothing queued).
 */
int state_waiter_add(struct state *s, const struct waiter *t, uint64_t now_ms, uint64_t due_ms,
		     struct waiter **out);

/* state_waiter_drop takes w off its queue, its holder, its model and its deadline, and frees it. */
void state_waiter_drop(struct state *s, struct waiter *w);

/* state_waiter_find returns the waiting request with this arrival number, or NULL. */
struct waiter *state_waiter_find(const struct state *s, uint64_t seq);

/*
 * state_deadline_set sets the deadline of (kind, id) to due_ms: a new one when *slot is 0
 * (its handle stored in *slot), else the one *slot names moves. Returns 0 or -ENOMEM.
 * state_deadline_clear removes the one *slot names, if any, and sets *slot to 0.
 */
int state_deadline_set(struct state *s, enum deadline_kind kind, uint64_t id, uint64_t due_ms,
		       uint32_t *slot);
void state_deadline_clear(struct state *s, uint32_t *slot);

/* state_next_due is the earliest deadline, or UINT64_MAX when there is none. */
uint64_t state_next_due(const struct state *s);

/*
 * state_deadline_due takes the earliest deadline off if it is due at now_ms, into *out
 * (whose owner must forget its slot). Returns false when none is due.
 */
bool state_deadline_due(struct state *s, uint64_t now_ms, struct heap_entry *out);

/*
 * state_device_lost marks a device unusable for why (its waiting requests are refused, new
 * ones too; leases already granted go as their owners let go). Returns true when it was not
 * lost before.
 */
bool state_device_lost(struct state *s, unsigned device, const char *why);

/*
 * state_fd_take counts one more host lease (one that keeps an fd in the daemon) for h, its
 * uid and all holders; state_fd_release gives one back (h NULL: a holder gone meanwhile,
 * whose share went back to its uid as it left: only the total).
 */
void state_fd_take(struct state *s, struct holder *h);
void state_fd_release(struct state *s, struct holder *h);

/*
 * state_model_add registers model m (its fields filled in, owner and device set) under want_id
 * when that id is free or reserved for it (a model re-declared after a restart), else under a
 * fresh id; links it to its owner and device. Returns 0, -ENOMEM or -EOVERFLOW.
 */
int state_model_add(struct state *s, struct model *m, uint64_t want_id);

/*
 * state_model_remove unlinks m from its owner, its device and the model table (its leases
 * outlive it as plain leases) and frees it; its reservation, deadline and waiters must be gone.
 */
void state_model_remove(struct state *s, struct model *m);

#endif
