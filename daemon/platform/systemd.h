/* SPDX-License-Identifier: MIT */
/*
 * systemd.h: rocmmemd as a systemd service: the sockets systemd passes, and what the daemon
 * tells the service manager (ready, a status line, watchdog pings, reloading, stopping).
 *
 * Everything here is a no-op outside systemd: without $NOTIFY_SOCKET nothing is sent and no
 * timer runs; without $LISTEN_FDS the daemon binds its own socket. There is one service
 * manager per process, so the state is the module's own (no object to pass around).
 */
#ifndef ROCMMEMD_SYSTEMD_H
#define ROCMMEMD_SYSTEMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* What the status line sums up. */
struct systemd_figures {
	unsigned clients;
	uint64_t leases;
	uint64_t leased;
	uint64_t reserved;
	uint64_t budget;
	uint64_t waiting;
};

/* Where the figures come from (installed by the daemon's main). */
struct systemd_source {
	void *ctx;
	void (*figures)(void *ctx, struct systemd_figures *out);
};

/*
 * systemd_listen_fd takes the listening socket systemd passed ($LISTEN_FDS and $LISTEN_PID,
 * which are left in the environment: $LISTEN_PID keeps other processes from using them, and
 * the GPU runtime's threads may be reading the environment). Returns 1 with the socket in *fd
 * (non-blocking, close-on-exec, now the caller's to close) and the path it is bound to in
 * path ("@name" for an abstract one); 0 when nothing was passed; or a negative errno, logged,
 * when what was passed cannot be served: several fds, or anything but one listening AF_UNIX
 * SOCK_SEQPACKET socket (the passed fds are closed then).
 */
int systemd_listen_fd(int *fd, char *path, size_t path_len);

/*
 * systemd_init is called once the backends are up and the socket listens. Under systemd
 * ($NOTIFY_SOCKET set) it sends READY=1 with a STATUS= line ("3 clients, 2 leases, 10 MiB of
 * 64 MiB leased, 1 waiting"), then keeps that line current from the loop (a change is sent at
 * once, but at most once a second), and, when the manager expects watchdog pings
 * (sd_watchdog_enabled), sends WATCHDOG=1 from a loop timer every half of the interval, so
 * that a stuck loop stops the pings and gets the daemon restarted. source must answer until
 * systemd_stop. Returns 0 (also when not under systemd) or a negative errno (logged).
 */
int systemd_init(uv_loop_t *loop, const struct systemd_source *source);

/*
 * systemd_stopping sends STOPPING=1 with "STATUS=stopping: N clients left", asking for
 * shutdown_timeout_ms more (and a margin); the status line keeps counting the clients down
 * while the daemon drains.
 */
void systemd_stopping(uint64_t shutdown_timeout_ms);

/*
 * systemd_reloading sends RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC in microseconds,
 * which systemd 253 and later require for Type=notify-reload) and "STATUS=reloading the
 * configuration". Call it when SIGHUP arrives, before re-reading the configuration, and
 * systemd_reloaded when done.
 */
void systemd_reloading(void);

/*
 * systemd_reloaded ends a reload: sends READY=1 with the status line. ok false (the new
 * configuration was refused and the old one is kept) marks the line "last reload failed"
 * until a reload succeeds.
 */
void systemd_reloaded(bool ok);

/*
 * systemd_stop closes the timers so that the loop can end (call it once every client is gone).
 * Nothing more is sent afterwards. Safe to call when systemd_init did nothing, and twice.
 */
void systemd_stop(void);

#endif
