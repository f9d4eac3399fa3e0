/* SPDX-License-Identifier: MIT */
/* feed.c: telemetry subscriptions: subscribing, and samples and events as the callback sees them.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "internal.h"

static const char *const telemetry_names[] = {
    [ROCMMEM_TELEMETRY_LEASE_GRANTED] = "lease_granted",
    [ROCMMEM_TELEMETRY_LEASE_DENIED] = "lease_denied",
    [ROCMMEM_TELEMETRY_LEASE_RELEASED] = "lease_released",
    [ROCMMEM_TELEMETRY_EVICT_REQUESTED] = "evict_requested",
    [ROCMMEM_TELEMETRY_EVICT_ACKED] = "evict_acked",
    [ROCMMEM_TELEMETRY_REVOKED] = "revoked",
    [ROCMMEM_TELEMETRY_TRIM_DONE] = "trim_done",
    [ROCMMEM_TELEMETRY_CLIENT_CONNECTED] = "client_connected",
    [ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED] = "client_disconnected",
    [ROCMMEM_TELEMETRY_MODEL_LOADED] = "model_loaded",
};

ROCMMEM_EXPORT const char *rocmmem_telemetry_name(enum rocmmem_telemetry_type type)
{
	unsigned t = (unsigned)type;

	if (t < sizeof(telemetry_names) / sizeof(telemetry_names[0]) && telemetry_names[t])
		return telemetry_names[t];
	return "unknown";
}

static uint32_t add_dropped(uint32_t a, uint32_t b)
{
	return b > UINT32_MAX - a ? UINT32_MAX : a + b;
}

static const char *str(const char *s)
{
	return s ? s : "";
}

static void telemetry_from_wire(struct rocmmem_telemetry_event *o,
				const Rocmmem__Wire__TelemetryEvent *t, uint32_t lost)
{
	o->type = (enum rocmmem_telemetry_type)t->type;
	o->timestamp_ms = t->timestamp_ms;
	o->pid = t->pid;
	o->client_name = str(t->client_name);
	o->client_id = t->client_id;
	o->has_device = t->has_device;
	o->device = t->device;
	o->bytes = t->bytes;
	o->lease_id = t->lease_id;
	o->model_id = t->model_id;
	o->model_name = str(t->model_name);
	o->error = t->error;
	o->waited_ms = t->waited_ms;
	o->detail = str(t->detail);
	o->dropped = add_dropped(t->dropped, lost);
}

int feed_to_event(const rocmmem_client *c, const struct inmsg *m, uint32_t lost,
		  struct feed_view *v, struct rocmmem_event *ev)
{
	const Rocmmem__Wire__Event *e = m->msg->event;

	memset(ev, 0, sizeof(*ev));
	ev->seq = e->seq;
	ev->reason = "";
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_TELEMETRY) {
		telemetry_from_wire(&v->telemetry, e->telemetry, lost);
		ev->type = ROCMMEM_EVENT_TELEMETRY;
		ev->telemetry = &v->telemetry;
		return 0;
	}
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_SAMPLE) {
		const Rocmmem__Wire__TelemetrySample *s = e->sample;
		int err = status_from_sample(c, s, &v->status);

		if (err)
			return err;
		v->info = (struct rocmmem_sample_info){
		    .timestamp_ms = s->timestamp_ms,
		    .interval_ms = s->interval_ms,
		    .dropped = add_dropped(s->dropped, lost),
		    .clients_omitted = s->clients_omitted,
		    .models_omitted = s->models_omitted,
		    .waiters = s->waiters,
		    .oldest_wait_ms = s->oldest_wait_ms,
		    .uptime_ms = s->uptime_ms,
		};
		ev->type = ROCMMEM_EVENT_SAMPLE;
		ev->sample = v->status;
		ev->sample_info = &v->info;
		return 0;
	}
	return -EINVAL;
}

void feed_view_finish(struct feed_view *v)
{
	rocmmem_status_free(v->status);
	v->status = NULL;
}

ROCMMEM_EXPORT int rocmmem_subscribe(rocmmem_client *c, unsigned what, uint32_t interval_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Subscribe sub = ROCMMEM__WIRE__SUBSCRIBE__INIT;
	const unsigned known = ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_subscribe needs a client");
	if (!(what & known) || (what & ~known))
		return error_set(-EINVAL,
				 "subscribe to ROCMMEM_SUBSCRIBE_SAMPLES, _EVENTS or both");
	sub.has_samples = true;
	sub.samples = (what & ROCMMEM_SUBSCRIBE_SAMPLES) != 0;
	sub.has_events = true;
	sub.events = (what & ROCMMEM_SUBSCRIBE_EVENTS) != 0;
	/* The daemon judges the interval: its bounds are the ones that count. */
	sub.has_interval_ms = sub.samples;
	sub.interval_ms = interval_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
	msg.subscribe = &sub;
	err = conn_call(c, &msg, CONN_REPLY_GRACE_MS, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_SUBSCRIBE) {
		inmsg_free(m);
		return error_set(-EPROTO, "the daemon answered subscribe with something else");
	}
	err = r->subscribe->interval_ms > INT_MAX
		  ? error_set(-EPROTO, "the daemon reported an impossible sample interval")
		  : (int)r->subscribe->interval_ms;
	inmsg_free(m);
	if (err >= 0) {
		/* Renewed on a new connection, should the daemon restart. */
		pthread_mutex_lock(&c->lock);
		c->sub_what = what;
		c->sub_interval_ms = interval_ms;
		pthread_mutex_unlock(&c->lock);
	}
	return err;
}

ROCMMEM_EXPORT int rocmmem_unsubscribe(rocmmem_client *c)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Unsubscribe unsub = ROCMMEM__WIRE__UNSUBSCRIBE__INIT;
	struct inmsg *m;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_unsubscribe needs a client");
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE;
	msg.unsubscribe = &unsub;
	pthread_mutex_lock(&c->lock);
	c->sub_what = 0;
	pthread_mutex_unlock(&c->lock);
	err = conn_call(c, &msg, CONN_REPLY_GRACE_MS, &m);
	inmsg_free(m);
	/* The daemon sends nothing after its reply: what is queued now is all there is. */
	pthread_mutex_lock(&c->lock);
	conn_drop_telemetry(c);
	pthread_mutex_unlock(&c->lock);
	return err;
}
