/* SPDX-License-Identifier: MIT */
/* size_dump.c: common/size.c's size_parse over hex-encoded lines, for test_sizes.py to compare. */
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"

/* hex_value returns the value of one hex digit, or -1. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * main takes the locale from the environment (as rocmmemd and rocmmemctl could), prints its
 * decimal point, then for each stdin line (the text's bytes in lower-case hex; no NUL, which a
 * C string cannot hold) prints "ok BYTES", "EINVAL" or "ERANGE". Exit 2 on a malformed line.
 */
int main(void)
{
	static char line[1 << 21], text[1 << 20];
	const char *locale = setlocale(LC_ALL, "");

	printf("locale %s decimal_point %s\n", locale ? locale : "(none)",
	       localeconv()->decimal_point);
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strcspn(line, "\n"), i;
		uint64_t v = 0;
		int rc;

		if (n % 2 || n / 2 >= sizeof(text))
			return 2;
		for (i = 0; i < n / 2; i++) {
			int hi = hex_value(line[2 * i]), lo = hex_value(line[2 * i + 1]);
			if (hi < 0 || lo < 0 || (hi | lo) == 0)
				return 2;
			text[i] = (char)(hi << 4 | lo);
		}
		text[i] = '\0';
		rc = size_parse(text, &v);
		if (rc == 0)
			printf("ok %" PRIu64 "\n", v);
		else
			printf("%s\n", rc == -ERANGE   ? "ERANGE"
				       : rc == -EINVAL ? "EINVAL"
						       : "other");
	}
	return ferror(stdin) ? 1 : 0;
}
