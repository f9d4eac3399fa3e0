/* SPDX-License-Identifier: MIT */
/*
 * bench_telemetry.c: what telemetry subscribers cost the daemon. With no subscriber, one at
 * 10 Hz, one at 100 Hz, and 1000 samples a second (ten subscribers at 100 Hz: the daemon's
 * shortest interval is 10 ms, so one subscriber cannot ask for 1000 Hz), each subscribing to
 * samples and events as `rocmmemctl watch` does: the daemon's CPU time over an idle window
 * (utime+stime from /proc/PID/stat, and schedstat's nanoseconds), and the lease round trip
 * (acquire + map + touch + unmap + release) timed while they run. The configurations take turns
 * in every round, the order rotating, and each is compared with no subscriber in the same round.
 *
 * Eight idle clients, each holding a lease and a resident model, give the samples something to
 * say. Subscribers run in a child process, one connection each, dispatching from poll().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rawclient.h"
#include "rocmmem.h"

#define MiB ((uint64_t)1 << 20)
#define POPULATION 8
#define MAX_SUBSCRIBERS 16

struct config {
	const char *name;
	unsigned subscribers;
	uint32_t interval_ms;
	double hz; /* samples per second asked for, all subscribers */
	struct bench_hist rt;
	double cpu_stat_s, cpu_sched_s, wall_s;
	double samples, events, subscribed_s;
	/* Per round, for the ratios against "off" in the same round. */
	double share[16];
	double p99[16];
};

static struct config configs[] = {
    {.name = "off", .subscribers = 0},
    {.name = "10Hz", .subscribers = 1, .interval_ms = 100, .hz = 10},
    {.name = "100Hz", .subscribers = 1, .interval_ms = 10, .hz = 100},
    {.name = "1000Hz", .subscribers = 10, .interval_ms = 10, .hz = 1000},
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

struct counts {
	uint64_t samples, events;
};

static void count_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct counts *n = userdata;

	(void)c;
	if (ev->type == ROCMMEM_EVENT_SAMPLE)
		n->samples++;
	else if (ev->type == ROCMMEM_EVENT_TELEMETRY)
		n->events++;
}

/*
 * subscriber_main subscribes n connections and dispatches until its command pipe closes, then
 * writes what it received. It says "ready" (one byte) once all are subscribed.
 */
static int subscriber_main(const char *sock, unsigned n, uint32_t interval, int cmd, int report)
{
	rocmmem_client *c[MAX_SUBSCRIBERS];
	struct counts counts = {0};
	struct pollfd p[MAX_SUBSCRIBERS + 1];
	uint8_t ready = 1;

	for (unsigned i = 0; i < n; i++) {
		if (rocmmem_connect(sock, "bench-watch", 5000, &c[i]) ||
		    rocmmem_set_event_callback(c[i], count_event, &counts) ||
		    rocmmem_subscribe(c[i], ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS,
				      interval, NULL) < 0)
			return 1;
		p[i] = (struct pollfd){.fd = rocmmem_event_fd(c[i]), .events = POLLIN};
	}
	p[n] = (struct pollfd){.fd = cmd, .events = POLLIN};
	if (write(report, &ready, 1) != 1)
		return 1;
	for (;;) {
		if (poll(p, n + 1, -1) < 0)
			continue;
		if (p[n].revents)
			break;
		for (unsigned i = 0; i < n; i++)
			if (p[i].revents & POLLIN)
				rocmmem_dispatch(c[i]);
	}
	for (unsigned i = 0; i < n; i++)
		rocmmem_disconnect(c[i]);
	return write(report, &counts, sizeof(counts)) == sizeof(counts) ? 0 : 1;
}

struct subscribers {
	pid_t pid;
	int cmd, report;
};

