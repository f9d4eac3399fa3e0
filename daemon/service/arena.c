/* SPDX-License-Identifier: MIT */
/*
 * arena.c: host leases as ranges of one arena per holder and device: the arena made at the
 * first such lease, ranges handed out and punched back, the arena closed when its holder goes.
 */
#include "arena.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adopt.h"
#include "base/log.h"
#include "platform/arenafd.h"
#include "reply.h"
#include "size.h"
#include "state/arena.h"
#include "text.h"

/*
 * A released range stays warm (unpunched, for its client's next lease of that size) this
 * long at most, and an arena keeps at most ARENA_WARM_CAP or an eighth of the budget so:
 * a lease that is released and taken again at once costs neither a hole punch nor a page
 * fault, and what a client gave back returns to the host within ARENA_WARM_MS
 * (docs/protocol.md, "Host arenas").
 */
#define ARENA_WARM_MS 250u
#define ARENA_WARM_CAP (256ull << 20)

/*
 * arena_bytes sizes an arena on d: twice the budget, so that fragmentation rarely leaves a
 * lease without a range. Address space only: a memfd's pages come as they are touched.
 */
static uint64_t arena_bytes(const struct device *d)
{
	uint64_t size;

	if (d->budget > (uint64_t)INT64_MAX / 4 ||
	    size_round_up(2 * d->budget, d->granule, &size) < 0 || size == 0)
		return 0;
	return size;
}

/*
 * arena_open makes h's arena on device: counted as one fd against the descriptor limit. NULL
 * with *err set when it could not (the request is answered with it), or with *err 0 when the
 * per-lease path is to answer (its fd admission refuses it, with the reason).
 */
static struct arena *arena_open(struct svc *svc, struct holder *h, unsigned device, int *err,
				char *why, size_t why_len)
{
	struct device *d = &svc->state.devices[device];
	struct policy_decision r;
	struct memfd_id id;
	struct arena *a;
	char label[48], who[128];
	uint64_t size = arena_bytes(d);
	int fd;

	*err = 0;
	policy_fd_admit(&svc->state, &svc->cfg, h, &r);
	if (r.verdict == POLICY_REFUSE || size == 0)
		return NULL;
	snprintf(label, sizeof(label), "rocmmem-arena-pid%d", (int)h->who.pid);
	fd = arenafd_create(size, label, &id, why, why_len);
	if (fd < 0) {
		log_warn("Could not make the host arena of %s: %s",
			 holder_label(h, who, sizeof(who)), why);
		*err = fd;
		return NULL;
	}
	a = svc_arena_adopt(svc, h, device, &id, fd, 0);
	if (a)
		a->fd_sent = false;
	else
		*err = -ENOMEM;
	return a;
}

struct arena *svc_arena_adopt(struct svc *svc, struct holder *h, unsigned device,
			      const struct memfd_id *id, int fd, uint32_t slot)
{
	struct device *d = &svc->state.devices[device];
	struct arena *a = calloc(1, sizeof(*a));

	/* Its id is its memfd's inode: unique while the memfd lives, which is as long as
	 * anyone can re-declare it, and the same for the next daemon. */
	if (!a || arena_init(a, id->ino, device, id->size, d->granule) < 0) {
		free(a);
		close(fd);
		return NULL;
	}
	a->fd = fd;
	a->fd_sent = true;
	a->ino_dev = id->dev;
	a->ino = id->ino;
	h->arena[device] = a;
	state_fd_take(&svc->state, h);
	svc->state.arenas++;
	a->state_slot = slot;
	if (!slot)
		adopt_arena_made(svc, h, a);
	return a;
}

/* warm_punch punches and gives back h's warm ranges released at or before until_ms. */
static void warm_punch(struct svc *svc, struct holder *h, uint64_t until_ms)
{
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++) {
		struct arena *a = h->arena[i];
		struct arena_warm w;
		int err;

		while (a && arena_warm_pop(a, until_ms, &w)) {
			err = arenafd_punch(a->fd, w.offset, w.bytes);
			if (err)
				log_warn("Could not punch a released range out of arena %" PRIu64
					 ": %s",
					 a->id, strerror(-err));
			if (arena_give_unleased(a, w.offset, w.bytes) < 0)
				log_error("a warm range at %" PRIu64
					  " was not taken from arena %" PRIu64,
					  w.offset, a->id);
			svc->state.devices[i].arena_warm -= w.bytes;
		}
	}
}

/* warm_arm sets h's DUE_ARENA deadline to when its oldest warm range has been warm long
 * enough, or clears it when it keeps none. */
static void warm_arm(struct svc *svc, struct holder *h)
{
	uint64_t oldest = UINT64_MAX;

	/* Arenas exist on the daemon's devices only (twice per lease: not all the slots). */
	for (unsigned i = 0; i < svc->state.ndevices; i++)
		if (h->arena[i] && h->arena[i]->nwarm && h->arena[i]->warm[0].since_ms < oldest)
			oldest = h->arena[i]->warm[0].since_ms;
	if (oldest == UINT64_MAX) {
		state_deadline_clear(&svc->state, &h->arena_warm_slot);
	} else if (state_deadline_set(&svc->state, DUE_ARENA, h->id, oldest + ARENA_WARM_MS,
				      &h->arena_warm_slot) < 0) {
		/* No room for the deadline: nothing may stay warm without one. */
		warm_punch(svc, h, UINT64_MAX);
		state_deadline_clear(&svc->state, &h->arena_warm_slot);
	}
	svc_due_changed(svc);
}

