/* SPDX-License-Identifier: MIT */
/*
 * adopt.h: surviving a restart: the state file that records every live lease and reservation
 * as it is granted, and, in the next daemon, checking what returning clients re-declare
 * against it before taking it over.
 */
#ifndef ROCMMEMD_ADOPT_H
#define ROCMMEMD_ADOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem.pb-c.h"

struct arbiter;
struct client;
struct lease;
struct model;

/*
 * adopt_state_path picks the state file of a daemon serving socket: `explicit` when given
 * ("none": no file, returns 1; --restart-grace 0), else systemd's $RUNTIME_DIRECTORY/rocmmemd.state
 * when the socket was passed by systemd (activated) and the variable is set, else SOCKET.state
 * beside the socket. Returns 0, 1 (no file) or -ENAMETOOLONG.
 */
int adopt_state_path(const char *explicit, const char *socket, bool activated, char *out,
		     size_t len);

/*
 * adopt_start sets up a->adopt once the arbiter is up and before any client is served: opens
 * (creating) the state file at path (NULL: none), takes over what a previous daemon left in it
 * (each lease's id is kept aside, its bytes accounted, possibly beyond the budget, until its
 * holder re-declares it or grace_ms pass) and records from now on. A state file that cannot be
 * used is logged and the daemon runs without one. Returns 0 or -ENOMEM.
 */
int adopt_start(struct arbiter *a, const char *path, uint64_t grace_ms);

/*
 * adopt_finish forgets what was never re-declared and closes the state file once the loop
 * has run out (every client gone); clean (a graceful stop: every lease reclaimed) removes it.
 */
void adopt_finish(struct arbiter *a, bool clean);

/* adopt_grace_over forgets what was not re-declared in time (the grace deadline passed). */
void adopt_grace_over(struct arbiter *a);

/* Kept current by the arbiter and residency: grants, releases, model registrations and
 * reservations. Cheap: a few stores into the mapped file. */
void adopt_lease_granted(struct arbiter *a, struct lease *l);
void adopt_lease_gone(struct arbiter *a, struct lease *l);
void adopt_model_registered(struct arbiter *a);
void adopt_model_changed(struct arbiter *a, struct model *m);

/*
 * Re-declarations from a returning client (proto/rocmmem.proto); each replies. The lease's fds
 * (nfds of them) are the call's from then on.
 */
void adopt_lease_redeclare(struct arbiter *a, struct client *c, uint64_t request_id,
			   const Rocmmem__Wire__LeaseRedeclare *req, int *fds, unsigned nfds);
void adopt_model_redeclare(struct arbiter *a, struct client *c, uint64_t request_id,
			   const Rocmmem__Wire__ModelRedeclare *req);
void adopt_redeclare_done(struct arbiter *a, struct client *c, uint64_t request_id);

/* What one process of the previous daemon holds on one device, not re-declared yet. */
struct adopt_awaiting {
	unsigned device;
	int32_t pid;
	uint32_t uid;
	unsigned leases, models;
	uint64_t lease_bytes, reserved_bytes;
};

/*
 * adopt_awaiting fills out (up to max entries, largest first) with what awaits re-declaration,
 * one entry per device and process, on device (< 0: every device); returns how many entries
 * there are in all (more than max when some were left out). Its bytes are accounted on the
 * devices (leased, reserved) but belong to no connection.
 */
size_t adopt_awaiting(const struct arbiter *a, int device, struct adopt_awaiting *out, size_t max);

/* adopt_awaiting_bytes sums what awaits re-declaration on a device. */
uint64_t adopt_awaiting_bytes(const struct arbiter *a, unsigned device);

/* adopt_grace_left_ms is the time left before what awaits re-declaration is forgotten. */
uint64_t adopt_grace_left_ms(const struct arbiter *a);

#endif
