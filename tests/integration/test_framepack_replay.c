/* SPDX-License-Identifier: MIT */
/* test_framepack_replay.c: FramePack's and ComfyUI's model juggling, replayed on rocmmemd. */

/*
 * FramePack's AMD notes (20-24 GB cards, a 20 GB hard limit) unload every model by hand:
 * "Load text_encoder + text_encoder_2 -> Encode -> Unload; Load vae -> Encode image -> Unload
 * vae; Load image_encoder -> Encode -> Unload; FOR EACH LATENT SECTION: Load transformer ->
 * Sample -> COMPLETELY UNLOAD transformer; Load vae -> Decode -> Unload vae". Here a
 * FramePack-like host and a ComfyUI-like model switcher run that flow at the same time, as two
 * real processes on one budget, with every size scaled from 1 GiB to 16 MiB (20 GB -> 320 MiB).
 * Through rocmmemd's residency neither unloads by hand: each acquires what the step needs and
 * unloads only when the daemon asks. The control run does what hosts do today: plain leases
 * that fail at once when the memory is not free, and nobody unloads for anyone else.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
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
/* One GiB of the documents' 24 GB cards. */
#define SCALED_GiB (16 * MiB)
#define BUDGET (20 * SCALED_GiB) /* FramePack's 20 GB hard limit */
#define WAIT_MS 5000		 /* how long a host waits for a model */
#define RUN_LIMIT_MS 60000	 /* the whole replay */
#define JOBS 3			 /* FramePack's videos */
#define SECTIONS 4		 /* FramePack's latent sections per video */
#define PROMPTS 24		 /* ComfyUI's prompts */
#define MAX_MODELS 8
#define MAX_STEPS 128
#define MAX_RECORDS 8192
#define MAX_INTERVALS 1024
#define HOSTS 2

static struct daemon_proc daemon_;

static int setup(void **state)
{
	static const char *const args[] = {
	    "--budget",	   "320M", "--exclusive", "transformer,vae", "--evict-deadline", "5",
	    "--log-level", "info", NULL};

	(void)state;
	return harness_daemon_start(&daemon_, args);
}

