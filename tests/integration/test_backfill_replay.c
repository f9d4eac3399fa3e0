/* SPDX-License-Identifier: MIT */
/*
 * test_backfill_replay.c: the contention replay of issue 15 through real processes: a
 * FramePack-like loop that holds its transformer in use while it acquires its vae, a
 * ComfyUI-like checkpoint switcher and a plain script taking 256 MiB leases, three processes
 * on one 2 GiB budget, every size scaled from 1 GiB to 64 MiB. The same replay runs with
 * backfilling on and off, one daemon each, in the same test.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)
#define SCALED_GiB (64 * MiB) /* the 2 GiB budget: 128 MiB */
#define WAIT_MS 30000	      /* each request's timeout: PyTorch's allocator's default */
#define SECTIONS 6	      /* FramePack's sections */
#define SWITCHES 10	      /* ComfyUI's checkpoint switches */
#define LEASES 24	      /* the script's 256 MiB leases */
#define WORK_MS 150	      /* one step's compute (a host does not dispatch meanwhile) */
#define HOLD_MS 60	      /* how long the script uses each lease */
#define RUN_LIMIT_MS 60000

enum { FRAMEPACK, COMFYUI, SCRIPT, PROCS };

/* What a process reports: its failed steps, the time it waited in total, when it ended. */
struct report {
	int64_t failed, waited_ms, ended_ms;
};

static struct daemon_proc daemon_;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* on_event acks evict requests at once: a host unloads what it does not use when asked. */
static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	(void)userdata;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST)
		(void)rocmmem_model_evict_ack_generation(c, ev->model_id, ev->generation);
}

static uint64_t model(rocmmem_client *c, const char *name, enum rocmmem_model_class cls,
		      uint64_t size)
{
	struct rocmmem_model_desc desc = ROCMMEM_MODEL_DESC_INIT;
	uint64_t id = 0;

	desc.name = name;
	desc.model_class = cls;
	desc.size = size;
	return rocmmem_model_register(c, &desc, &id) == 0 ? id : 0;
}

/* acquire makes id resident and in use, adding the time it waited to r. */
static bool acquire(rocmmem_client *c, uint64_t id, struct report *r)
{
	long started = harness_now_ms();
	bool ok = rocmmem_model_acquire(c, id, WAIT_MS) == 0;

	r->waited_ms += harness_now_ms() - started;
	r->failed += !ok;
	return ok;
}

/* framepack: each section samples with the transformer, then acquires the vae while the
 * transformer is still in use (hold and wait), decodes, and releases both. */
static void framepack(rocmmem_client *c, struct report *r)
{
	uint64_t t = model(c, "transformer", ROCMMEM_MODEL_TRANSFORMER, SCALED_GiB * 3 / 4);
	uint64_t v = model(c, "vae", ROCMMEM_MODEL_VAE, SCALED_GiB / 2);

	r->failed += !t || !v;
	for (unsigned s = 0; s < SECTIONS && t && v; s++) {
		if (!acquire(c, t, r))
			continue;
		sleep_ms(2 * WORK_MS); /* sampling: evict requests wait meanwhile */
		if (acquire(c, v, r)) {
			sleep_ms(WORK_MS / 3);
			r->failed += rocmmem_model_release(c, v) != 0;
		}
		r->failed += rocmmem_model_release(c, t) != 0;
	}
}

/* comfyui: switches between two checkpoints, each alone too large beside the other's. */
static void comfyui(rocmmem_client *c, struct report *r)
{
	uint64_t ck[2] = {model(c, "sdxl_a", ROCMMEM_MODEL_TRANSFORMER, SCALED_GiB),
			  model(c, "sdxl_b", ROCMMEM_MODEL_TRANSFORMER, SCALED_GiB)};

	r->failed += !ck[0] || !ck[1];
	for (unsigned s = 0; s < SWITCHES && ck[0] && ck[1]; s++) {
		if (!acquire(c, ck[s % 2], r))
			continue;
		sleep_ms(WORK_MS);
		r->failed += rocmmem_model_release(c, ck[s % 2]) != 0;
	}
}

/* script: plain leases of a quarter GiB, one after the other. */
static void script(rocmmem_client *c, struct report *r)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = SCALED_GiB / 4,
					    .timeout_ms = WAIT_MS,
					    .tag = "script"};

	for (unsigned i = 0; i < LEASES; i++) {
		rocmmem_lease *l = NULL;
		long started = harness_now_ms();

		if (rocmmem_lease_acquire(c, &req, &l) < 0) {
			r->waited_ms += harness_now_ms() - started;
			r->failed++;
			continue;
		}
		r->waited_ms += harness_now_ms() - started;
		sleep_ms(HOLD_MS);
		r->failed += rocmmem_lease_release(l) != 0;
		sleep_ms(HOLD_MS / 2);
	}
}

