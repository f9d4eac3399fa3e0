/* SPDX-License-Identifier: MIT */
/* dispatch.c: one packet off a connection: decoded, checked, and handed to the service as plain
 * requests. */
#include "dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "client.h"
#include "feed.h"
#include "handshake.h"
#include "platform/peer.h"
#include "drain.h"
#include "server.h"
#include "service/metrics.h"
#include "status.h"
#include "text.h"
#include "validate.h"
#include "wire.h"

_Static_assert(METRICS_TEXT_MAX + 512u == WIRE_MAX_FRAME, "a metrics reply fits one packet");

/* default_name names a client that gave none after its process, as "[comm]". */
static void default_name(struct client *c)
{
	char path[64], comm[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)c->holder->who.pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	/* Gone meanwhile: the pid may be another process's by now, and so the name. */
	if (n <= 0 || peer_gone(&c->peer))
		return;
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	if (text_is_clean(comm, sizeof(comm)))
		snprintf(c->holder->name, sizeof(c->holder->name), "[%s]", comm);
}

/* The holder's feature bits are the wire's. */
_Static_assert(HOLDER_HOST_ARENA == (unsigned)ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA &&
		   HOLDER_LANE == (unsigned)ROCMMEM__WIRE__FEATURE__FEATURE_LANE,
	       "feature bits");

/*
 * features_taken picks, of the bits a client offers, those this daemon uses with it: a host
 * arena where some device serves host memory, and a request lane. Unknown bits are a newer
 * client's: ignored.
 */
static uint32_t features_taken(const struct server *s, const Rocmmem__Wire__Hello *hello)
{
	uint32_t taken = 0;

	if (!hello->has_features)
		return 0;
	if (hello->features & HOLDER_LANE)
		taken |= HOLDER_LANE;
	if (!(hello->features & HOLDER_HOST_ARENA))
		return taken;
	for (unsigned i = 0; i < s->svc.state.ndevices; i++)
		if (device_keeps_fds(&s->svc.state.devices[i]))
			taken |= HOLDER_HOST_ARENA;
	return taken;
}

static void handle_hello(struct client *c, uint64_t id, const Rocmmem__Wire__Hello *hello)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__HelloReply body = ROCMMEM__WIRE__HELLO_REPLY__INIT;
	struct server *s = c->server;
	int fds[2] = {-1, -1};
	char why[256];
	int err = validate_hello(hello, why, sizeof(why));

	if (err) {
		client_protocol_error(c, id, err, "%s", why);
		return;
	}
	if (hello->client_name && hello->client_name[0])
		snprintf(c->holder->name, sizeof(c->holder->name), "%s", hello->client_name);
	else
		default_name(c);
	c->greeted = true;
	c->holder->features = features_taken(s, hello);
	/* No lane when one cannot be made (descriptors, memory): the socket serves alone. */
	if ((c->holder->features & HOLDER_LANE) && client_lane_open(c, &fds[0], &fds[1]) < 0) {
		c->holder->features &= ~HOLDER_LANE;
		fds[0] = fds[1] = -1;
	}
	handshake_end(&s->handshake, c);
	body.has_protocol_version = true;
	body.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	body.daemon_version = (char *)ROCMMEM_VERSION_STRING;
	body.backend = (char *)backend_name(s->svc.backend);
	body.has_device_count = true;
	body.device_count = s->svc.state.ndevices;
	body.has_max_frame = true;
	body.max_frame = s->svc.cfg.limits.max_message;
	body.has_max_daemon_frame = true;
	body.max_daemon_frame = WIRE_MAX_FRAME;
	body.has_client_id = true;
	body.client_id = c->id;
	/* Always sent, 0 included: a client tells this daemon from one that predates it. */
	body.has_features = true;
	body.features = c->holder->features;
	reply.has_id = true;
	reply.id = id;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_HELLO;
	reply.hello = &body;
	client_reply(c, &reply, fds, fds[0] >= 0 ? 2 : 0);
	/* The lane's memfd is the client's now; the doorbell stays the lane's. */
	if (fds[0] >= 0)
		close(fds[0]);
	svc_holder_hello(&s->svc, c->holder);
}

