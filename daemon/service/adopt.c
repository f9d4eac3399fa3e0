/* SPDX-License-Identifier: MIT */
/*
 * adopt.c: surviving a restart. Every live lease and model reservation is recorded in the
 * state file as it is granted; a daemon that starts after one that died reads the records,
 * accounts their memory at once (its holders still have it) and takes over each lease or
 * reservation only when its holder re-declares it with evidence that matches the record:
 * same id, owner uid and pid, device and size, and for a host lease the very memfd (inode,
 * size, seals); for GPU memory an import of the fds at the recorded chunk sizes. What is not
 * re-declared within the grace period is forgotten.
 */
#include "adopt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "platform/memfd.h"
#include "reply.h"
#include "size.h"
#include "state/arena.h"

int adopt_state_path(const char *explicit, const char *socket, bool activated, char *out,
		     size_t len)
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	int n;

	if (explicit && strcmp(explicit, "none") == 0)
		return 1;
	if (explicit && explicit[0])
		n = snprintf(out, len, "%s", explicit);
	else if (activated && rt && rt[0] == '/')
		/* Several directories are separated by ':': the first is the service's own. */
		n = snprintf(out, len, "%.*s/rocmmemd.state", (int)strcspn(rt, ":"), rt);
	else
		n = snprintf(out, len, "%s.state", socket);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int cmp_pending(const void *x, const void *y)
{
	const struct pending *a = x, *b = y;

	return a->rec.id < b->rec.id ? -1 : a->rec.id > b->rec.id;
}

const char *adopt_kind_name(uint8_t kind)
{
	switch (kind) {
	case STATEFILE_LEASE_MEMFD:
		return "memfd";
	case STATEFILE_LEASE_VMM:
		return "vmm-fd";
	case STATEFILE_LEASE_ARENA:
		return "arena";
	case STATEFILE_ARENA:
		return "arena's memfd";
	default:
		return "reservation";
	}
}

/* plausible says whether a record could describe memory of this daemon's devices. */
static bool plausible(const struct svc *svc, const struct statefile_record *r)
{
	const struct device *d;

	if (r->id == 0 || r->id == UINT64_MAX || r->device >= svc->state.ndevices || r->size == 0)
		return false;
	d = &svc->state.devices[r->device];
	if (r->size % d->granule != 0 || r->tag[STATEFILE_TAG_MAX - 1] != '\0')
		return false;
	switch (r->kind) {
	case STATEFILE_LEASE_MEMFD:
		return d->handle_kind == BACKEND_HANDLE_MEMFD && r->nchunks == 0;
	case STATEFILE_LEASE_VMM:
		return d->handle_kind == BACKEND_HANDLE_VMM_FD && r->nchunks >= 1 &&
		       r->nchunks <= BACKEND_MAX_CHUNKS;
	case STATEFILE_MODEL:
		return r->nchunks == 0;
	case STATEFILE_ARENA:
	case STATEFILE_LEASE_ARENA:
		return d->handle_kind == BACKEND_HANDLE_MEMFD && r->nchunks == 0;
	default:
		return false;
	}
}

void adopt_forget(struct adopt *ad, struct pending *p, bool is_lease, const char *why)
{
	struct svc *svc = ad->svc;
	struct device *d = &svc->state.devices[p->rec.device];
	char sz[SIZE_FORMAT_MAX];

	if (p->gone)
		return;
	if (is_lease) {
		device_unhold(d, p->rec.size);
		idtable_unreserve(&svc->state.leases.ids, p->rec.id);
	} else {
		device_unreserve(d, p->rec.size);
		idtable_unreserve(&svc->state.models, p->rec.id);
	}
	statefile_clear(&ad->file, p->slot);
	p->gone = true;
	ad->books->open--;
	if (why)
		log_warn("forgot %s %" PRIu64 " (%s%s%s on device %u) of pid %d uid %u: %s",
			 is_lease ? "lease" : "the reservation of model", p->rec.id,
			 size_format(p->rec.size, sz, sizeof(sz)), is_lease ? ", " : "",
			 is_lease ? adopt_kind_name(p->rec.kind) : "", p->rec.device,
			 (int)p->rec.pid, (unsigned)p->rec.uid, why);
}

