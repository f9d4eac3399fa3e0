/* SPDX-License-Identifier: MIT */
/* options_merge.c: the sources combined (flag > file > default), and what no one value says. */
#include "options_merge.h"

#include "options_sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* A setting merge_named does not take: merge_value does. */
#define NOT_MINE 1

static bool given(const struct options *o, enum option_id id)
{
	return o && (o->set & ((uint64_t)1 << id));
}

static const struct options *source_of(const struct options *flags, const struct options *file,
				       enum option_id id, enum option_source *from)
{
	if (given(flags, id)) {
		*from = FROM_FLAG;
		return flags;
	}
	if (given(file, id)) {
		*from = FROM_FILE;
		return file;
	}
	*from = FROM_DEFAULT;
	return NULL;
}

static int copy_string(char **dst, const char *src)
{
	free(*dst);
	*dst = NULL;
	if (src && !(*dst = strdup(src)))
		return -ENOMEM;
	return 0;
}

/* decide picks a device's size policy: the first source in precedence order that has one. */
static struct size_policy decide(const struct size_policy *order[4], const bool specific[4],
				 const enum option_source from[4])
{
	struct size_policy none = {0};

	for (unsigned i = 0; i < 4; i++) {
		const struct size_policy *p = order[i];

		if (p && (p->has_budget || p->has_headroom)) {
			struct size_policy out = *p;

			out.from = from[i];
			out.device_specific = specific[i];
			return out;
		}
	}
	return none;
}

/* merge_named takes a setting that names something: a path, a backend, a user or group. */
static int merge_named(struct options *eff, const struct options *src, enum option_id id)
{
	switch (id) {
	case OPTION_SOCKET:
		return copy_string(&eff->socket_path, src->socket_path);
	case OPTION_BACKEND:
		return copy_string(&eff->backend, src->backend);
	case OPTION_SHARING:
		return copy_string(&eff->sharing, src->sharing);
	case OPTION_METRICS_TEXTFILE:
		return copy_string(&eff->metrics_textfile, src->metrics_textfile);
	case OPTION_SOCKET_USER:
		eff->socket_uid = src->socket_uid;
		return copy_string(&eff->socket_user, src->socket_user);
	case OPTION_SOCKET_GROUP:
		eff->socket_gid = src->socket_gid;
		return copy_string(&eff->socket_group, src->socket_group);
	case OPTION_ALLOWED_USERS:
		eff->allowed_uids = src->allowed_uids;
		return copy_string(&eff->allowed_users, src->allowed_users);
	case OPTION_ALLOWED_GROUPS:
		eff->allowed_gids = src->allowed_gids;
		return copy_string(&eff->allowed_groups, src->allowed_groups);
	case OPTION_ADMIN_GROUP:
		eff->admin_gid = src->admin_gid;
		return copy_string(&eff->admin_group, src->admin_group);
	default:
		return NOT_MINE;
	}
}

/* merge_value takes a setting that is a number, a time, a level or a set of rules. */
static void merge_value(struct options *eff, const struct options *src, enum option_id id)
{
	switch (id) {
	case OPTION_LOG_LEVEL:
		eff->log_level = src->log_level;
		break;
	case OPTION_SHUTDOWN_TIMEOUT:
		eff->shutdown_timeout_ms = src->shutdown_timeout_ms;
		break;
	case OPTION_RESTART_GRACE:
		eff->restart_grace_ms = src->restart_grace_ms;
		break;
	case OPTION_EVICT_DEADLINE:
	case OPTION_MAX_HOLD:
	case OPTION_BACKFILL:
	case OPTION_BACKFILL_PASSES:
	case OPTION_BACKFILL_WAIT:
		options_merge_sched(eff, src, id);
		break;
	case OPTION_EXCLUSIVE:
		eff->exclusive_all = src->exclusive_all;
		memcpy(eff->exclusive, src->exclusive, sizeof(eff->exclusive));
		break;
	case OPTION_MAX_CLIENTS:
		eff->max_clients = src->max_clients;
		break;
	case OPTION_MAX_PENDING:
		eff->max_pending = src->max_pending;
		break;
	case OPTION_MAX_LEASES:
		eff->max_leases = src->max_leases;
		break;
	case OPTION_MAX_QUEUED:
		eff->max_queued = src->max_queued;
		break;
	case OPTION_METRICS_INTERVAL:
		eff->metrics_interval_ms = src->metrics_interval_ms;
		break;
	case OPTION_GPU_POOL:
		eff->gpu_pool = src->gpu_pool;
		break;
	case OPTION_GPU_POOL_IDLE:
		eff->gpu_pool_idle_ms = src->gpu_pool_idle_ms;
		break;
	case OPTION_GPU_POOL_FDS:
		eff->gpu_pool_fds = src->gpu_pool_fds;
		break;
	case OPTION_SOCKET_MODE:
		eff->socket_mode = src->socket_mode;
		break;
	case OPTION_MAX_CLIENTS_PER_UID:
		eff->max_clients_per_uid = src->max_clients_per_uid;
		break;
	case OPTION_MAX_BYTES_PER_UID:
		eff->max_bytes_per_uid = src->max_bytes_per_uid;
		break;
	case OPTION_MAX_MESSAGE:
		eff->max_message = src->max_message;
		break;
	case OPTION_HANDSHAKE_TIMEOUT:
		eff->handshake_timeout_ms = src->handshake_timeout_ms;
		break;
	case OPTION_MAX_SUBSCRIBERS:
		eff->max_subscribers = src->max_subscribers;
		break;
	default:
		break; /* budget and headroom: per device (merge_sizes) */
	}
}

