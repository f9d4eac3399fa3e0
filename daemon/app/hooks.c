/* SPDX-License-Identifier: MIT */
/*
 * hooks.c: how the parts meet at run time: the event loop's clock and workers for the
 * service, the sampler's readings into the service, the books summed up for systemd.
 */
#include "hooks.h"

#include <time.h>

#include "net/server.h"
#include "platform/job_uv.h"
#include "service/service.h"

static uint64_t loop_ms(void *ctx)
{
	return uv_now(ctx);
}

static uint64_t wall_ms(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct svc_clock hooks_clock(uv_loop_t *loop)
{
	struct svc_clock c = {.ctx = loop, .mono_ms = loop_ms, .real_ms = wall_ms};

	return c;
}

struct job_runner hooks_runner(uv_loop_t *loop)
{
	struct job_runner r = {.ctx = loop, .submit = job_uv_submit};

	return r;
}

static bool usable(void *ctx, unsigned device)
{
	const struct svc *svc = ctx;

	return device < svc->state.ndevices && !svc->state.devices[device].lost;
}

static void meminfo(void *ctx, unsigned device, int err, const struct backend_meminfo *mi)
{
	struct svc *svc = ctx;

	if (device < svc->state.ndevices)
		svc_meminfo(svc, device, err, mi);
}

static void telemetry(void *ctx, unsigned device, int err, const struct telemetry_sample *t)
{
	struct svc *svc = ctx;

	if (device < svc->state.ndevices)
		svc_telemetry(svc, device, err, t);
}

struct sampler_hooks hooks_sampler(struct svc *svc)
{
	struct sampler_hooks h = {
	    .ctx = svc, .usable = usable, .meminfo = meminfo, .telemetry = telemetry};

	return h;
}

static void figures(void *ctx, struct systemd_figures *out)
{
	const struct server *s = ctx;
	const struct state *st = &s->svc.state;

	out->clients = s->client_count;
	for (unsigned i = 0; i < st->ndevices; i++) {
		const struct device *d = &st->devices[i];

		out->leases += d->leases;
		out->leased += d->leased;
		out->reserved += d->reserved;
		out->budget += d->budget;
		out->waiting += d->queue.count;
	}
}

struct systemd_source hooks_systemd(struct server *s)
{
	struct systemd_source src = {.ctx = s, .figures = figures};

	return src;
}
