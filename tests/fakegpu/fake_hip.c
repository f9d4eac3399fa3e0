/* SPDX-License-Identifier: MIT */
/* fake_hip.c: a stand-in libamdhip64 over host memory, with the real runtime's version traps. */
#include "fake_common.h"
#include "hip_api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Every function of common/gpu/hip_api.h, exported under its real name; the declarations come
 * from the project's own list, so a definition that drifts from it does not compile.
 */
#define HIP_DECLARE(name, required, ret, params) FAKE_EXPORT ret name params;
HIPAPI_FUNCTIONS(HIP_DECLARE)
#undef HIP_DECLARE

_Static_assert(FAKE_INVALID_VALUE == HIPAPI_ERROR_INVALID_VALUE, "hipErrorInvalidValue");
_Static_assert(FAKE_OUT_OF_MEMORY == HIPAPI_ERROR_OUT_OF_MEMORY, "hipErrorOutOfMemory");
_Static_assert(FAKE_NOT_INITIALIZED == HIPAPI_ERROR_NOT_INITIALIZED, "hipErrorNotInitialized");
_Static_assert(FAKE_NO_DEVICE == HIPAPI_ERROR_NO_DEVICE, "hipErrorNoDevice");
_Static_assert(FAKE_INVALID_DEVICE == HIPAPI_ERROR_INVALID_DEVICE, "hipErrorInvalidDevice");
_Static_assert(FAKE_NOT_SUPPORTED == HIPAPI_ERROR_NOT_SUPPORTED, "hipErrorNotSupported");

#define HIP_ERROR_INVALID_MEMCPY_DIRECTION 21
#define V(major, minor) HIPAPI_VERSION(major, minor)
/* A pointer is never this small and an fd never this large: how the two conventions differ. */
#define FD_LIMIT 65536

enum hip_buf_kind { BUF_MALLOC, BUF_IPC, BUF_EXTERNAL };

/* A hipMalloc allocation, an opened IPC handle or a buffer mapped from external memory. */
struct hip_buf {
	struct hip_buf *next;
	enum hip_buf_kind kind;
	char *ptr; /* what the caller holds */
	char *map; /* the mapping behind it (differs for unaligned external offsets) */
	size_t map_len;
	size_t size;	  /* bytes the caller may use from ptr */
	uint64_t charged; /* BUF_MALLOC: bytes counted as used, whole granules */
	int fd;		  /* BUF_MALLOC: the allocation's memfd; -1 otherwise */
	int dev;
};

struct hip_extmem {
	struct hip_extmem *next;
	int fd; /* owned since hipImportExternalMemory */
	int dev;
	uint64_t size;
};

/* What a hipIpcMemHandle_t carries: enough for another process to open the memfd. */
struct hip_ipc_wire {
	char magic[8];
	int32_t pid;
	int32_t fd;
	uint64_t size;
	uint64_t offset; /* of the exported pointer in its allocation */
	int32_t dev;
	int32_t unused;
	uint64_t ino; /* of the memfd: a handle to a freed allocation fails like the real one */
};
_Static_assert(sizeof(struct hip_ipc_wire) <= HIPAPI_IPC_HANDLE_SIZE, "IPC handle fits");
static const char ipc_magic[8] = "FAKEIPC";

static void hip_forget(void);

