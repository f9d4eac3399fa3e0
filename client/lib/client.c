/* SPDX-License-Identifier: MIT */
/* client.c: the connection: connect and hello, requests and replies, events and dispatch. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sockpath.h"
#include "version.h"

/* Queued events beyond this are dropped: a host that never dispatches must not grow. */
#define CONN_MAX_EVENTS 4096
/* Undelivered telemetry events beyond this push out the oldest (each is at most 1.5 KiB). */
#define CONN_MAX_TELEMETRY 1024
/* rocmmem_dispatch reads at most this many messages: a daemon that keeps sending (a busy
 * telemetry feed) cannot keep it from returning. The rest stays readable for the next call. */
#define CONN_DISPATCH_MAX_READS 4096
/* Retry interval while a daemon that is starting has no socket yet. */
#define CONN_RETRY_MS 20

uint64_t conn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* remaining_ms returns the time left before deadline (-1: none), at least 0. */
static int64_t remaining_ms(int64_t deadline)
{
	uint64_t now = conn_now_ms();

	if (deadline < 0)
		return -1;
	return (uint64_t)deadline > now ? (int64_t)((uint64_t)deadline - now) : 0;
}

static int64_t deadline_after(int64_t timeout_ms)
{
	return timeout_ms < 0 ? -1 : (int64_t)(conn_now_ms() + (uint64_t)timeout_ms);
}

void inmsg_free(struct inmsg *m)
{
	if (!m)
		return;
	wire_close_fds(m->fds, m->nfds);
	if (m->msg)
		rocmmem__wire__server_message__free_unpacked(m->msg, NULL);
	free(m->lib);
	free(m);
}

uint64_t conn_next_id(rocmmem_client *c)
{
	uint64_t id;

	pthread_mutex_lock(&c->lock);
	id = c->next_id++;
	pthread_mutex_unlock(&c->lock);
	return id;
}

/*
 * send_packed sends one packed request on fd. A SEQPACKET send is atomic, so threads may send
 * without holding the lock. A daemon that stopped reading must not hang the caller: wait for
 * room a bounded time. Returns 0 or a negative errno (message recorded).
 */
static int send_packed(int fd, const uint8_t *buf, size_t len)
{
	int err;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};

		err = wire_send(fd, buf, len, NULL, 0, MSG_DONTWAIT);
		if (err != -EAGAIN)
			break;
		if (poll(&pfd, 1, CONN_REPLY_GRACE_MS) == 0) {
			err = -ETIMEDOUT;
			break;
		}
	}
	if (err == -EPIPE || err == -ECONNRESET)
		return error_set(-ECONNRESET, "the connection to rocmmemd ended");
	if (err == -ETIMEDOUT)
		return error_set(err, "rocmmemd has not read its socket for %d s",
				 CONN_REPLY_GRACE_MS / 1000);
	if (err)
		return error_set(err, "Could not send a request to rocmmemd: %s", strerror(-err));
	return 0;
}

/* pack packs msg into small or a buffer it allocates (*buf). Returns the length or an error. */
static ssize_t pack(Rocmmem__Wire__ClientMessage *msg, uint8_t *small, size_t small_len,
		    uint8_t **buf)
{
	size_t need = protobuf_c_message_get_packed_size(&msg->base);

	*buf = small;
	if (need > WIRE_MAX_FRAME)
		return error_set(-EMSGSIZE, "request of %zu bytes exceeds the %u-byte limit", need,
				 WIRE_MAX_FRAME);
	if (need > small_len) {
		*buf = malloc(need);
		if (!*buf)
			return error_set(-ENOMEM, "out of memory");
	}
	protobuf_c_message_pack(&msg->base, *buf);
	return (ssize_t)need;
}

/* lost_error records why a request cannot be sent while the library reconnects; lock held. */
static int lost_error(const rocmmem_client *c)
{
	uint64_t now = conn_now_ms();

	return error_set(
	    -ENOTCONN, "rocmmemd went away %.1f s ago (%s); reconnecting, next attempt in %llu ms",
	    (double)(now - c->lost_ms) / 1000.0, c->lost_msg,
	    (unsigned long long)(c->next_attempt_ms > now ? c->next_attempt_ms - now : 0));
}

static void last_words(rocmmem_client *c, uint64_t gen);

