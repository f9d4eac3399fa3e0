/* SPDX-License-Identifier: MIT */
/*
 * access.c: who may connect and who administers, as other users on a real socket: a daemon
 * that allows the group 'users' and makes 'adm' its admin group, and children that become uid
 * 65534 with and without those groups. Needs root (exit 77 otherwise).
 */
#include <errno.h>
#include <grp.h>
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

#include "hostile.h"

#define NOBODY 65534

static const char *const args[] = {
    "--backend", "host",	  "--budget", "64M", "--socket-mode", "0666", "--allowed-groups",
    "users",	 "--admin-group", "adm",      NULL};

static gid_t users_gid, adm_gid;

/* Exit codes of the children, after hostile.h's. */
enum {
	CHILD_BECOME = HOSTILE_CHILD_FIRST,
	CHILD_NOT_REFUSED,
	CHILD_WRONG_ERROR,
	CHILD_NOT_CLOSED,
	CHILD_LIBRARY,
	CHILD_WRONG_REPLY,
};

/* become drops to uid and gid 65534 with exactly the supplementary groups given. */
static void become(const gid_t *groups, size_t n)
{
	if (setgroups(n, groups) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) != 0)
		_exit(CHILD_BECOME);
}

/* child_wait runs a child to its end and fails the test unless it exited 0. */
static void child_wait(struct hostile_child *c, const char *what)
{
	int status = 0;

	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	close(c->sync);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: the child failed with %d", what,
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* child_refused: without an allowed group, the daemon says why (EPERM) and hangs up. */
static void child_refused(int sync, int arg)
{
	(void)sync;
	(void)arg;
	become(NULL, 0);
	/* On the raw protocol: a reply without an id, then the end. */
	for (int i = 0; i < 5; i++) {
		int fd = harness_raw_connect(&hostile.d);
		Rocmmem__Wire__ServerMessage *m = NULL;
		enum hostile_rx rx;
		bool ok;

		if (fd < 0)
			_exit(HOSTILE_CHILD_NO_CONNECT);
		rx = hostile_recv(fd, 3000, &m, NULL, NULL);
		if (rx != HOSTILE_RX_MSG)
			_exit(CHILD_NOT_REFUSED);
		ok = m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY &&
		     (!m->reply->has_id || m->reply->id == 0) && m->reply->has_error &&
		     m->reply->error == -EPERM && m->reply->message &&
		     strstr(m->reply->message, "uid 65534 is not allowed") &&
		     strstr(m->reply->message, "allowed_groups");
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (!ok)
			_exit(CHILD_WRONG_ERROR);
		if (hostile_recv(fd, 3000, &m, NULL, NULL) != HOSTILE_RX_EOF)
			_exit(CHILD_NOT_CLOSED);
		close(fd);
	}
	/* Through librocmmem, whichever comes first, its hello or the daemon's hang-up. */
	for (int i = 0; i < 20; i++) {
		rocmmem_client *c = NULL;
		int err = rocmmem_connect(hostile.d.sock, "refused", 3000, &c);

		if (err != -EPERM || !strstr(rocmmem_last_error(), "not allowed")) {
			fprintf(stderr, "connect: %d %s\n", err, rocmmem_last_error());
			_exit(CHILD_LIBRARY);
		}
	}
	_exit(0);
}

/* child_allowed: with the group users, uid 65534 is served. */
static void child_allowed(int sync, int arg)
{
	int fd;

	(void)sync;
	(void)arg;
	become(&users_gid, 1);
	fd = hostile_child_greeted("allowed");
	if (hostile_send_status(fd, 2) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	{
		Rocmmem__Wire__ServerMessage *m = NULL;

		if (hostile_recv(fd, 3000, &m, NULL, NULL) != HOSTILE_RX_MSG ||
		    m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY ||
		    (m->reply->has_error && m->reply->error != 0))
			_exit(CHILD_WRONG_REPLY);
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
	close(fd);
	_exit(0);
}

/*
 * A uid that is neither allowed nor in an allowed group is refused at once with -EPERM and a
 * reason, counted and logged; the same uid in the group 'users' is served, and so is root.
 */
static void test_not_allowed(void **state)
{
	uint64_t peers_before, peers, requests;
	struct hostile_child c;

	(void)state;
	hostile_access_refused(&peers_before, &requests);
	c = hostile_spawn(child_refused, 0);
	child_wait(&c, "uid 65534 without an allowed group");
	hostile_access_refused(&peers, &requests);
	assert_int_equal(peers, peers_before + 25);
	assert_true(harness_log_wait(&hostile.d, "refused a connection from pid", HARNESS_WAIT_MS));
	assert_true(harness_log_wait(&hostile.d,
				     "uid 65534 gid 65534: not an allowed user "
				     "or group",
				     HARNESS_WAIT_MS));
	c = hostile_spawn(child_allowed, 0);
	child_wait(&c, "uid 65534 in the group users");
	hostile_access_refused(&peers, &requests);
	assert_int_equal(peers, peers_before + 25);
	hostile_assert_healthy();
}

/* ----------------------------------------------------------------------------------------- */
/* The admin group */

static int send_pin(int fd, uint64_t id, uint64_t model, bool pinned)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminPinModel pin = ROCMMEM__WIRE__ADMIN_PIN_MODEL__INIT;

	pin.has_model_id = true;
	pin.model_id = model;
	pin.has_pinned = true;
	pin.pinned = pinned;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_PIN_MODEL;
	admin.pin_model = &pin;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin;
	return hostile_send(fd, true, id, &msg);
}

static int send_evict(int fd, uint64_t id, uint64_t model)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__AdminRequest admin = ROCMMEM__WIRE__ADMIN_REQUEST__INIT;
	Rocmmem__Wire__AdminEvictModel evict = ROCMMEM__WIRE__ADMIN_EVICT_MODEL__INIT;

	evict.has_model_id = true;
	evict.model_id = model;
	admin.op_case = ROCMMEM__WIRE__ADMIN_REQUEST__OP_EVICT_MODEL;
	admin.evict_model = &evict;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ADMIN;
	msg.admin = &admin;
	return hostile_send(fd, true, id, &msg);
}

static int send_model(int fd, uint64_t id, Rocmmem__Wire__ClientMessage__BodyCase kind,
		      uint64_t model)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ModelRegister reg = ROCMMEM__WIRE__MODEL_REGISTER__INIT;
	Rocmmem__Wire__ModelAcquire acq = ROCMMEM__WIRE__MODEL_ACQUIRE__INIT;
	Rocmmem__Wire__ModelRelease rel = ROCMMEM__WIRE__MODEL_RELEASE__INIT;
	Rocmmem__Wire__EvictAck ack = ROCMMEM__WIRE__EVICT_ACK__INIT;

	msg.body_case = kind;
	switch (kind) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER:
		reg.name = (char *)"root-model";
		reg.has_size = true;
		reg.size = 8 * MIB;
		msg.model_register = &reg;
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE:
		acq.has_model_id = true;
		acq.model_id = model;
		msg.model_acquire = &acq;
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE:
		rel.has_model_id = true;
		rel.model_id = model;
		msg.model_release = &rel;
		break;
	default:
		ack.has_model_id = true;
		ack.model_id = model;
		msg.evict_ack = &ack;
		break;
	}
	return hostile_send(fd, true, id, &msg);
}

