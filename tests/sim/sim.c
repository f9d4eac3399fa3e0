/* SPDX-License-Identifier: MIT */
/*
 * sim.c: the simulator's arguments, its loop and its report. Each step advances the virtual
 * clock, completes a backend job, lets a client act (connect, ask, release, ack, die), runs
 * what is due later, changes the budgets now and then; the service's deadlines run when due,
 * and the invariants are checked after every step. A failure prints the step, the invariant,
 * the last actions and the command that replays it exactly.
 *
 * Usage: sim [--seed N] [--steps N] [--clients N] [--devices N] [--mix KIND] [--trace]
 *            [--trace-from STEP] [--check-every N] [--lose-after STEP] [--runs N]
 * --clients is how many are connected at most at once (many more come and go over a run);
 * --lose-after (default: three quarters of --steps) is when the last device may go.
 * Without --seed: ROCMMEM_SIM_SEED, else a random seed (printed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/log.h"
#include "sim.h"

void sim_trace(struct world *w, const char *fmt, ...)
{
	char *line = w->trace[w->trace_next++ % SIM_TRACE];
	int n =
	    snprintf(line, sizeof(w->trace[0]), "%" PRIu64 " @%" PRIu64 " ms: ", w->step, w->now);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(w->trace[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	if (w->step >= w->opt.trace_from)
		printf("%s\n", line);
}

void sim_fail(struct world *w, const char *invariant, const char *fmt, ...)
{
	va_list ap;

	if (w->failed)
		return;
	w->failed = true;
	printf("sim: FAILED at step %" PRIu64 " (virtual time %" PRIu64 " ms): invariant %s\n",
	       w->step, w->now, invariant);
	printf("sim: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	checks_dump(w);
	printf("sim: the last %u actions:\n", SIM_TRACE);
	for (unsigned i = 0; i < SIM_TRACE; i++) {
		const char *line = w->trace[(w->trace_next + i) % SIM_TRACE];

		if (line[0])
			printf("  %s\n", line);
	}
	printf("sim: replay: tests/sim/sim --seed 0x%" PRIx64 " --steps %" PRIu64
	       " --clients %u --devices %u --mix %s --check-every %u --lose-after %" PRIu64
	       " --trace-from %" PRIu64 "\n",
	       w->opt.seed, w->opt.steps, w->opt.clients, w->opt.devices, w->opt.mix,
	       w->opt.check_every, w->opt.lose_after,
	       w->step > SIM_TRACE ? w->step - SIM_TRACE : 0);
	fflush(stdout);
}

static uint64_t clock_mono(void *ctx)
{
	return ((struct world *)ctx)->now;
}

static uint64_t clock_real(void *ctx)
{
	/* A fixed epoch (2026-01-01) plus the virtual time: nothing depends on the real one. */
	return 1767225600000ull + ((struct world *)ctx)->now;
}

/*
 * schedule draws how the queues are served: backfilling off for a quarter of the seeds, with
 * the daemon's bounds for another, tight bounds (1 to 4 passes, 1 to 50 ms) for the rest, and
 * toggled by reloads for half of them; a maximum hold for transformers (and for every class but
 * VAEs in half of the seeds); evict deadlines of their own for transformers and text encoders.
 */
static void schedule(struct world *w)
{
	struct policy_schedule *p = &w->cfg.sched;
	uint64_t r = rng_below(&w->rng, 4);

	p->backfill = r != 0;
	p->backfill_passes = r < 2 ? 16 : (unsigned)rng_range(&w->rng, 1, 5);
	p->backfill_wait_ms = r < 2 ? 5000 : rng_range(&w->rng, 1, 51);
	w->passes_max = p->backfill_passes;
	w->backfill_toggles = rng_chance(&w->rng, 500000);
	p->max_hold_ms = rng_chance(&w->rng, 500000) ? rng_range(&w->rng, 5000, 60000) : 0;
	p->max_hold_class_ms[1] = rng_range(&w->rng, 1000, 10000);
	p->max_hold_class_ms[2] = POLICY_CLASS_OFF;
	p->evict_deadline_ms[1] = 2 * SIM_EVICT_DEADLINE_MS;
	p->evict_deadline_ms[3] = SIM_EVICT_DEADLINE_MS / 2;
}

