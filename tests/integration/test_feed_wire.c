/* SPDX-License-Identifier: MIT */
/*
 * test_feed_wire.c: telemetry subscriptions on the raw protocol: the reply, samples at the
 * interval asked, events that match what another client did, and counters that add up.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define MiB ((uint64_t)1 << 20)

/* subscribe sends a Subscribe and returns the reply (the caller frees it). */
static Rocmmem__Wire__ServerMessage *subscribe(int fd, uint64_t id, bool samples, bool events,
					       bool has_interval, uint32_t interval_ms)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Subscribe sub = ROCMMEM__WIRE__SUBSCRIBE__INIT;
	Rocmmem__Wire__ServerMessage *m;

	sub.has_samples = true;
	sub.samples = samples;
	sub.has_events = true;
	sub.events = events;
	sub.has_interval_ms = has_interval;
	sub.interval_ms = interval_ms;
	msg.has_id = true;
	msg.id = id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE;
	msg.subscribe = &sub;
	assert_int_equal(harness_raw_send(fd, &msg, NULL, 0), 0);
	/* Samples of an earlier subscription may come first. */
	for (;;) {
		m = harness_raw_recv(fd, 2000, NULL, NULL, NULL);
		assert_non_null(m);
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY)
			break;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	assert_int_equal(m->reply->id, id);
	return m;
}

static int greeted(const char *name)
{
	int fd = harness_raw_connect(&harness_group);

	assert_true(fd >= 0);
	assert_int_equal(harness_raw_hello(fd, 1, name), 0);
	return fd;
}

/* next_event reads until an event arrives (up to timeout_ms); NULL on timeout. */
static Rocmmem__Wire__ServerMessage *next_event(int fd, int timeout_ms)
{
	long end = harness_now_ms() + timeout_ms;

	while (harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m =
		    harness_raw_recv(fd, (int)(end - harness_now_ms()), NULL, NULL, NULL);

		if (!m)
			return NULL;
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT)
			return m;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	return NULL;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Samples every 50 ms: the first at once, then never closer together than the interval. */
static void test_samples_at_interval(void **state)
{
	enum { N = 16 };
	int fd = greeted("sampler");
	Rocmmem__Wire__ServerMessage *m = subscribe(fd, 2, true, false, true, 50);
	uint64_t stamps[N], gaps[N - 1], last_seq = 0;
	long start = harness_now_ms();

	(void)state;
	assert_int_equal(m->reply->error, 0);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_SUBSCRIBE);
	assert_int_equal(m->reply->subscribe->interval_ms, 50);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	for (int i = 0; i < N; i++) {
		Rocmmem__Wire__TelemetrySample *s;

		m = next_event(fd, 2000);
		assert_non_null(m);
		assert_int_equal(m->event->body_case, ROCMMEM__WIRE__EVENT__BODY_SAMPLE);
		assert_true(m->event->seq > last_seq);
		last_seq = m->event->seq;
		s = m->event->sample;
		assert_int_equal(s->interval_ms, 50);
		assert_int_equal(s->n_devices, 1);
		assert_int_equal(s->devices[0]->budget_bytes, 64 * MiB);
		assert_true(s->devices[0]->has_largest_grantable);
		assert_non_null(s->counters);
		assert_true(s->n_clients >= 1); /* this connection at least */
		stamps[i] = s->timestamp_ms;
		if (i == 0)
			assert_true(harness_now_ms() - start < 500); /* the first at once */
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	for (int i = 1; i < N; i++)
		gaps[i - 1] = stamps[i] - stamps[i - 1];
	qsort(gaps, N - 1, sizeof(gaps[0]), compare_u64);
	/* Never bunched up (a late sample is skipped, not sent twice); about every 50 ms. */
	assert_true(gaps[0] >= 45);
	assert_true(gaps[(N - 1) / 2] <= 150);
	close(fd);
}

/* Events match what another client did, in order, and the counters add up. */
static void test_events_follow_activity(void **state)
{
	int fd = greeted("listener");
	Rocmmem__Wire__ServerMessage *m = subscribe(fd, 2, false, true, false, 0);
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 4 * MiB, .timeout_ms = 0, .tag = "feed"};
	Rocmmem__Wire__TelemetryEventType want[] = {
	    ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_CONNECTED,
	    ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_GRANTED,
	    ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_DENIED,
	    ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_RELEASED,
	    ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_CLIENT_DISCONNECTED,
	};
	struct rocmmem_lease_request big = {
	    .struct_size = sizeof(big), .size = 128 * MiB, .timeout_ms = 0};
	rocmmem_client *c;
	rocmmem_lease *l, *none = NULL;
	uint64_t lease_id;

	(void)state;
	assert_int_equal(m->reply->error, 0);
	assert_int_equal(m->reply->subscribe->interval_ms, 0); /* events only */
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	c = harness_connect(&harness_group, "feed-worker");
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
	lease_id = rocmmem_lease_id(l);
	assert_int_equal(rocmmem_lease_acquire(c, &big, &none), -E2BIG);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		Rocmmem__Wire__TelemetryEvent *e;

		m = next_event(fd, 3000);
		assert_non_null(m);
		assert_int_equal(m->event->body_case, ROCMMEM__WIRE__EVENT__BODY_TELEMETRY);
		e = m->event->telemetry;
		/* The earlier test's connection may be torn down only now: not ours. */
		if (e->client_name && strcmp(e->client_name, "feed-worker") != 0) {
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			i--;
			continue;
		}
		if (e->type != want[i])
			fail_msg("event %zu: type %d, expected %d (%s)", i, e->type, want[i],
				 e->detail ? e->detail : "");
		assert_int_equal(e->pid, getpid());
		assert_string_equal(e->client_name, "feed-worker");
		assert_true(e->timestamp_ms > 0);
		assert_non_null(e->detail);
		assert_false(e->has_dropped);
		if (want[i] == ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_GRANTED ||
		    want[i] == ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_RELEASED) {
			assert_int_equal(e->lease_id, lease_id);
			assert_int_equal(e->bytes, 4 * MiB);
			assert_int_equal(e->device, 0);
		}
		if (want[i] == ROCMMEM__WIRE__TELEMETRY_EVENT_TYPE__EVENT_LEASE_DENIED) {
			assert_int_equal(e->error, -E2BIG);
			assert_int_equal(e->bytes, 128 * MiB);
			assert_non_null(strstr(e->detail, "more than its whole budget"));
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	close(fd);
}

/* A sample's counters: the daemon's own tally of what the tests above did. */
static void test_counters_in_samples(void **state)
{
	int fd = greeted("counter");
	Rocmmem__Wire__ServerMessage *m = subscribe(fd, 2, true, false, true, 20);
	Rocmmem__Wire__Counters before, *k;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .timeout_ms = 0};
	rocmmem_client *c;
	rocmmem_lease *l;
	long end;

	(void)state;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	m = next_event(fd, 2000);
	assert_non_null(m);
	before = *m->event->sample->counters;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	c = harness_connect(&harness_group, "counted");
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
		assert_int_equal(rocmmem_lease_release(l), 0);
	}
	rocmmem_disconnect(c);
	/* The counters reach the new totals in a later sample. */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	for (;;) {
		assert_true(harness_now_ms() < end);
		m = next_event(fd, 2000);
		assert_non_null(m);
		k = m->event->sample->counters;
		if (k->grants == before.grants + 3 && k->releases == before.releases + 3 &&
		    k->connections == before.connections + 1)
			break;
		assert_true(k->grants <= before.grants + 3);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	assert_int_equal(k->denials, before.denials);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	close(fd);
}

