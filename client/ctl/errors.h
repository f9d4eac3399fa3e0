/* SPDX-License-Identifier: MIT */
/* errors.h: failures, said on stderr and, with --json, as a JSON object on stdout. */
#ifndef ROCMMEMCTL_ERRORS_H
#define ROCMMEMCTL_ERRORS_H

#include <stdbool.h>

#include "ctl.h"

/* ctl_errors_json makes every later failure print {"error": {...}} on stdout as well. */
void ctl_errors_json(bool on);

/*
 * ctl_error reports a failure with exit status `status`: "rocmmemctl: [CMD: ]MESSAGE" on
 * stderr (ctl NULL: without the command), plus {"error":{"code","errno","message","exit_status"}}
 * on stdout in JSON mode. err is the negative errno it stands for. Returns status.
 */
int ctl_error(const struct ctl *ctl, int status, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ctl_usage reports a usage error of the current command and returns CTL_EXIT_USAGE. */
int ctl_usage(const struct ctl *ctl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ctl_fail reports a failed request ("what: why") and returns the exit status it deserves. */
int ctl_fail(const struct ctl *ctl, const char *what, int err);

/* ctl_why is what to say of a failed request: the daemon's own words when it gave some, else
 * the error's text. */
const char *ctl_why(int err);

#endif