static int run_proc(void *arg, int in, int out)
{
	static const char *const names[PROCS] = {"framepack", "comfyui", "script"};
	long which = (long)(intptr_t)arg;
	struct report r = {0, 0, 0};
	rocmmem_client *c = harness_connect(&daemon_, names[which]);
	int64_t go;

	if (!c || !pipe_get(in, &go, RUN_LIMIT_MS))
		return 1;
	rocmmem_set_event_callback(c, on_event, NULL);
	if (which == FRAMEPACK)
		framepack(c, &r);
	else if (which == COMFYUI)
		comfyui(c, &r);
	else
		script(c, &r);
	r.ended_ms = harness_now_ms();
	rocmmem_disconnect(c);
	return pipe_put(out, r.failed) && pipe_put(out, r.waited_ms) && pipe_put(out, r.ended_ms)
		   ? 0
		   : 1;
}

/*
 * waits_needlessly says whether a status snapshot shows the script waiting although its lease
 * fits in the memory free now and leaves the head's need covered by what is free and being
 * evicted: a grant that could not delay the head, so backfilling must have made it. (Only
 * that case: a grant that could, or might not, delay the head is the policy's to judge.)
 */
static bool waits_needlessly(const rocmmem_status *st, pid_t script_pid)
{
	const struct rocmmem_device_info *dev = rocmmem_status_device(st, 0);
	const struct rocmmem_waiter_info *head = NULL, *mine = NULL;
	uint64_t evicting = 0;

	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *w = rocmmem_status_waiter(st, i);

		if (!head)
			head = w;
		else if (w->owner_pid == script_pid && !mine)
			mine = w;
	}
	if (!dev || !head || !mine)
		return false;
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->state == ROCMMEM_MODEL_EVICTING)
			evicting += m->bytes;
	}
	return dev->free_bytes >= mine->bytes &&
	       dev->free_bytes + evicting >= head->bytes + mine->bytes;
}

/* replay runs the three processes on a daemon started with args; returns the needless waits
 * a monitor polling status saw, and fills reports. */
static unsigned replay(const char *const *args, struct report *reports, long *makespan_ms)
{
	struct child kids[PROCS];
	rocmmem_client *monitor;
	bool reported[PROCS] = {false, false, false};
	unsigned needless = 0;
	long started;

	assert_int_equal(harness_daemon_start(&daemon_, args), 0);
	for (long i = 0; i < PROCS; i++)
		assert_int_equal(child_start(&kids[i], run_proc, (void *)(intptr_t)i), 0);
	monitor = harness_connect(&daemon_, "monitor");
	assert_non_null(monitor);
	started = harness_now_ms();
	for (int i = 0; i < PROCS; i++)
		assert_true(pipe_put(kids[i].to_child, 1));
	for (int done = 0; done < PROCS;) {
		rocmmem_status *st = NULL;

		if (rocmmem_status_get(monitor, &st) == 0) {
			needless += waits_needlessly(st, kids[SCRIPT].pid);
			rocmmem_status_free(st);
		}
		/* A process reports as it ends: its failed steps first. */
		for (int i = 0; i < PROCS; i++)
			if (!reported[i] && pipe_get(kids[i].from_child, &reports[i].failed, 0))
				done += reported[i] = true;
		assert_true(harness_now_ms() - started < RUN_LIMIT_MS);
		sleep_ms(5);
	}
	rocmmem_disconnect(monitor);
	*makespan_ms = 0;
	for (int i = 0; i < PROCS; i++) {
		struct report *r = &reports[i];

		assert_true(pipe_get(kids[i].from_child, &r->waited_ms, 5000));
		assert_true(pipe_get(kids[i].from_child, &r->ended_ms, 5000));
		assert_int_equal(child_wait(&kids[i], 5000), 0);
		if (r->ended_ms - started > *makespan_ms)
			*makespan_ms = r->ended_ms - started;
	}
	assert_int_equal(harness_daemon_stop(&daemon_), 0);
	return needless;
}

/*
 * The replay with and without backfilling: zero failed steps in both; with it, the script
 * never waits while its lease fits and its grant could not delay the head (a monitor polling
 * status), and the makespan is no worse than without, within one of the script's leases' use
 * (the work a backfilled lease can add before the head).
 */
static void test_replay_with_and_without_backfilling(void **state)
{
	static const char *const on[] = {"--budget",
					 "128M",
					 "--evict-deadline",
					 "5",
					 "--backfill-passes",
					 "1000",
					 "--backfill-wait",
					 "60",
					 NULL};
	static const char *const off[] = {"--budget", "128M", "--evict-deadline", "5", "--backfill",
					  "off",      NULL};
	struct report with[PROCS], without[PROCS];
	long span_with, span_without, slack;
	unsigned needless_with, needless_without;

	(void)state;
	needless_without = replay(off, without, &span_without);
	needless_with = replay(on, with, &span_with);
	fprintf(stderr,
		"[ replay   ] backfilling on: makespan %ld ms, the script waited %" PRId64
		" ms (%u needless waits seen); off: makespan %ld ms, the script waited %" PRId64
		" ms (%u needless waits seen)\n",
		span_with, with[SCRIPT].waited_ms, needless_with, span_without,
		without[SCRIPT].waited_ms, needless_without);
	for (int i = 0; i < PROCS; i++) {
		assert_int_equal(with[i].failed, 0);
		assert_int_equal(without[i].failed, 0);
	}
	assert_int_equal(needless_with, 0);
	/* The two runs follow each other on a machine that may be busy with other work: the
	 * slack is one lease's use and one step, or a quarter of the run without backfilling
	 * where that is more (a load burst in one run only). This catches backfilled leases
	 * holding the head back for a quarter of the run; the simulator checks the head's
	 * reservation exactly (tests/sim, invariant 9). */
	slack = HOLD_MS * 3 / 2 + WORK_MS;
	if (span_without / 4 > slack)
		slack = span_without / 4;
	assert_true(span_with <= span_without + slack);
}

