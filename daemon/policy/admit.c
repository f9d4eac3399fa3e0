/* SPDX-License-Identifier: MIT */
/*
 * admit.c: a new memory request: granted at once, queued, or refused with its reason (lost
 * device, too big, never satisfiable, limits and quotas, timeout 0); model registrations.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "explain.h"
#include "internal.h"
#include "size.h"
#include "text.h"

/* denial refuses a memory request: the explanation, after the model's name for a model's. */
static void denial(struct policy_decision *d, const struct waiter *t, int err, const char *why)
{
	if (t->model)
		policy_refuse(d, REFUSE_DENIAL, err, "model '%s': %s", t->model->name, why);
	else
		policy_refuse(d, REFUSE_DENIAL, err, "%s", why);
}

/* limit_hit refuses with err and a limit hit (a log line when log is not NULL). */
static void limit_hit(struct policy_decision *d, enum limit_id id, const char *log)
{
	d->refusal.kind = REFUSE_LIMIT;
	d->refusal.limit = id;
	snprintf(d->refusal.log, sizeof(d->refusal.log), "%s", log ? log : "");
}

/* waiting_bytes is what h's queued requests would add once granted. */
static uint64_t waiting_bytes(const struct holder *h)
{
	const struct waiter *w;
	uint64_t bytes = 0;

	TAILQ_FOREACH (w, &h->waiters, holder_link)
		bytes += policy_need(w);
	return bytes;
}

/* over_quota refuses bytes more for h's uid beyond the bytes-per-uid quota. */
static bool over_quota(const struct policy_config *cfg, const struct holder *h, uint64_t bytes,
		       struct policy_decision *d)
{
	uint64_t quota = cfg->limits.max_bytes_per_uid, held = 0, waiting = 0;
	const struct uid_account *u = h->account;
	char q[SIZE_FORMAT_MAX], hs[SIZE_FORMAT_MAX], w[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];
	char label[128], log[POLICY_TEXT_MAX];
	const struct holder *k;

	if (quota == 0 || !u)
		return false;
	/* Held and waited for, across every connection of the uid: one quota for them all. */
	TAILQ_FOREACH (k, &u->holders, uid_link) {
		held += holder_bytes(k);
		waiting += waiting_bytes(k);
	}
	if (held + waiting <= quota && bytes <= quota - held - waiting)
		return false;
	size_format(quota, q, sizeof(q));
	size_format(held, hs, sizeof(hs));
	size_format(waiting, w, sizeof(w));
	size_format(bytes, b, sizeof(b));
	policy_refuse(d, REFUSE_LIMIT, -EDQUOT,
		      "uid %u would go over its memory quota of %s (bytes_per_uid): it holds %s "
		      "and waits for %s in %u connection(s), and this request needs %s",
		      (unsigned)h->who.uid, q, hs, w, u->connections, b);
	snprintf(log, sizeof(log),
		 "refused %s %s: uid %u would go over its quota of %s (bytes_per_uid)",
		 holder_label(h, label, sizeof(label)), b, (unsigned)h->who.uid, q);
	limit_hit(d, LIMIT_BYTES_PER_UID, log);
	return true;
}

void policy_fd_admit(const struct state *s, const struct policy_config *cfg, const struct holder *h,
		     struct policy_decision *d)
{
	const struct uid_account *u = h->account;
	char why[256], label[128], log[POLICY_TEXT_MAX];
	struct fd_caps k;

	policy_decision_init(d);
	fd_caps_compute(cfg->fd_limit, cfg->fd_own, &cfg->limits, &k);
	if (h->fd_leases >= k.per_uid)
		snprintf(why, sizeof(why), "this connection holds %u host lease(s)", h->fd_leases);
	else if (u && u->fd_leases >= k.per_uid)
		snprintf(why, sizeof(why), "uid %u holds %u host lease(s) in %u connection(s)",
			 (unsigned)h->who.uid, u->fd_leases, u->connections);
	else if (s->fd_leases >= k.total)
		snprintf(why, sizeof(why), "the daemon holds %" PRIu64 " host lease(s)",
			 s->fd_leases);
	else
		return;
	policy_refuse(d, REFUSE_LIMIT, -EMFILE,
		      "%s, the most the daemon's descriptor limit of %" PRIu64
		      " allows (each host lease keeps a file descriptor in the daemon: %" PRIu64
		      " per connection and per uid, %" PRIu64
		      " in all; descriptors): release leases, or raise rocmmemd's LimitNOFILE= "
		      "(ulimit -n)",
		      why, k.limit, k.per_uid, k.total);
	snprintf(log, sizeof(log), "refused a host lease to %s: %s",
		 holder_label(h, label, sizeof(label)), why);
	limit_hit(d, LIMIT_DESCRIPTORS, log);
}

