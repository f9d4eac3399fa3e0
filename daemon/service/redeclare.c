/* SPDX-License-Identifier: MIT */
/*
 * redeclare.c: after a restart, what a returning client re-declares, checked against what the
 * previous daemon recorded (same id, owner uid and pid, device and size; for a host lease the
 * very memfd, for GPU memory an import at the recorded chunk sizes) before it is taken over.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adopt.h"
#include "arena.h"
#include "base/log.h"
#include "memory.h"
#include "platform/arenafd.h"
#include "platform/memfd.h"
#include "redeclare.h"
#include "state/arena.h"
#include "reply.h"
#include "residency.h"
#include "service.h"
#include "size.h"
#include "text.h"

/* A re-declared lease being imported by the backend. */
struct adopt_job {
	struct job job;
	struct svc *svc;
	uint64_t holder; /* found again when done: it may have left meanwhile */
	uint64_t request_id;
	uint64_t lease_id;
	uint64_t model_id;
	bool fd; /* counted as a host lease's fd until it is a lease (or is not taken over) */
};

/* refuse answers a re-declaration that cannot be taken over, and says so in the log. */
void redeclare_refuse(struct svc *svc, const struct holder *h, uint64_t request_id, int err,
		      const char *fmt, ...)
{
	char why[512], who[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("refused the re-declaration of %s: %s", holder_label(h, who, sizeof(who)), why);
	svc_reply_error(svc, h->id, request_id, err, "%s", why);
}

/* matches_record checks what is re-declared against p's record (false: refused). */
static bool matches_record(struct svc *svc, const struct holder *h, uint64_t request_id,
			   const struct svc_lease_redeclare *req, const struct pending *p,
			   unsigned nfds)
{
	uint64_t id = req->lease_id, plan[BACKEND_MAX_CHUNKS];
	char sz[SIZE_FORMAT_MAX];

	if (p->rec.uid != (uint32_t)h->who.uid) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "lease %" PRIu64 " belongs to uid %u, not uid %u", id,
				 (unsigned)p->rec.uid, (unsigned)h->who.uid);
		return false;
	}
	if (p->rec.pid != (int32_t)h->who.pid) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "lease %" PRIu64 " was granted to pid %d, not pid %d", id,
				 (int)p->rec.pid, (int)h->who.pid);
		return false;
	}
	if (req->device != p->rec.device || req->size != p->rec.size ||
	    (p->rec.kind == STATEFILE_LEASE_MEMFD) != (req->handle_kind == BACKEND_HANDLE_MEMFD) ||
	    (p->rec.kind == STATEFILE_LEASE_ARENA) != (req->handle_kind == BACKEND_HANDLE_ARENA)) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "lease %" PRIu64
				 " does not match its record (%s of %s on device %u)",
				 id, size_format(p->rec.size, sz, sizeof(sz)),
				 adopt_kind_name(p->rec.kind), p->rec.device);
		return false;
	}
	if (p->rec.kind == STATEFILE_LEASE_VMM &&
	    (nfds != p->rec.nchunks || req->n_chunk_sizes != nfds ||
	     backend_chunk_plan(p->rec.size, svc->state.devices[p->rec.device].granule, nfds,
				plan) < 0 ||
	     memcmp(plan, req->chunk_sizes, nfds * sizeof(uint64_t)) != 0)) {
		redeclare_refuse(svc, h, request_id, -EPERM,
				 "lease %" PRIu64
				 " was granted as %u chunk(s), not as these %u fd(s)",
				 id, (unsigned)p->rec.nchunks, nfds);
		return false;
	}
	return true;
}

struct pending *redeclare_lease_pending(struct svc *svc, const struct holder *h,
					uint64_t request_id, const struct svc_lease_redeclare *req,
					unsigned nfds)
{
	struct adopt *ad = svc->adopt;
	uint64_t id = req->lease_id;
	struct pending *p;
	struct lease *live;
	char who[128];

	if (!ad || !ad->have_file) {
		redeclare_refuse(
		    svc, h, request_id, -ESTALE,
		    "lease %" PRIu64 ": this rocmmemd keeps no record of earlier leases", id);
		return NULL;
	}
	p = pending_find(&ad->books->leases, id);
	if (!p || p->gone) {
		live = lease_table_find(&svc->state.leases, id);
		if (live)
			redeclare_refuse(svc, h, request_id, -ESTALE,
					 "lease %" PRIu64 " was re-declared already, by %s", id,
					 holder_label(live->owner, who, sizeof(who)));
		else
			redeclare_refuse(svc, h, request_id, -ESTALE,
					 "no record of lease %" PRIu64
					 ": never granted, released, or not re-declared in time",
					 id);
		return NULL;
	}
	if (p->adopting) {
		redeclare_refuse(svc, h, request_id, -ESTALE,
				 "lease %" PRIu64 " is being re-declared already", id);
		return NULL;
	}
	return matches_record(svc, h, request_id, req, p, nfds) ? p : NULL;
}

