/* SPDX-License-Identifier: MIT */
/* test_wire.c: unit tests of common/wire: packets and their fds over a real socketpair. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rocmmem.pb-c.h"
#include "wire.h"

/* The two ends of a SOCK_SEQPACKET socketpair: sv[0] sends, sv[1] receives. */
struct pair {
	int sv[2];
};

static int pair_setup(void **state)
{
	struct pair *p = malloc(sizeof(*p));

	if (!p || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->sv) != 0) {
		free(p);
		return -1;
	}
	*state = p;
	return 0;
}

static int pair_teardown(void **state)
{
	struct pair *p = *state;

	if (p->sv[0] >= 0)
		close(p->sv[0]);
	if (p->sv[1] >= 0)
		close(p->sv[1]);
	free(p);
	return 0;
}

/* count_fds returns how many fds this process has open. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void assert_same_file(int a, int b)
{
	struct stat sa, sb;

	assert_int_equal(fstat(a, &sa), 0);
	assert_int_equal(fstat(b, &sb), 0);
	assert_true(sa.st_dev == sb.st_dev);
	assert_true(sa.st_ino == sb.st_ino);
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	assert_int_equal(fstat(a, &sa), 0);
	assert_int_equal(fstat(b, &sb), 0);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void assert_cloexec(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	assert_true(flags >= 0);
	assert_true(flags & FD_CLOEXEC);
}

static void assert_closed(int fd)
{
	errno = 0;
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
}

/* make_pipe returns a pipe whose read end does not block. */
static void make_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
}

