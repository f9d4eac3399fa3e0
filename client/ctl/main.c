/* SPDX-License-Identifier: MIT */
/* main.c: rocmmemctl's table of commands, its global options and usage, and dispatch. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "common.h"
#include "errors.h"
#include "lease.h"
#include "metrics.h"
#include "models.h"
#include "status.h"
#include "trim.h"
#include "watch.h"
#include "sockpath.h"
#include "version.h"

static int cmd_help(struct ctl *ctl, int argc, char **argv);
static int cmd_version(struct ctl *ctl, int argc, char **argv);

static const struct ctl_option no_options[] = {{NULL, 0, NULL, NULL}};

static const struct ctl_command help_command = {
    .name = "help",
    .run = cmd_help,
    .args = "[COMMAND]",
    .summary = "show this help, or a command's (the same as COMMAND --help)",
    .options = no_options,
};

static const struct ctl_command version_command = {
    .name = "version",
    .run = cmd_version,
    .args = "",
    .summary = "show the version",
    .options = no_options,
};

static const struct ctl_command *const commands[] = {
    &ctl_status_command,  &ctl_watch_command, &ctl_lease_command, &ctl_trim_command,
    &ctl_models_command,  &ctl_evict_command, &ctl_pin_command,	  &ctl_unpin_command,
    &ctl_metrics_command, &help_command,      &version_command,
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: rocmmemctl [--socket PATH] [--json] COMMAND [ARGS]\n"
		   "Query and use rocmmemd, the GPU memory daemon.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		fprintf(f, "  ");
		ctl_print_synopsis(commands[i], f, 6 + (int)strlen(commands[i]->name), 2);
		fprintf(f, "      %s\n", commands[i]->summary);
	}
	fprintf(
	    f,
	    "\nOptions:\n"
	    "  -s, --socket PATH  the daemon's socket (default: $%s, else\n"
	    "                     the per-user socket if one exists, else\n"
	    "                     %s)\n"
	    "  -j, --json         print JSON (status, models: the stable machine format;\n"
	    "                     watch: one object per line; errors: {\"error\": {...}})\n"
	    "  -h, --help         show this help; COMMAND --help shows a command's\n"
	    "  -V, --version      show the version\n"
	    "\nSIZE takes bytes or a binary suffix K, M, G, T (KiB, MiB, GiB, TiB): 512M, 1.5G.\n"
	    "MODEL is a model's id (decimal digits) or its name, if no other model has it.\n"
	    "Evicting and pinning a model takes its owner or root.\n"
	    "Colour only on a terminal, never with NO_COLOR set.\n%s",
	    SOCKPATH_ENV, SOCKPATH_SYSTEM, CTL_EXIT_TEXT);
}

static const struct ctl_command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(name, commands[i]->name) == 0)
			return commands[i];
	return NULL;
}

static int cmd_help(struct ctl *ctl, int argc, char **argv)
{
	const struct ctl_command *cmd;
	int c;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		;
	if (c < 0)
		return ctl->exit;
	if (optind >= argc) {
		usage(stdout);
	} else if (optind + 1 < argc) {
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind + 1]);
	} else {
		cmd = find_command(argv[optind]);
		if (!cmd)
			return ctl_usage(ctl, "unknown command '%s'", argv[optind]);
		ctl_command_help(cmd, stdout);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

static int cmd_version(struct ctl *ctl, int argc, char **argv)
{
	int c;

	while (argv && (c = ctl_next_option(ctl, argc, argv)) > 0)
		;
	if (argv && c < 0)
		return ctl->exit;
	if (argv && optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	printf("rocmmemctl %s (protocol %u)\n", ROCMMEM_VERSION_STRING, ROCMMEM_PROTOCOL_VERSION);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

/* wants_json: --json anywhere before "--" asks for JSON errors, even before it is parsed. */
static bool wants_json(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") == 0)
			return true;
	return false;
}

/* use_color: a terminal takes colour unless NO_COLOR (https://no-color.org) or TERM=dumb. */
static bool use_color(void)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	if (no && no[0])
		return false;
	return !term || strcmp(term, "dumb") != 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = {0};
	const struct ctl_command *cmd;
	char name[64];
	int c;

	/* Character widths for the tables (UTF-8 names); numbers stay as they are. */
	setlocale(LC_CTYPE, "");
	ctl.tty = isatty(STDOUT_FILENO);
	ctl.color = ctl.tty && use_color();
	ctl_errors_json(wants_json(argc, argv));
	/* '+': stop at the command, whose own options follow it. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:s:jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			ctl.socket = optarg;
			break;
		case 'j':
			ctl.json = true;
			break;
		case 'h':
			usage(stdout);
			return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
		case 'V':
			return cmd_version(&ctl, 0, NULL);
		case ':':
			return ctl_usage(&ctl, "option '%s' needs a value",
					 args_bad_option(argv, name, sizeof(name)));
		default:
			return ctl_usage(&ctl, "unknown option '%s'",
					 args_bad_option(argv, name, sizeof(name)));
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return ctl_error(&ctl, CTL_EXIT_USAGE, -EINVAL, "missing COMMAND");
	}
	cmd = find_command(argv[optind]);
	if (!cmd)
		return ctl_usage(&ctl, "unknown command '%s'", argv[optind]);
	ctl.command = cmd;
	optind++;
	return cmd->run(&ctl, argc - optind + 1, argv + optind - 1);
}
