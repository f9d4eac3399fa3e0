/* SPDX-License-Identifier: MIT */
/* client.h: one connection to the daemon, and what the client holds through it. */
#ifndef ROCMMEM_LIB_CLIENT_H
#define ROCMMEM_LIB_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lane.h"
#include "rocmmem.h"
#include "rocmmem.pb-c.h"
#include "wire.h"
#include "wire_arena.h"

/* How long a request may go unanswered beyond the wait it asked the daemon for. */
#define CONN_REPLY_GRACE_MS 10000

/* Waits longer than this (146 million years) are no limit: deadlines never overflow. */
#define CONN_FOREVER_MS (INT64_MAX / 2)

/* rocmmem_dispatch (and a waiting call, before it delivers) reads at most this many messages:
 * a daemon that keeps sending (a busy telemetry feed) cannot keep it from returning. The rest
 * stays readable for the next call. */
#define CONN_DISPATCH_MAX_READS 4096

/* How long one step of a reconnection (connect, hello, each re-declaration) may take. */
#define CONN_RECONNECT_STEP_MS 2000
/* The reconnection window by default, and the backoff between attempts. */
#define CONN_RECONNECT_WINDOW_MS 60000
#define CONN_BACKOFF_FIRST_MS 50
#define CONN_BACKOFF_MAX_MS 2000

/* An event the library makes itself: reconnecting, reconnected, and what a restarted daemon
 * did not take back. */
struct lib_event {
	enum rocmmem_event_type type;
	uint64_t lease_id;
	uint64_t model_id;
	uint64_t generation;
	char reason[256];
};

/* One message received from the daemon, with the fds that came with it, or a library event
 * (msg NULL, lib set). */
struct inmsg {
	struct inmsg *next;
	Rocmmem__Wire__ServerMessage *msg;
	struct lib_event *lib;
	uint64_t seq;	/* events: their order across every connection of the client */
	uint64_t conn;	/* events: the connection (rocmmem_client.gen) it came on */
	uint64_t model; /* events: the host's id of the model it names, mapped when it came */
	unsigned nfds;
	int fds[WIRE_MAX_FDS];
};

/*
 * A model this client registered, with what it takes to declare it again to a restarted
 * daemon. The host knows it by id (what the first registration returned); a restarted daemon
 * keeps that id where it can, else the library maps the host's id to the daemon's.
 */
struct lib_model {
	struct lib_model *next;
	uint64_t id;	    /* the host's */
	uint64_t daemon_id; /* the current daemon's; 0: this daemon does not know it */
	rocmmem_device_index device;
	char name[65];
	uint32_t model_class;
	uint64_t size;
	int32_t priority;
	bool pinned;
	uint64_t reservation; /* as far as this process knows */
	uint32_t use_count;
	/*
	 * Residency generations (docs/residency.md), in the daemon's numbering, which a restarted
	 * daemon carries on: the newest the host was granted something in (an event of an older
	 * one is stale), the newest known to be over, and that of the latest evict request
	 * delivered (what rocmmem_model_evict_ack echoes).
	 */
	uint64_t generation;
	uint64_t ended;
	uint64_t evict_generation;
};

/* A request whose caller gave up waiting: its late reply is undone and dropped. */
struct abandoned {
	struct abandoned *next;
	uint64_t id;
};

#define LEASE_MAX_FDS 16u

struct gpu_mapping;

/*
 * A host arena the daemon sent (its memfd comes with the first lease in it): mapped once, every
 * lease in it a range of the mapping. Kept, mapped, until disconnect: a release does not unmap
 * (the daemon punches the range), and after a restart of the daemon the fd re-declares it.
 */
struct lib_arena {
	struct lib_arena *next;
	uint64_t id;
	uint64_t size;
	int fd;
	uint8_t *base; /* NULL when it could not be mapped (its leases are handed back) */
	int map_err;
	bool orphaned; /* a restarted daemon did not take it over: released ranges are punched
			* here (under lock) */
};

