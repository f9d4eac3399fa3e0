/* SPDX-License-Identifier: MIT */
/* check.c: the books recounted from scratch and compared with what they say. */
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"

/* fail writes why and returns -EUCLEAN. */
static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

/* check_deadline says whether slot names a deadline of (kind, id) due at due_ms. */
static bool check_deadline(const struct state *s, uint32_t slot, uint32_t kind, uint64_t id,
			   uint64_t due_ms)
{
	const struct heap_entry *e = heap_get(&s->deadlines, slot);

	return e && e->kind == kind && e->id == id && e->due_ms == due_ms;
}

/* check_hold says whether m's maximum hold deadline is its own and m is in use (its due time
 * is the settings', which the books do not know). */
static bool check_hold(const struct state *s, const struct model *m)
{
	const struct heap_entry *e = heap_get(&s->deadlines, m->hold_slot);

	return e && e->kind == DUE_HOLD && e->id == m->id && m->use_count > 0 &&
	       e->due_ms > m->in_use_since_ms;
}

/* check_queue checks device d's queue; *deadlines counts the waiters' deadlines. */
static int check_queue(const struct state *s, const struct device *d, unsigned *deadlines,
		       char *why, size_t len)
{
	const struct waiter *w;
	unsigned n = 0;
	uint64_t last = 0;

	TAILQ_FOREACH (w, &d->queue.head, queue_link) {
		n++;
		if (w->device != d->index || !w->holder || w->seq <= last)
			return fail(why, len, "device %u: waiter %" PRIu64 " is out of place",
				    d->index, w->seq);
		last = w->seq;
		if (state_waiter_find(s, w->seq) != w)
			return fail(why, len, "waiter %" PRIu64 " is not in the table", w->seq);
		if (w->model && (w->model->device != d->index || w->model->owner != w->holder))
			return fail(why, len, "waiter %" PRIu64 " waits for another's model",
				    w->seq);
		if ((w->due_ms != UINT64_MAX) != (w->heap_slot != 0) ||
		    (w->heap_slot &&
		     !check_deadline(s, w->heap_slot, DUE_WAITER, w->seq, w->due_ms)))
			return fail(why, len, "waiter %" PRIu64 ": its deadline is wrong", w->seq);
		if (w->heap_slot)
			(*deadlines)++;
	}
	if (n != d->queue.count)
		return fail(why, len, "device %u: %u waiters queued, %u counted", d->index, n,
			    d->queue.count);
	return 0;
}

/* check_models checks the models on device d; *deadlines counts their deadlines. */
static int check_models(const struct state *s, const struct device *d, unsigned *deadlines,
			char *why, size_t len)
{
	const struct model *m;
	uint64_t reserved = 0;
	unsigned n = 0;

	TAILQ_FOREACH (m, &d->models, device_link) {
		n++;
		reserved += m->reservation;
		if (m->device != d->index || !m->owner || state_model_find(s, m->id) != m)
			return fail(why, len, "model %" PRIu64 " is out of place", m->id);
		if (m->evicting != (m->heap_slot != 0) ||
		    (m->heap_slot &&
		     !check_deadline(s, m->heap_slot, DUE_EVICTION, m->id, m->evict_due_ms)))
			return fail(why, len, "model %" PRIu64 ": its eviction deadline is wrong",
				    m->id);
		if (m->heap_slot)
			(*deadlines)++;
		if (m->hold_slot && !check_hold(s, m))
			return fail(why, len, "model %" PRIu64 ": its maximum hold is wrong",
				    m->id);
		if (m->hold_slot)
			(*deadlines)++;
	}
	if (n != d->nmodels)
		return fail(why, len, "device %u: %u models linked, %u counted", d->index, n,
			    d->nmodels);
	if (reserved != d->reserved)
		return fail(why, len,
			    "device %u: %" PRIu64 " bytes reserved by models, %" PRIu64 " counted",
			    d->index, reserved, d->reserved);
	return 0;
}

