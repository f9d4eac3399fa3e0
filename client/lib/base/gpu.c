/* SPDX-License-Identifier: MIT */
/* gpu.c: importing GPU leases into this process with the runtime the daemon uses. */
#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"
#include "hip_api.h"
#include "error.h"
#include "rocmmem.h"

/* The runtimes, loaded once per process on the first GPU lease and kept until exit. */
static pthread_mutex_t runtime_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hipapi hip;
static struct cuapi cuda;
static int hip_state, cuda_state;   /* 0 not tried, 1 loaded, < 0 the error */
static int hip_export, cuda_export; /* imported handles export again: 0 not tried, 1, -1 */
static char hip_why[256], cuda_why[256];

struct gpu_mapping {
	enum gpu_runtime runtime;
	uint32_t kind;
	int ordinal;
	void *base; /* what the runtime returned: VA reservation, IPC base, mapped buffer */
	uint64_t size;
	unsigned n;
	uint64_t sizes[GPU_MAX_CHUNKS];
	hipapi_mem_handle_t hip_handles[GPU_MAX_CHUNKS];
	cuapi_mem_handle_t cu_handles[GPU_MAX_CHUNKS];
	hipapi_external_memory_t external;
	cuapi_ctx_t ctx;
};

static int load_runtime(enum gpu_runtime rt)
{
	int rc;

	pthread_mutex_lock(&runtime_lock);
	if (rt == GPU_HIP) {
		if (hip_state == 0)
			hip_state = hipapi_load(&hip, hip_why, sizeof(hip_why)) ? -ENODEV : 1;
		rc = hip_state;
	} else {
		if (cuda_state == 0)
			cuda_state = cuapi_load(&cuda, cuda_why, sizeof(cuda_why)) ? -ENODEV : 1;
		rc = cuda_state;
	}
	pthread_mutex_unlock(&runtime_lock);
	if (rc < 0)
		return error_set(rc, "Could not load the %s runtime to import the lease: %s",
				 rt == GPU_HIP ? "HIP" : "CUDA",
				 rt == GPU_HIP ? hip_why : cuda_why);
	return 0;
}

static bool same_bus_id(const char *a, const char *b)
{
	/* Case-insensitive; "0000:03:00.0" also matches "03:00.0". */
	size_t la = strlen(a), lb = strlen(b);

	if (la > lb && la - lb == 5 && strncmp(a, "0000:", 5) == 0)
		a += 5;
	else if (lb > la && lb - la == 5 && strncmp(b, "0000:", 5) == 0)
		b += 5;
	return strcasecmp(a, b) == 0;
}

/* find_ordinal finds this process's ordinal of the device with the given PCI bus id. */
static int find_ordinal(enum gpu_runtime rt, const char *pci, int *out)
{
	int count = 0;

	if (rt == GPU_HIP)
		hip.hipGetDeviceCount(&count);
	else
		cuda.cuDeviceGetCount(&count);
	for (int i = 0; i < count; i++) {
		char id[64] = "";
		int rc;

		if (rt == GPU_HIP) {
			rc = hip.hipDeviceGetPCIBusId(id, sizeof(id), i);
		} else {
			cuapi_device_t dev;

			rc = cuda.cuDeviceGet(&dev, i);
			if (rc == 0)
				rc = cuda.cuDeviceGetPCIBusId(id, sizeof(id), dev);
		}
		if (rc == 0 && (!pci || !pci[0] || same_bus_id(id, pci))) {
			*out = i;
			return 0;
		}
	}
	return error_set(-ENODEV,
			 "the lease's device %s is not visible to this process "
			 "(HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES hides it?)",
			 pci && pci[0] ? pci : "(unnamed)");
}

static int hip_fail(const char *call, hipapi_error_t err)
{
	char e[96];

	return error_set(hipapi_errno(err) ? hipapi_errno(err) : -EIO, "%s failed: %s", call,
			 hipapi_strerror(&hip, err, e, sizeof(e)));
}

static int cuda_fail(const char *call, cuapi_result_t err)
{
	char e[96];

	return error_set(cuapi_errno(err) ? cuapi_errno(err) : -EIO, "%s failed: %s", call,
			 cuapi_strerror(&cuda, err, e, sizeof(e)));
}

static void hip_unmap_vmm(struct gpu_mapping *m, unsigned mapped)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < mapped; i++) {
		hip.hipMemUnmap((char *)m->base + off, (size_t)m->sizes[i]);
		off += m->sizes[i];
	}
	for (unsigned i = 0; i < m->n; i++)
		hip.hipMemRelease(m->hip_handles[i]);
	if (m->base)
		hip.hipMemAddressFree(m->base, (size_t)m->size);
}

