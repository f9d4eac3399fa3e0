/* SPDX-License-Identifier: MIT */
/* options.h: rocmmemd's command line. */
#ifndef ROCMMEMD_OPTIONS_H
#define ROCMMEMD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "log.h"
#include "model.h"

struct options {
	const char *socket_path; /* NULL: resolved by common/sockpath */
	const char *backend;	 /* "auto" or a backend name */
	const char *sharing;	 /* "auto", "vmm", "dmabuf" or "ipc" */
	uint64_t budget;
	bool has_budget;
	uint64_t headroom;
	bool has_headroom;
	enum log_level log_level;
	uint64_t evict_deadline_ms;			       /* --evict-deadline */
	struct class_exclusion exclusive[BACKEND_MAX_DEVICES]; /* --exclusive N:... */
	struct class_exclusion exclusive_all;		       /* --exclusive without a device */
	const char *metrics_textfile;			       /* --metrics-textfile, or NULL */
	uint64_t metrics_interval_ms;			       /* --metrics-interval */
};

/* How long an owner has to unload a model the daemon asked it to evict, by default. */
#define OPTIONS_EVICT_DEADLINE_MS 20000

/* Exit statuses of rocmmemd. */
#define ROCMMEMD_EXIT_OK 0
#define ROCMMEMD_EXIT_FAILURE 1 /* could not start or run: socket busy, backend failed */
#define ROCMMEMD_EXIT_USAGE 2	/* bad command line or configuration: restarting won't help */

/*
 * options_parse fills opts from argv. Returns 0 to run, 1 when --help or --version was printed
 * to out (exit 0), or -EINVAL after printing a usage error to err (exit ROCMMEMD_EXIT_USAGE).
 */
int options_parse(int argc, char **argv, struct options *opts, FILE *out, FILE *err);

#endif
