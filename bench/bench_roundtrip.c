/* SPDX-License-Identifier: MIT */
/*
 * bench_roundtrip.c: the lease round trip through rocmmemd (acquire + map + touch one page +
 * unmap + release, host backend) against its floor, a raw SOCK_SEQPACKET ping-pong of two round
 * trips carrying one memfd, with client and server on the same CPU and on different CPUs.
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rocmmem.h"
#include "rocmmem.pb-c.h"
#include "wire.h"

#define LEASE_SIZE ((uint64_t)2 << 20)
#define WARMUP_OPS 20u

/*
 * What is compared: the floor (the IPC alone), the floor doing the same memory work as the
 * daemon and librocmmem (a fresh sealed memfd per acquire, hole punch and close at release;
 * the client's aligned mapping, one touch, munmap) without anything else, the daemon, and
 * the daemon with a quieter log (--breakdown).
 */
enum subject { SUBJECT_FLOOR, SUBJECT_FLOOR_MEM, SUBJECT_DAEMON, SUBJECT_QUIET, SUBJECTS };

static const char *const subject_names[SUBJECTS] = {"floor", "floor_with_memory_work", "daemon",
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
};

/* The floor's packets: as large as the daemon's, built from the same messages. */
struct sizes {
	size_t acquire, grant, release, released;
};

struct floor_server {
	pid_t pid;
	int sock;
	bool memory_work; /* a fresh memfd per acquire, punched and closed at release */
};

static struct bench_hist pieces[PIECES];

/* ----------------------------------------------------------------------------------------- */
/* The floor: a server that answers two requests per round trip, the first with a memfd */

static size_t packed_size(const ProtobufCMessage *m)
{
	return protobuf_c_message_get_packed_size(m);
}

static void measure_sizes(struct sizes *s)
{
	Rocmmem__Wire__ClientMessage cm = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	Rocmmem__Wire__ServerMessage sm = ROCMMEM__WIRE__SERVER_MESSAGE__INIT;
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__LeaseGrant grant = ROCMMEM__WIRE__LEASE_GRANT__INIT;

	/* Typical values: ids of a few thousand, what librocmmem sends. */
	cm.has_id = true;
	cm.id = 5000;
	acq.has_device = true;
	acq.has_size = true;
	acq.size = LEASE_SIZE;
	acq.has_timeout_ms = true;
	cm.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	cm.lease_acquire = &acq;
	s->acquire = packed_size(&cm.base);
	rel.has_lease_id = true;
	rel.lease_id = 5000;
	cm.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	cm.lease_release = &rel;
	s->release = packed_size(&cm.base);
	grant.has_lease_id = grant.has_device = grant.has_size = grant.has_handle_kind = true;
	grant.has_fd_count = grant.has_waited_ms = true;
	grant.lease_id = 5000;
	grant.size = LEASE_SIZE;
	grant.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD;
	grant.fd_count = 1;
	reply.has_id = reply.has_error = true;
	reply.id = 5000;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	reply.lease = &grant;
	sm.kind_case = ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY;
	sm.reply = &reply;
	s->grant = packed_size(&sm.base);
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY__NOT_SET;
	s->released = packed_size(&sm.base);
}

static int make_memfd(uint64_t size)
{
	int fd = memfd_create("rocmmem-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static void floor_serve(int sock, const struct sizes *s, bool memory_work)
{
	uint8_t in[WIRE_MAX_FRAME], out[256] = {0};
	int memfd = make_memfd(LEASE_SIZE);
	uint64_t n = 0;

	if (memfd < 0)
		_exit(1);
	for (;;) {
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		ssize_t len = wire_recv(sock, in, sizeof(in), fds, &nfds, 0);

		if (len <= 0)
			_exit(0);
		wire_close_fds(fds, nfds);
		/* Requests alternate: acquire (answered with the memfd), then release. */
		if (n++ % 2 == 0) {
			if (memory_work && (memfd = make_memfd(LEASE_SIZE)) < 0)
				_exit(1);
			wire_send(sock, out, s->grant, &memfd, 1, 0);
		} else {
			if (memory_work) {
				fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
					  (off_t)LEASE_SIZE);
				close(memfd);
			}
			wire_send(sock, out, s->released, NULL, 0, 0);
		}
	}
}

static int floor_start(struct floor_server *f, const struct sizes *s)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	f->pid = fork();
	if (f->pid < 0)
		return -errno;
	if (f->pid == 0) {
		/* Only its own end: another floor's end kept open here would never see EOF. */
		if (sv[1] > 3)
			close_range(3, (unsigned)sv[1] - 1, 0);
		close_range((unsigned)sv[1] + 1, ~0u, 0);
		floor_serve(sv[1], s, f->memory_work);
	}
	close(sv[1]);
	f->sock = sv[0];
	return 0;
}

