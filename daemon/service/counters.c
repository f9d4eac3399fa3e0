/* SPDX-License-Identifier: MIT */
/* counters.c: what happened since the start, counted from the events alone. */
#include "counters.h"

#include <errno.h>

static void on_event(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		     uint64_t real_ms)
{
	struct counters *k = ctx;

	(void)line, (void)mono_ms, (void)real_ms;
	switch (e->type) {
	case BUS_LEASE_GRANTED:
		if (!(e->flags & BUS_ADOPTED))
			k->grants++;
		break;
	case BUS_LEASE_DENIED:
		if (e->error == -ETIMEDOUT)
			k->timeouts++;
		else
			k->denials++;
		if (e->flags & BUS_FAILED)
			k->failures++;
		break;
	case BUS_ALLOC_FAILED:
		k->failures++;
		break;
	case BUS_LEASE_RELEASED:
		if (e->flags & BUS_RECLAIMED)
			k->reclaimed++;
		else
			k->releases++;
		break;
	case BUS_EVICT_REQUESTED:
		k->evictions++;
		break;
	case BUS_REVOKED:
		k->revocations++;
		break;
	case BUS_TRIM_DONE:
		k->trims++;
		k->bytes_trimmed += e->bytes;
		break;
	case BUS_CLIENT_CONNECTED:
		k->connections++;
		break;
	case BUS_BYPASS:
		k->bypasses++;
		break;
	case BUS_LIMIT_HIT:
		if ((unsigned)e->limit < LIMIT_COUNT)
			k->hits[e->limit]++;
		break;
	case BUS_ACCESS_REFUSED:
		if (e->flags & BUS_PEER)
			k->peers_refused++;
		else
			k->requests_refused++;
		break;
	case BUS_UNDECLARED:
		k->undeclared++;
		break;
	default:
		break;
	}
}

int counters_subscribe(struct counters *k, struct bus *b)
{
	struct bus_subscriber s = {.ctx = k, .event = on_event};

	return bus_subscribe(b, &s);
}
