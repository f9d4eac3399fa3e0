/* SPDX-License-Identifier: MIT */
/* ctl.h: what rocmmemctl's subcommands share: the command table, options, errors, output. */
#ifndef ROCMMEMCTL_CTL_H
#define ROCMMEMCTL_CTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rocmmem.h"

/* Exit statuses, as documented in DESIGN.md and --help. */
enum {
	CTL_EXIT_OK = 0,
	CTL_EXIT_USAGE = 1,	  /* bad command line */
	CTL_EXIT_REFUSED = 2,	  /* the daemon refused the request */
	CTL_EXIT_UNREACHABLE = 3, /* no daemon, or the connection failed */
};

/* Keys of options that have no short form: above every character. */
#define CTL_LONG_ONLY 0x100

/* One option of a command: what getopt_long is given and what its --help says. */
struct ctl_option {
	const char *name; /* the long name, "hold" */
	int key;	  /* its short letter, or CTL_LONG_ONLY + n for none */
	const char *arg;  /* the value's name ("SECONDS"), NULL for a flag */
	const char *help; /* one or more lines, without indentation */
};

struct ctl;

/*
 * A subcommand, as wireguard-tools' table has them: `rocmmemctl --help` and `rocmmemctl CMD
 * --help` are both written from these, and its options are parsed from the same table.
 */
struct ctl_command {
	const char *name;
	int (*run)(struct ctl *ctl, int argc, char **argv);
	const char *args;		  /* the arguments after the options, for the synopsis */
	const char *summary;		  /* one line for `rocmmemctl --help` */
	const char *details;		  /* more for `CMD --help` (NULL: none) */
	const struct ctl_option *options; /* its own, up to one with a NULL name */
	void (*help_extra)(void);	  /* prints more at the end of `CMD --help` (NULL: none) */
};

/* Options of the tables (status, models): the columns, CSV, raw bytes. */
struct ctl_output {
	const char *columns; /* -o: "PID,NAME", "+RESERVED" adds to the default */
	bool csv;	     /* --csv */
	bool noheadings;     /* --noheadings */
	bool bytes;	     /* --bytes: sizes as byte counts */
};

#define CTL_MAX_OPTIONS 24

struct ctl {
	const char *socket; /* --socket, or NULL */
	bool json;	    /* --json */
	bool tty;	    /* stdout is a terminal */
	bool color;	    /* ... that takes colour (not NO_COLOR, not TERM=dumb) */
	const struct ctl_command *command;
	struct ctl_output out;
	/* ctl_next_option's state: the getopt tables built from the command's options. */
	const char *optarg; /* the value of the option it returned */
	int exit;	    /* the exit status once it returned CTL_OPTIONS_EXIT */
	bool parsing;
	struct option longopts[CTL_MAX_OPTIONS];
	char optstring[2 * CTL_MAX_OPTIONS + 2];
};

/* A command's parser returns this for "stop here with ctl->exit" (after --help, say). */
#define CTL_DONE -1

/* ctl_next_option returns: a key of the command's own options, or one of these. */
#define CTL_OPTIONS_DONE 0  /* optind is at the first argument */
#define CTL_OPTIONS_EXIT -1 /* help was printed or the command line is wrong: exit ctl->exit */

/*
 * ctl_next_option parses the command's options one at a time with getopt_long, which lets
 * options follow the arguments. What every command takes is handled here: -j/--json,
 * -s/--socket, -h/--help (the command's help, on stdout), and unknown options or missing values
 * (a usage error).
 */
int ctl_next_option(struct ctl *ctl, int argc, char **argv);

/* ctl_command_help prints `CMD --help` to f. */
void ctl_command_help(const struct ctl_command *cmd, FILE *f);

/* The commands, each defined beside its code. */
extern const struct ctl_command ctl_status_command, ctl_watch_command, ctl_lease_command,
    ctl_trim_command, ctl_models_command, ctl_evict_command, ctl_pin_command, ctl_unpin_command,
    ctl_metrics_command;

/* ------------------------------------------------------------------------------------------ */
/* errors.c: failures, said on stderr and, with --json, as a JSON object on stdout */

/* ctl_errors_json makes every later failure print {"error": {...}} on stdout as well. */
void ctl_errors_json(bool on);

