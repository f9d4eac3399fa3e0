/* SPDX-License-Identifier: MIT */
/*
 * test_feed.c: unit tests of feed_frame, the hand-written envelope the telemetry feed puts
 * around a sample or event packed once for all subscribers: protobuf-c must read back what it
 * wrote, for every sequence number and body size, and it must never write past its cap.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/feed_frame.h"
#include "rocmmem.pb-c.h"
#include "wire.h"

#define FIELD_SAMPLE 6u
#define FIELD_TELEMETRY 7u
/* Fields feed.c appends after the body. */
#define SAMPLE_DROPPED 8u
#define SAMPLE_INTERVAL 11u
#define TELEMETRY_DROPPED 13u
/* Beyond every buffer handed to feed_frame: bytes that must stay as they were. */
#define CANARY 64u
#define CANARY_BYTE 0xa5u

static const uint64_t seqs[] = {1, 127, 128, 16383, 16384, (uint64_t)1 << 32, UINT64_MAX};

/* Body sizes around every varint length boundary of the lengths the envelope carries. */
static const size_t body_sizes[] = {0,	   2,	  3,	 100,	125,   126,   127,   128,
				    129,   130,	  200,	 1000,	16370, 16380, 16381, 16382,
				    16383, 16384, 16385, 16390, 40000, 65000, 65400, 65480};

/* Extras: none; a dropped count alone; a dropped count and an interval. */
enum extras { EXTRA_NONE, EXTRA_DROPPED, EXTRA_BOTH, EXTRA_COUNT };

static const uint32_t dropped_values[] = {1, 127, 128, 16384, UINT32_MAX};

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	for (; v >= 0x80; v >>= 7)
		p[n++] = (uint8_t)(v | 0x80);
	p[n++] = (uint8_t)v;
	return n;
}

static size_t put_uint_field(uint8_t *p, unsigned num, uint64_t v)
{
	size_t n = put_varint(p, (uint64_t)num << 3);

	return n + put_varint(p + n, v);
}

/* A packed body and what it should read back as. */
struct body {
	uint8_t *data;
	size_t len;
	size_t text_len; /* bytes of the string that pads it; SIZE_MAX: the body is empty */
};

/* fill_text writes a recognisable pattern of n bytes (no NUL) into a malloc'd string. */
static char *fill_text(size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)('a' + i % 26);
	s[n] = '\0';
	return s;
}

static bool text_matches(const char *s, size_t n)
{
	if (!s || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] != (char)('a' + i % 26))
			return false;
	return true;
}

/* packed_size packs nothing: the size a body padded with n bytes of text would have. */
static size_t packed_size(unsigned field, size_t n, char *text)
{
	text[n] = '\0';
	if (field == FIELD_TELEMETRY) {
		Rocmmem__Wire__TelemetryEvent ev = ROCMMEM__WIRE__TELEMETRY_EVENT__INIT;

		ev.detail = text;
		return rocmmem__wire__telemetry_event__get_packed_size(&ev);
	} else {
		Rocmmem__Wire__TelemetrySample st = ROCMMEM__WIRE__TELEMETRY_SAMPLE__INIT;
		Rocmmem__Wire__DeviceInfo dev = ROCMMEM__WIRE__DEVICE_INFO__INIT;
		Rocmmem__Wire__DeviceInfo *devs[] = {&dev};

		dev.name = text;
		st.n_devices = 1;
		st.devices = devs;
		return rocmmem__wire__telemetry_sample__get_packed_size(&st);
	}
}

/*
 * make_body packs a TelemetryEvent (its detail) or TelemetrySample (one device's name) padded
 * with text to the largest size not above target. A target too small for any padded body gives
 * the empty body (valid: every field is optional).
 */
static struct body make_body(unsigned field, size_t target)
{
	struct body b = {.text_len = SIZE_MAX};
	char *text = fill_text(target);
	size_t n = target;

