/* SPDX-License-Identifier: MIT */
/* models.c: owns hostile model requests on the raw protocol: before hello, bad registrations,
 * unknown and foreign ids, foreign tags, quotas, owners killed mid-wait or mid-eviction, and
 * who may evict or pin a model. */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "fakegpu_paths.h"
#include "hostile.h"

#define ROUNDS 10

/* ----------------------------------------------------------------------------------------- */
/* Raw model messages */

enum op {
	OP_ACQUIRE,
	OP_RELEASE,
	OP_RESIZE,
	OP_UNREGISTER,
	OP_EVICT_ACK,
	OP_ADMIN_EVICT,
	OP_ADMIN_PIN,
	OP_COUNT,
};

/* send_op sends one model request about model (absent when !has_model). */
static int send_op(int fd, uint64_t id, enum op op, bool has_model, uint64_t model, int64_t arg)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	Rocmmem__Wire__ModelRelease rel = ROCMMEM__WIRE__MODEL_RELEASE__INIT;
	Rocmmem__Wire__ModelResize rsz = ROCMMEM__WIRE__MODEL_RESIZE__INIT;
	Rocmmem__Wire__ModelUnregister unr = ROCMMEM__WIRE__MODEL_UNREGISTER__INIT;
	Rocmmem__Wire__EvictAck ack = ROCMMEM__WIRE__EVICT_ACK__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminEvictModel evict = ROCMMEM__WIRE__ADMIN_EVICT_MODEL__INIT;
	Rocmmem__Wire__AdminPinModel pin = ROCMMEM__WIRE__ADMIN_PIN_MODEL__INIT;

	switch (op) {
	case OP_ACQUIRE:
		acq.has_model_id = has_model;
		acq.model_id = model;
		acq.has_timeout_ms = true;
		acq.timeout_ms = arg;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE;
		msg.model_acquire = &acq;
		break;
	case OP_RELEASE:
		rel.has_model_id = has_model;
		rel.model_id = model;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE;
		msg.model_release = &rel;
		break;
	case OP_RESIZE:
		rsz.has_model_id = has_model;
		rsz.model_id = model;
		rsz.has_reservation = arg >= 0;
		rsz.reservation = arg == INT64_MAX ? UINT64_MAX : (uint64_t)arg;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE;
		msg.model_resize = &rsz;
		break;
	case OP_UNREGISTER:
		unr.has_model_id = has_model;
		unr.model_id = model;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_UNREGISTER;
		msg.model_unregister = &unr;
		break;
	case OP_EVICT_ACK:
		ack.has_model_id = has_model;
		ack.model_id = model;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK;
		msg.evict_ack = &ack;
		break;
	case OP_ADMIN_EVICT:
		evict.has_model_id = has_model;
		evict.model_id = model;
		admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
		admin.evict_model = &evict;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
		msg.admin = &admin;
		break;
	case OP_ADMIN_PIN:
		pin.has_model_id = has_model;
		pin.model_id = model;
		pin.has_pinned = true;
		pin.pinned = arg != 0;
		admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
		admin.pin_model = &pin;
		msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
		msg.admin = &admin;
		break;
	default:
		return -EINVAL;
	}
	msg.has_id = true;
	msg.id = id;
	return harness_raw_send(fd, &msg, NULL, 0);
}

/* A registration; fields left unset are absent on the wire. */
struct reg {
	bool has_device, has_class, has_size, has_priority, has_pinned, has_reservation;
	uint32_t device;
	const char *name;
	int cls;
	uint64_t size, reservation;
	int32_t priority;
	bool pinned;
};

static int send_register(int fd, uint64_t id, const struct reg *r)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;

	reg.has_device = r->has_device;
	reg.device = r->device;
	reg.name = (char *)(uintptr_t)r->name;
	reg.has_class_ = r->has_class;
	reg.class_ = (Rocmmem__Wire__ModelClass)r->cls;
	reg.has_size = r->has_size;
	reg.size = r->size;
	reg.has_priority = r->has_priority;
	reg.priority = r->priority;
	reg.has_pinned = r->has_pinned;
	reg.pinned = r->pinned;
	reg.has_reservation = r->has_reservation;
	reg.reservation = r->reservation;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER;
	msg.model_register = &reg;
	msg.has_id = true;
	msg.id = id;
	return harness_raw_send(fd, &msg, NULL, 0);
}

/* send_lease asks for a lease tagged with model. */
static int send_lease(int fd, uint64_t id, uint32_t device, uint64_t size, int64_t timeout_ms,
		      uint64_t model)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;

	acq.has_device = true;
	acq.device = device;
	acq.has_size = true;
	acq.size = size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = timeout_ms;
	acq.tag = (char *)"tagged";
	acq.has_model_id = model != 0;
	acq.model_id = model;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	msg.has_id = true;
	msg.id = id;
	return harness_raw_send(fd, &msg, NULL, 0);
}

