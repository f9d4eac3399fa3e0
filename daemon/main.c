/* SPDX-License-Identifier: MIT */
/* main.c: rocmmemd's start-up, signal handling and clean exit; the only place that exits. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "backend.h"
#include "log.h"
#include "metrics.h"
#include "options.h"
#include "server.h"
#include "sockpath.h"
#include "version.h"

/* How often each device's runtime memory figures are read. */

struct signals {
	uv_signal_t sigint, sigterm;
	struct server *server;
	struct metrics_file *metrics; /* NULL without --metrics-textfile */
};

/*
 * raise_fd_limit lifts the soft RLIMIT_NOFILE to the hard one: the daemon holds one fd per
 * host lease, and the default soft limit of 1024 would surface as false "out of memory".
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rlim_t old = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			log_debug("raised the open-files limit from %llu to %llu",
				  (unsigned long long)old, (unsigned long long)rl.rlim_max);
	}
}

static void on_signal(uv_signal_t *handle, int signum)
{
	struct signals *sig = handle->data;

	server_stop(sig->server,
		    signum == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)");
	if (sig->metrics)
		metrics_file_stop(sig->metrics);
	uv_close((uv_handle_t *)&sig->sigint, NULL);
	uv_close((uv_handle_t *)&sig->sigterm, NULL);
}

static void log_leftover(uv_handle_t *handle, void *arg)
{
	(void)arg;
	log_error("handle of type %s still open at exit", uv_handle_type_name(handle->type));
}

int main(int argc, char **argv)
{
	char path[sizeof(((struct server *)0)->path)];
	struct metrics_file metrics;
	char why[PATH_MAX + 128];
	struct budget_config budget = {0};
	struct residency_config residency = {0};
	struct backend *backend = NULL;
	struct signals sig;
	struct options opts;
	struct server *s;
	uv_loop_t loop;
	int rc;

	rc = options_parse(argc, argv, &opts, stdout, stderr);
	if (rc == 1)
		return ROCMMEMD_EXIT_OK;
	if (rc < 0)
		return ROCMMEMD_EXIT_USAGE;
	log_init(opts.log_level);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();

	if (backend_set_sharing(opts.sharing) < 0) {
		log_error("Unknown sharing method '%s'", opts.sharing);
		return ROCMMEMD_EXIT_USAGE;
	}
	rc = sockpath_resolve(opts.socket_path, SOCKPATH_DAEMON, path, sizeof(path));
	if (rc == -ENOENT) {
		log_error(
		    "Could not choose a socket path: not running as root and $XDG_RUNTIME_DIR "
		    "is unset; pass --socket PATH or set %s",
		    SOCKPATH_ENV);
		return ROCMMEMD_EXIT_USAGE;
	}
	if (rc < 0) {
		log_error("Could not use the socket path: %s", strerror(-rc));
		return ROCMMEMD_EXIT_USAGE;
	}

	if (opts.metrics_textfile) {
		rc = metrics_file_open(&metrics, opts.metrics_textfile, opts.metrics_interval_ms,
				       why, sizeof(why));
		if (rc < 0) {
			log_error("Could not write the metrics to %s: %s", opts.metrics_textfile,
				  why);
			return ROCMMEMD_EXIT_FAILURE;
		}
	}

	if (backend_open(opts.backend, &backend) < 0)
		return ROCMMEMD_EXIT_FAILURE;
	s = calloc(1, sizeof(*s));
	if (!s || uv_loop_init(&loop) != 0) {
		log_error("Could not start: out of memory");
		backend->ops->destroy(backend);
		free(s);
		return ROCMMEMD_EXIT_FAILURE;
	}
	server_default_limits(&s->limits);
	budget.has_budget = opts.has_budget;
	budget.budget = opts.budget;
	budget.has_headroom = opts.has_headroom;
	budget.headroom = opts.headroom;
	if (opts.has_budget && opts.has_headroom)
		log_warn("--budget given: --headroom is ignored");
	residency.evict_deadline_ms = opts.evict_deadline_ms;
	residency.exclusive_all = opts.exclusive_all;
	memcpy(residency.exclusive, opts.exclusive, sizeof(residency.exclusive));
	rc = arbiter_init(&s->arbiter, s, &loop, backend, &budget, &residency);
	if (rc < 0) {
		s->arbiter.backend = backend;
		arbiter_finish(&s->arbiter);
		uv_loop_close(&loop);
		free(s);
		return rc == -EINVAL ? ROCMMEMD_EXIT_USAGE : ROCMMEMD_EXIT_FAILURE;
	}
	rc = feed_init(&s->feed, s, &loop);
	if (rc == 0)
		rc = server_listen(s, &loop, path);
	if (rc < 0) {
		if (s->feed.running) {
			feed_stop(&s->feed);
			uv_run(&loop, UV_RUN_DEFAULT); /* lets the timers close */
		}
		feed_finish(&s->feed);
		arbiter_finish(&s->arbiter);
		uv_loop_close(&loop);
		free(s);
		return ROCMMEMD_EXIT_FAILURE;
	}

	rc = sampler_start(&s->sampler, &loop, &s->arbiter, SAMPLER_DEFAULT_INTERVAL_MS);
	if (rc < 0)
		log_warn("Could not start sampling device memory: %s", uv_strerror(rc));

	sig.server = s;
	sig.metrics = NULL;
	if (opts.metrics_textfile) {
		rc = metrics_file_start(&metrics, s, &loop);
		if (rc < 0)
			log_error("Could not start writing the metrics to %s: %s",
				  opts.metrics_textfile, uv_strerror(rc));
		else
			sig.metrics = &metrics;
	}
	uv_signal_init(&loop, &sig.sigint);
	uv_signal_init(&loop, &sig.sigterm);
	sig.sigint.data = sig.sigterm.data = &sig;
	uv_signal_start(&sig.sigint, on_signal, SIGINT);
	uv_signal_start(&sig.sigterm, on_signal, SIGTERM);

	log_info("rocmmemd %s listening on %s (protocol %u); query it with: rocmmemctl --socket %s "
		 "status",
		 ROCMMEM_VERSION_STRING, path, ROCMMEM_PROTOCOL_VERSION, path);
	uv_run(&loop, UV_RUN_DEFAULT);

	/* Every client and handle is closed by now; anything left is a bug worth seeing. */
	feed_finish(&s->feed);
	sampler_finish(&s->sampler);
	arbiter_finish(&s->arbiter);
	if (uv_loop_close(&loop) != 0) {
		uv_walk(&loop, log_leftover, NULL);
		rc = ROCMMEMD_EXIT_FAILURE;
	} else {
		rc = ROCMMEMD_EXIT_OK;
	}
	free(s);
	log_info("stopped");
	return rc;
}
