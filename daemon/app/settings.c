/* SPDX-License-Identifier: MIT */
/* settings.c: the command line and the configuration file combined, at start and on SIGHUP. */
#include "settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "options_merge.h"
#include "base/log.h"
#include "net/handshake.h"
#include "net/server.h"

/* read_file loads st's file into file: a missing default file is no file at all. */
static int read_file(struct settings *st, struct options *file, char *why, size_t why_len)
{
	int rc = config_load(st->path, file, why, why_len);

	st->found = rc == 0;
	if (rc == -ENOENT && !st->path_given) {
		options_defaults(file); /* nothing set */
		return 0;
	}
	return rc;
}

int settings_load(struct settings *st, struct command_line *cl, char *why, size_t why_len)
{
	struct options file;
	int rc;

	memset(st, 0, sizeof(*st));
	st->flags = cl->flags;
	memset(&cl->flags, 0, sizeof(cl->flags)); /* ours now */
	st->path_given = cl->config_path != NULL;
	if (cl->config_path) {
		if (snprintf(st->path, sizeof(st->path), "%s", cl->config_path) >=
		    (int)sizeof(st->path)) {
			snprintf(why, why_len, "--config: the path is too long");
			return -ENAMETOOLONG;
		}
	} else {
		rc = config_default_path(st->path, sizeof(st->path));
		if (rc < 0)
			st->path[0] = '\0'; /* no home to look in: flags and defaults only */
	}
	if (st->path[0]) {
		rc = read_file(st, &file, why, why_len);
		if (rc < 0)
			return rc;
	} else {
		options_defaults(&file);
	}
	rc = options_merge(&st->current, &st->flags, &file);
	options_free(&file);
	if (rc < 0) {
		snprintf(why, why_len, "out of memory");
		return rc;
	}
	rc = options_validate(&st->current, why, why_len);
	return rc;
}

void settings_budgets(const struct options *eff, struct budget_config *cfgs)
{
	for (unsigned d = 0; d < BACKEND_MAX_DEVICES; d++)
		options_budget(eff, d, &cfgs[d]);
}

void settings_pool(const struct options *eff, struct pool_config *cfg)
{
	cfg->max_bytes = eff->gpu_pool;
	cfg->idle_ms = eff->gpu_pool_idle_ms;
	cfg->keep_fds = eff->gpu_pool_fds;
}

void settings_residency(const struct options *eff, struct residency_config *res)
{
	memset(res, 0, sizeof(*res));
	res->evict_deadline_ms = eff->evict_deadline_ms;
	res->exclusive_all = eff->exclusive_all;
	memcpy(res->exclusive, eff->exclusive, sizeof(res->exclusive));
}

void settings_limits(const struct options *eff, struct limits *limits)
{
	limits->max_clients = eff->max_clients;
	limits->max_pending = eff->max_pending;
	limits->max_leases = eff->max_leases;
	limits->max_queued_out = (size_t)eff->max_queued;
	limits->shutdown_timeout_ms = eff->shutdown_timeout_ms;
	limits->max_clients_per_uid = eff->max_clients_per_uid;
	limits->max_bytes_per_uid = eff->max_bytes_per_uid;
	limits->max_message = eff->max_message;
	limits->handshake_timeout_ms = eff->handshake_timeout_ms;
	limits->max_subscribers = eff->max_subscribers;
}

void settings_access(const struct options *eff, struct access_policy *pol)
{
	memset(pol, 0, sizeof(*pol));
	if (eff->allowed_users)
		pol->users = eff->allowed_uids;
	if (eff->allowed_groups)
		pol->groups = eff->allowed_gids;
	pol->has_admin_group = eff->admin_group != NULL;
	pol->admin_gid = eff->admin_gid;
	if (eff->admin_group)
		snprintf(pol->admin_group_name, sizeof(pol->admin_group_name), "%s",
			 eff->admin_group);
}

void settings_policy(const struct options *eff, struct policy_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->evict_deadline_ms = eff->evict_deadline_ms;
	cfg->sched.backfill = eff->backfill;
	cfg->sched.backfill_passes = eff->backfill_passes;
	cfg->sched.backfill_wait_ms = eff->backfill_wait_ms;
	cfg->sched.max_hold_ms = eff->max_hold_ms;
	memcpy(cfg->sched.evict_deadline_ms, eff->evict_deadline_class_ms,
	       sizeof(cfg->sched.evict_deadline_ms));
	memcpy(cfg->sched.max_hold_class_ms, eff->max_hold_class_ms,
	       sizeof(cfg->sched.max_hold_class_ms));
	settings_limits(eff, &cfg->limits);
	settings_access(eff, &cfg->access);
}

int settings_socket(const struct options *eff, struct socket_access *sa)
{
	bool system = geteuid() == 0;
	char why[256];

	memset(sa, 0, sizeof(*sa));
	sa->configured = eff->socket_user || eff->socket_group ||
			 (eff->set & ((uint64_t)1 << OPTION_SOCKET_MODE));
	/* System-wide: root:rocmmem 0660; per user: the user's own, 0600. */
	sa->uid = eff->socket_user ? eff->socket_uid : geteuid();
	sa->mode = (eff->set & ((uint64_t)1 << OPTION_SOCKET_MODE)) ? eff->socket_mode
								    : (system ? 0660 : 0600);
	if (eff->socket_group) {
		sa->gid = eff->socket_gid;
		return 0;
	}
	sa->gid = getegid();
	if (!system)
		return 0;
	if (ids_group_id(ACCESS_DEFAULT_GROUP, &sa->gid, why, sizeof(why)) < 0) {
		sa->gid = getegid();
		log_warn("the socket keeps root's group: %s (systemd-sysusers rocmmemd.conf "
			 "creates it; or set socket_group)",
			 why);
		return -ENOENT;
	}
	return 0;
}