static int teardown(void **state)
{
	(void)state;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

/* ----------------------------------------------------------------------------------------- */
/* The two hosts: their models and their steps */

struct model_spec {
	const char *name;
	enum rocmmem_model_class model_class;
	uint64_t size;
	int32_t priority; /* what is used every section or prompt stays longer */
};

enum { FP_TEXT_ENCODER, FP_TEXT_ENCODER_2, FP_VAE, FP_IMAGE_ENCODER, FP_TRANSFORMER, FP_MODELS };

static const struct model_spec framepack_models[FP_MODELS] = {
    [FP_TEXT_ENCODER] = {"text_encoder", ROCMMEM_MODEL_TEXT_ENCODER, 9 * SCALED_GiB, 0},
    [FP_TEXT_ENCODER_2] = {"text_encoder_2", ROCMMEM_MODEL_TEXT_ENCODER, SCALED_GiB / 2, 0},
    /* 6 GiB: the weights and the decode working set the notes want free for it. */
    [FP_VAE] = {"vae", ROCMMEM_MODEL_VAE, 6 * SCALED_GiB, 1},
    [FP_IMAGE_ENCODER] = {"image_encoder", ROCMMEM_MODEL_IMAGE_ENCODER, SCALED_GiB, 0},
    [FP_TRANSFORMER] = {"transformer", ROCMMEM_MODEL_TRANSFORMER, 16 * SCALED_GiB, 1},
};

enum { CU_UNET, CU_CLIP, CU_VAE, CU_UPSCALER, CU_MODELS };

static const struct model_spec comfy_models[CU_MODELS] = {
    [CU_UNET] = {"sdxl_unet", ROCMMEM_MODEL_TRANSFORMER, 7 * SCALED_GiB, 1},
    [CU_CLIP] = {"clip", ROCMMEM_MODEL_TEXT_ENCODER, 2 * SCALED_GiB, 0},
    [CU_VAE] = {"sdxl_vae", ROCMMEM_MODEL_VAE, SCALED_GiB / 2, 1},
    [CU_UPSCALER] = {"upscaler", ROCMMEM_MODEL_OTHER, SCALED_GiB, 1},
};

/* One step: the models it needs at once, how long it computes, and a pause after it. */
struct step {
	unsigned models[2];
	unsigned nmodels;
	unsigned work_ms;
	unsigned pause_ms;
};

struct host_spec {
	const char *name;
	const struct model_spec *models;
	unsigned nmodels;
	struct step steps[MAX_STEPS];
	unsigned nsteps;
	/* Uncoordinated: keeps what it loaded and frees only its own cache when it runs short
	 * (ComfyUI); else unloads after every step (FramePack's hand-written choreography). */
	bool keeps_models;
};

static struct host_spec hosts[HOSTS];

static void add_step(struct host_spec *h, unsigned a, int b, unsigned work_ms, unsigned pause_ms)
{
	struct step *s = &h->steps[h->nsteps++];

	s->models[0] = a;
	s->nmodels = 1;
	if (b >= 0)
		s->models[s->nmodels++] = (unsigned)b;
	s->work_ms = work_ms;
	s->pause_ms = pause_ms;
}

static void build_hosts(void)
{
	struct host_spec *fp = &hosts[0], *cu = &hosts[1];

	memset(hosts, 0, sizeof(hosts));
	fp->name = "framepack";
	fp->models = framepack_models;
	fp->nmodels = FP_MODELS;
	for (unsigned job = 0; job < JOBS; job++) {
		add_step(fp, FP_TEXT_ENCODER, FP_TEXT_ENCODER_2, 3, 0); /* encode the prompt */
		add_step(fp, FP_VAE, -1, 3, 0);				/* encode the image */
		add_step(fp, FP_IMAGE_ENCODER, -1, 2, 0);		/* clip vision */
		for (unsigned i = 0; i < SECTIONS; i++) {
			add_step(fp, FP_TRANSFORMER, -1, 8, 0); /* sample a section */
			add_step(fp, FP_VAE, -1, 4, 0);		/* decode it */
		}
	}
	cu->name = "comfyui";
	cu->models = comfy_models;
	cu->nmodels = CU_MODELS;
	cu->keeps_models = true;
	for (unsigned i = 0; i < PROMPTS; i++) {
		add_step(cu, CU_CLIP, -1, 2, 0);
		add_step(cu, CU_UNET, -1, 6, 0);
		add_step(cu, CU_VAE, -1, 3, 0);
		add_step(cu, CU_UPSCALER, -1, 2, 2); /* then the next prompt arrives */
	}
}

/* ----------------------------------------------------------------------------------------- */
/* What a host reports to the test: one record per call, timestamped */

enum rec_kind {
	REC_ACQ_START = 1,
	REC_ACQ_DONE, /* value: the result */
	REC_REL_START,
	REC_REL_DONE,
	REC_EVICT, /* an evict request was delivered; value: MiB needed */
	REC_ACK_START,
	REC_ACK_DONE,
	REC_REVOKED,
	REC_STEP, /* model: the step's index; value: its result */
	REC_DONE, /* value: failed steps */
};

struct record {
	enum rec_kind kind;
	unsigned model;
	int32_t value;
	int64_t t_us; /* CLOCK_MONOTONIC, the same clock in every process */
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* A host process's state. */
struct host {
	const struct host_spec *spec;
	rocmmem_client *c;
	int out;
	uint64_t ids[MAX_MODELS];
	bool loaded[MAX_MODELS];	   /* the weights are on the device, as the host sees it */
	rocmmem_lease *leases[MAX_MODELS]; /* the uncoordinated run's models */
};

/* record sends one record in one write (atomic on a pipe). */
static void record(const struct host *h, enum rec_kind kind, unsigned model, int32_t value)
{
	int64_t rec[2] = {(int64_t)kind | (int64_t)model << 8 | (int64_t)(uint32_t)value << 16,
			  now_us()};

	if (write(h->out, rec, sizeof(rec)) != (ssize_t)sizeof(rec)) {
		/* The test is gone; the host finishes anyway. */
	}
}

static unsigned model_index(const struct host *h, uint64_t id)
{
	for (unsigned i = 0; i < h->spec->nmodels; i++)
		if (h->ids[i] == id)
			return i;
	return MAX_MODELS;
}

/*
 * host_event runs inside whatever call of the host is waiting (or in rocmmem_dispatch): it
 * unloads the model asked for, as FramePack's unload_complete_models + flush_rocm_allocator
 * would, and acks at once.
 */
static void host_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct host *h = userdata;
	unsigned m = model_index(h, ev->model_id);

	if (m == MAX_MODELS)
		return;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST) {
		record(h, REC_EVICT, m, (int32_t)(ev->bytes_needed / MiB));
		h->loaded[m] = false;
		record(h, REC_ACK_START, m, 0);
		record(h, REC_ACK_DONE, m, rocmmem_model_evict_ack(c, ev->model_id));
	} else if (ev->type == ROCMMEM_EVENT_MODEL_REVOKED) {
		h->loaded[m] = false;
		record(h, REC_REVOKED, m, 0);
	}
}

/* residency_step: acquire what the step needs, load what is not loaded, work, release. */
static int residency_step(struct host *h, const struct step *s)
{
	unsigned held = 0;
	int err = 0;

	for (unsigned i = 0; i < s->nmodels && !err; i++) {
		unsigned m = s->models[i];

		record(h, REC_ACQ_START, m, 0);
		err = rocmmem_model_acquire(h->c, h->ids[m], WAIT_MS);
		record(h, REC_ACQ_DONE, m, err);
		if (err)
			break;
		held++;
		if (!h->loaded[m]) {
			sleep_ms(1); /* read the weights */
			h->loaded[m] = true;
		}
	}
	if (!err)
		sleep_ms(s->work_ms);
	for (unsigned i = 0; i < held; i++) {
		unsigned m = s->models[i];
		int rc;

		record(h, REC_REL_START, m, 0);
		rc = rocmmem_model_release(h->c, h->ids[m]);
		record(h, REC_REL_DONE, m, rc);
		if (rc && !err)
			err = rc;
	}
	return err;
}

/* plain_load loads a model the way hosts do today: it fits now, or the step fails. */
static int plain_load(struct host *h, unsigned m)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = h->spec->models[m].size,
					    .timeout_ms = 0,
					    .tag = h->spec->models[m].name};

	if (h->leases[m])
		return 0;
	return rocmmem_lease_acquire(h->c, &req, &h->leases[m]);
}

static void plain_unload(struct host *h, unsigned m)
{
	rocmmem_lease_release(h->leases[m]);
	h->leases[m] = NULL;
}

static bool in_step(const struct step *s, unsigned m)
{
	for (unsigned i = 0; i < s->nmodels; i++)
		if (s->models[i] == m)
			return true;
	return false;
}

