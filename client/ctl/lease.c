/* SPDX-License-Identifier: MIT */
/* lease.c: `rocmmemctl lease`: acquire a lease, print it, hold it, release it. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "size.h"

struct hold_state {
	bool lost;
	char why[256];
};

static void on_event(rocmmem_client *client, const struct rocmmem_event *ev, void *userdata)
{
	struct hold_state *h = userdata;

	(void)client;
	if (ev->type == ROCMMEM_EVENT_SHUTDOWN || ev->type == ROCMMEM_EVENT_DISCONNECTED ||
	    ev->type == ROCMMEM_EVENT_LEASE_REVOKED) {
		h->lost = true;
		snprintf(h->why, sizeof(h->why), "%s",
			 ev->reason[0] ? ev->reason : "the daemon ended the lease");
	}
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * hold waits until hold_ms passes (< 0: forever), SIGINT/SIGTERM/SIGHUP arrive, or the daemon
 * ends the lease. Returns 0 when the lease is still ours to release, else CTL_EXIT_UNREACHABLE.
 */
static int hold(rocmmem_client *client, int64_t hold_ms, int sigfd)
{
	struct hold_state h = {0};
	int64_t end = hold_ms < 0 ? -1 : monotonic_ms() + hold_ms;

	rocmmem_set_event_callback(client, on_event, &h);
	for (;;) {
		struct pollfd fds[2] = {
		    {.fd = sigfd, .events = POLLIN},
		    {.fd = rocmmem_event_fd(client), .events = POLLIN},
		};
		int64_t left = end < 0 ? -1 : end - monotonic_ms();
		int rc;

		if (end >= 0 && left <= 0)
			return 0;
		rc = poll(fds, 2, left < 0 ? -1 : left > 60000 ? 60000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return 0;
		if (fds[0].revents & POLLIN)
			return 0; /* interrupted: release and leave */
		if (fds[1].revents) {
			rocmmem_dispatch(client);
			if (h.lost) {
				fprintf(stderr, "rocmmemctl: lost the lease: %s\n", h.why);
				return CTL_EXIT_UNREACHABLE;
			}
		}
	}
}

static void print_lease(const struct ctl *ctl, const rocmmem_lease *l, const char *tag,
			int64_t hold_ms)
{
	char size[SIZE_FORMAT_MAX];

	if (ctl->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "id", json_object_new_uint64(rocmmem_lease_id(l)));
		json_object_object_add(o, "device",
				       json_object_new_uint64(rocmmem_lease_device(l)));
		json_object_object_add(o, "bytes", json_object_new_uint64(rocmmem_lease_size(l)));
		json_object_object_add(o, "tag", json_object_new_string(tag ? tag : ""));
		json_object_object_add(o, "waited_ms",
				       json_object_new_uint64(rocmmem_lease_waited_ms(l)));
		json_object_object_add(o, "hold_ms", json_object_new_int64(hold_ms));
		json_object_object_add(o, "pid", json_object_new_int64(getpid()));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else {
		printf(
		    "lease %llu: %s on device %u%s%s%s; ", (unsigned long long)rocmmem_lease_id(l),
		    size_format(rocmmem_lease_size(l), size, sizeof(size)), rocmmem_lease_device(l),
		    tag ? " (tag '" : "", tag ? tag : "", tag ? "')" : "");
		if (hold_ms < 0)
			printf("holding it until interrupted (pid %d)\n", (int)getpid());
		else
			printf("holding it for %.10g s (pid %d)\n", (double)hold_ms / 1000.0,
			       (int)getpid());
	}
	fflush(stdout);
}

int cmd_lease(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"hold", required_argument, NULL, 'H'},
	    {"tag", required_argument, NULL, 't'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"device", required_argument, NULL, 'd'},
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct rocmmem_lease_request req = {0};
	struct ctl ctl = *global;
	int64_t hold_ms = -1;
	const char *tag = NULL, *size_text = NULL;
	rocmmem_client *client;
	rocmmem_lease *lease;
	sigset_t mask;
	int c, rc, err, sigfd;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":H:t:T:d:js:", longopts, NULL)) != -1) {
		char *end;
		unsigned long dev;

		switch (c) {
		case 'H':
			if (duration_parse(optarg, &hold_ms) < 0)
				return ctl_usage("lease", "invalid --hold '%s' (seconds, or inf)",
						 optarg);
			break;
		case 't':
			tag = optarg;
			break;
		case 'T':
			if (duration_parse(optarg, &req.timeout_ms) < 0)
				return ctl_usage(
				    "lease", "invalid --timeout '%s' (seconds, or inf)", optarg);
			break;
		case 'd':
			errno = 0;
			dev = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || dev > 1024)
				return ctl_usage("lease", "invalid --device '%s'", optarg);
			req.device = (unsigned)dev;
			break;
		default:
			rc = ctl_common_option("lease", c, &ctl, argv);
			if (rc)
				return rc;
			break;
		}
	}
	if (optind >= argc)
		return ctl_usage("lease", "missing SIZE");
	size_text = argv[optind++];
	if (optind < argc)
		return ctl_usage("lease", "unexpected argument '%s'", argv[optind]);
	err = size_parse(size_text, &req.size);
	if (err)
		return ctl_usage("lease", "invalid SIZE '%s' (%s)", size_text,
				 err == -ERANGE ? "too large"
						: "bytes with an optional K, M, G or T suffix");
	if (req.size == 0)
		return ctl_usage("lease", "SIZE must be larger than 0");
	req.tag = tag;

	rc = ctl_connect(&ctl, &client);
	if (rc)
		return rc;
	/* While waiting for memory, Ctrl-C simply ends the process: the daemon drops the
	 * request with the connection. */
	err = rocmmem_lease_acquire(client, &req, &lease);
	if (err) {
		rc = ctl_fail("lease refused", err);
		rocmmem_disconnect(client);
		return rc;
	}
	/* While holding, signals become readable on an fd so that Ctrl-C releases cleanly. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sigfd < 0) {
		perror("rocmmemctl: signalfd");
		rocmmem_disconnect(client);
		return CTL_EXIT_USAGE;
	}
	print_lease(&ctl, lease, tag, hold_ms);
	rc = hold(client, hold_ms, sigfd);
	if (rc == 0) {
		uint64_t id = rocmmem_lease_id(lease);

		err = rocmmem_lease_release(lease);
		if (err)
			rc = ctl_fail("release", err);
		else if (!ctl.json)
			printf("released lease %llu\n", (unsigned long long)id);
	}
	rocmmem_disconnect(client);
	close(sigfd);
	return rc;
}
