/* SPDX-License-Identifier: MIT */
/* pack.c: the daemon's messages to clients as bytes, without sizing a reply's body twice. */
#include "net/pack.h"

#include <errno.h>

#include "wire.h"

/* frame_len is a length-delimited field's tag and length, for a value of len bytes. */
static size_t frame_len(uint32_t field, size_t len)
{
	return wire_varint_len((uint64_t)field << 3 | WIRE_TYPE_LEN) + wire_varint_len(len);
}

static size_t frame_put(uint32_t field, size_t len, uint8_t *out)
{
	size_t n = wire_varint_put(out, (uint64_t)field << 3 | WIRE_TYPE_LEN);

	return n + wire_varint_put(out + n, len);
}

ssize_t pack_server_message(const Rocmmem__Wire__ServerMessage *msg, uint8_t *buf, size_t cap)
{
	const Rocmmem__Wire__Reply *r = msg->reply;
	const ProtobufCFieldDescriptor *f;
	const ProtobufCMessage *body;
	Rocmmem__Wire__Reply head;
	size_t head_len, body_len, reply_len, total, n;

	/* Anything else (an event, a reply without a body, fields unknown to this build, which
	 * protobuf-c writes last) is packed as protobuf-c does it. */
	if (msg->kind_case != ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY || !r ||
	    msg->base.n_unknown_fields || r->base.n_unknown_fields ||
	    r->body_case == ROCMMEM__WIRE__REPLY__BODY__NOT_SET)
		return wire_pack(&msg->base, buf, cap);
	f = protobuf_c_message_descriptor_get_field(&rocmmem__wire__reply__descriptor,
						    (unsigned)r->body_case);
	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return wire_pack(&msg->base, buf, cap);
	body = *(const ProtobufCMessage *const *)((const char *)r + f->offset);
	if (!body)
		return wire_pack(&msg->base, buf, cap);
	/* The reply's body is its last field: the reply without it, then the body framed (a
	 * oneof's case is its field's number, in protobuf-c). */
	head = *r;
	head.body_case = ROCMMEM__WIRE__REPLY__BODY__NOT_SET;
	head_len = protobuf_c_message_get_packed_size(&head.base);
	body_len = protobuf_c_message_get_packed_size(body);
	reply_len = head_len + frame_len(f->id, body_len) + body_len;
	total = frame_len(ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY, reply_len) + reply_len;
	if (total > cap || total > WIRE_MAX_FRAME)
		return -EMSGSIZE;
	n = frame_put(ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY, reply_len, buf);
	n += protobuf_c_message_pack(&head.base, buf + n);
	n += frame_put(f->id, body_len, buf + n);
	n += protobuf_c_message_pack(body, buf + n);
	return (ssize_t)n;
}