static int plain_step(struct host *h, const struct step *s)
{
	int err = 0;

	for (unsigned i = 0; i < s->nmodels && !err; i++) {
		unsigned m = s->models[i];

		record(h, REC_ACQ_START, m, 0);
		err = plain_load(h, m);
		if (err == -ENOMEM && h->spec->keeps_models) {
			/* ComfyUI frees its own cached models to make room: it knows of no other
			 * process. */
			for (unsigned k = 0; k < h->spec->nmodels; k++)
				if (h->leases[k] && !in_step(s, k))
					plain_unload(h, k);
			err = plain_load(h, m);
		}
		record(h, REC_ACQ_DONE, m, err);
	}
	if (!err)
		sleep_ms(s->work_ms);
	if (!h->spec->keeps_models)
		for (unsigned i = 0; i < s->nmodels; i++)
			if (h->leases[s->models[i]])
				plain_unload(h, s->models[i]);
	return err;
}

/* stay_until_told keeps answering evict requests, from the event fd, until the test says go. */
static void stay_until_told(struct host *h, int in)
{
	long end = harness_now_ms() + RUN_LIMIT_MS;

	while (harness_now_ms() < end) {
		struct pollfd p[2] = {{.fd = in, .events = POLLIN},
				      {.fd = rocmmem_event_fd(h->c), .events = POLLIN}};

		if (poll(p, 2, 100) < 0 && errno != EINTR)
			return;
		if (p[0].revents)
			return;
		if ((p[1].revents & POLLIN) && rocmmem_dispatch(h->c) < 0)
			return;
	}
}

struct host_run {
	const struct host_spec *spec;
	bool residency;
};

static int host_main(void *arg, int in, int out)
{
	const struct host_run *run = arg;
	struct host h = {.spec = run->spec, .out = out};
	int32_t failed = 0;

	if (rocmmem_connect(daemon_.sock, h.spec->name, 5000, &h.c))
		return 40;
	if (run->residency) {
		rocmmem_set_event_callback(h.c, host_event, &h);
		for (unsigned i = 0; i < h.spec->nmodels; i++) {
			const struct model_spec *ms = &h.spec->models[i];
			struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
							  .name = ms->name,
							  .model_class = ms->model_class,
							  .size = ms->size,
							  .priority = ms->priority};

			if (rocmmem_model_register(h.c, &desc, &h.ids[i]))
				return 41;
		}
	}
	for (unsigned i = 0; i < h.spec->nsteps; i++) {
		const struct step *s = &h.spec->steps[i];
		int err = run->residency ? residency_step(&h, s) : plain_step(&h, s);

		record(&h, REC_STEP, i, err);
		if (err)
			failed++;
		if (s->pause_ms)
			sleep_ms(s->pause_ms);
	}
	record(&h, REC_DONE, 0, failed);
	stay_until_told(&h, in);
	rocmmem_disconnect(h.c);
	return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* The test's side: a monitor polling status, and the hosts' records */

struct host_log {
	struct record recs[MAX_RECORDS];
	size_t n;
	bool done, eof;
	int32_t failed;
	pid_t pid;
};

static struct host_log logs[HOSTS];

/* drain reads whatever records have arrived, without waiting. */
static void drain(int fd, struct host_log *log)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t rec[2];

	while (!log->eof && poll(&p, 1, 0) > 0) {
		struct record r;

		if (read(fd, rec, sizeof(rec)) != (ssize_t)sizeof(rec)) {
			log->eof = true;
			break;
		}
		r.kind = (enum rec_kind)(rec[0] & 0xff);
		r.model = (unsigned)((rec[0] >> 8) & 0xff);
		r.value = (int32_t)(uint32_t)((uint64_t)rec[0] >> 16);
		r.t_us = rec[1];
		if (log->n < MAX_RECORDS)
			log->recs[log->n++] = r;
		if (r.kind == REC_DONE) {
			log->done = true;
			log->failed = r.value;
		}
	}
}

struct monitor {
	rocmmem_client *c;
	unsigned samples, violations;
	unsigned saw_waiters, saw_evicting;
	uint64_t peak_bytes;
	char first[512];
};

