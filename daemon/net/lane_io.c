/* SPDX-License-Identifier: MIT */
/* lane_io.c: the daemon's end of a request lane: the page, the doorbell, taking and answering. */
#include "net/lane_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

static void on_doorbell(uv_poll_t *handle, int status, int events);

static void on_doorbell(uv_poll_t *handle, int status, int events)
{
	struct daemon_lane *l = handle->data;
	uint64_t rings;

	(void)events;
	/* Reset the doorbell first: a ring after this read is seen on the next turn. */
	if (status < 0 || read(l->efd, &rings, sizeof(rings)) != (ssize_t)sizeof(rings))
		return;
	l->ring(l);
}

static int make_page(struct daemon_lane *l, int *memfd)
{
	int fd = memfd_create("rocmmem-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, LANE_PAGE) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	l->page = lane_map(fd);
	if (!l->page) {
		err = -errno;
		close(fd);
		return err;
	}
	*memfd = fd;
	return 0;
}

int daemon_lane_open(uv_loop_t *loop, void (*ring)(struct daemon_lane *l), void *data,
		     struct daemon_lane **out, int *memfd)
{
	struct daemon_lane *l = calloc(1, sizeof(*l));
	int err, fd = -1;

	if (!l)
		return -ENOMEM;
	l->ring = ring;
	l->data = data;
	l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->efd < 0) {
		err = -errno;
		free(l);
		return err;
	}
	err = make_page(l, &fd);
	if (err == 0 && (err = uv_poll_init(loop, &l->poll, l->efd)) != 0) {
		lane_unmap(l->page);
		close(fd);
	}
	if (err) {
		close(l->efd);
		free(l);
		return err;
	}
	l->poll.data = l;
	err = uv_poll_start(&l->poll, UV_READABLE, on_doorbell);
	if (err) {
		/* Made but never polled: closed like any lane (the handle is libuv's now). */
		close(fd);
		daemon_lane_close(l);
		return err;
	}
	*memfd = fd;
	*out = l;
	return 0;
}

static void on_lane_closed(uv_handle_t *handle)
{
	struct daemon_lane *l = handle->data;

	close(l->efd);
	free(l);
}

void daemon_lane_close(struct daemon_lane *l)
{
	struct lane_page *p = l->page;
	uint32_t req = atomic_load_explicit(&p->req.seq, memory_order_acquire);

	/* A request not answered yet learns its answer is on the socket, which is going: the
	 * client sees that. One answered already keeps its answer. */
	if (req != atomic_load_explicit(&p->rep.seq, memory_order_relaxed)) {
		p->rep.kind = LANE_ON_SOCKET;
		atomic_store_explicit(&p->rep.seq, req, memory_order_release);
		lane_futex_wake(&p->rep.seq);
	}
	lane_unmap(p);
	l->page = NULL;
	uv_poll_stop(&l->poll);
	uv_close((uv_handle_t *)&l->poll, on_lane_closed);
}

bool daemon_lane_peek(const struct daemon_lane *l, uint64_t *sock_sent)
{
	const volatile struct lane_req *req = &l->page->req;

	if (atomic_load_explicit(&l->page->req.seq, memory_order_acquire) == l->seen)
		return false;
	*sock_sent = req->sock_sent; /* after the seq: the claim that came with this request */
	return true;
}

ssize_t daemon_lane_take(struct daemon_lane *l, uint8_t *buf, size_t cap)
{
	volatile struct lane_req *req = &l->page->req;
	uint32_t seq = atomic_load_explicit(&l->page->req.seq, memory_order_acquire);
	uint32_t len;

	if (seq == l->seen)
		return 0;
	l->seen = seq;
	/* Read once each: the client may change them meanwhile; only this copy counts. */
	len = req->len;
	l->pending_id = req->id;
	if (len == 0 || len > LANE_SLOT)
		return -EBADMSG;
	if (len > cap)
		return -EMSGSIZE;
	memcpy(buf, l->page->req_data, len);
	l->pending = true;
	return (ssize_t)len;
}

uint8_t *daemon_lane_reply_buf(struct daemon_lane *l)
{
	return l->page->rep_data;
}

void daemon_lane_answer(struct daemon_lane *l, unsigned kind, size_t len, uint64_t sock_seq)
{
	struct lane_page *p = l->page;

	l->pending = false;
	p->rep.kind = kind;
	p->rep.len = (uint32_t)len;
	p->rep.sock_seq = sock_seq;
	atomic_store_explicit(&p->rep.seq, l->seen, memory_order_release);
	lane_futex_wake(&p->rep.seq);
}