int conn_send_gen(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, uint64_t *gen)
{
	uint8_t small[1024], *buf;
	ssize_t len = pack(msg, small, sizeof(small), &buf);
	int fd, err;

	if (len < 0)
		return (int)len;
	pthread_mutex_lock(&c->lock);
	if (c->broken || c->reconnecting) {
		err = c->broken ? error_set(c->broken_err, "%s", c->broken_msg) : CONN_LOST;
		pthread_mutex_unlock(&c->lock);
		goto out;
	}
	fd = c->fd;
	*gen = c->gen;
	/* A new connection takes this fd's number only once no thread sends on the old one. */
	c->sending++;
	pthread_mutex_unlock(&c->lock);
	err = send_packed(fd, buf, (size_t)len);
	pthread_mutex_lock(&c->lock);
	c->sending--;
	if (err == -ECONNRESET) {
		last_words(c, *gen);
		reconnect_lost(c, *gen, err, "the connection to rocmmemd ended");
		if (c->reconnecting)
			err = CONN_LOST;
		else if (c->broken && c->refused) /* the daemon said why: that is the error */
			err = error_set(c->broken_err, "%s", c->broken_msg);
	}
	if (c->sending == 0)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
out:
	if (buf != small)
		free(buf);
	return err;
}

/* mark_broken ends the connection for good (the daemon refused it); lock held. */
static void mark_broken(rocmmem_client *c, int err, const char *why)
{
	reconnect_lost(c, c->gen, err, why);
}

static bool take_abandoned(rocmmem_client *c, uint64_t id)
{
	for (struct abandoned **p = &c->abandoned; *p; p = &(*p)->next) {
		if ((*p)->id == id) {
			struct abandoned *a = *p;

			*p = a->next;
			free(a);
			return true;
		}
	}
	return false;
}

static void abandon(rocmmem_client *c, uint64_t id)
{
	struct abandoned *a = malloc(sizeof(*a));

	if (!a)
		return; /* its late reply will sit unclaimed until disconnect: bounded by one */
	a->id = id;
	a->next = c->abandoned;
	c->abandoned = a;
}

/*
 * undo_late_reply handles a reply nobody waits for any more: a lease granted after its
 * requester gave up is released at once, so the daemon does not charge it to this process.
 * Lock held, by the thread reading the current connection.
 */
static void undo_late_reply(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Reply *r = conn_reply(m);

	if (r->has_more && r->more)
		abandon(c, r->id); /* further parts follow under the same id */
	if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_LEASE && r->lease->has_lease_id) {
		Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
		Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
		uint8_t small[256], *buf;
		ssize_t len;

		rel.has_lease_id = true;
		rel.lease_id = r->lease->lease_id;
		msg.has_id = true;
		msg.id = c->next_id++;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
		msg.lease_release = &rel;
		len = pack(&msg, small, sizeof(small), &buf);
		if (len > 0 && send_packed(c->fd, buf, (size_t)len) == 0)
			abandon(c, msg.id);
		if (len > 0 && buf != small)
			free(buf);
	}
	inmsg_free(m);
}

/* add_lost adds n to a count of lost samples or events, saturating. */
static uint32_t add_lost(uint32_t count, uint64_t n)
{
	return n >= (uint64_t)(UINT32_MAX - count) ? UINT32_MAX : count + (uint32_t)n;
}

static bool has_events(const rocmmem_client *c)
{
	return c->events || c->telemetry || c->sample;
}

static void wake(rocmmem_client *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* Saturated counter: the fd is readable anyway. */
	}
}

/*
 * conn_queue_event files an event; lock held. A sample replaces the one not yet delivered, and
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
	wake(c);
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
		lm = model_by_daemon_id(c, e->evict_request->model_id);
	else if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED)
		lm = model_by_daemon_id(c, e->model_revoked->model_id);
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

/* file_message sorts a received message: replies to their requesters, events to the queues. */
static void file_message(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Reply *r = conn_reply(m);

	if (!r) {
		conn_note_event(c, m);
		conn_queue_event(c, m);
		return;
	}
	if (!r->has_id || r->id == 0) {
		/* A connection-level refusal (too many clients, protocol error): the daemon closes
		 * the connection next, and this is why. */
		c->refused = true;
		mark_broken(c, r->has_error && r->error < 0 ? r->error : -EPROTO,
			    r->message ? r->message : "the daemon refused the connection");
		inmsg_free(m);
		return;
	}
	if (take_abandoned(c, r->id)) {
		undo_late_reply(c, m);
		return;
	}
	m->next = c->replies;
	c->replies = m;
}

