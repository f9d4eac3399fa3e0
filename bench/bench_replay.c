/* SPDX-License-Identifier: MIT */
/*
 * bench_replay.c: contention replay. A FramePack-like host (per video: text encoders, VAE
 * encode, image encoder, then per latent section transformer sampling and VAE decode, each
 * model loaded for its step and unloaded after it, as FramePack's AMD notes do by hand) and a
 * ComfyUI-like host switching between an SDXL and a Flux workflow (keeping what it loaded
 * until it runs short, then freeing its own cache) share a budget that holds one large model.
 *
 * Run twice, alternating, on the same daemon and budget: uncoordinated (plain leases that fail
 * at once when the memory is not free, the way an allocation fails on a GPU today: the step
 * fails) and through rocmmemd's residency (models registered, acquires wait, the daemon asks
 * the idle model's owner to unload, evict callbacks unload and ack). Counted: failed steps,
 * and the makespan against the ideal serial schedule, the sum of the work times (measured).
 *
 * Scale: 1 GiB of the users' 24 GB cards is 16 MiB here (their 20 GB limit: a 320 MiB
 * budget), and 1 s of GPU time is 1 ms. The GPU is a process-shared mutex held while a step
 * computes (one step's kernels at a time, as on one GPU); loading a model takes 0.25 ms per
 * scaled GiB (4 GiB/s from the page cache) outside it. Leases are not mapped: memory is only
 * accounted, as a GPU allocation is.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rocmmem.h"

#define MiB ((uint64_t)1 << 20)
#define SCALED_GIB (16 * MiB)
#define BUDGET_GIB 20
#define LOAD_NS_PER_GIB 250000u /* 4 GiB/s */
/* How long a host waits for a model: FramePack's integration waits 3600 s (scaled). */
#define WAIT_MS 3600
#define MAX_MODELS 8
#define MAX_STEPS 256

struct model_spec {
	const char *name;
	enum rocmmem_model_class model_class;
	double gib; /* weights plus the working set the step needs, in the users' GiB */
	int32_t priority;
};

struct step {
	unsigned models[2];
	unsigned nmodels;
	double work_ms; /* GPU time, scaled: the users' seconds */
	double pause_ms;
};

struct host_spec {
	const char *name;
	const struct model_spec *models;
	unsigned nmodels;
	bool keeps_models; /* uncoordinated: keeps models loaded, frees its own cache when short */
	struct step steps[MAX_STEPS];
	unsigned nsteps;
};

/* FramePack (HunyuanVideo packed): LLaVA-Llama-3-8B fp16, CLIP-L, the video VAE with its
 * decode working set, SigLIP, and the 13B transformer (its packed bf16/fp8 weights). */
enum { FP_TEXT, FP_TEXT2, FP_VAE, FP_IMAGE, FP_TRANSFORMER, FP_MODELS };
static const struct model_spec framepack_models[FP_MODELS] = {
    [FP_TEXT] = {"llava_llama3_text_encoder", ROCMMEM_MODEL_TEXT_ENCODER, 15.0, 0},
    [FP_TEXT2] = {"clip_l_text_encoder", ROCMMEM_MODEL_TEXT_ENCODER, 0.25, 0},
    [FP_VAE] = {"hunyuan_video_vae", ROCMMEM_MODEL_VAE, 6.0, 1},
    [FP_IMAGE] = {"siglip_image_encoder", ROCMMEM_MODEL_IMAGE_ENCODER, 0.8, 0},
    [FP_TRANSFORMER] = {"framepack_transformer", ROCMMEM_MODEL_TRANSFORMER, 16.0, 1},
};

/* ComfyUI switching workflows: SDXL (CLIP-L+G, UNet, VAE) and Flux-dev fp8 (T5-XXL fp8 with
 * CLIP-L, the transformer, the autoencoder), each with its sampling working set. */
enum {
	CU_SDXL_CLIP,
	CU_SDXL_UNET,
	CU_SDXL_VAE,
	CU_FLUX_TEXT,
	CU_FLUX_UNET,
	CU_FLUX_VAE,
	CU_MODELS
};
static const struct model_spec comfy_models[CU_MODELS] = {
    [CU_SDXL_CLIP] = {"sdxl_clip", ROCMMEM_MODEL_TEXT_ENCODER, 1.6, 0},
    [CU_SDXL_UNET] = {"sdxl_unet", ROCMMEM_MODEL_TRANSFORMER, 6.0, 1},
    [CU_SDXL_VAE] = {"sdxl_vae", ROCMMEM_MODEL_VAE, 1.3, 0},
    [CU_FLUX_TEXT] = {"t5xxl_fp8_clip_l", ROCMMEM_MODEL_TEXT_ENCODER, 5.2, 0},
    [CU_FLUX_UNET] = {"flux1_dev_fp8", ROCMMEM_MODEL_TRANSFORMER, 12.5, 1},
    [CU_FLUX_VAE] = {"flux_ae", ROCMMEM_MODEL_VAE, 1.5, 0},
};

