/* SPDX-License-Identifier: MIT */
/*
 * behave.c: what each kind of simulated client does when its turn comes: its next request,
 * chosen by chance within what its kind does (sim.h), recorded before it is made.
 */
#include <inttypes.h>
#include <stdio.h>

#include "sim.h"

/* budget_granules is device's budget in granules. */
static uint64_t budget_granules(const struct world *w, unsigned device)
{
	return w->svc.state.devices[device].budget / SIM_GRANULE;
}

/* pending says whether c has a request of kind outstanding. */
static bool pending(const struct sim_client *c, enum sim_req_kind kind)
{
	for (unsigned i = 0; i < c->nout; i++)
		if (c->out[i].kind == kind)
			return true;
	return false;
}

/* waiting says whether c waits for memory (a lease, an acquire or a resize). */
static bool waiting(const struct sim_client *c)
{
	return pending(c, REQ_LEASE) || pending(c, REQ_ACQUIRE) || pending(c, REQ_RESIZE);
}

/* pick_timeout: never waits, a little, a while, or for ever. */
static int64_t pick_timeout(struct world *w, unsigned never, unsigned forever)
{
	uint64_t r = rng_below(&w->rng, 100);

	if (r < never)
		return 0;
	if (r >= 100 - forever)
		return -1;
	return rng_chance(&w->rng, 500000) ? (int64_t)rng_range(&w->rng, 1, 300)
					   : (int64_t)rng_range(&w->rng, 300, 5000);
}

/* pick_class: mostly "other"; transformers, VAEs and text encoders (device 0 keeps the first
 * two apart) now and then. */
static unsigned pick_class(struct world *w)
{
	uint64_t r = rng_below(&w->rng, 100);

	return r < 70 ? 0 : r < 80 ? 1 : r < 90 ? 2 : 3;
}

/* pick_size: mostly a few granules, sometimes most of the budget, now and then too much. */
static uint64_t pick_size(struct world *w, unsigned device)
{
	uint64_t budget = budget_granules(w, device), r = rng_below(&w->rng, 100), g;

	if (r < 75)
		g = rng_range(&w->rng, 1, 8);
	else if (r < 97)
		g = rng_range(&w->rng, 9, 64);
	else if (r < 99)
		g = rng_range(&w->rng, 1, budget / 2 + 1);
	else
		g = rng_range(&w->rng, budget + 1, 2 * budget + 2);
	/* Sizes the client does not round: the daemon rounds them up to the granule. */
	return g * SIM_GRANULE -
	       (rng_chance(&w->rng, 200000) ? rng_below(&w->rng, SIM_GRANULE) : 0);
}

static void lease(struct world *w, struct sim_client *c, unsigned device, uint64_t size,
		  int64_t timeout, uint64_t model_id)
{
	struct policy_request r = {.kind = POLICY_LEASE,
				   .holder = c->holder,
				   .device = device,
				   .requested = size,
				   .model_id = model_id,
				   .timeout_ms = timeout};

	if (c->nleases >= SIM_MAX_LEASES - 1)
		return;
	r.request_id = world_send(w, c, REQ_LEASE, 0, 0);
	if (!r.request_id)
		return;
	r.progress = c->out[c->nout - 1].progress = rng_chance(&w->rng, 31250);
	sim_trace(w,
		  "holder %" PRIu64 " asks %" PRIu64 " bytes on device %u (timeout %" PRId64
		  ", model %" PRIu64 ")",
		  c->holder, size, device, timeout, model_id);
	svc_request(&w->svc, &r);
}

static void release(struct world *w, struct sim_client *c, unsigned i)
{
	uint64_t id;

	if (c->leases[i].releasing)
		return;
	id = world_send(w, c, REQ_RELEASE, 0, c->leases[i].id);
	if (!id)
		return;
	c->leases[i].releasing = true;
	sim_trace(w, "holder %" PRIu64 " releases lease %" PRIu64, c->holder, c->leases[i].id);
	svc_lease_release(&w->svc, c->holder, id, c->leases[i].id);
}

static void register_model(struct world *w, struct sim_client *c, unsigned slot, unsigned cls,
			   uint64_t size)
{
	struct sim_model *m = &c->models[slot];
	char name[16];
	struct svc_model_desc desc = {.device = c->device,
				      .name = name,
				      .model_class = cls,
				      .has_size = true,
				      .size = size,
				      .priority = (int32_t)rng_range(&w->rng, 0, 3) - 1,
				      .pinned = rng_chance(&w->rng, 20000)};
	uint64_t id = world_send(w, c, REQ_REGISTER, slot, 0);

	if (!id)
		return;
	snprintf(name, sizeof(name), "m%u", slot);
	*m = (struct sim_model){
	    .used = true, .device = c->device, .cls = cls, .size = size, .busy = true};
	sim_trace(w, "holder %" PRIu64 " registers model slot %u (class %u, %" PRIu64 " bytes)",
		  c->holder, slot, cls, size);
	svc_model_register(&w->svc, c->holder, id, &desc);
}

