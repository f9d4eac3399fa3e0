/* SPDX-License-Identifier: MIT */
/*
 * live_fuzz.c: mutated packets on a real rocmmemd's socket. Several connections send the seed
 * corpus bit-flipped, cut, stretched, spliced, with stray fds, oversized, with hello twice or
 * never, while a well-behaved librocmmem client keeps acquiring, writing and releasing. Every
 * thousand packets, and at the end, the fuzzing connections close and the daemon must be
 * alive, serve, and be back to its fd baseline with nothing leased. Connections that took a
 * request lane at hello send half their packets through it instead (common/lane.h), with the
 * length and the count of socket packets sent before sometimes lied about, and ring the
 * doorbell now and then for nothing.
 *
 * ROCMMEM_LIVE_FUZZ_SEED=N replays a run (the seed is printed first); ROCMMEM_LIVE_FUZZ_ITERATIONS
 * and ROCMMEM_LIVE_FUZZ_SECONDS bound it (defaults 20000 packets, 6 s, whichever comes first). To
 * find the packet that broke a run: ROCMMEM_LIVE_FUZZ_EPOCH=1 checks after every packet and
 * ROCMMEM_LIVE_FUZZ_VERBOSE=1 prints each one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "lane.h"
#include "version.h"
#include "wire.h"

/* Fuzzing connections open at once; packets between two health checks. */
#define LIVE_CONNECTIONS 6
#define LIVE_EPOCH 1000
/* The kernel's cap on fds in one SCM_RIGHTS message (SCM_MAX_FD). */
#define KERNEL_MAX_FDS 253
#define SEED_MAX 256

static uint64_t rng_state;

/* rng: xorshift64*, reproducible from the printed seed. */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rng() % n) : 0;
}

/* The corpus: packets as committed (some decode, some are deliberately broken). */
struct seed {
	uint8_t *data;
	size_t len;
};
static struct seed seeds[SEED_MAX];
static size_t nseeds;

static void load_seeds(void)
{
	struct dirent **names;
	int n = scandir(FUZZ_CORPUS_DIR "/frame", &names, NULL, alphasort);

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/frame/%s", FUZZ_CORPUS_DIR, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && nseeds < SEED_MAX && (f = fopen(path, "rb"))) {
			struct seed *s = &seeds[nseeds];

			s->data = malloc(WIRE_MAX_FRAME);
			assert_non_null(s->data);
			s->len = fread(s->data, 1, WIRE_MAX_FRAME, f);
			fclose(f);
			if (s->len > 0)
				nseeds++;
			else
				free(s->data);
		}
		free(names[i]);
	}
	free(names);
	assert_true(nseeds >= 20);
}

/* What the fuzzing connections send, and what came back. */
struct stats {
	unsigned long sent, refused_send, replies, errors, grants, events, reconnects, fds_sent;
	unsigned long ops, ops_refused, lane;
};
static struct stats st;

struct conn {
	int fd; /* -1: closed */
	bool greeted;
	struct lane_page *lane; /* its request lane, or NULL */
	int memfd, doorbell;
	uint32_t seq;	    /* req.seq of its latest lane request */
	unsigned long sent; /* packets sent on its socket */
};
static struct conn conns[LIVE_CONNECTIONS];

/* Fds the fuzzer attaches: a leak probe's write end, /dev/null, a memfd and a socket. */
static int probe[2] = {-1, -1};
static int stray[4];