	while (n > 0 && packed_size(field, n, text) > target)
		n--;
	if (packed_size(field, n, text) <= target) {
		b.text_len = n;
		b.len = packed_size(field, n, text);
	}
	b.data = malloc(b.len ? b.len : 1);
	assert_non_null(b.data);
	if (b.text_len != SIZE_MAX) {
		text[n] = '\0';
		if (field == FIELD_TELEMETRY) {
			Rocmmem__Wire__TelemetryEvent ev = ROCMMEM__WIRE__TELEMETRY_EVENT__INIT;

			ev.detail = text;
			assert_int_equal(rocmmem__wire__telemetry_event__pack(&ev, b.data), b.len);
		} else {
			Rocmmem__Wire__TelemetrySample st = ROCMMEM__WIRE__TELEMETRY_SAMPLE__INIT;
			Rocmmem__Wire__DeviceInfo dev = ROCMMEM__WIRE__DEVICE_INFO__INIT;
			Rocmmem__Wire__DeviceInfo *devs[] = {&dev};

			dev.name = text;
			st.n_devices = 1;
			st.devices = devs;
			assert_int_equal(rocmmem__wire__telemetry_sample__pack(&st, b.data), b.len);
		}
	}
	free(text);
	return b;
}

/* What the extras say, and their packed bytes. */
struct extra {
	uint8_t data[32];
	size_t len;
	bool has_dropped;
	uint32_t dropped;
	bool has_interval;
	uint32_t interval;
};

static struct extra make_extra(unsigned field, enum extras kind, uint32_t dropped)
{
	struct extra x = {.len = 0};

	if (kind == EXTRA_NONE)
		return x;
	x.has_dropped = true;
	x.dropped = dropped;
	x.len += put_uint_field(x.data, field == FIELD_SAMPLE ? SAMPLE_DROPPED : TELEMETRY_DROPPED,
				dropped);
	/* Events have no interval; for them a second dropped field (the last one counts). */
	if (kind == EXTRA_BOTH && field == FIELD_SAMPLE) {
		x.has_interval = true;
		x.interval = 60000;
		x.len += put_uint_field(x.data + x.len, SAMPLE_INTERVAL, x.interval);
	} else if (kind == EXTRA_BOTH) {
		x.dropped = UINT32_MAX - dropped;
		x.len += put_uint_field(x.data + x.len, TELEMETRY_DROPPED, x.dropped);
	}
	return x;
}

/* frame calls feed_frame into an exactly sized heap buffer followed by canary bytes. */
static ssize_t frame(uint8_t **out, size_t cap, uint64_t seq, unsigned field, const struct body *b,
		     const struct extra *x)
{
	ssize_t len;

	*out = malloc(cap + CANARY);
	assert_non_null(*out);
	memset(*out, CANARY_BYTE, cap + CANARY);
	len = feed_frame(*out, cap, seq, field, b->data, b->len, x->data, x->len);
	/* Nothing beyond what it says it wrote; nothing at all when it refuses. */
	for (size_t i = len > 0 ? (size_t)len : 0; i < cap + CANARY; i++)
		if ((*out)[i] != CANARY_BYTE)
			fail_msg("feed_frame (cap %zu, returned %zd) wrote byte %zu", cap, len, i);
	return len;
}

/* check_frame unpacks a framed message with protobuf-c and checks every field of it. */
static void check_frame(const uint8_t *data, size_t len, uint64_t seq, unsigned field,
			const struct body *b, const struct extra *x)
{
	Rocmmem__Wire__ServerMessage *m = rocmmem__wire__server_message__unpack(NULL, len, data);
	Rocmmem__Wire__Event *e;

	if (!m)
		fail_msg("protobuf-c cannot read the frame (seq %llu, field %u, body %zu bytes, "
			 "extra %zu bytes)",
			 (unsigned long long)seq, field, b->len, x->len);
	assert_int_equal(m->kind_case, ROCMMEM__WIRE__SERVER_MESSAGE__KIND_EVENT);
	e = m->event;
	assert_true(e->has_seq);
	assert_true(e->seq == seq);
	if (field == FIELD_SAMPLE) {
		Rocmmem__Wire__TelemetrySample *s = e->sample;

		assert_int_equal(e->body_case, ROCMMEM__WIRE__EVENT__BODY_SAMPLE);
		assert_non_null(s);
		if (b->text_len == SIZE_MAX) {
			assert_int_equal(s->n_devices, 0);
		} else {
			assert_int_equal(s->n_devices, 1);
			assert_true(text_matches(s->devices[0]->name, b->text_len));
		}
		assert_int_equal(s->has_dropped, x->has_dropped);
		assert_int_equal(s->dropped, x->dropped);
		assert_int_equal(s->has_interval_ms, x->has_interval);
		assert_int_equal(s->interval_ms, x->interval);
	} else {
		Rocmmem__Wire__TelemetryEvent *t = e->telemetry;

		assert_int_equal(e->body_case, ROCMMEM__WIRE__EVENT__BODY_TELEMETRY);
		assert_non_null(t);
		if (b->text_len == SIZE_MAX)
			assert_null(t->detail);
		else
			assert_true(text_matches(t->detail, b->text_len));
		assert_int_equal(t->has_dropped, x->has_dropped);
		assert_int_equal(t->dropped, x->dropped);
	}
	rocmmem__wire__server_message__free_unpacked(m, NULL);
}