static void floor_stop(struct floor_server *f)
{
	close(f->sock);
	waitpid(f->pid, NULL, 0);
}

/*
 * map_like_librocmmem maps a lease's memfd the way librocmmem does: reserve twice the
 * alignment more, map the file over the aligned part, trim both sides, ask for huge pages.
 */
static uint8_t *map_like_librocmmem(int fd, size_t size)
{
	const size_t align = (size_t)2 << 20;
	uint8_t *base, *p;

	base =
	    mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)base + align - 1) & ~(uintptr_t)(align - 1));
	if (mmap(p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		munmap(base, size + align);
		return NULL;
	}
	if (p > base)
		munmap(base, (size_t)(p - base));
	if (base + size + align > p + size)
		munmap(p + size, (size_t)(base + size + align - (p + size)));
	madvise(p, size, MADV_HUGEPAGE);
	return p;
}

/*
 * floor_op: two round trips, the first bringing a memfd, closed as a client would; with the
 * memory work, mapped, touched and unmapped in between, as librocmmem and a host would.
 */
static int floor_op(struct floor_server *f, const struct sizes *s)
{
	uint8_t req[256] = {0}, rep[256];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	if (wire_send(f->sock, req, s->acquire, NULL, 0, 0) < 0 ||
	    wire_recv(f->sock, rep, sizeof(rep), fds, &nfds, 0) <= 0 || nfds != 1)
		return -EPROTO;
	if (f->memory_work) {
		uint8_t *p = map_like_librocmmem(fds[0], LEASE_SIZE);

		if (!p) {
			wire_close_fds(fds, nfds);
			return -ENOMEM;
		}
		((volatile uint8_t *)p)[0] = 1;
		munmap(p, LEASE_SIZE);
	}
	if (wire_send(f->sock, req, s->release, NULL, 0, 0) < 0) {
		wire_close_fds(fds, nfds);
		return -EPROTO;
	}
	wire_close_fds(fds, nfds);
	nfds = 0;
	if (wire_recv(f->sock, rep, sizeof(rep), fds, &nfds, 0) <= 0)
		return -EPROTO;
	return 0;
}

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

/* ----------------------------------------------------------------------------------------- */

/* ----------------------------------------------------------------------------------------- */
/* Profiles (--profile DIR): perf and strace attached to the daemon and to this process */

/* attach starts a tool (perf record, strace -c) attached to a process; 0 if it could not. */
static pid_t attach(const char *const *argv)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return 0;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	/* Give it time to attach; a tool that is missing or refused has exited by then. */
	bench_sleep_ns(700000000);
	if (waitpid(pid, &status, WNOHANG) == pid)
		return 0;
	return pid;
}

static void detach(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGINT);
	waitpid(pid, NULL, 0);
}

struct profile {
	const char *dir;
	unsigned ops;
	bool perf, strace;
};

struct run {
	struct floor_server floor, floor_mem;
	struct sizes sizes;
	struct bench_daemon daemons[SUBJECTS]; /* [SUBJECT_DAEMON], [SUBJECT_QUIET] */
	rocmmem_client *clients[SUBJECTS];
	bool quiet; /* the --log-level warn daemon runs too */
};

static pid_t server_pid(const struct run *r, enum subject s)
{
	return s == SUBJECT_FLOOR	? r->floor.pid
	       : s == SUBJECT_FLOOR_MEM ? r->floor_mem.pid
					: r->daemons[s].pid;
}

