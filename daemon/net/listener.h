/* SPDX-License-Identifier: MIT */
/* listener.h: the listening socket, accepting connections, and refusing them when full. */
#ifndef ROCMMEMD_LISTENER_H
#define ROCMMEMD_LISTENER_H

#include "net.h"

/*
 * server_listen serves the listening socket systemd passed when the daemon is socket-activated
 * (then path is only what was configured: the passed socket's own path goes into s->path, and
 * nothing is created, locked or removed); refuses to start when what systemd passed is not one
 * listening AF_UNIX SOCK_SEQPACKET socket. Otherwise it binds and listens on path: creates its
 * parent directory if needed, refuses a directory other users could replace the socket in
 * (safepath_check_dir), refuses a socket another daemon is serving, removes a stale one; the
 * socket is born with its configured mode and handed to its owner and group before it listens.
 * The service must be set up and the hooks installed (dispatch_install) already. Returns 0 or a
 * negative errno (logged).
 */
int server_listen(struct server *s, uv_loop_t *loop, const char *path);

/*
 * server_stop_listening turns newcomers away: the socket and its lock go (unless systemd's),
 * the handshake timer stops. Later calls do nothing.
 */
void server_stop_listening(struct server *s);

#endif
