/* SPDX-License-Identifier: MIT */
/* heap.c: deadlines in order: a min-heap whose entries can be removed by a handle. */
#include "heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FREE_SLOT UINT32_MAX

void heap_init(struct heap *h)
{
	memset(h, 0, sizeof(*h));
}

void heap_finish(struct heap *h)
{
	free(h->v);
	free(h->handle_of);
	free(h->pos);
	memset(h, 0, sizeof(*h));
}

/* before says whether a comes before b: earlier, then by kind, then by id. */
static bool before(const struct heap_entry *a, const struct heap_entry *b)
{
	if (a->due_ms != b->due_ms)
		return a->due_ms < b->due_ms;
	if (a->kind != b->kind)
		return a->kind < b->kind;
	return a->id < b->id;
}

/* place puts entry e with handle k at position i. */
static void place(struct heap *h, uint32_t i, const struct heap_entry *e, uint32_t k)
{
	h->v[i] = *e;
	h->handle_of[i] = k;
	h->pos[k] = i;
}

/* sift_up moves the entry at i towards the root while it comes before its parent. */
static void sift_up(struct heap *h, uint32_t i)
{
	struct heap_entry e = h->v[i];
	uint32_t k = h->handle_of[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!before(&e, &h->v[parent]))
			break;
		place(h, i, &h->v[parent], h->handle_of[parent]);
		i = parent;
	}
	place(h, i, &e, k);
}

/* sift_down moves the entry at i away from the root while a child comes before it. */
static void sift_down(struct heap *h, uint32_t i)
{
	struct heap_entry e = h->v[i];
	uint32_t k = h->handle_of[i];

	for (;;) {
		uint32_t child = 2 * i + 1;

		if (child >= h->n)
			break;
		if (child + 1 < h->n && before(&h->v[child + 1], &h->v[child]))
			child++;
		if (!before(&h->v[child], &e))
			break;
		place(h, i, &h->v[child], h->handle_of[child]);
		i = child;
	}
	place(h, i, &e, k);
}

/* grow makes room for one more entry and one more handle. */
static int grow(struct heap *h)
{
	uint32_t cap = h->cap ? h->cap * 2 : 16;
	struct heap_entry *v;
	uint32_t *handle_of, *pos;

	if (h->n < h->cap)
		return 0;
	if (h->cap >= UINT32_MAX / 4)
		return -ENOMEM;
	v = realloc(h->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	h->v = v;
	handle_of = realloc(h->handle_of, cap * sizeof(*handle_of));
	if (!handle_of)
		return -ENOMEM;
	h->handle_of = handle_of;
	/* Handles never outnumber the room: a free one is reused before a new one is made. */
	pos = realloc(h->pos, (cap + 1) * sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	h->pos = pos;
	h->cap = cap;
	return 0;
}

int heap_push(struct heap *h, const struct heap_entry *e, uint32_t *handle)
{
	uint32_t k;
	int err = grow(h);

	if (err)
		return err;
	if (h->free_head) {
		k = h->free_head;
		h->free_head = h->pos[k] == FREE_SLOT ? 0 : h->pos[k];
	} else {
		k = ++h->nhandles;
	}
	place(h, h->n++, e, k);
	sift_up(h, h->n - 1);
	*handle = k;
	return 0;
}

/* live says whether handle k names an entry. */
static bool live(const struct heap *h, uint32_t k)
{
	return k != 0 && k <= h->nhandles && h->pos[k] < h->n && h->handle_of[h->pos[k]] == k;
}

/* release puts handle k on the free chain (its pos slot holds the next free handle). */
static void release(struct heap *h, uint32_t k)
{
	h->pos[k] = h->free_head ? h->free_head : FREE_SLOT;
	h->free_head = k;
}

int heap_remove(struct heap *h, uint32_t handle)
{
	uint32_t i;

	if (!live(h, handle))
		return -ENOENT;
	i = h->pos[handle];
	h->n--;
	if (i != h->n) {
		/* The last entry fills the hole, then finds its place up or down from there. */
		uint32_t moved = h->handle_of[h->n];

		place(h, i, &h->v[h->n], moved);
		sift_up(h, i);
		sift_down(h, h->pos[moved]);
	}
	release(h, handle);
	return 0;
}

int heap_update(struct heap *h, uint32_t handle, uint64_t due_ms)
{
	uint32_t i;

	if (!live(h, handle))
		return -ENOENT;
	i = h->pos[handle];
	h->v[i].due_ms = due_ms;
	sift_up(h, i);
	sift_down(h, h->pos[handle]);
	return 0;
}

const struct heap_entry *heap_get(const struct heap *h, uint32_t handle)
{
	return live(h, handle) ? &h->v[h->pos[handle]] : NULL;
}

const struct heap_entry *heap_top(const struct heap *h, uint32_t *handle)
{
	if (h->n == 0)
		return NULL;
	if (handle)
		*handle = h->handle_of[0];
	return &h->v[0];
}

bool heap_pop(struct heap *h, struct heap_entry *out)
{
	if (h->n == 0)
		return false;
	*out = h->v[0];
	heap_remove(h, h->handle_of[0]);
	return true;
}