static void violation(struct monitor *mon, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void violation(struct monitor *mon, const char *fmt, ...)
{
	va_list ap;

	if (mon->violations++ == 0) {
		va_start(ap, fmt);
		vsnprintf(mon->first, sizeof(mon->first), fmt, ap);
		va_end(ap);
	}
}

static const char *owner_name(pid_t pid)
{
	for (unsigned i = 0; i < HOSTS; i++)
		if (logs[i].pid == pid)
			return hosts[i].name;
	return "?";
}

static bool holds_memory(const struct rocmmem_model_info *m)
{
	return m->state == ROCMMEM_MODEL_IDLE || m->state == ROCMMEM_MODEL_IN_USE ||
	       m->state == ROCMMEM_MODEL_EVICTING || m->bytes > 0;
}

/* monitor_sample reads status once and checks the budget, the books and exclusivity. */
static void monitor_sample(struct monitor *mon)
{
	const struct rocmmem_model_info *transformer = NULL, *vae = NULL;
	const struct rocmmem_device_info *dev;
	rocmmem_status *st = NULL;
	uint64_t reserved = 0, used;
	int err = rocmmem_status_get(mon->c, &st);

	if (err) {
		violation(mon, "status failed: %s", rocmmem_strerror(err));
		return;
	}
	mon->samples++;
	dev = rocmmem_status_device(st, 0);
	used = dev->reserved_bytes + dev->leased_bytes;
	if (used > dev->budget_bytes)
		violation(mon, "reserved %" PRIu64 " + leased %" PRIu64 " > budget %" PRIu64,
			  dev->reserved_bytes, dev->leased_bytes, dev->budget_bytes);
	if (dev->free_bytes != dev->budget_bytes - used)
		violation(mon, "free %" PRIu64 " is not budget - leased - reserved",
			  dev->free_bytes);
	if (used > mon->peak_bytes)
		mon->peak_bytes = used;
	if (dev->waiters)
		mon->saw_waiters++;
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		reserved += m->reservation_bytes;
		if (m->state == ROCMMEM_MODEL_EVICTING)
			mon->saw_evicting++;
		/* In use means the host computes with its weights: they must be accounted. */
		if (m->state == ROCMMEM_MODEL_IN_USE && m->bytes < m->size)
			violation(mon,
				  "%s's %s is in use holding %" PRIu64 " MiB of its %" PRIu64
				  " MiB: the daemon granted an acquire without reserving it",
				  owner_name(m->owner_pid), m->name, m->bytes / MiB, m->size / MiB);
		if (!holds_memory(m))
			continue;
		if (m->model_class == ROCMMEM_MODEL_TRANSFORMER)
			transformer = m;
		else if (m->model_class == ROCMMEM_MODEL_VAE)
			vae = m;
	}
	if (reserved != dev->reserved_bytes)
		violation(mon, "models reserve %" PRIu64 " but the device counts %" PRIu64,
			  reserved, dev->reserved_bytes);
	if (transformer && vae)
		violation(mon, "%s's %s (state %d) and %s's %s (state %d) resident together",
			  owner_name(transformer->owner_pid), transformer->name,
			  (int)transformer->state, owner_name(vae->owner_pid), vae->name,
			  (int)vae->state);
	rocmmem_status_free(st);
}

struct run_result {
	struct monitor mon;
	long wall_ms;
	int status[HOSTS];
	bool finished;
};

/* run_hosts runs both hosts at once under the monitor until both are done. */
static void run_hosts(bool residency, struct run_result *res)
{
	struct host_run runs[HOSTS];
	struct child kids[HOSTS];
	long start, end;

	memset(res, 0, sizeof(*res));
	memset(logs, 0, sizeof(logs));
	build_hosts();
	res->mon.c = harness_connect(&daemon_, "monitor");
	start = harness_now_ms();
	end = start + RUN_LIMIT_MS;
	for (unsigned i = 0; i < HOSTS; i++) {
		runs[i].spec = &hosts[i];
		runs[i].residency = residency;
		assert_int_equal(child_start(&kids[i], host_main, &runs[i]), 0);
		logs[i].pid = kids[i].pid;
	}
	while (harness_now_ms() < end) {
		bool done = true;

		monitor_sample(&res->mon);
		for (unsigned i = 0; i < HOSTS; i++) {
			drain(kids[i].from_child, &logs[i]);
			done = done && (logs[i].done || logs[i].eof);
		}
		if (done)
			break;
		usleep(500);
	}
	res->finished = logs[0].done && logs[1].done;
	res->wall_ms = harness_now_ms() - start;
	for (unsigned i = 0; i < HOSTS; i++) {
		pipe_put(kids[i].to_child, 1);
		res->status[i] = child_wait(&kids[i], 10000);
	}
	rocmmem_disconnect(res->mon.c);
	res->mon.c = NULL;
}

/* wait_all_gone waits until only the asking connection is left and nothing is held. */
static bool wait_all_gone(void)
{
	rocmmem_client *c = harness_connect(&daemon_, "final-check");
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	bool gone = false;

	while (!gone && harness_now_ms() < end) {
		rocmmem_status *st = NULL;
		const struct rocmmem_device_info *dev;

		if (rocmmem_status_get(c, &st))
			break;
		dev = rocmmem_status_device(st, 0);
		gone = rocmmem_status_client_count(st) == 1 &&
		       rocmmem_status_model_count(st) == 0 && rocmmem_status_lease_count(st) == 0 &&
		       rocmmem_status_waiter_count(st) == 0 && dev->leased_bytes == 0 &&
		       dev->reserved_bytes == 0 && dev->free_bytes == dev->budget_bytes;
		rocmmem_status_free(st);
		if (!gone)
			usleep(10000);
	}
	rocmmem_disconnect(c);
	return gone;
}

/* ----------------------------------------------------------------------------------------- */
/* Reading the records back */

struct tally {
	unsigned steps, failed_steps, acquires, failed_acquires;
	unsigned evicts, failed_acks, revoked;
	int first_error;
	int64_t waited_us, longest_wait_us;
};

static void tally_host(const struct host_log *log, struct tally *t)
{
	int64_t acq_start = 0;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < log->n; i++) {
		const struct record *r = &log->recs[i];

		switch (r->kind) {
		case REC_ACQ_START:
			acq_start = r->t_us;
			break;
		case REC_ACQ_DONE:
			t->acquires++;
			t->waited_us += r->t_us - acq_start;
			if (r->t_us - acq_start > t->longest_wait_us)
				t->longest_wait_us = r->t_us - acq_start;
			if (r->value) {
				t->failed_acquires++;
				if (!t->first_error)
					t->first_error = r->value;
			}
			break;
		case REC_EVICT:
			t->evicts++;
			break;
		case REC_ACK_DONE:
			t->failed_acks += r->value != 0;
			break;
		case REC_REVOKED:
			t->revoked++;
			break;
		case REC_STEP:
			t->steps++;
			t->failed_steps += r->value != 0;
			break;
		default:
			break;
		}
	}
}

