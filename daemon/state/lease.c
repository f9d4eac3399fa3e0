/* SPDX-License-Identifier: MIT */
/* lease.c: the lease table: an id table of leases. */
#include "lease.h"

#include <stdlib.h>
#include <string.h>

#include "poison.h"

void lease_table_init(struct lease_table *t)
{
	idtable_init(&t->ids);
	t->nspare = 0;
}

void lease_table_finish(struct lease_table *t)
{
	idtable_finish(&t->ids);
	while (t->nspare > 0) {
		struct lease *l = t->spare[--t->nspare];

		UNPOISON(l, sizeof(*l));
		free(l);
	}
}

/*
 * A spare lease spares malloc more than its own time: glibc's calloc passes its per-thread
 * cache by, so each lease freed went to the heap, next to its top, and made malloc
 * consolidate the heap on every release.
 */
struct lease *lease_table_new(struct lease_table *t)
{
	struct lease *l;

	if (t->nspare == 0)
		return calloc(1, sizeof(struct lease));
	l = t->spare[--t->nspare];
	UNPOISON(l, sizeof(*l));
	memset(l, 0, sizeof(*l));
	return l;
}

void lease_table_dispose(struct lease_table *t, struct lease *l)
{
	if (t->nspare < LEASE_SPARES) {
		POISON(l, sizeof(*l));
		t->spare[t->nspare++] = l;
	} else
		free(l);
}

int lease_table_add(struct lease_table *t, struct lease *l)
{
	return idtable_add(&t->ids, l, &l->id);
}

struct lease *lease_table_find(const struct lease_table *t, uint64_t id)
{
	return idtable_find(&t->ids, id);
}

struct lease *lease_table_next(const struct lease_table *t, uint64_t after_id)
{
	return idtable_next(&t->ids, after_id, NULL);
}

void lease_table_remove(struct lease_table *t, struct lease *l)
{
	idtable_remove(&t->ids, l->id);
}
