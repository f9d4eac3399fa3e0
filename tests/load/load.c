/* SPDX-License-Identifier: MIT */
/*
 * load.c: the load test. N client processes (--clients, 16 in CI, 64 in the long variant) for
 * a fixed time (--seconds, 10 and 120) each do a random mix of everything: acquire (waiting
 * only while holding nothing), map and touch, release; status; subscribe to samples and
 * events and unsubscribe; register, acquire, release and unregister models, acking the evict
 * requests other clients' needs cause. Meanwhile a monitor reads status continuously and
 * checks the books in every snapshot, and samples the daemon's fds and memory.
 *
 * It fails on any error other than the expected ones of waiting (-ENOMEM at timeout 0,
 * -ETIMEDOUT, -EDEADLK for a model only the client's own models block), on books that do
 * not add up, on fds or memory that grow from the first third of the run (after warm-up) to
 * the last, and unless the daemon is back at its baseline at the end. It prints p50/p99/max
 * latencies of acquire and release; machines are noisy, so none is asserted.
 *
 * Status streams in parts of up to 256 items, each built at one moment; a snapshot of fewer
 * items is one part and so the state at one instant: the invariant "sum of live leases =
 * leased bytes" (and the clients' and models' sums) is checked exactly on those. A snapshot
 * of several parts may span moments: only the device's own figures, which travel together in
 * the first part, are checked there (and such snapshots are counted).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "fault.h"

#define STATUS_PART_ITEMS 256 /* daemon/net/status.c: items per part */
#define LAT_CAP 8192	      /* latencies kept per kind and worker (a uniform sample) */
#define MAX_CLIENTS 256
#define SAMPLE_CAP 4096

enum lat { LAT_ACQUIRE, LAT_ACQUIRE_AT_ONCE, LAT_RELEASE, LAT_STATUS, LAT_KINDS };

static const char *const lat_names[LAT_KINDS] = {"acquire (all grants)", "acquire (no wait)",
						 "release", "status"};

enum counter {
	C_GRANTED,
	C_REFUSED, /* -ENOMEM at timeout 0, -ETIMEDOUT after waiting */
	C_RELEASED,
	C_STATUS,
	C_SUBSCRIBE,
	C_UNSUBSCRIBE,
	C_SAMPLES,
	C_EVENTS,
	C_MODEL_REGISTER,
	C_MODEL_ACQUIRED,
	C_MODEL_REFUSED, /* -ENOMEM, -ETIMEDOUT, -EDEADLK */
	C_MODEL_RELEASE,
	C_MODEL_UNREGISTER,
	C_EVICT_ACKED,
	C_COUNTERS
};

static const char *const counter_names[C_COUNTERS] = {"leases granted",
						      "lease requests refused (waits)",
						      "releases",
						      "status",
						      "subscribe",
						      "unsubscribe",
						      "samples",
						      "telemetry events",
						      "model registrations",
						      "model acquires",
						      "model acquires refused (waits)",
						      "model releases",
						      "model unregistrations",
						      "evictions acked"};

/* One worker's results, in memory shared with the parent. */
struct worker {
	uint64_t counters[C_COUNTERS];
	uint64_t seen[LAT_KINDS]; /* latencies measured (LAT_CAP of them kept) */
	uint32_t lat_us[LAT_KINDS][LAT_CAP];
	uint32_t unexpected;
	char message[256];
};

static struct {
	long clients, seconds;
	uint64_t budget;
	struct daemon_proc d;
	struct fault_baseline baseline;
	struct worker *workers;	 /* shared with the children */
	pid_t pids[MAX_CLIENTS]; /* workers not reaped yet (0: reaped) */
	uint64_t seed;
} load = {.clients = 16, .seconds = 10};

/* ----------------------------------------------------------------------------------------- */
/* Worker */

struct work {
	struct worker *w;
	struct fault_rng rng;
	rocmmem_client *c;
	rocmmem_lease *held[2];
	uint64_t model;
	bool in_use, subscribed;
};

