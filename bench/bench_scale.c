/* SPDX-License-Identifier: MIT */
/*
 * bench_scale.c: what a lease operation costs, and what the daemon's memory and descriptors
 * are, with 1k, 10k and 100k live leases (host arenas and per-lease memfds), and with 1k
 * connected clients.
 *
 * One operation is a lease acquire and release (two round trips, any fd that comes with the
 * grant closed at once: the daemon's work without the client's mapping), timed on a probe
 * connection that holds nothing else and on the connection holding the most leases (its own
 * books and its arena's allocator at their largest). Leases are held by filler connections
 * that take them in pipelined bursts and never map them. Each round starts a fresh daemon and
 * climbs the levels; the ratio compares every level with the first level of the same round.
 * The daemon and this process share one CPU, as the round trip's same-core placement does.
 *
 * The series: "arena" (clients ask for FEATURE_HOST_ARENA: a lease is a range of the
 * connection's arena), "per-lease" (no feature bit: a sealed memfd per lease, the
 * compatibility path, one descriptor each in the daemon), and, with --fake-cuda LIB, the same
 * per-lease climb on the project's stand-in CUDA driver. Host leases are 2 MiB granules of a
 * budget no larger than the device total; the leases are never touched, so where the levels
 * need more than MemAvailable the daemon reads a meminfo fixture (ROCMMEM_HOST_MEMINFO) that
 * says enough: the budget is accounting here, not memory. The 1k-client figure compares a
 * daemon with 1000 idle connections against itself before they connected, round by round.
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
#include "scale.h"

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

/* time_ops times n acquire+release operations on c into h (NULL: warming only). */
static int time_ops(struct raw_conn *c, unsigned n, struct bench_hist *h)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = bench_now_ns(), id;
		int err;

		if ((err = raw_lease_acquire(c, GRANULE, 0, &id)) ||
		    (err = raw_lease_release(c, id)))
			return err;
		if (h)
			bench_hist_add(h, bench_now_ns() - t0);
	}
	return 0;
}

/* measure times operations on the probe and on the fullest connection, and reads the daemon. */
static int measure(const struct bench_daemon *d, struct raw_conn *probe, struct raw_conn *fullest,
		   struct sample *s)
{
	struct raw_daemon_info info;
	uint64_t cpu0, cpu1, stat, t0;
	int err;

	bench_hist_init(&s->hist);
	bench_hist_init(&s->own);
	/* Warm: a daemon just started (or just grown) has page faults and caches to settle. */
	if ((err = time_ops(probe, ops_per_level / 4 + 50, NULL)) ||
	    (err = time_ops(fullest, ops_per_level / 8 + 20, NULL)))
		return err;
	bench_proc_cpu(d->pid, &stat, &cpu0);
	if ((err = time_ops(probe, ops_per_level, &s->hist)))
		return err;
	bench_proc_cpu(d->pid, &stat, &cpu1);
	s->cpu_us_per_op = (double)(cpu1 - cpu0) / 1000.0 / ops_per_level;
	if ((err = time_ops(fullest, ops_per_level, &s->own)))
		return err;
	/* Status lists every lease: O(leases) by design, streamed in parts. */
	t0 = bench_now_ns();
	if ((err = raw_status_info(probe, &info)))
		return err;
	s->status_ms = (double)(bench_now_ns() - t0) / 1e6;
	s->status_leases = info.leases;
	s->heap_bytes = info.heap_bytes;
	s->fds_open_info = info.fds_open;
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
	/*
	 * Lease series: 128 clients at most, since the daemon sets 3 descriptors aside per client
	 * it allows and the per-lease path needs them for leases. Every connection stays under
	 * the default --max-leases (65536 per connection). The 1000-client series keeps defaults.
	 */
	bool leases = strcmp(s->name, "clients") != 0;
	const char *argv[] = {
	    "--backend", s->backend, "--budget", s->budget, leases ? "--max-clients" : NULL,
	    "128",	 NULL};

	/* Same CPU as this process (pinned in main): a wakeup across CPUs costs more than the
	 * operation on this machine, and would decide the ratios by where each side ran. */
	return bench_daemon_start(d, args.rocmmemd, 0, argv, s->env);
}