/* The same, with the two text encoders registered and acquired as one model. */
static const struct model_spec framepack_models_joined[FP_MODELS] = {
    [FP_TEXT] = {"text_encoders", ROCMMEM_MODEL_TEXT_ENCODER, 15.25, 0},
    [FP_TEXT2] = {"unused", ROCMMEM_MODEL_TEXT_ENCODER, 0.25, 0},
    [FP_VAE] = {"hunyuan_video_vae", ROCMMEM_MODEL_VAE, 6.0, 1},
    [FP_IMAGE] = {"siglip_image_encoder", ROCMMEM_MODEL_IMAGE_ENCODER, 0.8, 0},
    [FP_TRANSFORMER] = {"framepack_transformer", ROCMMEM_MODEL_TRANSFORMER, 16.0, 1},
};

static struct host_spec hosts[2];

static void add_step(struct host_spec *h, int a, int b, double work_ms, double pause_ms)
{
	struct step *s = &h->steps[h->nsteps++];

	s->models[0] = (unsigned)a;
	s->nmodels = 1;
	if (b >= 0)
		s->models[s->nmodels++] = (unsigned)b;
	s->work_ms = work_ms;
	s->pause_ms = pause_ms;
}

/* build makes both hosts' steps; joined: FramePack's text encoders are one model. */
static void build(unsigned videos, unsigned sections, unsigned prompts, bool joined)
{
	struct host_spec *fp = &hosts[0], *cu = &hosts[1];

	memset(hosts, 0, sizeof(hosts));
	fp->name = "framepack";
	fp->models = joined ? framepack_models_joined : framepack_models;
	fp->nmodels = FP_MODELS;
	for (unsigned v = 0; v < videos; v++) {
		add_step(fp, FP_TEXT, joined ? -1 : FP_TEXT2, 3, 0);
		add_step(fp, FP_VAE, -1, 2, 0);
		add_step(fp, FP_IMAGE, -1, 1, 0);
		for (unsigned s = 0; s < sections; s++) {
			add_step(fp, FP_TRANSFORMER, -1, 60, 0);
			add_step(fp, FP_VAE, -1, 10, 0);
		}
	}
	cu->name = "comfyui";
	cu->models = comfy_models;
	cu->nmodels = CU_MODELS;
	cu->keeps_models = true;
	for (unsigned p = 0; p < prompts; p++) {
		if (p % 2 == 0) {
			add_step(cu, CU_SDXL_CLIP, -1, 0.5, 0);
			add_step(cu, CU_SDXL_UNET, -1, 8, 0);
			add_step(cu, CU_SDXL_VAE, -1, 1.5, 5); /* then the next prompt is queued */
		} else {
			add_step(cu, CU_FLUX_TEXT, -1, 1, 0);
			add_step(cu, CU_FLUX_UNET, -1, 40, 0);
			add_step(cu, CU_FLUX_VAE, -1, 2, 5);
		}
	}
}

/* ----------------------------------------------------------------------------------------- */
/* What the hosts share with the parent */

struct host_result {
	uint32_t steps, failed, timeouts, loads, evictions;
	uint64_t work_ns, load_ns, wait_ns, done_ns;
	int error;
};

struct shared_state {
	pthread_mutex_t gpu;
	uint64_t start_ns;
	struct host_result result[2];
};

static struct shared_state *shared;

/* ----------------------------------------------------------------------------------------- */
/* A host */

struct host {
	const struct host_spec *spec;
	struct host_result *res;
	rocmmem_client *c;
	uint64_t ids[MAX_MODELS];
	atomic_bool loaded[MAX_MODELS];
	rocmmem_lease *leases[MAX_MODELS]; /* uncoordinated */
	atomic_bool stop;
	pthread_t events;
	atomic_uint evictions;
};

static uint64_t model_bytes(const struct model_spec *m)
{
	return (uint64_t)(m->gib * (double)SCALED_GIB);
}

