/* SPDX-License-Identifier: MIT */
/* pack.h: the daemon's messages to clients as bytes, without sizing a reply's body twice. */
#ifndef ROCMMEMD_PACK_H
#define ROCMMEMD_PACK_H

#include <stddef.h>
#include <sys/types.h>

#include "rocmmem.pb-c.h"

/*
 * pack_server_message packs msg into buf (cap bytes), the same bytes protobuf-c's pack gives.
 * protobuf-c sizes a sub-message again at every level it is nested in (to write its length),
 * and a reply's body is nested two deep: a status of many clients was sized four times over.
 * Here the body of a reply (the last field protobuf-c would write, so the order is the same)
 * is sized once and packed straight after the reply's other fields and the two lengths.
 * Returns the length, or -EMSGSIZE when it exceeds cap or WIRE_MAX_FRAME.
 */
ssize_t pack_server_message(const Rocmmem__Wire__ServerMessage *msg, uint8_t *buf, size_t cap);

#endif
