/* SPDX-License-Identifier: MIT */
/*
 * reconnect.c: when the daemon goes away without saying it stops (a crash, SIGKILL, its
 * watchdog), the library brings the connection back: attempts with exponential backoff and
 * jitter, made by whichever thread needs the daemon or dispatches events (the event fd wakes
 * when one is due: no thread of the library's own), each one a new connection on which the
 * models are registered again and the leases still held re-declared with their fds, before
 * the connection replaces the old one. What the new daemon refuses is revoked through the usual
 * events; memory stays mapped until the host releases it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "internal.h"
#include "version.h"

/* What one model needs to be declared again, and what the new daemon answered. */
struct snap_model {
	struct lib_model m; /* a copy */
	uint64_t new_id;
	uint64_t reservation; /* accounted again */
	int err;
	char why[256];
};

/* One lease to re-declare: its fds (the caller's copies) and what the new daemon answered. */
struct snap_lease {
	const struct rocmmem_lease *l; /* identity only: never dereferenced once unlocked */
	uint64_t id;
	unsigned device;
	uint64_t size;
	enum rocmmem_handle_kind kind;
	uint64_t model_id; /* the host's */
	unsigned nfds;
	int fds[LEASE_MAX_FDS];
	unsigned nchunks;
	uint64_t chunk_sizes[LEASE_MAX_FDS];
	bool revoked; /* before the attempt: nothing to declare, nothing to tell */
	int err;
	char why[256];
};

/* One attempt: a new connection, private to the attempting thread until installed. */
struct attempt {
	int fd;
	uint8_t *rx;
	uint64_t next_id;
	struct inmsg *events, **events_tail; /* events that came meanwhile, in order */
	char *daemon_version, *backend;
	unsigned device_count;
	pid_t daemon_pid;
	struct snap_model *models;
	size_t nmodels;
	struct snap_lease *leases;
	size_t nleases;
	unsigned sub_what;
	uint32_t sub_interval_ms;
	char path[108];
	char *name;
	char why[256];
};

/* ------------------------------------------------------------------------------------------ */
/* Models */

struct lib_model *model_by_id(rocmmem_client *c, uint64_t host_id)
{
	for (struct lib_model *m = c->models; m; m = m->next)
		if (m->id == host_id)
			return m;
	return NULL;
}

struct lib_model *model_by_daemon_id(rocmmem_client *c, uint64_t daemon_id)
{
	for (struct lib_model *m = c->models; daemon_id && m; m = m->next)
		if (m->daemon_id == daemon_id)
			return m;
	return NULL;
}