/* metrics_reply answers a MetricsRequest with the text, or with an error. */
static void metrics_reply(struct client *c, uint64_t request_id)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__MetricsReply body = ROCMMEM__WIRE__METRICS_REPLY__INIT;
	char *text = malloc(METRICS_TEXT_MAX);
	ssize_t len;

	if (!text) {
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	len = server_metrics(c->server, text, METRICS_TEXT_MAX);
	if (len < 0) {
		log_error("Could not format the metrics: more than %u bytes", METRICS_TEXT_MAX);
		client_reply_error(c, request_id, (int)len,
				   "the metrics do not fit in one reply (%u bytes)",
				   METRICS_TEXT_MAX);
		free(text);
		return;
	}
	body.text = text;
	reply.has_id = true;
	reply.id = request_id;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_METRICS;
	reply.metrics = &body;
	client_reply(c, &reply, NULL, 0);
	free(text);
}

/* dispatch_admin handles the administration requests this daemon implements. */
static void dispatch_admin(struct client *c, uint64_t id, const Rocmmem__Wire__AdminRequest *req)
{
	struct svc *svc = &c->server->svc;

	switch (req->op_case) {
	case ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL:
		svc_admin_evict(svc, c->id, id,
				req->evict_model->has_model_id ? req->evict_model->model_id : 0,
				req->evict_model->has_force && req->evict_model->force);
		break;
	case ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL:
		svc_admin_pin(svc, c->id, id,
			      req->pin_model->has_model_id ? req->pin_model->model_id : 0,
			      req->pin_model->has_pinned && req->pin_model->pinned);
		break;
	default:
		client_reply_error(
		    c, id, -EOPNOTSUPP,
		    "this administration request is not supported by this rocmmemd %s",
		    ROCMMEM_VERSION_STRING);
		break;
	}
}

/* memory_request turns a lease, model acquire or resize into the service's request. */
static void memory_request(struct client *c, const Rocmmem__Wire__ClientMessage *msg)
{
	struct policy_request r = {.holder = c->id, .request_id = msg->id};

	switch (msg->body_case) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE: {
		const Rocmmem__Wire__LeaseAcquire *q = msg->lease_acquire;

		r.kind = POLICY_LEASE;
		r.device = q->has_device ? q->device : 0;
		r.requested = q->size;
		r.model_id = q->has_model_id ? q->model_id : 0;
		r.timeout_ms = q->has_timeout_ms ? q->timeout_ms : 0;
		r.tag = q->tag;
		r.progress = q->has_progress && q->progress;
		r.own_memfd = q->has_own_memfd && q->own_memfd;
		break;
	}
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE:
		r.kind = POLICY_MODEL_ACQUIRE;
		r.model_id = msg->model_acquire->has_model_id ? msg->model_acquire->model_id : 0;
		r.timeout_ms =
		    msg->model_acquire->has_timeout_ms ? msg->model_acquire->timeout_ms : 0;
		r.progress = msg->model_acquire->has_progress && msg->model_acquire->progress;
		break;
	default:
		r.kind = POLICY_MODEL_RESIZE;
		r.model_id = msg->model_resize->has_model_id ? msg->model_resize->model_id : 0;
		r.requested = msg->model_resize->reservation;
		r.timeout_ms =
		    msg->model_resize->has_timeout_ms ? msg->model_resize->timeout_ms : 0;
		r.progress = msg->model_resize->has_progress && msg->model_resize->progress;
		break;
	}
	svc_request(&c->server->svc, &r);
}

/* model_register turns a registration into the service's description of the model. */
static void model_register(struct client *c, uint64_t id, const Rocmmem__Wire__ModelRegister *q)
{
	struct svc_model_desc desc = {.device = q->has_device ? q->device : 0,
				      .name = q->name,
				      .model_class = q->has_class_ ? (unsigned)q->class_ : 0,
				      .has_size = q->has_size,
				      .size = q->size,
				      .priority = q->has_priority ? q->priority : 0,
				      .pinned = q->has_pinned && q->pinned};

	svc_model_register(&c->server->svc, c->id, id, &desc);
}

