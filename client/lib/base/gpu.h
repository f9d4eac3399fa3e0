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

/*
 * gpu_export exports the chunks of an imported VMM lease as fds again (the runtime's
 * ExportToShareableHandle on the imported handles), to re-declare it to a restarted daemon:
 * up to max fds into fds, their count in *n, each the caller's to close. Returns 0, or a
 * negative errno when the runtime cannot (message recorded). Thread-safe.
 */
int gpu_export(struct gpu_mapping *m, int *fds, unsigned max, unsigned *n);

/*
 * gpu_can_export says whether this process's runtime exports imported VMM handles again, as
 * found on m once per runtime (an export of its first chunk, closed at once). A lease whose
 * runtime cannot keeps the fds it came with instead.
 */
bool gpu_can_export(struct gpu_mapping *m);

#endif
