/* SPDX-License-Identifier: MIT */
/*
 * progress.h: the table of waiting requests that asked to be told their progress (progress =
 * true on the wire), and the event each is sent; progress_tell.h tells them.
 */
#ifndef ROCMMEMD_PROGRESS_H
#define ROCMMEMD_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/waitfor.h"

#include "state/books.h"

/* The shortest time between two progress events of one request (changes in between are
 * folded into the next): a queue churned by clients polling at 20 Hz tells each waiter at
 * most 4 times a second. An eviction's end is told at once (it ends once). */
#define PROGRESS_INTERVAL_MS 250u

/* How the eviction a request waited for ended (the wire's EvictionEnd numbers). */
enum progress_end {
	PROGRESS_WAITING = 0,
	PROGRESS_ACKED = 1,   /* its owner unloaded it */
	PROGRESS_REVOKED = 2, /* its owner missed the deadline */
};

/* One progress event, as net/ encodes it (NOTE_WAIT_PROGRESS); valid during the call. */
struct svc_progress {
	uint64_t request_id;
	struct waitfor wait;
	const char *model_name;	   /* the model wait.model names, "" if none */
	int32_t owner_pid;	   /* wait.owner's process, 0: none */
	const char *owner_name;	   /* ... its name, "" if none */
	uint64_t deadline_left_ms; /* EVICTION: how long until its owner is revoked */
	uint64_t waited_ms;
	enum progress_end ended; /* the eviction of wait.model is over */
	enum waiter_kind kind;	 /* what waits */
	uint64_t request_model;	 /* its model (a model request's, a tagged lease's), 0: none */
	uint64_t requested;	 /* bytes as asked */
};

/* A request being told. */
struct progress_entry {
	uint64_t waiter; /* its arrival number (state_waiter_find) */
	uint64_t request_id;
	struct waitfor sent; /* what it was told last */
	bool told;	     /* ... if anything */
	uint64_t sent_ms;
};

struct progress {
	struct progress_entry *v;
	size_t n, cap;
	uint64_t due_ms; /* when a folded change is due to be told (UINT64_MAX: none) */
	bool updating, again;
};

/* progress_init empties p. */
void progress_init(struct progress *p);

/* progress_free frees p's table and empties it. */
void progress_free(struct progress *p);

/* progress_track adds the waiter of arrival number seq (request request_id) to p. Returns 0
 * or -ENOMEM (untold). */
int progress_track(struct progress *p, uint64_t seq, uint64_t request_id);

/* progress_due is when a folded change is due to be told (UINT64_MAX: none). */
uint64_t progress_due(const struct progress *p);

#endif
