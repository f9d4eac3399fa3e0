/* SPDX-License-Identifier: MIT */
/* reply.c: answers and notices through the service's sink. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/log.h"

void svc_reply(struct svc *svc, uint64_t holder, uint64_t request_id, const struct svc_reply *r)
{
	if (svc->sink.reply)
		svc->sink.reply(svc->sink.ctx, holder, request_id, r);
}

void svc_reply_ok(struct svc *svc, uint64_t holder, uint64_t request_id)
{
	struct svc_reply r = {.kind = SVC_OK};

	svc_reply(svc, holder, request_id, &r);
}

void svc_reply_error(struct svc *svc, uint64_t holder, uint64_t request_id, int err,
		     const char *fmt, ...)
{
	struct svc_reply r = {.kind = SVC_ERROR, .err = err};
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	r.message = text;
	svc_reply(svc, holder, request_id, &r);
}

void svc_reply_residency(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct model *m)
{
	struct svc_reply r = {.kind = SVC_RESIDENCY, .model = m};

	svc_reply(svc, holder, request_id, &r);
}

void svc_refuse(struct svc *svc, uint64_t holder, uint64_t request_id,
		const struct policy_decision *d, unsigned flags)
{
	const struct policy_refusal *r = &d->refusal;
	const struct holder *h = state_holder_find(&svc->state, holder);
	const struct model *m = d->model ? state_model_find(&svc->state, d->model) : NULL;
	struct bus_event e = {.holder = h};
	char who[128];

	switch (r->kind) {
	case REFUSE_DENIAL:
		/* The event first, as for the other refusals: a denial is on record (status, feed,
		 * log), with its time, before the client can read its answer. */
		e.type = BUS_LEASE_DENIED;
		e.flags = flags;
		e.has_device = true;
		e.device = d->device;
		e.bytes = d->bytes;
		e.waited_ms = d->waited_ms;
		e.error = r->err;
		e.model_id = m ? m->id : 0;
		e.model_name = m ? m->name : NULL;
		bus_emit(&svc->bus, &e, LOG_LEVEL_WARN, r->text);
		break;
	case REFUSE_LIMIT:
		e.type = BUS_LIMIT_HIT;
		e.limit = r->limit;
		bus_emit(&svc->bus, &e, LOG_LEVEL_WARN, r->log[0] ? r->log : NULL);
		break;
	case REFUSE_ACCESS:
		e.type = BUS_ACCESS_REFUSED;
		if (h)
			bus_emitf(&svc->bus, &e, LOG_LEVEL_WARN, "refused %s (uid %u): %s",
				  holder_label(h, who, sizeof(who)), (unsigned)h->who.uid, r->text);
		break;
	case REFUSE_ACK:
		e.type = BUS_ACK_REFUSED;
		if (h)
			bus_emitf(&svc->bus, &e, LOG_LEVEL_WARN, "refused an evict ack of %s: %s",
				  holder_label(h, who, sizeof(who)), r->text);
		break;
	case REFUSE_PLAIN:
		break;
	}
	svc_reply_error(svc, holder, request_id, r->err, "%s", r->text);
}

void svc_notify(struct svc *svc, uint64_t holder, const struct svc_notice *n)
{
	if (svc->sink.notify)
		svc->sink.notify(svc->sink.ctx, holder, n);
}

void svc_due_changed(struct svc *svc)
{
	uint64_t due = state_next_due(&svc->state);

	if (progress_due(&svc->progress) < due)
		due = progress_due(&svc->progress);

	if (due == svc->due_ms)
		return;
	svc->due_ms = due;
	if (svc->sink.due_changed)
		svc->sink.due_changed(svc->sink.ctx, due);
}
