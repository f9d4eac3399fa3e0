/* SPDX-License-Identifier: MIT */
/* test_residency_edges.c: owns the edge cases of model residency between real client processes:
 * exclusive classes, priorities and pins, partial eviction, revocation, dying owners, tagged
 * leases, evict acks, timeouts, resize, unregister and first-come-first-served waiters. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

/* Generous bounds for things that should take milliseconds; never slept, only polled. */
#define REPLY_MS 15000
#define SOON_MS 3000

static struct daemon_proc daemon_;
static uint64_t budget_;

/* ----------------------------------------------------------------------------------------- */
/* Host processes: a librocmmem client in a child, driven over pipes. */

enum host_mode {
	MODE_ACK = 1,	   /* on an evict request: release the model's tagged leases, ack */
	MODE_ACK_KEEP = 2, /* ack at once, keeping the tagged leases (the daemon revokes them) */
	MODE_HOLD = 3,	   /* only report the request: the parent decides when (if) to ack */
};

/* Child -> parent: {kind, a, b, c}. */
enum {
	MSG_REPLY = 1, /* a foreground command's result: a = rc, b = value */
	MSG_EVENT = 2, /* a = event type, b = model or lease id, c = reason flags */
	MSG_ACKED = 3, /* the callback acked: a = model id, b = rc */
	MSG_BG = 4,    /* a background command's result: a = rc, b = value, c = token */
};

#define REASON_GIVEN 1
#define REASON_UNLOAD 2

enum {
	CMD_REGISTER = 1, /* a name (a pointer valid in the child), b class, c size, d priority,
			   * e pinned -> model id */
	CMD_ACQUIRE,	  /* a model, b timeout */
	CMD_RELEASE,	  /* a model */
	CMD_RESIZE,	  /* a model, b reservation, c timeout */
	CMD_UNREGISTER,	  /* a model */
	CMD_ACK,	  /* a model */
	CMD_LEASE,	  /* a size, b model, c timeout -> lease id */
	CMD_LEASE_FREE,	  /* a lease id */
	CMD_MODE,	  /* a mode, b quiet (events only delivered inside waits) */
	CMD_SYNC,	  /* deliver what has arrived, then reply */
	CMD_ERROR_HAS,	  /* a text (a pointer): 1 if the last failure's message contains it */
	CMD_EXIT,
};

struct cmd {
	int64_t op, a, b, c, d, e;
	int64_t bg; /* 0: run now and reply; else run in a thread and answer MSG_BG with it */
};

#define TEXT(s) ((int64_t)(intptr_t)(s))

enum { CHILD_NO_CONNECT = 10, CHILD_PIPE, CHILD_POLL, CHILD_DISCONNECTED, CHILD_THREAD };

#define HOST_MAX_LEASES 32

