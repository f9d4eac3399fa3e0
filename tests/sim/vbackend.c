/* SPDX-License-Identifier: MIT */
/*
 * vbackend.c: the simulator's backend: devices with a name, a total and a granule, whose
 * memory exists only in the books. Its jobs never reach it: the simulator's runner completes
 * them (runner.c); only what the service calls directly is here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define VBACKEND_TOTAL (64ull << 30)

struct vbackend {
	struct backend base;
	unsigned devices;
};

static void vb_destroy(struct backend *b)
{
	free(b);
}

static unsigned vb_count(const struct backend *b)
{
	return ((const struct vbackend *)b)->devices;
}

static int vb_info(const struct backend *b, unsigned index, struct backend_device *out)
{
	if (index >= vb_count(b))
		return -ENODEV;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "sim%u", index);
	snprintf(out->pci_bus_id, sizeof(out->pci_bus_id), "0000:%02x:00.0", index + 3);
	out->total_bytes = VBACKEND_TOTAL;
	out->granule = SIM_GRANULE;
	out->handle_kind = BACKEND_HANDLE_VMM_FD;
	out->default_headroom = VBACKEND_TOTAL / 2;
	return 0;
}

static int vb_alloc(struct backend *b, unsigned index, uint64_t size, const char *label,
		    struct backend_alloc *out, char *why, size_t why_len)
{
	(void)b, (void)index, (void)size, (void)label, (void)out;
	snprintf(why, why_len, "the simulator's jobs are run by its runner");
	return -ENOSYS;
}

static void vb_release(struct backend *b, unsigned index, struct backend_alloc *a)
{
	(void)b, (void)index, (void)a;
}

static int vb_trim(struct backend *b, unsigned index, uint64_t *released)
{
	(void)b, (void)index;
	*released = 0;
	return 0;
}

static const struct backend_ops vb_ops = {
    .name = "sim",
    .blocking = true,
    .destroy = vb_destroy,
    .device_count = vb_count,
    .device_info = vb_info,
    .alloc = vb_alloc,
    .release = vb_release,
    .trim = vb_trim,
};

struct backend *vbackend_create(unsigned devices)
{
	struct vbackend *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->base.ops = &vb_ops;
	b->devices = devices;
	return &b->base;
}

uint64_t vbackend_total(void)
{
	return VBACKEND_TOTAL;
}
