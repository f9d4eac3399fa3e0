/* SPDX-License-Identifier: MIT */
/* conn.c: the fuzzer's connections: send, read and check every answer, learn the ids issued. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void pool_put(struct run *r, int fd)
{
	if (fd < 0)
		return;
	if (r->npool == POOL_MAX) {
		close(r->pool[0]);
		memmove(r->pool, r->pool + 1, (POOL_MAX - 1) * sizeof(r->pool[0]));
		r->npool--;
	}
	r->pool[r->npool++] = fd;
}

void book_issue(struct idbook *b, uint64_t id)
{
	b->issued[b->nissued++ % ID_KEEP] = id;
	b->last = id;
	if (id > b->max)
		b->max = id;
}

struct item *book_find(struct idbook *b, uint64_t id)
{
	for (size_t i = 0; i < b->nlive; i++)
		if (b->live[i].id == id)
			return &b->live[i];
	return NULL;
}

struct item *book_add(struct idbook *b, uint64_t id, unsigned conn)
{
	struct item *it = book_find(b, id);

	if (!it) {
		if (b->nlive == LIVE_MAX)
			return NULL;
		it = &b->live[b->nlive++];
	}
	memset(it, 0, sizeof(*it));
	it->id = id;
	it->conn = (uint8_t)conn;
	it->fd = -1;
	return it;
}

void book_drop(struct run *r, struct idbook *b, uint64_t id)
{
	struct item *it = book_find(b, id);

	if (!it)
		return;
	pool_put(r, it->fd);
	b->gone[b->ngone++ % ID_KEEP] = id;
	*it = b->live[--b->nlive];
}

bool conn_open(struct run *r, unsigned c)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct conn *k = &r->conns[c];

	conn_close(r, c);
	k->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", r->t->sock);
	if (k->fd < 0 || connect(k->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		run_fail(r, FAIL_CONNECT, "Could not connect to the daemon: %s", strerror(errno));
		if (k->fd >= 0)
			close(k->fd);
		k->fd = -1;
		return false;
	}
	return true;
}

void conn_close(struct run *r, unsigned c)
{
	struct conn *k = &r->conns[c];

	if (k->fd >= 0)
		close(k->fd);
	/* The daemon reclaims what the connection held. */
	for (size_t i = r->leases.nlive; i-- > 0;)
		if (r->leases.live[i].conn == c)
			book_drop(r, &r->leases, r->leases.live[i].id);
	for (size_t i = r->models.nlive; i-- > 0;)
		if (r->models.live[i].conn == c)
			book_drop(r, &r->models, r->models.live[i].id);
	memset(k, 0, sizeof(*k));
	k->fd = -1;
	k->next_rid = 1;
}

void conn_note(struct run *r, unsigned c, uint64_t rid, const struct op *op, uint64_t arg)
{
	struct conn *k = &r->conns[c];
	struct sent *s = &k->sent[k->nsent++ % SENT_RING];

	s->rid = rid;
	s->arg = arg;
	s->kind = op->kind;
	s->device = op->f[F_DEVICE].set ? (uint32_t)op->f[F_DEVICE].v : 0;
	s->size = op->f[F_SIZE].set ? op->f[F_SIZE].v : 0;
	snprintf(s->name, sizeof(s->name), "%s", op->f[F_NAME].set ? op->str : "");
	s->answered = false;
}

/* find_sent finds the oldest unanswered request with this id. */
static struct sent *find_sent(struct conn *k, uint64_t rid)
{
	size_t n = k->nsent < SENT_RING ? k->nsent : SENT_RING;

	for (size_t i = 0; i < n; i++) {
		struct sent *s = &k->sent[(k->nsent - n + i) % SENT_RING];

		if (s->rid == rid && !s->answered)
			return s;
	}
	return NULL;
}

/* carried says whether id was held when the daemon was restarted (and not re-declared yet). */
static bool carried(const struct idbook *b, uint64_t id)
{
	for (size_t i = 0; i < b->ncarried; i++)
		if (b->carried[i].id == id)
			return true;
	return false;
}

