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

#include "base/idtable.h"
#include "device.h"
#include "holder.h"
#include "lease.h"
#include "model.h"
#include "platform/backend/backend.h"
#include "queue.h"

struct state {
	struct device devices[BACKEND_MAX_DEVICES];
	unsigned ndevices;
	struct lease_table leases;
	struct idtable models;
	struct idtable holders;	  /* by id, which is also its connection's */
	struct uid_accounts uids; /* per uid: its holders (quotas, connections per uid) */
	uint64_t next_waiter_seq; /* arrival numbers of waiting requests */
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

#endif
