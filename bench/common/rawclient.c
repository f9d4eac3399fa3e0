/* SPDX-License-Identifier: MIT */
/* rawclient.c: requests packed and replies unpacked by hand, one blocking call at a time. */
#include "rawclient.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "version.h"

int raw_dial(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd, err;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* connect_as dials path and says hello, asking for features. */
static int connect_as(struct raw_conn *c, const char *path, const char *name, bool tagged,
		      struct raw_capture *capture, uint32_t features)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	struct raw_reply r;
	int err;

	c->next_id = 1;
	c->features = 0;
	c->tagged = tagged;
	c->capture = capture;
	c->fd = raw_dial(path);
	if (c->fd < 0)
		return c->fd;
	hello.has_protocol_version = true;
	hello.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	hello.client_name = (char *)name;
	hello.has_features = features != 0;
	hello.features = features;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	err = raw_call(c, &msg, &r);
	if (err)
		raw_close(c);
	else
		c->features = r.features;
	return err;
}

int raw_connect(struct raw_conn *c, const char *path, const char *name, bool tagged,
		struct raw_capture *capture)
{
	return connect_as(c, path, name, tagged, capture, 0);
}

int raw_connect_features(struct raw_conn *c, const char *path, const char *name, uint32_t features)
{
	return connect_as(c, path, name, false, NULL, features);
}

void raw_close(struct raw_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int raw_send(struct raw_conn *c, Rocmmem__Wire__ClientMessage *msg)
{
	ssize_t len;

	msg->has_id = true;
	msg->id = c->next_id++;
	len = wire_pack(&msg->base, c->tx, sizeof(c->tx) - 1);
	if (len < 0)
		return (int)len;
	if (c->tagged)
		c->tx[len++] = (uint8_t)msg->body_case;
	return wire_send(c->fd, c->tx, (size_t)len, NULL, 0, 0);
}

static void capture_packet(struct raw_capture *cap, const uint8_t *buf, size_t len, unsigned nfds)
{
	unsigned i = cap->parts;

	if (i >= RAW_CAPTURE_PARTS)
		return;
	if (!cap->data[i] && !(cap->data[i] = malloc(WIRE_MAX_FRAME)))
		return;
	memcpy(cap->data[i], buf, len);
	cap->len[i] = len;
	cap->nfds[i] = nfds;
	cap->parts++;
}

int raw_recv(struct raw_conn *c, struct raw_reply *out)
{
	for (;;) {
		Rocmmem__Wire__ServerMessage *m;
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		Rocmmem__Wire__Reply *r;
		ssize_t n;

		n = wire_recv(c->fd, c->rx, sizeof(c->rx), fds, &nfds, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
		wire_close_fds(fds, nfds);
		m = rocmmem__wire__server_message__unpack(NULL, (size_t)n, c->rx);
		if (!m)
			return -EBADMSG;
		if (m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			continue; /* an event: nobody here asked for one */
		}
		if (c->capture)
			capture_packet(c->capture, c->rx, (size_t)n, nfds);
		r = m->reply;
		memset(out, 0, sizeof(*out));
		out->id = r->has_id ? r->id : 0;
		out->error = r->has_error ? r->error : 0;
		out->more = r->has_more && r->more;
		out->len = (size_t)n;
		out->nfds = nfds;
		if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_HELLO && r->hello->has_features)
			out->features = r->hello->features;
		if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_LEASE && r->lease->has_lease_id)
			out->lease_id = r->lease->lease_id;
		if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_MODEL && r->model->has_model_id)
			out->model_id = r->model->model_id;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		return 0;
	}
}

int raw_call(struct raw_conn *c, Rocmmem__Wire__ClientMessage *msg, struct raw_reply *out)
{
	struct raw_reply r;
	int err;

	if (c->capture)
		c->capture->parts = 0;
	err = raw_send(c, msg);
	if (err)
		return err;
	/* The echo server replays recorded replies: their ids are the daemon's, not ours. */
	do {
		err = raw_recv(c, &r);
		if (err)
			return err;
	} while ((r.id != msg->id && !c->tagged) || r.more);
	if (out)
		*out = r;
	return r.error;
}