/*
 * held_here says whether connection c holds id already. Another connection's may be stale: a
 * reply read late (that connection was dropped with it unread) tells of a model long gone; the
 * status lists show whether two are alive at once.
 */
static bool held_here(struct idbook *b, uint64_t id, unsigned c)
{
	const struct item *it = book_find(b, id);

	return it && it->conn == c;
}

static void uncarry(struct idbook *b, uint64_t id)
{
	for (size_t i = 0; i < b->ncarried; i++)
		if (b->carried[i].id == id) {
			b->carried[i] = b->carried[--b->ncarried];
			return;
		}
}

static void on_grant(struct run *r, unsigned c, const Rocmmem__Wire__Reply *rep, int *fds,
		     unsigned nfds)
{
	const Rocmmem__Wire__LeaseGrant *g = rep->lease;
	struct item *it;

	if (!g->has_lease_id || g->lease_id == 0 || g->lease_id == UINT64_MAX || !g->has_size ||
	    g->size == 0 || !g->has_fd_count || g->fd_count != nfds || nfds == 0) {
		run_fail(r, FAIL_WIRE,
			 "a lease grant with id %" PRIu64 ", %" PRIu64 " bytes, %u fd(s) "
			 "announced and %u attached",
			 g->lease_id, g->size, g->fd_count, nfds);
		return;
	}
	if (held_here(&r->leases, g->lease_id, c) || carried(&r->leases, g->lease_id))
		run_fail(r, FAIL_WIRE, "lease id %" PRIu64 " granted while it is still held",
			 g->lease_id);
	r->stats.grants++;
	book_issue(&r->leases, g->lease_id);
	it = book_add(&r->leases, g->lease_id, c);
	if (!it)
		return;
	it->size = g->size;
	it->device = g->device;
	it->fd = fds[0];
	fds[0] = -1;
}

/* on_ok learns from a successful reply what it changed. */
static void on_ok(struct run *r, unsigned c, const Rocmmem__Wire__Reply *rep, struct sent *s,
		  int *fds, unsigned nfds)
{
	struct conn *k = &r->conns[c];

	if (rep->body_case == ROCMMEM__WIRE__REPLY__BODY_LEASE) {
		on_grant(r, c, rep, fds, nfds);
		return;
	}
	if (nfds)
		run_fail(r, FAIL_WIRE, "%u fd(s) came with a reply that is no lease grant", nfds);
	if (rep->body_case == ROCMMEM__WIRE__REPLY__BODY_HELLO) {
		k->greeted = true;
	} else if (rep->body_case == ROCMMEM__WIRE__REPLY__BODY_MODEL && rep->model->has_model_id) {
		uint64_t id = rep->model->model_id;
		struct item *it;

		if (id == 0)
			run_fail(r, FAIL_WIRE, "model id 0 handed out");
		r->stats.models++;
		if (s && s->kind == OP_MODEL_REDECLARE && s->arg == id && carried(&r->models, id))
			uncarry(&r->models, id); /* taken over under its old id */
		else if (held_here(&r->models, id, c) ||
			 (carried(&r->models, id) && !(s && s->kind == OP_MODEL_REDECLARE)))
			run_fail(r, FAIL_WIRE, "model id %" PRIu64 " given while it is still held",
				 id);
		book_issue(&r->models, id);
		it = book_add(&r->models, id, c);
		if (it && s) {
			/* What a re-declaration of it would name. */
			snprintf(it->name, sizeof(it->name), "%s", s->name);
			it->device = s->device;
			it->size = s->size;
		}
	} else if (s && s->kind == OP_RELEASE) {
		book_drop(r, &r->leases, s->arg);
	} else if (s && s->kind == OP_UNREGISTER) {
		book_drop(r, &r->models, s->arg);
	} else if (s && s->kind == OP_LEASE_REDECLARE) {
		struct idbook *b = &r->leases;

		for (size_t i = 0; i < b->ncarried; i++) {
			if (b->carried[i].id != s->arg || b->nlive == LIVE_MAX)
				continue;
			b->live[b->nlive] = b->carried[i];
			b->live[b->nlive++].conn = (uint8_t)c;
			b->carried[i] = b->carried[--b->ncarried];
			break;
		}
	}
}