static struct fake hip = {
    .kind = "hip",
    .prefix = "FAKEHIP",
    .default_version = 60200000,
    .pin_until_address_free = true,
    .forget = hip_forget,
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

static struct hip_buf *bufs;
static struct hip_extmem *extmems;
/* Freed hipMalloc bytes ROCr keeps: still used on the device until trimmed. */
static uint64_t cached[FAKE_MAX_DEVICES];
static int pools[FAKE_MAX_DEVICES]; /* their addresses are the default pools */
static _Thread_local int current_device;

static void hip_forget(void)
{
	while (bufs) {
		struct hip_buf *b = bufs;

		bufs = b->next;
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
	while (extmems) {
		struct hip_extmem *e = extmems;

		extmems = e->next;
		close(e->fd);
		free(e);
	}
	memset(cached, 0, sizeof(cached));
}

__attribute__((destructor)) static void hip_unload(void)
{
	fake_teardown(&hip);
}

static int begin(const char *name, int default_failure)
{
	return fake_begin(&hip, name, default_failure);
}

static int end(int err)
{
	return fake_end(&hip, err);
}

static bool has_vmm(void)
{
	return hip.version >= V(6, 1) && hip.vmm;
}

static bool has_vmm_fd(void)
{
	return hip.version >= V(6, 2) && hip.vmm;
}

/* trim gives back cached bytes above keep. */
static void trim(int dev, uint64_t keep)
{
	if (cached[dev] > keep) {
		fake_uncharge(&hip, dev, cached[dev] - keep);
		cached[dev] = keep;
	}
}

static struct hip_buf *find_buf(const void *ptr, bool inside)
{
	const char *p = ptr;

	for (struct hip_buf *b = bufs; b; b = b->next)
		if (p == b->ptr || (inside && p > b->ptr && p < b->ptr + b->size))
			return b;
	return NULL;
}

static void drop_buf(struct hip_buf *b)
{
	struct hip_buf **bp;

	for (bp = &bufs; *bp && *bp != b; bp = &(*bp)->next) {
	}
	if (*bp)
		*bp = b->next;
	munmap(b->map, b->map_len);
	if (b->fd >= 0)
		close(b->fd);
	free(b);
}

static struct hip_buf *new_buf(enum hip_buf_kind kind, int dev)
{
	struct hip_buf *b = calloc(1, sizeof(*b));

	if (b) {
		b->kind = kind;
		b->dev = dev;
		b->fd = -1;
	}
	return b;
}

hipapi_error_t hipInit(unsigned int flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED), usable = 0;

	if (!err && flags)
		err = FAKE_INVALID_VALUE;
	for (int i = 0; !err && i < hip.ndev; i++)
		usable += !fake_device_lost(&hip, i);
	if (!err && !usable)
		err = FAKE_NO_DEVICE;
	return end(err);
}

hipapi_error_t hipRuntimeGetVersion(int *version)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !version)
		err = FAKE_INVALID_VALUE;
	if (!err)
		*version = hip.version;
	return end(err);
}

/* error_text: HIP up to 5.7 returned the error's name, 6.0 and later a description. */
static const struct {
	int code;
	const char *name, *text;
} errors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "initialization error"},
    {21, "hipErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {100, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {201, "hipErrorInvalidContext", "invalid device context"},
    {400, "hipErrorInvalidHandle", "invalid resource handle"},
    {700, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
    {801, "hipErrorNotSupported", "operation not supported"},
    {999, "hipErrorUnknown", "unknown error"},
};

const char *hipGetErrorString(hipapi_error_t error)
{
	int version;
	bool names;

	pthread_mutex_lock(&hip.lock);
	version = hip.ready ? hip.version : hip.default_version;
	pthread_mutex_unlock(&hip.lock);
	names = version < V(6, 0);
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return names ? errors[i].name : errors[i].text;
	return names ? "hipErrorUnknown" : "unknown error";
}

hipapi_error_t hipGetDeviceCount(int *count)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !count)
		err = FAKE_INVALID_VALUE;
	if (!err) {
		*count = hip.ndev;
		if (!hip.ndev)
			err = FAKE_NO_DEVICE;
	}
	return end(err);
}

hipapi_error_t hipSetDevice(int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_check_device(&hip, device);
	if (!err)
		current_device = device;
	return end(err);
}

hipapi_error_t hipGetDevice(int *device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !device)
		err = FAKE_INVALID_VALUE;
	if (!err)
		*device = current_device;
	return end(err);
}

