/* SPDX-License-Identifier: MIT */
/* fake_data.h: the "key value" data files and call logs that drive the fake GPU libraries. */
#ifndef ROCMMEM_TESTS_FAKE_DATA_H
#define ROCMMEM_TESTS_FAKE_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * fake_get finds key in the file named by the environment variable env (lines "key value",
 * read again on every call so a test may change it between calls) and copies its value.
 */
bool fake_get(const char *env, const char *key, char *value, size_t len);

/* fake_u64/fake_s64: the same, for a decimal or 0x-prefixed number. */
bool fake_u64(const char *env, const char *key, uint64_t *out);
bool fake_s64(const char *env, const char *key, int64_t *out);

/* fake_log appends one line to the file named by the environment variable env, if set. */
void fake_log(const char *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