/* The child's side (one host per process). */
static struct {
	rocmmem_client *c;
	int out;
	pthread_mutex_t lock; /* the lease table, the mode, the last error */
	int mode;
	bool quiet;
	struct {
		rocmmem_lease *l;
		uint64_t id, model;
	} leases[HOST_MAX_LEASES];
	char error[512];
} hp = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void put_msg(int64_t kind, int64_t a, int64_t b, int64_t c)
{
	int64_t m[4] = {kind, a, b, c};

	/* 32 bytes: below PIPE_BUF, so the threads' messages never interleave. */
	if (write(hp.out, m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(CHILD_PIPE);
}

static void remember_error(void)
{
	const char *e = rocmmem_last_error();

	pthread_mutex_lock(&hp.lock);
	snprintf(hp.error, sizeof(hp.error), "%s", e);
	pthread_mutex_unlock(&hp.lock);
}

static void lease_add(rocmmem_lease *l, uint64_t model)
{
	pthread_mutex_lock(&hp.lock);
	for (int i = 0; i < HOST_MAX_LEASES; i++) {
		if (!hp.leases[i].l) {
			hp.leases[i].l = l;
			hp.leases[i].id = rocmmem_lease_id(l);
			hp.leases[i].model = model;
			break;
		}
	}
	pthread_mutex_unlock(&hp.lock);
}

/* lease_take removes a lease from the table (by id, or the first of a model). */
static rocmmem_lease *lease_take(uint64_t id, uint64_t model)
{
	rocmmem_lease *l = NULL;

	pthread_mutex_lock(&hp.lock);
	for (int i = 0; i < HOST_MAX_LEASES && !l; i++) {
		if (hp.leases[i].l &&
		    ((id && hp.leases[i].id == id) || (model && hp.leases[i].model == model))) {
			l = hp.leases[i].l;
			hp.leases[i].l = NULL;
		}
	}
	pthread_mutex_unlock(&hp.lock);
	return l;
}

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	int64_t flags =
	    (ev->reason[0] ? REASON_GIVEN : 0) | (strstr(ev->reason, "unload") ? REASON_UNLOAD : 0);
	uint64_t id = ev->type == ROCMMEM_EVENT_LEASE_REVOKED ? ev->lease_id : ev->model_id;
	int mode;

	(void)userdata;
	put_msg(MSG_EVENT, ev->type, (int64_t)id, flags);
	if (ev->type != ROCMMEM_EVENT_EVICT_REQUEST)
		return;
	pthread_mutex_lock(&hp.lock);
	mode = hp.mode;
	pthread_mutex_unlock(&hp.lock);
	if (mode == MODE_HOLD)
		return;
	if (mode == MODE_ACK) {
		rocmmem_lease *l;

		/* ... free the model's tensors, then its leases ... */
		while ((l = lease_take(0, ev->model_id)))
			rocmmem_lease_release(l);
	}
	put_msg(MSG_ACKED, (int64_t)ev->model_id, rocmmem_model_evict_ack(c, ev->model_id), 0);
}

static void run(const struct cmd *k, int64_t *rc, int64_t *val)
{
	*rc = 0;
	*val = 0;
	switch (k->op) {
	case CMD_REGISTER: {
		struct rocmmem_model_desc d = {
		    .struct_size = sizeof(d),
		    .name = (const char *)(intptr_t)k->a,
		    .model_class = (enum rocmmem_model_class)k->b,
		    .size = (uint64_t)k->c,
		    .priority = (int32_t)k->d,
		    .pinned = (int)k->e,
		};
		uint64_t id = 0;

		*rc = rocmmem_model_register(hp.c, &d, &id);
		*val = (int64_t)id;
		break;
	}
	case CMD_ACQUIRE:
		*rc = rocmmem_model_acquire(hp.c, (uint64_t)k->a, k->b);
		break;
	case CMD_RELEASE:
		*rc = rocmmem_model_release(hp.c, (uint64_t)k->a);
		break;
	case CMD_RESIZE:
		*rc = rocmmem_model_resize(hp.c, (uint64_t)k->a, (uint64_t)k->b, k->c);
		break;
	case CMD_UNREGISTER:
		*rc = rocmmem_model_unregister(hp.c, (uint64_t)k->a);
		break;
	case CMD_ACK:
		*rc = rocmmem_model_evict_ack(hp.c, (uint64_t)k->a);
		break;
	case CMD_LEASE: {
		struct rocmmem_lease_request r = {
		    .struct_size = sizeof(r),
		    .size = (uint64_t)k->a,
		    .model_id = (uint64_t)k->b,
		    .timeout_ms = k->c,
		    .tag = "edge",
		};
		rocmmem_lease *l = NULL;

		*rc = rocmmem_lease_acquire(hp.c, &r, &l);
		if (*rc == 0) {
			*val = (int64_t)rocmmem_lease_id(l);
			lease_add(l, r.model_id);
		}
		break;
	}
	case CMD_LEASE_FREE: {
		rocmmem_lease *l = lease_take((uint64_t)k->a, 0);

		/* -ECHILD: the test asked for a lease this host does not hold. */
		*rc = l ? rocmmem_lease_release(l) : -ECHILD;
		break;
	}
	case CMD_MODE:
		pthread_mutex_lock(&hp.lock);
		hp.mode = (int)k->a;
		hp.quiet = k->b != 0;
		pthread_mutex_unlock(&hp.lock);
		break;
	case CMD_SYNC:
		if (!hp.quiet)
			*rc = rocmmem_dispatch(hp.c) < 0 ? -ECONNRESET : 0;
		break;
	case CMD_ERROR_HAS:
		pthread_mutex_lock(&hp.lock);
		*rc = strstr(hp.error, (const char *)(intptr_t)k->a) != NULL;
		pthread_mutex_unlock(&hp.lock);
		return;
	default:
		*rc = -ENOSYS;
		break;
	}
	if (*rc < 0)
		remember_error();
}

static void *bg_main(void *p)
{
	struct cmd *k = p;
	int64_t rc, val;

	run(k, &rc, &val);
	put_msg(MSG_BG, rc, val, k->bg);
	free(k);
	return NULL;
}

static int host_main(void *arg, int in, int out)
{
	const char *name = arg;

	hp.out = out;
	hp.mode = MODE_ACK;
	if (rocmmem_connect(daemon_.sock, name, 5000, &hp.c) != 0)
		return CHILD_NO_CONNECT;
	rocmmem_set_event_callback(hp.c, on_event, NULL);
	put_msg(MSG_REPLY, 0, getpid(), 0);
	for (;;) {
		struct pollfd p[2] = {{.fd = in, .events = POLLIN},
				      {.fd = rocmmem_event_fd(hp.c), .events = POLLIN}};
		struct cmd k;
		ssize_t n;

		if (poll(p, hp.quiet ? 1 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return CHILD_POLL;
		}
		if (!hp.quiet && p[1].revents) {
			int got = rocmmem_dispatch(hp.c);

			if (got < 0)
				return CHILD_DISCONNECTED;
			if (got == 0) {
				/* Another thread of ours is reading: let it. */
				struct timespec ts = {.tv_nsec = 1000000};

				nanosleep(&ts, NULL);
			}
		}
		if (!p[0].revents)
			continue;
		n = read(in, &k, sizeof(k));
		if (n == 0 || (n == (ssize_t)sizeof(k) && k.op == CMD_EXIT))
			break;
		if (n != (ssize_t)sizeof(k))
			return CHILD_PIPE;
		if (k.bg) {
			struct cmd *copy = malloc(sizeof(*copy));
			pthread_t t;

			if (!copy)
				return CHILD_THREAD;
			*copy = k;
			if (pthread_create(&t, NULL, bg_main, copy) != 0)
				return CHILD_THREAD;
			pthread_detach(t);
		} else {
			int64_t rc, val;

			run(&k, &rc, &val);
			put_msg(MSG_REPLY, rc, val, 0);
		}
	}
	rocmmem_disconnect(hp.c);
	return 0;
}

/* The parent's side. */
#define HOST_QUEUE 256

struct host {
	struct child ch;
	const char *name;
	pid_t pid;
	int64_t q[HOST_QUEUE][4]; /* messages read while looking for another kind */
	size_t nq;
};

static struct host *hosts_[16];

static void host_forget(struct host *h)
{
	for (size_t i = 0; i < sizeof(hosts_) / sizeof(hosts_[0]); i++)
		if (hosts_[i] == h)
			hosts_[i] = NULL;
}

static void host_start(struct host *h, const char *name)
{
	int64_t m[4];
	size_t got = 0;

	memset(h, 0, sizeof(*h));
	h->name = name;
	assert_int_equal(child_start(&h->ch, host_main, (void *)(uintptr_t)name), 0);
	for (size_t i = 0; i < sizeof(hosts_) / sizeof(hosts_[0]); i++) {
		if (!hosts_[i]) {
			hosts_[i] = h;
			break;
		}
	}
	for (int i = 0; i < 4; i++)
		if (!pipe_get(h->ch.from_child, &m[i], 10000))
			fail_msg("host %s did not start", name);
	got = (size_t)m[0];
	assert_int_equal(got, MSG_REPLY);
	assert_int_equal(m[1], 0);
	h->pid = (pid_t)m[2];
	assert_int_equal(h->pid, h->ch.pid);
}

/* host_read reads one message within timeout_ms; false on timeout; fails if the host died. */
static bool host_read(struct host *h, int64_t m[4], long timeout_ms)
{
	struct pollfd p = {.fd = h->ch.from_child, .events = POLLIN};
	size_t got = 0;

	if (poll(&p, 1, (int)timeout_ms) <= 0)
		return false;
	while (got < 4 * sizeof(int64_t)) {
		ssize_t n = read(h->ch.from_child, (char *)m + got, 4 * sizeof(int64_t) - got);

		if (n <= 0)
			fail_msg("host %s (pid %d) is gone", h->name, (int)h->pid);
		got += (size_t)n;
	}
	return true;
}

static void host_queue(struct host *h, const int64_t m[4])
{
	assert_true(h->nq < HOST_QUEUE);
	memcpy(h->q[h->nq++], m, 4 * sizeof(int64_t));
}

/* What host_take looks for: a kind, and the fields of it that must have given values. */
struct want {
	int64_t kind;
	bool has[3];
	int64_t v[3];
};

static bool matches(const int64_t m[4], const struct want *w)
{
	if (m[0] != w->kind)
		return false;
	for (int i = 0; i < 3; i++)
		if (w->has[i] && m[i + 1] != w->v[i])
			return false;
	return true;
}

/* host_take finds (and removes) the first message matching, queued or arriving in time. */
static bool host_take(struct host *h, const struct want *w, long timeout_ms, int64_t out[4])
{
	long end = harness_now_ms() + timeout_ms;

	for (size_t i = 0; i < h->nq; i++) {
		if (matches(h->q[i], w)) {
			memcpy(out, h->q[i], 4 * sizeof(int64_t));
			memmove(h->q[i], h->q[i + 1], (h->nq - i - 1) * sizeof(h->q[0]));
			h->nq--;
			return true;
		}
	}
	for (;;) {
		long left = end - harness_now_ms();
		int64_t m[4];

		if (!host_read(h, m, left > 0 ? left : 0))
			return false;
		if (matches(m, w)) {
			memcpy(out, m, 4 * sizeof(int64_t));
			return true;
		}
		host_queue(h, m);
	}
}

static void host_send(struct host *h, int64_t bg, int64_t op, int64_t a, int64_t b, int64_t c)
{
	struct cmd k = {.op = op, .a = a, .b = b, .c = c, .bg = bg};

	assert_int_equal(write(h->ch.to_child, &k, sizeof(k)), sizeof(k));
}

/* host_reply waits for the foreground command's result: rc, and the value in *val. */
static int64_t host_reply(struct host *h, int64_t *val)
{
	int64_t m[4];

	if (!host_take(h, &(struct want){.kind = MSG_REPLY}, REPLY_MS, m))
		fail_msg("host %s did not answer within %d ms", h->name, REPLY_MS);
	if (val)
		*val = m[2];
	return m[1];
}

/* host_try_reply: the foreground result if it has arrived within timeout_ms (0: already). */
static bool host_try_reply(struct host *h, long timeout_ms, int64_t *rc)
{
	int64_t m[4];

	if (!host_take(h, &(struct want){.kind = MSG_REPLY}, timeout_ms, m))
		return false;
	*rc = m[1];
	return true;
}

static int64_t host_call(struct host *h, int64_t op, int64_t a, int64_t b, int64_t c)
{
	host_send(h, 0, op, a, b, c);
	return host_reply(h, NULL);
}

static int64_t host_bg_result(struct host *h, int64_t token, long timeout_ms)
{
	struct want w = {.kind = MSG_BG, .has = {false, false, true}, .v = {0, 0, token}};
	int64_t m[4];

	if (!host_take(h, &w, timeout_ms, m))
		fail_msg("host %s: background request %lld did not end within %ld ms", h->name,
			 (long long)token, timeout_ms);
	return m[1];
}

/* host_event waits for an event of type about id (0: any); returns its reason flags. */
static int64_t host_event(struct host *h, int type, uint64_t id, long timeout_ms)
{
	struct want w = {.kind = MSG_EVENT, .has = {true, id != 0}, .v = {type, (int64_t)id}};
	int64_t m[4];

	if (!host_take(h, &w, timeout_ms, m))
		fail_msg("host %s got no event %d for %llu within %ld ms", h->name, type,
			 (unsigned long long)id, timeout_ms);
	return m[3];
}

/* host_acked waits for the callback's ack of model and returns the ack's result. */
static int64_t host_acked(struct host *h, uint64_t model)
{
	struct want w = {.kind = MSG_ACKED, .has = {true}, .v = {(int64_t)model}};
	int64_t m[4];

	if (!host_take(h, &w, REPLY_MS, m))
		fail_msg("host %s never acked model %llu", h->name, (unsigned long long)model);
	return m[2];
}

/* host_count counts queued events of type (after host_sync), without taking them. */
static unsigned host_count(const struct host *h, int type)
{
	unsigned n = 0;

	for (size_t i = 0; i < h->nq; i++)
		if (h->q[i][0] == MSG_EVENT && h->q[i][1] == type)
			n++;
	return n;
}

/* host_sync has the host deliver whatever the daemon has sent it, into our queue. */
static void host_sync(struct host *h)
{
	assert_int_equal(host_call(h, CMD_SYNC, 0, 0, 0), 0);
}

static bool host_error_has(struct host *h, const char *text)
{
	return host_call(h, CMD_ERROR_HAS, TEXT(text), 0, 0) == 1;
}

static void host_mode(struct host *h, int mode, bool quiet)
{
	assert_int_equal(host_call(h, CMD_MODE, mode, quiet, 0), 0);
}

static uint64_t host_register(struct host *h, const char *name, enum rocmmem_model_class cls,
			      uint64_t size, int32_t priority, int pinned)
{
	struct cmd k = {.op = CMD_REGISTER,
			.a = TEXT(name),
			.b = cls,
			.c = (int64_t)size,
			.d = priority,
			.e = pinned};
	int64_t id = 0, rc;

	assert_int_equal(write(h->ch.to_child, &k, sizeof(k)), sizeof(k));
	rc = host_reply(h, &id);
	if (rc != 0)
		fail_msg("host %s could not register '%s': %lld", h->name, name, (long long)rc);
	assert_true(id > 0);
	return (uint64_t)id;
}

static int64_t host_acquire(struct host *h, uint64_t model, int64_t timeout_ms)
{
	return host_call(h, CMD_ACQUIRE, (int64_t)model, timeout_ms, 0);
}

static int64_t host_release(struct host *h, uint64_t model)
{
	return host_call(h, CMD_RELEASE, (int64_t)model, 0, 0);
}

static int64_t host_ack(struct host *h, uint64_t model)
{
	return host_call(h, CMD_ACK, (int64_t)model, 0, 0);
}

/* host_lease acquires a lease (tagged with model unless 0) and returns its id, or fails. */
static uint64_t host_lease(struct host *h, uint64_t size, uint64_t model, int64_t timeout_ms)
{
	int64_t id = 0, rc;

	host_send(h, 0, CMD_LEASE, (int64_t)size, (int64_t)model, timeout_ms);
	rc = host_reply(h, &id);
	if (rc != 0)
		fail_msg("host %s: lease of %llu bytes refused: %lld", h->name,
			 (unsigned long long)size, (long long)rc);
	return (uint64_t)id;
}

static int64_t host_lease_free(struct host *h, uint64_t lease)
{
	return host_call(h, CMD_LEASE_FREE, (int64_t)lease, 0, 0);
}

/* host_resident makes a model resident and idle: acquire (it must fit now), release. */
static void host_resident(struct host *h, uint64_t model)
{
	assert_int_equal(host_acquire(h, model, 0), 0);
	assert_int_equal(host_release(h, model), 0);
}

static void host_stop(struct host *h)
{
	host_send(h, 0, CMD_EXIT, 0, 0, 0);
	assert_int_equal(child_wait(&h->ch, 10000), 0);
	host_forget(h);
}

static void host_kill(struct host *h)
{
	child_kill(&h->ch);
	host_forget(h);
}

/* ----------------------------------------------------------------------------------------- */
/* The daemon's view. */

static rocmmem_status *snap(void)
{
	rocmmem_client *c = harness_connect(&daemon_, "auditor");
	rocmmem_status *st = NULL;
	int err = rocmmem_status_get(c, &st);

	rocmmem_disconnect(c);
	if (err)
		fail_msg("status failed: %s", rocmmem_strerror(err));
	return st;
}

static const struct rocmmem_model_info *model_in(const rocmmem_status *st, uint64_t id)
{
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (rocmmem_status_model(st, i)->id == id)
			return rocmmem_status_model(st, i);
	return NULL;
}

static const char *state_name(enum rocmmem_model_state s)
{
	static const char *const names[] = {"idle", "in use", "evicting", "evicted", "waiting"};

	return (unsigned)s < 5 ? names[s] : "?";
}

/* expect_model checks a model's state, resident bytes and (when >= 0) evictions. */
#define expect_model(...) expect_model_at(__LINE__, __VA_ARGS__)

static void expect_model_at(int line, uint64_t id, enum rocmmem_model_state state, uint64_t bytes,
			    int64_t evictions)
{
	rocmmem_status *st = snap();
	const struct rocmmem_model_info *found = model_in(st, id);
	struct rocmmem_model_info m = {0};
	char name[80] = "";

	/* Copied out and freed before any failure: cmocka's failures do not return. */
	if (found) {
		m = *found;
		snprintf(name, sizeof(name), "%s", found->name);
	}
	rocmmem_status_free(st);
	if (!found)
		fail_msg("line %d: model %llu is not in the status", line, (unsigned long long)id);
	if (m.state != state || m.bytes != bytes ||
	    (evictions >= 0 && m.evictions != (uint64_t)evictions))
		fail_msg("line %d: model %llu '%s': %s, %llu MiB (reservation %llu, leases %llu), "
			 "%llu evictions; expected %s, %llu MiB, %lld evictions",
			 line, (unsigned long long)id, name, state_name(m.state),
			 (unsigned long long)(m.bytes / MiB),
			 (unsigned long long)(m.reservation_bytes / MiB),
			 (unsigned long long)(m.lease_bytes / MiB), (unsigned long long)m.evictions,
			 state_name(state), (unsigned long long)(bytes / MiB),
			 (long long)evictions);
}

static void wait_model_state(uint64_t id, enum rocmmem_model_state state, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	for (;;) {
		rocmmem_status *st = snap();
		const struct rocmmem_model_info *m = model_in(st, id);
		enum rocmmem_model_state now = m ? m->state : (enum rocmmem_model_state) - 1;

		rocmmem_status_free(st);
		if (now == state)
			return;
		if (harness_now_ms() > end)
			fail_msg("model %llu is %s, never became %s", (unsigned long long)id,
				 state_name(now), state_name(state));
		usleep(2000);
	}
}

/* wait_idle_ms waits until the daemon's clock has moved ms past the model's last use. */
static void wait_idle_ms(uint64_t id, uint64_t ms)
{
	long end = harness_now_ms() + SOON_MS;

	for (;;) {
		rocmmem_status *st = snap();
		const struct rocmmem_model_info *m = model_in(st, id);
		uint64_t idle = m ? m->idle_ms : 0;

		rocmmem_status_free(st);
		if (idle >= ms)
			return;
		if (harness_now_ms() > end)
			fail_msg("model %llu never became idle for %llu ms", (unsigned long long)id,
				 (unsigned long long)ms);
		usleep(1000);
	}
}

static void wait_waiters(uint32_t want)
{
	long end = harness_now_ms() + SOON_MS;

	for (;;) {
		rocmmem_status *st = snap();
		uint32_t n = rocmmem_status_device(st, 0)->waiters;

		rocmmem_status_free(st);
		if (n == want)
			return;
		if (harness_now_ms() > end)
			fail_msg("%u requests wait, expected %u", n, want);
		usleep(2000);
	}
}

static uint64_t free_bytes(void)
{
	rocmmem_status *st = snap();
	uint64_t f = rocmmem_status_device(st, 0)->free_bytes;

	rocmmem_status_free(st);
	return f;
}

/*
 * books_balance: the device's reserved + leased bytes are the models' reservations plus the
 * leases' bytes as status lists them; free is what the budget leaves; each model's bytes are
 * its reservation plus the leases tagged with it.
 */
static bool books_balance(const rocmmem_status *st, char *why, size_t len)
{
	const struct rocmmem_device_info *d = rocmmem_status_device(st, 0);
	uint64_t reserved = 0, leased = 0;

	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);
		uint64_t tagged = 0;

		reserved += m->reservation_bytes;
		for (size_t j = 0; j < rocmmem_status_lease_count(st); j++)
			if (rocmmem_status_lease(st, j)->model_id == m->id)
				tagged += rocmmem_status_lease(st, j)->bytes;
		if (m->lease_bytes != tagged || m->bytes != m->reservation_bytes + m->lease_bytes) {
			snprintf(why, len,
				 "model %llu '%s' shows %llu bytes, %llu of leases, %llu reserved; "
				 "its tagged leases hold %llu",
				 (unsigned long long)m->id, m->name, (unsigned long long)m->bytes,
				 (unsigned long long)m->lease_bytes,
				 (unsigned long long)m->reservation_bytes,
				 (unsigned long long)tagged);
			return false;
		}
	}
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++)
		leased += rocmmem_status_lease(st, i)->bytes;
	if (d->reserved_bytes + d->leased_bytes != reserved + leased ||
	    d->reserved_bytes != reserved || d->budget_bytes != budget_ ||
	    d->free_bytes != d->budget_bytes - d->leased_bytes - d->reserved_bytes) {
		snprintf(why, len,
			 "device reserved %llu + leased %llu (free %llu of %llu); models reserve "
			 "%llu, leases hold %llu",
			 (unsigned long long)d->reserved_bytes, (unsigned long long)d->leased_bytes,
			 (unsigned long long)d->free_bytes, (unsigned long long)d->budget_bytes,
			 (unsigned long long)reserved, (unsigned long long)leased);
		return false;
	}
	return true;
}

