/* SPDX-License-Identifier: MIT */
/* view_status.c: a status reply (of one or more parts) or a telemetry sample, behind accessors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "view.h"

/*
 * A snapshot: the parts of a status reply, or one telemetry sample (borrowed: the delivery
 * that made it frees the message), converted into the public structs.
 */
struct rocmmem_status {
	Rocmmem__Wire__ServerMessage **parts; /* own the strings the arrays below point into */
	size_t nparts;
	struct rocmmem_daemon_info daemon;
	struct rocmmem_device_info *devices;
	size_t ndevices;
	/* Per device: its processes (pointers into one array). */
	struct rocmmem_process_info *processes;
	size_t *process_first, *process_count;
	struct rocmmem_client_info *clients;
	size_t nclients;
	struct rocmmem_client_books *books; /* the clients' books, in their order */
	size_t nbooks;
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
	o->measurable = d->has_measurable && d->measurable;
	o->undeclared_bytes = o->measurable ? d->undeclared_bytes : 0;
	o->outside_bytes = o->measurable ? d->outside_bytes : 0;
	o->pool_bytes = d->pool_bytes;
	o->pool_chunks = d->pool_chunks;
	o->pool_limit_bytes = d->pool_limit_bytes;
	o->pool_warm_grants = d->pool_warm_grants;
	o->pool_dropped_bytes = d->pool_dropped_bytes;
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
	o->arena_bytes = d->arena_bytes;
	o->arena_used_bytes = d->arena_used_bytes;
	o->arena_free_bytes = d->arena_free_bytes;
	o->arena_largest_free = d->arena_largest_free;
	o->arena_fallbacks = d->arena_fallbacks;
}

/*
 * books_from_wire takes a client's books into st->books (counted beforehand); measurable
 * when every device of its books is, or, without books, when any device of st is.
 */
