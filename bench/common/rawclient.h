/* SPDX-License-Identifier: MIT */
/* rawclient.h: rocmmemd's protocol spoken directly, without librocmmem (for load generators). */
#ifndef ROCMMEM_BENCH_RAWCLIENT_H
#define ROCMMEM_BENCH_RAWCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem.pb-c.h"
#include "wire.h"

/* The packets of one reply, kept when a connection captures (for the echo server's script). */
#define RAW_CAPTURE_PARTS 8u

struct raw_capture {
	unsigned parts;
	size_t len[RAW_CAPTURE_PARTS];
	unsigned nfds[RAW_CAPTURE_PARTS];
	uint8_t *data[RAW_CAPTURE_PARTS]; /* malloc'd, WIRE_MAX_FRAME each */
};

struct raw_conn {
	int fd;
	uint64_t next_id;
	uint32_t features; /* the Hello.features bits the daemon accepted (HelloReply.features) */
	/* Talking to the echo server: each request carries its kind in one extra byte. */
	bool tagged;
	struct raw_capture *capture; /* NULL, or where each reply's packets are copied */
	uint8_t tx[WIRE_MAX_FRAME];
	uint8_t rx[WIRE_MAX_FRAME];
};

/* What a reply said, as far as the load generators care. */
struct raw_reply {
	uint64_t id;
	int error;	   /* 0 or the daemon's negative errno */
	bool more;	   /* further packets of the same reply follow */
	uint64_t lease_id; /* a lease grant's */
	uint64_t model_id; /* a model registration's */
	uint32_t features; /* a hello's reply: the feature bits accepted */
	unsigned nfds;	   /* descriptors that came with it (closed already) */
	size_t len;	   /* the packet's size */
};

/* What the first part of a status reply says of the daemon itself (0: not said). */
struct raw_daemon_info {
	uint64_t heap_bytes; /* DaemonInfo.heap_bytes */
	uint64_t fds_open, fds_limit;
	uint64_t leases; /* LeaseInfo entries over all the parts */
	unsigned parts;
};

/*
 * raw_connect connects to the SOCK_SEQPACKET socket at path and says hello (name may be NULL),
 * the hello's reply captured into capture (may be NULL), which the connection keeps using.
 * Returns 0 or a negative errno.
 */
int raw_connect(struct raw_conn *c, const char *path, const char *name, bool tagged,
		struct raw_capture *capture);
void raw_close(struct raw_conn *c);

/*
 * raw_connect_features connects as raw_connect does, asking for the FEATURE_* bits in
 * features (Hello.features; 0 asks for none: the daemon's compatibility path); c->features
 * gets what the daemon accepted. Returns 0 or a negative errno.
 */
int raw_connect_features(struct raw_conn *c, const char *path, const char *name, uint32_t features);

/* raw_dial connects a SOCK_SEQPACKET socket to path, saying nothing. Returns it or -errno. */
int raw_dial(const char *path);

/* raw_send sends msg with a fresh id (stored in msg->id). Returns 0 or a negative errno. */
int raw_send(struct raw_conn *c, Rocmmem__Wire__ClientMessage *msg);

/*
 * raw_recv receives the next reply packet (events are skipped), closing any fds that came
 * with it. Returns 0 or a negative errno (-ECONNRESET when the peer closed).
 */
int raw_recv(struct raw_conn *c, struct raw_reply *out);

/*
 * raw_call sends msg and reads until the last packet of its reply. Returns the reply's error
 * (0 or a negative errno) or a transport error; *out (may be NULL) gets the last packet's.
 */
int raw_call(struct raw_conn *c, Rocmmem__Wire__ClientMessage *msg, struct raw_reply *out);

/* The requests the benchmarks make. Each returns 0 or a negative errno. */
int raw_lease_acquire(struct raw_conn *c, uint64_t size, int64_t timeout_ms, uint64_t *lease_id);
int raw_lease_release(struct raw_conn *c, uint64_t lease_id);
int raw_status(struct raw_conn *c);
/* raw_status_info asks for status and reads every part of it into *out. */
int raw_status_info(struct raw_conn *c, struct raw_daemon_info *out);
int raw_model_register(struct raw_conn *c, const char *name, int model_class, uint64_t size,
		       int32_t priority, uint64_t *model_id);
int raw_model_acquire(struct raw_conn *c, uint64_t model_id, int64_t timeout_ms);
int raw_model_release(struct raw_conn *c, uint64_t model_id);

/* raw_capture_free frees what a capture holds and empties it. */
void raw_capture_free(struct raw_capture *cap);

#endif
