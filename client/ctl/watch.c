/* SPDX-License-Identifier: MIT */
/* watch.c: `rocmmemctl watch`: the daemon's telemetry, live on a terminal or as JSON lines. */
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common.h"
#include "errors.h"
#include "format.h"
#include "json.h"
#include "size.h"
#include "watch.h"

/* Events kept for the view, and how many a frame shows when stdout is not a terminal. */
#define WATCH_EVENTS 64
#define WATCH_EVENTS_PLAIN 8
#define WATCH_EVENT_LEN 320
/* Events arriving between samples redraw the terminal at most this often. */
#define WATCH_REDRAW_MS 100
#define WATCH_DEFAULT_INTERVAL_MS 1000

/* Terminal control (ECMA-48): home, clear to end of line / of screen, cursor off / on. */
#define TERM_HOME "\033[H"
#define TERM_CLEAR_SCREEN "\033[2J"
#define TERM_CLEAR_LINE "\033[K"
#define TERM_CLEAR_BELOW "\033[J"
#define TERM_HIDE_CURSOR "\033[?25l"
#define TERM_SHOW_CURSOR "\033[?25h"

struct watch {
	bool json;
	bool tty;
	long device;	  /* --device, or -1 for all */
	uint64_t count;	  /* -n: samples to show, 0: no limit */
	uint64_t samples; /* shown so far */
	bool lost;	  /* the connection ended */
	char why[256];
	bool output_failed;
	unsigned cols, rows; /* the terminal's size */
	char fallback[1536]; /* the host-memory warning that heads the view, or "" */
	char *frame;	     /* the last sample's view, without the events */
	size_t frame_len;
	bool dirty; /* events arrived since the last draw */
	int64_t drawn_ms;
	char events[WATCH_EVENTS][WATCH_EVENT_LEN]; /* a ring of formatted event lines */
	unsigned nevents, next_event;
};

static bool shows_device(const struct watch *w, uint32_t device)
{
	return w->device < 0 || (unsigned long)w->device == device;
}

/* put_json prints one object as one line, flushed at once: a reader sees each as it comes. */
static void put_json(struct watch *w, json_object *o)
{
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
								 JSON_C_TO_STRING_NOSLASHESCAPE);

	if (puts(text) < 0 || fflush(stdout) != 0)
		w->output_failed = true;
	json_object_put(o);
}

/* ----------------------------------------------------------------------------------------- */
/* The text view */

/* bar draws used/budget as "[#####.....]" of width cells. */
static void print_bar(FILE *f, uint64_t used, uint64_t budget, unsigned width)
{
	unsigned full = budget ? (unsigned)((double)used / (double)budget * width + 0.5) : 0;

	if (full > width)
		full = width;
	fputc('[', f);
	for (unsigned i = 0; i < width; i++)
		fputc(i < full ? '#' : '.', f);
	fputc(']', f);
}

static void print_device(const struct watch *w, FILE *f, const struct rocmmem_device_info *v)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX], d[SIZE_FORMAT_MAX];
	char t[32];
	uint64_t used = v->budget_bytes > v->free_bytes ? v->budget_bytes - v->free_bytes : 0;
	/* The bar takes what the terminal has beyond the figures beside it. */
	unsigned bar = !w->tty ? 20 : w->cols < 60 ? 10 : w->cols > 100 ? 50 : w->cols - 50;

	fprintf(f, "DEVICE %u  %s  (%s%s%s)%s%s\n", v->index, v->name, v->backend,
		v->sharing[0] ? ", " : "", v->sharing, strcmp(v->state, "ok") ? "  UNUSABLE: " : "",
		strcmp(v->state, "ok") ? v->state : "");
	fprintf(f, "  used     ");
	print_bar(f, used, v->budget_bytes, bar);
	fprintf(f, " %s of %s budget (%.0f%%)\n", size_format(used, a, sizeof(a)),
		size_format(v->budget_bytes, b, sizeof(b)),
		v->budget_bytes ? (double)used * 100.0 / (double)v->budget_bytes : 0.0);
	fprintf(f, "  leased   %s in %llu lease(s), reserved %s, free %s\n",
		size_format(v->leased_bytes, a, sizeof(a)), (unsigned long long)v->leases,
		size_format(v->reserved_bytes, b, sizeof(b)),
		size_format(v->free_bytes, c, sizeof(c)));
	fprintf(f, "  largest  %s now, %s with eviction\n",
		size_format(v->largest_grantable, a, sizeof(a)),
		size_format(v->largest_with_eviction, b, sizeof(b)));
	fprintf(f, "  models   %u resident, %s evictable\n", v->models_resident,
		size_format(v->evictable_bytes, c, sizeof(c)));
	if (v->waiters)
		fprintf(f, "  queue    %u waiting, the oldest for %s\n", v->waiters,
			ctl_ms_text(v->oldest_wait_ms, t, sizeof(t)));
	else
		fprintf(f, "  queue    nobody waiting\n");
	if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME)
		fprintf(f, "  runtime  %s free of %s, %s used outside rocmmemd\n",
			size_format(v->runtime_free_bytes, a, sizeof(a)),
			size_format(v->runtime_total_bytes, b, sizeof(b)),
			size_format(v->external_bytes, c, sizeof(c)));
	else
		fprintf(f, "  runtime  -\n");
	fprintf(f, "  sensors ");
	if (v->valid & ROCMMEM_DEVICE_HAS_VRAM)
		fprintf(f, " vram %s of %s,", size_format(v->vram_used_bytes, a, sizeof(a)),
			size_format(v->vram_total_bytes, d, sizeof(d)));
	if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
		fprintf(f, " %.1f C,", v->temperature_mc / 1000.0);
	else
		fprintf(f, " temperature -,");
	if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
		fprintf(f, " %.1f W,", v->power_mw / 1000.0);
	else
		fprintf(f, " power -,");
	if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
		fprintf(f, " busy %u%%", v->busy_percent);
	else
		fprintf(f, " busy -");
	fprintf(f, "%s%s\n", v->telemetry_source[0] ? "  from " : "", v->telemetry_source);
}