/* compute runs a step's kernels: the GPU is one, and busy while any host computes on it. */
static void compute(struct host *h, double ms)
{
	uint64_t t0;

	pthread_mutex_lock(&shared->gpu);
	t0 = bench_now_ns();
	bench_sleep_ns((uint64_t)(ms * 1e6));
	h->res->work_ns += bench_now_ns() - t0;
	pthread_mutex_unlock(&shared->gpu);
}

static void load(struct host *h, unsigned m)
{
	uint64_t t0 = bench_now_ns();

	bench_sleep_ns((uint64_t)(h->spec->models[m].gib * LOAD_NS_PER_GIB));
	h->res->load_ns += bench_now_ns() - t0;
	h->res->loads++;
	atomic_store(&h->loaded[m], true);
}

static unsigned model_index(const struct host *h, uint64_t id)
{
	for (unsigned i = 0; i < h->spec->nmodels; i++)
		if (h->ids[i] == id)
			return i;
	return MAX_MODELS;
}

/* on_event unloads what the daemon asks for (freeing tensors is quick) and acks. */
static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct host *h = userdata;
	unsigned m = model_index(h, ev->model_id);

	if (m == MAX_MODELS)
		return;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST) {
		atomic_store(&h->loaded[m], false);
		atomic_fetch_add(&h->evictions, 1);
		rocmmem_model_evict_ack(c, ev->model_id);
	} else if (ev->type == ROCMMEM_EVENT_MODEL_REVOKED) {
		atomic_store(&h->loaded[m], false);
	}
}

/* event_thread: the host's event loop, as the Python package's event thread runs it. */
static void *event_thread(void *arg)
{
	struct host *h = arg;

	while (!atomic_load(&h->stop)) {
		struct pollfd p = {.fd = rocmmem_event_fd(h->c), .events = POLLIN};

		if (poll(&p, 1, 20) > 0 && rocmmem_dispatch(h->c) < 0)
			break;
	}
	return NULL;
}

static int residency_step(struct host *h, const struct step *s)
{
	unsigned held = 0;
	int err = 0;

	for (unsigned i = 0; i < s->nmodels && !err; i++) {
		unsigned m = s->models[i];
		uint64_t t0 = bench_now_ns();

		err = rocmmem_model_acquire(h->c, h->ids[m], WAIT_MS);
		h->res->wait_ns += bench_now_ns() - t0;
		if (err)
			break;
		held++;
		if (!atomic_load(&h->loaded[m]))
			load(h, m);
	}
	if (!err)
		compute(h, s->work_ms);
	for (unsigned i = 0; i < held; i++) {
		int rc = rocmmem_model_release(h->c, h->ids[s->models[i]]);

		if (rc && !err)
			err = rc;
	}
	return err;
}

static int plain_load(struct host *h, unsigned m)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = model_bytes(&h->spec->models[m]),
					    .timeout_ms = 0,
					    .tag = h->spec->models[m].name,
					    .flags = ROCMMEM_LEASE_NOMAP};
	int err;

	if (h->leases[m])
		return 0;
	err = rocmmem_lease_acquire(h->c, &req, &h->leases[m]);
	if (err) {
		h->leases[m] = NULL;
		return err;
	}
	load(h, m);
	return 0;
}

static void plain_unload(struct host *h, unsigned m)
{
	rocmmem_lease_release(h->leases[m]);
	h->leases[m] = NULL;
	atomic_store(&h->loaded[m], false);
}

static bool in_step(const struct step *s, unsigned m)
{
	for (unsigned i = 0; i < s->nmodels; i++)
		if (s->models[i] == m)
			return true;
	return false;
}

/* plain_step: what hosts do today. An allocation that does not fit fails the step. */
static int plain_step(struct host *h, const struct step *s)
{
	int err = 0;

	for (unsigned i = 0; i < s->nmodels && !err; i++) {
		unsigned m = s->models[i];

		err = plain_load(h, m);
		if (err == -ENOMEM && h->spec->keeps_models) {
			/* ComfyUI's model management frees its own cache; it knows of no one else.
			 */
			for (unsigned k = 0; k < h->spec->nmodels; k++)
				if (h->leases[k] && !in_step(s, k))
					plain_unload(h, k);
			err = plain_load(h, m);
		}
	}
	if (!err)
		compute(h, s->work_ms);
	/* FramePack unloads every model after its step; a failed step leaves nothing either. */
	if (!h->spec->keeps_models || err)
		for (unsigned i = 0; i < s->nmodels; i++)
			if (h->leases[s->models[i]] && (!h->spec->keeps_models || err))
				plain_unload(h, s->models[i]);
	return err;
}

