/* SPDX-License-Identifier: MIT */
/*
 * bench_evict.c: eviction turnaround. Two model hosts share a budget that holds one of their
 * models; each in turn acquires its model, which makes the daemon ask the other to unload
 * its idle one. The requester times its acquire (request to grant); the owner times its own
 * unload (freeing the model's weights: munmap of a touched buffer) inside its evict callback
 * and acks. The daemon's overhead is the turnaround minus the owner's unload.
 *
 * The floor, in the same run and interleaved: the same three-party exchange without the daemon
 * (requester -> relay -> owner, which unloads the same way, -> relay -> requester) over raw
 * SOCK_SEQPACKET sockets. The owner waits for evict requests in poll() on the library's event
 * fd, as an event-driven host does, so its wake-up is part of both.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "rocmmem.h"

#define MiB ((uint64_t)1 << 20)
#define BUDGET (64 * MiB)
#define MODEL (48 * MiB) /* two never fit together */

/* Commands from the parent to a host. */
enum { CMD_ACQUIRE = 1, CMD_QUIT = 2 };

/* What the hosts report, in memory shared with the parent. */
struct shared_slots {
	uint64_t unload_ns; /* the latest unload, by whichever host was asked */
	uint64_t unloads;
};

static struct shared_slots *slots;
static uint64_t weights_bytes = 4 * MiB;

/* The model's weights as a host holds them: touched anonymous memory. */
static uint8_t *load_weights(void)
{
	uint8_t *p =
	    mmap(NULL, weights_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 1, weights_bytes);
	return p;
}

/* unload frees the weights and returns how long it took. */
static uint64_t unload(uint8_t **weights)
{
	uint64_t t0 = bench_now_ns();

	if (*weights)
		munmap(*weights, weights_bytes);
	*weights = NULL;
	return bench_now_ns() - t0;
}

struct host {
	rocmmem_client *c;
	uint64_t model;
	uint8_t *weights;
};

static void on_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct host *h = userdata;

	if (ev->type != ROCMMEM_EVENT_EVICT_REQUEST || ev->model_id != h->model)
		return;
	slots->unload_ns = unload(&h->weights);
	slots->unloads++;
	rocmmem_model_evict_ack(c, ev->model_id);
}

/* host_main: wait for commands while answering evict requests; report each turnaround. */
static int host_main(const char *sock, int cmd, int report, unsigned index)
{
	struct host h = {0};
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = index ? "model-b" : "model-a", .size = MODEL};
	char name[32];

	snprintf(name, sizeof(name), "evict-host-%u", index);
	if (rocmmem_connect(sock, name, 5000, &h.c) ||
	    rocmmem_set_event_callback(h.c, on_event, &h) ||
	    rocmmem_model_register(h.c, &desc, &h.model))
		return 1;
	for (;;) {
		struct pollfd p[2] = {{.fd = cmd, .events = POLLIN},
				      {.fd = rocmmem_event_fd(h.c), .events = POLLIN}};
		uint8_t what;

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents & POLLIN)
			rocmmem_dispatch(h.c);
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		if (read(cmd, &what, 1) != 1 || what == CMD_QUIT)
			break;
		{
			uint64_t t0 = bench_now_ns(), took;
			int err = rocmmem_model_acquire(h.c, h.model, 10000);
			int64_t msg[2];

			took = bench_now_ns() - t0;
			if (!err && !h.weights)
				h.weights = load_weights();
			if (!err)
				err = rocmmem_model_release(h.c, h.model);
			msg[0] = err;
			msg[1] = (int64_t)took;
			if (write(report, msg, sizeof(msg)) != sizeof(msg))
				break;
		}
	}
	rocmmem_disconnect(h.c);
	return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* The floor: requester (this process) -> relay -> owner -> relay -> requester */