/* lease_template checks a lease request and fills t, or refuses in d (false). */
static bool lease_template(const struct state *s, const struct policy_config *cfg,
			   const struct holder *h, const struct policy_request *r, struct waiter *t,
			   struct policy_decision *d)
{
	const struct device *dev = &s->devices[r->device];
	char why[POLICY_TEXT_MAX], who[128];
	uint64_t size;

	if (dev->lost) {
		policy_refuse(d, REFUSE_PLAIN, -ENODEV, "device %u (%s) is unusable: %s", r->device,
			      dev->name, dev->lost_reason);
		return false;
	}
	if (size_round_up(r->requested, dev->granule, &size) < 0 || size > dev->budget) {
		explain_too_big(dev, r->requested, why, sizeof(why));
		policy_refuse(d, REFUSE_DENIAL, -E2BIG, "%s", why);
		return false;
	}
	if (h->lease_count + h->jobs >= cfg->limits.max_leases) {
		policy_refuse(d, REFUSE_LIMIT, -EDQUOT,
			      "this connection already holds %u leases, the most allowed (leases)",
			      cfg->limits.max_leases);
		limit_hit(d, LIMIT_LEASES, NULL);
		return false;
	}
	/* Refused now rather than after waiting; the grant checks again (and counts it). */
	if (device_keeps_fds(dev)) {
		policy_fd_admit(s, cfg, h, d);
		if (d->verdict == POLICY_REFUSE)
			return false;
	}
	t->kind = WAIT_LEASE;
	if (r->model_id != 0) {
		/* A lease tagged with a model counts towards it: the owner's model, this device. */
		t->model = state_model_find(s, r->model_id);
		if (!t->model) {
			policy_refuse(d, REFUSE_PLAIN, -ENOENT,
				      "no model %" PRIu64 " of this client's", r->model_id);
			return false;
		}
		if (t->model->owner != h) {
			policy_refuse(d, REFUSE_ACCESS, -EPERM,
				      "no model %" PRIu64 " of this client's: model %" PRIu64
				      " '%s' belongs to %s",
				      r->model_id, r->model_id, t->model->name,
				      holder_label(t->model->owner, who, sizeof(who)));
			return false;
		}
		if (t->model->device != r->device) {
			policy_refuse(d, REFUSE_PLAIN, -EINVAL,
				      "model '%s' lives on device %u, not %u", t->model->name,
				      t->model->device, r->device);
			return false;
		}
	}
	t->device = r->device;
	t->size = size;
	t->requested = r->requested;
	t->own_memfd = r->own_memfd;
	text_copy(t->tag, sizeof(t->tag), r->tag ? r->tag : ""); /* every lease: no printf */
	return true;
}

/*
 * model_template checks an acquire or resize of one of h's models and fills t (its
 * reservation to target), or decides at once in d (false): refused, in use at once, shrunk.
 */
static bool model_template(const struct state *s, const struct holder *h,
			   const struct policy_request *r, struct waiter *t,
			   struct policy_decision *d)
{
	const struct model *m = policy_owned(s, h, r->model_id, d);
	uint64_t target = 0;

	if (!m)
		return false;
	t->device = m->device;
	t->model = (struct model *)m;
	if (r->kind == POLICY_MODEL_ACQUIRE) {
		/* The count never wraps: a wrapped count would show a model in use as idle. */
		if (m->use_count >= UINT_MAX - m->waiters) {
			policy_refuse(d, REFUSE_PLAIN, -EOVERFLOW,
				      "model %" PRIu64
				      " '%s' is acquired %u times already: release it",
				      m->id, m->name, m->use_count);
			return false;
		}
		/* Resident already, or nothing to reserve (its memory is leases): in use at once.
		 */
		if (!m->evicting && (model_resident(m) > 0 || m->size == 0)) {
			d->verdict = POLICY_GRANT;
			d->grant = GRANT_MODEL_IN_USE;
			return false;
		}
		/* Being evicted: it waits until its memory is back, then needs its whole size. */
		target = m->size;
	} else {
		if (size_round_up(r->requested, s->devices[m->device].granule, &target) < 0) {
			policy_refuse(d, REFUSE_PLAIN, -EINVAL,
				      "resize needs a reservation in bytes");
			return false;
		}
		if (m->evicting) {
			policy_refuse(d, REFUSE_PLAIN, -EBUSY,
				      "model %" PRIu64
				      " '%s' is being evicted: unload it and ack first",
				      m->id, m->name);
			return false;
		}
		if (target <= m->reservation) {
			d->verdict = POLICY_GRANT;
			d->grant = GRANT_MODEL_SHRINK;
			d->bytes = target;
			return false;
		}
	}
	t->kind = r->kind == POLICY_MODEL_ACQUIRE ? WAIT_MODEL_ACQUIRE : WAIT_MODEL_RESIZE;
	t->device = m->device;
	t->model = (struct model *)m;
	t->target = target;
	t->size = policy_need(t);
	t->requested = t->size;
	snprintf(t->tag, sizeof(t->tag), "%s", m->name);
	return true;
}

