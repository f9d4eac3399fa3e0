/* SPDX-License-Identifier: MIT */
/* progress_tell.c: progress events for the waiting requests that asked for them. */
#include "progress_tell.h"

#include "base/log.h"
#include "reply.h"

/* tell sends e's request what wf says at now_ms (ended: the eviction of wf->model is over). */
static void tell(struct svc *svc, struct progress_entry *e, const struct waiter *w,
		 const struct waitfor *wf, enum progress_end ended, uint64_t now_ms)
{
	const struct model *m = wf->model ? state_model_find(&svc->state, wf->model) : NULL;
	const struct holder *o = wf->owner ? state_holder_find(&svc->state, wf->owner) : NULL;
	struct svc_progress p = {.request_id = e->request_id,
				 .wait = *wf,
				 .model_name = m ? m->name : "",
				 .owner_pid = o ? (int32_t)o->who.pid : 0,
				 .owner_name = o ? o->name : "",
				 .waited_ms = now_ms - w->enqueued_ms,
				 .ended = ended,
				 .kind = w->kind,
				 .request_model = w->model ? w->model->id : w->model_id,
				 .requested = w->requested};
	struct svc_notice n = {.kind = NOTE_WAIT_PROGRESS, .progress = &p};

	if (wf->reason == WAITFOR_EVICTION && ended == PROGRESS_WAITING)
		p.deadline_left_ms = wf->due_ms > now_ms ? wf->due_ms - now_ms : 0;
	e->sent = *wf;
	e->told = true;
	e->sent_ms = now_ms;
	svc_notify(svc, w->holder->id, &n);
}

/* update_one tells e what changed if the rate allows; false when its request waits no more. */
static bool update_one(struct svc *svc, struct progress_entry *e, uint64_t now_ms)
{
	const struct waiter *w = state_waiter_find(&svc->state, e->waiter);
	struct waitfor wf;

	if (!w)
		return false;
	waitfor_compute(&svc->state, w, &wf);
	if (e->told && !waitfor_changed(&e->sent, &wf))
		return true;
	if (!e->told || now_ms >= e->sent_ms + PROGRESS_INTERVAL_MS)
		tell(svc, e, w, &wf, PROGRESS_WAITING, now_ms);
	else if (e->sent_ms + PROGRESS_INTERVAL_MS < svc->progress.due_ms)
		svc->progress.due_ms = e->sent_ms + PROGRESS_INTERVAL_MS;
	return true;
}

void svc_progress_update(struct svc *svc)
{
	struct progress *p = &svc->progress;
	size_t kept;

	/* Telling a client may come back here (a reply's consequences): the outer call goes
	 * round again instead. */
	if (p->updating) {
		p->again = true;
		return;
	}
	p->updating = true;
	do {
		uint64_t now = svc_now(svc);

		p->again = false;
		p->due_ms = UINT64_MAX;
		kept = 0;
		for (size_t i = 0; i < p->n; i++) {
			if (update_one(svc, &p->v[i], now))
				p->v[kept++] = p->v[i];
		}
		p->n = kept;
	} while (p->again);
	p->updating = false;
	svc_due_changed(svc);
}

int svc_progress_track(struct svc *svc, const struct waiter *w)
{
	return progress_track(&svc->progress, w->seq, w->request_id);
}

/*
 * on_event tells each request that was told it waits for a model's eviction that the
 * eviction is over (acked or revoked), at once: the model is unloaded next, and the request
 * may be granted in the same instant.
 */
static void on_event(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		     uint64_t real_ms)
{
	struct svc *svc = ctx;
	struct progress *p = &svc->progress;

	(void)line;
	(void)real_ms;
	if ((e->type != BUS_EVICT_ACKED && e->type != BUS_REVOKED) || !e->model_id)
		return;
	for (size_t i = 0; i < p->n; i++) {
		struct progress_entry *pe = &p->v[i];
		const struct waiter *w = state_waiter_find(&svc->state, pe->waiter);
		struct waitfor wf;

		if (!w || !pe->told || pe->sent.reason != WAITFOR_EVICTION ||
		    pe->sent.model != e->model_id)
			continue;
		waitfor_compute(&svc->state, w, &wf);
		pe->sent.position = wf.position;
		pe->sent.queued = wf.queued;
		pe->sent.free = wf.free;
		pe->sent.evictions = wf.evictions;
		wf = pe->sent;
		tell(svc, pe, w, &wf, e->type == BUS_REVOKED ? PROGRESS_REVOKED : PROGRESS_ACKED,
		     mono_ms);
	}
}

void svc_progress_init(struct svc *svc)
{
	struct bus_subscriber s = {.ctx = svc, .event = on_event};

	progress_init(&svc->progress);
	if (bus_subscribe(&svc->bus, &s) < 0)
		log_warn("progress events: no room on the bus; evictions' ends are not told");
}

void svc_progress_finish(struct svc *svc)
{
	progress_free(&svc->progress);
}
