/* SPDX-License-Identifier: MIT */
/* test_text.c: unit tests of common/text: which client names are safe to print. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "text.h"

#define NAME_MAX_BYTES 64

static void expect_clean(const char *s, bool want)
{
	bool got = text_is_clean(s, NAME_MAX_BYTES);

	if (got != want) {
		char hex[4 * 80 + 1] = "";
		size_t n = strlen(s);

		for (size_t i = 0; i < n && i < 80; i++) {
			static const char digits[] = "0123456789abcdef";
			unsigned char c = (unsigned char)s[i];
			char *p = hex + strlen(hex);

			p[0] = '\\';
			p[1] = 'x';
			p[2] = digits[c >> 4];
			p[3] = digits[c & 15];
			p[4] = '\0';
		}
		fail_msg("text_is_clean(\"%s\") returned %s", hex, got ? "true" : "false");
	}
}

static void test_ascii(void **state)
{
	(void)state;
	expect_clean("", true);
	expect_clean("llama-3-8b", true);
	expect_clean("ComfyUI worker #2 (flux.1-dev)", true);
	expect_clean(" ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./", true);
}

static void test_length_limit(void **state)
{
	char s[NAME_MAX_BYTES + 2];

	(void)state;
	memset(s, 'a', sizeof(s));
	s[NAME_MAX_BYTES] = '\0';
	assert_true(text_is_clean(s, NAME_MAX_BYTES));
	s[NAME_MAX_BYTES] = 'a';
	s[NAME_MAX_BYTES + 1] = '\0';
	assert_false(text_is_clean(s, NAME_MAX_BYTES));

	/* The limit counts bytes, not characters: 32 two-byte letters fit, 33 do not. */
	{
		char u[2 * 33 + 1] = "";

		for (int i = 0; i < 32; i++)
			strcat(u, "\xc3\xa9");
		assert_true(text_is_clean(u, NAME_MAX_BYTES));
		strcat(u, "\xc3\xa9");
		assert_false(text_is_clean(u, NAME_MAX_BYTES));
	}
	assert_true(text_is_clean("", 0));
	assert_false(text_is_clean("a", 0));
}

static void test_control_characters(void **state)
{
	(void)state;
	expect_clean("a\nb", false);
	expect_clean("line\r", false);
	expect_clean("\tname", false);
	expect_clean("red\x1b[31m", false);
	expect_clean("del\x7f", false);
	expect_clean("\x01", false);
	expect_clean("\x1f", false);
	/* C1 controls U+0080..U+009F (CSI is U+009B). */
	expect_clean("\xc2\x80", false);
	expect_clean("x\xc2\x85y", false);
	expect_clean("\xc2\x9b"
		     "31m",
		     false);
	expect_clean("\xc2\x9f", false);
	/* U+00A0, the first code point after them, is printable. */
	expect_clean("\xc2\xa0", true);
}

static void test_valid_utf8(void **state)
{
	(void)state;
	expect_clean("Grüße", true);
	expect_clean("模型", true);
	expect_clean("\xf0\x9f\x98\x80", true);		 /* U+1F600 */
	expect_clean("model \xf0\x9f\xa6\x99 v2", true); /* U+1F999 */
	expect_clean("\xdf\xbf", true);			 /* U+07FF */
	expect_clean("\xe0\xa0\x80", true);		 /* U+0800 */
	expect_clean("\xed\x9f\xbf", true);		 /* U+D7FF */
	expect_clean("\xee\x80\x80", true);		 /* U+E000 */
	expect_clean("\xef\xbf\xbd", true);		 /* U+FFFD */
	expect_clean("\xf0\x90\x80\x80", true);		 /* U+10000 */
	expect_clean("\xf4\x8f\xbf\xbf", true);		 /* U+10FFFF */
}

static void test_invalid_utf8(void **state)
{
	(void)state;
	/* Overlong encodings. */
	expect_clean("\xc0\x80", false);
	expect_clean("\xc1\xbf", false);
	expect_clean("\xe0\x80\x80", false);
	expect_clean("\xe0\x9f\xbf", false);
	expect_clean("\xf0\x80\x80\x80", false);
	expect_clean("\xf0\x8f\xbf\xbf", false);
	/* UTF-16 surrogates. */
	expect_clean("\xed\xa0\x80", false);
	expect_clean("\xed\xbf\xbf", false);
	/* Above U+10FFFF and bytes that never start a sequence. */
	expect_clean("\xf4\x90\x80\x80", false);
	expect_clean("\xf5\x80\x80\x80", false);
	expect_clean("\xf8\x88\x80\x80\x80", false);
	expect_clean("\xff", false);
	expect_clean("\xfe", false);
	/* Continuation bytes where none belong, and bad continuations. */
	expect_clean("\x80", false);
	expect_clean("a\xbf", false);
	expect_clean("\xc3\x28", false);
	expect_clean("\xe6\xa8\x41", false);
	expect_clean("\xe6\x41\xa1", false);
	expect_clean("\xf0\x9f\x98\x41", false);
	expect_clean("\xf0\x9f\x41\x80", false);
	expect_clean("\xc3\xc3\xa9", false);
	/* Sequences cut short by the end of the string. */
	expect_clean("\xc3", false);
	expect_clean("ab\xe6\xa8", false);
	expect_clean("\xe6", false);
	expect_clean("\xf0\x9f\x98", false);
	expect_clean("\xf0\x9f", false);
	expect_clean("\xf0", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ascii),
	    cmocka_unit_test(test_length_limit),
	    cmocka_unit_test(test_control_characters),
	    cmocka_unit_test(test_valid_utf8),
	    cmocka_unit_test(test_invalid_utf8),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
