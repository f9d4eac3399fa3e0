/* SPDX-License-Identifier: MIT */
/* drain.h: stopping gracefully: clients holding memory get a while to give it back. */
#ifndef ROCMMEMD_DRAIN_H
#define ROCMMEMD_DRAIN_H

#include <stdbool.h>

#include "net.h"
#include "rocmmem.pb-c.h"

/*
 * server_stop begins a graceful stop: stops listening (removing the socket and its lock unless
 * systemd owns them), tells every client the daemon is stopping and why, and disconnects at
 * once the clients that hold no memory (their pending requests end with the connection). The
 * others have their waiting requests answered with -ESHUTDOWN and get up to
 * limits.shutdown_timeout_ms (0: none, all go at once) to release and leave by themselves
 * (server_stop_allows says what they may still ask); each is disconnected as soon as it holds
 * nothing, and whoever is left at the deadline is disconnected then, every lease reclaimed.
 * Once no client is left, s->on_stopped is called and the server's handles are closed: the
 * loop can run out. Calling it again does nothing.
 */
void server_stop(struct server *s, const char *reason);

/*
 * server_stop_now cuts a drain short (a second SIGTERM): disconnects every client at once.
 * Starts the stop first if server_stop was not called yet.
 */
void server_stop_now(struct server *s, const char *reason);

/*
 * server_stop_allows says whether a request of this kind is still served while the daemon
 * drains: only those that give memory back (releases, model unregisters, evict acks) or ask
 * for less (unsubscribing); the rest are refused with -ESHUTDOWN.
 */
bool server_stop_allows(Rocmmem__Wire__ClientMessage__BodyCase kind);

#endif
