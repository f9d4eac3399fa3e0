/* SPDX-License-Identifier: MIT */
/*
 * bench_throughput.c: request rate and fairness with 1 to 256 closed-loop clients doing mixed
 * requests (lease acquire and release, model acquire and release, status), through rocmmemd and
 * through a minimal epoll echo server on the same framing, driven by the same client code.
 *
 * Every client is a thread with its own connection to each server. The echo server answers
 * each request with the packets rocmmemd sent for the same kind of request in this run (the
 * same sizes, a memfd with each grant), so the two differ only in what the server does.
 * Windows alternate between the servers, ABBA, after one warm-up window each; the ratio is
 * rocmmemd's rate over the echo server's, and the fairness is the smallest client's share of
 * the requests over the mean share.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "echo_server.h"
#include "rawclient.h"

#define MiB ((uint64_t)1 << 20)
#define MAX_LEVELS 8
#define MAX_CLIENTS 1024

/* One client's cycle: 4 lease, 4 model and 1 status request in every 9. */
enum op { OP_ACQUIRE, OP_RELEASE, OP_MODEL_ACQUIRE, OP_MODEL_RELEASE, OP_STATUS, OPS };

static const enum op cycle[] = {OP_ACQUIRE,	  OP_RELEASE,	    OP_MODEL_ACQUIRE,
				OP_MODEL_RELEASE, OP_ACQUIRE,	    OP_RELEASE,
				OP_MODEL_ACQUIRE, OP_MODEL_RELEASE, OP_STATUS};
#define CYCLE_LEN (sizeof(cycle) / sizeof(cycle[0]))

/* The request kind (ClientMessage body case) each op sends: the echo server's script key. */
static const unsigned op_kind[OPS] = {
    [OP_ACQUIRE] = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE,
    [OP_RELEASE] = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE,
    [OP_MODEL_ACQUIRE] = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_ACQUIRE,
    [OP_MODEL_RELEASE] = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RELEASE,
    [OP_STATUS] = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_STATUS};

enum server { SERVER_DAEMON, SERVER_ECHO, SERVERS };
static const char *const server_names[SERVERS] = {"rocmmemd", "echo"};

/* A client's connection to one server and where it is in its cycle. */
struct session {
	struct raw_conn conn;
	unsigned step;
	uint64_t lease_id; /* held between acquire and release */
	uint64_t model_id;
	uint64_t ops; /* completed in the current window */
	uint64_t total[SERVERS];
	struct bench_hist hist;
};

struct worker {
	pthread_t thread;
	unsigned index;
	struct session s[SERVERS];
	struct raw_capture captures[OPS]; /* worker 0, in warm-up windows */
	bool capturing;
	int err;
};

static struct {
	const char *sock[SERVERS];
	pid_t pid[SERVERS];
	pthread_barrier_t start, end;
	_Atomic int server; /* the server of the current window; -1: leave */
	atomic_bool stop;
	uint64_t stop_ns;
	unsigned nworkers;
	atomic_bool no_arena; /* a daemon connection was refused the host arena */
} shared;

/*
 * connect_to dials one server as a client: rocmmemd with the host arena (what librocmmem asks
 * for: a lease is an offset in the arena handed over once, no memfd per lease); the echo server
 * tagged (its replies are recorded ones, matched by kind).
 */
static int connect_to(enum server srv, struct raw_conn *c, const char *name)
{
	int err;

	if (srv == SERVER_ECHO)
		return raw_connect(c, shared.sock[srv], name, true, NULL);
	err = raw_connect_features(c, shared.sock[srv], name,
				   ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA);
	if (!err && !(c->features & ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA))
		atomic_store(&shared.no_arena, true);
	return err;
}

static int do_op(struct worker *w, struct session *s, enum op op)
{
	struct raw_conn *c = &s->conn;

	if (w->capturing)
		c->capture = &w->captures[op];
	switch (op) {
	case OP_ACQUIRE:
		return raw_lease_acquire(c, 2 * MiB, 0, &s->lease_id);
	case OP_RELEASE:
		return raw_lease_release(c, s->lease_id);
	case OP_MODEL_ACQUIRE:
		return raw_model_acquire(c, s->model_id, 0);
	case OP_MODEL_RELEASE:
		return raw_model_release(c, s->model_id);
	case OP_STATUS:
		return raw_status(c);
	default:
		return -EINVAL;
	}
}

