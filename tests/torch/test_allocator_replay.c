/* SPDX-License-Identifier: MIT */
/* test_allocator_replay.c: librocmmem_torch, loaded by path as PyTorch does, on a real daemon. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "fakegpu_paths.h"
#include "harness.h"
#include "rocmmem_torch.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/*
 * The library is opened once for the whole run with dlopen, by path, as
 * torch.cuda.memory.CUDAPluggableAllocator does (ctypes.CDLL), and its entry points are looked
 * up by name. Each test connects it to its own daemon and shuts it down at the end.
 */
static struct {
	void *handle;
	void *(*alloc)(ssize_t size, int device, void *stream);
	void (*free)(void *ptr, ssize_t size, int device, void *stream);
	int (*init)(const char *socket, const char *name);
	int (*init_client)(rocmmem_client *client);
	uint64_t (*set_model)(uint64_t model_id);
	int (*set_timeout)(int64_t timeout_ms);
	int (*set_chunk_size)(uint64_t bytes);
	int (*set_keep_empty)(uint64_t bytes);
	int (*stats)(struct rocmmem_torch_stats *out);
	int64_t (*trim)(void);
	int64_t (*shutdown)(void);
	/* librocmmem as the allocator's own copy has it (this program links another copy). */
	int (*connect)(const char *, const char *, int, rocmmem_client **);
	void (*disconnect)(rocmmem_client *);
	int (*model_register)(rocmmem_client *, const struct rocmmem_model_desc *, uint64_t *);
} T;

static void *sym(const char *name)
{
	void *p = dlsym(T.handle, name);

	if (!p)
		fail_msg("%s has no %s: %s", ROCMMEM_TORCH_SO, name, dlerror());
	return p;
}

static int load_library(void **state)
{
	(void)state;
	T.handle = dlopen(ROCMMEM_TORCH_SO, RTLD_NOW | RTLD_LOCAL);
	if (!T.handle) {
		fprintf(stderr, "dlopen %s: %s\n", ROCMMEM_TORCH_SO, dlerror());
		return -1;
	}
	*(void **)&T.alloc = sym("rocmmem_torch_alloc");
	*(void **)&T.free = sym("rocmmem_torch_free");
	*(void **)&T.init = sym("rocmmem_torch_init");
	*(void **)&T.init_client = sym("rocmmem_torch_init_client");
	*(void **)&T.set_model = sym("rocmmem_torch_set_model");
	*(void **)&T.set_timeout = sym("rocmmem_torch_set_timeout");
	*(void **)&T.set_chunk_size = sym("rocmmem_torch_set_chunk_size");
	*(void **)&T.set_keep_empty = sym("rocmmem_torch_set_keep_empty");
	*(void **)&T.stats = sym("rocmmem_torch_stats");
	*(void **)&T.trim = sym("rocmmem_torch_trim");
	*(void **)&T.shutdown = sym("rocmmem_torch_shutdown");
	*(void **)&T.connect = sym("rocmmem_connect");
	*(void **)&T.disconnect = sym("rocmmem_disconnect");
	*(void **)&T.model_register = sym("rocmmem_model_register");
	/* Only rocmmem_torch_* is exported: the library's internals stay out of PyTorch. */
	if (dlsym(T.handle, "suballoc_alloc") || dlsym(T.handle, "runtime_sync")) {
		fprintf(stderr, "%s exports its internals\n", ROCMMEM_TORCH_SO);
		return -1;
	}
	return 0;
}

static struct rocmmem_torch_stats stats(void)
{
	struct rocmmem_torch_stats s;

	assert_int_equal(T.stats(&s), 0);
	return s;
}

static void start(struct daemon_proc *d, const char *budget)
{
	const char *args[] = {"--budget", budget, NULL};

	if (harness_daemon_start(d, args) != 0)
		fail_msg("rocmmemd did not start");
}

