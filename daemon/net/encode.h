/* SPDX-License-Identifier: MIT */
/* encode.h: the service's replies and notices as the wire's Reply and Event messages. */
#ifndef ROCMMEMD_ENCODE_H
#define ROCMMEMD_ENCODE_H

#include <stdint.h>

#include "service/svc.h"

struct client;
struct server;

/* encode_sink is the service's sink over the server's connections (svc_set_sink). */
struct svc_sink encode_sink(struct server *s);

/* encode_reply sends r to c as the answer to request_id (nothing when c is NULL). */
void encode_reply(struct client *c, uint64_t request_id, const struct svc_reply *r);

/* encode_notice sends n to c as an event (nothing when c is NULL). */
void encode_notice(struct client *c, const struct svc_notice *n);

#endif