int raw_lease_acquire(struct raw_conn *c, uint64_t size, int64_t timeout_ms, uint64_t *lease_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	struct raw_reply r;
	int err;

	acq.has_device = true;
	acq.device = 0;
	acq.has_size = true;
	acq.size = size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = timeout_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	err = raw_call(c, &msg, &r);
	if (err == 0)
		*lease_id = r.lease_id;
	return err;
}

int raw_lease_release(struct raw_conn *c, uint64_t lease_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;

	rel.has_lease_id = true;
	rel.lease_id = lease_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	return raw_call(c, &msg, NULL);
}

int raw_status(struct raw_conn *c)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest st = ROCMMEM__WIRE__STATUS_REQUEST__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &st;
	return raw_call(c, &msg, NULL);
}

int raw_status_info(struct raw_conn *c, struct raw_daemon_info *out)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest st = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	bool more = true;
	int err;

	memset(out, 0, sizeof(*out));
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &st;
	if ((err = raw_send(c, &msg)))
		return err;
	while (more) {
		Rocmmem__Wire__ServerMessage *m;
		Rocmmem__Wire__Reply *r;
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		ssize_t n = wire_recv(c->fd, c->rx, sizeof(c->rx), fds, &nfds, 0);

		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
		wire_close_fds(fds, nfds);
		m = rocmmem__wire__server_message__unpack(NULL, (size_t)n, c->rx);
		if (!m)
			return -EBADMSG;
		r = m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ? m->reply : NULL;
		if (r && r->has_id && r->id == msg.id) {
			const Rocmmem__Wire__StatusReply *s =
			    r->body_case == ROCMMEM__WIRE__REPLY__BODY_STATUS ? r->status : NULL;

			err = r->has_error ? r->error : 0;
			more = !err && r->has_more && r->more;
			out->parts++;
			if (s && s->daemon) {
				out->heap_bytes = s->daemon->heap_bytes;
				out->fds_open = s->daemon->fds_open;
				out->fds_limit = s->daemon->fds_limit;
			}
			if (s)
				out->leases += s->n_leases;
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (err)
			return err;
	}
	return 0;
}

int raw_model_register(struct raw_conn *c, const char *name, int model_class, uint64_t size,
		       int32_t priority, uint64_t *model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	struct raw_reply r;
	int err;

	reg.has_device = true;
	reg.device = 0;
	reg.name = (char *)name;
	reg.has_class_ = true;
	reg.class_ = (Rocmmem__Wire__ModelClass)model_class;
	reg.has_size = true;
	reg.size = size;
	reg.has_priority = true;
	reg.priority = priority;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	err = raw_call(c, &msg, &r);
	if (err == 0)
		*model_id = r.model_id;
	return err;
}

int raw_model_acquire(struct raw_conn *c, uint64_t model_id, int64_t timeout_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;

	acq.has_model_id = true;
	acq.model_id = model_id;
	acq.has_timeout_ms = true;
	acq.timeout_ms = timeout_ms;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
	msg.model_acquire = &acq;
	return raw_call(c, &msg, NULL);
}

int raw_model_release(struct raw_conn *c, uint64_t model_id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRelease rel = ROCMMEM__WIRE__MODEL_RELEASE__INIT;

	rel.has_model_id = true;
	rel.model_id = model_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
	msg.model_release = &rel;
	return raw_call(c, &msg, NULL);
}

void raw_capture_free(struct raw_capture *cap)
{
	for (unsigned i = 0; i < RAW_CAPTURE_PARTS; i++) {
		free(cap->data[i]);
		cap->data[i] = NULL;
	}
	cap->parts = 0;
}
