/* SPDX-License-Identifier: MIT */
/*
 * access.c: who a peer is (SO_PEERCRED, SO_PEERGROUPS, a pidfd) and what it may do: connect
 * and administer; user and group names; refusing what a client may not do.
 */
#include "access.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "net/client.h"
#include "net/server.h"
#include "text.h"

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
#define ACCESS_MAX_GROUPS 65536u

/* peer_groups reads the supplementary groups the peer had when it connected. */
static int peer_groups(int fd, struct peer *p)
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
	if (errno != ERANGE || len == 0 || len > ACCESS_MAX_GROUPS * sizeof(gid_t))
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
 * peer_pidfd gets a pidfd for the peer process. SO_PEERPIDFD names the very process that
 * connected. pidfd_open(pid) is the fallback: the pid could in principle have been recycled
 * between connect and now, which a connection still naming that pid in SO_PEERCRED does not
 * rule out entirely, but the kernel keeps a live peer's pid from being reused.
 */
static void peer_pidfd(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(p->pidfd);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
		p->pidfd = pidfd;
		p->pidfd_from = PEER_PIDFD_SOCKOPT;
		return;
	}
	pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (pidfd < 0)
		return; /* no pidfds (before Linux 5.3), or the peer is gone already */
	len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != p->pid) {
		close(pidfd);
		return;
	}
	p->pidfd = pidfd;
	p->pidfd_from = PEER_PIDFD_OPEN;
}

int access_identify(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int err;

	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	p->pid = cred.pid;
	p->uid = cred.uid;
	p->gid = cred.gid;
	err = peer_groups(fd, p);
	if (err)
		return err;
	peer_pidfd(fd, p);
	return 0;
}

void access_forget(struct peer *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pidfd_from = PEER_PIDFD_NONE;
	free(p->groups);
	p->groups = NULL;
	p->ngroups = 0;
}

