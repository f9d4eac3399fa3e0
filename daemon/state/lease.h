/* SPDX-License-Identifier: MIT */
/* lease.h: a granted lease and the table that finds leases by id. */
#ifndef ROCMMEMD_LEASE_H
#define ROCMMEMD_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "books.h"
#include "platform/backend/backend.h"
#include "base/idtable.h"
#include "version.h"

/* Released leases kept for the next grants: a lease is made and freed per request. */
#define LEASE_SPARES 8u

/* Leases by id (daemon/base/idtable.c): ids in grant order, never reused. */
struct lease_table {
	struct idtable ids;
	struct lease *spare[LEASE_SPARES];
	unsigned nspare;
};

void lease_table_init(struct lease_table *t);
/* lease_table_finish frees the index and the spare leases; the table must be empty. */
void lease_table_finish(struct lease_table *t);
/* lease_table_new returns a zeroed lease, a spare one if there is one, or NULL. Give it back
 * with lease_table_dispose (or free). */
struct lease *lease_table_new(struct lease_table *t);
/* lease_table_dispose frees l (removed from the table already), or keeps it as a spare. */
void lease_table_dispose(struct lease_table *t, struct lease *l);
/* lease_table_add gives l a fresh id and indexes it. Returns 0, -ENOMEM or -EOVERFLOW. */
int lease_table_add(struct lease_table *t, struct lease *l);
/* lease_table_find returns the live lease with this id or NULL. */
struct lease *lease_table_find(const struct lease_table *t, uint64_t id);
/* lease_table_next returns the live lease with the smallest id above after_id, or NULL. */
struct lease *lease_table_next(const struct lease_table *t, uint64_t after_id);
void lease_table_remove(struct lease_table *t, struct lease *l);

#endif