/* hold_leases makes the fillers hold want leases in all, connecting more as each fills. */
static int hold_leases(struct series *s, const struct bench_daemon *d, struct raw_conn *fillers,
		       unsigned *nfillers, unsigned *held, unsigned want)
{
	while (*held < want) {
		unsigned room, n;
		int err;

		if (*nfillers == 0 || *held % s->per_connection == 0) {
			if (*nfillers == MAX_FILLERS)
				return -E2BIG;
			if ((err = raw_connect_features(&fillers[*nfillers], d->sock,
							"scale-filler", s->features)))
				return err;
			(*nfillers)++;
		}
		room = s->per_connection - *held % s->per_connection;
		n = want - *held < room ? want - *held : room;
		if ((err = fill(&fillers[*nfillers - 1], n)))
			return err;
		*held += n;
	}
	return 0;
}

/*
 * time_hangup closes c, the connection holding the most leases, and times the probe's next
 * operation: the daemon takes the hangup first and gives back every lease c held.
 */
static int time_hangup(struct series *s, unsigned round, struct raw_conn *probe, struct raw_conn *c,
		       unsigned held)
{
	uint64_t t0 = bench_now_ns(), id;
	int err;

	raw_close(c);
	if ((err = raw_lease_acquire(probe, GRANULE, 0, &id)) ||
	    (err = raw_lease_release(probe, id)))
		return err;
	s->hangup_ms[round] = (double)(bench_now_ns() - t0) / 1e6;
	s->hangup_leases = held < s->per_connection ? held : s->per_connection;
	return 0;
}

/* lease_round: a fresh daemon, climbing the levels of live leases. */
static int lease_round(struct series *s, unsigned round)
{
	struct raw_conn *fillers = calloc(MAX_FILLERS, sizeof(*fillers));
	struct raw_conn *probe = calloc(1, sizeof(*probe));
	unsigned nfillers = 0, held = 0;
	struct bench_daemon d = {0};
	int err;

	if (!fillers || !probe) {
		free(fillers);
		free(probe);
		return -ENOMEM;
	}
	if ((err = start(s, &d)))
		goto out;
	if ((err = raw_connect_features(probe, d.sock, "scale-probe", s->features)))
		goto out;
	if ((probe->features & s->features) != s->features) {
		snprintf(s->why, sizeof(s->why),
			 "the daemon did not accept feature bits 0x%x (it answered 0x%x): no host "
			 "arena in this build",
			 (unsigned)s->features, (unsigned)probe->features);
		s->not_run = s->why;
		goto out;
	}
	for (unsigned i = 0; i < s->nlevels && !err; i++) {
		struct level *lv = &s->levels[i];
		struct sample *sm = &lv->rounds[round];
		unsigned from = held;
		uint64_t t0;

		if (lv->not_run)
			continue;
		t0 = bench_now_ns();
		err = hold_leases(s, &d, fillers, &nfillers, &held, lv->leases);
		if (err) {
			fprintf(stderr, "bench_scale: Could not hold %u leases (%s): %s\n",
				lv->leases, s->name, strerror(-err));
			break;
		}
		if ((err = measure(&d, probe, &fillers[0], sm)))
			break;
		sm->fill_us_per_lease =
		    held > from ? (double)(bench_now_ns() - t0) / 1000.0 / (held - from) : 0;
		bench_log("%s round %u: %u leases: p50 %.1f us (fullest connection %.1f us), "
			  "RSS %" PRIu64 " KiB, %ld fds, status %.1f ms",
			  s->name, round + 1, lv->leases,
			  (double)bench_hist_pct(&sm->hist, 50) / 1e3,
			  (double)bench_hist_pct(&sm->own, 50) / 1e3, sm->rss_kib, sm->fds,
			  sm->status_ms);
	}
	if (!err && nfillers)
		err = time_hangup(s, round, probe, &fillers[0], held);
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
	struct raw_conn *probe = calloc(2, sizeof(*probe));
	struct bench_daemon d = {0};
	unsigned connected = 0;
	int err;

	if (!conns || !probe) {
		free(conns);
		free(probe);
		return -ENOMEM;
	}
	if ((err = start(s, &d)))
		goto out;
	if ((err = raw_connect(&probe[0], d.sock, "scale-probe", false, NULL)) ||
	    (err = raw_connect(&probe[1], d.sock, "scale-probe", false, NULL)))
		goto out;
	if ((err = measure(&d, &probe[0], &probe[1], &s->levels[0].rounds[round])))
		goto out;
	for (; connected < n && !err; connected++)
		err = raw_connect(&conns[connected], d.sock, "scale-client", false, NULL);
	if (err) {
		fprintf(stderr, "bench_scale: Could not connect client %u: %s\n", connected,
			strerror(-err));
		goto out;
	}
	err = measure(&d, &probe[0], &probe[1], &s->levels[1].rounds[round]);
	bench_log("clients round %u: %u clients: RSS %" PRIu64 " KiB (alone %" PRIu64 " KiB)",
		  round + 1, n, s->levels[1].rounds[round].rss_kib,
		  s->levels[0].rounds[round].rss_kib);
out:
	for (unsigned i = 0; i < connected; i++)
		raw_close(&conns[i]);
	raw_close(&probe[0]);
	raw_close(&probe[1]);
	kill_daemon(&d);
	free(conns);
	free(probe);
	return err;
}

