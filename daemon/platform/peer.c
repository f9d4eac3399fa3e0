/* SPDX-License-Identifier: MIT */
/* peer.c: who is at the other end of a connection, as the kernel vouches for it at connect. */
#include "peer.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux 6.5; older headers lack it (and older kernels answer ENOPROTOOPT). */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
/* Linux 4.13. */
#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The most groups a peer can have (NGROUPS_MAX of the kernel). */
#define PEER_MAX_GROUPS 65536u

/* read_groups reads the supplementary groups the peer had when it connected. */
static int read_groups(int fd, struct identity *p)
{
	gid_t small[64];
	socklen_t len = sizeof(small);
	gid_t *big;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, small, &len) == 0) {
		p->ngroups = len / sizeof(gid_t);
		if (p->ngroups == 0)
			return 0;
		p->groups = malloc(p->ngroups * sizeof(gid_t));
		if (!p->groups) {
			p->ngroups = 0;
			return -ENOMEM;
		}
		memcpy(p->groups, small, p->ngroups * sizeof(gid_t));
		return 0;
	}
	if (errno == ENOPROTOOPT)
		return 0; /* before Linux 4.13: the primary group is all that is known */
	if (errno != ERANGE || len == 0 || len > PEER_MAX_GROUPS * sizeof(gid_t))
		return -errno;
	/* More than fit: len says how many bytes they need. */
	big = malloc(len);
	if (!big)
		return -ENOMEM;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, big, &len) < 0) {
		int err = -errno;

		free(big);
		return err;
	}
	p->groups = big;
	p->ngroups = len / sizeof(gid_t);
	return 0;
}

/*
 * open_pidfd gets a pidfd for the peer process. SO_PEERPIDFD names the very process that
 * connected. pidfd_open(pid) is the fallback: the pid could in principle have been recycled
 * between connect and now, which a connection still naming that pid in SO_PEERCRED does not
 * rule out entirely, but the kernel keeps a live peer's pid from being reused.
 */
static void open_pidfd(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(p->pidfd);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
		p->pidfd = pidfd;
		p->pidfd_from = PEER_PIDFD_SOCKOPT;
		return;
	}
	pidfd = (int)syscall(SYS_pidfd_open, p->who.pid, 0);
	if (pidfd < 0)
		return; /* no pidfds (before Linux 5.3), or the peer is gone already */
	len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != p->who.pid) {
		close(pidfd);
		return;
	}
	p->pidfd = pidfd;
	p->pidfd_from = PEER_PIDFD_OPEN;
}

int peer_identify(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int err;

	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	p->who.pid = cred.pid;
	p->who.uid = cred.uid;
	p->who.gid = cred.gid;
	err = read_groups(fd, &p->who);
	if (err)
		return err;
	open_pidfd(fd, p);
	p->who.pidfd = p->pidfd >= 0;
	return 0;
}

void peer_forget(struct peer *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pidfd_from = PEER_PIDFD_NONE;
	identity_forget(&p->who);
}

void identity_forget(struct identity *who)
{
	free(who->groups);
	who->groups = NULL;
	who->ngroups = 0;
}

void identity_take(struct identity *to, struct identity *from)
{
	*to = *from;
	from->groups = NULL;
	from->ngroups = 0;
}

bool peer_gone(const struct peer *p)
{
	struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};

	/* A pidfd polls readable once its process has exited. */
	return p->pidfd >= 0 && poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

const char *peer_pidfd_name(enum peer_pidfd from)
{
	switch (from) {
	case PEER_PIDFD_SOCKOPT:
		return "SO_PEERPIDFD";
	case PEER_PIDFD_OPEN:
		return "pidfd_open";
	default:
		return "none";
	}
}
