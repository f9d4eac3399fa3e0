/* SPDX-License-Identifier: MIT */
/* build.c: an operation as the request it sends, its ids resolved against what the run saw. */
#include "build.h"

#include <string.h>

/* OPT sets an optional protobuf field from the operation's field when that one is set. */
#define OPT(dst, name, op, fid, value)        \
	do {                                  \
		if ((op)->f[fid].set) {       \
			(dst).has_##name = 1; \
			(dst).name = (value); \
		}                             \
	} while (0)

#define U32(op, fid) ((uint32_t)(op)->f[fid].v)
#define I32(op, fid) ((int32_t)(int64_t)(op)->f[fid].v)
#define I64(op, fid) ((int64_t)(op)->f[fid].v)
#define U64(op, fid) ((op)->f[fid].v)

static char *name_of(struct outgoing *o, const struct op *op)
{
	return op->f[F_NAME].set ? o->str : NULL;
}

static void build_leases(struct outgoing *o, const struct op *op, uint64_t lease, uint64_t model)
{
	switch (op->kind) {
	case OP_ACQUIRE:
		rocmmem__wire__lease_acquire__init(&o->b.acquire);
		OPT(o->b.acquire, device, op, F_DEVICE, U32(op, F_DEVICE));
		OPT(o->b.acquire, size, op, F_SIZE, U64(op, F_SIZE));
		OPT(o->b.acquire, timeout_ms, op, F_TIMEOUT, I64(op, F_TIMEOUT));
		OPT(o->b.acquire, model_id, op, F_MODEL, model);
		o->b.acquire.tag = name_of(o, op);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
		o->msg.lease_acquire = &o->b.acquire;
		break;
	case OP_RELEASE:
		rocmmem__wire__lease_release__init(&o->b.release);
		OPT(o->b.release, lease_id, op, F_LEASE, lease);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
		o->msg.lease_release = &o->b.release;
		break;
	case OP_LEASE_REDECLARE: {
		Rocmmem__Wire__LeaseRedeclare *b = &o->b.lredeclare;
		uint32_t n = U32(op, F_NCHUNKS);

		rocmmem__wire__lease_redeclare__init(b);
		OPT(*b, lease_id, op, F_LEASE, lease);
		OPT(*b, device, op, F_DEVICE, U32(op, F_DEVICE));
		OPT(*b, size, op, F_SIZE, U64(op, F_SIZE));
		OPT(*b, handle_kind, op, F_HANDLE, (Rocmmem__Wire__HandleKind)I32(op, F_HANDLE));
		OPT(*b, fd_count, op, F_FD_COUNT, U32(op, F_FD_COUNT));
		OPT(*b, model_id, op, F_MODEL, model);
		/* Up to BUILD_CHUNKS_MAX chunk sizes: more would not fit a packet anyway. */
		b->n_chunk_sizes =
		    op->f[F_NCHUNKS].set ? (n < BUILD_CHUNKS_MAX ? n : BUILD_CHUNKS_MAX) : 0;
		for (size_t i = 0; i < b->n_chunk_sizes; i++)
			o->chunks[i] = U64(op, F_CHUNK);
		b->chunk_sizes = o->chunks;
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
		o->msg.lease_redeclare = b;
		break;
	}
	default:
		break;
	}
}