static int one_op(struct run *r, enum subject s)
{
	if (s == SUBJECT_FLOOR)
		return floor_op(&r->floor, &r->sizes);
	if (s == SUBJECT_FLOOR_MEM)
		return floor_op(&r->floor_mem, &r->sizes);
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
		if (s != SUBJECT_QUIET || r->quiet)
			err = bench_pin_process(server_pid(r, s), p->server_cpu);
	return err;
}

/* batch times n operations of subject s, with the CPU both sides spend on them. */
static int batch(struct run *r, struct placement *p, enum subject s, unsigned n)
{
	uint64_t srv0, srv1, stat, cli0, sw_srv0, sw_cli0;
	int err;

	for (unsigned i = 0; i < WARMUP_OPS; i++)
		if ((err = one_op(r, s)))
			return err;
	bench_proc_cpu(server_pid(r, s), &stat, &srv0);
	sw_srv0 = switches(server_pid(r, s));
	sw_cli0 = switches(0);
	cli0 = bench_thread_cpu_ns();
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = bench_now_ns();

		if ((err = one_op(r, s)))
			return err;
		bench_hist_add(&p->hist[s], bench_now_ns() - t0);
	}
	p->client_cpu_ns[s] += bench_thread_cpu_ns() - cli0;
	p->client_switches[s] += switches(0) - sw_cli0;
	p->server_switches[s] += switches(server_pid(r, s)) - sw_srv0;
	bench_proc_cpu(server_pid(r, s), &stat, &srv1);
	p->server_cpu_ns[s] += srv1 - srv0;
	p->ops[s] += n;
	return 0;
}

static void write_placement(struct bench_json *j, const struct run *r, const struct placement *p)
{
	const struct bench_hist *f = &p->hist[SUBJECT_FLOOR], *d = &p->hist[SUBJECT_DAEMON];

	bench_json_object(j, NULL);
	bench_json_str(j, "name", p->name);
	bench_json_int(j, "client_cpu", p->client_cpu);
	bench_json_int(j, "server_cpu", p->server_cpu);
	for (unsigned s = 0; s < SUBJECTS; s++)
		if (s != SUBJECT_QUIET || r->quiet)
			bench_json_hist(j, subject_names[s], &p->hist[s]);
	bench_json_num(j, "ratio_p50",
		       bench_ratio((double)bench_hist_pct(d, 50), (double)bench_hist_pct(f, 50)));
	bench_json_num(j, "ratio_p99",
		       bench_ratio((double)bench_hist_pct(d, 99), (double)bench_hist_pct(f, 99)));
	bench_json_num(
	    j, "ratio_p999",
	    bench_ratio((double)bench_hist_pct(d, 99.9), (double)bench_hist_pct(f, 99.9)));
	bench_json_num(j, "daemon_p99_over_p50",
		       bench_ratio((double)bench_hist_pct(d, 99), (double)bench_hist_pct(d, 50)));
	bench_json_num(j, "floor_p99_over_p50",
		       bench_ratio((double)bench_hist_pct(f, 99), (double)bench_hist_pct(f, 50)));
	bench_json_num(j, "ratio_p50_vs_floor_with_memory_work",
		       bench_ratio((double)bench_hist_pct(d, 50),
				   (double)bench_hist_pct(&p->hist[SUBJECT_FLOOR_MEM], 50)));
	if (r->quiet) {
		const struct bench_hist *q = &p->hist[SUBJECT_QUIET];

		bench_json_num(
		    j, "quiet_ratio_p50",
		    bench_ratio((double)bench_hist_pct(q, 50), (double)bench_hist_pct(f, 50)));
	}
	/* Microseconds of CPU per operation, from schedstat (server) and the thread clock. */
	bench_json_object(j, "cpu_us_per_op");
	for (unsigned s = 0; s < SUBJECTS; s++) {
		char key[64];

		if (s == SUBJECT_QUIET && !r->quiet)
			continue;
		snprintf(key, sizeof(key), "%s_server", subject_names[s]);
		bench_json_num(
		    j, key, bench_ratio((double)p->server_cpu_ns[s] / 1000.0, (double)p->ops[s]));
		snprintf(key, sizeof(key), "%s_client", subject_names[s]);
		bench_json_num(
		    j, key, bench_ratio((double)p->client_cpu_ns[s] / 1000.0, (double)p->ops[s]));
	}
	bench_json_end_object(j);
	bench_json_object(j, "context_switches_per_op");
	for (unsigned s = 0; s < SUBJECTS; s++) {
		char key[64];

		if (s == SUBJECT_QUIET && !r->quiet)
			continue;
		snprintf(key, sizeof(key), "%s_server", subject_names[s]);
		bench_json_num(j, key,
			       bench_ratio((double)p->server_switches[s], (double)p->ops[s]));
		snprintf(key, sizeof(key), "%s_client", subject_names[s]);
		bench_json_num(j, key,
			       bench_ratio((double)p->client_switches[s], (double)p->ops[s]));
	}
	bench_json_end_object(j);
	bench_json_end_object(j);
}