/* run_window runs the closed loop on one server until told to stop. */
static void run_window(struct worker *w, enum server srv)
{
	struct session *s = &w->s[srv];

	s->ops = 0;
	while (!atomic_load_explicit(&shared.stop, memory_order_relaxed) && !w->err) {
		enum op op = cycle[s->step];
		uint64_t t0 = bench_now_ns(), t1;
		int err = do_op(w, s, op);

		t1 = bench_now_ns();
		if (err) {
			w->err = err;
			break;
		}
		s->step = (s->step + 1) % CYCLE_LEN;
		/* Only what finished inside the window counts. */
		if (t1 <= shared.stop_ns || shared.stop_ns == 0) {
			s->ops++;
			bench_hist_add(&s->hist, t1 - t0);
		}
	}
	w->s[srv].conn.capture = NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[32];

	snprintf(name, sizeof(name), "throughput-%u", w->index);
	for (unsigned srv = 0; srv < SERVERS && !w->err; srv++) {
		struct session *s = &w->s[srv];

		w->err = connect_to((enum server)srv, &s->conn, name);
		if (!w->err)
			w->err = raw_model_register(&s->conn, name, 0, 2 * MiB, 0, &s->model_id);
	}
	for (;;) {
		int srv;

		pthread_barrier_wait(&shared.start);
		srv = atomic_load(&shared.server);
		if (srv < 0)
			break;
		if (!w->err)
			run_window(w, (enum server)srv);
		pthread_barrier_wait(&shared.end);
	}
	for (unsigned srv = 0; srv < SERVERS; srv++)
		raw_close(&w->s[srv].conn);
	return NULL;
}

/* The results of one client count. */
struct level {
	unsigned clients;
	double window_s;
	unsigned windows;
	uint64_t ops[SERVERS];
	double rate[SERVERS];		 /* requests per second, over all timed windows */
	double share_min[SERVERS];	 /* the smallest client's total over the mean */
	double worst_window[SERVERS];	 /* the same, in the least fair window */
	uint64_t server_cpu_ns[SERVERS]; /* the server's CPU time over its timed windows */
	uint64_t client_cpu_ns[SERVERS]; /* this process's (every client's) */
	struct bench_hist hist[SERVERS];
	size_t status_bytes; /* what one status reply was, at this many clients */
	/* Each server's CPU per request kind, timed alone while the clients sit connected. */
	double kind_cpu_us[SERVERS][3];
};

static int window(struct worker *workers, unsigned n, enum server srv, double seconds, bool capture,
		  struct level *lv, bool timed)
{
	uint64_t start, end, min = UINT64_MAX, sum = 0, srv0, srv1, stat, cli0, cli1;
	struct rusage ru;

	bench_proc_cpu(shared.pid[srv], &stat, &srv0);
	getrusage(RUSAGE_SELF, &ru);
	cli0 = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
	workers[0].capturing = capture;
	atomic_store(&shared.stop, false);
	shared.stop_ns = 0;
	atomic_store(&shared.server, (int)srv);
	pthread_barrier_wait(&shared.start);
	start = bench_now_ns();
	shared.stop_ns = start + (uint64_t)(seconds * 1e9);
	bench_sleep_ns((uint64_t)(seconds * 1e9));
	atomic_store(&shared.stop, true);
	pthread_barrier_wait(&shared.end);
	end = shared.stop_ns;
	bench_proc_cpu(shared.pid[srv], &stat, &srv1);
	getrusage(RUSAGE_SELF, &ru);
	cli1 = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
	workers[0].capturing = false;
	for (unsigned i = 0; i < n; i++) {
		if (workers[i].err) {
			fprintf(stderr, "bench_throughput: client %u failed (%s window): %s\n", i,
				server_names[srv], strerror(-workers[i].err));
			return workers[i].err;
		}
	}
	if (!timed)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct session *s = &workers[i].s[srv];

		sum += s->ops;
		if (s->ops < min)
			min = s->ops;
		s->total[srv] += s->ops;
	}
	lv->ops[srv] += sum;
	lv->server_cpu_ns[srv] += srv1 - srv0;
	lv->client_cpu_ns[srv] += cli1 - cli0;
	lv->window_s += (srv == SERVER_DAEMON) ? (double)(end - start) / 1e9 : 0.0;
	if (n > 0 && sum > 0) {
		double fair = (double)min / ((double)sum / n);

		if (lv->worst_window[srv] == 0 || fair < lv->worst_window[srv])
			lv->worst_window[srv] = fair;
	}
	return 0;
}

