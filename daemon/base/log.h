/* SPDX-License-Identifier: MIT */
/* log.h: the daemon's leveled log: journal entries with fields under systemd, else stderr. */
#ifndef ROCMMEMD_LOG_H
#define ROCMMEMD_LOG_H

#include <stdbool.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

/*
 * log_init decides where lines go. When stderr is the journal ($JOURNAL_STREAM names it) and
 * the journal's native socket exists, each line is sent as an entry (MESSAGE, PRIORITY,
 * SYSLOG_IDENTIFIER=rocmmemd, plus log_event's fields); should a send fail, that line goes to
 * stderr with its "<N>" priority prefix instead. When stderr is the journal but the socket is
 * missing, lines go to stderr with the prefix. Otherwise: plain "rocmmemd: LEVEL: message".
 */
void log_init(enum log_level level);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* log_level_parse maps "error|warn|info|debug" to a level. Returns 0 or -EINVAL. */
int log_level_parse(const char *text, enum log_level *out);
const char *log_level_name(enum log_level level);

/* log_msg writes one line if level is enabled. Never fails, never blocks on a full pipe long. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A structured journal field: name is upper case (ROCMMEM_BYTES), value is text. */
struct log_field {
	const char *name;
	const char *value;
};

/*
 * log_event writes one line like log_msg; under journald the entry also carries the fields
 * (besides MESSAGE, PRIORITY and SYSLOG_IDENTIFIER), so that journalctl can select on them.
 * Each value is sent whole as its field's value, whatever it holds: it cannot add a field.
 * A field with a NULL value or a name journald would not keep is left out; at most 13 are sent.
 */
void log_event(enum log_level level, const struct log_field *fields, unsigned nfields,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * A rate limit for lines a client can cause at will (refused connections and requests): at
 * most LOG_RATELIMIT_BURST lines per LOG_RATELIMIT_INTERVAL_MS; the rest are counted.
 */
#define LOG_RATELIMIT_BURST 10u
#define LOG_RATELIMIT_INTERVAL_MS 1000u

struct log_ratelimit {
	unsigned long long window_ms; /* when the current interval began */
	unsigned lines;		      /* written in it */
	unsigned long long held;      /* lines held back since the last one written */
};

/*
 * log_ratelimit_pass says whether a line may be written at loop time now_ms. When it may,
 * *held gets the number of lines held back before it (to be said in the line) and the count
 * starts again; when it may not, the line is counted as held back.
 */
bool log_ratelimit_pass(struct log_ratelimit *rl, unsigned long long now_ms,
			unsigned long long *held);

/* log_ratelimit_allow is log_ratelimit_pass with at most burst lines per interval_ms. */
bool log_ratelimit_allow(struct log_ratelimit *rl, unsigned long long now_ms, unsigned burst,
			 unsigned interval_ms, unsigned long long *held);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
