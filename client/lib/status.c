/* SPDX-License-Identifier: MIT */
/* status.c: a status reply (of one or more parts) or a telemetry sample, behind accessors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A daemon never needs this many parts; more means a broken peer, not a big table. */
#define STATUS_MAX_PARTS 65536

/*
 * A snapshot: the parts of a status reply, or one telemetry sample (borrowed: the delivery
 * that made it frees the message), converted into the public structs.
 */
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
	struct rocmmem_limit_info *limits;
	size_t nlimits;
	struct rocmmem_awaiting_info *awaiting;
	size_t nawaiting;
	struct rocmmem_access_info access;
};

/* The lists one wire message contributes: a status part, or a sample. */
struct status_lists {
	Rocmmem__Wire__DeviceInfo **devices;
	size_t n_devices;
	Rocmmem__Wire__ClientInfo **clients;
	size_t n_clients;
	Rocmmem__Wire__LeaseInfo **leases;
	size_t n_leases;
	Rocmmem__Wire__ModelInfo **models;
	size_t n_models;
	Rocmmem__Wire__WaiterInfo **queue;
	size_t n_queue;
	Rocmmem__Wire__Denial **denials;
	size_t n_denials;
	Rocmmem__Wire__LimitInfo **limits;
	size_t n_limits;
	Rocmmem__Wire__AwaitingRedeclare **awaiting;
	size_t n_awaiting;
	const Rocmmem__Wire__AccessInfo *access;
	const Rocmmem__Wire__Counters *counters;
	const Rocmmem__Wire__DaemonInfo *daemon;
};

