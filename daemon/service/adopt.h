/* SPDX-License-Identifier: MIT */
/*
 * adopt.h: surviving a restart: the state file that records every live lease and reservation
 * as it is granted, and, in the next daemon, what a predecessor left (state/adoption.h) until
 * its holders re-declare it (redeclare.c) or the grace period ends.
 */
#ifndef ROCMMEMD_ADOPT_H
#define ROCMMEMD_ADOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/statefile.h"
#include "svc.h"

/*
 * adopt_state_path picks the state file of a daemon serving socket: `explicit` when given
 * ("none": no file, returns 1; --restart-grace 0), else systemd's $RUNTIME_DIRECTORY/rocmmemd.state
 * when the socket was passed by systemd (activated) and the variable is set, else SOCKET.state
 * beside the socket. Returns 0, 1 (no file) or -ENAMETOOLONG.
 */
int adopt_state_path(const char *explicit, const char *socket, bool activated, char *out,
		     size_t len);

/*
 * adopt_start sets up svc->adopt once the service is up and before any client is served:
 * opens (creating) the state file at path (NULL: none), takes over what a previous daemon left
 * in it (each lease's id is kept aside, its bytes accounted, possibly beyond the budget, until
 * its holder re-declares it or grace_ms pass) and records from now on. A state file that
 * cannot be used is logged and the daemon runs without one. Returns 0 or -ENOMEM.
 */
int adopt_start(struct svc *svc, const char *path, uint64_t grace_ms);

/*
 * adopt_finish forgets what was never re-declared and closes the state file once every client
 * is gone; clean (a graceful stop: every lease reclaimed) removes it.
 */
void adopt_finish(struct svc *svc, bool clean);

/* adopt_grace_over forgets what was not re-declared in time (the grace deadline passed). */
void adopt_grace_over(struct svc *svc);

/* Kept current by the service: grants, releases, model registrations and reservations. Cheap:
 * a few stores into the mapped file. */
void adopt_lease_granted(struct svc *svc, struct lease *l);
void adopt_arena_made(struct svc *svc, struct holder *h, struct arena *a);
void adopt_arena_gone(struct svc *svc, struct arena *a);
/* adopt_arena_pending finds the record of arena id awaiting its holder, or NULL. */
struct pending *adopt_arena_pending(struct svc *svc, uint64_t id);
/* adopt_arenas_forget forgets the arena records of pid (every pid: -1) not re-declared. */
void adopt_arenas_forget(struct svc *svc, int32_t pid);
void adopt_lease_gone(struct svc *svc, struct lease *l);
void adopt_model_registered(struct svc *svc);
void adopt_model_changed(struct svc *svc, struct model *m);

/* For the re-declarations (redeclare.c). */
bool adopt_recording(const struct svc *svc);
const char *adopt_kind_name(uint8_t kind);
void adopt_lease_record(const struct lease *l, struct statefile_record *r);

/* adopt_forget drops a pending record: its bytes, its reserved id and the record (why: logged). */
void adopt_forget(struct adopt *ad, struct pending *p, bool is_lease, const char *why);

#endif
