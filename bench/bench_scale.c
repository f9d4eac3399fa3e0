/* SPDX-License-Identifier: MIT */
/*
 * bench_scale.c: what a lease operation costs, and what the daemon's memory is, with 1k, 10k
 * and 100k live leases and with 1k connected clients.
 *
 * One operation is a lease acquire and release (two round trips, the grant's fd closed at
 * once: the daemon's work without the client's mapping). Leases are held by filler
 * connections that take them in pipelined bursts and never map them. Each round starts a
 * fresh daemon and climbs the levels, timing operations and reading VmRSS and Pss at each;
 * the ratio compares every level with the first level of the same round. The 1k-client figure
 * compares a daemon with 1000 idle connections (each said hello) against itself before they
 * connected, round by round.
 *
 * Host leases are 2 MiB granules of a budget that may not exceed the host's MemAvailable, so
 * a level that needs more is reported as not run with that reason; --fake-cuda LIB runs the
 * same series on the project's stand-in CUDA driver (tests/fakegpu) with a 256 GiB device,
 * whose memfds are as sparse as the host backend's.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rawclient.h"

#define MiB ((uint64_t)1 << 20)
#define GRANULE (2 * MiB)
#define MAX_LEVELS 6
#define MAX_ROUNDS 8
#define PER_CONNECTION 50000u /* leases per filler connection (the daemon's default cap: 65536) */
#define PIPELINE 32u	      /* acquires in flight per filler connection */
#define MAX_FILLERS 64

struct sample {
	bool run;
	struct bench_hist hist;
	double cpu_us_per_op;
	uint64_t rss_kib, pss_kib;
	long fds;
	uint64_t slab_kib;
};

struct level {
	unsigned leases; /* or clients */
	const char *not_run;
	char why[160];
	struct sample rounds[MAX_ROUNDS];
	struct bench_hist all;
};

struct series {
	const char *name;    /* "host", "fake-cuda", "clients" */
	const char *backend; /* --backend */
	const char *budget;
	const char *const *env;
	unsigned nlevels;
	struct level levels[MAX_LEVELS];
	unsigned rounds;
	const char *not_run;
	char why[200];
};

static struct bench_args args;
static unsigned ops_per_level;

/* fill makes c hold n more leases, PIPELINE requests in flight. Returns 0 or -errno. */
static int fill(struct raw_conn *c, unsigned n)
{
	unsigned sent = 0, got = 0;

	while (got < n) {
		struct raw_reply r;
		int err;

		while (sent < n && sent - got < PIPELINE) {
			Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
			Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;

			acq.has_size = acq.has_timeout_ms = true;
			acq.size = GRANULE;
			msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
			msg.lease_acquire = &acq;
			if ((err = raw_send(c, &msg)))
				return err;
			sent++;
		}
		if ((err = raw_recv(c, &r)))
			return err;
		if (r.error)
			return r.error;
		got++;
	}
	return 0;
}

/* measure times ops_per_level acquire+release operations on c and reads the daemon's state. */
static int measure(const struct bench_daemon *d, struct raw_conn *c, struct sample *s)
{
	uint64_t cpu0, cpu1, stat;
	int err;

	bench_hist_init(&s->hist);
	/* Warm: a daemon just started (or just grown) has page faults and caches to settle. */
	for (unsigned i = 0; i < ops_per_level / 4 + 50; i++) {
		uint64_t id;

		if ((err = raw_lease_acquire(c, GRANULE, 0, &id)) ||
		    (err = raw_lease_release(c, id)))
			return err;
	}
	bench_proc_cpu(d->pid, &stat, &cpu0);
	for (unsigned i = 0; i < ops_per_level; i++) {
		uint64_t t0 = bench_now_ns(), id;

		if ((err = raw_lease_acquire(c, GRANULE, 0, &id)) ||
		    (err = raw_lease_release(c, id)))
			return err;
		bench_hist_add(&s->hist, bench_now_ns() - t0);
	}
	bench_proc_cpu(d->pid, &stat, &cpu1);
	s->cpu_us_per_op = (double)(cpu1 - cpu0) / 1000.0 / ops_per_level;
	bench_proc_mem(d->pid, &s->rss_kib, &s->pss_kib);
	s->fds = bench_proc_fds(d->pid);
	s->slab_kib = bench_meminfo_kib("Slab");
	s->run = true;
	return 0;
}

