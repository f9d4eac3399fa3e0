/* SPDX-License-Identifier: MIT */
/* encode.c: the service's replies and notices as the wire's Reply and Event messages. */
#include "encode.h"

#include "client.h"
#include "server.h"
#include "state/arena.h"

/* The backends' handle kinds are the wire's numbers: a grant carries them as they are. */
_Static_assert((int)BACKEND_HANDLE_MEMFD == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_VMM_FD == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_DMABUF == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_DMABUF,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_IPC == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_IPC,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_ARENA == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA,
	       "handle kinds");

/* The policy's reasons and the progress's ends are the wire's numbers. */
_Static_assert((int)WAITFOR_GRANTING == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_GRANTING, "reasons");
_Static_assert((int)WAITFOR_QUEUE == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_QUEUE, "reasons");
_Static_assert((int)WAITFOR_EVICTION == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_EVICTION, "reasons");
_Static_assert((int)WAITFOR_HOLDER == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_HOLDER, "reasons");
_Static_assert((int)WAITFOR_EXCLUSIVE == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_EXCLUSIVE,
	       "reasons");
_Static_assert((int)WAITFOR_BUDGET == (int)ROCMMEM__WIRE__WAIT_REASON__WAIT_BUDGET, "reasons");
_Static_assert((int)WAIT_LEASE + 1 == (int)ROCMMEM__WIRE__WAIT_REQUEST__WAIT_LEASE, "kinds");
_Static_assert((int)WAIT_MODEL_ACQUIRE + 1 == (int)ROCMMEM__WIRE__WAIT_REQUEST__WAIT_MODEL_ACQUIRE,
	       "kinds");
_Static_assert((int)WAIT_MODEL_RESIZE + 1 == (int)ROCMMEM__WIRE__WAIT_REQUEST__WAIT_MODEL_RESIZE,
	       "kinds");
_Static_assert((int)PROGRESS_ACKED == (int)ROCMMEM__WIRE__EVICTION_END__EVICTION_ACKED, "ends");
_Static_assert((int)PROGRESS_REVOKED == (int)ROCMMEM__WIRE__EVICTION_END__EVICTION_REVOKED, "ends");

/* lease_grant fills body with lease l's grant (device d's bus id, l's model's generation). */
static void lease_grant(Rocmmem__Wire__LeaseGrant *body, const struct lease *l,
			const struct device *d, uint64_t waited_ms)
{
	body->has_lease_id = true;
	body->lease_id = l->id;
	body->has_device = true;
	body->device = l->device;
	body->has_size = true;
	body->size = l->size;
	body->has_handle_kind = true;
	body->handle_kind = (Rocmmem__Wire__HandleKind)l->alloc.handle_kind;
	body->has_fd_count = true;
	body->fd_count = l->alloc.nfds;
	body->has_waited_ms = true;
	body->waited_ms = waited_ms;
	if (l->alloc.nchunks > 0) {
		body->n_chunk_sizes = l->alloc.nchunks;
		body->chunk_sizes = (uint64_t *)l->alloc.chunk_sizes;
		body->has_chunk_size = true;
		body->chunk_size = l->alloc.chunk_sizes[0];
	}
	if (l->alloc.has_ipc) {
		body->has_ipc_handle = true;
		body->ipc_handle.len = sizeof(l->alloc.ipc_handle);
		body->ipc_handle.data = (uint8_t *)l->alloc.ipc_handle;
		body->has_offset = true;
		body->offset = l->alloc.ipc_offset;
	}
	if (d->pci_bus_id[0])
		body->pci_bus_id = (char *)d->pci_bus_id;
	if (l->model) {
		body->has_model_generation = true;
		body->model_generation = l->model->generation;
	}
	if (l->arena) {
		body->has_offset = body->has_arena_id = body->has_arena_size = true;
		body->offset = l->offset;
		body->arena_id = l->arena->id;
		body->arena_size = l->arena->size;
	}
}

