/* SPDX-License-Identifier: MIT */
/* events.c: what happened, told once: to the log (journal fields), to subscribers, to status. */
#include "events.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "net/client.h"
#include "state/holder.h"
#include "denials.h"
#include "net/feed.h"
#include "net/server.h"
#include "text.h"

static const char *const names[] = {
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_NONE] = "none",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_GRANTED] = "lease_granted",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_DENIED] = "lease_denied",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_RELEASED] = "lease_released",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_EVICT_REQUESTED] = "evict_requested",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_EVICT_ACKED] = "evict_acked",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_REVOKED] = "revoked",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_TRIM_DONE] = "trim_done",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_CONNECTED] = "client_connected",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_DISCONNECTED] = "client_disconnected",
    [ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_MODEL_LOADED] = "model_loaded",
};

const char *event_name(Rocmmem__Wire__TelemetryEventType type)
{
	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}

uint64_t event_realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Room for the decimal text of every numeric field. */
struct field_text {
	char pid[16], client_id[24], device[12], bytes[24], lease[24], model[24], waited[24];
	char error[16];
};

/* journal_fields lists e's structured fields: only the ones that apply. */
static unsigned journal_fields(const struct event *e, struct field_text *t, struct log_field *f)
{
	unsigned n = 0;

	f[n++] = (struct log_field){"ROCMMEM_EVENT", event_name(e->type)};
	if (e->holder) {
		snprintf(t->pid, sizeof(t->pid), "%d", (int)e->holder->who.pid);
		snprintf(t->client_id, sizeof(t->client_id), "%" PRIu64, e->holder->id);
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_PID", t->pid};
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_NAME", e->holder->name};
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_ID", t->client_id};
	}
	if (e->has_device) {
		snprintf(t->device, sizeof(t->device), "%u", e->device);
		f[n++] = (struct log_field){"ROCMMEM_DEVICE", t->device};
	}
	if (e->bytes) {
		snprintf(t->bytes, sizeof(t->bytes), "%" PRIu64, e->bytes);
		f[n++] = (struct log_field){"ROCMMEM_BYTES", t->bytes};
	}
	if (e->lease_id) {
		snprintf(t->lease, sizeof(t->lease), "%" PRIu64, e->lease_id);
		f[n++] = (struct log_field){"ROCMMEM_LEASE_ID", t->lease};
	}
	if (e->model_id) {
		snprintf(t->model, sizeof(t->model), "%" PRIu64, e->model_id);
		f[n++] = (struct log_field){"ROCMMEM_MODEL_ID", t->model};
	}
	if (e->model_name && e->model_name[0])
		f[n++] = (struct log_field){"ROCMMEM_MODEL_NAME", e->model_name};
	if (e->waited_ms) {
		snprintf(t->waited, sizeof(t->waited), "%" PRIu64, e->waited_ms);
		f[n++] = (struct log_field){"ROCMMEM_WAITED_MS", t->waited};
	}
	if (e->error) {
		snprintf(t->error, sizeof(t->error), "%d", -e->error);
		f[n++] = (struct log_field){"ROCMMEM_ERRNO", t->error};
	}
	return n;
}

static void record_denial(struct server *s, const struct event *e, const char *message)
{
	struct denial d;

	memset(&d, 0, sizeof(d));
	d.timestamp_ms = event_realtime_ms();
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
	text_copy(d.reason, sizeof(d.reason), message);
	denials_record(&s->arbiter.denials, &d);
}

void event_emit(struct server *s, const struct event *e, enum log_level level, const char *fmt, ...)
{
	struct log_field fields[12];
	struct field_text text;
	char message[2048];
	unsigned n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	n = journal_fields(e, &text, fields);
	log_event(level, fields, n, "%s", message);
	if (e->type == ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_DENIED)
		record_denial(s, e, message);
	feed_publish(&s->feed, e, message);
}
