/* SPDX-License-Identifier: MIT */
/* denials.c: the latest refused requests, kept for status as the clients were told. */
#include "denials.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "state/holder.h"
#include "text.h"

void denials_record(struct denials *ring, const struct denial *d)
{
	ring->ring[ring->next] = *d;
	ring->next = (ring->next + 1) % DENIALS_KEEP;
	if (ring->count < DENIALS_KEEP)
		ring->count++;
}

const struct denial *denials_get(const struct denials *ring, unsigned i)
{
	unsigned first = (ring->next + DENIALS_KEEP - ring->count) % DENIALS_KEEP;

	return &ring->ring[(first + i) % DENIALS_KEEP];
}

/* wants_line: a denial keeps its sentence as its reason. */
static bool wants_line(void *ctx, const struct bus_event *e)
{
	(void)ctx;
	return e->type == BUS_LEASE_DENIED;
}

static void on_event(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		     uint64_t real_ms)
{
	struct denial d;

	(void)mono_ms;
	if (e->type != BUS_LEASE_DENIED)
		return;
	memset(&d, 0, sizeof(d));
	d.timestamp_ms = real_ms;
	if (e->holder) {
		d.pid = (int32_t)e->holder->who.pid;
		snprintf(d.client_name, sizeof(d.client_name), "%s", e->holder->name);
	}
	d.device = e->device;
	d.bytes = e->bytes;
	d.model_id = e->model_id;
	if (e->model_name)
		snprintf(d.model_name, sizeof(d.model_name), "%s", e->model_name);
	d.error = e->error;
	text_copy(d.reason, sizeof(d.reason), line ? line : "");
	denials_record(ctx, &d);
}

int denials_subscribe(struct denials *ring, struct bus *b)
{
	struct bus_subscriber s = {.ctx = ring, .event = on_event, .wants_line = wants_line};

	return bus_subscribe(b, &s);
}