/* name_width: the name columns fill what a terminal has beyond the figures (53 columns). */
static int name_width(const struct watch *w)
{
	if (!w->tty || w->cols >= 53 + 24)
		return 24;
	return w->cols > 53 + 8 ? (int)w->cols - 53 : 8;
}

static void print_clients(const struct watch *w, FILE *f, const rocmmem_status *st,
			  const struct rocmmem_sample_info *info)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], m[SIZE_FORMAT_MAX], u[SIZE_FORMAT_MAX];
	int width = name_width(w);

	fprintf(f, "%-8s %-*s %6s %10s %10s %6s %7s %10s %10s\n", "PID", width, "CLIENT", "LEASES",
		"LEASED", "RESERVED", "MODELS", "WAITING", "MEASURED", "UNDECLARED");
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);

		if (ctl_is_self(v))
			continue;
		/* Nothing measured on host memory: a dash, as status says "cannot measure". */
		if (v->measurable) {
			size_format(v->measured_bytes, m, sizeof(m));
			size_format(v->undeclared_bytes, u, sizeof(u));
		} else {
			snprintf(m, sizeof(m), "-");
			snprintf(u, sizeof(u), "-");
		}
		/* A name longer than its column pushes the row (the terminal cuts the end). */
		fprintf(f, "%-8d %-*s %6u %10s %10s %6u %7u %10s %10s\n", (int)v->pid, width,
			v->name[0] ? v->name : "-", v->leases,
			size_format(v->leased_bytes, a, sizeof(a)),
			size_format(v->reserved_bytes, b, sizeof(b)), v->models, v->waiting, m, u);
	}
	if (info->clients_omitted)
		fprintf(f, "... and %u smaller client(s)\n", info->clients_omitted);
}

static void print_models(const struct watch *w, FILE *f, const rocmmem_status *st,
			 const struct rocmmem_sample_info *info)
{
	char a[SIZE_FORMAT_MAX];
	int width = name_width(w);
	bool header = false;

	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (!shows_device(w, v->device))
			continue;
		if (!header) {
			fprintf(f, "\n%-8s %-*s %-8s %-6s %-9s %10s %s\n", "ID", width, "MODEL",
				"PID", "DEVICE", "STATE", "RESIDENT", "PINNED");
			header = true;
		}
		fprintf(f, "%-8llu %-*s %-8d %-6u %-9s %10s %s\n", (unsigned long long)v->id, width,
			v->name, (int)v->owner_pid, v->device,
			v->state == ROCMMEM_MODEL_IN_USE ? "in use"
							 : ctl_model_state_name(v->state),
			size_format(v->bytes, a, sizeof(a)), v->pinned ? "yes" : "no");
	}
	if (info->models_omitted)
		fprintf(f, "... and %u smaller model(s)\n", info->models_omitted);
}

/* others counts the clients but this watch's own connection. */
static size_t others(const rocmmem_status *st)
{
	size_t n = 0;

	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		n += !ctl_is_self(rocmmem_status_client(st, i));
	return n;
}

