/* SPDX-License-Identifier: MIT */
/* registry.c: the telemetry sources in order of preference, and the calls through the chosen one.
 */
#include "registry.h"

#include "source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct telemetry {
	const struct telemetry_source *src;
	void *state;
};

/* Largest first; equal sizes by pid, so the order is stable from one sample to the next. */
static int compare_processes(const void *pa, const void *pb)
{
	const struct telemetry_process *a = pa, *b = pb;

	if (a->vram_bytes != b->vram_bytes)
		return a->vram_bytes > b->vram_bytes ? -1 : 1;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

static int open_source(struct telemetry *t, const struct telemetry_source *src, char *why,
		       size_t why_len)
{
	int r = src->open(&t->state, why, why_len);

	if (r == 0)
		t->src = src;
	return r;
}

int telemetry_open(enum telemetry_vendor vendor, struct telemetry **out, char *why, size_t why_len)
{
	char smi_why[256] = "", sysfs_why[256] = "";
	struct telemetry *t;
	int r;

	*out = NULL;
	if (why_len)
		why[0] = '\0';
	if (vendor != TELEMETRY_AMD && vendor != TELEMETRY_NVIDIA) {
		snprintf(why, why_len, "unknown GPU vendor %d", (int)vendor);
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	if (vendor == TELEMETRY_NVIDIA) {
		r = open_source(t, &telemetry_nvml_source, why, why_len);
		if (r < 0)
			goto fail;
		*out = t;
		return 0;
	}
	r = open_source(t, &telemetry_smi_source, smi_why, sizeof(smi_why));
	if (r == 0) {
		*out = t;
		return 0;
	}
	if (r == -ENOMEM)
		goto fail;
	r = open_source(t, &telemetry_sysfs_source, sysfs_why, sizeof(sysfs_why));
	if (r == 0) {
		snprintf(why, why_len, "rocm-smi: %s; using sysfs", smi_why);
		*out = t;
		return 0;
	}
	snprintf(why, why_len, "rocm-smi: %s; sysfs: %s", smi_why, sysfs_why);
fail:
	free(t);
	return r == -ENOMEM ? -ENOMEM : -ENOENT;
}

const char *telemetry_source(const struct telemetry *t)
{
	return t->src->name;
}

int telemetry_sample(struct telemetry *t, const char *pci_bus_id, struct telemetry_sample *out)
{
	struct telemetry_pci pci;
	int r;

	memset(out, 0, sizeof(*out));
	out->source = t->src->name;
	if (telemetry_pci_parse(pci_bus_id, &pci) < 0)
		return -EINVAL;
	r = t->src->sample(t->state, &pci, out);
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		out->source = t->src->name;
		return r;
	}
	qsort(out->processes, out->nprocesses, sizeof(out->processes[0]), compare_processes);
	return 0;
}

void telemetry_close(struct telemetry *t)
{
	if (!t)
		return;
	t->src->close(t->state);
	free(t);
}
