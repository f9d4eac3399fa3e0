/* SPDX-License-Identifier: MIT */
/*
 * arena.h: host leases as ranges of one arena per holder and device: the arena made at the
 * first such lease, ranges handed out and punched back, the arena closed when its holder goes.
 */
#ifndef ROCMMEMD_SVC_ARENA_H
#define ROCMMEMD_SVC_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/memfd.h"
#include "svc.h"

/* A lease to grant, as svc_grant_lease was asked. */
struct svc_grant {
	uint64_t request_id;
	unsigned device;
	uint64_t size;
	const char *tag;
	uint64_t model_id;
	uint64_t waited_ms;
};

/*
 * svc_arena_take makes lease q of h a range of h's arena on q->device (making the arena at its
 * first lease): in the lease table, charged, not yet linked (*out; *first: the arena's fd goes
 * with it). Returns 1; 0 when the lease takes the per-lease path instead (h did not ask for
 * arenas, the device is not host memory, the descriptor limit refuses a new arena, or no free
 * range is long enough: counted in arena_fallbacks, the lease gets a memfd of its own); or a
 * negative errno with the reason in why (the arena's memfd could not be made).
 */
int svc_arena_take(struct svc *svc, struct holder *h, const struct svc_grant *q, struct lease **out,
		   bool *first, char *why, size_t why_len);

/* svc_arenas_settle punches out what h's arenas hold outside its leases (after it
 * re-declared what it holds). */
void svc_arenas_settle(struct holder *h);

/* svc_arena_lease_gone punches lease l's range out of its arena and hands the range back. */
void svc_arena_lease_gone(struct svc *svc, struct lease *l);

/*
 * svc_arena_keep_warm keeps released lease l's range unpunched for its client's next lease of
 * that size (for a short while, within a cap; not while a request waits on its device):
 * uncharged, out of l. Returns true, or false when l is to be punched as any other.
 */
bool svc_arena_keep_warm(struct svc *svc, struct lease *l);

/* svc_arenas_cool punches what holder has kept warm long enough, at its DUE_ARENA deadline.
 * Returns false when it has no such deadline (the caller drops the heap entry). */
bool svc_arenas_cool(struct svc *svc, uint64_t holder);

/* svc_arenas_cool_device punches every warm range on device now (a request waits there, or
 * a trim). */
void svc_arenas_cool_device(struct svc *svc, unsigned device);

/* svc_arenas_close closes h's arenas (every lease in them gone first). */
void svc_arenas_close(struct svc *svc, struct holder *h);

/*
 * svc_arena_adopt makes h's arena on device of size bytes around memfd fd (the arena's from
 * then on, closed on failure): a new one, or one re-declared after a restart (its fd checked
 * against the record by the caller). slot is its record in the state file, 0: record it now.
 * Returns the arena, or NULL (out of memory).
 */
struct arena *svc_arena_adopt(struct svc *svc, struct holder *h, unsigned device,
			      const struct memfd_id *id, int fd, uint32_t slot);

#endif
