/* SPDX-License-Identifier: MIT */
/* internal.h: librocmmem's private types shared between its files. */
#ifndef ROCMMEM_LIB_INTERNAL_H
#define ROCMMEM_LIB_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rocmmem.h"
#include "rocmmem.pb-c.h"
#include "wire.h"

/* How long a request may go unanswered beyond the wait it asked the daemon for. */
#define CONN_REPLY_GRACE_MS 10000

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
	unsigned device;
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

struct rocmmem_lease {
	rocmmem_client *client;
	struct rocmmem_lease *prev, *next; /* the client's leases, under client->lock */
	uint64_t id;
	uint64_t size;
	unsigned device;
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
	bool revoked; /* the daemon took it back (under client->lock) */
};

struct rocmmem_client {
	int fd;	  /* the SOCK_SEQPACKET connection (a new one takes its number: dup2) */
	int efd;  /* eventfd: counts events queued for rocmmem_dispatch */
	int tfd;  /* timerfd: readable when a reconnection attempt is due */
	int epfd; /* what rocmmem_event_fd returns: epoll over fd (while up), efd and tfd */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool reading; /* a thread is receiving on fd for everyone */
	bool broken;  /* the connection has ended for good */
	int broken_err;
	char broken_msg[256];
	/* Reconnection (reconnect.c), under lock. */
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
	rocmmem_event_fn event_fn;
	void *event_userdata;
	char *daemon_version;
	char *backend;
	unsigned device_count;
	pid_t daemon_pid;	    /* from SO_PEERCRED; 0 if unknown */
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

/*
 * conn_send_gen sends on the current connection and stores its number in *gen. Returns 0,
 * CONN_LOST (reconnecting: nothing sent) or the connection's final error.
 */
int conn_send_gen(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, uint64_t *gen);

/* conn_wait_gen is conn_wait for a request sent on connection gen: CONN_LOST if it ended. */
int conn_wait_gen(rocmmem_client *c, uint64_t id, uint64_t gen, int64_t timeout_ms,
		  struct inmsg **out);

/*
 * conn_await waits until the connection is up (0), ends for good (its error), or deadline
 * (monotonic ms, < 0: none) passes while reconnecting (-ENOTCONN, message recorded), trying
 * to reconnect when an attempt is due. Lock held.
 */
int conn_await(rocmmem_client *c, int64_t deadline);

/* conn_now_ms: CLOCK_MONOTONIC in ms. */
uint64_t conn_now_ms(void);

/* conn_timed_wait waits on the client's condition until deadline (< 0: none); lock held. */
void conn_timed_wait(rocmmem_client *c, int64_t deadline);

/* conn_queue_lib queues a library event (lock held). Returns 0 or -ENOMEM. */
int conn_queue_lib(rocmmem_client *c, enum rocmmem_event_type type, uint64_t lease_id,
		   uint64_t model_id, const char *reason);

/* conn_note_event does what a received event changes at once (revoked leases and models,
 * shutdown), numbers it and notes its connection and model; lock held. */
void conn_note_event(rocmmem_client *c, struct inmsg *m);

/* conn_queue_event files a received event in its queue (lock held). */
void conn_queue_event(rocmmem_client *c, struct inmsg *m);

/*
 * reconnect_lost decides what the end of connection gen means (lock held): nothing if a later
 * connection is up already; else reconnecting, when it is allowed and this client holds
 * leases or models; else the end for good (broken).
 */
void reconnect_lost(rocmmem_client *c, uint64_t gen, int err, const char *why);

/* reconnect_try makes one attempt (lock held, released meanwhile) and installs the new
 * connection, or schedules the next attempt, or gives up at the window's end. */
void reconnect_try(rocmmem_client *c);

/* reconnect_due says whether an attempt should be made now (lock held). */
bool reconnect_due(const rocmmem_client *c);

/* reconnect_init applies the options and $ROCMMEM_RECONNECT; reconnect_finish frees. */
void reconnect_init(rocmmem_client *c, uint32_t flags, int window_ms);
void reconnect_finish(rocmmem_client *c);

/* The models this client registered (reconnect.c), under lock. */
int model_track(rocmmem_client *c, uint64_t daemon_id, const struct rocmmem_model_desc *desc,
		uint64_t *host_id);
void model_untrack(rocmmem_client *c, uint64_t host_id);
struct lib_model *model_by_id(rocmmem_client *c, uint64_t host_id);
struct lib_model *model_by_daemon_id(rocmmem_client *c, uint64_t daemon_id);
/* model_daemon_id maps a host's model id to the daemon's (ids of other clients' models pass). */
uint64_t model_daemon_id(rocmmem_client *c, uint64_t host_id);
/* model_host_id maps a daemon's model id back to the host's (lock taken here). */
uint64_t model_host_id(rocmmem_client *c, uint64_t daemon_id);
/* model_granted records that the host was granted something in a model's generation (lock
 * taken here). */
void model_granted(rocmmem_client *c, uint64_t host_id, uint64_t generation);

/*
 * lease_revoke_all marks every lease the daemon took back at the end of the connection
 * revoked, and queues a ROCMMEM_EVENT_LEASE_REVOKED for each; lock held.
 */
void lease_revoke_all(rocmmem_client *c, const char *why);

/* error_set records this thread's message for rocmmem_last_error and returns err. */
int error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* error_from_reply records the daemon's message of an error reply and returns its errno. */
int error_from_reply(const Rocmmem__Wire__Reply *reply);

/* inmsg_free frees a received message and closes any fds it still owns. */
void inmsg_free(struct inmsg *m);

/* conn_next_id returns a fresh request id. */
uint64_t conn_next_id(rocmmem_client *c);

/*
 * conn_call sends msg with a fresh id and waits for its first reply. Returns 0 with the reply
 * in *out, an error from conn_send/conn_wait, or the daemon's error (message recorded; *out
 * NULL).
 */
int conn_call(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg, int64_t timeout_ms,
	      struct inmsg **out);

/* conn_reply returns the Reply inside a received message (NULL for events). */
static inline Rocmmem__Wire__Reply *conn_reply(const struct inmsg *m)
{
	return m->msg->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ? m->msg->reply
									      : NULL;
}

/* lease_forget_all unmaps and frees every lease of a client being disconnected. */
void lease_forget_all(rocmmem_client *c);

/* conn_drop_telemetry discards undelivered samples and telemetry events; lock held. */
void conn_drop_telemetry(rocmmem_client *c);

/* What a delivered sample or telemetry event points to, alive during its callback. */
struct feed_view {
	rocmmem_status *status;
	struct rocmmem_sample_info info;
	struct rocmmem_telemetry_event telemetry;
};

/*
 * feed_to_event fills ev (and v, which it points into) from a received sample or telemetry
 * event m, adding lost to its dropped count. m must outlive the callback. Returns 0, or
 * -ENOMEM when a sample could not be converted (it is then not delivered).
 */
int feed_to_event(const rocmmem_client *c, const struct inmsg *m, uint32_t lost,
		  struct feed_view *v, struct rocmmem_event *ev);

/* feed_view_finish frees what feed_to_event allocated. */
void feed_view_finish(struct feed_view *v);

/*
 * status_from_sample presents a sample through the rocmmem_status accessors: devices,
 * clients, models and counters (no leases, queue or denials), with the daemon's version and
 * backend from the hello and its pid from the socket. The status points into sample, which
 * must outlive it. Returns 0 or -ENOMEM.
 */
int status_from_sample(const rocmmem_client *c, const Rocmmem__Wire__TelemetrySample *sample,
		       rocmmem_status **out);

#endif
