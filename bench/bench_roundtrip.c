/* SPDX-License-Identifier: MIT */
/*
 * bench_roundtrip.c: the lease round trip through rocmmemd (acquire + map + touch one page +
 * unmap + release, host backend) against its floor, a raw SOCK_SEQPACKET ping-pong of two round
 * trips carrying one memfd, with client and server on the same CPU and on different CPUs. The
 * daemon is measured both ways a host lease can be handed over, on one daemon: through the
 * client's arena (librocmmem's default: the arena's memfd once, then offsets; release punches
 * the range) and through a memfd per lease (a connection made with ROCMMEM_HOST_ARENA=0, the
 * compatibility path and the design before arenas). The arena client's requests go through the
 * connection's request lane (librocmmem's default, docs/protocol.md); a third connection made
 * with ROCMMEM_LANE=0 is the same round trip on the socket alone (before the lane), and the
 * lane floor is the floor's two round trips through a shared page with the lane's system calls.
 *
 * Both run in the same process run, interleaved in small batches whose order alternates every
 * round, so that a neighbour's load on this shared machine falls on both alike. With
 * --breakdown, the pieces the round trip is made of are timed in the same rounds: the
 * daemon's backend work (memfd_create + ftruncate + seals; hole punch + close), the client's
 * mapping work (aligned mmap + madvise, the first touch, munmap), the CPU each process spends
 * per operation, and a second daemon at --log-level warn (what the info log lines cost).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "roundtrip_floor.h"
#include "roundtrip_profile.h"
#include "rocmmem.h"

#define WARMUP_OPS 20u
#define MAX_ROUNDS 30u /* full mode */

/* What is compared: the floors (the IPC alone, or doing a lease's kernel work) and rocmmemd. */
enum subject {
	SUBJECT_FLOOR,	     /* two round trips, one memfd passed */
	SUBJECT_FLOOR_NOFD,  /* two round trips, nothing passed */
	SUBJECT_FLOOR_MEM,   /* + a fresh memfd, mapped, touched, unmapped, punched, closed */
	SUBJECT_FLOOR_ARENA, /* + one page touched in a mapping kept, the range punched */
	SUBJECT_FLOOR_EPOLL, /* the first, served by an event loop (epoll_wait, read till empty) */
	SUBJECT_FLOOR_LANE,  /* two round trips through a shared page, eventfd + futex, no fd */
	SUBJECT_DAEMON,	     /* rocmmemd, the client's arena, the request lane (the defaults) */
	SUBJECT_PER_LEASE,   /* rocmmemd, a memfd per lease, socket only (before issue 18) */
	SUBJECT_SOCKET,	     /* rocmmemd, the client's arena, the socket alone (ROCMMEM_LANE=0) */
	SUBJECT_QUIET,	     /* rocmmemd at --log-level warn, arena (--breakdown); the last */
	SUBJECTS
};

static const char *const subject_names[SUBJECTS] = {"floor",
						    "floor_no_fd",
						    "floor_with_memory_work",
						    "floor_with_arena_work",
						    "floor_epoll",
						    "floor_lane",
						    "daemon",
						    "daemon_per_lease",
						    "daemon_socket",
						    "daemon_log_warn"};

/* The pieces of the round trip timed on their own (--breakdown). */
enum piece { PIECE_MEMFD, PIECE_PUNCH, PIECE_MAP, PIECE_TOUCH, PIECE_MUNMAP, PIECES };

static const char *const piece_names[PIECES] = {"memfd_create_ftruncate_seal", "punch_hole_close",
						"mmap_aligned_madvise", "first_touch_fault",
						"munmap"};

