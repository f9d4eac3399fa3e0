/* SPDX-License-Identifier: MIT */
/* test_bus.c: the event bus: every subscriber told, in order; a sentence formatted only when one
 * would use it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "service/bus.h"

struct seen {
	unsigned calls;
	unsigned order; /* the call's rank among every subscriber's calls */
	char line[64];	/* the last sentence, or "(null)" */
	enum log_level level;
	enum log_level wants_at_most; /* wants_line: at or below this level */
};

static unsigned calls_so_far;

static void on_event(void *ctx, const struct bus_event *e, const char *line, uint64_t mono_ms,
		     uint64_t real_ms)
{
	struct seen *s = ctx;

	(void)mono_ms, (void)real_ms;
	s->calls++;
	s->order = ++calls_so_far;
	s->level = e->level;
	strncpy(s->line, line ? line : "(null)", sizeof(s->line) - 1);
}

static bool wants_line(void *ctx, const struct bus_event *e)
{
	const struct seen *s = ctx;

	return e->level <= s->wants_at_most;
}

static void test_formats_only_when_wanted(void **state)
{
	struct seen picky = {.wants_at_most = LOG_LEVEL_WARN}, blind = {0};
	struct bus_subscriber a = {.ctx = &picky, .event = on_event, .wants_line = wants_line};
	struct bus_subscriber b = {.ctx = &blind, .event = on_event}; /* never wants one */
	struct bus_event e = {.type = BUS_LEASE_GRANTED};
	struct bus bus;

	(void)state;
	bus_init(&bus, NULL);
	assert_int_equal(bus_subscribe(&bus, &a), 0);
	assert_int_equal(bus_subscribe(&bus, &b), 0);
	calls_so_far = 0;
	/* A debug event nobody logs: everyone told, with no sentence. */
	bus_emitf(&bus, &e, LOG_LEVEL_DEBUG, "granted lease %d", 7);
	assert_int_equal(picky.calls, 1);
	assert_int_equal(blind.calls, 1);
	assert_string_equal(picky.line, "(null)");
	assert_string_equal(blind.line, "(null)");
	assert_int_equal(picky.level, LOG_LEVEL_DEBUG);
	assert_true(picky.order < blind.order); /* in the order they subscribed */
	/* A warning one of them uses: formatted once, given to both. */
	bus_emitf(&bus, &e, LOG_LEVEL_WARN, "denied %s", "8 GiB");
	assert_string_equal(picky.line, "denied 8 GiB");
	assert_string_equal(blind.line, "denied 8 GiB");
	assert_int_equal(blind.level, LOG_LEVEL_WARN);
	/* What a caller with costly arguments asks first. */
	assert_false(bus_wants_line(&bus, &e, LOG_LEVEL_INFO));
	assert_int_equal(e.level, LOG_LEVEL_INFO);
	assert_true(bus_wants_line(&bus, &e, LOG_LEVEL_ERROR));
	/* bus_emit passes its line as it is. */
	bus_emit(&bus, &e, LOG_LEVEL_DEBUG, "as given");
	assert_string_equal(blind.line, "as given");
	assert_int_equal(blind.calls, 3);
}

static void test_subscribers_are_bounded(void **state)
{
	struct seen s = {0};
	struct bus_subscriber sub = {.ctx = &s, .event = on_event};
	struct bus bus;

	(void)state;
	bus_init(&bus, NULL);
	for (unsigned i = 0; i < BUS_MAX_SUBSCRIBERS; i++)
		assert_int_equal(bus_subscribe(&bus, &sub), 0);
	assert_int_equal(bus_subscribe(&bus, &sub), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_formats_only_when_wanted),
	    cmocka_unit_test(test_subscribers_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
