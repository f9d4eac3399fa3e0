/* SPDX-License-Identifier: MIT */
/*
 * test_generations.c: owns F4, late events of an old eviction against a model acquired again:
 * a slow callback and an owner stopped past the deadline, replayed for many rounds against a
 * real daemon: the tagged lease of the new residency is never released or unmapped because of
 * them, and the daemon refuses the stale ack (test_ack_generations.c has the protocol's side).
 */
#include <errno.h>
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)
#define DEADLINE_MS 20 /* --evict-deadline of the replay */
#define SLOW_MS 60     /* the slow callback: well past the deadline */
#define WAIT_MS 15000  /* generous bound for what takes milliseconds; polled, never slept */
#define MODEL_BYTES (8 * MiB)
#define LEASE_BYTES (4 * MiB)
#define ROUNDS_DEFAULT 100 /* per replay; $ROCMMEM_F4_ROUNDS for the long run */

static struct daemon_proc daemon_;

/* ----------------------------------------------------------------------------------------- */
/* The owner: a host in a child process, with an event thread like the Python package's. */

struct owner {
	rocmmem_client *c;
	uint64_t model;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool threaded;	 /* the event thread dispatches; else events come only inside calls */
	bool slow;	 /* the evict callback takes SLOW_MS before it unloads and acks */
	bool evict_seen; /* an evict request reached the callback */
	bool busy;	 /* the evict callback runs */
	uint64_t host_gen;
	rocmmem_lease *lease; /* the host's tagged lease, of the residency it holds */
	unsigned stale;	      /* single-threaded rounds: stale events delivered anyway */
	unsigned bad_acks;    /* acks answered other than 0 or -ESTALE */
	unsigned stale_acks;  /* acks refused as stale */
	unsigned broken;      /* the held lease found released, revoked or altered */
};

static struct owner o = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void fill(rocmmem_lease *l, uint8_t seed)
{
	uint8_t *p = rocmmem_lease_ptr(l);

	for (uint64_t off = 0; off < rocmmem_lease_size(l); off += 4096)
		p[off] = (uint8_t)(seed + off / 4096);
}

static bool intact(rocmmem_lease *l, uint8_t seed)
{
	const uint8_t *p = rocmmem_lease_ptr(l);

	for (uint64_t off = 0; p && off < rocmmem_lease_size(l); off += 4096)
		if (p[off] != (uint8_t)(seed + off / 4096))
			return false;
	return p != NULL;
}

/* drop_older releases the host's lease if it belongs to generation gen or an older one: what
 * an eviction of gen unloads, and never a lease of a later residency. */
static void drop_older(uint64_t gen)
{
	rocmmem_lease *l = NULL;

	pthread_mutex_lock(&o.lock);
	if (o.lease && rocmmem_lease_generation(o.lease) <= gen) {
		l = o.lease;
		o.lease = NULL;
	}
	pthread_mutex_unlock(&o.lock);
	rocmmem_lease_release(l);
}

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	int rc;

	(void)userdata;
	if (ev->type == ROCMMEM_EVENT_LEASE_REVOKED) {
		pthread_mutex_lock(&o.lock);
		if (o.lease && rocmmem_lease_id(o.lease) == ev->lease_id)
			o.broken += rocmmem_lease_generation(o.lease) > ev->generation;
		pthread_mutex_unlock(&o.lock);
		return;
	}
	if (ev->type != ROCMMEM_EVENT_EVICT_REQUEST && ev->type != ROCMMEM_EVENT_MODEL_REVOKED)
		return;
	pthread_mutex_lock(&o.lock);
	/* Single-threaded, the host knows exactly whether its acquire has returned. */
	if (!o.threaded && ev->generation < o.host_gen)
		o.stale++;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST) {
		o.evict_seen = o.busy = true;
		pthread_cond_broadcast(&o.cond);
	}
	pthread_mutex_unlock(&o.lock);
	if (ev->type == ROCMMEM_EVENT_MODEL_REVOKED)
		return;
	if (o.slow)
		usleep(SLOW_MS * 1000);
	drop_older(ev->generation);
	rc = rocmmem_model_evict_ack_generation(c, o.model, ev->generation);
	pthread_mutex_lock(&o.lock);
	o.bad_acks += rc != 0 && rc != -ESTALE;
	o.stale_acks += rc == -ESTALE;
	o.busy = false;
	pthread_cond_broadcast(&o.cond);
	pthread_mutex_unlock(&o.lock);
}

static void *event_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p = {.fd = rocmmem_event_fd(o.c), .events = POLLIN};
		bool on;

		poll(&p, 1, 5);
		pthread_mutex_lock(&o.lock);
		on = o.threaded;
		pthread_mutex_unlock(&o.lock);
		if (on && rocmmem_dispatch(o.c) < 0)
			return NULL;
	}
}

/* wait_flag waits until *flag == want (lock held by the caller); false after WAIT_MS. */
static bool wait_flag(bool *flag, bool want)
{
	long end = harness_now_ms() + WAIT_MS;

	while (*flag != want) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 5000000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&o.cond, &o.lock, &ts);
		if (harness_now_ms() > end)
			return false;
	}
	return true;
}

