/* SPDX-License-Identifier: MIT */
/*
 * test_feed_client.c: telemetry through librocmmem: samples and events at the callback while
 * real child processes churn leases, what is counted against what they did, delivery inside a
 * waiting call, unsubscribing, and a subscriber that does not dispatch: it stays bounded and
 * still gets its evict requests.
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
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"
#include "wire.h"

#define MiB ((uint64_t)1 << 20)
/* The library's cap on undelivered telemetry events (client/lib/conn/deliver.c). */
#define TELEMETRY_CAP 1024
#define MAX_PIDS 8

/* subscribe is rocmmem_subscribe returning the interval in effect (>= 0) or the error. */
static int subscribe(rocmmem_client *c, unsigned what, uint32_t interval_ms)
{
	uint32_t got = UINT32_MAX;
	int err = rocmmem_subscribe(c, what, interval_ms, &got);

	if (err)
		return err;
	assert_true(got <= ROCMMEM_SAMPLE_INTERVAL_MAX_MS);
	return (int)got;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

static uint64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ----------------------------------------------------------------------------------------- */
/* What a subscriber saw */

struct seen {
	/* samples */
	unsigned samples;
	uint64_t first_ts, last_ts;
	uint32_t last_interval, sample_dropped, max_sample_dropped;
	struct rocmmem_counters first_counters, counters;
	bool have_counters;
	/* telemetry, counted for the pids watched (all when none) */
	pid_t pids[MAX_PIDS];
	unsigned npids;
	unsigned telemetry, by_type[16];
	uint64_t telemetry_dropped;
	uint64_t granted_ids_sum, released_ids_sum;
	/* control events */
	unsigned evict_requests, disconnected, shutdowns;
	int ack_result;
	bool ack;    /* ack evict requests from inside the callback */
	bool inside; /* set around a waiting call: what it delivered */
	unsigned samples_inside;
	uint64_t last_telemetry_seq;
	bool out_of_order;
};

static bool watched(const struct seen *s, int32_t pid)
{
	if (s->npids == 0)
		return true;
	for (unsigned i = 0; i < s->npids; i++)
		if (s->pids[i] == pid)
			return true;
	return false;
}

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct seen *s = userdata;

	switch (ev->type) {
	case ROCMMEM_EVENT_SAMPLE: {
		const struct rocmmem_counters *k = rocmmem_status_counters(ev->sample);

		if (!s->samples) {
			s->first_ts = ev->sample_info->timestamp_ms;
			s->first_counters = *k;
		}
		s->samples++;
		if (s->inside)
			s->samples_inside++;
		s->last_ts = ev->sample_info->timestamp_ms;
		s->last_interval = ev->sample_info->interval_ms;
		s->sample_dropped += ev->sample_info->dropped;
		if (ev->sample_info->dropped > s->max_sample_dropped)
			s->max_sample_dropped = ev->sample_info->dropped;
		s->counters = *k;
		s->have_counters = true;
		assert_null(ev->telemetry);
		break;
	}
	case ROCMMEM_EVENT_TELEMETRY: {
		const struct rocmmem_telemetry_event *t = ev->telemetry;

		assert_null(ev->sample);
		if (ev->seq <= s->last_telemetry_seq)
			s->out_of_order = true;
		s->last_telemetry_seq = ev->seq;
		s->telemetry_dropped += t->dropped;
		if (!watched(s, t->pid))
			break;
		s->telemetry++;
		if ((unsigned)t->type < 16)
			s->by_type[t->type]++;
		if (t->type == ROCMMEM_TELEMETRY_LEASE_GRANTED)
			s->granted_ids_sum += t->lease_id;
		if (t->type == ROCMMEM_TELEMETRY_LEASE_RELEASED)
			s->released_ids_sum += t->lease_id;
		break;
	}
	case ROCMMEM_EVENT_EVICT_REQUEST:
		s->evict_requests++;
		if (s->ack)
			s->ack_result = rocmmem_model_evict_ack(c, ev->model_id);
		break;
	case ROCMMEM_EVENT_SHUTDOWN:
		s->shutdowns++;
		break;
	case ROCMMEM_EVENT_DISCONNECTED:
		s->disconnected++;
		break;
	default:
		break;
	}
}

/* pump dispatches for ms milliseconds. */
static void pump(rocmmem_client *c, long ms)
{
	long end = harness_now_ms() + ms;

	for (long left = ms; left > 0; left = end - harness_now_ms()) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (poll(&p, 1, (int)left) > 0)
			assert_true(rocmmem_dispatch(c) >= 0);
	}
}

/* pump_until dispatches until *flag reaches want (up to timeout_ms); returns success. */
static bool pump_until(rocmmem_client *c, const unsigned *flag, unsigned want, long timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	while (*flag < want && harness_now_ms() < end)
		pump(c, 20);
	return *flag >= want;
}

/* child_value waits for a child's next report while dispatching c's events. */
static int64_t child_value(rocmmem_client *c, struct child *ch)
{
	long end = harness_now_ms() + 30000;
	int64_t v;

	while (harness_now_ms() < end) {
		struct pollfd p[2] = {{.fd = ch->from_child, .events = POLLIN},
				      {.fd = c ? rocmmem_event_fd(c) : -1, .events = POLLIN}};

		assert_true(poll(p, 2, 1000) >= 0);
		if (p[0].revents) {
			assert_true(pipe_get(ch->from_child, &v, 1000));
			return v;
		}
		if (p[1].revents)
			assert_true(rocmmem_dispatch(c) >= 0);
	}
	fail_msg("child %d did not report in time", (int)ch->pid);
	return -1;
}

/* ----------------------------------------------------------------------------------------- */
/* Children */

struct churn {
	const char *name;
	int iterations;
	uint64_t size;
};

