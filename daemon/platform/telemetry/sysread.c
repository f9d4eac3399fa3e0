/* SPDX-License-Identifier: MIT */
/* sysread.c: defensive readers of small sysfs files: bad content is an error, never a crash. */
#include "source.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int sysread_path(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		if (size)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int sysread_text(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	int fd, err = 0;

	if (size == 0 || !path[0])
		return -EINVAL;
	/* O_NONBLOCK: a FIFO planted in a tree must not hang the worker thread. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (err < 0)
		return err;
	while (len > 0 && isspace((unsigned char)buf[len - 1]))
		len--;
	buf[len] = '\0';
	return (int)len;
}

int sysread_parse_u64(const char *text, uint64_t *out)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*text))
		return -EINVAL;
	for (; isdigit((unsigned char)*text); text++) {
		unsigned d = (unsigned)(*text - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*text)
		return -EINVAL;
	*out = v;
	return 0;
}

/* read_number reads a file of one number, without the leading whitespace and '-' sign. */
static int read_number(const char *path, char *buf, size_t size, const char **digits,
		       bool *negative)
{
	const char *p = buf;
	int r = sysread_text(path, buf, size);

	if (r < 0)
		return r;
	/* A value that fills the buffer may have been cut: treat it as garbage. */
	if ((size_t)r >= size - 1)
		return -ERANGE;
	while (isspace((unsigned char)*p))
		p++;
	*negative = *p == '-';
	if (*negative)
		p++;
	*digits = p;
	return 0;
}

int sysread_u64(const char *path, uint64_t *out)
{
	char buf[64];
	const char *digits;
	bool negative;
	int r = read_number(path, buf, sizeof(buf), &digits, &negative);

	if (r < 0)
		return r;
	if (negative)
		return -EINVAL;
	return sysread_parse_u64(digits, out);
}

int sysread_s64(const char *path, int64_t *out)
{
	char buf[64];
	const char *digits;
	bool negative;
	uint64_t v;
	int r = read_number(path, buf, sizeof(buf), &digits, &negative);

	if (r < 0)
		return r;
	r = sysread_parse_u64(digits, &v);
	if (r < 0)
		return r;
	if (v > (uint64_t)INT64_MAX)
		return -ERANGE;
	*out = negative ? -(int64_t)v : (int64_t)v;
	return 0;
}

bool sysread_runtime_suspended(const char *device_dir)
{
	char path[4096], status[32];

	if (sysread_path(path, sizeof(path), "%s/power/runtime_status", device_dir) < 0 ||
	    sysread_text(path, status, sizeof(status)) < 0)
		return false;
	return strcmp(status, "suspended") == 0 || strcmp(status, "suspending") == 0;
}
