/* SPDX-License-Identifier: MIT */
/* test_options.c: unit tests of daemon/options: rocmmemd's command line and its messages. */
#include <errno.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "app/options_cli.h"
#include "app/options_merge.h"
#include "version.h"

#define GiB ((uint64_t)1 << 30)
#define MiB ((uint64_t)1 << 20)
#define MAX_ARGS 16

/*
 * One run of options_parse: its arguments (getopt may keep a pointer into them), the settings
 * the flags gave (strings copied into the run, so that nothing stays allocated and a failed
 * assertion leaks nothing) and what it printed.
 */
struct run {
	int rc;
	struct command_line cl;
	struct options opts;
	char socket_path[128], backend[32], sharing[32], metrics_textfile[256];
	bool has_config;
	char config_path[256];
	char *argv[MAX_ARGS + 1];
	int argc;
	char strings[1024]; /* what argv points to */
	char out[8192];
	char err[8192];
};

/*
 * vparse runs options_parse on "rocmmemd" followed by the NULL-terminated arguments in ap.
 * With fresh_getopt it first resets glibc's getopt completely (optind = 0), so that one case
 * cannot leak getopt state into the next whatever options_parse does.
 */
/* keep copies an option string into the run's own buffer (NULL stays NULL). */
static char *keep(char *buf, size_t len, const char *s)
{
	if (!s)
		return NULL;
	assert_true(strlen(s) < len);
	return memcpy(buf, s, strlen(s) + 1);
}

static int vparse(struct run *r, bool fresh_getopt, va_list ap)
{
	const char *arg;
	FILE *out, *err;

	size_t used = 0;

	memset(r, 0, sizeof(*r));
	arg = "rocmmemd";
	do {
		size_t n = strlen(arg) + 1;

		assert_true(r->argc < MAX_ARGS);
		assert_true(used + n <= sizeof(r->strings));
		r->argv[r->argc++] = memcpy(r->strings + used, arg, n);
		used += n;
	} while ((arg = va_arg(ap, const char *)) != NULL);
	if (fresh_getopt) {
		char name[] = "reset";
		char *argv[] = {name, NULL};

		optind = 0;
		assert_int_equal(getopt(1, argv, ""), -1);
	}
	out = fmemopen(r->out, sizeof(r->out) - 1, "w");
	err = fmemopen(r->err, sizeof(r->err) - 1, "w");
	assert_non_null(out);
	assert_non_null(err);
	r->rc = options_parse(r->argc, r->argv, &r->cl, out, err);
	fclose(out);
	fclose(err);
	if (r->rc == 0) {
		r->opts = r->cl.flags;
		r->opts.socket_path =
		    keep(r->socket_path, sizeof(r->socket_path), r->cl.flags.socket_path);
		r->opts.backend = keep(r->backend, sizeof(r->backend), r->cl.flags.backend);
		r->opts.sharing = keep(r->sharing, sizeof(r->sharing), r->cl.flags.sharing);
		r->opts.metrics_textfile = keep(r->metrics_textfile, sizeof(r->metrics_textfile),
						r->cl.flags.metrics_textfile);
		r->has_config = r->cl.config_path != NULL;
		if (r->has_config)
			snprintf(r->config_path, sizeof(r->config_path), "%s", r->cl.config_path);
		options_free(&r->cl.flags);
	}
	return r->rc;
}

static int parse(struct run *r, ...)
{
	va_list ap;
	int rc;

	va_start(ap, r);
	rc = vparse(r, true, ap);
	va_end(ap);
	return rc;
}