/* model_redeclare turns a re-declared model into the service's plain form. */
static void model_redeclare(struct client *c, uint64_t id, const Rocmmem__Wire__ModelRedeclare *q)
{
	struct svc_model_redeclare r = {.device = q->has_device ? q->device : 0,
					.name = q->name,
					.has_class = q->has_class_,
					.model_class = (int)q->class_,
					.has_size = q->has_size,
					.size = q->size,
					.priority = q->has_priority ? q->priority : 0,
					.pinned = q->has_pinned && q->pinned,
					.previous_id = q->has_previous_id ? q->previous_id : 0,
					.has_reservation = q->has_reservation,
					.reservation = q->reservation,
					.use_count = q->has_use_count ? q->use_count : 0,
					.has_generation = q->has_generation,
					.generation = q->generation};

	svc_model_redeclare(&c->server->svc, c->id, id, &r);
}

/* lease_redeclare turns a re-declared lease (its fds attached) into the service's plain form. */
static void lease_redeclare(struct client *c, uint64_t id, const Rocmmem__Wire__LeaseRedeclare *q,
			    int *fds, unsigned nfds)
{
	bool arena =
	    q->has_handle_kind && q->handle_kind == ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA;
	struct svc_lease_redeclare r = {
	    .complete = q->has_lease_id && q->lease_id != 0 && q->has_size && q->size != 0 &&
			q->has_device && q->has_handle_kind &&
			(arena ? nfds == 0 && (!q->has_fd_count || q->fd_count == 0) &&
				     q->has_offset && q->has_arena_id
			       : q->has_fd_count && q->fd_count == nfds && nfds > 0 &&
				     nfds <= BACKEND_MAX_CHUNKS),
	    .offset = q->offset,
	    .arena_id = q->arena_id,
	    .lease_id = q->lease_id,
	    .device = q->device,
	    .size = q->size,
	    .handle_kind = (uint32_t)q->handle_kind,
	    .n_chunk_sizes = (unsigned)q->n_chunk_sizes,
	    .chunk_sizes = q->chunk_sizes,
	    .model_id = q->has_model_id ? q->model_id : 0};

	if (arena && r.complete)
		svc_arena_lease_redeclare(&c->server->svc, c->id, id, &r);
	else
		svc_lease_redeclare(&c->server->svc, c->id, id, &r, fds, nfds);
}

/* arena_redeclare turns a re-declared arena (its memfd attached) into the service's form. */
static void arena_redeclare(struct client *c, uint64_t id, const Rocmmem__Wire__ArenaRedeclare *q,
			    int *fds, unsigned nfds)
{
	struct svc_arena_redeclare r = {
	    .complete = q->has_arena_id && q->has_device && q->has_size && q->size != 0 &&
			q->has_fd_count && q->fd_count == nfds && nfds == 1,
	    .arena_id = q->arena_id,
	    .device = q->device,
	    .size = q->size};

	if (nfds > 1) {
		wire_close_fds(fds + 1, nfds - 1);
		r.complete = false;
	}
	svc_arena_redeclare(&c->server->svc, c->id, id, &r, nfds > 0 ? fds[0] : -1);
}

/* dispatch_model serves the requests of a model's owner; false when msg is none of them. */
static bool dispatch_model(struct client *c, const Rocmmem__Wire__ClientMessage *msg)
{
	struct svc *svc = &c->server->svc;
	uint64_t id = msg->id;

	switch (msg->body_case) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER:
		model_register(c, id, msg->model_register);
		return true;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE:
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE:
		memory_request(c, msg);
		return true;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE:
		svc_model_release(svc, c->id, id,
				  msg->model_release->has_model_id ? msg->model_release->model_id
								   : 0);
		return true;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER:
		svc_model_unregister(
		    svc, c->id, id,
		    msg->model_unregister->has_model_id ? msg->model_unregister->model_id : 0);
		return true;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK:
		svc_evict_ack(svc, c->id, id,
			      msg->evict_ack->has_model_id ? msg->evict_ack->model_id : 0,
			      msg->evict_ack->has_generation, msg->evict_ack->generation);
		return true;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REDECLARE:
		model_redeclare(c, id, msg->model_redeclare);
		return true;
	default:
		return false;
	}
}

