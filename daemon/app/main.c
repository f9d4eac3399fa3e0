/* SPDX-License-Identifier: MIT */
/* main.c: rocmmemd's start-up, signal handling and clean exit; the only place that exits. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "base/log.h"
#include "config.h"
#include "hooks.h"
#include "metrics_file.h"
#include "net/dispatch.h"
#include "net/drain.h"
#include "net/encode.h"
#include "net/feed.h"
#include "net/listener.h"
#include "net/server.h"
#include "options_cli.h"
#include "platform/backend/registry.h"
#include "platform/systemd.h"
#include "service/adopt.h"
#include "service/service.h"
#include "settings.h"
#include "sockpath.h"
#include "version.h"

struct signals {
	uv_signal_t sigint, sigterm, sighup;
	struct server *server;
	struct settings *settings;
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

/* on_stopped runs once the last client is gone: the remaining handles close, the loop ends. */
static void on_stopped(struct server *s, void *data)
{
	struct signals *sig = data;

	(void)s;
	systemd_stop();
	uv_close((uv_handle_t *)&sig->sigint, NULL);
	uv_close((uv_handle_t *)&sig->sigterm, NULL);
	uv_close((uv_handle_t *)&sig->sighup, NULL);
}

/* on_signal starts the graceful stop (the drain); a second SIGINT or SIGTERM cuts it short. */
static void on_signal(uv_signal_t *handle, int signum)
{
	struct signals *sig = handle->data;
	const char *why = signum == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";

	if (sig->server->stopping) {
		server_stop_now(sig->server, why);
		return;
	}
	systemd_stopping(sig->server->svc.cfg.limits.shutdown_timeout_ms);
	if (sig->metrics)
		metrics_file_stop(sig->metrics);
	server_stop(sig->server, why);
}

/* on_reload re-reads the configuration file (SIGHUP). */
static void on_reload(uv_signal_t *handle, int signum)
{
	struct signals *sig = handle->data;

	(void)signum;
	if (sig->server->stopping)
		return; /* stopping already: nothing left to configure */
	log_info("SIGHUP: reloading the configuration");
	systemd_reloading();
	systemd_reloaded(settings_reload(sig->settings, sig->server) == 0);
}

/* load_settings combines flags and file; prints why not and returns the exit status if bad. */
static int load_settings(struct settings *st, struct command_line *cl)
{
	char why[1024];

	if (settings_load(st, cl, why, sizeof(why)) < 0) {
		fprintf(stderr, "rocmmemd: %s\n", why);
		settings_free(st);
		return ROCMMEMD_EXIT_USAGE;
	}
	return ROCMMEMD_EXIT_OK;
}

/* check_config prints the configuration as it applies (--check-config). */
static int check_config(const struct settings *st)
{
	char path[sizeof(((struct server *)0)->path)];
	int rc = sockpath_resolve(st->current.socket_path, SOCKPATH_DAEMON, path, sizeof(path));

	config_print(&st->current, rc == 0 ? path : NULL, st->found ? st->path : NULL, stdout);
	return fflush(stdout) == 0 ? ROCMMEMD_EXIT_OK : ROCMMEMD_EXIT_FAILURE;
}

/*
 * host_fallback_refused: under a service manager, a GPU device node with no runtime that can
 * use it is a broken install, not a machine without a GPU; serving system RAM as if it were
 * the GPU's memory would hide that from every client. An explicit `backend = host` (never a
 * fallback) is the way to run on host memory there. Returns true after logging why.
 */
static bool host_fallback_refused(void)
{
	const char *why = backend_host_fallback();
	char node[512];

	if (!why || (!getenv("NOTIFY_SOCKET") && !getenv("INVOCATION_ID")))
		return false;
	if (!backend_gpu_node(node, sizeof(node)))
		return false;
	log_error("Could not use the GPU: %s is present but no GPU runtime loaded (%s); not "
		  "serving host memory in its place under the service manager. Install the runtime "
		  "(docs/backends.md), or set backend = host in the configuration to serve host "
		  "memory on purpose",
		  node, why);
	return true;
}

