/* SPDX-License-Identifier: MIT */
/* telemetry.c: choosing a telemetry source, PCI bus ids, and the per-device process list. */
#include "source.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct telemetry {
	const struct telemetry_source *src;
	void *state;
};

const char *telemetry_sysfs_root(void)
{
	const char *root = getenv(TELEMETRY_SYSFS_ROOT_ENV);

	return root && root[0] ? root : "/sys";
}

/* parse_hex reads hex digits at *p, advances it, and returns how many (0 when too many). */
static unsigned parse_hex(const char **p, uint32_t *out)
{
	uint32_t v = 0;
	unsigned n = 0;

	while (isxdigit((unsigned char)**p)) {
		if (++n > 8)
			return 0;
		v = v * 16 + (uint32_t)(isdigit((unsigned char)**p)
					    ? **p - '0'
					    : tolower((unsigned char)**p) - 'a' + 10);
		(*p)++;
	}
	*out = v;
	return n;
}

int telemetry_pci_parse(const char *in, struct telemetry_pci *out)
{
	uint32_t v[4];
	unsigned n[4], parts = 0;
	const char *p = in;

	if (!in)
		return -EINVAL;
	/* [domain:]bus:device.function */
	for (;;) {
		n[parts] = parse_hex(&p, &v[parts]);
		if (!n[parts])
			return -EINVAL;
		parts++;
		if (*p == ':' && parts < 3) {
			p++;
			continue;
		}
		break;
	}
	if (parts < 2 || *p++ != '.')
		return -EINVAL;
	if (parts == 2) { /* no domain: shift bus and device up */
		memmove(&v[1], &v[0], 2 * sizeof(v[0]));
		memmove(&n[1], &n[0], 2 * sizeof(n[0]));
		v[0] = 0;
	}
	n[3] = parse_hex(&p, &v[3]);
	if (*p != '\0' || n[1] > 2 || n[2] > 2 || n[3] != 1)
		return -EINVAL;
	if (v[2] > 0x1f || v[3] > 7)
		return -EINVAL;
	out->domain = v[0];
	out->bus = (uint8_t)v[1];
	out->device = (uint8_t)v[2];
	out->function = (uint8_t)v[3];
	return 0;
}

void telemetry_pci_format(const struct telemetry_pci *pci, char *out, size_t len)
{
	snprintf(out, len, "%04x:%02x:%02x.%x", (unsigned)pci->domain, (unsigned)pci->bus,
		 (unsigned)pci->device, (unsigned)pci->function);
}

bool telemetry_pci_equal(const struct telemetry_pci *a, const struct telemetry_pci *b)
{
	return a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
	       a->function == b->function;
}

int telemetry_normalize_pci(const char *in, char *out, size_t len)
{
	struct telemetry_pci pci;
	char buf[TELEMETRY_PCI_ID_SIZE];

	if (!out || telemetry_pci_parse(in, &pci) < 0)
		return -EINVAL;
	telemetry_pci_format(&pci, buf, sizeof(buf));
	if (strlen(buf) >= len)
		return -EINVAL;
	memcpy(out, buf, strlen(buf) + 1);
	return 0;
}

void telemetry_process_add(struct telemetry_sample *out, int32_t pid, uint64_t vram_bytes)
{
	unsigned smallest = 0;

	out->nprocesses_total++;
	if (out->nprocesses < TELEMETRY_MAX_PROCESSES) {
		out->processes[out->nprocesses].pid = pid;
		out->processes[out->nprocesses].vram_bytes = vram_bytes;
		out->nprocesses++;
		return;
	}
	/* Full: the new one replaces the smallest if it is larger. */
	for (unsigned i = 1; i < out->nprocesses; i++)
		if (out->processes[i].vram_bytes < out->processes[smallest].vram_bytes)
			smallest = i;
	if (vram_bytes > out->processes[smallest].vram_bytes) {
		out->processes[smallest].pid = pid;
		out->processes[smallest].vram_bytes = vram_bytes;
	}
}

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
