/* SPDX-License-Identifier: MIT */
/* drain.c: stopping gracefully: clients holding memory get a while to give it back. */
#include "drain.h"

#include <errno.h>
#include <inttypes.h>

#include "base/log.h"
#include "client.h"
#include "feed.h"
#include "listener.h"
#include "size.h"

static void tell_shutdown(struct client *c, const char *reason)
{
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__Shutdown body = ROCMMEM__WIRE__SHUTDOWN__INIT;

	body.reason = (char *)reason;
	ev.body_case = ROCMMEM__WIRE__EVENT__BODY_SHUTDOWN;
	ev.shutdown = &body;
	client_event(c, &ev);
}

/* stopped ends the drain once no client is left, and tells whoever waits for it, once. */
static void stopped(struct server *s)
{
	void (*cb)(struct server *, void *) = s->on_stopped;

	if (s->draining) {
		s->draining = false;
		uv_close((uv_handle_t *)&s->drain_timer, NULL);
		uv_close((uv_handle_t *)&s->drain_check, NULL);
	}
	s->on_stopped = NULL;
	if (cb)
		cb(s, s->stopped_data);
}

/* disconnect_all disconnects every client left, reclaiming what each holds. */
static void disconnect_all(struct server *s)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&s->clients)))
		client_destroy(c);
}

/* on_drain_check disconnects each client that has let go of everything, and ends the drain. */
static void on_drain_check(uv_check_t *check)
{
	struct server *s = check->data;
	struct client *c, *next;

	for (c = TAILQ_FIRST(&s->clients); c; c = next) {
		char label[128];

		next = TAILQ_NEXT(c, link);
		/* Replies still queued wait too: the answer to its last release is not cut off. */
		if (holder_holds_memory(c->holder) || c->out_bytes > 0)
			continue;
		log_debug("client %s holds nothing any more: disconnecting it",
			  client_label(c, label, sizeof(label)));
		client_destroy(c);
	}
	if (TAILQ_EMPTY(&s->clients))
		stopped(s);
}

static void on_drain_timeout(uv_timer_t *timer)
{
	struct server *s = timer->data;
	struct client *c;

	TAILQ_FOREACH (c, &s->clients, link) {
		char label[128], bytes[SIZE_FORMAT_MAX];

		log_warn("client %s did not let go within %" PRIu64 " ms; disconnecting it and "
			 "reclaiming %s in %u lease(s)",
			 client_label(c, label, sizeof(label)),
			 s->svc.cfg.limits.shutdown_timeout_ms,
			 size_format(holder_bytes(c->holder), bytes, sizeof(bytes)),
			 (unsigned)c->holder->lease_count);
	}
	disconnect_all(s);
	stopped(s);
}

void server_stop(struct server *s, const char *reason)
{
	struct client *c, *next;
	unsigned kept = 0;

	if (s->stopping)
		return;
	s->stopping = true;
	svc_stop(&s->svc);
	log_info("stopping: %s; %u client(s) connected", reason, s->client_count);
	sampler_stop(&s->sampler);
	feed_stop(&s->feed);
	server_stop_listening(s);
	TAILQ_FOREACH (c, &s->clients, link)
		tell_shutdown(c, reason);
	/*
	 * A client holding nothing has nothing to drain: it goes now, and its waiting requests
	 * end with the connection. One holding memory stays to give it back; what it waits for
	 * will never come, so it is told so now.
	 */
	for (c = TAILQ_FIRST(&s->clients); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (!holder_holds_memory(c->holder) || s->svc.cfg.limits.shutdown_timeout_ms == 0) {
			client_destroy(c);
			continue;
		}
		svc_cancel_waiters(&s->svc, c->holder, -ESHUTDOWN, "the daemon is stopping");
		kept++;
	}
	if (kept == 0) {
		stopped(s);
		return;
	}
	log_info("waiting up to %" PRIu64 " ms for %u client(s) to release their memory and "
		 "disconnect",
		 s->svc.cfg.limits.shutdown_timeout_ms, kept);
	uv_timer_init(s->loop, &s->drain_timer);
	uv_check_init(s->loop, &s->drain_check);
	s->drain_timer.data = s->drain_check.data = s;
	s->draining = true;
	uv_timer_start(&s->drain_timer, on_drain_timeout, s->svc.cfg.limits.shutdown_timeout_ms, 0);
	uv_check_start(&s->drain_check, on_drain_check);
}

void server_stop_now(struct server *s, const char *reason)
{
	server_stop(s, reason); /* does nothing when already stopping */
	if (!s->draining)
		return;
	log_info("%s: not waiting any longer; disconnecting %u client(s)", reason, s->client_count);
	disconnect_all(s);
	stopped(s);
}

bool server_stop_allows(Rocmmem__Wire__ClientMessage__BodyCase kind)
{
	switch (kind) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE:
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE:
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER:
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK:
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE:
		return true;
	default:
		return false;
	}
}
