/* SPDX-License-Identifier: MIT */
/* lease.h: a granted lease and the table that finds leases by id. */
#ifndef ROCMMEMD_LEASE_H
#define ROCMMEMD_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "backend.h"
#include "version.h"

struct client;

struct lease {
	uint64_t id;
	struct client *owner;
	unsigned device;
	uint64_t size;
	uint64_t model_id;
	uint64_t created_ms;
	char tag[ROCMMEM_NAME_MAX + 1];
	struct backend_alloc alloc;
	TAILQ_ENTRY(lease) client_link;
};

TAILQ_HEAD(lease_list, lease);

struct lease_slot {
	uint64_t id;
	struct lease *lease; /* NULL once removed (a tombstone until the next compaction) */
};

/*
 * Ids are handed out in increasing order and never reused, so the index is a vector sorted by
 * id: appending is O(1), lookup O(log n), and iteration can resume after any id even when the
 * lease it stopped at has gone (status replies are streamed that way).
 */
struct lease_table {
	struct lease_slot *slots;
	size_t len, cap;
	uint64_t count; /* live leases */
	uint64_t next_id;
};

void lease_table_init(struct lease_table *t);
/* lease_table_finish frees the index; the table must be empty. */
void lease_table_finish(struct lease_table *t);
/* lease_table_add gives l a fresh id and indexes it. Returns 0 or -ENOMEM (l->id unset). */
int lease_table_add(struct lease_table *t, struct lease *l);
/* lease_table_find returns the live lease with this id or NULL. */
struct lease *lease_table_find(const struct lease_table *t, uint64_t id);
/* lease_table_next returns the live lease with the smallest id above after_id, or NULL. */
struct lease *lease_table_next(const struct lease_table *t, uint64_t after_id);
void lease_table_remove(struct lease_table *t, struct lease *l);

#endif
