/* SPDX-License-Identifier: MIT */
/* measured.c: the per-process records of a device's measured memory (finding, adding, forgetting).
 */
#include "measured.h"

#include <string.h>

struct truth_proc *truth_find(struct device_truth *t, int32_t pid)
{
	for (unsigned i = 0; i < t->nprocs; i++)
		if (t->procs[i].pid == pid)
			return &t->procs[i];
	return NULL;
}

struct truth_proc *truth_add(struct device_truth *t, int32_t pid)
{
	struct truth_proc *p;

	if (t->nprocs >= TRUTH_MAX_PROCS)
		return NULL;
	p = &t->procs[t->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

void truth_remove(struct device_truth *t, unsigned i)
{
	if (i >= t->nprocs)
		return;
	t->procs[i] = t->procs[--t->nprocs];
}

void truth_reset(struct device_truth *t)
{
	t->measurable = false;
	t->nprocs = 0;
	t->undeclared = 0;
	t->outside = 0;
	t->outside_procs = 0;
}
