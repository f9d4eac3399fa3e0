/* SPDX-License-Identifier: MIT */
/* test_wire_arena.c: unit tests of common/wire_arena: carving, overflow, unpacking into it. */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rocmmem.pb-c.h"
#include "wire.h"
#include "wire_arena.h"

/* An arena's buffer, aligned as its owner must align it. Static: ASan's poisoning of it then
 * outlives no stack frame. */
static alignas(max_align_t) uint8_t buffer[512];

static bool in_buffer(const void *p)
{
	return (const uint8_t *)p >= buffer && (const uint8_t *)p < buffer + sizeof(buffer);
}

static unsigned big_count(const struct wire_arena *a)
{
	return a->nbig;
}

static void *arena_alloc(struct wire_arena *a, size_t n)
{
	return a->pc.alloc(a->pc.allocator_data, n);
}

static void arena_free(struct wire_arena *a, void *p)
{
	a->pc.free(a->pc.allocator_data, p);
}

/* Carvings come from the buffer in order, aligned for any object and apart; a zero-byte one
 * is a pointer of its own too. */
static void test_carve(void **state)
{
	struct wire_arena a;
	uint8_t *p, *q, *z;

	(void)state;
	wire_arena_init(&a, buffer, sizeof(buffer));
	p = arena_alloc(&a, 3);
	q = arena_alloc(&a, 40);
	z = arena_alloc(&a, 0);
	assert_ptr_equal(p, buffer);
	assert_true(in_buffer(q) && in_buffer(z));
	assert_int_equal((uintptr_t)q % alignof(max_align_t), 0);
	assert_int_equal((uintptr_t)z % alignof(max_align_t), 0);
	assert_true(q >= p + 3 && z >= q + 40);
	memset(p, 1, 3);
	memset(q, 2, 40);
	assert_int_equal(p[2], 1);
	assert_int_equal(big_count(&a), 0);
	/* Reset: the buffer is whole again. */
	wire_arena_reset(&a);
	assert_ptr_equal(arena_alloc(&a, 8), buffer);
	wire_arena_finish(&a);
}

/* What does not fit is malloc'ed, listed, and freed at the reset (a leak checker sees it). */
static void test_overflow(void **state)
{
	struct wire_arena a;
	uint8_t *p, *big, *after;

	(void)state;
	wire_arena_init(&a, buffer, sizeof(buffer));
	p = arena_alloc(&a, sizeof(buffer) - 32);
	assert_true(in_buffer(p));
	big = arena_alloc(&a, 64);
	assert_non_null(big);
	assert_false(in_buffer(big));
	assert_int_equal((uintptr_t)big % alignof(max_align_t), 0);
	memset(big, 3, 64);
	/* What still fits is carved, after the malloc'ed piece. */
	after = arena_alloc(&a, 16);
	assert_true(in_buffer(after));
	assert_int_equal(big_count(&a), 1);
	/* More than there is: refused, not wrapped around. */
	assert_null(arena_alloc(&a, SIZE_MAX));
	assert_null(arena_alloc(&a, SIZE_MAX - 8));
	assert_int_equal(big_count(&a), 1);
	wire_arena_reset(&a);
	assert_int_equal(big_count(&a), 0);
	assert_int_equal(a.used, 0);
	wire_arena_finish(&a);
}

/* An arena without a buffer mallocs everything and frees it all the same. */
static void test_no_buffer(void **state)
{
	struct wire_arena a;

	(void)state;
	wire_arena_init(&a, NULL, 4096);
	assert_non_null(arena_alloc(&a, 1));
	assert_non_null(arena_alloc(&a, 0));
	assert_int_equal(big_count(&a), 2);
	wire_arena_reset(&a);
	assert_int_equal(big_count(&a), 0);
	wire_arena_finish(&a);
}

/* Freeing: a malloc'ed piece goes at once (first, middle or last of the list); the newest
 * carving gives its room back; an older one waits for the reset. */
