/* SPDX-License-Identifier: MIT */
/* systemd.c: the systemd side of rocmmemd: passed sockets, sd_notify and the watchdog. */
#include "systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "size.h"

/* The status line changes at most this often (systemd shows it; it is not a metrics feed). */
#define STATUS_MIN_INTERVAL_MS 1000

/* What the status line says; the line is sent again only when one of these changes. */
struct snapshot {
	struct systemd_figures f;
	bool stopping;
	bool reload_failed;
};

static struct {
	bool enabled;  /* under systemd and systemd_init ran: notifications are sent */
	bool handles;  /* the handles below are initialised (closed by systemd_stop) */
	bool stopping; /* STOPPING=1 was sent: no READY=1 may follow */
	bool reload_failed;
	bool send_failed; /* a notification failed once already (logged once) */
	uv_loop_t *loop;
	struct systemd_source source;
	uv_check_t check;	 /* after each loop iteration: did the status line change? */
	uv_timer_t status_timer; /* sends a change held back by STATUS_MIN_INTERVAL_MS */
	uv_timer_t watchdog;
	struct snapshot sent; /* what the manager was last told */
	char sent_line[256];
	uint64_t sent_ms;
} svc;

/* notify sends one notification (NEWLINE-separated assignments). */
static void notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void notify(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rc = sd_notify(0, msg);
	if (rc < 0) {
		/* The manager going away is not a reason to stop serving: say so once. */
		if (!svc.send_failed)
			log_warn("Could not notify the service manager: %s", strerror(-rc));
		else
			log_debug("Could not notify the service manager: %s", strerror(-rc));
		svc.send_failed = true;
	}
}

static void take_snapshot(struct snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	svc.source.figures(svc.source.ctx, &snap->f);
	snap->stopping = svc.stopping;
	snap->reload_failed = svc.reload_failed;
}

