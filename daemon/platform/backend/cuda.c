/* SPDX-License-Identifier: MIT */
/* cuda.c: the CUDA backend for NVIDIA GPUs: cuMemCreate memory shared as POSIX fds. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_api.h"
#include "base/log.h"
#include "version.h"
#include "vmm.h"

struct cuda_device {
	int ordinal;
	cuapi_device_t device;
	cuapi_ctx_t ctx; /* the primary context, retained for the daemon's lifetime */
	struct backend_device info;
};

struct cuda_backend {
	struct backend base;
	struct cuapi api;
	unsigned ndevices;
	struct cuda_device devices[BACKEND_MAX_DEVICES];
};

static const char *cu_err(const struct cuda_backend *c, cuapi_result_t err, char *buf, size_t len)
{
	return cuapi_strerror(&c->api, err, buf, len);
}

static int fail(const struct cuda_backend *c, const char *call, cuapi_result_t err, char *why,
		size_t len)
{
	char e[96];

	snprintf(why, len, "%s: %s", call, cu_err(c, err, e, sizeof(e)));
	return cuapi_errno(err);
}

static void vmm_prop(struct cuapi_alloc_prop *prop, int ordinal)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CUAPI_MEM_ALLOCATION_PINNED;
	prop->requested_handle_types = CUAPI_MEM_HANDLE_POSIX_FD;
	prop->location.type = CUAPI_MEM_LOCATION_DEVICE;
	prop->location.id = ordinal;
}

/* current makes the device's context current on the calling (worker) thread. */
static cuapi_result_t current(const struct cuda_backend *c, const struct cuda_device *d)
{
	return c->api.cuCtxSetCurrent(d->ctx);
}

