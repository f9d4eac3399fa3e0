/* SPDX-License-Identifier: MIT */
/* report.c: the daemon's state as wire messages, shared by status replies and telemetry samples. */
#include "report.h"

#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__) && !defined(ROCMMEM_SANITIZED)
#include <malloc.h>
#endif

#include "client.h"
#include "platform/backend/registry.h"
#include "platform/fdlimit.h"
#include "policy/reconcile.h"
#include "server.h"
#include "service/pool.h"
#include "state/arena.h"
#include "version.h"

/*
 * heap_in_use reads what malloc has handed out and not taken back (glibc's mallinfo2: the
 * arenas' allocated chunks plus mmapped ones), every thread's arena included. Unlike RSS it
 * does not count freed memory malloc keeps, nor code pages first touched: a leak shows as
 * growth here however busy the machine and however fragmented the heap. Sanitized builds
 * allocate outside glibc's malloc: there it is unknown.
 */
static bool heap_in_use(uint64_t *out)
{
#if defined(__GLIBC__) && !defined(ROCMMEM_SANITIZED) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	struct mallinfo2 m = mallinfo2();

	*out = (uint64_t)m.uordblks + (uint64_t)m.hblkhd;
	return true;
#else
	(void)out;
	return false;
#endif
}

void report_daemon(Rocmmem__Wire__DaemonInfo *o, const struct server *s)
{
	rocmmem__wire__daemon_info__init(o);
	o->version = (char *)ROCMMEM_VERSION_STRING;
	o->has_pid = true;
	o->pid = (int32_t)getpid();
	o->has_uptime_s = true;
	o->uptime_s = server_uptime_ms(s) / 1000;
	o->backend = (char *)backend_name(s->svc.backend);
	o->has_protocol_version = true;
	o->protocol_version = ROCMMEM_PROTOCOL_VERSION;
	if (backend_host_fallback()) {
		o->has_host_fallback = o->host_fallback = true;
		o->host_fallback_reason = (char *)backend_host_fallback();
	}
	o->has_heap_bytes = heap_in_use(&o->heap_bytes);
	o->has_fds_open = o->has_fds_limit = true;
	fdlimit_read(&o->fds_limit, &o->fds_open);
}

static void report_telemetry(Rocmmem__Wire__DeviceTelemetry *o, const struct device *d,
			     uint64_t now)
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
		if ((int32_t)c->holder->who.pid == pid)
			return true;
	}
	return false;
}

static void report_processes(struct report_device *o, const struct device *d,
			     const struct server *s)
{
	const struct telemetry_sample *t = &d->telemetry;
	unsigned n = 0;

	if (!(t->valid & TELEMETRY_HAS_PROCESSES))
		return;
	for (unsigned j = 0; j < t->nprocesses && j < TELEMETRY_MAX_PROCESSES; j++) {
		Rocmmem__Wire__DeviceProcess *p = &o->processes[n];

		rocmmem__wire__device_process__init(p);
		p->has_pid = true;
		p->pid = t->processes[j].pid;
		p->has_vram_bytes = true;
		p->vram_bytes = t->processes[j].vram_bytes;
		p->has_client = true;
		p->client = is_client(s, p->pid);
		o->process_ptrs[n++] = p;
	}
	o->info.n_processes = n;
	o->info.processes = o->process_ptrs;
}

/* report_pool fills the chunk pool's fields, where the device can pool. */
static void report_pool(Rocmmem__Wire__DeviceInfo *o, const struct server *s,
			const struct device *d)
{
	uint64_t limit = svc_pool_limit(&s->svc, d);

	/* A device that never pooled and cannot (host memory, dma-buf, IPC, "off"): nothing. */
	if (limit == 0 && d->pool.bytes == 0 && d->pool.dropped_bytes == 0)
		return;
	o->has_pool_bytes = o->has_pool_chunks = o->has_pool_limit_bytes = true;
	o->has_pool_warm_grants = o->has_pool_dropped_bytes = true;
	o->pool_bytes = d->pool.bytes;
	o->pool_chunks = d->pool.chunks;
	o->pool_limit_bytes = limit;
	o->pool_warm_grants = d->pool.warm_grants;
	o->pool_dropped_bytes = d->pool.dropped_bytes;
}