bool svc_arena_keep_warm(struct svc *svc, struct lease *l)
{
	struct device *d = &svc->state.devices[l->device];
	uint64_t cap = d->budget / 8 < ARENA_WARM_CAP ? d->budget / 8 : ARENA_WARM_CAP;
	struct holder *h = l->owner;

	/* Someone waits for memory on the device: it goes back now. */
	if (d->queue.count || !arena_warm_keep(l->arena, l->offset, l->size, svc_now(svc), cap))
		return false;
	l->arena = NULL;
	device_uncharge(d, l->size);
	d->arena_warm += l->size;
	if (!h->arena_warm_slot)
		warm_arm(svc, h);
	return true;
}

bool svc_arenas_cool(struct svc *svc, uint64_t holder)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	uint64_t now = svc_now(svc);

	if (!h || !h->arena_warm_slot)
		return false;
	warm_punch(svc, h, now >= ARENA_WARM_MS ? now - ARENA_WARM_MS : 0);
	state_deadline_clear(&svc->state, &h->arena_warm_slot);
	warm_arm(svc, h);
	return true;
}

void svc_arenas_cool_device(struct svc *svc, unsigned device)
{
	struct holder *h;

	if (device >= svc->state.ndevices || !svc->state.devices[device].arena_warm)
		return;
	for (h = state_holder_next(&svc->state, 0); h; h = state_holder_next(&svc->state, h->id))
		if (h->arena[device] && h->arena[device]->nwarm) {
			warm_punch(svc, h, UINT64_MAX);
			warm_arm(svc, h);
		}
}

int svc_arena_take(struct svc *svc, struct holder *h, const struct svc_grant *q, struct lease **out,
		   bool *first, char *why, size_t why_len)
{
	struct device *d = &svc->state.devices[q->device];
	struct arena *a;
	struct lease *l;
	uint64_t offset;
	int err;

	if (!(h->features & HOLDER_HOST_ARENA) || !device_keeps_fds(d))
		return 0;
	a = h->arena[q->device];
	if (!a && !(a = arena_open(svc, h, q->device, &err, why, why_len)))
		return err;
	if (arena_warm_take(a, q->size, &offset)) {
		/* Its own memory, as it left it: no punch was made and no page faults in. */
		d->arena_warm -= q->size;
		warm_arm(svc, h);
	} else if (arena_take(a, q->size, &offset) < 0 &&
		   (!a->warm_bytes || (warm_punch(svc, h, UINT64_MAX), warm_arm(svc, h),
				       arena_take(a, q->size, &offset) < 0))) {
		/* The documented answer: a memfd of its own (docs/protocol.md, "Host arenas"). */
		h->arena_fallbacks++;
		svc->state.arena_fallbacks++;
		return 0;
	}
	l = lease_table_new(&svc->state.leases);
	err = l ? lease_table_add(&svc->state.leases, l) : -ENOMEM;
	if (err) {
		free(l);
		arena_give(a, offset, q->size);
		snprintf(why, why_len, "%s",
			 err == -EOVERFLOW ? "the daemon has handed out every lease id"
					   : "the daemon is out of memory");
		return err;
	}
	device_charge(d, q->size);
	l->device = q->device;
	l->size = q->size;
	l->alloc.handle_kind = BACKEND_HANDLE_ARENA;
	l->alloc.size = q->size;
	l->arena = a;
	l->offset = offset;
	text_copy(l->tag, sizeof(l->tag), q->tag ? q->tag : ""); /* every lease: no printf */
	*first = !a->fd_sent;
	a->fd_sent = true;
	*out = l;
	return 1;
}

/* punch_free punches one free range of an arena (ctx) out. */
static void punch_free(void *ctx, uint64_t start, uint64_t n)
{
	struct arena *a = ctx;

	arenafd_punch(a->fd, start * a->granule, n * a->granule);
}

void svc_arenas_settle(struct holder *h)
{
	/* Leases the client did not re-declare (released while the daemon was away) still hold
	 * pages in the memfd: nothing accounts for them, so they go. */
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++)
		if (h->arena[i])
			ranges_each(&h->arena[i]->ranges, punch_free, h->arena[i]);
}

void svc_arena_lease_gone(struct svc *svc, struct lease *l)
{
	struct arena *a = l->arena;
	int err;

	/* Punched before the range can be handed out again: the next lease starts at zeros,
	 * and a client that kept writing through its mapping wrote to memory that is gone. */
	err = arenafd_punch(a->fd, l->offset, l->size);
	if (err)
		log_warn("Could not punch lease %" PRIu64 " out of its arena: %s", l->id,
			 strerror(-err));
	if (arena_give(a, l->offset, l->size) < 0)
		log_error("lease %" PRIu64 " at %" PRIu64 " was not taken from arena %" PRIu64,
			  l->id, l->offset, a->id);
	l->arena = NULL;
	device_uncharge(&svc->state.devices[l->device], l->size);
}

void svc_arenas_close(struct svc *svc, struct holder *h)
{
	/* Its client may map the arena still (a connection closed by a process that lives on). */
	warm_punch(svc, h, UINT64_MAX);
	state_deadline_clear(&svc->state, &h->arena_warm_slot);
	svc_due_changed(svc);
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++) {
		struct arena *a = h->arena[i];

		if (!a)
			continue;
		adopt_arena_gone(svc, a);
		/* Whatever a client mapped is punched already; closing drops the last pages. */
		close(a->fd);
		arena_finish(a);
		free(a);
		h->arena[i] = NULL;
		state_fd_release(&svc->state, h);
		svc->state.arenas--;
	}
}
