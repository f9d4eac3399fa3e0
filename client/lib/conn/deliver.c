/* SPDX-License-Identifier: MIT */
/*
 * deliver.c: events: what a received one changes at once, the queues they wait in (telemetry
 * apart, so that it never crowds out the rest), and their delivery to the event callback.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/view.h"
#include "client.h"

/* Queued events beyond this are dropped: a host that never dispatches must not grow. */
#define CONN_MAX_EVENTS 4096
/* Undelivered telemetry events beyond this push out the oldest (each is at most 1.5 KiB). */
#define CONN_MAX_TELEMETRY 1024

/* add_lost adds n to a count of lost samples or events, saturating. */
static uint32_t add_lost(uint32_t count, uint64_t n)
{
	return n >= (uint64_t)(UINT32_MAX - count) ? UINT32_MAX : count + (uint32_t)n;
}

bool conn_has_events(const rocmmem_client *c)
{
	return c->events || c->telemetry || c->sample;
}

void conn_wake(rocmmem_client *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* Saturated counter: the fd is readable anyway. */
	}
}

/*
 * conn_queue_event files an event. A sample replaces the one not yet delivered, and
 * telemetry beyond its cap pushes out the oldest (both counted into what is delivered next),
 * so that neither grows a host that does not dispatch, nor crowds out the events that matter
 * (evict requests, revocations, shutdown, the library's own), which have their own queue.
 */
void conn_queue_event(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Event *e = m->msg ? m->msg->event : NULL;
	struct inmsg *old;

	m->next = NULL;
	switch (e ? e->body_case : ROCMMEM__WIRE__EVENT__BODY__NOT_SET) {
	case ROCMMEM__WIRE__EVENT__BODY_SAMPLE:
		if ((old = c->sample)) {
			c->samples_lost = add_lost(c->samples_lost,
						   (uint64_t)old->msg->event->sample->dropped + 1);
			inmsg_free(old);
		}
		c->sample = m;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_TELEMETRY:
		if (c->telemetry_count >= CONN_MAX_TELEMETRY) {
			old = c->telemetry;
			c->telemetry = old->next;
			if (!c->telemetry)
				c->telemetry_tail = &c->telemetry;
			c->telemetry_count--;
			c->telemetry_lost = add_lost(
			    c->telemetry_lost, (uint64_t)old->msg->event->telemetry->dropped + 1);
			inmsg_free(old);
		}
		*c->telemetry_tail = m;
		c->telemetry_tail = &m->next;
		c->telemetry_count++;
		break;
	default:
		if (c->event_count >= CONN_MAX_EVENTS && !m->lib) {
			inmsg_free(m);
			return;
		}
		*c->events_tail = m;
		c->events_tail = &m->next;
		c->event_count++;
		break;
	}
	conn_wake(c);
}

int conn_queue_lib(rocmmem_client *c, enum rocmmem_event_type type, uint64_t lease_id,
		   uint64_t model_id, const char *reason)
{
	struct inmsg *m = calloc(1, sizeof(*m));

	if (!m || !(m->lib = calloc(1, sizeof(*m->lib)))) {
		free(m);
		return -ENOMEM;
	}
	m->lib->type = type;
	m->lib->lease_id = lease_id;
	m->lib->model_id = model_id;
	snprintf(m->lib->reason, sizeof(m->lib->reason), "%s", reason ? reason : "");
	m->seq = ++c->last_seq;
	conn_queue_event(c, m);
	return 0;
}

void conn_drop_telemetry(rocmmem_client *c)
{
	struct inmsg *m;

	while ((m = c->telemetry)) {
		c->telemetry = m->next;
		inmsg_free(m);
	}
	c->telemetry_tail = &c->telemetry;
	c->telemetry_count = 0;
	c->telemetry_lost = 0;
	inmsg_free(c->sample);
	c->sample = NULL;
	c->samples_lost = 0;
	c->feed_epoch++;
}

