/* SPDX-License-Identifier: MIT */
/*
 * test_restart.c: a daemon killed and started again: clients reconnect by themselves, their
 * memory and data intact, the new daemon accounts what they re-declare (and only what its
 * state file confirms), forgets what nobody re-declares, and survives a bad state file.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"
#include "platform/statefile.h"

#define MiB ((uint64_t)1 << 20)

/* What the event callback saw. */
struct seen {
	int by_type[16];
	uint64_t revoked_leases[8];
	int nrevoked;
	uint64_t revoked_models[8];
	int nrevoked_models;
	char reconnected[256];
	char last_reason[256];
	char revoked_reason[256]; /* of the latest lease revocation */
	uint64_t evict_model;	  /* of the first evict request */
	long evict_ms;		  /* when it came (harness_now_ms) */
};

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct seen *s = userdata;

	(void)c;
	if (ev->type < 16)
		s->by_type[ev->type]++;
	snprintf(s->last_reason, sizeof(s->last_reason), "%s", ev->reason);
	if (ev->type == ROCMMEM_EVENT_LEASE_REVOKED && s->nrevoked < 8)
		s->revoked_leases[s->nrevoked++] = ev->lease_id;
	if (ev->type == ROCMMEM_EVENT_LEASE_REVOKED)
		snprintf(s->revoked_reason, sizeof(s->revoked_reason), "%s", ev->reason);
	if (ev->type == ROCMMEM_EVENT_MODEL_REVOKED && s->nrevoked_models < 8)
		s->revoked_models[s->nrevoked_models++] = ev->model_id;
	if (ev->type == ROCMMEM_EVENT_RECONNECTED)
		snprintf(s->reconnected, sizeof(s->reconnected), "%s", ev->reason);
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST && !s->evict_model) {
		s->evict_model = ev->model_id;
		s->evict_ms = harness_now_ms();
	}
}

static void kill9(struct daemon_proc *d)
{
	assert_true(d->pid > 0);
	kill(d->pid, SIGKILL);
	assert_int_equal(waitpid(d->pid, NULL, 0), d->pid);
	d->pid = 0;
}

static void restart(struct daemon_proc *d, const char *const *args)
{
	if (harness_daemon_restart(d, args) != 0)
		fail_msg("rocmmemd did not start again");
}

static void state_path(const struct daemon_proc *d, char *out, size_t len)
{
	snprintf(out, len, "%s.state", d->sock);
}

/* pump_until dispatches (as an event loop would) until the client is in state; the ms taken. */
static long pump_until(rocmmem_client *c, enum rocmmem_connection_state state, long timeout_ms)
{
	long start = harness_now_ms(), end = start + timeout_ms;

	while (harness_now_ms() < end) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (rocmmem_client_state(c) == state)
			return harness_now_ms() - start;
		if (poll(&p, 1, 50) > 0)
			rocmmem_dispatch(c);
	}
	return rocmmem_client_state(c) == state ? harness_now_ms() - start : -1;
}

static rocmmem_lease *lease(rocmmem_client *c, uint64_t size, const char *tag, uint64_t model)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .tag = tag, .model_id = model};
	rocmmem_lease *l = NULL;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("lease of %llu: %s (%s)", (unsigned long long)size, rocmmem_strerror(err),
			 rocmmem_last_error());
	return l;
}

/* fill writes a pattern only this lease has through its whole mapping (one byte a page). */
static void fill(rocmmem_lease *l)
{
	uint8_t *p = rocmmem_lease_ptr(l);

	for (uint64_t off = 0; off < rocmmem_lease_size(l); off += 4096)
		p[off] = (uint8_t)(rocmmem_lease_id(l) * 31 + off / 4096);
}

static bool intact(rocmmem_lease *l)
{
	const uint8_t *p = rocmmem_lease_ptr(l);

	for (uint64_t off = 0; off < rocmmem_lease_size(l); off += 4096)
		if (p[off] != (uint8_t)(rocmmem_lease_id(l) * 31 + off / 4096))
			return false;
	return true;
}

static const struct rocmmem_lease_info *find_lease(const rocmmem_status *st, uint64_t id)
{
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++)
		if (rocmmem_status_lease(st, i)->id == id)
			return rocmmem_status_lease(st, i);
	return NULL;
}

static const struct rocmmem_model_info *find_model(const rocmmem_status *st, const char *name)
{
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (strcmp(rocmmem_status_model(st, i)->name, name) == 0)
			return rocmmem_status_model(st, i);
	return NULL;
}

static rocmmem_status *status(const struct daemon_proc *d)
{
	rocmmem_client *c = harness_connect(d, "observer");
	rocmmem_status *st = NULL;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	rocmmem_disconnect(c);
	return st;
}

/* ----------------------------------------------------------------------------------------- */