/* kill_daemon ends a round's daemon at once: the kernel reclaims its leases faster than it. */
static void kill_daemon(struct bench_daemon *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
	bench_daemon_stop(d); /* only removes the directory now */
}

static int start(struct series *s, struct bench_daemon *d)
{
	const char *argv[] = {"--backend", s->backend, "--budget", s->budget, NULL};

	return bench_daemon_start(d, args.rocmmemd, -1, argv, s->env);
}

/* lease_round: a fresh daemon, climbing the levels of live leases. */
static int lease_round(struct series *s, unsigned round)
{
	struct raw_conn *fillers = calloc(MAX_FILLERS, sizeof(*fillers));
	struct raw_conn *probe = calloc(1, sizeof(*probe));
	unsigned nfillers = 0, held = 0;
	struct bench_daemon d;
	int err;

	if (!fillers || !probe) {
		free(fillers);
		free(probe);
		return -ENOMEM;
	}
	if ((err = start(s, &d)))
		goto out;
	if ((err = raw_connect(probe, d.sock, "scale-probe", false, NULL)))
		goto out;
	for (unsigned i = 0; i < s->nlevels && !err; i++) {
		struct level *lv = &s->levels[i];

		if (lv->not_run)
			continue;
		while (held < lv->leases && !err) {
			struct raw_conn *f;
			unsigned room, n;

			if (nfillers == 0 || held % PER_CONNECTION == 0) {
				if (nfillers == MAX_FILLERS) {
					err = -E2BIG;
					break;
				}
				f = &fillers[nfillers];
				if ((err = raw_connect(f, d.sock, "scale-filler", false, NULL)))
					break;
				nfillers++;
			}
			f = &fillers[nfillers - 1];
			room = PER_CONNECTION - held % PER_CONNECTION;
			n = lv->leases - held < room ? lv->leases - held : room;
			if ((err = fill(f, n)))
				break;
			held += n;
		}
		if (err) {
			fprintf(stderr, "bench_scale: Could not hold %u leases (%s): %s\n",
				lv->leases, s->name, strerror(-err));
			break;
		}
		err = measure(&d, probe, &lv->rounds[round]);
		bench_log("%s round %u: %u leases: p50 %.1f us, RSS %" PRIu64 " KiB", s->name,
			  round + 1, lv->leases,
			  (double)bench_hist_pct(&lv->rounds[round].hist, 50) / 1000.0,
			  lv->rounds[round].rss_kib);
	}
out:
	for (unsigned i = 0; i < nfillers; i++)
		raw_close(&fillers[i]);
	raw_close(probe);
	kill_daemon(&d);
	free(fillers);
	free(probe);
	return err;
}

/* client_round: a fresh daemon, measured alone, then with 1000 idle clients connected. */
static int client_round(struct series *s, unsigned round)
{
	unsigned n = s->levels[1].leases;
	struct raw_conn *conns = calloc(n, sizeof(*conns));
	struct raw_conn *probe = calloc(1, sizeof(*probe));
	struct bench_daemon d;
	unsigned connected = 0;
	int err;

	if (!conns || !probe) {
		free(conns);
		free(probe);
		return -ENOMEM;
	}
	if ((err = start(s, &d)))
		goto out;
	if ((err = raw_connect(probe, d.sock, "scale-probe", false, NULL)))
		goto out;
	if ((err = measure(&d, probe, &s->levels[0].rounds[round])))
		goto out;
	for (; connected < n && !err; connected++)
		err = raw_connect(&conns[connected], d.sock, "scale-client", false, NULL);
	if (err) {
		fprintf(stderr, "bench_scale: Could not connect client %u: %s\n", connected,
			strerror(-err));
		goto out;
	}
	err = measure(&d, probe, &s->levels[1].rounds[round]);
	bench_log("clients round %u: %u clients: RSS %" PRIu64 " KiB (alone %" PRIu64 " KiB)",
		  round + 1, n, s->levels[1].rounds[round].rss_kib,
		  s->levels[0].rounds[round].rss_kib);
out:
	for (unsigned i = 0; i < connected; i++)
		raw_close(&conns[i]);
	raw_close(probe);
	kill_daemon(&d);
	free(conns);
	free(probe);
	return err;
}

