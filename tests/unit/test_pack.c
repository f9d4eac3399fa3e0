/* SPDX-License-Identifier: MIT */
/* test_pack.c: the daemon's packing of its messages gives protobuf-c's bytes, exactly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/pack.h"
#include "rocmmem.pb-c.h"
#include "wire.h"

static uint8_t got[WIRE_MAX_FRAME + 4096], want[4 * WIRE_MAX_FRAME];

/* same_as_protobuf packs m both ways and compares the bytes; returns the length. */
static size_t same_as_protobuf(const Rocmmem__Wire__ServerMessage *m)
{
	size_t need = protobuf_c_message_get_packed_size(&m->base);
	ssize_t n = pack_server_message(m, got, sizeof(got));

	assert_true(need <= sizeof(want));
	assert_int_equal(protobuf_c_message_pack(&m->base, want), need);
	assert_int_equal(n, (ssize_t)need);
	assert_memory_equal(got, want, need);
	return need;
}

/* A status reply of n clients, each with books on two devices and a name of its own. */
struct status_msg {
	Rocmmem__Wire__ServerMessage sm;
	Rocmmem__Wire__Reply reply;
	Rocmmem__Wire__StatusReply st;
	Rocmmem__Wire__DaemonInfo daemon;
	Rocmmem__Wire__ClientInfo *clients;
	Rocmmem__Wire__ClientInfo **client_ptrs;
	Rocmmem__Wire__ClientBooks *books;
	Rocmmem__Wire__ClientBooks **book_ptrs;
	char (*names)[32];
};

static void status_build(struct status_msg *s, size_t n, uint64_t id)
{
	memset(s, 0, sizeof(*s));
	s->clients = calloc(n, sizeof(*s->clients));
	s->client_ptrs = calloc(n, sizeof(*s->client_ptrs));
	s->books = calloc(2 * n, sizeof(*s->books));
	s->book_ptrs = calloc(2 * n, sizeof(*s->book_ptrs));
	s->names = calloc(n, sizeof(*s->names));
	assert_true(s->clients && s->client_ptrs && s->books && s->book_ptrs && s->names);
	rocmmem__wire__server_message__init(&s->sm);
	rocmmem__wire__reply__init(&s->reply);
	rocmmem__wire__status_reply__init(&s->st);
	rocmmem__wire__daemon_info__init(&s->daemon);
	s->daemon.version = (char *)"0.1.0";
	s->daemon.has_pid = true;
	s->daemon.pid = 4242;
	s->st.daemon = &s->daemon;
	for (size_t i = 0; i < n; i++) {
		Rocmmem__Wire__ClientInfo *c = &s->clients[i];

		rocmmem__wire__client_info__init(c);
		snprintf(s->names[i], sizeof(s->names[i]), "client-%zu", i);
		c->name = s->names[i];
		c->has_pid = c->has_client_id = c->has_leased_bytes = true;
		c->pid = (int32_t)(1000 + i);
		c->client_id = i + 1;
		c->leased_bytes = (uint64_t)i << 21;
		for (size_t k = 0; k < 2; k++) {
			Rocmmem__Wire__ClientBooks *b = &s->books[2 * i + k];

			rocmmem__wire__client_books__init(b);
			b->has_device = b->has_declared_bytes = true;
			b->device = (uint32_t)k;
			b->declared_bytes = (uint64_t)(i + k) << 30;
			s->book_ptrs[2 * i + k] = b;
		}
		c->n_books = 2;
		c->books = &s->book_ptrs[2 * i];
		s->client_ptrs[i] = c;
	}
	s->st.n_clients = n;
	s->st.clients = s->client_ptrs;
	s->reply.has_id = s->reply.has_error = s->reply.has_more = true;
	s->reply.id = id;
	s->reply.more = n > 100;
	s->reply.body_case = ROCMMEM__WIRE__REPLY__BODY_STATUS;
	s->reply.status = &s->st;
	s->sm.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	s->sm.reply = &s->reply;
}

static void status_free(struct status_msg *s)
{
	free(s->clients);
	free(s->client_ptrs);
	free(s->books);
	free(s->book_ptrs);
	free(s->names);
}

/* Status replies of every size class of the two lengths (1, 2 and 3 byte varints), any id. */
static void test_status_replies(void **state)
{
	static const size_t sizes[] = {0, 1, 2, 5, 64, 300};
	static const uint64_t ids[] = {0, 1, 127, 128, UINT64_MAX};

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
			struct status_msg s;

			status_build(&s, sizes[i], ids[k]);
			same_as_protobuf(&s.sm);
			status_free(&s);
		}
	}
}

/* A grant, a hello, an error without a body, an event: each as protobuf-c writes it. */
static void test_other_messages(void **state)
{
	Rocmmem__Wire__ServerMessage sm = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;
	Rocmmem__Wire__Reply r = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__LeaseGrant g = ROCMMEM__WIRE__LEASE_GRANT__INIT;
	Rocmmem__Wire__HelloReply h = ROCMMEM__WIRE__HELLO_REPLY__INIT;
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__EvictRequest er = ROCMMEM__WIRE__EVICT_REQUEST__INIT;

	(void)state;
	sm.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	sm.reply = &r;
	r.has_id = r.has_error = true;
	r.id = 77;
	r.body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	r.lease = &g;
	g.has_lease_id = g.has_size = g.has_fd_count = true;
	g.lease_id = 1u << 20;
	g.size = 2u << 20;
	g.fd_count = 1;
	same_as_protobuf(&sm);
	r.body_case = ROCMMEM__WIRE__REPLY__BODY_HELLO;
	r.hello = &h;
	same_as_protobuf(&sm);
	/* An empty body is still written (a tag and a zero length). */
	r.body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	r.lease = &(Rocmmem__Wire__LeaseGrant)ROCMMEM__WIRE__LEASE_GRANT__INIT;
	same_as_protobuf(&sm);
	r.body_case = ROCMMEM__WIRE__REPLY__BODY__NOT_SET;
	r.error = -ENOMEM;
	r.message = (char *)"out of memory";
	same_as_protobuf(&sm);
	sm.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT;
	sm.event = &ev;
	ev.has_seq = true;
	ev.seq = 9;
	ev.body_case = ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST;
	ev.evict_request = &er;
	er.has_model_id = true;
	er.model_id = 3;
	same_as_protobuf(&sm);
}

/* What does not fit is refused whole: by the buffer's size, and past the frame limit. */
static void test_too_large(void **state)
{
	struct status_msg s;
	size_t len;

	(void)state;
	status_build(&s, 64, 5);
	len = same_as_protobuf(&s.sm);
	assert_int_equal(pack_server_message(&s.sm, got, len), (ssize_t)len);
	assert_int_equal(pack_server_message(&s.sm, got, len - 1), -EMSGSIZE);
	status_free(&s);
	/* About 40 bytes a client: 2000 of them are past the 64 KiB frame. */
	status_build(&s, 2000, 5);
	assert_true(protobuf_c_message_get_packed_size(&s.sm.base) > WIRE_MAX_FRAME);
	assert_int_equal(pack_server_message(&s.sm, got, sizeof(got)), -EMSGSIZE);
	assert_int_equal(wire_pack(&s.sm.base, got, sizeof(got)), -EMSGSIZE);
	status_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_replies),
	    cmocka_unit_test(test_other_messages),
	    cmocka_unit_test(test_too_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
