/* SPDX-License-Identifier: MIT */
/* log.h: the daemon's leveled log on stderr (journald priority prefixes under systemd). */
#ifndef ROCMMEMD_LOG_H
#define ROCMMEMD_LOG_H

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

/* log_init decides the output format: "<N>" priority prefixes when stderr is the journal. */
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
 */
void log_event(enum log_level level, const struct log_field *fields, unsigned nfields,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
