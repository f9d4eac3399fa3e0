/* SPDX-License-Identifier: MIT */
/*
 * redeclare.c: one reconnection attempt, made on a connection of its own: hello, then the
 * models registered again and the leases still held re-declared with their fds, what the new
 * daemon answers each kept for install.c, events that come meanwhile kept for the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/gpu.h"
#include "redeclare.h"
#include "version.h"

/* How long a re-declaration may take: the daemon imports GPU memory on a worker thread, and
 * a connection given up once memory was taken over would hand that memory back. */
#define REDECLARE_STEP_MS (30 * CONN_REPLY_GRACE_MS)

/* ------------------------------------------------------------------------------------------ */
/* One attempt, on a connection of its own */

static int connect_once(struct attempt *at)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0) {
		snprintf(at->why, sizeof(at->why), "Could not create a socket: %s",
			 strerror(errno));
		return -errno;
	}
	memcpy(addr.sun_path, at->path, strlen(at->path) + 1);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int err = -errno;

		snprintf(at->why, sizeof(at->why), "%s",
			 err == -ENOENT || err == -ECONNREFUSED ? "no rocmmemd is listening yet"
								: strerror(-err));
		close(fd);
		return err;
	}
	at->fd = fd;
	return 0;
}

/* side_send packs msg and sends it (with fds) on the attempt's connection by end (monotonic
 * ms). Returns 0 or a negative errno (why says). */
static int side_send(struct attempt *at, Rocmmem__Wire__ClientMessage *msg, const int *fds,
		     unsigned nfds, uint64_t end)
{
	size_t len = protobuf_c_message_get_packed_size(&msg->base);
	uint8_t *buf;
	int err;

	if (len > WIRE_MAX_FRAME)
		return -EMSGSIZE;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(&msg->base, buf);
	for (;;) {
		struct pollfd p = {.fd = at->fd, .events = POLLOUT};
		uint64_t now = conn_now_ms();

		err = wire_send(at->fd, buf, len, fds, nfds, MSG_DONTWAIT);
		if (err != -EAGAIN)
			break;
		if (now >= end || poll(&p, 1, (int)(end - now)) == 0) {
			err = -ETIMEDOUT;
			break;
		}
	}
	free(buf);
	if (err)
		snprintf(at->why, sizeof(at->why), "Could not send to rocmmemd: %s",
			 strerror(-err));
	else
		at->sent++;
	return err;
}

/* side_receive receives one message by end (monotonic ms): 1 with *out set, 0 when none was
 * there after all (try again), or a negative errno (why says). */