hipapi_error_t hipDeviceGetAttribute(int *value, int attr, int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !value)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, device);
	if (!err) {
		switch (attr) {
		case HIPAPI_ATTR_INTEGRATED:
			*value = hip.integrated[device];
			break;
		case HIPAPI_ATTR_MEMORY_POOLS_SUPPORTED:
			*value = 1;
			break;
		case HIPAPI_ATTR_VMM_SUPPORTED:
			/* The attribute only exists from 6.0: older runtimes reject the value. */
			if (hip.version < V(6, 0))
				err = FAKE_INVALID_VALUE;
			else
				*value = hip.vmm;
			break;
		default:
			err = FAKE_INVALID_VALUE;
			break;
		}
	}
	return end(err);
}

hipapi_error_t hipDeviceGetName(char *name, int len, int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!name || len <= 0))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, device);
	if (!err)
		snprintf(name, (size_t)len, "%s",
			 hip.integrated[device] ? "Fake Radeon 8060S APU"
						: "Fake Radeon RX 7900 XTX");
	return end(err);
}

hipapi_error_t hipDeviceGetPCIBusId(char *bus_id, int len, int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!bus_id || len < 13))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, device);
	if (!err)
		snprintf(bus_id, (size_t)len, "0000:%02x:00.0", 0x03 + device);
	return end(err);
}

hipapi_error_t hipDeviceTotalMem(size_t *bytes, int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !bytes)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, device);
	if (!err)
		*bytes = hip.total[device];
	return end(err);
}

hipapi_error_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED), dev = current_device;

	if (!err && (!free_bytes || !total_bytes))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, dev);
	if (!err) {
		uint64_t used = fake_used(&hip, dev);

		*total_bytes = hip.total[dev];
		*free_bytes = used < hip.total[dev] ? hip.total[dev] - used : 0;
	}
	return end(err);
}

/*
 * charge counts bytes on dev. Cached bytes stay used until hipMemPoolTrimTo, unless
 * FAKEHIP_AUTOTRIM=1: then the cache goes first when the device is full, as ROCr does.
 */
static int charge(int dev, uint64_t bytes)
{
	int err = fake_charge(&hip, dev, bytes);

	if (err == FAKE_OUT_OF_MEMORY && hip.autotrim && cached[dev]) {
		trim(dev, 0);
		err = fake_charge(&hip, dev, bytes);
	}
	return err;
}

static int do_malloc(void **ptr, size_t size)
{
	int dev = current_device, err;
	struct hip_buf *b;
	uint64_t charged;

	if (!ptr)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, dev);
	if (err)
		return err;
	if (!size) {
		*ptr = NULL;
		return FAKE_SUCCESS;
	}
	/* ROCr hands out whole 2 MiB blocks (FAKEHIP_GRANULARITY). */
	charged = fake_align_up(size, hip.granularity);
	b = new_buf(BUF_MALLOC, dev);
	if (!b)
		return FAKE_OUT_OF_MEMORY;
	err = charge(dev, charged);
	if (err) {
		free(b);
		return err;
	}
	b->fd = fake_memfd(&hip, dev, size);
	b->map =
	    b->fd < 0 ? MAP_FAILED : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	if (b->map == MAP_FAILED) {
		if (b->fd >= 0)
			close(b->fd);
		fake_uncharge(&hip, dev, charged);
		free(b);
		return FAKE_OUT_OF_MEMORY;
	}
	b->ptr = b->map;
	b->map_len = size;
	b->size = size;
	b->charged = charged;
	b->next = bufs;
	bufs = b;
	*ptr = b->ptr;
	return FAKE_SUCCESS;
}

hipapi_error_t hipMalloc(void **ptr, size_t size)
{
	int err = begin(__func__, FAKE_OUT_OF_MEMORY);

	if (!err)
		err = do_malloc(ptr, size);
	return end(err);
}