static void build_model_register(struct outgoing *o, const struct op *op, uint64_t model)
{
	if (op->kind == OP_REGISTER) {
		Rocmmem__Wire__ModelRegister *b = &o->b.reg;

		rocmmem__wire__model_register__init(b);
		OPT(*b, device, op, F_DEVICE, U32(op, F_DEVICE));
		OPT(*b, class_, op, F_CLASS, (Rocmmem__Wire__ModelClass)I32(op, F_CLASS));
		OPT(*b, size, op, F_SIZE, U64(op, F_SIZE));
		OPT(*b, priority, op, F_PRIORITY, I32(op, F_PRIORITY));
		OPT(*b, pinned, op, F_PINNED, U64(op, F_PINNED) != 0);
		OPT(*b, reservation, op, F_RESERVATION, U64(op, F_RESERVATION));
		b->name = name_of(o, op);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
		o->msg.model_register = b;
	} else {
		Rocmmem__Wire__ModelRedeclare *b = &o->b.mredeclare;

		rocmmem__wire__model_redeclare__init(b);
		OPT(*b, previous_id, op, F_MODEL, model);
		OPT(*b, device, op, F_DEVICE, U32(op, F_DEVICE));
		OPT(*b, class_, op, F_CLASS, (Rocmmem__Wire__ModelClass)I32(op, F_CLASS));
		OPT(*b, size, op, F_SIZE, U64(op, F_SIZE));
		OPT(*b, priority, op, F_PRIORITY, I32(op, F_PRIORITY));
		OPT(*b, pinned, op, F_PINNED, U64(op, F_PINNED) != 0);
		OPT(*b, reservation, op, F_RESERVATION, U64(op, F_RESERVATION));
		OPT(*b, use_count, op, F_USE_COUNT, U32(op, F_USE_COUNT));
		b->name = name_of(o, op);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REDECLARE;
		o->msg.model_redeclare = b;
	}
}

static void build_models(struct outgoing *o, const struct op *op, uint64_t model)
{
	switch (op->kind) {
	case OP_REGISTER:
	case OP_MODEL_REDECLARE:
		build_model_register(o, op, model);
		break;
	case OP_MODEL_ACQUIRE:
		rocmmem__wire__model_acquire__init(&o->b.macquire);
		OPT(o->b.macquire, model_id, op, F_MODEL, model);
		OPT(o->b.macquire, timeout_ms, op, F_TIMEOUT, I64(op, F_TIMEOUT));
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
		o->msg.model_acquire = &o->b.macquire;
		break;
	case OP_MODEL_RELEASE:
		rocmmem__wire__model_release__init(&o->b.mrelease);
		OPT(o->b.mrelease, model_id, op, F_MODEL, model);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
		o->msg.model_release = &o->b.mrelease;
		break;
	case OP_RESIZE:
		rocmmem__wire__model_resize__init(&o->b.resize);
		OPT(o->b.resize, model_id, op, F_MODEL, model);
		OPT(o->b.resize, reservation, op, F_RESERVATION, U64(op, F_RESERVATION));
		OPT(o->b.resize, timeout_ms, op, F_TIMEOUT, I64(op, F_TIMEOUT));
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE;
		o->msg.model_resize = &o->b.resize;
		break;
	case OP_UNREGISTER:
		rocmmem__wire__model_unregister__init(&o->b.unregister);
		OPT(o->b.unregister, model_id, op, F_MODEL, model);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
		o->msg.model_unregister = &o->b.unregister;
		break;
	case OP_EVICT_ACK:
		rocmmem__wire__evict_ack__init(&o->b.ack);
		OPT(o->b.ack, model_id, op, F_MODEL, model);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
		o->msg.evict_ack = &o->b.ack;
		break;
	default:
		break;
	}
}

static void build_admin(struct outgoing *o, const struct op *op, uint64_t lease, uint64_t model)
{
	Rocmmem__Wire__AdminRequest *b = &o->b.admin;

	rocmmem__wire__admin_request__init(b);
	switch (op->kind) {
	case OP_ADMIN_EVICT:
		rocmmem__wire__admin_evict_model__init(&o->a.evict);
		OPT(o->a.evict, model_id, op, F_MODEL, model);
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
		b->evict_model = &o->a.evict;
		break;
	case OP_ADMIN_PIN:
		rocmmem__wire__admin_pin_model__init(&o->a.pin);
		OPT(o->a.pin, model_id, op, F_MODEL, model);
		OPT(o->a.pin, pinned, op, F_PINNED, U64(op, F_PINNED) != 0);
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
		b->pin_model = &o->a.pin;
		break;
	case OP_ADMIN_BUDGET:
		rocmmem__wire__admin_set_budget__init(&o->a.budget);
		OPT(o->a.budget, device, op, F_DEVICE, U32(op, F_DEVICE));
		OPT(o->a.budget, budget, op, F_BUDGET, U64(op, F_BUDGET));
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_SET_BUDGET;
		b->set_budget = &o->a.budget;
		break;
	case OP_ADMIN_REVOKE:
		rocmmem__wire__admin_revoke_lease__init(&o->a.revoke);
		OPT(o->a.revoke, lease_id, op, F_LEASE, lease);
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_REVOKE_LEASE;
		b->revoke_lease = &o->a.revoke;
		break;
	case OP_ADMIN_DISCONNECT:
		rocmmem__wire__admin_disconnect_client__init(&o->a.disconnect);
		OPT(o->a.disconnect, pid, op, F_PID, I32(op, F_PID));
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_DISCONNECT_CLIENT;
		b->disconnect_client = &o->a.disconnect;
		break;
	default:
		rocmmem__wire__admin_set_log_level__init(&o->a.level);
		o->a.level.level = name_of(o, op);
		b->op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_SET_LOG_LEVEL;
		b->set_log_level = &o->a.level;
		break;
	}
	o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	o->msg.admin = b;
}