void report_device(struct report_device *out, const struct server *s, const struct device *d,
		   uint64_t now)
{
	const struct svc *a = &s->svc;
	Rocmmem__Wire__DeviceInfo *o = &out->info;

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
	if (d->has_telemetry) {
		report_telemetry(&out->telemetry, d, now);
		o->telemetry = &out->telemetry;
		report_processes(out, d, s);
	}
	o->has_largest_grantable = true;
	o->largest_grantable = device_largest_grantable(d);
	o->has_evictable_bytes = true;
	o->evictable_bytes = device_evictable(d);
	o->has_largest_with_eviction = true;
	o->largest_with_eviction = device_largest_with_eviction(d);
	o->has_oldest_wait_ms = true;
	o->oldest_wait_ms = device_oldest_wait_ms(d, now);
	o->has_models_resident = true;
	o->models_resident = device_models_resident(d);
	o->has_measurable = true;
	o->measurable = d->truth.measurable;
	if (d->truth.measurable) {
		o->has_undeclared_bytes = true;
		o->undeclared_bytes = d->truth.undeclared;
		o->has_outside_bytes = true;
		o->outside_bytes = d->truth.outside;
	}
	report_pool(o, s, d);
}

/* report_arena adds a client's host arenas (their sizes, use and free bytes summed; the
 * largest free range of any) and its leases that fitted none. */
static void report_arena(Rocmmem__Wire__ClientInfo *o, const struct holder *c)
{
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++) {
		const struct arena *a = c->arena[i];

		if (!a)
			continue;
		o->has_arena_bytes = o->has_arena_used_bytes = o->has_arena_largest_free = true;
		o->has_arena_free_bytes = true;
		o->arena_bytes += a->size;
		o->arena_used_bytes += a->used;
		o->arena_free_bytes += arena_free_bytes(a);
		if (arena_largest_free(a) > o->arena_largest_free)
			o->arena_largest_free = arena_largest_free(a);
	}
	if (c->features & HOLDER_HOST_ARENA) {
		o->has_arena_fallbacks = true;
		o->arena_fallbacks = c->arena_fallbacks;
	}
}

void report_holder(Rocmmem__Wire__ClientInfo *o, const struct holder *c, uint64_t now)
{
	rocmmem__wire__client_info__init(o);
	o->has_pid = true;
	o->pid = (int32_t)c->who.pid;
	o->has_uid = true;
	o->uid = (uint32_t)c->who.uid;
	o->has_gid = true;
	o->gid = (uint32_t)c->who.gid;
	o->name = (char *)c->name;
	o->has_leases = true;
	o->leases = c->lease_count;
	o->has_leased_bytes = true;
	o->leased_bytes = c->leased_bytes;
	o->has_connected_s = true;
	o->connected_s = (now - c->connected_ms) / 1000;
	o->has_client_id = true;
	o->client_id = c->id;
	o->has_models = true;
	o->models = c->model_count;
	o->has_reserved_bytes = true;
	o->reserved_bytes = holder_bytes(c) - c->leased_bytes;
	o->has_waiting = true;
	o->waiting = c->waiter_count;
	o->has_pidfd = true;
	o->pidfd = c->who.pidfd;
	report_arena(o, c);
}

/* same_process says whether a and b are connections of one process (their books are one). */
static bool same_process(const struct holder *a, const struct holder *b)
{
	return a->account && a->account == b->account && a->who.pid == b->who.pid;
}

