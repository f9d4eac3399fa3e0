/* SPDX-License-Identifier: MIT */
/* connect.c: whether a new connection may stay: the clients caps, the allowed users and groups. */
#include <errno.h>
#include <stdio.h>

#include "internal.h"

void policy_connect(const struct state *s, const struct policy_config *cfg, unsigned clients,
		    const struct identity *p, struct policy_decision *d)
{
	const struct limits *l = &cfg->limits;
	char text[256];

	policy_decision_init(d);
	if (clients >= l->max_clients) {
		snprintf(text, sizeof(text),
			 "too many clients: the daemon serves at most %u (clients)",
			 l->max_clients);
		policy_refuse(d, REFUSE_LIMIT, -EUSERS, "%s", text);
		d->refusal.limit = LIMIT_CLIENTS;
		snprintf(d->refusal.log, sizeof(d->refusal.log),
			 "refused a connection from pid %d uid %u: %s", (int)p->pid,
			 (unsigned)p->uid, text);
		return;
	}
	if (!access_allowed(&cfg->access, p, cfg->daemon_uid)) {
		policy_refuse(
		    d, REFUSE_ACCESS, -EPERM,
		    "uid %u is not allowed to use this rocmmemd: neither it nor any of its "
		    "groups is among allowed_users and allowed_groups",
		    (unsigned)p->uid);
		snprintf(d->refusal.log, sizeof(d->refusal.log),
			 "refused a connection from pid %d uid %u gid %u: not an allowed user or "
			 "group",
			 (int)p->pid, (unsigned)p->uid, (unsigned)p->gid);
		return;
	}
	if (uid_connections(&s->uids, p->uid) >= l->max_clients_per_uid) {
		snprintf(text, sizeof(text),
			 "too many connections of uid %u: the daemon serves at most %u per uid "
			 "(clients_per_uid)",
			 (unsigned)p->uid, l->max_clients_per_uid);
		policy_refuse(d, REFUSE_LIMIT, -EUSERS, "%s", text);
		d->refusal.limit = LIMIT_CLIENTS_PER_UID;
		snprintf(d->refusal.log, sizeof(d->refusal.log),
			 "refused a connection from pid %d uid %u: %s", (int)p->pid,
			 (unsigned)p->uid, text);
	}
}
