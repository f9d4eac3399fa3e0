/* SPDX-License-Identifier: MIT */
/*
 * feed_frame.h: the envelope of a telemetry message, written by hand around a body packed once
 * for every subscriber.
 */
#ifndef ROCMMEMD_FEED_FRAME_H
#define ROCMMEMD_FEED_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fields of Event (the body) and of TelemetrySample / TelemetryEvent (the extras). */
#define FEED_FIELD_SAMPLE 6u
#define FEED_FIELD_TELEMETRY 7u
#define FEED_SAMPLE_DROPPED 8u
#define FEED_SAMPLE_INTERVAL 11u
#define FEED_TELEMETRY_DROPPED 13u
/* Room an envelope adds around a body: three keys and three varints. */
#define FEED_FRAME_OVERHEAD 32u

/*
 * feed_frame writes ServerMessage{event{seq, <field>: body + extra}} to out: body is a packed
 * TelemetrySample (field 6) or TelemetryEvent (field 7), extra more of its fields, packed.
 * Returns the length, or -EMSGSIZE when it would exceed cap.
 */
ssize_t feed_frame(uint8_t *out, size_t cap, uint64_t seq, unsigned field, const uint8_t *body,
		   size_t body_len, const uint8_t *extra, size_t extra_len);

/* feed_put_uint_field writes field number num as a varint field; returns the bytes written. */
size_t feed_put_uint_field(uint8_t *p, unsigned num, uint64_t v);

#endif
