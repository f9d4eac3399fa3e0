/* SPDX-License-Identifier: MIT */
/*
 * reconnect.c: when the daemon goes away without saying it stops (a crash, SIGKILL, its
 * watchdog), the library brings the connection back: attempts with exponential backoff and
 * jitter, made by whichever thread needs the daemon or dispatches events (the event fd wakes
 * when one is due: no thread of the library's own), each one a new connection on which the
 * models are registered again and the leases still held re-declared with their fds
 * (redeclare.c), before the connection replaces the old one (install.c). What the new daemon
 * refuses is revoked through the usual events; memory stays mapped until the host releases it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "install.h"
#include "reconnect.h"

/* ------------------------------------------------------------------------------------------ */
/* State */

void reconnect_init(rocmmem_client *c, uint32_t flags, int64_t window_ms)
{
	const char *env = getenv("ROCMMEM_RECONNECT");
	struct timespec ts;

	c->flags = flags;
	c->window_ms = window_ms == 0				      ? CONN_RECONNECT_WINDOW_MS
		       : window_ms < 0 || window_ms > CONN_FOREVER_MS ? -1
								      : window_ms;
	/* ROCMMEM_RECONNECT=0 turns it off; a number of seconds sets the window (unless the
	 * program chose one). */
	if (env && env[0]) {
		char *end;
		double s = strtod(env, &end);

		if (strcmp(env, "off") == 0 || strcmp(env, "no") == 0 ||
		    strcmp(env, "false") == 0 || (*end == '\0' && s <= 0))
			c->flags |= ROCMMEM_CONNECT_NO_RECONNECT;
		else if (*end == '\0' && window_ms == 0 && s < 1e7)
			c->window_ms = (int64_t)(s * 1000.0);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rand_state = (unsigned)getpid() ^ (unsigned)ts.tv_nsec;
}

void reconnect_finish(rocmmem_client *c)
{
	while (c->models) {
		struct lib_model *m = c->models;

		c->models = m->next;
		free(m);
	}
	for (unsigned i = 0; i < c->nretired; i++)
		free(c->retired[i]);
	free(c->retired);
	free(c->name);
	c->retired = NULL;
	c->nretired = 0;
	c->name = NULL;
}

/* arm makes the event fd readable at at_ms (monotonic), or never (0). */
static void arm(rocmmem_client *c, uint64_t at_ms)
{
	struct itimerspec its = {0};

	if (at_ms) {
		its.it_value.tv_sec = (time_t)(at_ms / 1000);
		its.it_value.tv_nsec = (long)(at_ms % 1000) * 1000000 + 1; /* never all zero */
	}
	timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

bool reconnect_due(const rocmmem_client *c)
{
	return c->reconnecting && !c->attempting && conn_now_ms() >= c->next_attempt_ms;
}

/*
 * revoke_all marks every lease the daemon took back at the end of the connection revoked, and
 * queues a ROCMMEM_EVENT_LEASE_REVOKED for each; lock held.
 */
static void revoke_all(rocmmem_client *c, const char *why)
{
	for (struct rocmmem_lease *l = c->leases; l; l = l->next) {
		if (l->revoked)
			continue;
		l->revoked = true;
		conn_queue_lib(c, ROCMMEM_EVENT_LEASE_REVOKED, l->id, 0, why);
	}
}

/* end_for_good ends the connection: calls fail, DISCONNECTED is delivered; lock held. */
static void end_for_good(rocmmem_client *c, int err, const char *why)
{
	uint64_t one = 1;

	c->broken = true;
	c->broken_err = err;
	c->reconnecting = false;
	snprintf(c->broken_msg, sizeof(c->broken_msg), "%s", why);
	/* A daemon that stops (at its shutdown deadline) or refuses the connection lives on and
	 * takes back what the connection held; one that died left the memory mapped here. */
	if (c->shutdown_seen || c->refused) {
		char reason[320];

		if (c->shutdown_seen)
			snprintf(reason, sizeof(reason), "%s",
				 "rocmmemd stopped and took the memory back: it was not released "
				 "before the daemon's shutdown deadline");
		else
			snprintf(reason, sizeof(reason),
				 "rocmmemd closed the connection and took the memory back: %s",
				 why);
		revoke_all(c, reason);
	}
	arm(c, 0);
	/* Wake rocmmem_dispatch users so they learn of it. */
	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* The counter only saturates; a pending wake-up is enough. */
	}
	pthread_cond_broadcast(&c->cond);
}

/*
 * reconnect_lost decides what the end of connection gen means (lock held): nothing if a later
 * connection is up already; else reconnecting, when it is allowed and this client holds
 * leases or models; else the end for good (broken).
 */
static void reconnect_lost(rocmmem_client *c, uint64_t gen, int err, const char *why)
{
	char reason[320];
	bool worth;

	if (gen != c->gen || c->broken || c->reconnecting)
		return; /* an older connection's end, or known already */
	/* The daemon went away without saying it stops, and this process has memory or models
	 * it would lose: bring the connection back. A refusal or a stop is final. */
	worth = (err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN) && !c->shutdown_seen &&
		!(c->flags & ROCMMEM_CONNECT_NO_RECONNECT) && (c->leases || c->models);
	if (!worth) {
		end_for_good(c, err, why);
		return;
	}
	c->reconnecting = true;
	c->lost_ms = conn_now_ms();
	c->next_attempt_ms = c->lost_ms;
	c->backoff_ms = CONN_BACKOFF_FIRST_MS;
	c->attempts = 0;
	snprintf(c->lost_msg, sizeof(c->lost_msg), "%s", why);
	/* The dead socket would poll readable for ever: out of the event fd until replaced. */
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	snprintf(reason, sizeof(reason), "%s: reconnecting", why);
	conn_queue_lib(c, ROCMMEM_EVENT_RECONNECTING, 0, 0, reason);
	arm(c, c->next_attempt_ms);
	pthread_cond_broadcast(&c->cond);
}

/* schedule plans the next attempt after a failed one, or gives up; lock held. */
static void schedule(rocmmem_client *c, const char *why)
{
	uint64_t now = conn_now_ms(), delay;

	snprintf(c->lost_msg, sizeof(c->lost_msg), "%s", why);
	if (c->window_ms >= 0 && now >= c->lost_ms + (uint64_t)c->window_ms) {
		char msg[384];

		snprintf(msg, sizeof(msg), "rocmmemd did not come back within %.3g s (%s)",
			 (double)c->window_ms / 1000.0, why);
		end_for_good(c, -ECONNRESET, msg);
		return;
	}
	/* Exponential with jitter: returning clients do not all knock at the same instant. */
	delay = c->backoff_ms * 3 / 4 + (uint64_t)rand_r(&c->rand_state) % (c->backoff_ms / 2 + 1);
	c->backoff_ms =
	    c->backoff_ms * 2 > CONN_BACKOFF_MAX_MS ? CONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
	c->next_attempt_ms = now + delay;
	if (c->window_ms >= 0 && c->next_attempt_ms > c->lost_ms + (uint64_t)c->window_ms)
		c->next_attempt_ms = c->lost_ms + (uint64_t)c->window_ms;
	arm(c, c->next_attempt_ms);
}

void reconnect_try(rocmmem_client *c)
{
	struct attempt at = {.fd = -1};
	int err;

	at.events_tail = &at.events;
	c->attempting = true;
	c->attempts++;
	err = redeclare_take(c, &at);
	pthread_mutex_unlock(&c->lock);
	if (err == 0)
		err = redeclare_run(&at);
	else
		snprintf(at.why, sizeof(at.why), "out of memory");
	pthread_mutex_lock(&c->lock);
	c->attempting = false;
	if (err == 0 && !c->broken) {
		install_attempt(c, &at);
		arm(c, 0);
	} else if (!c->broken)
		schedule(c, at.why[0] ? at.why : strerror(-err));
	redeclare_free(&at);
	pthread_cond_broadcast(&c->cond);
}

const struct conn_hooks reconnect_hooks = {
    .lost = reconnect_lost,
    .due = reconnect_due,
    .attempt = reconnect_try,
};