struct placement {
	const char *name;
	int client_cpu, server_cpu;
	struct bench_hist hist[SUBJECTS];
	uint64_t server_cpu_ns[SUBJECTS]; /* the server's CPU time over the timed batches */
	uint64_t client_cpu_ns[SUBJECTS];
	uint64_t server_switches[SUBJECTS]; /* context switches, voluntary or not */
	uint64_t client_switches[SUBJECTS];
	uint64_t ops[SUBJECTS];
	/* Each batch's p99 (one batch per round): a burst on the machine shows as a round. */
	uint64_t round_p99[SUBJECTS][MAX_ROUNDS];
	unsigned batches[SUBJECTS];
};

static struct bench_hist pieces[PIECES];

/* ----------------------------------------------------------------------------------------- */
/* The subject: the same through rocmmemd and librocmmem */

static int lease_op(rocmmem_client *c)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = LEASE_SIZE, .timeout_ms = 0};
	rocmmem_lease *l;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		return err;
	((volatile uint8_t *)rocmmem_lease_ptr(l))[0] = 1; /* touch one page */
	return rocmmem_lease_release(l);
}

/* ----------------------------------------------------------------------------------------- */
/* The pieces, timed one by one in this process (what the daemon and librocmmem do) */

static void time_pieces(unsigned n)
{
	const size_t size = LEASE_SIZE;

	for (unsigned i = 0; i < n; i++) {
		uint64_t t0, t1;
		uint8_t *p;
		int fd;

		t0 = bench_now_ns();
		fd = make_memfd(size);
		t1 = bench_now_ns();
		if (fd < 0)
			return;
		bench_hist_add(&pieces[PIECE_MEMFD], t1 - t0);
		t0 = bench_now_ns();
		p = map_like_librocmmem(fd, size);
		t1 = bench_now_ns();
		if (!p) {
			close(fd);
			return;
		}
		bench_hist_add(&pieces[PIECE_MAP], t1 - t0);
		t0 = bench_now_ns();
		((volatile uint8_t *)p)[0] = 1;
		t1 = bench_now_ns();
		bench_hist_add(&pieces[PIECE_TOUCH], t1 - t0);
		t0 = bench_now_ns();
		munmap(p, size);
		t1 = bench_now_ns();
		bench_hist_add(&pieces[PIECE_MUNMAP], t1 - t0);
		t0 = bench_now_ns();
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)size);
		close(fd);
		t1 = bench_now_ns();
		bench_hist_add(&pieces[PIECE_PUNCH], t1 - t0);
	}
}

struct run {
	struct floor_server floors[SUBJECT_DAEMON]; /* by subject */
	struct sizes sizes;
	/* [SUBJECT_DAEMON] serves the arena, per-lease and socket-only clients; [SUBJECT_QUIET]. */
	struct bench_daemon daemons[SUBJECTS];
	rocmmem_client *clients[SUBJECTS];
	bool quiet;	  /* the --log-level warn daemon runs too */
	long held_fds[2]; /* the daemon's fds grown by 4 leases held: arena, per-lease client */
};

static bool is_floor(enum subject s)
{
	return s < SUBJECT_DAEMON;
}

static bool runs(const struct run *r, enum subject s)
{
	return s != SUBJECT_QUIET || r->quiet;
}

/* own_daemon says whether subject s has a daemon of its own (else it is SUBJECT_DAEMON's). */
static bool own_daemon(enum subject s)
{
	return s == SUBJECT_DAEMON || s == SUBJECT_QUIET;
}

static pid_t server_pid(const struct run *r, enum subject s)
{
	if (is_floor(s))
		return r->floors[s].pid;
	return r->daemons[own_daemon(s) ? s : SUBJECT_DAEMON].pid;
}

static int one_op(struct run *r, enum subject s)
{
	if (is_floor(s))
		return floor_op(&r->floors[s], &r->sizes);
	return lease_op(r->clients[s]);
}