void conn_note_event(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Event *e = m->msg->event;
	struct lib_model *lm = NULL;

	m->conn = c->gen;
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST)
		lm = held_model_by_daemon_id(c, e->evict_request->model_id);
	else if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED)
		lm = held_model_by_daemon_id(c, e->model_revoked->model_id);
	else if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_PROGRESS &&
		 e->progress->has_request_model_id)
		lm = held_model_by_daemon_id(c, e->progress->request_model_id);
	/* Named by the host's id now: a later connection's daemon may number it otherwise. */
	if (lm)
		m->model = lm->id;
	/* A revoked lease is forgotten by the daemon: its release must not ask again. */
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED)
		for (struct rocmmem_lease *l = c->leases; l; l = l->next)
			if (l->id == e->lease_revoked->lease_id)
				l->revoked = true;
	/* So is a revoked model's reservation: not to be declared again after a restart, and its
	 * residency is over (a restarted daemon carries on after it). */
	if (lm && e->body_case == ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED) {
		uint64_t gen = e->model_revoked->generation;

		if (gen == 0 || gen >= lm->generation)
			lm->reservation = 0; /* unless the host holds a later residency already */
		if (gen > lm->ended)
			lm->ended = gen;
	}
	/* The daemon stops on purpose: the end that follows is final, not a crash. */
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_SHUTDOWN)
		c->shutdown_seen = true;
	/* Numbered after every event of the connections before this one. */
	m->seq = c->seq_base + e->seq;
	if (m->seq > c->last_seq)
		c->last_seq = m->seq;
}

/*
 * stale says whether an event is about a residency the host no longer has, and must not be
 * delivered: an evict request from a daemon that went away (its eviction ended with it), or an
 * evict request or revocation of a model generation older than one the host has been granted
 * something in since. Records the generation of an evict request it lets through, for the ack.
 */
static bool stale(rocmmem_client *c, const struct inmsg *m)
{
	const Rocmmem__Wire__Event *e = m->msg ? m->msg->event : NULL;
	uint64_t gen;
	struct lib_model *lm;
	bool old = false;

	if (!e || (e->body_case != ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST &&
		   e->body_case != ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED))
		return false;
	gen = e->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST
		  ? e->evict_request->generation
		  : e->model_revoked->generation;
	pthread_mutex_lock(&c->lock);
	lm = m->model ? held_model(c, m->model) : NULL;
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST && m->conn != c->gen)
		old = true;
	else if (lm && gen && gen < lm->generation)
		old = true;
	else if (lm && gen && e->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST)
		lm->evict_generation = gen;
	pthread_mutex_unlock(&c->lock);
	return old;
}

/* The events taken for one round of delivery. */
struct batch {
	struct inmsg *events, *telemetry, *sample;
	uint32_t telemetry_lost, samples_lost;
	unsigned epoch; /* the subscription's, when taken */
};

/* batch_next takes the batch's next event in the order they happened (sequence numbers). */
static struct inmsg *batch_next(struct batch *b)
{
	struct inmsg **from = NULL, *m;
	uint64_t seq = UINT64_MAX;

	if (b->events) {
		from = &b->events;
		seq = b->events->seq;
	}
	if (b->telemetry && b->telemetry->seq < seq) {
		from = &b->telemetry;
		seq = b->telemetry->seq;
	}
	if (b->sample && b->sample->seq < seq)
		from = &b->sample;
	if (!from)
		return NULL;
	m = *from;
	*from = m->next;
	m->next = NULL;
	return m;
}

/* still_subscribed says whether telemetry taken in epoch may still be delivered. */
static bool still_subscribed(rocmmem_client *c, unsigned epoch)
{
	bool same;

	pthread_mutex_lock(&c->lock);
	same = c->feed_epoch == epoch;
	pthread_mutex_unlock(&c->lock);
	return same;
}

