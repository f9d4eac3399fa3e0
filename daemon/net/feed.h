/* SPDX-License-Identifier: MIT */
/*
 * feed.h: telemetry subscriptions: a sample of the daemon's state every interval and its events
 * as they happen, sent only as fast as each subscriber reads (thinned, never queued).
 */
#ifndef ROCMMEMD_FEED_H
#define ROCMMEMD_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <uv.h>

#include "rocmmem.pb-c.h"

struct bus;
struct server;
struct client;

#define FEED_MIN_INTERVAL_MS 10u
#define FEED_MAX_INTERVAL_MS 60000u
/* Events kept for subscribers that fall behind; older ones are dropped for them (counted). */
#define FEED_RING 1024u
/* The most bytes one packed event takes: a longer detail text is cut to fit. */
#define FEED_EVENT_MAX 1536u
/* How much a sample lists; the rest (smallest first) is counted as omitted. */
#define FEED_SAMPLE_CLIENTS 128u
#define FEED_SAMPLE_MODELS 192u
/* Loop time one round of sends may take before it yields to other clients. */
#define FEED_SLICE_NS (2u * 1000u * 1000u)

/* A connection's subscription, kept in its struct client. */
struct subscription {
	bool samples;
	bool events;
	uint32_t interval_ms;
	uint64_t next_due_ms; /* loop time of the next sample */
	uint32_t samples_dropped;
	uint64_t cursor; /* number of the next event to send */
	uint32_t events_dropped;
	TAILQ_ENTRY(client) sample_link;
	TAILQ_ENTRY(client) event_link;
};

TAILQ_HEAD(feed_clients, client);

struct feed_slot {
	uint32_t len;
	uint8_t data[FEED_EVENT_MAX];
};

struct feed {
	struct server *server;
	uv_loop_t *loop;
	uv_timer_t sample_timer;
	uv_timer_t event_timer;
	bool running;
	bool flush_scheduled;
	struct feed_clients samplers;
	struct feed_clients listeners;
	unsigned nsamplers;
	unsigned nlisteners;
	unsigned nsubscribers;	/* connections subscribed to samples, events or both */
	struct feed_slot *ring; /* FEED_RING slots, allocated with the first listener */
	uint64_t published;	/* events numbered so far: event k is ring[k % FEED_RING] */
	uint8_t *sample;	/* the packed sample of the current round */
	size_t sample_len;
	uint8_t *packet; /* one framed message */
	uint64_t samples_built;
};

/* feed_init sets up the timers; no subscriber yet. Returns 0 or a negative errno. */
int feed_init(struct feed *f, struct server *s, uv_loop_t *loop);

/* feed_stop closes the timers (the daemon is stopping); later calls do nothing harmful. */
void feed_stop(struct feed *f);

/* feed_finish frees what the feed allocated, once the loop has run out. */
void feed_finish(struct feed *f);

/*
 * feed_subscribe starts (or replaces) c's subscription: samples every interval_ms (10 ms to
 * 60 s), events, or both. Replies with the interval in effect; the first sample follows at
 * once. Bad requests get -EINVAL; a new subscriber beyond limits.max_subscribers -EUSERS.
 */
void feed_subscribe(struct feed *f, struct client *c, uint64_t request_id,
		    const Rocmmem__Wire__Subscribe *req);

/* feed_unsubscribe ends c's subscription (if any) and replies. */
void feed_unsubscribe(struct feed *f, struct client *c, uint64_t request_id);

/* feed_client_gone forgets c's subscription (the connection is being torn down). */
void feed_client_gone(struct feed *f, struct client *c);

/* feed_client_writable sends c the events it fell behind on, now that its socket drains. */
void feed_client_writable(struct feed *f, struct client *c);

/*
 * feed_subscribe_bus has the feed take every event of b the wire knows: numbered with its
 * sentence and sent to every event subscriber soon. Returns 0 or -ENOSPC.
 */
int feed_subscribe_bus(struct feed *f, struct bus *b);

/*
 * feed_frame writes ServerMessage{event{seq, <field>: body + extra}} to out: body is a packed
 * TelemetrySample (field 6) or TelemetryEvent (field 7), extra more of its fields, packed.
 * Returns the length, or -EMSGSIZE when it would exceed cap.
 */
ssize_t feed_frame(uint8_t *out, size_t cap, uint64_t seq, unsigned field, const uint8_t *body,
		   size_t body_len, const uint8_t *extra, size_t extra_len);

#endif