/* check_books polls (freeing a lease is asynchronous) until the books balance. */
static void check_books(void)
{
	long end = harness_now_ms() + SOON_MS;
	char why[512] = "";

	for (;;) {
		rocmmem_status *st = snap();
		bool ok = books_balance(st, why, sizeof(why));

		rocmmem_status_free(st);
		if (ok)
			return;
		if (harness_now_ms() > end)
			fail_msg("the books do not balance: %s", why);
		usleep(2000);
	}
}

/* ----------------------------------------------------------------------------------------- */
/* Fixture: a daemon per test, started with the test's arguments (its initial state). */

static const char *const args_long[] = {"--budget", "64M", "--evict-deadline", "10", NULL};
static const char *const args_revoke[] = {"--budget", "64M", "--evict-deadline", "1", NULL};
static const char *const args_80[] = {"--budget", "80M", "--evict-deadline", "10", NULL};
static const char *const args_exclusive[] = {
    "--budget", "64M", "--evict-deadline", "10", "--exclusive", "transformer,vae", NULL};
static const char *const args_exclusive_dev0[] = {
    "--budget", "64M", "--evict-deadline", "10", "--exclusive", "0:transformer,vae", NULL};

static int setup(void **state)
{
	rocmmem_status *st;
	rocmmem_client *c = NULL;

	if (harness_daemon_start(&daemon_, (const char *const *)*state) != 0)
		return -1;
	if (rocmmem_connect(daemon_.sock, "auditor", 5000, &c) != 0)
		return -1;
	if (rocmmem_status_get(c, &st) != 0) {
		rocmmem_disconnect(c);
		return -1;
	}
	budget_ = rocmmem_status_device(st, 0)->budget_bytes;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return 0;
}