/* switches returns the context switches of pid (0: the calling thread). */
static uint64_t switches(pid_t pid)
{
	char path[64], buf[4096], *p;
	uint64_t n = 0;
	ssize_t len;
	int fd;

	if (pid == 0) {
		struct rusage ru;

		getrusage(RUSAGE_THREAD, &ru);
		return (uint64_t)(ru.ru_nvcsw + ru.ru_nivcsw);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, "ctxt_switches:")); p++)
		n += strtoull(p + strlen("ctxt_switches:"), NULL, 10);
	return n;
}

static int place(struct run *r, const struct placement *p)
{
	int err = bench_pin_self(p->client_cpu);

	for (unsigned s = 0; s < SUBJECTS && !err; s++)
		if (runs(r, s))
			err = bench_pin_process(server_pid(r, s), p->server_cpu);
	return err;
}

/* batch times n operations of subject s, with the CPU both sides spend on them. */
static int batch(struct run *r, struct placement *p, enum subject s, unsigned n)
{
	static struct bench_hist one; /* this batch alone */
	uint64_t srv0, srv1, stat, cli0, sw_srv0, sw_cli0;
	int err;

	for (unsigned i = 0; i < WARMUP_OPS; i++)
		if ((err = one_op(r, s)))
			return err;
	bench_proc_cpu(server_pid(r, s), &stat, &srv0);
	sw_srv0 = switches(server_pid(r, s));
	sw_cli0 = switches(0);
	cli0 = bench_thread_cpu_ns();
	bench_hist_init(&one);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = bench_now_ns();

		if ((err = one_op(r, s)))
			return err;
		bench_hist_add(&one, bench_now_ns() - t0);
	}
	bench_hist_merge(&p->hist[s], &one);
	if (p->batches[s] < MAX_ROUNDS)
		p->round_p99[s][p->batches[s]++] = bench_hist_pct(&one, 99);
	p->client_cpu_ns[s] += bench_thread_cpu_ns() - cli0;
	p->client_switches[s] += switches(0) - sw_cli0;
	p->server_switches[s] += switches(server_pid(r, s)) - sw_srv0;
	bench_proc_cpu(server_pid(r, s), &stat, &srv1);
	p->server_cpu_ns[s] += srv1 - srv0;
	p->ops[s] += n;
	return 0;
}

static double pct(const struct placement *p, enum subject s, double q)
{
	return (double)bench_hist_pct(&p->hist[s], q);
}

static void write_ratios(struct bench_json *j, const struct placement *p, enum subject d,
			 const char *prefix)
{
	char key[96];

	snprintf(key, sizeof(key), "%sratio_p50", prefix);
	bench_json_num(j, key, bench_ratio(pct(p, d, 50), pct(p, SUBJECT_FLOOR, 50)));
	snprintf(key, sizeof(key), "%sratio_p99", prefix);
	bench_json_num(j, key, bench_ratio(pct(p, d, 99), pct(p, SUBJECT_FLOOR, 99)));
	snprintf(key, sizeof(key), "%sratio_p999", prefix);
	bench_json_num(j, key, bench_ratio(pct(p, d, 99.9), pct(p, SUBJECT_FLOOR, 99.9)));
	snprintf(key, sizeof(key), "%sratio_p50_vs_floor_no_fd", prefix);
	bench_json_num(j, key, bench_ratio(pct(p, d, 50), pct(p, SUBJECT_FLOOR_NOFD, 50)));
	snprintf(key, sizeof(key), "%sp99_over_p50", prefix);
	bench_json_num(j, key, bench_ratio(pct(p, d, 99), pct(p, d, 50)));
}

static void write_per_op(struct bench_json *j, const struct run *r, const struct placement *p,
			 const char *key, const uint64_t *v, double scale)
{
	bench_json_object(j, key);
	for (unsigned s = 0; s < SUBJECTS; s++) {
		char k[64];

		if (!runs(r, s))
			continue;
		snprintf(k, sizeof(k), "%s_server", subject_names[s]);
		bench_json_num(j, k, bench_ratio((double)v[s] / scale, (double)p->ops[s]));
		snprintf(k, sizeof(k), "%s_client", subject_names[s]);
		bench_json_num(j, k,
			       bench_ratio((double)v[SUBJECTS + s] / scale, (double)p->ops[s]));
	}
	bench_json_end_object(j);
}

