/* SPDX-License-Identifier: MIT */
/* progress.c: the public view of a waiting request's progress (WaitProgress). */
#include <string.h>

#include "client.h"

/* The wire's numbers are the header's. */
_Static_assert((int)ROCMMEM_WAIT_BUDGET == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_BUDGET, "reasons");
_Static_assert((int)ROCMMEM_WAIT_EVICTION == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_EVICTION,
	       "reasons");
_Static_assert((int)ROCMMEM_WAITING_MODEL_RESIZE ==
		   (int)ROCMMEM__WIRE__WAIT_REQUEST__WAIT_MODEL_RESIZE,
	       "requests");
_Static_assert((int)ROCMMEM_EVICTION_REVOKED == (int)ROCMMEM__WIRE__EVICTION_END__EVICTION_REVOKED,
	       "ends");

void progress_view(const struct inmsg *m, struct rocmmem_wait_progress *out)
{
	const Rocmmem__Wire__WaitProgress *p = m->msg->event->progress;

	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->request = (enum rocmmem_wait_request)p->request;
	out->request_model_id = m->model ? m->model : p->request_model_id;
	out->requested = p->requested;
	out->device = (rocmmem_device_index)p->device;
	out->position = p->position;
	out->queued = p->queued;
	/* A reason of a newer daemon is one this library does not know. */
	out->reason = p->reason <= ROCMMEM__WIRE__WAIT_REASON__WAIT_BUDGET
			  ? (enum rocmmem_wait_reason)p->reason
			  : ROCMMEM_WAIT_UNKNOWN;
	out->needed = p->needed;
	out->free_bytes = p->free;
	out->model_id = p->model_id;
	out->model_name = p->model_name ? p->model_name : "";
	out->owner_pid = p->owner_pid;
	out->owner_name = p->owner_name ? p->owner_name : "";
	out->owner_client_id = p->owner_client_id;
	out->deadline_ms = p->has_deadline_ms ? (rocmmem_timeout_ms)p->deadline_ms : -1;
	out->bytes = p->bytes;
	out->evictions = p->evictions;
	out->waited_ms = p->waited_ms;
	out->eviction_ended = p->eviction_ended <= ROCMMEM__WIRE__EVICTION_END__EVICTION_REVOKED
				  ? (enum rocmmem_eviction_end)p->eviction_ended
				  : ROCMMEM_EVICTION_UNDER_WAY;
}
