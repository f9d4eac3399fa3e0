/* SPDX-License-Identifier: MIT */
/*
 * service.h: the daemon's service: the requests it serves, the events from below it takes,
 * and its life. Every request is answered through the sink (svc.h), now or later; nothing here
 * knows the wire, a socket or the event loop.
 */
#ifndef ROCMMEMD_SERVICE_H
#define ROCMMEMD_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/backend/backend.h"
#include "policy/policy.h"
#include "residency.h"
#include "state/device.h"
#include "svc.h"

/* ---- Life (service.c) ---- */

/*
 * svc_init takes over backend and sets up each device's budget from its config in cfgs
 * (BACKEND_MAX_DEVICES of them), with cfg (limits, access, ...) in force, clock for time and
 * runner for backend jobs. Returns 0 or -EINVAL (bad budget, or settings for a device that
 * does not exist; reason logged) / -ENODEV (no devices); svc_finish then.
 */
int svc_init(struct svc *svc, struct backend *backend, const struct budget_config *cfgs,
	     const struct residency_config *res, const struct policy_config *cfg,
	     const struct svc_clock *clock, const struct job_runner *runner);

/* svc_set_sink says where replies, notices and the next deadline go. */
void svc_set_sink(struct svc *svc, const struct svc_sink *sink);

/*
 * svc_reconfigure applies new budgets (one config per device, BACKEND_MAX_DEVICES of them),
 * residency settings and cfg at run time. Every budget is computed and checked first: on
 * -EINVAL (why says which device and what) nothing changed. No lease is touched: a budget
 * lowered below what is held only stops new grants until enough is released.
 */
int svc_reconfigure(struct svc *svc, const struct budget_config *cfgs,
		    const struct residency_config *res, const struct policy_config *cfg, char *why,
		    size_t why_len);

/* svc_finish destroys the backend and frees the books; every holder must be gone. */
void svc_finish(struct svc *svc);

/*
 * svc_connect decides whether a new connection from who may stay (clients: connected now),
 * telling the bus of a refusal: NONE, or REFUSE with the text the peer is to be told.
 */
void svc_connect(struct svc *svc, unsigned clients, const struct identity *who,
		 struct policy_decision *d);

/* svc_holder_create makes a holder for an accepted connection (who taken over). Returns 0 or
 * -ENOMEM. */
int svc_holder_create(struct svc *svc, struct identity *who, struct holder **out);

/* svc_holder_hello tells the bus that h said hello (under the name it set). */
void svc_holder_hello(struct svc *svc, struct holder *h);

/*
 * svc_holder_gone drops what h held (its waiting requests, its leases, its models and the
 * evictions it asked for as an administrator), grants whoever fits now, tells the bus of the
 * disconnect (greeted: it had said hello) and frees h.
 */
void svc_holder_gone(struct svc *svc, struct holder *h, bool greeted);

/* svc_stop: draining, nothing more is granted; svc_cancel_waiters answers h's waiting
 * requests with err and why. */
void svc_stop(struct svc *svc);
void svc_cancel_waiters(struct svc *svc, struct holder *h, int err, const char *why);

/* svc_limit_hit tells the bus a client ran into limit (fmt NULL: counted, not logged). */
void svc_limit_hit(struct svc *svc, const struct holder *h, enum limit_id limit, const char *fmt,
		   ...) __attribute__((format(printf, 4, 5)));

/* svc_tick runs the deadlines that have passed (call it when due_changed said). */
void svc_tick(struct svc *svc);

/* ---- Devices (service.c) ---- */

/* svc_device_lost marks a device unusable: its waiting requests fail, new ones are refused. */
void svc_device_lost(struct svc *svc, unsigned device, const char *why);

/*
 * svc_meminfo stores the runtime's memory figures of a device as read (err 0), or takes a
 * device the runtime reports gone (-ENODEV) as lost.
 */
void svc_meminfo(struct svc *svc, unsigned device, int err, const struct backend_meminfo *mi);

/* svc_telemetry stores a device's hardware readings (err 0), or forgets them (err < 0). */
void svc_telemetry(struct svc *svc, unsigned device, int err, const struct telemetry_sample *t);

/* ---- Requests (leases.c, models.c, redeclare.c) ---- */

/* svc_request grants, queues or refuses a lease or a model's acquire or resize. */
void svc_request(struct svc *svc, const struct policy_request *r);
void svc_lease_release(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t lease_id);
void svc_trim(struct svc *svc, uint64_t holder, uint64_t request_id, bool all, unsigned device);

void svc_model_register(struct svc *svc, uint64_t holder, uint64_t request_id,
			const struct svc_model_desc *desc);
void svc_model_release(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id);
void svc_model_unregister(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id);
/* svc_evict_ack takes an owner's ack of the eviction it names (its generation; none: the one
 * under way) and refuses a stale, forged or unasked one (-ESTALE, -EINVAL). */
void svc_evict_ack(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		   bool has_generation, uint64_t generation);
/* From the owner or an administrator: evict now (answered when done), pin or unpin. */
void svc_admin_evict(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		     bool force);
void svc_admin_pin(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		   bool pinned);

/* A lease a returning client re-declares after a restart, with its fds. */
struct svc_lease_redeclare {
	bool complete; /* it names its id, device, size and kind, with its fds counted */
	uint64_t lease_id;
	unsigned device;
	uint64_t size;
	uint32_t handle_kind; /* enum backend_handle */
	unsigned n_chunk_sizes;
	const uint64_t *chunk_sizes;
	uint64_t model_id;
	uint64_t offset; /* BACKEND_HANDLE_ARENA: its offset in arena arena_id */
	uint64_t arena_id;
};

/* A host arena a returning client re-declares (its memfd attached). */
struct svc_arena_redeclare {
	bool complete; /* it names its id, device and size, with its fd counted */
	uint64_t arena_id;
	unsigned device;
	uint64_t size;
};

/* A model a returning client re-declares. */
struct svc_model_redeclare {
	unsigned device;
	const char *name;
	bool has_class;
	int model_class;
	bool has_size;
	uint64_t size;
	int32_t priority;
	bool pinned;
	uint64_t previous_id;
	bool has_reservation;
	uint64_t reservation;
	uint32_t use_count;
	bool has_generation;
	uint64_t generation;
};

/* The lease's fds (nfds) are the call's from then on. */
void svc_lease_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_lease_redeclare *req, int *fds, unsigned nfds);
void svc_model_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_model_redeclare *req);
/* svc_arena_redeclare takes over an arena after a restart: fd is the call's (kept or closed);
 * answered with success or an error. */
void svc_arena_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_arena_redeclare *req, int fd);
/* svc_arena_lease_redeclare takes over a lease in an arena re-declared before it (no fd). */
void svc_arena_lease_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			       const struct svc_lease_redeclare *req);
void svc_redeclare_done(struct svc *svc, uint64_t holder, uint64_t request_id);

#endif
