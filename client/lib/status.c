/* SPDX-License-Identifier: MIT */
/* status.c: collecting a (possibly multi-part) status reply into a snapshot with accessors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A daemon never needs this many parts; more means a broken peer, not a big table. */
#define STATUS_MAX_PARTS 65536

struct rocmmem_status {
	struct inmsg **parts; /* owns the strings the arrays below point into */
	size_t nparts;
	struct rocmmem_daemon_info daemon;
	struct rocmmem_device_info *devices;
	size_t ndevices;
	/* Per device: its processes (pointers into one array). */
	struct rocmmem_process_info *processes;
	size_t *process_first, *process_count;
	struct rocmmem_client_info *clients;
	size_t nclients;
	struct rocmmem_lease_info *leases;
	size_t nleases;
	struct rocmmem_model_info *models;
	size_t nmodels;
	struct rocmmem_waiter_info *waiters;
	size_t nwaiters;
	struct rocmmem_counters counters;
	struct rocmmem_denial_info *denials;
	size_t ndenials;
};

static const char *str(const char *s)
{
	return s ? s : "";
}

static Rocmmem__Wire__StatusReply *part(const rocmmem_status *st, size_t i)
{
	return conn_reply(st->parts[i])->status;
}

static void counters_from_wire(struct rocmmem_counters *o, const Rocmmem__Wire__Counters *k)
{
	o->grants = k->grants;
	o->denials = k->denials;
	o->timeouts = k->timeouts;
	o->evictions = k->evictions;
	o->revocations = k->revocations;
	o->trims = k->trims;
	o->bytes_trimmed = k->bytes_trimmed;
	o->releases = k->releases;
	o->reclaimed = k->reclaimed;
	o->failures = k->failures;
	o->connections = k->connections;
}