/*
 * plan_levels marks the levels a series cannot run here, and why, and adds the largest level
 * this machine allows when a level asked for is out of reach.
 */
static void plan_levels(struct series *s, uint64_t device_total, uint64_t nofile)
{
	uint64_t most = 0, reach, fd_reach = nofile > FD_KEPT ? (nofile - FD_KEPT) / 2 : 0;
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
		} else if (s->fd_per_lease && lv->leases > fd_reach) {
			snprintf(lv->why, sizeof(lv->why),
				 "needs %u descriptors in the daemon (one per lease); of "
				 "RLIMIT_NOFILE %" PRIu64 " one uid may hold about %" PRIu64
				 " (half of what the daemon keeps for host leases)",
				 lv->leases, nofile, fd_reach);
			lv->not_run = lv->why;
		} else if (need > most) {
			most = need;
		}
		missing |= lv->not_run != NULL;
	}
	/* The most leases the budget and the descriptor limit allow, in thousands. */
	reach = device_total / GRANULE - 64;
	if (s->fd_per_lease && fd_reach < reach)
		reach = fd_reach;
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
	while (*text && s->nlevels < MAX_LEVELS - 1) {
		char *end;
		unsigned long v = strtoul(text, &end, 10);

		if (end == text || v == 0 || v > 1000000)
			return -1;
		s->levels[s->nlevels++].leases = (unsigned)v;
		if (*end && *end != ',')
			return -1;
		text = *end ? end + 1 : end;
	}
	return s->nlevels && !*text ? 0 : -1;
}

/* host_budget sizes a host series' budget (and the fixture it may need) to its levels. */
static int host_budget(struct series *s, char *budget, size_t blen, char *meminfo, size_t mlen,
		       char *env, size_t elen, const char **envv, uint64_t nofile, uint64_t *total)
{
	uint64_t most = 0, need = ((uint64_t)s->levels[s->nlevels - 1].leases + 64) * GRANULE;
	int err;

	if (need > *total && !meminfo[0]) {
		if ((err = bench_meminfo_fixture(need, meminfo, mlen)))
			return err;
		*total = need;
	}
	if (meminfo[0]) {
		snprintf(env, elen, "ROCMMEM_HOST_MEMINFO=%s", meminfo);
		envv[0] = env;
		envv[1] = NULL;
		s->env = envv;
	}
	plan_levels(s, *total, nofile);
	for (unsigned i = 0; i < s->nlevels; i++)
		if (!s->levels[i].not_run)
			most = s->levels[i].leases;
	snprintf(budget, blen, "%" PRIu64 "M", (most + 64) * 2);
	s->budget = budget;
	return 0;
}

