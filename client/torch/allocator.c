/* SPDX-License-Identifier: MIT */
/* allocator.c: PyTorch's allocation hooks over rocmmemd leases: arenas, leases, counters. */
#include "rocmmem_torch.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rocmmem.h"
#include "runtime.h"
#include "size.h"
#include "suballoc.h"

#define MiB (UINT64_C(1) << 20)
#define GRANULE (2 * MiB) /* the daemon grants in 2 MiB granules */
#define DEFAULT_CHUNK (64 * MiB)
#define MAX_CHUNK (UINT64_C(1) << 40)
#define DEFAULT_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 5000
#define CONNECT_RETRY_MS 1000 /* after a failed lazy connect, fail fast this long */
#define MAX_ORDINALS 64
#define MAX_DEVICES 64
#define LEASE_TAG "torch"

_Static_assert(ROCMMEM_TORCH_ALIGN == SUBALLOC_ALIGN, "one alignment");

/* The memory of one (device, model, stream): its leases share nothing with any other. */
struct arena {
	struct sa_arena sa; /* first: a region's arena pointer is its arena's */
	enum torch_backend backend;
	int device; /* PyTorch's ordinal */
	uint64_t model_id;
	void *stream;
	struct arena *next;
};

/* A lease taken out of the books, on its way back to the daemon. */
struct doomed {
	rocmmem_lease *lease;
	enum torch_backend backend;
	int device;
};

/*
 * The books, under `lock`. No call to the daemon or the GPU runtime is made while holding
 * it: a thread waiting for memory never stalls another thread's sub-allocation or free.
 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
static struct suballoc sa;
static bool sa_ready;
static struct arena *arenas;
static struct sa_region *kept; /* the empty lease kept for reuse, if any */
static unsigned releasing;     /* leases taken out of the books, not yet given back */
static struct rocmmem_torch_stats counters;
static uint64_t chunk_bytes = DEFAULT_CHUNK, keep_bytes = DEFAULT_CHUNK;
static bool keep_set;

/*
 * The connection, under `conn`: read-locked while a lease is acquired through it,
 * write-locked to connect and to disconnect. Releases need neither: rocmmem_torch_shutdown
 * waits for those in flight (`releasing`) before it disconnects.
 */
static pthread_rwlock_t conn = PTHREAD_RWLOCK_INITIALIZER;
static rocmmem_client *client;
static bool client_owned;
static enum torch_backend backend;
static unsigned ndevices;
static char device_bus[MAX_DEVICES][32];
static _Atomic int ordinal_map[MAX_ORDINALS]; /* daemon index + 1; 0: not looked up yet */
static struct timespec connect_failed_at;
static int connect_error;
/* What rocmmem_torch_init was given, for connecting again after rocmmem_torch_shutdown. */
static char *init_socket, *init_name;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static _Atomic int64_t timeout_ms = DEFAULT_TIMEOUT_MS;

static _Thread_local uint64_t thread_model;

/* ---------------------------------------------------------------------------------------- */
/* Messages */

static void fmt_bytes(char *buf, size_t len, uint64_t n)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = -1;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
	else if (n % (UINT64_C(1) << (10 * (u + 1))) == 0)
		snprintf(buf, len, "%.0f %s", v, units[u]);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
}

/* set_error_locked records the latest failure for rocmmem_torch_stats. */
__attribute__((format(printf, 1, 2))) static void set_error_locked(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(counters.last_error, sizeof(counters.last_error), fmt, ap);
	va_end(ap);
}

/* count_failure counts a NULL returned to PyTorch whose reason is recorded already. */
static void count_failure(void)
{
	pthread_mutex_lock(&lock);
	counters.failed_allocs++;
	pthread_mutex_unlock(&lock);
}

/* alloc_failed counts a NULL returned to PyTorch and says why. */
__attribute__((format(printf, 1, 2))) static void alloc_failed(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&lock);
	counters.failed_allocs++;
	va_start(ap, fmt);
	vsnprintf(counters.last_error, sizeof(counters.last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&lock);
}

/* ---------------------------------------------------------------------------------------- */
/* Configuration */

