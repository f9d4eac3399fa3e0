/* SPDX-License-Identifier: MIT */
/* adoption.c: what a previous daemon left and its holders have yet to re-declare. */
#include "adoption.h"

#include <stdlib.h>
#include <string.h>

struct pending *pending_find(const struct pending_set *set, uint64_t id)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set->v[mid].rec.id < id)
			lo = mid + 1;
		else if (set->v[mid].rec.id > id)
			hi = mid;
		else
			return &set->v[mid];
	}
	return NULL;
}

/* awaiting_add counts a pending record into its device and process's entry. */
static void awaiting_add(struct adopt_awaiting *v, size_t *n, const struct pending *p,
			 bool is_lease)
{
	struct adopt_awaiting *e = NULL;

	for (size_t i = 0; i < *n && !e; i++)
		if (v[i].device == p->rec.device && v[i].pid == p->rec.pid &&
		    v[i].uid == p->rec.uid)
			e = &v[i];
	if (!e) {
		e = &v[(*n)++];
		*e = (struct adopt_awaiting){
		    .device = p->rec.device, .pid = p->rec.pid, .uid = p->rec.uid};
	}
	if (is_lease) {
		e->leases++;
		e->lease_bytes += p->rec.size;
	} else {
		e->models++;
		e->reserved_bytes += p->rec.size;
	}
}

static int cmp_awaiting(const void *x, const void *y)
{
	const struct adopt_awaiting *a = x, *b = y;
	uint64_t ab = a->lease_bytes + a->reserved_bytes, bb = b->lease_bytes + b->reserved_bytes;

	return ab > bb ? -1 : ab < bb;
}

size_t adoption_awaiting(const struct adoption *ad, int device, struct adopt_awaiting *out,
			 size_t max)
{
	struct adopt_awaiting *v;
	size_t n = 0;

	if (!ad || ad->open == 0)
		return 0;
	v = calloc(ad->open, sizeof(*v));
	if (!v)
		return 0;
	for (int k = 0; k < 2; k++) {
		const struct pending_set *set = k == 0 ? &ad->leases : &ad->models;

		for (size_t i = 0; i < set->n; i++) {
			const struct pending *p = &set->v[i];

			if (!p->gone && (device < 0 || p->rec.device == (unsigned)device) &&
			    n < ad->open)
				awaiting_add(v, &n, p, k == 0);
		}
	}
	qsort(v, n, sizeof(*v), cmp_awaiting);
	memcpy(out, v, (n < max ? n : max) * sizeof(*v));
	free(v);
	return n;
}

uint64_t adoption_awaiting_bytes(const struct adoption *ad, unsigned device)
{
	uint64_t bytes = 0;

	for (int k = 0; ad && ad->open && k < 2; k++) {
		const struct pending_set *set = k == 0 ? &ad->leases : &ad->models;

		for (size_t i = 0; i < set->n; i++)
			if (!set->v[i].gone && set->v[i].rec.device == device)
				bytes += set->v[i].rec.size;
	}
	return bytes;
}

uint64_t adoption_grace_left_ms(const struct adoption *a, const struct heap *deadlines,
				uint64_t now_ms)
{
	const struct heap_entry *e = heap_get(deadlines, a->grace_slot);

	if (!e || a->grace_over || a->open == 0)
		return 0;
	return e->due_ms > now_ms ? e->due_ms - now_ms : 0;
}