/* render_frame writes a sample's view (all but the events) into w->frame. */
static void render_frame(struct watch *w, const rocmmem_status *st,
			 const struct rocmmem_sample_info *info)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	const struct rocmmem_counters *k = rocmmem_status_counters(st);
	char a[SIZE_FORMAT_MAX], up[32], when[32], every[32];
	FILE *f;

	free(w->frame);
	w->frame = NULL;
	w->frame_len = 0;
	f = open_memstream(&w->frame, &w->frame_len);
	if (!f) {
		w->output_failed = true;
		return;
	}
	/* Short lines, the most telling first: a narrow terminal cuts their ends. */
	if (w->fallback[0])
		fprintf(f, "%s\n", w->fallback);
	fprintf(f, "rocmmemd %s, backend %s, pid %d, up %s\n", d->version, d->backend, (int)d->pid,
		ctl_duration(d->uptime_s, up, sizeof(up)));
	fprintf(f, "%s, %zu client(s), a sample every %s",
		ctl_clock_text(info->timestamp_ms, false, when, sizeof(when)),
		others(st) + info->clients_omitted,
		ctl_ms_text(info->interval_ms, every, sizeof(every)));
	if (info->dropped)
		fprintf(f, " (%u skipped)", info->dropped);
	fprintf(f, "\ngrants %llu, denials %llu, timeouts %llu, evictions %llu, revocations %llu\n",
		(unsigned long long)k->grants, (unsigned long long)k->denials,
		(unsigned long long)k->timeouts, (unsigned long long)k->evictions,
		(unsigned long long)k->revocations);
	fprintf(f, "trims %llu (%s), releases %llu, reclaimed %llu, failures %llu\n",
		(unsigned long long)k->trims, size_format(k->bytes_trimmed, a, sizeof(a)),
		(unsigned long long)k->releases, (unsigned long long)k->reclaimed,
		(unsigned long long)k->failures);
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *v = rocmmem_status_device(st, i);

		if (shows_device(w, v->index)) {
			fprintf(f, "\n");
			print_device(w, f, v);
		}
	}
	fprintf(f, "\n");
	print_clients(w, f, st, info);
	print_models(w, f, st, info);
	if (fclose(f) != 0)
		w->output_failed = true;
}

/* remember_event adds an event's line to the ring the view shows. */
static void remember_event(struct watch *w, const struct rocmmem_telemetry_event *e)
{
	char when[32], what[WATCH_EVENT_LEN - 96], lost[48] = "";

	if (e->detail[0])
		snprintf(what, sizeof(what), "%s", e->detail);
	else if (e->pid)
		snprintf(what, sizeof(what), "pid %d '%s'", (int)e->pid, e->client_name);
	else
		what[0] = '\0';
	if (e->dropped)
		snprintf(lost, sizeof(lost), " (after %u event(s) lost)", e->dropped);
	snprintf(w->events[w->next_event], WATCH_EVENT_LEN, "%s  %-19s %s%s",
		 ctl_clock_text(e->timestamp_ms, true, when, sizeof(when)),
		 rocmmem_telemetry_name(e->type), what, lost);
	w->next_event = (w->next_event + 1) % WATCH_EVENTS;
	if (w->nevents < WATCH_EVENTS)
		w->nevents++;
}

/* event_line returns the i-th of the last n events, oldest first. */
static const char *event_line(const struct watch *w, unsigned n, unsigned i)
{
	return w->events[(w->next_event + WATCH_EVENTS - n + i) % WATCH_EVENTS];
}

/*
 * put_line writes one line for the terminal: cut to the width (counting UTF-8 characters,
 * never splitting one), then cleared to the end of the line.
 */
static void put_line(FILE *out, const char *line, size_t len, unsigned cols)
{
	size_t i = 0, chars = 0;

	for (; i < len; i++) {
		if (((unsigned char)line[i] & 0xc0) != 0x80 && chars++ == cols)
			break;
	}
	fwrite(line, 1, i, out);
	fputs(TERM_CLEAR_LINE "\n", out);
}

/* draw_terminal redraws the whole view in place, never taller than the terminal. */
static void draw_terminal(struct watch *w)
{
	unsigned rows = w->rows > 1 ? w->rows - 1 : 1, used = 0, n;
	const char *p = w->frame ? w->frame : "", *end = p + w->frame_len;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out) {
		w->output_failed = true;
		return;
	}
	fputs(TERM_HOME, out);
	while (p < end && used < rows) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n_line = nl ? (size_t)(nl - p) : (size_t)(end - p);

		put_line(out, p, n_line, w->cols);
		used++;
		p += n_line + (nl ? 1 : 0);
	}
	if (used + 2 < rows) {
		put_line(out, "", 0, w->cols);
		put_line(out, "EVENTS", 6, w->cols);
		used += 2;
		n = rows - used < w->nevents ? rows - used : w->nevents;
		for (unsigned i = 0; i < n; i++) {
			const char *line = event_line(w, n, i);

			put_line(out, line, strlen(line), w->cols);
		}
	}
	fputs(TERM_CLEAR_BELOW, out);
	if (fclose(out) != 0 || fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0)
		w->output_failed = true;
	free(buf);
	w->dirty = false;
	w->drawn_ms = ctl_monotonic_ms();
}

