/* SPDX-License-Identifier: MIT */
/* wire_arena.h: memory for unpacked messages: one block, bump allocated, freed all at once. */
#ifndef ROCMMEM_COMMON_WIRE_ARENA_H
#define ROCMMEM_COMMON_WIRE_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct wire_big;
LIST_HEAD(wire_bigs, wire_big);

/*
 * A wire_arena is protobuf-c's allocator hook over a buffer its owner provides: what protobuf-c
 * asks for while unpacking is carved from the buffer in order, and what does not fit is
 * malloc'ed (and freed as soon as protobuf-c frees it, so that a hostile packet costs no more
 * memory than with protobuf-c's own allocator). A message unpacked into it needs no
 * free_unpacked: wire_arena_reset frees everything at once. Not thread-safe.
 */
struct wire_arena {
	ProtobufCAllocator pc; /* what unpack takes; its allocator_data is this arena */
	uint8_t *buf;
	size_t cap, used;
	size_t last;	      /* offset of the newest carving: freeing it gives its room back */
	struct wire_bigs big; /* what did not fit, malloc'ed */
	unsigned nbig;	      /* how many pieces that is */
};

/* wire_arena_init makes an empty arena over buf (cap bytes, aligned for any object). */
void wire_arena_init(struct wire_arena *a, void *buf, size_t cap);

/* wire_arena_reset forgets everything allocated from a: the buffer is empty again, and what
 * was malloc'ed is freed. Messages unpacked into it are gone. */
void wire_arena_reset(struct wire_arena *a);

/* wire_arena_finish resets a before its buffer goes away (under ASan: unpoisons it). */
void wire_arena_finish(struct wire_arena *a);

/*
 * wire_unpack unpacks a message of type desc into one block of its own (one malloc when the
 * message fits WIRE_BLOCK_BYTES, more for bigger ones). Returns it, or NULL when the bytes do
 * not decode or memory ran out. Free it with wire_unpacked_free, never free_unpacked.
 */
ProtobufCMessage *wire_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
			      const uint8_t *data);

/* wire_unpacked_free frees a message wire_unpack returned, and all it holds. NULL is ignored. */
void wire_unpacked_free(ProtobufCMessage *msg);

/* The size of a block of wire_unpack's, header included (within what glibc's per-thread cache
 * serves): a lease grant and its reply fit several times over; a status part need not. */
#define WIRE_BLOCK_BYTES 1024u

#endif
