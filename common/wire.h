/* SPDX-License-Identifier: MIT */
/* wire.h: packet framing on SOCK_SEQPACKET sockets: one message per packet, fds alongside. */
#ifndef ROCMMEM_COMMON_WIRE_H
#define ROCMMEM_COMMON_WIRE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest packet either side sends or accepts, checked before unpacking. */
#define WIRE_MAX_FRAME (64u * 1024u)
/* The most fds one packet carries. */
#define WIRE_MAX_FDS 64u

/*
 * wire_send sends one packet of len bytes with nfds descriptors attached (SCM_RIGHTS). The fds
 * stay owned by the caller. flags are extra send flags (MSG_DONTWAIT); MSG_NOSIGNAL is always
 * added. Returns 0, -EMSGSIZE when len exceeds WIRE_MAX_FRAME or nfds exceeds WIRE_MAX_FDS,
 * -EAGAIN when a non-blocking socket is full, or another negative errno (-EPIPE: peer gone).
 */
int wire_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds, int flags);

/*
 * wire_recv receives one packet into buf (cap bytes) and the fds that came with it (at most
 * WIRE_MAX_FDS, close-on-exec) into fds, their count into *nfds; the caller owns those fds.
 * Returns the packet length; 0 when the peer closed the connection or sent an empty packet
 * (the two read alike: the daemon tells them apart by polling for RDHUP); -EMSGSIZE when the
 * packet was larger than cap and -EBADMSG when its ancillary data was truncated or not
 * SCM_RIGHTS (in both cases every fd that came with it is already closed and *nfds is 0);
 * -EAGAIN; -EINTR when a blocking receive (flags without MSG_DONTWAIT) was interrupted by a
 * signal; or another negative errno.
 */
ssize_t wire_recv(int sock, void *buf, size_t cap, int *fds, unsigned *nfds, int flags);

/* wire_close_fds closes n fds and sets each to -1. */
void wire_close_fds(int *fds, unsigned n);

/*
 * wire_pack packs msg into buf (cap bytes). Returns the packed length, or -EMSGSIZE when the
 * message would not fit, checked before packing.
 */
ssize_t wire_pack(const ProtobufCMessage *msg, uint8_t *buf, size_t cap);

/*
 * wire_pack_walk is wire_pack without sizing msg first: one walk that writes as it goes and
 * stops writing at cap (then what was written is garbage, and it returns -EMSGSIZE). Writing to
 * a buffer, protobuf-c sizes each nested message before it (once per level it is nested in)
 * and makes a call per field written, where its plain pack sizes nothing (it moves a nested
 * message when its length takes more than a byte): cheaper for a flat request (a LeaseAcquire
 * in a ClientMessage: 10% less time), dearer for a nested reply (a LeaseGrant in a Reply in a
 * ServerMessage: 45% more; the daemon's CPU per status of 64 clients: 1.5x).
 */
ssize_t wire_pack_walk(const ProtobufCMessage *msg, uint8_t *buf, size_t cap);

/*
 * For an envelope written by hand around a body packed once (the daemon's telemetry frames):
 * protobuf's wire types, a varint's length, and writing one (returns the bytes written). A
 * field's key is its number shifted left by 3, or'ed with its wire type.
 */
#define WIRE_TYPE_VARINT 0u
#define WIRE_TYPE_LEN 2u
size_t wire_varint_len(uint64_t v);
size_t wire_varint_put(uint8_t *out, uint64_t v);

#endif