/* expect_ok reads the next reply: success for id, no fds. */
static void expect_ok(int fd, uint64_t id)
{
	int fds[8];
	unsigned nfds = 0;
	Rocmmem__Wire__ServerMessage *m = hostile_recv_reply(fd, 5000, fds, &nfds);
	Rocmmem__Wire__Reply *r = m->reply;

	if (r->has_error && r->error != 0)
		fail_msg("request %llu refused: %d (%s): %s", (unsigned long long)id, r->error,
			 strerror(-r->error), r->message ? r->message : "");
	assert_int_equal(r->id, id);
	assert_int_equal(nfds, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

/* register_ok registers name (size bytes) on device and returns the model id. */
static uint64_t register_ok(int fd, uint64_t id, uint32_t device, const char *name, uint64_t size)
{
	struct reg r = {.has_device = true,
			.device = device,
			.name = name,
			.has_class = true,
			.has_size = true,
			.size = size};
	Rocmmem__Wire__ServerMessage *m;
	uint64_t model;

	assert_int_equal(send_register(fd, id, &r), 0);
	m = hostile_recv_reply(fd, 5000, NULL, NULL);
	if (m->reply->has_error && m->reply->error != 0)
		fail_msg("registering '%s' refused: %d: %s", name, m->reply->error,
			 m->reply->message ? m->reply->message : "");
	assert_int_equal(m->reply->id, id);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_MODEL);
	assert_true(m->reply->model->has_model_id);
	model = m->reply->model->model_id;
	assert_true(model > 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return model;
}

/* op_ok sends an op and expects success. */
static void op_ok(int fd, uint64_t id, enum op op, uint64_t model, int64_t arg)
{
	assert_int_equal(send_op(fd, id, op, true, model, arg), 0);
	expect_ok(fd, id);
}

/* expect_evict_request reads messages until an evict request for model arrives. */
static void expect_evict_request(int fd, uint64_t model)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx = hostile_recv(fd, 100, &m, NULL, NULL);
		bool found;

		if (rx == HOSTILE_RX_EOF)
			fail_msg("the daemon closed the owner's connection");
		if (rx != HOSTILE_RX_MSG)
			continue;
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY)
			fail_msg("a reply (%d: %s) where an evict request was expected",
				 m->reply->error, m->reply->message ? m->reply->message : "");
		found = m->event->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST &&
			m->event->evict_request->model_id == model;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (found)
			return;
	}
	fail_msg("no evict request for model %llu", (unsigned long long)model);
}

/* ----------------------------------------------------------------------------------------- */
/* The daemon's view */

struct model_view {
	bool found;
	enum rocmmem_model_state state;
	int pinned;
	uint64_t bytes, evictions;
};

static struct model_view view_of(uint64_t model)
{
	rocmmem_client *c = harness_connect(&hostile.d, "hostile-models-status");
	rocmmem_status *st = NULL;
	struct model_view v = {0};

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->id == model) {
			v.found = true;
			v.state = m->state;
			v.pinned = m->pinned;
			v.bytes = m->bytes;
			v.evictions = m->evictions;
		}
	}
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return v;
}

/* view_named finds a model by name. */
static struct model_view view_named(const char *name)
{
	rocmmem_client *c = harness_connect(&hostile.d, "hostile-models-status");
	rocmmem_status *st = NULL;
	uint64_t id = 0;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (strcmp(rocmmem_status_model(st, i)->name, name) == 0)
			id = rocmmem_status_model(st, i)->id;
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	return view_of(id);
}

/*
 * model_count counts registered models, polled until it is want (up to 2 s); with none left,
 * nothing may stay reserved either.
 */
static size_t model_count(size_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	for (;;) {
		rocmmem_client *c = harness_connect(&hostile.d, "hostile-models-status");
		rocmmem_status *st = NULL;
		uint64_t reserved;
		size_t n;

		assert_int_equal(rocmmem_status_get(c, &st), 0);
		n = rocmmem_status_model_count(st);
		reserved = rocmmem_status_device(st, 0)->reserved_bytes;
		rocmmem_status_free(st);
		rocmmem_disconnect(c);
		if (n == want || harness_now_ms() > end) {
			if (n == 0 && reserved != 0)
				fail_msg("no model is registered, yet %llu bytes stay reserved",
					 (unsigned long long)reserved);
			return n;
		}
		hostile_sleep_ms(5);
	}
}