/* check_lists checks h's lists against its counts and bytes. */
static int check_lists(const struct holder *h, char *why, size_t len)
{
	uint64_t bytes = 0, on[BACKEND_MAX_DEVICES] = {0};
	const struct lease *l;
	const struct waiter *w;
	const struct model *m;
	unsigned leases = 0, waiters = 0, models = 0;

	TAILQ_FOREACH (l, &h->leases, holder_link) {
		leases++;
		bytes += l->size;
		on[l->device] += l->size;
		if (l->owner != h ||
		    (l->model && (l->model->owner != h || l->model->device != l->device)))
			return fail(why, len, "lease %" PRIu64 " is out of place", l->id);
	}
	TAILQ_FOREACH (w, &h->waiters, holder_link) {
		waiters++;
		if (w->holder != h)
			return fail(why, len, "waiter %" PRIu64 " is another's", w->seq);
	}
	TAILQ_FOREACH (m, &h->models, holder_link) {
		models++;
		if (m->owner != h)
			return fail(why, len, "model %" PRIu64 " is another's", m->id);
	}
	if (leases != h->lease_count || bytes != h->leased_bytes ||
	    memcmp(on, h->device_bytes, sizeof(on)) != 0)
		return fail(why, len,
			    "holder %" PRIu64 ": %u leases of %" PRIu64
			    " bytes listed, %u of %" PRIu64 " counted (or per device differ)",
			    h->id, leases, bytes, h->lease_count, h->leased_bytes);
	if (waiters != h->waiter_count || models != h->model_count)
		return fail(why, len,
			    "holder %" PRIu64
			    ": %u waiters and %u models listed, %u and %u counted",
			    h->id, waiters, models, h->waiter_count, h->model_count);
	return 0;
}

/* check_model_sums checks each of h's models' tagged lease bytes and waiters. */
static int check_model_sums(const struct holder *h, char *why, size_t len)
{
	const struct model *m;

	TAILQ_FOREACH (m, &h->models, holder_link) {
		const struct lease *l;
		const struct waiter *w;
		uint64_t tagged = 0, listed = 0;
		unsigned waiters = 0;

		TAILQ_FOREACH (l, &h->leases, holder_link)
			if (l->model == m)
				tagged += l->size;
		/* Its own list holds exactly those: each of them, none other. */
		TAILQ_FOREACH (l, &m->leases, model_link) {
			if (l->model != m || l->owner != h)
				return fail(why, len,
					    "model %" PRIu64 " lists lease %" PRIu64
					    " that is not tagged with it",
					    m->id, l->id);
			listed += l->size;
		}
		if (listed != tagged)
			return fail(why, len,
				    "model %" PRIu64 ": lists %" PRIu64 " bytes of leases, %" PRIu64
				    " tagged",
				    m->id, listed, tagged);
		TAILQ_FOREACH (w, &h->waiters, holder_link)
			if (w->model == m)
				waiters++;
		if (tagged != m->lease_bytes || waiters != m->waiters)
			return fail(why, len,
				    "model %" PRIu64 ": %" PRIu64 " bytes of tagged leases and %u "
				    "waiters, %" PRIu64 " and %u counted",
				    m->id, tagged, waiters, m->lease_bytes, m->waiters);
	}
	return 0;
}

/* check_warm says whether a's warm ranges are whole granules inside it and add up; -1 if not. */
static int check_warm(const struct arena *a)
{
	uint64_t bytes = 0;

	if (a->nwarm > ARENA_WARM_MAX)
		return -1;
	for (unsigned i = 0; i < a->nwarm; i++) {
		const struct arena_warm *w = &a->warm[i];

		if (w->bytes == 0 || w->offset % a->granule || w->bytes % a->granule ||
		    w->offset > a->size || w->bytes > a->size - w->offset ||
		    (i && w->since_ms < a->warm[i - 1].since_ms))
			return -1;
		bytes += w->bytes;
	}
	return bytes == a->warm_bytes ? 0 : -1;
}

/* check_arenas checks each of h's arenas: its leases' ranges and bytes, and its allocator. */
static int check_arenas(const struct holder *h, char *why, size_t len)
{
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++) {
		const struct arena *a = h->arena[i];
		const struct lease *l;
		uint64_t used = 0;
		uint32_t leases = 0;

		if (!a)
			continue;
		TAILQ_FOREACH (l, &h->leases, holder_link) {
			if (l->arena != a)
				continue;
			leases++;
			used += l->size;
			if (l->device != i || l->offset > a->size || l->size > a->size - l->offset)
				return fail(why, len, "lease %" PRIu64 " lies outside its arena",
					    l->id);
		}
		if (a->device != i || leases != a->leases || used != a->used ||
		    arena_free_bytes(a) + used + a->warm_bytes != a->size ||
		    ranges_check(&a->ranges) < 0 || check_warm(a) < 0)
			return fail(why, len,
				    "holder %" PRIu64 ": arena %" PRIu64
				    " has %u leases of %" PRIu64 " bytes listed, %u of %" PRIu64
				    " counted, %" PRIu64 " free of %" PRIu64,
				    h->id, a->id, leases, used, a->leases, a->used,
				    arena_free_bytes(a), a->size);
	}
	return 0;
}