/* Ratios of one subject's percentile to another's (or to its own p50), by JSON key. */
struct ratio {
	const char *key;
	enum subject a;
	double pa;
	enum subject b;
	double pb;
};

static const struct ratio ratios[] = {
    {"daemon_p99_over_p50", SUBJECT_DAEMON, 99, SUBJECT_DAEMON, 50},
    {"floor_p99_over_p50", SUBJECT_FLOOR, 99, SUBJECT_FLOOR, 50},
    {"ratio_p50_vs_floor_with_arena_work", SUBJECT_DAEMON, 50, SUBJECT_FLOOR_ARENA, 50},
    {"ratio_p50_vs_floor_epoll", SUBJECT_DAEMON, 50, SUBJECT_FLOOR_EPOLL, 50},
    {"floor_epoll_ratio_p50", SUBJECT_FLOOR_EPOLL, 50, SUBJECT_FLOOR, 50},
    {"per_lease_ratio_p50_vs_floor_with_memory_work", SUBJECT_PER_LEASE, 50, SUBJECT_FLOOR_MEM, 50},
    {"arena_over_per_lease_p50", SUBJECT_DAEMON, 50, SUBJECT_PER_LEASE, 50},
    /* The lane: "daemon" goes through it, "daemon_socket" is the same client on the socket. */
    {"ratio_p50_vs_floor_lane", SUBJECT_DAEMON, 50, SUBJECT_FLOOR_LANE, 50},
    {"floor_lane_ratio_p50", SUBJECT_FLOOR_LANE, 50, SUBJECT_FLOOR, 50},
    {"lane_over_socket_p50", SUBJECT_DAEMON, 50, SUBJECT_SOCKET, 50},
};

/*
 * write_round_tails says how the rounds' own tails spread: each round's p99 over the whole
 * run's p50 (median, worst) and in how many rounds it was over 2, for subject s. The tail of
 * the whole run is set by its worst stretches: a burst of other work on the machine (the
 * hypervisor, softirqs) falls into a few rounds, and the floor's rounds show it too.
 */
static void write_round_tails(struct bench_json *j, const struct placement *p, enum subject s,
			      const char *prefix)
{
	double v[MAX_ROUNDS], p50 = pct(p, s, 50), worst = 0;
	unsigned n = p->batches[s], over = 0;
	char key[96];

	for (unsigned i = 0; i < n; i++) {
		v[i] = bench_ratio((double)p->round_p99[s][i], p50);
		if (v[i] > 2.0)
			over++;
		if (v[i] > worst)
			worst = v[i];
	}
	snprintf(key, sizeof(key), "%s_round_p99_over_p50", prefix);
	bench_json_object(j, key);
	bench_json_int(j, "rounds", n);
	bench_json_num(j, "median", bench_median(v, n));
	bench_json_num(j, "worst", worst);
	bench_json_int(j, "rounds_over_2", over);
	bench_json_end_object(j);
}

