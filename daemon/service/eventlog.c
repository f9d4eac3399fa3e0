/* SPDX-License-Identifier: MIT */
/* eventlog.c: the log's subscription to the bus: one line per event, journal fields, rate limits.
 */
#include "eventlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "state/holder.h"

/* Room for the decimal text of every numeric field. */
struct field_text {
	char pid[16], client_id[24], device[12], bytes[24], lease[24], model[24], waited[24];
	char error[16];
};

/* journal_fields lists e's structured fields: only the ones that apply. */
static unsigned journal_fields(const struct bus_event *e, struct field_text *t, struct log_field *f)
{
	unsigned n = 0;

	f[n++] = (struct log_field){"ROCMMEM_EVENT", bus_type_name(e->type)};
	if (e->holder) {
		snprintf(t->pid, sizeof(t->pid), "%d", (int)e->holder->who.pid);
		snprintf(t->client_id, sizeof(t->client_id), "%" PRIu64, e->holder->id);
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_PID", t->pid};
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_NAME", e->holder->name};
		f[n++] = (struct log_field){"ROCMMEM_CLIENT_ID", t->client_id};
	}
	if (e->has_device) {
		snprintf(t->device, sizeof(t->device), "%u", e->device);
		f[n++] = (struct log_field){"ROCMMEM_DEVICE", t->device};
	}
	if (e->bytes) {
		snprintf(t->bytes, sizeof(t->bytes), "%" PRIu64, e->bytes);
		f[n++] = (struct log_field){"ROCMMEM_BYTES", t->bytes};
	}
	if (e->lease_id) {
		snprintf(t->lease, sizeof(t->lease), "%" PRIu64, e->lease_id);
		f[n++] = (struct log_field){"ROCMMEM_LEASE_ID", t->lease};
	}
	if (e->model_id) {
		snprintf(t->model, sizeof(t->model), "%" PRIu64, e->model_id);
		f[n++] = (struct log_field){"ROCMMEM_MODEL_ID", t->model};
	}
	if (e->model_name && e->model_name[0])
		f[n++] = (struct log_field){"ROCMMEM_MODEL_NAME", e->model_name};
	if (e->waited_ms) {
		snprintf(t->waited, sizeof(t->waited), "%" PRIu64, e->waited_ms);
		f[n++] = (struct log_field){"ROCMMEM_WAITED_MS", t->waited};
	}
	if (e->error) {
		snprintf(t->error, sizeof(t->error), "%d", -e->error);
		f[n++] = (struct log_field){"ROCMMEM_ERRNO", t->error};
	}
	return n;
}

/* Which rate-limited line: what the next one written says of those held back. */
enum held_kind { HELD_LIMITS, HELD_REFUSALS, HELD_PEERS };

/* held_back writes a rate-limited line, saying how many were held back before it. */
static void held_back(struct log_ratelimit *rl, uint64_t now_ms, enum log_level level,
		      const char *line, enum held_kind kind)
{
	unsigned long long held;
	char suffix[96] = "";

	if (!log_ratelimit_pass(rl, now_ms, &held))
		return;
	if (held && kind == HELD_LIMITS)
		snprintf(suffix, sizeof(suffix), " (and %llu line(s) about limits not logged)",
			 held);
	else if (held && kind == HELD_REFUSALS)
		snprintf(suffix, sizeof(suffix), " (and %llu refusal(s) not logged)", held);
	else if (held)
		snprintf(suffix, sizeof(suffix), " (and earlier refusals not logged)");
	log_msg(level, "%s%s", line, suffix);
}

/* write_line writes e's line, with its journal fields when it is one of the wire's types. */
static void write_line(const struct bus_event *e, const char *line, const char *suffix)
{
	struct log_field fields[12];
	struct field_text text;

	/* Most events are debug lines: not worth their fields' formatting when not written (two
	 * per lease at the default level were 2% of the daemon's CPU per lease round trip). */
	if (e->level > log_get_level())
		return;
	if (e->type >= BUS_OWN)
		log_msg(e->level, "%s%s", line, suffix);
	else
		log_event(e->level, fields, journal_fields(e, &text, fields), "%s%s", line, suffix);
}