static int describe_device(struct cuda_backend *c, int ordinal, struct cuda_device *d, char *why,
			   size_t len)
{
	struct cuapi_alloc_prop prop;
	cuapi_mem_handle_t handle = 0;
	cuapi_result_t err;
	size_t total = 0, granularity = 0;
	int vmm = 0, posix = 0, integrated = 0, fd = -1;
	char e[96];

	memset(d, 0, sizeof(*d));
	d->ordinal = ordinal;
	if ((err = c->api.cuDeviceGet(&d->device, ordinal)) != CUAPI_SUCCESS)
		return fail(c, "cuDeviceGet", err, why, len);
	c->api.cuDeviceGetAttribute(&vmm, CUAPI_ATTR_VMM_SUPPORTED, d->device);
	c->api.cuDeviceGetAttribute(&posix, CUAPI_ATTR_POSIX_FD_SUPPORTED, d->device);
	if (vmm != 1 || posix != 1) {
		snprintf(why, len, "no virtual memory management with POSIX fd export");
		return -ENOTSUP;
	}
	if ((err = c->api.cuDevicePrimaryCtxRetain(&d->ctx, d->device)) != CUAPI_SUCCESS)
		return fail(c, "cuDevicePrimaryCtxRetain", err, why, len);
	current(c, d);
	if (c->api.cuDeviceGetName(d->info.name, sizeof(d->info.name), d->device) != CUAPI_SUCCESS)
		snprintf(d->info.name, sizeof(d->info.name), "NVIDIA GPU %d", ordinal);
	if (c->api.cuDeviceGetPCIBusId(d->info.pci_bus_id, sizeof(d->info.pci_bus_id), d->device) !=
	    CUAPI_SUCCESS)
		snprintf(d->info.pci_bus_id, sizeof(d->info.pci_bus_id), "cuda%d", ordinal);
	for (char *p = d->info.pci_bus_id; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	c->api.cuDeviceGetAttribute(&integrated, CUAPI_ATTR_INTEGRATED, d->device);
	d->info.integrated = integrated != 0;
	if ((err = c->api.cuDeviceTotalMem(&total, d->device)) != CUAPI_SUCCESS)
		goto release_ctx;
	vmm_prop(&prop, ordinal);
	err = c->api.cuMemGetAllocationGranularity(&granularity, &prop,
						   CUAPI_MEM_GRANULARITY_MINIMUM);
	if (err != CUAPI_SUCCESS || granularity == 0 || (granularity & (granularity - 1)) != 0) {
		fail(c, "cuMemGetAllocationGranularity", err, why, len);
		err = err ? err : CUAPI_ERROR_INVALID_VALUE;
		goto release_ctx;
	}
	/* Prove the whole path once: create, export, release. */
	if ((err = c->api.cuMemCreate(&handle, granularity, &prop, 0)) != CUAPI_SUCCESS)
		goto release_ctx;
	err = c->api.cuMemExportToShareableHandle(&fd, handle, CUAPI_MEM_HANDLE_POSIX_FD, 0);
	c->api.cuMemRelease(handle);
	if (err != CUAPI_SUCCESS)
		goto release_ctx;
	close(fd);
	d->info.handle_kind = BACKEND_HANDLE_VMM_FD;
	d->info.granule = granularity > ROCMMEM_GRANULE ? granularity : ROCMMEM_GRANULE;
	d->info.total_bytes = (uint64_t)total & ~(d->info.granule - 1);
	d->info.default_headroom =
	    backend_default_headroom(d->info.total_bytes, d->info.integrated, d->info.granule);
	return 0;
release_ctx:
	if (!why[0])
		snprintf(why, len, "probing VMM memory failed: %s", cu_err(c, err, e, sizeof(e)));
	c->api.cuDevicePrimaryCtxRelease(d->device);
	return cuapi_errno(err);
}

static int cuda_create(struct backend **out, char *why, size_t why_len)
{
	struct cuda_backend *c = calloc(1, sizeof(*c));
	int count = 0, err;

	if (!c) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	c->base.ops = &backend_cuda_ops;
	err = cuapi_load(&c->api, why, why_len);
	if (err) {
		free(c);
		return err;
	}
	c->api.cuDeviceGetCount(&count);
	log_info("CUDA driver %d.%d loaded from %s, %d device(s)", c->api.driver_version / 1000,
		 c->api.driver_version % 1000 / 10, c->api.path, count);
	for (int i = 0; i < count && c->ndevices < BACKEND_MAX_DEVICES; i++) {
		struct cuda_device *d = &c->devices[c->ndevices];
		char reason[256] = "";

		if (describe_device(c, i, d, reason, sizeof(reason)) < 0) {
			log_warn("CUDA device %d skipped: %s", i, reason);
			continue;
		}
		log_info("CUDA device %d: %s (%s%s), shared by vmm-fd", i, d->info.name,
			 d->info.pci_bus_id, d->info.integrated ? ", integrated" : "");
		c->ndevices++;
	}
	if (c->ndevices == 0) {
		snprintf(why, why_len, "none of the %d CUDA device(s) can share memory", count);
		cuapi_unload(&c->api);
		free(c);
		return -ENODEV;
	}
	*out = &c->base;
	return 0;
}

static void cuda_destroy(struct backend *b)
{
	struct cuda_backend *c = (struct cuda_backend *)b;

	for (unsigned i = 0; i < c->ndevices; i++)
		c->api.cuDevicePrimaryCtxRelease(c->devices[i].device);
	cuapi_unload(&c->api);
	free(c);
}

static unsigned cuda_device_count(const struct backend *b)
{
	return ((const struct cuda_backend *)b)->ndevices;
}

static int cuda_device_info(const struct backend *b, unsigned index, struct backend_device *out)
{
	const struct cuda_backend *c = (const struct cuda_backend *)b;

	if (index >= c->ndevices)
		return -ENODEV;
	*out = c->devices[index].info;
	return 0;
}

/* The CUDA side of a VMM lease (vmm.c holds the policy). */
struct cuda_vmm {
	struct cuda_backend *c;
	const struct cuda_device *d;
};

static int cuda_vmm_create(void *ctx, uint64_t size, uint64_t *handle)
{
	struct cuda_vmm *x = ctx;
	struct cuapi_alloc_prop prop;
	cuapi_mem_handle_t hh = 0;
	cuapi_result_t err;

	vmm_prop(&prop, x->d->ordinal);
	err = x->c->api.cuMemCreate(&hh, (size_t)size, &prop, 0);
	*handle = hh;
	return err;
}

static void cuda_vmm_release(void *ctx, uint64_t handle)
{
	struct cuda_vmm *x = ctx;

	x->c->api.cuMemRelease(handle);
}

static int cuda_vmm_export(void *ctx, uint64_t handle, int *fd)
{
	struct cuda_vmm *x = ctx;

	return x->c->api.cuMemExportToShareableHandle(fd, handle, CUAPI_MEM_HANDLE_POSIX_FD, 0);
}

static int cuda_vmm_import(void *ctx, int fd, uint64_t *handle)
{
	struct cuda_vmm *x = ctx;
	cuapi_mem_handle_t hh = 0;
	cuapi_result_t err = x->c->api.cuMemImportFromShareableHandle(&hh, (void *)(intptr_t)fd,
								      CUAPI_MEM_HANDLE_POSIX_FD);

	*handle = hh;
	return err;
}

static int cuda_vmm_check_size(void *ctx, uint64_t handle, uint64_t size)
{
	struct cuda_vmm *x = ctx;
	cuapi_deviceptr_t va = 0;
	cuapi_result_t err = x->c->api.cuMemAddressReserve(&va, (size_t)size, 0, 0, 0);

	if (err != CUAPI_SUCCESS)
		return err;
	err = x->c->api.cuMemMap(va, (size_t)size, 0, (cuapi_mem_handle_t)handle, 0);
	if (err == CUAPI_SUCCESS)
		x->c->api.cuMemUnmap(va, (size_t)size);
	x->c->api.cuMemAddressFree(va, (size_t)size);
	return err;
}

static int cuda_vmm_fail(void *ctx, const char *call, int err, char *why, size_t len)
{
	struct cuda_vmm *x = ctx;

	return fail(x->c, call, err, why, len);
}

static struct vmm_runtime cuda_vmm_runtime(struct cuda_vmm *x)
{
	/* No trim: cuMemRelease returns VMM memory at once, nothing is cached. */
	struct vmm_runtime rt = {
	    .ctx = x,
	    .oom = CUAPI_ERROR_OUT_OF_MEMORY,
	    .create_name = "cuMemCreate",
	    .export_name = "cuMemExportToShareableHandle",
	    .create = cuda_vmm_create,
	    .release = cuda_vmm_release,
	    .export_fd = cuda_vmm_export,
	    .fail = cuda_vmm_fail,
	    .import_fd = cuda_vmm_import,
	    .check_size = cuda_vmm_check_size,
	    .import_name = "cuMemImportFromShareableHandle",
	};

	return rt;
}

static int cuda_alloc(struct backend *b, unsigned index, uint64_t size, const char *label,
		      struct backend_alloc *out, char *why, size_t why_len)
{
	struct cuda_backend *c = (struct cuda_backend *)b;
	struct cuda_vmm x = {c, NULL};
	struct vmm_runtime rt = cuda_vmm_runtime(&x);
	cuapi_result_t err;

	(void)label;
	if (index >= c->ndevices)
		return -ENODEV;
	x.d = &c->devices[index];
	memset(out, 0, sizeof(*out));
	out->size = size;
	if ((err = current(c, x.d)) != CUAPI_SUCCESS)
		return fail(c, "cuCtxSetCurrent", err, why, why_len);
	return vmm_alloc(&rt, size, x.d->info.granule, out, why, why_len);
}

static void cuda_release(struct backend *b, unsigned index, struct backend_alloc *a)
{
	struct cuda_backend *c = (struct cuda_backend *)b;
	struct cuda_vmm x = {c, index < c->ndevices ? &c->devices[index] : NULL};
	struct vmm_runtime rt = cuda_vmm_runtime(&x);

	if (x.d)
		current(c, x.d);
	vmm_release(&rt, a);
}

static int cuda_adopt(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
		      size_t why_len)
{
	struct cuda_backend *c = (struct cuda_backend *)b;
	struct cuda_vmm x = {c, NULL};
	struct vmm_runtime rt = cuda_vmm_runtime(&x);
	cuapi_result_t err;

	if (index >= c->ndevices || a->handle_kind != BACKEND_HANDLE_VMM_FD) {
		backend_alloc_close_fds(a);
		snprintf(why, why_len, "device %u does not share VMM memory", index);
		return -EOPNOTSUPP;
	}
	x.d = &c->devices[index];
	if ((err = current(c, x.d)) != CUAPI_SUCCESS) {
		backend_alloc_close_fds(a);
		return fail(c, "cuCtxSetCurrent", err, why, why_len);
	}
	return vmm_adopt(&rt, x.d->info.granule, a, why, why_len);
}

static int cuda_reexport(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
			 size_t why_len)
{
	struct cuda_backend *c = (struct cuda_backend *)b;
	struct cuda_vmm x = {c, NULL};
	struct vmm_runtime rt = cuda_vmm_runtime(&x);
	cuapi_result_t err;

	if (index >= c->ndevices || a->handle_kind != BACKEND_HANDLE_VMM_FD)
		return -EOPNOTSUPP;
	x.d = &c->devices[index];
	if ((err = current(c, x.d)) != CUAPI_SUCCESS)
		return fail(c, "cuCtxSetCurrent", err, why, why_len);
	return vmm_reexport(&rt, a, why, why_len);
}

static int cuda_meminfo(struct backend *b, unsigned index, struct backend_meminfo *out)
{
	struct cuda_backend *c = (struct cuda_backend *)b;
	size_t free_bytes = 0, total = 0;
	cuapi_result_t err;

	if (index >= c->ndevices)
		return -ENODEV;
	err = current(c, &c->devices[index]);
	if (err == CUAPI_SUCCESS)
		err = c->api.cuMemGetInfo(&free_bytes, &total);
	if (err != CUAPI_SUCCESS)
		return cuapi_errno(err);
	out->total_bytes = total;
	out->free_bytes = free_bytes;
	return 0;
}

static int cuda_trim(struct backend *b, unsigned index, uint64_t *released)
{
	struct backend_meminfo before, after;
	int err = cuda_meminfo(b, index, &before);

	/* cuMemRelease returns VMM memory at once: nothing is cached to give back; reported as
	 * measured all the same. */
	*released = 0;
	if (err)
		return err;
	err = cuda_meminfo(b, index, &after);
	if (err)
		return err;
	if (after.free_bytes > before.free_bytes)
		*released = after.free_bytes - before.free_bytes;
	return 0;
}

const struct backend_ops backend_cuda_ops = {
    .name = "cuda",
    .blocking = true,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .trim = cuda_trim,
    .meminfo = cuda_meminfo,
    .adopt = cuda_adopt,
    .reexport = cuda_reexport,
};