static void relay_main(int up, int down)
{
	uint8_t buf[64];

	for (;;) {
		ssize_t n = recv(up, buf, sizeof(buf), 0);

		if (n <= 0 || send(down, buf, (size_t)n, 0) != n)
			break;
		n = recv(down, buf, sizeof(buf), 0);
		if (n <= 0 || send(up, buf, (size_t)n, 0) != n)
			break;
	}
}

/* owner_main: a message starting with 'L' loads the weights (untimed), any other unloads. */
static void owner_main(int sock)
{
	uint8_t *weights = NULL;
	uint8_t buf[64];

	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, -1) < 0)
			continue;
		n = recv(sock, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		if (buf[0] == 'L') {
			if (!weights)
				weights = load_weights();
		} else {
			slots->unload_ns = unload(&weights);
			slots->unloads++;
		}
		if (send(sock, buf, (size_t)n, 0) != n)
			break;
	}
}

static pid_t fork_child(int keep1, int keep2)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Only the sockets this child uses: the others must see EOF when closed. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != keep1 && fd != keep2)
				close(fd);
	}
	return pid;
}

struct floor {
	int sock;
	pid_t relay, owner;
};

static int floor_start(struct floor *f)
{
	int a[2], b[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, b) < 0)
		return -errno;
	f->relay = fork_child(a[1], b[0]);
	if (f->relay == 0) {
		relay_main(a[1], b[0]);
		_exit(0);
	}
	f->owner = fork_child(b[1], -1);
	if (f->owner == 0) {
		owner_main(b[1]);
		_exit(0);
	}
	close(a[1]);
	close(b[0]);
	close(b[1]);
	f->sock = a[0];
	return 0;
}

/* floor_op has the owner load (untimed, as the daemon's hosts reload between turns), then
 * times the request that makes it unload. */
static int floor_op(struct floor *f, uint64_t *took)
{
	uint8_t buf[32] = {'L'};
	uint64_t t0;

	if (send(f->sock, buf, 24, 0) != 24 || recv(f->sock, buf, sizeof(buf), 0) <= 0)
		return -EPROTO;
	buf[0] = 'E';
	t0 = bench_now_ns();
	if (send(f->sock, buf, 24, 0) != 24 || recv(f->sock, buf, sizeof(buf), 0) <= 0)
		return -EPROTO;
	*took = bench_now_ns() - t0;
	return 0;
}

/* ----------------------------------------------------------------------------------------- */

struct figures {
	struct bench_hist turnaround, unload, overhead;
};

static void add(struct figures *f, uint64_t turnaround, uint64_t unload_ns)
{
	bench_hist_add(&f->turnaround, turnaround);
	bench_hist_add(&f->unload, unload_ns);
	bench_hist_add(&f->overhead, turnaround > unload_ns ? turnaround - unload_ns : 0);
}

static void write_figures(struct bench_json *j, const char *key, const struct figures *f)
{
	bench_json_object(j, key);
	bench_json_hist(j, "turnaround", &f->turnaround);
	bench_json_hist(j, "owner_unload", &f->unload);
	bench_json_hist(j, "overhead", &f->overhead);
	bench_json_end_object(j);
}