static void on_reply(struct run *r, unsigned c, const Rocmmem__Wire__Reply *rep, int *fds,
		     unsigned nfds)
{
	struct conn *k = &r->conns[c];
	uint64_t rid = rep->has_id ? rep->id : 0;
	struct sent *s = rid ? find_sent(k, rid) : NULL;

	r->stats.replies++;
	if (rid && rid == k->ping_rid) {
		k->ping_answered = true;
		if (!rep->has_error || rep->error >= 0)
			run_fail(r, FAIL_WIRE, "a release without a lease id was not refused");
	}
	if (r->verbose && rid != k->ping_rid)
		printf("         -> c%u reply %" PRIu64 ": %d %s%s\n", c, rid,
		       rep->has_error ? rep->error : 0, rep->message ? rep->message : "",
		       rep->has_more && rep->more ? " (more)" : "");
	if (rep->has_error && rep->error != 0) {
		r->stats.errors++;
		if (rep->error >= 0 || !rep->message || !rep->message[0] || nfds ||
		    rep->body_case != ROCMMEM__WIRE__REPLY__BODY__NOT_SET)
			run_fail(r, FAIL_WIRE,
				 "refusal %d of request %" PRIu64 " without a negative errno and a "
				 "message, or with a body or fds",
				 rep->error, rid);
	} else if (rid == 0) {
		run_fail(r, FAIL_WIRE, "a successful reply without a request id");
	} else if (!s && rid != k->ping_rid) {
		run_fail(r, FAIL_WIRE, "a reply to request %" PRIu64 ", never sent (or answered)",
			 rid);
	} else {
		on_ok(r, c, rep, s, fds, nfds);
	}
	if (s && !(rep->has_more && rep->more))
		s->answered = true;
}

static void on_event(struct run *r, unsigned c, const Rocmmem__Wire__Event *ev, unsigned nfds)
{
	struct conn *k = &r->conns[c];

	r->stats.events++;
	if (nfds)
		run_fail(r, FAIL_WIRE, "%u fd(s) came with an event", nfds);
	if (!ev->has_seq || ev->seq <= k->last_seq)
		run_fail(r, FAIL_WIRE, "event seq %" PRIu64 " after %" PRIu64, ev->seq,
			 k->last_seq);
	k->last_seq = ev->seq;
	switch (ev->body_case) {
	case ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST:
		k->event_model = ev->evict_request->model_id;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED:
		k->event_model = ev->model_revoked->model_id;
		break;
	case ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED:
		k->event_lease = ev->lease_revoked->lease_id;
		book_drop(r, &r->leases, k->event_lease);
		break;
	default:
		break;
	}
}

/* recv_one reads one packet from slot c: 1 read, 0 nothing within timeout_ms, -1 closed. */
static int recv_one(struct run *r, unsigned c, int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * OP_FDS_MAX)];
		struct cmsghdr align;
	} control;
	struct conn *k = &r->conns[c];
	struct iovec iov = {.iov_base = r->rx, .iov_len = sizeof(r->rx)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = control.buf,
			    .msg_controllen = sizeof(control.buf)};
	struct pollfd p = {.fd = k->fd, .events = POLLIN};
	int fds[OP_FDS_MAX];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *m;
	ssize_t n;

	if (k->fd < 0)
		return -1;
	if (poll(&p, 1, timeout_ms) == 0)
		return 0;
	do {
		n = recvmsg(k->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; h; h = CMSG_NXTHDR(&mh, h)) {
		size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; h->cmsg_type == SCM_RIGHTS && i < count; i++)
			memcpy(&fds[nfds++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
	}
	if (n <= 0) {
		/* The daemon hung up (or reset the connection with our packets unread). */
		if (r->verbose)
			printf("         -> c%u closed by the daemon\n", c);
		wire_close_fds(fds, nfds);
		r->stats.hangups++;
		conn_close(r, c);
		return -1;
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		run_fail(r, FAIL_WIRE, "the daemon sent a packet over %zu bytes", sizeof(r->rx));
	m = rocmmem__wire__server_message__unpack(NULL, (size_t)n, r->rx);
	if (!m) {
		run_fail(r, FAIL_WIRE, "the daemon sent a %zd-byte packet that does not decode", n);
	} else if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
		on_reply(r, c, m->reply, fds, nfds);
	} else if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT) {
		on_event(r, c, m->event, nfds);
	} else {
		run_fail(r, FAIL_WIRE, "the daemon sent a message that is neither reply nor event");
	}
	if (m)
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	wire_close_fds(fds, nfds);
	return 1;
}