static void test_leases_and_models_survive_sigkill(void **state)
{
	static const char *const args[] = {"--budget", "256M", NULL};
	struct rocmmem_model_desc vae = {.struct_size = sizeof(vae),
					 .name = "vae",
					 .model_class = ROCMMEM_MODEL_VAE,
					 .size = 32 * MiB,
					 .priority = 3};
	struct rocmmem_model_desc te = {.struct_size = sizeof(te),
					.name = "te",
					.model_class = ROCMMEM_MODEL_TEXT_ENCODER,
					.pinned = 1};
	const struct rocmmem_lease_info *li;
	const struct rocmmem_model_info *mi;
	struct seen seen = {0};
	struct daemon_proc d;
	rocmmem_lease *l[4];
	uint64_t vae_id, te_id, old_next;
	rocmmem_client *c;
	rocmmem_status *st;
	long took;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "keeper");
	rocmmem_set_event_callback(c, on_event, &seen);
	assert_int_equal(rocmmem_model_register(c, &vae, &vae_id), 0);
	assert_int_equal(rocmmem_model_register(c, &te, &te_id), 0);
	assert_int_equal(rocmmem_model_acquire(c, vae_id, 0), 0);
	assert_int_equal(rocmmem_model_release(c, vae_id), 0);	 /* idle, still resident */
	assert_int_equal(rocmmem_model_acquire(c, te_id, 0), 0); /* in use across the restart */
	l[0] = lease(c, 8 * MiB, "first", 0);
	l[1] = lease(c, 16 * MiB, "second", 0);
	l[2] = lease(c, 2 * MiB, NULL, 0);
	l[3] = lease(c, 4 * MiB, "weights", te_id);
	for (int i = 0; i < 4; i++)
		fill(l[i]);
	old_next = rocmmem_lease_id(l[3]);

	kill9(&d);
	/* The daemon is gone: the client notices, keeps its memory mapped and reconnects. */
	assert_true(pump_until(c, ROCMMEM_RECONNECTING, 2000) >= 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_RECONNECTING], 1);
	for (int i = 0; i < 4; i++)
		assert_true(intact(l[i]));
	restart(&d, args);
	took = pump_until(c, ROCMMEM_CONNECTED, 5000);
	assert_true(took >= 0);
	print_message("reconnected %ld ms after the new daemon accepted connections\n", took);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_RECONNECTED], 1);
	assert_int_equal(seen.nrevoked, 0);
	assert_int_equal(seen.nrevoked_models, 0);
	assert_non_null(
	    strstr(seen.reconnected, "4 lease(s) and 2 model(s) re-declared, 0 refused"));
	for (int i = 0; i < 4; i++)
		assert_true(intact(l[i]));
	assert_true(harness_log_wait(&d, "took over lease", HARNESS_WAIT_MS));

	/* The new daemon's books: the same leases, ids, bytes, tags and owner; the models with
	 * their ids, reservation and state. */
	st = status(&d);
	assert_int_equal(rocmmem_status_lease_count(st), 4);
	for (int i = 0; i < 4; i++) {
		li = find_lease(st, rocmmem_lease_id(l[i]));
		assert_non_null(li);
		assert_int_equal(li->bytes, rocmmem_lease_size(l[i]));
		assert_int_equal(li->owner_pid, getpid());
	}
	assert_string_equal(find_lease(st, rocmmem_lease_id(l[0]))->tag, "first");
	assert_string_equal(find_lease(st, rocmmem_lease_id(l[1]))->tag, "second");
	assert_int_equal(find_lease(st, rocmmem_lease_id(l[3]))->model_id, te_id);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 30 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->reserved_bytes, 32 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->leases, 4);
	mi = find_model(st, "vae");
	assert_non_null(mi);
	assert_int_equal(mi->id, vae_id);
	assert_int_equal(mi->reservation_bytes, 32 * MiB);
	assert_int_equal(mi->state, ROCMMEM_MODEL_IDLE);
	assert_int_equal(mi->priority, 3);
	mi = find_model(st, "te");
	assert_non_null(mi);
	assert_int_equal(mi->id, te_id);
	assert_int_equal(mi->state, ROCMMEM_MODEL_IN_USE);
	assert_true(mi->pinned);
	assert_int_equal(mi->lease_bytes, 4 * MiB);
	rocmmem_status_free(st);

	/* Life goes on: ids above the old ones, the models work, releases work. */
	{
		rocmmem_lease *fresh = lease(c, 2 * MiB, "fresh", 0);

		assert_true(rocmmem_lease_id(fresh) > old_next);
		assert_int_equal(rocmmem_lease_release(fresh), 0);
	}
	assert_int_equal(rocmmem_model_release(c, te_id), 0);
	assert_int_equal(rocmmem_model_acquire(c, vae_id, 0), 0);
	assert_int_equal(rocmmem_model_release(c, vae_id), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rocmmem_lease_release(l[i]), 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(rocmmem_model_unregister(c, vae_id), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A restart in the background, as systemd does it after a crash. */
struct restarter {
	struct daemon_proc *d;
	const char *const *args;
	long delay_ms;
	int rc;
};

static void *restart_later(void *arg)
{
	struct restarter *r = arg;

	usleep((useconds_t)r->delay_ms * 1000);
	r->rc = harness_daemon_restart(r->d, r->args);
	return NULL;
}

static void test_calls_wait_for_the_daemon(void **state)
{
	static const char *const args[] = {"--budget", "256M", NULL};
	struct rocmmem_lease_request now = {.struct_size = sizeof(now), .size = 2 * MiB};
	struct rocmmem_lease_request patient = {
	    .struct_size = sizeof(patient), .size = 4 * MiB, .timeout_ms = 10000};
	struct restarter r;
	struct daemon_proc d;
	rocmmem_lease *held, *later = NULL;
	rocmmem_client *c;
	rocmmem_status *st;
	pthread_t t;
	long start;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "caller");
	held = lease(c, 2 * MiB, NULL, 0);
	fill(held);
	kill9(&d);
	/* Timeout 0 does not wait for the daemon either: a clear error at once. */
	assert_int_equal(rocmmem_lease_acquire(c, &now, &later), -ENOTCONN);
	assert_null(later);
	assert_non_null(strstr(rocmmem_last_error(), "reconnecting"));
	assert_int_equal(rocmmem_client_state(c), ROCMMEM_RECONNECTING);
	/* One with time to wait waits for the daemon, then gets its memory from the new one. */
	r = (struct restarter){.d = &d, .args = args, .delay_ms = 300};
	assert_int_equal(pthread_create(&t, NULL, restart_later, &r), 0);
	start = harness_now_ms();
	assert_int_equal(rocmmem_lease_acquire(c, &patient, &later), 0);
	assert_true(harness_now_ms() - start >= 250);
	pthread_join(t, NULL);
	assert_int_equal(r.rc, 0);
	assert_true(intact(held));
	st = status(&d);
	assert_int_equal(rocmmem_status_lease_count(st), 2);
	assert_non_null(find_lease(st, rocmmem_lease_id(held)));
	assert_non_null(find_lease(st, rocmmem_lease_id(later)));
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_lease_release(later), 0);
	assert_int_equal(rocmmem_lease_release(held), 0);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A lease released while the daemon is away is forgotten by the new one, not re-declared. */
static void test_release_while_away(void **state)
{
	static const char *const args[] = {"--budget", "256M", NULL};
	struct daemon_proc d;
	rocmmem_lease *kept, *gone;
	rocmmem_client *c;
	rocmmem_status *st;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "releaser");
	kept = lease(c, 2 * MiB, "kept", 0);
	gone = lease(c, 8 * MiB, "gone", 0);
	kill9(&d);
	assert_true(pump_until(c, ROCMMEM_RECONNECTING, 2000) >= 0);
	/* Freed here; the daemon could not be told: it forgets it when the library is back. */
	assert_int_equal(rocmmem_lease_release(gone), -ENOTCONN);
	restart(&d, args);
	assert_true(pump_until(c, ROCMMEM_CONNECTED, 5000) >= 0);
	st = status(&d);
	assert_int_equal(rocmmem_status_lease_count(st), 1);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 2 * MiB);
	rocmmem_status_free(st);
	assert_true(harness_log_wait(&d, "its holder did not re-declare it", HARNESS_WAIT_MS));
	assert_int_equal(rocmmem_lease_release(kept), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* ----------------------------------------------------------------------------------------- */
/* Forgeries: what the state file does not confirm is refused, over a raw connection. */

static int sealed_memfd(uint64_t size, bool seal)
{
	int fd = memfd_create("forged", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	if (seal)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
				 0);
	return fd;
}

static void record(struct statefile *sf, uint64_t id, int fd, uint64_t size, uint32_t uid,
		   int32_t pid)
{
	struct statefile_record r = {0};
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	r.kind = STATEFILE_LEASE_MEMFD;
	r.id = id;
	r.size = size;
	r.ino_dev = (uint64_t)st.st_dev;
	r.ino = (uint64_t)st.st_ino;
	r.uid = uid;
	r.pid = pid;
	statefile_tag(&r, "forged");
	assert_true(statefile_add(sf, &r, NULL, 0) > 0);
}

/* redeclare sends a LeaseRedeclare over a raw connection and returns the reply's error. */
static int redeclare(int fd, uint64_t req_id, uint64_t lease_id, uint64_t size, int kind,
		     const int *fds, unsigned nfds, unsigned fd_count)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRedeclare req = ROCMMEM__WIRE__LEASE_REDECLARE__INIT;
	Rocmmem__Wire__ServerMessage *reply;
	int err = -EPROTO;

	req.has_lease_id = true;
	req.lease_id = lease_id;
	req.has_device = true;
	req.device = 0;
	req.has_size = true;
	req.size = size;
	req.has_handle_kind = true;
	req.handle_kind = (Rocmmem__Wire__HandleKind)kind;
	req.has_fd_count = true;
	req.fd_count = fd_count;
	msg.has_id = true;
	msg.id = req_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
	msg.lease_redeclare = &req;
	assert_int_equal(harness_raw_send(fd, &msg, fds, nfds), 0);
	reply = harness_raw_recv(fd, 5000, NULL, NULL, NULL);
	assert_non_null(reply);
	if (reply->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
		assert_int_equal(reply->reply->id, req_id);
		err = reply->reply->has_error ? reply->reply->error : 0;
	}
	rocmmem__wire__server_message__free_unpacked(reply, NULL);
	return err;
}