/* settled ends a record that was not taken over: its memory goes back like any lease's. */
static void settled(struct svc *svc, struct pending *p, const struct backend_alloc *alloc)
{
	struct adopt *ad = svc->adopt;

	device_hold_to_lease(&svc->state.devices[p->rec.device], p->rec.size);
	svc_free_allocation(svc, p->rec.device, alloc);
	idtable_unreserve(&svc->state.leases.ids, p->rec.id);
	statefile_clear(&ad->file, p->slot);
	p->gone = true;
	ad->books->open--;
}

void redeclare_adopted(struct svc *svc, struct holder *h, uint64_t request_id, struct pending *p,
		       const struct backend_alloc *alloc, uint64_t model_id, bool fd)
{
	struct adopt *ad = svc->adopt;
	struct device *d = &svc->state.devices[p->rec.device];
	char sz[SIZE_FORMAT_MAX], who[128];
	struct statefile_record r;
	struct lease *l = calloc(1, sizeof(*l));
	struct bus_event e;

	if (!l || idtable_fill(&svc->state.leases.ids, p->rec.id, l) < 0) {
		free(l);
		if (fd)
			state_fd_release(&svc->state, h);
		if (p->rec.kind == STATEFILE_LEASE_ARENA) {
			arenafd_punch(h->arena[p->rec.device]->fd, p->rec.ino, p->rec.size);
			arena_give(h->arena[p->rec.device], p->rec.ino, p->rec.size);
		}
		/* The memory goes back as for a release; the record with it. */
		settled(svc, p, alloc);
		svc_reply_error(svc, h->id, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	l->id = p->rec.id;
	l->device = d->index;
	l->size = p->rec.size;
	l->alloc = *alloc;
	if (p->rec.kind == STATEFILE_LEASE_ARENA) {
		/* Its range, claimed by the caller: arena id and offset are on record. */
		l->arena = h->arena[p->rec.device];
		l->offset = p->rec.ino;
	}
	snprintf(l->tag, sizeof(l->tag), "%.*s", (int)ROCMMEM_NAME_MAX, p->rec.tag);
	state_lease_link(&svc->state, h, l, model_id, svc_now(svc));
	device_hold_to_lease(d, l->size);
	/* The record carries on for this lease: its model may have a new id. */
	l->state_slot = p->slot;
	adopt_lease_record(l, &r);
	r.kind = p->rec.kind;
	r.nchunks = p->rec.nchunks;
	r.ino_dev = p->rec.ino_dev;
	r.ino = p->rec.ino;
	statefile_update(&ad->file, l->state_slot, &r);
	p->gone = true;
	ad->books->open--;
	svc_lease_event(&e, l, BUS_LEASE_GRANTED);
	e.flags = BUS_ADOPTED; /* not a grant: not counted as one */
	bus_emitf(&svc->bus, &e, LOG_LEVEL_INFO,
		  "took over lease %" PRIu64 " (%s on device %u, %s%s%s) re-declared by %s", l->id,
		  size_format(l->size, sz, sizeof(sz)), d->index, adopt_kind_name(p->rec.kind),
		  l->tag[0] ? ", tag " : "", l->tag, holder_label(h, who, sizeof(who)));
	svc_reply_ok(svc, h->id, request_id);
}

static void adopt_job_done(struct job *job)
{
	struct adopt_job *j = (struct adopt_job *)job;
	struct svc *svc = j->svc;
	struct adopt *ad = svc->adopt;
	struct holder *h = state_holder_find(&svc->state, j->holder);
	struct pending *p = ad ? pending_find(&ad->books->leases, j->lease_id) : NULL;

	if (h)
		h->jobs--;
	if (job->err == -ECANCELED)
		backend_alloc_close_fds(&job->alloc);
	if (p)
		p->adopting = false;
	/* Every outcome but a lease taken over gives back what was counted for it. */
	if (j->fd && (!p || p->gone || job->err || !h || svc->cfg.stopping))
		state_fd_release(&svc->state, h);
	if (!p || p->gone) {
		/* Cannot happen (nothing else settles a record while it is being imported): the
		 * memory goes back all the same, accounted for as long as that takes. */
		if (!job->err) {
			device_hold(&svc->state.devices[job->device], job->alloc.size);
			device_hold_to_lease(&svc->state.devices[job->device], job->alloc.size);
			svc_free_allocation(svc, job->device, &job->alloc);
		}
	} else if (job->err) {
		if (h)
			redeclare_refuse(svc, h, j->request_id, -EPERM,
					 "lease %" PRIu64 " could not be imported as recorded: %s",
					 p->rec.id, job->why[0] ? job->why : strerror(-job->err));
		if (ad->books->grace_over)
			adopt_forget(ad, p, true,
				     "its re-declaration failed after the grace period");
	} else if (!h || svc->cfg.stopping) {
		/* Its holder went away meanwhile: the memory goes back like any lease's. */
		settled(svc, p, &job->alloc);
	} else {
		redeclare_adopted(svc, h, j->request_id, p, &job->alloc, j->model_id, j->fd);
	}
	free(j);
	svc->pump(svc);
}

/* close_fds closes what a re-declaration carried that is not taken over. */
static void close_fds(int *fds, unsigned nfds)
{
	for (unsigned i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* checked_lease checks a lease re-declaration before it is imported (false: refused). */
static struct pending *checked_lease(struct svc *svc, struct holder *h, uint64_t request_id,
				     const struct svc_lease_redeclare *req, int *fds, unsigned nfds)
{
	struct pending *p;
	struct memfd_id want;
	char why[256];
	int err;

	if (svc->cfg.stopping) {
		svc_reply_error(svc, h->id, request_id, -ESHUTDOWN,
				"the daemon is stopping: it only takes releases now");
		return NULL;
	}
	if (!req->complete || req->device >= svc->state.ndevices) {
		svc_reply_error(svc, h->id, request_id, -EINVAL,
				"a lease re-declaration names its id, device, size and kind, with "
				"its fd(s) attached and counted");
		return NULL;
	}
	if (req->handle_kind != BACKEND_HANDLE_MEMFD && req->handle_kind != BACKEND_HANDLE_VMM_FD) {
		redeclare_refuse(svc, h, request_id, -ESTALE,
				 "lease %" PRIu64
				 ": only memfd and VMM memory outlives the daemon that "
				 "allocated it",
				 req->lease_id);
		return NULL;
	}
	if (h->lease_count + h->jobs >= svc->cfg.limits.max_leases) {
		svc_reply_error(svc, h->id, request_id, -EDQUOT,
				"this connection already holds %u leases, the most allowed",
				svc->cfg.limits.max_leases);
		return NULL;
	}
	p = redeclare_lease_pending(svc, h, request_id, req, nfds);
	if (!p || p->rec.kind != STATEFILE_LEASE_MEMFD)
		return p;
	want = (struct memfd_id){.dev = p->rec.ino_dev, .ino = p->rec.ino, .size = p->rec.size};
	err = memfd_matches(&want, fds[0], why, sizeof(why));
	if (err) {
		redeclare_refuse(svc, h, request_id, err, "lease %" PRIu64 ": %s", p->rec.id, why);
		return NULL;
	}
	return p;
}

/* import_job fills j to import the re-declared memory of p from fds. */
static void import_job(struct svc *svc, struct adopt_job *j, const struct pending *p,
		       const struct svc_lease_redeclare *req, int *fds, unsigned nfds)
{
	j->svc = svc;
	j->lease_id = p->rec.id;
	j->model_id = req->model_id;
	j->job.kind = JOB_ADOPT;
	j->job.backend = svc->backend;
	j->job.device = p->rec.device;
	j->job.size = p->rec.size;
	j->job.alloc.handle_kind = req->handle_kind;
	j->job.alloc.size = p->rec.size;
	j->job.alloc.nchunks = p->rec.kind == STATEFILE_LEASE_VMM ? nfds : 0;
	for (unsigned i = 0; i < nfds; i++) {
		j->job.alloc.fds[i] = fds[i];
		if (p->rec.kind == STATEFILE_LEASE_VMM)
			j->job.alloc.chunk_sizes[i] = req->chunk_sizes[i];
	}
	j->job.alloc.nfds = nfds;
	j->job.done = adopt_job_done;
}

void svc_lease_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_lease_redeclare *req, int *fds, unsigned nfds)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct adopt_job *j;
	struct pending *p;
	bool fd;

	p = h ? checked_lease(svc, h, request_id, req, fds, nfds) : NULL;
	if (!p)
		goto close;
	/* A memfd taken over is kept like a granted one: it counts against the fd limit. */
	fd = device_keeps_fds(&svc->state.devices[p->rec.device]);
	if (fd) {
		policy_fd_admit(&svc->state, &svc->cfg, h, &d);
		if (d.verdict == POLICY_REFUSE) {
			svc_refuse(svc, h->id, request_id, &d, 0);
			goto close;
		}
		state_fd_take(&svc->state, h);
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		if (fd)
			state_fd_release(&svc->state, h);
		svc_reply_error(svc, h->id, request_id, -ENOMEM, "the daemon is out of memory");
		goto close;
	}
	j->fd = fd;
	j->holder = h->id;
	j->request_id = request_id;
	import_job(svc, j, p, req, fds, nfds);
	p->adopting = true;
	h->jobs++;
	if (svc->runner.submit(svc->runner.ctx, &j->job) < 0) {
		p->adopting = false;
		if (fd)
			state_fd_release(&svc->state, h);
		svc_reply_error(svc, h->id, request_id, -EAGAIN, "Could not queue the import");
		h->jobs--;
		free(j);
		goto close;
	}
	return;
close:
	close_fds(fds, nfds);
}

/*
 * model_id_for picks the id a re-declared model gets back (0: a fresh one), and the record of
 * its reservation if this process's (*matched).
 */
static uint64_t model_id_for(struct svc *svc, const struct holder *h,
			     const struct svc_model_redeclare *req, struct pending **rec,
			     bool *matched)
{
	struct adopt *ad = svc->adopt;
	uint64_t prev = req->previous_id;
	struct pending *p = ad && prev ? pending_find(&ad->books->models, prev) : NULL;

	*rec = p;
	*matched = p && !p->gone && p->rec.uid == (uint32_t)h->who.uid &&
		   p->rec.pid == (int32_t)h->who.pid && p->rec.device == req->device &&
		   strcmp(p->rec.tag, req->name) == 0;
	/*
	 * Its old id only when the state file backs it: its own record, or, for a model that had
	 * no reservation (and so no record), an id an earlier daemon handed out that no record
	 * and no model holds. Any other id (0, one never issued, another's) is not the client's
	 * to pick: it gets a fresh one, which librocmmem maps.
	 */
	if (*matched || (ad && prev && prev < ad->issued_model_ids && !(p && !p->gone) &&
			 !state_model_find(&svc->state, prev)))
		return prev;
	return 0;
}

/* take_reservation gives m back what it re-declares it reserved: on record, or if it fits. */
static void take_reservation(struct svc *svc, struct model *m, struct pending *p, bool matched,
			     const struct svc_model_redeclare *req, char *note, size_t len)
{
	struct device *d = &svc->state.devices[m->device];
	char sz[SIZE_FORMAT_MAX];
	uint64_t wanted = 0;

	if (req->has_reservation && req->reservation > 0 &&
	    size_round_up(req->reservation, d->granule, &wanted) < 0)
		wanted = d->budget + 1; /* absurd: refused below */
	if (matched) {
		/* Taken over: the record's bytes become the model's reservation, as re-declared
		 * (never more than recorded). */
		uint64_t kept = wanted < p->rec.size ? wanted : p->rec.size;

		device_unreserve(d, p->rec.size - kept);
		m->reservation = kept;
		m->state_slot = p->slot;
		p->gone = true;
		svc->adopt->books->open--;
		if (wanted > kept)
			snprintf(note, len, "model '%s': only %s of its reservation were on record",
				 m->name, size_format(kept, sz, sizeof(sz)));
	} else if (wanted > 0) {
		/* No record: accounted again only if it fits now, like an acquire that does not
		 * wait; else its owner must unload it. */
		if (device_fits(d, wanted)) {
			device_reserve(d, wanted);
			m->reservation = wanted;
		} else {
			snprintf(note, len,
				 "model '%s': no record of its %s reservation, and it does not fit "
				 "now: unload it",
				 m->name, size_format(wanted, sz, sizeof(sz)));
		}
	}
}

void svc_model_redeclare(struct svc *svc, uint64_t holder, uint64_t request_id,
			 const struct svc_model_redeclare *req)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct svc_model_desc desc = {.device = req->device,
				      .name = req->name,
				      .model_class =
					  req->has_class ? (unsigned)req->model_class : 0,
				      .has_size = req->has_size,
				      .size = req->size,
				      .priority = req->priority,
				      .pinned = req->pinned};
	struct svc_reply r = {.kind = SVC_MODEL, .has_reservation = true};
	char note[256] = "", sz[SIZE_FORMAT_MAX], who[128];
	struct pending *p;
	struct model *m;
	bool matched;
	uint64_t want;

	if (!h)
		return;
	if (svc->cfg.stopping) {
		svc_reply_error(svc, holder, request_id, -ESHUTDOWN,
				"the daemon is stopping: it only takes releases now");
		return;
	}
	if (req->device >= svc->state.ndevices || !req->name || !req->name[0] ||
	    !text_is_clean(req->name, ROCMMEM_NAME_MAX) ||
	    (req->has_class && (unsigned)req->model_class >= MODEL_CLASSES)) {
		svc_reply_error(svc, holder, request_id, -EINVAL,
				"a model re-declaration names an existing device, a clean name of "
				"at most %u bytes and a known class",
				ROCMMEM_NAME_MAX);
		return;
	}
	want = model_id_for(svc, h, req, &p, &matched);
	m = svc_model_create(svc, h, request_id, &desc, want);
	if (!m)
		return;
	take_reservation(svc, m, p, matched, req, note, sizeof(note));
	adopt_model_changed(svc, m); /* its record, under this id and process (none if 0) */
	m->use_count = req->use_count;
	/* In use across the restart: its maximum hold is armed again, counted from now (the
	 * previous daemon's start of use is on no record). */
	if (m->use_count > 0)
		svc_hold_start(svc, m);
	/* Its residency goes on: the owner compares generations across the restart. */
	if (req->has_generation && req->generation > 0 && req->generation <= MODEL_GENERATION_MAX)
		m->generation = req->generation;
	if (note[0])
		log_warn("%s", note);
	log_info("%s re-declared model %" PRIu64 " '%s' (was %" PRIu64 ", %s reserved, %u in use)",
		 holder_label(h, who, sizeof(who)), m->id, m->name, req->previous_id,
		 size_format(m->reservation, sz, sizeof(sz)), m->use_count);
	r.model = m;
	r.message = note[0] ? note : NULL;
	svc_reply(svc, holder, request_id, &r);
	svc->pump(svc);
}

void svc_redeclare_done(struct svc *svc, uint64_t holder, uint64_t request_id)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct adopt *ad = svc->adopt;
	unsigned forgotten = 0;

	if (!h)
		return;
	for (int k = 0; ad && k < 2; k++) {
		struct pending_set *set = k == 0 ? &ad->books->leases : &ad->books->models;

		for (size_t i = 0; i < set->n; i++) {
			struct pending *p = &set->v[i];

			/* What this very process held and did not re-declare, it let go of while
			 * the daemon was away. */
			if (p->gone || p->adopting || p->rec.uid != (uint32_t)h->who.uid ||
			    p->rec.pid != (int32_t)h->who.pid)
				continue;
			adopt_forget(ad, p, k == 0, "its holder did not re-declare it");
			forgotten++;
		}
	}
	if (ad && ad->books->open == 0 && ad->books->grace_slot) {
		state_deadline_clear(&svc->state, &ad->books->grace_slot);
		svc_due_changed(svc);
	}
	/* What it did not re-declare of its arenas holds nothing any more. */
	adopt_arenas_forget(svc, (int32_t)h->who.pid);
	svc_arenas_settle(h);
	log_debug("connection %" PRIu64 " re-declared what it holds; %u record(s) forgotten",
		  holder, forgotten);
	svc_reply_ok(svc, holder, request_id);
	if (forgotten)
		svc->pump(svc);
}
