/* SPDX-License-Identifier: MIT */
/*
 * bench_backfill.c: the contention replay of issue 15, with backfilling off and on. Three
 * processes on one budget: a FramePack-like loop that holds its transformer in use while it
 * acquires its VAE (hold and wait), a ComfyUI-like checkpoint switcher, and a plain script
 * taking leases of an eighth of the budget one after the other. Measured: the script's total
 * wait (the time its acquires took), the makespan, and failed steps.
 *
 * Two daemons run side by side, one `--backfill off`, one with the defaults (backfilling on,
 * its bounds at their defaults); every round runs the replay on each, the order swapped every
 * round. The hosts read their events only inside library calls (no event thread: a host busy
 * computing acks an evict request at its next call), as in the replay.
 *
 * Scale: the 2 GiB budget is 32 MiB (1 GiB -> 16 MiB, as in bench_replay); the
 * script's 256 MiB leases are 4 MiB. Times are those of tests/integration/test_backfill_replay.c
 * scaled to one step's compute (work_ms, per mode). Leases are not mapped: memory is only
 * accounted, as a GPU allocation is.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rocmmem.h"

#define MiB ((uint64_t)1 << 20)
#define SCALED_GIB (16 * MiB)
#define WAIT_MS 30000 /* each request's timeout: PyTorch's allocator's default */
#define MAX_ROUNDS 32

enum { FRAMEPACK, COMFYUI, SCRIPT, PROCS };
static const char *const proc_names[PROCS] = {"framepack", "comfyui", "script"};

/* The replay's shape, per mode. */
static struct {
	unsigned sections, switches, leases;
	uint64_t work_ns;
} shape;

/* What a process reports through the shared mapping. */
struct proc_result {
	uint64_t waited_ns, done_ns;
	uint32_t failed, steps;
	struct bench_hist lease_wait; /* the script: each acquire */
};

struct shared_state {
	uint64_t start_ns;
	struct proc_result result[PROCS];
};

static struct shared_state *shared;

/* ----------------------------------------------------------------------------------------- */
/* The three processes */

static void sleep_work(double fraction)
{
	bench_sleep_ns((uint64_t)((double)shape.work_ns * fraction));
}

/* on_event acks an evict request: a host unloads what it does not use when asked (at its next
 * call into the library, which is when the callback runs). */
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

/* acquire makes id resident and in use, counting the wait and the step. */
static bool acquire(rocmmem_client *c, uint64_t id, struct proc_result *r)
{
	uint64_t t0 = bench_now_ns();
	bool ok = rocmmem_model_acquire(c, id, WAIT_MS) == 0;

	r->waited_ns += bench_now_ns() - t0;
	r->steps++;
	r->failed += !ok;
	return ok;
}

/* framepack: each section samples with the transformer (3/4 GiB), then acquires the VAE
 * (1/2 GiB) while the transformer is still in use, decodes, and releases both. */
static void framepack(rocmmem_client *c, struct proc_result *r)
{
	uint64_t t = model(c, "transformer", ROCMMEM_MODEL_TRANSFORMER, SCALED_GIB * 3 / 4);
	uint64_t v = model(c, "vae", ROCMMEM_MODEL_VAE, SCALED_GIB / 2);

	r->failed += !t || !v;
	for (unsigned s = 0; s < shape.sections && t && v; s++) {
		if (!acquire(c, t, r))
			continue;
		sleep_work(2); /* sampling: evict requests wait meanwhile */
		if (acquire(c, v, r)) {
			sleep_work(1.0 / 3);
			r->failed += rocmmem_model_release(c, v) != 0;
		}
		r->failed += rocmmem_model_release(c, t) != 0;
	}
}

/* comfyui: switches between two 1 GiB checkpoints, each too large beside the other's. */
static void comfyui(rocmmem_client *c, struct proc_result *r)
{
	uint64_t ck[2] = {model(c, "sdxl_a", ROCMMEM_MODEL_TRANSFORMER, SCALED_GIB),
			  model(c, "sdxl_b", ROCMMEM_MODEL_TRANSFORMER, SCALED_GIB)};

	r->failed += !ck[0] || !ck[1];
	for (unsigned s = 0; s < shape.switches && ck[0] && ck[1]; s++) {
		if (!acquire(c, ck[s % 2], r))
			continue;
		sleep_work(1);
		r->failed += rocmmem_model_release(c, ck[s % 2]) != 0;
	}
}