/* teardown: every host gone, then the books balance at zero: nothing reserved, leased,
 * registered or waiting, and the whole budget free. */
static int teardown(void **state)
{
	long end = harness_now_ms() + SOON_MS;
	char why[512] = "";
	bool ok = false;

	(void)state;
	for (size_t i = 0; i < sizeof(hosts_) / sizeof(hosts_[0]); i++) {
		if (hosts_[i]) {
			child_kill(&hosts_[i]->ch);
			hosts_[i] = NULL;
		}
	}
	while (!ok) {
		rocmmem_client *c = NULL;
		rocmmem_status *st = NULL;

		if (rocmmem_connect(daemon_.sock, "auditor", 5000, &c) == 0 &&
		    rocmmem_status_get(c, &st) == 0) {
			const struct rocmmem_device_info *d = rocmmem_status_device(st, 0);

			ok = books_balance(st, why, sizeof(why));
			if (ok &&
			    (rocmmem_status_client_count(st) != 1 ||
			     rocmmem_status_model_count(st) || rocmmem_status_lease_count(st) ||
			     rocmmem_status_waiter_count(st) || d->reserved_bytes ||
			     d->leased_bytes || d->free_bytes != budget_)) {
				snprintf(
				    why, sizeof(why),
				    "%zu clients, %zu models, %zu leases, %zu waiters, %llu "
				    "reserved, %llu leased, %llu of %llu free",
				    rocmmem_status_client_count(st) - 1,
				    rocmmem_status_model_count(st), rocmmem_status_lease_count(st),
				    rocmmem_status_waiter_count(st),
				    (unsigned long long)d->reserved_bytes,
				    (unsigned long long)d->leased_bytes,
				    (unsigned long long)d->free_bytes, (unsigned long long)budget_);
				ok = false;
			}
		}
		rocmmem_status_free(st);
		rocmmem_disconnect(c);
		if (!ok && harness_now_ms() > end)
			break;
		if (!ok)
			usleep(5000);
	}
	if (!ok)
		print_error("after the test, with every client gone: %s\n", why);
	if (harness_daemon_stop(&daemon_) != 0) {
		print_error("rocmmemd did not stop cleanly\n");
		ok = false;
	}
	return ok ? 0 : -1;
}

/* ----------------------------------------------------------------------------------------- */
/* Exclusive classes */

/*
 * --exclusive transformer,vae: a resident idle transformer is evicted for a VAE although the
 * budget has room for both; the VAE is granted only after the ack. Models of one class in the
 * set co-reside; classes outside it are unaffected. Same for the device-specific spec.
 */
static void test_exclusive_even_when_both_fit(void **state)
{
	struct host a, b;
	uint64_t t, v, v2, te, other, pinned_t;
	int64_t rc;
	rocmmem_status *st;
	const struct rocmmem_device_info *d;

	(void)state;
	host_start(&a, "excl-a");
	host_start(&b, "excl-b");
	host_mode(&a, MODE_HOLD, false);
	t = host_register(&a, "transformer", ROCMMEM_MODEL_TRANSFORMER, 16 * MiB, 0, 0);
	host_resident(&a, t);
	v = host_register(&b, "vae", ROCMMEM_MODEL_VAE, 16 * MiB, 0, 0);
	host_send(&b, 0, CMD_ACQUIRE, (int64_t)v, 10000, 0);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, t, SOON_MS);
	/* Asked although 48 MiB are free; the VAE waits for the ack. */
	st = snap();
	d = rocmmem_status_device(st, 0);
	assert_int_equal(d->free_bytes, 48 * MiB);
	assert_int_equal(d->waiters, 1);
	assert_int_equal(model_in(st, t)->state, ROCMMEM_MODEL_EVICTING);
	assert_int_equal(model_in(st, v)->state, ROCMMEM_MODEL_WAITING);
	assert_int_equal(rocmmem_status_waiter(st, 0)->model_id, v);
	rocmmem_status_free(st);
	assert_false(host_try_reply(&b, 0, &rc));
	assert_int_equal(host_ack(&a, t), 0);
	assert_int_equal(host_reply(&b, NULL), 0);
	expect_model(t, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(v, ROCMMEM_MODEL_IN_USE, 16 * MiB, 0);
	check_books();

	/* Two of the same class in the set co-reside: granted at once, nobody asked. */
	v2 = host_register(&b, "vae-2", ROCMMEM_MODEL_VAE, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&b, v2, 0), 0);
	/* Classes outside the set are unaffected. */
	te = host_register(&a, "text-encoder", ROCMMEM_MODEL_TEXT_ENCODER, 8 * MiB, 0, 0);
	assert_int_equal(host_acquire(&a, te, 0), 0);
	other = host_register(&a, "other", ROCMMEM_MODEL_OTHER, 8 * MiB, 0, 0);
	host_resident(&a, other);
	/* 16 MiB free fits the transformer by bytes, but two VAEs in use exclude it. */
	assert_int_equal(free_bytes(), 16 * MiB);
	assert_int_equal(host_acquire(&a, t, 0), -ENOMEM);
	check_books();

	/* Once the VAEs are idle, the transformer evicts both, and nothing else. */
	host_mode(&b, MODE_ACK, false);
	assert_int_equal(host_release(&b, v), 0);
	assert_int_equal(host_release(&b, v2), 0);
	assert_int_equal(host_acquire(&a, t, 10000), 0);
	assert_int_equal(host_acked(&b, v), 0);
	assert_int_equal(host_acked(&b, v2), 0);
	expect_model(v, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(v2, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(te, ROCMMEM_MODEL_IN_USE, 8 * MiB, 0);
	expect_model(other, ROCMMEM_MODEL_IDLE, 8 * MiB, 0);
	expect_model(t, ROCMMEM_MODEL_IN_USE, 16 * MiB, 1);
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_EVICT_REQUEST), 0);

	/* A pinned transformer resident: a VAE could never become resident: refused at once. */
	assert_int_equal(host_release(&a, t), 0);
	pinned_t =
	    host_register(&a, "pinned-transformer", ROCMMEM_MODEL_TRANSFORMER, 8 * MiB, 0, 1);
	host_resident(&a, pinned_t);
	assert_int_equal(host_acquire(&b, v, 10000), -EDEADLK);
	assert_true(host_error_has(&b, "pinned"));
	check_books();
	host_stop(&a);
	host_stop(&b);
}

/* The same with the device-specific spec 0:transformer,vae, on device 0. */
static void test_exclusive_on_device_0(void **state)
{
	test_exclusive_even_when_both_fit(state);
}

/* ----------------------------------------------------------------------------------------- */
/* Priorities and pins */

