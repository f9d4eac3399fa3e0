/* SPDX-License-Identifier: MIT */
/*
 * test_api.c: the promises of rocmmem.h's 1.0 ABI, on a real daemon: versions, structs that
 * grow (struct_size), results by out-parameters instead of positive codes, one type for
 * timeouts and devices, and what rocmmem_disconnect refuses.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void test_versions(void **state)
{
	char want[32];

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", ROCMMEM_VERSION_MAJOR, ROCMMEM_VERSION_MINOR,
		 ROCMMEM_VERSION_PATCH);
	assert_string_equal(rocmmem_version(), want);
	assert_int_equal(rocmmem_version_number(), ROCMMEM_VERSION_NUMBER);
	assert_int_equal(ROCMMEM_VERSION_NUMBER, ROCMMEM_VERSION_MAJOR * 10000 +
						     ROCMMEM_VERSION_MINOR * 100 +
						     ROCMMEM_VERSION_PATCH);
	assert_int_equal(ROCMMEM_VERSION_MAJOR, 1);
	assert_true(ROCMMEM_VERSION_AT_LEAST(1, 0));
	assert_false(ROCMMEM_VERSION_AT_LEAST(ROCMMEM_VERSION_MAJOR, ROCMMEM_VERSION_MINOR + 1));
	assert_false(ROCMMEM_VERSION_AT_LEAST(ROCMMEM_VERSION_MAJOR + 1, 0));
	/* Timeouts are signed (< 0: forever), devices unsigned with a value for "all". */
	assert_true((rocmmem_timeout_ms)-1 < 0);
	assert_int_equal(ROCMMEM_WAIT_FOREVER, -1);
	assert_int_equal(ROCMMEM_NO_WAIT, 0);
	assert_int_equal(sizeof(rocmmem_device_index), 4);
	assert_int_equal(ROCMMEM_ALL_DEVICES, UINT32_MAX);
}

/* A lease request as a program built against a newer header would pass it. */
struct newer_request {
	struct rocmmem_lease_request r;
	uint64_t future;
};

static void test_lease_request_struct_size(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "api-sizes");
	struct rocmmem_lease_request req = ROCMMEM_LEASE_REQUEST_INIT;
	struct newer_request newer = {.r = {.struct_size = sizeof(newer), .size = 2 * MiB}};
	rocmmem_lease *l = NULL;

	(void)state;
	assert_int_equal(req.struct_size, sizeof(req));
	req.size = 2 * MiB;
	/* Too small for any version of the struct: refused before anything is asked. */
	req.struct_size = 0;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -EINVAL);
	assert_null(l);
	assert_non_null(strstr(rocmmem_last_error(), "struct_size"));
	req.struct_size = offsetof(struct rocmmem_lease_request, model_id);
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -EINVAL);
	/* Larger, its unknown tail zero: the fields it does not know take their defaults. */
	assert_int_equal(rocmmem_lease_acquire(c, &newer.r, &l), 0);
	assert_int_equal(rocmmem_lease_size(l), 2 * MiB);
	assert_int_equal(rocmmem_lease_release(l), 0);
	/* Larger, asking for what this library does not know: refused, nothing granted. */
	l = NULL;
	newer.future = 1;
	assert_int_equal(rocmmem_lease_acquire(c, &newer.r, &l), -EOPNOTSUPP);
	assert_null(l);
	assert_non_null(strstr(rocmmem_last_error(), "newer rocmmem.h"));
	assert_int_equal(rocmmem_disconnect(c), 0);
}

