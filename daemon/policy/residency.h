/* SPDX-License-Identifier: MIT */
/* residency.h: registered models, their use, and cooperative eviction across processes. */
#ifndef ROCMMEMD_RESIDENCY_H
#define ROCMMEMD_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/queue.h"
#include "rocmmem.pb-c.h"

struct placement_bypass;

struct arbiter;
struct client;
struct holder;
struct device;
struct model;

/* Requests from a model's owner (each replies). */
void residency_register(struct arbiter *a, struct client *c, uint64_t request_id,
			const Rocmmem__Wire__ModelRegister *req);
void residency_acquire(struct arbiter *a, struct client *c, uint64_t request_id,
		       const Rocmmem__Wire__ModelAcquire *req);
void residency_release(struct arbiter *a, struct client *c, uint64_t request_id, uint64_t model_id);
void residency_resize(struct arbiter *a, struct client *c, uint64_t request_id,
		      const Rocmmem__Wire__ModelResize *req);
void residency_unregister(struct arbiter *a, struct client *c, uint64_t request_id,
			  uint64_t model_id);
/* residency_evict_ack takes an owner's ack of the eviction req names (its generation; none:
 * the one under way) and refuses a stale, forged or unasked one (-ESTALE, -EINVAL). */
void residency_evict_ack(struct arbiter *a, struct client *c, uint64_t request_id,
			 const Rocmmem__Wire__EvictAck *req);

/*
 * residency_create registers a model as ModelRegister asks, without replying on success:
 * under want_id when that id is free or reserved for it (a model re-declared after a
 * restart), else under a fresh id. Returns the model, or NULL after replying the refusal.
 */
struct model *residency_create(struct arbiter *a, struct client *c, uint64_t request_id,
			       const Rocmmem__Wire__ModelRegister *req, uint64_t want_id);

/* Requests from the owner or root: evict now (answered when done), pin or unpin. */
void residency_admin_evict(struct arbiter *a, struct client *c, uint64_t request_id,
			   uint64_t model_id);
void residency_admin_pin(struct arbiter *a, struct client *c, uint64_t request_id,
			 const Rocmmem__Wire__AdminPinModel *req);

/* residency_holder_gone forgets h's models (their memory back) and its pending admin requests. */
void residency_holder_gone(struct arbiter *a, struct holder *h);

/* residency_deadline revokes the model whose owner did not unload it by its deadline. */
void residency_deadline(struct arbiter *a, uint64_t model_id);

/* residency_find returns the model with this id or NULL. */
struct model *residency_find(const struct arbiter *a, uint64_t model_id);

/*
 * residency_blocked says whether a waiter that fits the budget must still wait: its model is
 * being evicted, or a model of an exclusive class is resident.
 */
bool residency_blocked(const struct arbiter *a, const struct device *d, const struct waiter *w);

/*
 * residency_bypass_begin looks at a head waiter that does not fit: it marks the holders with a
 * request behind it (holder.queue_mark), and fills b. Returns false when no later request
 * may overtake it: it does not wait for any of those clients.
 */
bool residency_bypass_begin(struct arbiter *a, const struct device *d, const struct waiter *head,
			    struct placement_bypass *b);

/*
 * residency_may_bypass says whether w, behind head and fitting now, may be granted first: its
 * client waits behind the head (marked by residency_bypass_begin) and holds memory in use on
 * the device, and placement_may_bypass agrees.
 */
bool residency_may_bypass(const struct arbiter *a, const struct device *d,
			  const struct waiter *head, const struct placement_bypass *b,
			  const struct waiter *w);

/* residency_plan asks owners of idle models to unload so that the head waiter w fits. */
void residency_plan(struct arbiter *a, struct device *d, const struct waiter *w);

/*
 * residency_impossible says why a request could never be granted as things stand (-E2BIG,
 * -EDEADLK, with the reason in why), or returns 0.
 */
int residency_impossible(const struct arbiter *a, const struct device *d, const struct waiter *w,
			 char *why, size_t why_len);

/*
 * residency_need is the bytes a waiting request needs now: a lease's size; for a model request,
 * its target reservation minus what the model holds (all of it while the model is being
 * evicted: it will hold nothing by the time the request can be granted). A model's reservation
 * may change while its request waits (evicted, revoked, shrunk), so this is computed afresh.
 */
uint64_t residency_need(const struct waiter *w);

/*
 * residency_grant reserves what a model request needs now (its size as residency_need last
 * computed it) and replies to it: an acquire also marks the model in use; a resize ends with
 * exactly its target reservation.
 */
void residency_grant(struct arbiter *a, const struct waiter *w, uint64_t waited_ms);

/* residency_evicting_bytes sums what models being evicted on a device still hold. */
uint64_t residency_evicting_bytes(const struct device *d);

#endif
