/* SPDX-License-Identifier: MIT */
/*
 * redeclare_arena.c: after a restart, a returning client's host arena (the very memfd on
 * record: inode, size, seals, owner uid and pid) and then each lease in it, by its recorded
 * offset, claimed again in a fresh allocator.
 */
#include <errno.h>
#include <inttypes.h>
#include <unistd.h>

#include "adopt.h"
#include "arena.h"
#include "base/log.h"
#include "platform/memfd.h"
#include "redeclare.h"
#include "reply.h"
#include "state/arena.h"

/* arena_record finds the record of the arena re-declared, refusing what does not match. */
static struct pending *arena_record(struct svc *svc, struct holder *h, uint64_t request_id,
				    const struct svc_arena_redeclare *req)
{
	struct pending *p;

	if (!svc->adopt || !svc->adopt->have_file) {
		redeclare_refuse(svc, h, request_id, -ESTALE,
				 "this rocmmemd keeps no record of earlier arenas");
		return NULL;
	}
	if (h->arena[req->device]) {
		redeclare_refuse(svc, h, request_id, -EEXIST,
				 "this connection has its arena on device %u already", req->device);
		return NULL;
	}
	p = adopt_arena_pending(svc, req->arena_id);
	if (!p) {
		redeclare_refuse(svc, h, request_id, -ESTALE,
				 "no record of arena %" PRIu64
				 ": never made, re-declared already, or forgotten",
				 req->arena_id);
		return NULL;
	}
	if (p->rec.uid != (uint32_t)h->who.uid || p->rec.pid != (int32_t)h->who.pid) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "arena %" PRIu64 " belongs to pid %d uid %u, not to this process",
				 req->arena_id, (int)p->rec.pid, (unsigned)p->rec.uid);
		return NULL;
	}
	if (p->rec.device != req->device || p->rec.size != req->size) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "arena %" PRIu64 " does not match its record (%" PRIu64
				 " bytes on device %u)",
				 req->arena_id, p->rec.size, (unsigned)p->rec.device);
		return NULL;
	}
	return p;
}

void svc_arena_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_arena_redeclare *req, int fd)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct memfd_id id;
	struct pending *p;
	char why[256];
	int err;

	if (!h)
		goto close;
	if (svc->cfg.stopping) {
		svc_reply_error(svc, h->id, request_id, -ESHUTDOWN,
				"the daemon is stopping: it only takes releases now");
		goto close;
	}
	if (!req->complete || fd < 0 || req->device >= svc->state.ndevices) {
		svc_reply_error(svc, h->id, request_id, -EINVAL,
				"an arena re-declaration names its id, device and size, with its "
				"memfd attached and counted");
		goto close;
	}
	p = arena_record(svc, h, request_id, req);
	if (!p)
		goto close;
	id = (struct memfd_id){.dev = p->rec.ino_dev, .ino = p->rec.ino, .size = p->rec.size};
	err = memfd_matches(&id, fd, why, sizeof(why));
	if (err) {
		redeclare_refuse(svc, h, request_id, err, "arena %" PRIu64 ": %s", req->arena_id,
				 why);
		goto close;
	}
	policy_fd_admit(&svc->state, &svc->cfg, h, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, h->id, request_id, &d, 0);
		goto close;
	}
	p->gone = true;
	if (!svc_arena_adopt(svc, h, req->device, &id, fd, p->slot)) {
		statefile_clear(&svc->adopt->file, p->slot);
		svc_reply_error(svc, h->id, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	log_info("took over arena %" PRIu64 " of pid %d", req->arena_id, (int)h->who.pid);
	svc_reply_ok(svc, h->id, request_id);
	return;
close:
	if (fd >= 0)
		close(fd);
}

void svc_arena_lease_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			       const struct svc_lease_redeclare *req)
{
	struct backend_alloc alloc = {.handle_kind = BACKEND_HANDLE_ARENA, .size = req->size};
	struct holder *h = state_holder_find(&svc->state, holder);
	struct pending *p;
	struct arena *a;
	int err;

	if (!h)
		return;
	if (svc->cfg.stopping) {
		svc_reply_error(svc, h->id, request_id, -ESHUTDOWN,
				"the daemon is stopping: it only takes releases now");
		return;
	}
	if (!req->complete || req->device >= svc->state.ndevices) {
		svc_reply_error(svc, h->id, request_id, -EINVAL,
				"an arena lease's re-declaration names its id, device, size, "
				"arena and offset, with no fd");
		return;
	}
	if (h->lease_count + h->jobs >= svc->cfg.limits.max_leases) {
		svc_reply_error(svc, h->id, request_id, -EDQUOT,
				"this connection already holds %u leases, the most allowed",
				svc->cfg.limits.max_leases);
		return;
	}
	p = redeclare_lease_pending(svc, h, request_id, req, 0);
	if (!p)
		return;
	a = h->arena[p->rec.device];
	if (!a || a->id != req->arena_id || p->rec.ino_dev != req->arena_id ||
	    p->rec.ino != req->offset) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "lease %" PRIu64 " was granted in arena %" PRIu64
				 " at offset %" PRIu64 ", not in arena %" PRIu64 " at %" PRIu64
				 " (re-declare the arena first)",
				 p->rec.id, p->rec.ino_dev, p->rec.ino, req->arena_id, req->offset);
		return;
	}
	err = arena_claim(a, req->offset, req->size);
	if (err) {
		redeclare_refuse(svc, h, request_id, err == -ENOMEM ? -ENOMEM : -EPERM,
				 "lease %" PRIu64 ": its range of the arena %s", p->rec.id,
				 err == -EBUSY ? "overlaps another lease" : "is not in the arena");
		return;
	}
	redeclare_adopted(svc, h, request_id, p, &alloc, req->model_id, false);
	svc->pump(svc);
}
