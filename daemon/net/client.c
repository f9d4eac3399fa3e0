/* SPDX-License-Identifier: MIT */
/* client.c: one connection: receive, decode, validate, dispatch, reply, and teardown. */
#include "client.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "net/lane_io.h"
#include "wire.h"

/* Packets handled per wake-up before other clients get their turn. */
#define CLIENT_BURST 32

static void on_poll(uv_poll_t *handle, int status, int events);
static void read_packets(struct client *c);

const char *client_label(const struct client *c, char *buf, size_t len)
{
	return holder_label(c->holder, buf, len);
}

/*
 * Backpressure: while replies wait to be sent, the client's further requests wait in its
 * socket. A client that does not read its replies so stalls itself instead of growing the
 * daemon's queues (and the fds queued grants hold).
 */
static bool reading_paused(const struct client *c)
{
	return !TAILQ_EMPTY(&c->outq);
}

static void set_poll_events(struct client *c, int events)
{
	if (c->closing || events == c->poll_events)
		return;
	c->poll_events = events;
	uv_poll_start(&c->poll, events, on_poll);
}

int client_create(struct server *s, int fd, struct peer *peer, struct client **out)
{
	struct client *c;
	uint64_t id;
	int err;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->server = s;
	c->fd = fd;
	TAILQ_INIT(&c->outq);
	err = svc_holder_create(&s->svc, &peer->who, &c->holder);
	if (err) {
		free(c);
		return err;
	}
	c->id = c->holder->id;
	/* Found by its holder's id: the same number in both tables, since both only grow. */
	idtable_skip_to(&s->conns, c->id);
	err = idtable_add(&s->conns, c, &id);
	if (err == 0) {
		assert(id == c->id);
		err = uv_poll_init(s->loop, &c->poll, fd);
		if (err)
			idtable_remove(&s->conns, c->id);
	}
	if (err) {
		/* The identity goes back to the caller, who forgets it. */
		state_holder_leave(&s->svc.state, c->holder);
		identity_take(&peer->who, &c->holder->who);
		state_holder_free(c->holder);
		free(c);
		return err;
	}
	/* Its pidfd is the connection's from here on: the caller's copy is left empty. */
	c->peer = *peer;
	peer->pidfd = -1;
	c->poll.data = c;
	set_poll_events(c, UV_READABLE | UV_DISCONNECT);
	TAILQ_INSERT_TAIL(&s->clients, c, link);
	s->client_count++;
	log_debug("connection %" PRIu64 " accepted from pid %d uid %u gid %u (%u more group(s); "
		  "pidfd: %s)",
		  c->id, (int)c->holder->who.pid, (unsigned)c->holder->who.uid,
		  (unsigned)c->holder->who.gid, c->holder->who.ngroups,
		  peer_pidfd_name(c->peer.pidfd_from));
	*out = c;
	return 0;
}

static void on_closed(uv_handle_t *handle)
{
	struct client *c = handle->data;

	close(c->fd);
	c->fd = -1;
	c->handle_closed = true;
	free(c);
}

static void free_outq(struct client *c)
{
	struct outmsg *m;

	while ((m = TAILQ_FIRST(&c->outq))) {
		TAILQ_REMOVE(&c->outq, m, link);
		wire_close_fds(m->fds, m->nfds);
		free(m);
	}
	c->out_bytes = 0;
}

void client_destroy(struct client *c)
{
	struct server *s = c->server;

	if (c->closing)
		return;
	c->closing = true;
	TAILQ_REMOVE(&s->clients, c, link);
	s->client_count--;
	idtable_remove(&s->conns, c->id);
	s->hooks.closing(c);
	if (c->lane) {
		daemon_lane_close(c->lane);
		c->lane = NULL;
	}
	free_outq(c);
	svc_holder_gone(&s->svc, c->holder, c->greeted);
	c->holder = NULL;
	/* The process is nothing to the daemon any more: its pidfd goes with the connection. */
	peer_forget(&c->peer);
	uv_poll_stop(&c->poll);
	uv_close((uv_handle_t *)&c->poll, on_closed);
}

