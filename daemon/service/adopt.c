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
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "policy/arbiter.h"
#include "net/client.h"
#include "bus.h"
#include "platform/job.h"
#include "state/lease.h"
#include "base/log.h"
#include "state/model.h"
#include "policy/residency.h"
#include "net/server.h"
#include "size.h"
#include "platform/statefile.h"
#include "text.h"

#define HOST_SEALS (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

/* A record of the previous daemon, waiting for its holder. */
struct pending {
	struct statefile_record rec;
	uint32_t slot; /* the record's handle in the file */
	bool adopting; /* a backend job is importing it */
	bool gone;     /* adopted or forgotten */
};

struct pending_set {
	struct pending *v; /* sorted by id */
	size_t n;
};

struct adopt {
	struct arbiter *arbiter;
	struct statefile file;
	bool have_file;
	uint64_t grace_ms;
	uint32_t grace_slot; /* the grace period's end in state.deadlines, 0: none */
	bool grace_over;
	struct pending_set leases, models;
	size_t open;		   /* pending records not adopted or forgotten yet */
	uint64_t issued_model_ids; /* model ids below it were handed out by an earlier daemon */
	char why_full[256];
};

/* A re-declared lease being imported by the backend. */
struct adopt_job {
	struct job job;
	struct arbiter *arbiter;
	uint64_t holder; /* found again when done: it may have left meanwhile */
	uint64_t request_id;
	uint64_t lease_id;
	uint64_t model_id;
	bool fd; /* counted by quota_fd_admit until it is a lease (or is not taken over) */
};

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

static struct pending *find(const struct pending_set *set, uint64_t id)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set->v[mid].rec.id < id)
			lo = mid + 1;
		else if (set->v[mid].rec.id > id)
			hi = mid;
		else
			return &set->v[mid];
	}
	return NULL;
}

static const char *kind_name(uint8_t kind)
{
	switch (kind) {
	case STATEFILE_LEASE_MEMFD:
		return "memfd";
	case STATEFILE_LEASE_VMM:
		return "vmm-fd";
	default:
		return "reservation";
	}
}

/* plausible says whether a record could describe memory of this daemon's devices. */
static bool plausible(const struct arbiter *a, const struct statefile_record *r)
{
	const struct device *d;

	if (r->id == 0 || r->id == UINT64_MAX || r->device >= a->state.ndevices || r->size == 0)
		return false;
	d = &a->state.devices[r->device];
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
	default:
		return false;
	}
}

/* forget drops a pending record: its bytes, its reserved id and the record itself. */
static void forget(struct adopt *ad, struct pending *p, bool is_lease, const char *why)
{
	struct arbiter *a = ad->arbiter;
	struct device *d = &a->state.devices[p->rec.device];
	char sz[SIZE_FORMAT_MAX];

	if (p->gone)
		return;
	if (is_lease) {
		device_unhold(d, p->rec.size);
		idtable_unreserve(&a->state.leases.ids, p->rec.id);
	} else {
		device_unreserve(d, p->rec.size);
		idtable_unreserve(&a->state.models, p->rec.id);
	}
	statefile_clear(&ad->file, p->slot);
	p->gone = true;
	ad->open--;
	if (why)
		log_warn("forgot %s %" PRIu64 " (%s%s%s on device %u) of pid %d uid %u: %s",
			 is_lease ? "lease" : "the reservation of model", p->rec.id,
			 size_format(p->rec.size, sz, sizeof(sz)), is_lease ? ", " : "",
			 is_lease ? kind_name(p->rec.kind) : "", p->rec.device, (int)p->rec.pid,
			 (unsigned)p->rec.uid, why);
}

