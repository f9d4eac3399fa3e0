/* SPDX-License-Identifier: MIT */
/* test_size.c: unit tests of common/size: byte sizes and durations, parsed and printed. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "size.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define TiB ((uint64_t)1 << 40)

/* A value size_parse must leave alone when it fails. */
#define UNTOUCHED ((uint64_t)0x5a5a5a5a5a5a5a5aull)

/* expect_size checks size_parse(text) against an expected result and value. */
static void expect_size(const char *text, int want_rc, uint64_t want)
{
	uint64_t v = UNTOUCHED;
	int rc = size_parse(text, &v);

	if (rc != want_rc)
		fail_msg("size_parse(\"%s\") returned %d, expected %d", text, rc, want_rc);
	if (want_rc == 0 && v != want)
		fail_msg("size_parse(\"%s\") gave %" PRIu64 ", expected %" PRIu64, text, v, want);
	if (want_rc != 0 && v != UNTOUCHED)
		fail_msg("size_parse(\"%s\") failed but wrote %" PRIu64, text, v);
}

static void test_size_parse_plain_bytes(void **state)
{
	(void)state;
	expect_size("0", 0, 0);
	expect_size("1", 0, 1);
	expect_size("512", 0, 512);
	expect_size("0000042", 0, 42);
	expect_size("512B", 0, 512);
	expect_size("512b", 0, 512);
	expect_size("4294967296", 0, (uint64_t)1 << 32);
}

static void test_size_parse_suffixes(void **state)
{
	(void)state;
	expect_size("1K", 0, KiB);
	expect_size("1k", 0, KiB);
	expect_size("3M", 0, 3 * MiB);
	expect_size("3m", 0, 3 * MiB);
	expect_size("5G", 0, 5 * GiB);
	expect_size("5g", 0, 5 * GiB);
	expect_size("2T", 0, 2 * TiB);
	expect_size("2t", 0, 2 * TiB);
	expect_size("64MiB", 0, 64 * MiB);
	expect_size("64mib", 0, 64 * MiB);
	expect_size("64MIB", 0, 64 * MiB);
	expect_size("8KiB", 0, 8 * KiB);
	expect_size("8GiB", 0, 8 * GiB);
	expect_size("1TiB", 0, TiB);
	expect_size("0G", 0, 0);
}

static void test_size_parse_fractions(void **state)
{
	(void)state;
	/* Fractions that come to whole bytes. */
	expect_size("1.5G", 0, 1610612736ull);
	expect_size("0.5K", 0, 512);
	expect_size("1.5GiB", 0, 1610612736ull);
	expect_size("0.25M", 0, MiB / 4);
	expect_size("2.000M", 0, 2 * MiB);
	expect_size("0.984375T", 0, TiB / 64 * 63);
	expect_size("0.015625K", 0, 16);
	expect_size("0.001953125M", 0, 2048);
	expect_size("0.0009765625K", 0, 1); /* exactly one byte: ten decimals */
	expect_size("0.0G", 0, 0);
}

static void test_size_parse_fractions_truncate(void **state)
{
	(void)state;
	/* The value times the unit, truncated to whole bytes (as docker and systemd do). */
	expect_size("0.9G", 0, 966367641ull); /* 966367641.6 */
	expect_size("0.9g", 0, 966367641ull);
	expect_size("0.9GiB", 0, 966367641ull);
	expect_size("0.1K", 0, 102);	       /* 102.4 */
	expect_size("0.3M", 0, 314572);	       /* 314572.8 */
	expect_size("0.7G", 0, 751619276ull);  /* 751619276.8 */
	expect_size("1.1G", 0, 1181116006ull); /* 1181116006.4 */
	expect_size("1.4G", 0, 1503238553ull); /* 1503238553.6 */
	expect_size("0.3T", 0, 329853488332ull);
	/* Just below a whole byte stays below it; a value under a byte is 0. */
	expect_size("0.0009765624K", 0, 0);
	expect_size("0.0019531249K", 0, 1);
	expect_size("0.000000000000000001T", 0, 0);
	/* Eighteen decimals are read, exactly: 0.999999999999999999 KiB is 1023.99... bytes. */
	expect_size("0.999999999999999999K", 0, 1023);
	expect_size("0.999999999999999999T", 0, TiB - 1);
	expect_size("1.000000000000000000G", 0, GiB);
	expect_size("0.9999999999999999999K", -EINVAL, 0); /* nineteen */
	expect_size("1.0000000000000000000G", -EINVAL, 0);
	/* A fraction without a K, M, G or T suffix is a fraction of a byte. */
	expect_size("1.5", -EINVAL, 0);
	expect_size("1.0", -EINVAL, 0);
	expect_size("0.0", -EINVAL, 0);
	expect_size("1.5B", -EINVAL, 0);
	expect_size("1.0b", -EINVAL, 0);
}

