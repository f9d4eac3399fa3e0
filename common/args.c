/* SPDX-License-Identifier: MIT */
/* args.c: naming the option getopt_long rejected, for usage errors. */
#include "args.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

const char *args_bad_option(char *const *argv, char *buf, size_t len)
{
	/* Inside a group getopt has not advanced optind; for long options optopt is 0 or
	 * the option's value, and argv[optind - 1] is the option as the user wrote it. */
	const char *last = optind > 0 ? argv[optind - 1] : "";

	if (optopt > 0 && optopt < 128 && strncmp(last, "--", 2) != 0)
		snprintf(buf, len, "-%c", optopt);
	else
		snprintf(buf, len, "%s", last);
	return buf;
}