static void test_connect_options_and_model_desc_struct_size(void **state)
{
	struct {
		struct rocmmem_connect_options o;
		uint32_t future;
	} newer = {.o = {.struct_size = sizeof(newer),
			 .socket_path = harness_group.sock,
			 .name = "api-newer",
			 .timeout_ms = 5000}};
	struct rocmmem_connect_options o = ROCMMEM_CONNECT_OPTIONS_INIT;
	struct {
		struct rocmmem_model_desc d;
		uint64_t future;
	} desc = {.d = {.struct_size = sizeof(desc), .name = "api-model", .size = 4 * MiB}};
	rocmmem_client *c = NULL;
	uint64_t id = 0;

	(void)state;
	o.socket_path = harness_group.sock;
	o.struct_size = sizeof(size_t);
	assert_int_equal(rocmmem_connect_with(&o, &c), -EINVAL);
	assert_null(c);
	newer.future = 7;
	assert_int_equal(rocmmem_connect_with(&newer.o, &c), -EOPNOTSUPP);
	assert_null(c);
	newer.future = 0;
	assert_int_equal(rocmmem_connect_with(&newer.o, &c), 0);
	assert_int_equal(rocmmem_client_device_count(c), 1);
	desc.d.struct_size = offsetof(struct rocmmem_model_desc, pinned);
	assert_int_equal(rocmmem_model_register(c, &desc.d, &id), -EINVAL);
	desc.d.struct_size = sizeof(desc);
	desc.future = 1;
	assert_int_equal(rocmmem_model_register(c, &desc.d, &id), -EOPNOTSUPP);
	desc.future = 0;
	assert_int_equal(rocmmem_model_register(c, &desc.d, &id), 0);
	assert_true(id != 0);
	assert_int_equal(rocmmem_model_unregister(c, id), 0);
	assert_int_equal(rocmmem_disconnect(c), 0);
}

/* The owner of a model, acking evict requests (or not) from its own thread. */
struct owner {
	rocmmem_client *c;
	uint64_t model;
	bool ack;
	int acked;
	rocmmem_timeout_ms deadline_ms; /* of the latest evict request */
	bool stop;			/* atomic */
	pthread_t thread;
};

static void owner_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct owner *o = userdata;

	/* Recorded, checked by the test's thread (this may run on the owner's). */
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST)
		o->deadline_ms = ev->deadline_ms;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST && o->ack)
		__atomic_store_n(&o->acked, rocmmem_model_evict_ack(c, ev->model_id) == 0 ? 1 : -1,
				 __ATOMIC_SEQ_CST);
}

static void *owner_loop(void *arg)
{
	struct owner *o = arg;

	while (!__atomic_load_n(&o->stop, __ATOMIC_SEQ_CST)) {
		rocmmem_dispatch(o->c);
		sleep_ms(5);
	}
	return NULL;
}

static void owner_start(struct owner *o, const char *name, bool ack)
{
	struct rocmmem_model_desc d = {.struct_size = sizeof(d), .name = name, .size = 8 * MiB};

	o->c = harness_connect(&harness_group, name);
	o->ack = ack;
	rocmmem_set_event_callback(o->c, owner_event, o);
	assert_int_equal(rocmmem_model_register(o->c, &d, &o->model), 0);
	assert_int_equal(rocmmem_model_acquire(o->c, o->model, ROCMMEM_NO_WAIT), 0);
	assert_int_equal(rocmmem_model_release(o->c, o->model), 0);
	assert_int_equal(pthread_create(&o->thread, NULL, owner_loop, o), 0);
}

/* acked waits for the owner's ack to return: the daemon may answer the eviction first. */
static int acked(struct owner *o)
{
	for (long waited = 0; waited < HARNESS_WAIT_MS; waited += 5) {
		int v = __atomic_load_n(&o->acked, __ATOMIC_SEQ_CST);

		if (v)
			return v;
		sleep_ms(5);
	}
	return 0;
}

static void owner_stop(struct owner *o)
{
	__atomic_store_n(&o->stop, true, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_join(o->thread, NULL), 0);
	assert_int_equal(rocmmem_disconnect(o->c), 0);
}

