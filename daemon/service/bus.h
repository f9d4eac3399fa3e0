/* SPDX-License-Identifier: MIT */
/*
 * bus.h: what happened, told once: the code that causes an event fills a struct bus_event with
 * the sentence that describes it; the subscribers (the log, the counters, the latest denials,
 * the telemetry feed) each take what they want of it. The emitter knows none of them.
 */
#ifndef ROCMMEMD_BUS_H
#define ROCMMEMD_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/log.h"
#include "clock.h"
#include "policy/limits.h"

struct holder;

enum bus_type {
	/* The wire's TelemetryEventType numbers (net/feed.c checks): told to subscribers too. */
	BUS_LEASE_GRANTED = 1,
	BUS_LEASE_DENIED = 2,
	BUS_LEASE_RELEASED = 3,
	BUS_EVICT_REQUESTED = 4,
	BUS_EVICT_ACKED = 5,
	BUS_REVOKED = 6,
	BUS_TRIM_DONE = 7,
	BUS_CLIENT_CONNECTED = 8,
	BUS_CLIENT_DISCONNECTED = 9,
	BUS_MODEL_LOADED = 10,
	BUS_UNDECLARED = 11, /* a client's measured use crossed its declaration and tolerance:
			      * bytes measured, declared what it declared; logged limited per
			      * client (measure.c says when it re-arms) */
	/* The daemon's own: logged (as plain lines) and counted, never on the feed. */
	BUS_OWN = 100,
	BUS_LIMIT_HIT = BUS_OWN, /* limit: which; logged rate-limited (a client can cause it) */
	BUS_ACCESS_REFUSED,	 /* -EPERM to a peer or a request; logged rate-limited */
	BUS_BYPASS,		 /* a request granted ahead of a head waiting for its holder */
	BUS_ALLOC_FAILED,	 /* an allocation for a holder that left meanwhile failed */
	BUS_BACKFILL,		 /* a request granted ahead of a head it does not delay */
	BUS_ACK_REFUSED,	 /* an evict ack naming no eviction under way; logged limited */
};

/* Flags of an event. */
#define BUS_ADOPTED 0x1u   /* LEASE_GRANTED: taken over after a restart, not a grant */
#define BUS_RECLAIMED 0x2u /* LEASE_RELEASED: its holder left */
#define BUS_FAILED 0x4u	   /* LEASE_DENIED: the backend refused the allocation */
#define BUS_PEER 0x8u	   /* ACCESS_REFUSED: a connection, not a request */

/* One event. Unset numbers are 0; has_device says whether device applies. */
struct bus_event {
	enum bus_type type;
	enum log_level level; /* set by bus_emit */
	unsigned flags;
	const struct holder *holder; /* whom it concerns, or NULL */
	bool has_device;
	unsigned device;
	uint64_t bytes;
	uint64_t lease_id;
	uint64_t model_id;
	const char *model_name;
	uint64_t waited_ms;
	uint64_t declared;   /* UNDECLARED: what the client declared on the device */
	int error;	     /* denials: the negative errno the client got */
	enum limit_id limit; /* LIMIT_HIT */
};

struct bus_subscriber {
	void *ctx;
	/* e and line (the event's sentence, or NULL: nothing to log) are valid during the call;
	 * the times are the clock's when the event was emitted. */
	void (*event)(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		      uint64_t real_ms);
	/* Whether it would use e's sentence now (NULL: never): bus_emitf formats the sentence
	 * only when a subscriber would, and passes NULL otherwise. */
	bool (*wants_line)(void *ctx, const struct bus_event *e);
};

#define BUS_MAX_SUBSCRIBERS 8u

struct bus {
	struct bus_subscriber subs[BUS_MAX_SUBSCRIBERS];
	unsigned n;
	const struct svc_clock *clock;
};

/* bus_init sets up a bus without subscribers on clock (which must outlive it). */
void bus_init(struct bus *b, const struct svc_clock *clock);

/* bus_subscribe adds a subscriber, told every event after those before it. Returns 0 or
 * -ENOSPC. */
int bus_subscribe(struct bus *b, const struct bus_subscriber *s);

/* bus_emit tells every subscriber e (its level set to level) and its sentence line (or NULL). */
void bus_emit(struct bus *b, struct bus_event *e, enum log_level level, const char *line);

/*
 * bus_wants_line sets e's level and says whether a subscriber would use its sentence: a caller
 * whose arguments cost formatting too (sizes, labels) formats them only then, and emits with
 * a NULL line otherwise.
 */
bool bus_wants_line(const struct bus *b, struct bus_event *e, enum log_level level);

/* bus_emitf is bus_emit with the sentence formatted once, and only when a subscriber would use
 * it (most events are debug lines nobody reads: two per lease round trip). */
void bus_emitf(struct bus *b, struct bus_event *e, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* bus_type_name is the event's name in logs and JSON ("lease_granted", ...). */
const char *bus_type_name(enum bus_type type);

#endif
