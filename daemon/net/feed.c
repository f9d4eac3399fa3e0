/* SPDX-License-Identifier: MIT */
/*
 * feed.c: telemetry subscriptions. A sample is built and packed once per round and an event
 * once when it happens; each subscriber then gets the same bytes in its own envelope (its
 * sequence number, its dropped count), sent only if its socket takes them at once. A
 * subscriber that does not keep up loses samples and, beyond FEED_RING, events (both
 * counted), so the daemon never holds more for it than the kernel's socket buffer.
 */
#include "feed.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "client.h"
#include "service/bus.h"
#include "feed_frame.h"
#include "feed_sample.h"
#include "server.h"
#include "text.h"
#include "wire.h"

/* The hardware sampler never runs faster than this, whatever the subscribers ask. */
#define HARDWARE_MIN_INTERVAL_MS 100u

/* send_sample sends this round's sample to c; counts it dropped if c's socket is full. */
static void send_sample(struct feed *f, struct client *c)
{
	struct subscription *sub = &c->sub;
	uint8_t extra[32];
	size_t extra_len = 0;
	ssize_t len;

	/* Its socket is full (or replies wait): dropped at once; flush() tells us when it drains.
	 */
	if (c->feed_blocked) {
		if (sub->samples_dropped < UINT32_MAX)
			sub->samples_dropped++;
		return;
	}
	if (sub->samples_dropped)
		extra_len += feed_put_uint_field(extra, FEED_SAMPLE_DROPPED, sub->samples_dropped);
	extra_len += feed_put_uint_field(extra + extra_len, FEED_SAMPLE_INTERVAL, sub->interval_ms);
	len = feed_frame(f->packet, WIRE_MAX_FRAME, c->event_seq + 1, FEED_FIELD_SAMPLE, f->sample,
			 f->sample_len, extra, extra_len);
	if (len > 0 && client_send_droppable(c, f->packet, (size_t)len) == 0) {
		c->event_seq++;
		sub->samples_dropped = 0;
	} else if (sub->samples_dropped < UINT32_MAX) {
		sub->samples_dropped++;
	}
}

static void on_samples(uv_timer_t *timer);

static void arm_samples(struct feed *f, uint64_t delay_floor)
{
	uint64_t now = uv_now(f->loop), due = UINT64_MAX, delay;
	struct client *c;

	if (!f->running)
		return;
	TAILQ_FOREACH (c, &f->samplers, sub.sample_link) {
		if (c->sub.next_due_ms < due)
			due = c->sub.next_due_ms;
	}
	if (due == UINT64_MAX) {
		uv_timer_stop(&f->sample_timer);
		return;
	}
	delay = due > now ? due - now : 0;
	if (delay < delay_floor)
		delay = delay_floor;
	uv_timer_start(&f->sample_timer, on_samples, delay, 0);
}

/*
 * on_samples serves every subscriber whose sample is due, the sample built once for all.
 * Served subscribers move to the end of the list, so when a round runs out of its slice the
 * ones it did not reach come first next time.
 */
static void on_samples(uv_timer_t *timer)
{
	struct feed *f = timer->data;
	uint64_t now = uv_now(f->loop), start = uv_hrtime();
	unsigned n = f->nsamplers, i = 0;
	struct client *c, *next;
	bool built = false, out_of_time = false, failed = false;

	for (c = TAILQ_FIRST(&f->samplers); c && i < n; c = next, i++) {
		struct subscription *sub = &c->sub;

		next = TAILQ_NEXT(c, sub.sample_link);
		if (sub->next_due_ms > now)
			continue;
		if (uv_hrtime() - start > FEED_SLICE_NS) {
			out_of_time = true;
			break;
		}
		if (!built) {
			if (feed_build_sample(f) < 0) {
				log_warn("Could not build a telemetry sample: out of memory");
				failed = true;
				break;
			}
			built = true;
		}
		send_sample(f, c);
		/* Counted from when it went: samples are never closer than the interval. */
		sub->next_due_ms = now + sub->interval_ms;
		TAILQ_REMOVE(&f->samplers, c, sub.sample_link);
		TAILQ_INSERT_TAIL(&f->samplers, c, sub.sample_link);
	}
	/* Out of time: the rest soon; out of memory: not in a tight loop. */
	arm_samples(f, failed ? FEED_MIN_INTERVAL_MS : out_of_time ? 1 : 0);
}

