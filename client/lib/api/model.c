/* SPDX-License-Identifier: MIT */
/* model.c: declaring models to the daemon and following its residency decisions. */
#include <errno.h>
#include <string.h>

#include "base/abi.h"
#include "base/error.h"
#include "conn/client.h"

/* The sizes of the first versions (1.0) of the structs that grow: every caller's. */
#define MODEL_DESC_1_0 ABI_END(struct rocmmem_model_desc, pinned)
#define EVICT_RESULT_1_0 ABI_END(struct rocmmem_evict_result, revoked)

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

/*
 * call_waiting is call for a request that waits for memory up to *timeout_ms (a field of
 * msg): while the daemon restarts it waits for it within that same time. Stores the residency
 * generation the answer names in *generation (0: an older daemon's answer names none).
 */
static int call_waiting(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t *timeout_ms,
			uint64_t *generation)
{
	struct call_opts o = conn_default_opts(wait_for(*timeout_ms));
	struct inmsg *m;
	int err;

	o.reconnect_ms = *timeout_ms;
	o.timeout_field = timeout_ms;
	*generation = 0;
	err = conn_call_opts(c, msg, &o, &m);
	if (err == 0 && conn_reply(m)->body_case == ROCMMEM__WIRE__REPLY__BODY_RESIDENCY)
		*generation = conn_reply(m)->residency->generation;
	inmsg_free(m);
	return err;
}

/* tracked runs fn on this client's record of a model (lock held), if it is this client's. */
static void tracked(rocmmem_client *c, uint64_t model_id, void (*fn)(struct lib_model *, uint64_t),
		    uint64_t arg)
{
	struct lib_model *lm;

	pthread_mutex_lock(&c->lock);
	lm = held_model(c, model_id);
	if (lm)
		fn(lm, arg);
	pthread_mutex_unlock(&c->lock);
}

static void acquired(struct lib_model *lm, uint64_t unused)
{
	(void)unused;
	lm->use_count++;
	/* Not resident before: the daemon reserved its size (a lease-only model reserves 0). */
	if (lm->reservation == 0)
		lm->reservation = lm->size;
}

static void released(struct lib_model *lm, uint64_t unused)
{
	(void)unused;
	if (lm->use_count > 0)
		lm->use_count--;
}

static void resized(struct lib_model *lm, uint64_t reservation)
{
	lm->reservation = reservation;
}

static void pinned(struct lib_model *lm, uint64_t pin)
{
	lm->pinned = pin != 0;
}

ROCMMEM_EXPORT int rocmmem_model_register(rocmmem_client *c,
					  const struct rocmmem_model_desc *description,
					  uint64_t *model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	struct rocmmem_model_desc copy, *desc = &copy;
	Rocmmem__Wire__Reply *r;
	uint64_t daemon_id;
	struct inmsg *m;
	int err;

	if (!c || !description || !model_id)
		return error_set(-EINVAL, "rocmmem_model_register needs a client, a description "
					  "and somewhere to store the id");
	err = abi_take(&copy, sizeof(copy), description, description->struct_size, MODEL_DESC_1_0,
		       "rocmmem_model_desc");
	if (err)
		return err;
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
	daemon_id = r->model->model_id;
	inmsg_free(m);
	err = held_model_track(c, daemon_id, desc, model_id);
	if (err) {
		/* Unknown to the library, it could not be declared again after a restart. */
		rocmmem_model_unregister(c, daemon_id);
		return error_set(err, "out of memory");
	}
	return 0;
}

ROCMMEM_EXPORT int rocmmem_model_acquire(rocmmem_client *c, uint64_t model_id,
					 rocmmem_timeout_ms timeout_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire req = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	uint64_t gen;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_acquire needs a client");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	req.has_timeout_ms = true;
	req.timeout_ms = timeout_ms;
	req.has_progress = req.progress = conn_progress_wanted(c);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
	msg.model_acquire = &req;
	err = call_waiting(c, &msg, &req.timeout_ms, &gen);
	if (err == 0) {
		held_model_granted(c, model_id, gen);
		tracked(c, model_id, acquired, 0);
	}
	return err;
}

ROCMMEM_EXPORT int rocmmem_model_release(rocmmem_client *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRelease req = ROCMMEM__WIRE__MODEL_RELEASE__INIT;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_release needs a client");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
	msg.model_release = &req;
	err = call(c, &msg, CONN_REPLY_GRACE_MS);
	if (err == 0)
		tracked(c, model_id, released, 0);
	return err;
}

ROCMMEM_EXPORT int rocmmem_model_resize(rocmmem_client *c, uint64_t model_id, uint64_t reservation,
					rocmmem_timeout_ms timeout_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelResize req = ROCMMEM__WIRE__MODEL_RESIZE__INIT;
	uint64_t gen;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_resize needs a client");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	req.has_reservation = true;
	req.reservation = reservation;
	req.has_timeout_ms = true;
	req.timeout_ms = timeout_ms;
	req.has_progress = req.progress = conn_progress_wanted(c);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE;
	msg.model_resize = &req;
	err = call_waiting(c, &msg, &req.timeout_ms, &gen);
	if (err == 0) {
		held_model_granted(c, model_id, gen);
		tracked(c, model_id, resized, reservation);
	}
	return err;
}

