/* SPDX-License-Identifier: MIT */
/* options.c: parsing and validation of rocmmemd's command line. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "backend.h"
#include "metrics.h"
#include "model.h"
#include "size.h"
#include "sockpath.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rocmmemd [OPTION]...\n"
	    "Lease GPU (or host) memory to processes over a Unix socket, under one budget.\n"
	    "\n"
	    "  -s, --socket PATH      socket to listen on (default: $%s, else %s as\n"
	    "                         root, else $XDG_RUNTIME_DIR/%s)\n"
	    "  -b, --backend NAME     memory backend: %s (default auto: the first\n"
	    "                         that works of hip, cuda and host)\n"
	    "      --sharing METHOD   how GPU memory reaches clients: auto (the best the\n"
	    "                         device offers), vmm, dmabuf or ipc\n"
	    "      --budget SIZE      bytes the daemon may lease per device\n"
	    "      --headroom SIZE    bytes kept free per device (budget = total - headroom)\n"
	    "      --evict-deadline SECONDS  how long a model's owner has to unload it when\n"
	    "                         asked before its memory is revoked (default 20)\n"
	    "      --exclusive [DEVICE:]CLASS,CLASS...  classes never resident together on a\n"
	    "                         device (all devices without DEVICE:), e.g. transformer,vae;\n"
	    "                         classes: other, transformer, vae, text_encoder,\n"
	    "                         image_encoder. May be repeated.\n"
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
	    "Runs in the foreground and logs to stderr. SIGINT or SIGTERM stop it cleanly.\n"
	    "Exit status: 0 clean stop, 1 failure to start or run, 2 bad usage.\n",
	    SOCKPATH_ENV, SOCKPATH_SYSTEM, SOCKPATH_USER_NAME, backend_names());
}

static int bad_size(FILE *err, const char *opt, const char *text, int rc)
{
	fprintf(err, "rocmmemd: invalid size for %s: '%s' (%s)\n", opt, text,
		rc == -ERANGE ? "too large"
			      : "expected bytes with an optional K, M, G or T suffix, e.g. 512M");
	return -EINVAL;
}

/* parse_exclusive reads "[DEVICE:]class,class...": at least two known classes. */
static int parse_exclusive(const char *text, struct options *opts, FILE *err)
{
	char buf[256], *list = buf, *save = NULL, *tok, *end;
	unsigned mask = 0, count = 0;
	struct class_exclusion *target = &opts->exclusive_all;
	const char *colon = strchr(text, ':');

	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		goto bad;
	if (colon) {
		unsigned long dev;

		errno = 0;
		dev = strtoul(buf, &end, 10);
		if (errno || end == buf || *end != ':' || buf[0] == '-' ||
		    dev >= BACKEND_MAX_DEVICES)
			goto bad;
		target = &opts->exclusive[dev];
		list = end + 1;
	}
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned cls;

		if (model_class_parse(tok, &cls) < 0) {
			fprintf(
			    err,
			    "rocmmemd: --exclusive: unknown class '%s' (other, transformer, vae, "
			    "text_encoder, image_encoder)\n",
			    tok);
			return -EINVAL;
		}
		if (!(mask & (1u << cls)))
			count++;
		mask |= 1u << cls;
	}
	if (count < 2)
		goto bad;
	class_exclusion_add(target, mask);
	return 0;
bad:
	fprintf(
	    err,
	    "rocmmemd: invalid --exclusive '%s' (expected [DEVICE:]CLASS,CLASS..., at least two "
	    "classes, e.g. transformer,vae)\n",
	    text);
	return -EINVAL;
}

/*
 * check_textfile accepts a --metrics-textfile path: node_exporter's textfile collector reads
 * only files whose names end in .prom, so any other name would be written for nobody.
 */
static int check_textfile(const char *path, FILE *err)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	if (len <= 5 || strcmp(base + len - 5, ".prom") != 0) {
		fprintf(err,
			"rocmmemd: invalid --metrics-textfile '%s' (a file name ending in .prom: "
			"node_exporter's textfile collector reads only those)\n",
			path);
		return -EINVAL;
	}
	return 0;
}