/* A stretch during which a model certainly held memory, as its host's records prove it. */
struct interval {
	unsigned host, model;
	int64_t from, to; /* acquire returned .. ack sent (or the end) */
};

static struct interval intervals[MAX_INTERVALS];

static size_t build_intervals(void)
{
	size_t n = 0;

	for (unsigned h = 0; h < HOSTS; h++) {
		for (unsigned m = 0; m < hosts[h].nmodels; m++) {
			bool resident = false;

			for (size_t i = 0; i < logs[h].n && n < MAX_INTERVALS; i++) {
				const struct record *r = &logs[h].recs[i];

				if (r->model != m)
					continue;
				if (r->kind == REC_ACQ_DONE && r->value == 0 && !resident) {
					intervals[n] = (struct interval){h, m, r->t_us, INT64_MAX};
					resident = true;
				} else if ((r->kind == REC_ACK_START || r->kind == REC_REVOKED) &&
					   resident) {
					intervals[n++].to = r->t_us;
					resident = false;
				}
			}
			if (resident && n < MAX_INTERVALS)
				n++;
		}
	}
	return n;
}

static enum rocmmem_model_class class_of(unsigned h, unsigned m)
{
	return hosts[h].models[m].model_class;
}

struct order_check {
	unsigned pairs, overlaps; /* transformer and vae stretches compared */
	unsigned handoffs;	  /* the device went from a transformer to a vae or back */
	unsigned evicted_in_use;  /* evict requests for a model in use */
	uint64_t peak_loaded;	  /* the most the hosts certainly had loaded at once */
	unsigned lru_pairs, lru_honoured, lru_violations; /* priority/LRU among a host's own */
	char first[512];
};

