/* SPDX-License-Identifier: MIT */
/* books.c: the allocator's lock and counters, and the reasons of its failures. */
#include <stdarg.h>
#include <stdio.h>

#include "books.h"

pthread_mutex_t books_lock = PTHREAD_MUTEX_INITIALIZER;
struct rocmmem_torch_stats books_counters;

void books_fmt_bytes(char *buf, size_t len, uint64_t n)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = -1;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
	else if (n % (UINT64_C(1) << (10 * (u + 1))) == 0)
		snprintf(buf, len, "%.0f %s", v, units[u]);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
}

void books_error_locked(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(books_counters.last_error, sizeof(books_counters.last_error), fmt, ap);
	va_end(ap);
}

void books_error(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&books_lock);
	va_start(ap, fmt);
	vsnprintf(books_counters.last_error, sizeof(books_counters.last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&books_lock);
}

void books_failed(void)
{
	pthread_mutex_lock(&books_lock);
	books_counters.failed_allocs++;
	pthread_mutex_unlock(&books_lock);
}

void books_alloc_failed(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&books_lock);
	books_counters.failed_allocs++;
	va_start(ap, fmt);
	vsnprintf(books_counters.last_error, sizeof(books_counters.last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&books_lock);
}