static void record(struct work *k, enum lat kind, int64_t us)
{
	struct worker *w = k->w;
	uint64_t n = w->seen[kind]++;

	/* Reservoir sampling keeps LAT_CAP latencies, each one as likely as any other. */
	if (n < LAT_CAP)
		w->lat_us[kind][n] = (uint32_t)us;
	else if (fault_below(&k->rng, n + 1) < LAT_CAP)
		w->lat_us[kind][fault_below(&k->rng, LAT_CAP)] = (uint32_t)us;
}

static void unexpected(struct work *k, const char *what, int err)
{
	if (k->w->unexpected++ == 0)
		snprintf(k->w->message, sizeof(k->w->message), "pid %d: %s: %s (%s)", (int)getpid(),
			 what, rocmmem_strerror(err), rocmmem_last_error());
}

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct work *k = userdata;
	int err;

	switch (ev->type) {
	case ROCMMEM_EVENT_EVICT_REQUEST:
		/* A request for a model unregistered since it was sent is moot (the unregister
		 * returned its memory); an idle model of ours is unloaded at once. */
		if (ev->model_id != k->model)
			break;
		err = rocmmem_model_evict_ack(c, ev->model_id);
		if (err)
			unexpected(k, "evict ack", err);
		else
			k->w->counters[C_EVICT_ACKED]++;
		break;
	case ROCMMEM_EVENT_SAMPLE:
		k->w->counters[C_SAMPLES]++;
		break;
	case ROCMMEM_EVENT_TELEMETRY:
		k->w->counters[C_EVENTS]++;
		break;
	case ROCMMEM_EVENT_MODEL_REVOKED:
	case ROCMMEM_EVENT_LEASE_REVOKED:
	case ROCMMEM_EVENT_DISCONNECTED:
	case ROCMMEM_EVENT_SHUTDOWN:
		unexpected(k, ev->type == ROCMMEM_EVENT_MODEL_REVOKED ? "model revoked" : "event",
			   -ECANCELED);
		break;
	default:
		break;
	}
}

/* holds_nothing: only then may the worker wait, so that waiters never block each other. */
static bool holds_nothing(const struct work *k)
{
	return !k->held[0] && !k->held[1] && !k->model;
}

static void do_lease(struct work *k)
{
	unsigned slot = (unsigned)fault_below(&k->rng, 2);
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .tag = "load"};
	int64_t t0;
	int err;

	if (k->held[slot]) {
		t0 = fault_now_us();
		err = rocmmem_lease_release(k->held[slot]);
		record(k, LAT_RELEASE, fault_now_us() - t0);
		k->held[slot] = NULL;
		if (err)
			unexpected(k, "release", err);
		else
			k->w->counters[C_RELEASED]++;
		return;
	}
	req.size = (1 + fault_below(&k->rng, 4)) * 2 * MIB;
	req.timeout_ms = holds_nothing(k) ? 500 : 0;
	t0 = fault_now_us();
	err = rocmmem_lease_acquire(k->c, &req, &k->held[slot]);
	if (err == 0) {
		unsigned char *p = rocmmem_lease_ptr(k->held[slot]);
		int64_t us = fault_now_us() - t0;

		record(k, LAT_ACQUIRE, us);
		if (rocmmem_lease_waited_ms(k->held[slot]) == 0)
			record(k, LAT_ACQUIRE_AT_ONCE, us);
		/* Touch a page in every 256 KiB: the mapping is real memory. */
		for (uint64_t off = 0; off < req.size; off += 256 * 1024)
			p[off] = (unsigned char)off;
		k->w->counters[C_GRANTED]++;
	} else if (err == -ENOMEM || err == -ETIMEDOUT) {
		k->w->counters[C_REFUSED]++;
	} else {
		unexpected(k, "acquire", err);
	}
}

static void do_status(struct work *k)
{
	rocmmem_status *st = NULL;
	int64_t t0 = fault_now_us();
	int err = rocmmem_status_get(k->c, &st);

	if (err) {
		unexpected(k, "status", err);
		return;
	}
	record(k, LAT_STATUS, fault_now_us() - t0);
	if (rocmmem_status_device_count(st) != 1)
		unexpected(k, "status without its device", -EPROTO);
	rocmmem_status_free(st);
	k->w->counters[C_STATUS]++;
}

