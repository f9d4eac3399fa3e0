/* SPDX-License-Identifier: MIT */
/* inmsg.c: received messages, request ids, and the monotonic clock requests wait by. */
#include <stdlib.h>
#include <time.h>

#include "client.h"

struct inmsg *inmsg_new(void)
{
	/* Zeroed by assignment, not calloc: glibc's calloc passes its per-thread cache by, and a
	 * message comes per reply (gcc turns malloc and memset into calloc). */
	struct inmsg *m = malloc(sizeof(*m));

	if (m)
		*m = (struct inmsg){.next = NULL};
	return m;
}

void inmsg_free(struct inmsg *m)
{
	if (!m)
		return;
	wire_close_fds(m->fds, m->nfds);
	if (m->msg)
		wire_unpacked_free(&m->msg->base);
	free(m->lib);
	free(m);
}

uint64_t conn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int64_t conn_remaining_ms(int64_t deadline)
{
	uint64_t now = conn_now_ms();

	if (deadline < 0)
		return -1;
	return (uint64_t)deadline > now ? (int64_t)((uint64_t)deadline - now) : 0;
}

int64_t conn_deadline_after(int64_t timeout_ms)
{
	/* A wait of more than a few million years is no limit (and never overflows). */
	if (timeout_ms < 0 || timeout_ms > CONN_FOREVER_MS)
		return -1;
	return (int64_t)(conn_now_ms() + (uint64_t)timeout_ms);
}

void conn_timed_wait(rocmmem_client *c, int64_t deadline)
{
	struct timespec ts;
	uint64_t ms;

	if (deadline < 0) {
		pthread_cond_wait(&c->cond, &c->lock);
		return;
	}
	ms = (uint64_t)deadline;
	/* The condition variable uses CLOCK_MONOTONIC (set at creation), like deadlines. */
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
}

uint64_t conn_next_id(rocmmem_client *c)
{
	uint64_t id;

	pthread_mutex_lock(&c->lock);
	id = c->next_id++;
	pthread_mutex_unlock(&c->lock);
	return id;
}
