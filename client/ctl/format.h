/* SPDX-License-Identifier: MIT */
/* format.h: reading arguments and writing values: sizes, durations, devices, names. */
#ifndef ROCMMEMCTL_FORMAT_H
#define ROCMMEMCTL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "rocmmem.h"

/* ctl_monotonic_ms is CLOCK_MONOTONIC in milliseconds. */
int64_t ctl_monotonic_ms(void);

/* ctl_duration writes whole seconds as "42s", "3m05s" or "2h07m" into buf. Returns buf. */
const char *ctl_duration(uint64_t s, char *buf, size_t len);

/* ctl_ms_text writes a duration in ms as "850ms", "2.5s" or "3m05s". Returns buf. */
const char *ctl_ms_text(uint64_t ms, char *buf, size_t len);

/* ctl_clock_text writes a wall-clock time in ms as local "HH:MM:SS" (".mmm" with millis). */
const char *ctl_clock_text(uint64_t ms, bool millis, char *buf, size_t len);

/* ctl_parse_interval reads watch -i SECONDS into ms, within the daemon's bounds; and
 * ctl_parse_count a count of 1 or more. Return 0 or -EINVAL. */
int ctl_parse_interval(const char *text, uint32_t *ms);
int ctl_parse_count(const char *text, uint64_t *count);

/* ctl_size writes bytes for a table: "64 MiB", or "67108864" with --bytes. Returns buf. */
const char *ctl_size(const struct ctl *ctl, uint64_t bytes, char *buf, size_t len);

/* ctl_parse_device reads --device N (0 to 1024). Returns 0 or -EINVAL. */
int ctl_parse_device(const char *text, long *device);

/* ctl_is_self: a client entry that is this very process (its own connection to ask). */
bool ctl_is_self(const struct rocmmem_client_info *v);

/* ctl_model_class_name and ctl_model_state_name: the JSON names ("text_encoder", "in_use"). */
const char *ctl_model_class_name(enum rocmmem_model_class c);
const char *ctl_model_state_name(enum rocmmem_model_state s);

/* ctl_model_state_label is the state as the tables show it: words, not identifiers. */
const char *ctl_model_state_label(enum rocmmem_model_state s);

/* ctl_host_fallback_line writes the host-memory warning status and watch put first, or "". */
const char *ctl_host_fallback_line(const struct rocmmem_daemon_info *d, bool color, char *buf,
				   size_t len);

/* ctl_errno_name names a negative errno ("ENOMEM"), or writes "errno N" into buf. */
const char *ctl_errno_name(int err, char *buf, size_t len);

#endif
