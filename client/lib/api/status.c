/* SPDX-License-Identifier: MIT */
/* status.c: asking the daemon for its state and collecting the parts of its answer. */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/view.h"
#include "conn/client.h"

/* A daemon never needs this many parts; more means a broken peer, not a big table. */
#define STATUS_MAX_PARTS 65536

/* The parts of one status reply, as they arrive. */
struct parts {
	Rocmmem__Wire__ServerMessage **msgs;
	size_t n, cap;
};

static void parts_clear(struct parts *p)
{
	while (p->n > 0)
		wire_unpacked_free(&p->msgs[--p->n]->base);
}

/* parts_add keeps the message of one received part (the rest of m is freed). */
static int parts_add(struct parts *p, struct inmsg *m)
{
	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 4;
		Rocmmem__Wire__ServerMessage **v = realloc(p->msgs, ncap * sizeof(*v));

		if (!v) {
			inmsg_free(m);
			return error_set(-ENOMEM, "out of memory");
		}
		p->msgs = v;
		p->cap = ncap;
	}
	p->msgs[p->n++] = m->msg;
	m->msg = NULL;
	inmsg_free(m);
	return 0;
}

/*
 * collect waits for every part of the answer to request id, sent on connection gen. Returns 0,
 * CONN_LOST (its connection ended: ask again) or a negative errno (message recorded).
 */
static int collect(rocmmem_client *c, uint64_t id, uint64_t gen, struct parts *p)
{
	for (bool more = true; more;) {
		struct inmsg *m;
		Rocmmem__Wire__Reply *r;
		int err = conn_wait_gen(c, id, gen, CONN_REPLY_GRACE_MS, &m);

		if (err)
			return err;
		r = conn_reply(m);
		if (r->has_error && r->error != 0) {
			err = error_from_reply(r);
			inmsg_free(m);
			return err;
		}
		if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_STATUS || p->n >= STATUS_MAX_PARTS) {
			inmsg_free(m);
			return error_set(-EPROTO, "the daemon's status reply is malformed");
		}
		more = r->has_more && r->more;
		err = parts_add(p, m);
		if (err)
			return err;
	}
	return 0;
}

/*
 * status_request asks for the status and collects its parts. A daemon that goes away
 * mid-stream is asked again once the library has reconnected (within the usual grace).
 */
static int status_request(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, struct parts *p)
{
	uint64_t start = conn_now_ms(), gen = 0;
	int err;

	for (;;) {
		msg->has_id = true;
		msg->id = conn_next_id(c);
		err = conn_send_gen(c, msg, &gen);
		if (err == 0)
			err = collect(c, msg->id, gen, p);
		if (err != CONN_LOST)
			return err;
		parts_clear(p);
		pthread_mutex_lock(&c->lock);
		err = conn_await(c, (c->flags & ROCMMEM_CONNECT_NO_WAIT)
					? (int64_t)start
					: (int64_t)(start + CONN_REPLY_GRACE_MS));
		pthread_mutex_unlock(&c->lock);
		if (err)
			return err;
	}
}

ROCMMEM_EXPORT int rocmmem_status_get(rocmmem_client *c, rocmmem_status **out)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest req = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	struct parts p = {0};
	int err;

	if (!c || !out)
		return error_set(-EINVAL, "rocmmem_status_get needs a client and an out pointer");
	*out = NULL;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &req;
	err = status_request(c, &msg, &p);
	if (err) {
		parts_clear(&p);
		free(p.msgs);
		return err;
	}
	/* The snapshot takes the parts, whatever the result. */
	return view_status_from_parts(p.msgs, p.n, out);
}
