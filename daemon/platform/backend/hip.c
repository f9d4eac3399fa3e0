/* SPDX-License-Identifier: MIT */
/* hip.c: the HIP backend for AMD GPUs: device memory shared by VMM fds, dma-buf or IPC. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "hip_api.h"
#include "base/log.h"
#include "version.h"
#include "vmm.h"

/*
 * The sharing ladder, best first, chosen per device at start by trying each:
 * VMM physical memory exported as POSIX fds (HIP >= 6.2): the client's mapping keeps the
 *   memory alive even across a daemon restart, and a large lease can be several chunks;
 * a dma-buf fd of a hipMalloc allocation, where the runtime offers one;
 * one hipMalloc per lease with a 64-byte IPC handle (every HIP version).
 */

struct hip_device {
	int ordinal;
	struct backend_device info;
	size_t vmm_granularity;
};

struct hip_backend {
	struct backend base;
	struct hipapi api;
	unsigned ndevices;
	struct hip_device devices[BACKEND_MAX_DEVICES];
};

#define PROBE_SIZE ((size_t)2 << 20)

static const char *hip_err(const struct hip_backend *h, hipapi_error_t err, char *buf, size_t len)
{
	return hipapi_strerror(&h->api, err, buf, len);
}

static void vmm_prop(struct hipapi_alloc_prop *prop, int ordinal)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = HIPAPI_MEM_ALLOCATION_PINNED;
	prop->requested_handle_type = HIPAPI_MEM_HANDLE_POSIX_FD;
	prop->location.type = HIPAPI_MEM_LOCATION_DEVICE;
	prop->location.id = ordinal;
}