static bool same_string(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* needs_restart says which settings the new file changes that only a restart applies. */
static void warn_restart(const struct options *old, const struct options *new)
{
	static const enum option_id ids[] = {
	    OPTION_SOCKET,	     OPTION_BACKEND,	      OPTION_SHARING,
	    OPTION_METRICS_TEXTFILE, OPTION_METRICS_INTERVAL, OPTION_SOCKET_USER,
	    OPTION_SOCKET_GROUP,     OPTION_SOCKET_MODE,      OPTION_RESTART_GRACE};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		bool changed;

		switch (ids[i]) {
		case OPTION_SOCKET:
			changed = !same_string(old->socket_path, new->socket_path);
			break;
		case OPTION_BACKEND:
			changed = !same_string(old->backend, new->backend);
			break;
		case OPTION_SHARING:
			changed = !same_string(old->sharing, new->sharing);
			break;
		case OPTION_METRICS_TEXTFILE:
			changed = !same_string(old->metrics_textfile, new->metrics_textfile);
			break;
		case OPTION_SOCKET_USER:
			changed = !same_string(old->socket_user, new->socket_user);
			break;
		case OPTION_SOCKET_GROUP:
			changed = !same_string(old->socket_group, new->socket_group);
			break;
		case OPTION_RESTART_GRACE:
			changed = old->restart_grace_ms != new->restart_grace_ms;
			break;
		case OPTION_SOCKET_MODE:
			changed = old->socket_mode != new->socket_mode ||
				  (old->set ^ new->set) & ((uint64_t)1 << OPTION_SOCKET_MODE);
			break;
		default:
			changed = old->metrics_interval_ms != new->metrics_interval_ms;
			break;
		}
		if (changed)
			log_warn("reload: %s changed: it takes effect at the next start",
				 options_name(ids[i])->key);
	}
}

int settings_reload(struct settings *st, struct server *s)
{
	struct budget_config cfgs[BACKEND_MAX_DEVICES];
	struct residency_config res;
	struct policy_config cfg;
	struct options file, merged;
	char why[1024];
	int rc;

	if (!st->path[0]) {
		log_warn("reload: no configuration file to read (no home directory known)");
		return -ENOENT;
	}
	rc = read_file(st, &file, why, sizeof(why));
	if (rc < 0) {
		log_error("reload refused, the configuration in force is kept: %s", why);
		return rc;
	}
	rc = options_merge(&merged, &st->flags, &file);
	options_free(&file);
	if (rc < 0) {
		log_error("reload refused, the configuration in force is kept: out of memory");
		return rc;
	}
	rc = options_validate(&merged, why, sizeof(why));
	if (rc == 0) {
		settings_budgets(&merged, cfgs);
		settings_residency(&merged, &res);
		/* New connections meet the new lists; the next admin request, the new admin group.
		 */
		settings_policy(&merged, &cfg);
		rc = svc_reconfigure(&s->svc, cfgs, &res, &cfg, why, sizeof(why));
	}
	if (rc < 0) {
		log_error("reload refused, the configuration in force is kept: %s%s%s",
			  st->found ? st->path : "", st->found ? ": " : "", why);
		options_free(&merged);
		return rc;
	}
	warn_restart(&st->current, &merged);
	settings_pool(&merged, &s->svc.pool_cfg); /* a smaller pool lets go at the next sample */
	handshake_rearm(&s->handshake);
	if (merged.log_level != log_get_level()) {
		log_set_level(merged.log_level);
		log_info("reload: log level %s", log_level_name(merged.log_level));
	}
	/* What needs a restart stays as it started, so that status and a later reload agree. */
	merged.from[OPTION_SOCKET] = st->current.from[OPTION_SOCKET];
	free(merged.socket_path);
	merged.socket_path = st->current.socket_path;
	st->current.socket_path = NULL;
	free(merged.backend);
	merged.backend = st->current.backend;
	st->current.backend = NULL;
	free(merged.sharing);
	merged.sharing = st->current.sharing;
	st->current.sharing = NULL;
	free(merged.metrics_textfile);
	merged.metrics_textfile = st->current.metrics_textfile;
	st->current.metrics_textfile = NULL;
	merged.metrics_interval_ms = st->current.metrics_interval_ms;
	free(merged.socket_user);
	merged.socket_user = st->current.socket_user;
	st->current.socket_user = NULL;
	merged.socket_uid = st->current.socket_uid;
	free(merged.socket_group);
	merged.socket_group = st->current.socket_group;
	st->current.socket_group = NULL;
	merged.socket_gid = st->current.socket_gid;
	merged.socket_mode = st->current.socket_mode;
	for (enum option_id id = OPTION_SOCKET_USER; id <= OPTION_SOCKET_MODE; id++) {
		merged.from[id] = st->current.from[id];
		merged.set =
		    (merged.set & ~((uint64_t)1 << id)) | (st->current.set & ((uint64_t)1 << id));
	}
	options_free(&st->current);
	st->current = merged;
	log_info("reloaded the configuration%s%s", st->found ? " from " : " (no file: defaults)",
		 st->found ? st->path : "");
	return 0;
}

void settings_free(struct settings *st)
{
	options_free(&st->flags);
	options_free(&st->current);
}