static void write_placement(struct bench_json *j, const struct run *r, const struct placement *p)
{
	uint64_t cpu[2 * SUBJECTS], sw[2 * SUBJECTS];

	bench_json_object(j, NULL);
	bench_json_str(j, "name", p->name);
	bench_json_int(j, "client_cpu", p->client_cpu);
	bench_json_int(j, "server_cpu", p->server_cpu);
	for (unsigned s = 0; s < SUBJECTS; s++)
		if (runs(r, s))
			bench_json_hist(j, subject_names[s], &p->hist[s]);
	/* "daemon" is the arena path (librocmmem's default); "per_lease_" the memfd per lease. */
	write_ratios(j, p, SUBJECT_DAEMON, "");
	write_ratios(j, p, SUBJECT_PER_LEASE, "per_lease_");
	write_ratios(j, p, SUBJECT_SOCKET, "socket_");
	for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
		const struct ratio *q = &ratios[i];

		bench_json_num(j, q->key, bench_ratio(pct(p, q->a, q->pa), pct(p, q->b, q->pb)));
	}
	write_round_tails(j, p, SUBJECT_DAEMON, "daemon");
	write_round_tails(j, p, SUBJECT_FLOOR, "floor");
	if (r->quiet)
		bench_json_num(j, "quiet_ratio_p50",
			       bench_ratio(pct(p, SUBJECT_QUIET, 50), pct(p, SUBJECT_FLOOR, 50)));
	/* Microseconds of CPU per operation (schedstat, thread clock); context switches. */
	memcpy(cpu, p->server_cpu_ns, sizeof(p->server_cpu_ns));
	memcpy(cpu + SUBJECTS, p->client_cpu_ns, sizeof(p->client_cpu_ns));
	memcpy(sw, p->server_switches, sizeof(p->server_switches));
	memcpy(sw + SUBJECTS, p->client_switches, sizeof(p->client_switches));
	write_per_op(j, r, p, "cpu_us_per_op", cpu, 1000.0);
	write_per_op(j, r, p, "context_switches_per_op", sw, 1.0);
	bench_json_end_object(j);
}

/*
 * fds_for_leases holds 4 leases on c and says by how many the daemon's descriptors grew: 4
 * for memfds per lease, 0 or 1 for an arena (its memfd, made at the first lease).
 */
static long fds_for_leases(pid_t daemon, rocmmem_client *c)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = LEASE_SIZE, .timeout_ms = 0};
	rocmmem_lease *l[4] = {0};
	long before = bench_proc_fds(daemon), after;

	for (unsigned i = 0; i < 4; i++)
		if (rocmmem_lease_acquire(c, &req, &l[i]) != 0)
			l[i] = NULL;
	after = bench_proc_fds(daemon);
	for (unsigned i = 0; i < 4; i++)
		if (l[i])
			rocmmem_lease_release(l[i]);
	return after - before;
}

/*
 * connect_as connects to d as subject s: host arenas offered but for SUBJECT_PER_LEASE
 * (ROCMMEM_HOST_ARENA=0), the request lane offered but for SUBJECT_SOCKET and SUBJECT_PER_LEASE
 * (ROCMMEM_LANE=0).
 */
static int connect_as(const struct bench_daemon *d, enum subject s, rocmmem_client **c)
{
	char name[64];
	int err;

	unsetenv("ROCMMEM_HOST_ARENA");
	unsetenv("ROCMMEM_LANE");
	if (s == SUBJECT_PER_LEASE)
		setenv("ROCMMEM_HOST_ARENA", "0", 1);
	/* The per-lease client is the design before issue 18: no arena, and no lane either. */
	if (s == SUBJECT_SOCKET || s == SUBJECT_PER_LEASE)
		setenv("ROCMMEM_LANE", "0", 1);
	snprintf(name, sizeof(name), "bench_roundtrip-%s", subject_names[s]);
	err = rocmmem_connect(d->sock, name, 5000, c);
	unsetenv("ROCMMEM_HOST_ARENA");
	unsetenv("ROCMMEM_LANE");
	return err;
}