static void test_size_parse_malformed(void **state)
{
	(void)state;
	expect_size("", -EINVAL, 0);
	expect_size("-1", -EINVAL, 0);
	expect_size("-0.5G", -EINVAL, 0);
	expect_size("+1", -EINVAL, 0);
	expect_size(" 1", -EINVAL, 0);
	expect_size("1 ", -EINVAL, 0);
	expect_size("1G\n", -EINVAL, 0);
	expect_size("\t1G", -EINVAL, 0);
	expect_size("1 K", -EINVAL, 0);
	expect_size("1.5 G", -EINVAL, 0);
	expect_size("K", -EINVAL, 0);
	expect_size("MiB", -EINVAL, 0);
	expect_size(".", -EINVAL, 0);
	expect_size("1.", -EINVAL, 0);
	expect_size("1.K", -EINVAL, 0);
	expect_size("1.G", -EINVAL, 0);
	expect_size(".5G", -EINVAL, 0);
	expect_size("4GB", -EINVAL, 0);
	expect_size("1KB", -EINVAL, 0);
	expect_size("1Gi", -EINVAL, 0);
	expect_size("1GiBs", -EINVAL, 0);
	expect_size("1GBi", -EINVAL, 0);
	expect_size("1X", -EINVAL, 0);
	expect_size("1P", -EINVAL, 0);
	expect_size("1e3", -EINVAL, 0);
	expect_size("1e3G", -EINVAL, 0);
	expect_size("1.5e1G", -EINVAL, 0);
	expect_size("0x10", -EINVAL, 0);
	expect_size("0x10M", -EINVAL, 0);
	expect_size("1BB", -EINVAL, 0);
	expect_size("1..5G", -EINVAL, 0);
	expect_size("1.5.5G", -EINVAL, 0);
	expect_size("1,5G", -EINVAL, 0); /* a decimal comma, in any locale */
	expect_size("1_000", -EINVAL, 0);
	expect_size("1'000K", -EINVAL, 0);
	expect_size("inf", -EINVAL, 0);
	expect_size("nan", -EINVAL, 0);
	expect_size("infG", -EINVAL, 0);
	/* Look-alikes outside ASCII: a fullwidth 1, the Kelvin sign, a Turkish dotless i. */
	expect_size("\xef\xbc\x91"
		    "G",
		    -EINVAL, 0);
	expect_size("1\xe2\x84\xaa", -EINVAL, 0);
	expect_size("1G\xc4\xb1"
		    "B",
		    -EINVAL, 0);
	expect_size("1\xc2\xa0"
		    "G",
		    -EINVAL, 0); /* a no-break space */
	expect_size("1\xff", -EINVAL, 0);
}

static void test_size_parse_range(void **state)
{
	(void)state;
	expect_size("18446744073709551615", 0, UINT64_MAX);
	expect_size("18446744073709551616", -ERANGE, 0);
	expect_size("99999999999999999999999", -ERANGE, 0);
	expect_size("16777215T", 0, (((uint64_t)1 << 24) - 1) << 40);
	expect_size("16777216T", -ERANGE, 0);
	expect_size("16777216.0T", -ERANGE, 0);
	expect_size("17179869184G", -ERANGE, 0);
	expect_size("17179869183G", 0, (((uint64_t)1 << 34) - 1) << 30);
	/* The fraction fills the bits the whole part leaves: never past the top. */
	expect_size("16777215.999999999999999999T", 0, UINT64_MAX);
	expect_size("17179869183.999999999999999999G", 0, UINT64_MAX);
	/* Malformed before too large: what follows the digits is checked first. */
	expect_size("99999999999999999999X", -EINVAL, 0);
	expect_size("99999999999999999999.5", -EINVAL, 0);
	expect_size("99999999999999999999GB", -EINVAL, 0);
	expect_size("99999999999999999999.5G", -ERANGE, 0);
}

/* expect_long_size builds prefix, count copies of fill, then suffix, and checks its parse. */
static void expect_long_size(const char *prefix, char fill, size_t count, const char *suffix,
			     int want_rc, uint64_t want)
{
	size_t np = strlen(prefix), ns = strlen(suffix);
	char *text = malloc(np + count + ns + 1);

	assert_non_null(text);
	memcpy(text, prefix, np);
	memset(text + np, fill, count);
	memcpy(text + np + count, suffix, ns + 1);
	expect_size(text, want_rc, want);
	free(text);
}

