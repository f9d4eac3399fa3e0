/* SPDX-License-Identifier: MIT */
/*
 * feed_frame.c: the envelope of a telemetry message, written by hand around a body packed once
 * for every subscriber.
 */
#include "feed_frame.h"

#include <errno.h>
#include <string.h>

#include "wire.h"

#define SERVER_MESSAGE_EVENT 2u
#define EVENT_SEQ 1u

size_t feed_put_uint_field(uint8_t *p, unsigned num, uint64_t v)
{
	size_t n = wire_varint_put(p, (uint64_t)num << 3 | WIRE_TYPE_VARINT);

	return n + wire_varint_put(p + n, v);
}

ssize_t feed_frame(uint8_t *out, size_t cap, uint64_t seq, unsigned field, const uint8_t *body,
		   size_t body_len, const uint8_t *extra, size_t extra_len)
{
	size_t inner = body_len + extra_len;
	size_t event_len = 1 + wire_varint_len(seq) +
			   wire_varint_len((uint64_t)field << 3 | WIRE_TYPE_LEN) +
			   wire_varint_len(inner) + inner;
	size_t total = 1 + wire_varint_len(event_len) + event_len;
	uint8_t *p = out;

	if (total > cap)
		return -EMSGSIZE;
	p += wire_varint_put(p, SERVER_MESSAGE_EVENT << 3 | WIRE_TYPE_LEN);
	p += wire_varint_put(p, event_len);
	p += feed_put_uint_field(p, EVENT_SEQ, seq);
	p += wire_varint_put(p, (uint64_t)field << 3 | WIRE_TYPE_LEN);
	p += wire_varint_put(p, inner);
	memcpy(p, body, body_len);
	p += body_len;
	if (extra_len)
		memcpy(p, extra, extra_len);
	p += extra_len;
	return (ssize_t)(p - out);
}
