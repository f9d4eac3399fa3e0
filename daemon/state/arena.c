/* SPDX-License-Identifier: MIT */
/* arena.c: a holder's host arena on one device: ranges of it handed out in granules. */
#include "arena.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

int arena_init(struct arena *a, uint64_t id, unsigned device, uint64_t size, uint64_t granule)
{
	memset(a, 0, sizeof(*a));
	a->fd = -1;
	if (granule == 0 || size == 0 || size % granule != 0)
		return -EINVAL;
	a->id = id;
	a->device = device;
	a->size = size;
	a->granule = granule;
	return ranges_init(&a->ranges, size / granule);
}

void arena_finish(struct arena *a)
{
	ranges_finish(&a->ranges);
}

/* in_granules converts a byte range to granules (false: not whole granules, or empty). */
static bool in_granules(const struct arena *a, uint64_t offset, uint64_t bytes, uint64_t *start,
			uint64_t *n)
{
	if (bytes == 0 || offset % a->granule != 0 || bytes % a->granule != 0)
		return false;
	*start = offset / a->granule;
	*n = bytes / a->granule;
	return true;
}

int arena_take(struct arena *a, uint64_t bytes, uint64_t *offset)
{
	uint64_t start, n;
	int err;

	if (!in_granules(a, 0, bytes, &start, &n))
		return -EINVAL;
	err = ranges_alloc(&a->ranges, n, &start);
	if (err)
		return err;
	*offset = start * a->granule;
	a->leases++;
	a->used += bytes;
	return 0;
}

int arena_claim(struct arena *a, uint64_t offset, uint64_t bytes)
{
	uint64_t start, n;
	int err;

	if (!in_granules(a, offset, bytes, &start, &n))
		return -ERANGE;
	err = ranges_claim(&a->ranges, start, n);
	if (err)
		return err;
	a->leases++;
	a->used += bytes;
	return 0;
}

int arena_give(struct arena *a, uint64_t offset, uint64_t bytes)
{
	uint64_t start, n;
	int err;

	if (!in_granules(a, offset, bytes, &start, &n))
		return -EINVAL;
	err = ranges_free(&a->ranges, start, n);
	if (err)
		return err;
	a->leases--;
	a->used -= bytes;
	return 0;
}

bool arena_warm_keep(struct arena *a, uint64_t offset, uint64_t bytes, uint64_t now_ms,
		     uint64_t cap)
{
	if (a->nwarm >= ARENA_WARM_MAX || bytes > cap || a->warm_bytes > cap - bytes ||
	    a->leases == 0 || a->used < bytes)
		return false;
	a->warm[a->nwarm++] = (struct arena_warm){offset, bytes, now_ms};
	a->warm_bytes += bytes;
	a->leases--;
	a->used -= bytes;
	return true;
}

bool arena_warm_take(struct arena *a, uint64_t bytes, uint64_t *offset)
{
	for (unsigned i = a->nwarm; i-- > 0;) {
		if (a->warm[i].bytes != bytes)
			continue;
		*offset = a->warm[i].offset;
		memmove(&a->warm[i], &a->warm[i + 1], (a->nwarm - i - 1) * sizeof(a->warm[0]));
		a->nwarm--;
		a->warm_bytes -= bytes;
		a->leases++;
		a->used += bytes;
		return true;
	}
	return false;
}

bool arena_warm_pop(struct arena *a, uint64_t until_ms, struct arena_warm *out)
{
	if (a->nwarm == 0 || a->warm[0].since_ms > until_ms)
		return false;
	*out = a->warm[0];
	memmove(&a->warm[0], &a->warm[1], (a->nwarm - 1) * sizeof(a->warm[0]));
	a->nwarm--;
	a->warm_bytes -= out->bytes;
	return true;
}

int arena_give_unleased(struct arena *a, uint64_t offset, uint64_t bytes)
{
	uint64_t start, n;

	if (!in_granules(a, offset, bytes, &start, &n))
		return -EINVAL;
	return ranges_free(&a->ranges, start, n);
}

uint64_t arena_free_bytes(const struct arena *a)
{
	return a->ranges.free * a->granule;
}

uint64_t arena_largest_free(const struct arena *a)
{
	return ranges_largest(&a->ranges) * a->granule;
}

uint32_t arena_fragmentation_permille(const struct arena *a)
{
	uint64_t free = a->ranges.free, largest = ranges_largest(&a->ranges);

	if (free == 0)
		return 0;
	return (uint32_t)(1000 - largest * 1000 / free);
}
