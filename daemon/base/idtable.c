/* SPDX-License-Identifier: MIT */
/* idtable.c: a vector sorted by ids handed out in order: O(1) add, O(log n) lookup. */
#include "idtable.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a reserved slot holds: not NULL (a tombstone), never an item. */
static char reserved_marker;
#define RESERVED ((void *)&reserved_marker)

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

/* make_room ensures one more slot fits at the end. Returns 0 or -ENOMEM. */
static int make_room(struct idtable *t)
{
	if (t->len < t->cap)
		return 0;
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
	return 0;
}

/* append adds a slot for id, which must be a valid id at least next_id (above every slot). */
static int append(struct idtable *t, uint64_t id, void *item)
{
	if (id == 0 || id > IDTABLE_MAX_ID || id < t->next_id)
		return -EINVAL;
	if (make_room(t) < 0)
		return -ENOMEM;
	t->slots[t->len].id = id;
	t->slots[t->len].item = item;
	t->len++;
	t->count++;
	t->next_id = id + 1;
	return 0;
}

int idtable_add(struct idtable *t, void *item, uint64_t *id)
{
	int err;

	if (t->next_id > IDTABLE_MAX_ID)
		return -EOVERFLOW;
	err = append(t, t->next_id, item);

	if (err)
		return err;
	*id = t->next_id - 1;
	return 0;
}

void *idtable_find(const struct idtable *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	if (i < t->len && t->slots[i].id == id && t->slots[i].item != RESERVED)
		return t->slots[i].item;
	return NULL;
}

void *idtable_next(const struct idtable *t, uint64_t after_id, uint64_t *id)
{
	if (after_id == UINT64_MAX)
		return NULL;
	for (size_t i = lower_bound(t, after_id + 1); i < t->len; i++) {
		if (t->slots[i].item && t->slots[i].item != RESERVED) {
			if (id)
				*id = t->slots[i].id;
			return t->slots[i].item;
		}
	}
	return NULL;
}

void *idtable_each(const struct idtable *t, size_t *pos, uint64_t *id)
{
	while (*pos < t->len) {
		const struct idtable_slot *slot = &t->slots[(*pos)++];

		if (slot->item && slot->item != RESERVED) {
			if (id)
				*id = slot->id;
			return slot->item;
		}
	}
	return NULL;
}

/* clear turns slot i into a tombstone. */
static void clear(struct idtable *t, size_t i)
{
	t->slots[i].item = NULL;
	t->count--;
	if (t->len >= 64 && t->len > 2 * t->count)
		compact(t);
}

int idtable_remove(struct idtable *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	if (i >= t->len || t->slots[i].id != id || !t->slots[i].item ||
	    t->slots[i].item == RESERVED)
		return -ENOENT;
	clear(t, i);
	return 0;
}

int idtable_reserve(struct idtable *t, uint64_t id)
{
	return append(t, id, RESERVED);
}

int idtable_fill(struct idtable *t, uint64_t id, void *item)
{
	size_t i = lower_bound(t, id);

	if (i >= t->len || t->slots[i].id != id || t->slots[i].item != RESERVED)
		return -ENOENT;
	t->slots[i].item = item;
	return 0;
}

int idtable_unreserve(struct idtable *t, uint64_t id)
{
	size_t i = lower_bound(t, id);

	if (i >= t->len || t->slots[i].id != id || t->slots[i].item != RESERVED)
		return -ENOENT;
	clear(t, i);
	return 0;
}

int idtable_insert(struct idtable *t, uint64_t id, void *item)
{
	size_t i;

	/* At or above next_id it would move the counter: a caller's choice never does. */
	if (id == 0 || id >= t->next_id)
		return -EINVAL;
	i = lower_bound(t, id);
	if (i < t->len && t->slots[i].id == id) {
		if (t->slots[i].item)
			return -EEXIST;
		t->slots[i].item = item; /* a tombstone of the same id */
		t->count++;
		return 0;
	}
	if (make_room(t) < 0)
		return -ENOMEM;
	i = lower_bound(t, id); /* make_room may have compacted */
	memmove(&t->slots[i + 1], &t->slots[i], (t->len - i) * sizeof(t->slots[0]));
	t->slots[i].id = id;
	t->slots[i].item = item;
	t->len++;
	t->count++;
	return 0;
}

void idtable_skip_to(struct idtable *t, uint64_t id)
{
	if (id > t->next_id)
		t->next_id = id;
}