void conn_drain(struct run *r, unsigned c)
{
	while (r->conns[c].fd >= 0 && recv_one(r, c, 0) > 0)
		;
}

bool conn_send(struct run *r, unsigned c, Rocmmem__Wire__ClientMessage *msg, const int *fds,
	       unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * OP_FDS_MAX)];
		struct cmsghdr align;
	} control;
	static uint8_t buf[WIRE_MAX_FRAME * 2];
	struct iovec iov = {.iov_base = buf};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	long end = target_now_ms() + run_deadline(r);
	size_t len = rocmmem__wire__client_message__get_packed_size(msg);

	if (len > sizeof(buf) || r->conns[c].fd < 0)
		return false;
	iov.iov_len = rocmmem__wire__client_message__pack(msg, buf);
	if (nfds > 0) {
		struct cmsghdr *h;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(r->conns[c].fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n >= 0) {
			r->stats.sent++;
			r->stats.fds_sent += nfds;
			return true;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			/* Hung up on us: read what it said before. */
			conn_drain(r, c);
			conn_close(r, c);
			r->stats.not_taken++;
			return false;
		}
		/* Full: the daemon waits for us to read its replies before it reads on. */
		if (target_now_ms() > end) {
			r->stats.not_taken++;
			return false;
		}
		if (recv_one(r, c, 5) < 0)
			return false;
	}
}

void conn_sync(struct run *r, unsigned c, uint64_t rid)
{
	struct conn *k = &r->conns[c];
	long end = target_now_ms() + run_deadline(r);
	bool ping = k->greeted;

	if (k->fd < 0)
		return;
	if (ping) {
		Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
		Rocmmem__Wire__LeaseRelease body = ROCMMEM__WIRE__LEASE_RELEASE__INIT;

		k->ping_rid = PING_BASE + k->next_rid++;
		k->ping_answered = false;
		msg.has_id = true;
		msg.id = k->ping_rid;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
		msg.lease_release = &body;
		if (!conn_send(r, c, &msg, NULL, 0))
			return;
	}
	while (r->conns[c].fd >= 0) {
		struct sent *s = ping ? NULL : find_sent(k, rid);

		if (ping ? k->ping_answered : (!s && rid != 0))
			return;
		if (target_now_ms() > end) {
			run_fail(r, FAIL_HANG, "no answer on connection %u in %ld ms", c,
				 run_deadline(r));
			return;
		}
		recv_one(r, c, 20);
	}
}

void conn_restarted(struct run *r)
{
	struct idbook *books[] = {&r->leases, &r->models};

	for (size_t b = 0; b < 2; b++) {
		struct idbook *bk = books[b];

		/* Held at the crash: what a client would re-declare to the next daemon. */
		for (size_t i = 0; i < bk->nlive && bk->ncarried < LIVE_MAX; i++)
			bk->carried[bk->ncarried++] = bk->live[i];
		bk->nlive = 0;
	}
	for (unsigned c = 0; c < SF_CONNS; c++) {
		if (r->conns[c].fd >= 0)
			close(r->conns[c].fd);
		memset(&r->conns[c], 0, sizeof(r->conns[c]));
		r->conns[c].fd = -1;
		r->conns[c].next_rid = 1;
	}
	r->restarted = true;
}
