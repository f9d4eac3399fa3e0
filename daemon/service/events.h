/* SPDX-License-Identifier: MIT */
/* events.h: what happened, told once: to the log (journal fields), to subscribers, to status. */
#ifndef ROCMMEMD_EVENTS_H
#define ROCMMEMD_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/log.h"
#include "rocmmem.pb-c.h"

struct server;
struct holder;

/* One event. Unset numbers are 0; has_device says whether device applies. */
struct event {
	Rocmmem__Wire__TelemetryEventType type;
	const struct holder *holder; /* whom it concerns, or NULL */
	bool has_device;
	unsigned device;
	uint64_t bytes;
	uint64_t lease_id;
	uint64_t model_id;
	const char *model_name;
	uint64_t waited_ms;
	int error; /* denials: the negative errno the client got */
};

/* event_realtime_ms is the wall-clock time in milliseconds that events and samples carry. */
uint64_t event_realtime_ms(void);

/* event_name is the event's name in logs and JSON ("lease_granted", ...). */
const char *event_name(Rocmmem__Wire__TelemetryEventType type);

/*
 * event_emit formats the event's message and tells it everywhere at once: a log line at level
 * (under journald with ROCMMEM_* fields), the telemetry subscribers (whatever the log level),
 * and, for denials, the list of latest refusals that status shows.
 */
void event_emit(struct server *s, const struct event *e, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
