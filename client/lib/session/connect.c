/* SPDX-License-Identifier: MIT */
/*
 * connect.c: a client's life: connecting (the session's hooks installed in the connection),
 * what it says of its daemon, dispatching its events, and disconnecting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/error.h"
#include "conn/client.h"
#include "reconnect.h"
#include "sockpath.h"

/* The size of the first version (1.0) of struct rocmmem_connect_options: every caller's. */
#define CONNECT_OPTIONS_1_0 ABI_END(struct rocmmem_connect_options, reconnect_window_ms)

/* client_new makes a client that is not connected yet, with the session's hooks installed. */
static rocmmem_client *client_new(const struct rocmmem_connect_options *o)
{
	pthread_condattr_t attr;
	rocmmem_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = c->efd = c->tfd = c->epfd = -1;
	c->next_id = 1;
	c->events_tail = &c->events;
	c->telemetry_tail = &c->telemetry;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
	c->hooks = &reconnect_hooks;
	reconnect_init(c, o->flags, o->reconnect_window_ms);
	return c;
}

/* client_free frees a client and everything it owns (rocmmem_disconnect says what). */
static void client_free(rocmmem_client *c)
{
	struct inmsg *m;

	held_lease_forget_all(c);
	conn_lane_free_all(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->efd >= 0)
		close(c->efd);
	if (c->tfd >= 0)
		close(c->tfd);
	if (c->epfd >= 0)
		close(c->epfd);
	while ((m = c->replies)) {
		c->replies = m->next;
		inmsg_free(m);
	}
	while ((m = c->events)) {
		c->events = m->next;
		inmsg_free(m);
	}
	conn_drop_telemetry(c);
	while (c->abandoned) {
		struct abandoned *a = c->abandoned;

		c->abandoned = a->next;
		free(a);
	}
	reconnect_finish(c);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->daemon_version);
	free(c->backend);
	free(c);
}

/*
 * in_use says whether a thread other than one about to free the client is inside a call on it,
 * as far as the client can tell: running its event callback, reading or sending on its
 * connection, waiting in a call, or reconnecting. Lock held.
 */
static bool in_use(const rocmmem_client *c)
{
	return c->delivering || c->reading || c->sending || c->busy || c->attempting;
}

ROCMMEM_EXPORT int rocmmem_disconnect(rocmmem_client *c)
{
	bool busy;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	busy = in_use(c);
	pthread_mutex_unlock(&c->lock);
	if (busy)
		return error_set(-EBUSY,
				 "rocmmem_disconnect: the client is in use (by another "
				 "thread, or this is its event callback): nothing was freed");
	client_free(c);
	return 0;
}

ROCMMEM_EXPORT int rocmmem_connect_with(const struct rocmmem_connect_options *opts,
					rocmmem_client **out)
{
	struct rocmmem_connect_options o;
	int64_t deadline;
	rocmmem_client *c;
	int err;

	if (!out)
		return error_set(-EINVAL, "rocmmem_connect needs somewhere to store the client");
	*out = NULL;
	if (!opts)
		return error_set(-EINVAL, "rocmmem_connect_with needs options");
	err = abi_take(&o, sizeof(o), opts, opts->struct_size, CONNECT_OPTIONS_1_0,
		       "rocmmem_connect_options");
	if (err)
		return err;
	if (o.flags & ~(uint32_t)(ROCMMEM_CONNECT_NO_RECONNECT | ROCMMEM_CONNECT_NO_WAIT))
		return error_set(-EINVAL, "unknown connect flags 0x%x", o.flags);
	deadline = conn_deadline_after(o.timeout_ms);
	c = client_new(&o);
	if (!c)
		return error_set(-ENOMEM, "out of memory");
	err = sockpath_resolve(o.socket_path, SOCKPATH_CLIENT, c->path, sizeof(c->path));
	if (err) {
		error_set(err, "Could not use the socket path: %s", strerror(-err));
		goto fail;
	}
	if (o.name && !(c->name = strdup(o.name))) {
		err = error_set(-ENOMEM, "out of memory");
		goto fail;
	}
	err = conn_open_socket(c->path, deadline, &c->fd);
	if (err)
		goto fail;
	{
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			c->daemon_pid = cred.pid;
	}
	err = conn_setup_event_fd(c);
	if (err) {
		error_set(err, "Could not set up the event fd: %s", strerror(-err));
		goto fail;
	}
	err = conn_hello(c, o.name, deadline);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	client_free(c);
	return err;
}

