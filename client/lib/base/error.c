/* SPDX-License-Identifier: MIT */
/* error.c: error texts: rocmmem_strerror and the per-thread message of the last failure. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "rocmmem.h"

/* Per thread, like errno: no global buffer that threads would overwrite for each other. */
static _Thread_local char last_message[1024];

int error_set(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	return err;
}

int error_from_reply(const Rocmmem__Wire__Reply *reply)
{
	int err = reply->has_error ? reply->error : 0;

	if (err >= 0 || err < -4095)
		err = -EPROTO; /* an error reply must carry a negative errno */
	return error_set(err, "%s", reply->message ? reply->message : rocmmem_strerror(err));
}

ROCMMEM_EXPORT const char *rocmmem_last_error(void)
{
	return last_message;
}

ROCMMEM_EXPORT const char *rocmmem_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -ENOMEM:
		return "not enough memory free within the budget";
	case -E2BIG:
		return "larger than the device's whole budget";
	case -ETIMEDOUT:
		return "timed out";
	case -ENOENT:
		return "no such daemon, lease or model";
	case -ECONNREFUSED:
		return "the daemon is not running";
	case -ECONNRESET:
		return "the connection to the daemon ended";
	case -ENOTCONN:
		return "the daemon went away: reconnecting";
	case -ESTALE:
		return "the restarted daemon has no record of it";
	case -EPROTONOSUPPORT:
		return "the daemon speaks another protocol version";
	case -EPROTO:
		return "protocol error";
	case -EDQUOT:
		return "a quota of this client was reached";
	case -EBUSY:
		return "too many requests pending";
	case -EPERM:
		return "not permitted: it belongs to another client";
	case -EACCES:
		return "permission denied on the daemon's socket";
	case -ENODEV:
		return "no such device";
	case -EOPNOTSUPP:
		return "not supported by this daemon";
	case -EUSERS:
		return "the daemon serves too many clients";
	case -EDEADLK:
		return "it would wait forever: release this client's own models first";
	case -ECANCELED:
		return "cancelled: the model was unregistered";
	case -EINVAL:
		return "invalid argument";
	default:
		if (err < 0 && err > -4096)
			return strerror(-err);
		return "unknown error";
	}
}