/* to_event fills the public view of a received event, or of one of the library's own. */
static void to_event(const struct inmsg *m, struct rocmmem_event *out)
{
	const Rocmmem__Wire__Event *e = m->msg ? m->msg->event : NULL;

	memset(out, 0, sizeof(*out));
	out->reason = "";
	if (m->lib) {
		out->type = m->lib->type;
		out->lease_id = m->lib->lease_id;
		out->model_id = m->lib->model_id;
		out->generation = m->lib->generation;
		out->reason = m->lib->reason;
		return;
	}
	switch (e->body_case) {
	case ROCMMEM__WIRE__EVENT__BODY_SHUTDOWN:
		out->type = ROCMMEM_EVENT_SHUTDOWN;
		if (e->shutdown->reason)
			out->reason = e->shutdown->reason;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST:
		out->type = ROCMMEM_EVENT_EVICT_REQUEST;
		out->model_id = m->model ? m->model : e->evict_request->model_id;
		out->bytes_needed = e->evict_request->bytes_needed;
		out->deadline_ms = e->evict_request->deadline_ms;
		out->generation = e->evict_request->generation;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED:
		out->type = ROCMMEM_EVENT_MODEL_REVOKED;
		out->model_id = m->model ? m->model : e->model_revoked->model_id;
		out->generation = e->model_revoked->generation;
		if (e->model_revoked->reason)
			out->reason = e->model_revoked->reason;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED:
		out->type = ROCMMEM_EVENT_LEASE_REVOKED;
		out->lease_id = e->lease_revoked->lease_id;
		out->generation = e->lease_revoked->model_generation;
		if (e->lease_revoked->reason)
			out->reason = e->lease_revoked->reason;
		break;
	default:
		out->type = ROCMMEM_EVENT_OTHER;
		break;
	}
}

bool conn_progress_wanted(rocmmem_client *c)
{
	bool wanted;

	pthread_mutex_lock(&c->lock);
	wanted = c->progress_fn != NULL;
	pthread_mutex_unlock(&c->lock);
	return wanted;
}

/* deliver_progress tells the progress callback (if any) about m. Returns 1 when told. */
static int deliver_progress(rocmmem_client *c, const struct inmsg *m, rocmmem_progress_fn fn,
			    void *userdata)
{
	struct rocmmem_wait_progress p;

	if (!fn)
		return 0;
	progress_view(m, &p);
	fn(c, &p, userdata);
	return 1;
}

int conn_deliver(rocmmem_client *c)
{
	rocmmem_event_fn fn = c->event_fn;
	void *userdata = c->event_userdata;
	rocmmem_progress_fn pfn = c->progress_fn;
	void *pdata = c->progress_userdata;
	struct batch b;
	struct inmsg *m;
	uint64_t count;
	int n = 0;

	if (c->delivering || !conn_has_events(c))
		return 0;
	b = (struct batch){c->events,	      c->telemetry,    c->sample,
			   c->telemetry_lost, c->samples_lost, c->feed_epoch};
	c->events = c->telemetry = c->sample = NULL;
	c->events_tail = &c->events;
	c->telemetry_tail = &c->telemetry;
	c->event_count = c->telemetry_count = 0;
	c->telemetry_lost = c->samples_lost = 0;
	if (read(c->efd, &count, sizeof(count)) < 0) {
		/* EAGAIN: nothing was signalled. */
	}
	c->delivering = true;
	pthread_mutex_unlock(&c->lock);
	while ((m = batch_next(&b))) {
		Rocmmem__Wire__Event *e = m->msg ? m->msg->event : NULL;
		struct feed_view view = {0};
		struct daemon_facts facts = {c->daemon_version, c->backend, (int32_t)c->daemon_pid};
		struct rocmmem_event ev;
		int err = 0;

		if (e && e->body_case == ROCMMEM__WIRE__EVENT__BODY_PROGRESS) {
			n += deliver_progress(c, m, pfn, pdata);
			inmsg_free(m);
			continue;
		}
		if (e && e->body_case == ROCMMEM__WIRE__EVENT__BODY_SAMPLE) {
			if (still_subscribed(c, b.epoch))
				err = view_feed_event(&facts, e, b.samples_lost, &view, &ev);
			else
				err = -ECANCELED;
		} else if (e && e->body_case == ROCMMEM__WIRE__EVENT__BODY_TELEMETRY) {
			if (still_subscribed(c, b.epoch))
				err = view_feed_event(&facts, e, b.telemetry_lost, &view, &ev);
			else
				err = -ECANCELED;
			b.telemetry_lost = 0;
		} else if (stale(c, m)) {
			err = -ESTALE;
		} else {
			to_event(m, &ev);
		}
		if (err == 0) {
			ev.seq = m->seq;
			if (fn)
				fn(c, &ev, userdata);
			n++;
		}
		view_feed_finish(&view);
		inmsg_free(m);
	}
	pthread_mutex_lock(&c->lock);
	c->delivering = false;
	pthread_cond_broadcast(&c->cond);
	return n;
}
