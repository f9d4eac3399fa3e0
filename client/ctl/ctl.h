/* SPDX-License-Identifier: MIT */
/* ctl.h: what rocmmemctl's subcommands share: global options, exit codes, connecting. */
#ifndef ROCMMEMCTL_CTL_H
#define ROCMMEMCTL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem.h"

/* Exit statuses, as documented in DESIGN.md and --help. */
enum {
	CTL_EXIT_OK = 0,
	CTL_EXIT_USAGE = 1,	  /* bad command line */
	CTL_EXIT_REFUSED = 2,	  /* the daemon refused the request */
	CTL_EXIT_UNREACHABLE = 3, /* no daemon, or the connection failed */
};

struct ctl {
	const char *socket; /* --socket, or NULL */
	bool json;	    /* --json */
};

struct ctl_command {
	const char *name;
	int (*run)(const struct ctl *ctl, int argc, char **argv);
	const char *args;
	const char *help;
};

/* ctl_connect connects or prints why not. Returns CTL_EXIT_OK or CTL_EXIT_UNREACHABLE. */
int ctl_connect(const struct ctl *ctl, rocmmem_client **out);

/* ctl_fail prints a failed request's error and returns the exit status it deserves. */
int ctl_fail(const char *what, int err);

/* ctl_usage prints a usage error for a subcommand and returns CTL_EXIT_USAGE. */
int ctl_usage(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ctl_duration writes whole seconds as "42s", "3m05s" or "2h07m" into buf. Returns buf. */
const char *ctl_duration(uint64_t s, char *buf, size_t len);

/* ctl_model_class_name and ctl_model_state_name: the JSON names ("text_encoder", "in_use"). */
const char *ctl_model_class_name(enum rocmmem_model_class c);
const char *ctl_model_state_name(enum rocmmem_model_state s);

struct json_object;

/* ctl_model_json returns a model as status --json and models --json show it (caller puts). */
struct json_object *ctl_model_json(const struct rocmmem_model_info *v);

/* ctl_models_table prints the models of one device (device >= 0) or all, with a header. */
void ctl_models_table(const rocmmem_status *st, long device);

int cmd_status(const struct ctl *ctl, int argc, char **argv);
int cmd_lease(const struct ctl *ctl, int argc, char **argv);
int cmd_trim(const struct ctl *ctl, int argc, char **argv);
int cmd_models(const struct ctl *ctl, int argc, char **argv);
int cmd_evict(const struct ctl *ctl, int argc, char **argv);
int cmd_pin(const struct ctl *ctl, int argc, char **argv);
int cmd_unpin(const struct ctl *ctl, int argc, char **argv);

#endif
