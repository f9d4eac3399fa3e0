/* SPDX-License-Identifier: MIT */
/* wire_arena.c: protobuf-c's allocator hook over one block, for unpacked messages. */
#include "wire_arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

/* Under ASan what nothing was carved from is poisoned: a message read after its reset is
 * reported, as a freed one would be. */
#include "poison.h"

#define ALIGN alignof(max_align_t)
/* No carving yet (nothing to give back on free). */
#define NO_LAST SIZE_MAX

/* What did not fit in the buffer: malloc'ed behind this header, listed to be freed. */
struct wire_big {
	LIST_ENTRY(wire_big) link;
	alignas(max_align_t) unsigned char data[];
};

/* A message of wire_unpack's and its arena: the message is the first thing carved, at data. */
struct wire_block {
	struct wire_arena arena;
	alignas(max_align_t) unsigned char data[];
};

/* arena_alloc carves size bytes from the buffer, or mallocs them when they do not fit. */
static void *arena_alloc(void *data, size_t size)
{
	struct wire_arena *a = data;
	size_t room = a->cap - a->used, n = size ? size : 1;
	struct wire_big *b;

	if (n <= room && (n + ALIGN - 1) / ALIGN * ALIGN <= room) {
		uint8_t *p = a->buf + a->used;

		n = (n + ALIGN - 1) / ALIGN * ALIGN;
		UNPOISON(p, n);
		a->last = a->used;
		a->used += n;
		return p;
	}
	if (size > SIZE_MAX - sizeof(*b))
		return NULL;
	b = malloc(sizeof(*b) + size);
	if (!b)
		return NULL;
	LIST_INSERT_HEAD(&a->big, b, link);
	a->nbig++;
	return b->data;
}

/*
 * arena_free gives back what protobuf-c frees: a malloc'ed piece at once (merging a repeated
 * field that comes again and again reallocates it each time: without this the pieces would
 * pile up quadratically), the newest carving's room, any other carving at the reset.
 */
static void arena_free(void *data, void *ptr)
{
	struct wire_arena *a = data;
	uintptr_t p = (uintptr_t)ptr, start = (uintptr_t)a->buf;
	struct wire_big *b;

	if (p >= start && p - start < a->cap) {
		if (p - start == a->last) {
			POISON(a->buf + a->last, a->used - a->last);
			a->used = a->last;
			a->last = NO_LAST;
		}
		return;
	}
	b = (struct wire_big *)((unsigned char *)ptr - offsetof(struct wire_big, data));
	LIST_REMOVE(b, link);
	a->nbig--;
	free(b);
}

void wire_arena_init(struct wire_arena *a, void *buf, size_t cap)
{
	a->pc.alloc = arena_alloc;
	a->pc.free = arena_free;
	a->pc.allocator_data = a;
	a->buf = buf;
	a->cap = buf ? cap : 0;
	a->used = 0;
	a->last = NO_LAST;
	LIST_INIT(&a->big);
	a->nbig = 0;
	POISON(a->buf, a->cap);
}

void wire_arena_reset(struct wire_arena *a)
{
	struct wire_big *b;

	while ((b = LIST_FIRST(&a->big))) {
		LIST_REMOVE(b, link);
		free(b);
	}
	a->nbig = 0;
	POISON(a->buf, a->used);
	a->used = 0;
	a->last = NO_LAST;
}

void wire_arena_finish(struct wire_arena *a)
{
	wire_arena_reset(a);
	UNPOISON(a->buf, a->cap);
}

ProtobufCMessage *wire_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
			      const uint8_t *data)
{
	size_t cap = WIRE_BLOCK_BYTES - sizeof(struct wire_block);
	struct wire_block *b;
	ProtobufCMessage *msg;

	if (desc->sizeof_message > cap)
		cap = (desc->sizeof_message + ALIGN - 1) / ALIGN * ALIGN;
	b = malloc(sizeof(*b) + cap);
	if (!b)
		return NULL;
	wire_arena_init(&b->arena, b->data, cap);
	msg = protobuf_c_message_unpack(desc, &b->arena.pc, len, data);
	/* protobuf-c allocates the message first, so it sits at the start of the block (the
	 * buffer holds it whole): wire_unpacked_free finds the block from it. */
	if (msg && (void *)msg != (void *)b->data)
		msg = NULL; /* a protobuf-c that allocates otherwise: refused, never misfreed */
	if (!msg) {
		wire_arena_finish(&b->arena);
		free(b);
	}
	return msg;
}

void wire_unpacked_free(ProtobufCMessage *msg)
{
	struct wire_block *b;

	if (!msg)
		return;
	b = (struct wire_block *)((unsigned char *)msg - offsetof(struct wire_block, data));
	wire_arena_finish(&b->arena);
	free(b);
}
