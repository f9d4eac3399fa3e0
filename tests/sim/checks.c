/* SPDX-License-Identifier: MIT */
/*
 * checks.c: the simulator's invariants (sim.h numbers them as docs/architecture.md does):
 * the cheap ones after every step, the full recount every few steps and at the end.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/pump.h"
#include "sim.h"
#include "state/check.h"

void checks_pump(struct svc *svc)
{
	struct world *w = (struct world *)((char *)svc - offsetof(struct world, svc));
	uint64_t bound = svc->state.ndevices + 1;
	bool outer = !svc->pumping;

	/* Each decision grants or refuses a waiting request, or asks a model to go: no more
	 * decisions than there are of those, or the loop goes round without progress. */
	for (unsigned i = 0; i < svc->state.ndevices; i++)
		bound += svc->state.devices[i].queue.count + svc->state.devices[i].nmodels;
	svc_pump(svc);
	if (outer && svc->pump_decisions > bound)
		sim_fail(w, "3 a waiter that fits is granted within bounded rounds",
			 "the pump applied %u decisions; at most %" PRIu64 " were possible",
			 svc->pump_decisions, bound);
}

void checks_eviction_told(struct world *w, uint64_t holder, const struct svc_notice *n)
{
	if (w->nevictions == w->evictions_cap) {
		size_t cap = w->evictions_cap ? w->evictions_cap * 2 : 64;
		struct sim_eviction *v = realloc(w->evictions, cap * sizeof(*v));

		if (!v)
			return;
		w->evictions = v;
		w->evictions_cap = cap;
	}
	w->evictions[w->nevictions++] = (struct sim_eviction){.model = n->model_id,
							      .generation = n->generation,
							      .holder = holder,
							      .due_ms = w->now + n->deadline_ms};
}

void checks_eviction_over(struct world *w, uint64_t model)
{
	for (size_t i = 0; i < w->nevictions; i++) {
		if (w->evictions[i].model == model) {
			w->evictions[i] = w->evictions[--w->nevictions];
			i--;
		}
	}
}

/* check_budget: invariant 1, leased + reserved <= budget, but for a budget lowered below it. */
static void check_budget(struct world *w, unsigned i)
{
	const struct device *d = &w->svc.state.devices[i];
	uint64_t used = d->leased + d->reserved;

	if (used <= d->budget) {
		w->over[i] = false;
		return;
	}
	if (w->over[i] && used <= w->over_used[i]) {
		w->over_used[i] = used; /* going down, as releases come */
		return;
	}
	sim_fail(w, "1 leased + reserved <= budget",
		 "device %u: %" PRIu64 " leased + %" PRIu64 " reserved > budget %" PRIu64 "%s", i,
		 d->leased, d->reserved, d->budget,
		 w->over[i] ? " and more was granted while over it" : "");
}

/* check_device: invariants 1, 2 (what jobs hold) and 3 (a head that fits is granted). */
static void check_device(struct world *w, unsigned i)
{
	const struct device *d = &w->svc.state.devices[i];
	const struct waiter *head = queue_head(&d->queue);

	check_budget(w, i);
	if (d->queue.count > w->stats.longest_queue)
		w->stats.longest_queue = d->queue.count;
	if (d->releasing != w->releasing[i] || d->leased < w->allocating[i] + w->releasing[i])
		sim_fail(w, "2 books = holders",
			 "device %u: %" PRIu64 " bytes releasing, %" PRIu64 " by the jobs; %" PRIu64
			 " leased, %" PRIu64 " allocating",
			 i, d->releasing, w->releasing[i], d->leased, w->allocating[i]);
	if (head && !d->lost && oracle_fits(d, head))
		sim_fail(w, "3 a waiter that fits is granted",
			 "device %u: the head (waiter %" PRIu64 " of holder %" PRIu64 ", %" PRIu64
			 " bytes) fits and still waits",
			 i, head->seq, head->holder->id, policy_need(head));
}

void checks_step(struct world *w)
{
	uint64_t next = state_next_due(&w->svc.state);

	for (unsigned i = 0; i < w->svc.state.ndevices && !w->failed; i++)
		check_device(w, i);
	if (next <= w->now)
		sim_fail(w, "5 deadlines are kept",
			 "a deadline due at %" PRIu64 " has not run at %" PRIu64, next, w->now);
	for (size_t i = 0; i < w->nevictions && !w->failed; i++) {
		const struct sim_eviction *e = &w->evictions[i];

		if (e->due_ms <= w->now)
			sim_fail(w, "5 every evict request ends by its deadline",
				 "model %" PRIu64 " (generation %" PRIu64 ") of holder %" PRIu64
				 " asked to unload by %" PRIu64
				 ": neither acked nor revoked at %" PRIu64,
				 e->model, e->generation, e->holder, e->due_ms, w->now);
	}
}