static void do_subscribe(struct work *k)
{
	int rc;

	if (k->subscribed) {
		rc = rocmmem_unsubscribe(k->c);
		if (rc < 0)
			unexpected(k, "unsubscribe", rc);
		k->subscribed = false;
		k->w->counters[C_UNSUBSCRIBE]++;
		return;
	}
	rc = rocmmem_subscribe(k->c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS,
			       (uint32_t)(20 + fault_below(&k->rng, 181)), NULL);
	if (rc < 0) {
		unexpected(k, "subscribe", rc);
		return;
	}
	k->subscribed = true;
	k->w->counters[C_SUBSCRIBE]++;
}

static void do_model(struct work *k)
{
	int err;

	if (!k->model) {
		struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
						  .name = "load-model",
						  .model_class = ROCMMEM_MODEL_OTHER,
						  .size = (2 + 2 * fault_below(&k->rng, 5)) * MIB,
						  .priority = (int32_t)fault_below(&k->rng, 3)};

		err = rocmmem_model_register(k->c, &desc, &k->model);
		if (err)
			unexpected(k, "model register", err);
		else
			k->w->counters[C_MODEL_REGISTER]++;
		return;
	}
	if (k->in_use) {
		err = rocmmem_model_release(k->c, k->model);
		if (err)
			unexpected(k, "model release", err);
		k->in_use = false;
		k->w->counters[C_MODEL_RELEASE]++;
		return;
	}
	if (fault_below(&k->rng, 4) == 0) {
		uint64_t model = k->model;

		/* Forgotten first: an evict request the call delivers while it waits is moot. */
		k->model = 0;
		err = rocmmem_model_unregister(k->c, model);
		if (err)
			unexpected(k, "model unregister", err);
		k->w->counters[C_MODEL_UNREGISTER]++;
		return;
	}
	/* Its own registration is the only thing held: it may wait. */
	err = rocmmem_model_acquire(k->c, k->model, !k->held[0] && !k->held[1] ? 500 : 0);
	if (err == 0) {
		k->in_use = true;
		k->w->counters[C_MODEL_ACQUIRED]++;
	} else if (err == -ENOMEM || err == -ETIMEDOUT || err == -EDEADLK) {
		k->w->counters[C_MODEL_REFUSED]++;
	} else {
		unexpected(k, "model acquire", err);
	}
}

/* worker_main runs one client until end_us, then lets go of everything. */
static void worker_main(struct worker *w, uint64_t seed, int64_t end_us)
{
	struct work k = {.w = w, .rng = {seed}};
	int err = rocmmem_connect(load.d.sock, "load", 10000, &k.c);

	if (err) {
		unexpected(&k, "connect", err);
		_exit(1);
	}
	rocmmem_set_event_callback(k.c, on_event, &k);
	while (fault_now_us() < end_us) {
		uint64_t r = fault_below(&k.rng, 100);

		if (r < 50)
			do_lease(&k);
		else if (r < 65)
			do_status(&k);
		else if (r < 72)
			do_subscribe(&k);
		else
			do_model(&k);
		if (rocmmem_dispatch(k.c) < 0)
			unexpected(&k, "dispatch", -ECONNRESET);
		if (w->unexpected)
			break;
	}
	for (int i = 0; i < 2; i++)
		if (k.held[i] && (err = rocmmem_lease_release(k.held[i])) != 0)
			unexpected(&k, "final release", err);
	if (k.in_use && (err = rocmmem_model_release(k.c, k.model)) != 0)
		unexpected(&k, "final model release", err);
	rocmmem_disconnect(k.c);
	_exit(w->unexpected ? 1 : 0);
}

/* ----------------------------------------------------------------------------------------- */
/* Monitor */

struct sample {
	int64_t t_us;
	int fds_excess; /* daemon fds - connections - leases: what it holds for itself */
	long heap_kib;	/* the daemon's heap in use, 0: unknown (sanitized) */
};

struct monitor {
	rocmmem_client *c;
	uint64_t snapshots, one_part, multi_part, max_leases, max_items;
	struct sample samples[SAMPLE_CAP];
	size_t nsamples;
};

