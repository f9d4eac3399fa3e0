/* SPDX-License-Identifier: MIT */
/* view_feed.c: telemetry samples and events as the event callback sees them. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "view.h"

static const char *const telemetry_names[] = {
    [ROCMMEM_TELEMETRY_LEASE_GRANTED] = "lease_granted",
    [ROCMMEM_TELEMETRY_LEASE_DENIED] = "lease_denied",
    [ROCMMEM_TELEMETRY_LEASE_RELEASED] = "lease_released",
    [ROCMMEM_TELEMETRY_EVICT_REQUESTED] = "evict_requested",
    [ROCMMEM_TELEMETRY_EVICT_ACKED] = "evict_acked",
    [ROCMMEM_TELEMETRY_REVOKED] = "revoked",
    [ROCMMEM_TELEMETRY_TRIM_DONE] = "trim_done",
    [ROCMMEM_TELEMETRY_CLIENT_CONNECTED] = "client_connected",
    [ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED] = "client_disconnected",
    [ROCMMEM_TELEMETRY_MODEL_LOADED] = "model_loaded",
    [ROCMMEM_TELEMETRY_UNDECLARED_USE] = "undeclared_use",
};

ROCMMEM_EXPORT const char *rocmmem_telemetry_name(enum rocmmem_telemetry_type type)
{
	unsigned t = (unsigned)type;

	if (t < sizeof(telemetry_names) / sizeof(telemetry_names[0]) && telemetry_names[t])
		return telemetry_names[t];
	return "unknown";
}

static uint32_t add_dropped(uint32_t a, uint32_t b)
{
	return b > UINT32_MAX - a ? UINT32_MAX : a + b;
}

static const char *str(const char *s)
{
	return s ? s : "";
}

static void telemetry_from_wire(struct rocmmem_telemetry_event *o,
				const Rocmmem__Wire__TelemetryEvent *t, uint32_t lost)
{
	o->type = (enum rocmmem_telemetry_type)t->type;
	o->timestamp_ms = t->timestamp_ms;
	o->pid = t->pid;
	o->client_name = str(t->client_name);
	o->client_id = t->client_id;
	o->has_device = t->has_device;
	o->device = t->device;
	o->bytes = t->bytes;
	o->lease_id = t->lease_id;
	o->model_id = t->model_id;
	o->model_name = str(t->model_name);
	o->error = t->error;
	o->waited_ms = t->waited_ms;
	o->detail = str(t->detail);
	o->dropped = add_dropped(t->dropped, lost);
	o->declared_bytes = t->declared_bytes;
}

int view_feed_event(const struct daemon_facts *facts, const Rocmmem__Wire__Event *e, uint32_t lost,
		    struct feed_view *v, struct rocmmem_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->seq = e->seq;
	ev->reason = "";
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_TELEMETRY) {
		telemetry_from_wire(&v->telemetry, e->telemetry, lost);
		ev->type = ROCMMEM_EVENT_TELEMETRY;
		ev->telemetry = &v->telemetry;
		return 0;
	}
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_SAMPLE) {
		const Rocmmem__Wire__TelemetrySample *s = e->sample;
		int err = view_status_from_sample(facts, s, &v->status);

		if (err)
			return err;
		v->info = (struct rocmmem_sample_info){
		    .timestamp_ms = s->timestamp_ms,
		    .interval_ms = s->interval_ms,
		    .dropped = add_dropped(s->dropped, lost),
		    .clients_omitted = s->clients_omitted,
		    .models_omitted = s->models_omitted,
		    .waiters = s->waiters,
		    .oldest_wait_ms = s->oldest_wait_ms,
		    .uptime_ms = s->uptime_ms,
		};
		ev->type = ROCMMEM_EVENT_SAMPLE;
		ev->sample = v->status;
		ev->sample_info = &v->info;
		return 0;
	}
	return -EINVAL;
}

void view_feed_finish(struct feed_view *v)
{
	rocmmem_status_free(v->status);
	v->status = NULL;
}
