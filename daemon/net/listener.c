/* SPDX-License-Identifier: MIT */
/*
 * listener.c: the listening socket (claiming its path safely, or taking the one systemd
 * passed), accepting clients, and refusing them when the daemon has no room.
 */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "client.h"
#include "handshake.h"
#include "platform/fdlimit.h"
#include "platform/ids.h"
#include "platform/safepath.h"
#include "platform/systemd.h"

/* How long to stop accepting after accept failed for want of memory (or of a spare fd). */
#define ACCEPT_PAUSE_MS 100
/* At most one line about accept failures this often; the lines held back are counted. */
#define ACCEPT_LOG_INTERVAL_MS 10000

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

/* base_name is the last component of path (the name in s->dir_fd). */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* open_dir opens and checks the socket's directory: nothing in it is found by path again. */
static int open_dir(struct server *s)
{
	char why[512];
	const char *base;
	int err;

	s->dir_fd = safepath_open_dir(s->path, &base, why, sizeof(why));
	if (s->dir_fd < 0) {
		err = s->dir_fd;
		s->dir_fd = -1;
		log_error("Could not listen on %s: %s", s->path, why);
		return err;
	}
	err = safepath_check_dir(s->dir_fd, s->path, why, sizeof(why));
	if (err) {
		log_error("Could not listen on %s: %s", s->path, why);
		close(s->dir_fd);
		s->dir_fd = -1;
	}
	return err;
}