/*
 * churn_child connects, says it is ready (its pid), waits for the go, then acquires and releases
 * size bytes iterations times (timeout 0: refused when it does not fit) and reports grants,
 * denials and releases; it exits when told to.
 */
static int churn_child(void *arg, int in, int out)
{
	const struct churn *ch = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = ch->size, .timeout_ms = 0, .tag = "churn"};
	int64_t grants = 0, denials = 0, releases = 0, go;
	rocmmem_client *c;

	if (rocmmem_connect(harness_group.sock, ch->name, 5000, &c) < 0)
		return 10;
	if (!pipe_put(out, getpid()) || !pipe_get(in, &go, 30000))
		return 11;
	for (int i = 0; i < ch->iterations; i++) {
		rocmmem_lease *l;
		int err = rocmmem_lease_acquire(c, &req, &l);

		if (err == -ENOMEM) {
			denials++;
			continue;
		}
		if (err)
			return 12;
		grants++;
		if (rocmmem_lease_release(l) != 0)
			return 13;
		releases++;
	}
	pipe_put(out, grants);
	pipe_put(out, denials);
	pipe_put(out, releases);
	pipe_get(in, &go, 30000);
	rocmmem_disconnect(c);
	return 0;
}

/* holder_child holds a lease of size (arg) until told to go, then exits. */
static int holder_child(void *arg, int in, int out)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = *(const uint64_t *)arg, .timeout_ms = 5000};
	rocmmem_client *c;
	rocmmem_lease *l;
	int64_t v;

	if (rocmmem_connect(harness_group.sock, "holder", 5000, &c) < 0)
		return 10;
	if (rocmmem_lease_acquire(c, &req, &l) < 0)
		return 11;
	pipe_put(out, getpid());
	pipe_get(in, &v, 60000);
	rocmmem_disconnect(c);
	return 0;
}

/* waiter_child asks for size (arg) waiting up to 20 s and reports the result. */
static int waiter_child(void *arg, int in, int out)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = *(const uint64_t *)arg, .timeout_ms = 20000};
	rocmmem_client *c;
	rocmmem_lease *l;
	int64_t v;
	int err;

	if (rocmmem_connect(harness_group.sock, "waiter", 5000, &c) < 0)
		return 10;
	pipe_put(out, getpid());
	err = rocmmem_lease_acquire(c, &req, &l);
	pipe_put(out, err);
	pipe_get(in, &v, 60000);
	rocmmem_disconnect(c);
	return 0;
}

static void finish_child(struct child *ch)
{
	pipe_put(ch->to_child, 1);
	assert_int_equal(child_wait(ch, 10000), 0);
	close(ch->to_child);
	close(ch->from_child);
}

/* ----------------------------------------------------------------------------------------- */
/* Tests */

/* Bad subscriptions are refused with -EINVAL and a message; the bounds are accepted. */
static void test_subscribe_arguments(void **state)
{
	static const uint32_t bad_intervals[] = {0, 1, 9, 60001, 3600000, UINT32_MAX};
	rocmmem_client *c = harness_connect(&harness_group, "arguments");
	struct seen s = {0};

	(void)state;
	rocmmem_set_event_callback(c, on_event, &s);
	assert_int_equal(subscribe(NULL, ROCMMEM_SUBSCRIBE_EVENTS, 0), -EINVAL);
	assert_int_equal(subscribe(c, 0, 100), -EINVAL);
	assert_int_equal(subscribe(c, 0x4, 100), -EINVAL);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS | 0x80, 100), -EINVAL);
	for (size_t i = 0; i < sizeof(bad_intervals) / sizeof(bad_intervals[0]); i++) {
		assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, bad_intervals[i]),
				 -EINVAL);
		assert_non_null(strstr(rocmmem_last_error(), "interval"));
		assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS,
					   bad_intervals[i]),
				 -EINVAL);
	}
	/* Events alone take no interval, whatever is passed. */
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, 0), 0);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, UINT32_MAX), 0);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 60000), 60000);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 10), 10);
	assert_true(pump_until(c, &s.samples, 3, 5000));
	assert_int_equal(s.last_interval, 10);
	assert_int_equal(rocmmem_unsubscribe(c), 0);
	assert_int_equal(rocmmem_unsubscribe(c), 0); /* none: nothing to end, still fine */
	assert_string_equal(rocmmem_telemetry_name(ROCMMEM_TELEMETRY_LEASE_GRANTED),
			    "lease_granted");
	assert_string_equal(rocmmem_telemetry_name(ROCMMEM_TELEMETRY_MODEL_LOADED), "model_loaded");
	assert_string_equal(rocmmem_telemetry_name((enum rocmmem_telemetry_type)0), "unknown");
	assert_string_equal(rocmmem_telemetry_name((enum rocmmem_telemetry_type)999), "unknown");
	rocmmem_disconnect(c);
}

/*
 * Three child processes churn leases (some refused) while a subscriber dispatches: samples keep
 * coming at the interval, and the events and counters are exactly what the children did.
 */