/* settings fills the budgets, the residency rules and the limits the service starts with. */
static void settings(struct world *w)
{
	memset(w->budgets, 0, sizeof(w->budgets));
	for (unsigned i = 0; i < w->opt.devices; i++) {
		w->budgets[i].has_budget = true;
		w->budgets[i].budget = vbackend_total() / 2;
	}
	memset(&w->residency, 0, sizeof(w->residency));
	w->residency.evict_deadline_ms = SIM_EVICT_DEADLINE_MS;
	/* Device 0 keeps transformers and VAEs apart, the others do not; with one device there
	 * are no classes (only bytes stand in the way). */
	if (w->opt.devices > 1)
		class_exclusion_add(&w->residency.exclusive[0], (1u << 1) | (1u << 2));
	memset(&w->cfg, 0, sizeof(w->cfg));
	w->cfg.limits = (struct limits){.max_clients = 1u << 20,
					.max_pending = 64,
					.max_leases = 65536,
					.max_queued_out = 1u << 20,
					.max_clients_per_uid = 1u << 20,
					.max_message = 65536,
					.handshake_timeout_ms = 10000,
					.max_subscribers = 64};
	w->cfg.fd_limit = 1u << 20;
	schedule(w);
}

static int world_init(struct world *w, const struct sim_options *opt)
{
	struct backend *b = vbackend_create(opt->devices);

	memset(w, 0, sizeof(*w));
	w->opt = *opt;
	rng_seed(&w->rng, opt->seed);
	w->now = SIM_EPOCH_MS;
	w->due = UINT64_MAX;
	w->next_pid = 10000;
	w->clock = (struct svc_clock){.ctx = w, .mono_ms = clock_mono, .real_ms = clock_real};
	idtable_init(&w->by_holder);
	runner_init(w);
	settings(w);
	if (!b ||
	    svc_init(&w->svc, b, w->budgets, &w->residency, &w->cfg, &w->clock, &w->runner) < 0) {
		fprintf(stderr, "sim: could not set up the service\n");
		return -1;
	}
	recorder_install(w);
	decide_install(w);
	w->svc.pump = checks_pump;
	/* What happens is told as in the daemon: to the log, the counters and the denials. */
	eventlog_subscribe(&w->svc.eventlog, &w->svc.bus);
	counters_subscribe(&w->svc.counters, &w->svc.bus);
	denials_subscribe(&w->svc.denials, &w->svc.bus);
	return 0;
}

/* reconfigure draws new budgets (sometimes below what is held) and applies them. */
static void reconfigure(struct world *w)
{
	char why[256];

	for (unsigned i = 0; i < w->opt.devices; i++) {
		const struct device *d = &w->svc.state.devices[i];
		uint64_t used = d->leased + d->reserved, granules = vbackend_total() / SIM_GRANULE;

		/* A quarter of the device to all of it: below what is held now and then. */
		w->budgets[i].budget = rng_range(&w->rng, granules / 4, granules) * SIM_GRANULE;
		if (used > w->budgets[i].budget) {
			w->over[i] = true;
			w->over_used[i] = used;
		}
	}
	/* Backfilling on and off, or bounds of 1 to 4 passes, by reload. */
	if (w->backfill_toggles && rng_chance(&w->rng, 500000))
		w->cfg.sched.backfill = !w->cfg.sched.backfill;
	else if (w->backfill_toggles)
		w->cfg.sched.backfill_passes = (unsigned)rng_range(&w->rng, 1, 5);
	if (w->cfg.sched.backfill_passes > w->passes_max)
		w->passes_max = w->cfg.sched.backfill_passes;
	w->stats.reconfigures++;
	sim_trace(w, "budgets now %" PRIu64 " and %" PRIu64, w->budgets[0].budget,
		  w->budgets[w->opt.devices > 1].budget);
	if (svc_reconfigure(&w->svc, w->budgets, &w->residency, &w->cfg, why, sizeof(why)) < 0)
		sim_fail(w, "reload", "svc_reconfigure refused: %s", why);
	else if (memcmp(&w->svc.cfg.sched, &w->cfg.sched, sizeof(w->cfg.sched)) != 0)
		sim_fail(w, "reload", "the scheduling settings reloaded are not in force");
}

