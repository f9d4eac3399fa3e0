/* SPDX-License-Identifier: MIT */
/* queue.h: a device's first-in first-out queue of lease requests waiting for memory. */
#ifndef ROCMMEMD_QUEUE_H
#define ROCMMEMD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "version.h"

struct holder;
struct model;

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
	uint64_t due_ms;    /* enqueued_ms + timeout_ms (UINT64_MAX: no limit) */
	uint32_t heap_slot; /* its deadline in state.deadlines, 0: none */
};

TAILQ_HEAD(waiter_list, waiter);

struct queue {
	struct waiter_list head;
	unsigned count;
};

void queue_init(struct queue *q);
void queue_push(struct queue *q, struct waiter *w);
void queue_remove(struct queue *q, struct waiter *w);
/* queue_head returns the oldest waiter or NULL. */
struct waiter *queue_head(const struct queue *q);
static inline bool queue_empty(const struct queue *q)
{
	return q->count == 0;
}
/* queue_position returns how many waiters are ahead of w. */
unsigned queue_position(const struct queue *q, const struct waiter *w);

#endif
