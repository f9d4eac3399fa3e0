/* SPDX-License-Identifier: MIT */
/* bus.c: what happened, told once to every subscriber. */
#include "bus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
    [BUS_LEASE_GRANTED] = "lease_granted",
    [BUS_LEASE_DENIED] = "lease_denied",
    [BUS_LEASE_RELEASED] = "lease_released",
    [BUS_EVICT_REQUESTED] = "evict_requested",
    [BUS_EVICT_ACKED] = "evict_acked",
    [BUS_REVOKED] = "revoked",
    [BUS_TRIM_DONE] = "trim_done",
    [BUS_CLIENT_CONNECTED] = "client_connected",
    [BUS_CLIENT_DISCONNECTED] = "client_disconnected",
    [BUS_MODEL_LOADED] = "model_loaded",
    [BUS_UNDECLARED] = "undeclared_use",
};

const char *bus_type_name(enum bus_type type)
{
	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}

void bus_init(struct bus *b, const struct svc_clock *clock)
{
	memset(b, 0, sizeof(*b));
	b->clock = clock;
}

int bus_subscribe(struct bus *b, const struct bus_subscriber *s)
{
	if (b->n == BUS_MAX_SUBSCRIBERS)
		return -ENOSPC;
	b->subs[b->n++] = *s;
	return 0;
}

void bus_emit(struct bus *b, struct bus_event *e, enum log_level level, const char *line)
{
	uint64_t mono = b->clock ? b->clock->mono_ms(b->clock->ctx) : 0;
	uint64_t real = b->clock ? b->clock->real_ms(b->clock->ctx) : 0;

	e->level = level;
	for (unsigned i = 0; i < b->n; i++)
		b->subs[i].event(b->subs[i].ctx, e, line, mono, real);
}

/* wanted says whether a subscriber would use e's sentence (its level set). */
static bool wanted(const struct bus *b, const struct bus_event *e)
{
	for (unsigned i = 0; i < b->n; i++)
		if (b->subs[i].wants_line && b->subs[i].wants_line(b->subs[i].ctx, e))
			return true;
	return false;
}

bool bus_wants_line(const struct bus *b, struct bus_event *e, enum log_level level)
{
	e->level = level;
	return wanted(b, e);
}

void bus_emitf(struct bus *b, struct bus_event *e, enum log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	e->level = level;
	if (!wanted(b, e)) {
		bus_emit(b, e, level, NULL);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	bus_emit(b, e, level, line);
}
