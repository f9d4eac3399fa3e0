/* SPDX-License-Identifier: MIT */
/* wire.c: sending and receiving one SOCK_SEQPACKET packet with its SCM_RIGHTS fds. */
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int wire_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (len > WIRE_MAX_FRAME || nfds > WIRE_MAX_FDS)
		return -EMSGSIZE;
	if (nfds > 0) {
		struct cmsghdr *cmsg;

		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return 0;
}

void wire_close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* collect_fds moves every SCM_RIGHTS fd of msg into fds; returns -EBADMSG on anything odd. */
static int collect_fds(struct msghdr *msg, int *fds, unsigned *nfds)
{
	int err = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t count;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0)) {
			err = -EBADMSG;
			continue;
		}
		count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < WIRE_MAX_FDS)
				fds[(*nfds)++] = fd;
			else {
				close(fd);
				err = -EBADMSG;
			}
		}
	}
	return err;
}

ssize_t wire_recv(int sock, void *buf, size_t cap, int *fds, unsigned *nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr msg = {
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = control.buf,
	    .msg_controllen = sizeof(control.buf),
	};
	ssize_t n;
	int err;

	*nfds = 0;
	/* A blocking receive interrupted by a signal returns: its caller may have a deadline, and
	 * the socket's timeout (SO_RCVTIMEO) would start again from the beginning. */
	do {
		n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR && (flags & MSG_DONTWAIT));
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	err = collect_fds(&msg, fds, nfds);
	if (err == 0 && (msg.msg_flags & MSG_CTRUNC))
		err = -EBADMSG;
	if (err == 0 && (msg.msg_flags & MSG_TRUNC))
		err = -EMSGSIZE;
	if (err || n == 0) {
		/* An empty packet is read as the end of the connection: its fds go too. */
		wire_close_fds(fds, *nfds);
		*nfds = 0;
		return err;
	}
	return n;
}

ssize_t wire_pack(const ProtobufCMessage *msg, uint8_t *buf, size_t cap)
{
	size_t need = protobuf_c_message_get_packed_size(msg);

	if (need > cap || need > WIRE_MAX_FRAME)
		return -EMSGSIZE;
	return (ssize_t)protobuf_c_message_pack(msg, buf);
}

/* A protobuf-c output buffer that fills buf up to cap and notes what did not fit. */
struct bounded {
	ProtobufCBuffer base;
	uint8_t *buf;
	size_t cap, len;
	bool over;
};

static void bounded_append(ProtobufCBuffer *out, size_t len, const uint8_t *data)
{
	struct bounded *b = (struct bounded *)out;

	if (b->over || len > b->cap - b->len) {
		b->over = true;
		return;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
}

ssize_t wire_pack_walk(const ProtobufCMessage *msg, uint8_t *buf, size_t cap)
{
	struct bounded b = {.base.append = bounded_append,
			    .buf = buf,
			    .cap = cap < WIRE_MAX_FRAME ? cap : WIRE_MAX_FRAME};

	protobuf_c_message_pack_to_buffer(msg, &b.base);
	return b.over ? -EMSGSIZE : (ssize_t)b.len;
}

size_t wire_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

size_t wire_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}
