/* SPDX-License-Identifier: MIT */
/*
 * call.c: a request and its reply: waiting for it (delivering events meanwhile, one thread
 * reading for all), and sending it again on a new connection when the daemon went away first.
 */
#include <errno.h>

#include "base/error.h"
#include "client.h"

/* lost_error records why a request cannot be sent while the library reconnects; lock held. */
static int lost_error(const rocmmem_client *c)
{
	uint64_t now = conn_now_ms();

	return error_set(
	    -ENOTCONN, "rocmmemd went away %.1f s ago (%s); reconnecting, next attempt in %llu ms",
	    (double)(now - c->lost_ms) / 1000.0, c->lost_msg,
	    (unsigned long long)(c->next_attempt_ms > now ? c->next_attempt_ms - now : 0));
}

static struct inmsg *take_reply(rocmmem_client *c, uint64_t id)
{
	for (struct inmsg **p = &c->replies; *p; p = &(*p)->next) {
		if (conn_reply(*p)->id == id) {
			struct inmsg *m = *p;

			*p = m->next;
			m->next = NULL;
			return m;
		}
	}
	return NULL;
}

int conn_wait_gen(rocmmem_client *c, uint64_t id, uint64_t gen, int64_t timeout_ms,
		  struct inmsg **out)
{
	/* The clock is read once per turn that waits, the first one included (the deadline is
	 * set there: the request is out by then), none when the reply is there already. */
	bool started = false;
	int64_t deadline = -1, left = -1;
	unsigned drained = 0;
	struct inmsg *m;
	int err;

	pthread_mutex_lock(&c->lock);
	c->busy++;
	for (;;) {
		/* Each turn: a late answer in the lane is taken as it comes, not at a lane call. */
		conn_lane_reclaim(c);
		m = take_reply(c, id);
		if (m) {
			/* With progress asked for, what came before the answer (an eviction's
			 * end) is told before the call returns, as the daemon sent it. */
			if (c->progress_fn && conn_has_events(c) && !c->delivering)
				conn_deliver(c);
			c->busy--;
			pthread_mutex_unlock(&c->lock);
			*out = m;
			return 0;
		}
		if (c->broken) {
			err = error_set(c->broken_err, "%s", c->broken_msg);
			break;
		}
		/* Its connection ended: the reply will never come (a new daemon never saw it). */
		if (c->gen != gen || c->reconnecting) {
			err = CONN_LOST;
			break;
		}
		if (!started) {
			started = true;
			deadline = conn_deadline_after(timeout_ms);
			left = deadline < 0 ? -1 : timeout_ms;
		} else if (deadline >= 0) {
			left = conn_remaining_ms(deadline);
		}
		if (left == 0) {
			conn_abandon(c, id);
			err = error_set(-ETIMEDOUT, "rocmmemd did not answer in time");
			break;
		}
		/* While waiting, events are this thread's to deliver: a single-threaded host
		 * blocked for memory must still unload its own idle models when asked. */
		if (conn_has_events(c) && conn_listening(c) && !c->delivering) {
			/* What has arrived meanwhile first: a backlog of samples collapses into
			 * the newest, and the reply may be among it. */
			if (!c->reading && drained < CONN_DISPATCH_MAX_READS && conn_pump(c, 0)) {
				drained++;
				continue;
			}
			conn_deliver(c);
			drained = 0;
			continue;
		}
		/* One thread reads for all (leader/follower): the others wait to be handed
		 * their reply, so a thread waiting long for memory never blocks the rest. */
		if (!c->reading)
			conn_pump(c, left);
		else
			conn_timed_wait(c, deadline);
	}
	c->busy--;
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* await_up is conn_await without the count of threads inside. */
static int await_up(rocmmem_client *c, int64_t deadline)
{
	for (;;) {
		if (c->broken)
			return error_set(c->broken_err, "%s", c->broken_msg);
		if (!c->reconnecting)
			return 0;
		if (c->hooks->due(c)) {
			c->hooks->attempt(c);
			continue;
		}
		if (deadline >= 0 && conn_now_ms() >= (uint64_t)deadline)
			return lost_error(c);
		/* Meanwhile events are delivered here too (the library's own, among them). */
		if (conn_has_events(c) && conn_listening(c) && !c->delivering) {
			conn_deliver(c);
			continue;
		}
		if (c->attempting)
			conn_timed_wait(c, deadline);
		else if (deadline < 0 || c->next_attempt_ms < (uint64_t)deadline)
			conn_timed_wait(c, (int64_t)c->next_attempt_ms);
		else
			conn_timed_wait(c, deadline);
	}
}

struct call_opts conn_default_opts(int64_t reply_ms)
{
	struct call_opts o = {.reply_ms = reply_ms, .reconnect_ms = CONN_REPLY_GRACE_MS};

	return o;
}

int conn_call_opts(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, const struct call_opts *o,
		   struct inmsg **out)
{
	uint64_t start = conn_now_ms(), gen = 0;
	int64_t own = o->timeout_field ? *o->timeout_field : 0, reply_ms = o->reply_ms;
	int64_t reconnect_deadline;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	*out = NULL;
	/* A host that asked never to wait for the daemon (fail-safe) only gets an attempt that
	 * is due anyway. */
	if (c->flags & ROCMMEM_CONNECT_NO_WAIT)
		reconnect_deadline = (int64_t)start;
	else if (o->reconnect_ms < 0)
		reconnect_deadline = -1;
	else
		reconnect_deadline = (int64_t)(start + (uint64_t)o->reconnect_ms);
	for (;;) {
		msg->has_id = true;
		msg->id = conn_next_id(c);
		err = conn_lane_call(c, msg, reply_ms, &gen, &m);
		if (err == LANE_CALL_SKIP && (err = conn_send_gen(c, msg, &gen)) == 0)
			err = LANE_CALL_SOCKET;
		if (err == LANE_CALL_SOCKET)
			err = conn_wait_gen(c, msg->id, gen, reply_ms, &m);
		if (err != CONN_LOST)
			break;
		if (o->once) {
			pthread_mutex_lock(&c->lock);
			err = c->broken ? error_set(c->broken_err, "%s", c->broken_msg)
					: lost_error(c);
			pthread_mutex_unlock(&c->lock);
			return err;
		}
		/* The daemon went away before answering: once the library has reconnected (and
		 * re-declared what it holds) the request goes to the new daemon, for what is left
		 * of its time. */
		pthread_mutex_lock(&c->lock);
		err = conn_await(c, reconnect_deadline);
		pthread_mutex_unlock(&c->lock);
		if (err)
			return err;
		if (o->timeout_field && own >= 0) {
			uint64_t spent = conn_now_ms() - start;

			*o->timeout_field = (uint64_t)own > spent ? own - (int64_t)spent : 0;
			if (o->reply_ms >= 0)
				reply_ms = *o->timeout_field + CONN_REPLY_GRACE_MS;
		}
	}
	if (err)
		return err;
	r = conn_reply(m);
	if (r->has_error && r->error != 0) {
		err = error_from_reply(r);
		inmsg_free(m);
		return err;
	}
	*out = m;
	return 0;
}

int conn_call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t timeout_ms,
	      struct inmsg **out)
{
	struct call_opts o = conn_default_opts(timeout_ms);

	return conn_call_opts(c, msg, &o, out);
}

int conn_await(rocmmem_client *c, int64_t deadline)
{
	int err;

	c->busy++;
	err = await_up(c, deadline);
	c->busy--;
	return err;
}
