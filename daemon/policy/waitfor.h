/* SPDX-License-Identifier: MIT */
/* waitfor.h: what a waiting request waits for, read off the books (for its progress events). */
#ifndef ROCMMEMD_WAITFOR_H
#define ROCMMEMD_WAITFOR_H

#include <stdbool.h>
#include <stdint.h>

#include "state/state.h"

/* The reasons, most specific first (the wire's WaitReason numbers: net/encode.c checks). */
enum waitfor_reason {
	WAITFOR_UNKNOWN = 0,
	WAITFOR_GRANTING = 1,  /* it fits and nothing stands before it: granted at once */
	WAITFOR_QUEUE = 2,     /* it would fit, but requests ahead of it go first */
	WAITFOR_EVICTION = 3,  /* a model's eviction under way: model, owner, due_ms */
	WAITFOR_HOLDER = 4,    /* bytes a client holds and has not released: holder, bytes */
	WAITFOR_EXCLUSIVE = 5, /* a resident model of an exclusive class: model, owner */
	WAITFOR_BUDGET = 6,    /* nobody in particular: memory being freed, a budget lowered */
};

struct waitfor {
	unsigned device;
	unsigned position; /* requests ahead of it on its device's queue */
	unsigned queued;   /* requests on that queue, it included */
	enum waitfor_reason reason;
	uint64_t need;	    /* bytes it needs now (policy_need) */
	uint64_t free;	    /* free within the budget now */
	uint64_t model;	    /* EVICTION, EXCLUSIVE: the model's id */
	uint64_t owner;	    /* the model's owner, or the holder (HOLDER): a holder id; 0: none */
	uint64_t due_ms;    /* EVICTION: when its owner is revoked */
	uint64_t bytes;	    /* EVICTION, EXCLUSIVE: the model's resident bytes; HOLDER: held */
	unsigned evictions; /* evictions under way on the device */
};

/*
 * waitfor_compute says what waiting request w waits for, from the books alone: its position;
 * then the first of: its own model's eviction; an exclusive rival (its eviction if under way,
 * else the rival itself, or its owner while it is in use); the eviction under way on the device
 * that ends first; nothing but the queue when it fits (GRANTING when it is first); the client
 * holding the most on the device; the budget.
 */
void waitfor_compute(const struct state *s, const struct waiter *w, struct waitfor *out);

/*
 * waitfor_changed says whether b tells the waiter something a does not: another position,
 * reason, model, owner or deadline, or another count of evictions. Bytes, free memory and the
 * requests queued behind it, which move with every grant and release, are no change.
 */
bool waitfor_changed(const struct waitfor *a, const struct waitfor *b);

#endif