static void test_samples_and_events_while_churning(void **state)
{
	enum { CHILDREN = 3, INTERVAL = 50 };
	static struct churn churn = {"churner", 60, 24 * MiB};
	rocmmem_client *c = harness_connect(&harness_group, "subscriber");
	struct child ch[CHILDREN];
	struct seen s = {0};
	int64_t grants = 0, denials = 0, releases = 0;
	long start;

	(void)state;
	rocmmem_set_event_callback(c, on_event, &s);
	start = harness_now_ms();
	assert_int_equal(
	    subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, INTERVAL), INTERVAL);
	assert_true(pump_until(c, &s.samples, 1, 5000)); /* the baseline */
	for (int i = 0; i < CHILDREN; i++) {
		assert_int_equal(child_start(&ch[i], churn_child, &churn), 0);
		s.pids[s.npids++] = ch[i].pid; /* before its connect event can arrive */
		assert_int_equal(child_value(c, &ch[i]), ch[i].pid);
	}
	for (int i = 0; i < CHILDREN; i++)
		pipe_put(ch[i].to_child, 1);
	for (int i = 0; i < CHILDREN; i++) {
		grants += child_value(c, &ch[i]);
		denials += child_value(c, &ch[i]);
		releases += child_value(c, &ch[i]);
	}
	for (int i = 0; i < CHILDREN; i++)
		finish_child(&ch[i]);
	assert_int_equal(grants + denials, CHILDREN * churn.iterations);
	assert_int_equal(grants, releases);

	/* Every event arrives: one connect and one disconnect per child. */
	assert_true(
	    pump_until(c, &s.by_type[ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED], CHILDREN, 10000));
	if (harness_now_ms() - start < 1000)
		pump(c, 1000 - (harness_now_ms() - start));
	assert_int_equal(s.telemetry_dropped, 0);
	assert_false(s.out_of_order);
	assert_int_equal(s.by_type[ROCMMEM_TELEMETRY_CLIENT_CONNECTED], CHILDREN);
	assert_int_equal(s.by_type[ROCMMEM_TELEMETRY_LEASE_GRANTED], grants);
	assert_int_equal(s.by_type[ROCMMEM_TELEMETRY_LEASE_DENIED], denials);
	assert_int_equal(s.by_type[ROCMMEM_TELEMETRY_LEASE_RELEASED], releases);
	assert_int_equal(s.granted_ids_sum, s.released_ids_sum); /* the same leases */
	assert_int_equal(s.telemetry, 2 * CHILDREN + grants + denials + releases);

	/* The counters reach exactly what the children did. */
	{
		long end = harness_now_ms() + 10000;
		const struct rocmmem_counters *b = &s.first_counters;

		while (!(s.counters.grants == b->grants + (uint64_t)grants &&
			 s.counters.releases == b->releases + (uint64_t)releases &&
			 s.counters.denials == b->denials + (uint64_t)denials &&
			 s.counters.connections == b->connections + CHILDREN) &&
		       harness_now_ms() < end)
			pump(c, 50);
		assert_int_equal(s.counters.grants, b->grants + (uint64_t)grants);
		assert_int_equal(s.counters.releases, b->releases + (uint64_t)releases);
		assert_int_equal(s.counters.denials, b->denials + (uint64_t)denials);
		assert_int_equal(s.counters.connections, b->connections + CHILDREN);
		assert_int_equal(s.counters.timeouts, b->timeouts);
		assert_int_equal(s.counters.reclaimed, b->reclaimed);
	}
	/* Samples came all along, never faster than asked (one-sided: a busy machine is late). */
	assert_true(s.samples >= 5);
	assert_int_equal(s.last_interval, INTERVAL);
	assert_true(s.last_ts - s.first_ts >=
		    (uint64_t)(s.samples - 1 + s.sample_dropped) * INTERVAL * 8 / 10);
	rocmmem_disconnect(c);
}

/* What a sample shows through the status accessors, copied out of the callback. */
struct sample_view {
	bool seen;
	size_t devices, leases, waiters, denials;
	uint64_t budget, leased, reserved;
	char version[32], backend[16];
	int32_t daemon_pid;
	bool holder_listed, model_listed, lease_null;
	uint64_t holder_leased, model_bytes;
	enum rocmmem_model_state model_state;
	struct rocmmem_sample_info info;
	pid_t holder;
};

static void on_sample_view(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct sample_view *v = userdata;
	const rocmmem_status *st = ev->sample;

	(void)c;
	if (ev->type != ROCMMEM_EVENT_SAMPLE)
		return;
	v->holder_listed = v->model_listed = false;
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *ci = rocmmem_status_client(st, i);

		if (ci->pid == v->holder) {
			v->holder_listed = true;
			v->holder_leased = ci->leased_bytes;
		}
	}
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (strcmp(m->name, "sampled") == 0) {
			v->model_listed = true;
			v->model_bytes = m->bytes;
			v->model_state = m->state;
		}
	}
	if (!v->holder_listed || !v->model_listed)
		return;
	v->seen = true;
	v->devices = rocmmem_status_device_count(st);
	v->budget = rocmmem_status_device(st, 0)->budget_bytes;
	v->leased = rocmmem_status_device(st, 0)->leased_bytes;
	v->reserved = rocmmem_status_device(st, 0)->reserved_bytes;
	v->leases = rocmmem_status_lease_count(st);
	v->lease_null = rocmmem_status_lease(st, 0) == NULL;
	v->waiters = rocmmem_status_waiter_count(st);
	v->denials = rocmmem_status_denial_count(st);
	snprintf(v->version, sizeof(v->version), "%s", rocmmem_status_daemon(st)->version);
	snprintf(v->backend, sizeof(v->backend), "%s", rocmmem_status_daemon(st)->backend);
	v->daemon_pid = rocmmem_status_daemon(st)->pid;
	v->info = *ev->sample_info;
}