/* fill converts the wire parts into the public arrays. */
static int fill(rocmmem_status *st)
{
	size_t nd = 0, nc = 0, nl = 0, nm = 0, nw = 0, nx = 0;

	for (size_t i = 0; i < st->nparts; i++) {
		Rocmmem__Wire__StatusReply *p = part(st, i);

		nd += p->n_devices;
		nc += p->n_clients;
		nl += p->n_leases;
		nm += p->n_models;
		nw += p->n_queue;
		nx += p->n_denials;
		if (p->counters)
			counters_from_wire(&st->counters, p->counters);
		if (p->daemon) {
			Rocmmem__Wire__DaemonInfo *d = p->daemon;

			st->daemon.version = str(d->version);
			st->daemon.pid = d->pid;
			st->daemon.uptime_s = d->uptime_s;
			st->daemon.backend = str(d->backend);
			st->daemon.protocol_version = d->protocol_version;
		}
	}
	size_t np = 0;

	for (size_t i = 0; i < st->nparts; i++)
		for (size_t j = 0; j < part(st, i)->n_devices; j++)
			np += part(st, i)->devices[j]->n_processes;
	st->processes = calloc(np ? np : 1, sizeof(*st->processes));
	st->process_first = calloc(nd ? nd : 1, sizeof(size_t));
	st->process_count = calloc(nd ? nd : 1, sizeof(size_t));
	if (!st->processes || !st->process_first || !st->process_count)
		return error_set(-ENOMEM, "out of memory");
	np = 0;
	st->devices = calloc(nd ? nd : 1, sizeof(*st->devices));
	st->clients = calloc(nc ? nc : 1, sizeof(*st->clients));
	st->leases = calloc(nl ? nl : 1, sizeof(*st->leases));
	st->models = calloc(nm ? nm : 1, sizeof(*st->models));
	st->waiters = calloc(nw ? nw : 1, sizeof(*st->waiters));
	st->denials = calloc(nx ? nx : 1, sizeof(*st->denials));
	if (!st->devices || !st->clients || !st->leases || !st->models || !st->waiters ||
	    !st->denials)
		return error_set(-ENOMEM, "out of memory");
	for (size_t i = 0; i < st->nparts; i++) {
		Rocmmem__Wire__StatusReply *p = part(st, i);

		for (size_t j = 0; j < p->n_devices; j++) {
			Rocmmem__Wire__DeviceInfo *d = p->devices[j];
			struct rocmmem_device_info *o = &st->devices[st->ndevices];

			st->process_first[st->ndevices] = np;
			st->process_count[st->ndevices] = d->n_processes;
			for (size_t k = 0; k < d->n_processes; k++) {
				st->processes[np].pid = d->processes[k]->pid;
				st->processes[np].vram_bytes = d->processes[k]->vram_bytes;
				st->processes[np].client = d->processes[k]->client;
				np++;
			}
			st->ndevices++;

			o->index = d->index;
			o->name = str(d->name);
			o->backend = str(d->backend);
			o->total_bytes = d->total_bytes;
			o->budget_bytes = d->budget_bytes;
			o->headroom_bytes = d->headroom_bytes;
			o->leased_bytes = d->leased_bytes;
			o->reserved_bytes = d->reserved_bytes;
			o->free_bytes = d->free_bytes;
			o->granule_bytes = d->granule_bytes;
			o->waiters = d->waiters;
			o->leases = d->leases;
			o->handle_kind = (enum rocmmem_handle_kind)d->handle_kind;
			o->pci_bus_id = str(d->pci_bus_id);
			o->integrated = d->integrated;
			o->sharing = str(d->sharing);
			o->state = d->state ? d->state : "ok";
			o->telemetry_source = "";
			o->largest_grantable = d->largest_grantable;
			o->evictable_bytes = d->evictable_bytes;
			o->largest_with_eviction = d->largest_with_eviction;
			o->oldest_wait_ms = d->oldest_wait_ms;
			o->models_resident = d->models_resident;
			if (d->has_runtime_total_bytes && d->has_runtime_free_bytes) {
				o->valid |= ROCMMEM_DEVICE_HAS_RUNTIME;
				o->runtime_total_bytes = d->runtime_total_bytes;
				o->runtime_free_bytes = d->runtime_free_bytes;
				o->external_bytes = d->external_bytes;
			}
			if (d->telemetry) {
				Rocmmem__Wire__DeviceTelemetry *t = d->telemetry;

				o->telemetry_source = str(t->source);
				if (t->has_vram_total_bytes && t->has_vram_used_bytes) {
					o->valid |= ROCMMEM_DEVICE_HAS_VRAM;
					o->vram_total_bytes = t->vram_total_bytes;
					o->vram_used_bytes = t->vram_used_bytes;
				}
				if (t->has_gtt_total_bytes && t->has_gtt_used_bytes) {
					o->valid |= ROCMMEM_DEVICE_HAS_GTT;
					o->gtt_total_bytes = t->gtt_total_bytes;
					o->gtt_used_bytes = t->gtt_used_bytes;
				}
				if (t->has_temperature_mc) {
					o->valid |= ROCMMEM_DEVICE_HAS_TEMPERATURE;
					o->temperature_mc = t->temperature_mc;
				}
				if (t->has_power_mw) {
					o->valid |= ROCMMEM_DEVICE_HAS_POWER;
					o->power_mw = t->power_mw;
				}
				if (t->has_busy_percent) {
					o->valid |= ROCMMEM_DEVICE_HAS_BUSY;
					o->busy_percent = t->busy_percent;
				}
			}
		}
		for (size_t j = 0; j < p->n_clients; j++) {
			Rocmmem__Wire__ClientInfo *d = p->clients[j];
			struct rocmmem_client_info *o = &st->clients[st->nclients++];

			o->pid = d->pid;
			o->uid = d->uid;
			o->gid = d->gid;
			o->name = str(d->name);
			o->leases = d->leases;
			o->leased_bytes = d->leased_bytes;
			o->connected_s = d->connected_s;
			o->client_id = d->client_id;
			o->models = d->models;
			o->reserved_bytes = d->reserved_bytes;
			o->waiting = d->waiting;
		}
		for (size_t j = 0; j < p->n_leases; j++) {
			Rocmmem__Wire__LeaseInfo *d = p->leases[j];
			struct rocmmem_lease_info *o = &st->leases[st->nleases++];

			o->id = d->id;
			o->owner_pid = d->owner_pid;
			o->device = d->device;
			o->bytes = d->bytes;
			o->tag = str(d->tag);
			o->age_ms = d->age_ms;
			o->model_id = d->model_id;
		}
		for (size_t j = 0; j < p->n_models; j++) {
			Rocmmem__Wire__ModelInfo *d = p->models[j];
			struct rocmmem_model_info *o = &st->models[st->nmodels++];

			o->id = d->id;
			o->name = str(d->name);
			o->model_class = (enum rocmmem_model_class)d->class_;
			o->owner_pid = d->owner_pid;
			o->device = d->device;
			o->bytes = d->bytes;
			o->state = (enum rocmmem_model_state)d->state;
			o->priority = d->priority;
			o->pinned = d->pinned;
			o->size = d->size;
			o->reservation_bytes = d->reservation_bytes;
			o->lease_bytes = d->lease_bytes;
			o->idle_ms = d->idle_ms;
			o->use_count = d->use_count;
			o->evictions = d->evictions;
		}
		for (size_t j = 0; j < p->n_queue; j++) {
			Rocmmem__Wire__WaiterInfo *d = p->queue[j];
			struct rocmmem_waiter_info *o = &st->waiters[st->nwaiters++];

			o->owner_pid = d->owner_pid;
			o->device = d->device;
			o->bytes = d->bytes;
			o->waited_ms = d->waited_ms;
			o->timeout_ms = d->timeout_ms;
			o->tag = str(d->tag);
			o->model_id = d->model_id;
		}
		for (size_t j = 0; j < p->n_denials; j++) {
			Rocmmem__Wire__Denial *d = p->denials[j];
			struct rocmmem_denial_info *o = &st->denials[st->ndenials++];

			o->timestamp_ms = d->timestamp_ms;
			o->pid = d->pid;
			o->client_name = str(d->client_name);
			o->device = d->device;
			o->bytes = d->bytes;
			o->model_id = d->model_id;
			o->model_name = str(d->model_name);
			o->error = d->error;
			o->reason = str(d->reason);
		}
	}
	return 0;
}

