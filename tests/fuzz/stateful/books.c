/* SPDX-License-Identifier: MIT */
/* books.c: the invariants after a sequence: alive, answering, books exact, fds at baseline. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DEVICES_MAX 16

/* What one status reply (all its parts) says, reduced to what the books are checked with. */
struct devbooks {
	uint64_t budget, leased, reserved, free_bytes, leases;
	uint32_t waiters;
	/* Summed from the lists: */
	uint64_t listed_leased, listed_leases, listed_reserved, listed_waiters;
};

/*
 * A listed lease (its bytes, and the model it counts towards or 0) or model (its lease bytes,
 * and the bytes of the listed leases that name it).
 */
struct listed {
	uint64_t id, model, bytes, tagged;
};

struct snapshot {
	unsigned ndevices;
	struct devbooks dev[DEVICES_MAX];
	size_t nleases, nmodels, nclients, nqueue;
	uint64_t client_leases, client_leased;
	struct listed *leases, *models;
	char bad[512]; /* a model whose own numbers disagree */
};

static void snapshot_free(struct snapshot *s)
{
	free(s->leases);
	free(s->models);
}

/* checker_connect opens a connection and says hello; -1 on failure (recorded). */
static int checker_connect(struct run *r)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	uint8_t buf[256];
	size_t len;

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", r->t->sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		run_fail(r, FAIL_CONNECT, "a fresh client could not connect: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	hello.has_protocol_version = true;
	hello.protocol_version = 1;
	hello.client_name = (char *)"sfuzz-checker";
	msg.has_id = true;
	msg.id = 1;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO;
	msg.hello = &hello;
	len = rocmmem__wire__client_message__pack(&msg, buf);
	if (wire_send(fd, buf, len, NULL, 0, 0) < 0) {
		close(fd);
		run_fail(r, FAIL_CONNECT, "a fresh client could not say hello");
		return -1;
	}
	return fd;
}

/* checker_recv reads the next reply (events skipped) within the deadline; NULL on failure. */
static Rocmmem__Wire__Reply *checker_recv(struct run *r, int fd, Rocmmem__Wire__ServerMessage **m,
					  int *lease_fd)
{
	long end = target_now_ms() + run_deadline(r);
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	while (target_now_ms() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 50) <= 0)
			continue;
		n = wire_recv(fd, r->rx, sizeof(r->rx), fds, &nfds, MSG_DONTWAIT);
		if (n == -EAGAIN)
			continue;
		if (n <= 0) {
			run_fail(r, FAIL_CONNECT, "the daemon hung up on a well-behaved client");
			return NULL;
		}
		*m = rocmmem__wire__server_message__unpack(NULL, (size_t)n, r->rx);
		if (*m && (*m)->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			if (lease_fd && nfds)
				*lease_fd = fds[0], fds[0] = -1;
			wire_close_fds(fds, nfds);
			return (*m)->reply;
		}
		wire_close_fds(fds, nfds);
		if (*m)
			rocmmem__wire__server_message__free_unpacked(*m, NULL);
	}
	run_fail(r, FAIL_HANG, "a well-behaved client got no answer in %ld ms", run_deadline(r));
	return NULL;
}