/* assert_pipe_orphaned checks that no write end of the pipe is open anywhere: read sees EOF. */
static void assert_pipe_orphaned(int read_end)
{
	char c;

	assert_int_equal(read(read_end, &c, 1), 0);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * A blocking receive interrupted by a signal returns -EINTR (its caller has a deadline and the
 * socket's timeout would restart); a non-blocking one is retried as before.
 */
static void test_blocking_receive_interrupted(void **state)
{
	struct pair *p = *state;
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	/* Repeating: a signal that came before the receive blocked is followed by another. */
	struct itimerval t = {.it_interval = {.tv_usec = 50000}, .it_value = {.tv_usec = 50000}};
	struct itimerval off = {0};
	char buf[64];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	sigemptyset(&sa.sa_mask); /* no SA_RESTART: the receive sees EINTR */
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &t, NULL), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EINTR);
	assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
	assert_int_equal(nfds, 0);
	assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
	/* What comes after is received as ever. */
	assert_int_equal(wire_send(p->sv[0], "x", 1, NULL, 0, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 1);
}

static void test_roundtrip_no_fds(void **state)
{
	struct pair *p = *state;
	char buf[64];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 99;

	assert_int_equal(wire_send(p->sv[0], "hello", 5, NULL, 0, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 5);
	assert_int_equal(nfds, 0);
	assert_memory_equal(buf, "hello", 5);

	/* Packets keep their boundaries. */
	assert_int_equal(wire_send(p->sv[0], "ab", 2, NULL, 0, 0), 0);
	assert_int_equal(wire_send(p->sv[0], "cde", 3, NULL, 0, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 2);
	assert_memory_equal(buf, "ab", 2);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 3);
	assert_memory_equal(buf, "cde", 3);
	assert_int_equal(nfds, 0);
}

static void test_roundtrip_one_fd(void **state)
{
	struct pair *p = *state;
	char buf[64];
	int pp[2], fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	make_pipe(pp);
	assert_int_equal(wire_send(p->sv[0], "grant", 5, &pp[1], 1, 0), 0);
	/* The sender still owns its fd. */
	assert_true(fcntl(pp[1], F_GETFD) >= 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 5);
	assert_int_equal(nfds, 1);
	assert_memory_equal(buf, "grant", 5);
	assert_true(fds[0] != pp[1]);
	assert_same_file(fds[0], pp[1]);
	assert_cloexec(fds[0]);

	/* Writing through the received fd reaches the sender's pipe. */
	assert_int_equal(write(fds[0], "ping", 4), 4);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(read(pp[0], buf, sizeof(buf)), 4);
	assert_string_equal(buf, "ping");

	wire_close_fds(fds, nfds);
	assert_int_equal(fds[0], -1);
	close(pp[1]);
	assert_pipe_orphaned(pp[0]);
	close(pp[0]);
}

static void test_roundtrip_three_fds(void **state)
{
	struct pair *p = *state;
	char buf[64];
	int a[2], b[2], sent[3], fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	int before;

	make_pipe(a);
	make_pipe(b);
	sent[0] = a[1];
	sent[1] = memfd_create("test_wire", MFD_CLOEXEC);
	sent[2] = b[1];
	assert_true(sent[1] >= 0);
	assert_int_equal(write(sent[1], "memfd", 5), 5);

	before = count_fds();
	assert_int_equal(wire_send(p->sv[0], "xyz", 3, sent, 3, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 3);
	assert_int_equal(nfds, 3);
	assert_int_equal(count_fds(), before + 3);
	/* Same files, same order. */
	for (unsigned i = 0; i < 3; i++) {
		assert_same_file(fds[i], sent[i]);
		assert_cloexec(fds[i]);
	}
	assert_false(same_file(fds[0], sent[2]));
	assert_false(same_file(fds[2], sent[0]));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(pread(fds[1], buf, sizeof(buf), 0), 5);
	assert_string_equal(buf, "memfd");

	wire_close_fds(fds, nfds);
	assert_int_equal(count_fds(), before);
	close(a[1]);
	close(b[1]);
	assert_pipe_orphaned(a[0]);
	assert_pipe_orphaned(b[0]);
	close(a[0]);
	close(b[0]);
	close(sent[1]);
}

static void test_max_fds(void **state)
{
	struct pair *p = *state;
	char buf[64];
	int sent[WIRE_MAX_FDS + 1], fds[WIRE_MAX_FDS];
	int memfd = memfd_create("test_wire", MFD_CLOEXEC);
	unsigned nfds = 0;

	assert_true(memfd >= 0);
	for (unsigned i = 0; i < WIRE_MAX_FDS + 1; i++)
		sent[i] = memfd;
	assert_int_equal(wire_send(p->sv[0], "many", 4, sent, WIRE_MAX_FDS, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 4);
	assert_int_equal(nfds, WIRE_MAX_FDS);
	for (unsigned i = 0; i < nfds; i++)
		assert_same_file(fds[i], memfd);
	wire_close_fds(fds, nfds);

	/* One more is refused before anything is sent. */
	assert_int_equal(wire_send(p->sv[0], "many", 4, sent, WIRE_MAX_FDS + 1, 0), -EMSGSIZE);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT), -EAGAIN);
	close(memfd);
}

static void test_max_frame(void **state)
{
	struct pair *p = *state;
	uint8_t *out = malloc(WIRE_MAX_FRAME + 1);
	uint8_t *in = malloc(WIRE_MAX_FRAME + 1);
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	assert_non_null(out);
	assert_non_null(in);
	for (size_t i = 0; i < WIRE_MAX_FRAME + 1; i++)
		out[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(wire_send(p->sv[0], out, WIRE_MAX_FRAME, NULL, 0, 0), 0);
	assert_int_equal(wire_recv(p->sv[1], in, WIRE_MAX_FRAME, fds, &nfds, 0), WIRE_MAX_FRAME);
	assert_memory_equal(in, out, WIRE_MAX_FRAME);

	assert_int_equal(wire_send(p->sv[0], out, WIRE_MAX_FRAME + 1, NULL, 0, 0), -EMSGSIZE);
	assert_int_equal(wire_recv(p->sv[1], in, WIRE_MAX_FRAME + 1, fds, &nfds, MSG_DONTWAIT),
			 -EAGAIN);
	free(out);
	free(in);
}

static void test_recv_truncated(void **state)
{
	struct pair *p = *state;
	char big[100], buf[10];
	int pp[2], sent[2], fds[WIRE_MAX_FDS];
	unsigned nfds = 77;
	int before;

	make_pipe(pp);
	sent[0] = pp[1];
	sent[1] = pp[1];
	memset(big, 'z', sizeof(big));
	assert_int_equal(wire_send(p->sv[0], big, sizeof(big), sent, 2, 0), 0);
	assert_int_equal(wire_send(p->sv[0], "next", 4, NULL, 0, 0), 0);
	close(pp[1]);

	before = count_fds();
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EMSGSIZE);
	assert_int_equal(nfds, 0);
	assert_int_equal(count_fds(), before);
	assert_pipe_orphaned(pp[0]);

	/* The rest of the oversized packet is gone; the next packet is intact. */
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 4);
	assert_memory_equal(buf, "next", 4);
	close(pp[0]);
}

static void test_peer_closed(void **state)
{
	struct pair *p = *state;
	char buf[16];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 5;

	close(p->sv[1]);
	p->sv[1] = -1;
	/* Sending to a closed peer fails without SIGPIPE killing the test. */
	assert_int_equal(wire_send(p->sv[0], "x", 1, NULL, 0, 0), -EPIPE);
	assert_int_equal(wire_send(p->sv[0], "x", 1, NULL, 0, MSG_DONTWAIT), -EPIPE);
	assert_int_equal(wire_recv(p->sv[0], buf, sizeof(buf), fds, &nfds, 0), 0);
	assert_int_equal(nfds, 0);
	assert_int_equal(wire_recv(p->sv[0], buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT), 0);
}

static void test_nonblocking_empty(void **state)
{
	struct pair *p = *state;
	char buf[16];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 5;

	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT), -EAGAIN);
	assert_int_equal(nfds, 0);
	assert_int_equal(fcntl(p->sv[1], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EAGAIN);
}