/* A sample reads like a status snapshot: devices, clients, models, counters, the daemon. */
static void test_sample_is_a_status(void **state)
{
	static const uint64_t held = 6 * MiB;
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "sampled", .size = 4 * MiB};
	rocmmem_client *c = harness_connect(&harness_group, "viewer");
	struct sample_view v = {0};
	struct child holder;
	uint64_t model_id;
	long end;

	(void)state;
	assert_int_equal(child_start(&holder, holder_child, (void *)&held), 0);
	v.holder = (pid_t)child_value(NULL, &holder);
	assert_int_equal(rocmmem_model_register(c, &desc, &model_id), 0);
	assert_int_equal(rocmmem_model_acquire(c, model_id, 0), 0);
	rocmmem_set_event_callback(c, on_sample_view, &v);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 20), 20);
	end = harness_now_ms() + HARNESS_WAIT_MS;
	while (!v.seen && harness_now_ms() < end)
		pump(c, 20);
	assert_true(v.seen);
	assert_int_equal(v.devices, 1);
	assert_int_equal(v.budget, 64 * MiB);
	assert_int_equal(v.leased, held);
	assert_int_equal(v.reserved, 4 * MiB);
	assert_int_equal(v.holder_leased, held);
	assert_int_equal(v.model_bytes, 4 * MiB);
	assert_int_equal(v.model_state, ROCMMEM_MODEL_IN_USE);
	/* Leases, the queue and denials are status-only: empty, and out of range is NULL. */
	assert_int_equal(v.leases, 0);
	assert_true(v.lease_null);
	assert_int_equal(v.waiters, 0);
	assert_int_equal(v.denials, 0);
	assert_string_equal(v.version, rocmmem_client_daemon_version(c));
	assert_string_equal(v.backend, "host");
	assert_int_equal(v.daemon_pid, harness_group.pid);
	assert_int_equal(v.info.interval_ms, 20);
	assert_true(v.info.uptime_ms > 0);
	assert_int_equal(v.info.waiters, 0);
	assert_int_equal(v.info.clients_omitted, 0);
	assert_int_equal(v.info.models_omitted, 0);
	/* Wall-clock time, give or take a clock step. */
	assert_true(v.info.timestamp_ms + 600000 > realtime_ms());
	assert_true(v.info.timestamp_ms < realtime_ms() + 600000);
	assert_int_equal(rocmmem_model_release(c, model_id), 0);
	assert_int_equal(rocmmem_model_unregister(c, model_id), 0);
	finish_child(&holder);
	rocmmem_disconnect(c);
}

/* One kind of telemetry event, as the callback saw it (strings copied). */
struct event_copy {
	enum rocmmem_telemetry_type type;
	struct rocmmem_telemetry_event e;
	char client_name[65], model_name[65], detail[512];
};

struct event_log {
	pid_t pid;
	unsigned n;
	struct event_copy v[16];
};

static void on_event_log(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct event_log *log = userdata;
	struct event_copy *o;

	(void)c;
	if (ev->type != ROCMMEM_EVENT_TELEMETRY || ev->telemetry->pid != log->pid || log->n == 16)
		return;
	o = &log->v[log->n++];
	o->type = ev->telemetry->type;
	o->e = *ev->telemetry;
	snprintf(o->client_name, sizeof(o->client_name), "%s", ev->telemetry->client_name);
	snprintf(o->model_name, sizeof(o->model_name), "%s", ev->telemetry->model_name);
	snprintf(o->detail, sizeof(o->detail), "%s", ev->telemetry->detail);
}

/* fields_child: a lease, a refusal, a model made resident, then away. Reports the ids. */
static int fields_child(void *arg, int in, int out)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 4 * MiB, .tag = "fields"};
	struct rocmmem_lease_request big = {.struct_size = sizeof(big), .size = 128 * MiB};
	struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
					  .name = "vae-x",
					  .model_class = ROCMMEM_MODEL_VAE,
					  .size = 8 * MiB};
	rocmmem_client *c;
	rocmmem_lease *l, *none;
	uint64_t model_id;
	int64_t go;

	(void)arg;
	if (rocmmem_connect(harness_group.sock, "feed-child", 5000, &c) < 0)
		return 10;
	if (!pipe_get(in, &go, 30000))
		return 11;
	if (rocmmem_lease_acquire(c, &req, &l) < 0 ||
	    rocmmem_lease_acquire(c, &big, &none) != -E2BIG)
		return 12;
	pipe_put(out, (int64_t)rocmmem_lease_id(l));
	if (rocmmem_lease_release(l) < 0 || rocmmem_model_register(c, &desc, &model_id) < 0 ||
	    rocmmem_model_acquire(c, model_id, 0) < 0 || rocmmem_model_release(c, model_id) < 0)
		return 13;
	pipe_put(out, (int64_t)model_id);
	rocmmem_disconnect(c);
	return 0;
}

/* Events carry who, what, where and why, in the order they happened. */
static void test_event_fields(void **state)
{
	static const enum rocmmem_telemetry_type want[] = {
	    ROCMMEM_TELEMETRY_LEASE_GRANTED,	   ROCMMEM_TELEMETRY_LEASE_DENIED,
	    ROCMMEM_TELEMETRY_LEASE_RELEASED,	   ROCMMEM_TELEMETRY_MODEL_LOADED,
	    ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED,
	};
	const size_t nwant = sizeof(want) / sizeof(want[0]);
	rocmmem_client *c = harness_connect(&harness_group, "listener");
	struct event_log log = {0};
	struct child ch;
	int64_t lease_id, model_id;
	uint64_t before = realtime_ms();
	long end;

	(void)state;
	rocmmem_set_event_callback(c, on_event_log, &log);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, 0), 0);
	assert_int_equal(child_start(&ch, fields_child, NULL), 0);
	log.pid = ch.pid;
	pipe_put(ch.to_child, 1);
	lease_id = child_value(c, &ch);
	model_id = child_value(c, &ch);
	assert_int_equal(child_wait(&ch, 10000), 0);
	close(ch.to_child);
	close(ch.from_child);
	end = harness_now_ms() + 10000;
	while (log.n < nwant + 1 && harness_now_ms() < end)
		pump(c, 20);
	/* It connected before the test listened for it? No: it waited for the go. */
	assert_int_equal(log.n, nwant + 1);
	assert_int_equal(log.v[0].type, ROCMMEM_TELEMETRY_CLIENT_CONNECTED);
	for (size_t i = 0; i < nwant; i++) {
		const struct event_copy *o = &log.v[i + 1];

		if (o->type != want[i])
			fail_msg("event %zu: %s, expected %s (%s)", i,
				 rocmmem_telemetry_name(o->type), rocmmem_telemetry_name(want[i]),
				 o->detail);
	}
	for (unsigned i = 0; i < log.n; i++) {
		const struct event_copy *o = &log.v[i];

		assert_string_equal(o->client_name, "feed-child");
		assert_int_equal(o->e.client_id, log.v[0].e.client_id);
		assert_true(o->e.client_id > 0);
		assert_true(o->detail[0] != '\0');
		assert_int_equal(o->e.dropped, 0);
		assert_true(o->e.timestamp_ms + 600000 > before);
		assert_true(o->e.timestamp_ms < realtime_ms() + 600000);
	}
	/* granted */
	assert_true(log.v[1].e.has_device);
	assert_int_equal(log.v[1].e.device, 0);
	assert_int_equal(log.v[1].e.bytes, 4 * MiB);
	assert_int_equal(log.v[1].e.lease_id, lease_id);
	assert_int_equal(log.v[1].e.error, 0);
	/* denied: the errno the child got, the size it asked, why */
	assert_int_equal(log.v[2].e.error, -E2BIG);
	assert_int_equal(log.v[2].e.bytes, 128 * MiB);
	assert_int_equal(log.v[2].e.lease_id, 0);
	assert_non_null(strstr(log.v[2].detail, "budget"));
	/* released */
	assert_int_equal(log.v[3].e.lease_id, lease_id);
	assert_int_equal(log.v[3].e.bytes, 4 * MiB);
	/* model loaded */
	assert_int_equal(log.v[4].e.model_id, model_id);
	assert_string_equal(log.v[4].model_name, "vae-x");
	assert_int_equal(log.v[4].e.bytes, 8 * MiB);
	/* disconnected: no device */
	assert_false(log.v[5].e.has_device);
	rocmmem_disconnect(c);
}

