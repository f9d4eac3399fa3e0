/* SPDX-License-Identifier: MIT */
/* roundtrip_floor.c: bench_roundtrip's floor servers and their client side. */
#include "roundtrip_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rocmmem.pb-c.h"
#include "wire.h"

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

int floor_start(struct floor_server *f, const struct sizes *s)
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
		floor_serve(sv[1], s, f->kind);
	}
	close(sv[1]);
	f->sock = sv[0];
	return 0;
}

void floor_stop(struct floor_server *f)
{
	close(f->sock);
	waitpid(f->pid, NULL, 0);
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

/*
 * floor_op: two round trips, the first bringing a memfd, closed as a client would; with the
 * memory work, mapped, touched and unmapped in between, as librocmmem and a host would.
 */
int floor_op(struct floor_server *f, const struct sizes *s)
{
	uint8_t req[256] = {0}, rep[256];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

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
