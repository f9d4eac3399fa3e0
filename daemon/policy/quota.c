/* SPDX-License-Identifier: MIT */
/*
 * quota.c: limits and quotas: per-uid accounts (connections, memory held and waited for), and
 * the tally of limits hit that status and metrics report.
 */
#include "quota.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "net/client.h"
#include "net/report.h"
#include "service/bus.h"
#include "residency.h"
#include "net/server.h"
#include "size.h"

static const char *const names[LIMIT_COUNT] = {
    [LIMIT_CLIENTS] = "clients",
    [LIMIT_CLIENTS_PER_UID] = "clients_per_uid",
    [LIMIT_PENDING] = "pending",
    [LIMIT_LEASES] = "leases",
    [LIMIT_MODELS] = "models",
    [LIMIT_QUEUED] = "queued",
    [LIMIT_BYTES_PER_UID] = "bytes_per_uid",
    [LIMIT_MESSAGE_SIZE] = "message_size",
    [LIMIT_HANDSHAKE_TIMEOUT] = "handshake_timeout",
    [LIMIT_SUBSCRIBERS] = "subscribers",
    [LIMIT_DESCRIPTORS] = "descriptors",
};

const char *limit_name(enum limit_id id)
{
	return (unsigned)id < LIMIT_COUNT ? names[id] : "?";
}

void limit_value(const struct server *s, enum limit_id id, uint64_t *value, bool *unlimited)
{
	const struct limits *l = &s->limits;

	*unlimited = false;
	switch (id) {
	case LIMIT_CLIENTS:
		*value = l->max_clients;
		break;
	case LIMIT_CLIENTS_PER_UID:
		*value = l->max_clients_per_uid;
		break;
	case LIMIT_PENDING:
		*value = l->max_pending;
		break;
	case LIMIT_LEASES:
		*value = l->max_leases;
		break;
	case LIMIT_MODELS:
		*value = QUOTA_MAX_MODELS;
		break;
	case LIMIT_QUEUED:
		*value = l->max_queued_out;
		break;
	case LIMIT_BYTES_PER_UID:
		*value = l->max_bytes_per_uid;
		*unlimited = l->max_bytes_per_uid == 0;
		break;
	case LIMIT_MESSAGE_SIZE:
		*value = l->max_message;
		break;
	case LIMIT_HANDSHAKE_TIMEOUT:
		*value = l->handshake_timeout_ms;
		break;
	case LIMIT_SUBSCRIBERS:
		*value = l->max_subscribers;
		break;
	default:
		*value = s->quota.fd_limit;
		break;
	}
}

void quota_init(struct quota *q)
{
	memset(q, 0, sizeof(*q));
}

/* waiting_bytes is what h's queued requests would add once granted. */
static uint64_t waiting_bytes(const struct holder *h)
{
	const struct waiter *w;
	uint64_t bytes = 0;

	TAILQ_FOREACH (w, &h->waiters, holder_link)
		bytes += residency_need(w);
	return bytes;
}

int quota_admit(struct server *s, struct client *c, uint64_t request_id, uint64_t bytes)
{
	uint64_t quota = s->limits.max_bytes_per_uid, held = 0, waiting = 0;
	const struct uid_account *u = c->holder->account;
	char q[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX], w[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];
	const struct holder *k;
	char label[128];

	if (quota == 0 || !u)
		return 0;
	/* Held and waited for, across every connection of the uid: one quota for them all. */
	TAILQ_FOREACH (k, &u->holders, uid_link) {
		held += holder_bytes(k);
		waiting += waiting_bytes(k);
	}
	if (held + waiting <= quota && bytes <= quota - held - waiting)
		return 0;
	size_format(quota, q, sizeof(q));
	size_format(held, h, sizeof(h));
	size_format(waiting, w, sizeof(w));
	size_format(bytes, b, sizeof(b));
	quota_hit(s, LIMIT_BYTES_PER_UID,
		  "refused %s %s: uid %u would go over its quota of %s (bytes_per_uid)",
		  client_label(c, label, sizeof(label)), b, (unsigned)c->holder->who.uid, q);
	client_reply_error(c, request_id, -EDQUOT,
			   "uid %u would go over its memory quota of %s (bytes_per_uid): it holds "
			   "%s and waits for %s in %u connection(s), and this request needs %s",
			   (unsigned)c->holder->who.uid, q, h, w, u->connections, b);
	return -EDQUOT;
}

