/* SPDX-License-Identifier: MIT */
/*
 * common.c: what every command shares: its options, parsed and explained in its --help from its
 * table of options; connecting; SIZE arguments.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "common.h"
#include "errors.h"
#include "size.h"

/* What every command takes besides its own options (listed after them in its --help). */
static const struct ctl_option common_options[] = {
    {"json", 'j', NULL, "print JSON (an error too: {\"error\": {...}})"},
    {"socket", 's', "PATH", "the daemon's socket (see rocmmemctl --help)"},
    {"help", 'h', NULL, "show this help"},
    {NULL, 0, NULL, NULL},
};

#define HELP_WIDTH 78
#define OPTION_COLUMN 26

void ctl_print_synopsis(const struct ctl_command *cmd, FILE *f, int indent, int col)
{
	const struct ctl_option *o;

	col += fprintf(f, "%s", cmd->name);
	if (cmd->args[0])
		col += fprintf(f, " %s", cmd->args);
	for (o = cmd->options; o->name; o++) {
		char item[96];
		int len;

		len = snprintf(item, sizeof(item), "[--%s%s%s]", o->name, o->arg ? " " : "",
			       o->arg ? o->arg : "");
		if (col + 1 + len > HELP_WIDTH) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else {
			fputc(' ', f);
			col++;
		}
		col += fprintf(f, "%s", item);
	}
	fputc('\n', f);
}

/* print_option writes one option's line(s): "  -o, --output COLUMNS  what it does". */
static void print_option(const struct ctl_option *o, FILE *f)
{
	const char *help = o->help;
	int col;

	if (o->key < CTL_LONG_ONLY)
		col = fprintf(f, "  -%c, --%s", o->key, o->name);
	else
		col = fprintf(f, "      --%s", o->name);
	if (o->arg)
		col += fprintf(f, " %s", o->arg);
	for (;;) {
		const char *nl = strchr(help, '\n');
		int len = nl ? (int)(nl - help) : (int)strlen(help);

		if (col >= OPTION_COLUMN - 1) {
			fputc('\n', f);
			col = 0;
		}
		fprintf(f, "%*s%.*s\n", OPTION_COLUMN - col, "", len, help);
		if (!nl)
			break;
		help = nl + 1;
		col = 0;
	}
}

void ctl_command_help(const struct ctl_command *cmd, FILE *f)
{
	fprintf(f, "Usage: rocmmemctl [--socket PATH] [--json] ");
	ctl_print_synopsis(cmd, f, 8, 43);
	fprintf(f, "%c%s.\n", toupper((unsigned char)cmd->summary[0]), cmd->summary + 1);
	if (cmd->details)
		fprintf(f, "\n%s", cmd->details);
	fprintf(f, "\nOptions:\n");
	for (const struct ctl_option *o = cmd->options; o->name; o++)
		print_option(o, f);
	for (const struct ctl_option *o = common_options; o->name; o++)
		print_option(o, f);
	if (cmd->help_extra)
		cmd->help_extra();
	fprintf(f, "\n%s", CTL_EXIT_TEXT);
}

/* build_options gives getopt_long the command's options and the common ones. */
static void build_options(struct ctl *ctl)
{
	const struct ctl_option *lists[2] = {ctl->command->options, common_options};
	char *p = ctl->optstring;
	size_t n = 0;

	*p++ = ':'; /* a missing value is ':', told apart from an unknown option */
	for (size_t l = 0; l < 2; l++) {
		for (const struct ctl_option *o = lists[l]; o->name && n + 1 < CTL_MAX_OPTIONS;
		     o++) {
			ctl->longopts[n++] = (struct option){
			    o->name, o->arg ? required_argument : no_argument, NULL, o->key};
			if (o->key < CTL_LONG_ONLY) {
				*p++ = (char)o->key;
				if (o->arg)
					*p++ = ':';
			}
		}
	}
	ctl->longopts[n] = (struct option){NULL, 0, NULL, 0};
	*p = '\0';
	optind = 0;
	opterr = 0;
}

int ctl_next_option(struct ctl *ctl, int argc, char **argv)
{
	char name[64];
	int c;

	if (!ctl->parsing) {
		build_options(ctl);
		ctl->parsing = true;
	}
	for (;;) {
		c = getopt_long(argc, argv, ctl->optstring, ctl->longopts, NULL);
		switch (c) {
		case -1:
			ctl->parsing = false;
			return CTL_OPTIONS_DONE;
		case 'j':
			ctl->json = true;
			ctl_errors_json(true);
			continue;
		case 's':
			ctl->socket = optarg;
			continue;
		case 'h':
			ctl_command_help(ctl->command, stdout);
			ctl->exit = fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
			return CTL_OPTIONS_EXIT;
		case ':':
			ctl->exit = ctl_usage(ctl, "option '%s' needs a value",
					      args_bad_option(argv, name, sizeof(name)));
			return CTL_OPTIONS_EXIT;
		case '?':
			ctl->exit = ctl_usage(ctl, "unknown option '%s'",
					      args_bad_option(argv, name, sizeof(name)));
			return CTL_OPTIONS_EXIT;
		default:
			ctl->optarg = optarg;
			return c;
		}
	}
}

int ctl_connect(const struct ctl *ctl, rocmmem_client **out)
{
	int err = rocmmem_connect(ctl->socket, "rocmmemctl", 0, out);

	if (err == 0)
		return CTL_EXIT_OK;
	/* The daemon answered, and refused this user outright (too many connections is a
	 * daemon out of reach for now, as ever). No command prefix: this is no request's fault. */
	return ctl_error(NULL, err == -EPERM ? CTL_EXIT_REFUSED : CTL_EXIT_UNREACHABLE, err, "%s",
			 ctl_why(err));
}

int ctl_size_arg(const struct ctl *ctl, const char *text, uint64_t *out)
{
	char meant[64];
	const char *unit;
	int err = size_parse(text, out);

	if (err == -ERANGE)
		return ctl_usage(ctl, "invalid SIZE '%s' (too large)", text);
	if (err == 0)
		return CTL_EXIT_OK;
	/* Decimal units are not taken: a "GB" that silently meant GiB would be 7% off. */
	if (size_suggest(text, meant, sizeof(meant), &unit) == 0)
		return ctl_usage(ctl,
				 "invalid SIZE '%s': did you mean %s (%s)? Sizes are bytes or "
				 "binary units: K, M, G, T (KiB, MiB, GiB, TiB)",
				 text, meant, unit);
	return ctl_usage(ctl, "invalid SIZE '%s' (bytes with an optional K, M, G or T suffix)",
			 text);
}