static int start_daemons(struct run *r, const char *rocmmemd)
{
	static const char *const info[] = {"--backend", "host", "--budget", "1G", NULL};
	static const char *const warn[] = {"--backend",	  "host", "--budget", "1G",
					   "--log-level", "warn", NULL};
	struct bench_daemon *d = &r->daemons[SUBJECT_DAEMON];
	int err;

	if ((err = bench_daemon_start(d, rocmmemd, -1, info, NULL)) ||
	    (err = connect_as(d, SUBJECT_DAEMON, &r->clients[SUBJECT_DAEMON])) ||
	    (err = connect_as(d, SUBJECT_PER_LEASE, &r->clients[SUBJECT_PER_LEASE])) ||
	    (err = connect_as(d, SUBJECT_SOCKET, &r->clients[SUBJECT_SOCKET])))
		return err;
	r->held_fds[0] = fds_for_leases(d->pid, r->clients[SUBJECT_DAEMON]);
	r->held_fds[1] = fds_for_leases(d->pid, r->clients[SUBJECT_PER_LEASE]);
	if (!r->quiet)
		return 0;
	err = bench_daemon_start(&r->daemons[SUBJECT_QUIET], rocmmemd, -1, warn, NULL);
	if (err)
		return err;
	return connect_as(&r->daemons[SUBJECT_QUIET], SUBJECT_QUIET, &r->clients[SUBJECT_QUIET]);
}

/* start_floors forks the floor servers, one per floor subject. 0 or -errno. */
static int start_floors(struct run *r)
{
	int err = 0;

	for (unsigned s = 0; s < SUBJECT_DAEMON && !err; s++) {
		r->floors[s].kind = s == SUBJECT_FLOOR_NOFD    ? FLOOR_NOFD
				    : s == SUBJECT_FLOOR_MEM   ? FLOOR_MEMFD
				    : s == SUBJECT_FLOOR_ARENA ? FLOOR_ARENA
				    : s == SUBJECT_FLOOR_EPOLL ? FLOOR_EPOLL
				    : s == SUBJECT_FLOOR_LANE  ? FLOOR_LANE
							       : FLOOR_PLAIN;
		err = floor_start(&r->floors[s], &r->sizes);
	}
	return err;
}

/* rounds_run takes the rounds: each placement, every subject in ABBA order. */
static int rounds_run(struct run *r, struct placement *places, unsigned nplaces, unsigned rounds,
		      unsigned ops)
{
	int err = 0;

	for (unsigned round = 0; round < rounds && !err; round++) {
		for (unsigned pi = 0; pi < nplaces && !err; pi++) {
			struct placement *p = &places[pi];
			unsigned n = r->quiet ? SUBJECTS : SUBJECTS - 1;

			if ((err = place(r, p)))
				break;
			/* ABBA: which goes first alternates from round to round. */
			for (unsigned k = 0; k < n && !err; k++)
				err = batch(r, p, (enum subject)((round % 2) ? n - 1 - k : k), ops);
			if (r->quiet && !err)
				time_pieces(ops / 4 + 1);
		}
	}
	return err;
}

static void write_json(struct bench_json *j, const struct run *r, const struct placement *places,
		       unsigned nplaces, unsigned rounds, unsigned ops, const struct profile *pf)
{
	bench_json_str(j, "benchmark", "roundtrip");
	bench_json_str(j, "backend", "host");
	bench_json_int(j, "lease_bytes", (int64_t)LEASE_SIZE);
	bench_json_int(j, "rounds", rounds);
	bench_json_int(j, "ops_per_batch", ops);
	bench_json_int(j, "daemon_fds_for_4_leases_arena", r->held_fds[0]);
	bench_json_int(j, "daemon_fds_for_4_leases_per_lease", r->held_fds[1]);
	/* An arena client holds at most its arena's fd: more means the daemon gave memfds. */
	bench_json_bool(j, "arena_in_use", r->held_fds[0] <= 1);
	bench_json_object(j, "floor_packets");
	bench_json_int(j, "acquire", (int64_t)r->sizes.acquire);
	bench_json_int(j, "grant", (int64_t)r->sizes.grant);
	bench_json_int(j, "release", (int64_t)r->sizes.release);
	bench_json_int(j, "released", (int64_t)r->sizes.released);
	bench_json_end_object(j);
	if (nplaces < 2)
		bench_json_str(j, "cross_core", "not run: one CPU available");
	bench_json_array(j, "placements");
	for (unsigned i = 0; i < nplaces; i++)
		write_placement(j, r, &places[i]);
	bench_json_end_array(j);
	if (pf->dir) {
		bench_json_object(j, "profile");
		bench_json_int(j, "ops", pf->ops);
		bench_json_str(j, "dir", pf->dir);
		bench_json_bool(j, "perf", pf->perf);
		bench_json_bool(j, "strace", pf->strace);
		bench_json_end_object(j);
	}
	if (r->quiet) {
		bench_json_object(j, "pieces");
		for (unsigned i = 0; i < PIECES; i++)
			bench_json_hist(j, piece_names[i], &pieces[i]);
		bench_json_end_object(j);
	}
}

