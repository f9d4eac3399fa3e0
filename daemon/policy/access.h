/* SPDX-License-Identifier: MIT */
/* access.h: what a peer may do: connect (the allowed users and groups) and administer. */
#ifndef ROCMMEMD_ACCESS_H
#define ROCMMEMD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/log.h"
#include "platform/ids.h"
#include "platform/peer.h"

/* The group the system-wide daemon gives its socket by default (systemd/rocmmemd.sysusers). */
#define ACCESS_DEFAULT_GROUP "rocmmem"

/* Who may connect and who administers, as the settings say. */
struct access_policy {
	struct id_list users;  /* allowed uids */
	struct id_list groups; /* allowed gids (primary or supplementary) */
	bool has_admin_group;
	gid_t admin_gid;
	/* The admin group as configured (a name or a number), for messages: refusals never look
	 * names up on the event loop (NSS may ask the network). */
	char admin_group_name[64];
};

/* access_in_group says whether the primary or a supplementary group of who is gid. */
bool access_in_group(const struct identity *who, gid_t gid);

/*
 * access_allowed says whether the policy lets who connect: anyone when neither list names
 * anybody; else a listed uid, or a listed group among its groups. Root and the daemon's own
 * user (daemon_uid) are always allowed.
 */
bool access_allowed(const struct access_policy *pol, const struct identity *who, uid_t daemon_uid);

/* access_is_admin says whether who administers: root, or a member of the admin group. */
bool access_is_admin(const struct access_policy *pol, const struct identity *who);

#endif
