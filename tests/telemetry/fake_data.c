/* SPDX-License-Identifier: MIT */
/* fake_data.c: reading the fake libraries' data files and appending to their call logs. */
#include "fake_data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool fake_get(const char *env, const char *key, char *value, size_t len)
{
	const char *path = getenv(env);
	char line[4096];
	size_t klen = strlen(key);
	bool found = false;
	FILE *f;

	if (!path || !(f = fopen(path, "r")))
		return false;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			snprintf(value, len, "%s", line + klen + 1);
			found = true; /* the last line wins: tests append overrides */
		}
	}
	fclose(f);
	return found;
}

bool fake_u64(const char *env, const char *key, uint64_t *out)
{
	char value[64], *end;

	if (!fake_get(env, key, value, sizeof(value)))
		return false;
	*out = strtoull(value, &end, 0);
	return end != value;
}

bool fake_s64(const char *env, const char *key, int64_t *out)
{
	char value[64], *end;

	if (!fake_get(env, key, value, sizeof(value)))
		return false;
	*out = strtoll(value, &end, 0);
	return end != value;
}

void fake_log(const char *env, const char *fmt, ...)
{
	const char *path = getenv(env);
	va_list ap;
	FILE *f;

	if (!path || !(f = fopen(path, "a")))
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}