static void books_from_wire(rocmmem_status *st, struct rocmmem_client_info *o,
			    const Rocmmem__Wire__ClientInfo *d)
{
	o->books = st->books + st->nbooks;
	o->nbooks = d->n_books;
	o->measurable = d->n_books > 0;
	for (size_t i = 0; i < st->ndevices && !d->n_books; i++)
		o->measurable = o->measurable || st->devices[i].measurable;
	for (size_t i = 0; i < d->n_books; i++) {
		const Rocmmem__Wire__ClientBooks *b = d->books[i];
		struct rocmmem_client_books *v = &st->books[st->nbooks++];

		v->device = b->device;
		v->measurable = b->measurable;
		v->declared_bytes = b->declared_bytes;
		v->measured_bytes = b->measurable ? b->measured_bytes : 0;
		v->undeclared_bytes = b->measurable ? b->undeclared_bytes : 0;
		o->measurable = o->measurable && v->measurable;
		o->declared_bytes += v->declared_bytes;
		o->measured_bytes += v->measured_bytes;
		o->undeclared_bytes += v->undeclared_bytes;
	}
	if (!o->measurable)
		o->measured_bytes = o->undeclared_bytes = 0;
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

/* How many items of each list every part brings together. */
struct status_counts {
	size_t devices, clients, leases, models, waiters, denials, processes, limits, awaiting;
	size_t books;
};

/* daemon_from_wire takes what a status says of the daemon itself. */
static void daemon_from_wire(struct rocmmem_daemon_info *o, const Rocmmem__Wire__DaemonInfo *d)
{
	o->version = str(d->version);
	o->pid = d->pid;
	o->uptime_s = d->uptime_s;
	o->backend = str(d->backend);
	o->protocol_version = d->protocol_version;
	o->host_fallback = d->host_fallback;
	o->host_fallback_reason = str(d->host_fallback_reason);
	o->heap_bytes = d->heap_bytes;
	o->fds_open = d->has_fds_open ? d->fds_open : 0;
	o->fds_limit = d->has_fds_limit ? d->fds_limit : 0;
}

/* count_lists counts the items of every part, and takes what a part says only once. */
static void count_lists(rocmmem_status *st, const struct status_lists *lists, size_t n,
			struct status_counts *k)
{
	for (size_t i = 0; i < n; i++) {
		const struct status_lists *p = &lists[i];

		k->devices += p->n_devices;
		k->clients += p->n_clients;
		k->leases += p->n_leases;
		k->models += p->n_models;
		k->waiters += p->n_queue;
		k->denials += p->n_denials;
		k->limits += p->n_limits;
		k->awaiting += p->n_awaiting;
		for (size_t j = 0; j < p->n_devices; j++)
			k->processes += p->devices[j]->n_processes;
		for (size_t j = 0; j < p->n_clients; j++)
			k->books += p->clients[j]->n_books;
		if (p->access) {
			st->access.peers_refused = p->access->peers_refused;
			st->access.requests_refused = p->access->requests_refused;
		}
		if (p->counters)
			counters_from_wire(&st->counters, p->counters);
		if (p->daemon)
			daemon_from_wire(&st->daemon, p->daemon);
	}
}

/* allocate makes room for the counted items (at least one of each). Returns 0 or -ENOMEM. */
static int allocate(rocmmem_status *st, const struct status_counts *k)
{
#define ROOM(n, what) calloc((n) ? (n) : 1, sizeof(*(what)))
	st->processes = ROOM(k->processes, st->processes);
	st->process_first = ROOM(k->devices, st->process_first);
	st->process_count = ROOM(k->devices, st->process_count);
	st->devices = ROOM(k->devices, st->devices);
	st->clients = ROOM(k->clients, st->clients);
	st->books = ROOM(k->books, st->books);
	st->leases = ROOM(k->leases, st->leases);
	st->models = ROOM(k->models, st->models);
	st->waiters = ROOM(k->waiters, st->waiters);
	st->denials = ROOM(k->denials, st->denials);
	st->limits = ROOM(k->limits, st->limits);
	st->awaiting = ROOM(k->awaiting, st->awaiting);
#undef ROOM
	if (!st->processes || !st->process_first || !st->process_count || !st->devices ||
	    !st->clients || !st->books || !st->leases || !st->models || !st->waiters ||
	    !st->denials || !st->limits || !st->awaiting)
		return error_set(-ENOMEM, "out of memory");
	return 0;
}

/* devices_from_wire appends a part's devices and the processes each lists. */
static void devices_from_wire(rocmmem_status *st, const struct status_lists *p, size_t *np)
{
	for (size_t j = 0; j < p->n_devices; j++) {
		const Rocmmem__Wire__DeviceInfo *d = p->devices[j];

		st->process_first[st->ndevices] = *np;
		st->process_count[st->ndevices] = d->n_processes;
		for (size_t k = 0; k < d->n_processes; k++) {
			st->processes[*np].pid = d->processes[k]->pid;
			st->processes[*np].vram_bytes = d->processes[k]->vram_bytes;
			st->processes[*np].client = d->processes[k]->client;
			(*np)++;
		}
		device_from_wire(&st->devices[st->ndevices++], d);
	}
}

/* fill converts the lists of every part into the public arrays. */
static int fill(rocmmem_status *st, const struct status_lists *lists, size_t n)
{
	struct status_counts k = {0};
	size_t np = 0;
	int err;

	count_lists(st, lists, n, &k);
	err = allocate(st, &k);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		const struct status_lists *p = &lists[i];

		devices_from_wire(st, p, &np);
		for (size_t j = 0; j < p->n_clients; j++) {
			client_from_wire(&st->clients[st->nclients], p->clients[j]);
			books_from_wire(st, &st->clients[st->nclients++], p->clients[j]);
		}
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
		const Rocmmem__Wire__StatusReply *p = st->parts[i]->reply->status;

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

int view_status_from_parts(Rocmmem__Wire__ServerMessage **parts, size_t nparts,
			   rocmmem_status **out)
{
	rocmmem_status *st = calloc(1, sizeof(*st));
	int err;

	*out = NULL;
	if (!st) {
		for (size_t i = 0; i < nparts; i++)
			wire_unpacked_free(&parts[i]->base);
		free(parts);
		return error_set(-ENOMEM, "out of memory");
	}
	st->parts = parts;
	st->nparts = nparts;
	err = fill_parts(st);
	if (err) {
		rocmmem_status_free(st);
		return err;
	}
	*out = st;
	return 0;
}

int view_status_from_sample(const struct daemon_facts *facts,
			    const Rocmmem__Wire__TelemetrySample *sample, rocmmem_status **out)
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
	st->daemon.version = str(facts->version);
	st->daemon.pid = facts->pid;
	st->daemon.uptime_s = sample->uptime_ms / 1000;
	st->daemon.backend = str(facts->backend);
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
		wire_unpacked_free(&st->parts[i]->base);
	free(st->parts);
	free(st->devices);
	free(st->processes);
	free(st->process_first);
	free(st->process_count);
	free(st->clients);
	free(st->books);
	free(st->leases);
	free(st->models);
	free(st->waiters);
	free(st->denials);
	free(st->limits);
	free(st->awaiting);
	free(st);
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

/* position finds the device whose index is device among those the status lists. */
static size_t position(const rocmmem_status *st, rocmmem_device_index device)
{
	for (size_t i = 0; i < st->ndevices; i++)
		if (st->devices[i].index == device)
			return i;
	return SIZE_MAX;
}

ROCMMEM_EXPORT size_t rocmmem_status_process_count(const rocmmem_status *st,
						   rocmmem_device_index device)
{
	size_t p = position(st, device);

	return p == SIZE_MAX ? 0 : st->process_count[p];
}

ROCMMEM_EXPORT const struct rocmmem_process_info *
rocmmem_status_process(const rocmmem_status *st, rocmmem_device_index device, size_t index)
{
	size_t p = position(st, device);

	if (p == SIZE_MAX || index >= st->process_count[p])
		return NULL;
	return &st->processes[st->process_first[p] + index];
}
