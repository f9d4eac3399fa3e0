/* SPDX-License-Identifier: MIT */
/* details.c: the lines under status's devices and clients tables (what the tables leave out). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "details.h"
#include "format.h"
#include "size.h"

/* ctl_print_device_details adds what is known beyond the table: bus, sharing, runtime, sensors. */
void ctl_print_device_details(const rocmmem_status *st, const struct rocmmem_device_info *v)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX];

	if (v->pci_bus_id[0])
		printf("  device %u: %s%s, shared by %s\n", v->index, v->pci_bus_id,
		       v->integrated ? ", integrated (APU)" : "", v->sharing);
	if (strcmp(v->state, "ok") != 0)
		printf("  device %u: UNUSABLE: %s\n", v->index, v->state);
	if (v->reserved_bytes)
		printf("  device %u: %s reserved for models (not leased, not free)\n", v->index,
		       size_format(v->reserved_bytes, a, sizeof(a)));
	if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME)
		printf("  device %u: runtime: %s free of %s; %s used outside rocmmemd\n", v->index,
		       size_format(v->runtime_free_bytes, a, sizeof(a)),
		       size_format(v->runtime_total_bytes, b, sizeof(b)),
		       size_format(v->external_bytes, c, sizeof(c)));
	if (v->pool_limit_bytes || v->pool_bytes)
		printf(
		    "  device %u: pool: %s in %llu chunk(s) of at most %s, the daemon's (counted "
		    "free); %llu warm grant(s)\n",
		    v->index, size_format(v->pool_bytes, a, sizeof(a)),
		    (unsigned long long)v->pool_chunks,
		    size_format(v->pool_limit_bytes, b, sizeof(b)),
		    (unsigned long long)v->pool_warm_grants);
	if (!v->measurable)
		printf("  device %u: books: declared only (cannot measure per-process device "
		       "memory here)\n",
		       v->index);
	else
		printf("  device %u: books: %s used beyond declarations (%s outside rocmmemd)\n",
		       v->index, size_format(v->undeclared_bytes, a, sizeof(a)),
		       size_format(v->outside_bytes, b, sizeof(b)));
	if (v->telemetry_source[0]) {
		printf("  device %u: %s:", v->index, v->telemetry_source);
		if (v->valid & ROCMMEM_DEVICE_HAS_VRAM)
			printf(" vram %s/%s", size_format(v->vram_used_bytes, a, sizeof(a)),
			       size_format(v->vram_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_GTT)
			printf(" gtt %s/%s", size_format(v->gtt_used_bytes, a, sizeof(a)),
			       size_format(v->gtt_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
			printf(" %.1f C", v->temperature_mc / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
			printf(" %.1f W", v->power_mw / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
			printf(" busy %u%%", v->busy_percent);
		printf("\n");
	}
	for (size_t k = 0; k < rocmmem_status_process_count(st, v->index); k++) {
		const struct rocmmem_process_info *p = rocmmem_status_process(st, v->index, k);

		printf("  device %u: pid %d holds %s%s\n", v->index, (int)p->pid,
		       size_format(p->vram_bytes, a, sizeof(a)),
		       p->client ? " (a client)" : " outside rocmmemd");
	}
}

/*
 * ctl_print_arenas adds a line per client with a host arena under the clients table: its use,
 * its fragmentation (1 - longest free range / free, as the daemon's allocator counts) and its
 * leases that fitted no free range, if any.
 */
void ctl_print_arenas(const struct ctl *ctl, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX];

	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);
		uint64_t free = v->arena_free_bytes;

		if (ctl_is_self(v) || !v->arena_bytes)
			continue;
		printf("  pid %d: arena %s used of %s, %.1f%% fragmented (longest free %s)",
		       (int)v->pid, ctl_size(ctl, v->arena_used_bytes, a, sizeof(a)),
		       ctl_size(ctl, v->arena_bytes, b, sizeof(b)),
		       free ? 100.0 - 100.0 * (double)v->arena_largest_free / (double)free : 0.0,
		       ctl_size(ctl, v->arena_largest_free, c, sizeof(c)));
		if (v->arena_fallbacks)
			printf(", %llu lease(s) outside it",
			       (unsigned long long)v->arena_fallbacks);
		printf("\n");
	}
}