/* wait_clients waits until `want` clients other than the status reader are connected. */
static void wait_clients(size_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct harness_totals t;

	do {
		assert_int_equal(harness_totals(&hostile.d, &t), 0);
		if (t.clients == want)
			return;
		hostile_sleep_ms(5);
	} while (harness_now_ms() < end);
	fail_msg("%zu clients connected, expected %zu", t.clients, want);
}

/* healthy: hostile_assert_healthy, and no model left registered or reserved. */
static void healthy(void)
{
	assert_int_equal(model_count(0), 0);
	hostile_assert_healthy();
}

static void wait_waiters(uint32_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	uint32_t n;

	while ((n = hostile_status_waiters()) != want && harness_now_ms() < end)
		hostile_sleep_ms(2);
	if (n != want)
		fail_msg("%u requests wait, expected %u", n, want);
}

/* ----------------------------------------------------------------------------------------- */
/* Before hello */

static void test_model_requests_before_hello(void **state)
{
	struct reg r = {.name = "early", .has_size = true, .size = 2 * MIB};

	(void)state;
	for (int op = 0; op <= OP_COUNT; op++) {
		int fd = hostile_connect();
		uint64_t id = 100 + (uint64_t)op;

		/* OP_COUNT stands for a registration. */
		if (op == OP_COUNT)
			assert_int_equal(send_register(fd, id, &r), 0);
		else
			assert_int_equal(send_op(fd, id, (enum op)op, true, 1, 0), 0);
		hostile_expect_error_closed(fd, id, -EPROTO, "hello");
		close(fd);
	}
	healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* Bad registrations */

static void test_bad_registrations(void **state)
{
	char name65[66], name64[65];
	const struct {
		struct reg r;
		int err;
		const char *needle;
	} cases[] = {
	    {{.has_size = true, .size = 2 * MIB}, -EINVAL, "name"},
	    {{.name = "", .has_size = true, .size = 2 * MIB}, -EINVAL, "name"},
	    {{.name = name65, .has_size = true, .size = 2 * MIB}, -EINVAL, "64 bytes"},
	    {{.name = "tab\there"}, -EINVAL, "control"},
	    {{.name = "nl\n"}, -EINVAL, "control"},
	    {{.name = "\x1b[31mred"}, -EINVAL, "control"},
	    {{.name = "del\x7f"}, -EINVAL, "control"},
	    {{.name = "c1-\xc2\x85"}, -EINVAL, "control"},
	    {{.name = "bad-utf8-\xff"}, -EINVAL, "UTF-8"},
	    {{.name = "class-99", .has_class = true, .cls = 99}, -EINVAL, "class 99"},
	    {{.name = "class-5", .has_class = true, .cls = 5}, -EINVAL, "class 5"},
	    {{.name = "class-neg", .has_class = true, .cls = -1}, -EINVAL, "class"},
	    {{.name = "huge", .has_size = true, .size = UINT64_MAX}, -E2BIG, "budget"},
	    {{.name = "huge-1", .has_size = true, .size = UINT64_MAX - 1}, -E2BIG, "budget"},
	    {{.name = "over", .has_size = true, .size = HOSTILE_BUDGET + 1}, -E2BIG, "budget"},
	    {{.name = "reserving", .has_reservation = true, .reservation = 2 * MIB},
	     -EINVAL,
	     "reservation"},
	    {{.name = "reserving-max", .has_reservation = true, .reservation = UINT64_MAX},
	     -EINVAL,
	     "reservation"},
	    {{.name = "dev7", .has_device = true, .device = 7}, -ENODEV, "device 7"},
	    {{.name = "devmax", .has_device = true, .device = UINT32_MAX}, -ENODEV, "device"},
	};
	int fd = hostile_greeted("bad-registrations");
	uint64_t id = 1, model;

	(void)state;
	memset(name65, 'x', 65);
	name65[65] = '\0';
	memset(name64, 'y', 64);
	name64[64] = '\0';
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(send_register(fd, id, &cases[i].r), 0);
		hostile_expect_error(fd, id, cases[i].err, cases[i].needle);
		id++;
	}
	hostile_expect_serving(fd, id++);
	assert_int_equal(model_count(0), 0);
	/* The limits themselves are fine: 64 bytes of name, the whole budget. */
	model = register_ok(fd, id++, 0, name64, HOSTILE_BUDGET);
	op_ok(fd, id, OP_UNREGISTER, model, 0);
	id++;
	model = register_ok(fd, id++, 0, "multi-byte \xc3\xa9\xe2\x82\xac", 0);
	op_ok(fd, id, OP_UNREGISTER, model, 0);
	close(fd);
	healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* Unknown and foreign ids */

static void test_unknown_and_foreign_ids(void **state)
{
	static const uint64_t ids[] = {0, 12345, UINT64_MAX};
	int owner = hostile_greeted("owner");
	int stranger = hostile_greeted("stranger");
	uint64_t id = 1, model, mine;
	struct model_view v;

	(void)state;
	for (int op = 0; op < OP_COUNT; op++) {
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
			assert_int_equal(send_op(owner, id, (enum op)op, true, ids[i], 2 * MIB), 0);
			hostile_expect_error(owner, id, -ENOENT, "no model");
			id++;
		}
		/* No id at all is no model either. */
		assert_int_equal(send_op(owner, id, (enum op)op, false, 0, 2 * MIB), 0);
		hostile_expect_error(owner, id, -ENOENT, "no model");
		id++;
	}
	/* The owner's model, resident and idle; the stranger may not touch it. */
	model = register_ok(owner, id++, 0, "owned", 8 * MIB);
	op_ok(owner, id++, OP_ACQUIRE, model, 0);
	op_ok(owner, id++, OP_RELEASE, model, 0);
	for (int op = OP_ACQUIRE; op <= OP_EVICT_ACK; op++) {
		assert_int_equal(send_op(stranger, id, (enum op)op, true, model, 16 * MIB), 0);
		hostile_expect_error(stranger, id, -EPERM, "belongs to");
		id++;
	}
	v = view_of(model);
	assert_true(v.found);
	assert_int_equal(v.state, ROCMMEM_MODEL_IDLE);
	assert_int_equal(v.bytes, 8 * MIB);
	assert_int_equal(v.evictions, 0);
	/* Resize of one's own model needs a reservation, and one that can be rounded. */
	assert_int_equal(send_op(owner, id, OP_RESIZE, true, model, -1), 0);
	hostile_expect_error(owner, id, -EINVAL, "reservation");
	id++;
	assert_int_equal(send_op(owner, id, OP_RESIZE, true, model, INT64_MAX), 0);
	hostile_expect_error(owner, id, -EINVAL, "reservation");
	id++;
	/* Released more often than acquired. */
	assert_int_equal(send_op(owner, id, OP_RELEASE, true, model, 0), 0);
	hostile_expect_error(owner, id, -EINVAL, "not in use");
	id++;

	/* Leases tagged with someone else's model, an unknown one, or one on another device. */
	assert_int_equal(send_lease(stranger, id, 0, 2 * MIB, 0, model), 0);
	hostile_expect_error(stranger, id, -EPERM, "no model");
	id++;
	assert_int_equal(send_lease(stranger, id, 0, 2 * MIB, 0, 12345), 0);
	hostile_expect_error(stranger, id, -ENOENT, "no model");
	id++;
	mine = register_ok(stranger, id++, 0, "mine", 0);
	assert_int_equal(send_lease(stranger, id, 1, 2 * MIB, 0, mine), 0);
	hostile_expect_error(stranger, id, -ENODEV, "device 1");
	id++;
	hostile_expect_serving(owner, id++);
	hostile_expect_serving(stranger, id++);
	close(stranger);
	close(owner);
	healthy();
}