/* script: plain leases of 256 MiB (an eighth of the budget), used a while, one at a time. */
static void script(rocmmem_client *c, struct proc_result *r)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = SCALED_GIB / 4,
					    .timeout_ms = WAIT_MS,
					    .tag = "script",
					    .flags = ROCMMEM_LEASE_NOMAP};

	for (unsigned i = 0; i < shape.leases; i++) {
		rocmmem_lease *l = NULL;
		uint64_t t0 = bench_now_ns(), waited;
		int err = rocmmem_lease_acquire(c, &req, &l);

		waited = bench_now_ns() - t0;
		r->waited_ns += waited;
		bench_hist_add(&r->lease_wait, waited);
		r->steps++;
		if (err < 0) {
			r->failed++;
			continue;
		}
		sleep_work(0.4);
		r->failed += rocmmem_lease_release(l) != 0;
		sleep_work(0.2);
	}
}

static int proc_main(const char *sock, unsigned which, int ready, int go)
{
	struct proc_result *r = &shared->result[which];
	rocmmem_client *c = NULL;
	uint8_t byte = 1;
	int err;

	memset(r, 0, sizeof(*r));
	bench_hist_init(&r->lease_wait);
	if ((err = rocmmem_connect(sock, proc_names[which], 5000, &c)))
		return 1;
	rocmmem_set_event_callback(c, on_event, NULL);
	if (write(ready, &byte, 1) != 1 || read(go, &byte, 1) != 1) {
		rocmmem_disconnect(c);
		return 1;
	}
	if (which == FRAMEPACK)
		framepack(c, r);
	else if (which == COMFYUI)
		comfyui(c, r);
	else
		script(c, r);
	r->done_ns = bench_now_ns();
	rocmmem_disconnect(c);
	return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* Rounds */

struct side {
	const char *name;
	const char *const *daemon_args;
	struct bench_daemon d;
	unsigned runs;
	uint64_t failed, steps;
	double script_wait_ms[MAX_ROUNDS], makespan_ms[MAX_ROUNDS];
	double framepack_wait_ms, comfyui_wait_ms;
	struct bench_hist script_wait, makespan, lease_wait; /* ns */
};

/* run_once runs the three processes on side's daemon and adds what they report. */
static int run_once(struct side *sd)
{
	int ready[2], go[2], status, err = 0;
	pid_t pids[PROCS];
	uint64_t end = 0;
	uint8_t byte = 1;

	if (pipe(ready) < 0 || pipe(go) < 0)
		return -errno;
	for (unsigned i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(proc_main(sd->d.sock, i, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	for (unsigned i = 0; i < PROCS; i++)
		if (read(ready[0], &byte, 1) != 1)
			err = -EPIPE;
	shared->start_ns = bench_now_ns();
	for (unsigned i = 0; i < PROCS; i++)
		if (write(go[1], &byte, 1) != 1)
			err = -EPIPE;
	close(go[1]);
	close(ready[0]);
	for (unsigned i = 0; i < PROCS; i++) {
		const struct proc_result *r = &shared->result[i];

		waitpid(pids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "bench_backfill: %s (%s) failed\n", proc_names[i],
				sd->name);
			err = -EPROTO;
			continue;
		}
		if (r->done_ns > end)
			end = r->done_ns;
		sd->failed += r->failed;
		sd->steps += r->steps;
	}
	if (err)
		return err;
	sd->script_wait_ms[sd->runs] = (double)shared->result[SCRIPT].waited_ns / 1e6;
	sd->makespan_ms[sd->runs] = (double)(end - shared->start_ns) / 1e6;
	sd->framepack_wait_ms += (double)shared->result[FRAMEPACK].waited_ns / 1e6;
	sd->comfyui_wait_ms += (double)shared->result[COMFYUI].waited_ns / 1e6;
	bench_hist_add(&sd->script_wait, shared->result[SCRIPT].waited_ns);
	bench_hist_add(&sd->makespan, end - shared->start_ns);
	bench_hist_merge(&sd->lease_wait, &shared->result[SCRIPT].lease_wait);
	sd->runs++;
	return 0;
}

static void write_side(struct bench_json *j, struct side *sd)
{
	double runs = sd->runs ? (double)sd->runs : 1.0;

	bench_json_object(j, sd->name);
	bench_json_array(j, "daemon_args");
	for (unsigned i = 0; sd->daemon_args[i]; i++)
		bench_json_str(j, NULL, sd->daemon_args[i]);
	bench_json_end_array(j);
	bench_json_int(j, "runs", sd->runs);
	bench_json_int(j, "steps", (int64_t)sd->steps);
	bench_json_int(j, "failed_steps", (int64_t)sd->failed);
	bench_json_hist(j, "script_total_wait", &sd->script_wait);
	bench_json_hist(j, "script_lease_wait", &sd->lease_wait);
	bench_json_hist(j, "makespan", &sd->makespan);
	bench_json_num(j, "script_total_wait_ms_median",
		       bench_median(sd->script_wait_ms, sd->runs));
	bench_json_num(j, "makespan_ms_median", bench_median(sd->makespan_ms, sd->runs));
	bench_json_num(j, "framepack_wait_ms_per_run", sd->framepack_wait_ms / runs);
	bench_json_num(j, "comfyui_wait_ms_per_run", sd->comfyui_wait_ms / runs);
	bench_json_end_object(j);
}

static void write_report(struct bench_json *j, struct side *off, struct side *on)
{
	double off_wait = bench_median(off->script_wait_ms, off->runs);
	double on_wait = bench_median(on->script_wait_ms, on->runs);
	double off_span = bench_median(off->makespan_ms, off->runs);
	double on_span = bench_median(on->makespan_ms, on->runs);

	bench_json_str(j, "benchmark", "backfill");
	bench_json_str(j, "scale",
		       "2 GiB budget -> 32 MiB (1 GiB -> 16 MiB); script leases "
		       "256 MiB -> 4 MiB; times scaled to one step's compute");
	bench_json_int(j, "budget_bytes", (int64_t)(2 * SCALED_GIB));
	bench_json_int(j, "script_lease_bytes", (int64_t)(SCALED_GIB / 4));
	bench_json_num(j, "work_ms", (double)shape.work_ns / 1e6);
	bench_json_int(j, "framepack_sections", shape.sections);
	bench_json_int(j, "comfyui_switches", shape.switches);
	bench_json_int(j, "script_leases", shape.leases);
	bench_json_int(j, "wait_ms", WAIT_MS);
	write_side(j, off);
	write_side(j, on);
	bench_json_num(j, "ratio_script_wait_p50", bench_ratio(on_wait, off_wait));
	bench_json_num(j, "ratio_script_wait_p99",
		       bench_ratio((double)bench_hist_pct(&on->script_wait, 99),
				   (double)bench_hist_pct(&off->script_wait, 99)));
	bench_json_num(j, "ratio_makespan_p50", bench_ratio(on_span, off_span));
}

int main(int argc, char **argv)
{
	static const char *args_off[] = {"--backend",	"host",	      "--budget",
					 "32M",		"--backfill", "off",
					 "--log-level", "info",	      NULL};
	static const char *args_on[] = {"--backend",   "host", "--budget", "32M",
					"--log-level", "info", NULL};
	struct side sides[2] = {{.name = "backfill_off", .daemon_args = args_off},
				{.name = "backfill_on", .daemon_args = args_on}};
	struct bench_args args;
	unsigned rounds;
	struct bench_json j;
	int err = 0, status = 1;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	if (argc > 1)
		return bench_usage("bench_backfill", "");
	if (!args.rocmmemd)
		return bench_need_daemon("bench_backfill");
	if (getenv("ROCMMEM_BENCH_DEBUG")) {
		args_off[7] = "debug";
		args_on[5] = "debug";
	}
	/* The three loops last about as long as one another (a section is 7/3 of a step, a
	 * switch one step, a lease 0.6 of one), so the contention lasts the whole run. */
	rounds = (unsigned)bench_mode_pick(&args, 1, 3, 20);
	shape.sections = (unsigned)bench_mode_pick(&args, 3, 4, 6);
	shape.switches = shape.sections * 7 / 3;
	shape.leases = shape.sections * 4;
	shape.work_ns = bench_mode_pick(&args, 20, 30, 40) * 1000000u;
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 1;
	for (unsigned s = 0; s < 2; s++) {
		bench_hist_init(&sides[s].script_wait);
		bench_hist_init(&sides[s].makespan);
		bench_hist_init(&sides[s].lease_wait);
		if ((err = bench_daemon_start(&sides[s].d, args.rocmmemd, -1, sides[s].daemon_args,
					      NULL)))
			goto out;
	}
	/* Taking turns, the order swapped every round. */
	for (unsigned r = 0; r < rounds && !err; r++) {
		for (unsigned k = 0; k < 2 && !err; k++) {
			struct side *sd = &sides[(k + r) % 2];

			err = run_once(sd);
			bench_log("round %u %s: the script waited %.1f ms, makespan %.1f ms", r + 1,
				  sd->name, err ? 0.0 : sd->script_wait_ms[sd->runs - 1],
				  err ? 0.0 : sd->makespan_ms[sd->runs - 1]);
		}
	}
	if (err) {
		fprintf(stderr, "bench_backfill: failed: %s\n", strerror(-err));
		goto out;
	}
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	write_report(&j, &sides[0], &sides[1]);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	for (unsigned s = 0; s < 2; s++)
		if (sides[s].d.pid > 0 && bench_daemon_stop(&sides[s].d) != 0)
			status = 1;
	return status;
}
