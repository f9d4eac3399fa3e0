/* SPDX-License-Identifier: MIT */
/* policy_fixture.h: books built by hand for the policy's unit tests (no daemon, no loop). */
#ifndef ROCMMEM_POLICY_FIXTURE_H
#define ROCMMEM_POLICY_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"
#include "state/state.h"

#define MiB ((uint64_t)1 << 20)
#define GRANULE (2 * MiB)

/* Model classes as on the wire. */
#define TRANSFORMER 1
#define VAE 2
#define TEXT 3

struct fx {
	struct state s;
	struct policy_config cfg;
	struct policy_scratch x;
	uint64_t now;
};

/* fx_init sets up ndevices devices of budget bytes each (2 MiB granules) and generous limits. */
void fx_init(struct fx *f, unsigned ndevices, uint64_t budget);

/* fx_finish takes everything out of the books again and frees them. */
void fx_finish(struct fx *f);

/* fx_drop disconnects h: its waiters, leases and models go, then h. */
void fx_drop(struct fx *f, struct holder *h);

/* fx_holder adds a holder (a connection) of uid and pid, named. */
struct holder *fx_holder(struct fx *f, uid_t uid, pid_t pid, const char *name);

/* fx_model registers a model of h on dev (class cls, size, priority). */
struct model *fx_model(struct fx *f, struct holder *h, unsigned dev, const char *name, unsigned cls,
		       uint64_t size, int32_t priority);

/* fx_load makes m resident (its size reserved) and in use `use` times, last used at now. */
void fx_load(struct fx *f, struct model *m, unsigned use);

/* fx_lease gives h a lease of bytes on dev (tagged with m if not NULL), charged. */
struct lease *fx_lease(struct fx *f, struct holder *h, unsigned dev, uint64_t bytes,
		       struct model *m);

/* fx_wait queues a lease request of h for bytes on dev (timeout_ms; < 0 none) at now. */
struct waiter *fx_wait(struct fx *f, struct holder *h, unsigned dev, uint64_t bytes,
		       int64_t timeout_ms);

/* fx_wait_model queues an acquire (or a resize to target) of m. */
struct waiter *fx_wait_model(struct fx *f, struct model *m, enum waiter_kind kind, uint64_t target,
			     int64_t timeout_ms);

/* fx_lease_request is a lease request of h for bytes on dev. */
struct policy_request fx_lease_request(const struct holder *h, unsigned dev, uint64_t bytes,
				       int64_t timeout_ms);

/* fx_model_request is an acquire (or a resize to requested) of m. */
struct policy_request fx_model_request(const struct model *m, enum policy_request_kind kind,
				       uint64_t requested, int64_t timeout_ms);

/* fx_next asks policy_next. */
void fx_next(struct fx *f, struct policy_decision *d);

/* fx_contains fails the test unless text contains what. */
void fx_contains(const char *text, const char *what);

#endif