static void log_leftover(uv_handle_t *handle, void *arg)
{
	(void)arg;
	log_error("handle of type %s still open at exit", uv_handle_type_name(handle->type));
}

/* What run sets up, and takes down again. */
struct daemon {
	const struct settings *settings;
	uv_loop_t loop;
	struct server *s;
	struct svc_clock clock;
	struct job_runner runner;
	struct metrics_file metrics;
	bool metrics_open;
	struct signals sig;
	char path[sizeof(((struct server *)0)->path)];
};

/* prepare resolves the socket path and checks the metrics file. Returns an exit status. */
static int prepare(struct daemon *dm)
{
	const struct options *opts = &dm->settings->current;
	char why[PATH_MAX + 128];
	int rc;

	if (backend_set_sharing(opts->sharing) < 0) {
		log_error("Unknown sharing method '%s'", opts->sharing);
		return ROCMMEMD_EXIT_USAGE;
	}
	rc = sockpath_resolve(opts->socket_path, SOCKPATH_DAEMON, dm->path, sizeof(dm->path));
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
	if (!opts->metrics_textfile)
		return ROCMMEMD_EXIT_OK;
	rc = metrics_file_open(&dm->metrics, opts->metrics_textfile, opts->metrics_interval_ms, why,
			       sizeof(why));
	/* A path that can never work is the configuration's fault; a directory that is
	 * missing or not writable yet may become usable: serve, and try every interval. */
	if (rc == -EISDIR || rc == -ENAMETOOLONG) {
		log_error("Could not write the metrics to %s: %s", opts->metrics_textfile, why);
		return ROCMMEMD_EXIT_USAGE;
	}
	if (rc < 0)
		log_error("Could not write the metrics to %s: %s; serving anyway, trying again "
			  "every %g s",
			  opts->metrics_textfile, why, (double)opts->metrics_interval_ms / 1000.0);
	dm->metrics_open = true;
	return ROCMMEMD_EXIT_OK;
}

/* start_core opens the backend and sets up the service on it. Returns an exit status. */
static int start_core(struct daemon *dm)
{
	const struct options *opts = &dm->settings->current;
	struct budget_config budgets[BACKEND_MAX_DEVICES];
	struct residency_config residency;
	struct backend *backend = NULL;
	struct policy_config cfg;
	struct svc_sink sink;
	int rc;

	if (backend_open(opts->backend, &backend) < 0)
		return ROCMMEMD_EXIT_FAILURE;
	if (host_fallback_refused()) {
		backend->ops->destroy(backend);
		return ROCMMEMD_EXIT_USAGE; /* like a bad configuration: restarting won't help */
	}
	dm->s = calloc(1, sizeof(*dm->s));
	if (!dm->s || uv_loop_init(&dm->loop) != 0) {
		log_error("Could not start: out of memory");
		backend->ops->destroy(backend);
		free(dm->s);
		dm->s = NULL;
		return ROCMMEMD_EXIT_FAILURE;
	}
	settings_socket(opts, &dm->s->socket_access);
	settings_budgets(opts, budgets);
	settings_residency(opts, &residency);
	settings_policy(opts, &cfg);
	cfg.daemon_uid = geteuid();
	if ((opts->devices.has_budget && opts->devices.has_headroom))
		log_warn("a budget and a headroom for every device given together: the headroom "
			 "is ignored");
	if (dm->settings->found)
		log_info("configuration read from %s", dm->settings->path);
	dm->clock = hooks_clock(&dm->loop);
	dm->runner = hooks_runner(&dm->loop);
	rc = svc_init(&dm->s->svc, backend, budgets, &residency, &cfg, &dm->clock, &dm->runner);
	if (rc < 0) {
		svc_finish(&dm->s->svc);
		uv_loop_close(&dm->loop);
		free(dm->s);
		dm->s = NULL;
		return rc == -EINVAL ? ROCMMEMD_EXIT_USAGE : ROCMMEMD_EXIT_FAILURE;
	}
	settings_pool(opts, &dm->s->svc.pool_cfg);
	sink = encode_sink(dm->s);
	svc_set_sink(&dm->s->svc, &sink);
	server_start_timer(dm->s, &dm->loop);
	/* What happens is told to the log first, then counted, kept (denials) and streamed. */
	eventlog_subscribe(&dm->s->svc.eventlog, &dm->s->svc.bus);
	counters_subscribe(&dm->s->svc.counters, &dm->s->svc.bus);
	denials_subscribe(&dm->s->svc.denials, &dm->s->svc.bus);
	return ROCMMEMD_EXIT_OK;
}

