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

/*
 * ctl_common_option handles what every subcommand's getopt_long loop shares, for its return c:
 * -j/--json, -s/--socket, a missing value (':') and an unknown option. Returns 0 (handled:
 * keep parsing) or CTL_EXIT_USAGE after printing the usage error.
 */
int ctl_common_option(const char *command, int c, struct ctl *ctl, char **argv);

/* ctl_usage prints a usage error for a subcommand and returns CTL_EXIT_USAGE. */
int ctl_usage(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ctl_duration writes whole seconds as "42s", "3m05s" or "2h07m" into buf. Returns buf. */
const char *ctl_duration(uint64_t s, char *buf, size_t len);

/* ctl_model_class_name and ctl_model_state_name: the JSON names ("text_encoder", "in_use"). */
const char *ctl_model_class_name(enum rocmmem_model_class c);
const char *ctl_model_state_name(enum rocmmem_model_state s);

struct json_object;

/* JSON helpers: add one member of the given type to o. */
void ctl_json_u64(struct json_object *o, const char *key, uint64_t v);
void ctl_json_i64(struct json_object *o, const char *key, int64_t v);
void ctl_json_str(struct json_object *o, const char *key, const char *v);
void ctl_json_bool(struct json_object *o, const char *key, bool v);

/* ctl_json_print prints o as one line and releases it. Returns 0, or -1 if stdout failed. */
int ctl_json_print(struct json_object *o);

/*
 * The shapes status --json and watch --json share (the caller owns the result): a device (with
 * its telemetry and processes), a client, and the counters (connections left out where two
 * queries of the same state must look the same: each query is a connection).
 */
struct json_object *ctl_device_json(const rocmmem_status *st, size_t index);
struct json_object *ctl_client_json(const struct rocmmem_client_info *v);
struct json_object *ctl_counters_json(const struct rocmmem_counters *k, bool connections);

/* ctl_model_json returns a model as status --json and models --json show it (caller puts). */
struct json_object *ctl_model_json(const struct rocmmem_model_info *v);

/* ctl_models_table prints the models of one device (device >= 0) or all, with a header. */
void ctl_models_table(const rocmmem_status *st, long device);

int cmd_status(const struct ctl *ctl, int argc, char **argv);
int cmd_watch(const struct ctl *ctl, int argc, char **argv);
int cmd_lease(const struct ctl *ctl, int argc, char **argv);
int cmd_trim(const struct ctl *ctl, int argc, char **argv);
int cmd_models(const struct ctl *ctl, int argc, char **argv);
int cmd_evict(const struct ctl *ctl, int argc, char **argv);
int cmd_pin(const struct ctl *ctl, int argc, char **argv);
int cmd_unpin(const struct ctl *ctl, int argc, char **argv);
int cmd_metrics(const struct ctl *ctl, int argc, char **argv);

#endif
