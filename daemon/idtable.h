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
 * item it stopped at has gone (status replies are streamed that way).
 */
struct idtable {
	struct idtable_slot *slots;
	size_t len, cap;
	uint64_t count; /* live items */
	uint64_t next_id;
};

void idtable_init(struct idtable *t);
/* idtable_finish frees the index; the table must be empty. */
void idtable_finish(struct idtable *t);
/* idtable_add gives item a fresh id, stored in *id. Returns 0 or -ENOMEM (nothing added). */
int idtable_add(struct idtable *t, void *item, uint64_t *id);
/* idtable_find returns the live item with this id or NULL. */
void *idtable_find(const struct idtable *t, uint64_t id);
/* idtable_next returns the live item with the smallest id above after_id (id in *id), or NULL. */
void *idtable_next(const struct idtable *t, uint64_t after_id, uint64_t *id);
/* idtable_remove forgets the item with this id (which must be live). */
void idtable_remove(struct idtable *t, uint64_t id);

#endif