/* parse_size reads a size by the rule of every rocmmem tool (common/size.c: "64M", "0.9G",
 * truncated to whole bytes), at most MAX_CHUNK. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v;
	int err = size_parse(s, &v);

	if (err)
		return err;
	if (v > MAX_CHUNK)
		return -ERANGE;
	*out = v;
	return 0;
}

static uint64_t round_granule(uint64_t n)
{
	return (n + GRANULE - 1) & ~(GRANULE - 1);
}

/* config_read takes the environment's settings once; later calls of the setters win. */
static void config_read(void)
{
	const char *v;
	uint64_t n;

	pthread_mutex_lock(&lock);
	v = getenv("ROCMMEM_TORCH_CHUNK_SIZE");
	if (v && parse_size(v, &n) == 0 && n > 0)
		chunk_bytes = round_granule(n);
	v = getenv("ROCMMEM_TORCH_KEEP_EMPTY");
	if (v && parse_size(v, &n) == 0) {
		keep_bytes = n;
		keep_set = true;
	}
	if (!keep_set)
		keep_bytes = chunk_bytes;
	pthread_mutex_unlock(&lock);
	v = getenv("ROCMMEM_TORCH_TIMEOUT");
	if (v && *v) {
		char *end;
		double s = strtod(v, &end);

		if (end != v && *end == '\0')
			atomic_store(&timeout_ms, s < 0 ? -1 : (int64_t)(s * 1000));
	}
}