static void test_send_full(void **state)
{
	struct pair *p = *state;
	char buf[4096];
	int rc, sent = 0;

	memset(buf, 'f', sizeof(buf));
	while ((rc = wire_send(p->sv[0], buf, sizeof(buf), NULL, 0, MSG_DONTWAIT)) == 0) {
		sent++;
		assert_true(sent < 100000);
	}
	assert_int_equal(rc, -EAGAIN);
	assert_true(sent > 0);
}

static void test_credentials_rejected(void **state)
{
	struct pair *p = *state;
	int one = 1, pp[2], fds[WIRE_MAX_FDS];
	char buf[16];
	unsigned nfds = 9;
	int before;

	/* With SO_PASSCRED every packet arrives with SCM_CREDENTIALS beside its SCM_RIGHTS. */
	assert_int_equal(setsockopt(p->sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
	make_pipe(pp);
	assert_int_equal(wire_send(p->sv[0], "cred", 4, &pp[1], 1, 0), 0);
	close(pp[1]);
	before = count_fds();
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EBADMSG);
	assert_int_equal(nfds, 0);
	assert_int_equal(count_fds(), before);
	assert_pipe_orphaned(pp[0]);
	close(pp[0]);

	/* Also when the sender attached the credentials itself, and without fds. */
	{
		union {
			char buf[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} control;
		struct ucred cred = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
		char payload[] = "cred";
		struct iovec iov = {.iov_base = payload, .iov_len = 4};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = control.buf,
				     .msg_controllen = sizeof(control.buf)};
		struct cmsghdr *c;

		memset(&control, 0, sizeof(control));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof(cred));
		memcpy(CMSG_DATA(c), &cred, sizeof(cred));
		assert_int_equal(sendmsg(p->sv[0], &msg, 0), 4);
		assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EBADMSG);
		assert_int_equal(nfds, 0);
	}
}

/* send_raw_fds sends a packet with n fds in one SCM_RIGHTS message, bypassing wire_send. */
static void send_raw_fds(int sock, const int *fds, unsigned n)
{
	size_t space = CMSG_SPACE(sizeof(int) * n);
	struct cmsghdr *control = calloc(1, space);
	char payload[] = "raw";
	struct iovec iov = {.iov_base = payload, .iov_len = 3};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = space};
	struct cmsghdr *c;

	assert_non_null(control);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	assert_int_equal(sendmsg(sock, &msg, 0), 3);
	free(control);
}

