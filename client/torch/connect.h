/* SPDX-License-Identifier: MIT */
/* connect.h: the allocator's connection to the daemon, and leases taken through it. */
#ifndef ROCMMEM_TORCH_CONNECT_H
#define ROCMMEM_TORCH_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem.h"
#include "runtime.h"

/* Device ordinals PyTorch may name: 0 to this, excluded. */
#define CONNECT_MAX_ORDINALS 64

/* connect_enter read-locks a live connection, connecting first if there is none. Returns 0
 * (then connect_leave unlocks it), or the connection's error (recorded as the last error). */
int connect_enter(void);

/* connect_leave unlocks what connect_enter or connect_exclusive locked. */
void connect_leave(void);

/* connect_exclusive write-locks the connection: no lease is acquired meanwhile. */
void connect_exclusive(void);

/* connect_backend: the backend of the connection's daemon. Read or write lock held. */
enum torch_backend connect_backend(void);

/* connect_map_device finds the daemon's index of PyTorch's device ordinal. Read lock held.
 * Returns 0 or -ENODEV (counted and explained as a failed allocation). */
int connect_map_device(int ordinal, unsigned *index);

/*
 * connect_acquire asks the daemon for a lease of bytes on device index, waiting up to timeout
 * ms, tagged with model (0: none), keeping the calling thread's current device. Read lock
 * held. Returns 0 with the lease in *out, or a negative errno with why filled.
 */
int connect_acquire(unsigned index, uint64_t bytes, int64_t timeout, uint64_t model,
		    rocmmem_lease **out, char *why, size_t why_len);

/* connect_forget ends the allocator's use of its connection and returns it, with whether the
 * allocator made it (then it is the caller's to disconnect). Write lock held. */
rocmmem_client *connect_forget(bool *owned);

#endif
