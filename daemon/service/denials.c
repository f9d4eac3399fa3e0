/* SPDX-License-Identifier: MIT */
/* denials.c: the latest refused requests, kept for status as the clients were told. */
#include "denials.h"

#include <stdbool.h>

void denials_record(struct denials *ring, const struct denial *d)
{
	ring->ring[ring->next] = *d;
	ring->next = (ring->next + 1) % DENIALS_KEEP;
	if (ring->count < DENIALS_KEEP)
		ring->count++;
}

void denials_fill(const struct denials *ring, struct denials_wire *w, size_t *n,
		  Rocmmem__Wire__Denial ***items)
{
	unsigned first = (ring->next + DENIALS_KEEP - ring->count) % DENIALS_KEEP;

	for (unsigned i = 0; i < ring->count; i++) {
		const struct denial *d = &ring->ring[(first + i) % DENIALS_KEEP];
		Rocmmem__Wire__Denial *o = &w->items[i];

		rocmmem__wire__denial__init(o);
		o->has_timestamp_ms = o->has_pid = o->has_device = o->has_bytes = true;
		o->has_model_id = o->has_error = true;
		o->timestamp_ms = d->timestamp_ms;
		o->pid = d->pid;
		o->client_name = (char *)d->client_name;
		o->device = d->device;
		o->bytes = d->bytes;
		o->model_id = d->model_id;
		if (d->model_name[0])
			o->model_name = (char *)d->model_name;
		o->error = d->error;
		o->reason = (char *)d->reason;
		w->ptrs[i] = o;
	}
	*n = ring->count;
	*items = w->ptrs;
}
