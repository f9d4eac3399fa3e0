/* SPDX-License-Identifier: MIT */
/*
 * books.h: the books' plain data: a lease, a model, a waiting request and a device's queue, a
 * holder and its uid's account, and how they point to each other. The functions over them are
 * in lease.h, model.h, queue.h and holder.h; every change that must keep them consistent is a
 * state_* function (state.h).
 */
#ifndef ROCMMEMD_BOOKS_H
#define ROCMMEMD_BOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "platform/backend/backend.h"
#include "platform/peer.h"
#include "version.h"

struct arena;
struct holder;
struct model;

struct lease {
	uint64_t id;
	struct holder *owner;
	unsigned device;
	uint64_t size;
	struct model *model; /* the model it counts towards, or NULL */
	uint64_t created_ms;
	char tag[ROCMMEM_NAME_MAX + 1];
	struct backend_alloc alloc; /* empty for a lease in an arena */
	struct arena *arena;	    /* its holder's arena it is a range of, or NULL */
	uint64_t offset;	    /* ... at this offset */
	uint32_t state_slot; /* its record in the state file (daemon/service/adopt.c), 0: none */
	TAILQ_ENTRY(lease) holder_link;
	TAILQ_ENTRY(lease) model_link; /* on model->leases while model is not NULL */
};

TAILQ_HEAD(lease_list, lease);

/* Classes as on the wire (ROCMMEM__WIRE__MODEL_CLASS__*). */
#define MODEL_CLASSES 5u

/* The highest generation a re-declaring client may carry over: far from wrapping. */
#define MODEL_GENERATION_MAX ((uint64_t)1 << 62)

enum model_state {
	MODEL_EVICTED,	/* holds no memory */
	MODEL_IDLE,	/* resident, not in use: evictable unless pinned */
	MODEL_IN_USE,	/* between acquire and release */
	MODEL_EVICTING, /* asked to unload; the owner has until the deadline */
};

struct model {
	uint64_t id;
	struct holder *owner;
	unsigned device;
	char name[ROCMMEM_NAME_MAX + 1];
	unsigned model_class;
	uint64_t size;	  /* reserved by acquire when not resident (0: leases only) */
	int32_t priority; /* higher stays resident longer */
	bool pinned;
	uint64_t reservation; /* bytes accounted without a lease */
	uint64_t lease_bytes; /* bytes of the owner's leases tagged with this model */
	/* Those leases: unloading the model walks them, not every lease of its owner (a host
	 * may hold thousands of plain leases beside a model). */
	struct lease_list leases;
	unsigned use_count; /* acquires not yet released */
	bool evicting;
	/* Its residency's number: 1 at registration, one more each time its memory is taken
	 * back (acked or revoked). Evictions name it, acks echo it (docs/residency.md). */
	uint64_t generation;
	uint64_t evict_started_ms;
	uint64_t last_used_ms; /* loop time of the last acquire or release */
	uint64_t evictions;
	unsigned waiters; /* requests waiting on this model's behalf */
	/* An administrator's evict request, answered when the eviction is done. */
	uint64_t evict_requester; /* the administrator's holder id, 0: none */
	uint64_t evict_request_id;
	uint32_t state_slot;   /* its reservation's record in the state file (adopt.c), 0: none */
	uint64_t evict_due_ms; /* while evicting: when it is revoked without an ack */
	uint32_t heap_slot;    /* that deadline in state.deadlines, 0: none */
	/* While in use with a maximum hold (docs/residency.md, "Maximum hold"): since when,
	 * and the deadline at which its owner is asked to release it. */
	uint64_t in_use_since_ms;
	uint32_t hold_slot; /* that deadline in state.deadlines, 0: none */
	TAILQ_ENTRY(model) holder_link;
	TAILQ_ENTRY(model) device_link;
};

TAILQ_HEAD(model_list, model);

static inline uint64_t model_resident(const struct model *m)
{
	return m->reservation + m->lease_bytes;
}