static int side_receive(struct attempt *at, uint64_t end, struct inmsg **out)
{
	struct pollfd p = {.fd = at->fd, .events = POLLIN};
	uint64_t now = conn_now_ms();
	struct inmsg *m;
	ssize_t n;
	int rc;

	rc = now >= end ? 0 : poll(&p, 1, (int)(end - now));
	if (rc < 0 && errno == EINTR)
		return 0;
	if (rc <= 0) {
		snprintf(at->why, sizeof(at->why), "rocmmemd did not answer in time");
		return -ETIMEDOUT;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	n = wire_recv(at->fd, at->rx, WIRE_MAX_FRAME, m->fds, &m->nfds, MSG_DONTWAIT);
	if (n == -EAGAIN) {
		free(m);
		return 0;
	}
	if (n <= 0) {
		free(m);
		snprintf(at->why, sizeof(at->why), "the new rocmmemd closed the connection");
		return -ECONNRESET;
	}
	at->received++;
	m->msg = conn_unpack((size_t)n, at->rx);
	if (!m->msg || m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND__NOT_SET) {
		inmsg_free(m);
		snprintf(at->why, sizeof(at->why), "the daemon sent what cannot be decoded");
		return -EPROTO;
	}
	*out = m;
	return 1;
}

/*
 * side_call sends msg (with fds) on the attempt's connection and waits up to timeout_ms for its
 * reply; events that come first are kept for the host. Returns 0 with the reply in *out (an
 * error reply included), or a negative errno when the connection failed (why says).
 */
static int side_call(struct attempt *at, Rocmmem__Wire__ClientMessage *msg, const int *fds,
		     unsigned nfds, int64_t timeout_ms, struct inmsg **out)
{
	uint64_t end = conn_now_ms() + (uint64_t)timeout_ms;
	int err;

	*out = NULL;
	msg->has_id = true;
	msg->id = at->next_id++;
	err = side_send(at, msg, fds, nfds, end);
	while (!err) {
		struct inmsg *m = NULL;
		int rc = side_receive(at, end, &m);

		if (rc <= 0) {
			err = rc;
			continue;
		}
		if (!conn_reply(m)) {
			*at->events_tail = m;
			at->events_tail = &m->next;
		} else if (conn_reply(m)->id == msg->id) {
			*out = m;
			return 0;
		} else if (!conn_reply(m)->has_id || conn_reply(m)->id == 0) {
			snprintf(at->why, sizeof(at->why), "%s",
				 conn_reply(m)->message ? conn_reply(m)->message
							: "the daemon refused the connection");
			inmsg_free(m);
			return -ECONNREFUSED;
		} else {
			inmsg_free(m); /* an answer to nothing asked here */
		}
	}
	return err;
}

/* reply_error returns a reply's errno (0 for success) and copies its message into why. */
static int reply_error(const struct inmsg *m, char *why, size_t len)
{
	const Rocmmem__Wire__Reply *r = conn_reply(m);
	int err = r->has_error ? r->error : 0;

	if (err > 0 || err < -4095)
		err = -EPROTO;
	snprintf(why, len, "%s", r->message ? r->message : err ? strerror(-err) : "");
	return err;
}

static int hello(struct attempt *at)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello h = ROCMMEM__WIRE__HELLO__INIT;
	Rocmmem__Wire__HelloReply *r;
	struct inmsg *m;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int err;

	h.has_protocol_version = true;
	h.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	h.client_name = at->name;
	h.has_features = held_arena_wanted() || conn_lane_wanted();
	h.features = (held_arena_wanted() ? ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA : 0) |
		     (conn_lane_wanted() ? ROCMMEM__WIRE__FEATURE__FEATURE_LANE : 0);
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &h;
	err = side_call(at, &msg, NULL, 0, CONN_RECONNECT_STEP_MS, &m);
	if (err)
		return err;
	err = reply_error(m, at->why, sizeof(at->why));
	if (!err && conn_reply(m)->body_case != ROCMMEM__WIRE__REPLY__BODY_HELLO) {
		snprintf(at->why, sizeof(at->why), "the daemon answered hello with something else");
		err = -EPROTO;
	}
	if (!err) {
		r = conn_reply(m)->hello;
		at->daemon_version = strdup(r->daemon_version ? r->daemon_version : "");
		at->backend = strdup(r->backend ? r->backend : "");
		at->device_count = r->has_device_count ? r->device_count : 0;
		at->features = r->has_features ? r->features : 0;
		if (!at->daemon_version || !at->backend)
			err = -ENOMEM;
	}
	if (getsockopt(at->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		at->daemon_pid = cred.pid;
	if (!err && m->nfds > 0)
		at->hello = m; /* the lane's fds: taken when the connection is installed */
	else
		inmsg_free(m);
	return err;
}

static int redeclare_model(struct attempt *at, struct snap_model *s)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRedeclare req = ROCMMEM__WIRE__MODEL_REDECLARE__INIT;
	struct inmsg *m;
	int err;

	req.has_previous_id = true;
	req.previous_id = s->m.daemon_id;
	req.has_device = true;
	req.device = s->m.device;
	req.name = s->m.name;
	req.has_class_ = true;
	req.class_ = (Rocmmem__Wire__ModelClass)s->m.model_class;
	req.has_size = true;
	req.size = s->m.size;
	req.has_priority = true;
	req.priority = s->m.priority;
	req.has_pinned = true;
	req.pinned = s->m.pinned;
	req.has_reservation = true;
	req.reservation = s->m.reservation;
	req.has_use_count = true;
	req.use_count = s->m.use_count;
	/* Its residency goes on under the new daemon, after any the old one ended. */
	req.has_generation = true;
	req.generation = s->m.generation > s->m.ended ? s->m.generation : s->m.ended + 1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REDECLARE;
	msg.model_redeclare = &req;
	err = side_call(at, &msg, NULL, 0, REDECLARE_STEP_MS, &m);
	if (err)
		return err;
	s->err = reply_error(m, s->why, sizeof(s->why));
	if (!s->err && (conn_reply(m)->body_case != ROCMMEM__WIRE__REPLY__BODY_MODEL ||
			!conn_reply(m)->model->has_model_id)) {
		s->err = -EPROTO;
		snprintf(s->why, sizeof(s->why), "the daemon answered with something else");
	}
	if (!s->err) {
		s->new_id = conn_reply(m)->model->model_id;
		s->reservation = conn_reply(m)->model->reservation;
	}
	inmsg_free(m);
	return 0;
}

static int redeclare_arena(struct attempt *at, struct snap_arena *s)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ArenaRedeclare req = ROCMMEM__WIRE__ARENA_REDECLARE__INIT;
	struct inmsg *m;
	int err;

	if (!(at->features & ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA)) {
		/* An older daemon would not know the request: nothing to take the arena over. */
		s->err = -ESTALE;
		snprintf(s->why, sizeof(s->why), "the restarted daemon does not use host arenas");
		return 0;
	}
	req.has_arena_id = req.has_device = req.has_size = req.has_fd_count = true;
	req.arena_id = s->id;
	req.device = s->device;
	req.size = s->size;
	req.fd_count = 1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ARENA_REDECLARE;
	msg.arena_redeclare = &req;
	err = side_call(at, &msg, &s->fd, 1, REDECLARE_STEP_MS, &m);
	if (err)
		return err;
	s->err = reply_error(m, s->why, sizeof(s->why));
	inmsg_free(m);
	return 0;
}