static int subscribers_start(struct subscribers *s, const char *sock, const struct config *cf)
{
	int cmd[2], report[2];
	uint8_t ready;

	s->pid = -1;
	s->cmd = s->report = -1;
	if (cf->subscribers == 0)
		return 0;
	if (pipe2(cmd, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0)
		return -errno;
	s->pid = fork();
	if (s->pid < 0)
		return -errno;
	if (s->pid == 0) {
		close(cmd[1]);
		close(report[0]);
		_exit(subscriber_main(sock, cf->subscribers, cf->interval_ms, cmd[0], report[1]));
	}
	close(cmd[0]);
	close(report[1]);
	s->cmd = cmd[1];
	s->report = report[0];
	if (read(s->report, &ready, 1) != 1)
		return -EPROTO;
	return 0;
}

static int subscribers_stop(struct subscribers *s, struct counts *got)
{
	int status = 0;

	memset(got, 0, sizeof(*got));
	if (s->pid <= 0)
		return 0;
	close(s->cmd);
	if (read(s->report, got, sizeof(*got)) != sizeof(*got))
		memset(got, 0, sizeof(*got));
	close(s->report);
	waitpid(s->pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPROTO;
}

static int lease_op(rocmmem_client *c)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .timeout_ms = 0};
	rocmmem_lease *l;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		return err;
	((volatile uint8_t *)rocmmem_lease_ptr(l))[0] = 1;
	return rocmmem_lease_release(l);
}