static void test_forged_redeclarations_are_refused(void **state)
{
	static const char *const args[] = {"--budget", "256M", NULL};
	int good = sealed_memfd(2 * MiB, true), unsealed = sealed_memfd(2 * MiB, false);
	int other_uid = sealed_memfd(2 * MiB, true), other_pid = sealed_memfd(2 * MiB, true);
	int small = sealed_memfd(2 * MiB, true), recorded = sealed_memfd(2 * MiB, true);
	int impostor = sealed_memfd(2 * MiB, true);
	char path[256], why[256];
	struct statefile sf;
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_status *st;
	rocmmem_lease *fresh;
	pid_t me = getpid();
	int fd;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	kill9(&d);
	/* The record a daemon would have left, made by hand: one good lease and traps. */
	state_path(&d, path, sizeof(path));
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	record(&sf, 101, good, 2 * MiB, getuid(), me);
	record(&sf, 102, unsealed, 2 * MiB, getuid(), me);
	record(&sf, 103, other_uid, 2 * MiB, 12345, me);
	record(&sf, 104, other_pid, 2 * MiB, getuid(), me + 100000);
	record(&sf, 105, small, 4 * MiB, getuid(), me);
	record(&sf, 106, recorded, 2 * MiB, getuid(), me);
	statefile_set_next_lease_id(&sf, 200);
	statefile_close(&sf, false);
	restart(&d, args);

	fd = harness_raw_connect(&d);
	assert_true(fd >= 0);
	assert_int_equal(harness_raw_hello(fd, 1, "forger"), 0);
	/* The genuine one is taken over; replayed, it is refused. */
	assert_int_equal(redeclare(fd, 2, 101, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &good, 1, 1), 0);
	assert_int_equal(redeclare(fd, 3, 101, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &good, 1, 1),
			 -ESTALE);
	/* Unsealed, another uid's, another process's, not the size on record, not the memfd on
	 * record, never issued. */
	assert_int_equal(redeclare(fd, 4, 102, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &unsealed, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 5, 103, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &other_uid, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 6, 104, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &other_pid, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 7, 105, 4 * MiB, ROCMMEM_HANDLE_MEMFD, &small, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 8, 105, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &small, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 9, 106, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &impostor, 1, 1),
			 -EPERM);
	assert_int_equal(redeclare(fd, 10, 150, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &impostor, 1, 1),
			 -ESTALE);
	/* Memory that cannot outlive its daemon, and malformed declarations. */
	assert_int_equal(redeclare(fd, 11, 106, 2 * MiB, ROCMMEM_HANDLE_DMABUF, &recorded, 1, 1),
			 -ESTALE);
	assert_int_equal(redeclare(fd, 12, 106, 2 * MiB, ROCMMEM_HANDLE_MEMFD, &recorded, 1, 2),
			 -EINVAL);
	assert_int_equal(redeclare(fd, 13, 106, 2 * MiB, ROCMMEM_HANDLE_MEMFD, NULL, 0, 0),
			 -EINVAL);
	assert_true(harness_log_wait(&d, "refused the re-declaration", HARNESS_WAIT_MS));
	assert_true(harness_log_wait(&d, "not sealed", HARNESS_WAIT_MS));

	/* Only the genuine lease is in the books, under its own id and this process; the traps
	 * stay held (their records) until the grace period or their holder says it is done. */
	st = status(&d);
	assert_int_equal(rocmmem_status_lease_count(st), 1);
	assert_int_equal(find_lease(st, 101)->owner_pid, me);
	assert_int_equal(find_lease(st, 101)->bytes, 2 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 14 * MiB);
	rocmmem_status_free(st);
	{
		Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
		Rocmmem__Wire__RedeclareDone done = ROCMMEM__WIRE__REDECLARE_DONE__INIT;
		Rocmmem__Wire__ServerMessage *reply;

		msg.has_id = true;
		msg.id = 20;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
		msg.redeclare_done = &done;
		assert_int_equal(harness_raw_send(fd, &msg, NULL, 0), 0);
		reply = harness_raw_recv(fd, 5000, NULL, NULL, NULL);
		assert_non_null(reply);
		rocmmem__wire__server_message__free_unpacked(reply, NULL);
	}
	/* Done: what this process did not re-declare goes (102, 105, 106); another uid's and
	 * another process's records wait for their grace period. */
	st = status(&d);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 6 * MiB);
	rocmmem_status_free(st);
	/* New ids go on above what the previous daemon gave. */
	c = harness_connect(&d, "newcomer");
	fresh = lease(c, 2 * MiB, NULL, 0);
	assert_true(rocmmem_lease_id(fresh) >= 200);
	rocmmem_disconnect(c);
	close(fd);
	assert_true(harness_wait_totals(&d, 4 * MiB, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_daemon_stop(&d), 0);
	close(good);
	close(unsealed);
	close(other_uid);
	close(other_pid);
	close(small);
	close(recorded);
	close(impostor);
}