static int do_free(void *ptr)
{
	struct hip_buf *b;
	bool lost;

	if (!ptr)
		return FAKE_SUCCESS;
	b = find_buf(ptr, false);
	if (!b || b->kind == BUF_IPC)
		return FAKE_INVALID_VALUE;
	lost = fake_device_lost(&hip, b->dev);
	if (b->kind == BUF_MALLOC) {
		if (lost)
			fake_uncharge(&hip, b->dev, b->charged);
		else
			cached[b->dev] += b->charged;
	}
	drop_buf(b);
	return lost ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

hipapi_error_t hipFree(void *ptr)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_free(ptr);
	return end(err);
}

hipapi_error_t hipMemcpy(void *dst, const void *src, size_t size, int kind)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (kind < 0 || kind > 4))
		err = HIP_ERROR_INVALID_MEMCPY_DIRECTION;
	if (!err && size && (!dst || !src))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, current_device);
	/* No lock needed for the copy itself, and a fault must not leave the lock held. */
	end(FAKE_SUCCESS);
	if (!err && size)
		memmove(dst, src, size);
	return err;
}

hipapi_error_t hipMemset(void *dst, int value, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && size && !dst)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, current_device);
	end(FAKE_SUCCESS);
	if (!err && size)
		memset(dst, value, size);
	return err;
}

hipapi_error_t hipDeviceSynchronize(void)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_check_device(&hip, current_device);
	return end(err);
}

static int do_ipc_get(struct hipapi_ipc_handle *handle, void *ptr)
{
	struct hip_ipc_wire w;
	struct stat st;
	struct hip_buf *b;
	int err;

	if (!handle || !ptr)
		return FAKE_INVALID_VALUE;
	b = find_buf(ptr, true);
	if (!b || b->kind != BUF_MALLOC)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, b->dev);
	if (err)
		return err;
	memset(&w, 0, sizeof(w));
	memcpy(w.magic, ipc_magic, sizeof(w.magic));
	w.pid = (int32_t)hip.pid;
	w.fd = b->fd;
	w.size = b->size;
	w.offset = (uint64_t)((char *)ptr - b->ptr);
	w.dev = b->dev;
	w.ino = fstat(b->fd, &st) ? 0 : (uint64_t)st.st_ino;
	memset(handle, 0, sizeof(*handle));
	memcpy(handle->reserved, &w, sizeof(w));
	return FAKE_SUCCESS;
}

hipapi_error_t hipIpcGetMemHandle(struct hipapi_ipc_handle *handle, void *ptr)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_ipc_get(handle, ptr);
	return end(err);
}

static int do_ipc_open(void **ptr, const struct hipapi_ipc_handle *handle, unsigned int flags)
{
	/* hipIpcMemLazyEnablePeerAccess was 0 up to 5.7 and is 1 from 6.0, and it is required. */
	unsigned int want = hip.version >= V(6, 0) ? 1u : 0u;
	struct hip_ipc_wire w;
	struct hip_buf *b;
	struct stat st;
	char path[64];
	uint64_t size;
	int fd, dev, err;

	memcpy(&w, handle->reserved, sizeof(w));
	if (!ptr || memcmp(w.magic, ipc_magic, sizeof(w.magic)) || flags != want)
		return FAKE_INVALID_VALUE;
	/* The exporting process cannot open its own handle. */
	if (w.pid == (int32_t)hip.pid)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, w.dev);
	if (err)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return FAKE_INVALID_VALUE; /* the exporter is gone or freed the allocation */
	dev = fake_memfd_device(&hip, fd, &size);
	if (dev != w.dev || size != w.size || fstat(fd, &st) || (uint64_t)st.st_ino != w.ino ||
	    !(b = new_buf(BUF_IPC, dev))) {
		close(fd);
		return FAKE_INVALID_VALUE;
	}
	/* The whole allocation, at its base: the offset is the caller's business. */
	b->map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b->map == MAP_FAILED) {
		free(b);
		return FAKE_OUT_OF_MEMORY;
	}
	b->ptr = b->map;
	b->map_len = b->size = (size_t)size;
	b->next = bufs;
	bufs = b;
	*ptr = b->ptr;
	return FAKE_SUCCESS;
}

