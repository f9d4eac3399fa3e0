/* SPDX-License-Identifier: MIT */
/*
 * io.c: the connection's socket: sending requests (any thread, without the lock), and the one
 * reader that receives for everyone and files what arrives: replies to their requesters,
 * events to their queues, late replies undone.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "base/error.h"
#include "client.h"

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
	ssize_t len = wire_pack_walk(&msg->base, small, small_len);
	size_t need;

	*buf = small;
	if (len >= 0) /* nearly every request: packed without sizing it first */
		return len;
	need = protobuf_c_message_get_packed_size(&msg->base);
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

static bool take_abandoned(rocmmem_client *c, uint64_t id);

void conn_unabandon(rocmmem_client *c, uint64_t id)
{
	take_abandoned(c, id);
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

void conn_abandon(rocmmem_client *c, uint64_t id)
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
 * Lock held, by the thread reading the current connection or one taking a late answer out of
 * its request lane.
 */
static void undo_late_reply(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Reply *r = conn_reply(m);

	if (r->has_more && r->more)
		conn_abandon(c, r->id); /* further parts follow under the same id */
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
		if (len > 0 && send_packed(c->fd, buf, (size_t)len) == 0) {
			atomic_fetch_add(&c->sock_tx, 1);
			conn_abandon(c, msg.id);
		}
		if (len > 0 && buf != small)
			free(buf);
	}
	inmsg_free(m);
}

/* conn_file sorts a received message: replies to their requesters, events to the queues. */
void conn_file(rocmmem_client *c, struct inmsg *m)
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
		c->hooks->lost(c, c->gen, r->has_error && r->error < 0 ? r->error : -EPROTO,
			       r->message ? r->message : "the daemon refused the connection");
		inmsg_free(m);
		return;
	}
	/* Before anything else: an arena's fd comes once, with whichever grant is first, even
	 * one nobody waits for any more. */
	held_arena_note(c, m);
	if (take_abandoned(c, r->id)) {
		undo_late_reply(c, m);
		return;
	}
	m->next = c->replies;
	c->replies = m;
}

/* The longest receive timeout the reader sets: it wakes up at least that often. */
#define RECV_TIMEOUT_MAX_MS 1000
/* A timeout set earlier that is shorter than what is left is kept when at least this long. */
#define RECV_TIMEOUT_KEEP_MS 250
/* Shorter waits are polled: poll's timer is precise, a socket's timeout is not (below). */
#define RECV_TIMEOUT_MIN_MS 20

/*
 * recv_flags readies fd for a receive that gives up after at most timeout_ms (< 0: the
 * caller's wait has no end; it calls again), and returns the flags to receive with. The
 * receive then blocks in recvmsg itself (one system call, not poll and recvmsg), under the
 * socket's SO_RCVTIMEO: set only when the one set before does not fit (longer than what is
 * left, or so much shorter that the reader would wake up for nothing), so that most receives
 * set nothing. The kernel keeps that timeout in jiffies, rounded up, on its coarse timer
 * wheel, which may fire up to about an eighth late: what is set leaves that much (and a few
 * ms) of the wait unused, and the caller, which wakes early at worst, receives again with
 * what is left. Returns -1 for a short wait, or when the timeout cannot be set: then poll.
 */
static int recv_flags(rocmmem_client *c, int64_t timeout_ms)
{
	int64_t set = c->rcv_timeout_gen == c->gen ? c->rcv_timeout_ms : 0;
	int64_t want =
	    timeout_ms < 0 || timeout_ms > RECV_TIMEOUT_MAX_MS ? RECV_TIMEOUT_MAX_MS : timeout_ms;
	struct timeval tv;

	if (timeout_ms == 0)
		return MSG_DONTWAIT;
	if (want < RECV_TIMEOUT_MIN_MS)
		return -1;
	want -= want / 8 + 4;
	if (set > 0 && set <= want && (set >= RECV_TIMEOUT_KEEP_MS || set * 2 >= want))
		return 0;
	tv.tv_sec = (time_t)(want / 1000);
	tv.tv_usec = (suseconds_t)(want % 1000) * 1000;
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		c->rcv_timeout_ms = 0;
		return -1;
	}
	c->rcv_timeout_ms = want;
	c->rcv_timeout_gen = c->gen;
	return 0;
}

/*
 * receive_one waits up to timeout_ms for one message and unpacks it. Called by the one thread
 * that is reading, without the lock. Returns 1 with *out set, 0 on timeout, or a negative
 * errno when the connection is over (why in the buffer).
 */
static int receive_one(rocmmem_client *c, int64_t timeout_ms, struct inmsg **out, char *why,
		       size_t why_len)
{
	int flags = recv_flags(c, timeout_ms);
	struct inmsg *m;
	ssize_t n;

	if (flags < 0) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int wait = timeout_ms < 0 ? -1 : timeout_ms > 1000000 ? 1000000 : (int)timeout_ms;
		int rc;

		/* Interrupted by a signal: back to the caller, which waits again for what is left
		 * of its time (poll would start the whole wait again). */
		rc = poll(&pfd, 1, wait);
		if (rc < 0 && errno == EINTR)
			return 0;
		if (rc < 0) {
			snprintf(why, why_len, "Could not poll the connection: %s",
				 strerror(errno));
			return -errno;
		}
		if (rc == 0)
			return 0;
		flags = MSG_DONTWAIT;
	}
	m = inmsg_new();
	if (!m)
		return 0; /* try again later; the message stays in the socket */
	n = wire_recv(c->fd, c->rx, sizeof(c->rx), m->fds, &m->nfds, flags);
	if (n == -EAGAIN || n == -EINTR) {
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
	m->msg = conn_unpack((size_t)n, c->rx);
	if (!m->msg || m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND__NOT_SET) {
		inmsg_free(m);
		snprintf(why, why_len, "the daemon sent a message this library cannot decode");
		return -EPROTO;
	}
	*out = m;
	return 1;
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
		c->sock_rx++;
		conn_file(c, m);
	}
	pthread_cond_broadcast(&c->cond);
}

bool conn_pump(rocmmem_client *c, int64_t timeout_ms)
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
	if (rc > 0) {
		c->sock_rx++;
		conn_file(c, m);
	} else if (rc < 0)
		c->hooks->lost(c, gen, rc, why);
	pthread_cond_broadcast(&c->cond);
	return rc != 0;
}

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
	if (err == 0)
		atomic_fetch_add(&c->sock_tx, 1);
	pthread_mutex_lock(&c->lock);
	c->sending--;
	if (err == -ECONNRESET) {
		last_words(c, *gen);
		c->hooks->lost(c, *gen, err, "the connection to rocmmemd ended");
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
