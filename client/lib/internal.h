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

/* One message received from the daemon, with the fds that came with it. */
struct inmsg {
	struct inmsg *next;
	Rocmmem__Wire__ServerMessage *msg;
	unsigned nfds;
	int fds[WIRE_MAX_FDS];
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
	bool revoked; /* the daemon took it back (under client->lock) */
};

struct rocmmem_client {
	int fd;	  /* the SOCK_SEQPACKET connection */
	int efd;  /* eventfd: counts events queued for rocmmem_dispatch */
	int epfd; /* what rocmmem_event_fd returns: epoll over fd and efd */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool reading; /* a thread is receiving on fd for everyone */
	bool broken;  /* the connection has ended */
	int broken_err;
	char broken_msg[256];
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

/* error_set records this thread's message for rocmmem_last_error and returns err. */
int error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* error_from_reply records the daemon's message of an error reply and returns its errno. */
int error_from_reply(const Rocmmem__Wire__Reply *reply);

/* inmsg_free frees a received message and closes any fds it still owns. */
void inmsg_free(struct inmsg *m);

/* conn_next_id returns a fresh request id. */
uint64_t conn_next_id(rocmmem_client *c);

/*
 * conn_send sends one request (msg->id already set). Returns 0 or a negative errno (message
 * recorded).
 */
int conn_send(rocmmem_client *c, Rocmmem__Wire__ClientMessage *msg);

/*
 * conn_wait waits for the next reply to request id, up to timeout_ms (< 0: no limit). On
 * success stores it in *out (the caller frees it with inmsg_free). Returns 0, -ETIMEDOUT (the
 * request is then abandoned: its late reply is undone), or the connection's error.
 */
int conn_wait(rocmmem_client *c, uint64_t id, int64_t timeout_ms, struct inmsg **out);

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
