/* SPDX-License-Identifier: MIT */
/* sampler.c: each device's runtime memory figures, read on worker threads every interval. */
#include "sampler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/arbiter.h"
#include "job.h"
#include "base/log.h"

/* One pass of hardware readings over every device, on a worker thread. */
struct telemetry_job {
	uv_work_t work;
	struct sampler *sampler;
	unsigned ndevices;
	char pci[BACKEND_MAX_DEVICES][32];
	int err[BACKEND_MAX_DEVICES];
	struct telemetry_sample samples[BACKEND_MAX_DEVICES];
};

struct sample_job {
	struct job job;
	struct sampler *sampler;
};

static void sample_done(struct job *job)
{
	struct sample_job *sj = (struct sample_job *)job;
	struct sampler *s = sj->sampler;
	struct device *d = &s->arbiter->state.devices[job->device];

	s->in_flight--;
	if (job->err == 0) {
		d->has_meminfo = true;
		d->runtime_total = job->meminfo.total_bytes;
		d->runtime_free = job->meminfo.free_bytes;
		d->meminfo_ms = uv_now(s->loop);
	} else if (job->err == -ENODEV) {
		arbiter_device_lost(s->arbiter, job->device, "the runtime reports the device gone");
	}
	free(sj);
}

static void sample_all(struct sampler *s)
{
	struct arbiter *a = s->arbiter;

	if (s->in_flight > 0 || !a->backend->ops->meminfo)
		return;
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		struct sample_job *sj;

		if (a->state.devices[i].lost)
			continue;
		sj = calloc(1, sizeof(*sj));
		if (!sj)
			return;
		sj->sampler = s;
		sj->job.kind = JOB_MEMINFO;
		sj->job.backend = a->backend;
		sj->job.device = i;
		sj->job.done = sample_done;
		s->in_flight++;
		if (job_submit(s->loop, &sj->job) < 0) {
			s->in_flight--;
			free(sj);
		}
	}
}

static void read_telemetry(uv_work_t *work)
{
	struct telemetry_job *tj = work->data;

	for (unsigned i = 0; i < tj->ndevices; i++)
		tj->err[i] = tj->pci[i][0] ? telemetry_sample(tj->sampler->telemetry, tj->pci[i],
							      &tj->samples[i])
					   : -ENODEV;
}

static void telemetry_done(uv_work_t *work, int status)
{
	struct telemetry_job *tj = work->data;
	struct sampler *s = tj->sampler;
	struct arbiter *a = s->arbiter;

	for (unsigned i = 0; status == 0 && i < tj->ndevices && i < a->state.ndevices; i++) {
		struct device *d = &a->state.devices[i];

		d->has_telemetry = tj->err[i] == 0;
		if (d->has_telemetry) {
			d->telemetry = tj->samples[i];
			d->telemetry_ms = uv_now(s->loop);
		}
	}
	s->telemetry_job = NULL;
	free(tj);
}

static void sample_telemetry(struct sampler *s)
{
	struct arbiter *a = s->arbiter;
	struct telemetry_job *tj;

	if (!s->telemetry || s->telemetry_job)
		return;
	tj = calloc(1, sizeof(*tj));
	if (!tj)
		return;
	tj->sampler = s;
	tj->work.data = tj;
	tj->ndevices = a->state.ndevices;
	for (unsigned i = 0; i < a->state.ndevices; i++)
		snprintf(tj->pci[i], sizeof(tj->pci[i]), "%s", a->state.devices[i].pci_bus_id);
	if (uv_queue_work(s->loop, &tj->work, read_telemetry, telemetry_done) < 0) {
		free(tj);
		return;
	}
	s->telemetry_job = tj;
}

static void on_tick(uv_timer_t *timer)
{
	sample_all(timer->data);
	sample_telemetry(timer->data);
}

/* open_telemetry picks a hardware source for the backend's vendor, if any. */
static void open_telemetry(struct sampler *s)
{
	const char *backend = backend_name(s->arbiter->backend);
	enum telemetry_vendor vendor;
	char why[256] = "";

	if (strcmp(backend, "hip") == 0)
		vendor = TELEMETRY_AMD;
	else if (strcmp(backend, "cuda") == 0)
		vendor = TELEMETRY_NVIDIA;
	else
		return; /* host memory: nothing to read beyond MemAvailable */
	if (telemetry_open(vendor, &s->telemetry, why, sizeof(why)) < 0) {
		log_info("no device telemetry: %s", why);
		s->telemetry = NULL;
		return;
	}
	log_info("device telemetry from %s", telemetry_source(s->telemetry));
}

int sampler_start(struct sampler *s, uv_loop_t *loop, struct arbiter *a, uint64_t interval_ms)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->arbiter = a;
	s->interval_ms = interval_ms;
	err = uv_timer_init(loop, &s->timer);
	if (err)
		return err;
	s->timer.data = s;
	s->running = true;
	open_telemetry(s);
	return uv_timer_start(&s->timer, on_tick, 0, interval_ms);
}

void sampler_set_interval(struct sampler *s, uint64_t interval_ms)
{
	if (!s->running || interval_ms == 0 || interval_ms == s->interval_ms)
		return;
	s->interval_ms = interval_ms;
	uv_timer_set_repeat(&s->timer, interval_ms);
	/* A shorter interval takes effect now rather than after the current, longer one. */
	if (uv_timer_get_due_in(&s->timer) > interval_ms)
		uv_timer_again(&s->timer);
}

void sampler_stop(struct sampler *s)
{
	if (!s->running)
		return;
	s->running = false;
	uv_timer_stop(&s->timer);
	uv_close((uv_handle_t *)&s->timer, NULL);
}

void sampler_finish(struct sampler *s)
{
	if (s->telemetry)
		telemetry_close(s->telemetry);
	s->telemetry = NULL;
}