/* ----------------------------------------------------------------------------------------- */

/* holder: a client process that takes a lease, says so, and waits to be killed. */
static int holder(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 16 * MiB};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	int64_t cmd;

	if (rocmmem_connect(d->sock, "holder", 5000, &c) || rocmmem_lease_acquire(c, &req, &l))
		return 1;
	pipe_put(out, (int64_t)rocmmem_lease_id(l));
	pipe_get(in, &cmd, 60000);
	return 0;
}

static void test_dead_holder_is_forgotten_after_grace(void **state)
{
	static const char *const args[] = {"--budget", "32M", "--restart-grace", "1", NULL};
	struct rocmmem_lease_request big = {.struct_size = sizeof(big), .size = 24 * MiB};
	struct daemon_proc d;
	struct child ch;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	int64_t id;
	long waited;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	assert_int_equal(child_start(&ch, holder, &d), 0);
	assert_true(pipe_get(ch.from_child, &id, 5000));
	kill9(&d);
	child_kill(&ch); /* dies while the daemon is down: nobody will re-declare its lease */
	restart(&d, args);
	/* Until the grace period ends its 16 MiB count: 24 MiB does not fit in 32. */
	c = harness_connect(&d, "newcomer");
	assert_int_equal(rocmmem_lease_acquire(c, &big, &l), -ENOMEM);
	waited = harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS);
	assert_true(waited >= 0);
	assert_true(harness_log_wait(&d, "not re-declared within 1 s", HARNESS_WAIT_MS));
	assert_int_equal(rocmmem_lease_acquire(c, &big, &l), 0);
	assert_true(rocmmem_lease_id(l) > (uint64_t)id);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* reserver: a client process with a lease and a model in use; re-declares only when told. */
