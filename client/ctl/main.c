/* SPDX-License-Identifier: MIT */
/* main.c: rocmmemctl's global options, subcommand table, help and exit codes. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "ctl.h"
#include "sockpath.h"
#include "version.h"

static int cmd_help(const struct ctl *ctl, int argc, char **argv);
static int cmd_version(const struct ctl *ctl, int argc, char **argv);

static const struct ctl_command commands[] = {
    {"status", cmd_status, "", "show devices, budgets, clients, leases, models and the queue"},
    {"watch", cmd_watch, "[-i SECONDS] [-n COUNT] [--device N]",
     "live view of devices, clients, models and events, every -i seconds (default 1,\n"
     "      0.01 to 60), until Ctrl-C or COUNT samples; --json: one object per line"},
    {"lease", cmd_lease, "SIZE [--hold SECONDS] [--tag T] [--timeout SECONDS] [--device N]",
     "acquire a lease, print it and hold it until the time passes or Ctrl-C"},
    {"trim", cmd_trim, "[--device N]",
     "return memory the GPU runtime caches to the driver, on one device or all"},
    {"models", cmd_models, "[--device N]",
     "list registered models: owner, state, resident bytes, priority, pinned, evictions"},
    {"evict", cmd_evict, "MODEL",
     "ask a model's owner to unload it now; waits until it has (or the deadline passed)"},
    {"pin", cmd_pin, "MODEL",
     "pin a model: the daemon never evicts it to make room (evict still may)"},
    {"unpin", cmd_unpin, "MODEL", "let the daemon evict a model again when it is idle"},
    {"metrics", cmd_metrics, "", "print the daemon's metrics in the Prometheus text format"},
    {"help", cmd_help, "", "show this help"},
    {"version", cmd_version, "", "show the version"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: rocmmemctl [--socket PATH] [--json] COMMAND [ARGS]\n"
		   "Query and use rocmmemd, the GPU memory daemon.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		char head[128];

		snprintf(head, sizeof(head), "%s%s%s", commands[i].name,
			 commands[i].args[0] ? " " : "", commands[i].args);
		fprintf(f, "  %s\n      %s\n", head, commands[i].help);
	}
	fprintf(
	    f,
	    "\nOptions:\n"
	    "  -s, --socket PATH  the daemon's socket (default: $%s, else the per-user\n"
	    "                     socket if one exists, else %s)\n"
	    "  -j, --json         print JSON (status, models: the stable machine format;\n"
	    "                     watch: one object per line)\n"
	    "  -h, --help         show this help\n"
	    "  -V, --version      show the version\n"
	    "\nSIZE takes bytes or a binary suffix K, M, G, T (KiB, MiB, GiB, TiB): 512M, 1.5G.\n"
	    "MODEL is a model's id (decimal digits) or its name, if no other model has it.\n"
	    "Evicting and pinning a model takes its owner or root.\n"
	    "Exit status: 0 success, 1 usage error, 2 request refused by the daemon,\n"
	    "3 daemon unreachable.\n",
	    SOCKPATH_ENV, SOCKPATH_SYSTEM);
}

static int cmd_help(const struct ctl *ctl, int argc, char **argv)
{
	(void)ctl;
	(void)argc;
	(void)argv;
	usage(stdout);
	return CTL_EXIT_OK;
}

static int cmd_version(const struct ctl *ctl, int argc, char **argv)
{
	(void)ctl;
	(void)argc;
	(void)argv;
	printf("rocmmemctl %s (protocol %u)\n", ROCMMEM_VERSION_STRING, ROCMMEM_PROTOCOL_VERSION);
	return CTL_EXIT_OK;
}

int ctl_usage(const char *command, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rocmmemctl %s: ", command);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'rocmmemctl --help'.\n");
	return CTL_EXIT_USAGE;
}

int ctl_common_option(const char *command, int c, struct ctl *ctl, char **argv)
{
	char name[64];

	switch (c) {
	case 'j':
		ctl->json = true;
		return 0;
	case 's':
		ctl->socket = optarg;
		return 0;
	case ':':
		return ctl_usage(command, "option '%s' needs a value",
				 args_bad_option(argv, name, sizeof(name)));
	default:
		return ctl_usage(command, "unknown option '%s'",
				 args_bad_option(argv, name, sizeof(name)));
	}
}

int ctl_connect(const struct ctl *ctl, rocmmem_client **out)
{
	int err = rocmmem_connect(ctl->socket, "rocmmemctl", 0, out);

	if (err == 0)
		return CTL_EXIT_OK;
	fprintf(stderr, "rocmmemctl: %s\n",
		rocmmem_last_error()[0] ? rocmmem_last_error() : rocmmem_strerror(err));
	/* The daemon answered, and refused this user outright (too many connections is a
	 * daemon out of reach for now, as ever). */
	if (err == -EPERM)
		return CTL_EXIT_REFUSED;
	return CTL_EXIT_UNREACHABLE;
}

int ctl_fail(const char *what, int err)
{
	fprintf(stderr, "rocmmemctl: %s: %s\n", what,
		rocmmem_last_error()[0] ? rocmmem_last_error() : rocmmem_strerror(err));
	/* The daemon going away (or already stopping, or restarting) is unreachable, not a
	 * refusal. */
	if (err == -ECONNRESET || err == -EPIPE || err == -ECONNREFUSED || err == -ESHUTDOWN ||
	    err == -ENOTCONN)
		return CTL_EXIT_UNREACHABLE;
	return CTL_EXIT_REFUSED;
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
	char name[64];
	int c;

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
			return CTL_EXIT_OK;
		case 'V':
			return cmd_version(&ctl, 0, NULL);
		case ':':
			fprintf(stderr, "rocmmemctl: option '%s' needs a value\n",
				args_bad_option(argv, name, sizeof(name)));
			return CTL_EXIT_USAGE;
		default:
			fprintf(stderr,
				"rocmmemctl: unknown option '%s'\nTry 'rocmmemctl --help'.\n",
				args_bad_option(argv, name, sizeof(name)));
			return CTL_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CTL_EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[optind], commands[i].name) == 0) {
			optind++;
			return commands[i].run(&ctl, argc - optind + 1, argv + optind - 1);
		}
	}
	fprintf(stderr, "rocmmemctl: unknown command '%s'\nTry 'rocmmemctl --help'.\n",
		argv[optind]);
	return CTL_EXIT_USAGE;
}
