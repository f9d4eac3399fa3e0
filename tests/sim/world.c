/* SPDX-License-Identifier: MIT */
/*
 * world.c: the simulator's clients: connecting (through the service's admission, as a
 * connection would), their requests recorded before they are made, what they make of replies
 * and notices, what they do later (acks, dying), and disconnecting at any point.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static const char *const kind_names[SIM_BEHAVIOURS] = {"leaser", "framepack", "switcher", "resizer",
						       "admin"};

/* pick_kind draws a behaviour for a new client from the mix. */
static enum sim_behaviour pick_kind(struct world *w)
{
	/* Per thousand: most clients lease, some own models, a few administer. */
	static const unsigned weights[SIM_BEHAVIOURS] = {450, 180, 230, 130, 10};
	uint64_t r = rng_below(&w->rng, 1000);

	if (strcmp(w->opt.mix, "all") != 0) {
		for (unsigned k = 0; k < SIM_BEHAVIOURS; k++)
			if (strcmp(w->opt.mix, kind_names[k]) == 0)
				return (enum sim_behaviour)k;
	}
	for (unsigned k = 0; k < SIM_BEHAVIOURS; k++) {
		if (r < weights[k])
			return (enum sim_behaviour)k;
		r -= weights[k];
	}
	return SIM_LEASER;
}

static enum sim_ack pick_ack(struct world *w)
{
	uint64_t r = rng_below(&w->rng, 100);

	return r < 60 ? ACK_NOW : r < 85 ? ACK_LATE : r < 95 ? ACK_NEVER : ACK_DIE;
}

struct sim_client *world_client(struct world *w, uint64_t holder)
{
	return idtable_find(&w->by_holder, holder);
}