/* drain reads whatever the daemon sent on c, checking each packet; closes c at EOF. */
static void drain(struct conn *c)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KERNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	static uint8_t buf[WIRE_MAX_FRAME];

	while (c->fd >= 0) {
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = control.buf,
				     .msg_controllen = sizeof(control.buf)};
		Rocmmem__Wire__ServerMessage *m;
		ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		/* Lease fds that came with a grant: ours to close. */
		for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; h;
		     h = CMSG_NXTHDR(&msg, h)) {
			size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; h->cmsg_type == SCM_RIGHTS && i < count; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
				close(fd);
			}
		}
		if (n <= 0) {
			close(c->fd);
			c->fd = -1;
			return;
		}
		/* Whatever it was asked, the daemon answers in well-formed messages. */
		assert_false(msg.msg_flags & MSG_TRUNC);
		m = rocmmem__wire__server_message__unpack(NULL, (size_t)n, buf);
		if (!m)
			fail_msg("the daemon sent a %zd-byte packet that does not decode", n);
		if (m->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
			const Rocmmem__Wire__Reply *r = m->reply;

			st.replies++;
			if (r->has_error && r->error != 0) {
				/* A refusal is a negative errno with words to it. */
				if (r->error >= 0 || !r->message || !r->message[0])
					fail_msg(
					    "refusal %d without a negative errno and a message",
					    r->error);
				st.errors++;
			} else if (r->body_case == ROCMMEM__WIRE__REPLY__BODY_LEASE) {
				st.grants++;
			}
		} else {
			st.events++;
		}
		rocmmem__wire__server_message__free_unpacked(m, NULL);
	}
}

/* send_fds sends len bytes with nfds fds chosen among the strays; returns 0 or -errno. */
static int send_fds(int sock, const void *buf, size_t len, unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KERNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > 0) {
		struct cmsghdr *h;
		int fds[KERNEL_MAX_FDS];

		for (unsigned i = 0; i < nfds; i++)
			fds[i] = i == 0 ? probe[1] : stray[below(4)];
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		h = CMSG_FIRSTHDR(&msg);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

/* close_conn closes c and its lane. */
static void close_conn(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->lane) {
		lane_unmap(c->lane);
		close(c->memfd);
		close(c->doorbell);
		c->lane = NULL;
	}
}

/* open_conn (re)opens c, greeting the daemon most of the time: the rest never say hello. Half
 * of those that do take a request lane. */
static void open_conn(struct conn *c)
{
	close_conn(c); /* the lane of a connection the daemon closed */
	c->fd = hostile_connect();
	c->greeted = below(5) != 0;
	c->sent = 0;
	st.reconnects++;
	if (c->greeted) {
		bool lane = below(2) == 0;
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		char name[32];

		snprintf(name, sizeof(name), "fuzz-%u", (unsigned)below(1000));
		assert_int_equal(harness_raw_hello_fds(c->fd, ROCMMEM_PROTOCOL_VERSION, name, lane,
						       ROCMMEM__WIRE__FEATURE__FEATURE_LANE, NULL,
						       fds, &nfds),
				 0);
		c->sent = 1;
		if (nfds == 2) {
			c->memfd = fds[0];
			c->doorbell = fds[1];
			c->lane = lane_map(c->memfd);
			assert_non_null(c->lane);
			c->seq = atomic_load(&c->lane->rep.seq);
		} else {
			assert_int_equal(nfds, 0);
		}
	}
}

/*
 * send_lane puts a mutated packet in c's lane and rings: its true length most of the time,
 * else any; the socket packets sent before it truly counted most of the time, else any. A
 * ring for nothing (the same seq) now and then. Returns 0 or a negative errno.
 */
static int send_lane(struct conn *c, const uint8_t *buf, size_t len)
{
	uint64_t one = 1;

	memcpy(c->lane->req_data, buf, len < LANE_SLOT ? len : LANE_SLOT);
	c->lane->req.len = below(8) ? (uint32_t)len : (uint32_t)rng();
	c->lane->req.id = below(4) ? 1 + below(1000) : rng();
	c->lane->req.sock_sent = below(8) ? c->sent : below(64);
	if (below(16))
		atomic_store(&c->lane->req.seq, ++c->seq);
	return write(c->doorbell, &one, sizeof(one)) == (ssize_t)sizeof(one) ? 0 : -errno;
}