/* queue_or_refuse decides a checked request t of holder h: the rules after the request's own. */
static void queue_or_refuse(const struct state *s, const struct policy_config *cfg,
			    const struct holder *h, const struct waiter *t, uint64_t now_ms,
			    struct policy_decision *d)
{
	const struct device *dev = &s->devices[t->device];
	uint64_t need = policy_need(t);
	char why[POLICY_TEXT_MAX];
	int err;

	if (dev->lost) {
		policy_refuse(d, REFUSE_PLAIN, -ENODEV, "device %u (%s) is unusable: %s",
			      dev->index, dev->name, dev->lost_reason);
		return;
	}
	/* Over its uid's quota, counting what it waits for: refused, whatever fits. */
	if (over_quota(cfg, h, t->size, d))
		return;
	/* Never: pinned models or this holder's own in-use models stand in the way for good. */
	err = policy_impossible(dev, t, need, why, sizeof(why));
	if (err) {
		denial(d, t, err, why);
		return;
	}
	if (queue_empty(&dev->queue) && policy_fits(dev, t)) {
		d->verdict = POLICY_GRANT;
		d->grant = t->kind == WAIT_LEASE ? GRANT_LEASE : GRANT_MODEL_LOAD;
		if (t->kind == WAIT_MODEL_RESIZE)
			d->grant = GRANT_MODEL_GROW;
		d->bytes = need;
		return;
	}
	if (t->timeout_ms == 0) {
		explain_refusal(s, cfg, dev, t, need, now_ms, why, sizeof(why));
		denial(d, t, -ENOMEM, why);
		return;
	}
	if (h->waiter_count >= cfg->limits.max_pending) {
		policy_refuse(d, REFUSE_LIMIT, -EBUSY,
			      "this connection already has %u requests waiting, the most allowed "
			      "(pending)",
			      cfg->limits.max_pending);
		limit_hit(d, LIMIT_PENDING, NULL);
		return;
	}
	d->verdict = POLICY_QUEUE;
	d->due_ms = t->timeout_ms > 0 ? now_ms + (uint64_t)t->timeout_ms : UINT64_MAX;
}

void policy_admit(const struct state *s, const struct policy_config *cfg,
		  const struct policy_request *r, uint64_t now_ms, struct policy_decision *d)
{
	const struct holder *h = state_holder_find(s, r->holder);
	struct waiter t;
	bool ok;

	policy_decision_init(d);
	d->holder = r->holder;
	if (!h)
		return; /* gone meanwhile: nobody to answer */
	memset(&t, 0, sizeof(t));
	t.holder = (struct holder *)h;
	t.request_id = r->request_id;
	t.timeout_ms = r->timeout_ms;
	if (r->kind == POLICY_LEASE)
		ok = lease_template(s, cfg, h, r, &t, d);
	else
		ok = model_template(s, h, r, &t, d);
	if (ok)
		queue_or_refuse(s, cfg, h, &t, now_ms, d);
	d->device = r->kind == POLICY_LEASE ? r->device : t.device;
	d->model = t.model ? t.model->id : 0;
	d->target = t.target;
	d->requested = t.requested;
	if (d->verdict == POLICY_GRANT && ok)
		d->bytes = policy_need(&t);
	if (d->verdict == POLICY_QUEUE)
		d->bytes = t.size;
	/* A denial's event says what was asked. */
	if (d->verdict == POLICY_REFUSE)
		d->bytes = r->kind == POLICY_LEASE ? r->requested : t.requested;
}

void policy_register(const struct state *s, const struct holder *h, unsigned device, bool has_size,
		     uint64_t size, const char *name, struct policy_decision *d)
{
	const struct device *dev = &s->devices[device];
	char sz[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];
	uint64_t rounded = 0;

	policy_decision_init(d);
	d->device = device;
	if (has_size &&
	    (size_round_up(size, dev->granule, &rounded) < 0 || rounded > dev->budget)) {
		policy_refuse(d, REFUSE_PLAIN, -E2BIG,
			      "model '%s' needs %s, more than device %u's whole budget of %s", name,
			      size_format(size, sz, sizeof(sz)), device,
			      size_format(dev->budget, b, sizeof(b)));
		return;
	}
	if (h->model_count >= LIMITS_MAX_MODELS) {
		policy_refuse(d, REFUSE_LIMIT, -EDQUOT,
			      "this connection already has %u models, the most allowed",
			      LIMITS_MAX_MODELS);
		limit_hit(d, LIMIT_MODELS, NULL);
		return;
	}
	d->bytes = rounded;
}
