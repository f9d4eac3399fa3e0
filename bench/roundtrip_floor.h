/* SPDX-License-Identifier: MIT */
/*
 * roundtrip_floor.h: bench_roundtrip's floors: raw SOCK_SEQPACKET servers answering a lease's
 * two round trips with packets as large as rocmmemd's, alone or doing a lease's kernel work, and
 * the same two round trips through a shared page with the request lane's system calls.
 */
#ifndef ROCMMEM_BENCH_ROUNDTRIP_FLOOR_H
#define ROCMMEM_BENCH_ROUNDTRIP_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LEASE_SIZE ((uint64_t)2 << 20)
/* Bytes of the floor's arena: sparse, like the daemon's; the lease is its first 2 MiB. */
#define FLOOR_ARENA_SIZE ((uint64_t)64 << 20)

/* The floor's packets: as large as the daemon's, built from the same messages. */
struct sizes {
	size_t acquire, grant, release, released;
};

enum floor_kind {
	FLOOR_PLAIN, /* the same memfd passed with every grant, nothing else */
	FLOOR_NOFD,  /* no fd at all */
	FLOOR_MEMFD, /* a fresh memfd per acquire, punched and closed at release */
	FLOOR_ARENA, /* one memfd passed with the first grant only; release punches 2 MiB of it */
	FLOOR_EPOLL, /* FLOOR_PLAIN served as an event loop serves many sockets: epoll_wait,
		      * then receive until the socket is empty (the daemon's system calls) */
	FLOOR_LANE,  /* no fd, the bytes through a shared lane page (common/lane.h): the client
		      * writes the request, rings an eventfd and futex-waits; the server
		      * epoll_waits, reads the eventfd, answers in the page, futex-wakes */
};

struct lane_page;

struct floor_server {
	pid_t pid;
	int sock; /* FLOOR_LANE: carries nothing; its end tells the server to exit */
	enum floor_kind kind;
	uint8_t *arena;		/* FLOOR_ARENA: the client's mapping of it, kept */
	struct lane_page *lane; /* FLOOR_LANE: the page, shared with the server */
	int doorbell;		/* FLOOR_LANE: the eventfd the server polls */
	uint32_t seq;		/* FLOOR_LANE: the last request's seq */
	uint8_t reply[256];	/* FLOOR_LANE: the client's copy of the last reply */
};

/* measure_sizes packs the messages a lease round trip sends, for the floor's packet sizes. */
void measure_sizes(struct sizes *s);

/* make_memfd creates a sealed memfd of size bytes as the host backend does; fd or -errno. */
int make_memfd(uint64_t size);

/* floor_start forks f's server (f->kind says which); floor_stop ends it. 0 or -errno. */
int floor_start(struct floor_server *f, const struct sizes *s);
void floor_stop(struct floor_server *f);

/* map_like_librocmmem maps fd 2 MiB aligned with huge pages asked for; NULL on failure. */
uint8_t *map_like_librocmmem(int fd, size_t size);

/* floor_op makes one lease round trip against f, with the client's side of its kernel work. */
int floor_op(struct floor_server *f, const struct sizes *s);

#endif
