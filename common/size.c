/* SPDX-License-Identifier: MIT */
/* size.c: parsing and printing of byte sizes and durations, the one syntax for every tool. */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* parse_decimal reads digits[.digits] into an integer part and a fraction numerator/denominator. */
static int parse_decimal(const char **p, uint64_t *whole, uint64_t *frac, uint64_t *frac_div,
			 uint64_t frac_limit)
{
	const char *s = *p;
	int digits = 0;

	*whole = 0;
	*frac = 0;
	*frac_div = 1;
	while (isdigit((unsigned char)*s)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (*whole > (UINT64_MAX - d) / 10)
			return -ERANGE;
		*whole = *whole * 10 + d;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		while (isdigit((unsigned char)*s)) {
			if (*frac_div >= frac_limit)
				return -EINVAL; /* more precision than we can represent */
			*frac = *frac * 10 + (uint64_t)(*s - '0');
			*frac_div *= 10;
			s++;
		}
	}
	if (digits == 0)
		return -EINVAL;
	*p = s;
	return 0;
}

int size_parse(const char *text, uint64_t *out)
{
	const char *s = text;
	uint64_t whole, frac, frac_div, mult;
	int shift = 0, err;

	if (!text || !out)
		return -EINVAL;
	err = parse_decimal(&s, &whole, &frac, &frac_div, 1000000ull);
	if (err)
		return err;
	switch (toupper((unsigned char)*s)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case 'B':
		if (s[1] != '\0')
			return -EINVAL;
		s++;
		break;
	default:
		return -EINVAL;
	}
	if (shift) {
		s++;
		if (*s == 'i' || *s == 'I') {
			if (s[1] != 'B' && s[1] != 'b')
				return -EINVAL;
			s += 2;
		}
	}
	if (*s != '\0')
		return -EINVAL;
	if (frac_div > 1 && shift == 0)
		return -EINVAL; /* "1.5" bytes */
	mult = (uint64_t)1 << shift;
	if (whole > UINT64_MAX >> shift)
		return -ERANGE;
	whole <<= shift;
	if (frac_div > 1) {
		/* frac < frac_div <= 10^6 < 2^20 and mult <= 2^40: the product fits in 64 bits. */
		uint64_t prod = frac * mult;
		if (prod % frac_div != 0)
			return -EINVAL; /* not a whole number of bytes */
		if (whole > UINT64_MAX - prod / frac_div)
			return -ERANGE;
		whole += prod / frac_div;
	}
	*out = whole;
	return 0;
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
		if (strcasecmp(s, tails[i]) == 0)
			return true;
	return false;
}

int size_suggest(const char *text, char *buf, size_t len, const char **unit)
{
	static const char letters[] = "KMGT";
	static const char *const names[] = {"KiB", "MiB", "GiB", "TiB"};
	const char *s = text, *digits_end, *l;
	uint64_t whole, frac, frac_div, check;

	if (!text || parse_decimal(&s, &whole, &frac, &frac_div, 1000000ull) < 0)
		return -EINVAL;
	digits_end = s;
	while (*s == ' ')
		s++;
	l = *s ? strchr(letters, toupper((unsigned char)*s)) : NULL;
	if (l && unit_tail(s + 1, true)) {
		snprintf(buf, len, "%.*s%c", (int)(digits_end - text), text, *l);
		*unit = names[l - letters];
	} else if (!l && *s && unit_tail(s, false)) {
		snprintf(buf, len, "%.*s", (int)(digits_end - text), text);
		*unit = "bytes";
	} else {
		return -EINVAL;
	}
	/* Only what is itself a size, and not what was written. */
	if (strcmp(buf, text) == 0 || size_parse(buf, &check) < 0)
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
