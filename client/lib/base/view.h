/* SPDX-License-Identifier: MIT */
/*
 * view.h: received messages as the public API shows them: a status reply or a telemetry sample
 * behind the rocmmem_status accessors, and samples and telemetry events as rocmmem_events.
 */
#ifndef ROCMMEM_LIB_VIEW_H
#define ROCMMEM_LIB_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "rocmmem.h"
#include "rocmmem.pb-c.h"
#include "wire_arena.h"

/* What the connection knows of its daemon, which a sample does not say. */
struct daemon_facts {
	const char *version; /* from the hello, or NULL */
	const char *backend; /* from the hello, or NULL */
	int32_t pid;	     /* from the socket; 0 if unknown */
};

/*
 * view_status_from_parts presents the parts of a status reply (server messages whose replies
 * carry StatusReply bodies, each from wire_unpack) through the rocmmem_status accessors. Takes
 * the array and the messages (the snapshot owns them from now on, whatever the result, and
 * frees them with wire_unpacked_free). Returns 0 with *out set, or -ENOMEM (message recorded).
 */
int view_status_from_parts(Rocmmem__Wire__ServerMessage **parts, size_t nparts,
			   rocmmem_status **out);

/*
 * view_status_from_sample presents a sample through the rocmmem_status accessors: devices,
 * clients, models and counters (no leases, queue or denials), with the daemon's version,
 * backend and pid from facts. The status points into sample and facts, which must outlive it.
 * Returns 0 or -ENOMEM.
 */
int view_status_from_sample(const struct daemon_facts *facts,
			    const Rocmmem__Wire__TelemetrySample *sample, rocmmem_status **out);

/* What a delivered sample or telemetry event points to, alive during its callback. */
struct feed_view {
	rocmmem_status *status;
	struct rocmmem_sample_info info;
	struct rocmmem_telemetry_event telemetry;
};

/*
 * view_feed_event fills ev (and v, which it points into) from a received sample or telemetry
 * event e, adding lost to its dropped count. e and facts must outlive the callback. Returns 0,
 * or -ENOMEM when a sample could not be converted (it is then not delivered), -EINVAL for
 * another kind of event.
 */
int view_feed_event(const struct daemon_facts *facts, const Rocmmem__Wire__Event *e, uint32_t lost,
		    struct feed_view *v, struct rocmmem_event *ev);

/* view_feed_finish frees what view_feed_event allocated. */
void view_feed_finish(struct feed_view *v);

#endif
