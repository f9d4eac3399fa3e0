/* SPDX-License-Identifier: MIT */
/* reconnect.h: bringing the connection back when the daemon went away (see reconnect.c). */
#ifndef ROCMMEM_LIB_RECONNECT_H
#define ROCMMEM_LIB_RECONNECT_H

#include "conn/client.h"

/* What the connection calls when it ends and while it waits: installed at connect. */
extern const struct conn_hooks reconnect_hooks;

/* reconnect_init applies the options and $ROCMMEM_RECONNECT (window_ms 0: the default, < 0:
 * no limit); reconnect_finish frees what reconnection kept. */
void reconnect_init(rocmmem_client *c, uint32_t flags, int64_t window_ms);
void reconnect_finish(rocmmem_client *c);

/* reconnect_due says whether an attempt should be made now (lock held). */
bool reconnect_due(const rocmmem_client *c);

/* reconnect_try makes one attempt (lock held, released meanwhile) and installs the new
 * connection, or schedules the next attempt, or gives up at the window's end. */
void reconnect_try(rocmmem_client *c);

#endif
