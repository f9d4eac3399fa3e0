/* SPDX-License-Identifier: MIT */
/* exec.c: running a sequence on the live daemon: refs resolved, fds attached, then checked. */
#include "run.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "build.h"

static const char *const class_names[] = {
    [FAIL_NONE] = "none",
    [FAIL_DIED] = "daemon died",
    [FAIL_SANITIZER] = "sanitizer report",
    [FAIL_HANG] = "no answer",
    [FAIL_CONNECT] = "refused a client",
    [FAIL_WIRE] = "bad answer",
    [FAIL_BOOKS] = "books disagree",
    [FAIL_FDS] = "fd leak",
    [FAIL_STOP] = "unclean stop",
};

const char *fail_class_name(enum fail_class c)
{
	return class_names[c];
}

bool fail_alike(enum fail_class a, enum fail_class b)
{
	return a == b ||
	       (a != FAIL_NONE && b != FAIL_NONE && a <= FAIL_CONNECT && b <= FAIL_CONNECT);
}

void run_fail(struct run *r, enum fail_class cls, const char *fmt, ...)
{
	size_t used = strlen(r->why);
	char death[256];
	va_list ap;

	/* A client refused or left unanswered: first see whether the daemon is still there. */
	if ((cls == FAIL_HANG || cls == FAIL_CONNECT) && target_dead(r->t, death, sizeof(death))) {
		cls = FAIL_DIED;
		used += (size_t)snprintf(r->why + used, sizeof(r->why) - used, "%s; ", death);
	}
	if (used < sizeof(r->why) - 1) {
		va_start(ap, fmt);
		used += (size_t)vsnprintf(r->why + used, sizeof(r->why) - used, fmt, ap);
		va_end(ap);
	}
	if (used < sizeof(r->why) - 1)
		snprintf(r->why + used, sizeof(r->why) - used, "\n");
	if (r->failed == FAIL_NONE || cls < r->failed)
		r->failed = cls;
	r->nfails++;
}

long run_deadline(const struct run *r)
{
	return (r->deadline_ms ? r->deadline_ms : 5000) * r->t->scale;
}

void run_set_deadline(struct run *r, long ms)
{
	r->deadline_ms = ms;
}

const char *run_failure(const struct run *r)
{
	return r->why;
}

struct run *run_create(struct target *t, bool verbose)
{
	struct run *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->t = t;
	r->verbose = verbose;
	for (unsigned c = 0; c < SF_CONNS; c++) {
		r->conns[c].fd = -1;
		r->conns[c].next_rid = 1;
	}
	return r;
}

void run_reset(struct run *r)
{
	for (unsigned c = 0; c < SF_CONNS; c++)
		conn_close(r, c);
	for (size_t i = 0; i < r->leases.ncarried; i++)
		pool_put(r, r->leases.carried[i].fd);
	while (r->npool)
		close(r->pool[--r->npool]);
	memset(&r->leases, 0, sizeof(r->leases));
	memset(&r->models, 0, sizeof(r->models));
	r->restarted = false;
}

void run_destroy(struct run *r)
{
	run_reset(r);
	free(r);
}

void run_stats(const struct run *r, FILE *out)
{
	fprintf(out,
		"%lu sequences, %lu operations, %lu requests sent (%lu not taken, %lu fds "
		"attached), %lu replies (%lu refusals), %lu leases and %lu models granted, %lu "
		"events, %lu hang-ups by the daemon, %lu restarts, %lu checks\n",
		r->stats.seqs, r->stats.ops, r->stats.sent, r->stats.not_taken, r->stats.fds_sent,
		r->stats.replies, r->stats.errors, r->stats.grants, r->stats.models,
		r->stats.events, r->stats.hangups, r->stats.restarts, r->stats.checks);
}

/* nth finds the k-th (mod their count) live item of connection c (own) or of the others. */
static const struct item *nth(const struct idbook *b, unsigned c, bool own, uint64_t k)
{
	size_t n = 0;

	for (size_t i = 0; i < b->nlive; i++)
		n += (b->live[i].conn == c) == own;
	if (n == 0)
		return NULL;
	k %= n;
	for (size_t i = 0; i < b->nlive; i++) {
		if ((b->live[i].conn == c) != own)
			continue;
		if (k == 0)
			return &b->live[i];
		k--;
	}
	return NULL;
}

