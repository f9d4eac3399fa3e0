/* SPDX-License-Identifier: MIT */
/* allocator.c: PyTorch's allocation hooks over rocmmemd leases: arenas, leases, books_counters. */
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

#include "books.h"
#include "config.h"
#include "connect.h"
#include "rocmmem.h"
#include "runtime.h"
#include "suballoc.h"

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

/* The books, under books_lock (books.h). */
static struct suballoc sa;
static bool sa_ready;
static struct arena *arenas;
static struct sa_region *kept; /* the empty lease kept for reuse, if any */
static unsigned releasing;     /* leases taken out of the books, not yet given back */
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;

/* ---------------------------------------------------------------------------------------- */
/* Leases */

static int64_t trim_empty(void);

/*
 * lease_for takes a lease for an allocation of size bytes: a whole chunk (or the tensor's
 * own lease) when the daemon has it free at once; else, near the budget, the allocator first
 * gives back its own empty leases and then asks for just what the tensor needs, waiting for
 * it in the daemon's queue up to the timeout. Read lock held.
 */
static int lease_for(int device, uint64_t size, uint64_t model, rocmmem_lease **out)
{
	uint64_t exact = config_round_granule(suballoc_round(size)), first;
	int64_t timeout = config_timeout_ms();
	char why[400] = "", want[32], need[32];
	unsigned index;
	int rc;

	rc = connect_map_device(device, &index);
	if (rc)
		return rc;
	pthread_mutex_lock(&books_lock);
	first = exact < config_chunk_bytes() ? config_chunk_bytes() : exact;
	pthread_mutex_unlock(&books_lock);
	rc = connect_acquire(index, first, 0, model, out, why, sizeof(why));
	if ((rc == -ENOMEM || rc == -E2BIG) && (timeout != 0 || first != exact)) {
		/* An empty lease of ours may be what stands in the way. */
		trim_empty();
		rc = connect_acquire(index, exact, timeout, model, out, why, sizeof(why));
	}
	if (rc) {
		books_fmt_bytes(want, sizeof(want), exact);
		books_fmt_bytes(need, sizeof(need), size);
		books_alloc_failed("Could not lease %s on device %d for an allocation of %s: %s",
				   want, device, need, why);
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
	pthread_mutex_lock(&books_lock);
	books_counters.lease_releases++;
	if (--releasing == 0)
		pthread_cond_broadcast(&released);
	pthread_mutex_unlock(&books_lock);
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
	books_counters.leases--;
	books_counters.leased_bytes -= size;
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
	a->backend = connect_backend();
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
	books_counters.allocs_total++;
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

	rc = connect_enter();
	if (rc) {
		books_failed(); /* connect_enter said why */
		return NULL;
	}
	rc = lease_for(device, size, model, &lease);
	if (rc) {
		connect_leave();
		return NULL;
	}
	pthread_mutex_lock(&books_lock);
	if (!sa_ready)
		sa_ready = suballoc_init(&sa) == 0;
	a = sa_ready ? arena_find(device, model, stream, true) : NULL;
	if (a)
		region = suballoc_add_region(&sa, &a->sa, (uintptr_t)rocmmem_lease_ptr(lease),
					     rocmmem_lease_size(lease), lease);
	if (region) {
		books_counters.leases++;
		books_counters.leased_bytes += region->size;
		books_counters.lease_acquires++;
		p = suballoc_alloc_in(&sa, region, size);
		if (p) {
			served(region);
		} else {
			books_counters.leases--;
			books_counters.leased_bytes -= region->size;
			suballoc_remove_region(&sa, region);
			region = NULL;
		}
	}
	if (!p) {
		books_counters.failed_allocs++;
		books_error_locked(
		    "Could not allocate: out of host memory for the allocator's books");
		d.lease = lease;
		d.backend = connect_backend(); /* read lock held: the connection's */
		d.device = device;
		releasing++;
	}
	pthread_mutex_unlock(&books_lock);
	if (!p)
		give_back(&d);
	connect_leave();
	return (void *)p;
}

ROCMMEM_TORCH_EXPORT void *rocmmem_torch_alloc(ssize_t size, int device, void *stream)
{
	uint64_t model = rocmmem_torch_get_model();
	struct sa_region *region;
	struct arena *a;
	uintptr_t p = 0;

	if (size <= 0) {
		if (size < 0)
			books_alloc_failed("Could not allocate %zd bytes: a negative size", size);
		return NULL;
	}
	if (device < 0 || device >= CONNECT_MAX_ORDINALS) {
		books_alloc_failed("Could not allocate on device %d: not a device ordinal", device);
		return NULL;
	}
	if (!suballoc_round((uint64_t)size)) {
		books_alloc_failed("Could not allocate %zd bytes: too large", size);
		return NULL;
	}
	pthread_mutex_lock(&books_lock);
	a = sa_ready ? arena_find(device, model, stream, false) : NULL;
	if (a) {
		p = suballoc_alloc(&sa, &a->sa, (uint64_t)size, &region);
		if (p)
			served(region);
	}
	pthread_mutex_unlock(&books_lock);
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
	pthread_mutex_lock(&books_lock);
	rc = sa_ready ? suballoc_free(&sa, (uintptr_t)ptr,
				      size < 0 ? SUBALLOC_ANY_SIZE : (uint64_t)size, &region)
		      : -ENOENT;
	if (rc) {
		books_counters.bad_frees++;
		if (rc == -EINVAL)
			books_error_locked(
			    "Bad free of %p (device %d): allocated with %llu bytes, "
			    "freed with %zd; left allocated",
			    ptr, device,
			    (unsigned long long)suballoc_block_size(&sa, (uintptr_t)ptr), size);
		else if (rc == -EALREADY)
			books_error_locked("Bad free of %p (%zd bytes, device %d): not a live "
					   "allocation (freed already, or inside one)",
					   ptr, size, device);
		else
			books_error_locked("Bad free of %p (%zd bytes, device %d): not memory of "
					   "this allocator",
					   ptr, size, device);
		pthread_mutex_unlock(&books_lock);
		return;
	}
	books_counters.frees_total++;
	if (region->live == 0 && region != kept) {
		if (region->size <= config_keep_bytes()) {
			/* Keep this one against allocate-free loops; the one kept before goes. */
			if (kept && detach(kept, &out[n]))
				n++;
			kept = region;
		} else if (detach(region, &out[n])) {
			n++;
		}
	}
	pthread_mutex_unlock(&books_lock);
	for (unsigned i = 0; i < n; i++)
		give_back(&out[i]);
}

/* ---------------------------------------------------------------------------------------- */
/* Housekeeping */

/* take_empty detaches one empty region, or returns false. */
static bool take_empty(struct doomed *d, uint64_t *bytes)
{
	bool found = false;

	pthread_mutex_lock(&books_lock);
	for (struct arena *a = arenas; a && !found; a = a->next) {
		for (struct sa_region *r = a->sa.regions; r; r = r->next) {
			if (r->live == 0) {
				*bytes = r->size;
				found = detach(r, d);
				break;
			}
		}
	}
	pthread_mutex_unlock(&books_lock);
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

	pthread_mutex_lock(&books_lock);
	drop_idle_arenas();
	pthread_mutex_unlock(&books_lock);
	return total;
}

ROCMMEM_TORCH_EXPORT int64_t rocmmem_torch_shutdown(void)
{
	struct doomed *list = NULL;
	size_t n = 0, count = 0;
	rocmmem_client *c;
	int64_t live;
	bool owned;

	connect_exclusive();
	pthread_mutex_lock(&books_lock);
	/* Frees and trims returning leases finish first; new ones find nothing to return. */
	while (releasing)
		pthread_cond_wait(&released, &books_lock);
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
			books_counters.lease_releases++;
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
	books_counters.leases = 0;
	books_counters.leased_bytes = 0;
	c = connect_forget(&owned);
	pthread_mutex_unlock(&books_lock);
	for (size_t i = 0; i < n; i++)
		hand_back(&list[i]);
	free(list);
	if (c && owned)
		rocmmem_disconnect(c);
	connect_leave();
	return live;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_stats(struct rocmmem_torch_stats *out)
{
	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&books_lock);
	*out = books_counters;
	if (sa_ready) {
		out->used_bytes = sa.used_bytes;
		out->requested_bytes = sa.requested_bytes;
		out->allocations = sa.live;
	}
	out->kept_bytes = kept ? kept->size : 0;
	out->arenas = 0;
	for (const struct arena *a = arenas; a; a = a->next)
		out->arenas += a->sa.nregions > 0;
	pthread_mutex_unlock(&books_lock);
	return 0;
}