static int probe_vmm(struct hip_backend *h, struct hip_device *d, char *why, size_t len)
{
	struct hipapi_alloc_prop prop;
	hipapi_mem_handle_t handle = NULL;
	hipapi_error_t err;
	char e[96];
	int value = 0, fd = -1;

	if (!hipapi_has_vmm_fd(&h->api)) {
		snprintf(why, len, "HIP %d.%d cannot export VMM memory as fds (needs 6.2)",
			 h->api.runtime_version / 10000000, h->api.runtime_version / 100000 % 100);
		return -ENOTSUP;
	}
	if (h->api.hipDeviceGetAttribute(&value, HIPAPI_ATTR_VMM_SUPPORTED, d->ordinal) !=
		HIPAPI_SUCCESS ||
	    value != 1) {
		snprintf(why, len, "the device does not support virtual memory management");
		return -ENOTSUP;
	}
	vmm_prop(&prop, d->ordinal);
	err = h->api.hipMemGetAllocationGranularity(&d->vmm_granularity, &prop,
						    HIPAPI_MEM_GRANULARITY_MINIMUM);
	if (err != HIPAPI_SUCCESS || d->vmm_granularity == 0 ||
	    (d->vmm_granularity & (d->vmm_granularity - 1)) != 0) {
		snprintf(why, len, "hipMemGetAllocationGranularity: %s",
			 hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	err = h->api.hipMemCreate(&handle, d->vmm_granularity, &prop, 0);
	if (err != HIPAPI_SUCCESS) {
		snprintf(why, len, "hipMemCreate: %s", hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	err = h->api.hipMemExportToShareableHandle(&fd, handle, HIPAPI_MEM_HANDLE_POSIX_FD, 0);
	h->api.hipMemRelease(handle);
	if (err != HIPAPI_SUCCESS || fd < 0) {
		snprintf(why, len, "hipMemExportToShareableHandle: %s",
			 hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	close(fd);
	return 0;
}

static int probe_dmabuf(struct hip_backend *h, struct hip_device *d, char *why, size_t len)
{
	hipapi_error_t err;
	void *ptr = NULL;
	char e[96];
	int fd = -1;

	(void)d;
	if (!hipapi_has_dmabuf(&h->api)) {
		snprintf(why, len, "the runtime has no dma-buf export");
		return -ENOTSUP;
	}
	err = h->api.hipMalloc(&ptr, PROBE_SIZE);
	if (err != HIPAPI_SUCCESS) {
		snprintf(why, len, "hipMalloc: %s", hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	err = h->api.hipMemGetHandleForAddressRange(&fd, ptr, PROBE_SIZE,
						    HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0);
	h->api.hipFree(ptr);
	if (err != HIPAPI_SUCCESS || fd < 0) {
		snprintf(why, len, "hipMemGetHandleForAddressRange: %s",
			 hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	close(fd);
	return 0;
}

static int probe_ipc(struct hip_backend *h, struct hip_device *d, char *why, size_t len)
{
	struct hipapi_ipc_handle handle;
	hipapi_error_t err;
	void *ptr = NULL;
	char e[96];

	(void)d;
	err = h->api.hipMalloc(&ptr, PROBE_SIZE);
	if (err != HIPAPI_SUCCESS) {
		snprintf(why, len, "hipMalloc: %s", hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	err = h->api.hipIpcGetMemHandle(&handle, ptr);
	h->api.hipFree(ptr);
	if (err != HIPAPI_SUCCESS) {
		snprintf(why, len, "hipIpcGetMemHandle: %s", hip_err(h, err, e, sizeof(e)));
		return -ENOTSUP;
	}
	return 0;
}

/* trim_device returns the runtime's cached memory on the current device to the driver. */
static void trim_device(struct hip_backend *h, int ordinal)
{
	hipapi_mem_pool_t pool = NULL;

	if (h->api.hipDeviceGetDefaultMemPool && h->api.hipMemPoolTrimTo &&
	    h->api.hipDeviceGetDefaultMemPool(&pool, ordinal) == HIPAPI_SUCCESS)
		h->api.hipMemPoolTrimTo(pool, 0);
}

/* choose_sharing walks the ladder (or tries only what --sharing forces). */
static int choose_sharing(struct hip_backend *h, struct hip_device *d)
{
	static const struct {
		const char *name;
		uint32_t kind;
		int (*probe)(struct hip_backend *, struct hip_device *, char *, size_t);
	} ladder[] = {
	    {"vmm", BACKEND_HANDLE_VMM_FD, probe_vmm},
	    {"dmabuf", BACKEND_HANDLE_DMABUF, probe_dmabuf},
	    {"ipc", BACKEND_HANDLE_IPC, probe_ipc},
	};
	const char *forced = backend_sharing_choice();
	int rc = -ENOTSUP;

	for (size_t i = 0; i < sizeof(ladder) / sizeof(ladder[0]); i++) {
		char why[256] = "";

		if (strcmp(forced, "auto") != 0 && strcmp(forced, ladder[i].name) != 0)
			continue;
		rc = ladder[i].probe(h, d, why, sizeof(why));
		if (rc == 0) {
			d->info.handle_kind = ladder[i].kind;
			break;
		}
		log_info("device %s: sharing by %s unavailable: %s", d->info.pci_bus_id,
			 ladder[i].name, why);
	}
	trim_device(h, d->ordinal); /* the probes' freed memory goes back at once */
	return rc;
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static int describe_device(struct hip_backend *h, int ordinal, struct hip_device *d, char *why,
			   size_t len)
{
	size_t total = 0;
	int integrated = 0;
	char e[96];
	hipapi_error_t err;

	memset(d, 0, sizeof(*d));
	d->ordinal = ordinal;
	if ((err = h->api.hipSetDevice(ordinal)) != HIPAPI_SUCCESS ||
	    (err = h->api.hipDeviceTotalMem(&total, ordinal)) != HIPAPI_SUCCESS) {
		snprintf(why, len, "cannot query device %d: %s", ordinal,
			 hip_err(h, err, e, sizeof(e)));
		return -ENODEV;
	}
	if (h->api.hipDeviceGetName(d->info.name, sizeof(d->info.name), ordinal) != HIPAPI_SUCCESS)
		snprintf(d->info.name, sizeof(d->info.name), "AMD GPU %d", ordinal);
	if (h->api.hipDeviceGetPCIBusId(d->info.pci_bus_id, sizeof(d->info.pci_bus_id), ordinal) !=
	    HIPAPI_SUCCESS)
		snprintf(d->info.pci_bus_id, sizeof(d->info.pci_bus_id), "hip%d", ordinal);
	lower(d->info.pci_bus_id);
	if (h->api.hipDeviceGetAttribute(&integrated, HIPAPI_ATTR_INTEGRATED, ordinal) !=
	    HIPAPI_SUCCESS)
		integrated = 0;
	d->info.integrated = integrated != 0;
	if (choose_sharing(h, d) < 0) {
		snprintf(why, len, "no way to share its memory with other processes");
		return -ENOTSUP;
	}
	d->info.granule = ROCMMEM_GRANULE;
	if (d->info.handle_kind == BACKEND_HANDLE_VMM_FD && d->vmm_granularity > d->info.granule)
		d->info.granule = d->vmm_granularity;
	d->info.total_bytes = (uint64_t)total & ~(d->info.granule - 1);
	d->info.default_headroom =
	    backend_default_headroom(d->info.total_bytes, d->info.integrated, d->info.granule);
	return 0;
}

static int hip_create(struct backend **out, char *why, size_t why_len)
{
	struct hip_backend *h = calloc(1, sizeof(*h));
	int count = 0, err;

	if (!h) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	h->base.ops = &backend_hip_ops;
	err = hipapi_load(&h->api, why, why_len);
	if (err) {
		free(h);
		return err;
	}
	h->api.hipGetDeviceCount(&count);
	log_info("HIP runtime %d.%d.%d loaded from %s, %d device(s)",
		 h->api.runtime_version / 10000000, h->api.runtime_version / 100000 % 100,
		 h->api.runtime_version % 100000, h->api.path, count);
	for (int i = 0; i < count && h->ndevices < BACKEND_MAX_DEVICES; i++) {
		char reason[256];
		struct hip_device *d = &h->devices[h->ndevices];

		if (describe_device(h, i, d, reason, sizeof(reason)) < 0) {
			log_warn("HIP device %d skipped: %s", i, reason);
			continue;
		}
		log_info("HIP device %d: %s (%s%s), shared by %s", i, d->info.name,
			 d->info.pci_bus_id, d->info.integrated ? ", integrated" : "",
			 backend_sharing_name(d->info.handle_kind));
		h->ndevices++;
	}
	if (h->ndevices == 0) {
		snprintf(why, why_len, "none of the %d HIP device(s) can share memory", count);
		hipapi_unload(&h->api);
		free(h);
		return -ENODEV;
	}
	*out = &h->base;
	return 0;
}

static void hip_destroy(struct backend *b)
{
	struct hip_backend *h = (struct hip_backend *)b;

	hipapi_unload(&h->api);
	free(h);
}

static unsigned hip_device_count(const struct backend *b)
{
	return ((const struct hip_backend *)b)->ndevices;
}

static int hip_device_info(const struct backend *b, unsigned index, struct backend_device *out)
{
	const struct hip_backend *h = (const struct hip_backend *)b;

	if (index >= h->ndevices)
		return -ENODEV;
	*out = h->devices[index].info;
	return 0;
}

/* fail records a failed runtime call and maps its error. */
static int fail(const struct hip_backend *h, const char *call, hipapi_error_t err, char *why,
		size_t len)
{
	char e[96];

	snprintf(why, len, "%s: %s", call, hip_err(h, err, e, sizeof(e)));
	return hipapi_errno(err);
}

/* The HIP side of a VMM lease (vmm.c holds the policy): one device, its context. */
struct hip_vmm {
	struct hip_backend *h;
	const struct hip_device *d;
};

static int hip_vmm_create(void *ctx, uint64_t size, uint64_t *handle)
{
	struct hip_vmm *x = ctx;
	struct hipapi_alloc_prop prop;
	hipapi_mem_handle_t hh = NULL;
	hipapi_error_t err;

	vmm_prop(&prop, x->d->ordinal);
	err = x->h->api.hipMemCreate(&hh, (size_t)size, &prop, 0);
	*handle = (uint64_t)(uintptr_t)hh;
	return err;
}

static void hip_vmm_release(void *ctx, uint64_t handle)
{
	((struct hip_vmm *)ctx)->h->api.hipMemRelease((hipapi_mem_handle_t)(uintptr_t)handle);
}

static int hip_vmm_export(void *ctx, uint64_t handle, int *fd)
{
	struct hip_vmm *x = ctx;

	return x->h->api.hipMemExportToShareableHandle(fd, (hipapi_mem_handle_t)(uintptr_t)handle,
						       HIPAPI_MEM_HANDLE_POSIX_FD, 0);
}

static int hip_vmm_import(void *ctx, int fd, uint64_t *handle)
{
	struct hip_vmm *x = ctx;
	hipapi_mem_handle_t hh = NULL;
	hipapi_error_t err = hipapi_import_fd(&x->h->api, &hh, fd);

	*handle = (uint64_t)(uintptr_t)hh;
	return err;
}

static int hip_vmm_check_size(void *ctx, uint64_t handle, uint64_t size)
{
	struct hip_vmm *x = ctx;
	void *va = NULL;
	hipapi_error_t err = x->h->api.hipMemAddressReserve(&va, (size_t)size, 0, NULL, 0);

	if (err != HIPAPI_SUCCESS)
		return err;
	err = x->h->api.hipMemMap(va, (size_t)size, 0, (hipapi_mem_handle_t)(uintptr_t)handle, 0);
	if (err == HIPAPI_SUCCESS)
		x->h->api.hipMemUnmap(va, (size_t)size);
	x->h->api.hipMemAddressFree(va, (size_t)size);
	return err;
}

static void hip_vmm_trim(void *ctx)
{
	trim_device(((struct hip_vmm *)ctx)->h, ((struct hip_vmm *)ctx)->d->ordinal);
}

static int hip_vmm_fail(void *ctx, const char *call, int err, char *why, size_t len)
{
	return fail(((struct hip_vmm *)ctx)->h, call, err, why, len);
}

static struct vmm_runtime hip_vmm_runtime(struct hip_vmm *x)
{
	struct vmm_runtime rt = {
	    .ctx = x,
	    .oom = HIPAPI_ERROR_OUT_OF_MEMORY,
	    .create_name = "hipMemCreate",
	    .export_name = "hipMemExportToShareableHandle",
	    .create = hip_vmm_create,
	    .release = hip_vmm_release,
	    .export_fd = hip_vmm_export,
	    .trim = hip_vmm_trim,
	    .import_fd = hip_vmm_import,
	    .check_size = hip_vmm_check_size,
	    .import_name = "hipMemImportFromShareableHandle",
	    .fail = hip_vmm_fail,
	};

	return rt;
}

/* malloc_trimmed is hipMalloc, retried once after a trim when the device seems full. */
static hipapi_error_t malloc_trimmed(struct hip_backend *h, const struct hip_device *d, void **ptr,
				     uint64_t size)
{
	hipapi_error_t err = h->api.hipMalloc(ptr, (size_t)size);

	if (err == HIPAPI_ERROR_OUT_OF_MEMORY) {
		trim_device(h, d->ordinal);
		err = h->api.hipMalloc(ptr, (size_t)size);
	}
	return err;
}

static int alloc_dmabuf(struct hip_backend *h, const struct hip_device *d, uint64_t size,
			struct backend_alloc *out, char *why, size_t len)
{
	void *ptr = NULL;
	hipapi_error_t err = malloc_trimmed(h, d, &ptr, size);
	int fd = -1;

	if (err != HIPAPI_SUCCESS)
		return fail(h, "hipMalloc", err, why, len);
	err = h->api.hipMemGetHandleForAddressRange(&fd, ptr, (size_t)size,
						    HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD, 0);
	if (err != HIPAPI_SUCCESS || fd < 0) {
		h->api.hipFree(ptr);
		return fail(h, "hipMemGetHandleForAddressRange",
			    err ? err : HIPAPI_ERROR_INVALID_VALUE, why, len);
	}
	out->handle_kind = BACKEND_HANDLE_DMABUF;
	out->fds[0] = fd;
	out->nfds = 1;
	out->transient_fds = true;
	out->priv = ptr;
	return 0;
}

static int alloc_ipc(struct hip_backend *h, const struct hip_device *d, uint64_t size,
		     struct backend_alloc *out, char *why, size_t len)
{
	struct hipapi_ipc_handle handle;
	void *ptr = NULL;
	hipapi_error_t err = malloc_trimmed(h, d, &ptr, size);

	if (err != HIPAPI_SUCCESS)
		return fail(h, "hipMalloc", err, why, len);
	err = h->api.hipIpcGetMemHandle(&handle, ptr);
	if (err != HIPAPI_SUCCESS) {
		h->api.hipFree(ptr);
		return fail(h, "hipIpcGetMemHandle", err, why, len);
	}
	/* One allocation per lease: the importer can reach exactly its own lease. */
	out->handle_kind = BACKEND_HANDLE_IPC;
	out->has_ipc = true;
	memcpy(out->ipc_handle, handle.reserved, sizeof(out->ipc_handle));
	out->ipc_offset = 0;
	out->priv = ptr;
	return 0;
}

static int hip_alloc(struct backend *b, unsigned index, uint64_t size, const char *label,
		     struct backend_alloc *out, char *why, size_t why_len)
{
	struct hip_backend *h = (struct hip_backend *)b;
	const struct hip_device *d;
	hipapi_error_t err;

	(void)label;
	if (index >= h->ndevices)
		return -ENODEV;
	d = &h->devices[index];
	memset(out, 0, sizeof(*out));
	out->size = size;
	err = h->api.hipSetDevice(d->ordinal);
	if (err != HIPAPI_SUCCESS)
		return fail(h, "hipSetDevice", err, why, why_len);
	switch (d->info.handle_kind) {
	case BACKEND_HANDLE_VMM_FD: {
		struct hip_vmm x = {h, d};
		struct vmm_runtime rt = hip_vmm_runtime(&x);

		return vmm_alloc(&rt, size, d->info.granule, out, why, why_len);
	}
	case BACKEND_HANDLE_DMABUF:
		return alloc_dmabuf(h, d, size, out, why, why_len);
	default:
		return alloc_ipc(h, d, size, out, why, why_len);
	}
}

static void hip_release(struct backend *b, unsigned index, struct backend_alloc *a)
{
	struct hip_backend *h = (struct hip_backend *)b;

	if (index < h->ndevices)
		h->api.hipSetDevice(h->devices[index].ordinal);
	if (a->handle_kind == BACKEND_HANDLE_VMM_FD) {
		struct hip_vmm x = {h, index < h->ndevices ? &h->devices[index] : NULL};
		struct vmm_runtime rt = hip_vmm_runtime(&x);

		vmm_release(&rt, a);
	} else if (a->priv) {
		h->api.hipFree(a->priv);
	}
	a->priv = NULL;
	/* Whatever fds are still open go with the memory: kept ones, a memfd-like owner's, and a
	 * grant's that was never sent (its holder left first). */
	backend_alloc_close_fds(a);
}

static int hip_adopt(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
		     size_t why_len)
{
	struct hip_backend *h = (struct hip_backend *)b;
	struct hip_vmm x = {h, NULL};
	struct vmm_runtime rt = hip_vmm_runtime(&x);
	hipapi_error_t err;

	/* Only VMM memory outlives the daemon that allocated it (dma-buf and IPC leases are
	 * its own hipMalloc allocations). */
	if (index >= h->ndevices || a->handle_kind != BACKEND_HANDLE_VMM_FD ||
	    h->devices[index].info.handle_kind != BACKEND_HANDLE_VMM_FD) {
		backend_alloc_close_fds(a);
		snprintf(why, why_len, "device %u does not share VMM memory", index);
		return -EOPNOTSUPP;
	}
	x.d = &h->devices[index];
	err = h->api.hipSetDevice(x.d->ordinal);
	if (err != HIPAPI_SUCCESS) {
		backend_alloc_close_fds(a);
		return fail(h, "hipSetDevice", err, why, why_len);
	}
	return vmm_adopt(&rt, x.d->info.granule, a, why, why_len);
}

static int hip_reexport(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
			size_t why_len)
{
	struct hip_backend *h = (struct hip_backend *)b;
	struct hip_vmm x = {h, index < h->ndevices ? &h->devices[index] : NULL};
	struct vmm_runtime rt = hip_vmm_runtime(&x);
	hipapi_error_t err;

	if (!x.d || a->handle_kind != BACKEND_HANDLE_VMM_FD)
		return -EOPNOTSUPP;
	if ((err = h->api.hipSetDevice(x.d->ordinal)) != HIPAPI_SUCCESS)
		return fail(h, "hipSetDevice", err, why, why_len);
	return vmm_reexport(&rt, a, why, why_len);
}

static int hip_meminfo(struct backend *b, unsigned index, struct backend_meminfo *out)
{
	struct hip_backend *h = (struct hip_backend *)b;
	size_t free_bytes = 0, total = 0;
	hipapi_error_t err;

	if (index >= h->ndevices)
		return -ENODEV;
	err = h->api.hipSetDevice(h->devices[index].ordinal);
	if (err == HIPAPI_SUCCESS)
		err = h->api.hipMemGetInfo(&free_bytes, &total);
	if (err != HIPAPI_SUCCESS)
		return hipapi_errno(err);
	out->total_bytes = total;
	out->free_bytes = free_bytes;
	return 0;
}

static int hip_trim(struct backend *b, unsigned index, uint64_t *released)
{
	struct hip_backend *h = (struct hip_backend *)b;
	struct backend_meminfo before, after;
	int err = hip_meminfo(b, index, &before);

	*released = 0;
	if (err)
		return err;
	trim_device(h, h->devices[index].ordinal);
	err = hip_meminfo(b, index, &after);
	if (err)
		return err;
	/* Reported as measured: what the runtime shows free now that it did not before. */
	if (after.free_bytes > before.free_bytes)
		*released = after.free_bytes - before.free_bytes;
	return 0;
}

const struct backend_ops backend_hip_ops = {
    .name = "hip",
    .blocking = true,
    .create = hip_create,
    .destroy = hip_destroy,
    .device_count = hip_device_count,
    .device_info = hip_device_info,
    .alloc = hip_alloc,
    .release = hip_release,
    .trim = hip_trim,
    .meminfo = hip_meminfo,
    .adopt = hip_adopt,
    .reexport = hip_reexport,
};
