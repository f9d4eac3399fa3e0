/* SPDX-License-Identifier: MIT */
/*
 * common.h: what every command shares: its options, parsed and explained in its --help from its
 * table of options; connecting; SIZE arguments.
 */
#ifndef ROCMMEMCTL_COMMON_H
#define ROCMMEMCTL_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "ctl.h"
#include "rocmmem.h"

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

/* ctl_print_synopsis writes "NAME ARGS [--long VALUE]..." wrapped under indent, starting at
 * column col. */
void ctl_print_synopsis(const struct ctl_command *cmd, FILE *f, int indent, int col);

/* ctl_connect connects or reports why not. Returns CTL_EXIT_OK, _UNREACHABLE or _REFUSED. */
int ctl_connect(const struct ctl *ctl, rocmmem_client **out);

/* ctl_size_arg parses a SIZE argument, or reports why not (with a hint for "4GB"). */
int ctl_size_arg(const struct ctl *ctl, const char *text, uint64_t *out);

#endif