static int send_scripts(struct worker *w0, struct raw_conn *ctl)
{
	int err = 0;

	/* The daemon sends a client's arena fd with its first grant only: the echo server answers
	 * every grant as the daemon answers all the others, without it (the grant recorded may be
	 * a first one when worker 0 did few requests in its warm-up window). */
	for (unsigned i = 0; i < w0->captures[OP_ACQUIRE].parts; i++)
		w0->captures[OP_ACQUIRE].nfds[i] = 0;

	for (unsigned op = 0; op < OPS && !err; op++)
		err = echo_server_script(ctl, op_kind[op], &w0->captures[op]);
	return err;
}

/* The request kinds the breakdown times: lease and model pairs, and status. */
static const char *const kind_names[3] = {"lease_acquire_release", "model_acquire_release",
					  "status"};

/*
 * breakdown times k requests of each kind on one more connection per server while the level's
 * clients are connected and idle: the server's CPU per request (or pair) of that kind, the
 * median of BREAKDOWN_REPS batches that alternate between the servers and the kinds.
 */
#define BREAKDOWN_REPS 5
static int breakdown(struct level *lv, unsigned k)
{
	struct raw_conn *c = calloc(SERVERS, sizeof(*c));
	double v[SERVERS][3][BREAKDOWN_REPS];
	uint64_t model[SERVERS] = {0};
	int err = 0;

	if (!c)
		return -ENOMEM;
	for (unsigned srv = 0; srv < SERVERS; srv++)
		c[srv].fd = -1;
	for (unsigned srv = 0; srv < SERVERS && !err; srv++)
		if (!(err = connect_to((enum server)srv, &c[srv], "breakdown")))
			err = raw_model_register(&c[srv], "breakdown", 0, 2 * MiB, 0, &model[srv]);
	for (unsigned rep = 0; rep < BREAKDOWN_REPS && !err; rep++) {
		for (unsigned srv = 0; srv < SERVERS && !err; srv++) {
			for (unsigned kind = 0; kind < 3 && !err; kind++) {
				uint64_t stat, cpu0 = 0, cpu1;

				/* The first few warm up (the server's wake-up path): not counted.
				 */
				for (unsigned i = 0; i < k + 10 && !err; i++) {
					uint64_t id;

					if (i == 10)
						bench_proc_cpu(shared.pid[srv], &stat, &cpu0);
					if (kind == 0 &&
					    !(err = raw_lease_acquire(&c[srv], 2 * MiB, 0, &id)))
						err = raw_lease_release(&c[srv], id);
					else if (kind == 1 &&
						 !(err = raw_model_acquire(&c[srv], model[srv], 0)))
						err = raw_model_release(&c[srv], model[srv]);
					else if (kind == 2)
						err = raw_status(&c[srv]);
				}
				bench_proc_cpu(shared.pid[srv], &stat, &cpu1);
				v[srv][kind][rep] = (double)(cpu1 - cpu0) / 1000.0 / k;
			}
		}
	}
	for (unsigned srv = 0; srv < SERVERS && !err; srv++)
		for (unsigned kind = 0; kind < 3; kind++)
			lv->kind_cpu_us[srv][kind] = bench_median(v[srv][kind], BREAKDOWN_REPS);
	for (unsigned srv = 0; srv < SERVERS; srv++)
		raw_close(&c[srv]);
	free(c);
	return err;
}

static int run_level(struct level *lv, unsigned n, unsigned rounds, double seconds,
		     struct raw_conn *ctl, unsigned breakdown_ops)
{
	struct worker *workers = calloc(n, sizeof(*workers));
	pthread_attr_t attr;
	int err = 0;
	unsigned started = 0;

