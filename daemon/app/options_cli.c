/* SPDX-License-Identifier: MIT */
/* options_cli.c: rocmmemd's command line: --help, --version, and the settings as flags. */
#include "options_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "options_set.h"
#include "platform/backend/registry.h"
#include "sockpath.h"
#include "version.h"

/* Long options without a short form start here. */
#define LONG_ONLY 256

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rocmmemd [OPTION]...\n"
	    "Lease GPU (or host) memory to processes over a Unix socket, under one budget.\n"
	    "\n"
	    "  -c, --config FILE      configuration file (default: /etc/rocmmemd/rocmmemd.conf\n"
	    "                         as root, else $XDG_CONFIG_HOME/rocmmemd/rocmmemd.conf);\n"
	    "                         flags win over the file, the file over the defaults\n"
	    "      --check-config     check the configuration, print it as it applies, exit\n"
	    "  -s, --socket PATH      socket to listen on (default: $%s, else %s as\n"
	    "                         root, else $XDG_RUNTIME_DIR/%s)\n"
	    "  -b, --backend NAME     memory backend: %s (default auto: the first\n"
	    "                         that works of hip, cuda and host)\n"
	    "      --sharing METHOD   how GPU memory reaches clients: auto (the best the\n"
	    "                         device offers), vmm, dmabuf or ipc\n"
	    "      --budget [DEVICE:]SIZE    bytes the daemon may lease on every device (or\n"
	    "                         DEVICE); may be repeated\n"
	    "      --headroom [DEVICE:]SIZE  bytes kept free (budget = total - headroom)\n"
	    "      --gpu-pool SIZE|auto|off  released VMM leases' memory kept per device for\n"
	    "                         the same client's next lease (default auto: a quarter\n"
	    "                         of the budget)\n"
	    "      --gpu-pool-idle SECONDS  ... released when unused that long (default 30)\n"
	    "      --gpu-pool-fds N|auto  exported fds kept open after their grants, so that\n"
	    "                         pooled memory is granted again without exporting it\n"
	    "                         anew (default auto: from the descriptor limit; 0: none)\n"
	    "      --evict-deadline [CLASS:]SECONDS  how long a model's owner has to unload\n"
	    "                         it when asked before its memory is revoked (default 20);\n"
	    "                         CLASS: for models of that class; may be repeated\n"
	    "      --max-hold [CLASS:]SECONDS|off  how long a model may stay in use before its\n"
	    "                         owner is asked to release it, then revoked (default off)\n"
	    "      --backfill on|off  grant a later request that fits now and delays no one\n"
	    "                         ahead of it (default on)\n"
	    "      --backfill-passes N  a request passed over N times is passed no more\n"
	    "                         (default 16)\n"
	    "      --backfill-wait SECONDS  ... nor SECONDS after it was first passed over\n"
	    "                         (default 5)\n"
	    "      --exclusive [DEVICE:]CLASS,CLASS...  classes never resident together on a\n"
	    "                         device (all devices without DEVICE:), e.g. transformer,vae;\n"
	    "                         classes: other, transformer, vae, text_encoder,\n"
	    "                         image_encoder. May be repeated.\n"
	    "      --max-clients N    connections at once (default 4096)\n"
	    "      --max-pending N    waiting requests per connection (default 64)\n"
	    "      --max-leases N     leases per connection (default 65536)\n"
	    "      --max-queued SIZE  unsent replies per connection before it is dropped\n"
	    "                         (default 1M)\n"
	    "      --max-clients-per-uid N  connections at once of one user (default 256)\n"
	    "      --max-bytes-per-uid SIZE  memory one user may hold and wait for, over all\n"
	    "                         its connections (default unlimited)\n"
	    "      --max-message-size SIZE  bytes of one request, 1K to 64K (default 64K)\n"
	    "      --handshake-timeout SECONDS  how long a connection may take to say hello\n"
	    "                         (default 10)\n"
	    "      --max-subscribers N  telemetry subscriptions at once (default 64)\n"
	    "      --socket-user USER, --socket-group GROUP, --socket-mode MODE\n"
	    "                         who owns the socket and its mode (default root,\n"
	    "                         rocmmem, 0660 as root; the user's own and 0600 otherwise)\n"
	    "      --allowed-users USER,...  --allowed-groups GROUP,...  who may connect\n"
	    "                         (default: anyone who can open the socket)\n"
	    "      --admin-group GROUP  members may evict and pin any model (default: root only)\n"
	    "      --shutdown-timeout SECONDS  at stop, how long clients get to leave after\n"
	    "                         being told (default 5)\n"
	    "      --restart-grace SECONDS  after a crash, how long the next daemon keeps the\n"
	    "                         leases of the state file for their holders to\n"
	    "                         re-declare (default 60; 0: keep no state file)\n"
	    "      --metrics-textfile PATH  rewrite PATH (ending in .prom) with Prometheus\n"
	    "                         metrics every interval, for node_exporter's textfile\n"
	    "                         collector; removed when the daemon stops\n"
	    "      --metrics-interval SECONDS  how often (default 15, 1 to 3600)\n"
	    "  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	    "  -h, --help             show this help and exit\n"
	    "  -V, --version          show the version and exit\n"
	    "\n"
	    "SIZE is a number of bytes with an optional binary suffix: K, M, G, T (or KiB, MiB,\n"
	    "GiB, TiB), e.g. 512M or 1.5G. Leases are granted in 2 MiB granules.\n"
	    "Runs in the foreground and logs to stderr (to the journal under systemd).\n"
	    "SIGINT or SIGTERM stop it cleanly; SIGHUP reloads the configuration file.\n"
	    "Exit status: 0 clean stop, 1 failure to start or run, 2 bad usage or configuration.\n",
	    SOCKPATH_ENV, SOCKPATH_SYSTEM, SOCKPATH_USER_NAME, backend_names());
}