static int redeclare_lease(struct attempt *at, struct snap_lease *s)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRedeclare req = ROCMMEM__WIRE__LEASE_REDECLARE__INIT;
	struct inmsg *m;
	int err;

	if (s->err)
		return 0; /* cannot be carried over: decided when taken */
	req.has_lease_id = true;
	req.lease_id = s->id;
	req.has_device = true;
	req.device = s->device;
	req.has_size = true;
	req.size = s->size;
	req.has_handle_kind = true;
	req.handle_kind = (Rocmmem__Wire__HandleKind)s->kind;
	req.has_fd_count = true;
	req.fd_count = s->nfds;
	if (s->arena) {
		if (s->arena->err) {
			s->err = s->arena->err;
			snprintf(s->why, sizeof(s->why), "its arena: %.200s", s->arena->why);
			return 0;
		}
		req.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA;
		req.has_offset = req.has_arena_id = true;
		req.offset = s->offset;
		req.arena_id = s->arena->id;
	}
	req.n_chunk_sizes = s->nchunks;
	req.chunk_sizes = s->chunk_sizes;
	for (size_t i = 0; s->model_id && i < at->nmodels; i++) {
		if (at->models[i].m.id == s->model_id && !at->models[i].err) {
			req.has_model_id = true;
			req.model_id = at->models[i].new_id;
		}
	}
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
	msg.lease_redeclare = &req;
	err = side_call(at, &msg, s->fds, s->nfds, REDECLARE_STEP_MS, &m);
	if (err)
		return err;
	s->err = reply_error(m, s->why, sizeof(s->why));
	inmsg_free(m);
	return 0;
}

/* simple_call makes a request whose answer only matters if the connection failed. */
static int simple_call(struct attempt *at, Rocmmem__Wire__ClientMessage *msg, int64_t wait_ms)
{
	struct inmsg *m;
	int err = side_call(at, msg, NULL, 0, wait_ms, &m);

	/* A refusal is the daemon's to make (an older one that keeps no records answers
	 * RedeclareDone with -EOPNOTSUPP): the connection stands. */
	inmsg_free(m);
	return err;
}

int redeclare_run(struct attempt *at)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__RedeclareDone done = ROCMMEM__WIRE__REDECLARE_DONE__INIT;
	int err = connect_once(at);

	if (err)
		return err;
	err = hello(at);
	if (err)
		return err;
	/* Models first: the leases tagged with them name them by the new daemon's ids. */
	for (size_t i = 0; i < at->nmodels; i++) {
		err = redeclare_model(at, &at->models[i]);
		if (err)
			return err;
	}
	/* Arenas before the leases in them. */
	for (size_t i = 0; i < at->narenas; i++) {
		err = redeclare_arena(at, &at->arenas[i]);
		if (err)
			return err;
	}
	for (size_t i = 0; i < at->nleases; i++) {
		err = redeclare_lease(at, &at->leases[i]);
		if (err)
			return err;
	}
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
	msg.redeclare_done = &done;
	err = simple_call(at, &msg, REDECLARE_STEP_MS);
	if (err)
		return err;
	if (at->sub_what) {
		Rocmmem__Wire__ClientMessage sm = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
		Rocmmem__Wire__Subscribe sub = ROCMMEM__WIRE__SUBSCRIBE__INIT;

		sub.has_samples = true;
		sub.samples = (at->sub_what & ROCMMEM_SUBSCRIBE_SAMPLES) != 0;
		sub.has_events = true;
		sub.events = (at->sub_what & ROCMMEM_SUBSCRIBE_EVENTS) != 0;
		if (sub.samples) {
			sub.has_interval_ms = true;
			sub.interval_ms = at->sub_interval_ms;
		}
		sm.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
		sm.subscribe = &sub;
		err = simple_call(at, &sm, CONN_RECONNECT_STEP_MS);
		if (err)
			return err;
	}
	return 0;
}

