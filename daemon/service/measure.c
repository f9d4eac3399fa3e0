/* SPDX-License-Identifier: MIT */
/*
 * measure.c: applies the telemetry's per-process readings to the measured books
 * (state/measured.h) by the policy's rules (policy/reconcile.h), keeps each device's undeclared
 * total current for the decisions, and tells the bus when a client passes its declaration.
 */
#include "measure.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "policy/reconcile.h"
#include "size.h"

/* refresh_device sets d's undeclared totals from its measured books as they stand. */
static void refresh_device(const struct state *s, struct device *d)
{
	policy_truth_totals(s, d, &d->truth.undeclared, &d->truth.outside, &d->truth.outside_procs);
}

void svc_truth_refresh(struct svc *svc)
{
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		struct device *d = &svc->state.devices[i];

		if (d->truth.measurable)
			refresh_device(&svc->state, d);
	}
}

/* read_all pushes the sample's readings into d's records; seen marks the records read. */
static void read_all(struct device *d, const struct telemetry_sample *t, bool *seen)
{
	struct device_truth *tr = &d->truth;

	for (unsigned i = 0; i < t->nprocesses && i < TELEMETRY_MAX_PROCESSES; i++) {
		const struct telemetry_process *tp = &t->processes[i];
		struct truth_proc *p;

		if (tp->pid <= 0)
			continue;
		p = truth_find(tr, tp->pid);
		if (!policy_truth_plausible(d, tp->vram_bytes)) {
			/* Garbage: neither charged nor taken as 0 (which would let it fade). */
			tr->rejected++;
			if (p)
				seen[p - tr->procs] = true;
			continue;
		}
		if (!p)
			p = truth_add(tr, tp->pid);
		if (!p)
			continue; /* full: the largest come first, so the least matter is left out
				   */
		seen[p - tr->procs] = true;
		policy_truth_push(p, tp->vram_bytes);
	}
}

/* resolve finds each record's client (the lowest id of its pid) and the daemon's own record. */
static void resolve(const struct state *s, struct device_truth *tr, int32_t self_pid)
{
	const struct holder *h;

	for (unsigned i = 0; i < tr->nprocs; i++) {
		tr->procs[i].holder = 0;
		tr->procs[i].self = tr->procs[i].pid == self_pid;
	}
	for (h = state_holder_next(s, 0); h; h = state_holder_next(s, h->id)) {
		struct truth_proc *p = truth_find(tr, (int32_t)h->who.pid);

		if (p && !p->holder && !p->self)
			p->holder = h->id;
	}
}

/* faded says whether a record has read 0 for the whole window: the process holds nothing. */
static bool faded(const struct truth_proc *p)
{
	if (p->level || p->nring < TRUTH_WINDOW)
		return false;
	for (unsigned i = 0; i < TRUTH_WINDOW; i++)
		if (p->ring[i])
			return false;
	return true;
}

/*
 * rearmed says whether a client over its declaration has come back far enough to be told
 * again: its measured use within half the tolerance of what it declares. Between that and the
 * full tolerance it stays told, so that use hovering at the threshold is told once.
 */
static bool rearmed(const struct policy_charge *c)
{
	return c->measured <= c->declared ||
	       c->measured - c->declared <= policy_truth_tolerance(c->declared) / 2;
}

/*
 * warn tells the bus once about each client whose measured use crossed its declaration and
 * tolerance (the event, a warning line, the counter); it is told again only after it came back
 * (rearmed), and the log limits its lines per client like any other warning a client causes.
 */
static void warn(struct svc *svc, struct device *d)
{
	char m[SIZE_FORMAT_MAX], dc[SIZE_FORMAT_MAX], x[SIZE_FORMAT_MAX], tol[SIZE_FORMAT_MAX];

	for (unsigned i = 0; i < d->truth.nprocs; i++) {
		struct truth_proc *p = &d->truth.procs[i];
		struct policy_charge c;
		struct bus_event e;
		bool over;

		if (!policy_truth_charge(&svc->state, d, p, &c))
			continue;
		p->declared_at_sample = c.declared;
		over = c.holder && (c.undeclared > 0 || (p->over && !rearmed(&c)));
		if (over && !p->over) {
			memset(&e, 0, sizeof(e));
			e.type = BUS_UNDECLARED;
			e.holder = c.holder;
			e.has_device = true;
			e.device = d->index;
			e.bytes = c.measured;
			e.declared = c.declared;
			bus_emitf(
			    &svc->bus, &e, LOG_LEVEL_WARN,
			    "%s%s(pid %d) holds %s on device %u but declared %s: %s more than "
			    "declared (past the tolerance of %s) is charged to it",
			    c.holder->name, c.holder->name[0] ? " " : "", (int)p->pid,
			    size_format(c.measured, m, sizeof(m)), d->index,
			    size_format(c.declared, dc, sizeof(dc)),
			    size_format(c.undeclared, x, sizeof(x)),
			    size_format(policy_truth_tolerance(c.declared), tol, sizeof(tol)));
		}
		p->over = over;
	}
}

void svc_truth_sample(struct svc *svc, unsigned device, const struct telemetry_sample *t)
{
	struct device *d = &svc->state.devices[device];
	struct device_truth *tr = &d->truth;
	bool seen[TRUTH_MAX_PROCS] = {false};
	bool complete;

	if (!t)
		return; /* a failed reading: what is known stays until one succeeds */
	if (!(t->valid & TELEMETRY_HAS_PROCESSES)) {
		truth_reset(tr);
		return;
	}
	tr->measurable = true;
	tr->samples++;
	tr->sample_ms = svc_now(svc);
	/* A list cut short says nothing of those left out: they keep their level. */
	complete = t->nprocesses >= t->nprocesses_total;
	resolve(&svc->state, tr, svc->self_pid);
	read_all(d, t, seen);
	for (unsigned i = 0; i < tr->nprocs; i++)
		if (!seen[i] && complete)
			policy_truth_push(&tr->procs[i], 0);
	for (unsigned i = tr->nprocs; i-- > 0;)
		if (faded(&tr->procs[i]))
			truth_remove(tr, i);
	resolve(&svc->state, tr, svc->self_pid);
	refresh_device(&svc->state, d);
	warn(svc, d);
	/* Less undeclared use may let a waiter through; more never grants anything. */
	svc->pump(svc);
}

int32_t svc_truth_self(void)
{
	return (int32_t)getpid();
}
