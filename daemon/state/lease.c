/* SPDX-License-Identifier: MIT */
/* lease.c: the lease table: an id table of leases. */
#include "lease.h"

void lease_table_init(struct lease_table *t)
{
	idtable_init(&t->ids);
}

void lease_table_finish(struct lease_table *t)
{
	idtable_finish(&t->ids);
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
