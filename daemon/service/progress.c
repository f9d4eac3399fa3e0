/* SPDX-License-Identifier: MIT */
/* progress.c: the table of waiting requests that asked for progress events. */
#include "progress.h"

#include <errno.h>
#include <stdlib.h>

void progress_init(struct progress *p)
{
	*p = (struct progress){.due_ms = UINT64_MAX};
}

void progress_free(struct progress *p)
{
	free(p->v);
	progress_init(p);
}

int progress_track(struct progress *p, uint64_t seq, uint64_t request_id)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		struct progress_entry *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	/* Arrival numbers only grow: the table stays sorted by them. */
	p->v[p->n++] = (struct progress_entry){.waiter = seq, .request_id = request_id};
	return 0;
}

uint64_t progress_due(const struct progress *p)
{
	return p->n ? p->due_ms : UINT64_MAX;
}