/* stopped_owner: registers a model, makes it resident and idle, says so, then waits to be
 * stopped (SIGSTOP) and killed: it never acks. */
static int stopped_owner(void *arg, int in, int out)
{
	rocmmem_client *c = harness_connect(&daemon_, "stuck");
	uint64_t id = c ? model(c, "stuck_vae", ROCMMEM_MODEL_VAE, 64 * MiB) : 0;
	int64_t never;

	(void)arg;
	if (!id || rocmmem_model_acquire(c, id, 5000) || rocmmem_model_release(c, id))
		return 1;
	pipe_put(out, 1);
	pipe_get(in, &never, RUN_LIMIT_MS);
	return 0;
}

/* big_request: a lease that needs the stuck owner's memory (reports its result). */
static int big_request(void *arg, int in, int out)
{
	rocmmem_client *c = harness_connect(&daemon_, "needs-the-vae");
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 64 * MiB, .timeout_ms = WAIT_MS, .tag = "big"};
	rocmmem_lease *l = NULL;
	int err;

	(void)arg;
	(void)in;
	err = c ? rocmmem_lease_acquire(c, &req, &l) : -ENOTCONN;
	pipe_put(out, err);
	rocmmem_disconnect(c);
	return 0;
}

/* model_state_of finds the first model named name in a fresh status (-1: none). */
static int model_state_of(rocmmem_client *c, const char *name, unsigned *waiters)
{
	rocmmem_status *st = NULL;
	int state = -1;

	if (rocmmem_status_get(c, &st) < 0)
		return -1;
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (strcmp(rocmmem_status_model(st, i)->name, name) == 0)
			state = (int)rocmmem_status_model(st, i)->state;
	*waiters = rocmmem_status_device(st, 0)->waiters;
	rocmmem_status_free(st);
	return state;
}

/*
 * A stopped owner holding an idle model stalls only the request that needs its memory: an
 * unrelated request that fits is served at once, while the eviction is still outstanding
 * (the default 20 s deadline), not after it.
 */
static void test_stopped_owner_stalls_only_what_needs_it(void **state)
{
	static const char *const args[] = {"--budget", "128M", NULL};
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 16 * MiB, .timeout_ms = WAIT_MS, .tag = "small"};
	rocmmem_lease *filler = NULL, *small = NULL;
	struct child owner, big;
	rocmmem_client *c;
	unsigned waiters = 0;
	int64_t ready, err;
	long started, waited;

	(void)state;
	assert_int_equal(harness_daemon_start(&daemon_, args), 0);
	assert_int_equal(child_start(&owner, stopped_owner, NULL), 0);
	assert_true(pipe_get(owner.from_child, &ready, 10000));
	kill(owner.pid, SIGSTOP);
	c = harness_connect(&daemon_, "tester");
	assert_non_null(c);
	req.size = 32 * MiB; /* free: 128 - 64 (the stuck vae) - 32 = 32 */
	assert_int_equal(rocmmem_lease_acquire(c, &req, &filler), 0);
	assert_int_equal(child_start(&big, big_request, NULL), 0);
	/* The big lease waits for the stopped owner's vae, whose eviction is outstanding. */
	started = harness_now_ms();
	while (model_state_of(c, "stuck_vae", &waiters) != ROCMMEM_MODEL_EVICTING || waiters != 1) {
		assert_true(harness_now_ms() - started < 10000);
		sleep_ms(5);
	}
	started = harness_now_ms();
	req.size = 16 * MiB;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &small), 0);
	waited = harness_now_ms() - started;
	/* Served while the vae is still being evicted: well inside its 20 s deadline. */
	assert_int_equal(model_state_of(c, "stuck_vae", &waiters), ROCMMEM_MODEL_EVICTING);
	assert_int_equal(waiters, 1);
	assert_true(waited < 20000 / 4);
	/* The owner dies: its memory comes back and the big lease is granted. */
	rocmmem_lease_release(small);
	rocmmem_lease_release(filler);
	child_kill(&owner);
	assert_true(pipe_get(big.from_child, &err, 10000));
	assert_int_equal(err, 0);
	assert_int_equal(child_wait(&big, 5000), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&daemon_), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay_with_and_without_backfilling),
	    cmocka_unit_test(test_stopped_owner_stalls_only_what_needs_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