/* Samples are delivered from inside a call that waits for the daemon. */
static void test_delivery_inside_waiting_call(void **state)
{
	static const uint64_t all = 64 * MiB;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 4 * MiB, .timeout_ms = 500};
	rocmmem_client *c = harness_connect(&harness_group, "waiting");
	struct seen s = {0};
	struct child holder;
	rocmmem_lease *l = NULL;

	(void)state;
	assert_int_equal(child_start(&holder, holder_child, (void *)&all), 0);
	child_value(NULL, &holder);
	rocmmem_set_event_callback(c, on_event, &s);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 20), 20);
	/* The first sample follows the reply at once: this wait of 500 ms must deliver it. */
	s.inside = true;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -ETIMEDOUT);
	s.inside = false;
	assert_true(s.samples_inside >= 1);
	assert_int_equal(s.samples, s.samples_inside);
	finish_child(&holder);
	rocmmem_disconnect(c);
}

/* Unsubscribing stops everything, including what was received and not yet delivered. */
static void test_unsubscribe_stops(void **state)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	rocmmem_client *c = harness_connect(&harness_group, "quitter");
	rocmmem_client *other = harness_connect(&harness_group, "busy");
	struct seen s = {0};
	rocmmem_lease *l;

	(void)state;
	rocmmem_set_event_callback(c, on_event, &s);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, 10),
			 10);
	assert_true(pump_until(c, &s.samples, 3, 5000));
	/* Let samples and events pile up unread, then unsubscribe. */
	assert_int_equal(rocmmem_lease_acquire(other, &req, &l), 0);
	assert_int_equal(rocmmem_lease_release(l), 0);
	sleep_ms(200);
	assert_int_equal(rocmmem_unsubscribe(c), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(rocmmem_lease_acquire(other, &req, &l), 0);
	assert_int_equal(rocmmem_lease_release(l), 0);
	pump(c, 300);
	assert_int_equal(s.samples, 0);
	assert_int_equal(s.telemetry, 0);
	/* Events alone, again: events but no samples. */
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, 0), 0);
	assert_int_equal(rocmmem_lease_acquire(other, &req, &l), 0);
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_true(pump_until(c, &s.by_type[ROCMMEM_TELEMETRY_LEASE_RELEASED], 1, 5000));
	assert_int_equal(s.by_type[ROCMMEM_TELEMETRY_LEASE_GRANTED], 1);
	pump(c, 100);
	assert_int_equal(s.samples, 0);
	rocmmem_disconnect(other);
	rocmmem_disconnect(c);
}

/* dispatch_once counts what one rocmmem_dispatch delivers. */
static void dispatch_once(rocmmem_client *c, struct seen *s, unsigned *samples, unsigned *telemetry)
{
	unsigned s0 = s->samples, t0 = s->telemetry;

	assert_true(rocmmem_dispatch(c) >= 0);
	*samples = s->samples - s0;
	*telemetry = s->telemetry - t0;
}

/*
 * A subscriber that does not dispatch for two seconds of 10 ms samples and thousands of
 * events: it then gets one sample at most and no more events than the library keeps, and
 * every lost sample and event is accounted for.
 */