void client_kick(struct client *c, const char *why)
{
	char label[128];

	if (c->closing || c->kicked)
		return;
	log_warn("disconnecting client %s: %s", client_label(c, label, sizeof(label)), why);
	c->kicked = true;
	/* The loop sees the shut-down socket as readable and tears the client down there. */
	shutdown(c->fd, SHUT_RDWR);
	set_poll_events(c, UV_READABLE | UV_DISCONNECT);
}

/* send_packet sends buf now, or queues a copy (fds duplicated) behind earlier packets. */
static int send_packet(struct client *c, const uint8_t *buf, size_t len, const int *fds,
		       unsigned nfds)
{
	struct outmsg *m;
	size_t footprint;
	int rc;

	if (!c || c->closing || c->kicked)
		return -EPIPE;
	if (TAILQ_EMPTY(&c->outq)) {
		rc = wire_send(c->fd, buf, len, fds, nfds, MSG_DONTWAIT);
		if (rc == 0) {
			c->tx_packets++;
			return 0;
		}
		if (rc != -EAGAIN) {
			client_kick(c, "the connection failed");
			return rc;
		}
	}
	footprint = sizeof(*m) + nfds * sizeof(int) + len;
	if (c->out_bytes + footprint > c->server->svc.cfg.limits.max_queued_out) {
		svc_limit_hit(&c->server->svc, c->holder, LIMIT_QUEUED, NULL);
		client_kick(c, "it does not read its replies (queued)");
		return -ENOBUFS;
	}
	m = malloc(footprint);
	if (!m) {
		client_kick(c, "out of memory queueing a reply");
		return -ENOMEM;
	}
	m->fds = (int *)(m + 1);
	m->data = (uint8_t *)(m->fds + nfds);
	memcpy(m->data, buf, len);
	m->len = len;
	m->footprint = footprint;
	m->nfds = 0;
	for (unsigned i = 0; i < nfds; i++) {
		int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);

		if (fd < 0) {
			rc = -errno;
			wire_close_fds(m->fds, m->nfds);
			free(m);
			client_kick(c, "could not keep a descriptor for a queued reply");
			return rc;
		}
		m->fds[m->nfds++] = fd;
	}
	TAILQ_INSERT_TAIL(&c->outq, m, link);
	c->tx_packets++;
	c->out_bytes += footprint;
	set_poll_events(c, UV_WRITABLE | UV_DISCONNECT);
	return 1;
}

static void flush(struct client *c)
{
	struct outmsg *m;

	while ((m = TAILQ_FIRST(&c->outq))) {
		int rc = wire_send(c->fd, m->data, m->len, m->fds, m->nfds, MSG_DONTWAIT);

		if (rc == -EAGAIN)
			return;
		if (rc < 0) {
			client_kick(c, "the connection failed");
			return;
		}
		TAILQ_REMOVE(&c->outq, m, link);
		c->out_bytes -= m->footprint;
		wire_close_fds(m->fds, m->nfds);
		free(m);
	}
	/* The status stream goes on, and telemetry it fell behind on goes once replies are out. */
	c->server->hooks.drained(c);
	/* Drained (unless the status stream queued more): read the waiting requests again. */
	if (!reading_paused(c))
		set_poll_events(c,
				UV_READABLE | UV_DISCONNECT | (c->feed_blocked ? UV_WRITABLE : 0));
}

int client_send_droppable(struct client *c, const uint8_t *buf, size_t len)
{
	int rc;

	if (c->closing || c->kicked)
		return -EPIPE;
	if (!TAILQ_EMPTY(&c->outq)) {
		c->feed_blocked = true; /* flush() wakes the feed once the replies are out */
		return -EAGAIN;
	}
	rc = wire_send(c->fd, buf, len, NULL, 0, MSG_DONTWAIT);
	if (rc == -EAGAIN) {
		c->feed_blocked = true;
		set_poll_events(c, UV_READABLE | UV_WRITABLE | UV_DISCONNECT);
		return rc;
	}
	if (rc < 0) {
		client_kick(c, "the connection failed");
		return rc;
	}
	c->tx_packets++;
	return 0;
}

