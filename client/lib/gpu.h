/* SPDX-License-Identifier: MIT */
/* gpu.h: importing a GPU lease (VMM fds, dma-buf or IPC handle) as one device pointer. */
#ifndef ROCMMEM_LIB_GPU_H
#define ROCMMEM_LIB_GPU_H

#include <stdbool.h>
#include <stdint.h>

#define GPU_MAX_CHUNKS 16u

enum gpu_runtime {
	GPU_HIP,
	GPU_CUDA,
};

/* What a grant says about a GPU lease, as the importer needs it. */
struct gpu_grant {
	enum gpu_runtime runtime;
	uint32_t kind; /* ROCMMEM_HANDLE_* */
	uint64_t size;
	const char *pci_bus_id;
	unsigned nfds;
	const int *fds; /* not consumed, except a dma-buf fd on success (gpu_dmabuf_takes_fd) */
	unsigned nchunks;
	const uint64_t *chunk_sizes;
	const uint8_t *ipc_handle; /* 64 bytes, or NULL */
	uint64_t ipc_offset;
};

struct gpu_mapping;

/*
 * gpu_import loads the runtime (once per process), finds the device by PCI bus id and maps
 * the lease: *ptr is the device address of its first byte. Returns 0 or a negative errno
 * (message recorded). Thread-safe.
 */
int gpu_import(const struct gpu_grant *g, struct gpu_mapping **out, void **ptr);

/* gpu_unmap undoes gpu_import. NULL is ignored. */
void gpu_unmap(struct gpu_mapping *m);

/* gpu_dmabuf_takes_fd says whether a successful import of this kind owns its fd. */
bool gpu_dmabuf_takes_fd(uint32_t kind);

#endif
