/* SPDX-License-Identifier: MIT */
/* encode.c: the service's replies and notices as the wire's Reply and Event messages. */
#include "encode.h"

#include "client.h"
#include "server.h"

/* The backends' handle kinds are the wire's numbers: a grant carries them as they are. */
_Static_assert((int)BACKEND_HANDLE_MEMFD == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_VMM_FD == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_DMABUF == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_DMABUF,
	       "handle kinds");
_Static_assert((int)BACKEND_HANDLE_IPC == (int)ROCMMEM__WIRE__HANDLE_KIND__HANDLE_IPC,
	       "handle kinds");

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
}

/* reply_lease sends a lease's grant with its fds. */
static void reply_lease(struct client *c, Rocmmem__Wire__Reply *reply, const struct svc_reply *r)
{
	Rocmmem__Wire__LeaseGrant body = ROCMMEM__WIRE__LEASE_GRANT__INIT;
	const struct lease *l = r->lease;

	lease_grant(&body, l, &c->server->svc.state.devices[l->device], r->waited_ms);
	reply->body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	reply->lease = &body;
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

void encode_notice(struct client *c, const struct svc_notice *n)
{
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