/* merge_sizes decides budget and headroom: one decision per device, in precedence order. */
static void merge_sizes(struct options *eff, const struct options *flags,
			const struct options *file)
{
	const bool specific[4] = {true, false, true, false};
	const enum option_source order_from[4] = {FROM_FLAG, FROM_FLAG, FROM_FILE, FROM_FILE};
	const struct size_policy *all_order[4] = {flags ? &flags->devices : NULL,
						  file ? &file->devices : NULL, NULL, NULL};
	const bool all_specific[4] = {false, false, false, false};
	const enum option_source all_from[4] = {FROM_FLAG, FROM_FILE, FROM_DEFAULT, FROM_DEFAULT};

	eff->devices = decide(all_order, all_specific, all_from);
	for (unsigned d = 0; d < BACKEND_MAX_DEVICES; d++) {
		const struct size_policy *order[4] = {
		    flags ? &flags->device[d] : NULL, flags ? &flags->devices : NULL,
		    file ? &file->device[d] : NULL, file ? &file->devices : NULL};

		eff->device[d] = decide(order, specific, order_from);
	}
}

int options_merge(struct options *eff, const struct options *flags, const struct options *file)
{
	enum option_source from;
	const struct options *src;
	int rc = 0;

	options_defaults(eff);
	for (unsigned id = 0; id < OPTION_COUNT; id++) {
		int named;

		src = source_of(flags, file, (enum option_id)id, &from);
		eff->from[id] = from;
		if (!src)
			continue;
		eff->set |= (uint64_t)1 << id;
		named = merge_named(eff, src, (enum option_id)id);
		if (named == NOT_MINE)
			merge_value(eff, src, (enum option_id)id);
		else
			rc |= named;
	}
	/* The defaults of the strings that have one. */
	if (!eff->backend)
		rc |= copy_string(&eff->backend, "auto");
	if (!eff->sharing)
		rc |= copy_string(&eff->sharing, "auto");
	merge_sizes(eff, flags, file);
	if (rc) {
		options_free(eff);
		return -ENOMEM;
	}
	return 0;
}

int options_validate(const struct options *eff, char *why, size_t why_len)
{
	if ((eff->set & ((uint64_t)1 << OPTION_METRICS_INTERVAL)) && !eff->metrics_textfile)
		return text_why(why, why_len, -EINVAL,
				"a metrics interval was given without a metrics textfile to write");
	return 0;
}

void options_budget(const struct options *eff, unsigned device, struct budget_config *out)
{
	const struct size_policy *p = device < BACKEND_MAX_DEVICES ? &eff->device[device] : NULL;

	memset(out, 0, sizeof(*out));
	if (!p)
		return;
	/* Budget wins over headroom within one source (said at start). */
	out->has_budget = p->has_budget;
	out->budget = p->budget;
	out->has_headroom = p->has_headroom && !p->has_budget;
	out->headroom = p->headroom;
	out->named = p->device_specific && (p->has_budget || p->has_headroom);
}