/* ----------------------------------------------------------------------------------------- */
/* Events */

/* send_events sends c what it has not had yet, until its socket is full or time runs out. */
static bool send_events(struct feed *f, struct client *c, uint64_t start)
{
	struct subscription *sub = &c->sub;

	while (sub->cursor < f->published) {
		const struct feed_slot *slot;
		uint8_t extra[16];
		size_t extra_len = 0;
		ssize_t len;

		if (f->published - sub->cursor > FEED_RING) {
			uint64_t lost = f->published - FEED_RING - sub->cursor;

			sub->events_dropped = lost > UINT32_MAX - sub->events_dropped
						  ? UINT32_MAX
						  : sub->events_dropped + (uint32_t)lost;
			sub->cursor = f->published - FEED_RING;
		}
		if (uv_hrtime() - start > FEED_SLICE_NS)
			return false;
		slot = &f->ring[sub->cursor % FEED_RING];
		if (sub->events_dropped)
			extra_len =
			    feed_put_uint_field(extra, FEED_TELEMETRY_DROPPED, sub->events_dropped);
		len = feed_frame(f->packet, WIRE_MAX_FRAME, c->event_seq + 1, FEED_FIELD_TELEMETRY,
				 slot->data, slot->len, extra, extra_len);
		if (len < 0 || client_send_droppable(c, f->packet, (size_t)len) < 0)
			return true; /* full: the rest when its socket drains (or is dropped) */
		c->event_seq++;
		sub->events_dropped = 0;
		sub->cursor++;
	}
	return true;
}

static void on_events(uv_timer_t *timer)
{
	struct feed *f = timer->data;
	uint64_t start = uv_hrtime();
	unsigned n = f->nlisteners, i = 0;
	struct client *c, *next;
	bool out_of_time = false;

	f->flush_scheduled = false;
	for (c = TAILQ_FIRST(&f->listeners); c && i < n; c = next, i++) {
		next = TAILQ_NEXT(c, sub.event_link);
		/* A blocked subscriber is served when its socket drains (feed_client_writable). */
		if (c->sub.cursor >= f->published || c->feed_blocked)
			continue;
		if (!send_events(f, c, start)) {
			out_of_time = true;
			break;
		}
		TAILQ_REMOVE(&f->listeners, c, sub.event_link);
		TAILQ_INSERT_TAIL(&f->listeners, c, sub.event_link);
	}
	if (out_of_time && f->running) {
		f->flush_scheduled = true;
		uv_timer_start(&f->event_timer, on_events, 1, 0);
	}
}

void feed_client_writable(struct feed *f, struct client *c)
{
	/* Out of time before it caught up: the rest in the next round, not forgotten. */
	if (c->sub.events && f->ring && !send_events(f, c, uv_hrtime()) && !f->flush_scheduled &&
	    f->running) {
		f->flush_scheduled = true;
		uv_timer_start(&f->event_timer, on_events, 1, 0);
	}
}

/* The bus's types below BUS_OWN are the wire's event types. */
_Static_assert((int)BUS_LEASE_GRANTED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_GRANTED,
	       "event types");
_Static_assert((int)BUS_LEASE_DENIED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_DENIED,
	       "event types");
_Static_assert((int)BUS_LEASE_RELEASED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_RELEASED,
	       "event types");
_Static_assert((int)BUS_EVICT_REQUESTED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_EVICT_REQUESTED,
	       "event types");