/* add_client keeps c in the list of clients and by its holder's id. */
static int add_client(struct world *w, struct sim_client *c)
{
	uint64_t id;

	if (w->nclients == w->clients_cap) {
		unsigned cap = w->clients_cap ? w->clients_cap * 2 : 256;
		struct sim_client **v = realloc(w->clients, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->clients = v;
		w->clients_cap = cap;
	}
	/* Holders' ids only grow: the same number in both tables. */
	idtable_skip_to(&w->by_holder, c->holder);
	if (idtable_add(&w->by_holder, c, &id) < 0 || id != c->holder)
		return -ENOMEM;
	c->index = w->nclients;
	w->clients[w->nclients++] = c;
	return 0;
}

struct sim_client *world_connect(struct world *w)
{
	enum sim_behaviour kind = pick_kind(w);
	struct identity who = {.pid = ++w->next_pid,
			       .uid = kind == SIM_ADMIN ? 0 : 1000 + (uid_t)rng_below(&w->rng, 32)};
	struct policy_decision d;
	struct sim_client *c;
	struct holder *h;

	who.gid = who.uid;
	svc_connect(&w->svc, w->nclients, &who, &d);
	if (d.verdict == POLICY_REFUSE) {
		sim_trace(w, "connection of pid %d refused: %s", (int)who.pid, d.refusal.text);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || svc_holder_create(&w->svc, &who, &h) < 0) {
		free(c);
		return NULL;
	}
	snprintf(h->name, sizeof(h->name), "sim-%s", kind_names[kind]);
	svc_holder_hello(&w->svc, h);
	c->holder = h->id;
	c->kind = kind;
	c->ack = pick_ack(w);
	c->patience_ms = rng_range(&w->rng, 30000, 600000);
	c->device = (unsigned)rng_below(&w->rng, w->opt.devices);
	if (add_client(w, c) < 0) {
		svc_holder_gone(&w->svc, h, true);
		free(c);
		return NULL;
	}
	w->stats.connects++;
	sim_trace(w, "holder %" PRIu64 " connected: %s on device %u, acks %d", c->holder,
		  kind_names[kind], c->device, (int)c->ack);
	return c;
}

void world_disconnect(struct world *w, struct sim_client *c, const char *why)
{
	struct holder *h = state_holder_find(&w->svc.state, c->holder);
	unsigned i = c->index;

	sim_trace(w, "holder %" PRIu64 " disconnects (%s)", c->holder, why);
	w->clients[i] = w->clients[--w->nclients];
	w->clients[i]->index = i;
	idtable_remove(&w->by_holder, c->holder);
	/* Its evictions end with it: its models go. */
	for (unsigned m = 0; m < SIM_MAX_MODELS; m++)
		if (c->models[m].id)
			checks_eviction_over(w, c->models[m].id);
	w->stats.disconnects++;
	free(c);
	if (!h) {
		sim_fail(w, "2 books = holders", "a client's holder is not in the books");
		return;
	}
	svc_holder_gone(&w->svc, h, true);
}

uint64_t world_send(struct world *w, struct sim_client *c, enum sim_req_kind kind, unsigned slot,
		    uint64_t arg)
{
	if (c->nout == SIM_MAX_OUT)
		return 0;
	c->out[c->nout++] = (struct sim_req){
	    .id = ++c->next_id, .kind = kind, .slot = slot, .arg = arg, .sent_ms = w->now};
	w->stats.requests++;
	return c->next_id;
}

/* impatient says whether c has waited for memory longer than it is willing to. */
static bool impatient(const struct world *w, const struct sim_client *c)
{
	for (unsigned i = 0; i < c->nout; i++) {
		const struct sim_req *q = &c->out[i];

		if ((q->kind == REQ_LEASE || q->kind == REQ_ACQUIRE || q->kind == REQ_RESIZE) &&
		    w->now - q->sent_ms > c->patience_ms)
			return true;
	}
	return false;
}

void world_act(struct world *w, struct sim_client *c)
{
	if (c->dying) {
		world_disconnect(w, c, "it dies when asked to unload");
		return;
	}
	/* Requests that wait for ever would pile up for ever: their users give up in the end. */
	if (impatient(w, c)) {
		world_disconnect(w, c, "it gave up waiting");
		return;
	}
	behave(w, c);
}

/* drop_lease forgets lease id (released, or revoked with its model). */
static void drop_lease(struct sim_client *c, uint64_t id)
{
	for (unsigned i = 0; i < c->nleases; i++) {
		if (c->leases[i].id == id) {
			c->leases[i] = c->leases[--c->nleases];
			return;
		}
	}
}

/* on_model_reply applies the answer to a request about model slot q->slot. */
static void on_model_reply(struct world *w, struct sim_client *c, const struct sim_req *q,
			   const struct svc_reply *r)
{
	struct sim_model *m = &c->models[q->slot];

	m->busy = false;
	switch (q->kind) {
	case REQ_REGISTER:
		if (r->kind == SVC_MODEL) {
			m->id = r->model->id;
			if (m->id > w->highest_model)
				w->highest_model = m->id;
		} else {
			memset(m, 0, sizeof(*m));
		}
		break;
	case REQ_ACQUIRE:
		if (r->kind == SVC_RESIDENCY) {
			m->in_use++;
			w->stats.grants++;
		}
		break;
	case REQ_MODEL_RELEASE:
		if (r->kind != SVC_ERROR && m->in_use)
			m->in_use--;
		break;
	case REQ_UNREGISTER:
		if (r->kind != SVC_ERROR) {
			checks_eviction_over(w, m->id);
			memset(m, 0, sizeof(*m));
		}
		break;
	default:
		break;
	}
}

void world_on_reply(struct world *w, struct sim_client *c, const struct sim_req *q,
		    const struct svc_reply *r)
{
	switch (q->kind) {
	case REQ_LEASE:
		if (r->kind == SVC_LEASE && c->nleases < SIM_MAX_LEASES) {
			c->leases[c->nleases++] =
			    (struct sim_lease){.id = r->lease->id, .size = r->lease->size};
			w->stats.grants++;
		} else if (r->kind == SVC_LEASE) {
			sim_fail(w, "6 one answer per request", "more leases than asked for");
		}
		break;
	case REQ_RELEASE:
		drop_lease(c, q->arg);
		break;
	case REQ_ACK:
		if (r->kind != SVC_ERROR)
			checks_eviction_over(w, q->arg);
		break;
	case REQ_REGISTER:
	case REQ_ACQUIRE:
	case REQ_MODEL_RELEASE:
	case REQ_RESIZE:
	case REQ_UNREGISTER:
		on_model_reply(w, c, q, r);
		break;
	default:
		break;
	}
}

void world_on_notice(struct world *w, struct sim_client *c, const struct svc_notice *n)
{
	struct sim_later l = {.due_ms = w->now,
			      .kind = LATER_ACK,
			      .holder = c->holder,
			      .model = n->model_id,
			      .generation = n->generation};

	switch (n->kind) {
	case NOTE_EVICT_REQUEST:
		if (c->ack == ACK_NEVER)
			break;
		if (c->ack == ACK_DIE) {
			l.kind = LATER_DIE;
			c->dying = true;
		} else if (c->ack == ACK_LATE) {
			l.due_ms += rng_range(&w->rng, n->deadline_ms / 2, n->deadline_ms * 3 / 2);
		}
		world_later(w, &l);
		break;
	case NOTE_LEASE_REVOKED:
		drop_lease(c, n->lease_id);
		break;
	case NOTE_MODEL_REVOKED:
		w->stats.revocations++;
		break;
	case NOTE_WAIT_PROGRESS:
		break; /* judged by notices_progress */
	}
}

void world_later(struct world *w, const struct sim_later *l)
{
	if (w->nlater == w->later_cap) {
		size_t cap = w->later_cap ? w->later_cap * 2 : 64;
		struct sim_later *v = realloc(w->later, cap * sizeof(*v));

		if (!v)
			return;
		w->later = v;
		w->later_cap = cap;
	}
	w->later[w->nlater++] = *l;
}

/* take_due takes the first thing due by now off the list. */
static bool take_due(struct world *w, struct sim_later *out)
{
	for (size_t i = 0; i < w->nlater; i++) {
		if (w->later[i].due_ms > w->now)
			continue;
		*out = w->later[i];
		memmove(&w->later[i], &w->later[i + 1], (w->nlater - i - 1) * sizeof(*w->later));
		w->nlater--;
		return true;
	}
	return false;
}

void world_run_later(struct world *w)
{
	struct sim_later l;

	while (!w->failed && take_due(w, &l)) {
		struct sim_client *c = world_client(w, l.holder);
		uint64_t id;

		if (!c)
			continue;
		if (l.kind == LATER_DIE) {
			world_disconnect(w, c, "it dies when asked to unload");
			continue;
		}
		/* An owner asked to give up a model in use (its maximum hold, or forced) releases
		 * it before it acks. */
		behave_release_model(w, c, l.model);
		if (!world_client(w, l.holder))
			continue;
		id = world_send(w, c, REQ_ACK, 0, l.model);
		if (!id)
			continue;
		sim_trace(w, "holder %" PRIu64 " acks model %" PRIu64 " generation %" PRIu64,
			  c->holder, l.model, l.generation);
		w->stats.acks++;
		svc_evict_ack(&w->svc, c->holder, id, l.model, true, l.generation);
	}
}