	if (!workers)
		return -ENOMEM;
	memset(lv, 0, sizeof(*lv));
	lv->clients = n;
	for (unsigned srv = 0; srv < SERVERS; srv++)
		bench_hist_init(&lv->hist[srv]);
	pthread_barrier_init(&shared.start, NULL, n + 1);
	pthread_barrier_init(&shared.end, NULL, n + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (unsigned i = 0; i < n; i++) {
		workers[i].index = i;
		for (unsigned srv = 0; srv < SERVERS; srv++) {
			workers[i].s[srv].conn.fd = -1;
			bench_hist_init(&workers[i].s[srv].hist);
		}
		if (pthread_create(&workers[i].thread, &attr, worker_main, &workers[i]) != 0) {
			err = -EAGAIN;
			break;
		}
		started++;
	}
	pthread_attr_destroy(&attr);
	if (started < n) {
		/* The barriers count n + 1: the missing threads can never arrive. */
		fprintf(stderr, "bench_throughput: Could not start %u threads\n", n);
		exit(1);
	}
	/* Warm-up: the daemon (its replies become the echo server's scripts), then the echo. */
	err = window(workers, n, SERVER_DAEMON, seconds, true, lv, false);
	if (!err)
		err = send_scripts(&workers[0], ctl);
	lv->status_bytes = workers[0].captures[OP_STATUS].len[0];
	if (!err)
		err = window(workers, n, SERVER_ECHO, seconds, false, lv, false);
	for (unsigned i = 0; i < n; i++)
		for (unsigned srv = 0; srv < SERVERS; srv++)
			bench_hist_init(&workers[i].s[srv].hist);
	for (unsigned r = 0; r < rounds && !err; r++) {
		enum server first = r % 2 ? SERVER_ECHO : SERVER_DAEMON;

		err = window(workers, n, first, seconds, false, lv, true);
		if (!err)
			err =
			    window(workers, n, (enum server)(1 - first), seconds, false, lv, true);
		lv->windows++;
	}
	if (!err)
		err = breakdown(lv, breakdown_ops);
	atomic_store(&shared.server, -1);
	pthread_barrier_wait(&shared.start);
	for (unsigned i = 0; i < n; i++)
		pthread_join(workers[i].thread, NULL);
	pthread_barrier_destroy(&shared.start);
	pthread_barrier_destroy(&shared.end);
	for (unsigned srv = 0; srv < SERVERS && !err; srv++) {
		uint64_t min = UINT64_MAX, sum = 0;

		for (unsigned i = 0; i < n; i++) {
			uint64_t t = workers[i].s[srv].total[srv];

			sum += t;
			if (t < min)
				min = t;
			bench_hist_merge(&lv->hist[srv], &workers[i].s[srv].hist);
		}
		lv->rate[srv] = lv->window_s > 0 ? (double)lv->ops[srv] / lv->window_s : 0.0;
		lv->share_min[srv] = sum ? (double)min / ((double)sum / n) : 0.0;
	}
	for (unsigned i = 0; i < n; i++)
		for (unsigned op = 0; op < OPS; op++)
			raw_capture_free(&workers[i].captures[op]);
	free(workers);
	return err;
}

static void write_level(struct bench_json *j, const struct level *lv)
{
	bench_json_object(j, NULL);
	bench_json_int(j, "clients", lv->clients);
	bench_json_int(j, "windows", lv->windows);
	bench_json_num(j, "window_s", lv->windows ? lv->window_s / lv->windows : 0.0);
	bench_json_int(j, "status_reply_bytes", (int64_t)lv->status_bytes);
	for (unsigned srv = 0; srv < SERVERS; srv++) {
		bench_json_object(j, server_names[srv]);
		bench_json_int(j, "requests", (int64_t)lv->ops[srv]);
		bench_json_num(j, "rate_per_s", lv->rate[srv]);
		bench_json_num(j, "share_min_over_mean", lv->share_min[srv]);
		bench_json_num(j, "worst_window_share_min_over_mean", lv->worst_window[srv]);
		bench_json_hist(j, "latency", &lv->hist[srv]);
		bench_json_num(
		    j, "server_cpu_us_per_request",
		    bench_ratio((double)lv->server_cpu_ns[srv] / 1000.0, (double)lv->ops[srv]));
		bench_json_num(
		    j, "clients_cpu_us_per_request",
		    bench_ratio((double)lv->client_cpu_ns[srv] / 1000.0, (double)lv->ops[srv]));
		bench_json_num(
		    j, "server_cpu_share",
		    lv->window_s > 0 ? (double)lv->server_cpu_ns[srv] / 1e9 / lv->window_s : 0.0);
		bench_json_end_object(j);
	}
	bench_json_num(j, "ratio", bench_ratio(lv->rate[SERVER_DAEMON], lv->rate[SERVER_ECHO]));
	bench_json_object(j, "server_cpu_us_per_kind");
	for (unsigned kind = 0; kind < 3; kind++) {
		bench_json_object(j, kind_names[kind]);
		for (unsigned srv = 0; srv < SERVERS; srv++)
			bench_json_num(j, server_names[srv], lv->kind_cpu_us[srv][kind]);
		bench_json_end_object(j);
	}
	bench_json_end_object(j);
	bench_json_end_object(j);
}

static int parse_list(const char *s, unsigned *out, unsigned max)
{
	unsigned n = 0;

	while (*s && n < max) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v == 0 || v > MAX_CLIENTS)
			return -1;
		out[n++] = (unsigned)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return (int)n;
}