/*
 * lane_reply answers the request waiting in c's lane with msg, in the page when it can: no
 * fds, not a stream, nothing queued before it on the socket (it would overtake that) and
 * small enough. Returns 0 when answered there; otherwise the lane says "on the socket" and
 * the caller sends it there (1).
 */
static int lane_reply(struct client *c, Rocmmem__Wire__ServerMessage *msg, unsigned nfds)
{
	struct daemon_lane *l = c->lane;
	ssize_t len = -EMSGSIZE;

	if (nfds == 0 && !(msg->reply->has_more && msg->reply->more) && TAILQ_EMPTY(&c->outq))
		len = wire_pack(&msg->base, daemon_lane_reply_buf(l), LANE_SLOT);
	if (len > 0) {
		daemon_lane_answer(l, LANE_REPLY, (size_t)len, c->tx_packets);
		c->server->svc.counters.lane_requests++;
		return 0;
	}
	daemon_lane_answer(l, LANE_ON_SOCKET, 0, c->tx_packets);
	return 1;
}

static int send_server_message(struct client *c, Rocmmem__Wire__ServerMessage *msg, const int *fds,
			       unsigned nfds)
{
	ssize_t len;

	if (!c || c->closing || c->kicked)
		return -EPIPE;
	len = wire_pack(&msg->base, c->server->tx, sizeof(c->server->tx));

	if (len < 0) {
		log_error("Could not pack a message for client %" PRIu64 ": too large", c->id);
		return (int)len;
	}
	return send_packet(c, c->server->tx, (size_t)len, fds, nfds);
}

int client_reply(struct client *c, Rocmmem__Wire__Reply *reply, const int *fds, unsigned nfds)
{
	Rocmmem__Wire__ServerMessage msg = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;

	/* Reply.error is always present: 0 on success, so that absent never has to mean 0. */
	reply->has_error = true;
	msg.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	msg.reply = reply;
	if (c && !c->closing && !c->kicked && c->lane && c->lane->pending &&
	    reply->id == c->lane->pending_id && lane_reply(c, &msg, nfds) == 0)
		return 0;
	return send_server_message(c, &msg, fds, nfds);
}

void client_reply_ok(struct client *c, uint64_t id)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;

	reply.has_id = true;
	reply.id = id;
	reply.has_error = true;
	reply.error = 0;
	client_reply(c, &reply, NULL, 0);
}

static void reply_errorv(struct client *c, uint64_t id, int err, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static void reply_errorv(struct client *c, uint64_t id, int err, const char *fmt, va_list ap)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	char text[1024];

	vsnprintf(text, sizeof(text), fmt, ap);
	reply.has_id = true;
	reply.id = id;
	reply.has_error = true;
	reply.error = err;
	reply.message = text;
	client_reply(c, &reply, NULL, 0);
}

void client_reply_error(struct client *c, uint64_t id, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_errorv(c, id, err, fmt, ap);
	va_end(ap);
}

void client_event(struct client *c, Rocmmem__Wire__Event *event)
{
	Rocmmem__Wire__ServerMessage msg = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;

	if (!c)
		return;
	event->has_seq = true;
	event->seq = ++c->event_seq;
	msg.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT;
	msg.event = event;
	send_server_message(c, &msg, NULL, 0);
}

