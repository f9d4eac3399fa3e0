/* SPDX-License-Identifier: MIT */
/* server.h: the listening socket, the list of connected clients, and shutdown. */
#ifndef ROCMMEMD_SERVER_H
#define ROCMMEMD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/un.h>
#include <uv.h>

#include "base/idtable.h"
#include "feed.h"
#include "handshake.h"
#include "platform/sampler.h"
#include "rocmmem.pb-c.h"
#include "service/service.h"
#include "wire.h"

struct client;
TAILQ_HEAD(client_list, client);

/* Who owns the socket the daemon creates, and its mode (a socket systemd passed is systemd's). */
struct socket_access {
	uid_t uid;
	gid_t gid;
	mode_t mode;
	bool configured; /* set by a flag or the file, not the defaults */
};

struct server {
	uv_loop_t *loop;
	int listen_fd;
	int lock_fd;
	int dir_fd; /* the socket's directory, checked (safepath.h); -1 when socket-activated */
	uv_poll_t listen_poll;
	uv_timer_t accept_pause; /* resumes accepting after accept failed for want of memory */
	int reserve_fd;		 /* a spare descriptor (/dev/null): freed to refuse a connection
				  * when the daemon has none left, so accept never starves */
	uint64_t accept_log_ms;	 /* when the last accept failure was logged */
	unsigned long long accept_held; /* accept failures since, not logged */
	bool listening;
	bool activated; /* the socket came from systemd: its path and lifetime are systemd's */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lock_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	struct client_list clients;
	unsigned client_count;
	struct idtable conns; /* the connections by their holders' ids */
	struct svc svc;	      /* what they hold, and the rules (service/service.h) */
	uv_timer_t deadline;  /* armed for the service's earliest deadline */
	bool deadline_ready;
	struct sampler sampler;
	struct feed feed;
	struct socket_access socket_access;
	struct handshake handshake; /* connections yet to say hello */
	uint64_t start_ms;
	bool stopping; /* set by server_stop: draining, then gone */
	bool draining; /* clients still holding memory get until drain_timer to let go */
	uv_timer_t drain_timer;
	uv_check_t drain_check; /* each loop turn: disconnect who let go; end when none left */
	/* Called once every client is gone after server_stop (may be NULL). */
	void (*on_stopped)(struct server *s, void *data);
	void *stopped_data;
	/* One buffer each way serves every connection: the loop is single-threaded. */
	uint8_t rx[WIRE_MAX_FRAME];
	uint8_t tx[WIRE_MAX_FRAME];
};

/*
 * server_listen serves the listening socket systemd passed when the daemon is socket-activated
 * (then path is only what was configured: the passed socket's own path goes into s->path, and
 * nothing is created, locked or removed); refuses to start when what systemd passed is not one
 * listening AF_UNIX SOCK_SEQPACKET socket. Otherwise it binds and listens on path: creates its
 * parent directory if needed, refuses a directory other users could replace the socket in
 * (safepath_check_dir), refuses a socket another daemon is serving, removes a stale one; the
 * socket is born with its configured mode and handed to its owner and group before it listens.
 * The service must be set up already. Returns 0 or a negative errno (logged).
 */
int server_listen(struct server *s, uv_loop_t *loop, const char *path);

/*
 * server_stop begins a graceful stop: stops listening (removing the socket and its lock unless
 * systemd owns them), tells every client the daemon is stopping and why, and disconnects at
 * once the clients that hold no memory (their pending requests end with the connection). The
 * others have their waiting requests answered with -ESHUTDOWN and get up to
 * limits.shutdown_timeout_ms (0: none, all go at once) to release and leave by themselves
 * (server_stop_allows says what they may still ask); each is disconnected as soon as it holds
 * nothing, and whoever is left at the deadline is disconnected then, every lease reclaimed.
 * Once no client is left, s->on_stopped is called and the server's handles are closed: the
 * loop can run out. Calling it again does nothing.
 */
void server_stop(struct server *s, const char *reason);

/*
 * server_stop_now cuts a drain short (a second SIGTERM): disconnects every client at once.
 * Starts the stop first if server_stop was not called yet.
 */
void server_stop_now(struct server *s, const char *reason);

/*
 * server_stop_allows says whether a request of this kind is still served while the daemon
 * drains: only those that give memory back (releases, model unregisters, evict acks) or ask
 * for less (unsubscribing); the rest are refused with -ESHUTDOWN.
 */
bool server_stop_allows(Rocmmem__Wire__ClientMessage__BodyCase kind);

/* server_uptime_ms returns milliseconds since server_listen. */
uint64_t server_uptime_ms(const struct server *s);

/* server_next_client returns the connected client with the smallest id above after_id. */
struct client *server_next_client(const struct server *s, uint64_t after_id);

/* server_conn returns the connection of the holder with this id, or NULL. */
struct client *server_conn(const struct server *s, uint64_t holder_id);

/*
 * server_due_changed arms the deadline timer for due_ms (UINT64_MAX: none); when it fires the
 * service's deadlines run (svc_tick). ctx is the server (the service's sink).
 */
void server_due_changed(void *ctx, uint64_t due_ms);

/*
 * server_start_timer sets up the deadline timer (before the service may say when it is due);
 * server_finish closes it and frees what the server allocated, running the loop once more.
 */
void server_start_timer(struct server *s, uv_loop_t *loop);
void server_finish(struct server *s);

/* server_metrics writes the Prometheus text of the daemon into buf (metrics_format). */
ssize_t server_metrics(const struct server *s, char *buf, size_t cap);

#endif