static double median_of(const struct level *lv, unsigned rounds,
			double (*get)(const struct sample *))
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < rounds; r++)
		if (lv->rounds[r].run)
			v[n++] = get(&lv->rounds[r]);
	return bench_median(v, n);
}

static double get_p50(const struct sample *s)
{
	return (double)bench_hist_pct(&s->hist, 50) / 1000.0;
}

static double get_p99(const struct sample *s)
{
	return (double)bench_hist_pct(&s->hist, 99) / 1000.0;
}

static double get_cpu(const struct sample *s)
{
	return s->cpu_us_per_op;
}

/*
 * ratio_vs_first returns the median over rounds of (this level's figure / the first level's
 * figure in the same round): each round compares states measured minutes apart at most.
 */
static double ratio_vs_first(const struct series *s, unsigned li,
			     double (*get)(const struct sample *))
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < s->rounds; r++) {
		const struct sample *a = &s->levels[0].rounds[r], *b = &s->levels[li].rounds[r];

		if (a->run && b->run && get(a) > 0)
			v[n++] = get(b) / get(a);
	}
	return bench_median(v, n);
}

/* bytes_per_item: the median over rounds of the growth from level 0 to level li per item. */
static double bytes_per_item(const struct series *s, unsigned li, bool pss)
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < s->rounds; r++) {
		const struct sample *a = &s->levels[0].rounds[r], *b = &s->levels[li].rounds[r];
		double grown;

		if (!a->run || !b->run || s->levels[li].leases <= s->levels[0].leases)
			continue;
		grown = pss ? (double)b->pss_kib - (double)a->pss_kib
			    : (double)b->rss_kib - (double)a->rss_kib;
		v[n++] = grown * 1024.0 / (double)(s->levels[li].leases - s->levels[0].leases);
	}
	return bench_median(v, n);
}

static double slab_per_item(const struct series *s, unsigned li)
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < s->rounds; r++) {
		const struct sample *a = &s->levels[0].rounds[r], *b = &s->levels[li].rounds[r];

		if (a->run && b->run && s->levels[li].leases > s->levels[0].leases)
			v[n++] = ((double)b->slab_kib - (double)a->slab_kib) * 1024.0 /
				 (double)(s->levels[li].leases - s->levels[0].leases);
	}
	return bench_median(v, n);
}

static void write_series(struct bench_json *j, const struct series *s, const char *unit)
{
	bench_json_object(j, NULL);
	bench_json_str(j, "name", s->name);
	bench_json_str(j, "backend", s->backend);
	bench_json_str(j, "budget", s->budget);
	bench_json_str(j, "unit", unit);
	if (s->not_run) {
		bench_json_str(j, "not_run", s->why);
		bench_json_end_object(j);
		return;
	}
	bench_json_int(j, "rounds", s->rounds);
	bench_json_int(j, "ops_per_level", ops_per_level);
	bench_json_array(j, "levels");
	for (unsigned i = 0; i < s->nlevels; i++) {
		const struct level *lv = &s->levels[i];
		struct bench_hist all;

		bench_json_object(j, NULL);
		bench_json_int(j, unit, lv->leases);
		if (lv->not_run) {
			bench_json_str(j, "not_run", lv->why);
			bench_json_end_object(j);
			continue;
		}
		bench_hist_init(&all);
		for (unsigned r = 0; r < s->rounds; r++)
			if (lv->rounds[r].run)
				bench_hist_merge(&all, &lv->rounds[r].hist);
		bench_json_hist(j, "op", &all);
		bench_json_num(j, "op_p50_us_median_of_rounds", median_of(lv, s->rounds, get_p50));
		bench_json_num(j, "op_p99_us_median_of_rounds", median_of(lv, s->rounds, get_p99));
		bench_json_num(j, "daemon_cpu_us_per_op", median_of(lv, s->rounds, get_cpu));
		bench_json_num(j, "ratio_p50_vs_first", ratio_vs_first(s, i, get_p50));
		bench_json_num(j, "ratio_p99_vs_first", ratio_vs_first(s, i, get_p99));
		bench_json_num(j, "ratio_cpu_vs_first", ratio_vs_first(s, i, get_cpu));
		bench_json_int(j, "rss_kib", (int64_t)lv->rounds[0].rss_kib);
		bench_json_int(j, "pss_kib", (int64_t)lv->rounds[0].pss_kib);
		bench_json_int(j, "daemon_fds", lv->rounds[0].fds);
		if (i > 0) {
			bench_json_num(j, "rss_bytes_per_item", bytes_per_item(s, i, false));
			bench_json_num(j, "pss_bytes_per_item", bytes_per_item(s, i, true));
			bench_json_num(j, "kernel_slab_bytes_per_item_noisy", slab_per_item(s, i));
		}
		bench_json_end_object(j);
	}
	bench_json_end_array(j);
	bench_json_end_object(j);
}

