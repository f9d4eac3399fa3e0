/* SPDX-License-Identifier: MIT */
/* sockpath.h: where the daemon's socket lives (one resolution order for every tool). */
#ifndef ROCMMEM_COMMON_SOCKPATH_H
#define ROCMMEM_COMMON_SOCKPATH_H

#include <stddef.h>

#define SOCKPATH_SYSTEM "/run/rocmmemd/rocmmemd.sock"
#define SOCKPATH_USER_NAME "rocmmemd.sock"
#define SOCKPATH_ENV "ROCMMEM_SOCKET"

enum sockpath_role {
	SOCKPATH_DAEMON, /* the path to create */
	SOCKPATH_CLIENT, /* the path to connect to */
};

/*
 * sockpath_resolve picks the socket path: `explicit_path` (from --socket) if non-NULL and
 * non-empty, else $ROCMMEM_SOCKET, else the default. The daemon's default is the system path
 * when it runs as root and $XDG_RUNTIME_DIR/rocmmemd.sock otherwise. A client's default is the
 * per-user socket when one exists (non-root with $XDG_RUNTIME_DIR set), else the system path.
 * Writes a NUL-terminated path into out. Returns 0, -ENAMETOOLONG when the path does not fit
 * a Unix socket address (or out), or -ENOENT when a non-root daemon has no $XDG_RUNTIME_DIR.
 */
int sockpath_resolve(const char *explicit_path, enum sockpath_role role, char *out, size_t len);

#endif
