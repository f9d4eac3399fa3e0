/* SPDX-License-Identifier: MIT */
/*
 * feed_frame.c: the envelope of a telemetry message, written by hand around a body packed once
 * for every subscriber.
 */
#include "feed_frame.h"

#include <errno.h>
#include <string.h>

/* Protobuf wire format: a field's key is (number << 3) | type. */
#define WIRETYPE_VARINT 0u
#define WIRETYPE_LEN 2u
#define SERVER_MESSAGE_EVENT 2u
#define EVENT_SEQ 1u

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

size_t feed_put_uint_field(uint8_t *p, unsigned num, uint64_t v)
{
	size_t n = put_varint(p, (uint64_t)num << 3 | WIRETYPE_VARINT);

	return n + put_varint(p + n, v);
}

ssize_t feed_frame(uint8_t *out, size_t cap, uint64_t seq, unsigned field, const uint8_t *body,
		   size_t body_len, const uint8_t *extra, size_t extra_len)
{
	size_t inner = body_len + extra_len;
	size_t event_len = 1 + varint_len(seq) + varint_len((uint64_t)field << 3 | WIRETYPE_LEN) +
			   varint_len(inner) + inner;
	size_t total = 1 + varint_len(event_len) + event_len;
	uint8_t *p = out;

	if (total > cap)
		return -EMSGSIZE;
	p += put_varint(p, SERVER_MESSAGE_EVENT << 3 | WIRETYPE_LEN);
	p += put_varint(p, event_len);
	p += feed_put_uint_field(p, EVENT_SEQ, seq);
	p += put_varint(p, (uint64_t)field << 3 | WIRETYPE_LEN);
	p += put_varint(p, inner);
	memcpy(p, body, body_len);
	p += body_len;
	if (extra_len)
		memcpy(p, extra, extra_len);
	p += extra_len;
	return (ssize_t)(p - out);
}