/* The mutations, each applied to a copy of a seed in buf (cap WIRE_MAX_FRAME * 2). */
static size_t mutate(uint8_t *buf, size_t cap, unsigned *nfds, unsigned *how)
{
	const struct seed *a = &seeds[below(nseeds)], *b = &seeds[below(nseeds)];
	size_t len = a->len;

	memcpy(buf, a->data, len);
	*nfds = 0;
	*how = (unsigned)below(11);
	switch (*how) {
	case 0: /* as committed */
		break;
	case 1: /* bit flips */
		for (size_t i = 0, n = 1 + below(4); i < n; i++)
			buf[below(len)] ^= (uint8_t)(1u << below(8));
		break;
	case 2: /* byte values that matter to varints and lengths */
		for (size_t i = 0, n = 1 + below(3); i < n; i++) {
			static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x40};

			buf[below(len)] = special[below(sizeof(special))];
		}
		break;
	case 3: /* truncated */
		len = below(len);
		break;
	case 4: /* grown: random bytes inserted */
	{
		size_t at = below(len + 1), extra = 1 + below(below(4) == 0 ? 2000 : 16);

		memmove(buf + at + extra, buf + at, len - at);
		for (size_t i = 0; i < extra; i++)
			buf[at + i] = (uint8_t)rng();
		len += extra;
		break;
	}
	case 5: /* spliced: a's head on b's tail */
	{
		size_t head = below(len + 1), tail = below(b->len + 1);

		memcpy(buf + head, b->data + tail, b->len - tail);
		len = head + b->len - tail;
		break;
	}
	case 6: /* concatenated: protobuf merges the two, the last body winning */
		memcpy(buf + len, b->data, b->len);
		len += b->len;
		break;
	case 7: /* stray fds on a packet (the first always the leak probe) */
		*nfds = 1 + (unsigned)(below(8) == 0 ? below(KERNEL_MAX_FDS) : below(4));
		break;
	case 8: /* over the frame cap */
		len = WIRE_MAX_FRAME + 1 + below(cap - WIRE_MAX_FRAME - 1);
		memset(buf, 0x2a, len);
		break;
	case 9: /* empty */
		len = 0;
		break;
	default: /* noise */
		len = 1 + below(below(2) ? 32 : 512);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rng();
		break;
	}
	return len;
}

/* close_all closes every fuzzing connection, reading what was left for it first. */
static void close_all(void)
{
	for (int i = 0; i < LIVE_CONNECTIONS; i++) {
		if (conns[i].fd >= 0)
			drain(&conns[i]);
		close_conn(&conns[i]);
	}
}

/* well_behaved_op: acquire 2 MiB, write and read it back, release; or a status. */
static void well_behaved_op(rocmmem_client *client)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MIB, .timeout_ms = 200, .tag = "good"};
	rocmmem_lease *l = NULL;
	rocmmem_status *status = NULL;
	uint8_t *p;
	int err;

	st.ops++;
	if (below(4) == 0) {
		err = rocmmem_status_get(client, &status);
		if (err)
			fail_msg("a well-behaved status failed: %s", rocmmem_strerror(err));
		rocmmem_status_free(status);
		return;
	}
	err = rocmmem_lease_acquire(client, &req, &l);
	/* The fuzzers may hold the budget for a while: waiting longer is all that may happen. */
	if (err == -ETIMEDOUT) {
		st.ops_refused++;
		return;
	}
	if (err)
		fail_msg("a well-behaved acquire failed: %s (%s)", rocmmem_strerror(err),
			 rocmmem_last_error());
	p = rocmmem_lease_ptr(l);
	assert_non_null(p);
	for (size_t off = 0; off < 2 * MIB; off += 4096)
		p[off] = (uint8_t)(off >> 12);
	for (size_t off = 0; off < 2 * MIB; off += 4096)
		assert_int_equal(p[off], (uint8_t)(off >> 12));
	assert_int_equal(rocmmem_lease_release(l), 0);
}

/* open_strays opens the fds the fuzzer attaches to packets. */
static void open_strays(void)
{
	int sv[2];

	hostile_pipe(probe);
	stray[0] = probe[1];
	stray[1] = open("/dev/null", O_RDWR | O_CLOEXEC);
	stray[2] = memfd_create("live-fuzz", MFD_CLOEXEC);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	stray[3] = sv[0];
	for (int i = 1; i < 4; i++)
		assert_true(stray[i] >= 0);
}

/* check_probe: with our copy of its write end closed, no copy is left in the daemon. */
static void check_probe(void)
{
	close(probe[1]);
	if (!hostile_wait_hup(probe[0], 2000))
		fail_msg("the daemon still holds a descriptor that came with a refused packet");
	close(probe[0]);
	for (int i = 1; i < 4; i++)
		close(stray[i]);
}

static unsigned long env_number(const char *name, unsigned long fallback)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : fallback;
}

