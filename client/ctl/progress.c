/* SPDX-License-Identifier: MIT */
/* progress.c: what a queued `rocmmemctl lease` says on stderr while it waits, and on grant. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "format.h"
#include "progress.h"
#include "size.h"

/* A grant within this time says nothing; after it, the queue is looked at this often. */
#define PROGRESS_FIRST_MS 500
#define PROGRESS_INTERVAL_MS 1000
/* Piped, a line when the place in the queue changes, else one this often. */
#define PROGRESS_PIPE_REPEAT_MS 10000

struct ctl_progress {
	rocmmem_client *client; /* the waiting request's own connection: asked concurrently */
	unsigned device;
	uint64_t bytes;
	pthread_t thread;
	int stop_fd; /* an eventfd: readable once the request is answered */
	bool tty;    /* stderr is a terminal: one line, rewritten */
	bool shown;  /* something was said about the wait */
	bool open;   /* a terminal line without its newline is on screen */
	size_t position, count;
	int64_t said_ms; /* when the last piped line was written */
};

/* A request's place in its device's queue, and what the device has, from one status. */
struct place {
	size_t position, count; /* 1-based; position 0: not in the queue */
	uint64_t waited_ms;
	uint64_t free_bytes, budget_bytes;
};

static void find_place(const struct ctl_progress *p, const rocmmem_status *st, struct place *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *w = rocmmem_status_waiter(st, i);

		if (w->device != p->device)
			continue;
		out->count++;
		if (!out->position && w->owner_pid == (int32_t)getpid() && !w->model_id) {
			out->position = out->count;
			out->waited_ms = w->waited_ms;
		}
	}
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *d = rocmmem_status_device(st, i);

		if (d->index == p->device) {
			out->free_bytes = d->free_bytes;
			out->budget_bytes = d->budget_bytes;
		}
	}
}

/*
 * describe writes the line: what is asked, the place in the queue and the time waited, then
 * what the device has. Fields are added after "; " (what the request waits for, once the
 * daemon says it) without changing those before.
 */
static void describe(const struct ctl_progress *p, const struct place *pl, char *buf, size_t len)
{
	char asked[SIZE_FORMAT_MAX], free_text[SIZE_FORMAT_MAX], budget[SIZE_FORMAT_MAX], t[32];

	snprintf(buf, len,
		 "rocmmemctl: lease: waiting for %s on device %u: position %zu of %zu in the "
		 "queue, %s so far; %s free of %s",
		 size_format(p->bytes, asked, sizeof(asked)), p->device, pl->position, pl->count,
		 ctl_duration(pl->waited_ms / 1000, t, sizeof(t)),
		 size_format(pl->free_bytes, free_text, sizeof(free_text)),
		 size_format(pl->budget_bytes, budget, sizeof(budget)));
}

/* say writes the line: in place on a terminal (cut to its width), else when it is news. */
static void say(struct ctl_progress *p, const struct place *pl)
{
	char line[512];
	struct winsize ws;

	describe(p, pl, line, sizeof(line));
	if (p->tty) {
		size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1
				   ? ws.ws_col - 1u
				   : 79u;

		/* A line longer than the terminal would wrap, and \r would not return to it. */
		fprintf(stderr, "\r%.*s\033[K", (int)(strlen(line) < width ? strlen(line) : width),
			line);
		p->open = true;
	} else if (pl->position != p->position || pl->count != p->count ||
		   ctl_monotonic_ms() - p->said_ms >= PROGRESS_PIPE_REPEAT_MS) {
		fprintf(stderr, "%s\n", line);
		p->said_ms = ctl_monotonic_ms();
	} else {
		return;
	}
	fflush(stderr);
	p->position = pl->position;
	p->count = pl->count;
	p->shown = true;
}

/* stopped waits up to ms for the stop; true once the request is answered. */
static bool stopped(const struct ctl_progress *p, int ms)
{
	struct pollfd pfd = {.fd = p->stop_fd, .events = POLLIN};

	while (poll(&pfd, 1, ms) < 0)
		if (errno != EINTR)
			return true;
	return pfd.revents != 0;
}

static void *watch_queue(void *arg)
{
	struct ctl_progress *p = arg;
	int wait_ms = PROGRESS_FIRST_MS;

	while (!stopped(p, wait_ms)) {
		rocmmem_status *st;
		struct place pl;

		wait_ms = PROGRESS_INTERVAL_MS;
		if (rocmmem_status_get(p->client, &st) < 0)
			continue; /* the request's own reply will say what went wrong */
		find_place(p, st, &pl);
		rocmmem_status_free(st);
		if (pl.position)
			say(p, &pl);
	}
	return NULL;
}

int ctl_progress_start(rocmmem_client *client, unsigned device, uint64_t bytes,
		       struct ctl_progress **out)
{
	struct ctl_progress *p = calloc(1, sizeof(*p));
	sigset_t all, old;
	int err;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->client = client;
	p->device = device;
	p->bytes = bytes;
	p->tty = isatty(STDERR_FILENO);
	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (p->stop_fd < 0) {
		err = -errno;
		free(p);
		return err;
	}
	/* Signals are the main thread's: Ctrl-C while waiting ends the process as before. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = -pthread_create(&p->thread, NULL, watch_queue, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(p->stop_fd);
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

void ctl_progress_stop(struct ctl_progress *p, bool granted, uint64_t waited_ms)
{
	uint64_t one = 1;

	if (!p)
		return;
	if (write(p->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		pthread_cancel(p->thread); /* cannot happen with an eventfd; never hang here */
	pthread_join(p->thread, NULL);
	if (p->open)
		fputs("\r\033[K", stderr);
	if (p->shown && granted)
		fprintf(stderr, "rocmmemctl: lease: granted after waiting %.1f s\n",
			(double)waited_ms / 1000.0);
	fflush(stderr);
	close(p->stop_fd);
	free(p);
}
