/* SPDX-License-Identifier: MIT */
/* access.c: what a peer may do: connect (the allowed users and groups) and administer. */
#include "access.h"

bool access_in_group(const struct identity *who, gid_t gid)
{
	if (who->gid == gid)
		return true;
	for (unsigned i = 0; i < who->ngroups; i++)
		if (who->groups[i] == gid)
			return true;
	return false;
}

static bool listed(const struct id_list *l, uint32_t id)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

bool access_allowed(const struct access_policy *pol, const struct identity *who, uid_t daemon_uid)
{
	if (pol->users.n == 0 && pol->groups.n == 0)
		return true;
	if (who->uid == 0 || who->uid == daemon_uid)
		return true;
	if (listed(&pol->users, who->uid))
		return true;
	for (unsigned i = 0; i < pol->groups.n; i++)
		if (access_in_group(who, pol->groups.ids[i]))
			return true;
	return false;
}

bool access_is_admin(const struct access_policy *pol, const struct identity *who)
{
	return who->uid == 0 || (pol->has_admin_group && access_in_group(who, pol->admin_gid));
}
