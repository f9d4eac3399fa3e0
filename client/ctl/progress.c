/* SPDX-License-Identifier: MIT */
/* progress.c: what a queued `rocmmemctl lease` says on stderr while it waits, and on grant. */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
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
	bool json;	 /* --json: the daemon's reports as JSON lines, no text line */
	/* What the daemon last said the request waits for (its progress callback), under lock. */
	pthread_mutex_t lock;
	bool has_report;
	struct rocmmem_wait_progress report;
	char model_name[65], owner_name[65];
	int64_t report_ms;  /* when it came */
	char said_why[256]; /* ... as the last line said it */
};

static const char *const reasons[] = {"unknown", "granting",  "queue", "eviction",
				      "holder",	 "exclusive", "budget"};
static const char *const ends[] = {NULL, "acked", "revoked"};

/* who writes "pid 123 'name'" of the report's owner ("" when unknown). */
static const char *who(const struct ctl_progress *p, char *buf, size_t len)
{
	if (p->report.owner_pid)
		snprintf(buf, len, " (pid %d '%s')", (int)p->report.owner_pid, p->owner_name);
	else
		buf[0] = '\0';
	return buf;
}

/* waits_for writes what the request waits for, from the daemon's last report; lock held. */
static void waits_for(const struct ctl_progress *p, char *buf, size_t len)
{
	const struct rocmmem_wait_progress *r = &p->report;
	char owner[96], sz[SIZE_FORMAT_MAX], t[32];
	int64_t left = r->deadline_ms - (ctl_monotonic_ms() - p->report_ms);

	if (!p->has_report) {
		buf[0] = '\0';
		return;
	}
	who(p, owner, sizeof(owner));
	if (r->reason == ROCMMEM_WAIT_EVICTION && r->eviction_ended)
		snprintf(buf, len, "the eviction of model %" PRIu64 " '%s'%s ended: %s",
			 r->model_id, p->model_name, owner, ends[r->eviction_ended]);
	else if (r->reason == ROCMMEM_WAIT_EVICTION)
		snprintf(buf, len,
			 "waits for the eviction of model %" PRIu64 " '%s'%s, deadline in %s",
			 r->model_id, p->model_name, owner,
			 ctl_duration(left > 0 ? (uint64_t)(left + 999) / 1000 : 0, t, sizeof(t)));
	else if (r->reason == ROCMMEM_WAIT_HOLDER && r->model_id)
		snprintf(buf, len,
			 "waits for model %" PRIu64 " '%s'%s, in use, of a class it excludes",
			 r->model_id, p->model_name, owner);
	else if (r->reason == ROCMMEM_WAIT_HOLDER)
		snprintf(buf, len, "waits for pid %d '%s', which holds %s", (int)r->owner_pid,
			 p->owner_name, size_format(r->bytes, sz, sizeof(sz)));
	else if (r->reason == ROCMMEM_WAIT_EXCLUSIVE)
		snprintf(buf, len,
			 "waits for model %" PRIu64 " '%s'%s of a class it excludes to go",
			 r->model_id, p->model_name, owner);
	else if (r->reason == ROCMMEM_WAIT_QUEUE)
		snprintf(buf, len, "waits for the requests ahead of it");
	else if (r->reason == ROCMMEM_WAIT_BUDGET)
		snprintf(buf, len, "waits for memory being freed within the budget");
	else
		buf[0] = '\0';
}

/* report_json writes the daemon's report as one JSON line on stderr. */
static void report_json(const struct rocmmem_wait_progress *r)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "event", json_object_new_string("wait_progress"));
	json_object_object_add(o, "device", json_object_new_uint64(r->device));
	json_object_object_add(o, "position", json_object_new_uint64(r->position));
	json_object_object_add(o, "queued", json_object_new_uint64(r->queued));
	json_object_object_add(o, "reason", json_object_new_string(reasons[r->reason]));
	json_object_object_add(o, "needed", json_object_new_uint64(r->needed));
	json_object_object_add(o, "free_bytes", json_object_new_uint64(r->free_bytes));
	json_object_object_add(o, "model_id", json_object_new_uint64(r->model_id));
	json_object_object_add(o, "model_name", json_object_new_string(r->model_name));
	json_object_object_add(o, "owner_pid", json_object_new_int(r->owner_pid));
	json_object_object_add(o, "owner_name", json_object_new_string(r->owner_name));
	json_object_object_add(o, "deadline_ms", json_object_new_int64(r->deadline_ms));
	json_object_object_add(o, "bytes", json_object_new_uint64(r->bytes));
	json_object_object_add(o, "evictions", json_object_new_uint64(r->evictions));
	json_object_object_add(o, "waited_ms", json_object_new_uint64(r->waited_ms));
	json_object_object_add(o, "eviction_ended",
			       r->eviction_ended ? json_object_new_string(ends[r->eviction_ended])
						 : NULL);
	fprintf(stderr, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	fflush(stderr);
	json_object_put(o);
}

