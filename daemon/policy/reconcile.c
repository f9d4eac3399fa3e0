/* SPDX-License-Identifier: MIT */
/*
 * reconcile.c: the reconciled books' rules: smoothing of readings, the tolerance, each process's
 * charge (the larger of declared and measured), the device's undeclared total, the words.
 */
#include "reconcile.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "size.h"

/* How many over-declared clients a refusal names. */
#define TRUTH_EXPLAIN_TOP 3u

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t policy_truth_tolerance(uint64_t declared)
{
	uint64_t share = declared / POLICY_TRUTH_SLACK_DIV;

	return share > POLICY_TRUTH_SLACK_MIN ? share : POLICY_TRUTH_SLACK_MIN;
}

bool policy_truth_plausible(const struct device *d, uint64_t raw)
{
	uint64_t most = d->total;

	if (d->has_meminfo && d->runtime_total > most)
		most = d->runtime_total;
	if (most == 0)
		return true; /* nothing to judge by */
	return most > UINT64_MAX / 2 || raw <= 2 * most;
}

void policy_truth_push(struct truth_proc *p, uint64_t raw)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	p->raw = raw;
	p->ring[p->pos] = raw;
	p->pos = (p->pos + 1) % TRUTH_WINDOW;
	if (p->nring < TRUTH_WINDOW)
		p->nring++;
	if (p->nring < TRUTH_WINDOW)
		return;
	for (unsigned i = 0; i < TRUTH_WINDOW; i++) {
		lo = p->ring[i] < lo ? p->ring[i] : lo;
		hi = p->ring[i] > hi ? p->ring[i] : hi;
	}
	if (lo > p->level)
		p->level = lo;
	else if (hi < p->level)
		p->level = hi;
}

/* declared_of sums what every client of h's process holds on device dev. */
static uint64_t declared_of(const struct holder *h, unsigned dev)
{
	const struct holder *k = h;
	uint64_t bytes = 0;

	if (!h->account)
		return holder_bytes_on(h, dev, NULL);
	/* Clients of one process share its uid: their account keeps them in one ring. */
	do {
		bytes = sat_add(bytes, holder_bytes_on(k, dev, NULL));
		k = k->proc_next;
	} while (k != h);
	return bytes;
}

bool policy_truth_charge(const struct state *s, const struct device *d, const struct truth_proc *p,
			 struct policy_charge *c)
{
	memset(c, 0, sizeof(*c));
	c->measured = p->level;
	if (p->self)
		return false;
	if (p->holder) {
		c->holder = state_holder_find(s, p->holder);
		if (!c->holder)
			return false; /* left: found again as outside at the next sample if it holds
				       */
		c->declared = declared_of(c->holder, d->index);
		/* Declared since the reading: memory the level cannot show yet. */
		if (c->declared > p->declared_at_sample)
			c->measured = sat_add(c->measured, c->declared - p->declared_at_sample);
	}
	c->charged = c->declared;
	if (c->measured > c->declared &&
	    (!c->holder || c->measured - c->declared > policy_truth_tolerance(c->declared)))
		c->charged = c->measured;
	c->undeclared = c->charged - c->declared;
	return true;
}

bool policy_truth_books(const struct state *s, const struct device *d, const struct holder *h,
			struct policy_charge *c)
{
	const struct truth_proc *p = NULL;
	struct policy_charge found;

	for (unsigned i = 0; i < d->truth.nprocs && !p; i++)
		if (d->truth.procs[i].pid == (int32_t)h->who.pid)
			p = &d->truth.procs[i];

	memset(c, 0, sizeof(*c));
	c->holder = h;
	c->declared = declared_of(h, d->index);
	c->charged = c->declared;
	if (!d->truth.measurable)
		return false;
	/* Not read (yet): the process holds nothing of its own there, or is too new. */
	if (p && p->holder && policy_truth_charge(s, d, p, &found)) {
		*c = found;
		c->holder = h;
	} else if (p && !p->self) {
		/* Connected since the last sample: its reading is not matched to it yet. */
		c->measured = p->level;
		if (c->measured > c->declared &&
		    c->measured - c->declared > policy_truth_tolerance(c->declared))
			c->charged = c->measured;
		c->undeclared = c->charged - c->declared;
	}
	return true;
}

void policy_truth_totals(const struct state *s, const struct device *d, uint64_t *undeclared,
			 uint64_t *outside, unsigned *nout)
{
	struct policy_charge c;

	*undeclared = 0;
	*outside = 0;
	*nout = 0;
	if (!d->truth.measurable)
		return;
	for (unsigned i = 0; i < d->truth.nprocs; i++) {
		if (!policy_truth_charge(s, d, &d->truth.procs[i], &c) || !c.undeclared)
			continue;
		*undeclared = sat_add(*undeclared, c.undeclared);
		if (!c.holder) {
			*outside = sat_add(*outside, c.undeclared);
			(*nout)++;
		}
	}
}

/* put appends to buf (len bytes, *used of them taken), cutting what does not fit. */
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*used + 1 >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (n > 0)
		*used += (size_t)n < len - *used ? (size_t)n : len - *used - 1;
}

/* top_over lists the clients with the most undeclared use, largest first. */
static unsigned top_over(const struct state *s, const struct device *d,
			 struct policy_charge top[TRUTH_EXPLAIN_TOP],
			 int32_t pids[TRUTH_EXPLAIN_TOP])
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->truth.nprocs; i++) {
		struct policy_charge c;
		unsigned at;

		if (!policy_truth_charge(s, d, &d->truth.procs[i], &c) || !c.holder ||
		    !c.undeclared)
			continue;
		for (at = n; at > 0 && top[at - 1].undeclared < c.undeclared; at--)
			if (at < TRUTH_EXPLAIN_TOP) {
				top[at] = top[at - 1];
				pids[at] = pids[at - 1];
			}
		if (at < TRUTH_EXPLAIN_TOP) {
			top[at] = c;
			pids[at] = d->truth.procs[i].pid;
			n += n < TRUTH_EXPLAIN_TOP;
		}
	}
	return n;
}

size_t policy_truth_explain(const struct state *s, const struct device *d, char *buf, size_t len)
{
	struct policy_charge top[TRUTH_EXPLAIN_TOP];
	int32_t pids[TRUTH_EXPLAIN_TOP];
	char x[SIZE_FORMAT_MAX], y[SIZE_FORMAT_MAX];
	size_t used = 0;
	unsigned n;

	if (len == 0)
		return 0;
	buf[0] = '\0';
	if (!d->truth.measurable || d->truth.undeclared == 0)
		return 0;
	n = top_over(s, d, top, pids);
	for (unsigned i = 0; i < n; i++) {
		const char *name = top[i].holder->name;

		put(buf, len, &used, "; %s%s(pid %d) holds %s, declared %s", name,
		    name[0] ? " " : "", (int)pids[i], size_format(top[i].measured, x, sizeof(x)),
		    size_format(top[i].declared, y, sizeof(y)));
	}
	if (d->truth.outside)
		put(buf, len, &used, "; processes outside rocmmemd hold %s (%u of them)",
		    size_format(d->truth.outside, x, sizeof(x)), d->truth.outside_procs);
	return used;
}
