/* SPDX-License-Identifier: MIT */
/* echo_server.c: one thread, epoll, SOCK_SEQPACKET: each request answered from its kind's script.
 */
#include "echo_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire.h"

/* Packets read per wake-up of one connection, as rocmmemd does (CLIENT_BURST). */
#define ECHO_BURST 32
#define ECHO_EVENTS 64

struct script {
	unsigned parts;
	size_t len[RAW_CAPTURE_PARTS];
	unsigned nfds[RAW_CAPTURE_PARTS];
	uint8_t *data[RAW_CAPTURE_PARTS];
};

static struct script scripts[ECHO_KINDS];
static int memfd = -1;
static uint8_t rx[WIRE_MAX_FRAME];

static int send_all(int fd, const uint8_t *buf, size_t len, unsigned nfds)
{
	int fds[RAW_CAPTURE_PARTS];

	for (unsigned i = 0; i < nfds && i < RAW_CAPTURE_PARTS; i++)
		fds[i] = memfd;
	for (;;) {
		int rc = wire_send(fd, buf, len, fds, nfds, MSG_DONTWAIT);
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (rc != -EAGAIN)
			return rc;
		if (poll(&p, 1, 1000) <= 0)
			return -ETIMEDOUT;
	}
}

/* control: [ECHO_CONTROL][kind][part][parts][nfds] then the packet. */
static int control(int fd, const uint8_t *buf, size_t len)
{
	static const uint8_t ack = 0;
	struct script *s;
	unsigned kind, part;

	if (len < 5 || buf[1] >= ECHO_KINDS || buf[2] >= RAW_CAPTURE_PARTS ||
	    buf[3] > RAW_CAPTURE_PARTS)
		return -EINVAL;
	kind = buf[1];
	part = buf[2];
	s = &scripts[kind];
	free(s->data[part]);
	s->data[part] = malloc(len - 5);
	if (!s->data[part])
		return -ENOMEM;
	memcpy(s->data[part], buf + 5, len - 5);
	s->len[part] = len - 5;
	s->nfds[part] = buf[4];
	s->parts = buf[3];
	return send_all(fd, &ack, 1, 0);
}

static int answer(int fd, const uint8_t *buf, size_t len)
{
	static const uint8_t unknown[2] = {0xff, 0xff};
	const struct script *s;
	int rc = 0;

	if (buf[0] == ECHO_CONTROL)
		return control(fd, buf, len);
	s = &scripts[buf[len - 1] % ECHO_KINDS];
	if (s->parts == 0)
		return send_all(fd, unknown, sizeof(unknown), 0); /* the client fails to decode */
	for (unsigned i = 0; i < s->parts && rc == 0; i++)
		rc = send_all(fd, s->data[i], s->len[i], s->nfds[i]);
	return rc;
}

/* serve_connection handles what fd has sent; returns false when it should be closed. */
static bool serve_connection(int fd)
{
	for (int i = 0; i < ECHO_BURST; i++) {
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		ssize_t n = wire_recv(fd, rx, sizeof(rx), fds, &nfds, MSG_DONTWAIT);

		if (n == -EAGAIN)
			return true;
		if (n <= 0)
			return false;
		wire_close_fds(fds, nfds);
		if (answer(fd, rx, (size_t)n) < 0)
			return false;
	}
	return true;
}

static void serve(int listen_fd)
{
	struct epoll_event ev = {.events = EPOLLIN}, events[ECHO_EVENTS];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		_exit(1);
	ev.data.fd = listen_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
	for (;;) {
		int n = epoll_wait(ep, events, ECHO_EVENTS, -1);

		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;

			if (fd != listen_fd) {
				if (!serve_connection(fd)) {
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					close(fd);
				}
				continue;
			}
			for (;;) {
				int c =
				    accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (c < 0)
					break;
				ev.data.fd = c;
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
			}
		}
	}
}

pid_t echo_server_start(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd, err;
	pid_t pid;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, SOMAXCONN) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* A grant's script attaches this one sealed memfd, as the daemon attaches one. */
		memfd = memfd_create("rocmmem-echo", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (memfd < 0 || ftruncate(memfd, (off_t)2 << 20) < 0)
			_exit(1);
		serve(fd);
		_exit(0);
	}
	close(fd);
	return pid;
}

int echo_server_script(struct raw_conn *conn, unsigned kind, const struct raw_capture *cap)
{
	uint8_t *buf = malloc(WIRE_MAX_FRAME);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned i = 0; i < cap->parts && !err; i++) {
		size_t len = cap->len[i];
		uint8_t ack;
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;

		if (len + 5 > WIRE_MAX_FRAME) {
			err = -EMSGSIZE;
			break;
		}
		buf[0] = ECHO_CONTROL;
		buf[1] = (uint8_t)kind;
		buf[2] = (uint8_t)i;
		buf[3] = (uint8_t)cap->parts;
		buf[4] = (uint8_t)cap->nfds[i];
		memcpy(buf + 5, cap->data[i], len);
		err = wire_send(conn->fd, buf, len + 5, NULL, 0, 0);
		if (!err && wire_recv(conn->fd, &ack, 1, fds, &nfds, 0) != 1)
			err = -EPROTO;
	}
	free(buf);
	return err;
}
