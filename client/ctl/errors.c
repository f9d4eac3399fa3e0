/* SPDX-License-Identifier: MIT */
/* errors.c: rocmmemctl's failures: a line on stderr, and with --json an object on stdout. */
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "format.h"
#include "json.h"
#include "rocmmem.h"

/* Whether failures are also printed as JSON on stdout (--json anywhere on the line). */
static bool json_errors;

void ctl_errors_json(bool on)
{
	json_errors = on;
}

/* put_json_error prints {"error": {...}} as one line on stdout. */
static void put_json_error(int status, int err, const char *message)
{
	json_object *root = json_object_new_object(), *e = json_object_new_object();
	char name[32];

	ctl_json_str(e, "code", ctl_errno_name(err, name, sizeof(name)));
	ctl_json_i64(e, "errno", -(int64_t)err);
	ctl_json_str(e, "message", message);
	ctl_json_i64(e, "exit_status", status);
	json_object_object_add(root, "error", e);
	ctl_json_print(root);
	fflush(stdout);
}

/*
 * report prints the failure on stderr and, in JSON mode, on stdout. A usage error is the
 * command's ("rocmmemctl lease: ..."), a failure what the command met ("rocmmemctl: lease: ...").
 */
__attribute__((format(printf, 5, 0))) static int
report(const struct ctl *ctl, int status, int err, const char *hint, const char *fmt, va_list ap)
{
	char message[2048];

	vsnprintf(message, sizeof(message), fmt, ap);
	if (ctl && ctl->command)
		fprintf(stderr, "rocmmemctl%s%s: %s\n", hint ? " " : ": ", ctl->command->name,
			message);
	else
		fprintf(stderr, "rocmmemctl: %s\n", message);
	if (hint)
		fputs(hint, stderr);
	if (json_errors)
		put_json_error(status, err, message);
	return status;
}

int ctl_error(const struct ctl *ctl, int status, int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = report(ctl, status, err, NULL, fmt, ap);
	va_end(ap);
	return rc;
}

int ctl_usage(const struct ctl *ctl, const char *fmt, ...)
{
	char hint[96];
	va_list ap;
	int rc;

	if (ctl && ctl->command)
		snprintf(hint, sizeof(hint), "Try 'rocmmemctl %s --help'.\n", ctl->command->name);
	else
		snprintf(hint, sizeof(hint), "Try 'rocmmemctl --help'.\n");
	va_start(ap, fmt);
	rc = report(ctl, CTL_EXIT_USAGE, -EINVAL, hint, fmt, ap);
	va_end(ap);
	return rc;
}

const char *ctl_why(int err)
{
	return rocmmem_last_error()[0] ? rocmmem_last_error() : rocmmem_strerror(err);
}

int ctl_fail(const struct ctl *ctl, const char *what, int err)
{
	/* The daemon going away (or already stopping, or restarting) is unreachable, not a
	 * refusal. */
	int status = err == -ECONNRESET || err == -EPIPE || err == -ECONNREFUSED ||
			     err == -ESHUTDOWN || err == -ENOTCONN
			 ? CTL_EXIT_UNREACHABLE
			 : CTL_EXIT_REFUSED;

	(void)ctl;
	return ctl_error(NULL, status, err, "%s: %s", what, ctl_why(err));
}
