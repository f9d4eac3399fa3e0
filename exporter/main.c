/* SPDX-License-Identifier: MIT */
/*
 * main.c: rocmmem-exporter: rocmmemd's metrics over HTTP for Prometheus, on a loopback socket
 * systemd passes (rocmmem-exporter.socket) or one of its own (--listen).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "args.h"
#include "collect.h"
#include "rocmmem.h"

/* The port rocmmem-exporter.socket listens on (docs/metrics.md says why this one). */
#define EXPORTER_DEFAULT_LISTEN "127.0.0.1:10437"
#define EXPORTER_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* A scraper gets this long to send its request and read the answer. */
#define EXPORTER_HTTP_TIMEOUT_S 30u
/* Connections at once: Prometheus needs one; a few more for curl and a second server. */
#define EXPORTER_CONNECTIONS 16u

struct options {
	const char *listen; /* NULL: systemd's socket, else EXPORTER_DEFAULT_LISTEN */
	struct collect_config collect;
};

static const char usage_text[] =
    "Usage: rocmmem-exporter [--listen ADDRESS:PORT] [--socket PATH] [--timeout SECONDS]\n"
    "\n"
    "Serves rocmmemd's metrics to Prometheus at http://ADDRESS:PORT/metrics: the daemon's own\n"
    "and its clients' (per client name), read over the daemon's socket at each scrape.\n"
    "\n"
    "Options:\n"
    "  -l, --listen ADDRESS:PORT  where to listen when systemd passes no socket\n"
    "                             (default " EXPORTER_DEFAULT_LISTEN "; [::1]:PORT for IPv6)\n"
    "  -s, --socket PATH          the daemon's socket (default: as rocmmemctl finds it)\n"
    "  -t, --timeout SECONDS      how long to wait for the daemon at each scrape (default 5)\n"
    "  -h, --help                 this text\n"
    "  -V, --version              the version\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* usage_error says what is wrong with the command line; returns the exit status, 2. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("rocmmem-exporter: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'rocmmem-exporter --help'.\n", stderr);
	return 2;
}

/* parse_options fills o from argv. Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
	    {"listen", required_argument, NULL, 'l'},  {"socket", required_argument, NULL, 's'},
	    {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0},
	};
	char bad[64], *end;
	double seconds;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":l:s:t:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o->listen = optarg;
			break;
		case 's':
			o->collect.socket_path = optarg;
			break;
		case 't':
			errno = 0;
			seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(seconds > 0 && seconds <= 600))
				return usage_error("--timeout takes seconds, more than 0 and at "
						   "most 600, not '%s'",
						   optarg);
			o->collect.timeout_ms = (int)(seconds * 1000.0 + 0.5);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("rocmmem-exporter %s\n", ROCMMEM_VERSION_STRING);
			return 0;
		case ':':
			return usage_error("%s needs an argument",
					   args_bad_option(argv, bad, sizeof(bad)));
		default:
			return usage_error("unknown option '%s'",
					   args_bad_option(argv, bad, sizeof(bad)));
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return -1;
}

/* queue_text queues len bytes of text (copied) with status code and content type. */
static enum MHD_Result queue_text(struct MHD_Connection *conn, unsigned code, const char *text,
				  size_t len, const char *type)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer_metrics(struct MHD_Connection *conn, const struct options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	enum MHD_Result ret;
	int err;

	if (!out)
		return MHD_NO;
	err = collect_scrape(&o->collect, out);
	if (fclose(out) != 0 || err) {
		free(text);
		return queue_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", 14,
				  "text/plain; charset=utf-8");
	}
	ret = queue_text(conn, MHD_HTTP_OK, text, len, EXPORTER_CONTENT_TYPE);
	free(text);
	return ret;
}

/* on_request answers GET (and HEAD) of /metrics and /; anything else is refused. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	static const char index_page[] = "rocmmem-exporter: rocmmemd's metrics are at /metrics\n";
	static const char not_found[] = "not found: rocmmemd's metrics are at /metrics\n";
	static int first_call;
	const char *plain = "text/plain; charset=utf-8";

	(void)version;
	(void)upload;
	if (*state == NULL) { /* the headers; the body, if any, comes in later calls */
		*state = &first_call;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		*upload_size = 0; /* a body is not read; the answer below refuses the request */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return queue_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", 18,
				  plain);
	if (strcmp(url, "/metrics") == 0)
		return answer_metrics(conn, cls);
	if (strcmp(url, "/") == 0)
		return queue_text(conn, MHD_HTTP_OK, index_page, sizeof(index_page) - 1, plain);
	return queue_text(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1, plain);
}