struct rocmmem_lease {
	rocmmem_client *client;
	struct rocmmem_lease *prev, *next; /* the client's leases, under client->lock */
	uint64_t id;
	uint64_t size;
	rocmmem_device_index device;
	enum rocmmem_handle_kind kind;
	/* fds kept open: a host lease's memfd; a GPU lease's handles when not imported */
	unsigned nfds;
	int fds[LEASE_MAX_FDS];
	unsigned nchunks;
	uint64_t chunk_sizes[LEASE_MAX_FDS];
	bool has_ipc;
	uint8_t ipc_handle[64];
	uint64_t ipc_offset;
	char pci_bus_id[32];
	void *ptr;		 /* host mapping, or the device address of a GPU lease */
	struct gpu_mapping *gpu; /* how a GPU lease was imported, for undoing it */
	uint64_t waited_ms;
	uint64_t model_id;   /* the host's id of the model it counts towards, or 0 */
	uint64_t generation; /* that model's residency generation it was granted in */
	/* An imported VMM lease whose runtime cannot export its handles again: the fds it came
	 * with, kept to re-declare it after a restart of the daemon. */
	unsigned nkept;
	int kept[LEASE_MAX_FDS];
	bool revoked;		 /* the daemon took it back (under client->lock) */
	struct lib_arena *arena; /* a host lease in an arena: its range starts at offset */
	uint64_t offset;
};

/*
 * A connection's request lane (common/lane.h, lane.c), mapped: one request at a time goes
 * through it; a thread that finds it busy uses the socket.
 */
struct lib_lane {
	struct lib_lane *next; /* lanes of earlier connections, kept mapped until disconnect */
	struct lane_page *page;
	int efd;	       /* the doorbell */
	uint64_t gen;	       /* the connection it belongs to */
	uint32_t seq;	       /* req.seq of the latest request written */
	bool busy;	       /* a request is in it (under client->lock) */
	bool abandoned;	       /* ... whose thread gave up on it: its answer is undone */
	uint64_t abandoned_id; /* that request's id */
};

/*
 * What the connection asks of the session above it (session/), which installs these at
 * connect: the connection knows when it ends, the session what that means and when to try
 * again. Each is called with the client's lock held.
 */
struct conn_hooks {
	/* lost: connection gen ended with err (why says how); a later connection may be up. */
	void (*lost)(rocmmem_client *c, uint64_t gen, int err, const char *why);
	/* due: whether a reconnection attempt should be made now. */
	bool (*due)(const rocmmem_client *c);
	/* attempt makes one reconnection attempt (the lock is released meanwhile). */
	void (*attempt)(rocmmem_client *c);
};

struct rocmmem_client {
	const struct conn_hooks *hooks;
	int fd;	  /* the SOCK_SEQPACKET connection (a new one takes its number: dup2) */
	int efd;  /* eventfd: counts events queued for rocmmem_dispatch */
	int tfd;  /* timerfd: readable when a reconnection attempt is due */
	int epfd; /* what rocmmem_event_fd returns: epoll over fd (while up), efd and tfd */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool reading; /* a thread is receiving on fd for everyone */
	/* The receive timeout (SO_RCVTIMEO) set on fd for connection rcv_timeout_gen; 0: none.
	 * Only the reading thread touches them. */
	int64_t rcv_timeout_ms;
	uint64_t rcv_timeout_gen;
	bool broken; /* the connection has ended for good */
	int broken_err;
	char broken_msg[256];
	/* Reconnection (session/reconnect.c), under lock. */
	char path[108];	    /* the socket, as resolved at connect */
	char *name;	    /* as given to connect, or NULL */
	uint32_t flags;	    /* ROCMMEM_CONNECT_* */
	int64_t window_ms;  /* how long to try, < 0: no limit */
	bool reconnecting;  /* the daemon went away; the library is bringing the connection back */
	bool attempting;    /* a thread is trying now */
	bool shutdown_seen; /* the daemon said it stops: the end is final */
	bool refused;	    /* the daemon closed the connection saying why */
	uint64_t gen;	    /* the connection's number: bumped by each reconnection */
	unsigned sending;   /* threads sending on fd right now (a new connection waits for them) */
	uint64_t lost_ms, next_attempt_ms, backoff_ms;
	unsigned attempts;
	unsigned rand_state;
	char lost_msg[256];
	struct lib_model *models;
	uint64_t seq_base, last_seq; /* events of each connection follow the previous one's */
	unsigned sub_what;	     /* the subscription to renew on a new connection */
	uint32_t sub_interval_ms;
	char **retired; /* strings a reconnection replaced, freed at disconnect */
	unsigned nretired;
	bool disconnect_delivered;
	bool delivering; /* a thread is running the event callback */
	unsigned busy;	 /* threads inside a call that may release the lock (rocmmem_disconnect
			  * refuses meanwhile) */
	uint64_t next_id;
	struct inmsg *replies; /* received replies not yet claimed by their requester */
	/*
	 * Undelivered events, in three queues so that telemetry never crowds out the rest; each
	 * is in the daemon's order and delivery merges them by sequence number.
	 */
	struct inmsg *events, **events_tail; /* evict requests, revocations, shutdown */
	unsigned event_count;
	struct inmsg *telemetry, **telemetry_tail; /* at most CONN_MAX_TELEMETRY */
	unsigned telemetry_count;
	uint32_t telemetry_lost; /* dropped from the queue since the last one delivered */
	struct inmsg *sample;	 /* the newest sample: a newer one replaces it */
	uint32_t samples_lost;	 /* replaced (with what the daemon had thinned before them) */
	unsigned feed_epoch;	 /* bumped by unsubscribing: what was taken before is stale */
	struct abandoned *abandoned;
	struct rocmmem_lease *leases;
	struct lib_arena *arenas;
	rocmmem_event_fn event_fn;
	void *event_userdata;
	rocmmem_progress_fn progress_fn; /* progress of waiting requests (asked when set) */
	void *progress_userdata;
	char *daemon_version;
	char *backend;
	rocmmem_device_index device_count;
	pid_t daemon_pid;	    /* from SO_PEERCRED; 0 if unknown */
	struct lib_lane *lane;	    /* the current connection's request lane, or NULL */
	struct lib_lane *old_lanes; /* earlier connections' */
	/* Packets sent and received on the current connection's socket, for the lane's order. */
	_Atomic uint64_t sock_tx;
	uint64_t sock_rx;	    /* under lock */
	uint8_t rx[WIRE_MAX_FRAME]; /* used only by the thread that is reading */
};