static void test_give_back(void **state)
{
	struct wire_arena a;
	void *b1, *b2, *b3, *p, *q;

	(void)state;
	wire_arena_init(&a, buffer, sizeof(buffer));
	b1 = arena_alloc(&a, 1000);
	b2 = arena_alloc(&a, 2000);
	b3 = arena_alloc(&a, 3000);
	assert_int_equal(big_count(&a), 3);
	arena_free(&a, b2);
	assert_int_equal(big_count(&a), 2);
	arena_free(&a, b3);
	arena_free(&a, b1);
	assert_int_equal(big_count(&a), 0);
	assert_null(LIST_FIRST(&a.big));

	p = arena_alloc(&a, 100);
	q = arena_alloc(&a, 100);
	arena_free(&a, q);
	assert_ptr_equal(arena_alloc(&a, 100), q); /* its room came back */
	arena_free(&a, p);			   /* not the newest: stays carved */
	assert_ptr_not_equal(arena_alloc(&a, 8), p);
	wire_arena_finish(&a);
}

/* pack_acquire packs a lease request with a tag into buf; returns its length. */
static size_t pack_acquire(uint8_t *buf, size_t cap, const char *tag)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	ssize_t n;

	acq.has_size = true;
	acq.size = 2u << 20;
	acq.tag = (char *)tag;
	msg.has_id = true;
	msg.id = 7;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	n = wire_pack(&msg.base, buf, cap);
	assert_true(n > 0);
	return (size_t)n;
}

static void check_acquire(const Rocmmem__Wire__ClientMessage *m, const char *tag)
{
	assert_non_null(m);
	assert_int_equal(m->id, 7);
	assert_int_equal(m->body_case, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE);
	assert_int_equal(m->lease_acquire->size, 2u << 20);
	assert_string_equal(m->lease_acquire->tag, tag);
}

/* A request unpacks into the arena as it would with protobuf-c's allocator, again and again
 * after each reset, and into an arena too small for it (then mostly malloc'ed). */
static void test_unpack_into(void **state)
{
	static alignas(max_align_t) uint8_t tiny[32];
	uint8_t wire[256];
	struct wire_arena a;
	size_t len = pack_acquire(wire, sizeof(wire), "weights");
	Rocmmem__Wire__ClientMessage *m;

	(void)state;
	wire_arena_init(&a, buffer, sizeof(buffer));
	for (int i = 0; i < 3; i++) {
		m = rocmmem__wire__client_message__unpack(&a.pc, len, wire);
		check_acquire(m, "weights");
		assert_true(in_buffer(m) && in_buffer(m->lease_acquire));
		assert_int_equal(big_count(&a), 0);
		wire_arena_reset(&a);
	}
	wire_arena_finish(&a);

	wire_arena_init(&a, tiny, sizeof(tiny));
	m = rocmmem__wire__client_message__unpack(&a.pc, len, wire);
	check_acquire(m, "weights");
	assert_true(big_count(&a) >= 2);
	wire_arena_reset(&a);
	/* A truncated packet fails to decode; what was allocated for it is given back. */
	assert_null(rocmmem__wire__client_message__unpack(&a.pc, len - 3, wire));
	assert_int_equal(big_count(&a), 0);
	wire_arena_finish(&a);
}

/* redeclare_field writes field 17 (a LeaseRedeclare) holding count chunk sizes of 1. */
static size_t redeclare_field(uint8_t *out, unsigned count)
{
	size_t n = 0;

	assert_true(count + 2 < 128);
	out[n++] = 0x8a; /* field 17, length-delimited: (17 << 3 | 2) as a varint */
	out[n++] = 0x01;
	out[n++] = (uint8_t)(count + 2); /* the LeaseRedeclare: one packed field */
	out[n++] = (6 << 3) | 2;	 /* chunk_sizes, packed */
	out[n++] = (uint8_t)count;
	for (unsigned i = 0; i < count; i++)
		out[n++] = 1;
	return n;
}

