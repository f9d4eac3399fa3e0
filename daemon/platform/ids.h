/* SPDX-License-Identifier: MIT */
/* ids.h: user and group names and numbers, as settings give them (through NSS). */
#ifndef ROCMMEMD_IDS_H
#define ROCMMEMD_IDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The most users (or groups) one allowed list may name. */
#define IDS_MAX 64u

/* A list of uids or gids. */
struct id_list {
	unsigned n;
	uint32_t ids[IDS_MAX];
};

/*
 * ids_user_id and ids_group_id read a user (group) name, or a number, into an id. Returns 0,
 * or -EINVAL with the reason in why (unknown name, a number out of range).
 */
int ids_user_id(const char *text, uid_t *out, char *why, size_t why_len);
int ids_group_id(const char *text, gid_t *out, char *why, size_t why_len);

/*
 * ids_parse_users and ids_parse_groups read "name,name,1001": at least one, at most IDS_MAX.
 * Returns 0, or -EINVAL with the reason in why.
 */
int ids_parse_users(const char *text, struct id_list *out, char *why, size_t why_len);
int ids_parse_groups(const char *text, struct id_list *out, char *why, size_t why_len);

/*
 * ids_user_name and ids_group_name write the name of an id (the number when it has no name)
 * into buf. Return buf.
 */
const char *ids_user_name(uid_t uid, char *buf, size_t len);
const char *ids_group_name(gid_t gid, char *buf, size_t len);

#endif