/*
 * frame_round_trip frames one body: with room to spare, into exactly its length, and one byte
 * short of it (-EMSGSIZE, nothing written). Returns the framed length.
 */
static size_t frame_round_trip(uint64_t seq, unsigned field, const struct body *b,
			       const struct extra *x)
{
	uint8_t *out;
	ssize_t len = frame(&out, 2 * WIRE_MAX_FRAME, seq, field, b, x);

	assert_true(len > 0);
	/* The envelope around body and extras: at most two keys and three varints. */
	assert_true((size_t)len > b->len + x->len);
	assert_true((size_t)len <= b->len + x->len + 32);
	check_frame(out, (size_t)len, seq, field, b, x);
	free(out);
	assert_int_equal(frame(&out, (size_t)len, seq, field, b, x), len);
	check_frame(out, (size_t)len, seq, field, b, x);
	free(out);
	assert_int_equal(frame(&out, (size_t)len - 1, seq, field, b, x), -EMSGSIZE);
	free(out);
	return (size_t)len;
}

/* Every sequence number, body size and set of extras, for samples and for events. */
static void test_round_trip(void **state)
{
	static const unsigned fields[] = {FIELD_SAMPLE, FIELD_TELEMETRY};
	unsigned frames = 0;

	(void)state;
	for (size_t f = 0; f < 2; f++) {
		for (size_t i = 0; i < sizeof(body_sizes) / sizeof(body_sizes[0]); i++) {
			struct body b = make_body(fields[f], body_sizes[i]);

			assert_true(b.len <= body_sizes[i]);
			for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++) {
				for (int k = 0; k < EXTRA_COUNT; k++) {
					uint32_t dropped =
					    dropped_values[(i + s + (size_t)k) %
							   (sizeof(dropped_values) /
							    sizeof(dropped_values[0]))];
					struct extra x =
					    make_extra(fields[f], (enum extras)k, dropped);

					frame_round_trip(seqs[s], fields[f], &b, &x);
					frames++;
				}
			}
			free(b.data);
		}
	}
	assert_true(frames > 500);
}

/* Without extras the envelope is byte for byte what protobuf-c packs for the same message. */
static void test_same_bytes_as_protobuf_c(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(body_sizes) / sizeof(body_sizes[0]); i++) {
		for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++) {
			for (unsigned field = FIELD_SAMPLE; field <= FIELD_TELEMETRY; field++) {
				struct body b = make_body(field, body_sizes[i]);
				struct extra none = {.len = 0};
				Rocmmem__Wire__ServerMessage *m;
				uint8_t *ours, *theirs;
				ssize_t len =
				    frame(&ours, 2 * WIRE_MAX_FRAME, seqs[s], field, &b, &none);
				size_t want;

				assert_true(len > 0);
				m = rocmmem__wire__server_message__unpack(NULL, (size_t)len, ours);
				assert_non_null(m);
				want = rocmmem__wire__server_message__get_packed_size(m);
				theirs = malloc(want);
				assert_non_null(theirs);
				assert_int_equal(rocmmem__wire__server_message__pack(m, theirs),
						 want);
				assert_int_equal((size_t)len, want);
				assert_memory_equal(ours, theirs, want);
				free(theirs);
				free(ours);
				free(b.data);
				rocmmem__wire__server_message__free_unpacked(m, NULL);
			}
		}
	}
}

