/* SPDX-License-Identifier: MIT */
/* feed.c: telemetry subscriptions: subscribing, renewing after a reconnection, unsubscribing. */
#include <errno.h>

#include "base/error.h"
#include "conn/client.h"

ROCMMEM_EXPORT int rocmmem_subscribe(rocmmem_client *c, unsigned what, uint32_t interval_ms,
				     uint32_t *interval_in_effect_ms)
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
	if (interval_in_effect_ms)
		*interval_in_effect_ms = r->subscribe->interval_ms;
	inmsg_free(m);
	/* Renewed on a new connection, should the daemon restart. */
	pthread_mutex_lock(&c->lock);
	c->sub_what = what;
	c->sub_interval_ms = interval_ms;
	pthread_mutex_unlock(&c->lock);
	return 0;
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
