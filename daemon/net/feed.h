/* SPDX-License-Identifier: MIT */
/*
 * feed.h: telemetry subscriptions: a sample of the daemon's state every interval and its events
 * as they happen, sent only as fast as each subscriber reads (thinned, never queued).
 */
#ifndef ROCMMEMD_FEED_H
#define ROCMMEMD_FEED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "net.h"
#include "rocmmem.pb-c.h"

struct bus;

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

#endif