int main(int argc, char **argv)
{
	static const char *const daemon_args[] = {"--backend", "host", "--budget", "64M", NULL};
	struct bench_args args;
	struct bench_daemon d = {0};
	struct floor fl = {.sock = -1};
	struct figures daemon_fig, floor_fig;
	int cmd[2][2], report[2];
	pid_t hosts[2] = {-1, -1};
	unsigned rounds, per_round, turn = 0;
	struct bench_json j;
	int err = 0, status = 1;
	FILE *out;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	if (argc > 1)
		return bench_usage("bench_evict", "");
	if (!args.rocmmemd)
		return bench_need_daemon("bench_evict");
	rounds = (unsigned)bench_mode_pick(&args, 2, 4, 12);
	per_round = (unsigned)bench_mode_pick(&args, 10, 20, 40);
	bench_hist_init(&daemon_fig.turnaround);
	bench_hist_init(&daemon_fig.unload);
	bench_hist_init(&daemon_fig.overhead);
	floor_fig = daemon_fig;
	slots =
	    mmap(NULL, sizeof(*slots), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED)
		return 1;
	if ((err = bench_daemon_start(&d, args.rocmmemd, -1, daemon_args, NULL)))
		goto out;
	if (pipe2(report, O_CLOEXEC) < 0)
		goto out;
	for (unsigned i = 0; i < 2; i++) {
		if (pipe2(cmd[i], O_CLOEXEC) < 0)
			goto out;
		hosts[i] = fork();
		if (hosts[i] == 0) {
			close(cmd[i][1]);
			close(report[0]);
			_exit(host_main(d.sock, cmd[i][0], report[1], i));
		}
		close(cmd[i][0]);
	}
	close(report[1]);
	if ((err = floor_start(&fl)))
		goto out;
	/* The first acquire fits without evicting anything: not counted. */
	for (unsigned r = 0; r <= rounds && !err; r++) {
		bool daemon_first = r % 2 == 0;

		for (unsigned phase = 0; phase < 2 && !err; phase++) {
			bool daemon = (phase == 0) == daemon_first;

			for (unsigned i = 0; i < per_round && !err; i++) {
				uint64_t before = slots->unloads, took = 0;

				if (daemon) {
					uint8_t what = CMD_ACQUIRE;
					int64_t msg[2];

					if (write(cmd[turn][1], &what, 1) != 1 ||
					    read(report[0], msg, sizeof(msg)) != sizeof(msg)) {
						err = -EPIPE;
						break;
					}
					turn = 1 - turn;
					if (msg[0]) {
						err = (int)msg[0];
						break;
					}
					took = (uint64_t)msg[1];
				} else if ((err = floor_op(&fl, &took))) {
					break;
				}
				/* Round 0 warms up; an acquire that evicted nothing is not one. */
				if (r > 0 && slots->unloads == before + 1)
					add(daemon ? &daemon_fig : &floor_fig, took,
					    slots->unload_ns);
			}
		}
	}
	if (err) {
		fprintf(stderr, "bench_evict: failed: %s\n", strerror(-err));
		goto out;
	}
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "evict");
	bench_json_int(&j, "budget_bytes", (int64_t)BUDGET);
	bench_json_int(&j, "model_bytes", (int64_t)MODEL);
	bench_json_int(&j, "weights_unmapped_bytes", (int64_t)weights_bytes);
	write_figures(&j, "rocmmemd", &daemon_fig);
	write_figures(&j, "floor", &floor_fig);
	bench_json_num(&j, "overhead_p50_us",
		       (double)bench_hist_pct(&daemon_fig.overhead, 50) / 1000.0);
	bench_json_num(&j, "overhead_p99_us",
		       (double)bench_hist_pct(&daemon_fig.overhead, 99) / 1000.0);
	bench_json_num(&j, "ratio_overhead_p50_vs_floor",
		       bench_ratio((double)bench_hist_pct(&daemon_fig.overhead, 50),
				   (double)bench_hist_pct(&floor_fig.overhead, 50)));
	bench_json_num(&j, "ratio_overhead_p99_vs_floor",
		       bench_ratio((double)bench_hist_pct(&daemon_fig.overhead, 99),
				   (double)bench_hist_pct(&floor_fig.overhead, 99)));
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	for (unsigned i = 0; i < 2; i++) {
		if (hosts[i] > 0) {
			uint8_t what = CMD_QUIT;

			if (write(cmd[i][1], &what, 1) != 1)
				kill(hosts[i], SIGKILL);
			waitpid(hosts[i], NULL, 0);
		}
	}
	if (fl.sock >= 0) {
		close(fl.sock);
		waitpid(fl.relay, NULL, 0);
		waitpid(fl.owner, NULL, 0);
	}
	if (d.pid > 0 && bench_daemon_stop(&d) != 0)
		status = 1;
	return status;
}
