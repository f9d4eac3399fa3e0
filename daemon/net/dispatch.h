/* SPDX-License-Identifier: MIT */
/* dispatch.h: one packet off a connection: decoded, checked, and handed to the service as plain
 * requests. */
#ifndef ROCMMEMD_DISPATCH_H
#define ROCMMEMD_DISPATCH_H

#include <stddef.h>

struct client;
struct server;

/*
 * dispatch_packet decodes the len bytes the connection received (in its server's rx buffer,
 * with nfds fds alongside, which are the call's from then on), and serves the request: the
 * hello first, then whatever the service, the status stream or the feed serves.
 */
void dispatch_packet(struct client *c, size_t len, int *fds, unsigned nfds);

/*
 * dispatch_install sets s's connection hooks (net.h): a packet goes to dispatch_packet; a
 * drained queue lets the status stream and the feed go on; a connection torn down is
 * forgotten by the handshake and the feed.
 */
void dispatch_install(struct server *s);

#endif
