/* SPDX-License-Identifier: MIT */
/* roundtrip_floor.c: bench_roundtrip's floor servers and their client side. */
#include "roundtrip_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lane.h"
#include "rocmmem.pb-c.h"
#include "wire.h"

/* How long the lane floor's client waits on the futex before it looks whether the server is
 * gone (librocmmem's slice too). */
#define LANE_FLOOR_SLICE_MS 50

/* Where the lane server's copy of a request escapes to, so that the compiler keeps the copy. */
static uint8_t *volatile lane_request_copy;

/* ----------------------------------------------------------------------------------------- */
/* The floor: a server that answers two requests per round trip, the first with a memfd */

static size_t packed_size(const ProtobufCMessage *m)
{
	return protobuf_c_message_get_packed_size(m);
}

void measure_sizes(struct sizes *s)
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

int make_memfd(uint64_t size)
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

/*
 * receive_evented receives one request as an event loop does: from the socket while it has
 * one, else after epoll_wait says it has (libuv's loop and the daemon's read loop make these
 * calls: a request costs an epoll_wait, its recvmsg and a recvmsg that finds the socket empty).
 */
static ssize_t receive_evented(int ep, int sock, uint8_t *in, size_t cap, int *fds, unsigned *nfds)
{
	for (;;) {
		struct epoll_event ev;
		ssize_t len = wire_recv(sock, in, cap, fds, nfds, MSG_DONTWAIT);

		if (len != -EAGAIN)
			return len;
		if (epoll_wait(ep, &ev, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
}

static void floor_serve(int sock, const struct sizes *s, enum floor_kind kind)
{
	uint8_t in[WIRE_MAX_FRAME], out[256] = {0};
	int memfd = make_memfd(kind == FLOOR_ARENA ? FLOOR_ARENA_SIZE : LEASE_SIZE);
	bool memory_work = kind == FLOOR_MEMFD;
	uint64_t n = 0;
	int ep = -1;

	if (memfd < 0)
		_exit(1);
	if (kind == FLOOR_EPOLL) {
		struct epoll_event ev = {.events = EPOLLIN};

		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev) < 0)
			_exit(1);
	}
	for (;;) {
		int fds[WIRE_MAX_FDS];
		unsigned nfds = 0;
		ssize_t len = ep >= 0 ? receive_evented(ep, sock, in, sizeof(in), fds, &nfds)
				      : wire_recv(sock, in, sizeof(in), fds, &nfds, 0);

		if (len <= 0)
			_exit(0);
		wire_close_fds(fds, nfds);
		/* Requests alternate: acquire (answered with the memfd), then release. */
		if (n++ % 2 == 0) {
			unsigned nfd = kind == FLOOR_NOFD || (kind == FLOOR_ARENA && n > 1) ? 0 : 1;

			if (memory_work && (memfd = make_memfd(LEASE_SIZE)) < 0)
				_exit(1);
			wire_send(sock, out, s->grant, &memfd, nfd, 0);
		} else {
			if (memory_work || kind == FLOOR_ARENA)
				fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
					  (off_t)LEASE_SIZE);
			if (memory_work)
				close(memfd);
			wire_send(sock, out, s->released, NULL, 0, 0);
		}
	}
}

/*
 * lane_serve answers the two round trips through the lane page with rocmmemd's system calls
 * (daemon/net/lane_io.c under libuv): epoll_wait says the doorbell rang, the eventfd is read,
 * a request whose seq is new is copied out of the page, the reply written into the reply slot,
 * rep.seq published and the client woken. The socket carries nothing: its end ends the server.
 */
static void lane_serve(int sock, struct lane_page *p, int doorbell, const struct sizes *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
	uint8_t in[LANE_SLOT], out[256] = {0};
	uint32_t seen = atomic_load_explicit(&p->req.seq, memory_order_acquire);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	uint64_t n = 0;

	lane_request_copy = in;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, doorbell, &ev) < 0)
		_exit(1);
	ev.data.u32 = 1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev) < 0)
		_exit(1);
	for (;;) {
		struct epoll_event got[2];
		int k = epoll_wait(ep, got, 2, -1);
		uint64_t rung;
		uint32_t seq, len;
		size_t rl;

		if (k < 0 && errno != EINTR)
			_exit(1);
		for (int i = 0; i < k; i++)
			if (got[i].data.u32 == 1)
				_exit(0); /* the client closed its end: floor_stop */
		if (read(doorbell, &rung, sizeof(rung)) < 0 && errno != EAGAIN)
			_exit(1);
		seq = atomic_load_explicit(&p->req.seq, memory_order_acquire);
		if (seq == seen)
			continue;
		seen = seq;
		len = ((volatile struct lane_req *)&p->req)->len;
		if (len == 0 || len > sizeof(in))
			_exit(1);
		memcpy(in, p->req_data, len);
		/* Requests alternate: acquire (the grant), then release. */
		rl = n++ % 2 == 0 ? s->grant : s->released;
		memcpy(p->rep_data, out, rl);
		p->rep.kind = LANE_REPLY;
		p->rep.len = (uint32_t)rl;
		p->rep.sock_seq = 0;
		atomic_store_explicit(&p->rep.seq, seq, memory_order_release);
		lane_futex_wake(&p->rep.seq);
	}
}