/* print_plain prints the view as plain text, followed by a blank line. */
static void print_plain(struct watch *w)
{
	unsigned n = w->nevents < WATCH_EVENTS_PLAIN ? w->nevents : WATCH_EVENTS_PLAIN;

	fwrite(w->frame ? w->frame : "", 1, w->frame_len, stdout);
	printf("\nEVENTS\n");
	for (unsigned i = 0; i < n; i++)
		printf("%s\n", event_line(w, n, i));
	printf("\n");
	if (fflush(stdout) != 0)
		w->output_failed = true;
}

static void terminal_size(struct watch *w)
{
	struct winsize ws;

	w->cols = 80;
	w->rows = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
		w->cols = ws.ws_col;
		w->rows = ws.ws_row;
	}
}

/* ----------------------------------------------------------------------------------------- */
/* Watching */

static void on_event(rocmmem_client *client, const struct rocmmem_event *ev, void *userdata)
{
	struct watch *w = userdata;

	(void)client;
	if (w->lost || w->output_failed || (w->count && w->samples >= w->count))
		return; /* done: what follows is not shown */
	switch (ev->type) {
	case ROCMMEM_EVENT_SAMPLE:
		w->samples++;
		if (w->json) {
			put_json(w, ctl_sample_json(ev->sample, ev->sample_info, w->device));
			break;
		}
		render_frame(w, ev->sample, ev->sample_info);
		if (w->tty)
			draw_terminal(w);
		else
			print_plain(w);
		break;
	case ROCMMEM_EVENT_TELEMETRY:
		if (ev->telemetry->has_device && !shows_device(w, ev->telemetry->device))
			break;
		if (w->json) {
			put_json(w, ctl_event_json(ev->telemetry));
			break;
		}
		remember_event(w, ev->telemetry);
		w->dirty = true;
		break;
	case ROCMMEM_EVENT_SHUTDOWN:
	case ROCMMEM_EVENT_DISCONNECTED:
		w->lost = true;
		snprintf(w->why, sizeof(w->why), "%s",
			 ev->reason[0] ? ev->reason : "the connection ended");
		break;
	default:
		break;
	}
}

/* block_signals routes the signals that end or resize the view to an fd. Returns it or -1. */
static int block_signals(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGWINCH);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -1;
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* read_signals returns true when a signal asks to stop; a resize only redraws. */
static bool read_signals(struct watch *w, int sigfd)
{
	struct signalfd_siginfo si;
	bool stop = false;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGWINCH) {
			if (w->tty) {
				terminal_size(w);
				w->dirty = true;
			}
		} else {
			stop = true;
		}
	}
	return stop;
}

/* run loops until -n samples were shown, a signal stops it or the daemon goes away. */
static int run(const struct ctl *ctl, struct watch *w, rocmmem_client *client, int sigfd)
{
	for (;;) {
		struct pollfd fds[2] = {
		    {.fd = sigfd, .events = POLLIN},
		    {.fd = rocmmem_event_fd(client), .events = POLLIN},
		};
		int timeout = -1;

		if (w->output_failed)
			return CTL_EXIT_USAGE;
		if (w->lost)
			return ctl_error(ctl, CTL_EXIT_UNREACHABLE, -ECONNRESET,
					 "lost the daemon: %s", w->why);
		if (w->count && w->samples >= w->count)
			return CTL_EXIT_OK;
		if (w->dirty && w->tty && w->frame) {
			int64_t left = w->drawn_ms + WATCH_REDRAW_MS - ctl_monotonic_ms();

			if (left <= 0) {
				draw_terminal(w);
				continue;
			}
			timeout = (int)left;
		}
		if (poll(fds, 2, timeout) < 0 && errno != EINTR)
			return ctl_error(ctl, CTL_EXIT_USAGE, -errno, "poll: %s", strerror(errno));
		if ((fds[0].revents & POLLIN) && read_signals(w, sigfd))
			return CTL_EXIT_OK;
		if (fds[1].revents && rocmmem_dispatch(client) < 0 && !w->lost) {
			w->lost = true;
			snprintf(w->why, sizeof(w->why), "%s", rocmmem_last_error());
		}
	}
}