static void test_priorities_and_pins(void **state)
{
	struct host a, b;
	uint64_t p0, p5a, p5b, pin, x, y, z;
	long start;

	(void)state;
	host_start(&a, "prio-owner");
	host_start(&b, "prio-requester");
	p0 = host_register(&a, "prio-0", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	p5a = host_register(&a, "prio-5-a", ROCMMEM_MODEL_OTHER, 16 * MiB, 5, 0);
	p5b = host_register(&a, "prio-5-b", ROCMMEM_MODEL_OTHER, 16 * MiB, 5, 0);
	/* The lowest priority and least recently used of all, but pinned. */
	pin = host_register(&a, "pinned", ROCMMEM_MODEL_OTHER, 16 * MiB, -10, 1);
	host_resident(&a, pin);
	host_resident(&a, p0);
	/* The two 5s used at different times: the younger id used last, so that least recently
	 * used and oldest registered disagree. */
	host_resident(&a, p5b);
	wait_idle_ms(p5b, 3);
	host_resident(&a, p5a);
	assert_int_equal(free_bytes(), 0);

	/* Room for exactly one: the priority-0 model goes. */
	x = host_register(&b, "x", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&b, x, 10000), 0);
	assert_int_equal(host_acked(&a, p0), 0);
	expect_model(p0, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(p5a, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(p5b, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(pin, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);

	/* One more: the least recently used of the two 5s. */
	y = host_register(&b, "y", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&b, y, 10000), 0);
	assert_int_equal(host_acked(&a, p5b), 0);
	expect_model(p5b, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(p5a, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(pin, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	check_books();

	/* 56 MiB fits only without the pinned 16 MiB: refused at once, nobody asked. */
	assert_int_equal(host_release(&b, x), 0);
	assert_int_equal(host_release(&b, y), 0);
	z = host_register(&b, "z", ROCMMEM_MODEL_OTHER, 56 * MiB, 0, 0);
	start = harness_now_ms();
	assert_int_equal(host_acquire(&b, z, 10000), -E2BIG);
	assert_true(host_error_has(&b, "pinned"));
	host_send(&b, 0, CMD_LEASE, (int64_t)(56 * MiB), 0, 10000);
	assert_int_equal(host_reply(&b, NULL), -E2BIG);
	assert_true(host_error_has(&b, "pinned"));
	assert_true(harness_now_ms() - start < 1000);
	host_sync(&a);
	host_sync(&b);
	/* Two evict requests in all, and never for the pinned model. */
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_EVICT_REQUEST), 2);
	assert_int_equal(host_count(&b, ROCMMEM_EVENT_EVICT_REQUEST), 0);
	expect_model(pin, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(p5a, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(x, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	check_books();
	host_stop(&a);
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Only as much as needed */

static void test_only_as_much_as_needed(void **state)
{
	struct host a, b;
	uint64_t m1, m2, m3, m4, w, lease;

	(void)state;
	host_start(&a, "many-models");
	host_start(&b, "needs-24M");
	/* 80 MiB budget: four idle 16 MiB models and 16 MiB free. */
	m1 = host_register(&a, "m1-prio-1", ROCMMEM_MODEL_OTHER, 16 * MiB, 1, 0);
	m2 = host_register(&a, "m2-prio-0-recent", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	m3 = host_register(&a, "m3-prio-0-lru", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	m4 = host_register(&a, "m4-prio-2", ROCMMEM_MODEL_OTHER, 16 * MiB, 2, 0);
	host_resident(&a, m3);
	wait_idle_ms(m3, 3);
	host_resident(&a, m2);
	host_resident(&a, m1);
	host_resident(&a, m4);
	assert_int_equal(free_bytes(), 16 * MiB);

	/* A 24 MiB lease needs 8 MiB more: one model, the lowest priority least recently used. */
	lease = host_lease(&b, 24 * MiB, 0, 10000);
	assert_int_equal(host_acked(&a, m3), 0);
	expect_model(m3, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(m1, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(m2, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(m4, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	assert_int_equal(free_bytes(), 8 * MiB);

	/* A 24 MiB model needs 16 MiB more: again exactly one, the next in order. */
	w = host_register(&b, "w", ROCMMEM_MODEL_OTHER, 24 * MiB, 0, 0);
	assert_int_equal(host_acquire(&b, w, 10000), 0);
	assert_int_equal(host_acked(&a, m2), 0);
	expect_model(m2, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(m1, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(m4, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(w, ROCMMEM_MODEL_IN_USE, 24 * MiB, 0);
	assert_int_equal(free_bytes(), 0);
	/* Two evict requests in all: m3's and m2's. */
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_EVICT_REQUEST), 2);
	check_books();
	assert_int_equal(host_release(&b, w), 0);
	assert_int_equal(host_lease_free(&b, lease), 0);
	host_stop(&a);
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Revocation and dying owners */

/* An owner that ignores the evict request loses the model at the deadline (1 s here). */
static void test_ignored_evict_is_revoked(void **state)
{
	struct host a, b;
	uint64_t m, tagged;
	int64_t flags;
	long start, waited;
	char text[160];
	rocmmem_status *st;

	(void)state;
	host_start(&a, "stubborn-host");
	host_start(&b, "patient-host");
	host_mode(&a, MODE_HOLD, false);
	/* 16 MiB reserved and a 16 MiB lease tagged with it. */
	m = host_register(&a, "ignored-model", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&a, m, 0), 0);
	tagged = host_lease(&a, 16 * MiB, m, 0);
	assert_int_equal(host_release(&a, m), 0);
	expect_model(m, ROCMMEM_MODEL_IDLE, 32 * MiB, 0);
	start = harness_now_ms();
	host_send(&b, 0, CMD_LEASE, (int64_t)(48 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	assert_int_equal(host_reply(&b, NULL), 0);
	waited = harness_now_ms() - start;
	if (waited < 900 || waited > 5000)
		fail_msg("the waiter was granted after %ld ms; the deadline is 1 s", waited);
	flags = host_event(&a, ROCMMEM_EVENT_MODEL_REVOKED, m, SOON_MS);
	assert_true(flags & REASON_GIVEN);
	assert_true(flags & REASON_UNLOAD);
	/* Its tagged lease went with it; releasing it now is quietly fine. */
	flags = host_event(&a, ROCMMEM_EVENT_LEASE_REVOKED, tagged, SOON_MS);
	assert_true(flags & REASON_GIVEN);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 1);
	st = snap();
	assert_int_equal(rocmmem_status_lease_count(st), 1); /* the patient host's */
	assert_true(rocmmem_status_lease(st, 0)->id != tagged);
	rocmmem_status_free(st);
	assert_int_equal(host_lease_free(&a, tagged), 0);
	/* A late ack is refused as stale (logged as a warning), and the evictions count once. */
	assert_int_equal(host_ack(&a, m), -ESTALE);
	assert_true(host_error_has(&a, "generation 1 is over"));
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 1);
	assert_true(harness_log_contains(&daemon_, "warn: refused an evict ack of"));
	snprintf(text, sizeof(text), "revoked model %llu 'ignored-model'", (unsigned long long)m);
	assert_true(harness_log_wait(&daemon_, text, HARNESS_WAIT_MS));
	snprintf(text, sizeof(text), "of pid %d 'stubborn-host': did not unload", (int)a.pid);
	assert_true(harness_log_wait(&daemon_, text, HARNESS_WAIT_MS));
	check_books();
	host_stop(&a);
	host_stop(&b);
}

/*
 * The owner unregisters the model instead of acking: its memory goes back at once, the waiter
 * is granted, and the deadline (1 s) passes without a revocation of what no longer exists.
 */
static void test_unregister_instead_of_ack(void **state)
{
	struct host a, b;
	uint64_t m, other;
	int64_t lease, unused[4];
	long start;
	struct want revoked = {
	    .kind = MSG_EVENT, .has = {true}, .v = {ROCMMEM_EVENT_MODEL_REVOKED}};

	(void)state;
	host_start(&a, "unregistering-owner");
	host_start(&b, "waiter");
	host_mode(&a, MODE_HOLD, false);
	m = host_register(&a, "dropped", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	other = host_register(&a, "kept", ROCMMEM_MODEL_OTHER, 8 * MiB, 0, 0);
	host_resident(&a, m);
	assert_int_equal(host_acquire(&a, other, 0), 0);
	host_send(&b, 0, CMD_LEASE, (int64_t)(40 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	start = harness_now_ms();
	assert_int_equal(host_call(&a, CMD_UNREGISTER, (int64_t)m, 0, 0), 0);
	assert_int_equal(host_reply(&b, &lease), 0);
	assert_true(harness_now_ms() - start < 900);
	check_books();
	/* Past the deadline: no revocation, the daemon still serves, the books still balance. */
	assert_false(host_take(&a, &revoked, 1500, unused));
	host_sync(&a);
	assert_false(host_take(&a, &revoked, 0, unused));
	assert_false(harness_log_contains(&daemon_, "revoked model"));
	expect_model(other, ROCMMEM_MODEL_IN_USE, 8 * MiB, 0);
	check_books();
	assert_int_equal(host_lease_free(&b, (uint64_t)lease), 0);
	assert_int_equal(host_release(&a, other), 0);
	host_stop(&a);
	host_stop(&b);
}

/*
 * While the one victim a waiter needs is unloading, other changes make the daemon look at the
 * queue again: it must not pick a second victim for the same bytes.
 */
static void test_no_second_victim_while_unloading(void **state)
{
	struct host a, b, d;
	uint64_t m1, m2, blip;
	int64_t lease;

	(void)state;
	host_start(&a, "slow-owner");
	host_start(&b, "needs-one");
	host_start(&d, "bystander");
	host_mode(&a, MODE_HOLD, false);
	m1 = host_register(&a, "victim", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	m2 = host_register(&a, "spared", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	host_resident(&a, m1);
	wait_idle_ms(m1, 3);
	host_resident(&a, m2);
	host_lease(&d, 16 * MiB, 0, 0);
	/* 16 MiB free; 24 MiB needs one of the two. */
	host_send(&b, 0, CMD_LEASE, (int64_t)(24 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m1, SOON_MS);
	/* Releases of idle models make the daemon plan again, several times. */
	blip = host_register(&d, "blip", ROCMMEM_MODEL_OTHER, 0, 0, 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(host_acquire(&d, blip, 0), 0);
		assert_int_equal(host_release(&d, blip), 0);
	}
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_EVICT_REQUEST), 0);
	expect_model(m2, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(m1, ROCMMEM_MODEL_EVICTING, 16 * MiB, 0);
	wait_waiters(1);
	assert_int_equal(host_ack(&a, m1), 0);
	assert_int_equal(host_reply(&b, &lease), 0);
	expect_model(m2, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	check_books();
	host_stop(&a);
	host_stop(&b);
	host_stop(&d);
}

/* kill -9 of the owner after the evict request reached it: freed at once, the waiter goes. */
static void test_owner_killed_mid_eviction(void **state)
{
	struct host a, b;
	uint64_t m, k;
	long killed, took;
	rocmmem_status *st;

	(void)state;
	host_start(&a, "doomed-owner");
	host_start(&b, "waiter");
	host_mode(&a, MODE_HOLD, false);
	/* It holds a reservation, a lease tagged with a model in use, and a plain lease. */
	m = host_register(&a, "doomed-model", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	host_resident(&a, m);
	k = host_register(&a, "busy-model", ROCMMEM_MODEL_OTHER, 0, 0, 0);
	assert_int_equal(host_acquire(&a, k, 0), 0);
	host_lease(&a, 8 * MiB, k, 0);
	host_lease(&a, 8 * MiB, 0, 0);
	check_books();
	host_send(&b, 0, CMD_LEASE, (int64_t)(40 * MiB), 0, 20000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	wait_model_state(m, ROCMMEM_MODEL_EVICTING, SOON_MS);
	killed = harness_now_ms();
	host_kill(&a);
	assert_int_equal(host_reply(&b, NULL), 0);
	took = harness_now_ms() - killed;
	if (took > 2000)
		fail_msg("the waiter was granted %ld ms after the owner died (deadline 10 s)",
			 took);
	st = snap();
	assert_int_equal(rocmmem_status_model_count(st), 0);
	assert_int_equal(rocmmem_status_lease_count(st), 1);
	assert_int_equal(rocmmem_status_device(st, 0)->reserved_bytes, 0);
	rocmmem_status_free(st);
	check_books();
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Tagged leases */

static void test_tagged_leases(void **state)
{
	struct host a, b;
	uint64_t m, l1, l2, l3, plain, big;
	int64_t flags;
	rocmmem_status *st;

	(void)state;
	host_start(&a, "lease-host");
	host_start(&b, "lease-taker");
	m = host_register(&a, "lease-model", ROCMMEM_MODEL_OTHER, 0, 0, 0);
	assert_int_equal(host_acquire(&a, m, 0), 0);
	l1 = host_lease(&a, 16 * MiB, m, 0);
	l2 = host_lease(&a, 16 * MiB, m, 0);
	assert_int_equal(host_release(&a, m), 0);
	expect_model(m, ROCMMEM_MODEL_IDLE, 32 * MiB, 0);
	st = snap();
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *l = rocmmem_status_lease(st, i);

		assert_true(l->id == l1 || l->id == l2);
		assert_int_equal(l->model_id, m);
	}
	assert_int_equal(model_in(st, m)->lease_bytes, 32 * MiB);
	assert_int_equal(model_in(st, m)->reservation_bytes, 0);
	rocmmem_status_free(st);
	check_books();

	/* The owner releases the leases and acks: nothing is revoked. */
	big = host_lease(&b, 48 * MiB, 0, 10000);
	assert_int_equal(host_acked(&a, m), 0);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 1);
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_LEASE_REVOKED), 0);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_MODEL_REVOKED), 0);
	assert_int_equal(host_lease_free(&b, big), 0);
	check_books();

	/* The owner acks with a tagged lease still held: that lease is revoked, and releasing it
	 * afterwards is quietly fine. A plain lease of the same owner is untouched. */
	host_mode(&a, MODE_ACK_KEEP, false);
	assert_int_equal(host_acquire(&a, m, 0), 0);
	l3 = host_lease(&a, 16 * MiB, m, 0);
	plain = host_lease(&a, 8 * MiB, 0, 0);
	assert_int_equal(host_release(&a, m), 0);
	big = host_lease(&b, 56 * MiB, 0, 10000);
	assert_int_equal(host_acked(&a, m), 0);
	flags = host_event(&a, ROCMMEM_EVENT_LEASE_REVOKED, l3, SOON_MS);
	assert_true(flags & REASON_GIVEN);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 2);
	assert_int_equal(host_lease_free(&a, l3), 0);
	st = snap();
	assert_int_equal(rocmmem_status_lease_count(st), 2); /* plain and big */
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++)
		assert_true(rocmmem_status_lease(st, i)->id == plain ||
			    rocmmem_status_lease(st, i)->id == big);
	rocmmem_status_free(st);
	check_books();
	assert_int_equal(host_lease_free(&a, plain), 0);
	assert_int_equal(host_lease_free(&b, big), 0);
	host_stop(&a);
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Acks */

static void test_ack_refusals(void **state)
{
	struct host a, s, r;
	uint64_t m, lease;
	int64_t rc;

	(void)state;
	host_start(&a, "ack-owner");
	host_start(&s, "ack-stranger");
	host_start(&r, "ack-requester");
	host_mode(&a, MODE_HOLD, false);
	m = host_register(&a, "acked-model", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);

	/* Never asked to unload: -EINVAL, whether it holds memory or not. */
	assert_int_equal(host_ack(&a, m), -EINVAL);
	host_resident(&a, m);
	assert_int_equal(host_ack(&a, m), -EINVAL);
	assert_true(host_error_has(&a, "not asked"));
	/* Not the owner: -EPERM, before and during an eviction. */
	assert_int_equal(host_ack(&s, m), -EPERM);
	host_send(&r, 0, CMD_LEASE, (int64_t)(64 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	assert_int_equal(host_ack(&s, m), -EPERM);
	expect_model(m, ROCMMEM_MODEL_EVICTING, 16 * MiB, 0);
	/* The owner's ack works once; a second names an eviction that is over: -ESTALE. */
	assert_int_equal(host_ack(&a, m), 0);
	rc = host_reply(&r, (int64_t *)&lease);
	assert_int_equal(rc, 0);
	assert_int_equal(host_ack(&a, m), -ESTALE);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 1);
	assert_int_equal(host_lease_free(&r, lease), 0);
	check_books();

	/* Late: after the deadline revoked it (1 s), the ack is -ESTALE. */
	host_resident(&a, m);
	host_send(&r, 0, CMD_LEASE, (int64_t)(64 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	host_event(&a, ROCMMEM_EVENT_MODEL_REVOKED, m, SOON_MS);
	rc = host_reply(&r, (int64_t *)&lease);
	assert_int_equal(rc, 0);
	assert_int_equal(host_ack(&a, m), -ESTALE);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 2);
	assert_int_equal(host_lease_free(&r, lease), 0);
	check_books();

	/*
	 * In use while being evicted. rocmmem.h promises -EBUSY for an ack while the model is in
	 * use; the daemon lets no acquire through while a model is evicting (it waits for the
	 * eviction to end), so an owner can only get there by acquiring: at timeout 0 that is
	 * refused, the model stays evicting with its memory, and the ack then works. If the
	 * acquire were granted, the ack must be -EBUSY until the release.
	 */
	host_resident(&a, m);
	host_send(&r, 0, CMD_LEASE, (int64_t)(64 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	rc = host_acquire(&a, m, 0);
	if (rc == 0) {
		assert_int_equal(host_ack(&a, m), -EBUSY);
		assert_true(host_error_has(&a, "in use"));
		assert_int_equal(host_release(&a, m), 0);
	} else {
		assert_int_equal(rc, -ENOMEM);
		expect_model(m, ROCMMEM_MODEL_EVICTING, 16 * MiB, 2);
	}
	assert_int_equal(host_ack(&a, m), 0);
	rc = host_reply(&r, (int64_t *)&lease);
	assert_int_equal(rc, 0);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 3);
	assert_int_equal(host_lease_free(&r, lease), 0);
	check_books();
	host_stop(&a);
	host_stop(&s);
	host_stop(&r);
}

/*
 * A single-threaded host is asked to unload a model just as it wants to use it again: it calls
 * acquire, its callback unloads and acks from inside that wait. The acquire must then make the
 * model resident again, its whole size reserved (waiting for room as needed).
 */
static void test_acquire_during_own_eviction(void **state)
{
	struct host a, r;
	uint64_t m, lease;
	int64_t rc;

	(void)state;
	host_start(&a, "reacquiring-host");
	host_start(&r, "evictor");
	m = host_register(&a, "wanted-again", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	host_resident(&a, m);
	/* Events reach it only inside its own waits, as in a host busy computing. */
	host_mode(&a, MODE_ACK, true);
	host_send(&r, 0, CMD_LEASE, (int64_t)(48 * MiB), 0, 10000);
	wait_model_state(m, ROCMMEM_MODEL_EVICTING, SOON_MS);
	host_send(&a, 0, CMD_ACQUIRE, (int64_t)m, 10000, 0);
	rc = host_reply(&r, (int64_t *)&lease);
	assert_int_equal(rc, 0);
	assert_int_equal(host_acked(&a, m), 0);
	/* 16 MiB free: the 32 MiB model must wait for the evictor's lease to go. */
	if (host_try_reply(&a, 0, &rc)) {
		rocmmem_status *st = snap();
		const struct rocmmem_model_info *mi = model_in(st, m);
		uint64_t free_mib = rocmmem_status_device(st, 0)->free_bytes / MiB;
		uint64_t reserved_mib = mi ? mi->reservation_bytes / MiB : 0;
		enum rocmmem_model_state now = mi ? mi->state : ROCMMEM_MODEL_EVICTED;

		rocmmem_status_free(st);
		fail_msg("acquire returned %lld while only %llu MiB were free; the model is %s "
			 "with %llu MiB of its 32 MiB reserved",
			 (long long)rc, (unsigned long long)free_mib, state_name(now),
			 (unsigned long long)reserved_mib);
	}
	wait_model_state(m, ROCMMEM_MODEL_WAITING, SOON_MS);
	assert_int_equal(host_lease_free(&r, lease), 0);
	assert_int_equal(host_reply(&a, NULL), 0);
	expect_model(m, ROCMMEM_MODEL_IN_USE, 32 * MiB, 1);
	check_books();
	assert_int_equal(host_release(&a, m), 0);
	host_stop(&a);
	host_stop(&r);
}

/* ----------------------------------------------------------------------------------------- */
/* Timeouts */

/* The waiter gives up while the victim's owner takes its time; the eviction still ends. */
static void test_waiter_times_out_eviction_completes(void **state)
{
	struct host a, b;
	uint64_t m;
	long start, took;
	rocmmem_status *st;

	(void)state;
	host_start(&a, "slow-owner");
	host_start(&b, "impatient");
	host_mode(&a, MODE_HOLD, false);
	m = host_register(&a, "slow-model", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	host_resident(&a, m);
	start = harness_now_ms();
	host_send(&b, 0, CMD_LEASE, (int64_t)(48 * MiB), 0, 500);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, m, SOON_MS);
	assert_int_equal(host_reply(&b, NULL), -ETIMEDOUT);
	took = harness_now_ms() - start;
	assert_true(took >= 450 && took < 5000);
	assert_true(host_error_has(&b, "timed out"));
	st = snap();
	assert_int_equal(rocmmem_status_waiter_count(st), 0);
	assert_int_equal(model_in(st, m)->state, ROCMMEM_MODEL_EVICTING);
	rocmmem_status_free(st);
	assert_int_equal(host_ack(&a, m), 0);
	expect_model(m, ROCMMEM_MODEL_EVICTED, 0, 1);
	assert_int_equal(free_bytes(), 64 * MiB);
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_MODEL_REVOKED), 0);
	check_books();
	host_stop(&a);
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Resize and unregister */

static void test_resize_grow_and_shrink(void **state)
{
	struct host a, b, c;
	uint64_t a1, a2, r;
	int64_t rc, lease;

	(void)state;
	host_start(&a, "resize-victims");
	host_start(&b, "resizer");
	host_start(&c, "resize-waiter");
	a1 = host_register(&a, "a1", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	a2 = host_register(&a, "a2", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	host_resident(&a, a1);
	wait_idle_ms(a1, 3);
	host_resident(&a, a2);
	r = host_register(&b, "growing", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&b, r, 0), 0);
	assert_int_equal(free_bytes(), 16 * MiB);

	/* Grow by 24 MiB with 16 free: like an acquire, it has one idle model evicted. */
	assert_int_equal(host_call(&b, CMD_RESIZE, (int64_t)r, (int64_t)(40 * MiB), 10000), 0);
	assert_int_equal(host_acked(&a, a1), 0);
	expect_model(a1, ROCMMEM_MODEL_EVICTED, 0, 1);
	expect_model(a2, ROCMMEM_MODEL_IDLE, 16 * MiB, 0);
	expect_model(r, ROCMMEM_MODEL_IN_USE, 40 * MiB, 0);
	assert_int_equal(free_bytes(), 8 * MiB);
	check_books();

	/* Nothing evictable left; a waiter for 24 MiB proceeds when the model shrinks. */
	assert_int_equal(host_acquire(&a, a2, 0), 0);
	host_send(&c, 0, CMD_LEASE, (int64_t)(24 * MiB), 0, 10000);
	wait_waiters(1);
	assert_int_equal(host_call(&b, CMD_RESIZE, (int64_t)r, (int64_t)(16 * MiB), 0), 0);
	rc = host_reply(&c, &lease);
	assert_int_equal(rc, 0);
	expect_model(r, ROCMMEM_MODEL_IN_USE, 16 * MiB, 0);
	assert_int_equal(free_bytes(), 8 * MiB);
	/* The one evict request is a1's, from the growth: the shrink asked nobody. */
	host_sync(&a);
	assert_int_equal(host_count(&a, ROCMMEM_EVENT_EVICT_REQUEST), 1);
	/* Rounded up to the granule. */
	assert_int_equal(host_call(&b, CMD_RESIZE, (int64_t)r, (int64_t)(7 * MiB), 0), 0);
	expect_model(r, ROCMMEM_MODEL_IN_USE, 8 * MiB, 0);
	check_books();
	assert_int_equal(host_lease_free(&c, (uint64_t)lease), 0);
	host_stop(&a);
	host_stop(&b);
	host_stop(&c);
}

static void test_resize_while_evicting(void **state)
{
	struct host a, b;
	uint64_t e;
	int64_t lease;

	(void)state;
	host_start(&a, "evicting-resizer");
	host_start(&b, "evictor");
	host_mode(&a, MODE_HOLD, false);
	e = host_register(&a, "being-evicted", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	host_resident(&a, e);
	host_send(&b, 0, CMD_LEASE, (int64_t)(48 * MiB), 0, 10000);
	host_event(&a, ROCMMEM_EVENT_EVICT_REQUEST, e, SOON_MS);
	assert_int_equal(host_call(&a, CMD_RESIZE, (int64_t)e, (int64_t)(16 * MiB), 0), -EBUSY);
	assert_int_equal(host_call(&a, CMD_RESIZE, (int64_t)e, (int64_t)(48 * MiB), 5000), -EBUSY);
	assert_true(host_error_has(&a, "evicted"));
	expect_model(e, ROCMMEM_MODEL_EVICTING, 32 * MiB, 0);
	assert_int_equal(host_ack(&a, e), 0);
	assert_int_equal(host_reply(&b, &lease), 0);
	expect_model(e, ROCMMEM_MODEL_EVICTED, 0, 1);
	check_books();
	assert_int_equal(host_lease_free(&b, (uint64_t)lease), 0);
	host_stop(&a);
	host_stop(&b);
}

/*
 * A resize queued behind another request that has the same model evicted: when it is granted,
 * the model's reservation is what the resize asked for.
 */
static void test_resize_behind_eviction_of_same_model(void **state)
{
	struct host a, b;
	uint64_t m, first, second;
	int64_t id;

	(void)state;
	host_start(&a, "resize-owner");
	host_start(&b, "lease-holder");
	m = host_register(&a, "resized", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&a, m, 0), 0);
	first = host_lease(&b, 32 * MiB, 0, 0);
	/* 16 free: the second 32 MiB waits (the model is in use). */
	host_send(&b, 0, CMD_LEASE, (int64_t)(32 * MiB), 0, 10000);
	wait_waiters(1);
	/* Grow to 48 MiB: queued behind. (It does not fit now, so it cannot overtake the head,
	 * which waits for the model's memory: test_hold_and_wait_bypass.) */
	host_send(&a, 1, CMD_RESIZE, (int64_t)m, (int64_t)(48 * MiB), 10000);
	wait_waiters(2);
	/* Idle now: the head has it evicted, and is granted. */
	assert_int_equal(host_release(&a, m), 0);
	assert_int_equal(host_acked(&a, m), 0);
	assert_int_equal(host_reply(&b, &id), 0);
	second = (uint64_t)id;
	/* Evicted, the model needs all 48 MiB: the resize gets its room when both leases go. */
	assert_int_equal(host_lease_free(&b, first), 0);
	assert_int_equal(host_lease_free(&b, second), 0);
	assert_int_equal(host_bg_result(&a, 1, REPLY_MS), 0);
	check_books();
	expect_model(m, ROCMMEM_MODEL_IDLE, 48 * MiB, 1);
	host_stop(&a);
	host_stop(&b);
}

/* Unregistering a model ends this client's requests waiting on its behalf: -ECANCELED. */
static void test_unregister_cancels_waiters(void **state)
{
	struct host a, b;
	uint64_t u, v, hold;
	rocmmem_status *st;

	(void)state;
	host_start(&a, "unregistering");
	host_start(&b, "blocker");
	hold = host_lease(&b, 32 * MiB, 0, 0);
	u = host_register(&a, "never-resident", ROCMMEM_MODEL_OTHER, 48 * MiB, 0, 0);
	host_send(&a, 1, CMD_ACQUIRE, (int64_t)u, 10000, 0);
	wait_waiters(1);
	/* A lease tagged with it queues behind (first come, first served). */
	host_send(&a, 2, CMD_LEASE, (int64_t)(8 * MiB), (int64_t)u, 10000);
	wait_waiters(2);
	st = snap();
	assert_int_equal(model_in(st, u)->state, ROCMMEM_MODEL_WAITING);
	assert_int_equal(rocmmem_status_waiter(st, 0)->model_id, u);
	assert_int_equal(rocmmem_status_waiter(st, 1)->model_id, u);
	rocmmem_status_free(st);
	assert_int_equal(host_call(&a, CMD_UNREGISTER, (int64_t)u, 0, 0), 0);
	assert_int_equal(host_bg_result(&a, 1, SOON_MS), -ECANCELED);
	assert_int_equal(host_bg_result(&a, 2, SOON_MS), -ECANCELED);
	wait_waiters(0);
	check_books();

	/* A waiting resize too; the reservation goes back with the model. */
	v = host_register(&a, "growing", ROCMMEM_MODEL_OTHER, 16 * MiB, 0, 0);
	assert_int_equal(host_acquire(&a, v, 0), 0);
	host_send(&a, 3, CMD_RESIZE, (int64_t)v, (int64_t)(48 * MiB), 10000);
	wait_waiters(1);
	assert_int_equal(host_call(&a, CMD_UNREGISTER, (int64_t)v, 0, 0), 0);
	assert_int_equal(host_bg_result(&a, 3, SOON_MS), -ECANCELED);
	st = snap();
	assert_int_equal(rocmmem_status_model_count(st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->reserved_bytes, 0);
	assert_int_equal(rocmmem_status_waiter_count(st), 0);
	rocmmem_status_free(st);
	check_books();
	assert_int_equal(host_lease_free(&b, hold), 0);
	host_stop(&a);
	host_stop(&b);
}

/* ----------------------------------------------------------------------------------------- */
/* Fairness */

static void test_fifo_waiters(void **state)
{
	struct host h, b, c;
	uint64_t held[4], big;
	int64_t rc, lease;
	rocmmem_status *st;

	(void)state;
	host_start(&h, "holder");
	host_start(&b, "first-in-line");
	host_start(&c, "second-in-line");
	for (int i = 0; i < 4; i++)
		held[i] = host_lease(&h, 16 * MiB, 0, 0);
	big = host_register(&b, "big", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	host_send(&b, 0, CMD_ACQUIRE, (int64_t)big, 10000, 0);
	wait_waiters(1);
	host_send(&c, 0, CMD_LEASE, (int64_t)(16 * MiB), 0, 10000);
	wait_waiters(2);

	/* 16 MiB free: the second fits, but the first is ahead. */
	assert_int_equal(host_lease_free(&h, held[0]), 0);
	st = snap();
	assert_int_equal(rocmmem_status_device(st, 0)->free_bytes, 16 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->waiters, 2);
	assert_int_equal(rocmmem_status_waiter(st, 0)->model_id, big);
	rocmmem_status_free(st);
	assert_false(host_try_reply(&c, 0, &rc));

	/* 32 MiB free: the first is granted, the second still waits. */
	assert_int_equal(host_lease_free(&h, held[1]), 0);
	assert_int_equal(host_reply(&b, NULL), 0);
	st = snap();
	assert_int_equal(rocmmem_status_device(st, 0)->waiters, 1);
	assert_int_equal(rocmmem_status_device(st, 0)->free_bytes, 0);
	rocmmem_status_free(st);
	assert_false(host_try_reply(&c, 0, &rc));

	assert_int_equal(host_lease_free(&h, held[2]), 0);
	rc = host_reply(&c, &lease);
	assert_int_equal(rc, 0);
	wait_waiters(0);
	check_books();
	assert_int_equal(host_release(&b, big), 0);
	assert_int_equal(host_lease_free(&c, (uint64_t)lease), 0);
	assert_int_equal(host_lease_free(&h, held[3]), 0);
	host_stop(&h);
	host_stop(&b);
	host_stop(&c);
}

/*
 * Hold and wait across two clients (FramePack's two text encoders): F holds te1 in use, C asks
 * for a model that only te1's memory can make room for and waits at the head of the queue, then
 * F asks for te2, which fits beside te1. Strict first come, first served would leave te2 behind
 * C's request and C's request waiting for te1 until a timeout. te2 bypasses the head: F can
 * only finish its step and release, after which the head is granted.
 */
static void test_hold_and_wait_bypass(void **state)
{
	struct host f, c;
	uint64_t te1, te2, big;
	rocmmem_status *st;

	(void)state;
	host_start(&f, "framepack");
	host_start(&c, "comfyui");
	te1 = host_register(&f, "te1", ROCMMEM_MODEL_TEXT_ENCODER, 32 * MiB, 0, 0);
	te2 = host_register(&f, "te2", ROCMMEM_MODEL_TEXT_ENCODER, 8 * MiB, 0, 0);
	big = host_register(&c, "big", ROCMMEM_MODEL_TRANSFORMER, 48 * MiB, 0, 0);
	assert_int_equal(host_acquire(&f, te1, 0), 0);
	/* 32 MiB free, nothing idle: the head waits for te1, which F holds in use. */
	host_send(&c, 1, CMD_ACQUIRE, (int64_t)big, 10000, 0);
	wait_waiters(1);
	/* te2 fits now: granted at once, ahead of the head (strict FIFO: -ETIMEDOUT in 2 s). */
	host_send(&f, 2, CMD_ACQUIRE, (int64_t)te2, 2000, 0);
	assert_int_equal(host_bg_result(&f, 2, REPLY_MS), 0);
	expect_model(te2, ROCMMEM_MODEL_IN_USE, 8 * MiB, 0);
	st = snap();
	assert_int_equal(rocmmem_status_device(st, 0)->waiters, 1);
	assert_int_equal(rocmmem_status_waiter(st, 0)->model_id, big);
	rocmmem_status_free(st);
	check_books();

	/* F's step is done: it releases both, they are evicted and the head is granted. */
	assert_int_equal(host_release(&f, te1), 0);
	assert_int_equal(host_release(&f, te2), 0);
	assert_int_equal(host_bg_result(&c, 1, REPLY_MS), 0);
	expect_model(big, ROCMMEM_MODEL_IN_USE, 48 * MiB, 0);
	expect_model(te1, ROCMMEM_MODEL_EVICTED, 0, 1);
	wait_waiters(0);
	check_books();
	assert_int_equal(host_release(&c, big), 0);
	host_stop(&f);
	host_stop(&c);
}

/*
 * No bypass that would take memory the head needs: X's model in use (X waits for nothing) and
 * what is free are enough for the head once X releases; te2 would leave the head short of 8 MiB
 * then, so it waits its turn behind the head.
 */
static void test_no_bypass_into_heads_memory(void **state)
{
	struct host f, c, x;
	uint64_t te1, te2, big, xm;
	int64_t m[4];
	rocmmem_status *st;

	(void)state;
	host_start(&f, "framepack");
	host_start(&c, "comfyui");
	host_start(&x, "independent");
	xm = host_register(&x, "x", ROCMMEM_MODEL_OTHER, 32 * MiB, 0, 0);
	te1 = host_register(&f, "te1", ROCMMEM_MODEL_TEXT_ENCODER, 8 * MiB, 0, 0);
	te2 = host_register(&f, "te2", ROCMMEM_MODEL_TEXT_ENCODER, 16 * MiB, 0, 0);
	big = host_register(&c, "big", ROCMMEM_MODEL_TRANSFORMER, 48 * MiB, 0, 0);
	assert_int_equal(host_acquire(&x, xm, 0), 0);
	assert_int_equal(host_acquire(&f, te1, 0), 0);
	/* 24 MiB free; the head needs 48: the free 24 plus x's 32 once X releases. */
	host_send(&c, 1, CMD_ACQUIRE, (int64_t)big, 10000, 0);
	wait_waiters(1);
	host_send(&f, 2, CMD_ACQUIRE, (int64_t)te2, 10000, 0);
	wait_waiters(2);
	assert_false(host_take(&f, &(struct want){.kind = MSG_BG}, 300, m));
	assert_int_equal(free_bytes(), 24 * MiB);
	st = snap();
	assert_int_equal(rocmmem_status_waiter(st, 0)->model_id, big);
	assert_int_equal(rocmmem_status_waiter(st, 1)->model_id, te2);
	rocmmem_status_free(st);

	/* X releases: x is evicted, the head is granted first; te2 still waits (0 free). */
	assert_int_equal(host_release(&x, xm), 0);
	assert_int_equal(host_bg_result(&c, 1, REPLY_MS), 0);
	expect_model(big, ROCMMEM_MODEL_IN_USE, 48 * MiB, 0);
	expect_model(xm, ROCMMEM_MODEL_EVICTED, 0, 1);
	assert_false(host_take(&f, &(struct want){.kind = MSG_BG}, 100, m));
	/* The head's turn is over: te2 gets big's memory once C releases it. */
	assert_int_equal(host_release(&c, big), 0);
	assert_int_equal(host_bg_result(&f, 2, REPLY_MS), 0);
	wait_waiters(0);
	check_books();
	assert_int_equal(host_release(&f, te1), 0);
	assert_int_equal(host_release(&f, te2), 0);
	host_stop(&f);
	host_stop(&c);
	host_stop(&x);
}

#define CASE(fn, args) \
	cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, (void *)(uintptr_t)(args))

int main(void)
{
	const struct CMUnitTest tests[] = {
	    CASE(test_exclusive_even_when_both_fit, args_exclusive),
	    CASE(test_exclusive_on_device_0, args_exclusive_dev0),
	    CASE(test_priorities_and_pins, args_long),
	    CASE(test_only_as_much_as_needed, args_80),
	    CASE(test_ignored_evict_is_revoked, args_revoke),
	    CASE(test_unregister_instead_of_ack, args_revoke),
	    CASE(test_no_second_victim_while_unloading, args_long),
	    CASE(test_owner_killed_mid_eviction, args_long),
	    CASE(test_tagged_leases, args_long),
	    CASE(test_ack_refusals, args_revoke),
	    CASE(test_acquire_during_own_eviction, args_long),
	    CASE(test_waiter_times_out_eviction_completes, args_long),
	    CASE(test_resize_grow_and_shrink, args_long),
	    CASE(test_resize_while_evicting, args_long),
	    CASE(test_resize_behind_eviction_of_same_model, args_long),
	    CASE(test_unregister_cancels_waiters, args_long),
	    CASE(test_fifo_waiters, args_long),
	    CASE(test_hold_and_wait_bypass, args_long),
	    CASE(test_no_bypass_into_heads_memory, args_long),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