hipapi_error_t hipIpcOpenMemHandle(void **ptr, struct hipapi_ipc_handle handle, unsigned int flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_ipc_open(ptr, &handle, flags);
	return end(err);
}

hipapi_error_t hipIpcCloseMemHandle(void *ptr)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct hip_buf *b = err ? NULL : find_buf(ptr, false);

	if (!err && (!b || b->kind != BUF_IPC))
		err = FAKE_INVALID_VALUE;
	if (!err) {
		bool lost = fake_device_lost(&hip, b->dev);

		drop_buf(b);
		err = lost ? FAKE_NO_DEVICE : FAKE_SUCCESS;
	}
	return end(err);
}

/* check_prop validates a hipMemAllocationProp the way hipMemCreate does. */
static int check_prop(const struct hipapi_alloc_prop *prop)
{
	if (!prop || prop->type != HIPAPI_MEM_ALLOCATION_PINNED ||
	    (prop->requested_handle_type != 0 &&
	     prop->requested_handle_type != HIPAPI_MEM_HANDLE_POSIX_FD) ||
	    prop->location.type != HIPAPI_MEM_LOCATION_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= hip.ndev)
		return FAKE_INVALID_VALUE;
	return fake_device_lost(&hip, prop->location.id) ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

hipapi_error_t hipMemGetAllocationGranularity(size_t *granularity,
					      const struct hipapi_alloc_prop *prop, int option)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !has_vmm())
		err = FAKE_NOT_SUPPORTED;
	if (!err && (!granularity || (option != HIPAPI_MEM_GRANULARITY_MINIMUM &&
				      option != HIPAPI_MEM_GRANULARITY_RECOMMENDED)))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = check_prop(prop);
	if (!err)
		*granularity = hip.granularity;
	return end(err);
}

static int do_mem_create(hipapi_mem_handle_t *handle, size_t size,
			 const struct hipapi_alloc_prop *prop, unsigned long long flags)
{
	struct fake_phys *p;
	int err;

	if (!has_vmm())
		return FAKE_NOT_SUPPORTED;
	if (!handle || flags)
		return FAKE_INVALID_VALUE;
	err = check_prop(prop);
	if (err)
		return err;
	err = fake_vmm_create(&hip, prop->location.id, size,
			      prop->requested_handle_type == HIPAPI_MEM_HANDLE_POSIX_FD, &p);
	if (err == FAKE_OUT_OF_MEMORY && hip.autotrim && cached[prop->location.id]) {
		trim(prop->location.id, 0);
		err =
		    fake_vmm_create(&hip, prop->location.id, size,
				    prop->requested_handle_type == HIPAPI_MEM_HANDLE_POSIX_FD, &p);
	}
	if (!err)
		*handle = (hipapi_mem_handle_t)(void *)p;
	return err;
}

hipapi_error_t hipMemCreate(hipapi_mem_handle_t *handle, size_t size,
			    const struct hipapi_alloc_prop *prop, unsigned long long flags)
{
	int err = begin(__func__, FAKE_OUT_OF_MEMORY);

	if (!err)
		err = do_mem_create(handle, size, prop, flags);
	return end(err);
}

hipapi_error_t hipMemRelease(hipapi_mem_handle_t handle)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = err ? NULL : fake_vmm_find(&hip, handle);

	if (!err && !p)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_release(&hip, p);
	return end(err);
}

hipapi_error_t hipMemExportToShareableHandle(void *shareable, hipapi_mem_handle_t handle,
					     int handle_type, unsigned long long flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = NULL;

	if (!err && !has_vmm_fd())
		err = FAKE_NOT_SUPPORTED;
	if (!err && (!shareable || handle_type != HIPAPI_MEM_HANDLE_POSIX_FD || flags ||
		     !(p = fake_vmm_find(&hip, handle))))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_export(&hip, p, shareable);
	return end(err);
}