/* keep_only closes every descriptor from 3 up but a and b (b < 0: a alone). */
static void keep_only(int a, int b)
{
	int lo = b >= 0 && b < a ? b : a, hi = b > a ? b : a;

	if (lo > 3)
		close_range(3, (unsigned)lo - 1, 0);
	if (hi > lo + 1)
		close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
	close_range((unsigned)hi + 1, ~0u, 0);
}

/* lane_open makes the lane floor's page (shared with the server across fork) and doorbell. */
static int lane_open(struct floor_server *f)
{
	void *p = mmap(NULL, LANE_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	f->lane = p;
	f->seq = 0;
	/* Non-blocking, as the daemon makes it: the server reads it after epoll says it rang. */
	f->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->doorbell < 0) {
		int err = -errno;

		munmap(p, LANE_PAGE);
		f->lane = NULL;
		return err;
	}
	return 0;
}

static void lane_close(struct floor_server *f)
{
	if (!f->lane)
		return;
	munmap(f->lane, LANE_PAGE);
	close(f->doorbell);
	f->lane = NULL;
}

int floor_start(struct floor_server *f, const struct sizes *s)
{
	int sv[2], err;

	f->lane = NULL;
	if (f->kind == FLOOR_LANE && (err = lane_open(f)) < 0)
		return err;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		err = -errno;
		lane_close(f);
		return err;
	}
	f->pid = fork();
	if (f->pid < 0) {
		err = -errno;
		close(sv[0]);
		close(sv[1]);
		lane_close(f);
		return err;
	}
	if (f->pid == 0) {
		/* Only its own: another floor's socket kept open here would never see EOF. */
		keep_only(sv[1], f->lane ? f->doorbell : -1);
		if (f->kind == FLOOR_LANE)
			lane_serve(sv[1], f->lane, f->doorbell, s);
		floor_serve(sv[1], s, f->kind);
	}
	close(sv[1]);
	f->sock = sv[0];
	return 0;
}

void floor_stop(struct floor_server *f)
{
	/* Every server polls or reads its socket: its end makes it exit, whatever it waited for. */
	close(f->sock);
	waitpid(f->pid, NULL, 0);
	lane_close(f);
}

/*
 * map_like_librocmmem maps a lease's memfd the way librocmmem does: reserve twice the
 * alignment more, map the file over the aligned part, trim both sides, ask for huge pages.
 */
uint8_t *map_like_librocmmem(int fd, size_t size)
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

/* lane_gone says whether the lane floor's server went away (its socket's end is closed). */
static bool lane_gone(const struct floor_server *f)
{
	struct pollfd pfd = {.fd = f->sock, .events = POLLIN};

	return poll(&pfd, 1, 0) != 0;
}

/*
 * lane_round_trip makes one round trip through the lane page as librocmmem does
 * (client/lib/conn/lane.c): the request written into the slot, req.seq bumped, the doorbell
 * rung, a futex wait until rep.seq is the request's, the reply copied out.
 */
static int lane_round_trip(struct floor_server *f, size_t len, size_t expect)
{
	static const uint8_t req[256];
	struct lane_page *p = f->lane;
	uint64_t one = 1;
	uint32_t seq = ++f->seq, v;

	if (seq == 0)
		seq = ++f->seq; /* 0 is the page's first rep.seq */
	memcpy(p->req_data, req, len);
	p->req.len = (uint32_t)len;
	p->req.id = seq;
	p->req.sock_sent = 0;
	atomic_store_explicit(&p->req.seq, seq, memory_order_release);
	if (write(f->doorbell, &one, sizeof(one)) != (ssize_t)sizeof(one))
		return -EPIPE;
	while ((v = atomic_load_explicit(&p->rep.seq, memory_order_acquire)) != seq)
		if (lane_futex_wait(&p->rep.seq, v, LANE_FLOOR_SLICE_MS) == -ETIMEDOUT &&
		    lane_gone(f))
			return -EPIPE;
	if (p->rep.kind != LANE_REPLY || p->rep.len != expect || expect > sizeof(f->reply))
		return -EPROTO;
	memcpy(f->reply, p->rep_data, expect);
	return 0;
}

/*
 * floor_op: two round trips, the first bringing a memfd, closed as a client would; with the
 * memory work, mapped, touched and unmapped in between, as librocmmem and a host would. The
 * lane floor passes nothing (an arena client after its first grant).
 */
int floor_op(struct floor_server *f, const struct sizes *s)
{
	uint8_t req[256] = {0}, rep[256];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	int err;

	if (f->kind == FLOOR_LANE) {
		if ((err = lane_round_trip(f, s->acquire, s->grant)) < 0)
			return err;
		return lane_round_trip(f, s->release, s->released);
	}
	if (wire_send(f->sock, req, s->acquire, NULL, 0, 0) < 0 ||
	    wire_recv(f->sock, rep, sizeof(rep), fds, &nfds, 0) <= 0)
		return -EPROTO;
	if (f->kind == FLOOR_ARENA) {
		/* The first grant brings the arena: mapped once, kept; a lease is a range of it. */
		if (!f->arena && nfds == 1)
			f->arena = map_like_librocmmem(fds[0], FLOOR_ARENA_SIZE);
		wire_close_fds(fds, nfds);
		nfds = 0;
		if (!f->arena)
			return -EPROTO;
		((volatile uint8_t *)f->arena)[0] = 1;
	} else if (nfds != (f->kind == FLOOR_NOFD ? 0u : 1u)) {
		wire_close_fds(fds, nfds);
		return -EPROTO;
	}
	if (f->kind == FLOOR_MEMFD) {
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
