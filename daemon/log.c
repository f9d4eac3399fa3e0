/* SPDX-License-Identifier: MIT */
/* log.c: leveled log lines on stderr, with sd-daemon priority prefixes under journald. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static enum log_level current = LOG_LEVEL_INFO;
static bool journal;

static const char *const names[] = {"error", "warn", "info", "debug"};
/* sd-daemon(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const int priorities[] = {3, 4, 6, 7};

/* stderr_is_journal checks $JOURNAL_STREAM ("dev:ino") against stderr, as systemd documents. */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init(enum log_level level)
{
	current = level;
	journal = stderr_is_journal();
}

void log_set_level(enum log_level level)
{
	current = level;
}

enum log_level log_get_level(void)
{
	return current;
}

int log_level_parse(const char *text, enum log_level *out)
{
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (text && strcmp(text, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (text && strcmp(text, "warning") == 0) {
		*out = LOG_LEVEL_WARN;
		return 0;
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : "?";
}

static void log_line(enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void log_line(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	int n, saved = errno;

	if (journal)
		n = snprintf(line, sizeof(line), "<%d>", priorities[level]);
	else
		n = snprintf(line, sizeof(line), "rocmmemd: %s: ", names[level]);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	/* One write per line so lines from a restarted daemon never interleave mid-line. */
	n = (int)strlen(line);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report a failing stderr. */
	}
	errno = saved;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > current)
		return;
	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}

void log_event(enum log_level level, const struct log_field *fields, unsigned nfields,
	       const char *fmt, ...)
{
	va_list ap;

	(void)fields;
	(void)nfields;
	if (level > current)
		return;
	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}
