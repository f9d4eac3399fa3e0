/* SPDX-License-Identifier: MIT */
/*
 * connect.c: the allocator's connection to the daemon: made on the first allocation or by
 * rocmmem_torch_init (or lent by rocmmem_torch_init_client), the daemon's devices matched to
 * PyTorch's ordinals by PCI bus id, and leases acquired through it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "books.h"
#include "config.h"
#include "connect.h"
#include "suballoc.h"

#define CONNECT_TIMEOUT_MS 5000
#define CONNECT_RETRY_MS 1000 /* after a failed lazy connect, fail fast this long */
#define MAX_DEVICES 64
#define LEASE_TAG "torch"

/*
 * The connection, under `conn`: read-locked while a lease is acquired through it,
 * write-locked to connect and to disconnect. Releases need neither: rocmmem_torch_shutdown
 * waits for those in flight before it disconnects.
 */
static pthread_rwlock_t conn = PTHREAD_RWLOCK_INITIALIZER;
static rocmmem_client *client;
static bool client_owned;
static enum torch_backend backend;
static unsigned ndevices;
static char device_bus[MAX_DEVICES][32];
static _Atomic int ordinal_map[CONNECT_MAX_ORDINALS]; /* daemon index + 1; 0: not looked up */
static struct timespec connect_failed_at;
static int connect_error;
/* What rocmmem_torch_init was given, for connecting again after rocmmem_torch_shutdown. */
static char *init_socket, *init_name;

static long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* adopt makes c the allocator's connection: its backend, its devices. Write lock held. */
static int adopt(rocmmem_client *c, bool owned)
{
	const char *name = rocmmem_client_backend(c);
	enum torch_backend b = TORCH_BACKEND_HOST;
	rocmmem_status *st = NULL;
	char why[256] = "";
	int rc;

	if (name && strcmp(name, "hip") == 0)
		b = TORCH_BACKEND_HIP;
	else if (name && strcmp(name, "cuda") == 0)
		b = TORCH_BACKEND_CUDA;
	rc = runtime_load(b, why, sizeof(why));
	if (rc) {
		books_error("Could not load the %s runtime the daemon's leases need: %s", name,
			    why);
		return rc;
	}
	ndevices = 0;
	if (b != TORCH_BACKEND_HOST) {
		rc = rocmmem_status_get(c, &st);
		if (rc) {
			books_error("Could not read the daemon's devices: %s",
				    rocmmem_last_error()[0] ? rocmmem_last_error()
							    : rocmmem_strerror(rc));
			return rc;
		}
		for (size_t i = 0; i < rocmmem_status_device_count(st) && i < MAX_DEVICES; i++) {
			const struct rocmmem_device_info *dev = rocmmem_status_device(st, i);

			snprintf(device_bus[i], sizeof(device_bus[i]), "%s",
				 dev->pci_bus_id ? dev->pci_bus_id : "");
			ndevices++;
		}
		rocmmem_status_free(st);
	}
	for (unsigned i = 0; i < CONNECT_MAX_ORDINALS; i++)
		atomic_store(&ordinal_map[i], 0);
	backend = b;
	client = c;
	client_owned = owned;
	return 0;
}

/* connect_locked connects with the defaults or the given socket and name. Write lock held. */
static int connect_locked(const char *socket, const char *name, bool lazy)
{
	rocmmem_client *c = NULL;
	int rc;

	if (lazy && connect_error && ms_since(&connect_failed_at) < CONNECT_RETRY_MS)
		return connect_error;
	rc = rocmmem_connect(socket, name, CONNECT_TIMEOUT_MS, &c);
	if (rc == 0) {
		rc = adopt(c, true);
		if (rc)
			rocmmem_disconnect(c);
	} else {
		books_error("Could not connect to rocmmemd: %s",
			    rocmmem_last_error()[0] ? rocmmem_last_error() : rocmmem_strerror(rc));
	}
	connect_error = rc;
	if (rc)
		clock_gettime(CLOCK_MONOTONIC, &connect_failed_at);
	return rc;
}