/* parse_again is parse relying on options_parse alone to reset getopt. */
static int parse_again(struct run *r, ...)
{
	va_list ap;
	int rc;

	va_start(ap, r);
	rc = vparse(r, false, ap);
	va_end(ap);
	return rc;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* expect_usage_error checks a rejected command line: -EINVAL, a message on err, none on out. */
static void expect_usage_error(struct run *r, const char *needle)
{
	assert_int_equal(r->rc, -EINVAL);
	assert_string_equal(r->out, "");
	assert_true(strncmp(r->err, "rocmmemd: ", 10) == 0);
	assert_contains(r->err, needle);
	assert_true(r->err[strlen(r->err) - 1] == '\n');
}

static void test_defaults(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, NULL), 0);
	assert_null(r.opts.socket_path);
	assert_null(r.opts.backend); /* not given: the default applies when sources merge */
	assert_int_equal(r.opts.set, 0);
	assert_false(r.opts.devices.has_budget);
	assert_false(r.opts.devices.has_headroom);
	assert_int_equal(r.opts.log_level, LOG_LEVEL_INFO);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "");
}

static void test_socket(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, "--socket", "/tmp/a.sock", NULL), 0);
	assert_string_equal(r.opts.socket_path, "/tmp/a.sock");
	assert_int_equal(parse(&r, "-s", "/tmp/b.sock", NULL), 0);
	assert_string_equal(r.opts.socket_path, "/tmp/b.sock");
	assert_int_equal(parse(&r, "--socket=/tmp/c.sock", NULL), 0);
	assert_string_equal(r.opts.socket_path, "/tmp/c.sock");
	assert_int_equal(parse(&r, "-s/tmp/d.sock", NULL), 0);
	assert_string_equal(r.opts.socket_path, "/tmp/d.sock");
	assert_string_equal(r.err, "");

	parse(&r, "--socket", "", NULL);
	expect_usage_error(&r, "invalid --socket '': needs a non-empty path");
	parse(&r, "--socket=", NULL);
	expect_usage_error(&r, "--socket");
}

static void test_budget_headroom(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, "--budget", "1G", NULL), 0);
	assert_true(r.opts.devices.has_budget);
	assert_true(r.opts.devices.budget == GiB);
	assert_false(r.opts.devices.has_headroom);

	assert_int_equal(parse(&r, "--budget=1.5GiB", "--headroom", "512M", NULL), 0);
	assert_true(r.opts.devices.has_budget);
	assert_true(r.opts.devices.budget == GiB + GiB / 2);
	assert_true(r.opts.devices.has_headroom);
	assert_true(r.opts.devices.headroom == 512 * MiB);

	/* No headroom at all is a valid choice; the last --budget counts. */
	assert_int_equal(parse(&r, "--headroom", "0", "--budget", "1G", "--budget", "2G", NULL), 0);
	assert_true(r.opts.devices.has_headroom);
	assert_true(r.opts.devices.headroom == 0);
	assert_true(r.opts.devices.budget == 2 * GiB);
}

static void test_bad_sizes(void **state)
{
	struct run r;

	(void)state;
	parse(&r, "--budget", "1.5", NULL);
	expect_usage_error(&r, "invalid --budget '1.5': expected bytes");
	parse(&r, "--budget", "4GB", NULL);
	expect_usage_error(&r, "--budget");
	parse(&r, "--budget=", NULL);
	expect_usage_error(&r, "invalid --budget '': expected bytes");
	parse(&r, "--headroom", "lots", NULL);
	expect_usage_error(&r, "invalid --headroom 'lots'");
	parse(&r, "--headroom", "-1G", NULL);
	expect_usage_error(&r, "--headroom");
	parse(&r, "--budget", "16777216T", NULL);
	expect_usage_error(&r, "too large");
	parse(&r, "--budget", "0", NULL);
	expect_usage_error(&r, "must be larger than 0");
	parse(&r, "--budget", "0G", NULL);
	expect_usage_error(&r, "must be larger than 0");
}

