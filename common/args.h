/* SPDX-License-Identifier: MIT */
/* args.h: naming the offending option in getopt_long error messages. */
#ifndef ROCMMEM_COMMON_ARGS_H
#define ROCMMEM_COMMON_ARGS_H

#include <stddef.h>

/*
 * args_bad_option names the option getopt_long just rejected (after it returned '?' or ':'):
 * "-x" for a short option, even inside a group like "-jx", else the long option as written.
 * Writes into buf and returns it.
 */
const char *args_bad_option(char *const *argv, char *buf, size_t len);

#endif