static int host_main(const char *sock, unsigned index, bool residency, int ready, int go)
{
	struct host h;
	struct host_result *res = &shared->result[index];
	uint8_t byte = 1;
	int err = 0;

	memset(&h, 0, sizeof(h));
	h.spec = &hosts[index];
	h.res = res;
	memset(res, 0, sizeof(*res));
	if ((err = rocmmem_connect(sock, h.spec->name, 5000, &h.c)))
		goto out;
	if (residency) {
		rocmmem_set_event_callback(h.c, on_event, &h);
		for (unsigned i = 0; i < h.spec->nmodels && !err; i++) {
			const struct model_spec *ms = &h.spec->models[i];
			struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
							  .name = ms->name,
							  .model_class = ms->model_class,
							  .size = model_bytes(ms),
							  .priority = ms->priority};

			err = rocmmem_model_register(h.c, &desc, &h.ids[i]);
		}
		if (err || pthread_create(&h.events, NULL, event_thread, &h) != 0)
			goto out;
	}
	if (write(ready, &byte, 1) != 1 || read(go, &byte, 1) != 1) {
		err = -EPIPE;
		goto stop;
	}
	for (unsigned i = 0; i < h.spec->nsteps; i++) {
		const struct step *s = &h.spec->steps[i];
		int rc = residency ? residency_step(&h, s) : plain_step(&h, s);

		res->steps++;
		if (rc) {
			res->failed++;
			res->timeouts += rc == -ETIMEDOUT;
			/* Waiting forever would be a bug here: only refusals count as failures. */
			if (residency && rc != -ENOMEM && rc != -ETIMEDOUT)
				err = rc;
		}
		if (s->pause_ms > 0)
			bench_sleep_ns((uint64_t)(s->pause_ms * 1e6));
	}
	res->done_ns = bench_now_ns();
stop:
	if (residency) {
		atomic_store(&h.stop, true);
		pthread_join(h.events, NULL);
	}
out:
	res->evictions = atomic_load(&h.evictions);
	res->error = err;
	rocmmem_disconnect(h.c);
	return err ? 1 : 0;
}

/* ----------------------------------------------------------------------------------------- */

struct mode {
	const char *name;
	bool residency;
	bool joined;
	unsigned runs;
	double makespan_ms[16], ideal_ms[16];
	uint64_t steps, failed, timeouts, failed_host[2], loads, evictions;
	double load_ms, wait_ms;
};