static void test_backend(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, "--backend", "host", NULL), 0);
	assert_string_equal(r.opts.backend, "host");
	assert_int_equal(parse(&r, "-b", "auto", NULL), 0);
	assert_string_equal(r.opts.backend, "auto");

	assert_int_equal(parse(&r, "--backend", "cuda", NULL), 0);
	assert_string_equal(r.opts.backend, "cuda");
	assert_int_equal(parse(&r, "--backend", "hip", NULL), 0);
	assert_string_equal(r.opts.backend, "hip");
	parse(&r, "--backend", "rocm", NULL);
	expect_usage_error(&r, "invalid --backend 'rocm': unknown backend");
	parse(&r, "--backend", "", NULL);
	expect_usage_error(&r, "invalid --backend '': unknown backend");
	parse(&r, "--backend", "Host", NULL);
	expect_usage_error(&r, "(choose from auto, hip, cuda, host)");
}

static void test_sharing(void **state)
{
	static const char *const methods[] = {"auto", "vmm", "dmabuf", "ipc"};
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, NULL), 0);
	assert_null(r.opts.sharing); /* the default, "auto", applies when sources merge */
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		assert_int_equal(parse(&r, "--sharing", methods[i], NULL), 0);
		assert_string_equal(r.opts.sharing, methods[i]);
	}
	parse(&r, "--sharing", "nvlink", NULL);
	expect_usage_error(&r, "invalid --sharing 'nvlink': unknown sharing method");
	parse(&r, "--sharing", NULL);
	expect_usage_error(&r, "'--sharing' needs a value");
}

static void test_log_level(void **state)
{
	static const struct {
		const char *text;
		enum log_level level;
	} levels[] = {
	    {"error", LOG_LEVEL_ERROR}, {"warn", LOG_LEVEL_WARN},   {"warning", LOG_LEVEL_WARN},
	    {"info", LOG_LEVEL_INFO},	{"debug", LOG_LEVEL_DEBUG},
	};
	struct run r;

	(void)state;
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		assert_int_equal(parse(&r, "--log-level", levels[i].text, NULL), 0);
		assert_int_equal(r.opts.log_level, levels[i].level);
	}
	assert_int_equal(parse(&r, "-l", "debug", NULL), 0);
	assert_int_equal(r.opts.log_level, LOG_LEVEL_DEBUG);
	assert_int_equal(parse(&r, "-lerror", NULL), 0);
	assert_int_equal(r.opts.log_level, LOG_LEVEL_ERROR);

	parse(&r, "--log-level", "loud", NULL);
	expect_usage_error(&r, "invalid --log-level 'loud'");
	parse(&r, "--log-level", "DEBUG", NULL);
	expect_usage_error(&r, "'DEBUG'");
}

static void test_missing_value(void **state)
{
	struct run r;

	(void)state;
	parse(&r, "--budget", NULL);
	expect_usage_error(&r, "option '--budget' needs a value");
	parse(&r, "--headroom", NULL);
	expect_usage_error(&r, "option '--headroom' needs a value");
	parse(&r, "--log-level", NULL);
	expect_usage_error(&r, "option '--log-level' needs a value");
	parse(&r, "--socket", NULL);
	expect_usage_error(&r, "option '--socket' needs a value");
	parse(&r, "-s", NULL);
	expect_usage_error(&r, "option '-s' needs a value");
	parse(&r, "--budget", "1G", "-b", NULL);
	expect_usage_error(&r, "option '-b' needs a value");
}

static void test_unknown_option(void **state)
{
	struct run r;

	(void)state;
	parse(&r, "--bogus", NULL);
	expect_usage_error(&r, "unknown option '--bogus'");
	assert_contains(r.err, "Try 'rocmmemd --help'.");
	parse(&r, "-x", NULL);
	expect_usage_error(&r, "unknown option '-x'");
	parse(&r, "--budget", "1G", "--budgets", "2G", NULL);
	expect_usage_error(&r, "unknown option '--budgets'");
	/* A flag given a value it does not take. */
	parse(&r, "--help=yes", NULL);
	expect_usage_error(&r, "--help");
}