/*
 * plan_levels marks the levels a series cannot run here, and why, and adds the largest level
 * this machine allows when a level asked for is out of reach.
 */
static void plan_levels(struct series *s, uint64_t device_total, uint64_t nofile)
{
	uint64_t most = 0, reach;
	bool missing = false;

	for (unsigned i = 0; i < s->nlevels; i++) {
		struct level *lv = &s->levels[i];
		uint64_t need = ((uint64_t)lv->leases + 64) * GRANULE;

		if (need > device_total) {
			snprintf(lv->why, sizeof(lv->why),
				 "needs a %" PRIu64
				 " GiB budget (2 MiB granules); the device total "
				 "here is %" PRIu64 " GiB and a budget may not exceed it",
				 need >> 30, device_total >> 30);
			lv->not_run = lv->why;
		} else if ((uint64_t)lv->leases + 1024 > nofile) {
			snprintf(lv->why, sizeof(lv->why),
				 "needs %u file descriptors in the daemon (one per lease); "
				 "RLIMIT_NOFILE could only be raised to %" PRIu64,
				 lv->leases + 1024, nofile);
			lv->not_run = lv->why;
		} else if (need > most) {
			most = need;
		}
		missing |= lv->not_run != NULL;
	}
	/* The most leases the budget and the descriptor limit allow, in thousands. */
	reach = device_total / GRANULE - 64;
	if (nofile > 1024 && nofile - 1024 < reach)
		reach = nofile - 1024;
	reach = reach / 1000 * 1000;
	if (missing && reach > most / GRANULE && s->nlevels < MAX_LEVELS) {
		unsigned at = 0;

		/* In order: before the first level that cannot run. */
		while (at < s->nlevels && !s->levels[at].not_run)
			at++;
		memmove(&s->levels[at + 1], &s->levels[at],
			(s->nlevels - at) * sizeof(s->levels[0]));
		memset(&s->levels[at], 0, sizeof(s->levels[0]));
		s->levels[at].leases = (unsigned)reach;
		s->nlevels++;
		/* The moved levels' reasons point into themselves: refresh the pointers. */
		for (unsigned i = at + 1; i < s->nlevels; i++)
			if (s->levels[i].not_run)
				s->levels[i].not_run = s->levels[i].why;
	}
}

static int parse_levels(const char *text, struct series *s)
{
	s->nlevels = 0;
	while (*text && s->nlevels < MAX_LEVELS) {
		char *end;
		unsigned long v = strtoul(text, &end, 10);

		if (end == text || v == 0 || v > 1000000)
			return -1;
		s->levels[s->nlevels++].leases = (unsigned)v;
		if (*end && *end != ',')
			return -1;
		text = *end ? end + 1 : end;
	}
	return s->nlevels ? 0 : -1;
}