static int do_import(hipapi_mem_handle_t *handle, void *os_handle, int handle_type)
{
	uintptr_t raw = (uintptr_t)os_handle;
	struct fake_phys *p;
	int fd, err;

	if (!has_vmm_fd())
		return FAKE_NOT_SUPPORTED;
	if (!handle || handle_type != HIPAPI_MEM_HANDLE_POSIX_FD)
		return FAKE_INVALID_VALUE;
	if (hip.version >= V(7, 1)) {
		/* 7.1 and later: the fd value itself. */
		if (raw >= FD_LIMIT)
			return FAKE_INVALID_VALUE;
		fd = (int)raw;
	} else {
		/* Up to 7.0: a pointer to the fd. */
		if (raw < FD_LIMIT)
			return FAKE_INVALID_VALUE;
		fd = *(const int *)os_handle;
	}
	err = fake_vmm_import(&hip, fd, &p);
	if (!err)
		*handle = (hipapi_mem_handle_t)(void *)p;
	return err;
}

hipapi_error_t hipMemImportFromShareableHandle(hipapi_mem_handle_t *handle, void *os_handle,
					       int handle_type)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_import(handle, os_handle, handle_type);
	return end(err);
}

hipapi_error_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
				    unsigned long long flags)
{
	int err = begin(__func__, FAKE_OUT_OF_MEMORY);

	(void)addr; /* a hint */
	if (!err && !has_vmm())
		err = FAKE_NOT_SUPPORTED;
	if (!err && flags)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_reserve(&hip, size, alignment, ptr);
	return end(err);
}

hipapi_error_t hipMemAddressFree(void *ptr, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_vmm_free(&hip, ptr, size);
	return end(err);
}

hipapi_error_t hipMemMap(void *ptr, size_t size, size_t offset, hipapi_mem_handle_t handle,
			 unsigned long long flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = NULL;

	/* HIP 6.2 takes offset 0 and flags 0 only. */
	if (!err && (!ptr || flags || !(p = fake_vmm_find(&hip, handle))))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_map(&hip, ptr, size, offset, p);
	return end(err);
}

hipapi_error_t hipMemUnmap(void *ptr, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_vmm_unmap(&hip, ptr, size);
	return end(err);
}

hipapi_error_t hipMemSetAccess(void *ptr, size_t size, const struct hipapi_access_desc *desc,
			       size_t count)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!desc || !count))
		err = FAKE_INVALID_VALUE;
	for (size_t i = 0; !err && i < count; i++) {
		if (desc[i].location.type != HIPAPI_MEM_LOCATION_DEVICE ||
		    desc[i].flags != HIPAPI_MEM_ACCESS_READWRITE)
			err = FAKE_INVALID_VALUE;
		else
			err = fake_check_device(&hip, desc[i].location.id);
	}
	if (!err)
		err = fake_vmm_set_access(&hip, ptr, size);
	return end(err);
}

static int do_range_handle(void *handle, void *ptr, size_t size, int handle_type,
			   unsigned long long flags)
{
	struct hip_buf *b;
	int err;

	if (hip.version < V(6, 0) || !hip.dmabuf)
		return FAKE_NOT_SUPPORTED;
	if (!handle || handle_type != HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD || flags)
		return FAKE_INVALID_VALUE;
	/* The fd stands for the whole allocation: only ranges starting at its base. */
	b = find_buf(ptr, false);
	if (!b || b->kind != BUF_MALLOC || !size || size > fake_align_up(b->size, 4096))
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, b->dev);
	if (err)
		return err;
	*(int *)handle = fcntl(b->fd, F_DUPFD_CLOEXEC, 0);
	return *(int *)handle < 0 ? FAKE_OUT_OF_MEMORY : FAKE_SUCCESS;
}

hipapi_error_t hipMemGetHandleForAddressRange(void *handle, void *ptr, size_t size, int handle_type,
					      unsigned long long flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_range_handle(handle, ptr, size, handle_type, flags);
	return end(err);
}