static int run_once(const char *sock, struct mode *m)
{
	int ready[2], go[2];
	pid_t pids[2];
	uint64_t end = 0, work = 0;
	int status, err = 0;
	uint8_t byte = 1;

	if (pipe(ready) < 0 || pipe(go) < 0)
		return -errno;
	for (unsigned i = 0; i < 2; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(host_main(sock, i, m->residency, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	for (unsigned i = 0; i < 2; i++)
		if (read(ready[0], &byte, 1) != 1)
			err = -EPIPE;
	shared->start_ns = bench_now_ns();
	for (unsigned i = 0; i < 2; i++)
		if (write(go[1], &byte, 1) != 1)
			err = -EPIPE;
	close(go[1]);
	close(ready[0]);
	for (unsigned i = 0; i < 2; i++) {
		const struct host_result *r = &shared->result[i];

		waitpid(pids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || r->error) {
			fprintf(stderr, "bench_replay: %s (%s) failed: %s\n", hosts[i].name,
				m->name, strerror(r->error ? -r->error : EPROTO));
			err = r->error ? r->error : -EPROTO;
			continue;
		}
		if (r->done_ns > end)
			end = r->done_ns;
		work += r->work_ns;
		m->steps += r->steps;
		m->failed += r->failed;
		m->timeouts += r->timeouts;
		m->failed_host[i] += r->failed;
		m->loads += r->loads;
		m->evictions += r->evictions;
		m->load_ms += (double)r->load_ns / 1e6;
		m->wait_ms += (double)r->wait_ns / 1e6;
	}
	if (err)
		return err;
	m->makespan_ms[m->runs] = (double)(end - shared->start_ns) / 1e6;
	m->ideal_ms[m->runs] = (double)work / 1e6;
	m->runs++;
	return 0;
}

static void write_mode(struct bench_json *j, const struct mode *m)
{
	double ratio[16], makespan[16], ideal[16];

	for (unsigned i = 0; i < m->runs; i++) {
		ratio[i] = bench_ratio(m->makespan_ms[i], m->ideal_ms[i]);
		makespan[i] = m->makespan_ms[i];
		ideal[i] = m->ideal_ms[i];
	}
	bench_json_object(j, m->name);
	bench_json_int(j, "runs", m->runs);
	bench_json_int(j, "steps", (int64_t)m->steps);
	bench_json_int(j, "failed_steps", (int64_t)m->failed);
	bench_json_int(j, "timed_out_steps", (int64_t)m->timeouts);
	bench_json_int(j, "failed_steps_framepack", (int64_t)m->failed_host[0]);
	bench_json_int(j, "failed_steps_comfyui", (int64_t)m->failed_host[1]);
	bench_json_num(j, "makespan_ms_median", bench_median(makespan, m->runs));
	bench_json_num(j, "ideal_serial_ms_median", bench_median(ideal, m->runs));
	bench_json_num(j, "ratio_makespan_vs_ideal_median", bench_median(ratio, m->runs));
	{
		double worst = 0;

		for (unsigned i = 0; i < m->runs; i++)
			if (bench_ratio(m->makespan_ms[i], m->ideal_ms[i]) > worst)
				worst = bench_ratio(m->makespan_ms[i], m->ideal_ms[i]);
		bench_json_num(j, "ratio_makespan_vs_ideal_worst", worst);
	}
	bench_json_int(j, "model_loads", (int64_t)m->loads);
	bench_json_num(j, "load_ms_per_run", m->runs ? m->load_ms / m->runs : 0.0);
	bench_json_num(j, "acquire_wait_ms_per_run", m->runs ? m->wait_ms / m->runs : 0.0);
	bench_json_int(j, "evictions", (int64_t)m->evictions);
	bench_json_end_object(j);
}

int main(int argc, char **argv)
{
	static const char *daemon_args[] = {
	    "--backend", "host",	"--budget", "320M", "--evict-deadline",
	    "10",	 "--log-level", "info",	    NULL};
	struct mode modes[3] = {
	    {.name = "uncoordinated", .residency = false},
	    {.name = "residency", .residency = true},
	    {.name = "residency_one_acquire_per_step", .residency = true, .joined = true}};
	unsigned videos, sections, prompts;
	struct bench_args args;
	struct bench_daemon d = {0};
	pthread_mutexattr_t attr;
	unsigned rounds;
	struct bench_json j;
	int err = 0, status = 1;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	if (argc > 1)
		return bench_usage("bench_replay", "");
	if (!args.rocmmemd)
		return bench_need_daemon("bench_replay");
	if (getenv("ROCMMEM_BENCH_DEBUG"))
		daemon_args[7] = "debug";
	rounds = (unsigned)bench_mode_pick(&args, 1, 2, 5);
	videos = (unsigned)bench_mode_pick(&args, 1, 1, 2);
	sections = (unsigned)bench_mode_pick(&args, 2, 3, 4);
	prompts = (unsigned)bench_mode_pick(&args, 2, 4, 8);
	build(videos, sections, prompts, false);
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 1;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&shared->gpu, &attr);
	if ((err = bench_daemon_start(&d, args.rocmmemd, -1, daemon_args, NULL)))
		goto out;
	/* Taking turns, the order rotating every round. */
	for (unsigned r = 0; r < rounds && !err; r++) {
		for (unsigned k = 0; k < 3 && !err; k++) {
			struct mode *m = &modes[(k + r) % 3];

			build(videos, sections, prompts, m->joined);
			err = run_once(d.sock, m);
			bench_log("round %u %s: %" PRIu64 " failed steps so far", r + 1, m->name,
				  m->failed);
		}
	}
	if (err) {
		fprintf(stderr, "bench_replay: failed: %s\n", strerror(-err));
		goto out;
	}
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "replay");
	bench_json_str(&j, "scale", "1 GiB -> 16 MiB; 1 s of GPU time -> 1 ms; loads at 4 GiB/s");
	bench_json_int(&j, "budget_bytes", (int64_t)BUDGET_GIB * (int64_t)SCALED_GIB);
	bench_json_int(&j, "framepack_steps_per_run", hosts[0].nsteps);
	bench_json_int(&j, "comfyui_steps_per_run", hosts[1].nsteps);
	bench_json_int(&j, "wait_ms", WAIT_MS);
	write_mode(&j, &modes[0]);
	write_mode(&j, &modes[1]);
	write_mode(&j, &modes[2]);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	if (d.pid > 0 && bench_daemon_stop(&d) != 0)
		status = 1;
	return status;
}