size_t report_books(Rocmmem__Wire__ClientInfo *o, const struct svc *a, const struct holder *h,
		    Rocmmem__Wire__ClientBooks *pool, Rocmmem__Wire__ClientBooks **ptrs,
		    size_t room, const struct holder *prev_h,
		    const Rocmmem__Wire__ClientInfo *prev_o)
{
	size_t n = 0;

	/* A process with many connections: summed once, not once per connection. */
	if (prev_h && prev_o && same_process(prev_h, h) && prev_o->n_books <= room) {
		for (; n < prev_o->n_books; n++) {
			pool[n] = *prev_o->books[n];
			ptrs[n] = &pool[n];
		}
		o->n_books = n;
		o->books = ptrs;
		return n;
	}
	for (unsigned i = 0; i < a->state.ndevices && n < room; i++) {
		Rocmmem__Wire__ClientBooks *b = &pool[n];
		struct policy_charge c;
		bool measurable = policy_truth_books(&a->state, &a->state.devices[i], h, &c);

		if (!c.declared && !c.measured)
			continue;
		rocmmem__wire__client_books__init(b);
		b->has_device = b->has_measurable = b->has_declared_bytes = true;
		b->device = i;
		b->measurable = measurable;
		b->declared_bytes = c.declared;
		b->has_measured_bytes = b->has_undeclared_bytes = measurable;
		b->measured_bytes = c.measured;
		b->undeclared_bytes = c.undeclared;
		ptrs[n++] = b;
	}
	o->n_books = n;
	o->books = ptrs;
	return n;
}

void report_model(Rocmmem__Wire__ModelInfo *o, const struct model *m, uint64_t now)
{
	rocmmem__wire__model_info__init(o);
	o->has_id = true;
	o->id = m->id;
	o->name = (char *)m->name;
	o->has_class_ = true;
	o->class_ = (Rocmmem__Wire__ModelClass)m->model_class;
	o->has_owner_pid = true;
	o->owner_pid = (int32_t)m->owner->who.pid;
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

void report_counters(Rocmmem__Wire__Counters *o, const struct counters *k)
{
	rocmmem__wire__counters__init(o);
	o->has_grants = o->has_denials = o->has_timeouts = o->has_evictions = true;
	o->has_revocations = o->has_trims = o->has_bytes_trimmed = o->has_releases = true;
	o->has_reclaimed = o->has_failures = o->has_connections = true;
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

void denials_fill(const struct denials *ring, struct denials_wire *w, size_t *n,
		  Rocmmem__Wire__Denial ***items)
{
	for (unsigned i = 0; i < ring->count; i++) {
		const struct denial *d = denials_get(ring, i);
		Rocmmem__Wire__Denial *o = &w->items[i];

		rocmmem__wire__denial__init(o);
		o->has_timestamp_ms = o->has_pid = o->has_device = o->has_bytes = true;
		o->has_model_id = o->has_error = true;
		o->timestamp_ms = d->timestamp_ms;
		o->pid = d->pid;
		o->client_name = (char *)d->client_name;
		o->device = d->device;
		o->bytes = d->bytes;
		o->model_id = d->model_id;
		if (d->model_name[0])
			o->model_name = (char *)d->model_name;
		o->error = d->error;
		o->reason = (char *)d->reason;
		w->ptrs[i] = o;
	}
	*n = ring->count;
	*items = w->ptrs;
}

void quota_report(struct quota_report *r, const struct svc *svc)
{
	for (unsigned i = 0; i < LIMIT_COUNT; i++) {
		Rocmmem__Wire__LimitInfo *o = &r->limits[i];
		bool unlimited;

		rocmmem__wire__limit_info__init(o);
		o->name = (char *)limit_name((enum limit_id)i);
		o->has_value = o->has_unlimited = o->has_hits = true;
		limit_value(&svc->cfg.limits, svc->cfg.fd_limit, (enum limit_id)i, &o->value,
			    &unlimited);
		o->unlimited = unlimited;
		o->hits = svc->counters.hits[i];
		r->ptrs[i] = o;
	}
}