/* start_net starts the feed and listens. Returns an exit status (all taken down on failure). */
static int start_net(struct daemon *dm)
{
	struct server *s = dm->s;
	int rc = feed_init(&s->feed, s, &dm->loop);

	if (rc == 0)
		rc = feed_subscribe_bus(&s->feed, &s->svc.bus);
	dispatch_install(s);
	if (rc == 0)
		rc = server_listen(s, &dm->loop, dm->path);
	if (rc == 0)
		return ROCMMEMD_EXIT_OK;
	if (s->feed.running) {
		feed_stop(&s->feed);
		uv_run(&dm->loop, UV_RUN_DEFAULT); /* lets the timers close */
	}
	feed_finish(&s->feed);
	server_finish(s);
	svc_finish(&s->svc);
	uv_loop_close(&dm->loop);
	free(s);
	dm->s = NULL;
	return ROCMMEMD_EXIT_FAILURE;
}

/* start_aside takes over what a predecessor left, and starts sampling and the metrics file. */
static void start_aside(struct daemon *dm)
{
	const struct options *opts = &dm->settings->current;
	char state_path[sizeof(((struct server *)0)->path) + 64];
	char pci[BACKEND_MAX_DEVICES][SAMPLER_PCI_MAX];
	struct server *s = dm->s;
	struct sampler_hooks hooks = hooks_sampler(&s->svc);
	int rc;

	/* Before the first client: what a predecessor that died left is accounted at once. */
	rc = adopt_state_path(opts->restart_grace_ms ? NULL : "none", s->path, s->activated,
			      state_path, sizeof(state_path));
	if (rc < 0)
		log_error("Could not name a state file beside %s: %s", s->path, strerror(-rc));
	rc = adopt_start(&s->svc, rc == 0 ? state_path : NULL, opts->restart_grace_ms);
	if (rc < 0)
		log_error("Could not take over the previous daemon's leases: %s", strerror(-rc));
	for (unsigned i = 0; i < s->svc.state.ndevices; i++)
		snprintf(pci[i], sizeof(pci[i]), "%s", s->svc.state.devices[i].pci_bus_id);
	rc = sampler_start(&s->sampler, &dm->loop, s->svc.backend, pci, s->svc.state.ndevices,
			   &hooks, SAMPLER_DEFAULT_INTERVAL_MS);
	if (rc < 0)
		log_warn("Could not start sampling device memory: %s", uv_strerror(rc));
	dm->sig.metrics = NULL;
	if (dm->metrics_open) {
		rc = metrics_file_start(&dm->metrics, s, &dm->loop);
		if (rc < 0)
			log_error("Could not start writing the metrics to %s: %s",
				  opts->metrics_textfile, uv_strerror(rc));
		else
			dm->sig.metrics = &dm->metrics;
	}
}

