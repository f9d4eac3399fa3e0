/* SPDX-License-Identifier: MIT */
/* options_cli.h: rocmmemd's command line: --help, --version, and the settings as flags. */
#ifndef ROCMMEMD_OPTIONS_CLI_H
#define ROCMMEMD_OPTIONS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "options.h"

/* What the command line says: its settings, and what to do with the configuration file. */
struct command_line {
	struct options flags;
	const char *config_path; /* --config, or NULL for the default file */
	bool check_config;	 /* --check-config */
};

/*
 * options_parse reads argv into cl (cl->flags holds only what the flags set; free it with
 * options_free). Returns 0 to run, 1 when --help or --version was printed to out (exit 0),
 * or -EINVAL after printing a usage error to err (exit ROCMMEMD_EXIT_USAGE).
 */
int options_parse(int argc, char **argv, struct command_line *cl, FILE *out, FILE *err);

#endif