static void test_never_dispatching_stays_bounded(void **state)
{
	static struct churn churn = {"flood", 2000, 2 * MiB};
	rocmmem_client *c = harness_connect(&harness_group, "sleeper");
	struct seen s = {0};
	unsigned samples, telemetry;
	struct child ch;
	int64_t grants, denials, releases;
	long start;

	(void)state;
	rocmmem_set_event_callback(c, on_event, &s);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, 10),
			 10);
	/* Whatever earlier tests' connections still had to say is said by now. */
	pump(c, 300);
	memset(&s, 0, sizeof(s));
	start = harness_now_ms();
	assert_int_equal(child_start(&ch, churn_child, &churn), 0);
	s.pids[s.npids++] = ch.pid;
	assert_int_equal(child_value(NULL, &ch), ch.pid);
	pipe_put(ch.to_child, 1);
	grants = child_value(NULL, &ch);
	denials = child_value(NULL, &ch);
	releases = child_value(NULL, &ch);
	assert_int_equal(grants, churn.iterations);
	assert_int_equal(denials, 0);
	if (harness_now_ms() - start < 2000)
		sleep_ms(2000 - (harness_now_ms() - start));

	/*
	 * What it had received comes as one sample at most (the daemon may have had none in its
	 * socket: events filled it first, and it thins samples while the socket is full), and as
	 * no more events than the library keeps.
	 */
	dispatch_once(c, &s, &samples, &telemetry);
	assert_true(samples <= 1);
	assert_true(telemetry <= TELEMETRY_CAP);

	/*
	 * Once it exits, the counts add up: events delivered plus dropped are all that happened,
	 * and the samples the daemon thinned meanwhile are counted in the next it sends.
	 */
	finish_child(&ch);
	assert_true(pump_until(c, &s.by_type[ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED], 1, 10000));
	assert_true(s.telemetry_dropped > 0);
	assert_int_equal(s.telemetry + s.telemetry_dropped, 1 + grants + releases + 1);
	pump_until(c, &s.samples, 3, 5000);
	if (s.sample_dropped < 20)
		fail_msg("%u samples delivered, %u dropped: two seconds of 10 ms samples unread "
			 "should have dropped many",
			 s.samples, s.sample_dropped);
	rocmmem_disconnect(c);
}

/*
 * Under a flood of telemetry the subscriber does not read, its evict request still arrives:
 * it acks, and the request that needed the memory is granted.
 */
static void test_control_events_survive_a_flood(void **state)
{
	static struct churn churn = {"flood", 2000, 2 * MiB};
	static const uint64_t want = 32 * MiB;
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = "big", .size = 48 * MiB};
	rocmmem_client *c = harness_connect(&harness_group, "owner");
	struct seen s = {.ack = true, .ack_result = 1};
	struct child flood, waiter;
	uint64_t model_id;
	long end;

	(void)state;
	assert_int_equal(rocmmem_model_register(c, &desc, &model_id), 0);
	assert_int_equal(rocmmem_model_acquire(c, model_id, 0), 0);
	assert_int_equal(rocmmem_model_release(c, model_id), 0);
	rocmmem_set_event_callback(c, on_event, &s);
	assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, 10),
			 10);
	assert_int_equal(child_start(&flood, churn_child, &churn), 0);
	child_value(NULL, &flood);
	pipe_put(flood.to_child, 1);
	for (int i = 0; i < 3; i++)
		child_value(NULL, &flood); /* done: thousands of events unread */
	assert_int_equal(child_start(&waiter, waiter_child, (void *)&want), 0);
	child_value(NULL, &waiter);

	/* Dispatching now brings the evict request, however much telemetry came first. */
	end = harness_now_ms() + 15000;
	while (s.evict_requests == 0 && harness_now_ms() < end) {
		unsigned samples, telemetry;
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (poll(&p, 1, 100) <= 0)
			continue;
		dispatch_once(c, &s, &samples, &telemetry);
		assert_true(samples <= 1);
		assert_true(telemetry <= TELEMETRY_CAP);
	}
	assert_int_equal(s.evict_requests, 1);
	assert_int_equal(s.ack_result, 0);
	assert_int_equal(child_value(c, &waiter), 0); /* granted */
	/*
	 * The flood overflowed: the drops are told with a later telemetry event, which may come
	 * after the evict request (the daemon sends what it queued for the full socket first, then
	 * the feed goes on with its count). The eviction and the grant make such events.
	 */
	for (long until = harness_now_ms() + HARNESS_WAIT_MS;
	     s.telemetry_dropped == 0 && harness_now_ms() < until;)
		pump(c, 20);
	assert_true(s.telemetry_dropped > 0);
	finish_child(&waiter);
	finish_child(&flood);
	assert_int_equal(rocmmem_model_unregister(c, model_id), 0);
	rocmmem_disconnect(c);
}

/* A daemon that dies mid-stream: the subscriber is told once, and calls fail cleanly. */
static void test_daemon_dies_mid_stream(void **state)
{
	static const char *const args[] = {"--budget", "16M", NULL};
	struct daemon_proc d2;
	rocmmem_client *c;
	struct seen s = {0};
	long end;

	(void)state;
	for (int round = 0; round < 2; round++) {
		memset(&s, 0, sizeof(s));
		assert_int_equal(harness_daemon_start(&d2, args), 0);
		c = harness_connect(&d2, "orphan");
		rocmmem_set_event_callback(c, on_event, &s);
		assert_int_equal(
		    subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, 10), 10);
		assert_true(pump_until(c, &s.samples, 3, 5000));
		sleep_ms(100); /* unread samples pile up */
		if (round == 0) {
			/* SIGTERM: the shutdown event comes through, then the end. */
			kill(d2.pid, SIGTERM);
		} else {
			kill(d2.pid, SIGKILL);
		}
		end = harness_now_ms() + 10000;
		while (s.disconnected == 0 && harness_now_ms() < end) {
			struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

			if (poll(&p, 1, 100) > 0)
				rocmmem_dispatch(c);
		}
		assert_int_equal(s.disconnected, 1);
		if (round == 0)
			assert_int_equal(s.shutdowns, 1);
		assert_int_equal(rocmmem_dispatch(c), -ECONNRESET);
		assert_int_equal(subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, 0), -ECONNRESET);
		assert_true(rocmmem_unsubscribe(c) < 0);
		rocmmem_disconnect(c);
		harness_daemon_stop(&d2);
	}
}

/* ----------------------------------------------------------------------------------------- */
/*
 * The library's own bounds, exactly: a stand-in daemon on a real socket sends more telemetry
 * than the library keeps while the host is busy in its callback (a real daemon thins before
 * the library ever could), and a second thread's waiting call reads it all in.
 */

