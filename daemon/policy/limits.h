/* SPDX-License-Identifier: MIT */
/*
 * limits.h: the caps that keep one client from growing the daemon without bound, and the
 * descriptor arithmetic host leases and connections share.
 */
#ifndef ROCMMEMD_LIMITS_H
#define ROCMMEMD_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every limit a client can run into, in the order status lists them. */
enum limit_id {
	LIMIT_CLIENTS,		 /* connections at once */
	LIMIT_CLIENTS_PER_UID,	 /* connections at once of one uid */
	LIMIT_PENDING,		 /* waiting requests per connection */
	LIMIT_LEASES,		 /* leases per connection */
	LIMIT_MODELS,		 /* registered models per connection (fixed) */
	LIMIT_QUEUED,		 /* bytes of unsent replies per connection */
	LIMIT_BYTES_PER_UID,	 /* memory one uid holds and waits for */
	LIMIT_MESSAGE_SIZE,	 /* bytes of one request */
	LIMIT_HANDSHAKE_TIMEOUT, /* ms from connect to hello */
	LIMIT_SUBSCRIBERS,	 /* telemetry subscriptions at once */
	LIMIT_DESCRIPTORS,	 /* the open-files limit host leases and connections share */
	LIMIT_COUNT,
};

/* The models one connection may register (not configurable). */
#define LIMITS_MAX_MODELS 256u

/* The caps as configured. */
struct limits {
	unsigned max_clients;
	unsigned max_pending;	       /* waiting lease requests per connection */
	unsigned max_leases;	       /* live leases per connection */
	size_t max_queued_out;	       /* bytes of unsent replies and events per connection */
	uint64_t shutdown_timeout_ms;  /* at stop, how long clients get to leave by themselves */
	unsigned max_clients_per_uid;  /* connections at once of one uid */
	uint64_t max_bytes_per_uid;    /* memory one uid holds and waits for; 0: unlimited */
	uint32_t max_message;	       /* bytes of one request, at most WIRE_MAX_FRAME */
	uint64_t handshake_timeout_ms; /* from connect to hello */
	unsigned max_subscribers;      /* telemetry subscriptions at once */
};

/* limit_name is the limit's key in the configuration file's [limits] section. */
const char *limit_name(enum limit_id id);

/*
 * limit_value says what a limit is now: its value, or unlimited (bytes_per_uid only); fd_limit
 * is the descriptor limit (LIMIT_DESCRIPTORS).
 */
void limit_value(const struct limits *l, uint64_t fd_limit, enum limit_id id, uint64_t *value,
		 bool *unlimited);

/*
 * What the daemon's descriptor limit allows. Each host lease keeps one fd (its memfd) in the
 * daemon for its whole life; each connection costs up to LIMITS_FDS_PER_CONNECTION (its
 * socket, a pidfd, its request lane's doorbell, and a lease's fd while its grant waits to be
 * sent). Of the limit L (RLIMIT_NOFILE at start):
 *   own         = the fds open at start + LIMITS_FD_SLACK (the state file, metrics writes,
 *                 the runtime's files, the spare descriptor kept for refusing connections)
 *   room        = L - own
 *   connections = min(4 x the clients limit, room / 2)
 *   total       = room - connections: host leases of every client together
 *   per_uid     = total / 2: of one uid's connections, and of one connection
 * so that no user can use up what other users' connections and leases need.
 */
#define LIMITS_FD_SLACK 64u
#define LIMITS_FDS_PER_CONNECTION 4u

struct fd_caps {
	uint64_t limit, own, connections, total, per_uid;
};

/* fd_caps_compute computes the caps above from the limit, what the daemon keeps, and l. */
void fd_caps_compute(uint64_t fd_limit, uint64_t fd_own, const struct limits *l,
		     struct fd_caps *out);

#endif