/* Subscribing again replaces the subscription; unsubscribing stops it; bad ones are refused. */
static void test_resubscribe_and_errors(void **state)
{
	static const struct {
		bool samples, events, has_interval;
		uint32_t interval;
	} bad[] = {
	    {true, false, false, 0},   {true, false, true, 0},		{true, false, true, 9},
	    {true, true, true, 60001}, {true, false, true, UINT32_MAX}, {false, false, true, 100},
	};
	int fd = greeted("fickle");
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__Unsubscribe unsub = ROCMMEM__WIRE__UNSUBSCRIBE__INIT;
	Rocmmem__Wire__ServerMessage *m;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = subscribe(fd, 10 + i, bad[i].samples, bad[i].events, bad[i].has_interval,
			      bad[i].interval);
		assert_int_equal(m->reply->error, -EINVAL);
		assert_non_null(m->reply->message);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	/* The bounds themselves are accepted. */
	m = subscribe(fd, 20, true, false, true, 60000);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	m = subscribe(fd, 21, true, false, true, 10);
	assert_int_equal(m->reply->error, 0);
	assert_int_equal(m->reply->subscribe->interval_ms, 10);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	msg.has_id = true;
	msg.id = 22;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_UNSUBSCRIBE;
	msg.unsubscribe = &unsub;
	assert_int_equal(harness_raw_send(fd, &msg, NULL, 0), 0);
	/* Samples sent before the reply are fine; after it, silence. */
	for (;;) {
		m = harness_raw_recv(fd, 2000, NULL, NULL, NULL);
		assert_non_null(m);
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY)
			break;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	assert_int_equal(m->reply->id, 22);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_null(next_event(fd, 300));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_samples_at_interval),
	    cmocka_unit_test(test_events_follow_activity),
	    cmocka_unit_test(test_counters_in_samples),
	    cmocka_unit_test(test_resubscribe_and_errors),
	};

	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