static int reserver(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 16 * MiB};
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "kept-model", .size = 8 * MiB};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	uint64_t model;
	int64_t cmd;

	if (rocmmem_connect(d->sock, "reserver", 5000, &c) ||
	    rocmmem_model_register(c, &desc, &model) || rocmmem_model_acquire(c, model, 0) ||
	    rocmmem_lease_acquire(c, &req, &l))
		return 1;
	pipe_put(out, (int64_t)rocmmem_lease_id(l));
	/* No thread of the library's own: nothing is re-declared until this process calls. */
	pipe_get(in, &cmd, 60000);
	pipe_put(out, rocmmem_trim(c, ROCMMEM_ALL_DEVICES,
				   NULL)); /* finds the daemon gone, comes back with all */
	pipe_get(in, &cmd, 60000);
	return 0;
}

/*
 * test_grace_period_lists_what_awaits: after a restart, what a process has not re-declared yet
 * is accounted (leased, reserved) and listed as awaiting re-declaration, by process, with the
 * time left; a refusal meanwhile names it instead of "held by no other client".
 */
static void test_grace_period_lists_what_awaits(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--restart-grace", "30", NULL};
	struct rocmmem_lease_request big = {.struct_size = sizeof(big), .size = 48 * MiB};
	const struct rocmmem_awaiting_info *w;
	const struct rocmmem_device_info *dev;
	struct daemon_proc d;
	struct child ch;
	rocmmem_client *c;
	rocmmem_lease *l = NULL;
	rocmmem_status *st;
	int64_t id, took;
	char text[160];

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	assert_int_equal(child_start(&ch, reserver, &d), 0);
	assert_true(pipe_get(ch.from_child, &id, 5000) && id > 0);
	kill9(&d);
	restart(&d, args);
	st = status(&d);
	assert_int_equal(rocmmem_status_awaiting_count(st), 1);
	w = rocmmem_status_awaiting(st, 0);
	assert_int_equal(w->pid, ch.pid);
	assert_int_equal(w->uid, getuid());
	assert_int_equal(w->device, 0);
	assert_int_equal(w->leases, 1);
	assert_int_equal(w->lease_bytes, 16 * MiB);
	assert_int_equal(w->models, 1);
	assert_int_equal(w->reserved_bytes, 8 * MiB);
	assert_true(w->grace_left_ms > 0 && w->grace_left_ms <= 30000);
	dev = rocmmem_status_device(st, 0);
	assert_int_equal(dev->awaiting_redeclare_bytes, 24 * MiB);
	assert_int_equal(dev->leased_bytes, 16 * MiB);
	assert_int_equal(dev->reserved_bytes, 8 * MiB);
	assert_int_equal(rocmmem_status_lease_count(st), 0);
	rocmmem_status_free(st);
	/* A refusal names what waits, and who is to re-declare it. */
	c = harness_connect(&d, "newcomer");
	assert_int_equal(rocmmem_lease_acquire(c, &big, &l), -ENOMEM);
	snprintf(text, sizeof(text),
		 "held by no connected client; 24 MiB awaits re-declaration by pid %d until the "
		 "restart's grace period ends in",
		 (int)ch.pid);
	if (!strstr(rocmmem_last_error(), text))
		fail_msg("the refusal says: %s", rocmmem_last_error());
	/* Re-declared: listed as a lease and a model of a client again, no longer as awaiting. */
	pipe_put(ch.to_child, 1);
	assert_true(pipe_get(ch.from_child, &took, 15000));
	assert_int_equal(took, 0);
	st = status(&d);
	assert_int_equal(rocmmem_status_awaiting_count(st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->awaiting_redeclare_bytes, 0);
	assert_non_null(find_lease(st, (uint64_t)id));
	assert_non_null(find_model(st, "kept-model"));
	rocmmem_status_free(st);
	pipe_put(ch.to_child, 1);
	assert_int_equal(child_wait(&ch, 5000), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

static void test_smaller_budget_after_restart(void **state)
{
	static const char *const big[] = {"--budget", "64M", NULL};
	static const char *const small[] = {"--budget", "32M", NULL};
	struct rocmmem_lease_request more = {.struct_size = sizeof(more), .size = 2 * MiB};
	struct daemon_proc d;
	rocmmem_lease *l, *extra = NULL;
	rocmmem_client *c;
	rocmmem_status *st;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, big), 0);
	c = harness_connect(&d, "big");
	l = lease(c, 48 * MiB, NULL, 0);
	fill(l);
	kill9(&d);
	assert_true(pump_until(c, ROCMMEM_RECONNECTING, 2000) >= 0);
	restart(&d, small);
	assert_true(pump_until(c, ROCMMEM_CONNECTED, 5000) >= 0);
	/* The memory exists whatever the budget: accounted, and nothing more is granted. */
	st = status(&d);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 48 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->free_bytes, 0);
	rocmmem_status_free(st);
	assert_true(harness_log_wait(&d, "over the budget", HARNESS_WAIT_MS));
	assert_int_equal(rocmmem_lease_acquire(c, &more, &extra), -ENOMEM);
	assert_true(intact(l));
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_lease_acquire(c, &more, &extra), 0);
	assert_int_equal(rocmmem_lease_release(extra), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* Without its state file the new daemon cannot tell a lease from a forgery: revoked, never
 * trusted, but the memory stays mapped and intact. Reservations that fit are accounted. */
static void test_lost_state_file_refuses_leases(void **state)
{
	static const char *const args[] = {"--budget", "256M", NULL};
	struct rocmmem_model_desc m = {.struct_size = sizeof(m), .name = "unet", .size = 8 * MiB};
	struct seen seen = {0};
	struct daemon_proc d;
	char path[256];
	rocmmem_lease *l;
	rocmmem_client *c;
	rocmmem_status *st;
	uint64_t id;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "orphan");
	rocmmem_set_event_callback(c, on_event, &seen);
	assert_int_equal(rocmmem_model_register(c, &m, &id), 0);
	assert_int_equal(rocmmem_model_acquire(c, id, 0), 0);
	l = lease(c, 4 * MiB, NULL, 0);
	fill(l);
	kill9(&d);
	assert_true(pump_until(c, ROCMMEM_RECONNECTING, 2000) >= 0);
	state_path(&d, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	restart(&d, args);
	assert_true(pump_until(c, ROCMMEM_CONNECTED, 5000) >= 0);
	rocmmem_dispatch(c);
	assert_int_equal(seen.nrevoked, 1);
	assert_int_equal(seen.revoked_leases[0], rocmmem_lease_id(l));
	assert_int_equal(seen.nrevoked_models, 0);
	assert_true(intact(l)); /* revoked, not unmapped */
	st = status(&d);
	assert_int_equal(rocmmem_status_lease_count(st), 0);
	assert_int_equal(find_model(st, "unet")->reservation_bytes, 8 * MiB);
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_lease_release(l), 0); /* revoked: freed here, nothing to tell */
	assert_int_equal(rocmmem_model_release(c, id), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A daemon that lost its records may give a model's id to another: the host keeps its id and the
 * library maps it, in calls and in events. */
static void test_model_ids_are_mapped(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct rocmmem_model_desc mine = {
	    .struct_size = sizeof(mine), .name = "mine", .size = 4 * MiB};
	struct rocmmem_model_desc theirs = {.struct_size = sizeof(theirs), .name = "theirs"};
	const struct rocmmem_model_info *mi;
	struct daemon_proc d;
	rocmmem_client *a, *b;
	rocmmem_status *st;
	uint64_t id, other, second;
	char path[256];

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	a = harness_connect(&d, "returning");
	assert_int_equal(rocmmem_model_register(a, &mine, &id), 0);
	kill9(&d);
	assert_true(pump_until(a, ROCMMEM_RECONNECTING, 2000) >= 0);
	state_path(&d, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	restart(&d, args);
	/* A newcomer is first: it gets the id the returning model had. */
	b = harness_connect(&d, "newcomer");
	assert_int_equal(rocmmem_model_register(b, &theirs, &other), 0);
	assert_int_equal(other, id);
	assert_true(pump_until(a, ROCMMEM_CONNECTED, 5000) >= 0);
	/* The host still says id: its own model is used, not the newcomer's. */
	assert_int_equal(rocmmem_model_acquire(a, id, 0), 0);
	st = status(&d);
	mi = find_model(st, "mine");
	assert_non_null(mi);
	assert_true(mi->id != id);
	assert_int_equal(mi->state, ROCMMEM_MODEL_IN_USE);
	assert_int_equal(find_model(st, "theirs")->state, ROCMMEM_MODEL_EVICTED);
	rocmmem_status_free(st);
	/* A new model of the returning host never gets an id the host uses already. */
	assert_int_equal(rocmmem_model_register(a, &theirs, &second), 0);
	assert_true(second != id);
	assert_int_equal(rocmmem_model_release(a, id), 0);
	assert_int_equal(rocmmem_model_unregister(a, id), 0);
	st = status(&d);
	assert_null(find_model(st, "mine"));
	assert_non_null(find_model(st, "theirs"));
	rocmmem_status_free(st);
	rocmmem_disconnect(a);
	rocmmem_disconnect(b);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* pump_until_seen dispatches until *count is at least want; false at timeout_ms. */
static bool pump_until_seen(rocmmem_client *c, const int *count, int want, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	while (*count < want && harness_now_ms() < end) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (poll(&p, 1, 50) > 0)
			rocmmem_dispatch(c);
	}
	return *count >= want;
}

/*
 * A model in use across a restart keeps a maximum hold: the new daemon arms it again when the
 * model is re-declared, counted from the re-declaration (it has no record of when the use
 * began), then asks the owner to release it and revokes it at the deadline.
 */
static void test_max_hold_rearmed_after_restart(void **state)
{
	static const char *const args[] = {"--budget",	       "64M", "--max-hold", "2",
					   "--evict-deadline", "1",   NULL};
	struct rocmmem_model_desc unet = {.struct_size = sizeof(unet),
					  .name = "unet",
					  .model_class = ROCMMEM_MODEL_TRANSFORMER,
					  .size = 8 * MiB};
	const long hold_ms = 2000;
	const struct rocmmem_model_info *mi;
	struct seen seen = {0};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_status *st;
	uint64_t id;
	long restarted;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "holder");
	rocmmem_set_event_callback(c, on_event, &seen);
	assert_int_equal(rocmmem_model_register(c, &unet, &id), 0);
	assert_int_equal(rocmmem_model_acquire(c, id, 0), 0);
	/* Some of its hold is spent before the restart: the new daemon does not know how much. */
	usleep(300 * 1000);
	kill9(&d);
	assert_true(pump_until(c, ROCMMEM_RECONNECTING, 2000) >= 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_EVICT_REQUEST], 0);
	restarted = harness_now_ms();
	restart(&d, args);
	assert_true(pump_until(c, ROCMMEM_CONNECTED, 5000) >= 0);
	st = status(&d);
	mi = find_model(st, "unet");
	assert_non_null(mi);
	assert_int_equal(mi->state, ROCMMEM_MODEL_IN_USE);
	rocmmem_status_free(st);

	/* Asked to release it, a whole hold after the re-declaration (which came after the new
	 * daemon started), not earlier; then revoked at its deadline, as it never answers. */
	assert_true(pump_until_seen(c, &seen.by_type[ROCMMEM_EVENT_EVICT_REQUEST], 1,
				    hold_ms + HARNESS_WAIT_MS));
	assert_int_equal(seen.evict_model, id);
	assert_true(seen.evict_ms - restarted >= hold_ms);
	assert_true(harness_log_wait(&d, "longer than its maximum hold of 2 s", HARNESS_WAIT_MS));
	assert_true(pump_until_seen(c, &seen.nrevoked_models, 1, HARNESS_WAIT_MS));
	assert_int_equal(seen.revoked_models[0], id);
	st = status(&d);
	mi = find_model(st, "unet");
	assert_non_null(mi);
	assert_int_equal(mi->state, ROCMMEM_MODEL_EVICTED);
	assert_int_equal(mi->use_count, 0);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* ----------------------------------------------------------------------------------------- */
/* When the end is final */

static void test_graceful_stop_is_final(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--shutdown-timeout", "0", NULL};
	struct seen seen = {0};
	struct daemon_proc d;
	char path[256];
	struct stat st;
	rocmmem_lease *l;
	rocmmem_client *c;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	state_path(&d, path, sizeof(path));
	c = harness_connect(&d, "stopped");
	rocmmem_set_event_callback(c, on_event, &seen);
	l = lease(c, 2 * MiB, NULL, 0);
	assert_int_equal(stat(path, &st), 0);
	kill(d.pid, SIGTERM);
	assert_int_equal(waitpid(d.pid, NULL, 0), d.pid);
	d.pid = 0;
	/* A clean stop reclaimed everything: no state is left for a successor. */
	assert_int_equal(stat(path, &st), -1);
	assert_true(pump_until(c, ROCMMEM_DISCONNECTED, 2000) >= 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_SHUTDOWN], 1);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_DISCONNECTED], 1);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_RECONNECTING], 0);
	/* The daemon took the lease back when it stopped: the lease says so, once. */
	assert_int_equal(rocmmem_lease_revoked(l), 1);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_LEASE_REVOKED], 1);
	assert_int_equal(seen.revoked_leases[0], rocmmem_lease_id(l));
	restart(&d, args);
	usleep(200000);
	assert_int_equal(rocmmem_client_state(c), ROCMMEM_DISCONNECTED);
	/* Revoked: released without asking anyone. */
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/*
 * test_drain_deadline_revokes: a client that does not let go while the daemon drains loses its
 * lease at the deadline: the memory is punched out (its mapping reads zeros), and the library
 * marks the lease revoked with the reason, so that nothing uses it as if it still held data.
 */