/* model_request asks for model slot: acquire it, or resize it to target. */
static void model_request(struct world *w, struct sim_client *c, unsigned slot, bool resize,
			  uint64_t target, int64_t timeout)
{
	struct sim_model *m = &c->models[slot];
	struct policy_request r = {.kind = resize ? POLICY_MODEL_RESIZE : POLICY_MODEL_ACQUIRE,
				   .holder = c->holder,
				   .model_id = m->id,
				   .requested = target,
				   .timeout_ms = timeout};

	r.request_id = world_send(w, c, resize ? REQ_RESIZE : REQ_ACQUIRE, slot, m->id);
	if (!r.request_id)
		return;
	r.progress = c->out[c->nout - 1].progress = rng_chance(&w->rng, 31250);
	m->busy = true;
	sim_trace(
	    w, "holder %" PRIu64 " %s model %" PRIu64 " (%" PRIu64 " bytes, timeout %" PRId64 ")",
	    c->holder, resize ? "resizes" : "acquires", m->id, target, timeout);
	svc_request(&w->svc, &r);
}

/* model_op releases or unregisters model slot. */
static void model_op(struct world *w, struct sim_client *c, unsigned slot, bool unregister)
{
	struct sim_model *m = &c->models[slot];
	uint64_t id =
	    world_send(w, c, unregister ? REQ_UNREGISTER : REQ_MODEL_RELEASE, slot, m->id);

	if (!id)
		return;
	m->busy = true;
	sim_trace(w, "holder %" PRIu64 " %s model %" PRIu64, c->holder,
		  unregister ? "unregisters" : "releases", m->id);
	if (unregister)
		svc_model_unregister(&w->svc, c->holder, id, m->id);
	else
		svc_model_release(&w->svc, c->holder, id, m->id);
}

/* outstanding counts c's requests of kind. */
static unsigned outstanding(const struct sim_client *c, enum sim_req_kind kind)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nout; i++)
		n += c->out[i].kind == kind;
	return n;
}

/*
 * leaser: leases of random sizes and timeouts; a second thread releases now and then, and
 * now and then asks for a second lease while the first waits (a client's own requests on a
 * device must be granted in order: invariant 8).
 */
static void leaser(struct world *w, struct sim_client *c)
{
	unsigned asked = outstanding(c, REQ_LEASE);

	if ((asked == 0 && (c->nleases == 0 || (c->nleases < 3 && rng_chance(&w->rng, 500000)))) ||
	    (asked == 1 && c->nleases < 3 && rng_chance(&w->rng, 100000))) {
		unsigned device = rng_chance(&w->rng, 800000)
				      ? c->device
				      : (unsigned)rng_below(&w->rng, w->opt.devices);

		lease(w, c, device, pick_size(w, device), pick_timeout(w, 20, 10), 0);
		return;
	}
	if (c->nleases && (!pending(c, REQ_LEASE) || rng_chance(&w->rng, 300000)))
		release(w, c, (unsigned)rng_below(&w->rng, c->nleases));
}

/*
 * framepack: model A in use while it acquires B; never lets go while it waits. Its models
 * share the device with the other clients there: with a few clients each takes a good part of
 * it (the hold-and-wait shape needs that), with thousands a sliver.
 */
static void framepack(struct world *w, struct sim_client *c)
{
	struct sim_model *a = &c->models[0], *b = &c->models[1];
	uint64_t share = w->opt.clients / (2 * w->opt.devices) + 1;
	uint64_t budget = w->svc.state.devices[c->device].budget / share;

	if (c->nout || a->busy || b->busy)
		return;
	if (!a->used) {
		register_model(w, c, 0, pick_class(w), budget / 100 * rng_range(&w->rng, 30, 60));
	} else if (!b->used) {
		register_model(w, c, 1, pick_class(w), budget / 100 * rng_range(&w->rng, 15, 35));
	} else if (c->phase == 0 && !a->in_use) {
		model_request(w, c, 0, false, 0, pick_timeout(w, 0, 30) * 10);
		c->phase = a->id ? 0 : 1;
	} else if (c->phase == 0 && !b->in_use) {
		model_request(w, c, 1, false, 0, pick_timeout(w, 0, 30) * 10);
		c->phase = 1;
	} else if (b->in_use) {
		model_op(w, c, 1, false);
	} else if (a->in_use) {
		model_op(w, c, 0, false);
	} else if (rng_chance(&w->rng, 30000)) {
		model_op(w, c, (unsigned)rng_below(&w->rng, 2), true);
	} else {
		c->phase = 0;
	}
}

