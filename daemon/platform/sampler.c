/* SPDX-License-Identifier: MIT */
/* sampler.c: each device's runtime memory figures, read on worker threads every interval. */
#include "sampler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "job_uv.h"

/* One pass of hardware readings over every device, on a worker thread. */
struct telemetry_job {
	uv_work_t work;
	struct sampler *sampler;
	unsigned ndevices;
	char pci[BACKEND_MAX_DEVICES][SAMPLER_PCI_MAX];
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

	s->in_flight--;
	if (s->hooks.meminfo)
		s->hooks.meminfo(s->hooks.ctx, job->device, job->err, &job->meminfo);
	free(sj);
}

static void sample_all(struct sampler *s)
{
	if (s->in_flight > 0 || !s->backend->ops->meminfo)
		return;
	for (unsigned i = 0; i < s->ndevices; i++) {
		struct sample_job *sj;

		if (s->hooks.usable && !s->hooks.usable(s->hooks.ctx, i))
			continue;
		sj = calloc(1, sizeof(*sj));
		if (!sj)
			return;
		sj->sampler = s;
		sj->job.kind = JOB_MEMINFO;
		sj->job.backend = s->backend;
		sj->job.device = i;
		sj->job.done = sample_done;
		s->in_flight++;
		if (job_uv_submit(s->loop, &sj->job) < 0) {
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

	for (unsigned i = 0; status == 0 && i < tj->ndevices && s->hooks.telemetry; i++)
		s->hooks.telemetry(s->hooks.ctx, i, tj->err[i], &tj->samples[i]);
	s->telemetry_job = NULL;
	free(tj);
}

static void sample_telemetry(struct sampler *s)
{
	struct telemetry_job *tj;

	if (!s->telemetry || s->telemetry_job)
		return;
	tj = calloc(1, sizeof(*tj));
	if (!tj)
		return;
	tj->sampler = s;
	tj->work.data = tj;
	tj->ndevices = s->ndevices;
	memcpy(tj->pci, s->pci, sizeof(tj->pci));
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
	const char *backend = backend_name(s->backend);
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

int sampler_start(struct sampler *s, uv_loop_t *loop, struct backend *backend,
		  const char (*pci)[SAMPLER_PCI_MAX], unsigned ndevices,
		  const struct sampler_hooks *hooks, uint64_t interval_ms)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->backend = backend;
	s->hooks = *hooks;
	s->ndevices = ndevices < BACKEND_MAX_DEVICES ? ndevices : BACKEND_MAX_DEVICES;
	for (unsigned i = 0; i < s->ndevices; i++)
		snprintf(s->pci[i], sizeof(s->pci[i]), "%s", pci[i]);
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