static void test_model_evict_result(void **state)
{
	struct {
		struct rocmmem_evict_result r;
		uint64_t future;
	} newer = {.r = {.struct_size = sizeof(newer)}, .future = 0xdead};
	struct rocmmem_evict_result res = ROCMMEM_EVICT_RESULT_INIT, small = {.struct_size = 8};
	/* Static: an owner's thread must never outlive its struct, even when an assertion here
	 * ends the case early. */
	static struct owner acking, deaf;

	(void)state;
	owner_start(&acking, "api-acks", true);
	/* A result too small is refused before the daemon is asked: the model stays. */
	assert_int_equal(rocmmem_model_evict(acking.c, acking.model, &small), -EINVAL);
	assert_int_equal(__atomic_load_n(&acking.acked, __ATOMIC_SEQ_CST), 0);
	/* The owner unloads in time: 0, not revoked, its bytes back. */
	assert_int_equal(rocmmem_model_evict(acking.c, acking.model, &res), 0);
	assert_int_equal(acked(&acking), 1);
	/* The owner's time to unload, a rocmmem_timeout_ms: the daemon's --evict-deadline. */
	assert_int_equal(acking.deadline_ms, 1000);
	assert_int_equal(res.revoked, 0);
	assert_int_equal(res.bytes_freed, 8 * MiB);
	assert_int_equal(res.struct_size, sizeof(res));
	owner_stop(&acking);
	/* The owner misses its deadline: still 0, and the result says revoked. A newer caller's
	 * bigger result gets its unknown tail zeroed, its struct_size kept. */
	owner_start(&deaf, "api-deaf", false);
	assert_int_equal(rocmmem_model_evict(deaf.c, deaf.model, &newer.r), 0);
	assert_int_equal(newer.r.revoked, 1);
	assert_int_equal(newer.r.bytes_freed, 8 * MiB);
	assert_int_equal(newer.r.struct_size, sizeof(newer));
	assert_int_equal(newer.future, 0);
	/* Evicting what holds nothing, without a result: 0. */
	assert_int_equal(rocmmem_model_evict(deaf.c, deaf.model, NULL), 0);
	owner_stop(&deaf);
}

static void test_subscribe_interval_out(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "api-subscribe");
	uint32_t got = 12345;

	(void)state;
	assert_int_equal(rocmmem_subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 25, &got), 0);
	assert_int_equal(got, 25);
	assert_int_equal(rocmmem_subscribe(c, ROCMMEM_SUBSCRIBE_EVENTS, 0, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(rocmmem_subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 40, NULL), 0);
	got = 12345;
	assert_int_equal(rocmmem_subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 5, &got), -EINVAL);
	assert_int_equal(got, 12345);
	assert_int_equal(rocmmem_unsubscribe(c), 0);
	assert_int_equal(rocmmem_disconnect(c), 0);
}

static void test_devices_by_index(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "api-devices");
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 2 * MiB};
	rocmmem_status *st = NULL;
	rocmmem_lease *l = NULL;
	uint64_t released = 1;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
	assert_int_equal(rocmmem_lease_device(l), 0);
	assert_int_equal(rocmmem_lease_ipc_handle(l, NULL, NULL), -EINVAL);
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_trim(c, ROCMMEM_ALL_DEVICES, &released), 0);
	assert_int_equal(rocmmem_trim(c, rocmmem_client_device_count(c), NULL), -ENODEV);
	req.device = rocmmem_client_device_count(c);
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), -ENODEV);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->index, 0);
	/* Processes are asked for by the device's index; one the status lacks has none. */
	assert_int_equal(rocmmem_status_process_count(st, 9), 0);
	assert_null(rocmmem_status_process(st, 9, 0));
	assert_null(rocmmem_status_process(st, 0, rocmmem_status_process_count(st, 0)));
	assert_int_equal(rocmmem_disconnect(c), 0);
	/* A snapshot outlives its client. */
	assert_int_equal(rocmmem_status_device(st, 0)->budget_bytes, 64 * MiB);
	rocmmem_status_free(st);
}