static void test_drain_deadline_revokes(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--shutdown-timeout", "1", NULL};
	struct seen seen = {0};
	struct daemon_proc d;
	rocmmem_lease *l, *m;
	rocmmem_client *c;
	uint64_t model;
	const uint8_t *p;
	bool zero = true;
	struct rocmmem_model_desc desc = {.struct_size = sizeof(desc), .name = "kept", .size = 0};

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "hangs-on");
	rocmmem_set_event_callback(c, on_event, &seen);
	assert_int_equal(rocmmem_model_register(c, &desc, &model), 0);
	l = lease(c, 2 * MiB, "plain", 0);
	m = lease(c, 2 * MiB, "tagged", model);
	fill(l);
	kill(d.pid, SIGTERM);
	/* Not dispatching: the shutdown is seen only once the daemon has given up waiting. */
	assert_int_equal(waitpid(d.pid, NULL, 0), d.pid);
	d.pid = 0;
	assert_int_equal(rocmmem_lease_revoked(l), 0); /* nothing read yet */
	assert_true(pump_until(c, ROCMMEM_DISCONNECTED, 5000) >= 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_SHUTDOWN], 1);
	assert_int_equal(rocmmem_lease_revoked(l), 1);
	assert_int_equal(rocmmem_lease_revoked(m), 1);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_LEASE_REVOKED], 2);
	assert_non_null(strstr(seen.revoked_reason, "shutdown deadline"));
	p = rocmmem_lease_ptr(l);
	for (uint64_t off = 0; off < rocmmem_lease_size(l); off += 4096)
		zero = zero && p[off] == 0;
	assert_true(zero);
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_lease_release(m), 0);
	rocmmem_disconnect(c);
	harness_remove_dir(d.dir);
}

