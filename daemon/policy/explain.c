/* SPDX-License-Identifier: MIT */
/* explain.c: why a request is not granted now, in the words the client and the log get. */
#include "explain.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "reconcile.h"
#include "size.h"
#include "state/state.h"
#include "text.h"

/* How many holders or models one list names before it sums up the rest. */
#define EXPLAIN_TOP 3u

/* Room for one part of an explanation: a list of EXPLAIN_TOP names and sizes, or a sentence. */
#define PART_MAX 512u

/* Text being built; a part that does not fit is cut (parts are sized never to be). */
struct line {
	char buf[PART_MAX];
	size_t used;
};

static void line_add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line_add(struct line *l, const char *fmt, ...)
{
	size_t room = sizeof(l->buf) - l->used;
	va_list ap;
	int n;

	if (room <= 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->used, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->used += (size_t)n < room ? (size_t)n : room - 1;
}

/* The largest few of something, by bytes, and the sum of all of them. */
struct top {
	const void *item[EXPLAIN_TOP];
	uint64_t bytes[EXPLAIN_TOP];
	unsigned n;	/* named: at most EXPLAIN_TOP */
	unsigned count; /* added */
	uint64_t total; /* bytes of all added */
};

static void top_add(struct top *t, const void *item, uint64_t bytes)
{
	t->count++;
	t->total += bytes;
	/* Insertion into a short sorted list; whatever falls off its end is "the rest". */
	for (unsigned i = 0; i < t->n && item; i++) {
		if (bytes > t->bytes[i]) {
			const void *ti = t->item[i];
			uint64_t tb = t->bytes[i];

			t->item[i] = item;
			t->bytes[i] = bytes;
			item = ti;
			bytes = tb;
		}
	}
	if (item && t->n < EXPLAIN_TOP) {
		t->item[t->n] = item;
		t->bytes[t->n] = bytes;
		t->n++;
	}
}

/* top_rest adds " and N others: X" for what the list does not name (noun: "others"). */
static void top_rest(const struct top *t, struct line *l)
{
	char sz[SIZE_FORMAT_MAX];
	uint64_t named = 0;

	if (t->count <= t->n)
		return;
	for (unsigned i = 0; i < t->n; i++)
		named += t->bytes[i];
	line_add(l, " and %u others: %s", t->count - t->n,
		 size_format(t->total - named, sz, sizeof(sz)));
}

/* What the explanation and its suggestion are made of, gathered in one pass. */
struct facts {
	uint64_t now_ms;
	uint64_t evict_deadline_ms; /* what owners have to unload */
	uint64_t need;		    /* bytes the request needs now, rounded */
	uint64_t free;
	uint64_t releasing; /* released leases the backend is freeing */
	uint64_t evicting;  /* held by models being evicted */
	unsigned ahead;	    /* requests queued before it */
	uint64_t ahead_bytes;
	uint64_t oldest_ms;	   /* how long the head of the queue has waited */
	struct top holders;	   /* other clients, by what they hold on the device */
	uint64_t own_bytes;	   /* what the requesting client holds there */
	uint64_t own_leases;	   /* of which leases */
	struct top evictable;	   /* idle unpinned models (the request's own aside) */
	struct top kept;	   /* resident models that will not be evicted for it */
	struct top pinned;	   /* pinned models not in use: unpinning would free them */
	struct top own_busy;	   /* the requester's own models in use */
	struct top being_evicted;  /* models whose owners were asked to unload */
	const struct model *rival; /* another client's model in use of an excluded class */
	bool rival_idle;	   /* an excluded class is resident but evictable */
	/* After a restart: what processes of the previous daemon have yet to re-declare. */
	struct adopt_awaiting awaiting[EXPLAIN_TOP];
	size_t nawaiting; /* processes in all (beyond EXPLAIN_TOP too) */
	uint64_t awaiting_bytes;
	uint64_t grace_left_ms;
};

static bool excludes(const struct device *d, const struct model *want, const struct model *m)
{
	return want && m != want &&
	       class_exclusion_conflict(&d->exclusive, want->model_class, m->model_class);
}

static void gather(const struct state *s, const struct device *d, const struct waiter *w,
		   uint64_t need, uint64_t now_ms, struct facts *f)
{
	const struct holder *c;
	const struct waiter *q;
	const struct model *m;
	size_t at = 0;

	memset(f, 0, sizeof(*f));
	f->now_ms = now_ms;
	f->need = need;
	f->free = device_free(d);
	f->releasing = d->releasing;
	f->evicting = policy_evicting_bytes(d);
	f->oldest_ms = device_oldest_wait_ms(d, f->now_ms);
	f->nawaiting = adoption_awaiting(&s->adoption, (int)d->index, f->awaiting, EXPLAIN_TOP);
	if (f->nawaiting) {
		f->awaiting_bytes = adoption_awaiting_bytes(&s->adoption, d->index);
		f->grace_left_ms = adoption_grace_left_ms(&s->adoption, &s->deadlines, now_ms);
	}
	/* Ahead: everything queued before it (a request refused at once is in no queue). */
	TAILQ_FOREACH (q, &d->queue.head, queue_link) {
		if (q == w)
			break;
		f->ahead++;
		f->ahead_bytes += policy_need(q);
	}
	/* The holders still connected, oldest first. */
	while ((c = idtable_each(&s->holders, &at, NULL))) {
		uint64_t bytes = holder_bytes_on(c, d->index, NULL);

		if (c == w->holder) {
			f->own_bytes = bytes;
			f->own_leases = c->device_bytes[d->index];
		} else if (bytes) {
			top_add(&f->holders, c, bytes);
		}
	}
	TAILQ_FOREACH (m, &d->models, device_link) {
		uint64_t bytes = model_resident(m);
		enum model_state state = model_state(m);

		if (state == MODEL_EVICTING) {
			top_add(&f->being_evicted, m, bytes);
			continue;
		}
		if (bytes == 0 && state != MODEL_IN_USE)
			continue;
		if (excludes(d, w->model, m)) {
			if (state == MODEL_IN_USE && m->owner != w->holder && !f->rival)
				f->rival = m;
			else if (model_evictable(m))
				f->rival_idle = true;
		}
		if (bytes == 0)
			continue;
		if (m != w->model && model_evictable(m)) {
			top_add(&f->evictable, m, bytes);
			continue;
		}
		top_add(&f->kept, m, bytes);
		if (m == w->model)
			continue;
		if (state == MODEL_IN_USE && m->owner == w->holder)
			top_add(&f->own_busy, m, bytes);
		else if (state != MODEL_IN_USE && m->pinned)
			top_add(&f->pinned, m, bytes);
	}
}

static const char *ms_text(uint64_t ms, char *buf, size_t len)
{
	if (ms < 1000)
		snprintf(buf, len, "%" PRIu64 " ms", ms);
	else
		snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
	return buf;
}

/* kept_reason says why a resident model is not evicted for the request. */
static const char *kept_reason(const struct model *m, const struct waiter *w, char *buf, size_t len)
{
	if (m == w->model)
		snprintf(buf, len, "is the request's own model");
	else if (model_state(m) == MODEL_IN_USE && m->owner == w->holder)
		snprintf(buf, len, "in use by this client");
	else if (model_state(m) == MODEL_IN_USE)
		snprintf(buf, len, "in use by pid %d", (int)m->owner->who.pid);
	else
		snprintf(buf, len, "pinned");
	return buf;
}

/* suggest_wait: waiting alone would do (coming back and evictable memory are enough). */
static void suggest_wait(const struct waiter *w, const struct facts *f, uint64_t coming,
			 struct line *s)
{
	bool at_once = w->timeout_ms == 0;
	char x[SIZE_FORMAT_MAX];

	if (at_once)
		line_add(s, "wait longer: timeout 0 never waits%s",
			 f->ahead	      ? ", and earlier requests come first"
			 : f->need <= f->free ? ""
			 : f->need <= coming  ? " for memory being freed"
					      : " for idle models to be evicted");
	else if (f->ahead)
		line_add(s, "wait longer: %u earlier request(s) for %s are served first", f->ahead,
			 size_format(f->ahead_bytes, x, sizeof(x)));
	else if (coming > f->free)
		line_add(s,
			 "wait longer: %s is still being freed (owners have %.3g s to "
			 "unload)",
			 size_format(coming - f->free, x, sizeof(x)),
			 (double)f->evict_deadline_ms / 1000.0);
	else
		line_add(s, "wait longer");
}

/* suggest_others: only other clients can make room: ask for less, or wait for them. */
static void suggest_others(const struct device *d, const struct waiter *w, const struct facts *f,
			   struct line *s)
{
	bool at_once = w->timeout_ms == 0;
	char x[SIZE_FORMAT_MAX], y[SIZE_FORMAT_MAX], who[128];
	const struct holder *top = f->holders.n ? f->holders.item[0] : NULL;
	uint64_t most;

	most = at_once ? (f->ahead ? 0 : device_largest_grantable(d))
		       : device_largest_with_eviction(d);
	if (most >= d->granule && top)
		line_add(s, "ask for at most %s, or wait%s for %s to release some of its %s",
			 size_format(most, x, sizeof(x)),
			 at_once ? " (timeout 0 never waits)" : " longer",
			 holder_label(top, who, sizeof(who)),
			 size_format(f->holders.bytes[0], y, sizeof(y)));
	else if (most >= d->granule)
		line_add(s, "ask for at most %s", size_format(most, x, sizeof(x)));
	else if (top)
		line_add(s, "wait%s for %s to release some of its %s",
			 at_once ? " (timeout 0 never waits)" : " longer",
			 holder_label(top, who, sizeof(who)),
			 size_format(f->holders.bytes[0], y, sizeof(y)));
	else if (f->nawaiting)
		line_add(s,
			 "wait%s for pid %d to re-declare its memory, or for the grace period to "
			 "end",
			 at_once ? " (timeout 0 never waits)" : " longer", (int)f->awaiting[0].pid);
	else
		line_add(s, "wait longer for memory to come back");
	if (most < d->granule && d->total > d->budget)
		line_add(s, ", or raise --budget (now %s)", size_format(d->budget, x, sizeof(x)));
}

/* suggest writes the one remedy that fits best: the requester's own means first. */
static void suggest(const struct device *d, const struct waiter *w, const struct facts *f,
		    struct line *s)
{
	bool at_once = w->timeout_ms == 0;
	uint64_t coming = f->free + f->releasing + f->evicting;
	uint64_t reach = coming + f->evictable.total, gap;
	char x[SIZE_FORMAT_MAX], who[128];

	if (f->rival) {
		line_add(s, "%s for %s to release %s '%s': --exclusive keeps it apart from %s",
			 at_once ? "wait (timeout 0 never waits)" : "wait longer",
			 holder_label(f->rival->owner, who, sizeof(who)),
			 model_class_name(f->rival->model_class), f->rival->name,
			 model_class_name(w->model->model_class));
		return;
	}
	if (f->need <= reach) {
		suggest_wait(w, f, coming, s);
		return;
	}
	gap = f->need - reach;
	if (f->own_busy.n && f->own_busy.total >= gap) {
		const struct model *m = f->own_busy.item[0];

		line_add(s, "release this client's models in use first ('%s' holds %s)", m->name,
			 size_format(f->own_busy.bytes[0], x, sizeof(x)));
		return;
	}
	if (f->own_leases >= gap) {
		line_add(s, "release some of this client's own %s of leases first",
			 size_format(f->own_leases, x, sizeof(x)));
		return;
	}
	if (f->pinned.n && f->pinned.total >= gap) {
		const struct model *m = f->pinned.item[0];

		if (f->pinned.bytes[0] >= gap)
			line_add(s, "unpin model '%s' (rocmmemctl unpin %" PRIu64 ")", m->name,
				 m->id);
		else
			line_add(s,
				 "unpin pinned models (they hold %s; the largest: rocmmemctl unpin "
				 "%" PRIu64 " for '%s')",
				 size_format(f->pinned.total, x, sizeof(x)), m->id, m->name);
		return;
	}
	suggest_others(d, w, f, s);
}

/* part_blockers: the model's own unload, an exclusive rival in use, requests queued before it. */
static void part_blockers(const struct device *d, const struct waiter *w, const struct facts *f,
			  struct line *l)
{
	char x[SIZE_FORMAT_MAX], t[32], who[128];

	if (w->model && w->model->evicting)
		line_add(l, "; the model itself is still being unloaded (%s)",
			 size_format(model_resident(w->model), x, sizeof(x)));
	if (f->rival)
		line_add(l,
			 "; %s '%s' (%s) of %s is in use, and its class excludes %s on device %u",
			 model_class_name(f->rival->model_class), f->rival->name,
			 size_format(model_resident(f->rival), x, sizeof(x)),
			 holder_label(f->rival->owner, who, sizeof(who)),
			 model_class_name(w->model->model_class), d->index);
	if (f->ahead)
		line_add(l, "; %u earlier request(s) for %s wait ahead (the oldest for %s)",
			 f->ahead, size_format(f->ahead_bytes, x, sizeof(x)),
			 ms_text(f->oldest_ms, t, sizeof(t)));
}

/* part_freeing: memory on its way back, released leases and models being unloaded. */
static void part_freeing(const struct facts *f, struct line *l)
{
	char x[SIZE_FORMAT_MAX], y[SIZE_FORMAT_MAX], t[32];

	if (!f->releasing && !f->evicting)
		return;
	line_add(l, "; %s is being freed", size_format(f->releasing + f->evicting, x, sizeof(x)));
	if (f->releasing && f->evicting)
		line_add(l, " (%s of released leases)", size_format(f->releasing, x, sizeof(x)));
	for (unsigned i = 0; i < f->being_evicted.n; i++) {
		const struct model *m = f->being_evicted.item[i];

		line_add(l, "%s'%s' %s asked %s ago", i ? ", " : ": models being evicted ", m->name,
			 size_format(f->being_evicted.bytes[i], y, sizeof(y)),
			 ms_text(f->now_ms - m->evict_started_ms, t, sizeof(t)));
	}
	top_rest(&f->being_evicted, l);
}

/* part_holders: who holds the memory, largest first, then what the requester holds itself. */
static void part_holders(const struct device *d, const struct facts *f, struct line *l)
{
	char x[SIZE_FORMAT_MAX], y[SIZE_FORMAT_MAX], who[128];

	line_add(l, "; held by ");
	if (!f->holders.n)
		line_add(l, f->nawaiting ? "no connected client" : "no other client");
	for (unsigned i = 0; i < f->holders.n; i++) {
		const struct holder *c = f->holders.item[i];
		uint64_t in_models = 0;

		holder_bytes_on(c, d->index, &in_models);
		line_add(l, "%s%s %s", i ? ", " : "", holder_label(c, who, sizeof(who)),
			 size_format(f->holders.bytes[i], x, sizeof(x)));
		if (in_models)
			line_add(l, " (%s in models)", size_format(in_models, y, sizeof(y)));
	}
	top_rest(&f->holders, l);
	if (f->own_bytes)
		line_add(l, "; this client holds %s", size_format(f->own_bytes, x, sizeof(x)));
}

/* part_awaiting: after a restart, what is accounted for processes still to re-declare it. */
static void part_awaiting(const struct facts *f, struct line *l)
{
	char x[SIZE_FORMAT_MAX], t[32];
	size_t shown = f->nawaiting < EXPLAIN_TOP ? f->nawaiting : EXPLAIN_TOP;

	for (size_t i = 0; i < shown; i++) {
		const struct adopt_awaiting *w = &f->awaiting[i];

		line_add(l, "%s%s awaits re-declaration by pid %d", i ? ", " : "; ",
			 size_format(w->lease_bytes + w->reserved_bytes, x, sizeof(x)),
			 (int)w->pid);
	}
	if (f->nawaiting > shown)
		line_add(l, " and %zu other process(es) (%s in all)", f->nawaiting - shown,
			 size_format(f->awaiting_bytes, x, sizeof(x)));
	if (f->nawaiting)
		line_add(l, " until the restart's grace period ends in %s",
			 ms_text(f->grace_left_ms, t, sizeof(t)));
}

/* part_evictable: idle models that could be unloaded for it, and why they were not. */
static void part_evictable(const struct waiter *w, const struct facts *f, struct line *l)
{
	char x[SIZE_FORMAT_MAX];
	uint64_t coming = f->free + f->releasing + f->evicting;

	if (!f->evictable.count)
		return;
	line_add(l, "; evictable: %s in %u idle model(s) (",
		 size_format(f->evictable.total, x, sizeof(x)), f->evictable.count);
	for (unsigned i = 0; i < f->evictable.n; i++) {
		const struct model *m = f->evictable.item[i];

		line_add(l, "%s'%s' %s", i ? ", " : "", m->name,
			 size_format(f->evictable.bytes[i], x, sizeof(x)));
	}
	top_rest(&f->evictable, l);
	line_add(l, ")");
	if (w->timeout_ms == 0)
		line_add(l, ", not asked to unload: timeout 0 never waits for that");
	else if (f->ahead)
		line_add(l, ", not asked to unload for it: earlier requests come first");
	else if (coming + f->evictable.total < f->need && !f->rival_idle)
		line_add(l, ", not asked to unload: all of it would still be too little");
}

/* part_kept: resident models that are not evicted for it, and why. */
static void part_kept(const struct waiter *w, const struct facts *f, struct line *l)
{
	char x[SIZE_FORMAT_MAX], why[64];

	if (!f->kept.count)
		return;
	line_add(l, "; not evictable: ");
	for (unsigned i = 0; i < f->kept.n; i++) {
		const struct model *m = f->kept.item[i];

		line_add(l, "%s'%s' %s %s", i ? ", " : "", m->name,
			 size_format(f->kept.bytes[i], x, sizeof(x)),
			 kept_reason(m, w, why, sizeof(why)));
	}
	top_rest(&f->kept, l);
}

/* put_part appends a part whole if it fits below room, and empties it for the next one. */
static void put_part(char *buf, size_t *used, size_t room, struct line *part)
{
	if (*used + part->used < room) {
		memcpy(buf + *used, part->buf, part->used + 1);
		*used += part->used;
	}
	part->used = 0;
	part->buf[0] = '\0';
}

void explain_refusal(const struct state *s, const struct policy_config *cfg, const struct device *d,
		     const struct waiter *w, uint64_t need, uint64_t now_ms, char *buf, size_t len)
{
	static const char sep[] = "; suggestion: ";
	char req[SIZE_FORMAT_MAX], rounded[SIZE_FORMAT_MAX], gran[SIZE_FORMAT_MAX];
	char fr[SIZE_FORMAT_MAX], bud[SIZE_FORMAT_MAX], now[SIZE_FORMAT_MAX];
	char evict[SIZE_FORMAT_MAX];
	struct line core = {.used = 0}, sug = {.used = 0}, part = {.used = 0};
	size_t cap = len < EXPLAIN_MAX + 1 ? len : EXPLAIN_MAX + 1, used, room;
	uint64_t fits, fits_evicting;
	struct facts f;

	if (len == 0)
		return;
	gather(s, d, w, need, now_ms, &f);
	f.evict_deadline_ms = cfg->evict_deadline_ms;
	fits = device_largest_grantable(d);
	fits_evicting = device_largest_with_eviction(d);
	line_add(&core, "requested %s", size_format(w->requested, req, sizeof(req)));
	if (w->requested != need)
		line_add(&core, " (%s in %s granules)", size_format(need, rounded, sizeof(rounded)),
			 size_format(d->granule, gran, sizeof(gran)));
	line_add(&core,
		 " on device %u (%s): %s of its %s budget is free; the largest request that fits "
		 "now is %s",
		 d->index, d->name, size_format(f.free, fr, sizeof(fr)),
		 size_format(d->budget, bud, sizeof(bud)), size_format(fits, now, sizeof(now)));
	if (fits_evicting != fits)
		line_add(&core, " (with eviction %s)",
			 size_format(fits_evicting, evict, sizeof(evict)));
	suggest(d, w, &f, &sug);
	/* The numbers first and the suggestion last, always; between them the parts, in order of
	 * importance, while they fit whole. */
	used = text_copy(buf, cap, core.buf);
	room = cap > sizeof(sep) - 1 + sug.used ? cap - (sizeof(sep) - 1 + sug.used) : 0;
	part_blockers(d, w, &f, &part);
	put_part(buf, &used, room, &part);
	/* What the measured books add: use nobody declared (policy/reconcile.c). */
	part.used = policy_truth_explain(s, d, part.buf, sizeof(part.buf));
	put_part(buf, &used, room, &part);
	part_freeing(&f, &part);
	put_part(buf, &used, room, &part);
	part_holders(d, &f, &part);
	put_part(buf, &used, room, &part);
	part_awaiting(&f, &part);
	put_part(buf, &used, room, &part);
	part_evictable(w, &f, &part);
	put_part(buf, &used, room, &part);
	part_kept(w, &f, &part);
	put_part(buf, &used, room, &part);
	used += text_copy(buf + used, cap - used, sep);
	text_copy(buf + used, cap - used, sug.buf);
}

void explain_too_big(const struct device *d, uint64_t requested, char *buf, size_t len)
{
	char req[SIZE_FORMAT_MAX], bud[SIZE_FORMAT_MAX], total[SIZE_FORMAT_MAX];

	snprintf(
	    buf, len,
	    "requested %s on device %u (%s), more than its whole budget of %s: it can never be "
	    "granted; suggestion: ask for at most %s%s%s%s",
	    size_format(requested, req, sizeof(req)), d->index, d->name,
	    size_format(d->budget, bud, sizeof(bud)), bud,
	    d->total > d->budget ? ", or raise --budget (the device has " : "",
	    d->total > d->budget ? size_format(d->total, total, sizeof(total)) : "",
	    d->total > d->budget ? ")" : "");
}