static void add_status(struct snapshot *s, const Rocmmem__Wire__StatusReply *st)
{
	for (size_t i = 0; i < st->n_devices && s->ndevices < DEVICES_MAX; i++) {
		const Rocmmem__Wire__DeviceInfo *d = st->devices[i];
		unsigned k = s->ndevices++;

		s->dev[k].budget = d->budget_bytes;
		s->dev[k].leased = d->leased_bytes;
		s->dev[k].reserved = d->reserved_bytes;
		s->dev[k].free_bytes = d->free_bytes;
		s->dev[k].leases = d->leases;
		s->dev[k].waiters = d->waiters;
	}
	s->leases = realloc(s->leases, (s->nleases + st->n_leases + 1) * sizeof(s->leases[0]));
	s->models = realloc(s->models, (s->nmodels + st->n_models + 1) * sizeof(s->models[0]));
	if (!s->leases || !s->models) {
		fprintf(stderr, "stateful_fuzz: out of memory\n");
		exit(2);
	}
	for (size_t i = 0; i < st->n_leases; i++) {
		const Rocmmem__Wire__LeaseInfo *l = st->leases[i];

		s->leases[s->nleases++] =
		    (struct listed){l->id, l->has_model_id ? l->model_id : 0, l->bytes, 0};
		if (l->device < DEVICES_MAX) {
			s->dev[l->device].listed_leased += l->bytes;
			s->dev[l->device].listed_leases++;
		}
	}
	for (size_t i = 0; i < st->n_models; i++) {
		const Rocmmem__Wire__ModelInfo *m = st->models[i];

		s->models[s->nmodels++] = (struct listed){m->id, 0, m->lease_bytes, 0};
		if (m->device < DEVICES_MAX)
			s->dev[m->device].listed_reserved += m->reservation_bytes;
		if (m->bytes != m->reservation_bytes + m->lease_bytes)
			snprintf(s->bad, sizeof(s->bad),
				 "model %" PRIu64 ": %" PRIu64 " bytes resident, %" PRIu64
				 " reserved and %" PRIu64 " in leases",
				 m->id, m->bytes, m->reservation_bytes, m->lease_bytes);
	}
	for (size_t i = 0; i < st->n_clients; i++) {
		s->client_leases += st->clients[i]->leases;
		s->client_leased += st->clients[i]->leased_bytes;
	}
	s->nclients += st->n_clients;
	for (size_t i = 0; i < st->n_queue; i++)
		if (st->queue[i]->device < DEVICES_MAX)
			s->dev[st->queue[i]->device].listed_waiters++;
	s->nqueue += st->n_queue;
}