static void order_problem(struct order_check *oc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void order_problem(struct order_check *oc, const char *fmt, ...)
{
	va_list ap;

	if (oc->first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(oc->first, sizeof(oc->first), fmt, ap);
	va_end(ap);
}

/*
 * check_loaded: what the hosts certainly had loaded at any moment fits the budget: the daemon
 * granted nothing before the owners of what made room had acked (memory really free).
 */
static void check_loaded(struct order_check *oc)
{
	size_t n = build_intervals();

	for (size_t i = 0; i < n; i++) {
		int64_t t = intervals[i].from;
		uint64_t sum = 0;

		for (size_t j = 0; j < n; j++)
			if (intervals[j].from <= t && t < intervals[j].to)
				sum += hosts[intervals[j].host].models[intervals[j].model].size;
		if (sum > oc->peak_loaded)
			oc->peak_loaded = sum;
	}
	if (oc->peak_loaded > BUDGET)
		order_problem(oc, "the hosts certainly had %" PRIu64 " MiB loaded at once",
			      oc->peak_loaded / MiB);
}

static int by_start(const void *pa, const void *pb)
{
	const struct interval *a = pa, *b = pb;

	return a->from < b->from ? -1 : a->from > b->from;
}

static bool exclusive_class(const struct interval *i)
{
	enum rocmmem_model_class c = class_of(i->host, i->model);

	return c == ROCMMEM_MODEL_TRANSFORMER || c == ROCMMEM_MODEL_VAE;
}

/*
 * check_exclusive: a transformer and a vae (of either host) never certainly held memory at
 * the same moment: one's acquire returned before the other's ack was even sent, both ways.
 * Counts how often the device went from one class to the other.
 */
static void check_exclusive(struct order_check *oc)
{
	size_t n = build_intervals(), k = 0;

	for (size_t i = 0; i < n; i++)
		if (exclusive_class(&intervals[i]))
			intervals[k++] = intervals[i];
	qsort(intervals, k, sizeof(intervals[0]), by_start);
	for (size_t i = 0; i < k; i++) {
		const struct interval *t = &intervals[i];

		if (i > 0 && class_of(t->host, t->model) !=
				 class_of(intervals[i - 1].host, intervals[i - 1].model))
			oc->handoffs++;
		if (class_of(t->host, t->model) != ROCMMEM_MODEL_TRANSFORMER)
			continue;
		for (size_t j = 0; j < k; j++) {
			const struct interval *v = &intervals[j];
			int64_t from, to;

			if (class_of(v->host, v->model) != ROCMMEM_MODEL_VAE)
				continue;
			oc->pairs++;
			from = t->from > v->from ? t->from : v->from;
			to = t->to < v->to ? t->to : v->to;
			if (from < to) {
				oc->overlaps++;
				order_problem(
				    oc,
				    "%s's %s (from %" PRId64 " us) and %s's %s (from %" PRId64
				    " us) resident together",
				    hosts[t->host].name, hosts[t->host].models[t->model].name,
				    t->from, hosts[v->host].name,
				    hosts[v->host].models[v->model].name, v->from);
			}
		}
	}
}

/* last_index finds the last record of kind for model m before index `before`, or -1. */
static long last_index(const struct host_log *log, size_t before, enum rec_kind kind, unsigned m)
{
	for (size_t i = before; i-- > 0;)
		if (log->recs[i].kind == kind && log->recs[i].model == m &&
		    (kind != REC_ACQ_DONE || log->recs[i].value == 0))
			return (long)i;
	return -1;
}

static bool any_between(const struct host_log *log, long after, size_t before, enum rec_kind kind,
			unsigned m)
{
	for (size_t i = (size_t)(after + 1); i < before; i++)
		if (log->recs[i].kind == kind && log->recs[i].model == m)
			return true;
	return false;
}

static enum rocmmem_model_class opposite(enum rocmmem_model_class c)
{
	if (c == ROCMMEM_MODEL_TRANSFORMER)
		return ROCMMEM_MODEL_VAE;
	if (c == ROCMMEM_MODEL_VAE)
		return ROCMMEM_MODEL_TRANSFORMER;
	return ROCMMEM_MODEL_OTHER;
}

/*
 * conflict_possible says whether some host was acquiring a model of class `against` at any
 * time in [from, to]: an exclusive conflict could then have chosen the victim, whatever its
 * priority.
 */
static bool conflict_possible(enum rocmmem_model_class against, int64_t from, int64_t to)
{
	if (against == ROCMMEM_MODEL_OTHER)
		return false;
	for (unsigned h = 0; h < HOSTS; h++) {
		const struct host_log *log = &logs[h];

		for (size_t i = 0; i < log->n; i++) {
			const struct record *r = &log->recs[i];
			int64_t done = INT64_MAX;

			if (r->kind != REC_ACQ_START || class_of(h, r->model) != against ||
			    r->t_us > to)
				continue;
			for (size_t j = i + 1; j < log->n; j++) {
				if (log->recs[j].kind == REC_ACQ_DONE &&
				    log->recs[j].model == r->model) {
					done = log->recs[j].t_us;
					break;
				}
			}
			if (done >= from)
				return true;
		}
	}
	return false;
}

/*
 * idle_at_plan says whether host h's model y was certainly idle and resident when the daemon
 * planned the evict request recorded at index e: released before (and the request was read
 * from the socket after the release's reply: no callback ran during that release, so nothing
 * read earlier was left queued), not acquired again since, and resident. Returns the index of
 * that release, or -1.
 */
static long idle_at_plan(const struct host_log *log, size_t e, unsigned y)
{
	long yd = last_index(log, e, REC_REL_DONE, y), ys;

	if (yd < 0)
		return -1;
	ys = last_index(log, (size_t)yd, REC_REL_START, y);
	if (ys < 0 || last_index(log, (size_t)yd, REC_ACQ_DONE, y) < 0)
		return -1;
	for (long i = ys; i < yd; i++)
		if (log->recs[i].kind == REC_EVICT)
			return -1;
	if (any_between(log, yd, e, REC_ACQ_START, y))
		return -1;
	return yd;
}

/*
 * check_victim_order: placement.c evicts, beyond exclusive conflicts, idle unpinned models
 * lowest priority first, then least recently used, and sends a plan's requests in that order.
 * So when host h is asked to unload X, and no acquire of X's exclusive opposite was under way
 * since X's release (X went for bytes, not for a conflict), every model Y of h's that was
 * certainly idle and resident then, with a lower priority, or the same and released at least
 * 2 ms before X (the daemon's loop clock counts milliseconds), must have been asked first.
 * Also: no model is asked while its host uses it.
 */
static void check_victim_order(struct order_check *oc)
{
	for (unsigned h = 0; h < HOSTS; h++) {
		const struct host_log *log = &logs[h];
		const struct model_spec *ms = hosts[h].models;

		for (size_t e = 0; e < log->n; e++) {
			const struct record *ev = &log->recs[e];
			unsigned x = ev->model;
			long xr;

			if (ev->kind != REC_EVICT)
				continue;
			if (last_index(log, e, REC_ACQ_DONE, x) >
			    last_index(log, e, REC_REL_DONE, x))
				oc->evicted_in_use++;
			xr = last_index(log, e, REC_REL_START, x);
			if (xr < 0 || conflict_possible(opposite(ms[x].model_class),
							log->recs[xr].t_us, ev->t_us))
				continue;
			for (unsigned y = 0; y < hosts[h].nmodels; y++) {
				long yd;

				if (y == x || ms[y].priority > ms[x].priority)
					continue;
				yd = idle_at_plan(log, e, y);
				if (yd < 0)
					continue;
				if (ms[y].priority == ms[x].priority &&
				    log->recs[yd].t_us + 2000 > log->recs[xr].t_us)
					continue;
				oc->lru_pairs++;
				if (any_between(log, yd, e, REC_EVICT, y)) {
					oc->lru_honoured++;
					continue;
				}
				oc->lru_violations++;
				order_problem(
				    oc,
				    "%s: %s (priority %d) was evicted while %s (priority %d%s) "
				    "stayed resident",
				    hosts[h].name, ms[x].name, (int)ms[x].priority, ms[y].name,
				    (int)ms[y].priority,
				    ms[y].priority == ms[x].priority ? ", idle longer" : "");
			}
		}
	}
}

/* ----------------------------------------------------------------------------------------- */
/* The runs */

static struct tally residency_tally[HOSTS];
static bool residency_ran;

static void test_replay_through_residency(void **state)
{
	struct run_result res;
	struct order_check oc = {0};

	(void)state;
	run_hosts(true, &res);
	for (unsigned i = 0; i < HOSTS; i++)
		tally_host(&logs[i], &residency_tally[i]);
	check_loaded(&oc);
	check_exclusive(&oc);
	check_victim_order(&oc);
	residency_ran = true;
	for (unsigned i = 0; i < HOSTS; i++) {
		const struct tally *t = &residency_tally[i];

		print_message("%-9s %u steps, %u failed; %u acquires (waited %.1f ms in all, "
			      "longest %.1f ms); %u evict requests, %u acks refused, %u revoked\n",
			      hosts[i].name, t->steps, t->failed_steps, t->acquires,
			      (double)t->waited_us / 1000.0, (double)t->longest_wait_us / 1000.0,
			      t->evicts, t->failed_acks, t->revoked);
	}
	print_message("monitor: %u status samples, %u with waiters, %u models seen evicting, peak "
		      "%" PRIu64 " of %" PRIu64 " MiB accounted; %u violations%s%s\n",
		      res.mon.samples, res.mon.saw_waiters, res.mon.saw_evicting,
		      res.mon.peak_bytes / MiB, BUDGET / MiB, res.mon.violations,
		      res.mon.violations ? ": " : "", res.mon.first);
	print_message("order: %u transformer/vae pairs compared, %u overlapped, %u hand-overs "
		      "between the classes; "
		      "%u own-model priority/LRU pairs, %u honoured, %u violated; %u evicted in "
		      "use%s%s\n",
		      oc.pairs, oc.overlaps, oc.handoffs, oc.lru_pairs, oc.lru_honoured,
		      oc.lru_violations, oc.evicted_in_use, oc.first[0] ? ": " : "", oc.first);
	print_message("hosts: at most %" PRIu64 " MiB certainly loaded at once; wall time %ld ms\n",
		      oc.peak_loaded / MiB, res.wall_ms);

	assert_true(res.finished);
	for (unsigned i = 0; i < HOSTS; i++) {
		const struct tally *t = &residency_tally[i];

		assert_int_equal(res.status[i], 0);
		assert_int_equal(t->steps, hosts[i].nsteps);
		if (t->failed_acquires)
			fail_msg("%s: %u acquires failed, the first with %s", hosts[i].name,
				 t->failed_acquires, rocmmem_strerror(t->first_error));
		assert_int_equal(t->failed_steps, 0);
		/* They really competed: each had to unload for the other (or itself). */
		assert_true(t->evicts > 0);
		assert_int_equal(t->failed_acks, 0);
		assert_int_equal(t->revoked, 0);
	}
	if (res.mon.violations)
		fail_msg("the monitor saw %u violations; the first: %s", res.mon.violations,
			 res.mon.first);
	assert_true(res.mon.samples > 10);
	if (oc.overlaps || oc.lru_violations || oc.evicted_in_use || oc.peak_loaded > BUDGET)
		fail_msg("order: %s", oc.first[0] ? oc.first : "a model was evicted in use");
	assert_true(oc.handoffs > 0);
	assert_true(wait_all_gone());
}

static void test_control_without_residency(void **state)
{
	struct run_result res;
	struct tally t[HOSTS];
	unsigned failed = 0;

	(void)state;
	run_hosts(false, &res);
	for (unsigned i = 0; i < HOSTS; i++) {
		tally_host(&logs[i], &t[i]);
		failed += t[i].failed_steps;
		print_message("uncoordinated %-9s %u of %u steps failed (%u of %u loads refused, "
			      "first: %s); through residency: %u of %u\n",
			      hosts[i].name, t[i].failed_steps, t[i].steps, t[i].failed_acquires,
			      t[i].acquires,
			      t[i].first_error ? rocmmem_strerror(t[i].first_error) : "-",
			      residency_ran ? residency_tally[i].failed_steps : 0,
			      residency_ran ? residency_tally[i].steps : 0);
	}
	print_message("wall time %ld ms; monitor: %u samples, peak %" PRIu64 " of %" PRIu64
		      " MiB\n",
		      res.wall_ms, res.mon.samples, res.mon.peak_bytes / MiB, BUDGET / MiB);
	assert_true(res.finished);
	for (unsigned i = 0; i < HOSTS; i++) {
		assert_int_equal(res.status[i], 0);
		assert_int_equal(t[i].steps, hosts[i].nsteps);
	}
	/* The budget held for plain leases too: they failed instead. */
	if (res.mon.violations)
		fail_msg("the monitor saw %u violations; the first: %s", res.mon.violations,
			 res.mon.first);
	/* The comparison is real: without residency the same two loops do not both get through. */
	assert_true(failed > 0);
	assert_true(wait_all_gone());
}

/* ----------------------------------------------------------------------------------------- */
/* A race the replay can hit: the owner acquires its model while the daemon is evicting it */

static unsigned acks;

static void ack_everything(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	(void)userdata;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST &&
	    rocmmem_model_evict_ack(c, ev->model_id) == 0)
		acks++;
}

/*
 * other_host registers a 128 MiB model, acquires it (waiting), holds it 300 ms, releases it,
 * then answers evict requests from its event fd until told to go.
 */
static int other_host(void *arg, int in, int out)
{
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "other", .size = 128 * MiB};
	rocmmem_client *c = NULL;
	uint64_t id = 0;
	long end;
	int err;

	(void)arg;
	if (rocmmem_connect(daemon_.sock, "other-host", 5000, &c) ||
	    rocmmem_model_register(c, &desc, &id))
		return 40;
	rocmmem_set_event_callback(c, ack_everything, NULL);
	err = rocmmem_model_acquire(c, id, WAIT_MS);
	pipe_put(out, err);
	if (!err) {
		sleep_ms(300);
		rocmmem_model_release(c, id);
	}
	end = harness_now_ms() + 10000;
	while (harness_now_ms() < end) {
		struct pollfd p[2] = {{.fd = in, .events = POLLIN},
				      {.fd = rocmmem_event_fd(c), .events = POLLIN}};

		if (poll(p, 2, 100) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if ((p[1].revents & POLLIN) && rocmmem_dispatch(c) < 0)
			break;
	}
	rocmmem_disconnect(c);
	return 0;
}

static int model_state_of(rocmmem_client *mon, uint64_t id, uint64_t *reservation)
{
	rocmmem_status *st = NULL;
	int state = -1;

	if (rocmmem_status_get(mon, &st))
		return -1;
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->id == id) {
			state = (int)m->state;
			if (reservation)
				*reservation = m->reservation_bytes;
		}
	}
	rocmmem_status_free(st);
	return state;
}