/* client_caused says whether a client can cause e at will: then it is limited per client. */
static bool client_caused(const struct bus_event *e)
{
	if (!e->holder || e->level > LOG_LEVEL_WARN)
		return false;
	return e->type == BUS_LEASE_DENIED || e->type == BUS_LIMIT_HIT ||
	       e->type == BUS_ACCESS_REFUSED || e->type == BUS_ACK_REFUSED ||
	       e->type == BUS_UNDECLARED;
}

/* summary says how many lines of slot c were not logged, if any, and frees the slot. */
static void summary(struct eventlog_client *c)
{
	if (c->holder && c->rl.held)
		log_msg(
		    LOG_LEVEL_WARN,
		    "%s: %llu more warning line(s) about it not logged (at most %u per %u s per "
		    "client)",
		    c->label, c->rl.held, EVENTLOG_CLIENT_BURST,
		    EVENTLOG_CLIENT_INTERVAL_MS / 1000);
	memset(c, 0, sizeof(*c));
}

/* slot_of finds holder's slot, or takes a free one or the least recently used. */
static struct eventlog_client *slot_of(struct eventlog *l, uint64_t holder)
{
	struct eventlog_client *oldest = &l->clients[0];

	for (unsigned i = 0; i < EVENTLOG_CLIENTS; i++) {
		struct eventlog_client *c = &l->clients[i];

		if (c->holder == holder)
			return c;
		if (!c->holder || (oldest->holder && c->used_ms < oldest->used_ms))
			oldest = c;
	}
	summary(oldest);
	oldest->holder = holder;
	return oldest;
}

/* per_client writes a line a client caused, within its limit and everyone's. */
static void per_client(struct eventlog *l, const struct bus_event *e, const char *line,
		       uint64_t now_ms)
{
	struct eventlog_client *c = slot_of(l, e->holder->id);
	unsigned long long held, others;
	char suffix[96] = "";

	holder_label(e->holder, c->label, sizeof(c->label));
	c->used_ms = now_ms;
	if (!log_ratelimit_allow(&c->rl, now_ms, EVENTLOG_CLIENT_BURST, EVENTLOG_CLIENT_INTERVAL_MS,
				 &held))
		return;
	if (!log_ratelimit_pass(&l->all_clients, now_ms, &others)) {
		/* Counted as this client's, said with its next line or its summary. */
		l->all_clients.held = 0;
		c->rl.held += held + 1;
		return;
	}
	if (held)
		snprintf(suffix, sizeof(suffix),
			 " (and %llu more line(s) about this client not logged)", held);
	write_line(e, line, suffix);
}

static void on_event(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		     uint64_t real_ms)
{
	struct eventlog *l = ctx;

	(void)real_ms;
	if (e->type == BUS_CLIENT_DISCONNECTED && e->holder)
		for (unsigned i = 0; i < EVENTLOG_CLIENTS; i++)
			if (l->clients[i].holder == e->holder->id)
				summary(&l->clients[i]);
	if (!line)
		return;
	if (client_caused(e)) {
		per_client(l, e, line, mono_ms);
		return;
	}
	switch (e->type) {
	case BUS_LIMIT_HIT:
		held_back(&l->limits, mono_ms, e->level, line, HELD_LIMITS);
		return;
	case BUS_ACCESS_REFUSED:
		held_back(&l->refusals, mono_ms, e->level, line,
			  e->flags & BUS_PEER ? HELD_PEERS : HELD_REFUSALS);
		return;
	default:
		break;
	}
	write_line(e, line, "");
}

/* wants_line: a line is written only at a level the log shows. */
static bool wants_line(void *ctx, const struct bus_event *e)
{
	(void)ctx;
	return e->level <= log_get_level();
}

int eventlog_subscribe(struct eventlog *l, struct bus *b)
{
	struct bus_subscriber s = {.ctx = l, .event = on_event, .wants_line = wants_line};

	memset(l, 0, sizeof(*l));
	return bus_subscribe(b, &s);
}
