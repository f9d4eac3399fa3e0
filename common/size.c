/* SPDX-License-Identifier: MIT */
/* size.c: parsing and printing of byte sizes and durations, the one syntax for every tool. */
#include "size.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A size's fraction has at most 18 digits: twice 10^18 still fits in 64 bits (frac_floor). */
#define SIZE_FRAC_LIMIT 1000000000000000000ull

/* is_digit: an ASCII decimal digit, whatever the locale says. */
static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ascii_upper: c in upper case for ASCII letters only (toupper follows the locale). */
static char ascii_upper(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/*
 * parse_decimal reads digits[.digits] into an integer part and a fraction numerator/denominator
 * (at most frac_limit: more fraction digits are -EINVAL). A whole part too large for 64 bits is
 * read to its end all the same and reported as -ERANGE, so that a caller can still refuse what
 * follows as malformed first.
 */
static int parse_decimal(const char **p, uint64_t *whole, uint64_t *frac, uint64_t *frac_div,
			 uint64_t frac_limit)
{
	const char *s = *p;
	bool overflow = false;
	int digits = 0;

	*whole = 0;
	*frac = 0;
	*frac_div = 1;
	while (is_digit(*s)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (*whole > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			*whole = *whole * 10 + d;
		s++;
		digits++;
	}
	if (digits == 0)
		return -EINVAL;
	if (*s == '.') {
		s++;
		if (!is_digit(*s))
			return -EINVAL;
		while (is_digit(*s)) {
			if (*frac_div >= frac_limit)
				return -EINVAL; /* more precision than we read */
			*frac = *frac * 10 + (uint64_t)(*s - '0');
			*frac_div *= 10;
			s++;
		}
	}
	*p = s;
	return overflow ? -ERANGE : 0;
}

/*
 * frac_floor returns floor(frac / frac_div * 2^shift), exactly: the first shift bits of the
 * fraction's binary expansion, by long division (frac < frac_div <= 10^18, so 2 * rem fits).
 */
static uint64_t frac_floor(uint64_t frac, uint64_t frac_div, int shift)
{
	uint64_t rem = frac, bits = 0;

	for (int i = 0; i < shift; i++) {
		rem <<= 1;
		bits <<= 1;
		if (rem >= frac_div) {
			rem -= frac_div;
			bits |= 1;
		}
	}
	return bits;
}

/* unit_shift reads the unit s ends with: "", "B", or K/M/G/T and an optional "iB" (any case). */
static int unit_shift(const char *s, int *shift)
{
	static const char letters[] = "KMGT";
	const char *l;

	*shift = 0;
	if (*s == '\0')
		return 0;
	if (ascii_upper(*s) == 'B')
		return s[1] == '\0' ? 0 : -EINVAL;
	l = strchr(letters, ascii_upper(*s));
	if (!l)
		return -EINVAL;
	*shift = 10 * (int)(l - letters + 1);
	s++;
	if (ascii_upper(s[0]) == 'I' && ascii_upper(s[1]) == 'B')
		s += 2;
	return *s == '\0' ? 0 : -EINVAL;
}

int size_parse(const char *text, uint64_t *out)
{
	const char *s = text;
	uint64_t whole, frac, frac_div;
	int shift, err, num;

	if (!text || !out)
		return -EINVAL;
	num = parse_decimal(&s, &whole, &frac, &frac_div, SIZE_FRAC_LIMIT);
	if (num == -EINVAL)
		return num;
	err = unit_shift(s, &shift);
	if (err)
		return err;
	if (frac_div > 1 && shift == 0)
		return -EINVAL; /* "1.5" or "1.5B": bytes are whole */
	if (num == -ERANGE || whole > UINT64_MAX >> shift)
		return -ERANGE;
	/* whole << shift has shift zero bits at the bottom: the fraction's bytes fill them. */
	*out = (whole << shift) + frac_floor(frac, frac_div, shift);
	return 0;
}

/* ascii_caseeq: a and b equal but for the case of ASCII letters (strcasecmp follows the locale). */
static bool ascii_caseeq(const char *a, const char *b)
{
	for (; *a || *b; a++, b++)
		if (ascii_upper(*a) != ascii_upper(*b))
			return false;
	return true;
}

/* unit_tail: what a spelled-out unit has after its letter ("4GB", "4Gi", "4 gbytes"), or a
 * byte count after its digits ("8 bytes"). */
static bool unit_tail(const char *s, bool letter)
{
	static const char *const after_letter[] = {"", "b", "i", "ib", "byte", "bytes"};
	static const char *const alone[] = {"b", "byte", "bytes"};
	const char *const *tails = letter ? after_letter : alone;
	size_t n = letter ? sizeof(after_letter) / sizeof(after_letter[0])
			  : sizeof(alone) / sizeof(alone[0]);

	for (size_t i = 0; i < n; i++)
		if (ascii_caseeq(s, tails[i]))
			return true;
	return false;
}

int size_suggest(const char *text, char *buf, size_t len, const char **unit)
{
	static const char letters[] = "KMGT";
	static const char *const names[] = {"KiB", "MiB", "GiB", "TiB"};
	const char *s = text, *digits_end, *l;
	uint64_t whole, frac, frac_div, check;
	int n;

	if (!text || parse_decimal(&s, &whole, &frac, &frac_div, SIZE_FRAC_LIMIT) < 0)
		return -EINVAL;
	digits_end = s;
	while (*s == ' ')
		s++;
	l = *s ? strchr(letters, ascii_upper(*s)) : NULL;
	if (l && unit_tail(s + 1, true)) {
		n = snprintf(buf, len, "%.*s%c", (int)(digits_end - text), text, *l);
		*unit = names[l - letters];
	} else if (!l && *s && unit_tail(s, false)) {
		n = snprintf(buf, len, "%.*s", (int)(digits_end - text), text);
		*unit = "bytes";
	} else {
		return -EINVAL;
	}
	/* Only what is itself a size, whole in buf, and not what was written. */
	if (n < 0 || (size_t)n >= len || strcmp(buf, text) == 0 || size_parse(buf, &check) < 0)
		return -EINVAL;
	return 0;
}

char *size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	unsigned u = 0;
	uint64_t v = bytes;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v >>= 10;
		u++;
	}
	if (u == 0 || bytes % ((uint64_t)1 << (10 * u)) == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
	else
		snprintf(buf, len, "%.2f %s", (double)bytes / (double)((uint64_t)1 << (10 * u)),
			 units[u]);
	return buf;
}

int size_round_up(uint64_t bytes, uint64_t granule, uint64_t *out)
{
	uint64_t mask = granule - 1;

	if (granule == 0 || (granule & mask) != 0)
		return -EINVAL;
	if (bytes > UINT64_MAX - mask)
		return -ERANGE;
	*out = (bytes + mask) & ~mask;
	return 0;
}

int duration_parse(const char *text, int64_t *ms_out)
{
	const char *s = text;
	uint64_t whole, frac, frac_div;
	int err;

	if (!text || !ms_out)
		return -EINVAL;
	if (strcmp(text, "inf") == 0 || strcmp(text, "infinity") == 0 || strcmp(text, "-1") == 0) {
		*ms_out = -1;
		return 0;
	}
	err = parse_decimal(&s, &whole, &frac, &frac_div, 1000);
	if (err)
		return err;
	if (*s == 's')
		s++;
	if (*s != '\0')
		return -EINVAL;
	if (whole > (uint64_t)INT64_MAX / 1000 - 1)
		return -ERANGE;
	*ms_out = (int64_t)(whole * 1000 + frac * 1000 / frac_div);
	return 0;
}