void quota_hit(struct server *s, enum limit_id id, const char *fmt, ...)
{
	struct bus_event e = {.type = BUS_LIMIT_HIT, .limit = id};
	char text[512];
	va_list ap;

	if (!fmt) {
		bus_emit(&s->arbiter.bus, &e, LOG_LEVEL_WARN, NULL);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	bus_emit(&s->arbiter.bus, &e, LOG_LEVEL_WARN, text);
}

void quota_report(struct quota_report *r, const struct server *s)
{
	for (unsigned i = 0; i < LIMIT_COUNT; i++) {
		Rocmmem__Wire__LimitInfo *o = &r->limits[i];
		bool unlimited;

		rocmmem__wire__limit_info__init(o);
		o->name = (char *)names[i];
		o->has_value = o->has_unlimited = o->has_hits = true;
		limit_value(s, (enum limit_id)i, &o->value, &unlimited);
		o->unlimited = unlimited;
		o->hits = s->arbiter.counters.hits[i];
		r->ptrs[i] = o;
	}
}

void quota_fd_init(struct quota *q)
{
	struct rlimit rl = {0};
	uint64_t open_now = 16; /* a guess for when /proc cannot tell */
	DIR *d = opendir("/proc/self/fd");

	if (d) {
		struct dirent *e;

		open_now = 0;
		while ((e = readdir(d)))
			open_now += e->d_name[0] != '.';
		open_now--; /* the directory being read */
		closedir(d);
	}
	q->fd_limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			  ? (uint64_t)rl.rlim_cur
			  : UINT32_MAX;
	q->fd_own = open_now + QUOTA_FD_SLACK;
}

void quota_fd_caps(const struct server *s, struct fd_caps *out)
{
	uint64_t room;

	out->limit = s->quota.fd_limit;
	out->own = s->quota.fd_own;
	room = out->limit > out->own ? out->limit - out->own : 0;
	out->connections = 3 * (uint64_t)s->limits.max_clients;
	if (out->connections > room / 2)
		out->connections = room / 2;
	out->total = room - out->connections;
	out->per_uid = out->total / 2;
}

/* fd_refuse answers a host lease the descriptor limit does not allow; the reason is in why. */
static int fd_refuse(struct server *s, struct client *c, uint64_t request_id, const char *why,
		     const struct fd_caps *k)
{
	char label[128];

	quota_hit(s, LIMIT_DESCRIPTORS, "refused a host lease to %s: %s",
		  client_label(c, label, sizeof(label)), why);
	client_reply_error(
	    c, request_id, -EMFILE,
	    "%s, the most the daemon's descriptor limit of %" PRIu64
	    " allows (each host lease keeps a file descriptor in the daemon: %" PRIu64
	    " per connection and per uid, %" PRIu64
	    " in all; descriptors): release leases, or raise rocmmemd's LimitNOFILE= "
	    "(ulimit -n)",
	    why, k->limit, k->per_uid, k->total);
	return -EMFILE;
}

int quota_fd_admit(struct server *s, struct client *c, uint64_t request_id, bool take)
{
	struct holder *h = c->holder;
	struct uid_account *u = h->account;
	struct fd_caps k;
	char why[256];

	quota_fd_caps(s, &k);
	if (h->fd_leases >= k.per_uid) {
		snprintf(why, sizeof(why), "this connection holds %u host lease(s)", h->fd_leases);
		return fd_refuse(s, c, request_id, why, &k);
	}
	if (u && u->fd_leases >= k.per_uid) {
		snprintf(why, sizeof(why), "uid %u holds %u host lease(s) in %u connection(s)",
			 (unsigned)h->who.uid, u->fd_leases, u->connections);
		return fd_refuse(s, c, request_id, why, &k);
	}
	if (s->quota.fd_leases >= k.total) {
		snprintf(why, sizeof(why), "the daemon holds %" PRIu64 " host lease(s)",
			 s->quota.fd_leases);
		return fd_refuse(s, c, request_id, why, &k);
	}
	if (take) {
		h->fd_leases++;
		if (u)
			u->fd_leases++;
		s->quota.fd_leases++;
	}
	return 0;
}

void quota_fd_release(struct server *s, struct holder *h)
{
	if (h && h->fd_leases == 0)
		return; /* cannot be: every release follows a take */
	if (h) {
		h->fd_leases--;
		if (h->account)
			h->account->fd_leases--;
	}
	s->quota.fd_leases--;
}