/* reply_of reads the next reply (events skipped) in a child: its error, or -EIO. */
static int reply_of(int fd, uint64_t id, char *message, size_t len)
{
	for (;;) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		int err;

		if (hostile_recv(fd, 5000, &m, NULL, NULL) != HOSTILE_RX_MSG)
			return -EIO;
		if (m->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			rocmmem__wire__server_message__free_unpacked(m, NULL);
			continue;
		}
		err = m->reply->id == id ? (m->reply->has_error ? m->reply->error : 0) : -EIO;
		if (message)
			snprintf(message, len, "%s", m->reply->message ? m->reply->message : "");
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		return err;
	}
}

/* child_not_admin: in 'users' but not 'adm': may not pin root's model; told who may. */
static void child_not_admin(int sync, int arg)
{
	uint64_t model = (uint64_t)arg;
	char message[512];
	int fd;

	(void)sync;
	become(&users_gid, 1);
	fd = hostile_child_greeted("not-admin");
	if (send_pin(fd, 1, model, true) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	if (reply_of(fd, 1, message, sizeof(message)) != -EPERM)
		_exit(CHILD_WRONG_ERROR);
	if (!strstr(message, "only its owner, root or a member of group 'adm' (admin_group)"))
		_exit(CHILD_WRONG_REPLY);
	if (send_evict(fd, 2, model) != 0 || reply_of(fd, 2, NULL, 0) != -EPERM)
		_exit(CHILD_WRONG_ERROR);
	_exit(0);
}

/*
 * child_admin: in 'adm' (a supplementary group, as SO_PEERGROUPS reports it): pins, unpins and
 * evicts root's model; but releasing root's lease is no admin request: refused.
 */
static void child_admin(int sync, int arg)
{
	uint64_t model = (uint64_t)arg & 0xffff, lease = (uint64_t)arg >> 16;
	gid_t groups[2] = {users_gid, adm_gid};
	int fd;

	become(groups, 2);
	fd = hostile_child_greeted("admin");
	if (send_pin(fd, 1, model, true) != 0 || reply_of(fd, 1, NULL, 0) != 0)
		_exit(CHILD_WRONG_ERROR);
	if (send_pin(fd, 2, model, false) != 0 || reply_of(fd, 2, NULL, 0) != 0)
		_exit(CHILD_WRONG_ERROR);
	if (hostile_send_release(fd, 3, true, lease) != 0 || reply_of(fd, 3, NULL, 0) != -EPERM)
		_exit(CHILD_WRONG_REPLY);
	/* Answered once the owner (the parent) has unloaded and acked. */
	if (send_evict(fd, 4, model) != 0)
		_exit(HOSTILE_CHILD_NO_SEND);
	hostile_signal_ready(sync);
	if (reply_of(fd, 4, NULL, 0) != 0)
		_exit(CHILD_NOT_REFUSED);
	_exit(0);
}

/* expect_evict_request reads the owner's messages until the evict request for model. */
static void expect_evict_request(int fd, uint64_t model)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (harness_now_ms() < end) {
		Rocmmem__Wire__ServerMessage *m = NULL;
		bool found;

		if (hostile_recv(fd, 100, &m, NULL, NULL) != HOSTILE_RX_MSG)
			continue;
		found = m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT &&
			m->event->body_case == ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST &&
			m->event->evict_request->model_id == model;
		rocmmem__wire__server_message__free_unpacked(m, NULL);
		if (found)
			return;
	}
	fail_msg("no evict request for model %llu", (unsigned long long)model);
}