static void config_init(void)
{
	pthread_once(&config_once, config_read);
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_timeout(int64_t ms)
{
	config_init();
	atomic_store(&timeout_ms, ms < 0 ? -1 : ms);
	return 0;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_chunk_size(uint64_t bytes)
{
	if (bytes > MAX_CHUNK)
		return -EINVAL;
	config_init();
	pthread_mutex_lock(&lock);
	chunk_bytes = bytes ? round_granule(bytes) : DEFAULT_CHUNK;
	if (!keep_set)
		keep_bytes = chunk_bytes;
	pthread_mutex_unlock(&lock);
	return 0;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_keep_empty(uint64_t bytes)
{
	config_init();
	pthread_mutex_lock(&lock);
	keep_bytes = bytes;
	keep_set = true;
	pthread_mutex_unlock(&lock);
	return 0;
}

ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_set_model(uint64_t model_id)
{
	uint64_t old = thread_model;

	thread_model = model_id;
	return old;
}

ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_get_model(void)
{
	return thread_model;
}

/* ---------------------------------------------------------------------------------------- */
/* The connection */

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
		pthread_mutex_lock(&lock);
		set_error_locked("Could not load the %s runtime the daemon's leases need: %s", name,
				 why);
		pthread_mutex_unlock(&lock);
		return rc;
	}
	ndevices = 0;
	if (b != TORCH_BACKEND_HOST) {
		rc = rocmmem_status_get(c, &st);
		if (rc) {
			pthread_mutex_lock(&lock);
			set_error_locked("Could not read the daemon's devices: %s",
					 rocmmem_last_error()[0] ? rocmmem_last_error()
								 : rocmmem_strerror(rc));
			pthread_mutex_unlock(&lock);
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
	for (unsigned i = 0; i < MAX_ORDINALS; i++)
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
		pthread_mutex_lock(&lock);
		set_error_locked("Could not connect to rocmmemd: %s", rocmmem_last_error()[0]
									  ? rocmmem_last_error()
									  : rocmmem_strerror(rc));
		pthread_mutex_unlock(&lock);
	}
	connect_error = rc;
	if (rc)
		clock_gettime(CLOCK_MONOTONIC, &connect_failed_at);
	return rc;
}

/* conn_enter read-locks a live connection, connecting first if there is none. */
static int conn_enter(void)
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

/* map_device finds the daemon's index of PyTorch's device ordinal. Read lock held. */
static int map_device(int ordinal, unsigned *index)
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
		alloc_failed("Could not find device %d of this process in its GPU runtime",
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
	alloc_failed("Device %d of this process (PCI %s) is not one of rocmmemd's devices", ordinal,
		     bus);
	return -ENODEV;
}

/* ---------------------------------------------------------------------------------------- */
/* Leases */

/* acquire asks the daemon for one lease. Read lock held. */
static int acquire(unsigned index, uint64_t bytes, int64_t timeout, uint64_t model,
		   rocmmem_lease **out, char *why, size_t why_len)
{
	struct rocmmem_lease_request req = {
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

static int64_t trim_empty(void);

/*
 * lease_for takes a lease for an allocation of size bytes: a whole chunk (or the tensor's
 * own lease) when the daemon has it free at once; else, near the budget, the allocator first
 * gives back its own empty leases and then asks for just what the tensor needs, waiting for
 * it in the daemon's queue up to the timeout. Read lock held.
 */
static int lease_for(int device, uint64_t size, uint64_t model, rocmmem_lease **out)
{
	uint64_t exact = round_granule(suballoc_round(size)), first;
	int64_t timeout = atomic_load(&timeout_ms);
	char why[400] = "", want[32], need[32];
	unsigned index;
	int rc;

	rc = map_device(device, &index);
	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	first = exact < chunk_bytes ? chunk_bytes : exact;
	pthread_mutex_unlock(&lock);
	rc = acquire(index, first, 0, model, out, why, sizeof(why));
	if ((rc == -ENOMEM || rc == -E2BIG) && (timeout != 0 || first != exact)) {
		/* An empty lease of ours may be what stands in the way. */
		trim_empty();
		rc = acquire(index, exact, timeout, model, out, why, sizeof(why));
	}
	if (rc) {
		fmt_bytes(want, sizeof(want), exact);
		fmt_bytes(need, sizeof(need), size);
		alloc_failed("Could not lease %s on device %d for an allocation of %s: %s", want,
			     device, need, why);
	}
	return rc;
}

/* hand_back returns a lease to the daemon once the device has finished what it queued. */
static void hand_back(const struct doomed *d)
{
	struct runtime_saved saved;

	runtime_save(d->backend, &saved);
	runtime_sync(d->backend, d->device);
	rocmmem_lease_release(d->lease);
	runtime_restore(d->backend, &saved);
}

/* give_back hands back a lease taken out of the books (detach) and counts it. Called with no
 * lock held. */
static void give_back(const struct doomed *d)
{
	hand_back(d);
	pthread_mutex_lock(&lock);
	counters.lease_releases++;
	if (--releasing == 0)
		pthread_cond_broadcast(&released);
	pthread_mutex_unlock(&lock);
}

/* detach takes an empty region out of the books for give_back. Lock held. Returns false
 * (and does nothing) for a region that is not empty. */
static bool detach(struct sa_region *r, struct doomed *d)
{
	const struct arena *a = (const struct arena *)r->arena;
	uint64_t size = r->size;

	d->lease = r->user;
	d->backend = a->backend;
	d->device = a->device;
	if (suballoc_remove_region(&sa, r) != 0)
		return false;
	if (kept == r)
		kept = NULL;
	counters.leases--;
	counters.leased_bytes -= size;
	releasing++;
	return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Allocation */

/* arena_find looks up (device, model, stream), moving it to the front. Lock held. */
static struct arena *arena_find(int device, uint64_t model, void *stream, bool create)
{
	struct arena **pp, *a;

	for (pp = &arenas; (a = *pp); pp = &a->next) {
		if (a->device == device && a->model_id == model && a->stream == stream) {
			if (pp != &arenas) {
				*pp = a->next;
				a->next = arenas;
				arenas = a;
			}
			return a;
		}
	}
	if (!create)
		return NULL;
	a = malloc(sizeof(*a));
	if (!a)
		return NULL;
	sa_arena_init(&a->sa);
	a->backend = backend;
	a->device = device;
	a->model_id = model;
	a->stream = stream;
	a->next = arenas;
	arenas = a;
	return a;
}

/* served counts an allocation from region. Lock held. */
static void served(const struct sa_region *region)
{
	counters.allocs_total++;
	if (kept == region)
		kept = NULL; /* no longer empty */
}

/* alloc_slow takes a new lease for an allocation the arena's leases cannot hold. */
static void *alloc_slow(uint64_t size, int device, void *stream, uint64_t model)
{
	struct sa_region *region = NULL;
	rocmmem_lease *lease = NULL;
	struct doomed d = {0};
	struct arena *a;
	uintptr_t p = 0;
	int rc;

	rc = conn_enter();
	if (rc) {
		count_failure(); /* connect_locked said why */
		return NULL;
	}
	rc = lease_for(device, size, model, &lease);
	if (rc) {
		pthread_rwlock_unlock(&conn);
		return NULL;
	}
	pthread_mutex_lock(&lock);
	if (!sa_ready)
		sa_ready = suballoc_init(&sa) == 0;
	a = sa_ready ? arena_find(device, model, stream, true) : NULL;
	if (a)
		region = suballoc_add_region(&sa, &a->sa, (uintptr_t)rocmmem_lease_ptr(lease),
					     rocmmem_lease_size(lease), lease);
	if (region) {
		counters.leases++;
		counters.leased_bytes += region->size;
		counters.lease_acquires++;
		p = suballoc_alloc_in(&sa, region, size);
		if (p) {
			served(region);
		} else {
			counters.leases--;
			counters.leased_bytes -= region->size;
			suballoc_remove_region(&sa, region);
			region = NULL;
		}
	}
	if (!p) {
		counters.failed_allocs++;
		set_error_locked(
		    "Could not allocate: out of host memory for the allocator's books");
		d.lease = lease;
		d.backend = backend; /* read lock held: the connection's */
		d.device = device;
		releasing++;
	}
	pthread_mutex_unlock(&lock);
	if (!p)
		give_back(&d);
	pthread_rwlock_unlock(&conn);
	return (void *)p;
}

ROCMMEM_TORCH_EXPORT void *rocmmem_torch_alloc(ssize_t size, int device, void *stream)
{
	uint64_t model = thread_model;
	struct sa_region *region;
	struct arena *a;
	uintptr_t p = 0;

	if (size <= 0) {
		if (size < 0)
			alloc_failed("Could not allocate %zd bytes: a negative size", size);
		return NULL;
	}
	if (device < 0 || device >= MAX_ORDINALS) {
		alloc_failed("Could not allocate on device %d: not a device ordinal", device);
		return NULL;
	}
	if (!suballoc_round((uint64_t)size)) {
		alloc_failed("Could not allocate %zd bytes: too large", size);
		return NULL;
	}
	pthread_mutex_lock(&lock);
	a = sa_ready ? arena_find(device, model, stream, false) : NULL;
	if (a) {
		p = suballoc_alloc(&sa, &a->sa, (uint64_t)size, &region);
		if (p)
			served(region);
	}
	pthread_mutex_unlock(&lock);
	if (p)
		return (void *)p;
	config_init();
	return alloc_slow((uint64_t)size, device, stream, model);
}

ROCMMEM_TORCH_EXPORT void rocmmem_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
	struct sa_region *region = NULL;
	struct doomed out[2];
	unsigned n = 0;
	int rc;

	(void)stream;
	if (!ptr)
		return;
	pthread_mutex_lock(&lock);
	rc = sa_ready ? suballoc_free(&sa, (uintptr_t)ptr,
				      size < 0 ? SUBALLOC_ANY_SIZE : (uint64_t)size, &region)
		      : -ENOENT;
	if (rc) {
		counters.bad_frees++;
		if (rc == -EINVAL)
			set_error_locked(
			    "Bad free of %p (device %d): allocated with %llu bytes, "
			    "freed with %zd; left allocated",
			    ptr, device,
			    (unsigned long long)suballoc_block_size(&sa, (uintptr_t)ptr), size);
		else if (rc == -EALREADY)
			set_error_locked("Bad free of %p (%zd bytes, device %d): not a live "
					 "allocation (freed already, or inside one)",
					 ptr, size, device);
		else
			set_error_locked("Bad free of %p (%zd bytes, device %d): not memory of "
					 "this allocator",
					 ptr, size, device);
		pthread_mutex_unlock(&lock);
		return;
	}
	counters.frees_total++;
	if (region->live == 0 && region != kept) {
		if (region->size <= keep_bytes) {
			/* Keep this one against allocate-free loops; the one kept before goes. */
			if (kept && detach(kept, &out[n]))
				n++;
			kept = region;
		} else if (detach(region, &out[n])) {
			n++;
		}
	}
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < n; i++)
		give_back(&out[i]);
}

/* ---------------------------------------------------------------------------------------- */
/* Housekeeping */

/* take_empty detaches one empty region, or returns false. */
static bool take_empty(struct doomed *d, uint64_t *bytes)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (struct arena *a = arenas; a && !found; a = a->next) {
		for (struct sa_region *r = a->sa.regions; r; r = r->next) {
			if (r->live == 0) {
				*bytes = r->size;
				found = detach(r, d);
				break;
			}
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

/* drop_idle_arenas frees arenas without leases. Lock held. */
static void drop_idle_arenas(void)
{
	struct arena **pp = &arenas, *a;

	while ((a = *pp)) {
		if (a->sa.nregions == 0) {
			*pp = a->next;
			free(a);
		} else {
			pp = &a->next;
		}
	}
}

/* trim_empty gives every empty lease back; returns their bytes. */
static int64_t trim_empty(void)
{
	uint64_t total = 0, bytes;
	struct doomed d;

	while (take_empty(&d, &bytes)) {
		give_back(&d);
		total += bytes;
	}
	return (int64_t)total;
}

ROCMMEM_TORCH_EXPORT int64_t rocmmem_torch_trim(void)
{
	int64_t total = trim_empty();

	pthread_mutex_lock(&lock);
	drop_idle_arenas();
	pthread_mutex_unlock(&lock);
	return total;
}

ROCMMEM_TORCH_EXPORT int64_t rocmmem_torch_shutdown(void)
{
	struct doomed *list = NULL;
	size_t n = 0, count = 0;
	rocmmem_client *c;
	int64_t live;
	bool owned;

	pthread_rwlock_wrlock(&conn);
	pthread_mutex_lock(&lock);
	/* Frees and trims returning leases finish first; new ones find nothing to return. */
	while (releasing)
		pthread_cond_wait(&released, &lock);
	live = sa_ready ? (int64_t)sa.live : 0;
	count = sa_ready ? sa.nregions : 0;
	if (count)
		list = calloc(count, sizeof(*list));
	for (struct arena *a = arenas; a; a = a->next) {
		for (struct sa_region *r = a->sa.regions; r; r = r->next) {
			struct doomed d = {
			    .lease = r->user, .backend = a->backend, .device = a->device};

			/* Every lease, live blocks or not: their memory goes back now. */
			if (list)
				list[n++] = d;
			else
				hand_back(&d); /* no memory for a list: under the lock, then */
			counters.lease_releases++;
		}
	}
	while (arenas) {
		struct arena *next = arenas->next;

		free(arenas);
		arenas = next;
	}
	if (sa_ready)
		suballoc_finish(&sa);
	sa_ready = false;
	kept = NULL;
	counters.leases = 0;
	counters.leased_bytes = 0;
	c = client;
	owned = client_owned;
	client = NULL;
	client_owned = false;
	connect_error = 0;
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < n; i++)
		hand_back(&list[i]);
	free(list);
	if (c && owned)
		rocmmem_disconnect(c);
	pthread_rwlock_unlock(&conn);
	return live;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_stats(struct rocmmem_torch_stats *out)
{
	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	*out = counters;
	if (sa_ready) {
		out->used_bytes = sa.used_bytes;
		out->requested_bytes = sa.requested_bytes;
		out->allocations = sa.live;
	}
	out->kept_bytes = kept ? kept->size : 0;
	out->arenas = 0;
	for (const struct arena *a = arenas; a; a = a->next)
		out->arenas += a->sa.nregions > 0;
	pthread_mutex_unlock(&lock);
	return 0;
}