struct in_callback {
	int calls, result;
};

static void disconnect_inside(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct in_callback *s = userdata;

	(void)ev;
	s->calls++;
	s->result = rocmmem_disconnect(c);
}

static void test_disconnect_refused_from_the_callback(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "api-callback");
	struct in_callback seen = {0};
	rocmmem_status *st = NULL;
	long waited = 0;

	(void)state;
	assert_int_equal(rocmmem_set_event_callback(NULL, disconnect_inside, &seen), -EINVAL);
	assert_int_equal(rocmmem_set_event_callback(c, disconnect_inside, &seen), 0);
	assert_int_equal(rocmmem_subscribe(c, ROCMMEM_SUBSCRIBE_SAMPLES, 10, NULL), 0);
	while (seen.calls == 0 && waited < HARNESS_WAIT_MS) {
		assert_true(rocmmem_dispatch(c) >= 0);
		sleep_ms(5);
		waited += 5;
	}
	assert_true(seen.calls > 0);
	assert_int_equal(seen.result, -EBUSY);
	/* Nothing was freed: the client still works, and frees once out of the callback. */
	assert_int_equal(rocmmem_set_event_callback(c, NULL, NULL), 0);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_disconnect(c), 0);
	assert_int_equal(rocmmem_disconnect(NULL), 0);
}

struct waiter {
	rocmmem_client *c;
	rocmmem_lease *l;
	int result;
};

static void *wait_for_memory(void *arg)
{
	struct waiter *w = arg;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 32 * MiB, .timeout_ms = ROCMMEM_WAIT_FOREVER};

	w->result = rocmmem_lease_acquire(w->c, &req, &w->l);
	return NULL;
}

/* queued says whether the daemon's queue holds a request (asked through c). */
static bool queued(rocmmem_client *c)
{
	rocmmem_status *st = NULL;
	bool yes;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	yes = rocmmem_status_waiter_count(st) > 0;
	rocmmem_status_free(st);
	return yes;
}

static void test_disconnect_refused_while_a_thread_waits(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "api-holder");
	struct rocmmem_lease_request big = {.struct_size = sizeof(big), .size = 48 * MiB};
	struct waiter w = {.c = harness_connect(&harness_group, "api-waiter")};
	rocmmem_lease *held = NULL;
	pthread_t t;
	long waited = 0;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &big, &held), 0);
	assert_int_equal(pthread_create(&t, NULL, wait_for_memory, &w), 0);
	while (!queued(holder) && waited < HARNESS_WAIT_MS) {
		sleep_ms(10);
		waited += 10;
	}
	assert_true(queued(holder));
	/* Another thread waits for memory inside a call on w.c: freeing it now would pull the
	 * client from under that thread. */
	assert_int_equal(rocmmem_disconnect(w.c), -EBUSY);
	assert_non_null(strstr(rocmmem_last_error(), "in use"));
	assert_int_equal(rocmmem_lease_release(held), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.result, 0);
	assert_int_equal(rocmmem_lease_release(w.l), 0);
	assert_int_equal(rocmmem_disconnect(w.c), 0);
	assert_int_equal(rocmmem_disconnect(holder), 0);
}

/* lease_of acquires bytes on c; aborts the test on failure. */
static rocmmem_lease *lease_of(rocmmem_client *c, uint64_t bytes)
{
	struct rocmmem_lease_request r = {.struct_size = sizeof(r), .size = bytes};
	rocmmem_lease *l = NULL;

	assert_int_equal(rocmmem_lease_acquire(c, &r, &l), 0);
	return l;
}

static struct child other = {.pid = -1}; /* other_process's, until it has been waited for */

/* other_gone ends other_process's process if a failed case left it behind, then checks idle. */
static int other_gone(void **state)
{
	if (other.pid > 0)
		child_kill(&other);
	other.pid = -1;
	return harness_case_idle(state);
}