static const char *str(const char *s)
{
	return s ? s : "";
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

static void telemetry_from_wire(struct rocmmem_device_info *o,
				const Rocmmem__Wire__DeviceTelemetry *t)
{
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

static void device_from_wire(struct rocmmem_device_info *o, const Rocmmem__Wire__DeviceInfo *d)
{
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
	o->awaiting_redeclare_bytes = d->awaiting_redeclare_bytes;
	if (d->has_runtime_total_bytes && d->has_runtime_free_bytes) {
		o->valid |= ROCMMEM_DEVICE_HAS_RUNTIME;
		o->runtime_total_bytes = d->runtime_total_bytes;
		o->runtime_free_bytes = d->runtime_free_bytes;
		o->external_bytes = d->external_bytes;
	}
	if (d->telemetry)
		telemetry_from_wire(o, d->telemetry);
}

static void client_from_wire(struct rocmmem_client_info *o, const Rocmmem__Wire__ClientInfo *d)
{
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
	o->pidfd = d->pidfd;
}

static void lease_from_wire(struct rocmmem_lease_info *o, const Rocmmem__Wire__LeaseInfo *d)
{
	o->id = d->id;
	o->owner_pid = d->owner_pid;
	o->device = d->device;
	o->bytes = d->bytes;
	o->tag = str(d->tag);
	o->age_ms = d->age_ms;
	o->model_id = d->model_id;
}

static void model_from_wire(struct rocmmem_model_info *o, const Rocmmem__Wire__ModelInfo *d)
{
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

static void waiter_from_wire(struct rocmmem_waiter_info *o, const Rocmmem__Wire__WaiterInfo *d)
{
	o->owner_pid = d->owner_pid;
	o->device = d->device;
	o->bytes = d->bytes;
	o->waited_ms = d->waited_ms;
	o->timeout_ms = d->timeout_ms;
	o->tag = str(d->tag);
	o->model_id = d->model_id;
}

static void denial_from_wire(struct rocmmem_denial_info *o, const Rocmmem__Wire__Denial *d)
{
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

static void limit_from_wire(struct rocmmem_limit_info *o, const Rocmmem__Wire__LimitInfo *d)
{
	o->name = str(d->name);
	o->value = d->value;
	o->unlimited = d->unlimited;
	o->hits = d->hits;
}

static void awaiting_from_wire(struct rocmmem_awaiting_info *o,
			       const Rocmmem__Wire__AwaitingRedeclare *d)
{
	o->device = d->device;
	o->pid = d->pid;
	o->uid = d->uid;
	o->leases = d->leases;
	o->lease_bytes = d->lease_bytes;
	o->models = d->models;
	o->reserved_bytes = d->reserved_bytes;
	o->grace_left_ms = d->grace_left_ms;
}

/* fill converts the lists of every part into the public arrays. */
static int fill(rocmmem_status *st, const struct status_lists *lists, size_t n)
{
	size_t nd = 0, nc = 0, nl = 0, nm = 0, nw = 0, nx = 0, np = 0, nt = 0, na = 0;

	for (size_t i = 0; i < n; i++) {
		const struct status_lists *p = &lists[i];

		nd += p->n_devices;
		nc += p->n_clients;
		nl += p->n_leases;
		nm += p->n_models;
		nw += p->n_queue;
		nx += p->n_denials;
		nt += p->n_limits;
		na += p->n_awaiting;
		if (p->access) {
			st->access.peers_refused = p->access->peers_refused;
			st->access.requests_refused = p->access->requests_refused;
		}
		for (size_t j = 0; j < p->n_devices; j++)
			np += p->devices[j]->n_processes;
		if (p->counters)
			counters_from_wire(&st->counters, p->counters);
		if (p->daemon) {
			st->daemon.version = str(p->daemon->version);
			st->daemon.pid = p->daemon->pid;
			st->daemon.uptime_s = p->daemon->uptime_s;
			st->daemon.backend = str(p->daemon->backend);
			st->daemon.protocol_version = p->daemon->protocol_version;
			st->daemon.host_fallback = p->daemon->host_fallback;
			st->daemon.host_fallback_reason = str(p->daemon->host_fallback_reason);
			st->daemon.heap_bytes = p->daemon->heap_bytes;
		}
	}
	st->processes = calloc(np ? np : 1, sizeof(*st->processes));
	st->process_first = calloc(nd ? nd : 1, sizeof(size_t));
	st->process_count = calloc(nd ? nd : 1, sizeof(size_t));
	st->devices = calloc(nd ? nd : 1, sizeof(*st->devices));
	st->clients = calloc(nc ? nc : 1, sizeof(*st->clients));
	st->leases = calloc(nl ? nl : 1, sizeof(*st->leases));
	st->models = calloc(nm ? nm : 1, sizeof(*st->models));
	st->waiters = calloc(nw ? nw : 1, sizeof(*st->waiters));
	st->denials = calloc(nx ? nx : 1, sizeof(*st->denials));
	st->limits = calloc(nt ? nt : 1, sizeof(*st->limits));
	st->awaiting = calloc(na ? na : 1, sizeof(*st->awaiting));
	if (!st->processes || !st->process_first || !st->process_count || !st->devices ||
	    !st->clients || !st->leases || !st->models || !st->waiters || !st->denials ||
	    !st->limits || !st->awaiting)
		return error_set(-ENOMEM, "out of memory");
	np = 0;
	for (size_t i = 0; i < n; i++) {
		const struct status_lists *p = &lists[i];

		for (size_t j = 0; j < p->n_devices; j++) {
			const Rocmmem__Wire__DeviceInfo *d = p->devices[j];

			st->process_first[st->ndevices] = np;
			st->process_count[st->ndevices] = d->n_processes;
			for (size_t k = 0; k < d->n_processes; k++) {
				st->processes[np].pid = d->processes[k]->pid;
				st->processes[np].vram_bytes = d->processes[k]->vram_bytes;
				st->processes[np].client = d->processes[k]->client;
				np++;
			}
			device_from_wire(&st->devices[st->ndevices++], d);
		}
		for (size_t j = 0; j < p->n_clients; j++)
			client_from_wire(&st->clients[st->nclients++], p->clients[j]);
		for (size_t j = 0; j < p->n_leases; j++)
			lease_from_wire(&st->leases[st->nleases++], p->leases[j]);
		for (size_t j = 0; j < p->n_models; j++)
			model_from_wire(&st->models[st->nmodels++], p->models[j]);
		for (size_t j = 0; j < p->n_queue; j++)
			waiter_from_wire(&st->waiters[st->nwaiters++], p->queue[j]);
		for (size_t j = 0; j < p->n_denials; j++)
			denial_from_wire(&st->denials[st->ndenials++], p->denials[j]);
		for (size_t j = 0; j < p->n_limits; j++)
			limit_from_wire(&st->limits[st->nlimits++], p->limits[j]);
		for (size_t j = 0; j < p->n_awaiting; j++)
			awaiting_from_wire(&st->awaiting[st->nawaiting++], p->awaiting[j]);
	}
	return 0;
}

/* fill_parts converts the parts of a status reply. */
static int fill_parts(rocmmem_status *st)
{
	struct status_lists *lists = calloc(st->nparts ? st->nparts : 1, sizeof(*lists));
	int err;

	if (!lists)
		return error_set(-ENOMEM, "out of memory");
	for (size_t i = 0; i < st->nparts; i++) {
		const Rocmmem__Wire__StatusReply *p = conn_reply(st->parts[i])->status;

		lists[i] = (struct status_lists){
		    .devices = p->devices,
		    .n_devices = p->n_devices,
		    .clients = p->clients,
		    .n_clients = p->n_clients,
		    .leases = p->leases,
		    .n_leases = p->n_leases,
		    .models = p->models,
		    .n_models = p->n_models,
		    .queue = p->queue,
		    .n_queue = p->n_queue,
		    .denials = p->denials,
		    .n_denials = p->n_denials,
		    .limits = p->limits,
		    .n_limits = p->n_limits,
		    .awaiting = p->awaiting_redeclare,
		    .n_awaiting = p->n_awaiting_redeclare,
		    .access = p->access,
		    .counters = p->counters,
		    .daemon = p->daemon,
		};
	}
	err = fill(st, lists, st->nparts);
	free(lists);
	return err;
}

int status_from_sample(const rocmmem_client *c, const Rocmmem__Wire__TelemetrySample *sample,
		       rocmmem_status **out)
{
	const struct status_lists lists = {
	    .devices = sample->devices,
	    .n_devices = sample->n_devices,
	    .clients = sample->clients,
	    .n_clients = sample->n_clients,
	    .models = sample->models,
	    .n_models = sample->n_models,
	    .counters = sample->counters,
	};
	rocmmem_status *st = calloc(1, sizeof(*st));
	int err;

	*out = NULL;
	if (!st)
		return error_set(-ENOMEM, "out of memory");
	st->daemon.version = str(c->daemon_version);
	st->daemon.pid = (int32_t)c->daemon_pid;
	st->daemon.uptime_s = sample->uptime_ms / 1000;
	st->daemon.backend = str(c->backend);
	st->daemon.protocol_version = ROCMMEM_PROTOCOL_VERSION_1;
	st->daemon.host_fallback_reason = "";
	err = fill(st, &lists, 1);
	if (err) {
		rocmmem_status_free(st);
		return err;
	}
	*out = st;
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
	free(st->limits);
	free(st->awaiting);
	free(st);
}

static int status_request(rocmmem_client *c, rocmmem_status *st, Rocmmem__Wire__ClientMessage *msg,
			  size_t *capp);

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
	err = status_request(c, st, &msg, &cap);
	if (!err)
		err = fill_parts(st);
	if (err) {
		rocmmem_status_free(st);
		return err;
	}
	*out = st;
	return 0;
}

/*
 * status_request asks for the status and collects its parts into st. A daemon that goes away
 * mid-stream is asked again once the library has reconnected (within the usual grace).
 */
static int status_request(rocmmem_client *c, rocmmem_status *st, Rocmmem__Wire__ClientMessage *msg,
			  size_t *capp)
{
	uint64_t start = conn_now_ms(), gen = 0;
	size_t cap = *capp;
	int err;

again:
	msg->has_id = true;
	msg->id = conn_next_id(c);
	err = conn_send_gen(c, msg, &gen);
	for (bool more = true; !err && more;) {
		struct inmsg *m;
		Rocmmem__Wire__Reply *r;

		err = conn_wait_gen(c, msg->id, gen, CONN_REPLY_GRACE_MS, &m);
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
	*capp = cap;
	if (err != CONN_LOST)
		return err;
	while (st->nparts > 0)
		inmsg_free(st->parts[--st->nparts]);
	pthread_mutex_lock(&c->lock);
	err = conn_await(c, (c->flags & ROCMMEM_CONNECT_NO_WAIT)
				? (int64_t)start
				: (int64_t)(start + CONN_REPLY_GRACE_MS));
	pthread_mutex_unlock(&c->lock);
	if (err)
		return err;
	goto again;
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
ACCESSORS(limit, limits, nlimits)
ACCESSORS(awaiting, awaiting, nawaiting)

ROCMMEM_EXPORT const struct rocmmem_access_info *rocmmem_status_access(const rocmmem_status *st)
{
	return &st->access;
}

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
