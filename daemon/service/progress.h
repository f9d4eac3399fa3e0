/* SPDX-License-Identifier: MIT */
/*
 * progress.h: progress events for the waiting requests that asked for them (progress = true on
 * the wire): what each waits for (policy/waitfor.h), told when it starts waiting, when that
 * changes, and when the eviction it waited for ends; at most one per PROGRESS_INTERVAL_MS per
 * request, the latest state once the interval is over.
 */
#ifndef ROCMMEMD_PROGRESS_H
#define ROCMMEMD_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/waitfor.h"

struct svc;
struct waiter;

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

/* svc_progress_init sets up the table and subscribes to the bus (an eviction's end). */
void svc_progress_init(struct svc *svc);

/* svc_progress_finish frees the table. */
void svc_progress_finish(struct svc *svc);

/* svc_progress_track tells w's holder about w from now on. Returns 0 or -ENOMEM (untold). */
int svc_progress_track(struct svc *svc, const struct waiter *w);

/*
 * svc_progress_update tells each tracked request what changed for it, as the rate allows, and
 * forgets those no longer waiting (granted, refused, gone with their holder). Call it after
 * the books changed and when svc_progress_due says.
 */
void svc_progress_update(struct svc *svc);

/* svc_progress_due is when svc_progress_update has a folded change to tell (UINT64_MAX: none). */
uint64_t svc_progress_due(const struct svc *svc);

#endif