/* An unknown letter inside a group of short options is named, not the program. */
static void test_unknown_option_in_group(void **state)
{
	struct run r;

	(void)state;
	parse(&r, "-xV", NULL);
	expect_usage_error(&r, "-x");
	assert_true(strstr(r.err, "'rocmmemd'") == NULL);
}

static void test_stray_argument(void **state)
{
	struct run r;

	(void)state;
	parse(&r, "foo", NULL);
	expect_usage_error(&r, "unexpected argument 'foo'");
	parse(&r, "--budget", "1G", "foo", NULL);
	expect_usage_error(&r, "unexpected argument 'foo'");
	/* getopt moves operands to the end: one before the options is found as well. */
	parse(&r, "bar", "--budget", "1G", NULL);
	expect_usage_error(&r, "unexpected argument 'bar'");
	parse(&r, "--", "--budget", NULL);
	expect_usage_error(&r, "unexpected argument '--budget'");
}

static void test_help_version(void **state)
{
	char want[128];
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, "--help", NULL), 1);
	assert_true(strncmp(r.out, "Usage: rocmmemd", 15) == 0);
	assert_contains(r.out, "--budget [DEVICE:]SIZE");
	assert_contains(r.out, "--headroom [DEVICE:]SIZE");
	assert_contains(r.out, "--config FILE");
	assert_contains(r.out, "--check-config");
	assert_contains(r.out, "auto, hip, cuda, host");
	assert_string_equal(r.err, "");
	assert_int_equal(parse(&r, "-h", NULL), 1);
	assert_true(strncmp(r.out, "Usage: rocmmemd", 15) == 0);
	/* Help wins over options after it. */
	assert_int_equal(parse(&r, "--help", "--budget", "nonsense", NULL), 1);
	assert_string_equal(r.err, "");

	snprintf(want, sizeof(want), "rocmmemd %s (protocol %u)\n", ROCMMEM_VERSION_STRING,
		 ROCMMEM_PROTOCOL_VERSION);
	assert_int_equal(parse(&r, "--version", NULL), 1);
	assert_string_equal(r.out, want);
	assert_string_equal(r.err, "");
	assert_int_equal(parse(&r, "-V", NULL), 1);
	assert_string_equal(r.out, want);
}

/*
 * options_parse resets getopt itself: a second parse is not influenced by the first. The first
 * run's arguments stay in place while the next one parses (getopt may keep pointers into them).
 */
static void test_parse_twice(void **state)
{
	struct run a, b;

	(void)state;
	assert_int_equal(parse(&a, "--budget", "1G", "--socket", "/tmp/a", NULL), 0);
	assert_int_equal(parse_again(&b, NULL), 0);
	assert_null(b.opts.socket_path);
	assert_false(b.opts.devices.has_budget);

	assert_int_equal(parse(&a, "-s", "/tmp/a", "-V", NULL), 1);
	assert_int_equal(parse_again(&b, "-l", "debug", NULL), 0);
	assert_int_equal(b.opts.log_level, LOG_LEVEL_DEBUG);
	assert_null(b.opts.socket_path);
	assert_string_equal(b.out, "");

	assert_int_equal(parse(&a, "--bogus", NULL), -EINVAL);
	assert_int_equal(parse_again(&b, "--budget", "2G", NULL), 0);
	assert_true(b.opts.devices.budget == 2 * GiB);
	assert_string_equal(b.err, "");
}

/*
 * A parse that stopped inside a group of short options ("-hV" stops after -h) must not leave
 * the rest of the group for the next parse. The first run's arguments stay in place so that a
 * stale getopt pointer into them reads defined memory.
 */
static void test_parse_after_group(void **state)
{
	struct run first, second;

	(void)state;
	assert_int_equal(parse(&first, "-hV", NULL), 1);
	assert_true(strncmp(first.out, "Usage: rocmmemd", 15) == 0);
	parse_again(&second, "--budget", "1G", NULL);
	assert_string_equal(second.out, "");
	assert_int_equal(second.rc, 0);
	assert_true(second.opts.devices.has_budget);
}