int main(int argc, char **argv)
{
	struct bench_args args;
	struct profile profile = {0};
	struct run r;
	struct placement places[2] = {{.name = "same-core", .client_cpu = 0, .server_cpu = 0},
				      {.name = "cross-core", .client_cpu = 0, .server_cpu = 1}};
	unsigned nplaces, rounds, ops;
	struct bench_json j;
	int err = 0, status = 0;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	memset(&r, 0, sizeof(r));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--breakdown") == 0)
			r.quiet = true;
		else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			profile.dir = argv[++i];
		else
			return bench_usage("bench_roundtrip", " [--breakdown] [--profile DIR]");
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_roundtrip");
	rounds = (unsigned)bench_mode_pick(&args, 2, 8, MAX_ROUNDS);
	ops = (unsigned)bench_mode_pick(&args, 50, 300, 1000);
	nplaces = bench_cpu_count() >= 2 ? 2 : 1;
	for (unsigned i = 0; i < nplaces; i++)
		for (unsigned s = 0; s < SUBJECTS; s++)
			bench_hist_init(&places[i].hist[s]);
	for (unsigned i = 0; i < PIECES; i++)
		bench_hist_init(&pieces[i]);
	measure_sizes(&r.sizes);
	/* The floor servers are forked before anything else runs in this process. */
	if ((err = start_floors(&r)) || (err = start_daemons(&r, args.rocmmemd))) {
		fprintf(stderr, "bench_roundtrip: Could not start: %s (%s)\n", strerror(-err),
			rocmmem_last_error());
		status = 1;
		goto out;
	}
	if ((err = rounds_run(&r, places, nplaces, rounds, ops))) {
		fprintf(stderr, "bench_roundtrip: an operation failed: %s (%s)\n", strerror(-err),
			rocmmem_last_error());
		status = 1;
		goto out;
	}
	if (profile.dir) {
		/* The defaults' client (through the lane), the socket alone, a memfd per lease. */
		const struct profiled who[] = {{"", r.clients[SUBJECT_DAEMON]},
					       {"socket-", r.clients[SUBJECT_SOCKET]},
					       {"per-lease-", r.clients[SUBJECT_PER_LEASE]}};

		profile.ops = (unsigned)bench_mode_pick(&args, 200, 2000, 5000);
		profile_daemon(&profile, r.daemons[SUBJECT_DAEMON].pid, who, 3, lease_op);
	}
	out = bench_open_output(&args);
	if (!out) {
		status = 1;
		goto out;
	}
	bench_json_open(&j, out);
	write_json(&j, &r, places, nplaces, rounds, ops, &profile);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
out:
	bench_pin_self(-1);
	for (unsigned s = SUBJECT_DAEMON; s < SUBJECTS; s++) {
		rocmmem_disconnect(r.clients[s]);
		if (own_daemon(s) && r.daemons[s].pid > 0 && bench_daemon_stop(&r.daemons[s]) != 0)
			status = 1;
	}
	for (unsigned s = 0; s < SUBJECT_DAEMON; s++)
		if (r.floors[s].pid > 0)
			floor_stop(&r.floors[s]);
	return status;
}
