/* SPDX-License-Identifier: MIT */
/*
 * server.h: the server's connections by id, its uptime, the timer for the service's earliest
 * deadline, and the metrics text (struct server is in net.h; listening is listener.h's,
 * stopping drain.h's).
 */
#ifndef ROCMMEMD_SERVER_H
#define ROCMMEMD_SERVER_H

#include <stdint.h>
#include <sys/types.h>

#include "net.h"

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