/* switcher: one of its models at a time, now and then with a lease tagged to it. */
static void switcher(struct world *w, struct sim_client *c)
{
	unsigned k = c->phase % 3, stage = c->phase / 3;
	struct sim_model *m = &c->models[k];
	uint64_t budget = w->svc.state.devices[c->device].budget;

	if (waiting(c) || m->busy) {
		if (c->nleases && rng_chance(&w->rng, 100000))
			release(w, c, (unsigned)rng_below(&w->rng, c->nleases));
		return;
	}
	if (!m->used) {
		register_model(w, c, k, pick_class(w), budget / 10000 * rng_range(&w->rng, 5, 30));
	} else if (stage == 0 && !m->in_use) {
		model_request(w, c, k, false, 0, pick_timeout(w, 10, 10));
		c->phase = k + 3;
	} else if (m->in_use && rng_chance(&w->rng, 300000)) {
		lease(w, c, c->device, rng_range(&w->rng, 1, 4) * SIM_GRANULE,
		      pick_timeout(w, 30, 0), m->id);
	} else if (m->in_use) {
		model_op(w, c, k, false);
	} else {
		if (c->nleases)
			release(w, c, (unsigned)rng_below(&w->rng, c->nleases));
		if (rng_chance(&w->rng, 20000))
			model_op(w, c, k, true);
		c->phase = (k + 1) % 3;
	}
}

/* resizer: one model whose reservation grows and shrinks while in use. */
static void resizer(struct world *w, struct sim_client *c)
{
	struct sim_model *m = &c->models[0];
	uint64_t budget = w->svc.state.devices[c->device].budget;

	if (c->nout || m->busy)
		return;
	/* A model of size 0 (its memory is leases) is in use at once, whatever is loaded: one of an
	 * exclusive class would stand in the way of every rival's resize for good. */
	if (!m->used && rng_chance(&w->rng, 300000))
		register_model(w, c, 0, 0, 0);
	else if (!m->used)
		register_model(w, c, 0, pick_class(w), budget / 10000 * rng_range(&w->rng, 1, 30));
	else if (!m->in_use && rng_chance(&w->rng, 50000))
		model_op(w, c, 0, true);
	else if (!m->in_use)
		model_request(w, c, 0, false, 0, pick_timeout(w, 10, 10));
	else if (rng_chance(&w->rng, 600000))
		model_request(w, c, 0, true, budget / 10000 * rng_range(&w->rng, 0, 40),
			      pick_timeout(w, 20, 5));
	else
		model_op(w, c, 0, false);
}

/* admin: evicts and pins any model (ids drawn up to the highest seen), trims. */
static void admin(struct world *w, struct sim_client *c)
{
	uint64_t r = rng_below(&w->rng, 100), model = rng_range(&w->rng, 1, w->highest_model + 1);
	uint64_t id;

	if (c->nout)
		return;
	if (r < 40) {
		id = world_send(w, c, REQ_ADMIN_EVICT, 0, model);
		/* One in eight is forced: a model in use is taken too. */
		sim_trace(w, "holder %" PRIu64 " evicts model %" PRIu64 "%s", c->holder, model,
			  r < 5 ? " (forced)" : "");
		w->forcing = r < 5;
		svc_admin_evict(&w->svc, c->holder, id, model, r < 5);
		w->forcing = false;
	} else if (r < 70) {
		id = world_send(w, c, REQ_PIN, 0, model);
		sim_trace(w, "holder %" PRIu64 " pins model %" PRIu64 " (%d)", c->holder, model,
			  (int)(r & 1));
		svc_admin_pin(&w->svc, c->holder, id, model, r & 1);
	} else if (r < 80) {
		id = world_send(w, c, REQ_TRIM, 0, 0);
		sim_trace(w, "holder %" PRIu64 " trims", c->holder);
		svc_trim(&w->svc, c->holder, id, r & 1, c->device);
	}
}

bool behave_release_model(struct world *w, struct sim_client *c, uint64_t model)
{
	for (unsigned i = 0; i < SIM_MAX_MODELS; i++) {
		struct sim_model *m = &c->models[i];

		if (m->id == model && m->in_use && !m->busy) {
			model_op(w, c, i, false);
			return true;
		}
	}
	return false;
}

void behave(struct world *w, struct sim_client *c)
{
	switch (c->kind) {
	case SIM_LEASER:
		leaser(w, c);
		break;
	case SIM_FRAMEPACK:
		framepack(w, c);
		break;
	case SIM_SWITCHER:
		switcher(w, c);
		break;
	case SIM_RESIZER:
		resizer(w, c);
		break;
	default:
		admin(w, c);
		break;
	}
}