/* On a daemon with two devices (the stand-in HIP runtime), a lease on device 0 may not count
 * towards a model of device 1, nor the other way round. */
static void test_lease_tagged_with_model_on_other_device(void **state)
{
	static const char *const args[] = {"--backend", "hip", "--budget", "64M", NULL};
	static const char *const vars[] = {"ROCMMEM_HIP_LIBRARY",  "FAKEHIP_DEVICES",
					   "ROCMMEM_SYSFS_ROOT",   "ROCMMEM_ROCM_SMI_LIBRARY",
					   "ROCMMEM_NVML_LIBRARY", "FAKEGPU_STATE_DIR"};
	struct daemon_proc d;
	char dir[64];
	uint64_t on0, on1;
	int fd, rc;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/rocmmem-models-XXXXXX");
	assert_non_null(mkdtemp(dir));
	setenv("ROCMMEM_HIP_LIBRARY", FAKEHIP_PATH, 1);
	setenv("FAKEHIP_DEVICES", "1G,1G", 1);
	setenv("ROCMMEM_SYSFS_ROOT", dir, 1);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so", 1);
	setenv("ROCMMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	setenv("FAKEGPU_STATE_DIR", dir, 1);
	rc = harness_daemon_start(&d, args);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	if (rc != 0)
		fail_msg("rocmmemd did not start over the stand-in HIP runtime");
	fd = harness_raw_connect(&d);
	assert_true(fd >= 0);
	assert_int_equal(harness_raw_hello(fd, 1, "two-devices"), 0);
	on0 = register_ok(fd, 1, 0, "on-device-0", 0);
	on1 = register_ok(fd, 2, 1, "on-device-1", 0);
	assert_int_equal(send_lease(fd, 3, 0, 2 * MIB, 0, on1), 0);
	hostile_expect_error(fd, 3, -EINVAL, "lives on device 1, not 0");
	assert_int_equal(send_lease(fd, 4, 1, 2 * MIB, 0, on0), 0);
	hostile_expect_error(fd, 4, -EINVAL, "lives on device 0, not 1");
	{
		struct reg r = {.has_device = true, .device = 2, .name = "on-device-2"};

		assert_int_equal(send_register(fd, 5, &r), 0);
		hostile_expect_error(fd, 5, -ENODEV, "2 device(s)");
	}
	hostile_expect_serving(fd, 6);
	close(fd);
	assert_int_equal(harness_daemon_stop(&d), 0);
	rmdir(dir);
	healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* Quota */

static void test_register_quota(void **state)
{
	int fd = hostile_greeted("hoarder");
	int other = hostile_greeted("neighbour");
	uint64_t models[300] = {0}, id = 1, lease, again;
	char name[32];

	(void)state;
	for (int i = 0; i < 300; i++) {
		struct reg r = {.name = name, .has_size = true, .size = 2 * MIB};

		snprintf(name, sizeof(name), "model-%03d", i);
		if (i < 256) {
			models[i] = register_ok(fd, id++, 0, name, 2 * MIB);
			continue;
		}
		assert_int_equal(send_register(fd, id, &r), 0);
		hostile_expect_error(fd, id, -EDQUOT, "256");
		id++;
	}
	assert_int_equal(model_count(256), 256);
	/* Still serving this connection and others. */
	hostile_expect_serving(fd, id++);
	assert_int_equal(hostile_send_acquire(fd, id, 0, 2 * MIB, 0, "after-quota"), 0);
	lease = hostile_expect_grant(fd, id, 2 * MIB);
	id++;
	assert_int_equal(hostile_send_release(fd, id, true, lease), 0);
	expect_ok(fd, id);
	id++;
	/* The quota is per connection, and an unregistration frees a place. */
	again = register_ok(other, id++, 0, "neighbour-model", 2 * MIB);
	op_ok(other, id++, OP_UNREGISTER, again, 0);
	op_ok(fd, id++, OP_UNREGISTER, models[17], 0);
	again = register_ok(fd, id++, 0, "model-again", 2 * MIB);
	assert_true(again != models[17]);
	assert_int_equal(send_register(fd, id, &(struct reg){.name = "one-too-many"}), 0);
	hostile_expect_error(fd, id, -EDQUOT, "256");
	id++;
	/* Some of them resident: everything goes with the connection. */
	for (int i = 0; i < 8; i++)
		op_ok(fd, id++, OP_ACQUIRE, models[i], 0);
	close(other);
	close(fd);
	healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* Dying owners */

enum { CHILD_REFUSED = HOSTILE_CHILD_FIRST, CHILD_NO_EVENT };

/* child_next_reply reads the next reply (events skipped): its error in *err, its id. */
static uint64_t child_next_reply(int fd, int *err)
{
	for (;;) {
		bool eof = false;
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(fd, 5000, &eof, NULL, NULL);
		uint64_t id;

		if (!m) {
			*err = -EIO;
			return 0;
		}
		if (m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			continue;
		}
		*err = m->reply->has_error ? m->reply->error : 0;
		id = m->reply->id;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		return id;
	}
}

/* child_reply returns the error of the next reply, which must be to id (else -EIO). */
static int child_reply(int fd, uint64_t id)
{
	int err;

	return child_next_reply(fd, &err) == id ? err : -EIO;
}

/* child_register registers name (size) and returns its id; exits on failure. */
static uint64_t child_register(int fd, uint64_t id, const char *name, uint64_t size)
{
	struct reg r = {.name = name, .has_size = true, .size = size};
	Rocmmem__Wire__ServerMessage *m;
	bool eof = false;
	uint64_t model;

	if (send_register(fd, id, &r) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	m = harness_raw_recv(fd, 5000, &eof, NULL, NULL);
	if (!m || m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ||
	    m->reply->body_case != ROCMMEM__WIRE__REPLY__BODY_MODEL)
		_exit(CHILD_REFUSED);
	model = m->reply->model->model_id;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	return model;
}

static void child_op(int fd, uint64_t id, enum op op, uint64_t model, int64_t arg)
{
	if (send_op(fd, id, op, true, model, arg) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	if (child_reply(fd, id) != 0)
		_exit(CHILD_REFUSED);
}

/*
 * child_acquire_wait: a model in use (16 MiB) and a tagged lease, then an acquire of a second
 * model that must wait (32 MiB, with the test's 32 MiB held). Killed during that wait.
 */
static void child_acquire_wait(int sync, int variant)
{
	static const int64_t timeouts[] = {-1, 60000, INT64_MAX};
	int fd = hostile_child_greeted("doomed-acquirer");
	uint64_t used = child_register(fd, 1, "in-use", 16 * MIB);
	uint64_t leases = child_register(fd, 2, "leases-only", 0);
	uint64_t waiting = child_register(fd, 3, "waiting", 32 * MIB);

	child_op(fd, 4, OP_ACQUIRE, used, 0);
	child_op(fd, 5, OP_ACQUIRE, leases, 0);
	if (variant % 2) {
		/* A tagged lease too (its fd stays open in this process). */
		int lfds[8];
		unsigned n = 0;
		bool eof = false;
		Rocmmem__Wire__ServerMessage *m;

		if (send_lease(fd, 6, 0, 2 * MIB, 0, leases) != 0)
			_exit(HOSTILE_CHILD_NO_SEND);
		m = harness_raw_recv(fd, 5000, &eof, lfds, &n);
		if (!m || m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ||
		    (m->reply->has_error && m->reply->error))
			_exit(CHILD_REFUSED);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	if (send_op(fd, 7, OP_ACQUIRE, true, waiting, timeouts[variant % 3]) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	hostile_signal_ready(sync);
	for (;;)
		pause();
}

static void expect_holder_only(uint64_t held)
{
	if (harness_wait_totals(&hostile.d, held, 1, HARNESS_WAIT_MS) < 0)
		fail_msg("the daemon's books did not return to the holder's lease alone");
	assert_int_equal(model_count(0), 0);
}

static void test_die_during_acquire_wait(void **state)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 32 * MIB, .tag = "holder"};
	rocmmem_client *holder = harness_connect(&hostile.d, "holder");
	rocmmem_lease *hold = NULL;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(holder, &req, &hold), 0);
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_acquire_wait, i);

		hostile_child_ready(&c);
		wait_waiters(1);
		if (i % 3 == 0) {
			struct model_view v;

			/* Look first: its models are there, one of them waiting. */
			assert_int_equal(model_count(3), 3);
			v = view_named("waiting");
			assert_true(v.found);
			assert_int_equal(v.state, ROCMMEM_MODEL_WAITING);
			assert_int_equal(view_named("in-use").bytes, 16 * MIB);
		}
		hostile_child_kill(&c);
		wait_waiters(0);
		expect_holder_only(32 * MIB);
	}
	assert_int_equal(rocmmem_lease_release(hold), 0);
	rocmmem_disconnect(holder);
	healthy();
}

/*
 * child_mid_eviction: an idle 32 MiB model, a tagged lease on another model; waits for the
 * evict request of the first, then (variant) also waits for memory itself, and is killed.
 */
static void child_mid_eviction(int sync, int variant)
{
	int fd = hostile_child_greeted("doomed-owner");
	uint64_t idle = child_register(fd, 1, "idle", 32 * MIB);
	uint64_t tagged = child_register(fd, 2, "tagged", 0);
	uint64_t later = child_register(fd, 3, "later", 16 * MIB);
	long end;

	child_op(fd, 4, OP_ACQUIRE, idle, 0);
	child_op(fd, 5, OP_RELEASE, idle, 0);
	child_op(fd, 6, OP_ACQUIRE, tagged, 0);
	{
		int lfds[8];
		unsigned n = 0;
		bool eof = false;
		Rocmmem__Wire__ServerMessage *m;

		if (send_lease(fd, 7, 0, 8 * MIB, 0, tagged) != 0)
			_exit(HOSTILE_CHILD_NO_SEND);
		m = harness_raw_recv(fd, 5000, &eof, lfds, &n);
		if (!m || m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ||
		    (m->reply->has_error && m->reply->error))
			_exit(CHILD_REFUSED);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	hostile_signal_ready(sync); /* holding 40 MiB: 32 reserved, 8 leased */
	end = harness_now_ms() + HARNESS_WAIT_MS;
	for (;;) {
		bool eof = false, found;
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(fd, 100, &eof, NULL, NULL);

		if (eof || harness_now_ms() > end)
			_exit(CHILD_NO_EVENT);
		if (!m)
			continue;
		found = m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT &&
			m->event->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST &&
			m->event->evict_request->model_id == idle;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (found)
			break;
	}
	if (variant % 2 && send_op(fd, 8, OP_ACQUIRE, true, later, 60000) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	hostile_signal_ready(sync); /* asked to unload, never acks */
	for (;;)
		pause();
}

static void test_die_during_eviction(void **state)
{
	int fd = hostile_greeted("needs-room");

	(void)state;
	for (int i = 0; i < ROUNDS; i++) {
		struct hostile_child c = hostile_spawn(child_mid_eviction, i);
		uint64_t id = 100 + 2 * (uint64_t)i, lease;
		long killed;

		hostile_child_ready(&c);
		/* 24 free: 48 MiB needs the idle model out. */
		assert_int_equal(hostile_send_acquire(fd, id, 0, 48 * MIB, 30000, "room"), 0);
		hostile_child_ready(&c);
		if (i % 2)
			wait_waiters(2);
		killed = harness_now_ms();
		hostile_child_kill(&c);
		/* Granted once the owner is gone, long before its 20 s deadline. */
		lease = hostile_expect_grant(fd, id, 48 * MIB);
		assert_true(harness_now_ms() - killed < 3000);
		assert_int_equal(model_count(0), 0);
		assert_int_equal(hostile_send_release(fd, id + 1, true, lease), 0);
		expect_ok(fd, id + 1);
	}
	close(fd);
	healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* Who may evict and pin */

/*
 * child_nobody: as uid 65534, nothing of root's is its to use, change or give back: not the
 * model (arg's low 16 bits) nor the lease (the bits above); control of root's model is refused;
 * its own works.
 */
static void child_nobody(int sync, int arg)
{
	static const enum op owner_ops[] = {OP_ACQUIRE, OP_RELEASE, OP_RESIZE, OP_UNREGISTER,
					    OP_EVICT_ACK};
	uint64_t foreign = (uint64_t)(arg & 0xffff), lease = (uint64_t)arg >> 16;
	uint64_t mine, id = 1, first, second;
	int fd, err1, err2;

	if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
	    setresuid(65534, 65534, 65534) != 0)
		_exit(20);
	fd = hostile_child_greeted("nobody");
	for (size_t i = 0; i < sizeof(owner_ops) / sizeof(owner_ops[0]); i++) {
		if (send_op(fd, id, owner_ops[i], true, foreign,
			    owner_ops[i] == OP_RESIZE ? (int64_t)(4 * MIB) : 0) != 0 ||
		    child_reply(fd, id) != -EPERM)
			_exit(30 + (int)i);
		id++;
	}
	if (hostile_send_release(fd, id, true, lease) != 0 || child_reply(fd, id) != -EPERM)
		_exit(40);
	id++;
	if (send_lease(fd, id, 0, 2 * MIB, 0, foreign) != 0 || child_reply(fd, id) != -EPERM)
		_exit(41);
	id++;
	if (send_op(fd, id, OP_ADMIN_EVICT, true, foreign, 0) != 0 || child_reply(fd, id) != -EPERM)
		_exit(21);
	id++;
	if (send_op(fd, id, OP_ADMIN_PIN, true, foreign, 1) != 0 || child_reply(fd, id) != -EPERM)
		_exit(22);
	id++;
	if (send_op(fd, id, OP_ADMIN_PIN, true, foreign, 0) != 0 || child_reply(fd, id) != -EPERM)
		_exit(23);
	id++;
	/* Its own model: pin, unpin, evict (acking its own evict request). */
	mine = child_register(fd, id++, "nobody-model", 2 * MIB);
	child_op(fd, id++, OP_ACQUIRE, mine, 0);
	child_op(fd, id++, OP_RELEASE, mine, 0);
	child_op(fd, id++, OP_ADMIN_PIN, mine, 1);
	child_op(fd, id++, OP_ADMIN_PIN, mine, 0);
	if (send_op(fd, id, OP_ADMIN_EVICT, true, mine, 0) != 0)
		_exit(24);
	for (;;) {
		bool eof = false, found;
		Rocmmem__Wire__ServerMessage *m = harness_raw_recv(fd, 5000, &eof, NULL, NULL);

		if (!m)
			_exit(25);
		found = m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT &&
			m->event->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST &&
			m->event->evict_request->model_id == mine;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (found)
			break;
	}
	if (send_op(fd, id + 1, OP_EVICT_ACK, true, mine, 0) != 0)
		_exit(26);
	/* Two replies: the evict (answered once unloaded) and the ack, in either order. */
	first = child_next_reply(fd, &err1);
	second = child_next_reply(fd, &err2);
	if (!((first == id && second == id + 1) || (first == id + 1 && second == id)))
		_exit(27);
	if (err1 != 0 || err2 != 0)
		_exit(28);
	close(fd);
	hostile_signal_ready(sync);
	_exit(0);
}

static void test_admin_evict_and_pin(void **state)
{
	int owner = hostile_greeted("model-owner");
	int admin = hostile_greeted("root-admin");
	uint64_t model, busy, id = 1;
	struct model_view v;
	struct hostile_child c;
	uint64_t lease, peers, refused, refused_before;
	char text[160];
	int status = 0;

	(void)state;
	model = register_ok(owner, id++, 0, "root-owned", 16 * MIB);
	busy = register_ok(owner, id++, 0, "root-busy", 8 * MIB);
	op_ok(owner, id++, OP_ACQUIRE, model, 0);
	op_ok(owner, id++, OP_RELEASE, model, 0);
	op_ok(owner, id++, OP_ACQUIRE, busy, 0);
	assert_int_equal(hostile_send_acquire(owner, id, 0, 2 * MIB, 0, "root-lease"), 0);
	lease = hostile_expect_grant(owner, id++, 2 * MIB);
	assert_true(model < 0x10000 && lease < 0x8000);
	hostile_access_refused(&peers, &refused_before);
	/* Refusals are logged at most 10 a second: start a fresh second for the check below. */
	hostile_sleep_ms(1100);

	/* A non-root client (the socket opened to it for this test) is refused. */
	assert_int_equal(chmod(hostile.d.dir, 0711), 0);
	assert_int_equal(chmod(hostile.d.sock, 0666), 0);
	c = hostile_spawn(child_nobody, (int)(model | lease << 16));
	assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
	close(c.sync);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the uid 65534 client failed at step %d",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	snprintf(text, sizeof(text),
		 "'nobody' (uid 65534): model %llu 'root-owned' belongs to pid %d 'model-owner': "
		 "only its owner or root may evict or pin it",
		 (unsigned long long)model, (int)getpid());
	assert_true(harness_log_wait(&hostile.d, text, HARNESS_WAIT_MS));
	/* Each refusal counted: 5 model requests, a release, a tagged lease, 3 admin requests. */
	hostile_access_refused(&peers, &refused);
	assert_int_equal(refused, refused_before + 10);
	assert_true(hostile_status_has_lease(lease, NULL));
	assert_int_equal(chmod(hostile.d.sock, 0600), 0);
	assert_int_equal(chmod(hostile.d.dir, 0700), 0);
	v = view_of(model);
	assert_int_equal(v.state, ROCMMEM_MODEL_IDLE);
	assert_int_equal(v.pinned, 0);
	assert_int_equal(v.evictions, 0);

	/* Root pins and unpins someone else's model. */
	op_ok(admin, id++, OP_ADMIN_PIN, model, 1);
	assert_int_equal(view_of(model).pinned, 1);
	op_ok(admin, id++, OP_ADMIN_PIN, model, 0);
	assert_int_equal(view_of(model).pinned, 0);
	/* Root evicts it: answered once the owner has unloaded and acked. */
	assert_int_equal(send_op(admin, id, OP_ADMIN_EVICT, true, model, 0), 0);
	expect_evict_request(owner, model);
	/* A second evict of the same model while the first is under way. */
	assert_int_equal(send_op(owner, id + 1, OP_ADMIN_EVICT, true, model, 0), 0);
	hostile_expect_error(owner, id + 1, -EBUSY, "already");
	op_ok(owner, id + 2, OP_EVICT_ACK, model, 0);
	expect_ok(admin, id);
	id += 3;
	v = view_of(model);
	assert_int_equal(v.state, ROCMMEM_MODEL_EVICTED);
	assert_int_equal(v.evictions, 1);
	/* Nothing resident: done at once. In use: -EBUSY. Unknown: -ENOENT. */
	op_ok(admin, id++, OP_ADMIN_EVICT, model, 0);
	assert_int_equal(send_op(admin, id, OP_ADMIN_EVICT, true, busy, 0), 0);
	hostile_expect_error(admin, id, -EBUSY, "in use");
	id++;
	assert_int_equal(send_op(admin, id, OP_ADMIN_EVICT, true, 99999, 0), 0);
	hostile_expect_error(admin, id, -ENOENT, "no model");
	id++;
	/* The administrator leaves before the owner acks: the eviction goes on, unanswered. */
	op_ok(owner, id++, OP_ACQUIRE, model, 0);
	op_ok(owner, id++, OP_RELEASE, model, 0);
	assert_int_equal(send_op(admin, id++, OP_ADMIN_EVICT, true, model, 0), 0);
	expect_evict_request(owner, model);
	close(admin);
	wait_clients(1);
	op_ok(owner, id++, OP_EVICT_ACK, model, 0);
	assert_int_equal(view_of(model).evictions, 2);
	hostile_expect_serving(owner, id++);
	close(owner);
	healthy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model_requests_before_hello),
	    cmocka_unit_test(test_bad_registrations),
	    cmocka_unit_test(test_unknown_and_foreign_ids),
	    cmocka_unit_test(test_lease_tagged_with_model_on_other_device),
	    cmocka_unit_test(test_register_quota),
	    cmocka_unit_test(test_die_during_acquire_wait),
	    cmocka_unit_test(test_die_during_eviction),
	    cmocka_unit_test(test_admin_evict_and_pin),
	};

	signal(SIGPIPE, SIG_IGN);
	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