/* on_progress keeps the daemon's report of what the request waits for (any thread). */
static void on_progress(rocmmem_client *client, const struct rocmmem_wait_progress *r,
			void *userdata)
{
	struct ctl_progress *p = userdata;

	(void)client;
	pthread_mutex_lock(&p->lock);
	p->report = *r;
	snprintf(p->model_name, sizeof(p->model_name), "%s", r->model_name);
	snprintf(p->owner_name, sizeof(p->owner_name), "%s", r->owner_name);
	p->report.model_name = p->report.owner_name = NULL; /* the copies above */
	p->report_ms = ctl_monotonic_ms();
	p->has_report = (unsigned)r->reason < sizeof(reasons) / sizeof(reasons[0]);
	if (p->json && p->has_report)
		report_json(r);
	pthread_mutex_unlock(&p->lock);
}

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
static void describe(const struct ctl_progress *p, const struct place *pl, const char *why,
		     char *buf, size_t len)
{
	char asked[SIZE_FORMAT_MAX], free_text[SIZE_FORMAT_MAX], budget[SIZE_FORMAT_MAX], t[32];

	snprintf(buf, len,
		 "rocmmemctl: lease: waiting for %s on device %u: position %zu of %zu in the "
		 "queue, %s so far; %s free of %s%s%s",
		 size_format(p->bytes, asked, sizeof(asked)), p->device, pl->position, pl->count,
		 ctl_duration(pl->waited_ms / 1000, t, sizeof(t)),
		 size_format(pl->free_bytes, free_text, sizeof(free_text)),
		 size_format(pl->budget_bytes, budget, sizeof(budget)), why[0] ? "; " : "", why);
}

/* say writes the line: in place on a terminal (cut to its width), else when it is news. */
static void say(struct ctl_progress *p, const struct place *pl)
{
	char line[768], why[256];
	struct winsize ws;
	bool news;

	pthread_mutex_lock(&p->lock);
	waits_for(p, why, sizeof(why));
	pthread_mutex_unlock(&p->lock);
	/* The deadline counts down: news is what it waits for, not the seconds left. */
	news = strncmp(why, p->said_why, strcspn(why, ",")) != 0 ||
	       strlen(p->said_why) < strcspn(why, ",");
	describe(p, pl, why, line, sizeof(line));
	if (p->tty) {
		size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1
				   ? ws.ws_col - 1u
				   : 79u;

		/* A line longer than the terminal would wrap, and \r would not return to it. */
		fprintf(stderr, "\r%.*s\033[K", (int)(strlen(line) < width ? strlen(line) : width),
			line);
		p->open = true;
	} else if (pl->position != p->position || pl->count != p->count || news ||
		   ctl_monotonic_ms() - p->said_ms >= PROGRESS_PIPE_REPEAT_MS) {
		fprintf(stderr, "%s\n", line);
		p->said_ms = ctl_monotonic_ms();
	} else {
		return;
	}
	fflush(stderr);
	p->position = pl->position;
	p->count = pl->count;
	snprintf(p->said_why, sizeof(p->said_why), "%s", why);
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
		if (pl.position && !p->json)
			say(p, &pl);
	}
	return NULL;
}

int ctl_progress_start(rocmmem_client *client, unsigned device, uint64_t bytes, bool json,
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
	p->json = json;
	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (p->stop_fd < 0) {
		err = -errno;
		free(p);
		return err;
	}
	pthread_mutex_init(&p->lock, NULL);
	/* The daemon says what the request waits for (a daemon before 1.1 does not). */
	rocmmem_set_progress_callback(client, on_progress, p);
	/* Signals are the main thread's: Ctrl-C while waiting ends the process as before. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = -pthread_create(&p->thread, NULL, watch_queue, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		rocmmem_set_progress_callback(client, NULL, NULL);
		pthread_mutex_destroy(&p->lock);
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
	/* Reports that came just before the answer (an eviction's end) are told first. */
	rocmmem_dispatch(p->client);
	rocmmem_set_progress_callback(p->client, NULL, NULL);
	if (p->open)
		fputs("\r\033[K", stderr);
	if (p->shown && granted)
		fprintf(stderr, "rocmmemctl: lease: granted after waiting %.1f s\n",
			(double)waited_ms / 1000.0);
	fflush(stderr);
	close(p->stop_fd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