/* advance moves the virtual clock on: mostly a little, sometimes past deadlines. */
static void advance(struct world *w)
{
	uint64_t r = rng_below(&w->rng, 100);

	w->now += r < 80   ? rng_below(&w->rng, 20)
		  : r < 98 ? rng_range(&w->rng, 20, 500)
			   : rng_range(&w->rng, 500, 5000);
}

/* a_client returns a random connected client, connecting one when there is none. */
static struct sim_client *a_client(struct world *w)
{
	if (w->nclients == 0)
		return world_connect(w);
	return w->clients[rng_below(&w->rng, w->nclients)];
}

/* act does one thing, chosen by weight. */
static void act(struct world *w)
{
	uint64_t r = rng_below(&w->rng, 100000);
	struct sim_client *c;

	if (r < 25000) {
		advance(w);
	} else if (r < 45000) {
		runner_complete(w, rng_chance(&w->rng, 100000));
	} else if (r < 50000) {
		world_run_later(w);
	} else if (r < 53000) {
		if (w->nclients < w->opt.clients)
			world_connect(w);
	} else if (r < 53800) {
		if (w->nclients)
			world_disconnect(w, w->clients[rng_below(&w->rng, w->nclients)],
					 "at random");
	} else if (r < 53805) {
		reconfigure(w);
	} else if ((c = a_client(w))) {
		world_act(w, c);
	}
}

/* settle runs the service's deadlines once they are due. */
static void settle(struct world *w)
{
	if (w->due <= w->now)
		svc_tick(&w->svc);
}

/* wind_down disconnects everyone and completes every job: the books must be zero then. */
static void wind_down(struct world *w)
{
	while (w->nclients && !w->failed)
		world_disconnect(w, w->clients[w->nclients - 1], "the end");
	while (w->njobs && !w->failed)
		runner_complete(w, false);
	w->now += 3600 * 1000;
	settle(w);
	if (!w->failed)
		checks_end(w);
}

/* elapsed_s is the wall-clock time since start: for the report's rate only, never for what
 * the simulation does. */
static double elapsed_s(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static void report(const struct world *w, double seconds)
{
	const struct sim_stats *st = &w->stats;

	printf("sim: %s after %" PRIu64 " steps, %" PRIu64 " virtual s: %" PRIu64
	       " connects, %" PRIu64 " requests, %" PRIu64 " grants, %" PRIu64 " refusals, %" PRIu64
	       " notices, %" PRIu64 " jobs (%" PRIu64 " failed), %" PRIu64 " acks, %" PRIu64
	       " revocations, %" PRIu64 " bypasses, %" PRIu64 " reloads, %s, %" PRIu64
	       " full checks, %" PRIu64 " stalls, %u waiting at most on a device\n"
	       "sim: backfilling %s (%u passes, %" PRIu64 " ms%s): %" PRIu64 " backfills; %" PRIu64
	       " progress notices; %" PRIu64 " asked at their maximum hold, %" PRIu64 " forced\n",
	       w->failed ? "FAILED" : "passed", w->step, (w->now - SIM_EPOCH_MS) / 1000,
	       st->connects, st->requests, st->grants, st->refusals, st->notices, st->jobs,
	       st->job_failures, st->acks, st->revocations, w->svc.counters.bypasses,
	       st->reconfigures, w->device_lost ? "a device lost" : "no device lost",
	       st->full_checks, st->stalls, st->longest_queue, w->cfg.sched.backfill ? "on" : "off",
	       w->cfg.sched.backfill_passes, w->cfg.sched.backfill_wait_ms,
	       w->backfill_toggles ? ", toggled by reloads" : "", st->backfills, st->progress,
	       st->hold_asks, st->forced);
	printf("sim: %.1f s, %.0f steps/s\n", seconds, seconds > 0 ? (double)w->step / seconds : 0);
	fflush(stdout);
}

static void world_free(struct world *w)
{
	svc_finish(&w->svc);
	runner_finish(w);
	idtable_finish(&w->by_holder);
	free(w->later);
	free(w->evictions);
	free(w->pieces);
	free(w->sums);
	free(w->clients);
	free(w);
}

/* run simulates one seed; returns 0, 1 (an invariant broke) or 2 (could not start). */
static int run(const struct sim_options *opt)
{
	struct world *w = calloc(1, sizeof(*w));
	struct timespec start;
	int rc;

	if (!w || world_init(w, opt) < 0)
		return 2;
	printf("sim: seed 0x%" PRIx64 " steps %" PRIu64 " clients %u devices %u mix %s\n",
	       opt->seed, opt->steps, opt->clients, opt->devices, opt->mix);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (w->step = 0; w->step < opt->steps && !w->failed; w->step++) {
		act(w);
		settle(w);
		checks_step(w);
		if (!w->failed)
			decide_step(w);
		if (!w->failed && w->step % 16 == 0)
			oracle_check(w);
		if (!w->failed && w->step % 16 == 8) {
			decide_sweep(w);
			notices_sweep(w);
		}
		if (!w->failed && w->step % opt->check_every == 0)
			checks_full(w);
	}
	if (!w->failed)
		wind_down(w);
	rc = w->failed ? 1 : 0;
	report(w, elapsed_s(&start));
	/* After a failure the books may be anything: left to the exit. */
	if (!w->failed)
		world_free(w);
	return rc;
}

static uint64_t parse_u64(const char *text, const char *what)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(text, &end, 0);
	if (errno || end == text || *end) {
		fprintf(stderr, "sim: bad %s '%s'\n", what, text);
		exit(2);
	}
	return v;
}