static int hip_import_vmm(struct gpu_mapping *m, const int *fds)
{
	struct hipapi_access_desc access = {
	    .location = {.type = HIPAPI_MEM_LOCATION_DEVICE, .id = m->ordinal},
	    .flags = HIPAPI_MEM_ACCESS_READWRITE,
	};
	unsigned imported = 0, mapped = 0;
	hipapi_error_t err;
	uint64_t off = 0;
	int rc;

	if (!hipapi_has_vmm_fd(&hip))
		return error_set(-EOPNOTSUPP,
				 "this process's HIP runtime (%d) cannot import VMM fds",
				 hip.runtime_version);
	for (; imported < m->n; imported++) {
		err = hipapi_import_fd(&hip, &m->hip_handles[imported], fds[imported]);
		if (err != HIPAPI_SUCCESS) {
			rc = hip_fail("hipMemImportFromShareableHandle", err);
			goto undo;
		}
	}
	err = hip.hipMemAddressReserve(&m->base, (size_t)m->size, 0, NULL, 0);
	if (err != HIPAPI_SUCCESS) {
		m->base = NULL;
		rc = hip_fail("hipMemAddressReserve", err);
		goto undo;
	}
	/* The chunks back to back: one contiguous range, however the daemon had to split it. */
	for (; mapped < m->n; mapped++) {
		err = hip.hipMemMap((char *)m->base + off, (size_t)m->sizes[mapped], 0,
				    m->hip_handles[mapped], 0);
		if (err != HIPAPI_SUCCESS) {
			rc = hip_fail("hipMemMap", err);
			goto undo;
		}
		off += m->sizes[mapped];
	}
	err = hip.hipMemSetAccess(m->base, (size_t)m->size, &access, 1);
	if (err != HIPAPI_SUCCESS) {
		rc = hip_fail("hipMemSetAccess", err);
		goto undo;
	}
	return 0;
undo:
	m->n = imported;
	hip_unmap_vmm(m, mapped);
	return rc;
}

static void cuda_unmap_vmm(struct gpu_mapping *m, unsigned mapped)
{
	uint64_t off = 0;

	cuda.cuCtxSetCurrent(m->ctx);
	for (unsigned i = 0; i < mapped; i++) {
		cuda.cuMemUnmap((cuapi_deviceptr_t)(uintptr_t)m->base + off, (size_t)m->sizes[i]);
		off += m->sizes[i];
	}
	for (unsigned i = 0; i < m->n; i++)
		cuda.cuMemRelease(m->cu_handles[i]);
	if (m->base)
		cuda.cuMemAddressFree((cuapi_deviceptr_t)(uintptr_t)m->base, (size_t)m->size);
}

static int cuda_import_vmm(struct gpu_mapping *m, const int *fds)
{
	struct cuapi_access_desc access = {
	    .location = {.type = CUAPI_MEM_LOCATION_DEVICE, .id = m->ordinal},
	    .flags = CUAPI_MEM_ACCESS_READWRITE,
	};
	unsigned imported = 0, mapped = 0;
	cuapi_deviceptr_t base = 0;
	cuapi_result_t err;
	cuapi_device_t dev;
	uint64_t off = 0;
	int rc;

	if ((err = cuda.cuDeviceGet(&dev, m->ordinal)) != CUAPI_SUCCESS ||
	    (err = cuda.cuDevicePrimaryCtxRetain(&m->ctx, dev)) != CUAPI_SUCCESS)
		return cuda_fail("cuDevicePrimaryCtxRetain", err);
	cuda.cuCtxSetCurrent(m->ctx);
	for (; imported < m->n; imported++) {
		err = cuda.cuMemImportFromShareableHandle(&m->cu_handles[imported],
							  (void *)(intptr_t)fds[imported],
							  CUAPI_MEM_HANDLE_POSIX_FD);
		if (err != CUAPI_SUCCESS) {
			rc = cuda_fail("cuMemImportFromShareableHandle", err);
			goto undo;
		}
	}
	err = cuda.cuMemAddressReserve(&base, (size_t)m->size, 0, 0, 0);
	if (err != CUAPI_SUCCESS) {
		rc = cuda_fail("cuMemAddressReserve", err);
		goto undo;
	}
	m->base = (void *)(uintptr_t)base;
	for (; mapped < m->n; mapped++) {
		err = cuda.cuMemMap(base + off, (size_t)m->sizes[mapped], 0, m->cu_handles[mapped],
				    0);
		if (err != CUAPI_SUCCESS) {
			rc = cuda_fail("cuMemMap", err);
			goto undo;
		}
		off += m->sizes[mapped];
	}
	err = cuda.cuMemSetAccess(base, (size_t)m->size, &access, 1);
	if (err != CUAPI_SUCCESS) {
		rc = cuda_fail("cuMemSetAccess", err);
		goto undo;
	}
	return 0;
undo:
	m->n = imported;
	cuda_unmap_vmm(m, mapped);
	cuda.cuDevicePrimaryCtxRelease(dev);
	return rc;
}

