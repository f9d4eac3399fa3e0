/* SPDX-License-Identifier: MIT */
/* pool.c: the books of a device's pool of released VMM chunks. */
#include "pool.h"

void pool_init(struct device_pool *p)
{
	TAILQ_INIT(&p->entries);
	p->count = 0;
	p->bytes = 0;
	p->chunks = 0;
	p->warm_grants = 0;
	p->dropped_bytes = 0;
}

void pool_add(struct device_pool *p, struct pool_entry *e, uint64_t now_ms)
{
	e->since_ms = now_ms;
	TAILQ_INSERT_TAIL(&p->entries, e, link);
	p->count++;
	p->bytes += e->size;
	p->chunks += e->alloc.nchunks;
}

void pool_unlink(struct device_pool *p, struct pool_entry *e)
{
	TAILQ_REMOVE(&p->entries, e, link);
	p->count--;
	p->bytes -= e->size;
	p->chunks -= e->alloc.nchunks;
}

struct pool_entry *pool_find(const struct device_pool *p, uint64_t holder, uint64_t size)
{
	struct pool_entry *e;

	TAILQ_FOREACH (e, &p->entries, link) {
		if (e->holder == holder && e->size == size && e->ready && !e->dropped)
			return e;
	}
	return NULL;
}

bool pool_room(const struct device_pool *p, uint64_t max_bytes, uint64_t size)
{
	return p->count < POOL_MAX_ENTRIES && size <= max_bytes && p->bytes <= max_bytes - size;
}