void adopt_grace_over(struct arbiter *a)
{
	struct adopt *ad = a->adopt;
	char why[96];

	if (!ad)
		return;
	ad->grace_slot = 0; /* taken off already */
	ad->grace_over = true;
	snprintf(why, sizeof(why), "not re-declared within %.3g s of the start",
		 (double)ad->grace_ms / 1000.0);
	for (size_t i = 0; i < ad->leases.n; i++)
		if (!ad->leases.v[i].adopting)
			forget(ad, &ad->leases.v[i], true, why);
	for (size_t i = 0; i < ad->models.n; i++)
		if (!ad->models.v[i].adopting)
			forget(ad, &ad->models.v[i], false, why);
	arbiter_pump(ad->arbiter);
}

/* load takes over the records of the previous daemon; returns how many were plausible. */
static int load(struct adopt *ad)
{
	struct arbiter *a = ad->arbiter;
	uint32_t cap = statefile_capacity(&ad->file), bad = 0;
	uint64_t held[BACKEND_MAX_DEVICES] = {0};
	int err;

	ad->leases.v = calloc(ad->file.loaded ? ad->file.loaded : 1, sizeof(struct pending));
	ad->models.v = calloc(ad->file.loaded ? ad->file.loaded : 1, sizeof(struct pending));
	if (!ad->leases.v || !ad->models.v)
		return -ENOMEM;
	for (uint32_t slot = 0; slot < cap; slot++) {
		const struct statefile_record *r = statefile_get(&ad->file, slot);
		struct pending_set *set;

		if (!r)
			continue;
		if (!plausible(a, r)) {
			statefile_clear(&ad->file, slot + 1);
			bad++;
			continue;
		}
		set = r->kind == STATEFILE_MODEL ? &ad->models : &ad->leases;
		set->v[set->n].rec = *r;
		set->v[set->n].slot = slot + 1;
		set->n++;
	}
	if (bad)
		log_warn("state file %s: dropped %u record(s) that fit no device of this daemon",
			 ad->file.path, bad);
	for (int k = 0; k < 2; k++) {
		struct pending_set *set = k == 0 ? &ad->leases : &ad->models;
		struct idtable *ids = k == 0 ? &a->state.leases.ids : &a->state.models;
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
				device_hold(&a->state.devices[p->rec.device], p->rec.size);
			else
				device_hold_reserved(&a->state.devices[p->rec.device], p->rec.size);
			held[p->rec.device] += p->rec.size;
			set->v[out++] = *p;
		}
		set->n = out;
		ad->open += out;
	}
	/* Ids go on from where the previous daemon stopped: none is ever given twice. */
	idtable_skip_to(&a->state.leases.ids, statefile_next_lease_id(&ad->file));
	idtable_skip_to(&a->state.models, statefile_next_model_id(&ad->file));
	statefile_set_next_lease_id(&ad->file, a->state.leases.ids.next_id);
	statefile_set_next_model_id(&ad->file, a->state.models.next_id);
	ad->issued_model_ids = a->state.models.next_id;
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		const struct device *d = &a->state.devices[i];
		char h[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX];

		if (d->leased + d->reserved > d->budget)
			log_warn("device %u: the clients of the previous daemon hold %s, over the "
				 "budget of %s: nothing is granted until enough is released",
				 i, size_format(held[i], h, sizeof(h)),
				 size_format(d->budget, b, sizeof(b)));
	}
	return 0;
}

int adopt_start(struct arbiter *a, const char *path, uint64_t grace_ms)
{
	struct adopt *ad = calloc(1, sizeof(*ad));
	char why[512], sz1[SIZE_FORMAT_MAX], sz2[SIZE_FORMAT_MAX];
	uint64_t lease_bytes = 0, model_bytes = 0;
	int err;

	if (!ad)
		return -ENOMEM;
	ad->arbiter = a;
	ad->grace_ms = grace_ms;
	ad->file.fd = -1;
	ad->file.dir_fd = -1;
	a->adopt = ad;
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
	if (ad->open == 0) {
		log_debug("state file %s: nothing to take over", path);
		return 0;
	}
	for (size_t i = 0; i < ad->leases.n; i++)
		lease_bytes += ad->leases.v[i].rec.size;
	for (size_t i = 0; i < ad->models.n; i++)
		model_bytes += ad->models.v[i].rec.size;
	log_info("state file %s: the previous daemon left %zu lease(s) (%s) and %zu model "
		 "reservation(s) (%s), accounted until re-declared or %.3g s pass",
		 path, ad->leases.n, size_format(lease_bytes, sz1, sizeof(sz1)), ad->models.n,
		 size_format(model_bytes, sz2, sizeof(sz2)), (double)grace_ms / 1000.0);
	if (state_deadline_set(&a->state, DUE_GRACE, 0, uv_now(a->loop) + grace_ms,
			       &ad->grace_slot) < 0)
		return -ENOMEM;
	arbiter_deadlines_changed(a);
	return 0;
}

