/* SPDX-License-Identifier: MIT */
/* device.c: per-device budget arithmetic and lease accounting. */
#include "device.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "size.h"

int device_budget(const struct budget_config *cfg, const struct backend_device *info,
		  uint64_t *budget, char *why, size_t why_len)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];
	uint64_t total = info->total_bytes, headroom, value;

	if (cfg->has_budget) {
		if (cfg->budget > total) {
			snprintf(why, why_len, "budget %s exceeds the %s that %s offers",
				 size_format(cfg->budget, a, sizeof(a)),
				 size_format(total, b, sizeof(b)), info->name);
			return -EINVAL;
		}
		value = cfg->budget;
	} else {
		headroom = cfg->has_headroom ? cfg->headroom : info->default_headroom;
		if (headroom >= total) {
			snprintf(why, why_len,
				 "headroom %s leaves nothing of the %s that %s offers",
				 size_format(headroom, a, sizeof(a)),
				 size_format(total, b, sizeof(b)), info->name);
			return -EINVAL;
		}
		value = total - headroom;
	}
	value &= ~(info->granule - 1);
	if (value == 0) {
		snprintf(why, why_len, "budget is smaller than one %s granule",
			 size_format(info->granule, a, sizeof(a)));
		return -EINVAL;
	}
	*budget = value;
	return 0;
}

void device_init(struct device *dev, unsigned index, const struct backend_device *info,
		 uint64_t budget)
{
	memset(dev, 0, sizeof(*dev));
	dev->info = *info;
	dev->index = index;
	snprintf(dev->name, sizeof(dev->name), "%s", info->name);
	snprintf(dev->pci_bus_id, sizeof(dev->pci_bus_id), "%s", info->pci_bus_id);
	dev->integrated = info->integrated;
	dev->handle_kind = info->handle_kind;
	dev->granule = info->granule;
	dev->total = info->total_bytes;
	dev->budget = budget;
	dev->headroom = info->total_bytes - budget;
	queue_init(&dev->queue);
	TAILQ_INIT(&dev->models);
	pool_init(&dev->pool);
}

void device_set_budget(struct device *dev, uint64_t budget)
{
	dev->budget = budget;
	dev->headroom = dev->total - budget;
}

uint64_t device_declared_free(const struct device *dev)
{
	uint64_t used = dev->leased + dev->reserved;

	return used >= dev->budget ? 0 : dev->budget - used;
}

uint64_t device_free(const struct device *dev)
{
	uint64_t free = device_declared_free(dev);

	return dev->truth.undeclared >= free ? 0 : free - dev->truth.undeclared;
}

bool device_fits(const struct device *dev, uint64_t bytes)
{
	return bytes <= device_free(dev);
}

void device_charge(struct device *dev, uint64_t bytes)
{
	/* The declarations alone: a sample may have raised the measured side since the
	 * decision, which the next decision takes into account. */
	assert(bytes <= device_declared_free(dev));
	dev->leased += bytes;
	dev->leases++;
}

void device_uncharge(struct device *dev, uint64_t bytes)
{
	assert(dev->leased >= bytes && dev->leases > 0);
	dev->leased -= bytes;
	dev->leases--;
}

void device_reserve(struct device *dev, uint64_t bytes)
{
	assert(bytes <= device_declared_free(dev));
	dev->reserved += bytes;
}

void device_unreserve(struct device *dev, uint64_t bytes)
{
	assert(dev->reserved >= bytes);
	dev->reserved -= bytes;
}

void device_hold(struct device *dev, uint64_t bytes)
{
	dev->leased += bytes;
}

void device_hold_to_lease(struct device *dev, uint64_t bytes)
{
	assert(dev->leased >= bytes);
	dev->leases++;
}

void device_unhold(struct device *dev, uint64_t bytes)
{
	assert(dev->leased >= bytes);
	dev->leased -= bytes;
}

void device_hold_reserved(struct device *dev, uint64_t bytes)
{
	dev->reserved += bytes;
}

uint64_t device_external(const struct device *dev)
{
	uint64_t used, held;

	if (!dev->has_meminfo || dev->runtime_free > dev->runtime_total)
		return 0;
	used = dev->runtime_total - dev->runtime_free;
	/* What the runtime counts as used beyond what rocmmemd itself holds. */
	held = dev->leased + dev->pool.bytes;
	return used > held ? used - held : 0;
}

/* runtime_cap caps bytes by what the runtime reports free (plus the daemon's own pool, which a
 * grant releases first), when it has been sampled. */
static uint64_t runtime_cap(const struct device *dev, uint64_t bytes)
{
	uint64_t free = dev->runtime_free + dev->pool.bytes;

	if (dev->has_meminfo && free < bytes)
		bytes = free;
	return bytes & ~(dev->granule - 1);
}

uint64_t device_largest_grantable(const struct device *dev)
{
	if (dev->lost)
		return 0;
	return runtime_cap(dev, device_free(dev));
}

uint64_t device_evictable(const struct device *dev)
{
	const struct model *m;
	uint64_t bytes = 0;

	TAILQ_FOREACH (m, &dev->models, device_link) {
		if (model_evictable(m))
			bytes += model_resident(m);
	}
	return bytes;
}

uint64_t device_largest_with_eviction(const struct device *dev)
{
	uint64_t evictable = device_evictable(dev);

	if (dev->lost)
		return 0;
	/* Evicted memory comes back to the runtime too, so it is not capped by its free figure. */
	return device_largest_grantable(dev) + (evictable & ~(dev->granule - 1));
}

unsigned device_models_resident(const struct device *dev)
{
	const struct model *m;
	unsigned n = 0;

	TAILQ_FOREACH (m, &dev->models, device_link) {
		if (model_resident(m) > 0)
			n++;
	}
	return n;
}

uint64_t device_oldest_wait_ms(const struct device *dev, uint64_t now_ms)
{
	const struct waiter *w = queue_head(&dev->queue);

	return w && now_ms > w->enqueued_ms ? now_ms - w->enqueued_ms : 0;
}