#define FAKE_FLOOD 3000u
#define FAKE_SAMPLE_EVERY 60u
#define FAKE_EVICT_AT 1500u
#define FAKE_MODEL 7u

struct fake {
	char dir[64];
	char path[108];
	int listen_fd;
	pthread_t thread;
	int result; /* 0 once it served everything */
};

static int fake_send(int fd, const Rocmmem__Wire__ServerMessage *m)
{
	uint8_t buf[4096];
	ssize_t n = wire_pack(&m->base, buf, sizeof(buf));

	return n < 0 ? (int)n : wire_send(fd, buf, (size_t)n, NULL, 0, 0);
}

static Rocmmem__Wire__ClientMessage *fake_recv(int fd)
{
	static uint8_t buf[WIRE_MAX_FRAME];
	unsigned nfds = 0;
	int fds[WIRE_MAX_FDS];
	ssize_t n = wire_recv(fd, buf, sizeof(buf), fds, &nfds, 0);

	wire_close_fds(fds, nfds);
	return n > 0 ? rocmmem__wire__client_message__unpack(NULL, (size_t)n, buf) : NULL;
}

static int fake_event(int fd, uint64_t seq, Rocmmem__Wire__Event *e)
{
	Rocmmem__Wire__ServerMessage m = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;

	e->has_seq = true;
	e->seq = seq;
	m.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT;
	m.event = e;
	return fake_send(fd, &m);
}

static int fake_telemetry(int fd, uint64_t seq, uint32_t dropped)
{
	Rocmmem__Wire__Event e = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__TelemetryEvent t = ROCMMEM__WIRE__TELEMETRY_EVENT__INIT;

	t.has_type = t.has_lease_id = t.has_pid = true;
	t.type = ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_GRANTED;
	t.lease_id = seq;
	t.pid = 4242;
	t.detail = (char *)"granted by a stand-in";
	t.has_dropped = dropped != 0;
	t.dropped = dropped;
	e.body_case = ROCMMEM__WIRE__EVENT__BODY_TELEMETRY;
	e.telemetry = &t;
	return fake_event(fd, seq, &e);
}

static int fake_sample(int fd, uint64_t seq)
{
	Rocmmem__Wire__Event e = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__TelemetrySample s = ROCMMEM__WIRE__TELEMETRY_SAMPLE__INIT;
	Rocmmem__Wire__DeviceInfo d = ROCMMEM__WIRE__DEVICE_INFO__INIT, *dp = &d;
	Rocmmem__Wire__Counters k = ROCMMEM__WIRE__COUNTERS__INIT;

	d.has_budget_bytes = true;
	d.budget_bytes = seq * MiB; /* tells which sample it was */
	k.has_grants = true;
	k.grants = seq;
	s.has_timestamp_ms = s.has_interval_ms = s.has_dropped = true;
	s.timestamp_ms = seq;
	s.interval_ms = 10;
	s.dropped = 2; /* thinned by the daemon before this one */
	s.n_devices = 1;
	s.devices = &dp;
	s.counters = &k;
	e.body_case = ROCMMEM__WIRE__EVENT__BODY_SAMPLE;
	e.sample = &s;
	return fake_event(fd, seq, &e);
}

static int fake_evict(int fd, uint64_t seq)
{
	Rocmmem__Wire__Event e = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__EvictRequest r = ROCMMEM__WIRE__EVICT_REQUEST__INIT;

	r.has_model_id = r.has_deadline_ms = true;
	r.model_id = FAKE_MODEL;
	r.deadline_ms = 20000;
	e.body_case = ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST;
	e.evict_request = &r;
	return fake_event(fd, seq, &e);
}

static int fake_reply(int fd, uint64_t id, Rocmmem__Wire__Reply *r)
{
	Rocmmem__Wire__ServerMessage m = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;

	r->has_id = true;
	r->id = id;
	m.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	m.reply = r;
	return fake_send(fd, &m);
}

/*
 * fake_serve answers hello, sends event 1, and on a status request sends the flood (samples
 * and an evict request among it) before the reply; then it waits for the client to leave.
 */
static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	Rocmmem__Wire__ClientMessage *m;
	Rocmmem__Wire__Reply r = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__HelloReply h = ROCMMEM__WIRE__HELLO_REPLY__INIT;
	Rocmmem__Wire__StatusReply st = ROCMMEM__WIRE__STATUS_REPLY__INIT;
	uint64_t seq = 1;
	int fd = accept(f->listen_fd, NULL, NULL);

	f->result = -1;
	if (fd < 0)
		return NULL;
	m = fake_recv(fd);
	if (!m || m->body_case != ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO)
		goto out;
	h.has_protocol_version = h.has_device_count = true;
	h.protocol_version = 1;
	h.device_count = 1;
	h.daemon_version = (char *)"stand-in";
	h.backend = (char *)"host";
	r.body_case = ROCMMEM__WIRE__REPLY__BODY_HELLO;
	r.hello = &h;
	if (fake_reply(fd, m->id, &r) < 0 || fake_telemetry(fd, seq++, 0) < 0)
		goto out;
	rocmmem__wire__client_message__free_unpacked(m, NULL);
	m = fake_recv(fd);
	if (!m || m->body_case != ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS)
		goto out;
	for (unsigned i = 0; i < FAKE_FLOOD; i++) {
		if (i % FAKE_SAMPLE_EVERY == 0 && fake_sample(fd, seq++) < 0)
			goto out;
		if (i == FAKE_EVICT_AT && fake_evict(fd, seq++) < 0)
			goto out;
		if (fake_telemetry(fd, seq++, i == 0 ? 5 : 0) < 0)
			goto out;
	}
	rocmmem__wire__reply__init(&r);
	r.body_case = ROCMMEM__WIRE__REPLY__BODY_STATUS;
	r.status = &st;
	if (fake_reply(fd, m->id, &r) < 0)
		goto out;
	rocmmem__wire__client_message__free_unpacked(m, NULL);
	m = NULL;
	while ((m = fake_recv(fd))) /* until the client goes */
		rocmmem__wire__client_message__free_unpacked(m, NULL);
	f->result = 0;
