/* SPDX-License-Identifier: MIT */
/* client.h: one connection: receive, decode, dispatch, reply, and teardown. */
#ifndef ROCMMEMD_CLIENT_H
#define ROCMMEMD_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "net.h"
#include "rocmmem.pb-c.h"

/*
 * client_create takes ownership of a connected fd and of its peer (peer_identify; peer is left
 * empty), makes its holder and starts reading. Returns 0 or -errno (the fd and peer stay the
 * caller's).
 */
int client_create(struct server *s, int fd, struct peer *peer, struct client **out);

/*
 * client_lane_open gives c a request lane (common/lane.h): *memfd and *doorbell are what the
 * hello reply carries to the client; the caller closes *memfd once it is sent (the doorbell
 * stays the connection's). Returns 0 or a negative errno (no lane).
 */
int client_lane_open(struct client *c, int *memfd, int *doorbell);

/*
 * client_destroy reclaims everything the client holds at once and closes the connection; the
 * memory goes when libuv has closed the handle. Safe to call from the client's own callbacks.
 */
void client_destroy(struct client *c);

/*
 * client_kick shuts the connection down without tearing it down here (safe from inside another
 * client's request): the loop sees the socket close and calls client_destroy.
 */
void client_kick(struct client *c, const char *why);

/*
 * The replies and events below do nothing for a NULL client (a holder whose connection is
 * gone).
 *
 * client_reply sends a reply; fds are duplicated if the packet has to wait, so they stay the
 * caller's. Returns 0 when sent at once, 1 when queued, or a negative errno (client kicked).
 */
int client_reply(struct client *c, Rocmmem__Wire__Reply *reply, const int *fds, unsigned nfds);

/* client_reply_ok answers request id with success and no body. */
void client_reply_ok(struct client *c, uint64_t id);

/* client_reply_error sends an error reply: err is a negative errno, fmt the human message. */
void client_reply_error(struct client *c, uint64_t id, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * client_send_droppable sends a packed ServerMessage only if the socket takes it at once and no
 * reply waits before it: telemetry, which is thinned rather than queued. Returns 0, -EAGAIN
 * (not sent; the feed is told when the socket drains) or another negative errno (kicked).
 */
int client_send_droppable(struct client *c, const uint8_t *buf, size_t len);

/* client_protocol_error answers a violation with an error (best effort) and drops c. */
void client_protocol_error(struct client *c, uint64_t id, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* client_event sends an unsolicited event, numbering it. */
void client_event(struct client *c, Rocmmem__Wire__Event *event);

/* client_label writes "pid 123 'name'" (its holder's label) for messages. Returns buf. */
const char *client_label(const struct client *c, char *buf, size_t len);

#endif