static void test_size_parse_long_input(void **state)
{
	(void)state;
	/* A megabyte of digits is read to its end, in one pass, without overflow. */
	expect_long_size("", '0', 1 << 20, "1G", 0, GiB);
	expect_long_size("", '0', 1 << 20, "", 0, 0);
	expect_long_size("", '9', 1 << 20, "", -ERANGE, 0);
	expect_long_size("", '9', 1 << 20, "Q", -EINVAL, 0);
	expect_long_size("0.", '5', 1 << 20, "G", -EINVAL, 0);
	expect_long_size("1", 'G', 1 << 20, "", -EINVAL, 0);
}

static void test_size_parse_null(void **state)
{
	uint64_t v = UNTOUCHED;

	(void)state;
	assert_int_equal(size_parse(NULL, &v), -EINVAL);
	assert_true(v == UNTOUCHED);
	assert_int_equal(size_parse("1K", NULL), -EINVAL);
}

/* expect_suggest checks size_suggest(text): the size meant and its unit, or a refusal. */
static void expect_suggest(const char *text, const char *meant, const char *unit)
{
	char buf[64];
	const char *u = NULL;
	int rc = size_suggest(text, buf, sizeof(buf), &u);

	if (!meant) {
		if (rc != -EINVAL)
			fail_msg("size_suggest(\"%s\") returned %d, expected a refusal", text, rc);
		return;
	}
	if (rc != 0)
		fail_msg("size_suggest(\"%s\") returned %d, expected \"%s\"", text, rc, meant);
	assert_string_equal(buf, meant);
	assert_string_equal(u, unit);
}

static void test_size_suggest(void **state)
{
	char zeros[80];

	(void)state;
	expect_suggest("4GB", "4G", "GiB");
	expect_suggest("4gb", "4G", "GiB");
	expect_suggest("2 GiB", "2G", "GiB");
	expect_suggest("8 bytes", "8", "bytes");
	/* A fraction is now taken as it is written, truncated: the hint names it. */
	expect_suggest("0.9GB", "0.9G", "GiB");
	expect_suggest("1.3 gbytes", "1.3G", "GiB");
	/* Nothing that is not a size once the unit is fixed. */
	expect_suggest("1.5 bytes", NULL, NULL);
	expect_suggest("4PB", NULL, NULL);
	expect_suggest("4G", NULL, NULL); /* already a size */
	expect_suggest("99999999999999999999GB", NULL, NULL);
	expect_suggest("4\xe2\x84\xaa"
		       "B",
		       NULL, NULL);
	/* A hint too long for the buffer is no hint (it would name a cut-off number). */
	memset(zeros, '0', sizeof(zeros));
	memcpy(zeros + sizeof(zeros) - 4, "1GB", 4);
	expect_suggest(zeros, NULL, NULL);
}

static void expect_format(uint64_t bytes, const char *want)
{
	char buf[SIZE_FORMAT_MAX];

	memset(buf, 'x', sizeof(buf));
	assert_ptr_equal(size_format(bytes, buf, sizeof(buf)), buf);
	assert_string_equal(buf, want);
}

static void test_size_format(void **state)
{
	char small[6];

	(void)state;
	expect_format(0, "0 B");
	expect_format(1, "1 B");
	expect_format(512, "512 B");
	expect_format(1023, "1023 B");
	expect_format(KiB, "1 KiB");
	expect_format(1536, "1.50 KiB");
	expect_format(64 * MiB, "64 MiB");
	expect_format(GiB + GiB / 2, "1.50 GiB");
	expect_format(24 * GiB, "24 GiB");
	expect_format(3 * TiB, "3 TiB");
	expect_format((uint64_t)1 << 60, "1 EiB");
	expect_format(UINT64_MAX, "16.00 EiB");

	/* A short buffer is truncated but always terminated. */
	memset(small, 'x', sizeof(small));
	assert_ptr_equal(size_format(64 * MiB, small, sizeof(small)), small);
	assert_string_equal(small, "64 Mi");
}