out:
	if (m)
		rocmmem__wire__client_message__free_unpacked(m, NULL);
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};

	snprintf(f->dir, sizeof(f->dir), "/tmp/rocmmem-fake-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/fake.sock", f->dir);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f->path);
	f->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(f->listen_fd >= 0);
	assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(f->listen_fd, 4), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
	unlink(f->path);
	rmdir(f->dir);
}

struct flooded {
	rocmmem_client *c;
	int release[2]; /* the busy callback waits for a byte here */
	int status_result;
	bool busy_done;
	/* the second dispatch */
	unsigned telemetry, samples, evicts;
	uint32_t first_dropped, later_dropped, sample_dropped;
	uint64_t sample_budget, sample_grants, last_seq;
	bool out_of_order;
};

static void *status_thread(void *arg)
{
	struct flooded *fl = arg;
	rocmmem_status *st = NULL;
	char byte = 1;

	fl->status_result = rocmmem_status_get(fl->c, &st);
	rocmmem_status_free(st);
	if (write(fl->release[1], &byte, 1) != 1)
		fl->status_result = -EIO;
	return NULL;
}

static void on_flooded(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct flooded *fl = userdata;

	(void)c;
	if (!fl->busy_done) {
		/* Busy in the callback while another thread's waiting call reads everything in. */
		struct pollfd p = {.fd = fl->release[0], .events = POLLIN};
		pthread_t t;
		char byte;

		fl->busy_done = true;
		if (pthread_create(&t, NULL, status_thread, fl) != 0)
			return;
		if (poll(&p, 1, 30000) == 1 && read(fl->release[0], &byte, 1) == 1) {
		}
		pthread_join(t, NULL);
		return;
	}
	if (ev->seq <= fl->last_seq)
		fl->out_of_order = true;
	fl->last_seq = ev->seq;
	if (ev->type == ROCMMEM_EVENT_TELEMETRY) {
		if (fl->telemetry++ == 0)
			fl->first_dropped = ev->telemetry->dropped;
		else
			fl->later_dropped += ev->telemetry->dropped;
	} else if (ev->type == ROCMMEM_EVENT_SAMPLE) {
		fl->samples++;
		fl->sample_dropped = ev->sample_info->dropped;
		fl->sample_budget = rocmmem_status_device(ev->sample, 0)->budget_bytes;
		fl->sample_grants = rocmmem_status_counters(ev->sample)->grants;
	} else if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST && ev->model_id == FAKE_MODEL) {
		fl->evicts++;
	}
}

static void test_library_bounds_exactly(void **state)
{
	struct flooded fl = {0};
	unsigned samples_sent = 0;
	uint64_t seq = 2, last_sample_seq = 0;
	struct fake f;
	struct pollfd p;

	(void)state;
	/* What fake_serve sends after event 1. */
	for (unsigned i = 0; i < FAKE_FLOOD; i++, seq++) {
		if (i % FAKE_SAMPLE_EVERY == 0) {
			last_sample_seq = seq++;
			samples_sent++;
		}
		if (i == FAKE_EVICT_AT)
			seq++;
	}
	fake_start(&f);
	assert_int_equal(pipe(fl.release), 0);
	assert_int_equal(rocmmem_connect(f.path, "flooded", 5000, &fl.c), 0);
	rocmmem_set_event_callback(fl.c, on_flooded, &fl);
	p = (struct pollfd){.fd = rocmmem_event_fd(fl.c), .events = POLLIN};
	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(rocmmem_dispatch(fl.c), 1); /* the busy callback, meanwhile the flood */
	assert_int_equal(fl.status_result, 0);

	assert_int_equal(rocmmem_dispatch(fl.c), 1024 + 1 + 1);
	assert_false(fl.out_of_order);
	/* The newest events are kept; the first of them counts what went before it. */
	assert_int_equal(fl.telemetry, TELEMETRY_CAP);
	assert_int_equal(fl.first_dropped, 5 + FAKE_FLOOD - TELEMETRY_CAP);
	assert_int_equal(fl.later_dropped, 0);
	/* One sample, the newest, counting the ones it replaced and what they counted. */
	assert_int_equal(fl.samples, 1);
	assert_int_equal(fl.sample_dropped, 2 + (samples_sent - 1) * (2 + 1));
	assert_int_equal(fl.sample_grants, last_sample_seq);
	assert_int_equal(fl.sample_budget, last_sample_seq * MiB);
	/* The evict request was never at risk. */
	assert_int_equal(fl.evicts, 1);
	rocmmem_disconnect(fl.c);
	fake_stop(&f);
	assert_int_equal(f.result, 0);
	close(fl.release[0]);
	close(fl.release[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_subscribe_arguments, harness_case_idle),
	    cmocka_unit_test_teardown(test_samples_and_events_while_churning, harness_case_idle),
	    cmocka_unit_test_teardown(test_sample_is_a_status, harness_case_idle),
	    cmocka_unit_test_teardown(test_event_fields, harness_case_idle),
	    cmocka_unit_test_teardown(test_delivery_inside_waiting_call, harness_case_idle),
	    cmocka_unit_test_teardown(test_unsubscribe_stops, harness_case_idle),
	    cmocka_unit_test_teardown(test_never_dispatching_stays_bounded, harness_case_idle),
	    cmocka_unit_test_teardown(test_control_events_survive_a_flood, harness_case_idle),
	    cmocka_unit_test_teardown(test_daemon_dies_mid_stream, harness_case_idle),
	    cmocka_unit_test(test_library_bounds_exactly),
	};

	signal(SIGPIPE, SIG_IGN);
	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