/* check_snapshot checks one status; returns false (with why) when the books do not add up. */
static bool check_snapshot(struct monitor *m, const rocmmem_status *st, char *why, size_t len)
{
	const struct rocmmem_device_info *dev = rocmmem_status_device(st, 0);
	size_t nclients = rocmmem_status_client_count(st), nleases = rocmmem_status_lease_count(st);
	size_t nmodels = rocmmem_status_model_count(st), nqueue = rocmmem_status_waiter_count(st);
	size_t items = nclients + nleases + nmodels + nqueue;
	uint64_t lease_sum = 0, client_sum = 0, reserved_sum = 0;

	m->snapshots++;
	m->max_leases = nleases > m->max_leases ? nleases : m->max_leases;
	m->max_items = items > m->max_items ? items : m->max_items;
	if (!dev) {
		snprintf(why, len, "no device");
		return false;
	}
	/* The device's own figures travel together in the first part. */
	if (dev->leased_bytes + dev->reserved_bytes > dev->budget_bytes ||
	    dev->free_bytes != dev->budget_bytes - dev->leased_bytes - dev->reserved_bytes) {
		snprintf(why, len,
			 "device: leased %" PRIu64 " + reserved %" PRIu64 ", free %" PRIu64
			 " of budget %" PRIu64,
			 dev->leased_bytes, dev->reserved_bytes, dev->free_bytes,
			 dev->budget_bytes);
		return false;
	}
	if (items >= STATUS_PART_ITEMS) {
		m->multi_part++;
		return true;
	}
	m->one_part++;
	for (size_t i = 0; i < nleases; i++)
		lease_sum += rocmmem_status_lease(st, i)->bytes;
	for (size_t i = 0; i < nclients; i++)
		client_sum += rocmmem_status_client(st, i)->leased_bytes;
	for (size_t i = 0; i < nmodels; i++)
		reserved_sum += rocmmem_status_model(st, i)->reservation_bytes;
	if (lease_sum != dev->leased_bytes || client_sum != dev->leased_bytes ||
	    nleases != dev->leases || reserved_sum != dev->reserved_bytes ||
	    nqueue != dev->waiters) {
		snprintf(why, len,
			 "leased %" PRIu64 " but the leases sum to %" PRIu64 " and the clients' to "
			 "%" PRIu64 "; %zu leases listed, %" PRIu64 " counted; reserved %" PRIu64
			 " but the models' reservations sum to %" PRIu64 "; %zu queued, %u counted",
			 dev->leased_bytes, lease_sum, client_sum, nleases, dev->leases,
			 dev->reserved_bytes, reserved_sum, nqueue, dev->waiters);
		return false;
	}
	return true;
}