/*
 * listen_socket is the socket systemd passed (one listening stream socket), or -ENOENT for
 * none; another negative errno for a passed socket that cannot be served.
 */
static int listen_socket(void)
{
	int n = sd_listen_fds(1);

	if (n < 0)
		return n;
	if (n == 0)
		return -ENOENT;
	if (n > 1 || sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
		fprintf(stderr,
			"rocmmem-exporter: systemd passed %d socket(s): it serves one "
			"listening stream socket\n",
			n);
		return -EINVAL;
	}
	return SD_LISTEN_FDS_START;
}

/*
 * start_own starts the HTTP server on o->listen (or the default): a numeric IPv4 or IPv6
 * address and a port. Returns the daemon, or NULL after saying why.
 */
static struct MHD_Daemon *start_own(const struct options *o, unsigned flags)
{
	const char *spec = o->listen ? o->listen : EXPORTER_DEFAULT_LISTEN;
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM};
	char host[INET6_ADDRSTRLEN + 2] = "";
	const char *colon = strrchr(spec, ':');
	struct addrinfo *ai = NULL;
	struct MHD_Daemon *d;
	size_t hlen;
	int err;

	hlen = colon ? (size_t)(colon - spec) : 0;
	if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
		spec++;
		hlen -= 2;
	}
	if (!colon || hlen == 0 || hlen >= sizeof(host)) {
		usage_error("--listen takes ADDRESS:PORT, e.g. 127.0.0.1:10437, not '%s'", spec);
		return NULL;
	}
	memcpy(host, spec, hlen);
	err = getaddrinfo(host, colon + 1, &hints, &ai);
	if (err) {
		fprintf(stderr, "rocmmem-exporter: Could not use '%s' as ADDRESS:PORT: %s\n", spec,
			gai_strerror(err));
		return NULL;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, (void *)o, MHD_OPTION_SOCK_ADDR,
			     ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, EXPORTER_CONNECTIONS,
			     MHD_OPTION_CONNECTION_TIMEOUT, EXPORTER_HTTP_TIMEOUT_S,
			     MHD_OPTION_END);
	if (!d)
		fprintf(stderr, "rocmmem-exporter: Could not listen on %s: %s\n", spec,
			strerror(errno));
	freeaddrinfo(ai);
	return d;
}

/* wait_for_stop blocks SIGTERM and SIGINT in every thread and returns once one arrives. */
static void wait_for_stop(const sigset_t *set)
{
	int sig;

	while (sigwait(set, &sig) != 0)
		;
}

int main(int argc, char **argv)
{
	struct options o = {.collect = {.timeout_ms = 5000}};
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	struct MHD_Daemon *d;
	sigset_t stop;
	int rc, fd;

	rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;
	/* Before any thread starts, so that every thread inherits the mask. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = listen_socket();
	if (fd >= 0 && o.listen) {
		fputs("rocmmem-exporter: --listen does not apply: systemd passed the socket\n",
		      stderr);
		return 2;
	}
	if (fd >= 0)
		d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &o, MHD_OPTION_LISTEN_SOCKET,
				     fd, MHD_OPTION_CONNECTION_LIMIT, EXPORTER_CONNECTIONS,
				     MHD_OPTION_CONNECTION_TIMEOUT, EXPORTER_HTTP_TIMEOUT_S,
				     MHD_OPTION_END);
	else if (fd == -ENOENT)
		d = start_own(&o, flags);
	else
		return 1;
	if (!d) {
		if (fd >= 0)
			fputs("rocmmem-exporter: Could not serve the socket systemd passed\n",
			      stderr);
		return 1;
	}
	sd_notify(0, "READY=1");
	wait_for_stop(&stop);
	sd_notify(0, "STOPPING=1");
	MHD_stop_daemon(d);
	return 0;
}