/* populate connects the idle clients that samples describe (kept until the end). */
static int populate(const char *sock, struct raw_conn *pop)
{
	for (unsigned i = 0; i < POPULATION; i++) {
		char name[32];
		uint64_t lease, model;
		int err;

		snprintf(name, sizeof(name), "idle-host-%u", i);
		if ((err = raw_connect(&pop[i], sock, name, false, NULL)) ||
		    (err = raw_lease_acquire(&pop[i], 2 * MiB, 0, &lease)) ||
		    (err = raw_model_register(&pop[i], name, 1, 4 * MiB, 0, &model)) ||
		    (err = raw_model_acquire(&pop[i], model, 0)) ||
		    (err = raw_model_release(&pop[i], model)))
			return err;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const daemon_args[] = {"--backend", "host", "--budget", "1G", NULL};
	struct raw_conn *pop = calloc(POPULATION, sizeof(*pop));
	struct bench_args args;
	struct bench_daemon d = {0};
	rocmmem_client *client = NULL;
	unsigned rounds, ops;
	double window;
	struct bench_json j;
	int err = 0, status = 1, rc_1ms;
	uint32_t got_1ms = 0;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0 || !pop)
		return 2;
	if (argc > 1)
		return bench_usage("bench_telemetry", "");
	if (!args.rocmmemd)
		return bench_need_daemon("bench_telemetry");
	rounds = (unsigned)bench_mode_pick(&args, 1, 2, 4);
	window = (double)bench_mode_pick(&args, 400, 1000, 4000) / 1000.0;
	ops = (unsigned)bench_mode_pick(&args, 100, 500, 2000);
	for (unsigned i = 0; i < NCONFIGS; i++)
		bench_hist_init(&configs[i].rt);
	if ((err = bench_daemon_start(&d, args.rocmmemd, -1, daemon_args, NULL)) ||
	    (err = populate(d.sock, pop)) ||
	    (err = rocmmem_connect(d.sock, "bench-telemetry", 5000, &client)))
		goto out;
	/* What asking for 1000 Hz gets: the shortest interval is 10 ms. */
	rc_1ms = rocmmem_subscribe(client, ROCMMEM_SUBSCRIBE_SAMPLES, 1, &got_1ms);
	if (rc_1ms >= 0) {
		rc_1ms = (int)got_1ms; /* the interval in effect */
		rocmmem_unsubscribe(client);
	}
	for (unsigned r = 0; r < rounds && !err; r++) {
		for (unsigned k = 0; k < NCONFIGS && !err; k++) {
			struct config *cf = &configs[(k + r) % NCONFIGS];
			struct subscribers subs;
			struct counts got;
			uint64_t stat0, stat1, sched0, sched1, t0, t1;
			struct bench_hist rt;

			uint64_t began = bench_now_ns();

			if ((err = subscribers_start(&subs, d.sock, cf)))
				break;
			bench_sleep_ns(
			    200000000); /* the first samples come at once: let them pass */
			bench_proc_cpu(d.pid, &stat0, &sched0);
			t0 = bench_now_ns();
			bench_sleep_ns((uint64_t)(window * 1e9));
			bench_proc_cpu(d.pid, &stat1, &sched1);
			t1 = bench_now_ns();
			cf->cpu_stat_s += (double)(stat1 - stat0) / 1e9;
			cf->cpu_sched_s += (double)(sched1 - sched0) / 1e9;
			cf->wall_s += (double)(t1 - t0) / 1e9;
			cf->share[r] = (double)(sched1 - sched0) / (double)(t1 - t0);
			bench_hist_init(&rt);
			for (unsigned i = 0; i < ops && !err; i++) {
				uint64_t s = bench_now_ns();

				err = lease_op(client);
				bench_hist_add(&rt, bench_now_ns() - s);
			}
			bench_hist_merge(&cf->rt, &rt);
			cf->p99[r] = (double)bench_hist_pct(&rt, 99);
			if (subscribers_stop(&subs, &got) < 0 && !err)
				err = -EPROTO;
			cf->subscribed_s += (double)(bench_now_ns() - began) / 1e9;
			cf->samples += (double)got.samples;
			cf->events += (double)got.events;
			bench_log("round %u %s: daemon %.3f%% of a core", r + 1, cf->name,
				  100.0 * cf->share[r]);
		}
	}
	if (err) {
		fprintf(stderr, "bench_telemetry: failed: %s (%s)\n", strerror(-err),
			rocmmem_last_error());
		goto out;
	}
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "telemetry");
	bench_json_int(&j, "rounds", rounds);
	bench_json_num(&j, "window_s", window);
	bench_json_int(&j, "idle_clients", POPULATION);
	bench_json_int(&j, "subscribe_1ms_result", rc_1ms);
	bench_json_array(&j, "configs");
	for (unsigned i = 0; i < NCONFIGS; i++) {
		struct config *cf = &configs[i];
		double ratio[16], extra[16];

		for (unsigned r = 0; r < rounds; r++) {
			ratio[r] = bench_ratio(cf->p99[r], configs[0].p99[r]);
			extra[r] = cf->share[r] - configs[0].share[r];
		}
		bench_json_object(&j, NULL);
		bench_json_str(&j, "name", cf->name);
		bench_json_int(&j, "subscribers", cf->subscribers);
		bench_json_int(&j, "interval_ms", cf->interval_ms);
		bench_json_num(&j, "samples_per_s_asked", cf->hz);
		bench_json_num(&j, "samples_per_s_received",
			       cf->subscribed_s > 0 ? cf->samples / cf->subscribed_s : 0.0);
		bench_json_num(&j, "telemetry_events_received", cf->events);
		bench_json_num(&j, "daemon_core_share_stat", cf->cpu_stat_s / cf->wall_s);
		bench_json_num(&j, "daemon_core_share_schedstat", cf->cpu_sched_s / cf->wall_s);
		bench_json_num(&j, "extra_core_share_vs_off_median", bench_median(extra, rounds));
		bench_json_hist(&j, "lease_round_trip", &cf->rt);
		bench_json_num(&j, "ratio_p99_vs_off_median", bench_median(ratio, rounds));
		bench_json_end_object(&j);
	}
	bench_json_end_array(&j);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	rocmmem_disconnect(client);
	for (unsigned i = 0; i < POPULATION; i++)
		if (pop[i].fd > 0)
			raw_close(&pop[i]);
	if (d.pid > 0 && bench_daemon_stop(&d) != 0)
		status = 1;
	free(pop);
	return status;
}