int model_track(rocmmem_client *c, uint64_t daemon_id, const struct rocmmem_model_desc *desc,
		uint64_t *host_id)
{
	struct lib_model *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->daemon_id = daemon_id;
	m->device = desc->device;
	snprintf(m->name, sizeof(m->name), "%s", desc->name ? desc->name : "");
	m->model_class = (uint32_t)desc->model_class;
	m->size = desc->size;
	m->priority = desc->priority;
	m->pinned = desc->pinned != 0;
	pthread_mutex_lock(&c->lock);
	/* The host's id is the daemon's; only a daemon that lost track of the ids it gave (its
	 * state file gone) can give one the host already knows: then the host gets another. */
	m->id = daemon_id;
	if (model_by_id(c, m->id)) {
		for (struct lib_model *k = c->models; k; k = k->next)
			if (k->id >= m->id)
				m->id = k->id + 1;
	}
	m->next = c->models;
	c->models = m;
	*host_id = m->id;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void model_untrack(rocmmem_client *c, uint64_t host_id)
{
	pthread_mutex_lock(&c->lock);
	for (struct lib_model **p = &c->models; *p; p = &(*p)->next) {
		if ((*p)->id == host_id) {
			struct lib_model *m = *p;

			*p = m->next;
			free(m);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
}

/* model_map translates id between the host's and the daemon's numbering (unknown: as is). */
static uint64_t model_map(rocmmem_client *c, uint64_t id, bool to_daemon)
{
	struct lib_model *m;

	pthread_mutex_lock(&c->lock);
	m = to_daemon ? model_by_id(c, id) : model_by_daemon_id(c, id);
	if (m)
		id = to_daemon ? m->daemon_id : m->id;
	pthread_mutex_unlock(&c->lock);
	return id;
}

uint64_t model_daemon_id(rocmmem_client *c, uint64_t host_id)
{
	return model_map(c, host_id, true);
}

uint64_t model_host_id(rocmmem_client *c, uint64_t daemon_id)
{
	return model_map(c, daemon_id, false);
}

/* ------------------------------------------------------------------------------------------ */
/* State */

void reconnect_init(rocmmem_client *c, uint32_t flags, int window_ms)
{
	const char *env = getenv("ROCMMEM_RECONNECT");
	struct timespec ts;

	c->flags = flags;
	c->window_ms = window_ms == 0 ? CONN_RECONNECT_WINDOW_MS : window_ms < 0 ? -1 : window_ms;
	/* ROCMMEM_RECONNECT=0 turns it off; a number of seconds sets the window (unless the
	 * program chose one). */
	if (env && env[0]) {
		char *end;
		double s = strtod(env, &end);

		if (strcmp(env, "off") == 0 || strcmp(env, "no") == 0 ||
		    strcmp(env, "false") == 0 || (*end == '\0' && s <= 0))
			c->flags |= ROCMMEM_CONNECT_NO_RECONNECT;
		else if (*end == '\0' && window_ms == 0 && s < 1e7)
			c->window_ms = (int64_t)(s * 1000.0);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rand_state = (unsigned)getpid() ^ (unsigned)ts.tv_nsec;
}

void reconnect_finish(rocmmem_client *c)
{
	while (c->models) {
		struct lib_model *m = c->models;

		c->models = m->next;
		free(m);
	}
	for (unsigned i = 0; i < c->nretired; i++)
		free(c->retired[i]);
	free(c->retired);
	free(c->name);
	c->retired = NULL;
	c->nretired = 0;
	c->name = NULL;
}

/* arm makes the event fd readable at at_ms (monotonic), or never (0). */
static void arm(rocmmem_client *c, uint64_t at_ms)
{
	struct itimerspec its = {0};

	if (at_ms) {
		its.it_value.tv_sec = (time_t)(at_ms / 1000);
		its.it_value.tv_nsec = (long)(at_ms % 1000) * 1000000 + 1; /* never all zero */
	}
	timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

bool reconnect_due(const rocmmem_client *c)
{
	return c->reconnecting && !c->attempting && conn_now_ms() >= c->next_attempt_ms;
}

/* end_for_good ends the connection: calls fail, DISCONNECTED is delivered; lock held. */
static void end_for_good(rocmmem_client *c, int err, const char *why)
{
	uint64_t one = 1;

	c->broken = true;
	c->broken_err = err;
	c->reconnecting = false;
	snprintf(c->broken_msg, sizeof(c->broken_msg), "%s", why);
	/* A daemon that stops (at its shutdown deadline) or refuses the connection lives on and
	 * takes back what the connection held; one that died left the memory mapped here. */
	if (c->shutdown_seen || c->refused) {
		char reason[320];

		if (c->shutdown_seen)
			snprintf(reason, sizeof(reason), "%s",
				 "rocmmemd stopped and took the memory back: it was not released "
				 "before the daemon's shutdown deadline");
		else
			snprintf(reason, sizeof(reason),
				 "rocmmemd closed the connection and took the memory back: %s",
				 why);
		lease_revoke_all(c, reason);
	}
	arm(c, 0);
	/* Wake rocmmem_dispatch users so they learn of it. */
	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* The counter only saturates; a pending wake-up is enough. */
	}
	pthread_cond_broadcast(&c->cond);
}

void reconnect_lost(rocmmem_client *c, uint64_t gen, int err, const char *why)
{
	char reason[320];
	bool worth;

	if (gen != c->gen || c->broken || c->reconnecting)
		return; /* an older connection's end, or known already */
	/* The daemon went away without saying it stops, and this process has memory or models
	 * it would lose: bring the connection back. A refusal or a stop is final. */
	worth = (err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN) && !c->shutdown_seen &&
		!(c->flags & ROCMMEM_CONNECT_NO_RECONNECT) && (c->leases || c->models);
	if (!worth) {
		end_for_good(c, err, why);
		return;
	}
	c->reconnecting = true;
	c->lost_ms = conn_now_ms();
	c->next_attempt_ms = c->lost_ms;
	c->backoff_ms = CONN_BACKOFF_FIRST_MS;
	c->attempts = 0;
	snprintf(c->lost_msg, sizeof(c->lost_msg), "%s", why);
	/* The dead socket would poll readable for ever: out of the event fd until replaced. */
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	snprintf(reason, sizeof(reason), "%s: reconnecting", why);
	conn_queue_lib(c, ROCMMEM_EVENT_RECONNECTING, 0, 0, reason);
	arm(c, c->next_attempt_ms);
	pthread_cond_broadcast(&c->cond);
}

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

/*
 * side_call sends msg (with fds) on the attempt's connection and waits up to timeout_ms for its
 * reply; events that come first are kept for the host. Returns 0 with the reply in *out (an
 * error reply included), or a negative errno when the connection failed (why says).
 */
static int side_call(struct attempt *at, Rocmmem__Wire__ClientMessage *msg, const int *fds,
		     unsigned nfds, int64_t timeout_ms, struct inmsg **out)
{
	uint64_t end = conn_now_ms() + (uint64_t)timeout_ms;
	uint8_t *buf;
	size_t len;
	int err;

	*out = NULL;
	msg->has_id = true;
	msg->id = at->next_id++;
	len = protobuf_c_message_get_packed_size(&msg->base);
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
	if (err) {
		snprintf(at->why, sizeof(at->why), "Could not send to rocmmemd: %s",
			 strerror(-err));
		return err;
	}
	for (;;) {
		struct pollfd p = {.fd = at->fd, .events = POLLIN};
		uint64_t now = conn_now_ms();
		struct inmsg *m;
		ssize_t n;
		int rc;

		rc = now >= end ? 0 : poll(&p, 1, (int)(end - now));
		if (rc < 0 && errno == EINTR)
			continue;
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
			continue;
		}
		if (n <= 0) {
			free(m);
			snprintf(at->why, sizeof(at->why),
				 "the new rocmmemd closed the connection");
			return -ECONNRESET;
		}
		m->msg = rocmmem__wire__server_message__unpack(NULL, (size_t)n, at->rx);
		if (!m->msg || m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND__NOT_SET) {
			inmsg_free(m);
			snprintf(at->why, sizeof(at->why),
				 "the daemon sent what cannot be decoded");
			return -EPROTO;
		}
		if (!conn_reply(m)) {
			*at->events_tail = m;
			at->events_tail = &m->next;
			continue;
		}
		if (conn_reply(m)->id == msg->id) {
			*out = m;
			return 0;
		}
		if (!conn_reply(m)->has_id || conn_reply(m)->id == 0) {
			snprintf(at->why, sizeof(at->why), "%s",
				 conn_reply(m)->message ? conn_reply(m)->message
							: "the daemon refused the connection");
			inmsg_free(m);
			return -ECONNREFUSED;
		}
		inmsg_free(m); /* an answer to nothing asked here */
	}
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
		if (!at->daemon_version || !at->backend)
			err = -ENOMEM;
	}
	if (getsockopt(at->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		at->daemon_pid = cred.pid;
	inmsg_free(m);
	return err;
}

/* How long a re-declaration may take: the daemon imports GPU memory on a worker thread, and
 * a connection given up once memory was taken over would hand that memory back. */
#define REDECLARE_STEP_MS (30 * CONN_REPLY_GRACE_MS)

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

/* run makes the attempt: connect, hello, models, leases, done, telemetry. Lock not held. */
static int run(struct attempt *at)
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

/* take snapshots what the attempt declares; lock held. Returns 0 or -ENOMEM. */
static int take(rocmmem_client *c, struct attempt *at)
{
	size_t nm = 0, nl = 0;

	for (struct lib_model *m = c->models; m; m = m->next)
		nm++;
	for (struct rocmmem_lease *l = c->leases; l; l = l->next)
		nl++;
	at->models = calloc(nm ? nm : 1, sizeof(*at->models));
	at->leases = calloc(nl ? nl : 1, sizeof(*at->leases));
	at->rx = malloc(WIRE_MAX_FRAME);
	if (!at->models || !at->leases || !at->rx)
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
	c->next_id += 3 + at->nmodels + at->nleases;
	return 0;
}

static void attempt_free(struct attempt *at)
{
	struct inmsg *m;

	if (at->fd >= 0)
		close(at->fd);
	for (size_t i = 0; i < at->nleases; i++)
		wire_close_fds(at->leases[i].fds, at->leases[i].nfds);
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
}

static void retire(rocmmem_client *c, char **field, char **fresh)
{
	char **v;

	if (*field && *fresh && strcmp(*field, *fresh) == 0)
		return;
	/* The host may hold the old string (rocmmem_client_backend): kept until disconnect. */
	v = realloc(c->retired, (c->nretired + 1) * sizeof(*v));
	if (!v)
		return;
	c->retired = v;
	c->retired[c->nretired++] = *field;
	*field = *fresh;
	*fresh = NULL;
}

/* release_orphan tells the new daemon to let go of a lease the host released meanwhile. */
static void release_orphan(rocmmem_client *c, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	uint8_t buf[64];
	size_t len;

	rel.has_lease_id = true;
	rel.lease_id = id;
	msg.has_id = true;
	msg.id = c->next_id++;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	len = protobuf_c_message_get_packed_size(&msg.base);
	if (len > sizeof(buf))
		return;
	protobuf_c_message_pack(&msg.base, buf);
	if (wire_send(c->fd, buf, len, NULL, 0, MSG_DONTWAIT) == 0) {
		struct abandoned *a = malloc(sizeof(*a));

		if (a) { /* its answer is nobody's */
			a->id = msg.id;
			a->next = c->abandoned;
			c->abandoned = a;
		}
	}
}

/* install makes the attempt's connection the client's; lock held. */
static void install(rocmmem_client *c, struct attempt *at)
{
	struct epoll_event ev = {.events = EPOLLIN};
	unsigned models = 0, leases = 0, refused = 0;
	uint64_t took = conn_now_ms() - c->lost_ms;
	char summary[256];
	struct inmsg *m;

	/* A thread still sending on, or reading, the old connection's fd number finishes first
	 * (the old socket is dead: at once). */
	while (c->sending || c->reading)
		pthread_cond_wait(&c->cond, &c->lock);
	dup2(at->fd, c->fd);
	close(at->fd);
	at->fd = -1;
	ev.data.fd = c->fd;
	epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fd, &ev);
	c->gen++;
	c->reconnecting = false;
	c->seq_base = c->last_seq;
	c->daemon_pid = at->daemon_pid;
	c->device_count = at->device_count;
	retire(c, &c->daemon_version, &at->daemon_version);
	retire(c, &c->backend, &at->backend);
	/* Requests given up on the old connection will never be answered on this one. */
	while (c->abandoned) {
		struct abandoned *a = c->abandoned;

		c->abandoned = a->next;
		free(a);
	}
	for (size_t i = 0; i < at->nmodels; i++) {
		struct snap_model *s = &at->models[i];
		struct lib_model *lm = model_by_id(c, s->m.id);

		if (!lm)
			continue; /* unregistered meanwhile: the call waiting to say so says so */
		if (s->err) {
			lm->daemon_id = 0;
			lm->reservation = 0;
			conn_queue_lib(c, ROCMMEM_EVENT_MODEL_REVOKED, 0, lm->id, s->why);
			refused++;
			continue;
		}
		lm->daemon_id = s->new_id;
		if (s->reservation < lm->reservation) {
			lm->reservation = s->reservation;
			if (s->reservation == 0)
				conn_queue_lib(c, ROCMMEM_EVENT_MODEL_REVOKED, 0, lm->id, s->why);
		}
		models++;
	}
	for (size_t i = 0; i < at->nleases; i++) {
		struct snap_lease *s = &at->leases[i];
		struct rocmmem_lease *l = c->leases;

		while (l && (l != s->l || l->id != s->id))
			l = l->next;
		/* Released by the host while it was being re-declared: let the new daemon know. */
		if (!s->err && !l) {
			release_orphan(c, s->id);
			continue;
		}
		if (!l || s->revoked)
			continue;
		if (s->err) {
			char why[320];

			snprintf(why, sizeof(why), "the restarted daemon did not take it back: %s",
				 s->why);
			l->revoked = true;
			conn_queue_lib(c, ROCMMEM_EVENT_LEASE_REVOKED, l->id, 0, why);
			refused++;
			continue;
		}
		leases++;
	}
	/* What the new daemon said during the attempt, after the connections before it. */
	while ((m = at->events)) {
		at->events = m->next;
		conn_note_event(c, m);
		conn_queue_event(c, m);
	}
	at->events_tail = &at->events;
	snprintf(summary, sizeof(summary),
		 "reconnected to rocmmemd %s (pid %d) after %.1f s: %u lease(s) and %u model(s) "
		 "re-declared, %u refused",
		 c->daemon_version ? c->daemon_version : "", (int)c->daemon_pid,
		 (double)took / 1000.0, leases, models, refused);
	conn_queue_lib(c, ROCMMEM_EVENT_RECONNECTED, 0, 0, summary);
	arm(c, 0);
}

/* schedule plans the next attempt after a failed one, or gives up; lock held. */
static void schedule(rocmmem_client *c, const char *why)
{
	uint64_t now = conn_now_ms(), delay;

	snprintf(c->lost_msg, sizeof(c->lost_msg), "%s", why);
	if (c->window_ms >= 0 && now >= c->lost_ms + (uint64_t)c->window_ms) {
		char msg[384];

		snprintf(msg, sizeof(msg), "rocmmemd did not come back within %.3g s (%s)",
			 (double)c->window_ms / 1000.0, why);
		end_for_good(c, -ECONNRESET, msg);
		return;
	}
	/* Exponential with jitter: returning clients do not all knock at the same instant. */
	delay = c->backoff_ms * 3 / 4 + (uint64_t)rand_r(&c->rand_state) % (c->backoff_ms / 2 + 1);
	c->backoff_ms =
	    c->backoff_ms * 2 > CONN_BACKOFF_MAX_MS ? CONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
	c->next_attempt_ms = now + delay;
	if (c->window_ms >= 0 && c->next_attempt_ms > c->lost_ms + (uint64_t)c->window_ms)
		c->next_attempt_ms = c->lost_ms + (uint64_t)c->window_ms;
	arm(c, c->next_attempt_ms);
}

void reconnect_try(rocmmem_client *c)
{
	struct attempt at = {.fd = -1};
	int err;

	at.events_tail = &at.events;
	c->attempting = true;
	c->attempts++;
	err = take(c, &at);
	pthread_mutex_unlock(&c->lock);
	if (err == 0)
		err = run(&at);
	else
		snprintf(at.why, sizeof(at.why), "out of memory");
	pthread_mutex_lock(&c->lock);
	c->attempting = false;
	if (err == 0 && !c->broken)
		install(c, &at);
	else if (!c->broken)
		schedule(c, at.why[0] ? at.why : strerror(-err));
	attempt_free(&at);
	pthread_cond_broadcast(&c->cond);
}
