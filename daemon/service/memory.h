/* SPDX-License-Identifier: MIT */
/* memory.h: leases' memory in and out of the backend: allocation jobs, releases, reclaims. */
#ifndef ROCMMEMD_MEMORY_H
#define ROCMMEMD_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "svc.h"

/*
 * svc_grant_lease charges size bytes on device to holder h and has the backend allocate them;
 * the lease (or the refusal) is answered when the job is done. waited_ms is how long the
 * request waited. A host lease of a holder that uses arenas is a range of its arena (answered
 * at once) unless own_memfd, or unless no range fits (service/arena.h).
 */
void svc_grant_lease(struct svc *svc, struct holder *h, uint64_t request_id, unsigned device,
		     uint64_t size, const char *tag, uint64_t model_id, uint64_t waited_ms,
		     bool own_memfd);

/*
 * svc_free_allocation hands an allocation back to the backend (off the loop when it blocks)
 * and uncharges it from device once freed, as for a released lease.
 */
void svc_free_allocation(struct svc *svc, unsigned device, const struct backend_alloc *alloc);

/* svc_lease_event fills e with what an event of type says about lease l (its owner's). */
void svc_lease_event(struct bus_event *e, const struct lease *l, enum bus_type type);

/* svc_lease_released tells the bus that l goes back (how: "released", "reclaimed"). */
void svc_lease_released(struct svc *svc, const struct lease *l, enum log_level level,
			const char *how);

/*
 * svc_export_keep_cap is how many exported VMM fds the daemon keeps open after their grants
 * (for the memory's next grant from the chunk pool) before it closes them at once again.
 */
uint64_t svc_export_keep_cap(const struct svc *svc);

/*
 * svc_lease_made links lease l (its id, device, size, memory and tag set) to h, records it,
 * tells the bus and answers request_id with it (with its arena's fd when send_arena_fd).
 */
void svc_lease_made(struct svc *svc, struct holder *h, struct lease *l, uint64_t request_id,
		    uint64_t model_id, uint64_t waited_ms, bool send_arena_fd);

/* svc_lease_destroy takes a lease from its owner and frees its memory. */
void svc_lease_destroy(struct svc *svc, struct lease *l);

/* svc_lease_give_back is svc_lease_destroy for a lease its client released: a host arena's
 * range may stay warm for the client's next lease (service/arena.h). */
void svc_lease_give_back(struct svc *svc, struct lease *l);

#endif