void adopt_grace_over(struct svc *svc)
{
	struct adopt *ad = svc->adopt;
	char why[96];

	if (!ad)
		return;
	ad->books->grace_slot = 0; /* taken off already */
	ad->books->grace_over = true;
	adopt_arenas_forget(svc, -1);
	snprintf(why, sizeof(why), "not re-declared within %.3g s of the start",
		 (double)ad->grace_ms / 1000.0);
	for (size_t i = 0; i < ad->books->leases.n; i++)
		if (!ad->books->leases.v[i].adopting)
			adopt_forget(ad, &ad->books->leases.v[i], true, why);
	for (size_t i = 0; i < ad->books->models.n; i++)
		if (!ad->books->models.v[i].adopting)
			adopt_forget(ad, &ad->books->models.v[i], false, why);
	ad->svc->pump(ad->svc);
}

/* load_sets makes room for n records in each set. Returns 0 or -ENOMEM. */
static int load_sets(struct adoption *b, size_t n)
{
	b->leases.v = calloc(n, sizeof(struct pending));
	b->models.v = calloc(n, sizeof(struct pending));
	b->arenas.v = calloc(n, sizeof(struct pending));
	return b->leases.v && b->models.v && b->arenas.v ? 0 : -ENOMEM;
}

/* load takes over the records of the previous daemon; returns how many were plausible. */
static int load(struct adopt *ad)
{
	struct svc *svc = ad->svc;
	uint32_t cap = statefile_capacity(&ad->file), bad = 0;
	uint64_t held[BACKEND_MAX_DEVICES] = {0};
	int err;

	if (load_sets(ad->books, ad->file.loaded ? ad->file.loaded : 1) < 0)
		return -ENOMEM;
	for (uint32_t slot = 0; slot < cap; slot++) {
		const struct statefile_record *r = statefile_get(&ad->file, slot);
		struct pending_set *set;

		if (!r)
			continue;
		if (!plausible(svc, r)) {
			statefile_clear(&ad->file, slot + 1);
			bad++;
			continue;
		}
		set = r->kind == STATEFILE_MODEL   ? &ad->books->models
		      : r->kind == STATEFILE_ARENA ? &ad->books->arenas
						   : &ad->books->leases;
		set->v[set->n].rec = *r;
		set->v[set->n].slot = slot + 1;
		set->n++;
	}
	if (bad)
		log_warn("state file %s: dropped %u record(s) that fit no device of this daemon",
			 ad->file.path, bad);
	for (int k = 0; k < 2; k++) {
		struct pending_set *set = k == 0 ? &ad->books->leases : &ad->books->models;
		struct idtable *ids = k == 0 ? &svc->state.leases.ids : &svc->state.models;
		size_t out = 0;

		qsort(set->v, set->n, sizeof(*set->v), cmp_pending);
		for (size_t i = 0; i < set->n; i++) {
			struct pending *p = &set->v[i];

			/* Two records of one id: neither can be told from the other, keep none. */
			if ((i > 0 && set->v[i - 1].rec.id == p->rec.id) ||
			    (i + 1 < set->n && set->v[i + 1].rec.id == p->rec.id)) {
				statefile_clear(&ad->file, p->slot);
				continue;
			}
			err = idtable_reserve(ids, p->rec.id);
			if (err == -ENOMEM)
				return err;
			if (err) { /* cannot be: plausible ids, sorted, each once */
				statefile_clear(&ad->file, p->slot);
				continue;
			}
			if (k == 0)
				device_hold(&svc->state.devices[p->rec.device], p->rec.size);
			else
				device_hold_reserved(&svc->state.devices[p->rec.device],
						     p->rec.size);
			held[p->rec.device] += p->rec.size;
			set->v[out++] = *p;
		}
		set->n = out;
		ad->books->open += out;
	}
	/* Ids go on from where the previous daemon stopped: none is ever given twice. */
	idtable_skip_to(&svc->state.leases.ids, statefile_next_lease_id(&ad->file));
	idtable_skip_to(&svc->state.models, statefile_next_model_id(&ad->file));
	statefile_set_next_lease_id(&ad->file, svc->state.leases.ids.next_id);
	statefile_set_next_model_id(&ad->file, svc->state.models.next_id);
	ad->issued_model_ids = svc->state.models.next_id;
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		const struct device *d = &svc->state.devices[i];
		char h[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];

		if (d->leased + d->reserved > d->budget)
			log_warn("device %u: the clients of the previous daemon hold %s, over the "
				 "budget of %s: nothing is granted until enough is released",
				 i, size_format(held[i], h, sizeof(h)),
				 size_format(d->budget, b, sizeof(b)));
	}
	return 0;
}

