/* SPDX-License-Identifier: MIT */
/* pci.c: what every telemetry source shares: the sysfs root, PCI bus ids, process lists. */
#include "source.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