static void test_size_round_up(void **state)
{
	uint64_t v = UNTOUCHED;

	(void)state;
	assert_int_equal(size_round_up(0, 2 * MiB, &v), 0);
	assert_true(v == 0);
	assert_int_equal(size_round_up(2 * MiB, 2 * MiB, &v), 0);
	assert_true(v == 2 * MiB);
	assert_int_equal(size_round_up(2 * MiB + 1, 2 * MiB, &v), 0);
	assert_true(v == 4 * MiB);
	assert_int_equal(size_round_up(1, 2 * MiB, &v), 0);
	assert_true(v == 2 * MiB);
	assert_int_equal(size_round_up(12345, 1, &v), 0);
	assert_true(v == 12345);

	/* The largest multiple of the granule still fits; one byte more does not. */
	assert_int_equal(size_round_up(UINT64_MAX - (2 * MiB - 1), 2 * MiB, &v), 0);
	assert_true(v == UINT64_MAX - (2 * MiB - 1));
	v = UNTOUCHED;
	assert_int_equal(size_round_up(UINT64_MAX - (2 * MiB - 1) + 1, 2 * MiB, &v), -ERANGE);
	assert_int_equal(size_round_up(UINT64_MAX, 2 * MiB, &v), -ERANGE);
	assert_int_equal(size_round_up(UINT64_MAX, 2, &v), -ERANGE);
	assert_true(v == UNTOUCHED);
	assert_int_equal(size_round_up(UINT64_MAX, 1, &v), 0);
	assert_true(v == UINT64_MAX);

	/* The granule must be a power of two. */
	v = UNTOUCHED;
	assert_int_equal(size_round_up(100, 0, &v), -EINVAL);
	assert_int_equal(size_round_up(100, 3, &v), -EINVAL);
	assert_int_equal(size_round_up(100, 3 * MiB, &v), -EINVAL);
	assert_true(v == UNTOUCHED);
}

/* expect_duration checks duration_parse(text) against an expected result and value. */
static void expect_duration(const char *text, int want_rc, int64_t want)
{
	int64_t v = 0x5a5a5a5a;
	int rc = duration_parse(text, &v);

	if (rc != want_rc)
		fail_msg("duration_parse(\"%s\") returned %d, expected %d", text, rc, want_rc);
	if (want_rc == 0 && v != want)
		fail_msg("duration_parse(\"%s\") gave %" PRId64 ", expected %" PRId64, text, v,
			 want);
	if (want_rc != 0 && v != 0x5a5a5a5a)
		fail_msg("duration_parse(\"%s\") failed but wrote %" PRId64, text, v);
}

static void test_duration_parse(void **state)
{
	int64_t v;

	(void)state;
	expect_duration("2", 0, 2000);
	expect_duration("0", 0, 0);
	expect_duration("0.25", 0, 250);
	expect_duration("1.5", 0, 1500);
	expect_duration("1.234", 0, 1234);
	expect_duration("0.001", 0, 1);
	expect_duration("30", 0, 30000);
	expect_duration("2s", 0, 2000); /* the seconds unit may be spelled out */
	expect_duration("0.5s", 0, 500);
	expect_duration("inf", 0, -1);
	expect_duration("infinity", 0, -1);
	expect_duration("-1", 0, -1);

	expect_duration("", -EINVAL, 0);
	expect_duration("abc", -EINVAL, 0);
	expect_duration("1.2345", -EINVAL, 0); /* finer than a millisecond */
	expect_duration("-2", -EINVAL, 0);
	expect_duration("-0.5", -EINVAL, 0);
	expect_duration(".5", -EINVAL, 0);
	expect_duration("1.", -EINVAL, 0);
	expect_duration("2ms", -EINVAL, 0);
	expect_duration("2m", -EINVAL, 0);
	expect_duration("2 s", -EINVAL, 0);
	expect_duration(" 2", -EINVAL, 0);
	expect_duration("INF", -EINVAL, 0);

	expect_duration("9223372036854774", 0, INT64_C(9223372036854774000));
	expect_duration("9223372036854776", -ERANGE, 0);
	expect_duration("99999999999999999999", -ERANGE, 0);

	assert_int_equal(duration_parse(NULL, &v), -EINVAL);
	assert_int_equal(duration_parse("1", NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_size_parse_plain_bytes),
	    cmocka_unit_test(test_size_parse_suffixes),
	    cmocka_unit_test(test_size_parse_fractions),
	    cmocka_unit_test(test_size_parse_fractions_truncate),
	    cmocka_unit_test(test_size_parse_malformed),
	    cmocka_unit_test(test_size_parse_range),
	    cmocka_unit_test(test_size_parse_long_input),
	    cmocka_unit_test(test_size_parse_null),
	    cmocka_unit_test(test_size_suggest),
	    cmocka_unit_test(test_size_format),
	    cmocka_unit_test(test_size_round_up),
	    cmocka_unit_test(test_duration_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
