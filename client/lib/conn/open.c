/* SPDX-License-Identifier: MIT */
/* open.c: a new connection to the daemon: the socket, the event fd, and the hello. */
#include <errno.h>
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

#include "base/error.h"
#include "client.h"
#include "version.h"

/* Retry interval while a daemon that is starting has no socket yet. */
#define CONN_RETRY_MS 20

int conn_open_socket(const char *path, int64_t deadline, int *out)
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
		if (conn_remaining_ms(deadline) == 0)
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

int conn_hello(rocmmem_client *c, const char *name, int64_t deadline)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	int64_t wait = deadline < 0 ? CONN_REPLY_GRACE_MS : conn_remaining_ms(deadline);
	Rocmmem__Wire__HelloReply *h;
	struct inmsg *m;
	int err;

	hello.has_protocol_version = true;
	hello.protocol_version = ROCMMEM_PROTOCOL_VERSION;
	hello.client_name = (char *)name;
	hello.has_features = held_arena_wanted() || conn_lane_wanted();
	hello.features = (held_arena_wanted() ? ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA : 0) |
			 (conn_lane_wanted() ? ROCMMEM__WIRE__FEATURE__FEATURE_LANE : 0);
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
	pthread_mutex_lock(&c->lock);
	conn_lane_attach(c, h->has_features ? h->features : 0, m);
	pthread_mutex_unlock(&c->lock);
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

int conn_setup_event_fd(rocmmem_client *c)
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