void adopt_finish(struct arbiter *a, bool clean)
{
	struct adopt *ad = a->adopt;

	if (!ad)
		return;
	for (size_t i = 0; i < ad->leases.n; i++)
		forget(ad, &ad->leases.v[i], true, NULL);
	for (size_t i = 0; i < ad->models.n; i++)
		forget(ad, &ad->models.v[i], false, NULL);
	state_deadline_clear(&a->state, &ad->grace_slot);
	if (ad->have_file)
		statefile_close(&ad->file, clean);
	free(ad->leases.v);
	free(ad->models.v);
	free(ad);
	a->adopt = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Keeping the records current */

static bool recording(const struct arbiter *a)
{
	return a->adopt && a->adopt->have_file;
}

static void note_full(struct adopt *ad)
{
	if (ad->why_full[0]) {
		log_warn("%s: leases granted from now on will not survive a restart of the daemon",
			 ad->why_full);
		ad->why_full[0] = '\0';
	}
}

static void lease_record(const struct lease *l, struct statefile_record *r)
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

void adopt_lease_granted(struct arbiter *a, struct lease *l)
{
	struct adopt *ad = a->adopt;
	struct statefile_record r;
	struct stat st;

	if (!recording(a))
		return;
	statefile_set_next_lease_id(&ad->file, a->state.leases.ids.next_id);
	lease_record(l, &r);
	switch (l->alloc.handle_kind) {
	case BACKEND_HANDLE_MEMFD:
		/* The memfd's identity: what only its holder can show again. */
		if (l->alloc.nfds != 1 || fstat(l->alloc.fds[0], &st) < 0)
			return;
		r.kind = STATEFILE_LEASE_MEMFD;
		r.ino_dev = (uint64_t)st.st_dev;
		r.ino = (uint64_t)st.st_ino;
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

void adopt_lease_gone(struct arbiter *a, struct lease *l)
{
	if (!recording(a) || !l->state_slot)
		return;
	statefile_clear(&a->adopt->file, l->state_slot);
	l->state_slot = 0;
}

void adopt_model_registered(struct arbiter *a)
{
	if (recording(a))
		statefile_set_next_model_id(&a->adopt->file, a->state.models.next_id);
}

void adopt_model_changed(struct arbiter *a, struct model *m)
{
	struct adopt *ad = a->adopt;
	struct statefile_record r;

	if (!recording(a))
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

/* ------------------------------------------------------------------------------------------ */
/* Re-declarations */

static void refuse(struct client *c, uint64_t request_id, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* refuse answers a re-declaration that cannot be taken over, and says so in the log. */
static void refuse(struct client *c, uint64_t request_id, int err, const char *fmt, ...)
{
	char why[512], who[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("refused the re-declaration of %s: %s", client_label(c, who, sizeof(who)), why);
	client_reply_error(c, request_id, err, "%s", why);
}

/* lease_pending finds the record of a lease re-declared by c, refusing what does not match. */
static struct pending *lease_pending(struct arbiter *a, struct client *c, uint64_t request_id,
				     const Rocmmem__Wire__LeaseRedeclare *req, unsigned nfds)
{
	struct adopt *ad = a->adopt;
	uint64_t id = req->lease_id;
	struct pending *p;
	struct lease *live;
	char who[128];

	if (!ad || !ad->have_file) {
		refuse(c, request_id, -ESTALE,
		       "lease %" PRIu64 ": this rocmmemd keeps no record of earlier leases", id);
		return NULL;
	}
	p = find(&ad->leases, id);
	if (!p || p->gone) {
		live = lease_table_find(&a->state.leases, id);
		if (live)
			refuse(c, request_id, -ESTALE,
			       "lease %" PRIu64 " was re-declared already, by %s", id,
			       holder_label(live->owner, who, sizeof(who)));
		else
			refuse(c, request_id, -ESTALE,
			       "no record of lease %" PRIu64
			       ": never granted, released, or not re-declared in time",
			       id);
		return NULL;
	}
	if (p->adopting) {
		refuse(c, request_id, -ESTALE, "lease %" PRIu64 " is being re-declared already",
		       id);
		return NULL;
	}
	if (p->rec.uid != (uint32_t)c->holder->who.uid) {
		refuse(c, request_id, -EPERM, "lease %" PRIu64 " belongs to uid %u, not uid %u", id,
		       (unsigned)p->rec.uid, (unsigned)c->holder->who.uid);
		return NULL;
	}
	if (p->rec.pid != (int32_t)c->holder->who.pid) {
		refuse(c, request_id, -EPERM, "lease %" PRIu64 " was granted to pid %d, not pid %d",
		       id, (int)p->rec.pid, (int)c->holder->who.pid);
		return NULL;
	}
	if (req->device != p->rec.device || req->size != p->rec.size ||
	    (p->rec.kind == STATEFILE_LEASE_MEMFD) !=
		(req->handle_kind == ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD)) {
		char sz[SIZE_FORMAT_MAX];

		refuse(c, request_id, -EPERM,
		       "lease %" PRIu64 " does not match its record (%s of %s on device %u)", id,
		       size_format(p->rec.size, sz, sizeof(sz)), kind_name(p->rec.kind),
		       p->rec.device);
		return NULL;
	}
	if (p->rec.kind == STATEFILE_LEASE_VMM) {
		uint64_t plan[BACKEND_MAX_CHUNKS];

		if (nfds != p->rec.nchunks || req->n_chunk_sizes != nfds ||
		    backend_chunk_plan(p->rec.size, a->state.devices[p->rec.device].granule, nfds,
				       plan) < 0 ||
		    memcmp(plan, req->chunk_sizes, nfds * sizeof(uint64_t)) != 0) {
			refuse(c, request_id, -EPERM,
			       "lease %" PRIu64
			       " was granted as %u chunk(s), not as these %u fd(s)",
			       id, (unsigned)p->rec.nchunks, nfds);
			return NULL;
		}
	}
	return p;
}

/* memfd_matches checks that fd is the very memfd the record names, still sealed. */
static int memfd_matches(const struct statefile_record *r, int fd, char *why, size_t len)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, len, "its fd is not a memfd");
		return -EPERM;
	}
	if ((uint64_t)st.st_dev != r->ino_dev || (uint64_t)st.st_ino != r->ino) {
		snprintf(why, len, "its fd is not the memfd that was granted");
		return -EPERM;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size != r->size) {
		snprintf(why, len, "its memfd is %lld bytes, not %" PRIu64, (long long)st.st_size,
			 r->size);
		return -EPERM;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & HOST_SEALS) != HOST_SEALS) {
		snprintf(why, len, "its memfd is not sealed against growing and shrinking");
		return -EPERM;
	}
	return 0;
}

static void adopted(struct arbiter *a, struct client *c, uint64_t request_id, struct pending *p,
		    const struct backend_alloc *alloc, uint64_t model_id, bool fd)
{
	struct adopt *ad = a->adopt;
	struct device *d = &a->state.devices[p->rec.device];
	char sz[SIZE_FORMAT_MAX], who[128];
	struct statefile_record r;
	struct lease *l = calloc(1, sizeof(*l));

	if (!l || idtable_fill(&a->state.leases.ids, p->rec.id, l) < 0) {
		free(l);
		if (fd)
			quota_fd_release(a->server, c->holder);
		/* The memory goes back as for a release; the record with it. */
		device_hold_to_lease(d, p->rec.size);
		arbiter_free_allocation(a, d->index, alloc);
		idtable_unreserve(&a->state.leases.ids, p->rec.id);
		statefile_clear(&ad->file, p->slot);
		p->gone = true;
		ad->open--;
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	l->id = p->rec.id;
	l->device = d->index;
	l->size = p->rec.size;
	l->alloc = *alloc;
	snprintf(l->tag, sizeof(l->tag), "%.*s", (int)ROCMMEM_NAME_MAX, p->rec.tag);
	state_lease_link(&a->state, c->holder, l, model_id, uv_now(a->loop));
	device_hold_to_lease(d, l->size);
	/* The record carries on for this lease: its model may have a new id. */
	l->state_slot = p->slot;
	lease_record(l, &r);
	r.kind = p->rec.kind;
	r.nchunks = p->rec.nchunks;
	r.ino_dev = p->rec.ino_dev;
	r.ino = p->rec.ino;
	statefile_update(&ad->file, l->state_slot, &r);
	p->gone = true;
	ad->open--;
	{
		struct bus_event e;

		arbiter_lease_event(&e, l, BUS_LEASE_GRANTED);
		e.flags = BUS_ADOPTED; /* not a grant: not counted as one */
		bus_emitf(&a->bus, &e, LOG_LEVEL_INFO,
			  "took over lease %" PRIu64 " (%s on device %u, %s%s%s) re-declared by %s",
			  l->id, size_format(l->size, sz, sizeof(sz)), d->index,
			  kind_name(p->rec.kind), l->tag[0] ? ", tag " : "", l->tag,
			  client_label(c, who, sizeof(who)));
	}
	client_reply_ok(c, request_id);
}

static void adopt_job_done(struct job *job)
{
	struct adopt_job *j = (struct adopt_job *)job;
	struct arbiter *a = j->arbiter;
	struct adopt *ad = a->adopt;
	struct holder *h = state_holder_find(&a->state, j->holder);
	struct client *c = arbiter_conn(a, h);
	struct pending *p = ad ? find(&ad->leases, j->lease_id) : NULL;

	if (h)
		h->jobs--;
	if (job->err == -ECANCELED)
		backend_alloc_close_fds(&job->alloc);
	if (p)
		p->adopting = false;
	/* Every outcome but a lease taken over gives back what was counted for it. */
	if (j->fd && (!p || p->gone || job->err || !h || a->server->stopping))
		quota_fd_release(a->server, h);
	if (!p || p->gone) {
		/* Cannot happen (nothing else settles a record while it is being imported): the
		 * memory goes back all the same, accounted for as long as that takes. */
		if (!job->err) {
			device_hold(&a->state.devices[job->device], job->alloc.size);
			device_hold_to_lease(&a->state.devices[job->device], job->alloc.size);
			arbiter_free_allocation(a, job->device, &job->alloc);
		}
	} else if (job->err) {
		if (h)
			refuse(c, j->request_id, -EPERM,
			       "lease %" PRIu64 " could not be imported as recorded: %s", p->rec.id,
			       job->why[0] ? job->why : strerror(-job->err));
		if (ad->grace_over)
			forget(ad, p, true, "its re-declaration failed after the grace period");
	} else if (!h || a->server->stopping) {
		/* Its holder went away meanwhile: the memory goes back like any lease's. */
		device_hold_to_lease(&a->state.devices[p->rec.device], p->rec.size);
		arbiter_free_allocation(a, job->device, &job->alloc);
		idtable_unreserve(&a->state.leases.ids, p->rec.id);
		statefile_clear(&ad->file, p->slot);
		p->gone = true;
		ad->open--;
	} else {
		adopted(a, c, j->request_id, p, &job->alloc, j->model_id, j->fd);
	}
	free(j);
	arbiter_pump(a);
}

void adopt_lease_redeclare(struct arbiter *a, struct client *c, uint64_t request_id,
			   const Rocmmem__Wire__LeaseRedeclare *req, int *fds, unsigned nfds)
{
	struct adopt_job *j;
	struct pending *p;
	char why[256];
	bool fd;
	int err;

	if (a->server->stopping) {
		client_reply_error(c, request_id, -ESHUTDOWN,
				   "the daemon is stopping: it only takes releases now");
		goto close;
	}
	if (!req->has_lease_id || req->lease_id == 0 || !req->has_size || req->size == 0 ||
	    !req->has_device || req->device >= a->state.ndevices || !req->has_handle_kind ||
	    !req->has_fd_count || req->fd_count != nfds || nfds == 0 || nfds > BACKEND_MAX_CHUNKS) {
		client_reply_error(c, request_id, -EINVAL,
				   "a lease re-declaration names its id, device, size and kind, "
				   "with its fd(s) attached and counted");
		goto close;
	}
	if (req->handle_kind != ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD &&
	    req->handle_kind != ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD) {
		refuse(c, request_id, -ESTALE,
		       "lease %" PRIu64 ": only memfd and VMM memory outlives the daemon that "
		       "allocated it",
		       req->lease_id);
		goto close;
	}
	if (c->holder->lease_count + c->holder->jobs >= a->server->limits.max_leases) {
		client_reply_error(c, request_id, -EDQUOT,
				   "this connection already holds %u leases, the most allowed",
				   a->server->limits.max_leases);
		goto close;
	}
	p = lease_pending(a, c, request_id, req, nfds);
	if (!p)
		goto close;
	if (p->rec.kind == STATEFILE_LEASE_MEMFD) {
		err = memfd_matches(&p->rec, fds[0], why, sizeof(why));
		if (err) {
			refuse(c, request_id, err, "lease %" PRIu64 ": %s", p->rec.id, why);
			goto close;
		}
	}
	/* A memfd taken over is kept like a granted one: it counts against the fd limit. */
	fd = device_keeps_fds(&a->state.devices[p->rec.device]);
	if (fd && quota_fd_admit(a->server, c, request_id, true) < 0)
		goto close;
	j = calloc(1, sizeof(*j));
	if (!j) {
		if (fd)
			quota_fd_release(a->server, c->holder);
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		goto close;
	}
	j->fd = fd;
	j->arbiter = a;
	j->holder = c->id;
	j->request_id = request_id;
	j->lease_id = p->rec.id;
	j->model_id = req->has_model_id ? req->model_id : 0;
	j->job.kind = JOB_ADOPT;
	j->job.backend = a->backend;
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
	p->adopting = true;
	c->holder->jobs++;
	if (job_submit(a->loop, &j->job) < 0) {
		p->adopting = false;
		if (fd)
			quota_fd_release(a->server, c->holder);
		client_reply_error(c, request_id, -EAGAIN, "Could not queue the import");
		c->holder->jobs--;
		j->job.alloc.nfds = 0; /* still the caller's: closed below */
		free(j);
		goto close;
	}
	return;
close:
	wire_close_fds(fds, nfds);
}

void adopt_model_redeclare(struct arbiter *a, struct client *c, uint64_t request_id,
			   const Rocmmem__Wire__ModelRedeclare *req)
{
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	Rocmmem__Wire__ModelRegistered body = ROCMMEM__WIRE__MODEL_REGISTERED__INIT;
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	struct adopt *ad = a->adopt;
	unsigned dev = req->has_device ? req->device : 0;
	uint64_t prev = req->has_previous_id ? req->previous_id : 0, want = 0, wanted = 0;
	char note[256] = "", sz[SIZE_FORMAT_MAX], who[128];
	struct pending *p = NULL;
	struct device *d;
	struct model *m;
	bool matched;

	if (a->server->stopping) {
		client_reply_error(c, request_id, -ESHUTDOWN,
				   "the daemon is stopping: it only takes releases now");
		return;
	}
	if (dev >= a->state.ndevices || !req->name || !req->name[0] ||
	    !text_is_clean(req->name, ROCMMEM_NAME_MAX) ||
	    (req->has_class_ && (unsigned)req->class_ >= MODEL_CLASSES)) {
		client_reply_error(c, request_id, -EINVAL,
				   "a model re-declaration names an existing device, a clean name "
				   "of at most %u bytes and a known class",
				   ROCMMEM_NAME_MAX);
		return;
	}
	d = &a->state.devices[dev];
	if (ad && prev)
		p = find(&ad->models, prev);
	matched = p && !p->gone && p->rec.uid == (uint32_t)c->holder->who.uid &&
		  p->rec.pid == (int32_t)c->holder->who.pid && p->rec.device == dev &&
		  strcmp(p->rec.tag, req->name) == 0;
	/*
	 * Its old id only when the state file backs it: its own record, or, for a model that had
	 * no reservation (and so no record), an id an earlier daemon handed out that no record
	 * and no model holds. Any other id (0, one never issued, another's) is not the client's
	 * to pick: it gets a fresh one, which librocmmem maps.
	 */
	if (matched || (ad && prev && prev < ad->issued_model_ids && !(p && !p->gone) &&
			!residency_find(a, prev)))
		want = prev;
	reg.has_device = true;
	reg.device = dev;
	reg.name = req->name;
	reg.has_class_ = req->has_class_;
	reg.class_ = req->class_;
	reg.has_size = req->has_size;
	reg.size = req->size;
	reg.has_priority = req->has_priority;
	reg.priority = req->priority;
	reg.has_pinned = req->has_pinned;
	reg.pinned = req->pinned;
	m = residency_create(a, c, request_id, &reg, want);
	if (!m)
		return;
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
		ad->open--;
		if (wanted > kept)
			snprintf(note, sizeof(note),
				 "model '%s': only %s of its reservation were on record", m->name,
				 size_format(kept, sz, sizeof(sz)));
	} else if (wanted > 0) {
		/* No record: accounted again only if it fits now, like an acquire that does not
		 * wait; else its owner must unload it. */
		if (device_fits(d, wanted)) {
			device_reserve(d, wanted);
			m->reservation = wanted;
		} else {
			snprintf(note, sizeof(note),
				 "model '%s': no record of its %s reservation, and it does not fit "
				 "now: unload it",
				 m->name, size_format(wanted, sz, sizeof(sz)));
		}
	}
	adopt_model_changed(a, m); /* its record, under this id and process (none if 0) */
	m->use_count = req->has_use_count ? req->use_count : 0;
	/* Its residency goes on: the owner compares generations across the restart. */
	if (req->has_generation && req->generation > 0 && req->generation <= MODEL_GENERATION_MAX)
		m->generation = req->generation;
	if (note[0])
		log_warn("%s", note);
	log_info("%s re-declared model %" PRIu64 " '%s' (was %" PRIu64 ", %s reserved, %u in use)",
		 client_label(c, who, sizeof(who)), m->id, m->name, prev,
		 size_format(m->reservation, sz, sizeof(sz)), m->use_count);
	body.has_model_id = true;
	body.model_id = m->id;
	body.has_reservation = true;
	body.reservation = m->reservation;
	body.has_generation = true;
	body.generation = m->generation;
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	if (note[0])
		reply.message = note;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_MODEL;
	reply.model = &body;
	client_reply(c, &reply, NULL, 0);
	arbiter_pump(a);
}

void adopt_redeclare_done(struct arbiter *a, struct client *c, uint64_t request_id)
{
	struct adopt *ad = a->adopt;
	unsigned forgotten = 0;

	for (int k = 0; ad && k < 2; k++) {
		struct pending_set *set = k == 0 ? &ad->leases : &ad->models;

		for (size_t i = 0; i < set->n; i++) {
			struct pending *p = &set->v[i];

			/* What this very process held and did not re-declare, it let go of while
			 * the daemon was away. */
			if (p->gone || p->adopting || p->rec.uid != (uint32_t)c->holder->who.uid ||
			    p->rec.pid != (int32_t)c->holder->who.pid)
				continue;
			forget(ad, p, k == 0, "its holder did not re-declare it");
			forgotten++;
		}
	}
	if (ad && ad->open == 0 && ad->grace_slot) {
		state_deadline_clear(&a->state, &ad->grace_slot);
		arbiter_deadlines_changed(a);
	}
	log_debug("connection %" PRIu64 " re-declared what it holds; %u record(s) forgotten", c->id,
		  forgotten);
	client_reply_ok(c, request_id);
	if (forgotten)
		arbiter_pump(a);
}

/* ------------------------------------------------------------------------------------------ */
/* What awaits re-declaration (status, explanations) */

/* awaiting_add counts a pending record into its device and process's entry. */
static void awaiting_add(struct adopt_awaiting *v, size_t *n, const struct pending *p,
			 bool is_lease)
{
	struct adopt_awaiting *e = NULL;

	for (size_t i = 0; i < *n && !e; i++)
		if (v[i].device == p->rec.device && v[i].pid == p->rec.pid &&
		    v[i].uid == p->rec.uid)
			e = &v[i];
	if (!e) {
		e = &v[(*n)++];
		*e = (struct adopt_awaiting){
		    .device = p->rec.device, .pid = p->rec.pid, .uid = p->rec.uid};
	}
	if (is_lease) {
		e->leases++;
		e->lease_bytes += p->rec.size;
	} else {
		e->models++;
		e->reserved_bytes += p->rec.size;
	}
}

static int cmp_awaiting(const void *x, const void *y)
{
	const struct adopt_awaiting *a = x, *b = y;
	uint64_t ab = a->lease_bytes + a->reserved_bytes, bb = b->lease_bytes + b->reserved_bytes;

	return ab > bb ? -1 : ab < bb;
}

size_t adopt_awaiting(const struct arbiter *a, int device, struct adopt_awaiting *out, size_t max)
{
	const struct adopt *ad = a->adopt;
	struct adopt_awaiting *v;
	size_t n = 0;

	if (!ad || ad->open == 0)
		return 0;
	v = calloc(ad->open, sizeof(*v));
	if (!v)
		return 0;
	for (int k = 0; k < 2; k++) {
		const struct pending_set *set = k == 0 ? &ad->leases : &ad->models;

		for (size_t i = 0; i < set->n; i++) {
			const struct pending *p = &set->v[i];

			if (!p->gone && (device < 0 || p->rec.device == (unsigned)device) &&
			    n < ad->open)
				awaiting_add(v, &n, p, k == 0);
		}
	}
	qsort(v, n, sizeof(*v), cmp_awaiting);
	memcpy(out, v, (n < max ? n : max) * sizeof(*v));
	free(v);
	return n;
}

uint64_t adopt_awaiting_bytes(const struct arbiter *a, unsigned device)
{
	const struct adopt *ad = a->adopt;
	uint64_t bytes = 0;

	for (int k = 0; ad && ad->open && k < 2; k++) {
		const struct pending_set *set = k == 0 ? &ad->leases : &ad->models;

		for (size_t i = 0; i < set->n; i++)
			if (!set->v[i].gone && set->v[i].rec.device == device)
				bytes += set->v[i].rec.size;
	}
	return bytes;
}

uint64_t adopt_grace_left_ms(const struct arbiter *a)
{
	const struct adopt *ad = a->adopt;
	const struct heap_entry *e = ad ? heap_get(&a->state.deadlines, ad->grace_slot) : NULL;
	uint64_t now = uv_now(a->loop);

	if (!e || ad->grace_over || ad->open == 0)
		return 0;
	return e->due_ms > now ? e->due_ms - now : 0;
}
