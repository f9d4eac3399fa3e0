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

#include "lease.h"
#include "model.h"
#include "platform/backend/backend.h"
#include "platform/peer.h"
#include "queue.h"
#include "version.h"

struct uid_account;

struct holder {
	uint64_t id;	     /* its connection's id: handed out in order, never reused */
	struct identity who; /* as the kernel vouched for it at connect */
	char name[ROCMMEM_NAME_MAX + 1]; /* "" until hello */
	uint64_t connected_ms;
	uint32_t lease_count;
	uint64_t leased_bytes;
	uint64_t device_bytes[BACKEND_MAX_DEVICES]; /* its leases on each device */
	struct lease_list leases;
	struct waiter_list waiters;
	unsigned waiter_count;
	struct model_list models;
	unsigned model_count;
	unsigned jobs;	     /* backend jobs in flight for it (allocations, imports, trims) */
	unsigned fd_leases;  /* host leases held or being granted: an fd each (quota_fd_admit) */
	uint64_t queue_mark; /* it waits behind a stuck head (the bypass rule's mark) */
	struct uid_account *account;  /* its uid's account */
	TAILQ_ENTRY(holder) uid_link; /* ... of which it is one */
};

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

/* One uid's holders. */
struct uid_account {
	uid_t uid;
	unsigned connections;
	unsigned fd_leases; /* its holders' fd_leases, summed */
	TAILQ_HEAD(, holder) holders;
	TAILQ_ENTRY(uid_account) link;
};

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

/* uid_attach counts h among its uid's holders. Returns 0 or -ENOMEM. */
int uid_attach(struct uid_accounts *u, struct holder *h);

/* uid_detach forgets h (and its uid stops counting h's host leases); calling it for a holder
 * never attached does nothing. */
void uid_detach(struct uid_accounts *u, struct holder *h);

#endif
