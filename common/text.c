/* SPDX-License-Identifier: MIT */
/* text.c: UTF-8 and control-character checks for client-supplied names. */
#include "text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* utf8_sequence returns the length of the valid UTF-8 sequence at s, or 0 (RFC 3629 table 3-7). */
static size_t utf8_sequence(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (left < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

bool text_is_clean(const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), i = 0;

	if (len > max)
		return false;
	while (i < len) {
		size_t n = utf8_sequence(p + i, len - i);

		if (n == 0)
			return false;
		if (n == 1 && (p[i] < 0x20 || p[i] == 0x7f))
			return false;
		/* C1 controls U+0080..U+009F are encoded as 0xc2 0x80..0x9f. */
		if (n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)
			return false;
		i += n;
	}
	return true;
}

size_t text_copy(char *dst, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (n >= size) {
		n = size - 1;
		/* Back off continuation bytes: the cut lands before a character's first byte. */
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return n;
}

int text_why(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}