static bool snapshot_equal(const struct snapshot *x, const struct snapshot *y)
{
	return x->f.clients == y->f.clients && x->f.leases == y->f.leases &&
	       x->f.leased == y->f.leased && x->f.reserved == y->f.reserved &&
	       x->f.budget == y->f.budget && x->f.waiting == y->f.waiting &&
	       x->stopping == y->stopping && x->reload_failed == y->reload_failed;
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* format_status writes the one-line status, all devices summed. Returns buf. */
static const char *format_status(const struct snapshot *snap, char *buf, size_t len)
{
	char leased[SIZE_FORMAT_MAX], budget[SIZE_FORMAT_MAX], reserved[SIZE_FORMAT_MAX + 16] = "";

	if (snap->stopping) {
		snprintf(buf, len, "stopping: %u client%s left", snap->f.clients,
			 plural(snap->f.clients));
		return buf;
	}
	if (snap->f.reserved) {
		char bytes[SIZE_FORMAT_MAX];

		snprintf(reserved, sizeof(reserved), ", %s reserved",
			 size_format(snap->f.reserved, bytes, sizeof(bytes)));
	}
	snprintf(buf, len,
		 "%u client%s, %" PRIu64 " lease%s, %s of %s leased%s, %" PRIu64 " waiting%s",
		 snap->f.clients, plural(snap->f.clients), snap->f.leases, plural(snap->f.leases),
		 size_format(snap->f.leased, leased, sizeof(leased)),
		 size_format(snap->f.budget, budget, sizeof(budget)), reserved, snap->f.waiting,
		 snap->reload_failed ? "; the last reload failed" : "");
	return buf;
}

/*
 * send_status tells the manager the current line, with READY=1 before it when ready; a line
 * that reads as the last one sent (sizes are rounded) is not sent again.
 */
static void send_status(const struct snapshot *snap, bool ready)
{
	char line[sizeof(svc.sent_line)];

	format_status(snap, line, sizeof(line));
	svc.sent = *snap;
	if (!ready && strcmp(line, svc.sent_line) == 0)
		return;
	notify("%sSTATUS=%s", ready ? "READY=1\n" : "", line);
	memcpy(svc.sent_line, line, sizeof(line));
	svc.sent_ms = uv_now(svc.loop);
}

static void on_status_timer(uv_timer_t *timer)
{
	struct snapshot now;

	(void)timer;
	take_snapshot(&now);
	if (!snapshot_equal(&now, &svc.sent))
		send_status(&now, false);
}

/*
 * on_check runs after every loop iteration: cheap sums, and a send only when the line would
 * change, at once if the last one is a second old, else when it is.
 */
static void on_check(uv_check_t *check)
{
	struct snapshot now;
	uint64_t since;

	(void)check;
	if (uv_is_active((uv_handle_t *)&svc.status_timer))
		return; /* a send is due already */
	take_snapshot(&now);
	if (snapshot_equal(&now, &svc.sent))
		return;
	since = uv_now(svc.loop) - svc.sent_ms;
	if (since >= STATUS_MIN_INTERVAL_MS)
		send_status(&now, false);
	else
		uv_timer_start(&svc.status_timer, on_status_timer, STATUS_MIN_INTERVAL_MS - since,
			       0);
}

/* on_watchdog pings from the loop itself: a loop that stops turning stops the pings. */
static void on_watchdog(uv_timer_t *timer)
{
	(void)timer;
	notify("WATCHDOG=1");
}

int systemd_init(uv_loop_t *loop, const struct systemd_source *source)
{
	struct snapshot now;
	uint64_t usec = 0;
	int rc;

	if (svc.handles)
		return -EALREADY;
	if (!getenv("NOTIFY_SOCKET"))
		return 0;
	svc.loop = loop;
	svc.source = *source;
	uv_check_init(loop, &svc.check);
	uv_timer_init(loop, &svc.status_timer);
	uv_timer_init(loop, &svc.watchdog);
	svc.handles = true;
	svc.enabled = true;

	take_snapshot(&now);
	send_status(&now, true);
	rc = uv_check_start(&svc.check, on_check);
	if (rc < 0) {
		log_error("Could not keep the service status current: %s", uv_strerror(rc));
		return rc;
	}
	/* The environment stays as it is: GPU runtime threads may read it meanwhile, and the
	 * daemon starts no children that could take the variables for their own. */
	rc = sd_watchdog_enabled(0, &usec);
	if (rc < 0) {
		log_warn("Could not read the watchdog interval: %s", strerror(-rc));
	} else if (rc > 0 && usec > 0) {
		uint64_t every_ms = usec / 2000;

		if (every_ms == 0)
			every_ms = 1;
		rc = uv_timer_start(&svc.watchdog, on_watchdog, every_ms, every_ms);
		if (rc < 0) {
			log_error("Could not start the watchdog timer: %s", uv_strerror(rc));
			return rc;
		}
		log_info("systemd watchdog: %" PRIu64 " ms; pinging every %" PRIu64 " ms",
			 usec / 1000, every_ms);
	}
	log_debug("told the service manager the daemon is ready");
	return 0;
}

void systemd_stopping(uint64_t shutdown_timeout_ms)
{
	struct snapshot now;

	if (!svc.enabled || svc.stopping)
		return;
	svc.stopping = true;
	uv_timer_stop(&svc.status_timer);
	take_snapshot(&now);
	format_status(&now, svc.sent_line, sizeof(svc.sent_line));
	/*
	 * The drain may outlast the unit's TimeoutStopSec: ask for it plus a margin, so that a
	 * long --shutdown-timeout is honoured rather than cut short by SIGKILL.
	 */
	notify("STOPPING=1\nEXTEND_TIMEOUT_USEC=%llu\nSTATUS=%s",
	       (unsigned long long)(shutdown_timeout_ms + 10000) * 1000, svc.sent_line);
	svc.sent = now;
	svc.sent_ms = uv_now(svc.loop);
}

void systemd_reloading(void)
{
	struct timespec ts;

	if (!svc.enabled || svc.stopping)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uv_timer_stop(&svc.status_timer);
	snprintf(svc.sent_line, sizeof(svc.sent_line), "reloading the configuration");
	notify("RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=%s",
	       (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u, svc.sent_line);
}

void systemd_reloaded(bool ok)
{
	struct snapshot now;

	if (!svc.enabled || svc.stopping)
		return;
	svc.reload_failed = !ok;
	uv_timer_stop(&svc.status_timer);
	take_snapshot(&now);
	send_status(&now, true);
}

void systemd_stop(void)
{
	if (!svc.handles)
		return;
	svc.handles = false;
	svc.enabled = false;
	uv_close((uv_handle_t *)&svc.check, NULL);
	uv_close((uv_handle_t *)&svc.status_timer, NULL);
	uv_close((uv_handle_t *)&svc.watchdog, NULL);
}

/* describe_fd says what a passed fd is, for the refusal ("an AF_INET stream socket"). */
static void describe_fd(int fd, char *buf, size_t len)
{
	int domain = 0, type = 0, listening = 0;
	socklen_t sl = sizeof(int);
	const char *family, *kind;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		snprintf(buf, len, "not a socket");
		return;
	}
	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &sl);
	sl = sizeof(int);
	getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl);
	sl = sizeof(int);
	getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &sl);
	family = domain == AF_UNIX    ? "AF_UNIX"
		 : domain == AF_INET  ? "AF_INET"
		 : domain == AF_INET6 ? "AF_INET6"
				      : "other than AF_UNIX";
	kind = type == SOCK_STREAM	? "stream (SOCK_STREAM)"
	       : type == SOCK_DGRAM	? "datagram (SOCK_DGRAM)"
	       : type == SOCK_SEQPACKET ? "SOCK_SEQPACKET"
					: "non-SOCK_SEQPACKET";
	snprintf(buf, len, "a %s socket of family %s%s", kind, family,
		 listening || type != SOCK_SEQPACKET ? "" : " that is not listening");
}