/*
 * receive_one waits up to timeout_ms for one message and unpacks it. Called by the one thread
 * that is reading, without the lock. Returns 1 with *out set, 0 on timeout, or a negative
 * errno when the connection is over (why in the buffer).
 */
static int receive_one(rocmmem_client *c, int64_t timeout_ms, struct inmsg **out, char *why,
		       size_t why_len)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	struct inmsg *m;
	ssize_t n;
	int rc;

	do {
		int wait = timeout_ms < 0 ? -1 : timeout_ms > 1000000 ? 1000000 : (int)timeout_ms;

		rc = poll(&pfd, 1, wait);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		snprintf(why, why_len, "Could not poll the connection: %s", strerror(errno));
		return -errno;
	}
	if (rc == 0)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return 0; /* try again later; the message stays in the socket */
	n = wire_recv(c->fd, c->rx, sizeof(c->rx), m->fds, &m->nfds, MSG_DONTWAIT);
	if (n == -EAGAIN) {
		free(m);
		return 0;
	}
	if (n <= 0) {
		free(m);
		snprintf(why, why_len, "%s",
			 n == 0 ? "the daemon closed the connection"
				: "the connection to rocmmemd failed");
		return n == 0 || n == -EPIPE ? -ECONNRESET : (int)n;
	}
	m->msg = rocmmem__wire__server_message__unpack(NULL, (size_t)n, c->rx);
	if (!m->msg || m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND__NOT_SET) {
		inmsg_free(m);
		snprintf(why, why_len, "the daemon sent a message this library cannot decode");
		return -EPROTO;
	}
	*out = m;
	return 1;
}

/* pump_socket reads until a message arrives, the time passes or the connection ends; lock
 * held on entry and exit, released while reading. Returns false on timeout. */
static bool pump_socket(rocmmem_client *c, int64_t timeout_ms)
{
	char why[256] = "";
	struct inmsg *m = NULL;
	uint64_t gen = c->gen;
	int rc;

	c->reading = true;
	pthread_mutex_unlock(&c->lock);
	rc = receive_one(c, timeout_ms, &m, why, sizeof(why));
	pthread_mutex_lock(&c->lock);
	c->reading = false;
	if (rc > 0)
		file_message(c, m);
	else if (rc < 0)
		reconnect_lost(c, gen, rc, why);
	pthread_cond_broadcast(&c->cond);
	return rc != 0;
}

/*
 * last_words files what a daemon that closed connection gen sent before it did (that it stops,
 * why it refused us), which a failed send would otherwise leave unread: whether the end is
 * final, and whether the daemon took this client's memory back, depends on it. Lock held.
 */