ROCMMEM_EXPORT int rocmmem_model_unregister(rocmmem_client *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelUnregister req = ROCMMEM__WIRE__MODEL_UNREGISTER__INIT;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_unregister needs a client");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
	msg.model_unregister = &req;
	err = call(c, &msg, CONN_REPLY_GRACE_MS);
	/* Forgotten here whatever the daemon said: it is never declared again. */
	held_model_untrack(c, model_id);
	return err;
}

/* ack_generation is the generation an ack without one names: the eviction last delivered,
 * else the residency last granted. */
static uint64_t ack_generation(rocmmem_client *c, uint64_t model_id)
{
	struct lib_model *lm;
	uint64_t gen = 0;

	pthread_mutex_lock(&c->lock);
	lm = held_model(c, model_id);
	if (lm)
		gen = lm->evict_generation ? lm->evict_generation : lm->generation;
	pthread_mutex_unlock(&c->lock);
	return gen;
}

/* unloading: the host unloaded the residency it acks; unless it holds a later one, a
 * reconnection declares the model without a reservation from now on. */
static void unloading(struct lib_model *lm, uint64_t generation)
{
	if (generation >= lm->generation)
		lm->reservation = 0;
}

/* acked notes a residency that is over: a restarted daemon carries on after it. */
static void acked(struct lib_model *lm, uint64_t generation)
{
	if (generation > lm->ended)
		lm->ended = generation;
}

ROCMMEM_EXPORT int rocmmem_model_evict_ack_generation(rocmmem_client *c, uint64_t model_id,
						      uint64_t generation)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__EvictAck req = ROCMMEM__WIRE__EVICT_ACK__INIT;
	struct call_opts o = conn_default_opts(CONN_REPLY_GRACE_MS);
	struct inmsg *m;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_evict_ack needs a client");
	if (generation == 0)
		generation = ack_generation(c, model_id);
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	/* A model this library never heard of has no generation: the daemon decides. */
	req.has_generation = generation != 0;
	req.generation = generation;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
	msg.evict_ack = &req;
	tracked(c, model_id, unloading, generation);
	o.once = true;
	err = conn_call_opts(c, &msg, &o, &m);
	inmsg_free(m);
	if (err == 0)
		tracked(c, model_id, acked, generation);
	/* The daemon that asked went away: its eviction ended with it, nothing to tell. */
	return err == -ENOTCONN ? 0 : err;
}

ROCMMEM_EXPORT int rocmmem_model_evict_ack(rocmmem_client *c, uint64_t model_id)
{
	return rocmmem_model_evict_ack_generation(c, model_id, 0);
}

ROCMMEM_EXPORT uint64_t rocmmem_model_generation(rocmmem_client *c, uint64_t model_id)
{
	struct lib_model *lm;
	uint64_t gen = 0;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	lm = held_model(c, model_id);
	if (lm)
		gen = lm->generation;
	pthread_mutex_unlock(&c->lock);
	return gen;
}

/* evict asks for an eviction of model_id (forced: a model in use too) and waits for it. */
static int evict(rocmmem_client *c, uint64_t model_id, bool force,
		 struct rocmmem_evict_result *result)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminEvictModel req = ROCMMEM__WIRE__ADMIN_EVICT_MODEL__INIT;
	struct rocmmem_evict_result got = {.struct_size = sizeof(got)};
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_evict needs a client");
	/* A result too small is refused before the daemon is asked anything. */
	if (result && result->struct_size < EVICT_RESULT_1_0)
		return abi_give(result, result->struct_size, &got, sizeof(got), EVICT_RESULT_1_0,
				"rocmmem_evict_result");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	req.has_force = force;
	req.force = force;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
	admin.evict_model = &req;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin; /* Answered when the owner has unloaded, or at the latest when its
			       deadline passed. */
	err = conn_call(c, &msg, -1, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_EVICT) {
		got.bytes_freed = r->evict->bytes_freed;
		got.revoked = r->evict->revoked ? 1 : 0;
	}
	inmsg_free(m);
	return result ? abi_give(result, result->struct_size, &got, sizeof(got), EVICT_RESULT_1_0,
				 "rocmmem_evict_result")
		      : 0;
}

ROCMMEM_EXPORT int rocmmem_model_evict(rocmmem_client *c, uint64_t model_id,
				       struct rocmmem_evict_result *result)
{
	return evict(c, model_id, false, result);
}

ROCMMEM_EXPORT int rocmmem_model_evict_force(rocmmem_client *c, uint64_t model_id,
					     struct rocmmem_evict_result *result)
{
	if (!c)
		return error_set(-EINVAL, "rocmmem_model_evict_force needs a client");
	return evict(c, model_id, true, result);
}

ROCMMEM_EXPORT int rocmmem_model_pin(rocmmem_client *c, uint64_t model_id, int pin)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminPinModel req = ROCMMEM__WIRE__ADMIN_PIN_MODEL__INIT;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_model_pin needs a client");
	req.has_model_id = true;
	req.model_id = held_model_daemon_id(c, model_id);
	req.has_pinned = true;
	req.pinned = pin != 0;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
	admin.pin_model = &req;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin;
	err = call(c, &msg, CONN_REPLY_GRACE_MS);
	if (err == 0)
		tracked(c, model_id, pinned, pin != 0);
	return err;
}
