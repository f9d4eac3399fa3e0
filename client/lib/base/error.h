/* SPDX-License-Identifier: MIT */
/* error.h: the calling thread's message of its last failure, as rocmmem_last_error gives it. */
#ifndef ROCMMEM_LIB_ERROR_H
#define ROCMMEM_LIB_ERROR_H

#include "rocmmem.pb-c.h"

/* error_set records this thread's message for rocmmem_last_error and returns err. */
int error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* error_from_reply records the daemon's message of an error reply and returns its errno. */
int error_from_reply(const Rocmmem__Wire__Reply *reply);

#endif