/* take_lock holds PATH.lock for as long as the daemon runs, so two daemons never race. */
static int take_lock(struct server *s)
{
	const char *name = base_name(s->lock_path);
	struct stat st;
	int err;

	s->lock_fd =
	    openat(s->dir_fd, name,
		   O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
	if (s->lock_fd < 0) {
		err = -errno;
		log_error("Could not open %s: %s", s->lock_path,
			  err == -ELOOP ? "it is a symbolic link" : strerror(-err));
		return err;
	}
	/* One planted by another user (in a sticky directory) is not ours to lock or remove. */
	if (fstat(s->lock_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1) {
		log_error("Could not use %s: it is not a regular file of the daemon's own uid %u "
			  "with one link; remove it",
			  s->lock_path, (unsigned)geteuid());
		close(s->lock_fd);
		s->lock_fd = -1;
		return -EPERM;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
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
static int claim_path(const struct server *s)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	const char *name = base_name(s->path);
	struct stat st;
	int fd, rc;

	if (fstatat(s->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_error("Could not listen on %s: it exists and is not a socket", s->path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(addr.sun_path, s->path, strlen(s->path) + 1);
	rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	close(fd);
	if (rc == 0 || errno == EPROTOTYPE) {
		log_error("Could not listen on %s: another daemon is serving it", s->path);
		return -EADDRINUSE;
	}
	if (errno != ECONNREFUSED) {
		int err = -errno;

		log_error("Could not check the socket at %s: %s", s->path, strerror(-err));
		return err;
	}
	if (unlinkat(s->dir_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	log_info("removed the stale socket %s", s->path);
	return 0;
}

static void on_accept(uv_poll_t *handle, int status, int events);

static void on_accept_resume(uv_timer_t *timer)
{
	struct server *s = timer->data;

	if (s->listening)
		uv_poll_start(&s->listen_poll, UV_READABLE, on_accept);
}

/*
 * drop_unread empties a refused connection before it is closed. Closing a socket with unread
 * packets (the client's hello, usually) makes the client's next read fail with ECONNRESET
 * ahead of the refusal; after SHUT_RD the client can queue nothing more (its sends fail with
 * EPIPE), so once the queue is drained the close leaves the refusal as its next read.
 */
static void drop_unread(struct server *s, int fd)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	ssize_t n;

	shutdown(fd, SHUT_RD);
	do {
		n = wire_recv(fd, s->rx, sizeof(s->rx), fds, &nfds, MSG_DONTWAIT);
		wire_close_fds(fds, nfds);
	} while (n > 0 || n == -EMSGSIZE || n == -EBADMSG);
}

/*
 * refuse_connection tells a connection it is refused, and why, before it is closed: a reply
 * without an id, which librocmmem reports as the reason the connection ended.
 */
static void refuse_connection(struct server *s, int fd, int err, const char *text)
{
	Rocmmem__Wire__ServerMessage msg = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	ssize_t len;

	reply.has_error = true;
	reply.error = err;
	reply.message = (char *)text;
	msg.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	msg.reply = &reply;
	len = wire_pack(&msg.base, s->tx, sizeof(s->tx));
	if (len > 0)
		wire_send(fd, s->tx, (size_t)len, NULL, 0, MSG_DONTWAIT);
	drop_unread(s, fd);
}

/*
 * admit checks a new connection against the access policy and the connection caps. Returns 0
 * when it may stay; otherwise it has been told why (and the bus, the log rate-limited) and
 * must be closed.
 */
static int admit(struct server *s, int fd, const struct identity *p)
{
	struct policy_decision d;

	svc_connect(&s->svc, s->client_count, p, &d);
	if (d.verdict != POLICY_REFUSE)
		return 0;
	refuse_connection(s, fd, d.refusal.err, d.refusal.text);
	return d.refusal.err;
}

/* note_accept_failure logs a failed accept, at most once per ACCEPT_LOG_INTERVAL_MS. */
static void note_accept_failure(struct server *s, int err, const char *what)
{
	uint64_t now = uv_now(s->loop);

	if (s->accept_log_ms && now - s->accept_log_ms < ACCEPT_LOG_INTERVAL_MS) {
		s->accept_held++;
		return;
	}
	if (s->accept_held)
		log_warn("Could not accept a connection: %s; %s (and %llu more time(s) in the last "
			 "%.3g s)",
			 strerror(err), what, s->accept_held,
			 (double)(now - s->accept_log_ms) / 1000.0);
	else
		log_warn("Could not accept a connection: %s; %s", strerror(err), what);
	s->accept_log_ms = now ? now : 1;
	s->accept_held = 0;
}

/*
 * shed_connection takes one waiting connection with the spare descriptor when the daemon has
 * none left, tells it why it is refused and closes it, then sets a spare aside again: the
 * listening socket never stays readable with nobody able to accept. Returns 1 when one was
 * refused (accept again), 0 when none was waiting, -1 when it could not (pause).
 */
static int shed_connection(struct server *s, int err)
{
	struct fd_caps k;
	char text[320];
	int fd, why;

	if (s->reserve_fd < 0)
		s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (s->reserve_fd < 0)
		return -1;
	close(s->reserve_fd);
	fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	why = errno;
	if (fd >= 0) {
		fd_caps_compute(s->svc.cfg.fd_limit, s->svc.cfg.fd_own, &s->svc.cfg.limits, &k);
		snprintf(text, sizeof(text),
			 "the daemon has no file descriptor left for another connection (its limit "
			 "is %" PRIu64 "; %u connections, %" PRIu64
			 " host leases; descriptors): try again later, or raise rocmmemd's "
			 "LimitNOFILE= (ulimit -n)",
			 k.limit, s->client_count, s->svc.state.fd_leases);
		refuse_connection(s, fd, -EMFILE, text);
		close(fd);
		svc_limit_hit(&s->svc, NULL, LIMIT_DESCRIPTORS, NULL);
		note_accept_failure(s, err, "refused it with the spare descriptor");
	}
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || why == EINTR || why == ECONNABORTED)
		return 1;
	/* Nothing was waiting after all; anything else (a worker took the spare): pause. */
	return why == EAGAIN || why == EWOULDBLOCK ? 0 : -1;
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
		struct peer peer;
		int err;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			err = errno;
			if (err == EMFILE || err == ENFILE) {
				int shed = shed_connection(s, err);

				if (shed > 0)
					continue;
				if (shed == 0)
					return;
			}
			/* Out of memory, or of fds with no spare: the socket stays readable, so
			 * pause instead of spinning, and let releases free something meanwhile. */
			note_accept_failure(s, err, "pausing 100 ms");
			uv_poll_stop(&s->listen_poll);
			uv_timer_start(&s->accept_pause, on_accept_resume, ACCEPT_PAUSE_MS, 0);
			return;
		}
		err = peer_identify(fd, &peer);
		if (err) {
			log_warn("Could not tell who connected: %s", strerror(-err));
			peer_forget(&peer);
			close(fd);
			continue;
		}
		if (admit(s, fd, &peer.who) < 0) {
			peer_forget(&peer);
			close(fd);
			continue;
		}
		err = client_create(s, fd, &peer, &c);
		if (err) {
			log_warn("Could not set up a connection: %s", strerror(-err));
			peer_forget(&peer);
			close(fd);
			continue;
		}
		handshake_begin(&s->handshake, c);
	}
}

/* start_accepting watches the listening socket. */
static void start_accepting(struct server *s)
{
	uint64_t limit, open_now;

	/* Set aside before counting what the daemon keeps for itself. */
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (s->reserve_fd < 0)
		log_warn("Could not set a spare descriptor aside: %s", strerror(errno));
	fdlimit_read(&limit, &open_now);
	s->svc.cfg.fd_limit = limit;
	s->svc.cfg.fd_own = open_now + LIMITS_FD_SLACK;
	uv_poll_init(s->loop, &s->listen_poll, s->listen_fd);
	s->listen_poll.data = s;
	uv_timer_init(s->loop, &s->accept_pause);
	s->accept_pause.data = s;
	uv_poll_start(&s->listen_poll, UV_READABLE, on_accept);
	s->listening = true;
	s->start_ms = uv_now(s->loop);
	if (handshake_init(&s->handshake, s, s->loop) < 0)
		log_warn("Could not time handshakes: connections that never say hello stay open");
}

/*
 * give_socket hands the socket just bound to its configured owner and group, through the
 * checked directory and without following a link: its mode came from the umask at bind, so no
 * path is ever chmod-ed (a chmod by path follows a symbolic link another user renamed over
 * it). It does not listen yet, so nobody could connect before this.
 */
static int give_socket(const struct server *s)
{
	const struct socket_access *sa = &s->socket_access;
	const char *name = base_name(s->path);
	char user[64], group[64];
	struct stat st;

	if (fstatat(s->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode)) {
		log_error("Could not set up the socket %s: something replaced it after bind",
			  s->path);
		return -EEXIST;
	}
	if ((sa->uid != geteuid() || sa->gid != getegid()) &&
	    fchownat(s->dir_fd, name, sa->uid, sa->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = -errno;

		log_error("Could not give the socket %s to user %s, group %s: %s", s->path,
			  ids_user_name(sa->uid, user, sizeof(user)),
			  ids_group_name(sa->gid, group, sizeof(group)), strerror(-err));
		return err;
	}
	log_info("socket %s: user %s, group %s, mode %04o", s->path,
		 ids_user_name(sa->uid, user, sizeof(user)),
		 ids_group_name(sa->gid, group, sizeof(group)), (unsigned)sa->mode);
	if (sa->mode & 0002)
		log_warn("the socket's mode %04o lets every local user connect",
			 (unsigned)sa->mode);
	return 0;
}

/* bind_socket creates the listening socket at s->path, born with its configured mode. */
static int bind_socket(struct server *s)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	mode_t old_umask;
	int err, rc;

	s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return -errno;
	memcpy(addr.sun_path, s->path, strlen(s->path) + 1);
	/* The inode bind creates takes 0777 less the umask: its mode is set as it is born. */
	old_umask = umask(~s->socket_access.mode & 0777);
	rc = bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	err = rc < 0 ? -errno : 0;
	umask(old_umask);
	if (err)
		log_error("Could not bind %s: %s", s->path, strerror(-err));
	return err;
}

int server_listen(struct server *s, uv_loop_t *loop, const char *path)
{
	bool system = geteuid() == 0;
	int err, rc, fd;

	s->loop = loop;
	s->listen_fd = -1;
	s->lock_fd = -1;
	s->dir_fd = -1;
	s->reserve_fd = -1;
	TAILQ_INIT(&s->clients);
	idtable_init(&s->conns);
	if (strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	/* Socket-activated: systemd made the socket and keeps its path; serve what it passed. */
	rc = systemd_listen_fd(&fd, s->path, sizeof(s->path));
	if (rc < 0)
		return rc;
	if (rc == 1) {
		s->listen_fd = fd;
		s->activated = true;
		if (strcmp(s->path, path) != 0)
			log_warn(
			    "systemd passed a socket bound to %s, not %s: serving %s (give the "
			    "socket unit and rocmmemd the same path)",
			    s->path, path, s->path);
		log_info("using the socket systemd passed (%s)", s->path);
		if (s->socket_access.configured)
			log_warn("socket_user, socket_group and socket_mode do not apply to the "
				 "socket systemd passed: set SocketUser=, SocketGroup= and "
				 "SocketMode= in the socket unit");
		start_accepting(s);
		return 0;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	snprintf(s->lock_path, sizeof(s->lock_path), "%s.lock", s->path);
	err = make_parents(s->path, system ? 0755 : 0700);
	if (err)
		return err;
	err = open_dir(s);
	if (err)
		return err;
	err = take_lock(s);
	if (err)
		goto fail_dir;
	err = claim_path(s);
	if (err)
		goto fail;
	err = bind_socket(s);
	if (err)
		goto fail;
	err = give_socket(s);
	if (err) {
		unlinkat(s->dir_fd, base_name(s->path), 0);
		goto fail;
	}
	if (listen(s->listen_fd, SOMAXCONN) < 0) {
		err = -errno;
		log_error("Could not listen on %s: %s", s->path, strerror(-err));
		unlinkat(s->dir_fd, base_name(s->path), 0);
		goto fail;
	}
	start_accepting(s);
	return 0;
fail:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
	/* The lock is ours (take_lock succeeded): leave no trace of a failed start. */
	unlinkat(s->dir_fd, base_name(s->lock_path), 0);
	close(s->lock_fd);
	s->lock_fd = -1;
fail_dir:
	close(s->dir_fd);
	s->dir_fd = -1;
	return err;
}

static void on_listen_closed(uv_handle_t *handle)
{
	struct server *s = handle->data;

	close(s->listen_fd);
	s->listen_fd = -1;
}

void server_stop_listening(struct server *s)
{
	if (!s->listening)
		return;
	s->listening = false;
	/* A passed socket's path is systemd's: it removes it (RemoveOnStop=) or keeps queueing
	 * connections on it for the next start. */
	if (!s->activated)
		unlinkat(s->dir_fd, base_name(s->path), 0);
	uv_poll_stop(&s->listen_poll);
	uv_close((uv_handle_t *)&s->listen_poll, on_listen_closed);
	uv_close((uv_handle_t *)&s->accept_pause, NULL);
	handshake_stop(&s->handshake);
	if (s->lock_fd >= 0) {
		unlinkat(s->dir_fd, base_name(s->lock_path), 0);
		close(s->lock_fd);
		s->lock_fd = -1;
	}
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->dir_fd = -1;
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	s->reserve_fd = -1;
}