/* finish shuts the library down and checks that the daemon got everything back. */
static void finish(struct daemon_proc *d)
{
	struct harness_totals t;

	T.shutdown();
	assert_true(harness_wait_totals(d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_totals(d, &t), 0);
	assert_int_equal(t.leased_bytes, 0);
	assert_int_equal(harness_daemon_stop(d), 0);
}

/* fresh: each test starts disconnected with the defaults, even after one that failed. */
static int fresh(void **state)
{
	(void)state;
	T.shutdown();
	T.set_chunk_size(0);
	T.set_keep_empty(64 * MiB);
	T.set_timeout(30000);
	T.set_model(0);
	return 0;
}

static struct harness_totals totals(const struct daemon_proc *d)
{
	struct harness_totals t;

	assert_int_equal(harness_totals(d, &t), 0);
	return t;
}

/* ---------------------------------------------------------------------------------------- */

/* The first allocation connects by itself ($ROCMMEM_SOCKET); leases go back when empty. */
static void test_lazy_connect_and_return(void **state)
{
	struct rocmmem_torch_stats s;
	struct harness_totals t;
	struct daemon_proc d;
	void *p, *q, *big;

	(void)state;
	start(&d, "2G");
	setenv("ROCMMEM_SOCKET", d.sock, 1);
	s = stats();
	assert_int_equal(s.leases, 0);

	p = T.alloc(1000, 0, NULL);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 512, 0);
	memset(p, 0xab, 1000); /* host backend: the lease is mapped here */
	q = T.alloc(3000, 0, NULL);
	assert_non_null(q);
	assert_int_equal((uintptr_t)q % 512, 0);
	assert_true((char *)q >= (char *)p + 1024 || (char *)p >= (char *)q + 3072);
	s = stats();
	assert_int_equal(s.leases, 1); /* both from one 64 MiB lease: one round trip */
	assert_int_equal(s.leased_bytes, 64 * MiB);
	assert_int_equal(s.allocations, 2);
	assert_int_equal(s.used_bytes, 1024 + 3072);
	assert_int_equal(s.requested_bytes, 4000);
	assert_int_equal(s.lease_acquires, 1);
	t = totals(&d);
	assert_int_equal(t.leased_bytes, 64 * MiB);
	assert_int_equal(t.leases, 1);

	/* A size-0 allocation is NULL without being a failure. */
	assert_null(T.alloc(0, 0, NULL));
	assert_int_equal(stats().failed_allocs, 0);

	/* Empty, the chunk is kept once (no round trip for the next tensor) until a trim. */
	T.free(p, 1000, 0, NULL);
	T.free(q, 3000, 0, NULL);
	s = stats();
	assert_int_equal(s.allocations, 0);
	assert_int_equal(s.used_bytes, 0);
	assert_int_equal(s.leases, 1);
	assert_int_equal(s.kept_bytes, 64 * MiB);
	p = T.alloc(5000, 0, NULL);
	assert_non_null(p);
	assert_int_equal(stats().lease_acquires, 1);
	assert_int_equal(stats().kept_bytes, 0);
	T.free(p, 5000, 0, NULL);
	assert_int_equal(T.trim(), (int64_t)(64 * MiB));
	assert_int_equal(stats().leases, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);

	/* A tensor larger than a chunk gets a lease of its own, rounded to 2 MiB, returned to
	 * the daemon as soon as it is freed. */
	big = T.alloc((ssize_t)(200 * MiB + 1), 0, NULL);
	assert_non_null(big);
	assert_int_equal((uintptr_t)big % 512, 0);
	t = totals(&d);
	assert_int_equal(t.leased_bytes, 202 * MiB);
	T.free(big, (ssize_t)(200 * MiB + 1), 0, NULL);
	assert_int_equal(stats().leases, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);

	/* Keeping nothing: every lease goes back when it empties. */
	T.set_keep_empty(0);
	p = T.alloc(100, 0, NULL);
	assert_non_null(p);
	assert_int_equal(totals(&d).leased_bytes, 64 * MiB);
	T.free(p, 100, 0, NULL);
	assert_int_equal(stats().leases, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);

	/* A chunk size of our own. */
	T.set_chunk_size(5 * MiB);
	p = T.alloc(100, 0, NULL);
	assert_int_equal(stats().leased_bytes, 6 * MiB);
	T.free(p, 100, 0, NULL);
	s = stats();
	assert_int_equal(s.bad_frees, 0);
	assert_int_equal(s.failed_allocs, 0);
	unsetenv("ROCMMEM_SOCKET");
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */
/* The replay */

#define THREADS 4
#define SLOTS 192
#define ROUNDS 4
#ifdef ROCMMEM_SANITIZED
#define OPS_PER_ROUND 60000 /* per thread: sanitizers make each operation far slower */
#else
#define OPS_PER_ROUND 150000
#endif
#define MAILBOX 256
/* Tags every 64 KiB, at most 64 per block: enough to catch overlap, few pages touched. */
#define STRIDE_MIN (64 * KiB)

struct block {
	void *p;
	uint64_t size;
	void *stream;
	uint64_t tag;
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng;
	struct block slots[SLOTS];
	uint64_t allocs, frees, handed, taken;
	char error[600];
};

/* Blocks one thread hands to another to free, as PyTorch frees tensors on other threads. */
static struct {
	pthread_mutex_t lock;
	struct block blocks[MAILBOX];
	unsigned n;
} mailbox = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *const streams[] = {NULL, (void *)0x5000, (void *)0x6000};

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* draw_size: PyTorch's mix. Mostly small activations and biases, some weight-sized blocks,
 * now and then a tensor larger than a chunk. */
static uint64_t draw_size(uint64_t *rng)
{
	uint64_t r = next_rand(rng) % 10000, lo, hi;

	if (r < 7000) {
		lo = 1;
		hi = 64 * KiB;
	} else if (r < 9500) {
		lo = 64 * KiB;
		hi = 4 * MiB;
	} else if (r < 9995) {
		lo = 4 * MiB;
		hi = 32 * MiB;
	} else {
		lo = 64 * MiB;
		hi = 160 * MiB;
	}
	/* Log-uniform between lo and hi. */
	{
		unsigned bits_lo = 63u - (unsigned)__builtin_clzll(lo);
		unsigned bits_hi = 63u - (unsigned)__builtin_clzll(hi);
		unsigned b = bits_lo + (unsigned)(next_rand(rng) % (bits_hi - bits_lo + 1));
		uint64_t v = (UINT64_C(1) << b) + next_rand(rng) % (UINT64_C(1) << b);

		return v < lo ? lo : v > hi ? hi : v;
	}
}

/* The pattern: the block's tag every stride from its start, and in its last 8 bytes when
 * those do not overlap the last stride's (blocks under 8 bytes: as much as fits). */
static uint64_t stride(uint64_t size)
{
	return size / 64 > STRIDE_MIN ? (size / 64 + 7) & ~UINT64_C(7) : STRIDE_MIN;
}

static uint64_t tail_at(uint64_t size)
{
	uint64_t last = size >= 8 ? (size - 8) / stride(size) * stride(size) : 0;

	return size >= 8 && size - 8 >= last + 8 ? size - 8 : UINT64_MAX;
}

static void stamp(const struct block *b)
{
	unsigned char *p = b->p;

	if (b->size < 8) {
		memcpy(p, &b->tag, (size_t)b->size);
		return;
	}
	for (uint64_t off = 0; off + 8 <= b->size; off += stride(b->size))
		memcpy(p + off, &b->tag, 8);
	if (tail_at(b->size) != UINT64_MAX)
		memcpy(p + tail_at(b->size), &b->tag, 8);
}

static bool intact(const struct block *b)
{
	const unsigned char *p = b->p;

	if (b->size < 8)
		return memcmp(p, &b->tag, (size_t)b->size) == 0;
	for (uint64_t off = 0; off + 8 <= b->size; off += stride(b->size))
		if (memcmp(p + off, &b->tag, 8) != 0)
			return false;
	return tail_at(b->size) == UINT64_MAX || memcmp(p + tail_at(b->size), &b->tag, 8) == 0;
}

static bool release_block(struct worker *w, struct block *b)
{
	if (!intact(b)) {
		snprintf(w->error, sizeof(w->error), "block %p (%" PRIu64 " bytes) was overwritten",
			 b->p, b->size);
		return false;
	}
	T.free(b->p, (ssize_t)b->size, 0, b->stream);
	w->frees++;
	b->p = NULL;
	return true;
}

static void *replay(void *arg)
{
	struct worker *w = arg;

	for (unsigned op = 0; op < OPS_PER_ROUND && !w->error[0]; op++) {
		struct block *b = &w->slots[next_rand(&w->rng) % SLOTS];
		uint64_t roll = next_rand(&w->rng) % 100;

		if (roll < 4) {
			/* Free a block another thread allocated. */
			struct block got = {0};

			pthread_mutex_lock(&mailbox.lock);
			if (mailbox.n)
				got = mailbox.blocks[--mailbox.n];
			pthread_mutex_unlock(&mailbox.lock);
			if (got.p) {
				if (!release_block(w, &got))
					break;
				w->taken++;
			}
			continue;
		}
		if (b->p) {
			if (roll < 8) {
				/* Hand it over instead of freeing it here. */
				pthread_mutex_lock(&mailbox.lock);
				if (mailbox.n < MAILBOX) {
					mailbox.blocks[mailbox.n++] = *b;
					b->p = NULL;
					w->handed++;
				}
				pthread_mutex_unlock(&mailbox.lock);
				if (!b->p)
					continue;
			}
			if (!release_block(w, b))
				break;
			continue;
		}
		b->size = draw_size(&w->rng);
		b->stream = streams[next_rand(&w->rng) % 10 < 7 ? 0 : 1 + next_rand(&w->rng) % 2];
		b->p = T.alloc((ssize_t)b->size, 0, b->stream);
		if (!b->p) {
			struct rocmmem_torch_stats s;

			T.stats(&s);
			snprintf(w->error, sizeof(w->error), "allocation of %" PRIu64 " failed: %s",
				 b->size, s.last_error);
			break;
		}
		if ((uintptr_t)b->p % 512) {
			snprintf(w->error, sizeof(w->error), "%p is not aligned to 512", b->p);
			break;
		}
		b->tag = ((uint64_t)w->id << 56) ^ (w->allocs * 0x9E3779B97F4A7C15ull) ^
			 (uint64_t)(uintptr_t)b->p;
		stamp(b);
		w->allocs++;
	}
	return NULL;
}

static int by_address(const void *a, const void *b)
{
	const struct block *x = a, *y = b;

	return (uintptr_t)x->p < (uintptr_t)y->p ? -1 : (uintptr_t)x->p > (uintptr_t)y->p;
}

/* check_live: every live block (all threads' and the mailbox's) intact, none overlapping. */
static size_t check_live(struct worker *workers)
{
	static struct block all[THREADS * SLOTS + MAILBOX];
	size_t n = 0;

	for (unsigned t = 0; t < THREADS; t++)
		for (unsigned i = 0; i < SLOTS; i++)
			if (workers[t].slots[i].p)
				all[n++] = workers[t].slots[i];
	for (unsigned i = 0; i < mailbox.n; i++)
		all[n++] = mailbox.blocks[i];
	qsort(all, n, sizeof(all[0]), by_address);
	for (size_t i = 0; i < n; i++) {
		assert_true(intact(&all[i]));
		if (i > 0 && (uintptr_t)all[i - 1].p + all[i - 1].size > (uintptr_t)all[i].p)
			fail_msg("blocks %p (%" PRIu64 " bytes) and %p overlap", all[i - 1].p,
				 all[i - 1].size, all[i].p);
	}
	return n;
}

/* A thread polling the daemon while the replay runs: the most leases it ever saw. */
static struct {
	const struct daemon_proc *d;
	atomic_int stop;
	uint64_t max_leases, max_leased;
	unsigned samples;
} monitor;

static void *watch_daemon(void *arg)
{
	(void)arg;
	while (!atomic_load(&monitor.stop)) {
		struct harness_totals t;

		if (harness_totals(monitor.d, &t) == 0) {
			if (t.device_leases > monitor.max_leases)
				monitor.max_leases = t.device_leases;
			if (t.leased_bytes > monitor.max_leased)
				monitor.max_leased = t.leased_bytes;
			monitor.samples++;
		}
		usleep(20000);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_replay(void **state)
{
	static struct worker workers[THREADS];
	uint64_t allocs = 0, frees = 0, handed = 0, taken = 0;
	struct rocmmem_torch_stats s, s0 = stats(); /* the counters run over all tests */
	struct harness_totals t;
	pthread_t mon;
	struct daemon_proc d;
	double t0, elapsed;
	size_t live = 0;

	(void)state;
	start(&d, "6G");
	assert_int_equal(T.init(d.sock, "torch-replay"), 0);
	assert_int_equal(T.init(d.sock, "again"), -EALREADY);
	memset(workers, 0, sizeof(workers));
	for (unsigned i = 0; i < THREADS; i++) {
		workers[i].id = i;
		workers[i].rng = 0x1234567ull * (i + 1) + 99;
	}
	monitor.d = &d;
	atomic_store(&monitor.stop, 0);
	assert_int_equal(pthread_create(&mon, NULL, watch_daemon, NULL), 0);
	t0 = now_s();
	for (unsigned round = 0; round < ROUNDS; round++) {
		for (unsigned i = 0; i < THREADS; i++)
			assert_int_equal(
			    pthread_create(&workers[i].thread, NULL, replay, &workers[i]), 0);
		for (unsigned i = 0; i < THREADS; i++) {
			pthread_join(workers[i].thread, NULL);
			if (workers[i].error[0])
				fail_msg("thread %u: %s", i, workers[i].error);
		}
		/* Between rounds, with every thread stopped: the books against the daemon's. */
		live = check_live(workers);
		s = stats();
		t = totals(&d);
		assert_int_equal(s.allocations, live);
		assert_int_equal(s.leases, t.device_leases);
		assert_int_equal(s.leased_bytes, t.leased_bytes);
		assert_true(s.used_bytes <= s.leased_bytes);
		assert_int_equal(s.bad_frees, s0.bad_frees);
	}
	elapsed = now_s() - t0;
	atomic_store(&monitor.stop, 1);
	pthread_join(mon, NULL);

	/* Free everything, out of order: thread by thread, slot by slot, then the mailbox. */
	for (unsigned i = 0; i < THREADS; i++) {
		for (unsigned k = 0; k < SLOTS; k++)
			if (workers[i].slots[(k * 7) % SLOTS].p)
				assert_true(
				    release_block(&workers[i], &workers[i].slots[(k * 7) % SLOTS]));
	}
	while (mailbox.n)
		assert_true(release_block(&workers[0], &mailbox.blocks[--mailbox.n]));
	for (unsigned i = 0; i < THREADS; i++) {
		allocs += workers[i].allocs;
		frees += workers[i].frees;
		handed += workers[i].handed;
		taken += workers[i].taken;
	}
	s = stats();
	printf("# %u threads, %" PRIu64 " allocations and %" PRIu64 " frees (%" PRIu64
	       " handed to another thread) in %.2f s: %.2f M operations/s\n",
	       THREADS, allocs, frees, handed, elapsed, (double)(allocs + frees) / elapsed / 1e6);
	printf("# %" PRIu64 " leases taken (one per %.0f allocations), at most %" PRIu64
	       " held at once (%.0f MiB), %u daemon samples\n",
	       s.lease_acquires - s0.lease_acquires,
	       (double)allocs / (double)(s.lease_acquires - s0.lease_acquires), monitor.max_leases,
	       (double)monitor.max_leased / (double)MiB, monitor.samples);
	(void)taken;
	assert_int_equal(allocs, frees);
	assert_int_equal(s.allocs_total - s0.allocs_total, allocs);
	assert_int_equal(s.frees_total - s0.frees_total, frees);
	/* Everything was freed: nothing is live, at most the one kept chunk is held. */
	assert_int_equal(s.allocations, 0);
	assert_int_equal(s.used_bytes, 0);
	assert_int_equal(s.requested_bytes, 0);
	assert_true(s.leases <= 1);
	assert_int_equal(s.leased_bytes, s.kept_bytes);
	assert_int_equal(s.bad_frees, s0.bad_frees);
	assert_int_equal(s.failed_allocs, s0.failed_allocs);
	/* No round trip per tensor: leases are rare next to allocations, and few at once. */
	assert_true((s.lease_acquires - s0.lease_acquires) * 50 < allocs);
	assert_true(monitor.samples > 0);
	assert_true(monitor.max_leases <= 64);
	assert_int_equal(s.lease_acquires, s.lease_releases + s.leases);
	assert_true(T.trim() >= 0);
	s = stats();
	assert_int_equal(s.leases, 0);
	assert_int_equal(s.leased_bytes, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(T.shutdown(), 0);
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */
/* Throughput: the sub-allocation alone, beside what a round trip per tensor would cost */

#define HOT_OPS 250000 /* per thread */
#define HOT_WINDOW 64

static void *hot_loop(void *arg)
{
	struct worker *w = arg;
	void *live[HOT_WINDOW] = {0};
	uint64_t sizes[HOT_WINDOW] = {0};

	for (unsigned op = 0; op < HOT_OPS; op++) {
		unsigned k = (unsigned)(next_rand(&w->rng) % HOT_WINDOW);

		if (live[k]) {
			T.free(live[k], (ssize_t)sizes[k], 0, NULL);
			w->frees++;
		}
		sizes[k] = 512 + next_rand(&w->rng) % (256 * KiB);
		live[k] = T.alloc((ssize_t)sizes[k], 0, NULL);
		if (!live[k]) {
			snprintf(w->error, sizeof(w->error), "allocation failed");
			break;
		}
		w->allocs++;
	}
	for (unsigned k = 0; k < HOT_WINDOW; k++)
		if (live[k])
			T.free(live[k], (ssize_t)sizes[k], 0, NULL);
	return NULL;
}

static void test_throughput(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 0, .size = 2 * MiB, .timeout_ms = 0};
	static struct worker workers[THREADS];
	struct rocmmem_torch_stats s0, s;
	double t0, hot, trip;
	uint64_t ops = 0;
	rocmmem_client *c;
	struct daemon_proc d;
	const int trips = 2000;

	(void)state;
	start(&d, "2G");
	assert_int_equal(T.init(d.sock, "torch-throughput"), 0);
	s0 = stats();
	memset(workers, 0, sizeof(workers));
	t0 = now_s();
	for (unsigned i = 0; i < THREADS; i++) {
		workers[i].rng = 77 + i;
		assert_int_equal(pthread_create(&workers[i].thread, NULL, hot_loop, &workers[i]),
				 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(workers[i].thread, NULL);
		assert_string_equal(workers[i].error, "");
		ops += workers[i].allocs + workers[i].allocs;
	}
	hot = now_s() - t0;
	s = stats();
	assert_int_equal(s.allocations, 0);
	/* Every thread shares the default stream's arena: a handful of chunks in all. */
	assert_true(s.lease_acquires - s0.lease_acquires <= 8);

	/* The alternative: a lease (acquire and release) per tensor, through librocmmem. */
	c = harness_connect(&d, "round-trips");
	t0 = now_s();
	for (int i = 0; i < trips; i++) {
		rocmmem_lease *l = NULL;

		assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
		rocmmem_lease_release(l);
	}
	trip = (now_s() - t0) / trips;
	rocmmem_disconnect(c);
	printf("# sub-allocation: %" PRIu64 " allocations and frees by %u threads in %.2f s: "
	       "%.2f M operations/s (%.0f ns each), %" PRIu64 " leases taken\n",
	       ops, THREADS, hot, (double)ops / hot / 1e6, hot * 1e9 / (double)ops,
	       s.lease_acquires - s0.lease_acquires);
	printf("# a lease round trip (acquire + release of 2 MiB) instead: %.1f us, %.0fx the "
	       "cost of one sub-allocation and its free\n",
	       trip * 1e6, trip / (2 * hot / (double)ops));
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */

static void test_bad_frees_reported(void **state)
{
	struct rocmmem_torch_stats s, s0 = stats();
	struct daemon_proc d;
	int on_stack;
	char *p, *q;

	(void)state;
	start(&d, "1G");
	assert_int_equal(T.init(d.sock, NULL), 0);
	p = T.alloc(4096, 0, NULL);
	q = T.alloc(10000, 0, NULL);
	assert_non_null(p);
	assert_non_null(q);
	memset(p, 1, 4096);
	memset(q, 2, 10000);

	T.free(&on_stack, 4, 0, NULL); /* not ours */
	s = stats();
	assert_int_equal(s.bad_frees - s0.bad_frees, 1);
	assert_non_null(strstr(s.last_error, "not memory of this allocator"));
	T.free(q + 512, 512, 0, NULL); /* inside a block */
	assert_int_equal(stats().bad_frees - s0.bad_frees, 2);
	T.free(q, 9999, 0, NULL); /* the wrong size: left allocated */
	s = stats();
	assert_int_equal(s.bad_frees - s0.bad_frees, 3);
	assert_non_null(strstr(s.last_error, "allocated with 10000 bytes, freed with 9999"));
	assert_int_equal(s.allocations, 2);
	assert_int_equal(q[9999], 2);
	T.free(q, 10000, 0, NULL);
	T.free(q, 10000, 0, NULL); /* twice */
	s = stats();
	assert_int_equal(s.bad_frees - s0.bad_frees, 4);
	assert_non_null(strstr(s.last_error, "freed already"));
	T.free(NULL, 0, 0, NULL); /* like free(NULL): nothing */
	assert_int_equal(stats().bad_frees - s0.bad_frees, 4);

	/* The books are intact: the other block is untouched, new blocks come and go. */
	for (int i = 0; i < 4096; i++)
		assert_int_equal(p[i], 1);
	q = T.alloc(10000, 0, NULL);
	assert_non_null(q);
	T.free(q, 10000, 0, NULL);
	T.free(p, 4096, 0, NULL);
	s = stats();
	assert_int_equal(s.allocations, 0);
	assert_int_equal(s.frees_total, s.allocs_total);
	assert_int_equal(s.bad_frees - s0.bad_frees, 4);
	finish(&d);
	/* After shutdown, a pointer of before is unknown, and still no crash. */
	T.free(p, 4096, 0, NULL);
	assert_int_equal(stats().bad_frees - s0.bad_frees, 5);
}

/* ---------------------------------------------------------------------------------------- */

struct model_thread {
	void *p;
	uint64_t model;
};

static void *alloc_as(void *arg)
{
	struct model_thread *m = arg;

	/* Each thread has its own current model: this one's is m->model. */
	assert_int_equal(T.set_model(m->model), 0);
	m->p = T.alloc(1 * MiB, 0, NULL);
	T.set_model(0);
	return NULL;
}

static void test_model_leases(void **state)
{
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .device = 0, .name = "unet", .size = 0};
	struct model_thread other = {.model = 0};
	uint64_t model = 0, model_b = 0, tagged = 0, untagged = 0;
	rocmmem_client *c = NULL, *watcher;
	rocmmem_status *st = NULL;
	struct daemon_proc d;
	pthread_t thread;
	void *p, *p2, *pb;

	(void)state;
	start(&d, "1G");
	/* The host's own connection, whose models the allocator's leases count toward. */
	assert_int_equal(T.connect(d.sock, "model-host", 5000, &c), 0);
	assert_int_equal(T.model_register(c, &desc, &model), 0);
	desc.name = "vae";
	assert_int_equal(T.model_register(c, &desc, &model_b), 0);
	assert_int_equal(T.init_client(NULL), -EINVAL);
	assert_int_equal(T.init_client(c), 0);
	assert_int_equal(T.init_client(c), -EALREADY);

	assert_int_equal(T.set_model(model), 0);
	p = T.alloc(1 * MiB, 0, NULL);
	p2 = T.alloc(2 * MiB, 0, NULL);
	assert_non_null(p);
	assert_non_null(p2);
	assert_int_equal(T.set_model(model_b), model);
	pb = T.alloc(1 * MiB, 0, NULL);
	assert_non_null(pb);
	assert_int_equal(T.set_model(0), model_b);
	/* Another thread, without a model, meanwhile. */
	assert_int_equal(pthread_create(&thread, NULL, alloc_as, &other), 0);
	pthread_join(thread, NULL);
	assert_non_null(other.p);

	/* Three leases: one per model and one without; the model's two blocks share theirs. */
	assert_int_equal(stats().leases, 3);
	watcher = harness_connect(&d, "watcher");
	assert_int_equal(rocmmem_status_get(watcher, &st), 0);
	assert_int_equal(rocmmem_status_lease_count(st), 3);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *l = rocmmem_status_lease(st, i);

		assert_string_equal(l->tag, "torch");
		if (l->model_id == model || l->model_id == model_b)
			tagged++;
		else if (l->model_id == 0)
			untagged++;
	}
	assert_int_equal(tagged, 2);
	assert_int_equal(untagged, 1);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		/* The model's leases count toward it in the daemon's books. */
		assert_int_equal(m->lease_bytes, 64 * MiB);
	}
	rocmmem_status_free(st);

	/* A model id this connection does not own is refused, with the daemon's reason. */
	T.set_model(987654);
	assert_null(T.alloc(100, 0, NULL));
	assert_true(strlen(stats().last_error) > 0);
	T.set_model(0);

	T.free(p, 1 * MiB, 0, NULL);
	T.free(p2, 2 * MiB, 0, NULL);
	T.free(pb, 1 * MiB, 0, NULL);
	T.free(other.p, 1 * MiB, 0, NULL);
	T.trim();
	assert_int_equal(stats().leases, 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	/* The caller's connection is not closed by the allocator. */
	T.shutdown();
	assert_int_equal(T.model_register(c, &desc, &model_b), 0);
	T.disconnect(c);
	rocmmem_disconnect(watcher);
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */

static void *release_later(void *arg)
{
	rocmmem_lease *lease = arg;

	usleep(300000);
	rocmmem_lease_release(lease);
	return NULL;
}

static void test_oom_explained(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 0, .size = 200 * MiB, .timeout_ms = 0};
	struct rocmmem_torch_stats s, s0 = stats();
	rocmmem_lease *hold = NULL;
	struct daemon_proc d;
	rocmmem_client *other;
	pthread_t thread;
	void *p, *small;

	(void)state;
	start(&d, "256M");
	assert_int_equal(T.init(d.sock, "torch-oom"), 0);
	other = harness_connect(&d, "holder");
	assert_int_equal(rocmmem_lease_acquire(other, &req, &hold), 0);
	T.set_timeout(0);

	/* 56 MiB free: a 100 MiB tensor cannot have it, and the daemon says why. */
	p = T.alloc((ssize_t)(100 * MiB), 0, NULL);
	assert_null(p);
	s = stats();
	assert_int_equal(s.failed_allocs - s0.failed_allocs, 1);
	assert_non_null(strstr(s.last_error, "Could not lease 100 MiB on device 0"));
	assert_non_null(strstr(s.last_error, "budget"));
	assert_non_null(strstr(s.last_error, "holder"));
	/* Larger than the whole budget: never. */
	assert_null(T.alloc((ssize_t)(1 * GiB), 0, NULL));
	assert_int_equal(stats().failed_allocs - s0.failed_allocs, 2);
	/* A small tensor still fits: no whole chunk is free, so just its 2 MiB is leased. */
	small = T.alloc(1000, 0, NULL);
	assert_non_null(small);
	s = stats();
	assert_int_equal(s.leased_bytes, 2 * MiB);
	T.free(small, 1000, 0, NULL);
	/* No such device on the host backend. */
	assert_null(T.alloc(1000, 1, NULL));
	assert_non_null(strstr(stats().last_error, "device 1"));
	assert_null(T.alloc(1000, -1, NULL));
	assert_null(T.alloc(-5, 0, NULL));
	assert_int_equal(stats().failed_allocs - s0.failed_allocs, 5);

	/* With a timeout, the request waits in the daemon's queue until the holder lets go. */
	T.set_timeout(10000);
	assert_int_equal(pthread_create(&thread, NULL, release_later, hold), 0);
	p = T.alloc((ssize_t)(100 * MiB), 0, NULL);
	pthread_join(thread, NULL);
	assert_non_null(p);
	T.free(p, (ssize_t)(100 * MiB), 0, NULL);
	rocmmem_disconnect(other);
	finish(&d);
}

/* Near the budget, the allocator's own empty lease goes back before it asks for more. */
static void test_own_empty_lease_yields(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 0, .size = 100 * MiB, .timeout_ms = 0};
	rocmmem_lease *hold = NULL;
	struct daemon_proc d;
	rocmmem_client *other;
	void *p;

	(void)state;
	start(&d, "128M");
	assert_int_equal(T.init(d.sock, NULL), 0);
	T.set_timeout(0);
	p = T.alloc(1000, 0, (void *)0x1);
	T.free(p, 1000, 0, (void *)0x1);
	assert_int_equal(stats().kept_bytes, 64 * MiB); /* kept, on stream 1 */
	other = harness_connect(&d, "holder");
	assert_int_equal(rocmmem_lease_acquire(other, &req, &hold), -ENOMEM);
	req.size = 60 * MiB;
	assert_int_equal(rocmmem_lease_acquire(other, &req, &hold), 0);
	/* 4 MiB left: no chunk for stream 2, so the kept one goes back, and the tensor's own
	 * 2 MiB are leased. */
	p = T.alloc(1000, 0, (void *)0x2);
	assert_non_null(p);
	assert_int_equal(stats().kept_bytes, 0);
	assert_int_equal(stats().leases, 1);
	assert_int_equal(stats().leased_bytes, 2 * MiB);
	T.free(p, 1000, 0, (void *)0x2);
	rocmmem_lease_release(hold);
	rocmmem_disconnect(other);
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */

static void test_streams_never_share(void **state)
{
	struct daemon_proc d;
	void *a, *b, *c;

	(void)state;
	start(&d, "1G");
	assert_int_equal(T.init(d.sock, NULL), 0);
	a = T.alloc(4096, 0, (void *)0x1);
	assert_non_null(a);
	T.free(a, 4096, 0, (void *)0x1);
	/* Freed on stream 1, the block is not reused on stream 2 (its work may be queued). */
	b = T.alloc(4096, 0, (void *)0x2);
	assert_non_null(b);
	assert_true((uintptr_t)b - (uintptr_t)a >= 64 * MiB ||
		    (uintptr_t)a - (uintptr_t)b >= 64 * MiB);
	assert_int_equal(stats().leases, 2);
	assert_int_equal(stats().arenas, 2);
	/* On its own stream it is. */
	c = T.alloc(4096, 0, (void *)0x1);
	assert_ptr_equal(c, a);
	T.free(b, 4096, 0, (void *)0x2);
	T.free(c, 4096, 0, (void *)0x1);
	/* One empty chunk is kept, the other went back. */
	assert_int_equal(stats().leases, 1);
	assert_int_equal(totals(&d).device_leases, 1);
	finish(&d);
}

/* ---------------------------------------------------------------------------------------- */
/* Sizes from the environment, by the rule of every rocmmem tool (common/size.c) */

/*
 * env_sizes sets ROCMMEM_TORCH_CHUNK_SIZE and ROCMMEM_TORCH_KEEP_EMPTY, connects (the library
 * reads them then, once: these cases run without the fresh setup, whose setters would win),
 * and checks the chunk a small tensor gets and whether that chunk is kept once empty.
 */
static void env_sizes(const char *chunk, const char *keep, uint64_t want_chunk, bool kept)
{
	struct daemon_proc d;
	void *p;

	setenv("ROCMMEM_TORCH_CHUNK_SIZE", chunk, 1);
	setenv("ROCMMEM_TORCH_KEEP_EMPTY", keep, 1);
	start(&d, "1G");
	assert_int_equal(T.init(d.sock, "torch-env"), 0);
	p = T.alloc(100, 0, NULL);
	assert_non_null(p);
	assert_int_equal(stats().leased_bytes, want_chunk);
	T.free(p, 100, 0, NULL);
	assert_int_equal(stats().leases, kept ? 1 : 0);
	assert_int_equal(stats().kept_bytes, kept ? want_chunk : 0);
	unsetenv("ROCMMEM_TORCH_CHUNK_SIZE");
	unsetenv("ROCMMEM_TORCH_KEEP_EMPTY");
	finish(&d);
}

/* Fractions are truncated to whole bytes: 4.9M is 5138022 bytes, a 6 MiB chunk, and
 * 5.9999999M is 6291455 bytes, one byte short of keeping that chunk. */
static void test_env_sizes_truncated(void **state)
{
	(void)state;
	env_sizes("4.9M", "5.9999999M", 6 * MiB, false);
}

/* What the rule refuses is ignored (strtod took "1e1M" as 10 MiB and " 0" as 0): the default
 * 64 MiB chunk, kept once empty as the default keep size (the chunk) allows. */
static void test_env_sizes_refused(void **state)
{
	(void)state;
	env_sizes("1e1M", " 0", 64 * MiB, true);
}

/* ---------------------------------------------------------------------------------------- */
/* GPU backends over the stand-in runtimes: device mapping, imported leases, sync on return */

static void gpu_backend(const char *backend, const char *lib_env, const char *lib_path)
{
	const char *args[] = {"--backend", backend, "--budget", "1G", NULL};
	struct rocmmem_torch_stats s;
	struct daemon_proc d;
	char *p, *big;

	setenv(lib_env, lib_path, 1);
	setenv("FAKECUDA_DEVICES", "2G", 1);
	setenv("FAKEHIP_DEVICES", "2G", 1);
	if (harness_daemon_start(&d, args) != 0)
		fail_msg("rocmmemd --backend %s did not start over the stand-in", backend);
	assert_int_equal(T.init(d.sock, "torch-gpu"), 0);
	p = T.alloc(10000, 0, NULL);
	if (!p)
		fail_msg("allocation on the %s backend failed: %s", backend, stats().last_error);
	assert_int_equal((uintptr_t)p % 512, 0);
	/* The stand-in's device memory is host memory: the import really mapped it. */
	memset(p, 0x5a, 10000);
	big = T.alloc((ssize_t)(100 * MiB), 0, NULL);
	assert_non_null(big);
	big[100 * MiB - 1] = 1;
	s = stats();
	assert_int_equal(s.leases, 2);
	assert_int_equal(totals(&d).leased_bytes, 164 * MiB);
	/* Device 1 does not exist in this process. */
	assert_null(T.alloc(100, 1, NULL));
	assert_true(strlen(stats().last_error) > 0);
	T.free(big, (ssize_t)(100 * MiB), 0, NULL);
	T.free(p, 10000, 0, NULL);
	assert_int_equal(T.trim(), (int64_t)(64 * MiB));
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	finish(&d);
	unsetenv(lib_env);
}

static void test_cuda_backend(void **state)
{
	(void)state;
	gpu_backend("cuda", "ROCMMEM_CUDA_LIBRARY", FAKECUDA_PATH);
}

static void test_hip_backend(void **state)
{
	(void)state;
	gpu_backend("hip", "ROCMMEM_HIP_LIBRARY", FAKEHIP_PATH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    /* First: nothing has connected yet, so the first allocation connects. */
	    cmocka_unit_test_setup(test_lazy_connect_and_return, fresh),
	    cmocka_unit_test_setup(test_replay, fresh),
	    cmocka_unit_test_setup(test_throughput, fresh),
	    cmocka_unit_test_setup(test_bad_frees_reported, fresh),
	    cmocka_unit_test_setup(test_model_leases, fresh),
	    cmocka_unit_test_setup(test_oom_explained, fresh),
	    cmocka_unit_test_setup(test_own_empty_lease_yields, fresh),
	    cmocka_unit_test_setup(test_streams_never_share, fresh),
	    cmocka_unit_test(test_env_sizes_truncated),
	    cmocka_unit_test(test_env_sizes_refused),
	    cmocka_unit_test_setup(test_cuda_backend, fresh),
	    cmocka_unit_test_setup(test_hip_backend, fresh),
	};

	return cmocka_run_group_tests(tests, load_library, NULL);
}
