/* SPDX-License-Identifier: MIT */
/*
 * feed_sample.c: one round's telemetry sample: the devices, the largest clients and models
 * (as many as fit one packet), the queue and the counters, packed once for every subscriber.
 */
#include "feed_sample.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "feed_frame.h"
#include "report.h"
#include "server.h"
#include "wire.h"

/* realtime_ms is the wall-clock time a sample carries. */
static uint64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Scratch for one sample: filled, packed, done before the loop runs again. */
static struct {
	struct report_device devices[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__DeviceInfo *device_ptrs[BACKEND_MAX_DEVICES];
	Rocmmem__Wire__ClientInfo clients[FEED_SAMPLE_CLIENTS];
	Rocmmem__Wire__ClientInfo *client_ptrs[FEED_SAMPLE_CLIENTS];
	/* The clients' books: a client is listed only while its books on every device fit. */
	Rocmmem__Wire__ClientBooks books[FEED_SAMPLE_CLIENTS * 4];
	Rocmmem__Wire__ClientBooks *book_ptrs[FEED_SAMPLE_CLIENTS * 4];
	Rocmmem__Wire__ModelInfo models[FEED_SAMPLE_MODELS];
	Rocmmem__Wire__ModelInfo *model_ptrs[FEED_SAMPLE_MODELS];
	Rocmmem__Wire__Counters counters;
} scratch;

struct ranked {
	uint64_t bytes;
	uint64_t id;
	const void *item;
};

/* by_bytes: largest first, then oldest (lowest id) first. */
static int by_bytes(const void *pa, const void *pb)
{
	const struct ranked *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* rank_clients lists the connected clients largest first (caller frees); NULL on no memory. */
static struct ranked *rank_clients(const struct server *s, size_t *n)
{
	struct ranked *v = calloc(s->client_count ? s->client_count : 1, sizeof(*v));
	const struct client *c;
	size_t i = 0;

	if (!v)
		return NULL;
	TAILQ_FOREACH (c, &s->clients, link) {
		if (i == s->client_count)
			break;
		v[i++] = (struct ranked){holder_bytes(c->holder), c->id, c->holder};
	}
	qsort(v, i, sizeof(*v), by_bytes);
	*n = i;
	return v;
}

static struct ranked *rank_models(const struct svc *a, size_t *n)
{
	size_t count = 0, i = 0;
	struct ranked *v;
	uint64_t id;
	const struct model *m;

	for (unsigned d = 0; d < a->state.ndevices; d++)
		count += a->state.devices[d].nmodels;
	v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return NULL;
	for (m = idtable_next(&a->state.models, 0, &id); m && i < count;
	     m = idtable_next(&a->state.models, id, &id))
		v[i++] = (struct ranked){model_resident(m), m->id, m};
	qsort(v, i, sizeof(*v), by_bytes);
	*n = i;
	return v;
}

/*
 * build_sample fills and packs this round's sample into f->sample, listing at most the given
 * numbers of clients and models. Returns 0, -ENOMEM, or -EMSGSIZE when it does not fit.
 */
static int pack_sample(struct feed *f, const struct ranked *clients, size_t nclients,
		       const struct ranked *models, size_t nmodels, size_t max_clients,
		       size_t max_models)
{
	Rocmmem__Wire__TelemetrySample st = ROCMMEM__WIRE__TELEMETRY_SAMPLE__INIT;
	const struct server *s = f->server;
	const struct svc *a = &s->svc;
	uint64_t now = uv_now(f->loop), oldest = 0;
	unsigned waiters = 0;
	size_t len;

	st.has_timestamp_ms = true;
	st.timestamp_ms = realtime_ms();
	st.has_uptime_ms = true;
	st.uptime_ms = server_uptime_ms(s);
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		const struct device *d = &a->state.devices[i];
		uint64_t wait = device_oldest_wait_ms(d, now);

		report_device(&scratch.devices[i], s, d, now);
		scratch.device_ptrs[i] = &scratch.devices[i].info;
		waiters += d->queue.count;
		if (wait > oldest)
			oldest = wait;
	}
	st.n_devices = a->state.ndevices;
	st.devices = scratch.device_ptrs;
	for (size_t i = 0, nb = 0;
	     i < nclients && i < max_clients && nb + BACKEND_MAX_DEVICES <= FEED_SAMPLE_CLIENTS * 4;
	     i++) {
		report_holder(&scratch.clients[i], clients[i].item, now);
		nb +=
		    report_books(&scratch.clients[i], a, clients[i].item, scratch.books + nb,
				 scratch.book_ptrs + nb, FEED_SAMPLE_CLIENTS * 4 - nb, NULL, NULL);
		scratch.client_ptrs[i] = &scratch.clients[i];
		st.n_clients++;
	}
	st.clients = scratch.client_ptrs;
	for (size_t i = 0; i < nmodels && i < max_models; i++) {
		report_model(&scratch.models[i], models[i].item, now);
		scratch.model_ptrs[i] = &scratch.models[i];
		st.n_models++;
	}
	st.models = scratch.model_ptrs;
	st.has_clients_omitted = true;
	st.clients_omitted = (uint32_t)(nclients - st.n_clients);
	st.has_models_omitted = true;
	st.models_omitted = (uint32_t)(nmodels - st.n_models);
	st.has_waiters = true;
	st.waiters = waiters;
	st.has_oldest_wait_ms = true;
	st.oldest_wait_ms = oldest;
	report_counters(&scratch.counters, &a->counters);
	st.counters = &scratch.counters;
	len = rocmmem__wire__telemetry_sample__get_packed_size(&st);
	if (len + FEED_FRAME_OVERHEAD > WIRE_MAX_FRAME)
		return -EMSGSIZE;
	f->sample_len = rocmmem__wire__telemetry_sample__pack(&st, f->sample);
	return 0;
}

int feed_build_sample(struct feed *f)
{
	size_t nclients = 0, nmodels = 0, max_clients = FEED_SAMPLE_CLIENTS;
	size_t max_models = FEED_SAMPLE_MODELS;
	struct ranked *clients = rank_clients(f->server, &nclients);
	struct ranked *models = rank_models(&f->server->svc, &nmodels);
	int rc = -ENOMEM;

	if (clients && models) {
		/* Long names can make the lists too large for one packet: list fewer. */
		while ((rc = pack_sample(f, clients, nclients, models, nmodels, max_clients,
					 max_models)) == -EMSGSIZE &&
		       (max_clients > 0 || max_models > 0)) {
			max_clients /= 2;
			max_models /= 2;
		}
	}
	free(clients);
	free(models);
	if (rc == 0)
		f->samples_built++;
	return rc;
}
