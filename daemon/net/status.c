/* SPDX-License-Identifier: MIT */
/* status.c: the status reply, built part by part as the requester's socket drains. */
#include "status.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "report.h"
#include "server.h"

/*
 * Items per part. The largest item packs to about 150 bytes (a 64-byte name plus varints),
 * so a part stays well under WIRE_MAX_FRAME.
 */
#define STATUS_PART_ITEMS 256

/* Entries of what awaits re-declaration after a restart, in the first part (one per device and
 * process: more means a crash under a crowd; their bytes are in the devices' totals). */
#define STATUS_AWAITING_MAX 64

/* Scratch space for one part; the loop is single-threaded and parts are sent at once. */
static struct {
	struct report_device devices[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__DeviceInfo *device_ptrs[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__Counters counters;
	struct denials_wire denials;
	struct quota_report limits;
	Rocmmem__Wire__AccessInfo access;
	struct adopt_awaiting awaiting_src[STATUS_AWAITING_MAX];
	Rocmmem__Wire__AwaitingRedeclare awaiting[STATUS_AWAITING_MAX];
	Rocmmem__Wire__AwaitingRedeclare *awaiting_ptrs[STATUS_AWAITING_MAX];
	Rocmmem__Wire__ClientInfo clients[STATUS_PART_ITEMS];
	Rocmmem__Wire__ClientInfo *client_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__ClientBooks books[STATUS_PART_ITEMS];
	Rocmmem__Wire__ClientBooks *book_ptrs[STATUS_PART_ITEMS];
	size_t nbooks; /* of books, taken by the clients of this part (with the items, well
			* under WIRE_MAX_FRAME: a book packs to about 35 bytes) */
	Rocmmem__Wire__LeaseInfo leases[STATUS_PART_ITEMS];
	Rocmmem__Wire__LeaseInfo *lease_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__ModelInfo models[STATUS_PART_ITEMS];
	Rocmmem__Wire__ModelInfo *model_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__WaiterInfo queue[STATUS_PART_ITEMS];
	Rocmmem__Wire__WaiterInfo *queue_ptrs[STATUS_PART_ITEMS];
} part;

static void fill_lease(Rocmmem__Wire__LeaseInfo *o, const struct lease *l, uint64_t now)
{
	rocmmem__wire__lease_info__init(o);
	o->has_id = true;
	o->id = l->id;
	o->has_owner_pid = true;
	o->owner_pid = (int32_t)l->owner->who.pid;
	o->has_device = true;
	o->device = l->device;
	o->has_bytes = true;
	o->bytes = l->size;
	o->tag = (char *)l->tag;
	o->has_age_ms = true;
	o->age_ms = now - l->created_ms;
	if (l->model) {
		o->has_model_id = true;
		o->model_id = l->model->id;
	}
}

static void fill_waiter(Rocmmem__Wire__WaiterInfo *o, const struct waiter *w, uint64_t now)
{
	rocmmem__wire__waiter_info__init(o);
	o->has_owner_pid = true;
	o->owner_pid = (int32_t)w->holder->who.pid;
	o->has_device = true;
	o->device = w->device;
	o->has_bytes = true;
	o->bytes = policy_need(w);
	o->has_waited_ms = true;
	o->waited_ms = now - w->enqueued_ms;
	o->has_timeout_ms = true;
	o->timeout_ms = w->timeout_ms;
	o->tag = (char *)w->tag;
	if (w->model) {
		o->has_model_id = true;
		o->model_id = w->model->id;
	}
}

/* fill_awaiting lists what the previous daemon's clients have not re-declared yet. */
static void fill_awaiting(const struct svc *a, Rocmmem__Wire__StatusReply *st)
{
	size_t n =
	    adoption_awaiting(&a->state.adoption, -1, part.awaiting_src, STATUS_AWAITING_MAX);
	uint64_t left = adoption_grace_left_ms(&a->state.adoption, &a->state.deadlines, svc_now(a));

	n = n < STATUS_AWAITING_MAX ? n : STATUS_AWAITING_MAX;
	for (size_t i = 0; i < n; i++) {
		const struct adopt_awaiting *w = &part.awaiting_src[i];
		Rocmmem__Wire__AwaitingRedeclare *o = &part.awaiting[i];

		rocmmem__wire__awaiting_redeclare__init(o);
		o->has_device = o->has_pid = o->has_uid = o->has_leases = true;
		o->has_lease_bytes = o->has_models = o->has_reserved_bytes = true;
		o->has_grace_left_ms = true;
		o->device = w->device;
		o->pid = w->pid;
		o->uid = w->uid;
		o->leases = w->leases;
		o->lease_bytes = w->lease_bytes;
		o->models = w->models;
		o->reserved_bytes = w->reserved_bytes;
		o->grace_left_ms = left;
		part.awaiting_ptrs[i] = o;
	}
	st->n_awaiting_redeclare = n;
	st->awaiting_redeclare = part.awaiting_ptrs;
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		part.devices[i].info.has_awaiting_redeclare_bytes = true;
		part.devices[i].info.awaiting_redeclare_bytes =
		    adoption_awaiting_bytes(&a->state.adoption, i);
	}
}

/* next_waiter finds the first waiter after the cursor, moving on through the devices. */
static const struct waiter *next_waiter(struct status_cursor *cur, const struct svc *a)
{
	while (cur->device < a->state.ndevices) {
		const struct waiter *w;

		TAILQ_FOREACH (w, &a->state.devices[cur->device].queue.head, queue_link) {
			if (w->seq > cur->after)
				return w;
		}
		cur->device++;
		cur->after = 0;
	}
	return NULL;
}

/*
 * fill_head fills what only a reply's first part carries: the daemon, its devices, counters,
 * latest denials, limits, access refusals and what awaits re-declaration.
 */
static void fill_head(const struct server *s, Rocmmem__Wire__StatusReply *st,
		      Rocmmem__Wire__DaemonInfo *daemon, uint64_t now)
{
	const struct svc *a = &s->svc;

	report_daemon(daemon, s);
	st->daemon = daemon;
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		report_device(&part.devices[i], s, &a->state.devices[i], now);
		part.device_ptrs[i] = &part.devices[i].info;
	}
	st->n_devices = a->state.ndevices;
	st->devices = part.device_ptrs;
	report_counters(&part.counters, &a->counters);
	st->counters = &part.counters;
	denials_fill(&a->denials, &part.denials, &st->n_denials, &st->denials);
	quota_report(&part.limits, a);
	st->n_limits = LIMIT_COUNT;
	st->limits = part.limits.ptrs;
	rocmmem__wire__access_info__init(&part.access);
	part.access.has_peers_refused = part.access.has_requests_refused = true;
	part.access.peers_refused = a->counters.peers_refused;
	part.access.requests_refused = a->counters.requests_refused;
	st->access = &part.access;
	fill_awaiting(a, st);
}