int options_parse(int argc, char **argv, struct options *opts, FILE *out, FILE *err)
{
	enum {
		OPT_BUDGET = 256,
		OPT_HEADROOM,
		OPT_SHARING,
		OPT_EVICT_DEADLINE,
		OPT_EXCLUSIVE,
		OPT_METRICS_TEXTFILE,
		OPT_METRICS_INTERVAL,
	};
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"backend", required_argument, NULL, 'b'},
	    {"budget", required_argument, NULL, OPT_BUDGET},
	    {"headroom", required_argument, NULL, OPT_HEADROOM},
	    {"sharing", required_argument, NULL, OPT_SHARING},
	    {"evict-deadline", required_argument, NULL, OPT_EVICT_DEADLINE},
	    {"exclusive", required_argument, NULL, OPT_EXCLUSIVE},
	    {"metrics-textfile", required_argument, NULL, OPT_METRICS_TEXTFILE},
	    {"metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL},
	    {"log-level", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	bool has_metrics_interval = false;
	char name[64];
	int c, rc;

	memset(opts, 0, sizeof(*opts));
	opts->backend = "auto";
	opts->sharing = "auto";
	opts->evict_deadline_ms = OPTIONS_EVICT_DEADLINE_MS;
	opts->metrics_interval_ms = METRICS_INTERVAL_DEFAULT_MS;
	opts->log_level = LOG_LEVEL_INFO;
	optind = 0; /* 0, not 1: glibc then also resets its position inside grouped options */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:b:l:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (optarg[0] == '\0') {
				fprintf(err, "rocmmemd: --socket needs a non-empty path\n");
				return -EINVAL;
			}
			opts->socket_path = optarg;
			break;
		case 'b':
			if (!backend_known(optarg)) {
				fprintf(err, "rocmmemd: unknown backend '%s' (choose from %s)\n",
					optarg, backend_names());
				return -EINVAL;
			}
			opts->backend = optarg;
			break;
		case OPT_BUDGET:
			rc = size_parse(optarg, &opts->budget);
			if (rc)
				return bad_size(err, "--budget", optarg, rc);
			if (opts->budget == 0) {
				fprintf(err, "rocmmemd: --budget must be larger than 0\n");
				return -EINVAL;
			}
			opts->has_budget = true;
			break;
		case OPT_EVICT_DEADLINE: {
			int64_t ms;

			if (duration_parse(optarg, &ms) < 0 || ms <= 0 || ms > 3600000) {
				fprintf(err,
					"rocmmemd: invalid --evict-deadline '%s' (seconds, more "
					"than 0, "
					"at most 3600)\n",
					optarg);
				return -EINVAL;
			}
			opts->evict_deadline_ms = (uint64_t)ms;
			break;
		}
		case OPT_EXCLUSIVE:
			if (parse_exclusive(optarg, opts, err) < 0)
				return -EINVAL;
			break;
		case OPT_METRICS_TEXTFILE:
			if (check_textfile(optarg, err) < 0)
				return -EINVAL;
			opts->metrics_textfile = optarg;
			break;
		case OPT_METRICS_INTERVAL: {
			int64_t ms;

			if (duration_parse(optarg, &ms) < 0 || ms < METRICS_INTERVAL_MIN_MS ||
			    ms > METRICS_INTERVAL_MAX_MS) {
				fprintf(err,
					"rocmmemd: invalid --metrics-interval '%s' (seconds, 1 to "
					"3600)\n",
					optarg);
				return -EINVAL;
			}
			opts->metrics_interval_ms = (uint64_t)ms;
			has_metrics_interval = true;
			break;
		}
		case OPT_SHARING:
			if (strcmp(optarg, "auto") && strcmp(optarg, "vmm") &&
			    strcmp(optarg, "dmabuf") && strcmp(optarg, "ipc")) {
				fprintf(
				    err,
				    "rocmmemd: unknown sharing method '%s' (auto, vmm, dmabuf or "
				    "ipc)\n",
				    optarg);
				return -EINVAL;
			}
			opts->sharing = optarg;
			break;
		case OPT_HEADROOM:
			rc = size_parse(optarg, &opts->headroom);
			if (rc)
				return bad_size(err, "--headroom", optarg, rc);
			opts->has_headroom = true;
			break;
		case 'l':
			if (log_level_parse(optarg, &opts->log_level)) {
				fprintf(err,
					"rocmmemd: invalid log level '%s' (error, warn, info or "
					"debug)\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'h':
			usage(out);
			return 1;
		case 'V':
			fprintf(out, "rocmmemd %s (protocol %u)\n", ROCMMEM_VERSION_STRING,
				ROCMMEM_PROTOCOL_VERSION);
			return 1;
		case ':':
			fprintf(err, "rocmmemd: option '%s' needs a value\n",
				args_bad_option(argv, name, sizeof(name)));
			return -EINVAL;
		default:
			fprintf(err, "rocmmemd: unknown option '%s'\nTry 'rocmmemd --help'.\n",
				args_bad_option(argv, name, sizeof(name)));
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(err, "rocmmemd: unexpected argument '%s'\nTry 'rocmmemd --help'.\n",
			argv[optind]);
		return -EINVAL;
	}
	if (has_metrics_interval && !opts->metrics_textfile) {
		fprintf(err, "rocmmemd: --metrics-interval needs --metrics-textfile\n");
		return -EINVAL;
	}
	return 0;
}