static void test_evict_deadline(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, NULL), 0);
	assert_true(r.opts.evict_deadline_ms == OPTIONS_EVICT_DEADLINE_MS);
	assert_int_equal(parse(&r, "--evict-deadline", "5", NULL), 0);
	assert_true(r.opts.evict_deadline_ms == 5000);
	assert_int_equal(parse(&r, "--evict-deadline", "0.25", NULL), 0);
	assert_true(r.opts.evict_deadline_ms == 250);
	assert_int_equal(parse(&r, "--evict-deadline", "3600", NULL), 0);
	assert_true(r.opts.evict_deadline_ms == 3600000);
	static const char *const bad[] = {"0", "-1", "3601", "soon", "", "1e99", "5s5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		parse(&r, "--evict-deadline", bad[i], NULL);
		expect_usage_error(&r, "invalid --evict-deadline");
	}
}

/* pair says whether classes a and b exclude each other in x. */
static bool pair(const struct class_exclusion *x, const char *a, const char *b)
{
	unsigned ca, cb;

	assert_int_equal(model_class_parse(a, &ca), 0);
	assert_int_equal(model_class_parse(b, &cb), 0);
	assert_int_equal(class_exclusion_conflict(x, ca, cb), class_exclusion_conflict(x, cb, ca));
	return class_exclusion_conflict(x, ca, cb);
}

static void test_exclusive(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, NULL), 0);
	assert_false(class_exclusion_any(&r.opts.exclusive_all));
	assert_int_equal(parse(&r, "--exclusive", "transformer,vae", NULL), 0);
	assert_true(pair(&r.opts.exclusive_all, "transformer", "vae"));
	assert_false(pair(&r.opts.exclusive_all, "transformer", "transformer"));
	assert_false(pair(&r.opts.exclusive_all, "transformer", "text_encoder"));
	assert_false(class_exclusion_any(&r.opts.exclusive[0]));

	/* Repeated groups stay separate rules: no pair across them. */
	assert_int_equal(parse(&r, "--exclusive", "transformer,vae", "--exclusive",
			       "text_encoder,image_encoder", NULL),
			 0);
	assert_true(pair(&r.opts.exclusive_all, "transformer", "vae"));
	assert_true(pair(&r.opts.exclusive_all, "text_encoder", "image_encoder"));
	assert_false(pair(&r.opts.exclusive_all, "transformer", "text_encoder"));
	assert_false(pair(&r.opts.exclusive_all, "vae", "image_encoder"));
	char text[256];
	class_exclusion_format(&r.opts.exclusive_all, text, sizeof(text));
	assert_string_equal(text, "transformer/vae, text_encoder/image_encoder");
	class_exclusion_format(&r.opts.exclusive_all, text, 8); /* truncated, still terminated */
	assert_string_equal(text, "transfo");

	/* Three classes: every two of them. A device prefix applies to that device alone. */
	assert_int_equal(parse(&r, "--exclusive", "1:transformer,vae,other", NULL), 0);
	assert_false(class_exclusion_any(&r.opts.exclusive_all));
	assert_true(pair(&r.opts.exclusive[1], "transformer", "other"));
	assert_true(pair(&r.opts.exclusive[1], "vae", "other"));
	assert_true(pair(&r.opts.exclusive[1], "vae", "transformer"));
	assert_false(pair(&r.opts.exclusive[1], "vae", "image_encoder"));
	assert_false(class_exclusion_any(&r.opts.exclusive[0]));

	parse(&r, "--exclusive", "transformer,unet", NULL);
	expect_usage_error(&r, "unknown class 'unet'");
	static const char *const bad[] = {
	    "transformer",
	    "transformer,transformer",
	    "",
	    ",",
	    "-1:transformer,vae",
	    "x:transformer,vae",
	    "99999999999:transformer,vae",
	    ":transformer,vae",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		parse(&r, "--exclusive", bad[i], NULL);
		expect_usage_error(&r, "invalid --exclusive");
	}
	char lng[400];
	memset(lng, 'a', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	parse(&r, "--exclusive", lng, NULL);
	expect_usage_error(&r, "invalid --exclusive");
}