/* plan_fake sets the stand-in CUDA series up with the driver at lib, or says why not. */
static void plan_fake(struct series *fake, const char *lib, uint64_t nofile)
{
	static char env_lib[600];
	static const char *env[3];

	if (lib && access(lib, R_OK) == 0) {
		snprintf(env_lib, sizeof(env_lib), "ROCMMEM_CUDA_LIBRARY=%s", lib);
		env[0] = env_lib;
		env[1] = "FAKECUDA_DEVICES=256G";
		fake->env = env;
		plan_levels(fake, (uint64_t)256 << 30, nofile);
		return;
	}
	fake->not_run = fake->why;
	snprintf(fake->why, sizeof(fake->why), "%s",
		 lib ? "the stand-in CUDA driver is not readable"
		     : "no stand-in CUDA driver given (--fake-cuda: the build's "
		       "tests/fakegpu/cuda/libcuda.so.1, built with the tests)");
}

int main(int argc, char **argv)
{
	static char arena_budget[32], lease_budget[32], meminfo[128], menv[160];
	static const char *host_env[2];
	const char *fake_cuda = NULL, *level_text = NULL;
	struct series arena = {
	    .name = "arena", .backend = "host", .features = ARENA_BIT, .per_connection = 50000};
	struct series lease = {
	    .name = "per-lease", .backend = "host", .per_connection = 4000, .fd_per_lease = true};
	struct series fake = {.name = "fake-cuda",
			      .backend = "cuda",
			      .budget = "220G",
			      .per_connection = 4000,
			      .fd_per_lease = true};
	struct series clients = {.name = "clients", .backend = "host", .budget = "1G"};
	struct series *all[] = {&arena, &lease, &fake, &clients};
	unsigned nclients;
	uint64_t total, nofile, want;
	int err = 0;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fake-cuda") == 0 && i + 1 < argc)
			fake_cuda = argv[++i];
		else if (strcmp(argv[i], "--levels") == 0 && i + 1 < argc)
			level_text = argv[++i];
		else
			return bench_usage("bench_scale",
					   " [--levels N,N,...] [--fake-cuda LIBCUDA]");
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_scale");
	if (!level_text)
		level_text = args.mode == BENCH_TINY ? "100,1000,2000" : "1000,10000,100000";
	if (parse_levels(level_text, &arena) < 0 || parse_levels(level_text, &lease) < 0) {
		fprintf(stderr, "bench_scale: --levels wants counts such as 1000,10000,100000\n");
		return 2;
	}
	parse_levels(level_text, &fake);
	nclients = (unsigned)bench_mode_pick(&args, 200, 1000, 1000);
	clients.nlevels = 2;
	clients.levels[1].leases = nclients;
	ops_per_level = (unsigned)bench_mode_pick(&args, 100, 500, 2000);
	for (unsigned i = 0; i < 4; i++)
		all[i]->rounds = (unsigned)bench_mode_pick(&args, 1, 2, 3);
	want = (uint64_t)arena.levels[arena.nlevels - 1].leases + 4096;
	if (want < nclients * 2u + 4096)
		want = nclients * 2u + 4096;
	nofile = bench_raise_nofile(want);
	bench_pin_self(0);
	/* The host backend's device total is MemAvailable, as the daemon reads it at start. */
	total = bench_meminfo_kib("MemAvailable") * 1024 / GRANULE * GRANULE;
	if ((err = host_budget(&arena, arena_budget, sizeof(arena_budget), meminfo, sizeof(meminfo),
			       menv, sizeof(menv), host_env, nofile, &total)) ||
	    (err = host_budget(&lease, lease_budget, sizeof(lease_budget), meminfo, sizeof(meminfo),
			       menv, sizeof(menv), host_env, nofile, &total))) {
		fprintf(stderr, "bench_scale: Could not write a meminfo fixture: %s\n",
			strerror(-err));
		return 1;
	}
	plan_fake(&fake, fake_cuda, nofile);
	for (unsigned r = 0; r < arena.rounds && !err; r++) {
		for (unsigned i = 0; i < 3 && !err; i++)
			if (!all[i]->not_run)
				err = lease_round(all[i], r);
		if (!err)
			err = client_round(&clients, r);
	}
	bench_meminfo_fixture_remove(meminfo);
	if (err) {
		fprintf(stderr, "bench_scale: failed: %s\n", strerror(-err));
		return 1;
	}
	return write_report(&args, all, 4, nofile, total, meminfo[0] != '\0') ? 1 : 0;
}