static uint64_t resolve(struct run *r, const struct op *op, unsigned field)
{
	const struct val *v = &op->f[field];
	struct idbook *b = field == F_LEASE ? &r->leases : &r->models;
	const struct conn *k = &r->conns[op->conn % SF_CONNS];
	size_t n;

	switch (v->ref) {
	case REF_OWN:
	case REF_OTHER: {
		const struct item *it;

		/* After a restart a re-declaration names what was held before it. */
		if ((op->kind == OP_LEASE_REDECLARE || op->kind == OP_MODEL_REDECLARE) &&
		    b->ncarried)
			return b->carried[v->v % b->ncarried].id;
		/* Nothing of its own held: another's; nothing held at all: any id issued. */
		it = nth(b, op->conn % SF_CONNS, v->ref == REF_OWN, v->v);
		if (!it && v->ref == REF_OWN)
			it = nth(b, op->conn % SF_CONNS, false, v->v);
		if (it)
			return it->id;
	}
		/* fall through */
	case REF_ANY:
		n = b->nissued < ID_KEEP ? b->nissued : ID_KEEP;
		return n ? b->issued[v->v % n] : b->max + 1;
	case REF_LAST:
		return b->last ? b->last : 1;
	case REF_NEXT:
		return b->max + v->v;
	case REF_GONE:
		n = b->ngone < ID_KEEP ? b->ngone : ID_KEEP;
		return n ? b->gone[v->v % n] : b->max + 1;
	case REF_EVENT: {
		uint64_t id = field == F_LEASE ? k->event_lease : k->event_model;
		const struct item *it = nth(b, op->conn % SF_CONNS, true, 0);

		return id ? id : it ? it->id : b->max + 1;
	}
	default:
		return v->v;
	}
}

/* find_item finds a live or carried item by id. */
static const struct item *find_item(const struct idbook *b, uint64_t id)
{
	for (size_t i = 0; i < b->nlive; i++)
		if (b->live[i].id == id)
			return &b->live[i];
	for (size_t i = 0; i < b->ncarried; i++)
		if (b->carried[i].id == id)
			return &b->carried[i];
	return NULL;
}

/* open_fd opens one descriptor of a kind; the lease kind borrows one (owned stays false). */
static int open_fd(struct run *r, unsigned kind, const struct item *lease, bool *owned)
{
	int sv[2], fd = -1;

	*owned = true;
	switch (kind) {
	case FD_PIPE:
		if (pipe2(sv, O_CLOEXEC) == 0) {
			close(sv[0]);
			fd = sv[1];
		}
		return fd;
	case FD_DIR:
		return open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	case FD_SOCKET:
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
			close(sv[1]);
			fd = sv[0];
		}
		return fd;
	case FD_LEASE:
		*owned = false;
		if (lease && lease->fd >= 0)
			return lease->fd;
		if (r->npool)
			return r->pool[r->npool - 1];
		/* Nothing to borrow: a memfd of a lease's size. */
		*owned = true;
		/* fall through */
	case FD_MEMFD:
		fd = memfd_create("sfuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd >= 0 && ftruncate(fd, 2 << 20) < 0) {
			close(fd);
			fd = -1;
		}
		return fd;
	case FD_NULL:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	default:
		return eventfd(0, EFD_CLOEXEC);
	}
}

/* attach fills fds for op (each group's descriptor repeated); *nopen of them are ours. */
static unsigned attach(struct run *r, const struct op *op, const struct item *lease, int *fds,
		       int *opened, unsigned *nopen)
{
	unsigned n = 0;

	*nopen = 0;
	/* The lease's own memfd; for a lease the run does not know, another one's. */
	if ((op->flags & OPF_ASGRANTED) && op->kind == OP_LEASE_REDECLARE) {
		bool owned;
		int fd = open_fd(r, FD_LEASE, lease, &owned);

		if (fd >= 0 && owned)
			opened[(*nopen)++] = fd;
		if (fd >= 0)
			fds[n++] = fd;
		return n;
	}
	for (unsigned g = 0; g < op->nfdgroups; g++) {
		bool owned;
		int fd = open_fd(r, op->fds[g].kind, lease, &owned);

		if (fd < 0)
			continue;
		if (owned)
			opened[(*nopen)++] = fd;
		for (unsigned i = 0; i < op->fds[g].count && n < OP_FDS_MAX; i++)
			fds[n++] = fd;
	}
	return n;
}

