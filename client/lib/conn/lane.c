/* SPDX-License-Identifier: MIT */
/*
 * lane.c: requests through the connection's request lane (common/lane.h): written into the page
 * shared with the daemon, the doorbell rung, the answer waited for on a futex, and filed after
 * whatever the daemon sent on the socket before it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "client.h"

/* How long one futex wait lasts before the waiter looks at the socket (is the daemon gone?). */
#define LANE_SLICE_MS 50

bool conn_lane_wanted(void)
{
	const char *e = getenv("ROCMMEM_LANE");

	return !(e && strcmp(e, "0") == 0);
}

static void lane_free(struct lib_lane *l)
{
	lane_unmap(l->page);
	close(l->efd);
	free(l);
}

void conn_lane_attach(rocmmem_client *c, uint32_t features, struct inmsg *m)
{
	struct lib_lane *l;

	if (!(features & ROCMMEM__WIRE__FEATURE__FEATURE_LANE) || m->nfds != 2)
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return;
	l->page = lane_map(m->fds[0]);
	if (!l->page) {
		free(l);
		return; /* the socket serves alone */
	}
	l->efd = m->fds[1];
	m->fds[1] = -1;
	l->gen = c->gen;
	l->seq = atomic_load_explicit(&l->page->rep.seq, memory_order_acquire);
	/* The lane of the connection before (if any) is retired; retired lanes no thread waits
	 * in any more are freed (one abandoned there waits for a connection that is gone). */
	if (c->lane) {
		c->lane->next = c->old_lanes;
		c->old_lanes = c->lane;
	}
	c->lane = l;
	for (struct lib_lane **p = &c->old_lanes; *p;) {
		struct lib_lane *old = *p;

		if (old->busy && !old->abandoned) {
			p = &old->next;
			continue;
		}
		*p = old->next;
		lane_free(old);
	}
}

void conn_lane_free_all(rocmmem_client *c)
{
	struct lib_lane *l;

	if (c->lane)
		lane_free(c->lane);
	c->lane = NULL;
	while ((l = c->old_lanes)) {
		c->old_lanes = l->next;
		lane_free(l);
	}
}

/* unpack_reply decodes the reply in the lane's slot; NULL when it is not one to request id. */
static struct inmsg *unpack_reply(const struct lane_page *p, uint32_t len, uint64_t id,
				  bool *no_memory)
{
	struct inmsg *m;

	if (len == 0 || len > LANE_SLOT)
		return NULL;
	m = inmsg_new();
	if (!m) {
		if (no_memory)
			*no_memory = true;
		return NULL;
	}
	/* protobuf-c sets no errno: ENOMEM after a failed unpack is the allocator's malloc. */
	errno = 0;
	m->msg = conn_unpack(len, p->rep_data);
	if (!m->msg && errno == ENOMEM && no_memory)
		*no_memory = true;
	if (!m->msg || !conn_reply(m) || conn_reply(m)->id != id) {
		inmsg_free(m);
		return NULL;
	}
	return m;
}

/*
 * reclaim frees a lane whose request was given up on, once its answer came: a lease granted
 * meanwhile goes back to the daemon (conn_file undoes it). Nothing tells the client that the
 * answer came (the daemon wakes the futex, which nobody waits on any more), so this is looked
 * at whenever the library touches the connection: conn_lane_reclaim. Lock held. Returns
 * whether it is free.
 */
static bool reclaim(rocmmem_client *c, struct lib_lane *l)
{
	struct lane_page *p = l->page;
	bool no_memory = false;
	struct inmsg *m = NULL;

	if (!l->abandoned || atomic_load_explicit(&p->rep.seq, memory_order_acquire) != l->seq)
		return false;
	if (p->rep.kind == LANE_REPLY)
		m = unpack_reply(p, p->rep.len, l->abandoned_id, &no_memory);
	if (no_memory)
		return false; /* the grant in it is not lost: taken at a later touch */
	if (m)
		conn_file(c, m); /* still in the abandoned list: undone and dropped */
	else if (p->rep.kind == LANE_RESEND)
		conn_unabandon(c, l->abandoned_id); /* never taken: nothing comes */
	l->abandoned = false;
	l->busy = false;
	return true;
}

void conn_lane_reclaim(rocmmem_client *c)
{
	struct lib_lane *l = c->lane;

	/* Only the current connection's: a late grant on a connection that ended went with it. */
	if (l && l->abandoned && l->gen == c->gen && !c->reconnecting && !c->broken)
		reclaim(c, l);
}

/* take_lane claims the current connection's lane for a request; lock held. */
static struct lib_lane *take_lane(rocmmem_client *c)
{
	struct lib_lane *l = c->lane;

	if (!l || l->gen != c->gen || c->reconnecting || c->broken)
		return NULL;
	if (l->busy && !reclaim(c, l))
		return NULL; /* another thread's request is in it: the socket serves this one */
	l->busy = true;
	c->busy++;
	return l;
}

/*
 * ring packs the request into the page (one walk, bounded by the slot) and rings the doorbell,
 * storing its seq in *seq. Returns 0, -EMSGSIZE when it does not fit the slot (nothing was
 * rung: the socket takes it), or -EIO when the doorbell could not be rung (nothing will answer).
 */
static int ring(rocmmem_client *c, struct lib_lane *l, Rocmmem__Wire__ClientMessage *msg,
		uint32_t *seq)
{
	struct lane_page *p = l->page;
	ssize_t len = wire_pack_walk(&msg->base, p->req_data, LANE_SLOT);
	uint64_t one = 1;

	if (len <= 0)
		return -EMSGSIZE;
	p->req.len = (uint32_t)len;
	p->req.id = msg->id;
	p->req.sock_sent = atomic_load_explicit(&c->sock_tx, memory_order_acquire);
	*seq = ++l->seq;
	if (*seq == 0)
		*seq = ++l->seq; /* 0 is the page's first rep.seq: never a request's */
	atomic_store_explicit(&p->req.seq, *seq, memory_order_release);
	return write(l->efd, &one, sizeof(one)) == (ssize_t)sizeof(one) ? 0 : -EIO;
}

