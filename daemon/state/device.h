/* SPDX-License-Identifier: MIT */
/* device.h: one device's budget and accounting, and its queue of waiting requests. */
#ifndef ROCMMEMD_DEVICE_H
#define ROCMMEMD_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "platform/backend/backend.h"
#include "model.h"
#include "queue.h"
#include "measured.h"
#include "pool.h"
#include "platform/telemetry/telemetry.h"

struct budget_config {
	uint64_t budget; /* used when has_budget */
	bool has_budget;
	uint64_t headroom; /* used when has_headroom and not has_budget */
	bool has_headroom;
	bool named; /* given for this very device: an error if it does not exist */
};

struct device {
	struct backend_device info; /* as the backend described it at start */
	unsigned index;
	char name[64];
	char pci_bus_id[32];
	bool integrated;
	uint32_t handle_kind;
	uint64_t granule;
	uint64_t total;	     /* what the backend reports */
	uint64_t budget;     /* the most that may be leased at once; never exceeded */
	uint64_t headroom;   /* total - budget */
	uint64_t leased;     /* bytes held by leases, and by ones being allocated or freed */
	uint64_t reserved;   /* bytes accounted for without a lease (model reservations) */
	uint64_t arena_warm; /* released host arena ranges not yet punched (service/arena.c) */
	uint64_t leases;     /* number of live leases */
	uint64_t releasing;  /* of leased: bytes the backend is freeing right now */
	struct queue queue;
	struct model_list models;
	unsigned nmodels;
	struct class_exclusion exclusive; /* classes never resident together */
	/* Lost: the runtime reports the device gone; requests for it fail at once. */
	bool lost;
	char lost_reason[128];
	bool trimming; /* a trim is in flight */
	/* The runtime's own view, refreshed by the sampler (valid once sampled). */
	bool has_meminfo;
	uint64_t runtime_total;
	uint64_t runtime_free;
	uint64_t meminfo_ms; /* loop time of the last sample */
	/* Hardware readings (rocm-smi, sysfs or NVML), valid once read. */
	bool has_telemetry;
	struct telemetry_sample telemetry;
	uint64_t telemetry_ms;
	/* What processes really hold here (measured.h); its `undeclared` shrinks the free budget.
	 */
	struct device_truth truth;
	/* Memory of released VMM leases the daemon keeps for their clients (pool.h). Free in
	 * the budget's eyes, yet held: a grant that would take the device past its budget with
	 * it, a trim, a waiting request or a runtime short of memory has it released first. */
	struct device_pool pool;
};

/*
 * device_keeps_fds says whether a lease on d keeps a file descriptor in the daemon for its
 * whole life (a host memfd, handed out again at adoption and punched at release): those count
 * against the descriptor limit (quota_fd_admit). GPU leases' fds are sent and closed, or kept
 * for a grant from the chunk pool (--gpu-pool-fds, counted on their own).
 */
static inline bool device_keeps_fds(const struct device *d)
{
	return d->handle_kind == BACKEND_HANDLE_MEMFD;
}

/*
 * device_budget computes a device's budget from its total and the configuration: --budget if
 * given, else total minus --headroom if given, else total minus the backend's default headroom;
 * rounded down to the granule. Returns 0, or -EINVAL with a reason in why when the result would
 * be empty or larger than the device.
 */
int device_budget(const struct budget_config *cfg, const struct backend_device *info,
		  uint64_t *budget, char *why, size_t why_len);

/* device_init sets up dev from the backend's info and an already computed budget. */
void device_init(struct device *dev, unsigned index, const struct backend_device *info,
		 uint64_t budget);

/* device_set_budget changes the budget (and headroom); what is held stays held. */
void device_set_budget(struct device *dev, uint64_t budget);

/*
 * device_free returns the bytes that could be granted now: budget minus leased and reserved
 * and minus what the measured books charge beyond them (truth.undeclared: clients' use past
 * their declarations, processes outside rocmmemd; 0 where nothing is measured).
 */
uint64_t device_free(const struct device *dev);

/* device_declared_free is the budget minus leased and reserved alone (what the declarations
 * leave). */
uint64_t device_declared_free(const struct device *dev);

/* device_fits says whether bytes could be granted now without exceeding the budget. */
bool device_fits(const struct device *dev, uint64_t bytes);

/* device_charge accounts bytes for a new lease; the caller checked device_fits first. */
void device_charge(struct device *dev, uint64_t bytes);

/* device_uncharge returns bytes of a released lease (once the backend has freed them). */
void device_uncharge(struct device *dev, uint64_t bytes);

/* device_reserve / device_unreserve account bytes of model reservations. */
void device_reserve(struct device *dev, uint64_t bytes);
void device_unreserve(struct device *dev, uint64_t bytes);

/*
 * After a restart (daemon/service/adopt.c): memory its holders may re-declare is accounted from the
 * start, possibly beyond the budget (it exists whatever the budget says), as leased bytes that
 * are no lease yet (device_hold) or reserved bytes (device_hold_reserved). device_hold_to_lease
 * makes held bytes a lease (released later by device_uncharge), device_unhold forgets them.
 */
void device_hold(struct device *dev, uint64_t bytes);
void device_hold_to_lease(struct device *dev, uint64_t bytes);
void device_unhold(struct device *dev, uint64_t bytes);
void device_hold_reserved(struct device *dev, uint64_t bytes);

/*
 * device_largest_grantable returns the largest request the device could grant now: its free
 * budget, capped by what the runtime reports free when sampled, rounded down to the granule.
 * A request arriving now still waits behind any queued before it.
 */
uint64_t device_largest_grantable(const struct device *dev);

/* device_evictable returns the bytes resident in idle, unpinned models (evictable on demand). */
uint64_t device_evictable(const struct device *dev);

/* device_largest_with_eviction is device_largest_grantable once the evictable models are gone. */
uint64_t device_largest_with_eviction(const struct device *dev);

/* device_models_resident counts the models holding memory on the device. */
unsigned device_models_resident(const struct device *dev);

/* device_oldest_wait_ms returns how long the head of the queue has waited at now_ms (0: none). */
uint64_t device_oldest_wait_ms(const struct device *dev, uint64_t now_ms);

/*
 * device_external returns the bytes the runtime reports in use on the device beyond what
 * rocmmemd holds (leases and its pool: other processes' own allocations), or 0 when not
 * sampled.
 */
uint64_t device_external(const struct device *dev);

#endif
