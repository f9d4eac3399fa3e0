/* SPDX-License-Identifier: MIT */
/* idtable.c: a vector sorted by ids handed out in order: O(1) add, O(log n) lookup. */
#include "idtable.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void idtable_init(struct idtable *t)
{
	memset(t, 0, sizeof(*t));
	t->next_id = 1;
}

void idtable_finish(struct idtable *t)
{
	assert(t->count == 0);
	free(t->slots);
	t->slots = NULL;
	t->len = t->cap = 0;
}

/* lower_bound returns the index of the first slot whose id is >= id. */
static size_t lower_bound(const struct idtable *t, uint64_t id)
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
static void compact(struct idtable *t)
{
	size_t out = 0;

	for (size_t i = 0; i < t->len; i++)
		if (t->slots[i].item)
			t->slots[out++] = t->slots[i];
	t->len = out;
}

int idtable_add(struct idtable *t, void *item, uint64_t *id)
{
	if (t->len == t->cap) {
		if (t->len > 2 * t->count + 16) {
			compact(t);
		} else {
			size_t cap = t->cap ? t->cap * 2 : 64;
			struct idtable_slot *s = realloc(t->slots, cap * sizeof(*s));

			if (!s)
				return -ENOMEM;
			t->slots = s;
			t->cap = cap;
		}
	}
	*id = t->next_id++;
	t->slots[t->len].id = *id;
	t->slots[t->len].item = item;
	t->len++;
	t->count++;
	return 0;
}

void *idtable_find(const struct idtable *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	return i < t->len && t->slots[i].id == id ? t->slots[i].item : NULL;
}

void *idtable_next(const struct idtable *t, uint64_t after_id, uint64_t *id)
{
	if (after_id == UINT64_MAX)
		return NULL;
	for (size_t i = lower_bound(t, after_id + 1); i < t->len; i++) {
		if (t->slots[i].item) {
			if (id)
				*id = t->slots[i].id;
			return t->slots[i].item;
		}
	}
	return NULL;
}

void idtable_remove(struct idtable *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	assert(i < t->len && t->slots[i].id == id && t->slots[i].item);
	t->slots[i].item = NULL;
	t->count--;
	if (t->len >= 64 && t->len > 2 * t->count)
		compact(t);
}
