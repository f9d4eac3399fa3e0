/* SPDX-License-Identifier: MIT */
/* ctl.h: the types every part of rocmmemctl shares: a command, its options, the run's state. */
#ifndef ROCMMEMCTL_CTL_H
#define ROCMMEMCTL_CTL_H

#include <getopt.h>
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

/* The end of every help text. */
#define CTL_EXIT_TEXT                                                               \
	"Exit status: 0 success, 1 usage error, 2 request refused by the daemon,\n" \
	"3 daemon unreachable.\n"

/* Terminal colours (ECMA-48 SGR), used only when ctl->color. */
#define CTL_BOLD "\033[1m"
#define CTL_RED "\033[1;31m"
#define CTL_YELLOW "\033[1;33m"
#define CTL_RESET "\033[0m"

#endif