static void check_too_many_fds(struct pair *p, unsigned n)
{
	int pp[2], *sent = calloc(n, sizeof(int)), fds[WIRE_MAX_FDS];
	char buf[16];
	unsigned nfds = 9;
	int before;

	assert_non_null(sent);
	make_pipe(pp);
	for (unsigned i = 0; i < n; i++)
		sent[i] = pp[1];
	send_raw_fds(p->sv[0], sent, n);
	close(pp[1]);
	before = count_fds();
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), -EBADMSG);
	assert_int_equal(nfds, 0);
	assert_int_equal(count_fds(), before);
	assert_pipe_orphaned(pp[0]);
	close(pp[0]);
	free(sent);
}

static void test_too_many_fds(void **state)
{
	check_too_many_fds(*state, WIRE_MAX_FDS + 1);
	check_too_many_fds(*state, 250);
}

/*
 * An empty packet reads as a closed connection and the caller drops it without looking at
 * fds, so any fds that came with it must not be left open.
 */
static void test_empty_packet_with_fds(void **state)
{
	struct pair *p = *state;
	int pp[2], fds[WIRE_MAX_FDS];
	char buf[16];
	unsigned nfds = 9;
	int before;

	make_pipe(pp);
	assert_int_equal(wire_send(p->sv[0], "", 0, &pp[1], 1, 0), 0);
	close(pp[1]);
	before = count_fds();
	assert_int_equal(wire_recv(p->sv[1], buf, sizeof(buf), fds, &nfds, 0), 0);
	if (nfds > 0) {
		int leaked = count_fds() - before;

		wire_close_fds(fds, nfds);
		close(pp[0]);
		fail_msg("an empty packet returned 0 and left %u fd(s) open (%d more than before)",
			 nfds, leaked);
	}
	assert_int_equal(count_fds(), before);
	assert_pipe_orphaned(pp[0]);
	close(pp[0]);
}

static void test_close_fds(void **state)
{
	int a[2], fds[4];

	(void)state;
	assert_int_equal(pipe2(a, O_CLOEXEC), 0);
	fds[0] = a[0];
	fds[1] = -1;
	fds[2] = a[1];
	fds[3] = -1;
	wire_close_fds(fds, 3);
	assert_closed(a[0]);
	assert_closed(a[1]);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fds[i], -1);
	wire_close_fds(fds, 0);
}

static void test_pack(void **state)
{
	Rocmmem__Wire__Hello hello = ROCMMEM__WIRE__HELLO__INIT;
	Rocmmem__Wire__Hello *back;
	uint8_t buf[256], *big;
	size_t need;
	ssize_t n;

	(void)state;
	hello.has_protocol_version = 1;
	hello.protocol_version = 1;
	hello.client_name = (char *)"unit-test";
	need = protobuf_c_message_get_packed_size(&hello.base);
	assert_true(need > 9 && need < sizeof(buf));

	n = wire_pack(&hello.base, buf, sizeof(buf));
	assert_int_equal(n, need);
	back = rocmmem__wire__hello__unpack(NULL, (size_t)n, buf);
	assert_non_null(back);
	assert_true(back->has_protocol_version);
	assert_int_equal(back->protocol_version, 1);
	assert_string_equal(back->client_name, "unit-test");
	rocmmem__wire__hello__free_unpacked(back, NULL);

	/* Exactly enough room is enough; one byte less is refused before writing anything. */
	assert_int_equal(wire_pack(&hello.base, buf, need), need);
	memset(buf, 0xa5, sizeof(buf));
	assert_int_equal(wire_pack(&hello.base, buf, need - 1), -EMSGSIZE);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xa5);
	assert_int_equal(wire_pack(&hello.base, buf, 0), -EMSGSIZE);

	/* A message larger than a frame is refused even with room for it. */
	big = malloc(2 * WIRE_MAX_FRAME);
	assert_non_null(big);
	{
		char *name = malloc(WIRE_MAX_FRAME + 1);

		assert_non_null(name);
		memset(name, 'n', WIRE_MAX_FRAME);
		name[WIRE_MAX_FRAME] = '\0';
		hello.client_name = name;
		assert_true(protobuf_c_message_get_packed_size(&hello.base) > WIRE_MAX_FRAME);
		assert_int_equal(wire_pack(&hello.base, big, 2 * WIRE_MAX_FRAME), -EMSGSIZE);
		free(name);
	}
	free(big);
}

