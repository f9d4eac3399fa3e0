/* SPDX-License-Identifier: MIT */
/*
 * policy.h: every decision, as a pure function of the books, the settings in force, a request
 * or an event, and the time. Nothing here changes the books, sends, logs or reads a clock: the
 * service applies what these return (daemon/service/service.c). The rules are those of
 * docs/residency.md ("How the daemon decides") and docs/security.md (limits, access).
 */
#ifndef ROCMMEMD_POLICY_H
#define ROCMMEMD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "access.h"
#include "limits.h"
#include "placement.h"
#include "state/state.h"

/* The longest text of a refusal (the explanation and what a model request adds to it). */
#define POLICY_TEXT_MAX 1280u

/* A per-class setting left to the default (0), or turned off for that class. */
#define POLICY_CLASS_OFF UINT64_MAX

/* How the queues are served beyond arrival order (docs/residency.md, "Backfilling"). */
struct policy_schedule {
	bool backfill;		   /* grant a later request that fits and delays nobody */
	unsigned backfill_passes;  /* a request passed over this many times is passed no more */
	uint64_t backfill_wait_ms; /* ... nor once this long after it was first passed over */
	/* Per model class: how long an owner has to unload (0: evict_deadline_ms). */
	uint64_t evict_deadline_ms[MODEL_CLASSES];
	/* The longest a model may stay in use before its owner is asked to release it: 0 none;
	 * per class 0: max_hold_ms, POLICY_CLASS_OFF: none for that class. */
	uint64_t max_hold_ms;
	uint64_t max_hold_class_ms[MODEL_CLASSES];
};

/* The settings in force (the configuration, changed by reload). */
struct policy_config {
	uint64_t evict_deadline_ms; /* how long an owner has to unload an evicted model */
	struct policy_schedule sched;
	struct limits limits;
	struct access_policy access; /* who connects, who administers */
	uid_t daemon_uid;	     /* always allowed to connect */
	uint64_t fd_limit;	     /* the descriptor limit (RLIMIT_NOFILE at start) */
	uint64_t fd_own;	     /* descriptors the daemon keeps for itself */
	bool stopping;		     /* draining: nothing more is granted */
};

enum policy_request_kind {
	POLICY_LEASE,	      /* a lease, tagged with model_id when non-zero */
	POLICY_MODEL_ACQUIRE, /* model_id in use; its size reserved if not resident */
	POLICY_MODEL_RESIZE,  /* model_id's reservation set to `requested` */
};

/* A request for memory, as decoded off the wire (no protobuf). */
struct policy_request {
	enum policy_request_kind kind;
	uint64_t holder;
	uint64_t request_id;
	unsigned device;    /* leases; model requests use the model's */
	uint64_t requested; /* a lease's bytes as asked; a resize's target reservation */
	uint64_t model_id;
	int64_t timeout_ms; /* 0: never wait; < 0: no limit */
	const char *tag;    /* leases */
	bool progress;	    /* tell it what it waits for while it waits (service/progress.c) */
	bool own_memfd;	    /* host leases: a memfd of its own, not a range of an arena */
};

enum policy_verdict {
	POLICY_NONE = 0, /* nothing to do (a check passed, the queues are settled) */
	POLICY_GRANT,	 /* grant: `grant` says what, `bytes` on `device` */
	POLICY_QUEUE,	 /* wait on `device` until `due_ms` */
	POLICY_REFUSE,	 /* answer `refusal` */
	POLICY_EVICT,	 /* ask the owners of `victims` to unload by `due_ms` */
	POLICY_REVOKE,	 /* `model`'s owner missed its deadline: take it back (`reason`) */
	POLICY_TRIM,	 /* have the backend trim `device` (every usable one when `all`) */
	POLICY_DONE, /* answered now with success, nothing held (admin evict of an evicted model) */
};

enum policy_grant {
	GRANT_LEASE,	    /* allocate `bytes` for a lease */
	GRANT_MODEL_IN_USE, /* the model is resident (or holds nothing): in use at once */
	GRANT_MODEL_LOAD,   /* reserve `bytes`, then the model is in use (resident now) */
	GRANT_MODEL_GROW,   /* reserve `bytes`: the reservation ends at the waiter's target */
	GRANT_MODEL_SHRINK, /* set the reservation to `bytes` (a smaller target) */
};

enum policy_refusal_kind {
	REFUSE_PLAIN,  /* the reply only: -ENOENT, -EINVAL, -ENODEV, -EBUSY, -ECANCELED, ... */
	REFUSE_DENIAL, /* a memory request refused or timed out: LEASE_DENIED (counted, in status's
			* denials, on the feed) */
	REFUSE_LIMIT,  /* a limit hit: `limit` counted; `log` (if any) logged rate-limited */
	REFUSE_ACCESS, /* not the owner nor an administrator (-EPERM): counted, logged limited */
	REFUSE_ACK,    /* an evict ack that names no eviction under way: logged at warning */
};