/* A member of the admin group evicts and pins root's model; a non-member is refused. */
static void test_admin_group(void **state)
{
	int owner = hostile_greeted("owner");
	uint64_t model, lease, peers, before, after;
	struct hostile_child c;
	Rocmmem__Wire__ServerMessage *m;

	(void)state;
	assert_int_equal(
	    send_model(owner, 1, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER, 0), 0);
	m = hostile_recv_reply(owner, 3000, NULL, NULL);
	assert_int_equal(m->reply->body_case, ROCMMEM__WIRE__REPLY__BODY_MODEL);
	model = m->reply->model->model_id;
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_int_equal(
	    send_model(owner, 2, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE, model), 0);
	m = hostile_recv_reply(owner, 3000, NULL, NULL);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_int_equal(
	    send_model(owner, 3, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE, model), 0);
	m = hostile_recv_reply(owner, 3000, NULL, NULL);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	assert_int_equal(hostile_send_acquire(owner, 4, 0, 2 * MIB, 0, "root's"), 0);
	lease = hostile_expect_grant(owner, 4, 2 * MIB);
	assert_true(model < 0x10000 && lease < 0x8000);
	hostile_access_refused(&peers, &before);

	c = hostile_spawn(child_not_admin, (int)model);
	child_wait(&c, "uid 65534 outside the admin group");
	hostile_access_refused(&peers, &after);
	assert_int_equal(after, before + 2);

	c = hostile_spawn(child_admin, (int)(model | lease << 16));
	hostile_child_ready(&c);
	expect_evict_request(owner, model);
	assert_int_equal(send_model(owner, 5, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_EVICT_ACK, model),
			 0);
	m = hostile_recv_reply(owner, 3000, NULL, NULL);
	assert_int_equal(m->reply->id, 5);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	child_wait(&c, "uid 65534 in the admin group");
	hostile_access_refused(&peers, &after);
	assert_int_equal(after, before + 3); /* the lease release */
	assert_true(hostile_status_has_lease(lease, NULL));
	assert_int_equal(hostile_send_release(owner, 6, true, lease), 0);
	m = hostile_recv_reply(owner, 3000, NULL, NULL);
	assert_int_equal(m->reply->error, 0);
	rocmmem__wire__server_message__free_unpacked(m, NULL);
	close(owner);
	hostile_assert_healthy();
}

/* setup opens the daemon's directory and socket to other users: the policy decides, not mode. */
static int setup(void **state)
{
	if (hostile_group_setup(state) != 0)
		return -1;
	if (chmod(hostile.d.dir, 0711) != 0) {
		hostile_group_teardown(state);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_allowed),
	    cmocka_unit_test(test_admin_group),
	};
	struct group *g;

	if (geteuid() != 0) {
		printf("skipped: becoming other users needs root\n");
		return 77;
	}
	g = getgrnam("users");
	if (!g) {
		printf("skipped: no group 'users'\n");
		return 77;
	}
	users_gid = g->gr_gid;
	g = getgrnam("adm");
	if (!g) {
		printf("skipped: no group 'adm'\n");
		return 77;
	}
	adm_gid = g->gr_gid;
	signal(SIGPIPE, SIG_IGN);
	hostile_daemon_args = args;
	return hostile_run_result(cmocka_run_group_tests(tests, setup, hostile_group_teardown));
}