/*
 * test_acquire_while_being_evicted_reserves_again: the daemon asks this host to unload its
 * idle 256 MiB model for another host's 128 MiB; before the host has read the request, it
 * acquires the model again. The request is delivered inside that acquire, the host unloads and
 * acks; the acquire must then wait until 256 MiB are free again (the other host holds 128 of
 * the 320) and reserve them, since the host reloads its weights once acquire returns.
 */
static void test_acquire_while_being_evicted_reserves_again(void **state)
{
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "big", .size = 256 * MiB};
	rocmmem_client *host, *mon;
	struct child other;
	uint64_t id = 0, reservation = 0;
	int64_t other_result = -1;
	long end, waited;
	int state_seen = -1, err;

	(void)state;
	acks = 0;
	host = harness_connect(&daemon_, "host");
	mon = harness_connect(&daemon_, "monitor");
	rocmmem_set_event_callback(host, ack_everything, NULL);
	assert_int_equal(rocmmem_model_register(host, &desc, &id), 0);
	assert_int_equal(rocmmem_model_acquire(host, id, 0), 0);
	assert_int_equal(rocmmem_model_release(host, id), 0);
	assert_int_equal(child_start(&other, other_host, NULL), 0);
	/* The host makes no call: its evict request waits unread on its socket. */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (state_seen != ROCMMEM_MODEL_EVICTING && harness_now_ms() < end) {
		state_seen = model_state_of(mon, id, NULL);
		usleep(1000);
	}
	waited = harness_now_ms();
	err = rocmmem_model_acquire(host, id, WAIT_MS);
	waited = harness_now_ms() - waited;
	state_seen = model_state_of(mon, id, &reservation);
	pipe_get(other.from_child, &other_result, 10000);
	if (err == 0)
		rocmmem_model_release(host, id);
	pipe_put(other.to_child, 1);
	assert_int_equal(child_wait(&other, 10000), 0);
	rocmmem_disconnect(host);
	rocmmem_disconnect(mon);
	print_message("acquire during eviction: %s after %ld ms, state %d, %" PRIu64
		      " MiB reserved of 256\n",
		      rocmmem_strerror(err), waited, state_seen, reservation / MiB);

	assert_int_equal(acks, 1);
	assert_int_equal(other_result, 0);
	assert_int_equal(err, 0);
	assert_int_equal(state_seen, ROCMMEM_MODEL_IN_USE);
	/* The other host held 128 MiB until it released: 256 could not be free before. */
	assert_true(waited >= 200);
	assert_int_equal(reservation, 256 * MiB);
	assert_true(wait_all_gone());
}

