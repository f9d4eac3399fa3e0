/* SPDX-License-Identifier: MIT */
/* handshake.c: closing connections that do not say hello in time. */
#include "handshake.h"

#include <inttypes.h>

#include "client.h"
#include "server.h"

static void on_deadline(uv_timer_t *timer);

/* arm sets the timer for the oldest connection still waiting, if any. */
static void arm(struct handshake *h)
{
	struct client *c = TAILQ_FIRST(&h->waiting);
	uint64_t timeout = h->server->svc.cfg.limits.handshake_timeout_ms, now, due;

	if (!h->running)
		return;
	if (!c) {
		uv_timer_stop(&h->timer);
		return;
	}
	now = uv_now(h->server->loop);
	due = c->holder->connected_ms + timeout;
	uv_timer_start(&h->timer, on_deadline, due > now ? due - now : 0, 0);
}

static void on_deadline(uv_timer_t *timer)
{
	struct handshake *h = timer->data;
	struct server *s = h->server;
	uint64_t now = uv_now(s->loop), timeout = s->svc.cfg.limits.handshake_timeout_ms;
	struct client *c;

	while ((c = TAILQ_FIRST(&h->waiting)) && c->holder->connected_ms + timeout <= now) {
		svc_limit_hit(&s->svc, c->holder, LIMIT_HANDSHAKE_TIMEOUT,
			      "closing connection %" PRIu64 " from pid %d uid %u: no hello within "
			      "%" PRIu64 " ms (handshake_timeout)",
			      c->id, (int)c->holder->who.pid, (unsigned)c->holder->who.uid,
			      timeout);
		client_destroy(c); /* ends its wait: handshake_end */
	}
	arm(h);
}

int handshake_init(struct handshake *h, struct server *s, uv_loop_t *loop)
{
	int err;

	h->server = s;
	TAILQ_INIT(&h->waiting);
	err = uv_timer_init(loop, &h->timer);
	if (err)
		return err;
	h->timer.data = h;
	h->running = true;
	return 0;
}

void handshake_stop(struct handshake *h)
{
	if (!h->running)
		return;
	h->running = false;
	uv_close((uv_handle_t *)&h->timer, NULL);
}

void handshake_begin(struct handshake *h, struct client *c)
{
	bool first = TAILQ_EMPTY(&h->waiting);

	TAILQ_INSERT_TAIL(&h->waiting, c, handshake_link);
	c->in_handshake = true;
	if (first)
		arm(h);
}

void handshake_end(struct handshake *h, struct client *c)
{
	bool first;

	if (!c->in_handshake)
		return;
	first = TAILQ_FIRST(&h->waiting) == c;
	TAILQ_REMOVE(&h->waiting, c, handshake_link);
	c->in_handshake = false;
	if (first)
		arm(h);
}

void handshake_rearm(struct handshake *h)
{
	arm(h);
}