/* close_passed closes the n fds systemd passed: the daemon will not serve them. */
static void close_passed(int n)
{
	for (int i = 0; i < n; i++)
		close(SD_LISTEN_FDS_START + i);
}

int systemd_listen_fd(int *fd, char *path, size_t path_len)
{
	struct sockaddr_un addr;
	socklen_t alen = sizeof(addr);
	size_t name_len;
	char what[96];
	int n, rc, flags;

	n = sd_listen_fds(0); /* the environment stays: see systemd_init */
	if (n == 0)
		return 0;
	if (n < 0) {
		log_error("Could not take the socket systemd passed: %s", strerror(-n));
		return n;
	}
	if (n > 1) {
		log_error("Could not start: systemd passed %d file descriptors; rocmmemd serves "
			  "exactly one listening socket (ListenSequentialPacket=)",
			  n);
		close_passed(n);
		return -EINVAL;
	}
	rc = sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL, 0);
	if (rc <= 0) {
		describe_fd(SD_LISTEN_FDS_START, what, sizeof(what));
		log_error("Could not use the socket systemd passed: it is %s; rocmmemd needs a "
			  "listening AF_UNIX SOCK_SEQPACKET socket (ListenSequentialPacket=)",
			  what);
		close_passed(n);
		return rc < 0 ? rc : -EPROTOTYPE;
	}
	memset(&addr, 0, sizeof(addr));
	if (getsockname(SD_LISTEN_FDS_START, (struct sockaddr *)&addr, &alen) < 0) {
		rc = -errno;
		log_error("Could not read the address of the socket systemd passed: %s",
			  strerror(-rc));
		close_passed(n);
		return rc;
	}
	name_len = alen > offsetof(struct sockaddr_un, sun_path)
		       ? alen - offsetof(struct sockaddr_un, sun_path)
		       : 0;
	if (name_len == 0)
		snprintf(path, path_len, "(unnamed socket)");
	else if (addr.sun_path[0] == '\0') /* abstract: shown as systemd writes it */
		snprintf(path, path_len, "@%.*s", (int)(name_len - 1), addr.sun_path + 1);
	else
		snprintf(path, path_len, "%.*s", (int)strnlen(addr.sun_path, name_len),
			 addr.sun_path);
	/* sd_listen_fds made it close-on-exec; the accept loop needs it non-blocking. */
	flags = fcntl(SD_LISTEN_FDS_START, F_GETFL);
	if (flags < 0 || fcntl(SD_LISTEN_FDS_START, F_SETFL, flags | O_NONBLOCK) < 0) {
		rc = -errno;
		log_error("Could not make the socket systemd passed non-blocking: %s",
			  strerror(-rc));
		close_passed(n);
		return rc;
	}
	*fd = SD_LISTEN_FDS_START;
	return 1;
}
