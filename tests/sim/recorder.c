/* SPDX-License-Identifier: MIT */
/*
 * recorder.c: the service's sink in the simulator, in place of the connections: each reply is
 * matched with the request it answers (invariant 6: exactly one answer to each request while
 * its holder lives, none to a request never made) and handed to its client; notices likewise.
 */
#include <inttypes.h>
#include <string.h>

#include "sim.h"

/* take_request finds and removes the outstanding request id of c. */
static bool take_request(struct sim_client *c, uint64_t id, struct sim_req *out)
{
	for (unsigned i = 0; i < c->nout; i++) {
		if (c->out[i].id != id)
			continue;
		*out = c->out[i];
		c->out[i] = c->out[--c->nout];
		return true;
	}
	return false;
}

static void on_reply(void *ctx, uint64_t holder, uint64_t request_id, const struct svc_reply *r)
{
	struct world *w = ctx;
	struct sim_client *c = world_client(w, holder);
	struct sim_req q;

	w->stats.replies++;
	if (!c) {
		sim_fail(w, "6 one answer per request",
			 "a reply to request %" PRIu64 " of holder %" PRIu64 ", which is gone",
			 request_id, holder);
		return;
	}
	if (!take_request(c, request_id, &q)) {
		sim_fail(w, "6 one answer per request",
			 "holder %" PRIu64 " got a reply to request %" PRIu64
			 ", which it never made or which was answered already",
			 holder, request_id);
		return;
	}
	sim_trace(w, "reply to holder %" PRIu64 " request %" PRIu64 " (kind %d): %s %d %.80s",
		  holder, request_id, (int)q.kind, r->kind == SVC_ERROR ? "error" : "ok", r->err,
		  r->kind == SVC_ERROR && r->message ? r->message : "");
	if (r->kind == SVC_ERROR)
		w->stats.refusals++;
	world_on_reply(w, c, &q, r);
}

static void on_notice(void *ctx, uint64_t holder, const struct svc_notice *n)
{
	struct world *w = ctx;
	struct sim_client *c = world_client(w, holder);

	w->stats.notices++;
	if (!c) {
		sim_fail(w, "6 one answer per request",
			 "a notice (%d) about model %" PRIu64 " to holder %" PRIu64
			 ", which is gone",
			 (int)n->kind, n->model_id, holder);
		return;
	}
	if (n->kind == NOTE_WAIT_PROGRESS)
		sim_trace(w,
			  "progress to holder %" PRIu64 ": request %" PRIu64
			  " reason %d model %" PRIu64 " position %u ended %d",
			  holder, n->progress->request_id, (int)n->progress->wait.reason,
			  n->progress->wait.model, n->progress->wait.position,
			  (int)n->progress->ended);
	else
		sim_trace(w,
			  "notice %d to holder %" PRIu64 ": model %" PRIu64 " generation %" PRIu64
			  " lease %" PRIu64,
			  (int)n->kind, holder, n->model_id, n->generation, n->lease_id);
	if (n->kind == NOTE_EVICT_REQUEST) {
		notices_evict(w, n);
		checks_eviction_told(w, holder, n);
	} else if (n->kind == NOTE_WAIT_PROGRESS) {
		notices_progress(w, c, n);
	} else if (n->kind == NOTE_MODEL_REVOKED)
		checks_eviction_over(w, n->model_id);
	world_on_notice(w, c, n);
}

static void on_due(void *ctx, uint64_t due_ms)
{
	((struct world *)ctx)->due = due_ms;
}

void recorder_install(struct world *w)
{
	struct svc_sink sink = {
	    .ctx = w, .reply = on_reply, .notify = on_notice, .due_changed = on_due};

	svc_set_sink(&w->svc, &sink);
}