static int hip_import_dmabuf(struct gpu_mapping *m, int fd)
{
	struct hipapi_external_memory_handle_desc desc;
	struct hipapi_external_memory_buffer_desc buf;
	hipapi_error_t err;

	if (!hipapi_has_dmabuf(&hip))
		return error_set(-EOPNOTSUPP, "this process's HIP runtime cannot import dma-bufs");
	memset(&desc, 0, sizeof(desc));
	desc.type = HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD;
	desc.handle.fd = fd;
	desc.size = m->size;
	err = hip.hipImportExternalMemory(&m->external, &desc);
	if (err != HIPAPI_SUCCESS)
		return hip_fail("hipImportExternalMemory", err);
	memset(&buf, 0, sizeof(buf));
	buf.size = m->size;
	err = hip.hipExternalMemoryGetMappedBuffer(&m->base, m->external, &buf);
	if (err != HIPAPI_SUCCESS) {
		hip.hipDestroyExternalMemory(m->external);
		return hip_fail("hipExternalMemoryGetMappedBuffer", err);
	}
	return 0;
}

static int hip_import_ipc(struct gpu_mapping *m, const uint8_t *handle)
{
	struct hipapi_ipc_handle h;
	hipapi_error_t err;

	memcpy(h.reserved, handle, sizeof(h.reserved));
	err =
	    hip.hipIpcOpenMemHandle(&m->base, h, HIPAPI_IPC_LAZY_PEER_ACCESS(hip.runtime_version));
	if (err != HIPAPI_SUCCESS)
		return hip_fail("hipIpcOpenMemHandle", err);
	return 0;
}

/*
 * The calling thread's current device (HIP) or context (CUDA): importing and releasing a lease
 * needs its own device current, and a host (PyTorch) computing on another device on the same
 * thread must find its own again afterwards.
 */
struct current {
	bool valid;
	int device;
	cuapi_ctx_t ctx;
};

static void keep_current(enum gpu_runtime rt, struct current *c)
{
	memset(c, 0, sizeof(*c));
	if (rt == GPU_HIP)
		c->valid = hip.hipGetDevice(&c->device) == HIPAPI_SUCCESS;
	else
		c->valid = cuda.cuCtxGetCurrent(&c->ctx) == CUAPI_SUCCESS;
}

static void restore_current(enum gpu_runtime rt, const struct current *c)
{
	if (!c->valid)
		return;
	if (rt == GPU_HIP)
		hip.hipSetDevice(c->device);
	else
		cuda.cuCtxSetCurrent(c->ctx);
}

int gpu_import(const struct gpu_grant *g, struct gpu_mapping **out, void **ptr)
{
	struct current saved;
	struct gpu_mapping *m;
	int rc;

	*out = NULL;
	*ptr = NULL;
	memset(&saved, 0, sizeof(saved)); /* nothing to restore until keep_current */
	if (g->nchunks > GPU_MAX_CHUNKS)
		return error_set(-EPROTO, "a lease of %u chunks, more than %u", g->nchunks,
				 GPU_MAX_CHUNKS);
	rc = load_runtime(g->runtime);
	if (rc)
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m)
		return error_set(-ENOMEM, "out of memory");
	m->runtime = g->runtime;
	m->kind = g->kind;
	m->size = g->size;
	rc = find_ordinal(g->runtime, g->pci_bus_id, &m->ordinal);
	if (rc)
		goto fail;
	keep_current(m->runtime, &saved);
	if (g->runtime == GPU_HIP)
		hip.hipSetDevice(m->ordinal);
	switch (g->kind) {
	case ROCMMEM_HANDLE_VMM_FD: {
		uint64_t sum = 0;

		m->n = g->nchunks;
		for (unsigned i = 0; i < m->n; i++) {
			m->sizes[i] = g->chunk_sizes[i];
			sum += m->sizes[i];
		}
		if (m->n == 0 || m->n != g->nfds || sum != m->size) {
			rc = error_set(-EPROTO, "the daemon's chunks (%u, %u fds) do not add up",
				       m->n, g->nfds);
			goto fail;
		}
		rc = g->runtime == GPU_HIP ? hip_import_vmm(m, g->fds) : cuda_import_vmm(m, g->fds);
		break;
	}
	case ROCMMEM_HANDLE_DMABUF:
		if (g->runtime != GPU_HIP || g->nfds != 1) {
			rc = error_set(-EPROTO, "a dma-buf lease needs HIP and one fd");
			goto fail;
		}
		rc = hip_import_dmabuf(m, g->fds[0]);
		break;
	case ROCMMEM_HANDLE_IPC:
		if (g->runtime != GPU_HIP || !g->ipc_handle) {
			rc = error_set(-EPROTO, "an IPC lease needs HIP and a handle");
			goto fail;
		}
		rc = hip_import_ipc(m, g->ipc_handle);
		break;
	default:
		rc = error_set(-EPROTO, "unknown lease kind %u", (unsigned)g->kind);
		break;
	}
	if (rc)
		goto fail;
	restore_current(m->runtime, &saved);
	*out = m;
	*ptr = (char *)m->base + (g->kind == ROCMMEM_HANDLE_IPC ? g->ipc_offset : 0);
	return 0;
