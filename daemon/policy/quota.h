/* SPDX-License-Identifier: MIT */
/*
 * quota.h: limits and quotas: what each uid has (connections, memory held and waited for)
 * across its connections, and how often a client ran into each limit.
 */
#ifndef ROCMMEMD_QUOTA_H
#define ROCMMEMD_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "base/log.h"
#include "rocmmem.pb-c.h"

struct client;
struct holder;
struct server;
struct limits;

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
#define QUOTA_MAX_MODELS 256u

struct quota {
	uint64_t fd_limit;  /* RLIMIT_NOFILE at start (quota_fd_init) */
	uint64_t fd_own;    /* descriptors kept for the daemon's own files */
	uint64_t fd_leases; /* every holder.fd_leases, summed */
};

/*
 * What the daemon's descriptor limit allows. Each host lease keeps one fd (its memfd) in the
 * daemon for its whole life; each connection costs up to three (its socket, a pidfd, and a
 * lease's fd while its grant waits to be sent). Of the limit L (RLIMIT_NOFILE at start):
 *   own         = the fds open at start + QUOTA_FD_SLACK (the state file, metrics writes,
 *                 the runtime's files, the spare descriptor kept for refusing connections)
 *   room        = L - own
 *   connections = min(3 x the clients limit, room / 2)
 *   total       = room - connections: host leases of every client together
 *   per_uid     = total / 2: of one uid's connections, and of one connection
 * so that no user can use up what other users' connections and leases need.
 */
#define QUOTA_FD_SLACK 64u

struct fd_caps {
	uint64_t limit, own, connections, total, per_uid;
};

/* quota_fd_init reads RLIMIT_NOFILE and counts the descriptors open now: the daemon's own. */
void quota_fd_init(struct quota *q);

/* quota_fd_caps computes the caps above under the limits in force. */
void quota_fd_caps(const struct server *s, struct fd_caps *out);

/*
 * quota_fd_admit checks that c may hold one more host lease (one that keeps an fd in the
 * daemon): its connection, its uid and all clients together stay within the caps. With take,
 * the lease is counted from now on (quota_fd_release gives it back, exactly once). Returns 0,
 * or -EMFILE after answering request_id with the numbers, counting the hit and logging it.
 */
int quota_fd_admit(struct server *s, struct client *c, uint64_t request_id, bool take);

/*
 * quota_fd_release gives back what quota_fd_admit took for h (NULL: a holder gone meanwhile,
 * whose share was given back to its uid as it left: only the daemon's total).
 */
void quota_fd_release(struct server *s, struct holder *h);

/* quota_init sets up the tally. */
void quota_init(struct quota *q);

/*
 * quota_admit checks that c's uid may have `bytes` more memory (held and waited for) under
 * the bytes-per-uid quota. Returns 0, or -EDQUOT after answering request_id with a message
 * that names the quota, counting the hit and logging it.
 */
int quota_admit(struct server *s, struct client *c, uint64_t request_id, uint64_t bytes);

/*
 * quota_hit tells the bus a client ran into a limit (counted; the message fmt says logged,
 * rate-limited, at warn, unless fmt is NULL).
 */
void quota_hit(struct server *s, enum limit_id id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* limit_name is the limit's key in the configuration file's [limits] section. */
const char *limit_name(enum limit_id id);

/* What a limit is now: its value, or unlimited (bytes_per_uid only). */
void limit_value(const struct server *s, enum limit_id id, uint64_t *value, bool *unlimited);

/* A status reply's limits: LIMIT_COUNT messages and the pointers the reply lists. */
struct quota_report {
	Rocmmem__Wire__LimitInfo limits[LIMIT_COUNT];
	Rocmmem__Wire__LimitInfo *ptrs[LIMIT_COUNT];
};

/* quota_report fills r with every limit, its value and its hits. */
void quota_report(struct quota_report *r, const struct server *s);

#endif