/* monitor_once reads one status (and, when sample, fds and the heap in use with it). */
static void monitor_once(struct monitor *m, bool sample, int64_t start_us, int64_t *status_us_max)
{
	rocmmem_status *st = NULL;
	int64_t t0 = fault_now_us();
	int err = rocmmem_status_get(m->c, &st);
	char why[512];

	if (err)
		fail_msg("the monitor's status failed: %s (%s)", rocmmem_strerror(err),
			 rocmmem_last_error());
	if (fault_now_us() - t0 > *status_us_max)
		*status_us_max = fault_now_us() - t0;
	if (!check_snapshot(m, st, why, sizeof(why)))
		fail_msg("snapshot %" PRIu64 ": the books do not add up: %s", m->snapshots, why);
	/* Read right after the status: the churn in between is noise a median evens out. */
	if (sample && m->nsamples < SAMPLE_CAP) {
		struct sample *s = &m->samples[m->nsamples++];

		s->t_us = t0 - start_us;
		s->fds_excess = harness_fd_count(load.d.pid) -
				(int)rocmmem_status_client_count(st) -
				(int)rocmmem_status_lease_count(st);
		s->heap_kib = (long)(rocmmem_status_daemon(st)->heap_bytes / 1024);
	}
	rocmmem_status_free(st);
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int compare_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

/* window summarises the samples between from and to (fractions of the run): the medians of
 * the fds excess and of the heap in use. Returns how many samples it saw. */
static size_t window(const struct monitor *m, double from, double to, long *fds_median,
		     long *heap_median)
{
	static long heap[SAMPLE_CAP], fds[SAMPLE_CAP];
	int64_t run_us = load.seconds * 1000000;
	size_t n = 0;

	for (size_t i = 0; i < m->nsamples; i++) {
		const struct sample *s = &m->samples[i];

		if (s->t_us < (int64_t)(from * (double)run_us) ||
		    s->t_us >= (int64_t)(to * (double)run_us))
			continue;
		fds[n] = s->fds_excess;
		heap[n++] = s->heap_kib;
	}
	qsort(heap, n, sizeof(heap[0]), compare_long);
	qsort(fds, n, sizeof(fds[0]), compare_long);
	*heap_median = n ? heap[n / 2] : 0;
	*fds_median = n ? fds[n / 2] : 0;
	return n;
}

/* report_latencies merges every worker's kept latencies per kind and prints percentiles. */
static void report_latencies(void)
{
	size_t cap = (size_t)load.clients * LAT_CAP;
	uint32_t *all = malloc(cap * sizeof(*all));

	assert_non_null(all);
	for (int kind = 0; kind < LAT_KINDS; kind++) {
		uint64_t seen = 0;
		size_t n = 0;

		for (long i = 0; i < load.clients; i++) {
			const struct worker *w = &load.workers[i];
			size_t kept = w->seen[kind] < LAT_CAP ? (size_t)w->seen[kind] : LAT_CAP;

			memcpy(all + n, w->lat_us[kind], kept * sizeof(*all));
			n += kept;
			seen += w->seen[kind];
		}
		if (n == 0)
			continue;
		qsort(all, n, sizeof(*all), compare_u32);
		print_message("  %-22s %8" PRIu64
			      " measured: p50 %6.3f ms  p99 %7.3f ms  max %8.3f "
			      "ms\n",
			      lat_names[kind], seen, all[n / 2] / 1000.0,
			      all[n * 99 / 100] / 1000.0, all[n - 1] / 1000.0);
	}
	free(all);
}

static void test_load(void **state)
{
	static struct monitor m;
	pid_t *pids = load.pids;
	int64_t start_us, end_us, status_us_max = 0, next_sample = 0;
	uint64_t totals[C_COUNTERS] = {0};
	long fds_first, fds_last, heap_first, heap_last, heap_slack;
	struct fault_books books;
	size_t n_first, n_last;
	bool failed = false;

	(void)state;
	fault_baseline_take(&load.d, &load.baseline);
	m.c = harness_connect(&load.d, "load-monitor");
	start_us = fault_now_us();
	end_us = start_us + load.seconds * 1000000;
	fflush(NULL);
	for (long i = 0; i < load.clients; i++) {
		uint64_t seed = load.seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;

		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			worker_main(&load.workers[i], seed, end_us);
	}
	while (fault_now_us() < end_us) {
		bool sample = fault_now_us() >= next_sample;

		monitor_once(&m, sample, start_us, &status_us_max);
		if (sample)
			next_sample = fault_now_us() + 50000;
		fault_sleep_us(5000);
	}
	for (long i = 0; i < load.clients; i++) {
		long end = harness_now_ms() + 30000;
		pid_t done;
		int status = 0;

		/* Each finishes its last request and lets go (the books still checked meanwhile);
		 * one stuck is a failure. */
		while ((done = waitpid(pids[i], &status, WNOHANG)) == 0 && harness_now_ms() < end)
			monitor_once(&m, false, start_us, &status_us_max);
		if (done == 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &status, 0);
			print_message("worker %ld did not finish within 30 s of the end\n", i);
			failed = true;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failed = true;
		}
		pids[i] = 0;
	}
	rocmmem_disconnect(m.c);
	for (long i = 0; i < load.clients; i++) {
		const struct worker *w = &load.workers[i];

		for (int c = 0; c < C_COUNTERS; c++)
			totals[c] += w->counters[c];
		if (w->unexpected) {
			print_message("worker %ld: %u unexpected results, the first: %s\n", i,
				      w->unexpected, w->message);
			failed = true;
		}
	}
	print_message("%ld clients for %ld s (seed %" PRIu64 "):\n", load.clients, load.seconds,
		      load.seed);
	for (int c = 0; c < C_COUNTERS; c++)
		print_message("  %-32s %10" PRIu64 "\n", counter_names[c], totals[c]);
	report_latencies();
	n_first = window(&m, 0.15, 0.15 + 0.85 / 3, &fds_first, &heap_first);
	n_last = window(&m, 1 - 0.85 / 3, 1.01, &fds_last, &heap_last);
	print_message("monitor: %" PRIu64 " snapshots (%" PRIu64 " in one part: invariant checked "
		      "exactly; %" PRIu64 " in several: device figures only), up to %" PRIu64
		      " leases and %" PRIu64 " items at once, slowest status %.1f ms\n",
		      m.snapshots, m.one_part, m.multi_part, m.max_leases, m.max_items,
		      status_us_max / 1000.0);
	print_message("daemon: fds beyond its connections and leases (median): %ld (first third, "
		      "%zu samples) -> %ld (last third, %zu); heap in use (median) %ld -> %ld KiB "
		      "(baseline %ld)\n",
		      fds_first, n_first, fds_last, n_last, heap_first, heap_last,
		      (long)(load.baseline.heap / 1024));
	if (failed)
		fail_msg("workers failed (see above)");
	assert_true(totals[C_GRANTED] > 0 && totals[C_RELEASED] > 0);
	assert_true(totals[C_MODEL_ACQUIRED] > 0 && totals[C_SUBSCRIBE] > 0);
	assert_true(m.one_part > 0);
	assert_true(n_first > 0 && n_last > 0);
	/* Flat: what the daemon holds for itself does not grow, nor does its memory. */
	if (fds_last > fds_first + 2)
		fail_msg("the daemon's own fds grew from %ld to %ld during the run", fds_first,
			 fds_last);
	/*
	 * The heap in use (malloc's own count, not RSS) is flat too. What the clients hold in
	 * the daemon at the moment of a sample (their connections, leases and queued replies)
	 * differs between samples by less than 16 KiB per client; a leak of one allocation (32
	 * bytes at least) per request over the tens of thousands of requests between the two
	 * windows is far more.
	 */
	heap_slack = load.clients * 16;
	if (heap_first > 0 && heap_last > heap_first + heap_slack)
		fail_msg("the daemon's heap in use grew from %ld to %ld KiB during the run (more "
			 "than %ld KiB)",
			 heap_first, heap_last, heap_slack);
	/* Once every client is gone, no more than during the run: the event ring and the
	 * tables the run grew stay allocated, so the baseline before the run is not the bound. */
	fault_assert_baseline(&load.d, &load.baseline, -1, "after the load");
	assert_int_equal(fault_books(&load.d, &books), 0);
	if (heap_last > 0 && books.heap > (uint64_t)(heap_last + heap_slack) * 1024)
		fail_msg("after the load the daemon's heap holds %" PRIu64 " bytes, more than "
			 "during its last third (%ld KiB) + %ld KiB",
			 books.heap, heap_last, heap_slack);
}