/* dispatch_other serves everything but a model's requests. */
static void dispatch_other(struct client *c, const Rocmmem__Wire__ClientMessage *msg)
{
	struct server *s = c->server;
	uint64_t id = msg->id;

	switch (msg->body_case) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE:
		memory_request(c, msg);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE:
		svc_lease_release(&s->svc, c->id, id, msg->lease_release->lease_id);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS:
		status_start(c, id);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN:
		dispatch_admin(c, id, msg->admin);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE:
		feed_subscribe(&s->feed, c, id, msg->subscribe);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE:
		feed_unsubscribe(&s->feed, c, id);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM:
		svc_trim(&s->svc, c->id, id, !msg->trim->has_device, msg->trim->device);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE:
		lease_redeclare(c, id, msg->lease_redeclare, NULL, 0);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ARENA_REDECLARE:
		arena_redeclare(c, id, msg->arena_redeclare, NULL, 0);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE:
		svc_redeclare_done(&s->svc, c->id, id);
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_METRICS:
		metrics_reply(c, id);
		break;
	default:
		client_reply_error(c, id, -EOPNOTSUPP,
				   "this request is not supported by this rocmmemd %s",
				   ROCMMEM_VERSION_STRING);
		break;
	}
}

static void dispatch(struct client *c, const Rocmmem__Wire__ClientMessage *msg)
{
	struct server *s = c->server;
	uint64_t id = msg->id;
	char why[256];
	int err;

	/* Draining: only what gives memory back is served. */
	if (s->stopping && !server_stop_allows(msg->body_case)) {
		client_reply_error(c, id, -ESHUTDOWN,
				   "the daemon is stopping: it only takes releases now");
		return;
	}
	if (msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO) {
		client_protocol_error(c, id, -EPROTO, "hello sent twice");
		return;
	}
	/* What the request says about itself; the handlers check it against the daemon's state. */
	err = validate_request(msg, s->svc.state.ndevices, why, sizeof(why));
	if (err) {
		client_reply_error(c, id, err, "%s", why);
		return;
	}
	if (!dispatch_model(c, msg))
		dispatch_other(c, msg);
}

void dispatch_packet(struct client *c, size_t len, int *fds, unsigned nfds)
{
	struct wire_arena *arena = &c->server->rx_arena;
	Rocmmem__Wire__ClientMessage *msg;
	uint64_t id;

	/* Into the server's arena: nothing keeps a pointer into msg past this function (tags and
	 * names are copied), and the arena is emptied at its end. */
	msg = rocmmem__wire__client_message__unpack(&arena->pc, len, c->server->rx);
	if (!msg) {
		wire_arena_reset(arena);
		wire_close_fds(fds, nfds);
		client_protocol_error(c, 0, -EBADMSG, "could not decode a %zu-byte message", len);
		return;
	}
	id = msg->has_id ? msg->id : 0;
	if (nfds > 0 && id != 0 && c->greeted &&
	    msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE) {
		/* The requests that carry descriptors: memory held across a restart. */
		lease_redeclare(c, id, msg->lease_redeclare, fds, nfds);
	} else if (nfds > 0 && id != 0 && c->greeted &&
		   msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ARENA_REDECLARE) {
		arena_redeclare(c, id, msg->arena_redeclare, fds, nfds);
	} else if (nfds > 0) {
		/* No request takes descriptors: close them so they cannot pile up here. */
		wire_close_fds(fds, nfds);
		client_protocol_error(c, id, -EBADMSG,
				      "%u file descriptor(s) attached to a request that takes none",
				      nfds);
	} else if (id == 0) {
		client_protocol_error(c, 0, -EPROTO, "request without an id");
	} else if (!c->greeted) {
		if (msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO)
			handle_hello(c, id, msg->hello);
		else
			client_protocol_error(c, id, -EPROTO, "the first message must be hello");
	} else {
		dispatch(c, msg);
	}
	wire_arena_reset(arena);
}

/* conn_drained goes on with what waited for the connection's queue to empty. */
static void conn_drained(struct client *c)
{
	if (c->status.stage != STATUS_IDLE)
		status_continue(c);
	if (TAILQ_EMPTY(&c->outq) && c->feed_blocked) {
		c->feed_blocked = false;
		feed_client_writable(&c->server->feed, c);
	}
}

/* conn_closing forgets a connection being torn down. */
static void conn_closing(struct client *c)
{
	handshake_end(&c->server->handshake, c);
	feed_client_gone(&c->server->feed, c);
}

void dispatch_install(struct server *s)
{
	wire_arena_init(&s->rx_arena, s->rx_arena_buf, sizeof(s->rx_arena_buf));
	s->hooks.packet = dispatch_packet;
	s->hooks.drained = conn_drained;
	s->hooks.closing = conn_closing;
}