/* snapshot_take reads a status on a fresh connection; false on failure (recorded). */
static bool snapshot_take(struct run *r, struct snapshot *s, bool redeclare_done)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__StatusRequest body = ROCMMEM__WIRE__STATUS_REQUEST__INIT;
	Rocmmem__Wire__RedeclareDone done = ROCMMEM__WIRE__REDECLARE_DONE__INIT;
	Rocmmem__Wire__ServerMessage *m = NULL;
	Rocmmem__Wire__Reply *rep;
	int fd = checker_connect(r);
	bool more = true;
	uint8_t buf[64];

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return false;
	rep = checker_recv(r, fd, &m, NULL);
	if (rep && rep->has_error && rep->error)
		run_fail(r, FAIL_CONNECT, "hello refused: %s", rep->message ? rep->message : "");
	if (m)
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	msg.has_id = true;
	msg.id = 2;
	/* After a restart: what this process did not re-declare, it let go of. */
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
	msg.redeclare_done = &done;
	if (redeclare_done)
		wire_send(fd, buf, rocmmem__wire__client_message__pack(&msg, buf), NULL, 0, 0);
	msg.id = 3;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS;
	msg.status = &body;
	wire_send(fd, buf, rocmmem__wire__client_message__pack(&msg, buf), NULL, 0, 0);
	while (rep && more && (rep = checker_recv(r, fd, &m, NULL))) {
		more = false;
		if (rep->id == 3 && rep->body_case == ROCMMEM__WIRE__REPLY__BODY_STATUS) {
			add_status(s, rep->status);
			more = rep->has_more && rep->more;
		} else if (rep->id != 2 || (rep->has_error && rep->error)) {
			run_fail(r, FAIL_BOOKS, "status refused: %d %s", rep->error,
				 rep->message ? rep->message : "");
		} else {
			more = true;
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	close(fd);
	return rep != NULL;
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = ((const struct listed *)a)->id, y = ((const struct listed *)b)->id;

	return x < y ? -1 : x > y;
}

/* find_listed finds id in a list sorted by id. */
static const struct listed *find_listed(const struct listed *v, size_t n, uint64_t id)
{
	struct listed key = {.id = id};

	return n ? bsearch(&key, v, n, sizeof(v[0]), by_id) : NULL;
}

/* unique sorts a list by id and checks that no id is listed twice, nor 0 or 2^64-1. */
static void unique(struct run *r, struct listed *v, size_t n, const char *what)
{
	qsort(v, n, sizeof(v[0]), by_id);
	for (size_t i = 0; i + 1 < n; i++)
		if (v[i].id == v[i + 1].id)
			run_fail(r, FAIL_BOOKS, "two %ss with id %" PRIu64 " listed", what,
				 v[i].id);
	if (n && (v[0].id == 0 || v[n - 1].id == UINT64_MAX))
		run_fail(r, FAIL_BOOKS, "a %s with id %" PRIu64 " listed", what,
			 v[0].id == 0 ? 0 : UINT64_MAX);
}

/* verify_tagged checks each model's lease bytes against the leases that name it. */
static void verify_tagged(struct run *r, struct snapshot *s)
{
	for (size_t i = 0; i < s->nleases; i++) {
		const struct listed *l = &s->leases[i];
		struct listed *m = (struct listed *)find_listed(s->models, s->nmodels, l->model);

		if (l->model && !m)
			run_fail(r, FAIL_BOOKS,
				 "lease %" PRIu64 " counts towards model %" PRIu64
				 ", which is not listed",
				 l->id, l->model);
		else if (m)
			m->tagged += l->bytes;
	}
	for (size_t i = 0; i < s->nmodels; i++)
		if (s->models[i].tagged != s->models[i].bytes)
			run_fail(r, FAIL_BOOKS,
				 "model %" PRIu64 " has %" PRIu64 " bytes in leases; the leases "
				 "listed as its have %" PRIu64,
				 s->models[i].id, s->models[i].bytes, s->models[i].tagged);
}

/* verify checks that each device's totals are what its lists add up to. */
static void verify(struct run *r, struct snapshot *s)
{
	uint64_t leased = 0, leases = 0;

	for (unsigned i = 0; i < s->ndevices; i++) {
		const struct devbooks *d = &s->dev[i];
		uint64_t used = d->leased + d->reserved;
		/* A predecessor's leases may wait to be re-declared: counted, not listed. */
		bool exact = !r->restarted;

		leased += d->listed_leased;
		leases += d->listed_leases;
		if ((exact ? d->leased != d->listed_leased : d->leased < d->listed_leased) ||
		    (exact ? d->leases != d->listed_leases : d->leases < d->listed_leases) ||
		    (exact ? d->reserved != d->listed_reserved
			   : d->reserved < d->listed_reserved) ||
		    d->waiters != d->listed_waiters || used > d->budget ||
		    d->free_bytes != d->budget - used)
			run_fail(r, FAIL_BOOKS,
				 "device %u: %" PRIu64 " leased in %" PRIu64
				 " leases (listed: %" PRIu64 " in %" PRIu64 "), %" PRIu64
				 " reserved (models list %" PRIu64 "), %u waiters (%" PRIu64
				 " listed), %" PRIu64 " free of %" PRIu64,
				 i, d->leased, d->leases, d->listed_leased, d->listed_leases,
				 d->reserved, d->listed_reserved, d->waiters, d->listed_waiters,
				 d->free_bytes, d->budget);
	}
	if (s->client_leases != leases || s->client_leased != leased)
		run_fail(r, FAIL_BOOKS,
			 "clients hold %" PRIu64 " leases of %" PRIu64 " bytes; the lease list "
			 "has %" PRIu64 " of %" PRIu64,
			 s->client_leases, s->client_leased, leases, leased);
	if (s->bad[0])
		run_fail(r, FAIL_BOOKS, "%s", s->bad);
	unique(r, s->leases, s->nleases, "lease");
	unique(r, s->models, s->nmodels, "model");
	verify_tagged(r, s);
}

/* verify_held checks that what the fuzzer's connections hold, the daemon lists. */
static void verify_held(struct run *r, const struct snapshot *s)
{
	for (unsigned c = 0; c < SF_CONNS; c++)
		conn_drain(r, c);
	for (size_t i = 0; i < r->leases.nlive; i++)
		if (!find_listed(s->leases, s->nleases, r->leases.live[i].id))
			run_fail(r, FAIL_BOOKS, "lease %" PRIu64 " of connection %u is not listed",
				 r->leases.live[i].id, r->leases.live[i].conn);
	for (size_t i = 0; i < r->models.nlive; i++)
		if (!find_listed(s->models, s->nmodels, r->models.live[i].id))
			run_fail(r, FAIL_BOOKS, "model %" PRIu64 " of connection %u is not listed",
				 r->models.live[i].id, r->models.live[i].conn);
}

static bool quiet_now(const struct snapshot *s)
{
	bool quiet = s->nleases == 0 && s->nmodels == 0 && s->nqueue == 0 && s->nclients == 1;

	for (unsigned i = 0; i < s->ndevices; i++)
		quiet = quiet && s->dev[i].leased == 0 && s->dev[i].reserved == 0 &&
			s->dev[i].waiters == 0 && s->dev[i].leases == 0;
	return quiet;
}

/* well_behaved acquires 2 MiB, then releases it, as any client would. */
static void well_behaved(struct run *r)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	Rocmmem__Wire__ServerMessage *m = NULL;
	Rocmmem__Wire__Reply *rep;
	int fd = checker_connect(r), lease_fd = -1;
	uint8_t buf[64];

	if (fd < 0 || !(rep = checker_recv(r, fd, &m, NULL)))
		goto out;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	acq.has_size = acq.has_timeout_ms = true;
	acq.size = 2u << 20;
	acq.timeout_ms = 2000;
	msg.has_id = true;
	msg.id = 2;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	wire_send(fd, buf, rocmmem__wire__client_message__pack(&msg, buf), NULL, 0, 0);
	if (!(rep = checker_recv(r, fd, &m, &lease_fd)))
		goto out;
	if (rep->body_case != ROCMMEM__WIRE__REPLY__BODY_LEASE || lease_fd < 0) {
		run_fail(r, FAIL_BOOKS, "an idle daemon refused 2 MiB: %d %s", rep->error,
			 rep->message ? rep->message : "");
	} else {
		rel.has_lease_id = true;
		rel.lease_id = rep->lease->lease_id;
		msg.id = 3;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
		msg.lease_release = &rel;
		wire_send(fd, buf, rocmmem__wire__client_message__pack(&msg, buf), NULL, 0, 0);
	}
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	if (rel.has_lease_id && (rep = checker_recv(r, fd, &m, NULL))) {
		if (rep->has_error && rep->error)
			run_fail(r, FAIL_BOOKS, "releasing a fresh lease failed: %s",
				 rep->message ? rep->message : "");
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
out:
	if (lease_fd >= 0)
		close(lease_fd);
	if (fd >= 0)
		close(fd);
}

/* wait_fds polls the daemon's fd count until it is back at its baseline. */
static void wait_fds(struct run *r)
{
	long end = target_now_ms() + run_deadline(r);
	int n;

	while ((n = target_fd_count(r->t)) != r->t->fd_baseline && target_now_ms() < end)
		target_sleep_ms(5);
	if (n != r->t->fd_baseline)
		run_fail(r, FAIL_FDS,
			 "the daemon holds %d fds with no client connected, its baseline is %d", n,
			 r->t->fd_baseline);
}

void books_check(struct run *r, bool quiet)
{
	long end = target_now_ms() + run_deadline(r);
	struct snapshot s;

	unsigned before = r->nfails;

	r->stats.checks++;
	while (snapshot_take(r, &s, quiet && r->restarted)) {
		verify(r, &s);
		if (!quiet)
			verify_held(r, &s);
		if (!quiet || quiet_now(&s) || r->nfails != before || target_now_ms() > end)
			break;
		snapshot_free(&s);
		target_sleep_ms(5);
	}
	if (quiet && r->failed == FAIL_NONE && !quiet_now(&s))
		run_fail(r, FAIL_BOOKS,
			 "with every fuzzing client gone the daemon still lists %zu leases, %zu "
			 "models, %zu waiters and %zu clients (one is the checker's)",
			 s.nleases, s.nmodels, s.nqueue, s.nclients);
	snapshot_free(&s);
	if (!quiet || r->failed != FAIL_NONE)
		return;
	r->restarted = false;
	wait_fds(r);
	well_behaved(r);
}
