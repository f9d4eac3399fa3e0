/* SPDX-License-Identifier: MIT */
/* arbiter.h: who gets memory: grants, the wait queues, releases and reclaiming. */
#ifndef ROCMMEMD_ARBITER_H
#define ROCMMEMD_ARBITER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "platform/backend/backend.h"
#include "rocmmem.pb-c.h"
#include "service/bus.h"
#include "service/clock.h"
#include "service/counters.h"
#include "service/denials.h"
#include "service/eventlog.h"
#include "state/device.h"
#include "state/lease.h"
#include "state/state.h"

struct adopt;
struct client;
struct holder;
struct server;

/* Residency settings from the command line (or configuration). */
struct residency_config {
	uint64_t evict_deadline_ms;
	/* Per device: classes never resident together; _all applies to every device. */
	struct class_exclusion exclusive[BACKEND_MAX_DEVICES];
	struct class_exclusion exclusive_all;
};

struct arbiter {
	struct server *server;
	uv_loop_t *loop;
	struct backend *backend;
	struct state state;	       /* the books */
	uint64_t evict_deadline_ms;    /* how long an owner has to unload an evicted model */
	struct bus bus;		       /* what happens, told once (service/bus.h) */
	const struct svc_clock *clock; /* the bus's */
	struct eventlog eventlog;      /* the bus's subscribers: the log, */
	struct counters counters;      /* the counters, */
	struct denials denials;	       /* the latest refusals, for status */
	uint64_t bypass_stamp; /* marks the clients waiting behind a stuck head (residency.c) */
	struct adopt *adopt;   /* records for a successor, and what a predecessor left (adopt.c) */
	bool pumping;
	bool pump_again;
	/* The one timer for every deadline (state.deadlines), armed for the earliest. */
	uv_timer_t deadline_timer;
	bool timer_ready;
};

/*
 * arbiter_init takes over backend and sets up each device's budget from its config in cfgs
 * (BACKEND_MAX_DEVICES of them). Returns 0 or -EINVAL (bad budget, or settings for a device
 * that does not exist; reason logged) / -ENODEV (no devices).
 */
int arbiter_init(struct arbiter *a, struct server *s, uv_loop_t *loop, struct backend *backend,
		 const struct budget_config *cfgs, const struct residency_config *res,
		 const struct svc_clock *clock);

/*
 * arbiter_reconfigure applies new budgets (one config per device, BACKEND_MAX_DEVICES of them)
 * and residency settings at run time. Every budget is computed and checked first: on -EINVAL
 * (why says which device and what) nothing changed. No lease is touched: a budget lowered
 * below what is held only stops new grants until enough is released.
 */
int arbiter_reconfigure(struct arbiter *a, const struct budget_config *cfgs,
			const struct residency_config *res, char *why, size_t why_len);

/*
 * arbiter_deadlines_changed arms the deadline timer for the earliest deadline of the books
 * (call it after any change to state.deadlines).
 */
void arbiter_deadlines_changed(struct arbiter *a);

/*
 * arbiter_finish closes the deadline timer (running the loop once for it) and destroys the
 * backend; every client must be gone.
 */
void arbiter_finish(struct arbiter *a);

/* arbiter_acquire grants, queues or denies a lease request and replies to it in due course. */
void arbiter_acquire(struct arbiter *a, struct client *c, uint64_t request_id,
		     const Rocmmem__Wire__LeaseAcquire *req);

/* arbiter_release releases a lease of c's and replies. */
void arbiter_release(struct arbiter *a, struct client *c, uint64_t request_id, uint64_t lease_id);

/*
 * arbiter_holder_gone drops h's waiting requests, reclaims its leases and forgets its models
 * (h has left the books' indexes: state_holder_leave), then grants waiters.
 */
void arbiter_holder_gone(struct arbiter *a, struct holder *h);

/*
 * arbiter_conn finds the connection of holder h, to answer it (NULL when it has none any
 * more: replies to NULL go nowhere).
 */
struct client *arbiter_conn(const struct arbiter *a, const struct holder *h);

/*
 * arbiter_admit grants a request at once when nothing waits ahead and it fits (and no
 * exclusive class stands in the way), refuses it when its timeout is 0, else queues it until it
 * can be granted or times out, asking owners of idle models to unload meanwhile. w is a
 * filled-in template (kind, holder, request id, device, size, model, target, timeout, tag).
 */
void arbiter_admit(struct arbiter *a, const struct waiter *w);

/* arbiter_cancel_waiter answers a waiting request with an error and forgets it. */
void arbiter_cancel_waiter(struct arbiter *a, struct waiter *w, int err, const char *why);

/* arbiter_pump grants waiting requests that fit now and plans evictions for the rest. */
void arbiter_pump(struct arbiter *a);

/* arbiter_lease_event fills e with what an event of type says about lease l (its owner's). */
void arbiter_lease_event(struct bus_event *e, const struct lease *l, enum bus_type type);

/* arbiter_lease_destroy takes a lease from its owner and frees its memory. */
void arbiter_lease_destroy(struct arbiter *a, struct lease *l);

/*
 * arbiter_free_allocation hands an allocation back to the backend (off the loop when it
 * blocks) and uncharges it from device once freed, as for a released lease.
 */
void arbiter_free_allocation(struct arbiter *a, unsigned device, const struct backend_alloc *alloc);

/* arbiter_auto_trim trims a device by itself when memory is tight there. */
void arbiter_auto_trim(struct arbiter *a, struct device *d);

/*
 * arbiter_trim asks the backend to return cached memory on one device (all_devices false) or
 * on every device, and replies with the bytes released.
 */
void arbiter_trim(struct arbiter *a, struct client *c, uint64_t request_id, bool all_devices,
		  unsigned device);

/*
 * arbiter_device_lost marks a device unusable: its waiting requests fail, new ones are refused.
 * Leases already granted are released as their owners let go.
 */
void arbiter_device_lost(struct arbiter *a, unsigned device, const char *why);

#endif