int connect_enter(void)
{
	for (;;) {
		int rc;

		pthread_rwlock_rdlock(&conn);
		if (client)
			return 0;
		pthread_rwlock_unlock(&conn);
		pthread_rwlock_wrlock(&conn);
		rc = client ? 0 : connect_locked(init_socket, init_name, true);
		pthread_rwlock_unlock(&conn);
		if (rc)
			return rc;
	}
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_init(const char *socket, const char *name)
{
	int rc;

	config_init();
	pthread_rwlock_wrlock(&conn);
	if (client) {
		rc = -EALREADY;
	} else {
		free(init_socket);
		free(init_name);
		init_socket = socket && socket[0] ? strdup(socket) : NULL;
		init_name = name ? strdup(name) : NULL;
		rc = connect_locked(init_socket, init_name, false);
	}
	pthread_rwlock_unlock(&conn);
	return rc;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_init_client(rocmmem_client *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	config_init();
	pthread_rwlock_wrlock(&conn);
	rc = client ? -EALREADY : adopt(c, false);
	if (rc == 0)
		connect_error = 0;
	pthread_rwlock_unlock(&conn);
	return rc;
}

int connect_map_device(int ordinal, unsigned *index)
{
	char bus[64];
	int v;

	if (backend == TORCH_BACKEND_HOST) {
		*index = (unsigned)ordinal;
		return 0;
	}
	v = atomic_load(&ordinal_map[ordinal]);
	if (v > 0) {
		*index = (unsigned)(v - 1);
		return 0;
	}
	if (runtime_bus_id(backend, ordinal, bus, sizeof(bus))) {
		books_alloc_failed("Could not find device %d of this process in its GPU runtime",
				   ordinal);
		return -ENODEV;
	}
	for (unsigned i = 0; i < ndevices; i++) {
		if (runtime_same_bus_id(bus, device_bus[i])) {
			atomic_store(&ordinal_map[ordinal], (int)i + 1);
			*index = i;
			return 0;
		}
	}
	books_alloc_failed("Device %d of this process (PCI %s) is not one of rocmmemd's devices",
			   ordinal, bus);
	return -ENODEV;
}

int connect_acquire(unsigned index, uint64_t bytes, int64_t timeout, uint64_t model,
		    rocmmem_lease **out, char *why, size_t why_len)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req),
	    .device = index,
	    .size = bytes,
	    .timeout_ms = timeout,
	    .tag = LEASE_TAG,
	    .flags = 0,
	    .model_id = model,
	};
	struct runtime_saved saved;
	uintptr_t p;
	int rc;

	/* Importing a GPU lease switches the thread's current device: PyTorch's is kept. */
	runtime_save(backend, &saved);
	rc = rocmmem_lease_acquire(client, &req, out);
	if (rc) {
		snprintf(why, why_len, "%s",
			 rocmmem_last_error()[0] ? rocmmem_last_error() : rocmmem_strerror(rc));
		runtime_restore(backend, &saved);
		return rc;
	}
	p = (uintptr_t)rocmmem_lease_ptr(*out);
	if (!p || p % SUBALLOC_ALIGN || rocmmem_lease_size(*out) % SUBALLOC_ALIGN ||
	    rocmmem_lease_size(*out) < bytes) {
		snprintf(why, why_len, "the lease's address %#lx or size %llu is not usable",
			 (unsigned long)p, (unsigned long long)rocmmem_lease_size(*out));
		rocmmem_lease_release(*out);
		*out = NULL;
		rc = -EPROTO;
	}
	runtime_restore(backend, &saved);
	return rc;
}

void connect_leave(void)
{
	pthread_rwlock_unlock(&conn);
}

void connect_exclusive(void)
{
	pthread_rwlock_wrlock(&conn);
}

enum torch_backend connect_backend(void)
{
	return backend;
}

rocmmem_client *connect_forget(bool *owned)
{
	rocmmem_client *c = client;

	*owned = client_owned;
	client = NULL;
	client_owned = false;
	connect_error = 0;
	return c;
}