ROCMMEM_EXPORT int rocmmem_connect(const char *socket_path, const char *name,
				   rocmmem_timeout_ms timeout_ms, rocmmem_client **out)
{
	struct rocmmem_connect_options o = {.struct_size = sizeof(o),
					    .socket_path = socket_path,
					    .name = name,
					    .timeout_ms = timeout_ms};

	return rocmmem_connect_with(&o, out);
}

ROCMMEM_EXPORT const char *rocmmem_client_daemon_version(const rocmmem_client *c)
{
	return c->daemon_version;
}

ROCMMEM_EXPORT const char *rocmmem_client_backend(const rocmmem_client *c)
{
	return c->backend;
}

ROCMMEM_EXPORT rocmmem_device_index rocmmem_client_device_count(const rocmmem_client *c)
{
	return c->device_count;
}

ROCMMEM_EXPORT enum rocmmem_connection_state rocmmem_client_state(rocmmem_client *c)
{
	enum rocmmem_connection_state state;

	pthread_mutex_lock(&c->lock);
	state = c->broken	  ? ROCMMEM_DISCONNECTED
		: c->reconnecting ? ROCMMEM_RECONNECTING
				  : ROCMMEM_CONNECTED;
	pthread_mutex_unlock(&c->lock);
	return state;
}

ROCMMEM_EXPORT int rocmmem_set_event_callback(rocmmem_client *c, rocmmem_event_fn fn,
					      void *userdata)
{
	if (!c)
		return error_set(-EINVAL, "rocmmem_set_event_callback needs a client");
	pthread_mutex_lock(&c->lock);
	c->event_fn = fn;
	c->event_userdata = userdata;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

ROCMMEM_EXPORT int rocmmem_set_progress_callback(rocmmem_client *c, rocmmem_progress_fn fn,
						 void *userdata)
{
	if (!c)
		return error_set(-EINVAL, "rocmmem_set_progress_callback needs a client");
	pthread_mutex_lock(&c->lock);
	c->progress_fn = fn;
	c->progress_userdata = userdata;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

ROCMMEM_EXPORT int rocmmem_event_fd(const rocmmem_client *c)
{
	return c->epfd;
}

ROCMMEM_EXPORT int rocmmem_dispatch(rocmmem_client *c)
{
	bool deliver_disconnect = false, broken;
	char reason[sizeof(c->broken_msg)];
	rocmmem_event_fn fn;
	void *userdata;
	int handled, reads = 0;

	pthread_mutex_lock(&c->lock);
	c->busy++;
	if (c->reconnecting) {
		uint64_t expirations;

		/* The timer made the event fd readable: an attempt is due, made here. */
		if (read(c->tfd, &expirations, sizeof(expirations)) < 0) {
			/* EAGAIN: not due yet. */
		}
		if (reconnect_due(c))
			reconnect_try(c);
	}
	/* Read whatever has arrived, unless another thread is reading for everyone already. */
	while (!c->reading && !c->broken && !c->reconnecting && reads++ < CONN_DISPATCH_MAX_READS &&
	       conn_pump(c, 0)) {
	}
	conn_lane_reclaim(c); /* a late lane answer: also when another thread is the reader */
	handled = conn_deliver(c);
	if (c->broken && !c->disconnect_delivered && !c->delivering) {
		c->disconnect_delivered = true;
		c->delivering = true; /* its callback runs: the client is in use */
		deliver_disconnect = true;
		snprintf(reason, sizeof(reason), "%s", c->broken_msg);
	}
	fn = c->event_fn;
	userdata = c->event_userdata;
	broken = c->broken;
	c->busy--;
	pthread_mutex_unlock(&c->lock);

	if (deliver_disconnect) {
		struct rocmmem_event ev = {.type = ROCMMEM_EVENT_DISCONNECTED, .reason = reason};

		if (fn)
			fn(c, &ev, userdata);
		handled++;
		pthread_mutex_lock(&c->lock);
		c->delivering = false;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
	if (handled == 0 && broken)
		return error_set(-ECONNRESET, "the connection to rocmmemd ended");
	return handled;
}