/* lease_fds gives the fds that re-declare a lease (the caller's copies); lock held. */
static int lease_fds(struct rocmmem_lease *l, struct snap_lease *s)
{
	const int *from = NULL;
	unsigned n = 0;

	if (l->kind == ROCMMEM_HANDLE_MEMFD && l->nfds == 1) {
		from = l->fds;
		n = 1;
	} else if (l->kind == ROCMMEM_HANDLE_VMM_FD && l->nfds > 0) {
		from = l->fds; /* NOMAP: the handles as they came */
		n = l->nfds;
	} else if (l->kind == ROCMMEM_HANDLE_VMM_FD && l->nkept > 0) {
		from = l->kept;
		n = l->nkept;
	} else if (l->kind == ROCMMEM_HANDLE_VMM_FD && l->gpu) {
		int err = gpu_export(l->gpu, s->fds, LEASE_MAX_FDS, &s->nfds);

		if (err)
			snprintf(s->why, sizeof(s->why), "%s", rocmmem_last_error());
		return err;
	} else {
		snprintf(s->why, sizeof(s->why),
			 "a %s lease cannot outlive the daemon that made it",
			 l->kind == ROCMMEM_HANDLE_DMABUF ? "dma-buf" : "IPC");
		return -ESTALE;
	}
	for (s->nfds = 0; s->nfds < n; s->nfds++) {
		s->fds[s->nfds] = fcntl(from[s->nfds], F_DUPFD_CLOEXEC, 0);
		if (s->fds[s->nfds] < 0) {
			int err = -errno;

			while (s->nfds > 0)
				close(s->fds[--s->nfds]);
			snprintf(s->why, sizeof(s->why), "Could not keep its fd: %s",
				 strerror(-err));
			return err;
		}
	}
	return 0;
}

/* snap_arena_of finds (or adds) the snapshot of l's arena; NULL when its fd cannot be kept. */
static struct snap_arena *snap_arena_of(struct attempt *at, const struct rocmmem_lease *l)
{
	struct snap_arena *s;

	for (size_t i = 0; i < at->narenas; i++)
		if (at->arenas[i].id == l->arena->id)
			return &at->arenas[i];
	s = &at->arenas[at->narenas];
	s->fd = fcntl(l->arena->fd, F_DUPFD_CLOEXEC, 0);
	if (s->fd < 0)
		return NULL;
	s->id = l->arena->id;
	s->size = l->arena->size;
	s->device = l->device;
	at->narenas++;
	return s;
}

int redeclare_take(rocmmem_client *c, struct attempt *at)
{
	size_t nm = 0, nl = 0;

	for (struct lib_model *m = c->models; m; m = m->next)
		nm++;
	for (struct rocmmem_lease *l = c->leases; l; l = l->next)
		nl++;
	at->models = calloc(nm ? nm : 1, sizeof(*at->models));
	at->leases = calloc(nl ? nl : 1, sizeof(*at->leases));
	at->arenas = calloc(nl ? nl : 1, sizeof(*at->arenas));
	at->rx = malloc(WIRE_MAX_FRAME);
	if (!at->models || !at->leases || !at->arenas || !at->rx)
		return -ENOMEM;
	/* Oldest first: the lists grow at their head. */
	at->nmodels = nm;
	for (struct lib_model *m = c->models; m; m = m->next)
		at->models[--nm].m = *m;
	for (struct rocmmem_lease *l = c->leases; l; l = l->next) {
		struct snap_lease *s = &at->leases[at->nleases++];

		s->l = l;
		s->id = l->id;
		s->device = l->device;
		s->size = l->size;
		s->kind = l->kind;
		s->model_id = l->model_id;
		s->nchunks = l->nchunks;
		memcpy(s->chunk_sizes, l->chunk_sizes, sizeof(s->chunk_sizes));
		if (l->revoked) {
			s->revoked = true;
			s->err = -ESTALE;
		} else if (l->arena) {
			s->offset = l->offset;
			s->arena = snap_arena_of(at, l);
			s->err = s->arena ? 0 : -errno;
			if (s->err)
				snprintf(s->why, sizeof(s->why),
					 "Could not keep its arena's fd: %s", strerror(-s->err));
		} else {
			s->err = lease_fds(l, s);
		}
	}
	at->sub_what = c->sub_what;
	at->sub_interval_ms = c->sub_interval_ms;
	snprintf(at->path, sizeof(at->path), "%s", c->path);
	if (c->name && !(at->name = strdup(c->name)))
		return -ENOMEM;
	/* Ids of its own, so that nothing the attempt asks is mistaken later. */
	at->next_id = c->next_id;
	c->next_id += 3 + at->nmodels + at->nleases + at->narenas;
	return 0;
}

void redeclare_free(struct attempt *at)
{
	struct inmsg *m;

	if (at->fd >= 0)
		close(at->fd);
	for (size_t i = 0; i < at->nleases; i++)
		wire_close_fds(at->leases[i].fds, at->leases[i].nfds);
	for (size_t i = 0; i < at->narenas; i++)
		close(at->arenas[i].fd);
	free(at->arenas);
	while ((m = at->events)) {
		at->events = m->next;
		inmsg_free(m);
	}
	free(at->models);
	free(at->leases);
	free(at->rx);
	free(at->name);
	free(at->daemon_version);
	free(at->backend);
	inmsg_free(at->hello);
}