/*
 * profile_daemon runs ops lease operations (same CPU for both sides) under perf record
 * (the daemon: DIR/perf.data), then under strace -c (the daemon: DIR/strace-daemon.txt; this
 * process: DIR/strace-client.txt), for the report's explanation of where the time goes.
 */
static void profile_daemon(struct run *r, struct profile *pf)
{
	char pid[16], self[16], data[512], sd[512], sc[512];
	pid_t tool, tool2;

	snprintf(pid, sizeof(pid), "%d", (int)r->daemons[SUBJECT_DAEMON].pid);
	snprintf(self, sizeof(self), "%d", (int)getpid());
	snprintf(data, sizeof(data), "%s/perf.data", pf->dir);
	snprintf(sd, sizeof(sd), "%s/strace-daemon.txt", pf->dir);
	snprintf(sc, sizeof(sc), "%s/strace-client.txt", pf->dir);
	bench_pin_self(0);
	bench_pin_process(r->daemons[SUBJECT_DAEMON].pid, 0);
	{
		const char *argv[] = {"perf", "record", "-q", "-F", "4999", "-e", "cpu-clock",
				      "-g",   "-p",	pid,  "-o", data,   NULL};

		tool = attach(argv);
		for (unsigned i = 0; i < pf->ops && tool > 0; i++)
			lease_op(r->clients[SUBJECT_DAEMON]);
		detach(tool);
		pf->perf = tool > 0;
	}
	{
		const char *argv[] = {"strace", "-c", "-f", "-p", pid, "-o", sd, NULL};
		const char *argv2[] = {"strace", "-c", "-p", self, "-o", sc, NULL};

		tool = attach(argv);
		tool2 = tool > 0 ? attach(argv2) : 0;
		for (unsigned i = 0; i < pf->ops && tool > 0; i++)
			lease_op(r->clients[SUBJECT_DAEMON]);
		detach(tool2);
		detach(tool);
		pf->strace = tool > 0 && tool2 > 0;
	}
}

