/* SPDX-License-Identifier: MIT */
/* model.c: declaring models to the daemon and following its residency decisions. */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* call sends a request and waits for its plain acknowledgement (or the daemon's error). */
static int call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t wait_ms)
{
	struct inmsg *m;
	int err = conn_call(c, msg, wait_ms, &m);

	inmsg_free(m);
	return err;
}

/* wait_for turns a daemon-side wait into how long to wait for its answer. */
static int64_t wait_for(int64_t timeout_ms)
{
	if (timeout_ms < 0 || timeout_ms > INT64_MAX - CONN_REPLY_GRACE_MS)
		return -1;
	return timeout_ms + CONN_REPLY_GRACE_MS;
}

ROCMMEM_EXPORT int rocmmem_model_register(rocmmem_client *c, const struct rocmmem_model_desc *desc,
					  uint64_t *model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!c || !desc || !model_id)
		return error_set(-EINVAL, "rocmmem_model_register needs a client, a description "
					  "and somewhere to store the id");
	reg.has_device = true;
	reg.device = desc->device;
	reg.name = (char *)desc->name;
	reg.has_class_ = true;
	reg.class_ = (Rocmmem__Wire__ModelClass)desc->model_class;
	reg.has_size = true;
	reg.size = desc->size;
	reg.has_priority = true;
	reg.priority = desc->priority;
	reg.has_pinned = true;
	reg.pinned = desc->pinned != 0;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	err = conn_call(c, &msg, CONN_REPLY_GRACE_MS, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_MODEL || !r->model->has_model_id) {
		inmsg_free(m);
		return error_set(-EPROTO, "the daemon answered a registration with something else");
	}
	*model_id = r->model->model_id;
	inmsg_free(m);
	return 0;
}

ROCMMEM_EXPORT int rocmmem_model_acquire(rocmmem_client *c, uint64_t model_id, int64_t timeout_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire req = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_acquire needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	req.has_timeout_ms = true;
	req.timeout_ms = timeout_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
	msg.model_acquire = &req;
	return call(c, &msg, wait_for(timeout_ms));
}

ROCMMEM_EXPORT int rocmmem_model_release(rocmmem_client *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRelease req = ROCMMEM__WIRE__MODEL_RELEASE__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_release needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
	msg.model_release = &req;
	return call(c, &msg, CONN_REPLY_GRACE_MS);
}

ROCMMEM_EXPORT int rocmmem_model_resize(rocmmem_client *c, uint64_t model_id, uint64_t reservation,
					int64_t timeout_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelResize req = ROCMMEM__WIRE__MODEL_RESIZE__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_resize needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	req.has_reservation = true;
	req.reservation = reservation;
	req.has_timeout_ms = true;
	req.timeout_ms = timeout_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE;
	msg.model_resize = &req;
	return call(c, &msg, wait_for(timeout_ms));
}

ROCMMEM_EXPORT int rocmmem_model_unregister(rocmmem_client *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelUnregister req = ROCMMEM__WIRE__MODEL_UNREGISTER__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_unregister needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
	msg.model_unregister = &req;
	return call(c, &msg, CONN_REPLY_GRACE_MS);
}

ROCMMEM_EXPORT int rocmmem_model_evict_ack(rocmmem_client *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__EvictAck req = ROCMMEM__WIRE__EVICT_ACK__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_evict_ack needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
	msg.evict_ack = &req;
	return call(c, &msg, CONN_REPLY_GRACE_MS);
}

ROCMMEM_EXPORT int rocmmem_model_evict(rocmmem_client *c, uint64_t model_id, uint64_t *bytes_freed)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminEvictModel req = ROCMMEM__WIRE__ADMIN_EVICT_MODEL__INIT;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	bool revoked;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_evict needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
	admin.evict_model = &req;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin; /* Answered when the owner has unloaded, or at the latest when its
			       deadline passed. */
	err = conn_call(c, &msg, -1, &m);
	if (err)
		return err;
	r = conn_reply(m);
	revoked = r->body_case == ROCMMEM__WIRE__REPLY__BODY_EVICT && r->evict->revoked;
	if (bytes_freed)
		*bytes_freed =
		    r->body_case == ROCMMEM__WIRE__REPLY__BODY_EVICT ? r->evict->bytes_freed : 0;
	inmsg_free(m);
	return revoked ? 1 : 0;
}

ROCMMEM_EXPORT int rocmmem_model_pin(rocmmem_client *c, uint64_t model_id, int pinned)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminPinModel req = ROCMMEM__WIRE__ADMIN_PIN_MODEL__INIT;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_pin needs a client");
	req.has_model_id = true;
	req.model_id = model_id;
	req.has_pinned = true;
	req.pinned = pinned != 0;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
	admin.pin_model = &req;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin;
	return call(c, &msg, CONN_REPLY_GRACE_MS);
}