int main(int argc, char **argv)
{
	static char fake_env_lib[600], host_budget[32];
	static const char *fake_env[4];
	const char *fake_cuda = NULL, *level_text = NULL;
	struct series host = {.name = "host", .backend = "host"};
	struct series fake = {.name = "fake-cuda", .backend = "cuda", .budget = "220G"};
	struct series clients = {.name = "clients", .backend = "host", .budget = "1G"};
	unsigned nclients;
	uint64_t total, nofile, want;
	struct bench_json j;
	int err = 0, status = 0;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fake-cuda") == 0 && i + 1 < argc) {
			fake_cuda = argv[++i];
		} else if (strcmp(argv[i], "--levels") == 0 && i + 1 < argc) {
			level_text = argv[++i];
		} else {
			return bench_usage("bench_scale",
					   " [--levels N,N,...] [--fake-cuda LIBCUDA]");
		}
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_scale");
	if (!level_text)
		level_text = args.mode == BENCH_TINY ? "100,1000,2000" : "1000,10000,100000";
	if (parse_levels(level_text, &host) < 0) {
		fprintf(stderr, "bench_scale: --levels wants counts such as 1000,10000,100000\n");
		return 2;
	}
	parse_levels(level_text, &fake);
	nclients = (unsigned)bench_mode_pick(&args, 200, 1000, 1000);
	clients.nlevels = 2;
	clients.levels[0].leases = 0;
	clients.levels[1].leases = nclients;
	ops_per_level = (unsigned)bench_mode_pick(&args, 100, 500, 2000);
	host.rounds = fake.rounds = clients.rounds = (unsigned)bench_mode_pick(&args, 1, 2, 3);
	want = (uint64_t)host.levels[host.nlevels - 1].leases + 4096;
	if (want < nclients * 2u + 4096)
		want = nclients * 2u + 4096;
	nofile = bench_raise_nofile(want);
	/* The host backend's device total is MemAvailable, as the daemon reads it at start. */
	total = bench_meminfo_kib("MemAvailable") * 1024 / GRANULE * GRANULE;
	plan_levels(&host, total, nofile);
	{
		uint64_t most = 0;

		for (unsigned i = 0; i < host.nlevels; i++)
			if (!host.levels[i].not_run)
				most = host.levels[i].leases;
		snprintf(host_budget, sizeof(host_budget), "%" PRIu64 "M", (most + 64) * 2);
		host.budget = host_budget;
	}
	if (fake_cuda && access(fake_cuda, R_OK) == 0) {
		snprintf(fake_env_lib, sizeof(fake_env_lib), "ROCMMEM_CUDA_LIBRARY=%s", fake_cuda);
		fake_env[0] = fake_env_lib;
		fake_env[1] = "FAKECUDA_DEVICES=256G";
		fake_env[2] = NULL;
		fake.env = fake_env;
		plan_levels(&fake, (uint64_t)256 << 30, nofile);
	} else {
		fake.not_run = fake.why;
		snprintf(fake.why, sizeof(fake.why), "%s",
			 fake_cuda ? "the stand-in CUDA driver is not readable"
				   : "no stand-in CUDA driver given (--fake-cuda: the build's "
				     "tests/fakegpu/cuda/libcuda.so.1, built with the tests)");
	}
	for (unsigned r = 0; r < host.rounds && !err; r++) {
		err = lease_round(&host, r);
		if (!err && !fake.not_run)
			err = lease_round(&fake, r);
		if (!err)
			err = client_round(&clients, r);
	}
	if (err) {
		fprintf(stderr, "bench_scale: failed: %s\n", strerror(-err));
		return 1;
	}
	out = bench_open_output(&args);
	if (!out)
		return 1;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "scale");
	bench_json_str(&j, "operation", "lease acquire + release (2 MiB, fd closed unmapped)");
	bench_json_int(&j, "rlimit_nofile", (int64_t)nofile);
	bench_json_int(&j, "host_device_total_bytes", (int64_t)total);
	bench_json_array(&j, "series");
	write_series(&j, &host, "leases");
	write_series(&j, &fake, "leases");
	write_series(&j, &clients, "clients");
	bench_json_end_array(&j);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	return status;
}