static struct hip_extmem *find_extmem(const void *mem)
{
	for (struct hip_extmem *e = extmems; e; e = e->next)
		if ((const void *)e == mem)
			return e;
	return NULL;
}

static int do_import_external(hipapi_external_memory_t *out,
			      const struct hipapi_external_memory_handle_desc *desc)
{
	struct hip_extmem *e;
	uint64_t size;
	int dev, err;

	if (!out || !desc || desc->type != HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD || !desc->size ||
	    desc->flags > 1)
		return FAKE_INVALID_VALUE;
	dev = fake_memfd_device(&hip, desc->handle.fd, &size);
	if (dev < 0 || dev >= hip.ndev || desc->size > size)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, dev);
	if (err)
		return err;
	e = calloc(1, sizeof(*e));
	if (!e)
		return FAKE_OUT_OF_MEMORY;
	e->fd = desc->handle.fd; /* owned from now on, as with CUDA */
	e->dev = dev;
	e->size = desc->size;
	e->next = extmems;
	extmems = e;
	*out = e;
	return FAKE_SUCCESS;
}

hipapi_error_t hipImportExternalMemory(hipapi_external_memory_t *out,
				       const struct hipapi_external_memory_handle_desc *desc)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_import_external(out, desc);
	return end(err);
}

static int do_mapped_buffer(void **ptr, hipapi_external_memory_t mem,
			    const struct hipapi_external_memory_buffer_desc *desc)
{
	struct hip_extmem *e = find_extmem(mem);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), skip;
	struct hip_buf *b;
	int err;

	if (!ptr || !e || !desc || !desc->size || desc->flags || desc->offset > e->size ||
	    desc->size > e->size - desc->offset)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(&hip, e->dev);
	if (err)
		return err;
	b = new_buf(BUF_EXTERNAL, e->dev);
	if (!b)
		return FAKE_OUT_OF_MEMORY;
	skip = desc->offset % page;
	b->map_len = (size_t)(desc->size + skip);
	b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd,
		      (off_t)(desc->offset - skip));
	if (b->map == MAP_FAILED) {
		free(b);
		return FAKE_OUT_OF_MEMORY;
	}
	b->ptr = b->map + skip;
	b->size = (size_t)desc->size;
	b->next = bufs;
	bufs = b;
	*ptr = b->ptr;
	return FAKE_SUCCESS;
}

hipapi_error_t
hipExternalMemoryGetMappedBuffer(void **ptr, hipapi_external_memory_t mem,
				 const struct hipapi_external_memory_buffer_desc *desc)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = do_mapped_buffer(ptr, mem, desc);
	return end(err);
}

hipapi_error_t hipDestroyExternalMemory(hipapi_external_memory_t mem)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct hip_extmem *e = err ? NULL : find_extmem(mem), **ep;

	if (!err && !e)
		err = FAKE_INVALID_VALUE;
	if (!err) {
		/* Buffers mapped from it stay until hipFree. */
		for (ep = &extmems; *ep != e; ep = &(*ep)->next) {
		}
		*ep = e->next;
		close(e->fd);
		err = fake_device_lost(&hip, e->dev) ? FAKE_NO_DEVICE : FAKE_SUCCESS;
		free(e);
	}
	return end(err);
}

hipapi_error_t hipDeviceGetDefaultMemPool(hipapi_mem_pool_t *pool, int device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !pool)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, device);
	if (!err)
		*pool = &pools[device];
	return end(err);
}

hipapi_error_t hipMemPoolTrimTo(hipapi_mem_pool_t pool, size_t keep)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED), dev = -1;

	for (int i = 0; i < hip.ndev; i++)
		if (pool == (void *)&pools[i])
			dev = i;
	if (!err && dev < 0)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&hip, dev);
	if (!err)
		trim(dev, keep);
	return end(err);
}

/* Every export has the exact type the project's loader expects. */
#define HIP_CHECK(name, required, ret, params) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), #name);
HIPAPI_FUNCTIONS(HIP_CHECK)
#undef HIP_CHECK