static void test_reconnection_can_be_turned_off(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct rocmmem_connect_options o = {.struct_size = sizeof(o),
					    .name = "strict",
					    .timeout_ms = 5000,
					    .flags = ROCMMEM_CONNECT_NO_RECONNECT};
	struct seen seen = {0};
	struct daemon_proc d;
	rocmmem_client *c, *e;
	rocmmem_lease *l, *le;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	o.socket_path = d.sock;
	assert_int_equal(rocmmem_connect_with(&o, &c), 0);
	rocmmem_set_event_callback(c, on_event, &seen);
	setenv("ROCMMEM_RECONNECT", "0", 1);
	e = harness_connect(&d, "env");
	unsetenv("ROCMMEM_RECONNECT");
	l = lease(c, 2 * MiB, NULL, 0);
	le = lease(e, 2 * MiB, NULL, 0);
	kill9(&d);
	assert_true(pump_until(c, ROCMMEM_DISCONNECTED, 2000) >= 0);
	assert_true(pump_until(e, ROCMMEM_DISCONNECTED, 2000) >= 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_RECONNECTING], 0);
	assert_int_equal(seen.by_type[ROCMMEM_EVENT_DISCONNECTED], 1);
	assert_int_equal(rocmmem_dispatch(c), -ECONNRESET);
	assert_int_equal(rocmmem_lease_release(l), -ECONNRESET);
	assert_int_equal(rocmmem_lease_release(le), -ECONNRESET);
	rocmmem_disconnect(c);
	rocmmem_disconnect(e);
	o.flags = 0x80;
	assert_int_equal(rocmmem_connect_with(&o, &c), -EINVAL);
	harness_daemon_stop(&d);
}