/* wire_pack_walk writes what wire_pack writes, fits exactly, never writes past cap, and is
 * held to the frame cap too. */
static void test_pack_walk(void **state)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	uint8_t want[256], buf[256];
	char *tag;
	ssize_t n;

	(void)state;
	acq.has_size = true;
	acq.size = 2u << 20;
	acq.tag = (char *)"kv-cache";
	msg.has_id = true;
	msg.id = 300;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	n = wire_pack(&msg.base, want, sizeof(want));
	assert_true(n > 10);
	assert_int_equal(wire_pack_walk(&msg.base, buf, sizeof(buf)), n);
	assert_memory_equal(buf, want, (size_t)n);
	memset(buf, 0xa5, sizeof(buf));
	assert_int_equal(wire_pack_walk(&msg.base, buf, (size_t)n), n);
	assert_memory_equal(buf, want, (size_t)n);
	assert_int_equal(buf[n], 0xa5);
	for (size_t cap = 0; cap < (size_t)n; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		assert_int_equal(wire_pack_walk(&msg.base, buf, cap), -EMSGSIZE);
		for (size_t i = cap; i < sizeof(buf); i++)
			assert_int_equal(buf[i], 0xa5);
	}
	/* Larger than a frame: refused with room to spare. */
	tag = malloc(WIRE_MAX_FRAME + 1);
	assert_non_null(tag);
	memset(tag, 't', WIRE_MAX_FRAME);
	tag[WIRE_MAX_FRAME] = '\0';
	acq.tag = tag;
	{
		uint8_t *big = malloc(2 * WIRE_MAX_FRAME);

		assert_non_null(big);
		assert_int_equal(wire_pack_walk(&msg.base, big, 2 * WIRE_MAX_FRAME), -EMSGSIZE);
		free(big);
	}
	free(tag);
}

/* Varints at each length's edges: the bytes protobuf-c decodes back, and their count. */
static void test_varints(void **state)
{
	static const uint64_t v[] = {
	    0, 1, 127, 128, 16383, 16384, (1u << 21) - 1, 1u << 21, UINT32_MAX, UINT64_MAX};
	static const size_t len[] = {1, 1, 1, 2, 2, 3, 3, 4, 5, 10};
	uint8_t buf[16];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		/* A LeaseRelease whose lease_id (field 1) is v: key, then the varint. */
		Rocmmem__Wire__LeaseRelease *r;
		size_t n;

		buf[0] = 1u << 3 | WIRE_TYPE_VARINT;
		n = 1 + wire_varint_put(buf + 1, v[i]);
		assert_int_equal(n, 1 + len[i]);
		assert_int_equal(wire_varint_len(v[i]), len[i]);
		r = rocmmem__wire__lease_release__unpack(NULL, n, buf);
		assert_non_null(r);
		assert_true(r->has_lease_id);
		assert_true(r->lease_id == v[i]);
		rocmmem__wire__lease_release__free_unpacked(r, NULL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_roundtrip_no_fds, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_blocking_receive_interrupted, pair_setup,
					    pair_teardown),
	    cmocka_unit_test_setup_teardown(test_roundtrip_one_fd, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_roundtrip_three_fds, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_max_fds, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_max_frame, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_recv_truncated, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_peer_closed, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_nonblocking_empty, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_send_full, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials_rejected, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_too_many_fds, pair_setup, pair_teardown),
	    cmocka_unit_test_setup_teardown(test_empty_packet_with_fds, pair_setup, pair_teardown),
	    cmocka_unit_test(test_close_fds),
	    cmocka_unit_test(test_pack),
	    cmocka_unit_test(test_pack_walk),
	    cmocka_unit_test(test_varints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