/* build_plain covers the requests without ids in their bodies. */
static void build_plain(struct outgoing *o, const struct op *op)
{
	switch (op->kind) {
	case OP_HELLO:
		rocmmem__wire__hello__init(&o->b.hello);
		OPT(o->b.hello, protocol_version, op, F_VERSION, U32(op, F_VERSION));
		o->b.hello.client_name = name_of(o, op);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
		o->msg.hello = &o->b.hello;
		break;
	case OP_STATUS:
		rocmmem__wire__status_request__init(&o->b.status);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
		o->msg.status = &o->b.status;
		break;
	case OP_SUBSCRIBE:
		rocmmem__wire__subscribe__init(&o->b.subscribe);
		OPT(o->b.subscribe, interval_ms, op, F_INTERVAL, U32(op, F_INTERVAL));
		OPT(o->b.subscribe, samples, op, F_SAMPLES, U64(op, F_SAMPLES) != 0);
		OPT(o->b.subscribe, events, op, F_EVENTS, U64(op, F_EVENTS) != 0);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
		o->msg.subscribe = &o->b.subscribe;
		break;
	case OP_UNSUBSCRIBE:
		rocmmem__wire__unsubscribe__init(&o->b.unsubscribe);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE;
		o->msg.unsubscribe = &o->b.unsubscribe;
		break;
	case OP_TRIM:
		rocmmem__wire__trim_request__init(&o->b.trim);
		OPT(o->b.trim, device, op, F_DEVICE, U32(op, F_DEVICE));
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
		o->msg.trim = &o->b.trim;
		break;
	case OP_METRICS:
		rocmmem__wire__metrics_request__init(&o->b.metrics);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_METRICS;
		o->msg.metrics = &o->b.metrics;
		break;
	case OP_REDECLARE_DONE:
		rocmmem__wire__redeclare_done__init(&o->b.done);
		o->msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
		o->msg.redeclare_done = &o->b.done;
		break;
	default: /* OP_EMPTY: no body at all */
		break;
	}
}

void build_request(struct outgoing *o, const struct op *op, uint64_t rid, uint64_t lease,
		   uint64_t model)
{
	memset(o, 0, sizeof(*o));
	rocmmem__wire__client_message__init(&o->msg);
	snprintf(o->str, sizeof(o->str), "%s", op->str);
	o->msg.has_id = !(op->flags & OPF_NOID);
	o->msg.id = rid;
	switch (op->kind) {
	case OP_ACQUIRE:
	case OP_RELEASE:
	case OP_LEASE_REDECLARE:
		build_leases(o, op, lease, model);
		break;
	case OP_REGISTER:
	case OP_MODEL_REDECLARE:
	case OP_MODEL_ACQUIRE:
	case OP_MODEL_RELEASE:
	case OP_RESIZE:
	case OP_UNREGISTER:
	case OP_EVICT_ACK:
		build_models(o, op, model);
		break;
	case OP_ADMIN_EVICT:
	case OP_ADMIN_PIN:
	case OP_ADMIN_BUDGET:
	case OP_ADMIN_REVOKE:
	case OP_ADMIN_DISCONNECT:
	case OP_ADMIN_LOG_LEVEL:
		build_admin(o, op, lease, model);
		break;
	default:
		build_plain(o, op);
		break;
	}
}