/* next_stage moves the cursor to the start of stage. */
static void next_stage(struct status_cursor *cur, enum status_stage stage)
{
	cur->stage = stage;
	cur->device = 0;
	cur->after = 0;
}

/*
 * add_item adds the item after the cursor to st and moves the cursor past it; false when its
 * stage had no more (the cursor moved on to the next stage instead). *prev is the client last
 * added in this part: within a part the list cannot change, so it is walked; across parts,
 * the cursor seeks.
 */
static bool add_item(struct status_cursor *cur, const struct server *s,
		     Rocmmem__Wire__StatusReply *st, const struct client **prev, uint64_t now)
{
	const struct svc *a = &s->svc;

	if (cur->stage == STATUS_CLIENTS) {
		const struct client *next =
		    *prev ? TAILQ_NEXT(*prev, link) : server_next_client(s, cur->after);

		if (!next) {
			next_stage(cur, STATUS_LEASES);
			return false;
		}
		report_holder(&part.clients[st->n_clients], next->holder, now);
		/* Its books from the part's pool (send_part leaves room for them); the client
		 * before it in this part, when there is one, may be of the same process. */
		part.nbooks +=
		    report_books(&part.clients[st->n_clients], a, next->holder,
				 part.books + part.nbooks, part.book_ptrs + part.nbooks,
				 STATUS_PART_ITEMS - part.nbooks, *prev ? (*prev)->holder : NULL,
				 st->n_clients > 0 ? &part.clients[st->n_clients - 1] : NULL);
		part.client_ptrs[st->n_clients] = &part.clients[st->n_clients];
		st->n_clients++;
		cur->after = next->id;
		*prev = next;
	} else if (cur->stage == STATUS_LEASES) {
		const struct lease *l = lease_table_next(&a->state.leases, cur->after);

		if (!l) {
			next_stage(cur, STATUS_MODELS);
			return false;
		}
		fill_lease(&part.leases[st->n_leases], l, now);
		part.lease_ptrs[st->n_leases] = &part.leases[st->n_leases];
		st->n_leases++;
		cur->after = l->id;
	} else if (cur->stage == STATUS_MODELS) {
		uint64_t id;
		const struct model *m = idtable_next(&a->state.models, cur->after, &id);

		if (!m) {
			next_stage(cur, STATUS_QUEUE);
			return false;
		}
		report_model(&part.models[st->n_models], m, now);
		part.model_ptrs[st->n_models] = &part.models[st->n_models];
		st->n_models++;
		cur->after = id;
	} else {
		const struct waiter *w = next_waiter(cur, a);

		if (!w) {
			cur->stage = STATUS_IDLE;
			return false;
		}
		fill_waiter(&part.queue[st->n_queue], w, now);
		part.queue_ptrs[st->n_queue] = &part.queue[st->n_queue];
		st->n_queue++;
		cur->after = w->seq;
	}
	return true;
}

