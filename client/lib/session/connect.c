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

#include "base/error.h"
#include "conn/client.h"
#include "reconnect.h"
#include "sockpath.h"

ROCMMEM_EXPORT int rocmmem_connect_with(const struct rocmmem_connect_options *opts,
					rocmmem_client **out)
{
	struct rocmmem_connect_options o = {0};
	int64_t deadline;
	pthread_condattr_t attr;
	rocmmem_client *c;
	int err;

	if (!out)
		return error_set(-EINVAL, "rocmmem_connect needs somewhere to store the client");
	*out = NULL;
	/* Fields a caller built against an older header does not know stay at their default. */
	if (!opts || opts->size < offsetof(struct rocmmem_connect_options, flags))
		return error_set(-EINVAL, "rocmmem_connect_with needs options with their size set");
	memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	if (o.flags & ~(uint32_t)(ROCMMEM_CONNECT_NO_RECONNECT | ROCMMEM_CONNECT_NO_WAIT))
		return error_set(-EINVAL, "unknown connect flags 0x%x", o.flags);
	deadline = conn_deadline_after(o.timeout_ms);
	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(-ENOMEM, "out of memory");
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
	reconnect_init(c, o.flags, o.reconnect_window_ms);
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
	rocmmem_disconnect(c);
	return err;
}

ROCMMEM_EXPORT int rocmmem_connect(const char *socket_path, const char *name, int timeout_ms,
				   rocmmem_client **out)
{
	struct rocmmem_connect_options o = {
	    .size = sizeof(o), .socket_path = socket_path, .name = name, .timeout_ms = timeout_ms};

	return rocmmem_connect_with(&o, out);
}

ROCMMEM_EXPORT void rocmmem_disconnect(rocmmem_client *c)
{
	struct inmsg *m;

	if (!c)
		return;
	held_lease_forget_all(c);
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

ROCMMEM_EXPORT const char *rocmmem_client_daemon_version(const rocmmem_client *c)
{
	return c->daemon_version;
}

ROCMMEM_EXPORT const char *rocmmem_client_backend(const rocmmem_client *c)
{
	return c->backend;
}

ROCMMEM_EXPORT unsigned rocmmem_client_device_count(const rocmmem_client *c)
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
	pthread_mutex_lock(&c->lock);
	c->event_fn = fn;
	c->event_userdata = userdata;
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
	handled = conn_deliver(c);
	if (c->broken && !c->disconnect_delivered && !c->delivering) {
		c->disconnect_delivered = true;
		deliver_disconnect = true;
		snprintf(reason, sizeof(reason), "%s", c->broken_msg);
	}
	fn = c->event_fn;
	userdata = c->event_userdata;
	broken = c->broken;
	pthread_mutex_unlock(&c->lock);

	if (deliver_disconnect) {
		struct rocmmem_event ev = {.type = ROCMMEM_EVENT_DISCONNECTED, .reason = reason};

		if (fn)
			fn(c, &ev, userdata);
		handled++;
	}
	if (handled == 0 && broken)
		return error_set(-ECONNRESET, "the connection to rocmmemd ended");
	return handled;
}