/* check_jobs: invariant 2 for each device, with every job in flight recounted. */
static void check_jobs(struct world *w)
{
	uint64_t bytes[SIM_MAX_DEVICES] = {0}, count[SIM_MAX_DEVICES] = {0};
	const struct lease *l;

	for (size_t j = 0; j < w->njobs; j++) {
		const struct job *job = w->jobs[j];

		if (job->kind == JOB_ALLOC || job->kind == JOB_RELEASE) {
			bytes[job->device] += job->kind == JOB_ALLOC ? job->size : job->alloc.size;
			count[job->device]++;
		}
	}
	for (l = lease_table_next(&w->svc.state.leases, 0); l;
	     l = lease_table_next(&w->svc.state.leases, l->id)) {
		bytes[l->device] += l->size;
		count[l->device]++;
	}
	for (unsigned i = 0; i < w->svc.state.ndevices; i++) {
		const struct device *d = &w->svc.state.devices[i];

		if (d->leased != bytes[i] || d->leases != count[i])
			sim_fail(w, "2 books = holders",
				 "device %u: %" PRIu64 " bytes in %" PRIu64
				 " leases, allocations and "
				 "releases; the books say %" PRIu64 " in %" PRIu64,
				 i, bytes[i], count[i], d->leased, d->leases);
	}
}

void checks_full(struct world *w)
{
	char why[512];
	unsigned holders = 0;

	w->stats.full_checks++;
	if (state_check(&w->svc.state, why, sizeof(why)) < 0) {
		sim_fail(w, "2 books = holders", "%s", why);
		return;
	}
	check_jobs(w);
	for (const struct holder *h = state_holder_next(&w->svc.state, 0); h;
	     h = state_holder_next(&w->svc.state, h->id)) {
		holders++;
		if (!world_client(w, h->id))
			sim_fail(w, "2 books = holders", "holder %" PRIu64 " has no client", h->id);
	}
	if (holders != w->nclients)
		sim_fail(w, "2 books = holders", "%u holders, %u clients", holders, w->nclients);
}

void checks_end(struct world *w)
{
	const struct state *s = &w->svc.state;
	uint64_t id;

	checks_full(w);
	for (unsigned i = 0; i < s->ndevices; i++) {
		const struct device *d = &s->devices[i];

		if (d->leased || d->reserved || d->leases || d->queue.count || d->nmodels)
			sim_fail(w, "7 all gone, books zero",
				 "device %u: %" PRIu64 " leased, %" PRIu64 " reserved, %" PRIu64
				 " leases, %u waiting, %u models",
				 i, d->leased, d->reserved, d->leases, d->queue.count, d->nmodels);
	}
	if (lease_table_next(&s->leases, 0) || idtable_next(&s->models, 0, &id) ||
	    idtable_next(&s->waiters, 0, &id) || state_holder_next(s, 0) ||
	    heap_size(&s->deadlines) || s->fd_leases)
		sim_fail(w, "7 all gone, books zero",
			 "leases, models, waiters, holders or deadlines are left");
}

/* dump_device prints a device's books, its queue's first requests and its models. */
static void dump_device(const struct device *d)
{
	const struct waiter *w;
	const struct model *m;
	unsigned n = 0;

	printf("  device %u: budget %" PRIu64 ", leased %" PRIu64 ", reserved %" PRIu64
	       ", releasing %" PRIu64 ", %u waiting%s\n",
	       d->index, d->budget, d->leased, d->reserved, d->releasing, d->queue.count,
	       d->lost ? ", lost" : "");
	TAILQ_FOREACH (w, &d->queue.head, queue_link) {
		if (n++ == 8)
			break;
		printf("    waiter %" PRIu64 ": holder %" PRIu64 ", kind %d, need %" PRIu64
		       ", model %" PRIu64 "\n",
		       w->seq, w->holder->id, (int)w->kind, policy_need(w),
		       w->model ? w->model->id : 0);
	}
	TAILQ_FOREACH (m, &d->models, device_link)
		if (m->reservation || m->lease_bytes || m->evicting || m->use_count)
			printf("    model %" PRIu64 " of holder %" PRIu64
			       ": class %u, reserved %" PRIu64 ", tagged %" PRIu64
			       ", in use %u%s%s\n",
			       m->id, m->owner->id, m->model_class, m->reservation, m->lease_bytes,
			       m->use_count, m->evicting ? ", evicting" : "",
			       m->pinned ? ", pinned" : "");
}

void checks_dump(struct world *w)
{
	printf("sim: the books:\n");
	for (unsigned i = 0; i < w->svc.state.ndevices; i++)
		dump_device(&w->svc.state.devices[i]);
}
