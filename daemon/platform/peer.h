/* SPDX-License-Identifier: MIT */
/* peer.h: who is at the other end of a connection, as the kernel vouches for it at connect. */
#ifndef ROCMMEMD_PEER_H
#define ROCMMEMD_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A process's identity at connect time (SO_PEERCRED, SO_PEERGROUPS). */
struct identity {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary groups (owned; NULL when none or unknown) */
	unsigned ngroups;
	bool pidfd; /* the daemon holds a pidfd of the process (status shows it) */
};

/* identity_forget frees the groups. */
void identity_forget(struct identity *who);

/* identity_take moves from into to (the groups change owner; from keeps none). */
void identity_take(struct identity *to, struct identity *from);

/* Where a connection's pidfd came from. */
enum peer_pidfd {
	PEER_PIDFD_NONE = 0, /* the kernel offers none (or the peer was gone already) */
	PEER_PIDFD_SOCKOPT,  /* SO_PEERPIDFD: the process that connected, without a race */
	PEER_PIDFD_OPEN,     /* pidfd_open(SO_PEERCRED's pid) right after accept */
};

/* A connected peer: its identity, and a pidfd of the process. */
struct peer {
	struct identity who;
	int pidfd; /* the peer process (owned), or -1 */
	enum peer_pidfd pidfd_from;
};

/*
 * peer_identify reads who is at the other end of an accepted socket: SO_PEERCRED, the
 * supplementary groups (SO_PEERGROUPS, Linux 4.13; none on older kernels) and a pidfd
 * (SO_PEERPIDFD, Linux 6.5; else pidfd_open of the pid, kept only if the socket still names
 * that pid). Returns 0 with p filled (release it with peer_forget), or a negative errno.
 */
int peer_identify(int fd, struct peer *p);

/* peer_forget closes the pidfd and frees the groups; p is left empty (pidfd -1). */
void peer_forget(struct peer *p);

/*
 * peer_gone says whether the pidfd shows the peer process has exited (so its pid may name
 * another process by now). False without a pidfd: nothing is known.
 */
bool peer_gone(const struct peer *p);

/* peer_pidfd_name: "SO_PEERPIDFD", "pidfd_open" or "none". */
const char *peer_pidfd_name(enum peer_pidfd from);

#endif