static void last_words(rocmmem_client *c, uint64_t gen)
{
	while (!c->reading && c->gen == gen && !c->broken && !c->reconnecting) {
		struct inmsg *m = NULL;
		char why[256];
		int rc;

		c->reading = true;
		pthread_mutex_unlock(&c->lock);
		rc = receive_one(c, 0, &m, why, sizeof(why));
		pthread_mutex_lock(&c->lock);
		c->reading = false;
		if (rc <= 0)
			break;
		file_message(c, m);
	}
	pthread_cond_broadcast(&c->cond);
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

void conn_timed_wait(rocmmem_client *c, int64_t deadline)
{
	struct timespec ts;
	uint64_t ms;

	if (deadline < 0) {
		pthread_cond_wait(&c->cond, &c->lock);
		return;
	}
	ms = (uint64_t)deadline;
	/* The condition variable uses CLOCK_MONOTONIC (set at creation), like deadlines. */
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
}

static void to_event(const struct inmsg *m, struct rocmmem_event *out);

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
	lm = m->model ? model_by_id(c, m->model) : NULL;
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

/*
 * deliver_events runs the event callback for every queued event, in order, one thread at a
 * time; lock held on entry and exit, released around the callbacks (which may call the
 * library: an evict callback acks from inside). Returns how many were delivered.
 */
static int deliver_events(rocmmem_client *c)
{
	rocmmem_event_fn fn = c->event_fn;
	void *userdata = c->event_userdata;
	struct batch b;
	struct inmsg *m;
	uint64_t count;
	int n = 0;

	if (c->delivering || !has_events(c))
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
		struct rocmmem_event ev;
		int err = 0;

		if (e && e->body_case == ROCMMEM__WIRE__EVENT__BODY_SAMPLE) {
			if (still_subscribed(c, b.epoch))
				err = feed_to_event(c, m, b.samples_lost, &view, &ev);
			else
				err = -ECANCELED;
		} else if (e && e->body_case == ROCMMEM__WIRE__EVENT__BODY_TELEMETRY) {
			if (still_subscribed(c, b.epoch))
				err = feed_to_event(c, m, b.telemetry_lost, &view, &ev);
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
		feed_view_finish(&view);
		inmsg_free(m);
	}
	pthread_mutex_lock(&c->lock);
	c->delivering = false;
	pthread_cond_broadcast(&c->cond);
	return n;
}

int conn_wait_gen(rocmmem_client *c, uint64_t id, uint64_t gen, int64_t timeout_ms,
		  struct inmsg **out)
{
	int64_t deadline = deadline_after(timeout_ms);
	unsigned drained = 0;
	struct inmsg *m;
	int err;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		m = take_reply(c, id);
		if (m) {
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
		if (deadline >= 0 && remaining_ms(deadline) == 0) {
			abandon(c, id);
			err = error_set(-ETIMEDOUT, "rocmmemd did not answer in time");
			break;
		}
		/* While waiting, events are this thread's to deliver: a single-threaded host
		 * blocked for memory must still unload its own idle models when asked. */
		if (has_events(c) && c->event_fn && !c->delivering) {
			/* What has arrived meanwhile first: a backlog of samples collapses into
			 * the newest, and the reply may be among it. */
			if (!c->reading && drained < CONN_DISPATCH_MAX_READS && pump_socket(c, 0)) {
				drained++;
				continue;
			}
			deliver_events(c);
			drained = 0;
			continue;
		}
		/* One thread reads for all (leader/follower): the others wait to be handed
		 * their reply, so a thread waiting long for memory never blocks the rest. */
		if (!c->reading)
			pump_socket(c, remaining_ms(deadline));
		else
			conn_timed_wait(c, deadline);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int conn_await(rocmmem_client *c, int64_t deadline)
{
	for (;;) {
		if (c->broken)
			return error_set(c->broken_err, "%s", c->broken_msg);
		if (!c->reconnecting)
			return 0;
		if (reconnect_due(c)) {
			reconnect_try(c);
			continue;
		}
		if (deadline >= 0 && conn_now_ms() >= (uint64_t)deadline)
			return lost_error(c);
		/* Meanwhile events are delivered here too (the library's own, among them). */
		if (has_events(c) && c->event_fn && !c->delivering) {
			deliver_events(c);
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
		err = conn_send_gen(c, msg, &gen);
		if (err == 0)
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

/* open_socket connects to path, retrying while it is absent or refusing until the deadline. */
static int open_socket(const char *path, int64_t deadline, int *out)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd, err;

	memcpy(addr.sun_path, path, strlen(path) + 1);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return error_set(-errno, "Could not create a socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
			*out = fd;
			return 0;
		}
		err = -errno;
		close(fd);
		if (err != -ENOENT && err != -ECONNREFUSED && err != -EAGAIN && err != -EINTR)
			break;
		if (remaining_ms(deadline) == 0)
			break;
		struct timespec pause = {.tv_nsec = CONN_RETRY_MS * 1000000L};
		nanosleep(&pause, NULL);
	}
	if (err == -ENOENT || err == -ECONNREFUSED)
		return error_set(err, "no rocmmemd is listening on %s", path);
	if (err == -EACCES)
		return error_set(err,
				 "permission denied on %s (the system socket needs membership of "
				 "its group, usually 'rocmmem')",
				 path);
	return error_set(err, "Could not connect to %s: %s", path, strerror(-err));
}

/*
 * refused_why reads the reason a daemon that refused the connection at once sent before it
 * closed (too many clients, a user not allowed): the hello may have found the connection
 * closed already, but the reason waits in the socket. Returns its negative errno (recorded
 * as the error), or 0 when there is none.
 */
static int refused_why(rocmmem_client *c)
{
	uint8_t *buf = malloc(WIRE_MAX_FRAME);
	Rocmmem__Wire__ServerMessage *m;
	unsigned nfds = 0;
	int fds[WIRE_MAX_FDS], err = 0;
	ssize_t n;

	if (!buf)
		return 0;
	n = wire_recv(c->fd, buf, WIRE_MAX_FRAME, fds, &nfds, MSG_DONTWAIT);
	if (n == -ECONNRESET) /* reported once, before what is left to read */
		n = wire_recv(c->fd, buf, WIRE_MAX_FRAME, fds, &nfds, MSG_DONTWAIT);
	wire_close_fds(fds, nfds);
	m = n > 0 ? rocmmem__wire__server_message__unpack(NULL, (size_t)n, buf) : NULL;
	if (m && m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY &&
	    (!m->reply->has_id || m->reply->id == 0) && m->reply->has_error && m->reply->error < 0)
		err = error_from_reply(m->reply);
	if (m)
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	free(buf);
	return err;
}

static int say_hello(rocmmem_client *c, const char *name, int64_t deadline)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	int64_t wait = deadline < 0 ? CONN_REPLY_GRACE_MS : remaining_ms(deadline);
	Rocmmem__Wire__HelloReply *h;
	struct inmsg *m;
	int err;

	hello.has_protocol_version = true;
	hello.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	hello.client_name = (char *)name;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	err = conn_call(c, &msg, wait > 0 ? wait : CONN_REPLY_GRACE_MS, &m);
	if (err == -ECONNRESET) {
		int why = refused_why(c);

		return why ? why : err;
	}
	if (err)
		return err;
	if (conn_reply(m)->body_case != ROCMMEM__WIRE__REPLY__BODY_HELLO) {
		inmsg_free(m);
		return error_set(-EPROTO, "the daemon answered hello with something else");
	}
	h = conn_reply(m)->hello;
	c->daemon_version = strdup(h->daemon_version ? h->daemon_version : "");
	c->backend = strdup(h->backend ? h->backend : "");
	c->device_count = h->has_device_count ? h->device_count : 0;
	inmsg_free(m);
	/*
	 * HIP reads its IPC mode once, when it initialises: say it now, before the host loads a
	 * model, unless the environment already decides (the legacy mode needs amdgpu-dkms).
	 */
	if (c->backend && strcmp(c->backend, "hip") == 0)
		setenv("HSA_ENABLE_IPC_MODE_LEGACY", "0", 0);
	if (!c->daemon_version || !c->backend)
		return error_set(-ENOMEM, "out of memory");
	return 0;
}

static int setup_event_fd(rocmmem_client *c)
{
	struct epoll_event ev = {.events = EPOLLIN};

	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->efd < 0 || c->tfd < 0 || c->epfd < 0)
		return -errno;
	ev.data.fd = c->fd;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	ev.data.fd = c->efd;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &ev) < 0)
		return -errno;
	ev.data.fd = c->tfd;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->tfd, &ev) < 0)
		return -errno;
	return 0;
}

