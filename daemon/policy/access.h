/* SPDX-License-Identifier: MIT */
/*
 * access.h: who a peer is (SO_PEERCRED, SO_PEERGROUPS, a pidfd) and what it may do: connect
 * (the allowed users and groups) and administer (root or the admin group); user and group
 * names as settings give them.
 */
#ifndef ROCMMEMD_ACCESS_H
#define ROCMMEMD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/log.h"

/* The most users (or groups) one allowed list may name. */
#define ACCESS_MAX_IDS 64u

/* The group the system-wide daemon gives its socket by default (systemd/rocmmemd.sysusers). */
#define ACCESS_DEFAULT_GROUP "rocmmem"

/* A list of uids or gids. */
struct id_list {
	unsigned n;
	uint32_t ids[ACCESS_MAX_IDS];
};

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

/* Refusals the policy caused since the start, for status and metrics. */
struct access_tally {
	uint64_t peers_refused;	   /* connections from users and groups not allowed */
	uint64_t requests_refused; /* requests refused with -EPERM: not the owner, not an admin */
	struct log_ratelimit log;  /* the log lines saying so */
};

/* Where a connection's pidfd came from. */
enum peer_pidfd {
	PEER_PIDFD_NONE = 0, /* the kernel offers none (or the peer was gone already) */
	PEER_PIDFD_SOCKOPT,  /* SO_PEERPIDFD: the process that connected, without a race */
	PEER_PIDFD_OPEN,     /* pidfd_open(SO_PEERCRED's pid) right after accept */
};

/* A connected peer, as the kernel vouches for it at connect time. */
struct peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary groups (owned; NULL when none or unknown) */
	unsigned ngroups;
	int pidfd; /* the peer process (owned), or -1 */
	enum peer_pidfd pidfd_from;
};

/*
 * access_identify reads who is at the other end of an accepted socket: SO_PEERCRED, the
 * supplementary groups (SO_PEERGROUPS, Linux 4.13; none on older kernels) and a pidfd
 * (SO_PEERPIDFD, Linux 6.5; else pidfd_open of the pid, kept only if the socket still names
 * that pid). Returns 0 with p filled (release it with access_forget), or a negative errno.
 */
int access_identify(int fd, struct peer *p);

/* access_forget closes the pidfd and frees the groups; p is left empty (pidfd -1). */
void access_forget(struct peer *p);

/* access_in_group says whether the peer's primary or a supplementary group is gid. */
bool access_in_group(const struct peer *p, gid_t gid);

/*
 * access_allowed says whether the policy lets the peer connect: anyone when neither list names
 * anybody; else a listed uid, or a listed group among the peer's groups. Root and the daemon's
 * own user are always allowed.
 */
bool access_allowed(const struct access_policy *pol, const struct peer *p);

/* access_is_admin says whether the peer administers: root, or a member of the admin group. */
bool access_is_admin(const struct access_policy *pol, const struct peer *p);

/*
 * access_peer_gone says whether the pidfd shows the peer process has exited (so its pid may
 * name another process by now). False without a pidfd: nothing is known.
 */
bool access_peer_gone(const struct peer *p);

/* access_pidfd_name: "SO_PEERPIDFD", "pidfd_open" or "none". */
const char *access_pidfd_name(enum peer_pidfd from);

/*
 * access_user_id and access_group_id read a user (group) name, or a number, into an id.
 * Returns 0, or -EINVAL with the reason in why (unknown name, a number out of range).
 */
int access_user_id(const char *text, uid_t *out, char *why, size_t why_len);
int access_group_id(const char *text, gid_t *out, char *why, size_t why_len);

/*
 * access_parse_users and access_parse_groups read "name,name,1001": at least one, at most
 * ACCESS_MAX_IDS. Returns 0, or -EINVAL with the reason in why.
 */
int access_parse_users(const char *text, struct id_list *out, char *why, size_t why_len);
int access_parse_groups(const char *text, struct id_list *out, char *why, size_t why_len);

/*
 * access_user_name and access_group_name write the name of an id (the number when it has no
 * name) into buf. Return buf.
 */
const char *access_user_name(uid_t uid, char *buf, size_t len);
const char *access_group_name(gid_t gid, char *buf, size_t len);

struct client;

/*
 * access_refuse answers a request the client may not make with -EPERM and the message fmt
 * says, logs it (rate-limited: a client can cause this at will) and counts it.
 */
void access_refuse(struct client *c, uint64_t request_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* access_client_is_admin: access_is_admin for a connected client, under the policy in force. */
bool access_client_is_admin(const struct client *c);

#endif