/* reply_lease sends a lease's grant with its fds. */
static void reply_lease(struct client *c, Rocmmem__Wire__Reply *reply, const struct svc_reply *r)
{
	Rocmmem__Wire__LeaseGrant body = ROCMMEM__WIRE__LEASE_GRANT__INIT;
	const struct lease *l = r->lease;

	lease_grant(&body, l, &c->server->svc.state.devices[l->device], r->waited_ms);
	reply->body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	reply->lease = &body;
	if (l->arena) {
		/* The arena's fd rides with its first lease only: afterwards offsets suffice. */
		body.fd_count = r->send_arena_fd ? 1 : 0;
		client_reply(c, reply, &l->arena->fd, body.fd_count);
		return;
	}
	client_reply(c, reply, l->alloc.fds, l->alloc.nfds);
}

/* reply_model sends a model's residency, or its registration (re-declaration). */
static void reply_model(struct client *c, Rocmmem__Wire__Reply *reply, const struct svc_reply *r)
{
	Rocmmem__Wire__ModelResidency res = ROCMMEM__WIRE__MODEL_RESIDENCY__INIT;
	Rocmmem__Wire__ModelRegistered reg = ROCMMEM__WIRE__MODEL_REGISTERED__INIT;
	const struct model *m = r->model;

	if (r->kind == SVC_RESIDENCY) {
		res.has_model_id = res.has_generation = res.has_reservation = true;
		res.model_id = m->id;
		res.generation = m->generation;
		res.reservation = m->reservation;
		reply->body_case = ROCMMEM__WIRE__REPLY__BODY_RESIDENCY;
		reply->residency = &res;
	} else {
		reg.has_model_id = true;
		reg.model_id = m->id;
		if (r->has_reservation) {
			reg.has_reservation = true;
			reg.reservation = m->reservation;
		}
		reg.has_generation = true;
		reg.generation = m->generation;
		if (r->message)
			reply->message = (char *)r->message;
		reply->body_case = ROCMMEM__WIRE__REPLY__BODY_MODEL;
		reply->model = &reg;
	}
	client_reply(c, reply, NULL, 0);
}

void encode_reply(struct client *c, uint64_t request_id, const struct svc_reply *r)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__TrimReply trim = ROCMMEM__WIRE__TRIM_REPLY__INIT;
	Rocmmem__Wire__EvictResult evict = ROCMMEM__WIRE__EVICT_RESULT__INIT;

	if (!c)
		return;
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	switch (r->kind) {
	case SVC_ERROR:
		client_reply_error(c, request_id, r->err, "%s", r->message);
		return;
	case SVC_LEASE:
		reply_lease(c, &reply, r);
		return;
	case SVC_RESIDENCY:
	case SVC_MODEL:
		reply_model(c, &reply, r);
		return;
	case SVC_TRIM:
		trim.has_bytes_trimmed = true;
		trim.bytes_trimmed = r->bytes;
		reply.body_case = ROCMMEM__WIRE__REPLY__BODY_TRIM;
		reply.trim = &trim;
		break;
	case SVC_EVICTED:
		evict.has_revoked = true;
		evict.revoked = r->revoked;
		evict.has_bytes_freed = true;
		evict.bytes_freed = r->bytes;
		reply.body_case = ROCMMEM__WIRE__REPLY__BODY_EVICT;
		reply.evict = &evict;
		break;
	case SVC_OK:
		break;
	}
	client_reply(c, &reply, NULL, 0);
}