ROCMMEM_EXPORT int rocmmem_connect_with(const struct rocmmem_connect_options *opts,
					rocmmem_client **out)
{
	struct rocmmem_connect_options o = {0};
	int64_t deadline;
	pthread_condattr_t attr;
	rocmmem_client *c;
	int err;

	if (!out)
		return error_set(-EINVAL, "rocmmem_connect needs somewhere to store the client");
	*out = NULL;
	/* Fields a caller built against an older header does not know stay at their default. */
	if (!opts || opts->size < offsetof(struct rocmmem_connect_options, flags))
		return error_set(-EINVAL, "rocmmem_connect_with needs options with their size set");
	memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	if (o.flags & ~(uint32_t)(ROCMMEM_CONNECT_NO_RECONNECT | ROCMMEM_CONNECT_NO_WAIT))
		return error_set(-EINVAL, "unknown connect flags 0x%x", o.flags);
	deadline = deadline_after(o.timeout_ms);
	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(-ENOMEM, "out of memory");
	c->fd = c->efd = c->tfd = c->epfd = -1;
	c->next_id = 1;
	c->events_tail = &c->events;
	c->telemetry_tail = &c->telemetry;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
	reconnect_init(c, o.flags, o.reconnect_window_ms);
	err = sockpath_resolve(o.socket_path, SOCKPATH_CLIENT, c->path, sizeof(c->path));
	if (err) {
		error_set(err, "Could not use the socket path: %s", strerror(-err));
		goto fail;
	}
	if (o.name && !(c->name = strdup(o.name))) {
		err = error_set(-ENOMEM, "out of memory");
		goto fail;
	}
	err = open_socket(c->path, deadline, &c->fd);
	if (err)
		goto fail;
	{
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			c->daemon_pid = cred.pid;
	}
	err = setup_event_fd(c);
	if (err) {
		error_set(err, "Could not set up the event fd: %s", strerror(-err));
		goto fail;
	}
	err = say_hello(c, o.name, deadline);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	rocmmem_disconnect(c);
	return err;
}