static void test_window_ends(void **state)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct rocmmem_connect_options o = {.struct_size = sizeof(o),
					    .name = "brief",
					    .timeout_ms = 5000,
					    .reconnect_window_ms = 300};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_lease *l;
	long took;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	o.socket_path = d.sock;
	assert_int_equal(rocmmem_connect_with(&o, &c), 0);
	l = lease(c, 2 * MiB, NULL, 0);
	kill9(&d);
	took = pump_until(c, ROCMMEM_DISCONNECTED, 3000);
	assert_true(took >= 250 && took < 2000);
	assert_int_equal(rocmmem_lease_release(l), -ECONNRESET);
	rocmmem_disconnect(c);
	harness_daemon_stop(&d);
}

/* ----------------------------------------------------------------------------------------- */
/* The state file itself */

static void corrupt_then_start(const char *what, void (*spoil)(const char *path),
			       const char *expect_log)
{
	static const char *const args[] = {"--budget", "64M", NULL};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_lease *l;
	char path[256];

	assert_int_equal(harness_daemon_start(&d, args), 0);
	/* The daemon listens a moment before it creates its state file: killed only once the
	 * file is there (a busy machine can stretch that moment; every spoiler below rewrites or
	 * replaces what it finds). */
	state_path(&d, path, sizeof(path));
	for (long end = harness_now_ms() + HARNESS_WAIT_MS;
	     access(path, F_OK) != 0 && harness_now_ms() < end;)
		usleep(2000);
	assert_int_equal(access(path, F_OK), 0);
	kill9(&d);
	spoil(path);
	if (harness_daemon_restart(&d, args) != 0)
		fail_msg("a %s state file kept rocmmemd from starting", what);
	/* Said once the daemon is up: it may accept connections an instant before. */
	for (long end = harness_now_ms() + HARNESS_WAIT_MS;
	     !harness_log_contains(&d, expect_log) && harness_now_ms() < end;)
		usleep(5000);
	if (!harness_log_contains(&d, expect_log))
		fail_msg("a %s state file: the log does not say '%s'", what, expect_log);
	/* It serves all the same. */
	c = harness_connect(&d, "after");
	l = lease(c, 2 * MiB, NULL, 0);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void garbage(const char *path)
{
	uint8_t buf[5000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7919u >> 3);
	write_bytes(path, buf, sizeof(buf));
}

static void truncated(const char *path)
{
	write_bytes(path, "ROCMM", 5);
}

static void foreign(const char *path)
{
	assert_int_equal(chown(path, 65534, 65534), 0);
}

static void symlinked(const char *path)
{
	unlink(path);
	assert_int_equal(symlink("/nonexistent/elsewhere", path), 0);
}

static void damaged_record(const char *path)
{
	struct statefile sf;
	struct statefile_record r = {.kind = STATEFILE_LEASE_MEMFD, .id = 7, .size = 2 * MiB};
	char why[256];
	uint32_t slot;
	int fd;

	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	slot = statefile_add(&sf, &r, NULL, 0);
	assert_true(slot > 0);
	statefile_close(&sf, false);
	/* Flip a byte of its size: the checksum no longer matches. */
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\x55", 1,
				(off_t)(64 + (slot - 1) * sizeof(struct statefile_record) +
					offsetof(struct statefile_record, size) + 2)),
			 1);
	close(fd);
}

static void test_bad_state_files(void **state)
{
	(void)state;
	corrupt_then_start("garbage", garbage, "is not a rocmmemd state file");
	corrupt_then_start("truncated", truncated, "is truncated");
	corrupt_then_start("foreign", foreign, "belongs to uid 65534");
	corrupt_then_start("symlinked", symlinked, "is a symbolic link");
	corrupt_then_start("damaged", damaged_record, "dropped 1 damaged record");
}

static void test_no_state_file_with_grace_zero(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--restart-grace", "0", NULL};
	struct daemon_proc d;
	char path[256];
	struct stat st;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	state_path(&d, path, sizeof(path));
	assert_int_equal(stat(path, &st), -1);
	assert_true(harness_log_wait(&d, "no state file", HARNESS_WAIT_MS));
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_leases_and_models_survive_sigkill),
	    cmocka_unit_test(test_calls_wait_for_the_daemon),
	    cmocka_unit_test(test_release_while_away),
	    cmocka_unit_test(test_forged_redeclarations_are_refused),
	    cmocka_unit_test(test_dead_holder_is_forgotten_after_grace),
	    cmocka_unit_test(test_grace_period_lists_what_awaits),
	    cmocka_unit_test(test_smaller_budget_after_restart),
	    cmocka_unit_test(test_lost_state_file_refuses_leases),
	    cmocka_unit_test(test_model_ids_are_mapped),
	    cmocka_unit_test(test_max_hold_rearmed_after_restart),
	    cmocka_unit_test(test_graceful_stop_is_final),
	    cmocka_unit_test(test_drain_deadline_revokes),
	    cmocka_unit_test(test_reconnection_can_be_turned_off),
	    cmocka_unit_test(test_window_ends),
	    cmocka_unit_test(test_bad_state_files),
	    cmocka_unit_test(test_no_state_file_with_grace_zero),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