ROCMMEM_EXPORT void rocmmem_status_free(rocmmem_status *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->nparts; i++)
		inmsg_free(st->parts[i]);
	free(st->parts);
	free(st->devices);
	free(st->processes);
	free(st->process_first);
	free(st->process_count);
	free(st->clients);
	free(st->leases);
	free(st->models);
	free(st->waiters);
	free(st->denials);
	free(st);
}

ROCMMEM_EXPORT int rocmmem_status_get(rocmmem_client *c, rocmmem_status **out)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest req = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	rocmmem_status *st;
	size_t cap = 0;
	int err;

	if (!c || !out)
		return error_set(-EINVAL, "rocmmem_status_get needs a client and an out pointer");
	*out = NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return error_set(-ENOMEM, "out of memory");
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &req;
	msg.has_id = true;
	msg.id = conn_next_id(c);
	err = conn_send(c, &msg);
	for (bool more = true; !err && more;) {
		struct inmsg *m;
		Rocmmem__Wire__Reply *r;

		err = conn_wait(c, msg.id, CONN_REPLY_GRACE_MS, &m);
		if (err)
			break;
		r = conn_reply(m);
		if (r->has_error && r->error != 0) {
			err = error_from_reply(r);
			inmsg_free(m);
			break;
		}
		if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_STATUS ||
		    st->nparts >= STATUS_MAX_PARTS) {
			err = error_set(-EPROTO, "the daemon's status reply is malformed");
			inmsg_free(m);
			break;
		}
		if (st->nparts == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct inmsg **p = realloc(st->parts, ncap * sizeof(*p));

			if (!p) {
				err = error_set(-ENOMEM, "out of memory");
				inmsg_free(m);
				break;
			}
			st->parts = p;
			cap = ncap;
		}
		st->parts[st->nparts++] = m;
		more = r->has_more && r->more;
	}
	if (!err)
		err = fill(st);
	if (err) {
		rocmmem_status_free(st);
		return err;
	}
	*out = st;
	return 0;
}

ROCMMEM_EXPORT const struct rocmmem_daemon_info *rocmmem_status_daemon(const rocmmem_status *st)
{
	return &st->daemon;
}

#define ACCESSORS(kind, field, count)                                                 \
	ROCMMEM_EXPORT size_t rocmmem_status_##kind##_count(const rocmmem_status *st) \
	{                                                                             \
		return st->count;                                                     \
	}                                                                             \
	ROCMMEM_EXPORT const struct rocmmem_##kind##_info *rocmmem_status_##kind(     \
	    const rocmmem_status *st, size_t index)                                   \
	{                                                                             \
		return index < st->count ? &st->field[index] : NULL;                  \
	}

ACCESSORS(device, devices, ndevices)
ACCESSORS(client, clients, nclients)
ACCESSORS(lease, leases, nleases)
ACCESSORS(model, models, nmodels)
ACCESSORS(waiter, waiters, nwaiters)
ACCESSORS(denial, denials, ndenials)

ROCMMEM_EXPORT const struct rocmmem_counters *rocmmem_status_counters(const rocmmem_status *st)
{
	return &st->counters;
}

ROCMMEM_EXPORT size_t rocmmem_status_process_count(const rocmmem_status *st, size_t device_index)
{
	return device_index < st->ndevices ? st->process_count[device_index] : 0;
}

ROCMMEM_EXPORT const struct rocmmem_process_info *
rocmmem_status_process(const rocmmem_status *st, size_t device_index, size_t index)
{
	if (device_index >= st->ndevices || index >= st->process_count[device_index])
		return NULL;
	return &st->processes[st->process_first[device_index] + index];
}
