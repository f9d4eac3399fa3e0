/* SPDX-License-Identifier: MIT */
/* metrics_file.h: the metrics rewritten into a file every interval for node_exporter. */
#ifndef ROCMMEMD_METRICS_FILE_H
#define ROCMMEMD_METRICS_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct server;
struct metrics_write;

/* --metrics-interval: its default and range, in milliseconds. */
#define METRICS_INTERVAL_DEFAULT_MS 15000u
#define METRICS_INTERVAL_MIN_MS 1000u
#define METRICS_INTERVAL_MAX_MS 3600000u

/*
 * The metrics rewritten into a file every interval for node_exporter's textfile collector:
 * written to a temporary file in the same directory, then renamed over the file, so that a
 * reader sees the old text or the new one, never part of one.
 */
struct metrics_file {
	struct server *server;
	uv_loop_t *loop;
	uv_timer_t timer;
	uint64_t interval_ms;
	char path[PATH_MAX];
	const char *base; /* the file's name in its directory (inside path) */
	bool running;
	bool remove_pending;	     /* stopped while a write was in flight: remove after it */
	struct metrics_write *write; /* in flight, or NULL: one at a time */
	int last_err;		     /* of the last write: 0, or the negative errno logged */
	const char *last_step;	     /* what failed last time (logged once per distinct error) */
	uint64_t writes, skipped;    /* writes done; ticks skipped while one was in flight */
};

/*
 * metrics_file_open checks that path can be written: a name ending in ".prom" in an existing
 * directory where the daemon may create files, and not a directory itself. Each rewrite opens
 * the directory (which may have been replaced meanwhile) and works relative to it: a new
 * temporary file there (never an existing one, never through a link), renamed over the name.
 * Nothing is left behind. Returns 0, or a negative errno with the reason in why: -EISDIR and
 * -ENAMETOOLONG for a path that can never be written; after any other error mf is set up all
 * the same, so that metrics_file_start keeps trying (a directory created or made writable
 * later).
 */
int metrics_file_open(struct metrics_file *mf, const char *path, uint64_t interval_ms, char *why,
		      size_t why_len);

/*
 * metrics_file_start writes the file at once and then every interval, the file I/O on a
 * libuv worker thread. Returns 0 or a negative errno.
 */
int metrics_file_start(struct metrics_file *mf, struct server *s, uv_loop_t *loop);

/*
 * metrics_file_stop stops the rewrites and removes the file (once a write in flight is done),
 * so that node_exporter does not go on serving values of a daemon that has stopped. Later
 * calls do nothing.
 */
void metrics_file_stop(struct metrics_file *mf);

#endif
