/* SPDX-License-Identifier: MIT */
/* lease.c: `rocmmemctl lease`: acquire a lease, print it, hold it, release it. */
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common.h"
#include "errors.h"
#include "format.h"
#include "json.h"
#include "lease.h"
#include "progress.h"
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

/*
 * hold waits until hold_ms passes (< 0: forever), SIGINT/SIGTERM/SIGHUP arrive, or the daemon
 * ends the lease. Returns 0 when the lease is still ours to release, else CTL_EXIT_UNREACHABLE.
 */
static int hold(rocmmem_client *client, int64_t hold_ms, int sigfd)
{
	struct hold_state h = {0};
	int64_t end = hold_ms < 0 ? -1 : ctl_monotonic_ms() + hold_ms;

	rocmmem_set_event_callback(client, on_event, &h);
	for (;;) {
		struct pollfd fds[2] = {
		    {.fd = sigfd, .events = POLLIN},
		    {.fd = rocmmem_event_fd(client), .events = POLLIN},
		};
		int64_t left = end < 0 ? -1 : end - ctl_monotonic_ms();
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
				return ctl_error(NULL, CTL_EXIT_UNREACHABLE, -ECONNRESET,
						 "lost the lease: %s", h.why);
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
		ctl_json_print(o);
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

/* parse_lease reads `lease SIZE [options]` into req, tag and hold_ms. Returns 0 or the exit. */
static int parse_lease(struct ctl *ctl, int argc, char **argv, struct rocmmem_lease_request *req,
		       int64_t *hold_ms)
{
	long device;
	int c, rc;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0) {
		switch (c) {
		case 'H':
			if (duration_parse(ctl->optarg, hold_ms) < 0)
				return ctl_usage(ctl, "invalid --hold '%s' (seconds, or inf)",
						 ctl->optarg);
			break;
		case 't':
			req->tag = ctl->optarg;
			break;
		case 'T':
			if (duration_parse(ctl->optarg, &req->timeout_ms) < 0)
				return ctl_usage(ctl, "invalid --timeout '%s' (seconds, or inf)",
						 ctl->optarg);
			break;
		case 'd':
			if (ctl_parse_device(ctl->optarg, &device) < 0)
				return ctl_usage(ctl, "invalid --device '%s'", ctl->optarg);
			req->device = (unsigned)device;
			break;
		}
	}
	if (c < 0)
		return CTL_DONE;
	if (optind >= argc)
		return ctl_usage(ctl, "missing SIZE");
	rc = ctl_size_arg(ctl, argv[optind], &req->size);
	if (rc)
		return rc;
	if (++optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	if (req->size == 0)
		return ctl_usage(ctl, "SIZE must be larger than 0");
	return CTL_EXIT_OK;
}

/* acquire asks for the lease, saying on stderr how the wait goes if it has to queue. */
static int acquire(const struct ctl *ctl, rocmmem_client *client,
		   const struct rocmmem_lease_request *req, rocmmem_lease **lease)
{
	struct ctl_progress *progress = NULL;
	int err;

	/* Without progress the lease still goes ahead: it is only the commentary. */
	if (req->timeout_ms != 0)
		ctl_progress_start(client, req->device, req->size, ctl->json, &progress);
	/* While waiting for memory, Ctrl-C simply ends the process: the daemon drops the
	 * request with the connection. */
	err = rocmmem_lease_acquire(client, req, lease);
	ctl_progress_stop(progress, err == 0, err == 0 ? rocmmem_lease_waited_ms(*lease) : 0);
	if (err)
		return ctl_fail(ctl, "lease refused", err);
	return CTL_EXIT_OK;
}

static int cmd_lease(struct ctl *ctl, int argc, char **argv)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req)};
	int64_t hold_ms = -1;
	rocmmem_client *client;
	rocmmem_lease *lease;
	sigset_t mask;
	int rc, err, sigfd;

	rc = parse_lease(ctl, argc, argv, &req, &hold_ms);
	if (rc)
		return rc == CTL_DONE ? ctl->exit : rc;
	rc = ctl_connect(ctl, &client);
	if (rc)
		return rc;
	rc = acquire(ctl, client, &req, &lease);
	if (rc) {
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
		rc = ctl_error(ctl, CTL_EXIT_USAGE, -errno, "signalfd: %s", strerror(errno));
		rocmmem_disconnect(client);
		return rc;
	}
	print_lease(ctl, lease, req.tag, hold_ms);
	rc = hold(client, hold_ms, sigfd);
	if (rc == 0) {
		uint64_t id = rocmmem_lease_id(lease);

		err = rocmmem_lease_release(lease);
		if (err)
			rc = ctl_fail(ctl, "release", err);
		else if (!ctl->json)
			printf("released lease %llu\n", (unsigned long long)id);
	}
	rocmmem_disconnect(client);
	close(sigfd);
	return rc;
}

static const struct ctl_option lease_options[] = {
    {"hold", 'H', "SECONDS", "hold it this long, then release it\n(default: until Ctrl-C)"},
    {"tag", 't', "TAG", "a tag for status to show"},
    {"timeout", 'T', "SECONDS",
     "wait at most this long for the memory (default 0:\n"
     "refused at once if it does not fit; inf: no limit)"},
    {"device", 'd', "N", "the device (default 0)"},
    {NULL, 0, NULL, NULL},
};

const struct ctl_command ctl_lease_command = {
    .name = "lease",
    .run = cmd_lease,
    .args = "SIZE",
    .summary = "acquire a lease, print it and hold it until the time passes or Ctrl-C",
    .details = "SIZE is bytes or a binary unit: K, M, G, T (KiB, MiB, GiB, TiB), as in 512M or\n"
	       "1.5G. A request that does not fit waits in the device's queue; while it waits,\n"
	       "stderr says where it stands (its place in the queue, the time waited), on a\n"
	       "terminal in one line kept up to date, and how long it waited once granted.\n",
    .options = lease_options,
};