_Static_assert((int)BUS_EVICT_ACKED == (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_EVICT_ACKED,
	       "event types");
_Static_assert((int)BUS_REVOKED == (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_REVOKED,
	       "event types");
_Static_assert((int)BUS_TRIM_DONE == (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_TRIM_DONE,
	       "event types");
_Static_assert((int)BUS_CLIENT_CONNECTED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_CONNECTED,
	       "event types");
_Static_assert((int)BUS_CLIENT_DISCONNECTED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_DISCONNECTED,
	       "event types");
_Static_assert((int)BUS_MODEL_LOADED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_MODEL_LOADED,
	       "event types");
_Static_assert((int)BUS_UNDECLARED ==
		   (int)ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_UNDECLARED_USE,
	       "event types");

/* publish numbers e (with its sentence) and sends it to every event subscriber soon. */
/* wants_line: the event's detail goes to listeners, when there are any. */
static bool wants_line(void *ctx, const struct bus_event *e)
{
	const struct feed *f = ctx;

	return e->type < BUS_OWN && f->nlisteners > 0 && f->ring;
}

static void publish(void *ctx, const struct bus_event *e, const char *detail, uint64_t mono_ms,
		    uint64_t real_ms)
{
	Rocmmem__Wire__TelemetryEvent ev = ROCMMEM__WIRE__TELEMETRY_EVENT__INIT;
	struct feed *f = ctx;
	struct feed_slot *slot;
	char text[FEED_EVENT_MAX - 512];

	(void)mono_ms;
	if (e->type >= BUS_OWN || f->nlisteners == 0 || !f->ring)
		return;
	ev.has_type = true;
	ev.type = (Rocmmem__Wire__TelemetryEventType)e->type;
	ev.has_timestamp_ms = true;
	ev.timestamp_ms = real_ms;
	if (e->holder) {
		ev.has_pid = true;
		ev.pid = (int32_t)e->holder->who.pid;
		ev.client_name = (char *)e->holder->name;
		ev.has_client_id = true;
		ev.client_id = e->holder->id;
	}
	if (e->has_device) {
		ev.has_device = true;
		ev.device = e->device;
	}
	ev.has_bytes = e->bytes != 0;
	ev.bytes = e->bytes;
	ev.has_lease_id = e->lease_id != 0;
	ev.lease_id = e->lease_id;
	ev.has_model_id = e->model_id != 0;
	ev.model_id = e->model_id;
	ev.model_name = (char *)e->model_name;
	ev.has_waited_ms = e->waited_ms != 0;
	ev.waited_ms = e->waited_ms;
	ev.has_declared_bytes = e->type == BUS_UNDECLARED;
	ev.declared_bytes = e->declared;
	ev.has_error = e->error != 0;
	ev.error = e->error;
	/* Everything but the detail packs into a few hundred bytes; the detail gets the rest. */
	text_copy(text, sizeof(text), detail ? detail : "");
	ev.detail = text;
	slot = &f->ring[f->published % FEED_RING];
	if (rocmmem__wire__telemetry_event__get_packed_size(&ev) > sizeof(slot->data))
		ev.detail = NULL;
	slot->len = (uint32_t)rocmmem__wire__telemetry_event__pack(&ev, slot->data);
	f->published++;
	if (!f->flush_scheduled && f->running) {
		f->flush_scheduled = true;
		uv_timer_start(&f->event_timer, on_events, 0, 0);
	}
}

/* ----------------------------------------------------------------------------------------- */
/* Subscriptions */

/* retune_hardware reads devices as often as the fastest subscriber samples, within bounds. */
static void retune_hardware(struct feed *f)
{
	uint64_t ms = SAMPLER_DEFAULT_INTERVAL_MS;
	struct client *c;

	TAILQ_FOREACH (c, &f->samplers, sub.sample_link) {
		if (c->sub.interval_ms < ms)
			ms = c->sub.interval_ms;
	}
	if (ms < HARDWARE_MIN_INTERVAL_MS)
		ms = HARDWARE_MIN_INTERVAL_MS;
	sampler_set_interval(&f->server->sampler, ms);
}

static void drop_subscription(struct feed *f, struct client *c)
{
	struct subscription *sub = &c->sub;

	if (sub->samples || sub->events)
		f->nsubscribers--;
	if (sub->samples) {
		TAILQ_REMOVE(&f->samplers, c, sub.sample_link);
		f->nsamplers--;
	}
	if (sub->events) {
		TAILQ_REMOVE(&f->listeners, c, sub.event_link);
		f->nlisteners--;
	}
	memset(sub, 0, sizeof(*sub));
}

static void reply_subscribed(struct client *c, uint64_t request_id, uint32_t interval_ms)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__SubscribeReply body = ROCMMEM__WIRE__SUBSCRIBE_REPLY__INIT;

	body.has_interval_ms = true;
	body.interval_ms = interval_ms;
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_SUBSCRIBE;
	reply.subscribe = &body;
	client_reply(c, &reply, NULL, 0);
}

void feed_subscribe(struct feed *f, struct client *c, uint64_t request_id,
		    const Rocmmem__Wire__Subscribe *req)
{
	bool samples = req->has_samples && req->samples;
	bool events = req->has_events && req->events;
	struct subscription *sub = &c->sub;

	/* dispatch checked that it asks for something, at an interval in range (validate.c). */
	if (events && !f->ring) {
		f->ring = calloc(FEED_RING, sizeof(*f->ring));
		if (!f->ring) {
			client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
			return;
		}
	}
	if (!f->running) {
		client_reply_error(c, request_id, -ESHUTDOWN, "the daemon is stopping");
		return;
	}
	/* A second Subscribe replaces the first: only a new subscriber counts. */
	if (!sub->samples && !sub->events &&
	    f->nsubscribers >= f->server->svc.cfg.limits.max_subscribers) {
		char label[128];

		svc_limit_hit(&f->server->svc, c->holder, LIMIT_SUBSCRIBERS,
			      "refused %s a subscription: %u subscribers",
			      client_label(c, label, sizeof(label)), f->nsubscribers);
		client_reply_error(c, request_id, -EUSERS,
				   "too many subscribers: the daemon feeds at most %u at once "
				   "(subscribers)",
				   f->server->svc.cfg.limits.max_subscribers);
		return;
	}
	drop_subscription(f, c);
	if (samples) {
		sub->samples = true;
		sub->interval_ms = req->interval_ms;
		sub->next_due_ms = uv_now(f->loop); /* the first sample at once */
		TAILQ_INSERT_HEAD(&f->samplers, c, sub.sample_link);
		f->nsamplers++;
	}
	if (events) {
		sub->events = true;
		sub->cursor = f->published; /* from now on */
		TAILQ_INSERT_TAIL(&f->listeners, c, sub.event_link);
		f->nlisteners++;
	}
	f->nsubscribers++;
	reply_subscribed(c, request_id, samples ? sub->interval_ms : 0);
	retune_hardware(f);
	arm_samples(f, 0);
}

void feed_unsubscribe(struct feed *f, struct client *c, uint64_t request_id)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;

	drop_subscription(f, c);
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	client_reply(c, &reply, NULL, 0);
	retune_hardware(f);
	arm_samples(f, 0);
}

void feed_client_gone(struct feed *f, struct client *c)
{
	bool sampled = c->sub.samples;

	drop_subscription(f, c);
	if (sampled) {
		retune_hardware(f);
		arm_samples(f, 0);
	}
}

int feed_init(struct feed *f, struct server *s, uv_loop_t *loop)
{
	int err;

	memset(f, 0, sizeof(*f));
	f->server = s;
	f->loop = loop;
	TAILQ_INIT(&f->samplers);
	TAILQ_INIT(&f->listeners);
	f->sample = malloc(WIRE_MAX_FRAME);
	f->packet = malloc(WIRE_MAX_FRAME);
	if (!f->sample || !f->packet) {
		feed_finish(f);
		return -ENOMEM;
	}
	err = uv_timer_init(loop, &f->sample_timer);
	if (err) {
		feed_finish(f);
		return err;
	}
	err = uv_timer_init(loop, &f->event_timer);
	if (err) {
		uv_close((uv_handle_t *)&f->sample_timer, NULL);
		feed_finish(f);
		return err;
	}
	f->sample_timer.data = f->event_timer.data = f;
	f->running = true;
	return 0;
}

void feed_stop(struct feed *f)
{
	if (!f->running)
		return;
	f->running = false;
	uv_close((uv_handle_t *)&f->sample_timer, NULL);
	uv_close((uv_handle_t *)&f->event_timer, NULL);
}

void feed_finish(struct feed *f)
{
	free(f->ring);
	free(f->sample);
	free(f->packet);
	f->ring = NULL;
	f->sample = f->packet = NULL;
}

int feed_subscribe_bus(struct feed *f, struct bus *b)
{
	struct bus_subscriber s = {.ctx = f, .event = publish, .wants_line = wants_line};

	return bus_subscribe(b, &s);
}