/*
 * test_exclusive_groups_stay_apart: `--exclusive` "may be repeated" (rocmmemd --help), and
 * each use names classes "never resident together". With FramePack's pair and a second pair
 * of encoders, a text encoder is no transformer's rival: the host acquires it while its
 * transformer is in use; an image encoder, the text encoder's rival, is refused beside it
 * (-EDEADLK: only this client could release the text encoder).
 */
static void test_exclusive_groups_stay_apart(void **state)
{
	static const char *const args[] = {"--budget",	  "320M",
					   "--exclusive", "transformer,vae",
					   "--exclusive", "text_encoder,image_encoder",
					   NULL};
	struct rocmmem_model_desc transformer = {.struct_size = sizeof(transformer),
						 .name = "transformer",
						 .model_class = ROCMMEM_MODEL_TRANSFORMER,
						 .size = 64 * MiB};
	struct rocmmem_model_desc encoder = {.struct_size = sizeof(encoder),
					     .name = "text_encoder",
					     .model_class = ROCMMEM_MODEL_TEXT_ENCODER,
					     .size = 32 * MiB};
	struct rocmmem_model_desc image = {.struct_size = sizeof(image),
					   .name = "image_encoder",
					   .model_class = ROCMMEM_MODEL_IMAGE_ENCODER,
					   .size = 16 * MiB};
	struct daemon_proc other;
	rocmmem_client *c;
	uint64_t t = 0, e = 0, i = 0;
	char why[256] = "";
	int err, rival = 0;

	(void)state;
	assert_int_equal(harness_daemon_start(&other, args), 0);
	c = harness_connect(&other, "two-groups");
	err = rocmmem_model_register(c, &transformer, &t);
	if (!err)
		err = rocmmem_model_register(c, &encoder, &e);
	if (!err)
		err = rocmmem_model_acquire(c, t, 0);
	if (!err) {
		err = rocmmem_model_acquire(c, e, 2000);
		snprintf(why, sizeof(why), "%s", err ? rocmmem_last_error() : "");
	}
	if (!err && rocmmem_model_register(c, &image, &i) == 0)
		rival = rocmmem_model_acquire(c, i, 2000);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&other), 0);
	if (err)
		fail_msg("text_encoder beside an in-use transformer: %s (%s)",
			 rocmmem_strerror(err), why);
	assert_int_equal(rival, -EDEADLK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay_through_residency),
	    cmocka_unit_test(test_control_without_residency),
	    cmocka_unit_test(test_acquire_while_being_evicted_reserves_again),
	    cmocka_unit_test(test_exclusive_groups_stay_apart),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