enum { CMD_SLOW = 1, CMD_STOPPED, CMD_EXIT };
enum { REPORT_READY = 1, REPORT_DONE };

/*
 * reacquire takes the model again, with a new tagged lease written through, waits for the
 * evict callback to end, delivers what is queued, and checks that the lease is still whole.
 * Returns the lease id, or a negative errno.
 */
static int64_t reacquire(uint8_t seed)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .size = LEASE_BYTES,
					    .timeout_ms = WAIT_MS,
					    .model_id = o.model,
					    .tag = "weights"};
	rocmmem_lease *l = NULL, *old;
	uint64_t gen;
	int rc = rocmmem_model_acquire(o.c, o.model, WAIT_MS);

	if (rc)
		return rc;
	gen = rocmmem_model_generation(o.c, o.model);
	pthread_mutex_lock(&o.lock);
	o.host_gen = gen;
	pthread_mutex_unlock(&o.lock);
	rc = rocmmem_lease_acquire(o.c, &req, &l);
	if (rc)
		return rc;
	if (rocmmem_lease_generation(l) != gen)
		return -EPROTO;
	fill(l, seed);
	pthread_mutex_lock(&o.lock);
	old = o.lease; /* the last residency's, unless the callback released it already */
	o.lease = l;
	rc = wait_flag(&o.busy, false) ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&o.lock);
	while (rc == 0 && rocmmem_dispatch(o.c) > 0) {
	}
	rocmmem_lease_release(old); /* revoked with its residency: freed without asking */
	pthread_mutex_lock(&o.lock);
	o.broken += o.lease != l || rocmmem_lease_revoked(l) || !intact(l, seed);
	pthread_mutex_unlock(&o.lock);
	if (rc == 0)
		rc = rocmmem_model_release(o.c, o.model);
	return rc ? rc : (int64_t)rocmmem_lease_id(l);
}

static int owner_main(void *arg, int in, int out)
{
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "replayed", .size = MODEL_BYTES};
	pthread_t t;
	int64_t cmd, a;
	uint8_t seed = 1;

	(void)arg;
	if (rocmmem_connect(daemon_.sock, "f4-owner", 5000, &o.c) ||
	    rocmmem_model_register(o.c, &desc, &o.model))
		return 10;
	rocmmem_set_event_callback(o.c, on_event, NULL);
	pthread_create(&t, NULL, event_thread, NULL);
	if (reacquire(seed) < 0) /* resident, idle, with its tagged lease */
		return 11;
	while (pipe_get(in, &cmd, 60000) && cmd != CMD_EXIT && pipe_get(in, &a, 1000)) {
		int64_t id;

		pthread_mutex_lock(&o.lock);
		o.slow = cmd == CMD_SLOW;
		o.threaded = cmd == CMD_SLOW || a;
		o.evict_seen = false;
		o.broken += !o.lease || !intact(o.lease, seed); /* what the last round left */
		pthread_mutex_unlock(&o.lock);
		pipe_put(out, REPORT_READY);
		if (cmd == CMD_SLOW) {
			/* As soon as the callback starts, the host wants the model again. */
			pthread_mutex_lock(&o.lock);
			if (!wait_flag(&o.evict_seen, true))
				return 12;
			pthread_mutex_unlock(&o.lock);
		} else if (!pipe_get(in, &a, WAIT_MS)) { /* stopped, continued: go on */
			return 13;
		}
		id = reacquire(++seed);
		pthread_mutex_lock(&o.lock);
		pipe_put(out, REPORT_DONE);
		pipe_put(out, id);
		pipe_put(out, o.broken);
		pipe_put(out, o.stale);
		pipe_put(out, o.bad_acks);
		pipe_put(out, o.stale_acks);
		pthread_mutex_unlock(&o.lock);
	}
	return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* The replay, from the parent: it is the requester whose lease needs the model's room. */

static unsigned rounds(void)
{
	const char *env = getenv("ROCMMEM_F4_ROUNDS");
	long n = env ? strtol(env, NULL, 10) : 0;

	return n > 0 ? (unsigned)n : ROUNDS_DEFAULT;
}

static void expect(const struct child *ch, int64_t want)
{
	int64_t got = 0;

	if (!pipe_get(ch->from_child, &got, WAIT_MS) || got != want)
		fail_msg("the owner said %lld, not %lld", (long long)got, (long long)want);
}

/* take_room asks for what only the model's eviction frees, and gives it straight back. */
static void take_room(rocmmem_client *req)
{
	struct rocmmem_lease_request r = {
	    .struct_size = sizeof(r), .size = 24 * MiB, .timeout_ms = WAIT_MS, .tag = "needs"};
	rocmmem_lease *l = NULL;

	if (rocmmem_lease_acquire(req, &r, &l) != 0)
		fail_msg("the requester was not granted: %s", rocmmem_last_error());
	rocmmem_lease_release(l);
}

