/* SPDX-License-Identifier: MIT */
/* heap.h: deadlines in order: a min-heap whose entries can be removed by a handle. */
#ifndef ROCMMEMD_HEAP_H
#define ROCMMEMD_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One deadline: when it is due, what kind of thing it is, and which one (its owner's id). */
struct heap_entry {
	uint64_t due_ms;
	uint32_t kind;
	uint64_t id;
};

/*
 * The entries sit in a binary min-heap ordered by (due_ms, kind, id), so that ties are broken
 * the same way every time. Each entry also has a handle, stable while the entry lives, so that
 * its owner can remove or move it in O(log n) without finding it first: pos[handle] is where
 * the entry is in the heap, handle_of[i] which handle the entry at i has. Handles are reused
 * once removed; 0 is never one (an owner keeps 0 for "none").
 */
struct heap {
	struct heap_entry *v;
	uint32_t *handle_of; /* per heap position: the entry's handle */
	uint32_t *pos;	     /* per handle: its heap position, or UINT32_MAX when free */
	uint32_t n, cap;     /* entries, and room for them */
	uint32_t nhandles;   /* handles ever made (pos has nhandles + 1 slots: 0 is unused) */
	uint32_t free_head;  /* a free handle, chained through pos of free handles, or 0 */
};

void heap_init(struct heap *h);
/* heap_finish frees the heap and whatever it still holds. */
void heap_finish(struct heap *h);

/* heap_push adds e and stores its handle (never 0) in *handle. Returns 0 or -ENOMEM. */
int heap_push(struct heap *h, const struct heap_entry *e, uint32_t *handle);

/* heap_remove removes the entry with this handle. Returns 0, or -ENOENT (nothing changed). */
int heap_remove(struct heap *h, uint32_t handle);

/* heap_update gives the entry with this handle a new due time. Returns 0 or -ENOENT. */
int heap_update(struct heap *h, uint32_t handle, uint64_t due_ms);

/* heap_get returns the entry with this handle, or NULL. */
const struct heap_entry *heap_get(const struct heap *h, uint32_t handle);

/* heap_top returns the earliest entry (its handle in *handle if not NULL), or NULL when empty. */
const struct heap_entry *heap_top(const struct heap *h, uint32_t *handle);

/* heap_pop removes the earliest entry into *out. Returns false when the heap is empty. */
bool heap_pop(struct heap *h, struct heap_entry *out);

static inline uint32_t heap_size(const struct heap *h)
{
	return h->n;
}

#endif
