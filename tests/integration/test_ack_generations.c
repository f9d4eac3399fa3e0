/* SPDX-License-Identifier: MIT */
/*
 * test_ack_generations.c: owns what an evict ack names on the wire: generations in evict
 * requests, revocations, acquire replies and tagged grants, and what bad acks get (a forged or
 * zero generation, a model not being evicted, another client's or an unknown model, a past
 * eviction while a newer one runs, an older client that names none), against a real daemon.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define MiB ((uint64_t)1 << 20)
#define WAIT_MS 15000 /* generous bound for what takes milliseconds; polled, never slept */

static struct daemon_proc daemon_;

#define RAW_EVENTS 16

/* Events a raw connection received while waiting for replies, in order. */
static struct {
	Rocmmem__Wire__Event__BodyCase type;
	uint64_t model_id, generation, lease_id;
} raw_ev[RAW_EVENTS];
static unsigned raw_nev;

static void raw_keep(const Rocmmem__Wire__Event *e)
{
	if (raw_nev >= RAW_EVENTS)
		return;
	raw_ev[raw_nev].type = e->body_case;
	if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST) {
		raw_ev[raw_nev].model_id = e->evict_request->model_id;
		raw_ev[raw_nev].generation = e->evict_request->generation;
	} else if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED) {
		raw_ev[raw_nev].model_id = e->model_revoked->model_id;
		raw_ev[raw_nev].generation = e->model_revoked->generation;
	} else if (e->body_case == ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED) {
		raw_ev[raw_nev].lease_id = e->lease_revoked->lease_id;
		raw_ev[raw_nev].model_id = e->lease_revoked->model_id;
		raw_ev[raw_nev].generation = e->lease_revoked->model_generation;
	}
	raw_nev++;
}

/* raw_reply waits for the reply to id, keeping the events that come first. */
static Rocmmem__Wire__Reply *raw_reply(int fd, uint64_t id, Rocmmem__Wire__ServerMessage **out)
{
	long end = harness_now_ms() + WAIT_MS;

	while (harness_now_ms() < end) {
		bool eof = false;
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(fd, 100, &eof, NULL, NULL);

		assert_false(eof);
		if (m && m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT)
			raw_keep(m->event);
		else if (m && m->reply->id == id)
			return (*out = m)->reply;
		if (m)
			rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	fail_msg("no reply to request %llu", (unsigned long long)id);
	return NULL;
}

static uint64_t raw_send(int fd, Rocmmem__Wire__ClientMessage *msg)
{
	static uint64_t next = 100;

	msg->has_id = true;
	msg->id = next++;
	assert_int_equal(harness_raw_send(fd, msg, NULL, 0), 0);
	return msg->id;
}

/* raw_model sends a model request (acquire, release) and returns its reply's error; an
 * acquire's reply names the residency's generation (*gen). */
static int raw_model(int fd, bool acquire, uint64_t model, uint64_t *gen)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	Rocmmem__Wire__ModelRelease rel = ROCMMEM__WIRE__MODEL_RELEASE__INIT;
	Rocmmem__Wire__ServerMessage *m;
	Rocmmem__Wire__Reply *r;
	int err;

	acq.has_model_id = rel.has_model_id = acq.has_timeout_ms = true;
	acq.model_id = rel.model_id = model;
	acq.timeout_ms = WAIT_MS;
	msg.body_case = acquire ? ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE
				: ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
	msg.model_acquire = &acq;
	if (!acquire)
		msg.model_release = &rel;
	r = raw_reply(fd, raw_send(fd, &msg), &m);
	err = r->error;
	if (gen)
		*gen = r->body_case == ROCMMEM__WIRE__REPLY__BODY_RESIDENCY
			   ? r->residency->generation
			   : 0;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return err;
}

/* raw_ack acks model's eviction naming generation gen (0: none, as an older client). */
static int raw_ack(int fd, uint64_t model, uint64_t gen, char *why, size_t len)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__EvictAck ack = ROCMMEM__WIRE__EVICT_ACK__INIT;
	Rocmmem__Wire__ServerMessage *m;
	int err;

	ack.has_model_id = true;
	ack.model_id = model;
	ack.has_generation = gen != UINT64_MAX;
	ack.generation = gen;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
	msg.evict_ack = &ack;
	err = raw_reply(fd, raw_send(fd, &msg), &m)->error;
	snprintf(why, len, "%s", m->reply->message ? m->reply->message : "");
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return err;
}

static int64_t raw_lease(int fd, uint64_t bytes, uint64_t model, uint64_t *gen)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__ServerMessage *m;
	Rocmmem__Wire__Reply *r;
	int64_t id;

	acq.has_size = acq.has_timeout_ms = true;
	acq.size = bytes;
	acq.timeout_ms = WAIT_MS;
	acq.has_model_id = model != 0;
	acq.model_id = model;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	r = raw_reply(fd, raw_send(fd, &msg), &m);
	id = r->error ? r->error : (int64_t)r->lease->lease_id;
	if (gen)
		*gen = r->error ? 0 : r->lease->model_generation;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return id;
}