static void test_live_fuzz(void **state)
{
	unsigned long seed, iterations = env_number("ROCMMEM_LIVE_FUZZ_ITERATIONS", 20000);
	unsigned long epoch = env_number("ROCMMEM_LIVE_FUZZ_EPOCH", LIVE_EPOCH);
	bool verbose = env_number("ROCMMEM_LIVE_FUZZ_VERBOSE", 0) != 0;
	long deadline = harness_now_ms() + 1000 * (long)env_number("ROCMMEM_LIVE_FUZZ_SECONDS", 6);
	static uint8_t buf[WIRE_MAX_FRAME * 2];
	rocmmem_client *client;
	unsigned long i;

	(void)state;
	seed = env_number("ROCMMEM_LIVE_FUZZ_SEED", 0);
	if (seed == 0) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = ((unsigned long)ts.tv_sec * 1000003ul) ^ (unsigned long)ts.tv_nsec ^
		       (unsigned long)getpid();
	}
	rng_state = seed ? seed : 1;
	print_message("live_fuzz: seed %lu (ROCMMEM_LIVE_FUZZ_SEED=%lu reproduces this run)\n",
		      seed, seed);
	load_seeds();
	for (int c = 0; c < LIVE_CONNECTIONS; c++) {
		conns[c].fd = -1;
		conns[c].lane = NULL;
	}
	client = harness_connect(&hostile.d, "well-behaved");
	open_strays();
	for (i = 0; i < iterations && harness_now_ms() < deadline; i++) {
		struct conn *c = &conns[below(LIVE_CONNECTIONS)];
		unsigned nfds, how;
		size_t len;
		int rc;

		if (c->fd < 0)
			open_conn(c);
		/* The corpus's hellos make a second hello on greeted connections. */
		len = mutate(buf, sizeof(buf), &nfds, &how);
		if (verbose) {
			print_message(
			    "packet %lu: connection %d%s, mutation %u, %zu bytes, %u fds:", i,
			    (int)(c - conns), c->greeted ? "" : " (no hello)", how, len, nfds);
			for (size_t b = 0; b < len && b < 64; b++)
				print_message(" %02x", buf[b]);
			print_message("\n");
		}
		if (c->lane && nfds == 0 && len <= LANE_SLOT && below(2)) {
			rc = send_lane(c, buf, len);
			st.lane++;
		} else {
			rc = send_fds(c->fd, buf, len, nfds);
			if (rc == -EPIPE || rc == -ECONNRESET) {
				/* Dropped for the previous packet: this one goes on a new
				 * connection. */
				drain(c);
				close_conn(c);
				open_conn(c);
				rc = send_fds(c->fd, buf, len, nfds);
			}
			if (rc == 0)
				c->sent++;
		}
		if (rc == 0) {
			st.sent++;
			st.fds_sent += nfds;
		} else {
			/* Full (the daemon reads no more from a client that reads no replies), or
			 * too large for the socket: both fine. */
			st.refused_send++;
		}
		drain(c);
		if (i % 16 == 0)
			well_behaved_op(client);
		if ((i + 1) % epoch == 0) {
			close_all();
			rocmmem_disconnect(client);
			/* Nobody connected: the daemon is back to its baseline, and serves. */
			hostile_assert_healthy();
			client = harness_connect(&hostile.d, "well-behaved");
		}
	}
	close_all();
	rocmmem_disconnect(client);
	print_message(
	    "live_fuzz: %lu packets (%lu sent, %lu through a lane, %lu not taken, %lu "
	    "fds), %lu replies (%lu errors, %lu grants), %lu events, %lu connections, %lu "
	    "well-behaved operations (%lu timed out)\n",
	    i, st.sent, st.lane, st.refused_send, st.fds_sent, st.replies, st.errors, st.grants,
	    st.events, st.reconnects, st.ops, st.ops_refused);
	assert_true(st.sent > i / 2);
	check_probe();
	hostile_assert_healthy();
	for (size_t s = 0; s < nseeds; s++)
		free(seeds[s].data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_live_fuzz),
	};

	return hostile_run_result(
	    cmocka_run_group_tests(tests, hostile_group_setup, hostile_group_teardown));
}
