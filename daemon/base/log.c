/* SPDX-License-Identifier: MIT */
/* log.c: leveled log lines: native journal entries with fields under journald, else stderr. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The entry's fields are the ones given: no CODE_FILE/CODE_LINE of this file on every entry. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

/* The journal's native socket, where sd_journal_sendv sends (the Native Journal Protocol). */
#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define LOG_MESSAGE_MAX 2048
/* MESSAGE, PRIORITY and SYSLOG_IDENTIFIER, then the caller's fields. */
#define LOG_FIELDS_MAX 16
#define LOG_FIELD_TEXT_MAX 2048

static enum log_level current = LOG_LEVEL_INFO;
/* stderr is the journal's stream: "<N>" prefixes carry the priority. */
static bool journal;
/* ... and the native socket is there too: each line becomes an entry with its fields. */
static bool native;
static atomic_flag native_failed_told = ATOMIC_FLAG_INIT;

static const char *const names[] = {"error", "warn", "info", "debug"};
/* syslog(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const int priorities[] = {3, 4, 6, 7};
static const char *const priority_fields[] = {"PRIORITY=3", "PRIORITY=4", "PRIORITY=6",
					      "PRIORITY=7"};

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

/*
 * journal_socket_present is checked because sd_journal_sendv returns 0 and drops the entry
 * when the socket does not exist (sd_journal_print(3)): then the stream, which works, is used.
 */
static bool journal_socket_present(void)
{
	struct stat st;

	return stat(JOURNAL_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode);
}

void log_init(enum log_level level)
{
	current = level;
	journal = stderr_is_journal();
	native = journal && journal_socket_present();
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

/*
 * stream_line writes message as one line, "<N>message" to the journal's stream, else
 * "rocmmemd: level: message": one write per line, so lines never interleave mid-line.
 */
static void stream_line(enum log_level level, const char *message)
{
	char line[LOG_MESSAGE_MAX + 32];
	size_t len;
	int n;

	if (journal)
		n = snprintf(line, sizeof(line) - 1, "<%d>%s", priorities[level], message);
	else
		n = snprintf(line, sizeof(line) - 1, "rocmmemd: %s: %s", names[level], message);
	if (n < 0)
		return;
	len = (size_t)n < sizeof(line) - 2 ? (size_t)n : sizeof(line) - 2;
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0) {
		/* Nowhere left to report a failing stderr. */
	}
}

/*
 * field_name_valid accepts what journald keeps: upper case letters, digits and underscores,
 * not starting with a digit or an underscore (those are the journal's trusted fields).
 */
static bool field_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > 64 || name[0] == '_' || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
			return false;
	}
	return true;
}

/*
 * journal_send sends one entry. Each field is one iovec "NAME=value": sd_journal_sendv splits
 * at the first '=' and sends a value holding a newline length-prefixed (the native protocol's
 * binary form), so no value, whatever a client put in it, can end its field and start
 * another. A field that is invalid or does not fit is left out; the message never is.
 * Returns 0 or a negative errno.
 */
static int journal_send(enum log_level level, const char *message, const struct log_field *fields,
			unsigned nfields)
{
	struct iovec iov[LOG_FIELDS_MAX];
	char text[LOG_FIELD_TEXT_MAX];
	size_t used = 0;
	int n = 0;

	iov[n++] = (struct iovec){(void *)message, strlen(message)};
	iov[n++] = (struct iovec){(void *)priority_fields[level], strlen(priority_fields[level])};
	iov[n++] = (struct iovec){(void *)"SYSLOG_IDENTIFIER=rocmmemd",
				  strlen("SYSLOG_IDENTIFIER=rocmmemd")};
	for (unsigned i = 0; i < nfields && n < LOG_FIELDS_MAX; i++) {
		const struct log_field *f = &fields[i];
		int len;

		if (!f->name || !f->value || !field_name_valid(f->name))
			continue;
		len = snprintf(text + used, sizeof(text) - used, "%s=%s", f->name, f->value);
		if (len < 0 || (size_t)len >= sizeof(text) - used)
			continue;
		iov[n++] = (struct iovec){text + used, (size_t)len};
		used += (size_t)len + 1;
	}
	return sd_journal_sendv(iov, n);
}

static void log_line(enum log_level level, const struct log_field *fields, unsigned nfields,
		     const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

static void log_line(enum log_level level, const struct log_field *fields, unsigned nfields,
		     const char *fmt, va_list ap)
{
	static const char prefix[] = "MESSAGE=";
	char entry[sizeof(prefix) - 1 + LOG_MESSAGE_MAX];
	char *message = entry + sizeof(prefix) - 1;
	int err, saved = errno;

	memcpy(entry, prefix, sizeof(prefix) - 1);
	vsnprintf(message, LOG_MESSAGE_MAX, fmt, ap);
	if (native) {
		err = journal_send(level, entry, fields, nfields);
		if (err == 0)
			goto out;
		/* Lose nothing: the stream still works. Say why once, then keep quiet. */
		if (!atomic_flag_test_and_set(&native_failed_told)) {
			char why[128];

			snprintf(why, sizeof(why),
				 "Could not send to the journal's socket: %s; using stderr",
				 strerror(-err));
			stream_line(LOG_LEVEL_WARN, why);
		}
	}
	stream_line(level, message);
out:
	errno = saved;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > current)
		return;
	va_start(ap, fmt);
	log_line(level, NULL, 0, fmt, ap);
	va_end(ap);
}

void log_event(enum log_level level, const struct log_field *fields, unsigned nfields,
	       const char *fmt, ...)
{
	va_list ap;

	if (level > current)
		return;
	va_start(ap, fmt);
	log_line(level, fields, nfields, fmt, ap);
	va_end(ap);
}

bool log_ratelimit_pass(struct log_ratelimit *rl, unsigned long long now_ms,
			unsigned long long *held)
{
	return log_ratelimit_allow(rl, now_ms, LOG_RATELIMIT_BURST, LOG_RATELIMIT_INTERVAL_MS,
				   held);
}

bool log_ratelimit_allow(struct log_ratelimit *rl, unsigned long long now_ms, unsigned burst,
			 unsigned interval_ms, unsigned long long *held)
{
	if (now_ms - rl->window_ms >= interval_ms || now_ms < rl->window_ms) {
		rl->window_ms = now_ms;
		rl->lines = 0;
	}
	if (rl->lines >= burst) {
		rl->held++;
		return false;
	}
	rl->lines++;
	*held = rl->held;
	rl->held = 0;
	return true;
}