/* as_granted makes a re-declaration say what the run knows of the item it names. */
static void as_granted(struct op *eff, const struct item *lease, const struct item *model)
{
	if (eff->kind == OP_LEASE_REDECLARE) {
		if (lease) {
			eff->f[F_DEVICE] = (struct val){.set = 1, .v = lease->device};
			eff->f[F_SIZE] = (struct val){.set = 1, .v = lease->size};
		}
		eff->f[F_HANDLE] = (struct val){.set = 1, .v = 1};
		eff->f[F_FD_COUNT] = (struct val){.set = 1, .v = 1};
		eff->f[F_NCHUNKS].set = 0;
	} else if (eff->kind == OP_MODEL_REDECLARE && model) {
		eff->f[F_DEVICE] = (struct val){.set = 1, .v = model->device};
		eff->f[F_SIZE] = (struct val){.set = 1, .v = model->size};
		eff->f[F_NAME].set = 1;
		snprintf(eff->str, sizeof(eff->str), "%s", model->name);
	}
}

static void run_request(struct run *r, struct op *op)
{
	unsigned c = op->conn % SF_CONNS, nfds, nopen;
	struct conn *k = &r->conns[c];
	int fds[OP_FDS_MAX], opened[OP_FD_GROUPS];
	uint64_t lease = 0, model = 0, rid;
	const struct item *li = NULL, *mi = NULL;
	struct outgoing o;
	struct op eff = *op;

	if (k->fd < 0 && !conn_open(r, c))
		return;
	/* Events first: an eviction request names the model to ack. */
	conn_drain(r, c);
	if (k->fd < 0 && !conn_open(r, c))
		return;
	if (op->f[F_LEASE].set) {
		lease = op->resolved[0] = resolve(r, op, F_LEASE);
		op->flags |= OPF_RESOLVED_LEASE;
		li = find_item(&r->leases, lease);
	}
	if (op->f[F_MODEL].set) {
		model = op->resolved[1] = resolve(r, op, F_MODEL);
		op->flags |= OPF_RESOLVED_MODEL;
		mi = find_item(&r->models, model);
	}
	if (op->flags & OPF_ASGRANTED)
		as_granted(&eff, li, mi);
	rid = op->rid.set ? op->rid.v : k->next_rid++;
	build_request(&o, &eff, rid, lease, model);
	nfds = attach(r, op, li, fds, opened, &nopen);
	conn_note(r, c, rid, &eff, op->f[F_LEASE].set ? lease : model);
	if (conn_send(r, c, &o.msg, fds, nfds) && !(op->flags & OPF_NOWAIT))
		conn_sync(r, c, (op->flags & OPF_NOID) ? 0 : rid);
	for (unsigned i = 0; i < nopen; i++)
		close(opened[i]);
}

static void run_op(struct run *r, struct op *op)
{
	unsigned c = op->conn % SF_CONNS;
	char why[256];

	r->stats.ops++;
	switch (op->kind) {
	case OP_CONNECT:
		conn_open(r, c);
		break;
	case OP_CLOSE:
		conn_close(r, c);
		break;
	case OP_PAUSE:
		target_sleep_ms((long)(op->f[F_MS].v % 1000));
		for (unsigned i = 0; i < SF_CONNS; i++)
			conn_drain(r, i);
		break;
	case OP_CHECK:
		books_check(r, false);
		break;
	case OP_RESTART:
		r->stats.restarts++;
		conn_restarted(r);
		if (target_restart(r->t, why, sizeof(why)) < 0)
			run_fail(r, FAIL_DIED, "the daemon did not start again: %s", why);
		break;
	default:
		run_request(r, op);
		break;
	}
}

enum fail_class run_seq(struct run *r, struct seq *s)
{
	char why[512];

	r->failed = FAIL_NONE;
	r->nfails = 0;
	r->why[0] = '\0';
	r->stats.seqs++;
	for (size_t i = 0; i < s->n; i++) {
		/* Once the daemon is gone or stuck, the rest would only wait. */
		if (fail_alike(r->failed, FAIL_DIED))
			break;
		if (r->verbose) {
			printf("  %4zu ", i);
			seq_print_op(stdout, &s->ops[i]);
		}
		run_op(r, &s->ops[i]);
	}
	for (unsigned c = 0; c < SF_CONNS; c++)
		conn_close(r, c);
	for (size_t i = 0; i < r->leases.ncarried; i++)
		pool_put(r, r->leases.carried[i].fd);
	r->leases.ncarried = r->models.ncarried = 0;
	if (target_dead(r->t, why, sizeof(why)))
		run_fail(r, FAIL_DIED, "%s", why);
	else if (!fail_alike(r->failed, FAIL_DIED))
		books_check(r, true);
	if (target_log_report(r->t, why, sizeof(why)))
		run_fail(r, FAIL_SANITIZER, "%s", why);
	return r->failed;
}