static void test_metrics_file(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(parse(&r, NULL), 0);
	assert_null(r.opts.metrics_textfile);
	assert_true(r.opts.metrics_interval_ms == 15000);
	assert_int_equal(parse(&r, "--metrics-textfile", "/var/lib/node/rocmmemd.prom", NULL), 0);
	assert_string_equal(r.opts.metrics_textfile, "/var/lib/node/rocmmemd.prom");
	assert_true(r.opts.metrics_interval_ms == 15000);
	assert_int_equal(parse(&r, "--metrics-textfile", "x.prom", "--metrics-interval", "1", NULL),
			 0);
	assert_string_equal(r.opts.metrics_textfile, "x.prom");
	assert_true(r.opts.metrics_interval_ms == 1000);
	/* The interval may come first; fractions are allowed. */
	assert_int_equal(
	    parse(&r, "--metrics-interval", "2.5", "--metrics-textfile", "d/x.prom", NULL), 0);
	assert_true(r.opts.metrics_interval_ms == 2500);
	assert_int_equal(
	    parse(&r, "--metrics-textfile", "x.prom", "--metrics-interval", "3600", NULL), 0);
	assert_true(r.opts.metrics_interval_ms == 3600000);

	static const char *const bad_paths[] = {
	    "", ".prom", "dir/.prom", "x.prom/", "x.txt", "x.prom.tmp", "x.PROM", "x.pro", "prom",
	};
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		parse(&r, "--metrics-textfile", bad_paths[i], NULL);
		expect_usage_error(&r, "invalid --metrics-textfile");
		assert_contains(r.err, "node_exporter");
	}
	static const char *const bad_intervals[] = {
	    "0", "0.999", "-1", "3600.001", "3601", "soon", "", "1e99", "5s5", "inf",
	};
	for (size_t i = 0; i < sizeof(bad_intervals) / sizeof(bad_intervals[0]); i++) {
		parse(&r, "--metrics-textfile", "x.prom", "--metrics-interval", bad_intervals[i],
		      NULL);
		expect_usage_error(&r, "invalid --metrics-interval");
	}
	/* An interval without a file to write is refused once the sources are combined. */
	{
		struct options eff;
		char why[256];

		assert_int_equal(parse(&r, "--metrics-interval", "5", NULL), 0);
		assert_int_equal(options_merge(&eff, &r.opts, NULL), 0);
		assert_int_equal(options_validate(&eff, why, sizeof(why)), -EINVAL);
		assert_contains(why, "without a metrics textfile");
		options_free(&eff);
	}
	parse(&r, "--metrics-textfile", NULL);
	expect_usage_error(&r, "needs a value");
	assert_int_equal(parse(&r, "--help", NULL), 1);
	assert_contains(r.out, "--metrics-textfile PATH");
	assert_contains(r.out, "--metrics-interval SECONDS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),	    cmocka_unit_test(test_socket),
	    cmocka_unit_test(test_budget_headroom), cmocka_unit_test(test_bad_sizes),
	    cmocka_unit_test(test_backend),	    cmocka_unit_test(test_sharing),
	    cmocka_unit_test(test_log_level),	    cmocka_unit_test(test_missing_value),
	    cmocka_unit_test(test_unknown_option),  cmocka_unit_test(test_unknown_option_in_group),
	    cmocka_unit_test(test_stray_argument),  cmocka_unit_test(test_help_version),
	    cmocka_unit_test(test_parse_twice),	    cmocka_unit_test(test_parse_after_group),
	    cmocka_unit_test(test_evict_deadline),  cmocka_unit_test(test_exclusive),
	    cmocka_unit_test(test_metrics_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