int adopt_start(struct svc *svc, const char *path, uint64_t grace_ms)
{
	struct adopt *ad = calloc(1, sizeof(*ad));
	char why[512], sz1[SIZE_FORMAT_MAX], sz2[SIZE_FORMAT_MAX];
	uint64_t lease_bytes = 0, model_bytes = 0;
	int err;

	if (!ad)
		return -ENOMEM;
	ad->svc = svc;
	ad->books = &svc->state.adoption;
	ad->grace_ms = grace_ms;
	ad->file.fd = -1;
	ad->file.dir_fd = -1;
	svc->adopt = ad;
	if (!path) {
		log_info("no state file: leases will not survive a restart of the daemon");
		return 0;
	}
	err = statefile_open(&ad->file, path, why, sizeof(why));
	if (err) {
		log_error(
		    "Could not use the state file %s: %s; leases granted now will not survive "
		    "a restart of the daemon",
		    path, why);
		return 0;
	}
	ad->have_file = true;
	if (ad->file.discarded[0])
		log_warn("state file %s: %s: what it held was discarded", path, ad->file.discarded);
	if (ad->file.damaged)
		log_warn("state file %s: dropped %u damaged record(s)", path, ad->file.damaged);
	err = load(ad);
	if (err)
		return err;
	if (ad->books->open == 0) {
		log_debug("state file %s: nothing to take over", path);
		return 0;
	}
	for (size_t i = 0; i < ad->books->leases.n; i++)
		lease_bytes += ad->books->leases.v[i].rec.size;
	for (size_t i = 0; i < ad->books->models.n; i++)
		model_bytes += ad->books->models.v[i].rec.size;
	log_info("state file %s: the previous daemon left %zu lease(s) (%s) and %zu model "
		 "reservation(s) (%s), accounted until re-declared or %.3g s pass",
		 path, ad->books->leases.n, size_format(lease_bytes, sz1, sizeof(sz1)),
		 ad->books->models.n, size_format(model_bytes, sz2, sizeof(sz2)),
		 (double)grace_ms / 1000.0);
	if (state_deadline_set(&svc->state, DUE_GRACE, 0, svc_now(svc) + grace_ms,
			       &ad->books->grace_slot) < 0)
		return -ENOMEM;
	svc_due_changed(svc);
	return 0;
}

