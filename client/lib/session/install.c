/* SPDX-License-Identifier: MIT */
/*
 * install.c: a successful attempt becomes the client's connection: the new socket under the old
 * fd's number, the new daemon's ids of the models, and what it refused revoked through events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "install.h"

/* retire replaces *field by *fresh (taken), keeping the old string until disconnect. */
static void retire(rocmmem_client *c, char **field, char **fresh)
{
	char **v;

	if (*field && *fresh && strcmp(*field, *fresh) == 0)
		return;
	/* The host may hold the old string (rocmmem_client_backend): kept until disconnect. */
	v = realloc(c->retired, (c->nretired + 1) * sizeof(*v));
	if (!v)
		return;
	c->retired = v;
	c->retired[c->nretired++] = *field;
	*field = *fresh;
	*fresh = NULL;
}

/* release_orphan tells the new daemon to let go of a lease the host released meanwhile. */
static void release_orphan(rocmmem_client *c, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	uint8_t buf[64];
	size_t len;

	rel.has_lease_id = true;
	rel.lease_id = id;
	msg.has_id = true;
	msg.id = c->next_id++;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	len = protobuf_c_message_get_packed_size(&msg.base);
	if (len > sizeof(buf))
		return;
	protobuf_c_message_pack(&msg.base, buf);
	if (wire_send(c->fd, buf, len, NULL, 0, MSG_DONTWAIT) == 0) {
		atomic_fetch_add(&c->sock_tx, 1);
		conn_abandon(c, msg.id); /* its answer is nobody's */
	}
}

/* install_models gives the models the new daemon's ids, or revokes what it refused. Returns
 * how many were re-declared; counts the refused into *refused. */
static unsigned install_models(rocmmem_client *c, struct attempt *at, unsigned *refused)
{
	unsigned models = 0;

	for (size_t i = 0; i < at->nmodels; i++) {
		struct snap_model *s = &at->models[i];
		struct lib_model *lm = held_model(c, s->m.id);

		if (!lm)
			continue; /* unregistered meanwhile: the call waiting to say so says so */
		if (s->err) {
			lm->daemon_id = 0;
			lm->reservation = 0;
			conn_queue_lib(c, ROCMMEM_EVENT_MODEL_REVOKED, 0, lm->id, s->why);
			(*refused)++;
			continue;
		}
		lm->daemon_id = s->new_id;
		if (s->reservation < lm->reservation) {
			lm->reservation = s->reservation;
			if (s->reservation == 0)
				conn_queue_lib(c, ROCMMEM_EVENT_MODEL_REVOKED, 0, lm->id, s->why);
		}
		models++;
	}
	return models;
}

/* install_leases revokes the leases the new daemon refused, and releases those the host let go
 * of meanwhile. Returns how many were re-declared; counts the refused into *refused. */
static unsigned install_leases(rocmmem_client *c, struct attempt *at, unsigned *refused)
{
	unsigned leases = 0;

	for (size_t i = 0; i < at->nleases; i++) {
		struct snap_lease *s = &at->leases[i];
		struct rocmmem_lease *l = c->leases;

		while (l && (l != s->l || l->id != s->id))
			l = l->next;
		/* Released by the host while it was being re-declared: let the new daemon know. */
		if (!s->err && !l) {
			release_orphan(c, s->id);
			continue;
		}
		if (!l || s->revoked)
			continue;
		if (s->err) {
			char why[320];

			snprintf(why, sizeof(why), "the restarted daemon did not take it back: %s",
				 s->why);
			l->revoked = true;
			conn_queue_lib(c, ROCMMEM_EVENT_LEASE_REVOKED, l->id, 0, why);
			(*refused)++;
			continue;
		}
		leases++;
	}
	return leases;
}

/*
 * install_arenas marks the arenas the new daemon did not take over: every lease in them is
 * revoked (its memory stays readable until released), and no daemon punches their ranges any
 * more: the library does, at each release.
 */
static void install_arenas(rocmmem_client *c, struct attempt *at)
{
	for (size_t i = 0; i < at->narenas; i++) {
		struct lib_arena *a = held_arena(c, at->arenas[i].id);

		if (at->arenas[i].err && a)
			a->orphaned = true;
	}
}

/* install_connection makes the attempt's socket the client's (under the old fd's number). */
static void install_connection(rocmmem_client *c, struct attempt *at)
{
	struct epoll_event ev = {.events = EPOLLIN};

	/* A thread still sending on, or reading, the old connection's fd number finishes first
	 * (the old socket is dead: at once). */
	while (c->sending || c->reading)
		pthread_cond_wait(&c->cond, &c->lock);
	dup2(at->fd, c->fd);
	close(at->fd);
	at->fd = -1;
	ev.data.fd = c->fd;
	epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fd, &ev);
	c->gen++;
	c->reconnecting = false;
	atomic_store(&c->sock_tx, at->sent);
	c->sock_rx = at->received;
	if (at->hello)
		conn_lane_attach(c, at->features, at->hello);
	c->seq_base = c->last_seq;
	c->daemon_pid = at->daemon_pid;
	c->device_count = at->device_count;
	retire(c, &c->daemon_version, &at->daemon_version);
	retire(c, &c->backend, &at->backend);
	/* Requests given up on the old connection will never be answered on this one. */
	while (c->abandoned) {
		struct abandoned *a = c->abandoned;

		c->abandoned = a->next;
		free(a);
	}
}

void install_attempt(rocmmem_client *c, struct attempt *at)
{
	unsigned models, leases, refused = 0;
	uint64_t took = conn_now_ms() - c->lost_ms;
	char summary[256];
	struct inmsg *m;

	install_connection(c, at);
	models = install_models(c, at, &refused);
	leases = install_leases(c, at, &refused);
	install_arenas(c, at);
	/* What the new daemon said during the attempt, after the connections before it. */
	while ((m = at->events)) {
		at->events = m->next;
		conn_note_event(c, m);
		conn_queue_event(c, m);
	}
	at->events_tail = &at->events;
	snprintf(summary, sizeof(summary),
		 "reconnected to rocmmemd %s (pid %d) after %.1f s: %u lease(s) and %u model(s) "
		 "re-declared, %u refused",
		 c->daemon_version ? c->daemon_version : "", (int)c->daemon_pid,
		 (double)took / 1000.0, leases, models, refused);
	conn_queue_lib(c, ROCMMEM_EVENT_RECONNECTED, 0, 0, summary);
}
