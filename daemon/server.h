/* SPDX-License-Identifier: MIT */
/* server.h: the listening socket, the list of connected clients, and shutdown. */
#ifndef ROCMMEMD_SERVER_H
#define ROCMMEMD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <uv.h>

#include "arbiter.h"
#include "feed.h"
#include "sampler.h"
#include "wire.h"

struct client;
TAILQ_HEAD(client_list, client);

/* Caps that keep one client from growing the daemon without bound. */
struct limits {
	unsigned max_clients;
	unsigned max_pending;  /* waiting lease requests per connection */
	unsigned max_leases;   /* live leases per connection */
	size_t max_queued_out; /* bytes of unsent replies and events per connection */
};

struct server {
	uv_loop_t *loop;
	int listen_fd;
	int lock_fd;
	uv_poll_t listen_poll;
	uv_timer_t accept_pause; /* resumes accepting after the fd limit was hit */
	bool listening;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lock_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	struct client_list clients;
	unsigned client_count;
	uint64_t next_client_id;
	struct arbiter arbiter;
	struct sampler sampler;
	struct feed feed;
	struct limits limits;
	uint64_t start_ms;
	bool stopping;
	/* One buffer each way serves every connection: the loop is single-threaded. */
	uint8_t rx[WIRE_MAX_FRAME];
	uint8_t tx[WIRE_MAX_FRAME];
};

/* server_default_limits fills the caps used when configuration says nothing. */
void server_default_limits(struct limits *limits);

/*
 * server_listen binds and listens on path: creates its parent directory if needed, refuses a
 * socket another daemon is serving, removes a stale one. The arbiter must be set up already.
 * Returns 0 or a negative errno (logged).
 */
int server_listen(struct server *s, uv_loop_t *loop, const char *path);

/*
 * server_stop tells every client the daemon is stopping, disconnects them (reclaiming their
 * leases), stops listening and removes the socket. The loop then runs out of handles.
 */
void server_stop(struct server *s, const char *reason);

/* server_uptime_ms returns milliseconds since server_listen. */
uint64_t server_uptime_ms(const struct server *s);

/* server_find_client returns the connected client with the smallest id above after_id. */
struct client *server_next_client(const struct server *s, uint64_t after_id);

#endif
