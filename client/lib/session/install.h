/* SPDX-License-Identifier: MIT */
/* install.h: making a successful reconnection attempt the client's connection. */
#ifndef ROCMMEM_LIB_INSTALL_H
#define ROCMMEM_LIB_INSTALL_H

#include "redeclare.h"

/*
 * install_attempt makes the attempt's connection the client's, applies what the new daemon
 * answered (ids, refusals as revocations), files the events that came during the attempt and
 * queues ROCMMEM_EVENT_RECONNECTED. Lock held.
 */
void install_attempt(rocmmem_client *c, struct attempt *at);

#endif
