/* SPDX-License-Identifier: MIT */
/*
 * net.h: the types of the network layer, in one place so that its units only call each other
 * one way: the server (the listening socket, its connections, the drain), a connection (its
 * queue of packets and the hooks it calls), the handshake, the status stream and the telemetry
 * feed. The functions are in listener.h, drain.h, server.h, client.h, handshake.h, status.h,
 * feed.h and dispatch.h.
 *
 * Within net/, from the bottom up: client (one connection: send and receive) < server (the
 * connections by id, the deadline timer) < report, encode, validate, handshake, status, feed <
 * listener (accept) < drain (stop) < dispatch (a packet to a request, and the hooks a
 * connection calls: dispatch_install).
 */
#ifndef ROCMMEMD_NET_H
#define ROCMMEMD_NET_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/un.h>
#include <uv.h>

#include "base/idtable.h"
#include "platform/peer.h"
#include "platform/sampler.h"
#include "service/service.h"
#include "wire.h"
#include "wire_arena.h"

struct bus;
struct client;
struct daemon_lane;

/* Bytes a request unpacks into before protobuf-c's allocations go to malloc: every request
 * but a hostile one fits. */
#define NET_RX_ARENA_BYTES 4096u
#define FEED_MIN_INTERVAL_MS 10u
#define FEED_MAX_INTERVAL_MS 60000u
/* Events kept for subscribers that fall behind; older ones are dropped for them (counted). */
#define FEED_RING 1024u
/* The most bytes one packed event takes: a longer detail text is cut to fit. */
#define FEED_EVENT_MAX 1536u
/* How much a sample lists; the rest (smallest first) is counted as omitted. */
#define FEED_SAMPLE_CLIENTS 128u
#define FEED_SAMPLE_MODELS 192u
/* Loop time one round of sends may take before it yields to other clients. */
#define FEED_SLICE_NS (2u * 1000u * 1000u)

/* A connection's subscription, kept in its struct client. */
struct subscription {
	bool samples;
	bool events;
	uint32_t interval_ms;
	uint64_t next_due_ms; /* loop time of the next sample */
	uint32_t samples_dropped;
	uint64_t cursor; /* number of the next event to send */
	uint32_t events_dropped;
	TAILQ_ENTRY(client) sample_link;
	TAILQ_ENTRY(client) event_link;
};

TAILQ_HEAD(feed_clients, client);

struct feed_slot {
	uint32_t len;
	uint8_t data[FEED_EVENT_MAX];
};

/*
 * Telemetry subscriptions (feed.h): a sample of the daemon's state every interval and its
 * events as they happen, sent only as fast as each subscriber reads (thinned, never queued).
 */
struct feed {
	struct server *server;
	uv_loop_t *loop;
	uv_timer_t sample_timer;
	uv_timer_t event_timer;
	bool running;
	bool flush_scheduled;
	struct feed_clients samplers;
	struct feed_clients listeners;
	unsigned nsamplers;
	unsigned nlisteners;
	unsigned nsubscribers;	/* connections subscribed to samples, events or both */
	struct feed_slot *ring; /* FEED_RING slots, allocated with the first listener */
	uint64_t published;	/* events numbered so far: event k is ring[k % FEED_RING] */
	uint8_t *sample;	/* the packed sample of the current round */
	size_t sample_len;
	uint8_t *packet; /* one framed message */
	uint64_t samples_built;
};

enum status_stage {
	STATUS_IDLE = 0,
	STATUS_CLIENTS,
	STATUS_LEASES,
	STATUS_MODELS,
	STATUS_QUEUE,
};

/* Where a streamed status reply stands (status.h): each part resumes after the last id sent. */
struct status_cursor {
	enum status_stage stage;
	uint64_t request_id;
	uint64_t after;	 /* last client id / lease id / waiter seq sent */
	unsigned device; /* queue stage: the device being listed */
};

/*
 * Connections that have not said hello yet, and the deadline by which they must (handshake.h):
 * one timer for them all, since every connection gets the same time in the order it came.
 */
struct handshake {
	struct server *server;
	uv_timer_t timer;
	bool running;
	TAILQ_HEAD(, client) waiting; /* in the order they connected */
};

/* A packet that could not be sent at once, waiting for the socket to drain. */
struct outmsg {
	TAILQ_ENTRY(outmsg) link;
	size_t len;
	size_t footprint; /* what it costs the daemon, counted against the queue cap */
	unsigned nfds;
	int *fds;      /* nfds duplicated fds, right after the struct */
	uint8_t *data; /* len bytes, after the fds */
};

TAILQ_HEAD(outmsg_list, outmsg);

/* One connection (client.h). */
struct client {
	struct server *server;
	int fd;
	uv_poll_t poll;
	int poll_events;
	uint64_t id;	       /* its holder's id */
	struct holder *holder; /* what it holds (state/holder.h); NULL once torn down */
	bool greeted;
	bool closing; /* torn down; the struct lives until the poll handle's close callback */
	bool kicked;  /* shut down; torn down when the loop next sees the socket */
	struct outmsg_list outq;
	size_t out_bytes;
	uint64_t event_seq;
	struct status_cursor status; /* a status reply being streamed, if any */
	struct subscription sub;     /* telemetry it subscribed to, if any */
	bool feed_blocked;  /* telemetry found its socket full: wake the feed when it drains */
	bool handle_closed; /* libuv is done with the poll handle */
	TAILQ_ENTRY(client) link;
	struct peer peer;  /* its pidfd (its identity is the holder's) */
	bool in_handshake; /* has not said hello yet (handshake.h) */
	TAILQ_ENTRY(client) handshake_link;
	struct daemon_lane *lane; /* its request lane (lane_io.h), if it took one at hello */
	uint64_t rx_packets;	  /* packets received on the socket */
	uint64_t tx_packets;	  /* packets sent or queued on the socket */
};

TAILQ_HEAD(client_list, client);

/*
 * What a connection calls above itself (set by dispatch_install): a packet it received (len
 * bytes in the server's rx buffer, nfds fds alongside, the call's from then on), its queue
 * drained (the status stream and the feed go on), and its teardown (forgotten by the
 * handshake and the feed).
 */
struct conn_hooks {
	void (*packet)(struct client *c, size_t len, int *fds, unsigned nfds);
	void (*drained)(struct client *c);
	void (*closing)(struct client *c);
};

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
	struct conn_hooks hooks;
	struct svc svc;	     /* what they hold, and the rules (service/service.h) */
	uv_timer_t deadline; /* armed for the service's earliest deadline */
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
	/* What the packet being dispatched unpacks into, emptied after it (dispatch_packet). */
	struct wire_arena rx_arena;
	alignas(max_align_t) uint8_t rx_arena_buf[NET_RX_ARENA_BYTES];
};

#endif