struct policy_refusal {
	int err; /* negative errno */
	enum policy_refusal_kind kind;
	enum limit_id limit; /* REFUSE_LIMIT */
	char text[POLICY_TEXT_MAX];
	char log[POLICY_TEXT_MAX]; /* REFUSE_LIMIT: the log line ("" when not logged) */
};

struct policy_decision {
	enum policy_verdict verdict;
	unsigned device;
	uint64_t waiter; /* arrival number of the queued request it is about; 0: the request
			  * at hand */
	uint64_t holder; /* whom it concerns */
	enum policy_grant grant;
	uint64_t bytes;	    /* GRANT: to allocate or reserve; EVICT: what the head needs; QUEUE:
			     * the waiter's size (rounded; a model request's need) */
	uint64_t requested; /* QUEUE: as asked (a model request's need when it came) */
	uint64_t target;    /* QUEUE, GRANT of a model request: the reservation it ends with */
	uint64_t waited_ms; /* GRANT and REFUSE of a queued request */
	bool bypass;	    /* GRANT ahead of a head that waits for this holder */
	bool backfill;	    /* GRANT ahead of a head that this grant does not delay */
	uint64_t due_ms;    /* QUEUE: its timeout (UINT64_MAX: none); EVICT: the deadline */
	bool all;	    /* TRIM: every usable device not being trimmed */
	struct policy_refusal refusal;
	/* EVICT */
	unsigned nvictims;
	uint64_t victims[PLACEMENT_MAX_VICTIMS];       /* model ids */
	uint64_t victim_due_ms[PLACEMENT_MAX_VICTIMS]; /* each one's deadline (its class's) */
	bool force; /* the victim is in use: its owner is asked to release it too (max hold, or an
		     * administrator's --force) */
	uint64_t for_holder; /* the head's holder they are asked for; 0: an administrator */
	/* REVOKE, DONE, admin EVICT */
	uint64_t model;
	char reason[160]; /* REVOKE: "did not unload within 20 s of being asked"; EVICT with
			   * force: why the owner is asked to release */
};

/* Scratch memory the caller owns and reuses across calls: the bypass rule's marks. */
struct policy_scratch {
	uint64_t *marked; /* holders waiting behind a head, sorted */
	bool *cleared;	  /* ... each one's mark taken off */
	size_t n, cap;
};

void policy_scratch_init(struct policy_scratch *x);
void policy_scratch_finish(struct policy_scratch *x);

/* policy_decision_init clears d (verdict NONE). */
void policy_decision_init(struct policy_decision *d);