void client_protocol_error(struct client *c, uint64_t id, int err, const char *fmt, ...)
{
	char text[512], label[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_warn("protocol error from client %s: %s; disconnecting",
		 client_label(c, label, sizeof(label)), text);
	client_reply_error(c, id, err, "%s", text);
	client_destroy(c);
}

/*
 * peer_hung_up tells the end of the connection from an empty packet: on SOCK_SEQPACKET both
 * read as 0 bytes, but only a peer that closed (or shut down) makes the socket report RDHUP.
 */
static bool peer_hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	return poll(&p, 1, 0) != 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* too_large ends c for a request (what: "packet", "lane request") over message_size. */
static void too_large(struct client *c, const char *what)
{
	svc_limit_hit(&c->server->svc, c->holder, LIMIT_MESSAGE_SIZE, NULL);
	client_protocol_error(c, 0, -EMSGSIZE, "%s larger than %u bytes (message_size)", what,
			      c->server->svc.cfg.limits.max_message);
}

static void read_packets(struct client *c)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	for (int i = 0; i < CLIENT_BURST && !c->closing; i++) {
		ssize_t n;

		if (c->kicked) {
			client_destroy(c);
			return;
		}
		if (reading_paused(c))
			return;
		n = wire_recv(c->fd, c->server->rx, c->server->svc.cfg.limits.max_message, fds,
			      &nfds, MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n == 0 && !peer_hung_up(c->fd)) {
			client_protocol_error(c, 0, -EPROTO, "empty packet");
			return;
		}
		if (n == 0) {
			client_destroy(c);
			return;
		}
		if (n == -EMSGSIZE) {
			too_large(c, "packet");
			return;
		}
		if (n == -EBADMSG) {
			client_protocol_error(c, 0, -EBADMSG, "malformed ancillary data");
			return;
		}
		if (n < 0) {
			log_debug("connection %" PRIu64 ": receive failed: %s", c->id,
				  strerror((int)-n));
			client_destroy(c);
			return;
		}
		c->rx_packets++;
		c->server->hooks.packet(c, (size_t)n, fds, nfds);
	}
}

/*
 * on_lane serves the request the doorbell of c's lane rang for, after what the client sent on
 * the socket before it (so a lane request never overtakes one of the socket's). While replies
 * wait on the socket it takes none: the client sends it there, behind them (backpressure as on
 * the socket). A request the handlers do not answer at once (it waits in the queue) is
 * answered on the socket; the lane is told so.
 */
static void on_lane(struct daemon_lane *l)
{
	struct client *c = l->data;
	uint64_t sent;
	ssize_t n;

	if (c->closing || c->kicked || !daemon_lane_peek(l, &sent))
		return;
	if (c->rx_packets < sent && !reading_paused(c))
		read_packets(c);
	if (c->closing || c->kicked)
		return;
	n = daemon_lane_take(l, c->server->rx, c->server->svc.cfg.limits.max_message);
	if (n == 0)
		return;
	if (n == -EMSGSIZE) {
		too_large(c, "lane request");
		return;
	}
	if (n < 0) {
		client_protocol_error(c, 0, -EBADMSG, "lane request of 0 bytes or over its slot");
		return;
	}
	if (reading_paused(c) || c->rx_packets < sent) {
		/* Replies wait on the socket, or more came before it than one turn reads: the
		 * request goes behind them there. */
		daemon_lane_answer(l, LANE_RESEND, 0, c->tx_packets);
		return;
	}
	c->server->hooks.packet(c, (size_t)n, NULL, 0);
	if (!c->closing && c->lane && c->lane->pending)
		daemon_lane_answer(c->lane, LANE_ON_SOCKET, 0, c->tx_packets);
}

int client_lane_open(struct client *c, int *memfd, int *doorbell)
{
	int err;

	if (c->lane)
		return -EALREADY;
	err = daemon_lane_open(c->server->loop, on_lane, c, &c->lane, memfd);
	if (err == 0)
		*doorbell = c->lane->efd;
	return err;
}

static void on_poll(uv_poll_t *handle, int status, int events)
{
	struct client *c = handle->data;

	if (c->closing)
		return;
	if (status < 0) {
		log_debug("connection %" PRIu64 ": poll failed: %s", c->id, uv_strerror(status));
		client_destroy(c);
		return;
	}
	if (events & UV_WRITABLE)
		flush(c);
	if (!c->closing && (events & (UV_READABLE | UV_DISCONNECT)))
		read_packets(c);
}