/* A deadline not set yet: the clock is read only by a call that has to wait. */
#define DEADLINE_UNSET INT64_MIN

/* time_left returns what is left of a wait of reply_ms, setting *deadline at the first call. */
static int64_t time_left(int64_t reply_ms, int64_t *deadline)
{
	if (*deadline != DEADLINE_UNSET)
		return conn_remaining_ms(*deadline);
	*deadline = conn_deadline_after(reply_ms);
	return *deadline < 0 ? -1 : reply_ms;
}

/*
 * await_answer waits for the daemon to answer seq in l, looking at the socket every slice
 * (only the reader learns that the daemon went away). Lock held. Returns 0, CONN_LOST, the
 * connection's final error, or -ETIMEDOUT at the deadline (the request is then abandoned).
 */
static int await_answer(rocmmem_client *c, struct lib_lane *l, uint32_t seq, uint64_t gen,
			uint64_t id, int64_t reply_ms, int64_t *deadline)
{
	_Atomic uint32_t *word = &l->page->rep.seq;

	for (;;) {
		uint32_t v = atomic_load_explicit(word, memory_order_acquire);
		int64_t left;

		if (v == seq)
			return 0;
		left = time_left(reply_ms, deadline);
		if (c->broken)
			return error_set(c->broken_err, "%s", c->broken_msg);
		if (c->gen != gen || c->reconnecting)
			return CONN_LOST;
		if (left == 0) {
			l->abandoned = true;
			l->abandoned_id = id;
			conn_abandon(c, id);
			return error_set(-ETIMEDOUT, "rocmmemd did not answer in time");
		}
		pthread_mutex_unlock(&c->lock);
		lane_futex_wait(word, v, left < 0 || left > LANE_SLICE_MS ? LANE_SLICE_MS : left);
		pthread_mutex_lock(&c->lock);
		if (atomic_load_explicit(word, memory_order_acquire) != seq && !c->reading)
			conn_pump(c, 0); /* the socket: an end of connection, events */
	}
}

/*
 * file_before makes sure what the daemon sent on the socket before the answer (sock_seq
 * packets) is filed before the answer is used: a revocation sent first is known first. Lock
 * held.
 */
static void file_before(rocmmem_client *c, uint64_t sock_seq, uint64_t gen, int64_t reply_ms,
			int64_t *deadline)
{
	while (c->sock_rx < sock_seq && c->gen == gen && !c->reconnecting && !c->broken) {
		int64_t left = time_left(reply_ms, deadline);

		if (left == 0)
			return;
		if (!c->reading)
			conn_pump(c, left);
		else
			conn_timed_wait(c, *deadline);
	}
}

int conn_lane_call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t reply_ms,
		   uint64_t *gen, struct inmsg **out)
{
	int64_t deadline = DEADLINE_UNSET;
	struct lib_lane *l;
	struct inmsg *m = NULL;
	uint32_t seq = 0, kind;
	uint64_t sock_seq;
	int err;

	pthread_mutex_lock(&c->lock);
	l = take_lane(c);
	if (!l) {
		pthread_mutex_unlock(&c->lock);
		return LANE_CALL_SKIP;
	}
	*gen = l->gen;
	pthread_mutex_unlock(&c->lock);
	err = ring(c, l, msg, &seq);
	pthread_mutex_lock(&c->lock);
	if (err) {
		l->busy = false; /* nothing will answer: nobody waits in it */
		/* A broken doorbell retires the lane (unless a new connection did already). */
		if (err == -EIO && l == c->lane) {
			c->lane = NULL;
			l->next = c->old_lanes;
			c->old_lanes = l;
		}
		err = LANE_CALL_SKIP;
		goto out;
	}
	err = await_answer(c, l, seq, *gen, msg->id, reply_ms, &deadline);
	if (err && l->abandoned)
		goto out; /* given up on: the lane stays busy until its answer comes */
	if (err) {
		l->busy = false; /* its connection is over: no answer will come, nobody waits */
		goto out;
	}
	kind = l->page->rep.kind;
	sock_seq = l->page->rep.sock_seq;
	if (kind == LANE_REPLY) {
		bool no_memory = false;

		m = unpack_reply(l->page, l->page->rep.len, msg->id, &no_memory);
		if (no_memory) {
			/* Left in the lane as one given up on: a grant in it goes back at a later
			 * touch (reclaim), not with the memory this could not get. */
			l->abandoned = true;
			l->abandoned_id = msg->id;
			conn_abandon(c, msg->id);
			err = error_set(-ENOMEM, "out of memory reading rocmmemd's answer");
			goto out;
		}
		err =
		    m ? 0 : error_set(-EPROTO, "rocmmemd's answer in the request lane is not one");
	} else {
		err = kind == LANE_ON_SOCKET ? LANE_CALL_SOCKET : LANE_CALL_SKIP;
	}
	l->busy = false; /* from here the page may be another thread's */
	if (m) {
		file_before(c, sock_seq, *gen, reply_ms, &deadline);
		held_arena_note(c, m);
		/* As conn_wait_gen: with progress asked for, what came before is told first. */
		if (c->progress_fn && conn_has_events(c) && !c->delivering)
			conn_deliver(c);
		*out = m;
	}
out:
	c->busy--;
	pthread_mutex_unlock(&c->lock);
	return err;
}
