/* SPDX-License-Identifier: MIT */
/* server.c: the listening socket (claiming its path safely), accepting clients, and stopping. */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "log.h"

/* How long to stop accepting after running out of file descriptors. */
#define ACCEPT_PAUSE_MS 100

void server_default_limits(struct limits *limits)
{
	limits->max_clients = 4096;
	limits->max_pending = 64;
	limits->max_leases = 65536;
	limits->max_queued_out = 1u << 20;
}

uint64_t server_uptime_ms(const struct server *s)
{
	return uv_now(s->loop) - s->start_ms;
}

struct client *server_next_client(const struct server *s, uint64_t after_id)
{
	struct client *c;

	/* Clients are appended as they connect, so the list is in id order. */
	TAILQ_FOREACH (c, &s->clients, link) {
		if (c->id > after_id)
			return c;
	}
	return NULL;
}

/* make_parents creates the missing directories above path (like mkdir -p of its dirname). */
static int make_parents(const char *path, mode_t mode)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST) {
			int err = -errno;

			log_error("Could not create directory %s: %s", buf, strerror(-err));
			return err;
		}
		if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
			log_error("Could not use %s: not a directory", buf);
			return -ENOTDIR;
		}
		*p = '/';
	}
	return 0;
}

/* take_lock holds PATH.lock for as long as the daemon runs, so two daemons never race. */
static int take_lock(struct server *s)
{
	snprintf(s->lock_path, sizeof(s->lock_path), "%s.lock", s->path);
	s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0) {
		int err = -errno;

		log_error("Could not open %s: %s", s->lock_path, strerror(-err));
		return err;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;

		log_error("Could not lock %s: %s", s->lock_path,
			  err == -EADDRINUSE ? "another rocmmemd is using this socket"
					     : strerror(-err));
		close(s->lock_fd);
		s->lock_fd = -1;
		return err;
	}
	return 0;
}

/* claim_path refuses a live socket at the path and removes a stale one. */
static int claim_path(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_error("Could not listen on %s: it exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	close(fd);
	if (rc == 0 || errno == EPROTOTYPE) {
		log_error("Could not listen on %s: another daemon is serving it", path);
		return -EADDRINUSE;
	}
	if (errno != ECONNREFUSED) {
		int err = -errno;

		log_error("Could not check the socket at %s: %s", path, strerror(-err));
		return err;
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	log_info("removed the stale socket %s", path);
	return 0;
}

static void on_accept(uv_poll_t *handle, int status, int events);

static void on_accept_resume(uv_timer_t *timer)
{
	struct server *s = timer->data;

	if (s->listening)
		uv_poll_start(&s->listen_poll, UV_READABLE, on_accept);
}

/* refuse_full tells a connection over the client cap why it is closed. */
static void refuse_full(struct server *s, int fd)
{
	Rocmmem__Wire__ServerMessage msg = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	char text[96];
	ssize_t len;

	snprintf(text, sizeof(text), "too many clients: the daemon serves at most %u",
		 s->limits.max_clients);
	reply.has_error = true;
	reply.error = -EUSERS;
	reply.message = text;
	msg.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	msg.reply = &reply;
	len = wire_pack(&msg.base, s->tx, sizeof(s->tx));
	if (len > 0)
		wire_send(fd, s->tx, (size_t)len, NULL, 0, MSG_DONTWAIT);
}

static void on_accept(uv_poll_t *handle, int status, int events)
{
	struct server *s = handle->data;

	(void)events;
	if (status < 0) {
		log_error("Could not poll the listening socket: %s", uv_strerror(status));
		return;
	}
	for (;;) {
		struct client *c;
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int err;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* Out of fds or memory: the socket stays readable, so pause instead of
			 * spinning, and let releases free something meanwhile. */
			log_warn("Could not accept a connection: %s; pausing %d ms",
				 strerror(errno), ACCEPT_PAUSE_MS);
			uv_poll_stop(&s->listen_poll);
			uv_timer_start(&s->accept_pause, on_accept_resume, ACCEPT_PAUSE_MS, 0);
			return;
		}
		if (s->client_count >= s->limits.max_clients) {
			log_warn("refused a connection: %u clients connected, the most allowed",
				 s->client_count);
			refuse_full(s, fd);
			close(fd);
			continue;
		}
		err = client_create(s, fd, &c);
		if (err) {
			log_warn("Could not set up a connection: %s", strerror(-err));
			close(fd);
		}
	}
}

int server_listen(struct server *s, uv_loop_t *loop, const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	bool system = geteuid() == 0;
	mode_t old_umask;
	int err, rc;

	s->loop = loop;
	s->listen_fd = -1;
	s->lock_fd = -1;
	TAILQ_INIT(&s->clients);
	s->next_client_id = 1;
	if (strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	snprintf(s->path, sizeof(s->path), "%s", path);
	err = make_parents(s->path, system ? 0755 : 0700);
	if (err)
		return err;
	err = take_lock(s);
	if (err)
		return err;
	err = claim_path(s->path);
	if (err)
		goto fail;
	s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		err = -errno;
		goto fail;
	}
	memcpy(addr.sun_path, s->path, strlen(s->path) + 1);
	/* The socket is born with its final mode: 0660 system-wide, 0600 for a user daemon. */
	old_umask = umask(system ? 0117 : 0177);
	rc = bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	err = rc < 0 ? -errno : 0;
	umask(old_umask);
	if (err) {
		log_error("Could not bind %s: %s", s->path, strerror(-err));
		goto fail;
	}
	if (listen(s->listen_fd, SOMAXCONN) < 0) {
		err = -errno;
		log_error("Could not listen on %s: %s", s->path, strerror(-err));
		unlink(s->path);
		goto fail;
	}
	uv_poll_init(loop, &s->listen_poll, s->listen_fd);
	s->listen_poll.data = s;
	uv_timer_init(loop, &s->accept_pause);
	s->accept_pause.data = s;
	uv_poll_start(&s->listen_poll, UV_READABLE, on_accept);
	s->listening = true;
	s->start_ms = uv_now(loop);
	return 0;
fail:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
	/* The lock is ours (take_lock succeeded): leave no trace of a failed start. */
	unlink(s->lock_path);
	close(s->lock_fd);
	s->lock_fd = -1;
	return err;
}

static void on_listen_closed(uv_handle_t *handle)
{
	struct server *s = handle->data;

	close(s->listen_fd);
	s->listen_fd = -1;
}

void server_stop(struct server *s, const char *reason)
{
	struct client *c;

	if (s->stopping)
		return;
	s->stopping = true;
	log_info("stopping: %s; %u client(s) connected", reason, s->client_count);
	sampler_stop(&s->sampler);
	feed_stop(&s->feed);
	if (s->listening) {
		/* No newcomers: remove the socket before telling everyone else. */
		s->listening = false;
		unlink(s->path);
		uv_poll_stop(&s->listen_poll);
		uv_close((uv_handle_t *)&s->listen_poll, on_listen_closed);
		uv_close((uv_handle_t *)&s->accept_pause, NULL);
		unlink(s->lock_path);
		close(s->lock_fd);
		s->lock_fd = -1;
	}
	TAILQ_FOREACH (c, &s->clients, link) {
		Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
		Rocmmem__Wire__Shutdown body = ROCMMEM__WIRE__SHUTDOWN__INIT;

		body.reason = (char *)reason;
		ev.body_case = ROCMMEM__WIRE__EVENT__BODY_SHUTDOWN;
		ev.shutdown = &body;
		client_event(c, &ev);
	}
	while ((c = TAILQ_FIRST(&s->clients)))
		client_destroy(c);
}