static void parse(int argc, char **argv, struct sim_options *o, unsigned *runs, bool *seeded,
		  bool *lose_set)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--trace") == 0) {
			o->trace_from = 0;
			continue;
		}
		if (!v) {
			fprintf(stderr, "sim: unknown or incomplete argument '%s'\n", a);
			exit(2);
		}
		i++;
		if (strcmp(a, "--seed") == 0)
			o->seed = parse_u64(v, a), *seeded = true;
		else if (strcmp(a, "--steps") == 0)
			o->steps = parse_u64(v, a);
		else if (strcmp(a, "--clients") == 0)
			o->clients = (unsigned)parse_u64(v, a);
		else if (strcmp(a, "--devices") == 0)
			o->devices = (unsigned)parse_u64(v, a);
		else if (strcmp(a, "--mix") == 0)
			o->mix = v;
		else if (strcmp(a, "--check-every") == 0)
			o->check_every = (unsigned)parse_u64(v, a);
		else if (strcmp(a, "--lose-after") == 0)
			o->lose_after = parse_u64(v, a), *lose_set = true;
		else if (strcmp(a, "--trace-from") == 0)
			o->trace_from = parse_u64(v, a);
		else if (strcmp(a, "--runs") == 0)
			*runs = (unsigned)parse_u64(v, a);
		else {
			fprintf(stderr, "sim: unknown argument '%s'\n", a);
			exit(2);
		}
	}
	if (o->devices < 1 || o->devices > SIM_MAX_DEVICES || o->clients < 1 || !o->check_every) {
		fprintf(stderr, "sim: 1 to %u devices, at least one client, --check-every > 0\n",
			SIM_MAX_DEVICES);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct sim_options o = {.steps = 1000000,
				.clients = 1000,
				.devices = 2,
				.mix = "all",
				.check_every = 1024,
				.trace_from = UINT64_MAX};
	unsigned runs = 1;
	bool seeded = false, lose_set = false;
	const char *env = getenv("ROCMMEM_SIM_SEED");

	parse(argc, argv, &o, &runs, &seeded, &lose_set);
	/* The last device may be lost in the last quarter of a run: the rest runs on fewer. */
	if (!lose_set)
		o.lose_after = o.steps / 4 * 3;
	if (!seeded && env && env[0])
		o.seed = parse_u64(env, "ROCMMEM_SIM_SEED"), seeded = true;
	if (!seeded && getrandom(&o.seed, sizeof(o.seed), 0) != sizeof(o.seed))
		o.seed = 0x5eed;
	log_init(LOG_LEVEL_ERROR);
	for (unsigned i = 0; i < runs; i++) {
		int rc = run(&o);

		if (rc)
			return rc;
		o.seed = rng_splitmix(&o.seed);
	}
	return 0;
}