/* policy_refuse makes d a refusal of kind with err and the text fmt says. */
void policy_refuse(struct policy_decision *d, enum policy_refusal_kind kind, int err,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * policy_need is what a waiting request needs now: a lease's size; for a model request, its
 * target reservation minus what the model holds (all of it while the model is being evicted:
 * it will hold nothing by the time the request can be granted). A model's reservation may
 * change while its request waits (evicted, revoked, shrunk), so this is computed afresh.
 */
uint64_t policy_need(const struct waiter *w);

/* policy_evicting_bytes sums what models being evicted on a device still hold. */
uint64_t policy_evicting_bytes(const struct device *d);

/* policy_evict_deadline is how long m's owner has to unload it: its class's, or the default. */
uint64_t policy_evict_deadline(const struct policy_config *cfg, const struct model *m);

/* policy_max_hold is the longest m may stay in use before its owner is asked to release it
 * (its class's, or the default); 0: no limit. */
uint64_t policy_max_hold(const struct policy_config *cfg, const struct model *m);

/*
 * policy_admit decides a new memory request: GRANT when nothing waits ahead and it fits (and
 * no exclusive rival stands in the way), QUEUE when it may wait, REFUSE otherwise (lost
 * device, too big, never satisfiable, a limit, the uid's quota, an unknown or foreign model,
 * timeout 0, with the explanation).
 */
void policy_admit(const struct state *s, const struct policy_config *cfg,
		  const struct policy_request *r, uint64_t now_ms, struct policy_decision *d);

/*
 * policy_fd_admit checks that holder may hold one more host lease (one that keeps an fd in
 * the daemon): its connection, its uid and all holders together stay within the descriptor
 * caps. NONE, or REFUSE (-EMFILE, a limit hit).
 */
void policy_fd_admit(const struct state *s, const struct policy_config *cfg, const struct holder *h,
		     struct policy_decision *d);

/*
 * policy_register checks a model registration on device of size bytes (has_size false: none):
 * NONE with the rounded size in d->bytes, or REFUSE (-E2BIG beyond the budget, -EDQUOT beyond
 * the models per holder).
 */
void policy_register(const struct state *s, const struct holder *h, unsigned device, bool has_size,
		     uint64_t size, const char *name, struct policy_decision *d);

/*
 * policy_next returns what the queues call for now, one decision at a time, devices in order:
 * REFUSE (-ENODEV) of a waiter on a lost device; GRANT of a head that fits; for a head that
 * does not, EVICT of the idle models that make room (not yet asked), then GRANT (bypass) of a
 * request behind it that the hold-and-wait rule lets through; NONE once nothing more can
 * happen, and while stopping. The caller applies each before asking again: each application
 * changes the books so that the same decision never comes twice.
 */
void policy_next(const struct state *s, const struct policy_config *cfg, uint64_t now_ms,
		 struct policy_scratch *x, struct policy_decision *d);

/*
 * policy_expired returns what the earliest deadline passed at now_ms calls for: REFUSE
 * (-ETIMEDOUT, "timed out after N ms: " and the explanation) of a waiter, REVOKE of a model
 * whose owner did not unload it, EVICT (force) of a model in use past its maximum hold, or
 * NONE (none passed; the grace period is the service's).
 */
void policy_expired(const struct state *s, const struct policy_config *cfg, uint64_t now_ms,
		    struct policy_decision *d);

/* policy_release checks a lease release: NONE, or REFUSE (-ENOENT; -EPERM not the owner). */
void policy_release(const struct state *s, const struct holder *h, uint64_t lease_id,
		    struct policy_decision *d);

enum policy_model_op { OP_RELEASE, OP_UNREGISTER };

/* policy_model_op checks an owner's release or unregister of a model: NONE, or REFUSE
 * (-ENOENT, -EPERM, -EINVAL not in use). */
void policy_model_op(const struct state *s, const struct holder *h, uint64_t model_id,
		     enum policy_model_op op, struct policy_decision *d);

/*
 * policy_evict_ack checks an owner's ack of an eviction: the one under way, named by its
 * generation (has_generation false: an older client, acking whatever is under way). NONE, or
 * REFUSE (-ENOENT, -EPERM; REFUSE_ACK -EINVAL or -ESTALE for an ack that names no eviction
 * under way; -EBUSY in use).
 */
void policy_evict_ack(const struct state *s, const struct holder *h, uint64_t model_id,
		      bool has_generation, uint64_t generation, struct policy_decision *d);

/*
 * policy_admin decides an administrator's request on a model (the owner, root or a member of
 * the admin group): evict: EVICT of the model (due), DONE when it holds nothing, NONE when an
 * eviction is under way (answered when it ends), REFUSE (-EBUSY in use, or asked already);
 * pin: NONE. REFUSE -ENOENT, or -EPERM naming who may.
 */
void policy_admin(const struct state *s, const struct policy_config *cfg, const struct holder *h,
		  uint64_t model_id, bool evict, uint64_t now_ms, struct policy_decision *d);

/*
 * policy_admin_force decides an administrator's forced eviction (`rocmmemctl evict --force`):
 * as policy_admin's evict, and a model in use gets EVICT with force (its owner asked to
 * release and unload by the deadline, then revoked). Only root or a member of the admin group,
 * whoever owns the model: REFUSE -EPERM otherwise.
 */
void policy_admin_force(const struct state *s, const struct policy_config *cfg,
			const struct holder *h, uint64_t model_id, uint64_t now_ms,
			struct policy_decision *d);

/* policy_trim decides a client's trim: TRIM, or REFUSE -EBUSY for a device being trimmed. */
void policy_trim(const struct state *s, bool all_devices, unsigned device,
		 struct policy_decision *d);

/*
 * policy_auto_trim says whether to trim a device by itself: TRIM when memory is tight there
 * (requests waiting, or the runtime reports under a tenth free), the backend trims blocking
 * calls (can_trim), none is under way, and the daemon is not stopping; else NONE.
 */
void policy_auto_trim(const struct state *s, const struct policy_config *cfg, unsigned device,
		      bool can_trim, struct policy_decision *d);

/*
 * policy_connect decides a new connection from who, clients being connected now: NONE, or
 * REFUSE (-EUSERS clients or clients per uid, a limit hit; -EPERM not an allowed user or
 * group) with the text the peer is told and the line the log gets.
 */
void policy_connect(const struct state *s, const struct policy_config *cfg, unsigned clients,
		    const struct identity *who, struct policy_decision *d);

#endif
