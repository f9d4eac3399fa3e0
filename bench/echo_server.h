/* SPDX-License-Identifier: MIT */
/* echo_server.h: the throughput benchmark's baseline: a minimal epoll server on the same framing.
 */
#ifndef ROCMMEM_BENCH_ECHO_SERVER_H
#define ROCMMEM_BENCH_ECHO_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rawclient.h"

/*
 * The echo server answers each request with a script: the packets rocmmemd sent for a request
 * of the same kind (recorded from the daemon in the same run, so replies are the same size and
 * a grant brings one memfd, as the daemon's does). A request is the client's packed
 * ClientMessage followed by one byte naming its kind (raw_conn.tagged); the server does not
 * unpack it. A packet starting with ECHO_CONTROL sets the script of one kind.
 */
#define ECHO_CONTROL 0xffu
#define ECHO_KINDS 32u

/*
 * echo_server_start forks the server, listening at path, and returns its pid (or a negative
 * errno). The child never returns; it exits when its listening socket's path disappears or
 * it is killed.
 */
pid_t echo_server_start(const char *path);

/*
 * echo_server_script tells the server (through conn, a tagged connection to it) to answer
 * requests of kind with the packets in cap. Returns 0 or a negative errno.
 */
int echo_server_script(struct raw_conn *conn, unsigned kind, const struct raw_capture *cap);

#endif