/* parse_watch reads watch's options into w and *interval_ms. Returns 0 or the exit status. */
static int parse_watch(struct ctl *ctl, int argc, char **argv, struct watch *w,
		       uint32_t *interval_ms)
{
	int c;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0) {
		if (c == 'i' && ctl_parse_interval(ctl->optarg, interval_ms) < 0)
			return ctl_usage(ctl, "invalid -i '%s' (seconds, from 0.01 to 60)",
					 ctl->optarg);
		if (c == 'n' && ctl_parse_count(ctl->optarg, &w->count) < 0)
			return ctl_usage(ctl, "invalid -n '%s' (a count of samples, 1 or more)",
					 ctl->optarg);
		if (c == 'd' && ctl_parse_device(ctl->optarg, &w->device) < 0)
			return ctl_usage(ctl, "invalid --device '%s'", ctl->optarg);
	}
	if (c < 0)
		return CTL_DONE;
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	return CTL_EXIT_OK;
}

/*
 * start checks the device and learns from one status whether the daemon serves host memory
 * in place of a GPU's (a sample does not say), then subscribes. Returns 0 or the exit status.
 */
static int start(struct ctl *ctl, struct watch *w, rocmmem_client *client, uint32_t interval_ms)
{
	rocmmem_status *st;
	int err;

	if (w->device >= 0 && (unsigned long)w->device >= rocmmem_client_device_count(client))
		return ctl_error(ctl, CTL_EXIT_REFUSED, -ENODEV,
				 "no device %ld: the daemon manages %u device(s), numbered from 0",
				 w->device, rocmmem_client_device_count(client));
	if (!w->json && rocmmem_status_get(client, &st) == 0) {
		ctl_host_fallback_line(rocmmem_status_daemon(st), false, w->fallback,
				       sizeof(w->fallback));
		rocmmem_status_free(st);
	}
	rocmmem_set_event_callback(client, on_event, w);
	err = rocmmem_subscribe(client, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS,
				interval_ms, NULL);
	return err < 0 ? ctl_fail(ctl, "watch", err) : CTL_EXIT_OK;
}

static int cmd_watch(struct ctl *ctl, int argc, char **argv)
{
	uint32_t interval_ms = WATCH_DEFAULT_INTERVAL_MS;
	struct watch *w = calloc(1, sizeof(*w));
	rocmmem_client *client = NULL;
	int rc, sigfd = -1;

	if (!w)
		return ctl_error(ctl, CTL_EXIT_USAGE, -ENOMEM, "out of memory");
	w->device = -1;
	rc = parse_watch(ctl, argc, argv, w, &interval_ms);
	if (rc) {
		free(w);
		return rc == CTL_DONE ? ctl->exit : rc;
	}
	rc = ctl_connect(ctl, &client);
	if (rc == 0) {
		w->json = ctl->json;
		w->tty = !ctl->json && isatty(STDOUT_FILENO);
		sigfd = block_signals();
		if (sigfd < 0)
			rc =
			    ctl_error(ctl, CTL_EXIT_USAGE, -errno, "signalfd: %s", strerror(errno));
	}
	if (rc == 0)
		rc = start(ctl, w, client, interval_ms);
	if (rc == 0) {
		if (w->tty) {
			terminal_size(w);
			fputs(TERM_HIDE_CURSOR TERM_HOME TERM_CLEAR_SCREEN, stdout);
			fflush(stdout);
		}
		rc = run(ctl, w, client, sigfd);
		if (w->tty) {
			fputs(TERM_SHOW_CURSOR, stdout);
			fflush(stdout);
		}
	}
	if (client)
		rocmmem_disconnect(client);
	if (sigfd >= 0)
		close(sigfd);
	free(w->frame);
	free(w);
	return rc;
}

static const struct ctl_option watch_options[] = {
    {"interval", 'i', "SECONDS", "a sample every SECONDS (default 1, 0.01 to 60)"},
    {"count", 'n', "COUNT", "stop after COUNT samples (default: at Ctrl-C)"},
    {"device", 'd', "N", "only device N"},
    {NULL, 0, NULL, NULL},
};

const struct ctl_command ctl_watch_command = {
    .name = "watch",
    .run = cmd_watch,
    .args = "",
    .summary = "live view of devices, clients, models and events",
    .details = "On a terminal the view is redrawn in place; piped, each sample is printed in\n"
	       "turn; with --json, one object per line (a sample, or an event as it happens).\n",
    .options = watch_options,
};
