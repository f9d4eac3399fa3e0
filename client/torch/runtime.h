/* SPDX-License-Identifier: MIT */
/* runtime.h: what the allocator asks of the GPU runtime: bus ids, the current device, sync. */
#ifndef ROCMMEM_TORCH_RUNTIME_H
#define ROCMMEM_TORCH_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

/*
 * On a GPU backend librocmmem imports each lease with the same runtime PyTorch uses (HIP or
 * the CUDA driver). The allocator needs that runtime for three things of its own: finding
 * which of the daemon's devices is PyTorch's device N (by PCI bus id, since
 * CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES renumber them), keeping the calling thread's
 * current device (or context) as PyTorch set it across an import or release, which switches
 * it, and waiting for the device before a lease goes back to the daemon, so that no kernel
 * still queued can touch memory another process is about to get.
 */

enum torch_backend {
	TORCH_BACKEND_HOST = 0,
	TORCH_BACKEND_HIP = 1,
	TORCH_BACKEND_CUDA = 2,
};

/* The thread's current device (HIP) or context (CUDA), as runtime_save found it. */
struct runtime_saved {
	bool valid;
	int device;
	void *ctx;
};

/* runtime_load loads the backend's runtime once per process (HOST: nothing). Returns 0, or a
 * negative errno with the reason in why. */
int runtime_load(enum torch_backend backend, char *why, size_t why_len);

/* runtime_bus_id stores the PCI bus id of this process's device ordinal in buf. Returns 0 or
 * -ENODEV. */
int runtime_bus_id(enum torch_backend backend, int ordinal, char *buf, size_t len);

/* runtime_same_bus_id compares bus ids, ignoring case and a leading "0000:" domain. */
bool runtime_same_bus_id(const char *a, const char *b);

/* runtime_save records the calling thread's current device or context (when the runtime can
 * tell it); runtime_restore makes it current again. No-ops on the host backend. */
void runtime_save(enum torch_backend backend, struct runtime_saved *saved);
void runtime_restore(enum torch_backend backend, const struct runtime_saved *saved);

/* runtime_sync waits until device ordinal has finished all its work. Returns 0 or -EIO. */
int runtime_sync(enum torch_backend backend, int ordinal);

#endif