/* install_signals: SIGINT and SIGTERM stop the daemon gracefully, SIGHUP reloads. */
static void install_signals(struct daemon *dm, struct settings *settings)
{
	struct signals *sig = &dm->sig;

	sig->server = dm->s;
	dm->s->on_stopped = on_stopped;
	dm->s->stopped_data = sig;
	sig->settings = settings;
	uv_signal_init(&dm->loop, &sig->sigint);
	uv_signal_init(&dm->loop, &sig->sigterm);
	uv_signal_init(&dm->loop, &sig->sighup);
	sig->sigint.data = sig->sigterm.data = sig->sighup.data = sig;
	uv_signal_start(&sig->sigint, on_signal, SIGINT);
	uv_signal_start(&sig->sigterm, on_signal, SIGTERM);
	uv_signal_start(&sig->sighup, on_reload, SIGHUP);
}

/* serve runs the loop until the daemon has stopped, then takes everything down. */
static int serve(struct daemon *dm)
{
	struct server *s = dm->s;
	struct systemd_source source = hooks_systemd(s);
	int rc;

	log_info("rocmmemd %s listening on %s (protocol %u); query it with: rocmmemctl --socket %s "
		 "status",
		 ROCMMEM_VERSION_STRING, s->path, ROCMMEM_PROTOCOL_VERSION, s->path);
	/* Ready for systemd only now: the backends are up and the socket accepts. */
	if (systemd_init(&dm->loop, &source) < 0)
		log_warn("Could not keep the service manager informed; serving anyway");
	uv_run(&dm->loop, UV_RUN_DEFAULT);

	/* Every client and handle is closed by now; anything left is a bug worth seeing. A clean
	 * stop reclaimed every lease: no state is left for a successor. */
	adopt_finish(&s->svc, true);
	feed_finish(&s->feed);
	sampler_finish(&s->sampler);
	server_finish(s);
	svc_finish(&s->svc);
	if (uv_loop_close(&dm->loop) != 0) {
		uv_walk(&dm->loop, log_leftover, NULL);
		rc = ROCMMEMD_EXIT_FAILURE;
	} else {
		rc = ROCMMEMD_EXIT_OK;
	}
	free(s);
	log_info("stopped");
	return rc;
}

/* run starts the daemon with the settings and serves until it is stopped; the exit status. */
static int run(struct settings *settings)
{
	struct daemon *dm = calloc(1, sizeof(*dm));
	sigset_t stop_signals;
	int rc;

	log_init(settings->current.log_level);
	if (!dm) {
		log_error("Could not start: out of memory");
		return ROCMMEMD_EXIT_FAILURE;
	}
	dm->settings = settings;
	signal(SIGPIPE, SIG_IGN);
	/*
	 * Until the loop's handlers are installed, once the socket listens and what a previous
	 * daemon left is taken over, a stop signal waits instead of killing the daemon: a client
	 * may connect and stop it at once, and must get the clean stop. Threads started
	 * meanwhile (GPU runtimes, libuv's workers) keep them blocked.
	 */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	raise_fd_limit();
	rc = prepare(dm);
	if (rc == ROCMMEMD_EXIT_OK)
		rc = start_core(dm);
	if (rc == ROCMMEMD_EXIT_OK)
		rc = start_net(dm);
	if (rc == ROCMMEMD_EXIT_OK) {
		start_aside(dm);
		install_signals(dm, settings);
		pthread_sigmask(SIG_UNBLOCK, &stop_signals, NULL);
		rc = serve(dm);
	}
	free(dm);
	return rc;
}

int main(int argc, char **argv)
{
	struct command_line cl;
	struct settings settings;
	int rc;

	rc = options_parse(argc, argv, &cl, stdout, stderr);
	if (rc == 1)
		return ROCMMEMD_EXIT_OK;
	if (rc < 0)
		return ROCMMEMD_EXIT_USAGE;
	rc = load_settings(&settings, &cl);
	if (rc != ROCMMEMD_EXIT_OK)
		return rc;
	rc = cl.check_config ? check_config(&settings) : run(&settings);
	settings_free(&settings);
	return rc;
}