int options_parse(int argc, char **argv, struct command_line *cl, FILE *out, FILE *err)
{
	enum {
		OPT_CHECK_CONFIG = LONG_ONLY,
		OPT_SETTING, /* + enum option_id */
	};
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
	    {"socket", required_argument, NULL, 's'},
	    {"backend", required_argument, NULL, 'b'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"sharing", required_argument, NULL, OPT_SETTING + OPTION_SHARING},
	    {"budget", required_argument, NULL, OPT_SETTING + OPTION_BUDGET},
	    {"headroom", required_argument, NULL, OPT_SETTING + OPTION_HEADROOM},
	    {"evict-deadline", required_argument, NULL, OPT_SETTING + OPTION_EVICT_DEADLINE},
	    {"exclusive", required_argument, NULL, OPT_SETTING + OPTION_EXCLUSIVE},
	    {"max-hold", required_argument, NULL, OPT_SETTING + OPTION_MAX_HOLD},
	    {"backfill", required_argument, NULL, OPT_SETTING + OPTION_BACKFILL},
	    {"backfill-passes", required_argument, NULL, OPT_SETTING + OPTION_BACKFILL_PASSES},
	    {"backfill-wait", required_argument, NULL, OPT_SETTING + OPTION_BACKFILL_WAIT},
	    {"gpu-pool", required_argument, NULL, OPT_SETTING + OPTION_GPU_POOL},
	    {"gpu-pool-idle", required_argument, NULL, OPT_SETTING + OPTION_GPU_POOL_IDLE},
	    {"gpu-pool-fds", required_argument, NULL, OPT_SETTING + OPTION_GPU_POOL_FDS},
	    {"max-clients", required_argument, NULL, OPT_SETTING + OPTION_MAX_CLIENTS},
	    {"max-pending", required_argument, NULL, OPT_SETTING + OPTION_MAX_PENDING},
	    {"max-leases", required_argument, NULL, OPT_SETTING + OPTION_MAX_LEASES},
	    {"max-queued", required_argument, NULL, OPT_SETTING + OPTION_MAX_QUEUED},
	    {"max-clients-per-uid", required_argument, NULL,
	     OPT_SETTING + OPTION_MAX_CLIENTS_PER_UID},
	    {"max-bytes-per-uid", required_argument, NULL, OPT_SETTING + OPTION_MAX_BYTES_PER_UID},
	    {"max-message-size", required_argument, NULL, OPT_SETTING + OPTION_MAX_MESSAGE},
	    {"handshake-timeout", required_argument, NULL, OPT_SETTING + OPTION_HANDSHAKE_TIMEOUT},
	    {"max-subscribers", required_argument, NULL, OPT_SETTING + OPTION_MAX_SUBSCRIBERS},
	    {"socket-user", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_USER},
	    {"socket-group", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_GROUP},
	    {"socket-mode", required_argument, NULL, OPT_SETTING + OPTION_SOCKET_MODE},
	    {"allowed-users", required_argument, NULL, OPT_SETTING + OPTION_ALLOWED_USERS},
	    {"allowed-groups", required_argument, NULL, OPT_SETTING + OPTION_ALLOWED_GROUPS},
	    {"admin-group", required_argument, NULL, OPT_SETTING + OPTION_ADMIN_GROUP},
	    {"shutdown-timeout", required_argument, NULL, OPT_SETTING + OPTION_SHUTDOWN_TIMEOUT},
	    {"restart-grace", required_argument, NULL, OPT_SETTING + OPTION_RESTART_GRACE},
	    {"metrics-textfile", required_argument, NULL, OPT_SETTING + OPTION_METRICS_TEXTFILE},
	    {"metrics-interval", required_argument, NULL, OPT_SETTING + OPTION_METRICS_INTERVAL},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	char name[64], why[256];
	int c;

	memset(cl, 0, sizeof(*cl));
	options_defaults(&cl->flags);
	optind = 0; /* 0, not 1: glibc then also resets its position inside grouped options */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:s:b:l:hV", longopts, NULL)) != -1) {
		enum option_id id;

		switch (c) {
		case 'c':
			if (!optarg[0]) {
				fprintf(err, "rocmmemd: --config needs a non-empty path\n");
				goto usage_error;
			}
			cl->config_path = optarg;
			continue;
		case OPT_CHECK_CONFIG:
			cl->check_config = true;
			continue;
		case 'h':
			usage(out);
			options_free(&cl->flags);
			return 1;
		case 'V':
			fprintf(out, "rocmmemd %s (protocol %u)\n", ROCMMEM_VERSION_STRING,
				ROCMMEM_PROTOCOL_VERSION);
			options_free(&cl->flags);
			return 1;
		case ':':
			fprintf(err, "rocmmemd: option '%s' needs a value\n",
				args_bad_option(argv, name, sizeof(name)));
			goto usage_error;
		case 's':
			id = OPTION_SOCKET;
			break;
		case 'b':
			id = OPTION_BACKEND;
			break;
		case 'l':
			id = OPTION_LOG_LEVEL;
			break;
		default:
			if (c < OPT_SETTING || c >= OPT_SETTING + OPTION_COUNT) {
				fprintf(err,
					"rocmmemd: unknown option '%s'\nTry 'rocmmemd --help'.\n",
					args_bad_option(argv, name, sizeof(name)));
				goto usage_error;
			}
			id = (enum option_id)(c - OPT_SETTING);
			break;
		}
		if (options_set(&cl->flags, id, -1, optarg, why, sizeof(why)) < 0) {
			fprintf(err, "rocmmemd: invalid %s '%s': %s\n", options_name(id)->flag,
				optarg, why);
			goto usage_error;
		}
	}
	if (optind < argc) {
		fprintf(err, "rocmmemd: unexpected argument '%s'\nTry 'rocmmemd --help'.\n",
			argv[optind]);
		goto usage_error;
	}
	return 0;
usage_error:
	options_free(&cl->flags);
	return -EINVAL;
}
