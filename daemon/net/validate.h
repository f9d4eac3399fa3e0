/* SPDX-License-Identifier: MIT */
/* validate.h: the checks a request passes before it reaches a handler: the message alone. */
#ifndef ROCMMEMD_VALIDATE_H
#define ROCMMEMD_VALIDATE_H

#include <stddef.h>

#include "rocmmem.pb-c.h"

/*
 * validate_hello checks a Hello: a protocol version is given (-EPROTO) and is the one this
 * daemon speaks (-EPROTONOSUPPORT), the client name if any is clean text (-EINVAL). Returns 0,
 * or a negative errno with a message for the client in why (len bytes, len > 0).
 */
int validate_hello(const Rocmmem__Wire__Hello *hello, char *why, size_t len);

/*
 * validate_request checks what a request says about itself, before any state is looked at:
 * a non-zero id (-EPROTO), a known body (-EOPNOTSUPP when none is set), and per body the
 * fields the handler relies on: sizes present and non-zero, devices below ndevices (-ENODEV),
 * names and tags of clean text, model classes and sample intervals in range (-EINVAL).
 * Checks that need state (budgets, granules, owners, lost devices) stay with the handlers.
 * Bodies it does not know (added by a newer protocol) pass: dispatch answers those. Returns
 * 0, or a negative errno with a message for the client in why (len bytes, len > 0). Pure: no
 * side effect beyond why, safe on any message protobuf-c unpacked.
 */
int validate_request(const Rocmmem__Wire__ClientMessage *msg, unsigned ndevices, char *why,
		     size_t len);

#endif