static enum rocmmem_model_state model_state_of(uint64_t model)
{
	rocmmem_client *c = harness_connect(&daemon_, "f4-observer");
	enum rocmmem_model_state s = ROCMMEM_MODEL_EVICTED;
	rocmmem_status *st = NULL;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (rocmmem_status_model(st, i)->id == model)
			s = rocmmem_status_model(st, i)->state;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return s;
}

/*
 * requester_thread: a requester whose lease (arg bytes) needs the model's room, released at
 * once. Through librocmmem: the harness's raw receive is for one thread only.
 */
static void *requester_thread(void *arg)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = (uint64_t)(uintptr_t)arg, .timeout_ms = WAIT_MS};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	int err = rocmmem_connect(daemon_.sock, "f4-requester", 5000, &c);

	if (!err)
		err = rocmmem_lease_acquire(c, &req, &l);
	rocmmem_lease_release(l);
	rocmmem_disconnect(c);
	return err ? (void *)1 : NULL;
}

static void evict_once(pthread_t *t, uint64_t bytes)
{
	long end = harness_now_ms() + WAIT_MS;

	pthread_create(t, NULL, requester_thread, (void *)(uintptr_t)bytes);
	while (model_state_of(1) != ROCMMEM_MODEL_EVICTING && harness_now_ms() < end)
		usleep(2000);
}

/* raw_register registers an 8 MiB model; its answer names generation 1. */
static uint64_t raw_register(int fd)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	Rocmmem__Wire__ServerMessage *m;
	uint64_t model;

	reg.name = (char *)"raw-model";
	reg.has_size = true;
	reg.size = 8 * MiB;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	raw_reply(fd, raw_send(fd, &msg), &m);
	model = m->reply->model->model_id;
	assert_int_equal(m->reply->model->generation, 1);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return model;
}

/* Not being evicted: forged, zero, current or no generation, all -EINVAL; a stranger gets
 * -EPERM, an unknown model -ENOENT. */
static void bad_acks_while_idle(int fd, int other, uint64_t model)
{
	char why[512];

	assert_int_equal(raw_ack(fd, model, 7, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "has no generation 7"));
	assert_int_equal(raw_ack(fd, model, 0, why, sizeof(why)), -EINVAL);
	assert_int_equal(raw_ack(fd, model, 1, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "was not asked to unload"));
	assert_int_equal(raw_ack(fd, model, UINT64_MAX, why, sizeof(why)), -EINVAL);
	assert_int_equal(raw_ack(other, model, 1, why, sizeof(why)), -EPERM);
	assert_int_equal(raw_ack(fd, model + 100, 1, why, sizeof(why)), -ENOENT);
}