/* check_warm_due says whether h's DUE_ARENA deadline is there exactly while it keeps warm
 * ranges (counted in *deadlines); -1 if not. */
static int check_warm_due(const struct state *s, const struct holder *h, unsigned *deadlines)
{
	const struct heap_entry *e;
	uint64_t warm = 0;

	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++)
		warm += h->arena[i] ? h->arena[i]->warm_bytes : 0;
	if (!h->arena_warm_slot)
		return warm ? -1 : 0;
	(*deadlines)++;
	e = heap_get(&s->deadlines, h->arena_warm_slot);
	return warm && e && e->kind == DUE_ARENA && e->id == h->id ? 0 : -1;
}

/* check_holders checks every holder; *leases and *waiters sum their counts, *deadlines its
 * deadlines. */
static int check_holders(const struct state *s, uint64_t *leases, uint64_t *waiters,
			 unsigned *deadlines, char *why, size_t len)
{
	const struct holder *h;
	int err;

	for (h = state_holder_next(s, 0); h; h = state_holder_next(s, h->id)) {
		err = check_lists(h, why, len);
		if (!err && check_warm_due(s, h, deadlines) < 0)
			err =
			    fail(why, len,
				 "holder %" PRIu64 ": warm arena ranges and their deadline differ",
				 h->id);
		if (!err)
			err = check_model_sums(h, why, len);
		if (!err)
			err = check_arenas(h, why, len);
		if (err)
			return err;
		*leases += h->lease_count;
		*waiters += h->waiter_count;
	}
	return 0;
}

/* check_leases checks the lease table against the devices' counts and the holders'. */
static int check_leases(const struct state *s, uint64_t holders_leases, char *why, size_t len)
{
	uint64_t count[BACKEND_MAX_DEVICES] = {0}, bytes[BACKEND_MAX_DEVICES] = {0}, total = 0;
	const struct lease *l;

	for (l = lease_table_next(&s->leases, 0); l; l = lease_table_next(&s->leases, l->id)) {
		if (l->device >= s->ndevices)
			return fail(why, len, "lease %" PRIu64 " on no device", l->id);
		count[l->device]++;
		bytes[l->device] += l->size;
		total++;
	}
	if (total != holders_leases)
		return fail(why, len, "%" PRIu64 " leases in the table, %" PRIu64 " held", total,
			    holders_leases);
	for (unsigned i = 0; i < s->ndevices; i++) {
		const struct device *d = &s->devices[i];

		if (count[i] > d->leases || bytes[i] > d->leased || d->releasing > d->leased)
			return fail(why, len,
				    "device %u: %" PRIu64 " leases of %" PRIu64
				    " bytes, counted %" PRIu64 " leases and %" PRIu64
				    " bytes leased (%" PRIu64 " releasing)",
				    i, count[i], bytes[i], d->leases, d->leased, d->releasing);
	}
	return 0;
}

int state_check(const struct state *s, char *why, size_t why_len)
{
	uint64_t leases = 0, waiters = 0, queued = 0, id;
	unsigned deadlines = s->adoption.grace_slot ? 1 : 0;
	int err = 0;

	for (unsigned i = 0; i < s->ndevices && !err; i++) {
		err = check_queue(s, &s->devices[i], &deadlines, why, why_len);
		if (!err)
			err = check_models(s, &s->devices[i], &deadlines, why, why_len);
		queued += s->devices[i].queue.count;
	}
	if (!err)
		err = check_holders(s, &leases, &waiters, &deadlines, why, why_len);
	if (!err)
		err = check_leases(s, leases, why, why_len);
	if (err)
		return err;
	if (waiters != queued)
		return fail(why, why_len, "%" PRIu64 " waiters queued, %" PRIu64 " held", queued,
			    waiters);
	for (const void *w = idtable_next(&s->waiters, 0, &id); w;
	     w = idtable_next(&s->waiters, id, &id))
		queued--;
	if (queued != 0)
		return fail(why, why_len, "the waiters' table and the queues differ");
	if (heap_size(&s->deadlines) != deadlines)
		return fail(why, why_len, "%u deadlines, %u belong to something",
			    heap_size(&s->deadlines), deadlines);
	return 0;
}