static int start_daemons(struct run *r, const char *rocmmemd)
{
	static const char *const info[] = {"--backend", "host", "--budget", "1G", NULL};
	static const char *const warn[] = {"--backend",	  "host", "--budget", "1G",
					   "--log-level", "warn", NULL};
	int err;

	err = bench_daemon_start(&r->daemons[SUBJECT_DAEMON], rocmmemd, -1, info, NULL);
	if (err)
		return err;
	err = rocmmem_connect(r->daemons[SUBJECT_DAEMON].sock, "bench_roundtrip", 5000,
			      &r->clients[SUBJECT_DAEMON]);
	if (err || !r->quiet)
		return err;
	err = bench_daemon_start(&r->daemons[SUBJECT_QUIET], rocmmemd, -1, warn, NULL);
	if (err)
		return err;
	return rocmmem_connect(r->daemons[SUBJECT_QUIET].sock, "bench_roundtrip", 5000,
			       &r->clients[SUBJECT_QUIET]);
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
		if (strcmp(argv[i], "--breakdown") == 0) {
			r.quiet = true;
		} else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
			profile.dir = argv[++i];
		} else {
			return bench_usage("bench_roundtrip", " [--breakdown] [--profile DIR]");
		}
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_roundtrip");
	rounds = (unsigned)bench_mode_pick(&args, 2, 8, 30);
	ops = (unsigned)bench_mode_pick(&args, 50, 300, 1000);
	nplaces = bench_cpu_count() >= 2 ? 2 : 1;
	for (unsigned i = 0; i < nplaces; i++)
		for (unsigned s = 0; s < SUBJECTS; s++)
			bench_hist_init(&places[i].hist[s]);
	for (unsigned i = 0; i < PIECES; i++)
		bench_hist_init(&pieces[i]);
	measure_sizes(&r.sizes);
	/* The floor servers are forked before anything else runs in this process. */
	r.floor_mem.memory_work = true;
	if ((err = floor_start(&r.floor, &r.sizes)) ||
	    (err = floor_start(&r.floor_mem, &r.sizes)) ||
	    (err = start_daemons(&r, args.rocmmemd))) {
		fprintf(stderr, "bench_roundtrip: Could not start: %s (%s)\n", strerror(-err),
			rocmmem_last_error());
		status = 1;
		goto out;
	}
	for (unsigned round = 0; round < rounds && !err; round++) {
		for (unsigned pi = 0; pi < nplaces && !err; pi++) {
			struct placement *p = &places[pi];
			enum subject order[SUBJECTS] = {SUBJECT_FLOOR, SUBJECT_FLOOR_MEM,
							SUBJECT_DAEMON, SUBJECT_QUIET};
			unsigned n = r.quiet ? 4 : 3;

			if ((err = place(&r, p)))
				break;
			/* ABBA: which goes first alternates from round to round. */
			for (unsigned k = 0; k < n && !err; k++) {
				enum subject s = order[(round % 2) ? n - 1 - k : k];

				err = batch(&r, p, s, ops);
			}
			if (r.quiet && !err)
				time_pieces(ops / 4 + 1);
		}
	}
	if (err) {
		fprintf(stderr, "bench_roundtrip: an operation failed: %s (%s)\n", strerror(-err),
			rocmmem_last_error());
		status = 1;
		goto out;
	}
	if (profile.dir) {
		profile.ops = (unsigned)bench_mode_pick(&args, 200, 2000, 5000);
		profile_daemon(&r, &profile);
	}
	out = bench_open_output(&args);
	if (!out) {
		status = 1;
		goto out;
	}
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "roundtrip");
	bench_json_str(&j, "backend", "host");
	bench_json_int(&j, "lease_bytes", (int64_t)LEASE_SIZE);
	bench_json_int(&j, "rounds", rounds);
	bench_json_int(&j, "ops_per_batch", ops);
	bench_json_object(&j, "floor_packets");
	bench_json_int(&j, "acquire", (int64_t)r.sizes.acquire);
	bench_json_int(&j, "grant", (int64_t)r.sizes.grant);
	bench_json_int(&j, "release", (int64_t)r.sizes.release);
	bench_json_int(&j, "released", (int64_t)r.sizes.released);
	bench_json_end_object(&j);
	if (nplaces < 2)
		bench_json_str(&j, "cross_core", "not run: one CPU available");
	bench_json_array(&j, "placements");
	for (unsigned i = 0; i < nplaces; i++)
		write_placement(&j, &r, &places[i]);
	bench_json_end_array(&j);
	if (profile.dir) {
		bench_json_object(&j, "profile");
		bench_json_int(&j, "ops", profile.ops);
		bench_json_str(&j, "dir", profile.dir);
		bench_json_bool(&j, "perf", profile.perf);
		bench_json_bool(&j, "strace", profile.strace);
		bench_json_end_object(&j);
	}
	if (r.quiet) {
		bench_json_object(&j, "pieces");
		for (unsigned i = 0; i < PIECES; i++)
			bench_json_hist(&j, piece_names[i], &pieces[i]);
		bench_json_end_object(&j);
	}
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
out:
	bench_pin_self(-1);
	for (unsigned s = SUBJECT_DAEMON; s < SUBJECTS; s++) {
		rocmmem_disconnect(r.clients[s]);
		if (r.daemons[s].pid > 0 && bench_daemon_stop(&r.daemons[s]) != 0)
			status = 1;
	}
	if (r.floor.pid > 0)
		floor_stop(&r.floor);
	if (r.floor_mem.pid > 0)
		floor_stop(&r.floor_mem);
	return status;
}