void adopt_finish(struct svc *svc, bool clean)
{
	struct adopt *ad = svc->adopt;

	if (!ad)
		return;
	for (size_t i = 0; i < ad->books->leases.n; i++)
		adopt_forget(ad, &ad->books->leases.v[i], true, NULL);
	for (size_t i = 0; i < ad->books->models.n; i++)
		adopt_forget(ad, &ad->books->models.v[i], false, NULL);
	state_deadline_clear(&svc->state, &ad->books->grace_slot);
	if (ad->have_file)
		statefile_close(&ad->file, clean);
	adopt_arenas_forget(svc, -1);
	free(ad->books->leases.v);
	free(ad->books->models.v);
	free(ad->books->arenas.v);
	memset(ad->books, 0, sizeof(*ad->books));
	free(ad);
	svc->adopt = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Keeping the records current */

bool adopt_recording(const struct svc *svc)
{
	return svc->adopt && svc->adopt->have_file;
}

static void note_full(struct adopt *ad)
{
	if (ad->why_full[0]) {
		log_warn("%s: leases granted from now on will not survive a restart of the daemon",
			 ad->why_full);
		ad->why_full[0] = '\0';
	}
}

void adopt_lease_record(const struct lease *l, struct statefile_record *r)
{
	memset(r, 0, sizeof(*r));
	r->id = l->id;
	r->device = (uint16_t)l->device;
	r->size = l->size;
	r->uid = (uint32_t)l->owner->who.uid;
	r->pid = (int32_t)l->owner->who.pid;
	r->model_id = l->model ? l->model->id : 0;
	statefile_tag(r, l->tag);
}

void adopt_lease_granted(struct svc *svc, struct lease *l)
{
	struct adopt *ad = svc->adopt;
	struct statefile_record r;
	struct memfd_id id;

	if (!adopt_recording(svc))
		return;
	statefile_set_next_lease_id(&ad->file, svc->state.leases.ids.next_id);
	adopt_lease_record(l, &r);
	switch (l->alloc.handle_kind) {
	case BACKEND_HANDLE_ARENA:
		r.kind = STATEFILE_LEASE_ARENA;
		r.ino_dev = l->arena->id;
		r.ino = l->offset;
		break;
	case BACKEND_HANDLE_MEMFD:
		/* The memfd's identity: what only its holder can show again. */
		if (l->alloc.nfds != 1 || memfd_identify(l->alloc.fds[0], &id) < 0)
			return;
		r.kind = STATEFILE_LEASE_MEMFD;
		r.ino_dev = id.dev;
		r.ino = id.ino;
		break;
	case BACKEND_HANDLE_VMM_FD:
		r.kind = STATEFILE_LEASE_VMM;
		r.nchunks = (uint8_t)l->alloc.nchunks;
		break;
	default:
		return; /* dma-buf and IPC memory is the daemon's own allocation: it dies with it */
	}
	l->state_slot = statefile_add(&ad->file, &r, ad->why_full, sizeof(ad->why_full));
	if (!l->state_slot)
		note_full(ad);
}

void adopt_lease_gone(struct svc *svc, struct lease *l)
{
	if (!adopt_recording(svc) || !l->state_slot)
		return;
	statefile_clear(&svc->adopt->file, l->state_slot);
	l->state_slot = 0;
}

void adopt_model_registered(struct svc *svc)
{
	if (adopt_recording(svc))
		statefile_set_next_model_id(&svc->adopt->file, svc->state.models.next_id);
}

void adopt_model_changed(struct svc *svc, struct model *m)
{
	struct adopt *ad = svc->adopt;
	struct statefile_record r;

	if (!adopt_recording(svc))
		return;
	if (m->reservation == 0) {
		statefile_clear(&ad->file, m->state_slot);
		m->state_slot = 0;
		return;
	}
	memset(&r, 0, sizeof(r));
	r.kind = STATEFILE_MODEL;
	r.id = m->id;
	r.device = (uint16_t)m->device;
	r.size = m->reservation;
	r.uid = (uint32_t)m->owner->who.uid;
	r.pid = (int32_t)m->owner->who.pid;
	statefile_tag(&r, m->name);
	if (m->state_slot) {
		statefile_update(&ad->file, m->state_slot, &r);
	} else {
		m->state_slot = statefile_add(&ad->file, &r, ad->why_full, sizeof(ad->why_full));
		if (!m->state_slot)
			note_full(ad);
	}
}

void adopt_arena_made(struct svc *svc, struct holder *h, struct arena *a)
{
	struct adopt *ad = svc->adopt;
	struct statefile_record r;

	if (!adopt_recording(svc))
		return;
	memset(&r, 0, sizeof(r));
	r.kind = STATEFILE_ARENA;
	r.id = a->id;
	r.device = (uint16_t)a->device;
	r.size = a->size;
	r.ino_dev = a->ino_dev;
	r.ino = a->ino;
	r.uid = (uint32_t)h->who.uid;
	r.pid = (int32_t)h->who.pid;
	a->state_slot = statefile_add(&ad->file, &r, ad->why_full, sizeof(ad->why_full));
	if (!a->state_slot)
		note_full(ad);
}

void adopt_arena_gone(struct svc *svc, struct arena *a)
{
	if (!adopt_recording(svc) || !a->state_slot)
		return;
	statefile_clear(&svc->adopt->file, a->state_slot);
	a->state_slot = 0;
}

struct pending *adopt_arena_pending(struct svc *svc, uint64_t id)
{
	struct adopt *ad = svc->adopt;

	if (!ad)
		return NULL;
	/* A handful at most (one per process and device): a walk is enough. */
	for (size_t i = 0; i < ad->books->arenas.n; i++) {
		struct pending *p = &ad->books->arenas.v[i];

		if (!p->gone && p->rec.id == id)
			return p;
	}
	return NULL;
}

void adopt_arenas_forget(struct svc *svc, int32_t pid)
{
	struct adopt *ad = svc->adopt;

	for (size_t i = 0; ad && i < ad->books->arenas.n; i++) {
		struct pending *p = &ad->books->arenas.v[i];

		if (p->gone || (pid >= 0 && p->rec.pid != pid))
			continue;
		statefile_clear(&ad->file, p->slot);
		p->gone = true;
	}
}