static void *take_room_thread(void *req)
{
	take_room(req);
	return NULL;
}

/* wait_stopped waits until the child is stopped (SIGSTOP took effect). */
static void wait_stopped(pid_t pid)
{
	char path[64], buf[256];
	long end = harness_now_ms() + WAIT_MS;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	while (harness_now_ms() < end) {
		FILE *f = fopen(path, "r");
		char *p = f && fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;

		if (f)
			fclose(f);
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(500);
	}
	fail_msg("pid %d did not stop", (int)pid);
}

/* check_round: the owner's new lease is whole in the books, its model idle and resident. */
static void check_round(rocmmem_client *req, int64_t lease_id)
{
	rocmmem_status *st = NULL;
	bool listed = false, model_ok = false;

	assert_int_equal(rocmmem_status_get(req, &st), 0);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *l = rocmmem_status_lease(st, i);

		listed |= (int64_t)l->id == lease_id && l->bytes == LEASE_BYTES;
	}
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		model_ok |= m->state == ROCMMEM_MODEL_IDLE && m->bytes == MODEL_BYTES + LEASE_BYTES;
	}
	rocmmem_status_free(st);
	if (!listed || !model_ok)
		fail_msg("lease %lld listed: %d; model idle with its lease: %d",
			 (long long)lease_id, listed, model_ok);
}

static void replay(bool stop)
{
	struct child ch;
	rocmmem_client *req = harness_connect(&daemon_, "f4-requester");
	unsigned n = rounds(), stale_acks = 0;
	unsigned seed = (unsigned)getpid();
	int64_t v[5] = {0};

	assert_int_equal(child_start(&ch, owner_main, NULL), 0);
	for (unsigned r = 0; r < n; r++) {
		bool threaded = !stop || (r & 1);

		pipe_put(ch.to_child, stop ? CMD_STOPPED : CMD_SLOW);
		pipe_put(ch.to_child, threaded);
		expect(&ch, REPORT_READY);
		if (!stop) {
			take_room(req);
		} else if (!threaded) {
			/* Stopped before the evict request: it finds everything on its return. */
			kill(ch.pid, SIGSTOP);
			wait_stopped(ch.pid);
			take_room(req);
		} else {
			/* Stopped at any moment of the eviction: before the request, in the middle
			 * of its callback, or after its ack. */
			pthread_t t;

			pthread_create(&t, NULL, take_room_thread, req);
			usleep((useconds_t)(rand_r(&seed) % (2 * DEADLINE_MS)) * 1000);
			kill(ch.pid, SIGSTOP);
			wait_stopped(ch.pid);
			pthread_join(t, NULL);
		}
		if (stop) {
			kill(ch.pid, SIGCONT);
			pipe_put(ch.to_child, 1);
		}
		expect(&ch, REPORT_DONE);
		for (int i = 0; i < 5; i++)
			if (!pipe_get(ch.from_child, &v[i], WAIT_MS))
				fail_msg("the owner went quiet in round %u", r);
		if (v[0] < 0)
			fail_msg("round %u: %s", r, strerror((int)-v[0]));
		check_round(req, v[0]);
		/* Never: the new residency's lease touched, a stale event delivered to a host that
		 * got a newer residency, an ack answered otherwise than 0 or -ESTALE. */
		if (v[1] || v[2] || v[3])
			fail_msg(
			    "round %u: lease broken %lld times, %lld stale events delivered, %lld "
			    "acks refused otherwise",
			    r, (long long)v[1], (long long)v[2], (long long)v[3]);
	}
	stale_acks = (unsigned)v[4];
	pipe_put(ch.to_child, CMD_EXIT);
	pipe_put(ch.to_child, 0);
	assert_int_equal(child_wait(&ch, WAIT_MS), 0);
	rocmmem_disconnect(req);
	print_message("%u rounds (%s): %u late acks refused as stale\n", n,
		      stop ? "owner stopped and continued" : "slow on_evict", stale_acks);
	/* The slow callback outlives the deadline by 40 ms: most of its acks come late. */
	if (!stop)
		assert_true(stale_acks >= n / 4);
	if (stale_acks)
		assert_true(harness_log_contains(&daemon_, "warn: refused an evict ack of"));
}

static void test_slow_on_evict(void **state)
{
	(void)state;
	replay(false);
}

static void test_owner_stopped_and_continued(void **state)
{
	(void)state;
	replay(true);
}

/* ----------------------------------------------------------------------------------------- */

static int start(void **state, const char *deadline)
{
	const char *const args[] = {"--budget", "32M", "--evict-deadline", deadline, NULL};

	(void)state;
	return harness_daemon_start(&daemon_, args) == 0 ? 0 : -1;
}

static int start_replay(void **state)
{
	return start(state, "0.02");
}

static int stop(void **state)
{
	(void)state;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_slow_on_evict, start_replay, stop),
	    cmocka_unit_test_setup_teardown(test_owner_stopped_and_continued, start_replay, stop),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
