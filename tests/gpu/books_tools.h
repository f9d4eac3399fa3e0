/* SPDX-License-Identifier: MIT */
/* books_tools.h: test_books' outside tools: rocmmemctl (status --json, watch), the daemon's log,
 * promtool. Each fails the running cmocka test when the tool does not do its part. */
#ifndef ROCMMEM_TEST_BOOKS_TOOLS_H
#define ROCMMEM_TEST_BOOKS_TOOLS_H

#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "harness.h"

/* A rocmmemctl --json watch running beside the test, and what it printed so far. */
struct watch_proc {
	pid_t pid;
	int fd;
	size_t used;
	char buf[1 << 20];
};

/* ctl_path is the rocmmemctl to run: $ROCMMEMCTL (a copied build), else the one built. */
const char *ctl_path(void);

void watch_start(struct watch_proc *w, const struct daemon_proc *d);
unsigned watch_count(const struct watch_proc *w, const char *want);
void watch_until(struct watch_proc *w, const char *want);
void watch_stop(struct watch_proc *w);

/* ctl_status_json returns the ComfyUI client's object of rocmmemctl --json status (put it). */
json_object *ctl_status_json(const struct daemon_proc *d);
uint64_t json_u64(json_object *o, const char *key);

/* log_count counts the daemon's log lines that contain text. */
unsigned log_count(const struct daemon_proc *d, const char *text);

/* promtool_ok: Prometheus' own checker accepts text (not run, saying so, where missing). */
void promtool_ok(const char *text);

#endif