/*
 * ctl_error reports a failure with exit status `status`: "rocmmemctl: [CMD: ]MESSAGE" on
 * stderr (ctl NULL: without the command), plus {"error":{"code","errno","message","exit_status"}}
 * on stdout in JSON mode. err is the negative errno it stands for. Returns status.
 */
int ctl_error(const struct ctl *ctl, int status, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ctl_usage reports a usage error of the current command and returns CTL_EXIT_USAGE. */
int ctl_usage(const struct ctl *ctl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ctl_connect connects or reports why not. Returns CTL_EXIT_OK, _UNREACHABLE or _REFUSED. */
int ctl_connect(const struct ctl *ctl, rocmmem_client **out);

/* ctl_fail reports a failed request ("what: why") and returns the exit status it deserves. */
int ctl_fail(const struct ctl *ctl, const char *what, int err);

/* ctl_errno_name names a negative errno ("ENOMEM"), or writes "errno N" into buf. */
const char *ctl_errno_name(int err, char *buf, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Formatting */

/* ctl_monotonic_ms is CLOCK_MONOTONIC in milliseconds. */
int64_t ctl_monotonic_ms(void);

/* ctl_duration writes whole seconds as "42s", "3m05s" or "2h07m" into buf. Returns buf. */
const char *ctl_duration(uint64_t s, char *buf, size_t len);

/* ctl_ms_text writes a duration in ms as "850ms", "2.5s" or "3m05s". Returns buf. */
const char *ctl_ms_text(uint64_t ms, char *buf, size_t len);

/* ctl_clock_text writes a wall-clock time in ms as local "HH:MM:SS" (".mmm" with millis). */
const char *ctl_clock_text(uint64_t ms, bool millis, char *buf, size_t len);

/* ctl_parse_interval reads watch -i SECONDS into ms, within the daemon's bounds; and
 * ctl_parse_count a count of 1 or more. Return 0 or -EINVAL. */
int ctl_parse_interval(const char *text, uint32_t *ms);
int ctl_parse_count(const char *text, uint64_t *count);

/* ctl_size writes bytes for a table: "64 MiB", or "67108864" with --bytes. Returns buf. */
const char *ctl_size(const struct ctl *ctl, uint64_t bytes, char *buf, size_t len);

/* ctl_parse_device reads --device N (0 to 1024). Returns 0 or -EINVAL. */
int ctl_parse_device(const char *text, long *device);

/* ctl_size_arg parses a SIZE argument, or reports why not (with a hint for "4GB"). */
int ctl_size_arg(const struct ctl *ctl, const char *text, uint64_t *out);

/* ctl_is_self: a client entry that is this very process (its own connection to ask). */
bool ctl_is_self(const struct rocmmem_client_info *v);

/* ctl_model_class_name and ctl_model_state_name: the JSON names ("text_encoder", "in_use"). */
const char *ctl_model_class_name(enum rocmmem_model_class c);
const char *ctl_model_state_name(enum rocmmem_model_state s);

/* Terminal colours (ECMA-48 SGR), used only when ctl->color. */
#define CTL_BOLD "\033[1m"
#define CTL_RED "\033[1;31m"
#define CTL_YELLOW "\033[1;33m"
#define CTL_RESET "\033[0m"

/* ctl_host_fallback_line writes the host-memory warning status and watch put first, or "". */
const char *ctl_host_fallback_line(const struct rocmmem_daemon_info *d, bool color, char *buf,
				   size_t len);

/* ------------------------------------------------------------------------------------------ */
/* JSON (json.c) */

struct json_object;

/* JSON helpers: add one member of the given type to o. */
void ctl_json_u64(struct json_object *o, const char *key, uint64_t v);
void ctl_json_i64(struct json_object *o, const char *key, int64_t v);
void ctl_json_str(struct json_object *o, const char *key, const char *v);
void ctl_json_bool(struct json_object *o, const char *key, bool v);

/* ctl_json_print prints o as one line and releases it. Returns 0, or -1 if stdout failed. */
int ctl_json_print(struct json_object *o);

/*
 * The shapes status --json and watch --json share (the caller owns the result): the daemon
 * (with the host fallback only where the daemon said it: a status), a device (with its
 * telemetry and processes), a client, and the counters (connections left out where two
 * queries of the same state must look the same: each query is a connection).
 */
struct json_object *ctl_daemon_json(const struct rocmmem_daemon_info *d, bool fallback);
struct json_object *ctl_device_json(const rocmmem_status *st, size_t index);
struct json_object *ctl_client_json(const struct rocmmem_client_info *v);
struct json_object *ctl_counters_json(const struct rocmmem_counters *k, bool connections);

/* ctl_model_json returns a model as status --json and models --json show it (caller puts). */
struct json_object *ctl_model_json(const struct rocmmem_model_info *v);

/* ctl_status_json is status --json: the stable contract, without this query's connection. */
struct json_object *ctl_status_json(const rocmmem_status *st);

/* watch --json's lines: a sample (of one device, or all for device < 0), an event. */
struct json_object *ctl_sample_json(const rocmmem_status *st,
				    const struct rocmmem_sample_info *info, long device);
struct json_object *ctl_event_json(const struct rocmmem_telemetry_event *e);

/* ------------------------------------------------------------------------------------------ */
/* Tables (table.c, over libsmartcols) */

/* Column flags. */
#define CTL_COL_RIGHT 0x1 /* numbers: aligned right */
#define CTL_COL_WRAP 0x2  /* long text: wrapped on a terminal, whole when piped */
#define CTL_COL_EXTRA 0x4 /* only when -o names it */

struct ctl_column {
	const char *name; /* the heading, and what -o takes */
	unsigned flags;
	const char *help;
};

/* A table that `status TABLE` (and -o, --csv) can print on its own. */
struct ctl_table_spec {
	const char *name; /* "clients" */
	const struct ctl_column *columns;
	size_t ncolumns;
};

struct ctl_table;

/*
 * ctl_table_new starts a table of spec with the columns ctl->out.columns selects (NULL: the
 * default ones). Returns 0, or CTL_EXIT_USAGE after a usage error naming the bad column.
 */
int ctl_table_new(const struct ctl *ctl, const struct ctl_table_spec *spec, struct ctl_table **out);

/* ctl_table_row adds a row; ctl_table_set fills its cell of column (an index into the spec's
 * columns; a column not shown is ignored). */
void ctl_table_row(struct ctl_table *t);
void ctl_table_set(struct ctl_table *t, size_t column, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ctl_table_print prints the table (a terminal table, or CSV) and frees it. Returns 0 or -EIO. */
int ctl_table_print(struct ctl_table *t);

/* ctl_table_columns_help lists the columns of spec for --help. */
void ctl_table_columns_help(const struct ctl_table_spec *spec, FILE *f);

/* The options of commands that print tables (status, models), and their parser: returns 1
 * when c was one of them. */
#define CTL_OUTPUT_CSV (CTL_LONG_ONLY + 1)
#define CTL_OUTPUT_OPTIONS                                           \
	{"output", 'o', "COLUMNS",                                   \
	 "the columns, comma-separated (+LIST: the default\n"        \
	 "ones and LIST); they are listed below"},                   \
	    {"csv", CTL_OUTPUT_CSV, NULL, "print the table as CSV"}, \
	    {"noheadings", 'n', NULL, "leave the heading line out"}, \
	{                                                            \
		"bytes", 'b', NULL, "sizes as byte counts"           \
	}
int ctl_output_option(struct ctl *ctl, int c);

/* The models table: status shows it, and `models`. */
extern const struct ctl_table_spec ctl_models_table;
/* ctl_models_rows fills a models table with the models of one device (device >= 0) or all. */
void ctl_models_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st,
		     long device);

/* ------------------------------------------------------------------------------------------ */
/* progress.c: what a queued lease request says while it waits */

struct ctl_progress;

/*
 * ctl_progress_start watches the daemon's queue (through client, from a thread) for this
 * process's request of bytes on device and, once it is seen waiting, says so on stderr: one
 * line rewritten in place on a terminal, a line per change when piped. Returns 0 or a negative
 * errno (then no progress is shown; the lease goes ahead).
 */
int ctl_progress_start(rocmmem_client *client, unsigned device, uint64_t bytes,
		       struct ctl_progress **out);

/*
 * ctl_progress_stop ends the watch and frees p (NULL is ignored). When the wait was shown and
 * the request was granted after waited_ms, says so; on a terminal the line is cleared first.
 */
void ctl_progress_stop(struct ctl_progress *p, bool granted, uint64_t waited_ms);

#endif