bool access_in_group(const struct peer *p, gid_t gid)
{
	if (p->gid == gid)
		return true;
	for (unsigned i = 0; i < p->ngroups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

static bool listed(const struct id_list *l, uint32_t id)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

bool access_allowed(const struct access_policy *pol, const struct peer *p)
{
	if (pol->users.n == 0 && pol->groups.n == 0)
		return true;
	if (p->uid == 0 || p->uid == geteuid())
		return true;
	if (listed(&pol->users, p->uid))
		return true;
	for (unsigned i = 0; i < pol->groups.n; i++)
		if (access_in_group(p, pol->groups.ids[i]))
			return true;
	return false;
}

bool access_is_admin(const struct access_policy *pol, const struct peer *p)
{
	return p->uid == 0 || (pol->has_admin_group && access_in_group(p, pol->admin_gid));
}

bool access_peer_gone(const struct peer *p)
{
	struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};

	/* A pidfd polls readable once its process has exited. */
	return p->pidfd >= 0 && poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

const char *access_pidfd_name(enum peer_pidfd from)
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

/* ----------------------------------------------------------------------------------------- */
/* Names */

/* parse_number reads a decimal id: 1 when text is one (*out set), 0 when it is not a number. */
static int parse_number(const char *text, uint32_t *out, char *why, size_t len)
{
	unsigned long long v;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return 0;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (*end)
		return 0; /* "1abc" may be a name */
	/* (uid_t)-1 means "no id" to chown and setresuid: never a real one. */
	if (errno || v >= UINT32_MAX)
		return text_why(why, len, -EINVAL, "id %s is out of range (0 to %u)", text,
				UINT32_MAX - 1);
	*out = (uint32_t)v;
	return 1;
}

/* lookup_buffer sizes the buffer getpwnam_r and getgrnam_r need, growing on ERANGE. */
#define LOOKUP_BUFFER_MIN 1024u
#define LOOKUP_BUFFER_MAX (1u << 20)

/*
 * lookup_id resolves text, a decimal id or a name, to a uid (groups false, through
 * getpwnam_r) or a gid (groups true, through getgrnam_r).
 */
static int lookup_id(const char *text, bool groups, uint32_t *out, char *why, size_t why_len)
{
	const char *what = groups ? "group" : "user";
	size_t size = LOOKUP_BUFFER_MIN;
	bool found = false;
	uint32_t id = 0;
	int rc = parse_number(text, &id, why, why_len);

	if (rc < 0)
		return rc;
	if (rc == 1) {
		*out = id;
		return 0;
	}
	if (!text[0])
		return text_why(why, why_len, -EINVAL, "a %s name or %s", what,
				groups ? "gid" : "uid");
	for (;;) {
		char *buf = malloc(size);

		if (!buf)
			return text_why(why, why_len, -EINVAL, "out of memory");
		if (groups) {
			struct group gr, *gp = NULL;

			rc = getgrnam_r(text, &gr, buf, size, &gp);
			found = rc == 0 && gp;
			if (found)
				*out = gr.gr_gid;
		} else {
			struct passwd pw, *pp = NULL;

			rc = getpwnam_r(text, &pw, buf, size, &pp);
			found = rc == 0 && pp;
			if (found)
				*out = pw.pw_uid;
		}
		free(buf);
		if (rc == ERANGE && size < LOOKUP_BUFFER_MAX) {
			size *= 2;
			continue;
		}
		break;
	}
	if (rc)
		return text_why(why, why_len, -EINVAL, "could not look up %s '%s': %s", what, text,
				strerror(rc));
	if (!found)
		return text_why(why, why_len, -EINVAL, "no %s named '%s'", what, text);
	return 0;
}

int access_user_id(const char *text, uid_t *out, char *why, size_t why_len)
{
	uint32_t id = 0;
	int rc = lookup_id(text, false, &id, why, why_len);

	if (rc == 0)
		*out = (uid_t)id;
	return rc;
}

int access_group_id(const char *text, gid_t *out, char *why, size_t why_len)
{
	uint32_t id = 0;
	int rc = lookup_id(text, true, &id, why, why_len);

	if (rc == 0)
		*out = (gid_t)id;
	return rc;
}

/* parse_list reads "a,b,c" through one of the lookups above. */
static int parse_list(const char *text, bool groups, struct id_list *out, char *why, size_t why_len)
{
	char buf[1024], *save = NULL, *tok;

	memset(out, 0, sizeof(*out));
	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		return text_why(why, why_len, -EINVAL, "too long");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t id;
		int rc;

		/* Spaces around a name are fine in a file: "alice, bob". */
		while (*tok == ' ')
			tok++;
		for (size_t n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		rc = lookup_id(tok, groups, &id, why, why_len);
		if (rc)
			return rc;
		if (listed(out, id))
			continue;
		if (out->n == ACCESS_MAX_IDS)
			return text_why(why, why_len, -EINVAL, "at most %u %s", ACCESS_MAX_IDS,
					groups ? "groups" : "users");
		out->ids[out->n++] = id;
	}
	if (out->n == 0)
		return text_why(why, why_len, -EINVAL, "a comma-separated list of %s",
				groups ? "group names or gids" : "user names or uids");
	return 0;
}

int access_parse_users(const char *text, struct id_list *out, char *why, size_t why_len)
{
	return parse_list(text, false, out, why, why_len);
}

int access_parse_groups(const char *text, struct id_list *out, char *why, size_t why_len)
{
	return parse_list(text, true, out, why, why_len);
}

const char *access_user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *found = NULL;
	char tmp[4096];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &found) == 0 && found)
		snprintf(buf, len, "%s", pw.pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

const char *access_group_name(gid_t gid, char *buf, size_t len)
{
	struct group gr, *found = NULL;
	char tmp[4096];

	if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &found) == 0 && found)
		snprintf(buf, len, "%s", gr.gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)gid);
	return buf;
}

/* ----------------------------------------------------------------------------------------- */
/* Refusals */

void access_refuse(struct client *c, uint64_t request_id, const char *fmt, ...)
{
	struct server *s = c->server;
	unsigned long long held;
	char text[512], label[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	s->access_tally.requests_refused++;
	if (log_ratelimit_pass(&s->access_tally.log, uv_now(s->loop), &held)) {
		if (held)
			log_warn("refused %s (uid %u): %s (and %llu refusal(s) not logged)",
				 client_label(c, label, sizeof(label)), (unsigned)c->uid, text,
				 held);
		else
			log_warn("refused %s (uid %u): %s", client_label(c, label, sizeof(label)),
				 (unsigned)c->uid, text);
	}
	client_reply_error(c, request_id, -EPERM, "%s", text);
}

bool access_client_is_admin(const struct client *c)
{
	return access_is_admin(&c->server->access, &c->peer);
}