/* send_part fills one part from the cursor onwards and sends it. */
static void send_part(struct client *c, bool first)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__StatusReply st = ROCMMEM__WIRE__STATUS_REPLY__INIT;
	Rocmmem__Wire__DaemonInfo daemon;
	struct status_cursor *cur = &c->status;
	struct server *s = c->server;
	const struct client *prev = NULL;
	uint64_t now = uv_now(s->loop);
	unsigned items = 0;

	if (first)
		fill_head(s, &st, &daemon, now);
	st.clients = part.client_ptrs;
	st.leases = part.lease_ptrs;
	st.models = part.model_ptrs;
	st.queue = part.queue_ptrs;
	part.nbooks = 0;
	/* Books have a pool of their own, as large: a part ends early only when it could not take
	 * a client's books on every device (never with one device), so none is cut short. */
	while (items < STATUS_PART_ITEMS &&
	       part.nbooks + s->svc.state.ndevices <= STATUS_PART_ITEMS &&
	       cur->stage != STATUS_IDLE) {
		if (add_item(cur, s, &st, &prev, now))
			items++;
	}
	reply.has_id = true;
	reply.id = cur->request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.has_more = true;
	reply.more = cur->stage != STATUS_IDLE;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_STATUS;
	reply.status = &st;
	if (client_reply(c, &reply, NULL, 0) < 0)
		cur->stage = STATUS_IDLE;
}

void status_continue(struct client *c)
{
	while (c->status.stage != STATUS_IDLE && TAILQ_EMPTY(&c->outq) && !c->closing && !c->kicked)
		send_part(c, false);
}

void status_start(struct client *c, uint64_t request_id)
{
	if (c->status.stage != STATUS_IDLE) {
		client_reply_error(c, request_id, -EBUSY,
				   "a status reply to request %llu is still being sent",
				   (unsigned long long)c->status.request_id);
		return;
	}
	c->status.stage = STATUS_CLIENTS;
	c->status.request_id = request_id;
	c->status.after = 0;
	c->status.device = 0;
	send_part(c, true);
	status_continue(c);
}