/*
 * A hostile packet: one oneof member sent over and over (protobuf-c keeps the last and frees
 * the others), each with an array that goes to malloc, then a field of 60000 one-byte varints
 * (an array eight times the packet). What protobuf-c frees is freed at once: after the unpack
 * only what the message holds is left, and the reset frees it.
 */
static void test_hostile(void **state)
{
	const unsigned repeats = 400, count = 100; /* 800-byte arrays: more than the buffer */
	size_t cap = WIRE_MAX_FRAME, n = 0;
	uint8_t *wire = malloc(cap);
	struct wire_arena a;
	Rocmmem__Wire__ClientMessage *m;

	(void)state;
	assert_non_null(wire);
	wire[n++] = 0x08; /* id = 5 */
	wire[n++] = 5;
	for (unsigned i = 0; i < repeats; i++)
		n += redeclare_field(wire + n, count);
	wire_arena_init(&a, buffer, sizeof(buffer));
	m = rocmmem__wire__client_message__unpack(&a.pc, n, wire);
	assert_non_null(m);
	assert_int_equal(m->body_case, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE);
	assert_int_equal(m->lease_redeclare->n_chunk_sizes, count);
	assert_true(big_count(&a) <= 2);
	wire_arena_reset(&a);

	/* 60000 chunk sizes of one byte each in one packed field: a 480000-byte array. */
	n = 0;
	wire[n++] = 0x08;
	wire[n++] = 5;
	wire[n++] = 0x8a;
	wire[n++] = 0x01;
	wire[n++] = 0x80 | ((60000 + 4) & 0x7f); /* LeaseRedeclare's length: 4 + 60000 */
	wire[n++] = 0x80 | (((60000 + 4) >> 7) & 0x7f);
	wire[n++] = (uint8_t)((60000 + 4) >> 14);
	wire[n++] = (6 << 3) | 2;
	wire[n++] = 0x80 | (60000 & 0x7f);
	wire[n++] = 0x80 | ((60000 >> 7) & 0x7f);
	wire[n++] = (uint8_t)(60000 >> 14);
	memset(wire + n, 1, 60000);
	n += 60000;
	m = rocmmem__wire__client_message__unpack(&a.pc, n, wire);
	assert_non_null(m);
	assert_int_equal(m->lease_redeclare->n_chunk_sizes, 60000);
	assert_int_equal(m->lease_redeclare->chunk_sizes[59999], 1);
	assert_false(in_buffer(m->lease_redeclare->chunk_sizes));
	wire_arena_reset(&a);
	assert_int_equal(big_count(&a), 0);
	wire_arena_finish(&a);
	free(wire);
}

/* wire_unpack: a message in a block of its own, freed whole; one bigger than the block (a
 * long tag) too; bytes that do not decode give NULL and leak nothing. */
static void test_unpack_block(void **state)
{
	static char tag[3000];
	uint8_t wire[4096];
	size_t len = pack_acquire(wire, sizeof(wire), "kv-cache");
	ProtobufCMessage *m = wire_unpack(&rocmmem__wire__client_message__descriptor, len, wire);

	(void)state;
	check_acquire((Rocmmem__Wire__ClientMessage *)m, "kv-cache");
	wire_unpacked_free(m);

	memset(tag, 'x', sizeof(tag) - 1);
	len = pack_acquire(wire, sizeof(wire), tag);
	m = wire_unpack(&rocmmem__wire__client_message__descriptor, len, wire);
	check_acquire((Rocmmem__Wire__ClientMessage *)m, tag);
	wire_unpacked_free(m);

	assert_null(wire_unpack(&rocmmem__wire__client_message__descriptor, len - 1, wire));
	wire[0] = 0xff; /* a tag that never ends */
	assert_null(wire_unpack(&rocmmem__wire__client_message__descriptor, 1, wire));
	wire_unpacked_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_carve),	 cmocka_unit_test(test_overflow),
	    cmocka_unit_test(test_no_buffer),	 cmocka_unit_test(test_give_back),
	    cmocka_unit_test(test_unpack_into),	 cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_unpack_block),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
