/* SPDX-License-Identifier: MIT */
/* lease.c: the lease table: fresh ids, lookup by id, ordered iteration. */
#include "lease.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void lease_table_init(struct lease_table *t)
{
	memset(t, 0, sizeof(*t));
	t->next_id = 1;
}

void lease_table_finish(struct lease_table *t)
{
	assert(t->count == 0);
	free(t->slots);
	t->slots = NULL;
	t->len = t->cap = 0;
}

/* lower_bound returns the index of the first slot whose id is >= id. */
static size_t lower_bound(const struct lease_table *t, uint64_t id)
{
	size_t lo = 0, hi = t->len;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->slots[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* compact drops tombstones once they outnumber live slots, keeping lookups O(log live). */
static void compact(struct lease_table *t)
{
	size_t out = 0;

	for (size_t i = 0; i < t->len; i++)
		if (t->slots[i].lease)
			t->slots[out++] = t->slots[i];
	t->len = out;
}

int lease_table_add(struct lease_table *t, struct lease *l)
{
	if (t->len == t->cap) {
		if (t->len > 2 * t->count + 16) {
			compact(t);
		} else {
			size_t cap = t->cap ? t->cap * 2 : 64;
			struct lease_slot *s = realloc(t->slots, cap * sizeof(*s));

			if (!s)
				return -ENOMEM;
			t->slots = s;
			t->cap = cap;
		}
	}
	l->id = t->next_id++;
	t->slots[t->len].id = l->id;
	t->slots[t->len].lease = l;
	t->len++;
	t->count++;
	return 0;
}

struct lease *lease_table_find(const struct lease_table *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	return i < t->len && t->slots[i].id == id ? t->slots[i].lease : NULL;
}

struct lease *lease_table_next(const struct lease_table *t, uint64_t after_id)
{
	if (after_id == UINT64_MAX)
		return NULL;
	for (size_t i = lower_bound(t, after_id + 1); i < t->len; i++)
		if (t->slots[i].lease)
			return t->slots[i].lease;
	return NULL;
}

void lease_table_remove(struct lease_table *t, struct lease *l)
{
	size_t i = lower_bound(t, l->id);

	assert(i < t->len && t->slots[i].lease == l);
	t->slots[i].lease = NULL;
	t->count--;
	if (t->len >= 64 && t->len > 2 * t->count)
		compact(t);
}