/* Internal: a request whose connection ended before its reply; it may be sent again once the
 * library has reconnected. Never returned to the host. */
#define CONN_LOST (-4096 - 1)

/* How a request behaves while the daemon is away. */
struct call_opts {
	int64_t reply_ms;	/* wait for the reply once sent; < 0: no limit */
	int64_t reconnect_ms;	/* wait for a reconnection before (re)sending; < 0: no limit */
	int64_t *timeout_field; /* the request's own wait, shortened when it is sent again */
	bool once;		/* never sent again: fails when its connection ends */
};

/* conn_reply returns the Reply inside a received message (NULL for events). */
static inline Rocmmem__Wire__Reply *conn_reply(const struct inmsg *m)
{
	return m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ? m->msg->reply
									      : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* inmsg.c: received messages, request ids, and the clock requests wait by */

/* inmsg_new returns an empty message to receive into (no fds, no message), or NULL. */
struct inmsg *inmsg_new(void);

/* inmsg_free frees a received message and closes any fds it still owns. NULL is ignored. */
void inmsg_free(struct inmsg *m);

/* conn_unpack unpacks a received packet into a block of its own (wire_unpack; free it with
 * wire_unpacked_free, as inmsg_free does): the one decoding of the daemon's messages. */
static inline Rocmmem__Wire__ServerMessage *conn_unpack(size_t len, const uint8_t *data)
{
	return (Rocmmem__Wire__ServerMessage *)wire_unpack(
	    &rocmmem__wire__server_message__descriptor, len, data);
}

/* conn_now_ms: CLOCK_MONOTONIC in ms. */
uint64_t conn_now_ms(void);

/* conn_remaining_ms returns the time left before deadline (-1: none), at least 0. */
int64_t conn_remaining_ms(int64_t deadline);

/* conn_deadline_after returns the deadline timeout_ms from now (-1 for timeout_ms < 0). */
int64_t conn_deadline_after(int64_t timeout_ms);

/* conn_timed_wait waits on the client's condition until deadline (< 0: none); lock held. */
void conn_timed_wait(rocmmem_client *c, int64_t deadline);

/* conn_next_id returns a fresh request id (lock taken here). */
uint64_t conn_next_id(rocmmem_client *c);

/* ------------------------------------------------------------------------------------------ */
/* held.c: what the client holds, as the library knows it (under lock unless said) */

/* held_lease_link and held_lease_unlink add a lease to the client's list and take it out
 * (lock taken here). */
void held_lease_link(rocmmem_client *c, struct rocmmem_lease *l);
void held_lease_unlink(rocmmem_client *c, struct rocmmem_lease *l);

/*
 * held_map_aligned maps size bytes of fd read-write and shared at a 2 MiB-aligned address (for
 * transparent huge pages). Returns the address or MAP_FAILED (errno set).
 */
void *held_map_aligned(int fd, size_t size);

/* held_lease_unmap unmaps a lease and closes its fds (it stays allocated). */
void held_lease_unmap(struct rocmmem_lease *l);

/* held_lease_forget_all unmaps and frees every lease of a client being disconnected, and its
 * arenas. */
void held_lease_forget_all(rocmmem_client *c);

/*
 * held_arena_note takes the arena's fd out of a lease grant that carries one (HANDLE_ARENA) and
 * maps the arena, as the reply is received (the next grant in it may reach another thread
 * first). Lock held.
 */
void held_arena_note(rocmmem_client *c, struct inmsg *m);

/* held_arena finds the arena of this id, or NULL. Lock held. */
struct lib_arena *held_arena(rocmmem_client *c, uint64_t id);

/* held_arena_wanted says whether hello offers host arenas (ROCMMEM_HOST_ARENA is not "0"). */
bool held_arena_wanted(void);

/* held_model_track records a model the daemon registered as daemon_id, and stores the host's
 * id of it in *host_id (lock taken here). Returns 0 or -ENOMEM. */
int held_model_track(rocmmem_client *c, uint64_t daemon_id, const struct rocmmem_model_desc *desc,
		     uint64_t *host_id);
/* held_model_untrack forgets a model (lock taken here). */
void held_model_untrack(rocmmem_client *c, uint64_t host_id);
/* held_model and held_model_by_daemon_id find a model by the host's or the daemon's id. */
struct lib_model *held_model(rocmmem_client *c, uint64_t host_id);
struct lib_model *held_model_by_daemon_id(rocmmem_client *c, uint64_t daemon_id);
/* held_model_daemon_id maps a host's model id to the daemon's (ids of other clients' models
 * pass; lock taken here). */
uint64_t held_model_daemon_id(rocmmem_client *c, uint64_t host_id);
/* held_model_granted records that the host was granted something in a model's generation
 * (lock taken here). */
void held_model_granted(rocmmem_client *c, uint64_t host_id, uint64_t generation);

/* ------------------------------------------------------------------------------------------ */
/* deliver.c: events, queued and delivered to the event callback (lock held unless said) */

/* conn_queue_event files a received event (or one of the library's own) in its queue. */
void conn_queue_event(rocmmem_client *c, struct inmsg *m);

/* conn_queue_lib queues a library event. Returns 0 or -ENOMEM. */
int conn_queue_lib(rocmmem_client *c, enum rocmmem_event_type type, uint64_t lease_id,
		   uint64_t model_id, const char *reason);

/* conn_note_event does what a received event changes at once (revoked leases and models,
 * shutdown), numbers it and notes its connection and model. */
void conn_note_event(rocmmem_client *c, struct inmsg *m);

/* conn_drop_telemetry discards undelivered samples and telemetry events. */
void conn_drop_telemetry(rocmmem_client *c);

/* conn_progress_wanted says whether requests should ask for progress (lock taken here). */
bool conn_progress_wanted(rocmmem_client *c);

/* conn_listening says whether delivering events now has someone to tell; lock held. */
static inline bool conn_listening(const rocmmem_client *c)
{
	return c->event_fn || c->progress_fn;
}

/* progress_view fills the public view of a WaitProgress that came with m (progress.c). */
void progress_view(const struct inmsg *m, struct rocmmem_wait_progress *out);

/* conn_has_events says whether events wait to be delivered. */
bool conn_has_events(const rocmmem_client *c);

/* conn_wake makes the event fd readable. */
void conn_wake(rocmmem_client *c);

/*
 * conn_deliver runs the event callback for every queued event, in order, one thread at a
 * time; lock held on entry and exit, released around the callbacks (which may call the
 * library: an evict callback acks from inside). Returns how many were delivered.
 */
int conn_deliver(rocmmem_client *c);

/* ------------------------------------------------------------------------------------------ */
/* io.c: sending requests, and the one reader that files what arrives */

/*
 * conn_send_gen sends on the current connection and stores its number in *gen. Returns 0,
 * CONN_LOST (reconnecting: nothing sent) or the connection's final error.
 */
int conn_send_gen(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, uint64_t *gen);

/* conn_abandon notes a request nobody waits for any more: its late reply is undone (a lease
 * granted is released) and dropped. Lock held. */
void conn_abandon(rocmmem_client *c, uint64_t id);

/* conn_file files a received message as the reader does (lock held). */
void conn_file(rocmmem_client *c, struct inmsg *m);

/* conn_unabandon forgets an abandoned request that will never be answered. Lock held. */
void conn_unabandon(rocmmem_client *c, uint64_t id);

/* conn_pump reads until a message arrives, the time passes or the connection ends; lock held
 * on entry and exit, released while reading. Returns false on timeout or when a signal cut
 * the wait short (the caller waits again for what is left). */
bool conn_pump(rocmmem_client *c, int64_t timeout_ms);

/* ------------------------------------------------------------------------------------------ */
/* lane.c: the request lane */

/* What conn_lane_call returns besides 0 (the reply in *out) and errors. */
#define LANE_CALL_SKIP 1   /* nothing sent: send it on the socket */
#define LANE_CALL_SOCKET 2 /* sent: its reply comes on the socket of connection *gen */

/* conn_lane_wanted says whether hello offers a lane (ROCMMEM_LANE is not "0"). */
bool conn_lane_wanted(void);

/* conn_lane_attach takes the lane a hello reply m brought (features: what it said), as the
 * current connection's. Lock held or the client not shared yet. */
void conn_lane_attach(rocmmem_client *c, uint32_t features, struct inmsg *m);

/*
 * conn_lane_reclaim takes the answer of a request given up on in the current connection's lane
 * once it has come, undoing a lease granted late. Called wherever the library touches the
 * connection (each turn of a wait for a reply on the socket, rocmmem_dispatch, a lane call), so
 * that the daemon does not charge a late grant to a client that makes no further lane call.
 * Lock held.
 */
void conn_lane_reclaim(rocmmem_client *c);

/* conn_lane_free_all unmaps every lane (disconnect). */
void conn_lane_free_all(rocmmem_client *c);

/*
 * conn_lane_call sends msg (its id set) through the lane when it is free and msg fits, and
 * waits up to reply_ms for the answer. Returns 0 with the reply in *out, LANE_CALL_SKIP,
 * LANE_CALL_SOCKET (the connection in *gen), CONN_LOST, or a negative errno (message recorded;
 * -ETIMEDOUT abandons the request).
 */
int conn_lane_call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t reply_ms,
		   uint64_t *gen, struct inmsg **out);