/*
 * At the packet cap itself: the largest body that frames to exactly WIRE_MAX_FRAME bytes (with
 * the widest sequence number and both extras) fits a WIRE_MAX_FRAME cap and reads back; one
 * byte more of body is refused with -EMSGSIZE and nothing written.
 */
static void test_exactly_at_the_cap(void **state)
{
	(void)state;
	for (unsigned field = FIELD_SAMPLE; field <= FIELD_TELEMETRY; field++) {
		struct extra x = make_extra(field, EXTRA_BOTH, UINT32_MAX);
		size_t target = WIRE_MAX_FRAME, len = 0;
		struct body b = {0};
		uint8_t *out;
		ssize_t rc;

		/* Shrink the body until the frame fits the cap (the envelope is under 32 bytes). */
		for (;; target--) {
			b = make_body(field, target);
			rc = frame(&out, 2 * WIRE_MAX_FRAME, UINT64_MAX, field, &b, &x);
			free(out);
			assert_true(rc > 0);
			if ((size_t)rc <= WIRE_MAX_FRAME)
				break;
			free(b.data);
			assert_true(target > WIRE_MAX_FRAME - 64);
		}
		len = (size_t)rc;
		assert_int_equal(len, WIRE_MAX_FRAME);
		assert_int_equal(frame(&out, WIRE_MAX_FRAME, UINT64_MAX, field, &b, &x),
				 WIRE_MAX_FRAME);
		check_frame(out, len, UINT64_MAX, field, &b, &x);
		free(out);
		assert_int_equal(frame(&out, WIRE_MAX_FRAME - 1, UINT64_MAX, field, &b, &x),
				 -EMSGSIZE);
		free(out);
		free(b.data);
		/* One byte more of body (same extras, same seq): over the cap. */
		b = make_body(field, target + 1);
		assert_int_equal(b.len, target + 1);
		assert_int_equal(frame(&out, WIRE_MAX_FRAME, UINT64_MAX, field, &b, &x), -EMSGSIZE);
		free(out);
		assert_int_equal(frame(&out, WIRE_MAX_FRAME + 1, UINT64_MAX, field, &b, &x),
				 WIRE_MAX_FRAME + 1);
		free(out);
		free(b.data);
	}
}

/* A cap too small for any envelope, down to 0, is refused without a byte written. */
static void test_tiny_caps(void **state)
{
	struct body b = make_body(FIELD_TELEMETRY, 0);
	struct extra none = {.len = 0};
	uint8_t *out;
	ssize_t len;

	(void)state;
	len = frame(&out, 64, 1, FIELD_TELEMETRY, &b, &none);
	free(out);
	/* ServerMessage{event{seq 1, telemetry {}}}: 2 + 2 + 2 bytes. */
	assert_int_equal(len, 6);
	for (size_t cap = 0; cap < (size_t)len; cap++) {
		assert_int_equal(frame(&out, cap, 1, FIELD_TELEMETRY, &b, &none), -EMSGSIZE);
		free(out);
	}
	free(b.data);
}

/* A body that is nothing but extras: a sample of only a dropped count reads back as such. */
static void test_extras_alone(void **state)
{
	struct body b = make_body(FIELD_SAMPLE, 0);

	(void)state;
	for (size_t i = 0; i < sizeof(dropped_values) / sizeof(dropped_values[0]); i++) {
		struct extra x = make_extra(FIELD_SAMPLE, EXTRA_BOTH, dropped_values[i]);

		frame_round_trip(seqs[i % (sizeof(seqs) / sizeof(seqs[0]))], FIELD_SAMPLE, &b, &x);
	}
	free(b.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_same_bytes_as_protobuf_c),
	    cmocka_unit_test(test_exactly_at_the_cap),
	    cmocka_unit_test(test_tiny_caps),
	    cmocka_unit_test(test_extras_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