ROCMMEM_EXPORT int rocmmem_connect(const char *socket_path, const char *name, int timeout_ms,
				   rocmmem_client **out)
{
	struct rocmmem_connect_options o = {
	    .size = sizeof(o), .socket_path = socket_path, .name = name, .timeout_ms = timeout_ms};

	return rocmmem_connect_with(&o, out);
}

ROCMMEM_EXPORT void rocmmem_disconnect(rocmmem_client *c)
{
	struct inmsg *m;

	if (!c)
		return;
	lease_forget_all(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->efd >= 0)
		close(c->efd);
	if (c->tfd >= 0)
		close(c->tfd);
	if (c->epfd >= 0)
		close(c->epfd);
	while ((m = c->replies)) {
		c->replies = m->next;
		inmsg_free(m);
	}
	while ((m = c->events)) {
		c->events = m->next;
		inmsg_free(m);
	}
	conn_drop_telemetry(c);
	while (c->abandoned) {
		struct abandoned *a = c->abandoned;

		c->abandoned = a->next;
		free(a);
	}
	reconnect_finish(c);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->daemon_version);
	free(c->backend);
	free(c);
}

ROCMMEM_EXPORT const char *rocmmem_client_daemon_version(const rocmmem_client *c)
{
	return c->daemon_version;
}

ROCMMEM_EXPORT const char *rocmmem_client_backend(const rocmmem_client *c)
{
	return c->backend;
}

ROCMMEM_EXPORT unsigned rocmmem_client_device_count(const rocmmem_client *c)
{
	return c->device_count;
}

ROCMMEM_EXPORT enum rocmmem_connection_state rocmmem_client_state(rocmmem_client *c)
{
	enum rocmmem_connection_state state;

	pthread_mutex_lock(&c->lock);
	state = c->broken	  ? ROCMMEM_DISCONNECTED
		: c->reconnecting ? ROCMMEM_RECONNECTING
				  : ROCMMEM_CONNECTED;
	pthread_mutex_unlock(&c->lock);
	return state;
}

ROCMMEM_EXPORT int rocmmem_set_event_callback(rocmmem_client *c, rocmmem_event_fn fn,
					      void *userdata)
{
	pthread_mutex_lock(&c->lock);
	c->event_fn = fn;
	c->event_userdata = userdata;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

ROCMMEM_EXPORT int rocmmem_event_fd(const rocmmem_client *c)
{
	return c->epfd;
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

ROCMMEM_EXPORT int rocmmem_dispatch(rocmmem_client *c)
{
	bool deliver_disconnect = false, broken;
	char reason[sizeof(c->broken_msg)];
	rocmmem_event_fn fn;
	void *userdata;
	int handled, reads = 0;

	pthread_mutex_lock(&c->lock);
	if (c->reconnecting) {
		uint64_t expirations;

		/* The timer made the event fd readable: an attempt is due, made here. */
		if (read(c->tfd, &expirations, sizeof(expirations)) < 0) {
			/* EAGAIN: not due yet. */
		}
		if (reconnect_due(c))
			reconnect_try(c);
	}
	/* Read whatever has arrived, unless another thread is reading for everyone already. */
	while (!c->reading && !c->broken && !c->reconnecting && reads++ < CONN_DISPATCH_MAX_READS &&
	       pump_socket(c, 0)) {
	}
	handled = deliver_events(c);
	if (c->broken && !c->disconnect_delivered && !c->delivering) {
		c->disconnect_delivered = true;
		deliver_disconnect = true;
		snprintf(reason, sizeof(reason), "%s", c->broken_msg);
	}
	fn = c->event_fn;
	userdata = c->event_userdata;
	broken = c->broken;
	pthread_mutex_unlock(&c->lock);

	if (deliver_disconnect) {
		struct rocmmem_event ev = {.type = ROCMMEM_EVENT_DISCONNECTED, .reason = reason};

		if (fn)
			fn(c, &ev, userdata);
		handled++;
	}
	if (handled == 0 && broken)
		return error_set(-ECONNRESET, "the connection to rocmmemd ended");
	return handled;
}