int main(int argc, char **argv)
{
	static const char *const daemon_args[] = {"--backend", "host", "--budget", "3G", NULL};
	unsigned levels[MAX_LEVELS] = {1, 4, 16, 64, 256}, nlevels = 5, rounds;
	struct raw_capture hello = {0}, reg = {0};
	struct level results[MAX_LEVELS];
	struct bench_daemon d = {0};
	struct raw_conn *ctl = calloc(1, sizeof(*ctl)), *probe = calloc(1, sizeof(*probe));
	struct bench_args args;
	char echo_sock[160];
	struct bench_json j;
	double seconds;
	pid_t echo = -1;
	int err = 0, status = 1;
	uint64_t model;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0 || !ctl || !probe)
		return 2;
	for (int i = 1; i < argc; i++) {
		int n;

		if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc &&
		    (n = parse_list(argv[i + 1], levels, MAX_LEVELS)) > 0) {
			nlevels = (unsigned)n;
			i++;
		} else {
			return bench_usage("bench_throughput", " [--clients N,N,...]");
		}
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_throughput");
	seconds = (double)bench_mode_pick(&args, 100, 300, 1500) / 1000.0;
	rounds = (unsigned)bench_mode_pick(&args, 1, 2, 4);
	/* Two connections per client, and the daemon's: well within a raised limit. */
	bench_raise_nofile(4 * MAX_CLIENTS + 256);
	ctl->fd = probe->fd = -1;
	if ((err = bench_daemon_start(&d, args.rocmmemd, -1, daemon_args, NULL)))
		goto out;
	snprintf(echo_sock, sizeof(echo_sock), "%s/echo.sock", d.dir);
	echo = echo_server_start(echo_sock);
	if (echo < 0) {
		err = (int)echo;
		goto out;
	}
	/* The replies to hello and register, for the echo server's scripts. */
	if ((err = raw_connect(probe, d.sock, "throughput-probe", false, &hello)))
		goto out;
	probe->capture = &reg;
	if ((err = raw_model_register(probe, "probe", 0, 2 * MiB, 0, &model)))
		goto out;
	raw_close(probe);
	/* The control connection says no hello: the echo server needs none. */
	ctl->fd = raw_dial(echo_sock);
	if (ctl->fd < 0) {
		err = ctl->fd;
		goto out;
	}
	if ((err = echo_server_script(ctl, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO, &hello)) ||
	    (err =
		 echo_server_script(ctl, ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER, &reg)))
		goto out;
	shared.sock[SERVER_DAEMON] = d.sock;
	shared.sock[SERVER_ECHO] = echo_sock;
	shared.pid[SERVER_DAEMON] = d.pid;
	shared.pid[SERVER_ECHO] = echo;
	for (unsigned i = 0; i < nlevels && !err; i++) {
		bench_log("%u client(s)", levels[i]);
		err = run_level(&results[i], levels[i], rounds, seconds, ctl,
				(unsigned)bench_mode_pick(&args, 20, 150, 400));
	}
	if (err)
		goto out;
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "throughput");
	bench_json_str(&j, "mix",
		       "per 9 requests: 2 lease acquire, 2 lease release, 2 model "
		       "acquire, 2 model release, 1 status");
	bench_json_int(&j, "rounds", rounds);
	bench_json_bool(&j, "host_arena", !atomic_load(&shared.no_arena));
	bench_json_array(&j, "levels");
	for (unsigned i = 0; i < nlevels; i++)
		write_level(&j, &results[i]);
	bench_json_end_array(&j);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	if (err)
		fprintf(stderr, "bench_throughput: failed: %s\n", strerror(-err));
	raw_close(ctl);
	if (echo > 0) {
		kill(echo, SIGTERM);
		waitpid(echo, NULL, 0);
	}
	if (d.pid > 0 && bench_daemon_stop(&d) != 0)
		status = 1;
	raw_capture_free(&hello);
	raw_capture_free(&reg);
	free(ctl);
	free(probe);
	return status;
}
