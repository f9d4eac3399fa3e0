/* SPDX-License-Identifier: MIT */
/* status.c: the status reply, built part by part as the requester's socket drains. */
#include "status.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "residency.h"
#include "server.h"

/*
 * Items per part. The largest item packs to about 150 bytes (a 64-byte name plus varints),
 * so a part stays well under WIRE_MAX_FRAME.
 */
#define STATUS_PART_ITEMS 256

/* Scratch space for one part; the loop is single-threaded and parts are sent at once. */
static struct {
	Rocmmem__Wire__DeviceInfo devices[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__DeviceInfo *device_ptrs[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__DeviceTelemetry telemetry[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__DeviceProcess processes[BACKEND_MAX_DEVICES][TELEMETRY_MAX_PROCESSES];
	Rocmmem__Wire__DeviceProcess *process_ptrs[BACKEND_MAX_DEVICES][TELEMETRY_MAX_PROCESSES];
	Rocmmem__Wire__ClientInfo clients[STATUS_PART_ITEMS];
	Rocmmem__Wire__ClientInfo *client_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__LeaseInfo leases[STATUS_PART_ITEMS];
	Rocmmem__Wire__LeaseInfo *lease_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__ModelInfo models[STATUS_PART_ITEMS];
	Rocmmem__Wire__ModelInfo *model_ptrs[STATUS_PART_ITEMS];
	Rocmmem__Wire__WaiterInfo queue[STATUS_PART_ITEMS];
	Rocmmem__Wire__WaiterInfo *queue_ptrs[STATUS_PART_ITEMS];
} part;

static void fill_daemon(Rocmmem__Wire__DaemonInfo *info, const struct server *s)
{
	rocmmem__wire__daemon_info__init(info);
	info->version = (char *)ROCMMEM_VERSION_STRING;
	info->has_pid = true;
	info->pid = (int32_t)getpid();
	info->has_uptime_s = true;
	info->uptime_s = server_uptime_ms(s) / 1000;
	info->backend = (char *)backend_name(s->arbiter.backend);
	info->has_protocol_version = true;
	info->protocol_version = ROCMMEM_PROTOCOL_VERSION;
}

static void fill_telemetry(Rocmmem__Wire__DeviceTelemetry *o, const struct device *d, uint64_t now)
{
	const struct telemetry_sample *t = &d->telemetry;

	rocmmem__wire__device_telemetry__init(o);
	o->source = (char *)(t->source ? t->source : "");
	o->has_sampled_ms_ago = true;
	o->sampled_ms_ago = now - d->telemetry_ms;
	if (t->valid & TELEMETRY_HAS_VRAM) {
		o->has_vram_total_bytes = o->has_vram_used_bytes = true;
		o->vram_total_bytes = t->vram_total;
		o->vram_used_bytes = t->vram_used;
	}
	if (t->valid & TELEMETRY_HAS_GTT) {
		o->has_gtt_total_bytes = o->has_gtt_used_bytes = true;
		o->gtt_total_bytes = t->gtt_total;
		o->gtt_used_bytes = t->gtt_used;
	}
	if (t->valid & TELEMETRY_HAS_TEMPERATURE) {
		o->has_temperature_mc = true;
		o->temperature_mc = t->temperature_mc;
	}
	if (t->valid & TELEMETRY_HAS_POWER) {
		o->has_power_mw = true;
		o->power_mw = t->power_mw;
	}
	if (t->valid & TELEMETRY_HAS_BUSY) {
		o->has_busy_percent = true;
		o->busy_percent = t->busy_percent;
	}
	if (t->valid & TELEMETRY_HAS_MEM_BUSY) {
		o->has_mem_busy_percent = true;
		o->mem_busy_percent = t->mem_busy_percent;
	}
}

/* is_client says whether pid has a connection to the daemon. */
static bool is_client(const struct server *s, int32_t pid)
{
	const struct client *c;

	TAILQ_FOREACH (c, &s->clients, link) {
		if ((int32_t)c->pid == pid)
			return true;
	}
	return false;
}

static void fill_processes(Rocmmem__Wire__DeviceInfo *o, unsigned index, const struct device *d,
			   const struct server *s)
{
	const struct telemetry_sample *t = &d->telemetry;
	unsigned n = 0;

	if (!(t->valid & TELEMETRY_HAS_PROCESSES))
		return;
	for (unsigned j = 0; j < t->nprocesses && j < TELEMETRY_MAX_PROCESSES; j++) {
		Rocmmem__Wire__DeviceProcess *p = &part.processes[index][n];

		rocmmem__wire__device_process__init(p);
		p->has_pid = true;
		p->pid = t->processes[j].pid;
		p->has_vram_bytes = true;
		p->vram_bytes = t->processes[j].vram_bytes;
		p->has_client = true;
		p->client = is_client(s, p->pid);
		part.process_ptrs[index][n++] = p;
	}
	o->n_processes = n;
	o->processes = part.process_ptrs[index];
}

static void fill_devices(Rocmmem__Wire__StatusReply *st, const struct server *s, uint64_t now)
{
	const struct arbiter *a = &s->arbiter;

	for (unsigned i = 0; i < a->ndevices; i++) {
		const struct device *d = &a->devices[i];
		Rocmmem__Wire__DeviceInfo *o = &part.devices[i];

		rocmmem__wire__device_info__init(o);
		o->has_index = true;
		o->index = d->index;
		o->name = (char *)d->name;
		o->backend = (char *)backend_name(a->backend);
		o->has_total_bytes = true;
		o->total_bytes = d->total;
		o->has_budget_bytes = true;
		o->budget_bytes = d->budget;
		o->has_headroom_bytes = true;
		o->headroom_bytes = d->headroom;
		o->has_leased_bytes = true;
		o->leased_bytes = d->leased;
		o->has_reserved_bytes = true;
		o->reserved_bytes = d->reserved;
		o->has_free_bytes = true;
		o->free_bytes = device_free(d);
		o->has_granule_bytes = true;
		o->granule_bytes = d->granule;
		o->has_waiters = true;
		o->waiters = d->queue.count;
		o->has_handle_kind = true;
		o->handle_kind = (Rocmmem__Wire__HandleKind)d->handle_kind;
		o->has_leases = true;
		o->leases = d->leases;
		if (d->pci_bus_id[0])
			o->pci_bus_id = (char *)d->pci_bus_id;
		o->has_integrated = true;
		o->integrated = d->integrated;
		o->sharing = (char *)backend_sharing_name(d->handle_kind);
		if (d->has_meminfo) {
			o->has_runtime_total_bytes = true;
			o->runtime_total_bytes = d->runtime_total;
			o->has_runtime_free_bytes = true;
			o->runtime_free_bytes = d->runtime_free;
			o->has_external_bytes = true;
			o->external_bytes = device_external(d);
		}
		o->state = d->lost ? (char *)d->lost_reason : (char *)"ok";
		if (d->has_telemetry)
			fill_telemetry(&part.telemetry[i], d, now);
		o->telemetry = d->has_telemetry ? &part.telemetry[i] : NULL;
		if (d->has_telemetry)
			fill_processes(o, i, d, s);
		part.device_ptrs[i] = o;
	}
	st->n_devices = a->ndevices;
	st->devices = part.device_ptrs;
}

static void fill_client(Rocmmem__Wire__ClientInfo *o, const struct client *c, uint64_t now)
{
	rocmmem__wire__client_info__init(o);
	o->has_pid = true;
	o->pid = (int32_t)c->pid;
	o->has_uid = true;
	o->uid = (uint32_t)c->uid;
	o->has_gid = true;
	o->gid = (uint32_t)c->gid;
	o->name = (char *)c->name;
	o->has_leases = true;
	o->leases = c->lease_count;
	o->has_leased_bytes = true;
	o->leased_bytes = c->leased_bytes;
	o->has_connected_s = true;
	o->connected_s = (now - c->connected_ms) / 1000;
	o->has_client_id = true;
	o->client_id = c->id;
}

static void fill_lease(Rocmmem__Wire__LeaseInfo *o, const struct lease *l, uint64_t now)
{
	rocmmem__wire__lease_info__init(o);
	o->has_id = true;
	o->id = l->id;
	o->has_owner_pid = true;
	o->owner_pid = (int32_t)l->owner->pid;
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
	o->owner_pid = (int32_t)w->client->pid;
	o->has_device = true;
	o->device = w->device;
	o->has_bytes = true;
	o->bytes = residency_need(w);
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

static void fill_model(Rocmmem__Wire__ModelInfo *o, const struct model *m, uint64_t now)
{
	rocmmem__wire__model_info__init(o);
	o->has_id = true;
	o->id = m->id;
	o->name = (char *)m->name;
	o->has_class_ = true;
	o->class_ = (Rocmmem__Wire__ModelClass)m->model_class;
	o->has_owner_pid = true;
	o->owner_pid = (int32_t)m->owner->pid;
	o->has_device = true;
	o->device = m->device;
	o->has_bytes = true;
	o->bytes = model_resident(m);
	o->has_state = true;
	switch (model_state(m)) {
	case MODEL_EVICTED:
		o->state = m->waiters ? ROCMMEM__WIRE__MODEL_STATE__MODEL_STATE_WAITING
				      : ROCMMEM__WIRE__MODEL_STATE__MODEL_STATE_EVICTED;
		break;
	case MODEL_IDLE:
		o->state = ROCMMEM__WIRE__MODEL_STATE__MODEL_STATE_IDLE;
		break;
	case MODEL_IN_USE:
		o->state = ROCMMEM__WIRE__MODEL_STATE__MODEL_STATE_IN_USE;
		break;
	case MODEL_EVICTING:
		o->state = ROCMMEM__WIRE__MODEL_STATE__MODEL_STATE_EVICTING;
		break;
	}
	o->has_priority = true;
	o->priority = m->priority;
	o->has_pinned = true;
	o->pinned = m->pinned;
	o->has_size = true;
	o->size = m->size;
	o->has_reservation_bytes = true;
	o->reservation_bytes = m->reservation;
	o->has_lease_bytes = true;
	o->lease_bytes = m->lease_bytes;
	o->has_idle_ms = true;
	o->idle_ms = m->use_count ? 0 : now - m->last_used_ms;
	o->has_use_count = true;
	o->use_count = m->use_count;
	o->has_evictions = true;
	o->evictions = m->evictions;
}

/* next_waiter finds the first waiter after the cursor, moving on through the devices. */
static const struct waiter *next_waiter(struct status_cursor *cur, const struct arbiter *a)
{
	while (cur->device < a->ndevices) {
		const struct waiter *w;

		TAILQ_FOREACH (w, &a->devices[cur->device].queue.head, queue_link) {
			if (w->seq > cur->after)
				return w;
		}
		cur->device++;
		cur->after = 0;
	}
	return NULL;
}

/* send_part fills one part from the cursor onwards and sends it. */
static void send_part(struct client *c, bool first)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__StatusReply st = ROCMMEM__WIRE__STATUS_REPLY__INIT;
	Rocmmem__Wire__DaemonInfo daemon;
	struct status_cursor *cur = &c->status;
	struct server *s = c->server;
	struct arbiter *a = &s->arbiter;
	const struct client *prev = NULL;
	uint64_t now = uv_now(s->loop);
	unsigned items = 0;

	if (first) {
		fill_daemon(&daemon, s);
		st.daemon = &daemon;
		fill_devices(&st, s, now);
	}
	st.clients = part.client_ptrs;
	st.leases = part.lease_ptrs;
	st.models = part.model_ptrs;
	st.queue = part.queue_ptrs;
	while (items < STATUS_PART_ITEMS && cur->stage != STATUS_IDLE) {
		if (cur->stage == STATUS_CLIENTS) {
			/* Within a part the list cannot change, so walk it; across parts, seek. */
			const struct client *next =
			    prev ? TAILQ_NEXT(prev, link) : server_next_client(s, cur->after);

			if (!next) {
				cur->stage = STATUS_LEASES;
				cur->after = 0;
				continue;
			}
			fill_client(&part.clients[st.n_clients], next, now);
			part.client_ptrs[st.n_clients] = &part.clients[st.n_clients];
			st.n_clients++;
			cur->after = next->id;
			prev = next;
		} else if (cur->stage == STATUS_LEASES) {
			const struct lease *l = lease_table_next(&a->leases, cur->after);

			if (!l) {
				cur->stage = STATUS_MODELS;
				cur->after = 0;
				continue;
			}
			fill_lease(&part.leases[st.n_leases], l, now);
			part.lease_ptrs[st.n_leases] = &part.leases[st.n_leases];
			st.n_leases++;
			cur->after = l->id;
		} else if (cur->stage == STATUS_MODELS) {
			uint64_t id;
			const struct model *m = idtable_next(&a->models, cur->after, &id);

			if (!m) {
				cur->stage = STATUS_QUEUE;
				cur->device = 0;
				cur->after = 0;
				continue;
			}
			fill_model(&part.models[st.n_models], m, now);
			part.model_ptrs[st.n_models] = &part.models[st.n_models];
			st.n_models++;
			cur->after = id;
		} else {
			const struct waiter *w = next_waiter(cur, a);

			if (!w) {
				cur->stage = STATUS_IDLE;
				break;
			}
			fill_waiter(&part.queue[st.n_queue], w, now);
			part.queue_ptrs[st.n_queue] = &part.queue[st.n_queue];
			st.n_queue++;
			cur->after = w->seq;
		}
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