/* progress fills body with a waiting request's progress. */
static void progress(Rocmmem__Wire__WaitProgress *body, const struct svc_progress *p)
{
	const struct waitfor *w = &p->wait;

	body->has_request_id = body->has_device = body->has_position = body->has_queued = true;
	body->request_id = p->request_id;
	body->device = w->device;
	body->position = w->position;
	body->queued = w->queued;
	body->has_reason = body->has_needed = body->has_free = body->has_waited_ms = true;
	body->reason = (Rocmmem__Wire__WaitReason)w->reason;
	body->needed = w->need;
	body->free = w->free;
	body->waited_ms = p->waited_ms;
	body->has_evictions = true;
	body->evictions = w->evictions;
	if (w->model) {
		body->has_model_id = true;
		body->model_id = w->model;
		body->model_name = (char *)p->model_name;
	}
	if (w->owner) {
		body->has_owner_client_id = true;
		body->owner_client_id = w->owner;
		body->has_owner_pid = p->owner_pid != 0;
		body->owner_pid = p->owner_pid;
		body->owner_name = (char *)p->owner_name;
	}
	if (w->bytes) {
		body->has_bytes = true;
		body->bytes = w->bytes;
	}
	if (w->reason == WAITFOR_EVICTION && p->ended == PROGRESS_WAITING) {
		body->has_deadline_ms = true;
		body->deadline_ms = p->deadline_left_ms;
	}
	body->has_request = body->has_requested = true;
	body->request = (Rocmmem__Wire__WaitRequest)(p->kind + 1);
	body->requested = p->requested;
	if (p->request_model) {
		body->has_request_model_id = true;
		body->request_model_id = p->request_model;
	}
	if (p->ended != PROGRESS_WAITING) {
		body->has_eviction_ended = true;
		body->eviction_ended = (Rocmmem__Wire__EvictionEnd)p->ended;
	}
}

void encode_notice(struct client *c, const struct svc_notice *n)
{
	Rocmmem__Wire__WaitProgress wait = ROCMMEM__WIRE__WAIT_PROGRESS__INIT;
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__EvictRequest evict = ROCMMEM__WIRE__EVICT_REQUEST__INIT;
	Rocmmem__Wire__ModelRevoked model = ROCMMEM__WIRE__MODEL_REVOKED__INIT;
	Rocmmem__Wire__LeaseRevoked lease = ROCMMEM__WIRE__LEASE_REVOKED__INIT;

	if (!c)
		return;
	switch (n->kind) {
	case NOTE_EVICT_REQUEST:
		evict.has_model_id = evict.has_bytes_needed = evict.has_deadline_ms = true;
		evict.has_generation = true;
		evict.model_id = n->model_id;
		evict.bytes_needed = n->bytes_needed;
		evict.deadline_ms = (uint32_t)n->deadline_ms;
		evict.generation = n->generation;
		ev.body_case = ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST;
		ev.evict_request = &evict;
		break;
	case NOTE_MODEL_REVOKED:
		model.has_model_id = model.has_generation = true;
		model.model_id = n->model_id;
		model.reason = (char *)n->reason;
		model.generation = n->generation;
		ev.body_case = ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED;
		ev.model_revoked = &model;
		break;
	case NOTE_LEASE_REVOKED:
		lease.has_lease_id = true;
		lease.lease_id = n->lease_id;
		lease.reason = (char *)n->reason;
		lease.has_model_id = lease.has_model_generation = true;
		lease.model_id = n->model_id;
		lease.model_generation = n->generation;
		ev.body_case = ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED;
		ev.lease_revoked = &lease;
		break;
	case NOTE_WAIT_PROGRESS:
		progress(&wait, n->progress);
		ev.body_case = ROCMMEM__WIRE__EVENT__BODY_PROGRESS;
		ev.progress = &wait;
		break;
	}
	client_event(c, &ev);
}

static void sink_reply(void *ctx, uint64_t holder, uint64_t request_id, const struct svc_reply *r)
{
	encode_reply(server_conn(ctx, holder), request_id, r);
}

static void sink_notify(void *ctx, uint64_t holder, const struct svc_notice *n)
{
	encode_notice(server_conn(ctx, holder), n);
}

struct svc_sink encode_sink(struct server *s)
{
	struct svc_sink sink = {.ctx = s,
				.reply = sink_reply,
				.notify = sink_notify,
				.due_changed = server_due_changed};

	return sink;
}