fail:
	restore_current(m->runtime, &saved);
	free(m);
	return rc;
}

void gpu_unmap(struct gpu_mapping *m)
{
	struct current saved;

	if (!m)
		return;
	keep_current(m->runtime, &saved);
	if (m->runtime == GPU_HIP)
		hip.hipSetDevice(m->ordinal);
	switch (m->kind) {
	case ROCMMEM_HANDLE_VMM_FD:
		if (m->runtime == GPU_HIP) {
			hip_unmap_vmm(m, m->n);
		} else {
			cuapi_device_t dev;

			cuda_unmap_vmm(m, m->n);
			if (cuda.cuDeviceGet(&dev, m->ordinal) == CUAPI_SUCCESS)
				cuda.cuDevicePrimaryCtxRelease(dev);
		}
		break;
	case ROCMMEM_HANDLE_DMABUF:
		hip.hipFree(m->base);
		hip.hipDestroyExternalMemory(m->external);
		break;
	case ROCMMEM_HANDLE_IPC:
		hip.hipIpcCloseMemHandle(m->base);
		break;
	default:
		break;
	}
	restore_current(m->runtime, &saved);
	free(m);
}

bool gpu_dmabuf_takes_fd(uint32_t kind)
{
	/* hipImportExternalMemory owns the fd once it succeeds, as CUDA's import does. */
	return kind == ROCMMEM_HANDLE_DMABUF;
}

int gpu_export(struct gpu_mapping *m, int *fds, unsigned max, unsigned *n)
{
	struct current saved;
	int rc = 0;

	*n = 0;
	if (m->kind != ROCMMEM_HANDLE_VMM_FD || m->n > max)
		return error_set(-EOPNOTSUPP, "only VMM memory can be exported again");
	keep_current(m->runtime, &saved);
	if (m->runtime == GPU_HIP)
		hip.hipSetDevice(m->ordinal);
	else
		cuda.cuCtxSetCurrent(m->ctx);
	for (unsigned i = 0; i < m->n; i++) {
		int fd = -1;

		if (m->runtime == GPU_HIP) {
			hipapi_error_t err = hip.hipMemExportToShareableHandle(
			    &fd, m->hip_handles[i], HIPAPI_MEM_HANDLE_POSIX_FD, 0);

			if (err != HIPAPI_SUCCESS)
				rc = hip_fail("hipMemExportToShareableHandle", err);
		} else {
			cuapi_result_t err = cuda.cuMemExportToShareableHandle(
			    &fd, m->cu_handles[i], CUAPI_MEM_HANDLE_POSIX_FD, 0);

			if (err != CUAPI_SUCCESS)
				rc = cuda_fail("cuMemExportToShareableHandle", err);
		}
		if (rc == 0 && fd < 0)
			rc = error_set(-EIO, "the runtime exported no fd");
		if (rc) {
			while (*n > 0)
				close(fds[--*n]);
			break;
		}
		fds[(*n)++] = fd;
	}
	restore_current(m->runtime, &saved);
	return rc;
}

bool gpu_can_export(struct gpu_mapping *m)
{
	int *state = m->runtime == GPU_HIP ? &hip_export : &cuda_export;
	int fds[GPU_MAX_CHUNKS];
	unsigned n = 0;
	int known;

	pthread_mutex_lock(&runtime_lock);
	known = *state;
	pthread_mutex_unlock(&runtime_lock);
	if (known)
		return known > 0;
	known = gpu_export(m, fds, GPU_MAX_CHUNKS, &n) == 0 ? 1 : -1;
	while (n > 0)
		close(fds[--n]);
	pthread_mutex_lock(&runtime_lock);
	*state = known;
	pthread_mutex_unlock(&runtime_lock);
	return known > 0;
}
