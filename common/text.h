/* SPDX-License-Identifier: MIT */
/* text.h: validation of names and tags that clients send and terminals later print. */
#ifndef ROCMMEM_COMMON_TEXT_H
#define ROCMMEM_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * text_is_clean says whether s is at most max bytes of valid UTF-8 without control characters
 * (so that printing it in a terminal or a log cannot forge lines or escape sequences).
 */
bool text_is_clean(const char *s, size_t max);

/*
 * text_copy copies s into dst (size bytes, size > 0), cutting it if needed at a character
 * boundary so that valid UTF-8 stays valid. Returns the bytes copied, without the NUL.
 */
size_t text_copy(char *dst, size_t size, const char *s);

/*
 * text_why writes the message fmt makes into why (len bytes, len > 0) and returns err: the
 * shape of every check that refuses with a reason.
 */
int text_why(char *why, size_t len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
