/* SPDX-License-Identifier: MIT */
/*
 * service.c: the service's life: its devices and settings, connections coming and going, the
 * deadlines and the events that come from below (the sampler, the runtime).
 */
#include "service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "measure.h"
#include "arena.h"
#include "memory.h"
#include "pump.h"
#include "progress_tell.h"
#include "reply.h"
#include "residency.h"
#include "size.h"

/* log_rules says which classes stay apart on device i, if any. */
static void log_rules(const struct device *d)
{
	char pairs[256];

	if (!class_exclusion_any(&d->exclusive))
		return;
	class_exclusion_format(&d->exclusive, pairs, sizeof(pairs));
	log_info("device %u: never resident together: %s", d->index, pairs);
}

int svc_init(struct svc *svc, struct backend *backend, const struct budget_config *cfgs,
	     const struct residency_config *res, const struct policy_config *cfg,
	     const struct svc_clock *clock, const struct job_runner *runner)
{
	unsigned n = backend->ops->device_count(backend);

	memset(svc, 0, sizeof(*svc));
	svc->backend = backend;
	svc->cfg = *cfg;
	svc->cfg.evict_deadline_ms = res->evict_deadline_ms;
	svc->clock = clock;
	svc->runner = *runner;
	svc->pump = svc_pump;
	svc->due_ms = UINT64_MAX;
	svc->self_pid = svc_truth_self();
	policy_scratch_init(&svc->scratch);
	bus_init(&svc->bus, clock);
	svc_progress_init(svc);
	state_init(&svc->state);
	if (n == 0) {
		log_error("The %s backend reports no devices", backend_name(backend));
		return -ENODEV;
	}
	if (n > BACKEND_MAX_DEVICES) {
		log_warn("managing the first %u of %u devices", BACKEND_MAX_DEVICES, n);
		n = BACKEND_MAX_DEVICES;
	}
	for (unsigned i = 0; i < n; i++) {
		char why[256], t[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX];
		struct backend_device info;
		uint64_t budget;
		int err = backend->ops->device_info(backend, i, &info);

		if (err) {
			log_error("Could not query device %u: %s", i, strerror(-err));
			return err;
		}
		err = device_budget(&cfgs[i], &info, &budget, why, sizeof(why));
		if (err) {
			log_error("Device %u (%s): %s", i, info.name, why);
			return err;
		}
		device_init(&svc->state.devices[i], i, &info, budget);
		svc->state.devices[i].exclusive = res->exclusive_all;
		class_exclusion_merge(&svc->state.devices[i].exclusive, &res->exclusive[i]);
		log_info("device %u: %s, %s total, budget %s, headroom %s", i, info.name,
			 size_format(info.total_bytes, t, sizeof(t)),
			 size_format(budget, b, sizeof(b)),
			 size_format(svc->state.devices[i].headroom, h, sizeof(h)));
		log_rules(&svc->state.devices[i]);
	}
	for (unsigned i = n; i < BACKEND_MAX_DEVICES; i++) {
		if (class_exclusion_any(&res->exclusive[i]) || cfgs[i].named) {
			log_error("The configuration names device %u, but there are %u device(s)",
				  i, n);
			return -EINVAL;
		}
	}
	svc->state.ndevices = n;
	return 0;
}

int svc_reconfigure(struct svc *svc, const struct budget_config *cfgs,
		    const struct residency_config *res, const struct policy_config *cfg, char *why,
		    size_t why_len)
{
	uint64_t budgets[BACKEND_MAX_DEVICES];
	char t[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX];

	/* Everything is checked before anything changes: a bad setting changes nothing. */
	for (unsigned i = svc->state.ndevices; i < BACKEND_MAX_DEVICES; i++) {
		if (class_exclusion_any(&res->exclusive[i]) || cfgs[i].named) {
			snprintf(why, why_len, "it names device %u, but there are %u device(s)", i,
				 svc->state.ndevices);
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		char reason[256];

		if (device_budget(&cfgs[i], &svc->state.devices[i].info, &budgets[i], reason,
				  sizeof(reason)) < 0) {
			snprintf(why, why_len, "device %u (%s): %s", i, svc->state.devices[i].name,
				 reason);
			return -EINVAL;
		}
	}
	/* What the daemon found for itself stays: its uid, its descriptors, whether it drains. */
	svc->cfg.evict_deadline_ms = res->evict_deadline_ms;
	svc->cfg.sched = cfg->sched; /* backfilling, deadlines and maximum holds by class */
	svc->cfg.limits = cfg->limits;
	svc->cfg.access = cfg->access;
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		struct device *d = &svc->state.devices[i];
		struct class_exclusion rules = res->exclusive_all;

		class_exclusion_merge(&rules, &res->exclusive[i]);
		if (memcmp(&rules, &d->exclusive, sizeof(rules)) != 0) {
			d->exclusive = rules;
			if (class_exclusion_any(&rules))
				log_rules(d);
			else
				log_info("device %u: no classes kept apart any more", i);
		}
		if (budgets[i] != d->budget) {
			uint64_t held = d->leased + d->reserved;

			log_info("device %u: budget %s (was %s), headroom %s%s", i,
				 size_format(budgets[i], b, sizeof(b)),
				 size_format(d->budget, t, sizeof(t)),
				 size_format(d->total - budgets[i], h, sizeof(h)),
				 held > budgets[i] ? "; more than that is held: nothing is granted "
						     "until enough is released"
						   : "");
			device_set_budget(d, budgets[i]);
		}
	}
	/* A larger budget or fewer rules may let waiting requests through now. */
	svc->pump(svc);
	return 0;
}

