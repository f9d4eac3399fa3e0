/* SPDX-License-Identifier: MIT */
/*
 * server.c: the connections by id, the daemon's uptime, the timer for the service's earliest
 * deadline, and the metrics text.
 */
#include "server.h"

#include <stdint.h>

#include "service/metrics.h"

uint64_t server_uptime_ms(const struct server *s)
{
	return uv_now(s->loop) - s->start_ms;
}

struct client *server_conn(const struct server *s, uint64_t holder_id)
{
	return idtable_find(&s->conns, holder_id);
}

struct client *server_next_client(const struct server *s, uint64_t after_id)
{
	struct client *c;

	/* Clients are appended as they connect, so the list is in id order. */
	TAILQ_FOREACH (c, &s->clients, link) {
		if (c->id > after_id)
			return c;
	}
	return NULL;
}

static void on_deadline(uv_timer_t *timer)
{
	svc_tick(&((struct server *)timer->data)->svc);
}

void server_start_timer(struct server *s, uv_loop_t *loop)
{
	uv_timer_init(loop, &s->deadline);
	s->deadline.data = s;
	/* Deadlines belong to clients (and the grace period, which must not keep a stopping
	 * daemon up): the timer never keeps the loop alive by itself. */
	uv_unref((uv_handle_t *)&s->deadline);
	s->deadline_ready = true;
}

void server_due_changed(void *ctx, uint64_t due_ms)
{
	struct server *s = ctx;
	uint64_t now;

	if (!s->deadline_ready)
		return;
	if (due_ms == UINT64_MAX) {
		uv_timer_stop(&s->deadline);
		return;
	}
	now = uv_now(s->deadline.loop);
	uv_timer_start(&s->deadline, on_deadline, due_ms > now ? due_ms - now : 0, 0);
}

void server_finish(struct server *s)
{
	if (s->deadline_ready) {
		uv_close((uv_handle_t *)&s->deadline, NULL);
		uv_run(s->deadline.loop, UV_RUN_DEFAULT);
		s->deadline_ready = false;
	}
	idtable_finish(&s->conns);
	wire_arena_finish(&s->rx_arena);
}

ssize_t server_metrics(const struct server *s, char *buf, size_t cap)
{
	struct metrics_facts f = {.clients = s->client_count, .uptime_ms = server_uptime_ms(s)};

	return metrics_format(&s->svc, &f, buf, cap);
}
