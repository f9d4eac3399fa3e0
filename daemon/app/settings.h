/* SPDX-License-Identifier: MIT */
/*
 * settings.h: the settings in force: the command line and the configuration file combined at
 * start, and again on SIGHUP, applied to the running daemon where they can change live.
 */
#ifndef ROCMMEMD_SETTINGS_H
#define ROCMMEMD_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "options_cli.h"
#include "service/service.h"

struct server;
struct socket_access;

struct settings {
	struct options flags;	/* the command line's: they keep winning at every reload */
	char path[PATH_MAX];	/* the configuration file */
	bool path_given;	/* --config: a missing file is an error */
	bool found;		/* the file existed when it was last read */
	struct options current; /* merged: what is in force */
};

/*
 * settings_load takes cl's flags (cl->flags is left empty), reads the configuration file
 * (--config, else the default one: missing is fine then) and merges them. Returns 0, or a
 * negative errno with the reason in why ("PATH:LINE: [section] key: ..." for a bad file).
 */
int settings_load(struct settings *st, struct command_line *cl, char *why, size_t why_len);

/* What the merged options mean for the service and the server. */
void settings_budgets(const struct options *eff, struct budget_config *cfgs);
void settings_residency(const struct options *eff, struct residency_config *res);
void settings_limits(const struct options *eff, struct limits *limits);
void settings_access(const struct options *eff, struct access_policy *pol);

/* settings_pool fills cfg with the VMM chunk pool's settings (service/pool.c). */
void settings_pool(const struct options *eff, struct pool_config *cfg);

/* settings_policy fills cfg with the limits and the access policy of eff (the rest zero). */
void settings_policy(const struct options *eff, struct policy_config *cfg);

/*
 * settings_socket decides who owns the socket the daemon creates and its mode: what the
 * settings say, else root, group rocmmem, 0660 as root and the daemon's own user and group,
 * 0600 otherwise. Returns 0, or -ENOENT (logged) when the group rocmmem does not exist: the
 * socket then keeps root's group.
 */
int settings_socket(const struct options *eff, struct socket_access *sa);

/*
 * settings_reload re-reads the file and applies what can change while the daemon runs: log
 * level, eviction deadline, exclusive classes, budgets and headrooms, limits, shutdown
 * timeout, allowed users and groups (for new connections) and the admin group. Settings that
 * need a restart (socket and its owner, group and mode, backend, sharing, metrics) are logged
 * and left as they are. A file that does not parse, or budgets that do not fit the devices,
 * change nothing: returns a negative errno after logging why; 0 when applied.
 */
int settings_reload(struct settings *st, struct server *s);

/* settings_free frees what st owns. */
void settings_free(struct settings *st);

#endif
