/* SPDX-License-Identifier: MIT */
/* idtable.h: objects found by an id that is handed out in order and never reused. */
#ifndef ROCMMEMD_IDTABLE_H
#define ROCMMEMD_IDTABLE_H

#include <stddef.h>
#include <stdint.h>

struct idtable_slot {
	uint64_t id;
	void *item; /* NULL once removed (a tombstone until the next compaction) */
};

/*
 * Ids are handed out in increasing order and never reused, so the index is a vector sorted by
 * id: appending is O(1), lookup O(log n), and iteration can resume after any id even when the
 * item it stopped at has gone (status replies are streamed that way). Ids run from 1 to
 * IDTABLE_MAX_ID: 0 means "none" on the wire and UINT64_MAX is the end of every iteration, so
 * neither is ever an item's. The counter never wraps: once it has passed IDTABLE_MAX_ID, adding
 * fails. Every function refuses what would break the order instead of storing it.
 */
#define IDTABLE_MAX_ID (UINT64_MAX - 1)

struct idtable {
	struct idtable_slot *slots;
	size_t len, cap;
	uint64_t count; /* live items and reserved ids */
	uint64_t next_id;
};

void idtable_init(struct idtable *t);
/* idtable_finish frees the index; the table must be empty. */
void idtable_finish(struct idtable *t);
/*
 * idtable_add gives item a fresh id, stored in *id. Returns 0, -ENOMEM, or -EOVERFLOW when
 * every id has been handed out (nothing added either way).
 */
int idtable_add(struct idtable *t, void *item, uint64_t *id);
/* idtable_find returns the live item with this id or NULL. */
void *idtable_find(const struct idtable *t, uint64_t id);
/* idtable_next returns the live item with the smallest id above after_id (id in *id), or NULL. */
void *idtable_next(const struct idtable *t, uint64_t after_id, uint64_t *id);
/*
 * idtable_each walks the live items in id order in O(1) a step (idtable_next costs a search
 * each): *pos starts at 0; returns the next item (id in *id when not NULL) and moves *pos past
 * it, or NULL at the end. The table must not change during the walk.
 */
void *idtable_each(const struct idtable *t, size_t *pos, uint64_t *id);
/* idtable_remove forgets the live item with this id. Returns 0, or -ENOENT (nothing changed). */
int idtable_remove(struct idtable *t, uint64_t id);

/*
 * Ids a restarted daemon takes over from its predecessor (daemon/service/adopt.c): reserved at
 * start, in increasing order, so that each one is found in O(log n) when its holder re-declares it
 * and no new item is ever given it. A reserved id is not live: find and next skip it.
 */

/*
 * idtable_reserve sets id aside; next_id moves past it. Returns 0, -ENOMEM, or -EINVAL (nothing
 * changed) for 0, an id above IDTABLE_MAX_ID, or one below next_id (out of order).
 */
int idtable_reserve(struct idtable *t, uint64_t id);

/* idtable_fill makes a reserved id live with item. Returns 0, or -ENOENT if id is not reserved. */
int idtable_fill(struct idtable *t, uint64_t id, void *item);

/* idtable_unreserve gives up a reserved id (it is never handed out). Returns 0, or -ENOENT
 * when id is not reserved (nothing changed). */
int idtable_unreserve(struct idtable *t, uint64_t id);

/*
 * idtable_insert makes item live under an id of the caller's choice below next_id (one handed
 * out before, or skipped) that is neither live nor reserved; it costs a move of the slots above
 * it. It never moves next_id: an id at or above it is refused, so a chosen id can never make
 * the counter run out. Returns 0, -EEXIST (live or reserved), -EINVAL (0, or not below
 * next_id) or -ENOMEM.
 */
int idtable_insert(struct idtable *t, uint64_t id, void *item);

/* idtable_skip_to makes next_id at least id, so that ids below it are never handed out. */
void idtable_skip_to(struct idtable *t, uint64_t id);

#endif