/* holder_main connects, takes the bytes the test sends, says so and holds them till told. */
static int holder_main(void *arg, int in, int out)
{
	struct rocmmem_lease_request r = {.struct_size = sizeof(r)};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	int64_t v;

	(void)arg;
	if (!pipe_get(in, &v, HARNESS_WAIT_MS))
		return 1;
	r.size = (uint64_t)v;
	if (rocmmem_connect(harness_group.sock, "other", HARNESS_WAIT_MS, &c) ||
	    rocmmem_lease_acquire(c, &r, &l) || !pipe_put(out, 1))
		return 1;
	return pipe_get(in, &v, HARNESS_WAIT_MS) ? 0 : 1; /* until the test is done */
}

/* other_process starts a process that connects and holds bytes until other_done. */
static void other_process(uint64_t bytes)
{
	int64_t ok = 0;

	assert_int_equal(child_start(&other, holder_main, NULL), 0);
	assert_true(pipe_put(other.to_child, (int64_t)bytes));
	assert_true(pipe_get(other.from_child, &ok, HARNESS_WAIT_MS) && ok == 1);
}

/* other_done lets other_process's process go and checks it ended well. */
static void other_done(void)
{
	assert_true(pipe_put(other.to_child, 0));
	assert_int_equal(child_wait(&other, HARNESS_WAIT_MS), 0);
	other.pid = -1;
}

/*
 * Every connection of a process shows the books of the whole process, its connections coming
 * one after another in the status or with another process's between them (the daemon copies
 * a connection's books to the next one of the same process instead of summing them again).
 */
static void test_books_of_a_process_with_many_connections(void **state)
{
	enum { N = 8 };
	rocmmem_client *c[N];
	rocmmem_lease *mine[2];
	rocmmem_status *st = NULL;
	unsigned seen_mine = 0, seen_other = 0;

	(void)state;
	for (unsigned i = 0; i < N; i++) {
		if (i == N / 2)
			other_process(4 * MiB); /* between them, by connection order */
		c[i] = harness_connect(&harness_group, "many");
	}
	mine[0] = lease_of(c[0], 2 * MiB);
	mine[1] = lease_of(c[N - 1], 6 * MiB);
	assert_int_equal(rocmmem_status_get(c[1], &st), 0);
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);
		uint64_t want = v->pid == getpid() ? 8 * MiB : v->pid == other.pid ? 4 * MiB : 0;

		if (!want)
			continue;
		seen_mine += v->pid == getpid();
		seen_other += v->pid == other.pid;
		assert_int_equal(v->declared_bytes, want);
		assert_int_equal(v->nbooks, 1);
		assert_int_equal(v->books[0].declared_bytes, want);
	}
	rocmmem_status_free(st);
	assert_int_equal(seen_mine, N);
	assert_int_equal(seen_other, 1);
	other_done();
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(rocmmem_lease_release(mine[i]), 0);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(rocmmem_disconnect(c[i]), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_versions, harness_case_idle),
	    cmocka_unit_test_teardown(test_lease_request_struct_size, harness_case_idle),
	    cmocka_unit_test_teardown(test_connect_options_and_model_desc_struct_size,
				      harness_case_idle),
	    cmocka_unit_test_teardown(test_model_evict_result, harness_case_idle),
	    cmocka_unit_test_teardown(test_subscribe_interval_out, harness_case_idle),
	    cmocka_unit_test_teardown(test_devices_by_index, harness_case_idle),
	    cmocka_unit_test_teardown(test_disconnect_refused_from_the_callback, harness_case_idle),
	    cmocka_unit_test_teardown(test_books_of_a_process_with_many_connections, other_gone),
	    cmocka_unit_test_teardown(test_disconnect_refused_while_a_thread_waits,
				      harness_case_idle),
	};

	/* A short eviction deadline: one case waits for a revocation. */
	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "1", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