static int setup(void **state)
{
	char budget[32];
	/* Every worker may be subscribed at once, beyond the default cap of 64. */
	const char *args[] = {"--budget",	   budget, "--log-level", "warn",
			      "--max-subscribers", "1024", NULL};

	(void)state;
	load.budget = (uint64_t)load.clients * 4 * MIB;
	snprintf(budget, sizeof(budget), "%" PRIu64 "M", load.budget / MIB);
	load.workers = mmap(NULL, sizeof(struct worker) * (size_t)load.clients,
			    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (load.workers == MAP_FAILED)
		return -1;
	return fault_daemon_start(&load.d, NULL, NULL, args, 10000);
}

static int teardown(void **state)
{
	(void)state;
	/* Workers a failed check left running go first. */
	for (long i = 0; i < load.clients; i++) {
		if (load.pids[i] > 0) {
			kill(load.pids[i], SIGKILL);
			waitpid(load.pids[i], NULL, 0);
		}
	}
	munmap(load.workers, sizeof(struct worker) * (size_t)load.clients);
	return fault_daemon_stop(&load.d, 20000, false) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load),
	};

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--clients") == 0)
			load.clients = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seconds") == 0)
			load.seconds = strtol(argv[i + 1], NULL, 10);
	}
	if (load.clients < 1 || load.clients > MAX_CLIENTS || load.seconds < 1) {
		fprintf(stderr, "usage: %s [--clients 1-%d] [--seconds N]\n", argv[0], MAX_CLIENTS);
		return 2;
	}
	load.seed = fault_seed("load");
	return cmocka_run_group_tests(tests, setup, teardown);
}