static inline enum model_state model_state(const struct model *m)
{
	if (m->evicting)
		return MODEL_EVICTING;
	if (m->use_count > 0)
		return MODEL_IN_USE;
	return model_resident(m) > 0 ? MODEL_IDLE : MODEL_EVICTED;
}

/* model_evictable says whether the daemon may ask m's owner to unload it now. */
static inline bool model_evictable(const struct model *m)
{
	return model_state(m) == MODEL_IDLE && !m->pinned;
}

enum waiter_kind {
	WAIT_LEASE,	    /* a lease (tagged with model_id when non-zero) */
	WAIT_MODEL_ACQUIRE, /* a model becoming resident: reserve size, then in use */
	WAIT_MODEL_RESIZE,  /* a model's reservation growing to target */
};

/* One waiting request. It lives on its device's queue and on its holder's list. */
struct waiter {
	enum waiter_kind kind;
	struct model *model; /* model waits; NULL for leases */
	uint64_t target;     /* model requests: the reservation they end with */
	TAILQ_ENTRY(waiter) queue_link;
	TAILQ_ENTRY(waiter) holder_link;
	struct holder *holder;
	uint64_t request_id;
	uint64_t seq; /* daemon-wide arrival number (state_waiter_number) */
	unsigned device;
	uint64_t size;	    /* bytes it needs, rounded (model requests: see residency_need) */
	uint64_t requested; /* as asked */
	uint64_t model_id;
	int64_t timeout_ms; /* < 0: no limit */
	uint64_t enqueued_ms;
	char tag[ROCMMEM_NAME_MAX + 1];
	bool own_memfd;	    /* a host lease asked for a memfd of its own */
	uint64_t due_ms;    /* enqueued_ms + timeout_ms (UINT64_MAX: no limit) */
	uint32_t heap_slot; /* its deadline in state.deadlines, 0: none */
	/* Backfilling (docs/residency.md): how often a later request was granted ahead of it,
	 * and when that first happened (0: never). */
	unsigned passed;
	uint64_t first_passed_ms;
};

TAILQ_HEAD(waiter_list, waiter);

struct queue {
	struct waiter_list head;
	unsigned count;
};

struct holder {
	uint64_t id;	     /* its connection's id: handed out in order, never reused */
	struct identity who; /* as the kernel vouched for it at connect */
	char name[ROCMMEM_NAME_MAX + 1]; /* "" until hello */
	uint64_t connected_ms;
	uint32_t lease_count;
	uint64_t leased_bytes;
	uint64_t device_bytes[BACKEND_MAX_DEVICES]; /* its leases on each device */
	struct lease_list leases;
	struct waiter_list waiters;
	unsigned waiter_count;
	struct model_list models;
	unsigned model_count;
	unsigned jobs;	    /* backend jobs in flight for it (allocations, imports, trims) */
	unsigned fd_leases; /* host leases held or being granted: an fd each (state_fd_take) */
	uint32_t features;  /* the hello's feature bits the daemon uses with it (HOLDER_*) */
	/* Its host arena on each device with host memory (created at its first arena lease
	 * there), and its host leases that fitted no free range of it (a memfd each). */
	struct arena *arena[BACKEND_MAX_DEVICES];
	uint64_t arena_fallbacks;
	uint32_t arena_warm_slot;     /* its DUE_ARENA deadline, 0: none */
	struct uid_account *account;  /* its uid's account */
	TAILQ_ENTRY(holder) uid_link; /* ... of which it is one */
	/* A ring of its process's holders in that account (itself alone: both point to it), so
	 * that what one process holds is summed over its own connections, not the uid's. */
	struct holder *proc_next, *proc_prev;
};

/* Holder feature bits: the wire's Feature numbers (net/ checks). */
#define HOLDER_HOST_ARENA 1u
#define HOLDER_LANE 2u /* a request lane (net/lane_io.h) */

/* One uid's holders. */
struct uid_account {
	uid_t uid;
	unsigned connections;
	unsigned fd_leases; /* its holders' fd_leases, summed */
	TAILQ_HEAD(, holder) holders;
	TAILQ_ENTRY(uid_account) link;
};

#endif