/* ------------------------------------------------------------------------------------------ */
/* call.c: a request and its reply, across reconnections */

/* conn_wait_gen waits for the reply to request id sent on connection gen: CONN_LOST if that
 * connection ended. Returns 0 with the reply in *out, or a negative errno. */
int conn_wait_gen(rocmmem_client *c, uint64_t id, uint64_t gen, int64_t timeout_ms,
		  struct inmsg **out);

/*
 * conn_await waits until the connection is up (0), ends for good (its error), or deadline
 * (monotonic ms, < 0: none) passes while reconnecting (-ENOTCONN, message recorded), trying
 * to reconnect when an attempt is due. Lock held.
 */
int conn_await(rocmmem_client *c, int64_t deadline);

/* conn_default_opts: a request without a wait of its own (reply and reconnection: the grace). */
struct call_opts conn_default_opts(int64_t reply_ms);

/*
 * conn_call_opts sends msg with a fresh id and waits for its first reply, sending it again on
 * a new connection if the daemon went away meanwhile (unless once). Returns 0 with the reply
 * in *out, or a negative errno (message recorded; *out NULL): the daemon's error, -ETIMEDOUT,
 * -ENOTCONN (still reconnecting when its time was up), -ECONNRESET (disconnected for good).
 */
int conn_call_opts(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, const struct call_opts *o,
		   struct inmsg **out);

/* conn_call is conn_call_opts with the default options and a reply wait of timeout_ms. */
int conn_call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t timeout_ms,
	      struct inmsg **out);

/* ------------------------------------------------------------------------------------------ */
/* open.c: a new connection, up to its hello */

/* conn_open_socket connects to path, retrying while it is absent or refusing until deadline
 * (monotonic ms, < 0: none). Returns 0 with the fd in *out, or a negative errno. */
int conn_open_socket(const char *path, int64_t deadline, int *out);

/* conn_setup_event_fd makes the event fd (epoll over the socket, the eventfd and the timerfd).
 * Returns 0 or a negative errno. */
int conn_setup_event_fd(rocmmem_client *c);

/* conn_hello says hello on c->fd and keeps what the daemon says of itself. Returns 0 or a
 * negative errno (message recorded: the daemon's refusal when it refused). */
int conn_hello(rocmmem_client *c, const char *name, int64_t deadline);

#endif
