/* SPDX-License-Identifier: MIT */
/*
 * holder.h: what one client process holds through one connection (its leases, models, waiting
 * requests and bytes per device), and the accounts of the uids holders belong to.
 */
#ifndef ROCMMEMD_HOLDER_H
#define ROCMMEMD_HOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "books.h"

/* holder_label writes "pid 123 'name'" for messages. Returns buf. */
const char *holder_label(const struct holder *h, char *buf, size_t len);

/* holder_bytes is what h holds: its leases and its models' reservations. */
uint64_t holder_bytes(const struct holder *h);

/*
 * holder_bytes_on is what h holds on device dev: its leases there and its models'
 * reservations there; *in_models (if not NULL) the part of that in models (reservations and
 * tagged leases).
 */
uint64_t holder_bytes_on(const struct holder *h, unsigned dev, uint64_t *in_models);

/*
 * holder_holds_memory says whether h still has something to give back: leases, model
 * reservations, or a backend job that may end in a lease.
 */
bool holder_holds_memory(const struct holder *h);

TAILQ_HEAD(uid_bucket, uid_account);

#define UID_BUCKETS 64u

/* Every uid with a holder, by uid. */
struct uid_accounts {
	struct uid_bucket buckets[UID_BUCKETS];
};

/* uid_accounts_init sets up empty accounts. */
void uid_accounts_init(struct uid_accounts *u);

/* uid_accounts_finish frees the accounts (every holder must be gone). */
void uid_accounts_finish(struct uid_accounts *u);

/* uid_connections says how many holders uid has now. */
unsigned uid_connections(const struct uid_accounts *u, uid_t uid);

/*
 * uid_attach counts h among its uid's holders and links it into the ring of its process's
 * holders there (found by a walk of the uid's holders: O(connections of the uid) per
 * connect, so that summing a process's books is O(its own connections)). Returns 0 or
 * -ENOMEM.
 */
int uid_attach(struct uid_accounts *u, struct holder *h);

/* uid_detach forgets h (and its uid stops counting h's host leases); calling it for a holder
 * never attached does nothing. */
void uid_detach(struct uid_accounts *u, struct holder *h);

#endif