static void test_acks_name_their_eviction(void **state)
{
	int fd = harness_raw_connect(&daemon_), other = harness_raw_connect(&daemon_);
	uint64_t model, gen = 0, lgen = 0;
	int64_t lease;
	pthread_t t;
	char why[512];
	void *ret;

	(void)state;
	assert_int_equal(harness_raw_hello(fd, 1, "f4-raw-owner"), 0);
	assert_int_equal(harness_raw_hello(other, 1, "f4-raw-stranger"), 0);
	model = raw_register(fd);
	assert_int_equal(model, 1); /* the first model of this daemon: evict_once watches it */
	assert_int_equal(raw_model(fd, true, model, &gen), 0);
	assert_int_equal(gen, 1);
	assert_int_equal(raw_model(fd, false, model, NULL), 0);
	bad_acks_while_idle(fd, other, model);

	/* Generation 1 is revoked at the deadline: its events name it, its late ack is stale. */
	raw_nev = 0;
	evict_once(&t, 32 * MiB);
	assert_int_equal(raw_ack(other, model, 1, why, sizeof(why)), -EPERM);
	pthread_join(t, &ret);
	assert_null(ret);
	assert_int_equal(raw_ack(fd, model, 1, why, sizeof(why)), -ESTALE);
	assert_non_null(strstr(why, "generation 1 is over"));
	assert_true(raw_nev >= 2);
	assert_int_equal(raw_ev[0].type, ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST);
	assert_int_equal(raw_ev[0].generation, 1);
	assert_int_equal(raw_ev[1].type, ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED);
	assert_int_equal(raw_ev[1].generation, 1);

	/* Generation 2, with a tagged lease: a late ack of 1 leaves its eviction running. */
	assert_int_equal(raw_model(fd, true, model, &gen), 0);
	assert_int_equal(gen, 2);
	lease = raw_lease(fd, 2 * MiB, model, &lgen);
	assert_true(lease > 0);
	assert_int_equal(lgen, 2);
	assert_int_equal(raw_model(fd, false, model, NULL), 0);
	raw_nev = 0;
	evict_once(&t, 32 * MiB);
	assert_int_equal(raw_ack(fd, model, 1, why, sizeof(why)), -ESTALE);
	assert_int_equal(raw_ack(fd, model, 3, why, sizeof(why)), -EINVAL);
	assert_int_equal(model_state_of(model), ROCMMEM_MODEL_EVICTING);
	assert_int_equal(raw_ack(fd, model, 2, why, sizeof(why)), 0);
	pthread_join(t, &ret);
	assert_null(ret);
	/* The lease still tagged went with its residency, named as such. */
	assert_true(raw_nev >= 2);
	assert_int_equal(raw_ev[0].generation, 2);
	assert_int_equal(raw_ev[1].type, ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED);
	assert_int_equal(raw_ev[1].lease_id, (uint64_t)lease);
	assert_int_equal(raw_ev[1].model_id, model);
	assert_int_equal(raw_ev[1].generation, 2);

	/* An older client names no generation: it acks the eviction under way, as it did. */
	assert_int_equal(raw_model(fd, true, model, &gen), 0);
	assert_int_equal(gen, 3);
	assert_int_equal(raw_model(fd, false, model, NULL), 0);
	evict_once(&t, 32 * MiB);
	assert_int_equal(raw_ack(fd, model, UINT64_MAX, why, sizeof(why)), 0);
	pthread_join(t, &ret);
	assert_null(ret);
	assert_int_equal(raw_ack(fd, model, UINT64_MAX, why, sizeof(why)), -EINVAL);
	assert_true(harness_log_contains(&daemon_, "warn: refused an evict ack of"));
	close(fd);
	close(other);
}

/*
 * test_next_residency_lease_survives_unload: freeing the memory of a residency that ends may
 * grant, then and there, a lease tagged with the model's next residency; the unload takes only
 * the leases of the residency that ends.
 */
static void test_next_residency_lease_survives_unload(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	int fd = harness_raw_connect(&daemon_);
	rocmmem_client *obs = harness_connect(&daemon_, "f4-observer");
	rocmmem_status *st = NULL;
	uint64_t model, old[2], gen = 0;
	unsigned tagged = 0;
	pthread_t t;
	char why[512];
	void *ret;

	(void)state;
	assert_int_equal(harness_raw_hello(fd, 1, "f4-raw-owner"), 0);
	model = raw_register(fd);
	assert_int_equal(raw_model(fd, true, model, &gen), 0);
	for (int i = 0; i < 2; i++)
		old[i] = (uint64_t)raw_lease(fd, 2 * MiB, model, NULL);
	assert_int_equal(raw_model(fd, false, model, NULL), 0);
	/* 12 MiB resident, 20 free: 24 MiB needs the model evicted. While it is, the owner asks
	 * for a new tagged lease; it waits for the eviction to end. */
	raw_nev = 0;
	evict_once(&t, 24 * MiB);
	acq.has_size = acq.has_timeout_ms = acq.has_model_id = true;
	acq.size = 2 * MiB;
	acq.timeout_ms = WAIT_MS;
	acq.model_id = model;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	raw_send(fd, &msg);
	assert_int_equal(raw_ack(fd, model, 1, why, sizeof(why)), 0);
	pthread_join(t, &ret);
	assert_null(ret);
	/* Both old leases went with generation 1; the new one, of generation 2, stays. */
	for (unsigned i = 0; i < raw_nev; i++)
		if (raw_ev[i].type == ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED) {
			assert_true(raw_ev[i].lease_id == old[0] || raw_ev[i].lease_id == old[1]);
			assert_int_equal(raw_ev[i].generation, 1);
		}
	assert_int_equal(rocmmem_status_get(obs, &st), 0);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *l = rocmmem_status_lease(st, i);

		if (l->model_id == model) {
			tagged++;
			assert_true(l->id != old[0] && l->id != old[1]);
		}
	}
	rocmmem_status_free(st);
	assert_int_equal(tagged, 1);
	rocmmem_disconnect(obs);
	close(fd);
}

/* ----------------------------------------------------------------------------------------- */

static int start(void **state)
{
	/* Long enough for the acks of an eviction under way to arrive before its deadline. */
	static const char *const args[] = {"--budget", "32M", "--evict-deadline", "2", NULL};

	(void)state;
	return harness_daemon_start(&daemon_, args) == 0 ? 0 : -1;
}

static int stop(void **state)
{
	(void)state;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_acks_name_their_eviction, start, stop),
	    cmocka_unit_test_setup_teardown(test_next_residency_lease_survives_unload, start, stop),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