void svc_finish(struct svc *svc)
{
	state_finish(&svc->state);
	policy_scratch_finish(&svc->scratch);
	svc_progress_finish(svc);
	if (svc->backend)
		svc->backend->ops->destroy(svc->backend);
	svc->backend = NULL;
}

void svc_set_sink(struct svc *svc, const struct svc_sink *sink)
{
	svc->sink = *sink;
}

void svc_connect(struct svc *svc, unsigned clients, const struct identity *who,
		 struct policy_decision *d)
{
	struct bus_event e = {.type = BUS_LIMIT_HIT};

	policy_connect(&svc->state, &svc->cfg, clients, who, d);
	if (d->verdict != POLICY_REFUSE)
		return;
	if (d->refusal.kind == REFUSE_ACCESS) {
		e.type = BUS_ACCESS_REFUSED;
		e.flags = BUS_PEER;
	}
	e.limit = d->refusal.limit;
	bus_emit(&svc->bus, &e, LOG_LEVEL_WARN, d->refusal.log);
}

int svc_holder_create(struct svc *svc, struct identity *who, struct holder **out)
{
	return state_holder_add(&svc->state, who, svc_now(svc), out);
}

void svc_holder_hello(struct svc *svc, struct holder *h)
{
	struct bus_event e = {.type = BUS_CLIENT_CONNECTED, .holder = h};
	char label[128];

	bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG,
		  "client %s connected (uid %u, connection %" PRIu64 ")",
		  holder_label(h, label, sizeof(label)), (unsigned)h->who.uid, h->id);
}

/* holder_drop drops what h holds: its waiting requests, its leases and its models. */
static void holder_drop(struct svc *svc, struct holder *h)
{
	struct waiter *w;
	struct lease *l;
	struct model *m;
	uint64_t after = 0, id;

	while ((w = TAILQ_FIRST(&h->waiters)))
		state_waiter_drop(&svc->state, w);
	svc_due_changed(svc);
	while ((l = TAILQ_FIRST(&h->leases))) {
		/* One line for them all follows from the disconnect; each one for subscribers. */
		svc_lease_released(svc, l, LOG_LEVEL_DEBUG, "reclaimed");
		svc_lease_destroy(svc, l);
	}
	/* Every lease in its arenas is punched: the arenas go. */
	svc_arenas_close(svc, h);
	while ((m = TAILQ_FIRST(&h->models)))
		svc_model_destroy(svc, m);
	/* Evictions it asked for as an administrator go on, unanswered. */
	while ((m = idtable_next(&svc->state.models, after, &id))) {
		if (m->evict_requester == h->id)
			m->evict_requester = 0;
		after = id;
	}
}

void svc_holder_gone(struct svc *svc, struct holder *h, bool greeted)
{
	struct bus_event e = {.type = BUS_CLIENT_DISCONNECTED, .holder = h};
	char label[128], bytes[SIZE_FORMAT_MAX];
	uint32_t leases = h->lease_count;
	uint64_t leased = h->leased_bytes;

	state_holder_leave(&svc->state, h);
	holder_drop(svc, h);
	svc->pump(svc);
	if (greeted) {
		e.bytes = leased;
		if (leases)
			bus_emitf(&svc->bus, &e, LOG_LEVEL_INFO,
				  "client %s disconnected; reclaimed %s in %u lease(s)",
				  holder_label(h, label, sizeof(label)),
				  size_format(leased, bytes, sizeof(bytes)), (unsigned)leases);
		else
			bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG, "client %s disconnected",
				  holder_label(h, label, sizeof(label)));
	}
	state_holder_free(h);
}

void svc_stop(struct svc *svc)
{
	svc->cfg.stopping = true;
}

void svc_cancel_waiters(struct svc *svc, struct holder *h, int err, const char *why)
{
	struct waiter *w;

	while ((w = TAILQ_FIRST(&h->waiters))) {
		svc_reply_error(svc, h->id, w->request_id, err, "%s", why);
		state_waiter_drop(&svc->state, w);
	}
	svc_due_changed(svc);
}

void svc_limit_hit(struct svc *svc, const struct holder *h, enum limit_id limit, const char *fmt,
		   ...)
{
	struct bus_event e = {.type = BUS_LIMIT_HIT, .holder = h, .limit = limit};
	char text[512];
	va_list ap;

	if (!fmt) {
		bus_emit(&svc->bus, &e, LOG_LEVEL_WARN, NULL);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	bus_emit(&svc->bus, &e, LOG_LEVEL_WARN, text);
}

void svc_tick(struct svc *svc)
{
	svc_run_deadlines(svc);
}

void svc_device_lost(struct svc *svc, unsigned device, const char *why)
{
	if (!state_device_lost(&svc->state, device, why))
		return;
	log_error("Device %u (%s) is unusable: %s", device, svc->state.devices[device].name, why);
	svc->pump(svc);
}

void svc_meminfo(struct svc *svc, unsigned device, int err, const struct backend_meminfo *mi)
{
	struct device *d = &svc->state.devices[device];

	if (err == 0) {
		d->has_meminfo = true;
		d->runtime_total = mi->total_bytes;
		d->runtime_free = mi->free_bytes;
		d->meminfo_ms = svc_now(svc);
	} else if (err == -ENODEV) {
		svc_device_lost(svc, device, "the runtime reports the device gone");
	}
}

void svc_telemetry(struct svc *svc, unsigned device, int err, const struct telemetry_sample *t)
{
	struct device *d = &svc->state.devices[device];

	d->has_telemetry = err == 0;
	if (d->has_telemetry) {
		d->telemetry = *t;
		d->telemetry_ms = svc_now(svc);
	}
	svc_truth_sample(svc, device, err == 0 ? t : NULL);
}
