/* SPDX-License-Identifier: MIT */
/* test_device.c: unit tests of daemon/device: budget computation and lease accounting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "state/device.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define UNTOUCHED ((uint64_t)0x5a5a5a5a5a5a5a5aull)

static struct backend_device make_info(uint64_t total, uint64_t default_headroom)
{
	struct backend_device info;

	memset(&info, 0, sizeof(info));
	snprintf(info.name, sizeof(info.name), "%s", "Test GPU");
	info.total_bytes = total;
	info.granule = 2 * MiB;
	info.handle_kind = 1;
	info.default_headroom = default_headroom;
	return info;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("'%s' does not contain '%s'", haystack, needle);
}

static void test_budget_flag_wins(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct budget_config cfg = {
	    .budget = 8 * GiB, .has_budget = true, .headroom = 4 * GiB, .has_headroom = true};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 8 * GiB);
	/* The whole device may be given away, but not more. */
	cfg.budget = 16 * GiB;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 16 * GiB);
}

static void test_budget_too_large(void **state)
{
	struct backend_device info = make_info(8 * GiB, GiB);
	struct budget_config cfg = {.budget = 16 * GiB, .has_budget = true};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_true(budget == UNTOUCHED);
	assert_contains(why, "16 GiB");
	assert_contains(why, "8 GiB");
	assert_contains(why, "Test GPU");

	cfg.budget = 8 * GiB + 1;
	why[0] = '\0';
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_true(budget == UNTOUCHED);
	assert_contains(why, "8 GiB");
}

static void test_budget_reason_truncated(void **state)
{
	struct backend_device info = make_info(8 * GiB, GiB);
	struct budget_config cfg = {.budget = 16 * GiB, .has_budget = true};
	uint64_t budget = UNTOUCHED;
	char why[12];

	(void)state;
	memset(why, 'x', sizeof(why));
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_int_equal(strlen(why), sizeof(why) - 1);
}

static void test_headroom(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct budget_config cfg = {.headroom = 4 * GiB, .has_headroom = true};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 12 * GiB);
	/* An explicit 0 is not the default headroom. */
	cfg.headroom = 0;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 16 * GiB);

	budget = UNTOUCHED;
	cfg.headroom = 16 * GiB;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_contains(why, "headroom 16 GiB");
	assert_contains(why, "Test GPU");
	cfg.headroom = 32 * GiB;
	why[0] = '\0';
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_contains(why, "32 GiB");
	assert_contains(why, "16 GiB");
	assert_true(budget == UNTOUCHED);
}

static void test_default_headroom(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB + 512 * MiB);
	struct budget_config cfg = {0};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 16 * GiB - GiB - 512 * MiB);
	/* has_headroom false: the headroom value is ignored. */
	cfg.headroom = 8 * GiB;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 16 * GiB - GiB - 512 * MiB);

	budget = UNTOUCHED;
	info.default_headroom = 16 * GiB;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_true(budget == UNTOUCHED);
}

static void test_budget_rounding(void **state)
{
	struct backend_device info = make_info(10 * GiB + 3 * MiB, 0);
	struct budget_config cfg = {0};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	/* Rounded down to the granule, never up. */
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 10 * GiB + 2 * MiB);
	cfg.has_budget = true;
	cfg.budget = 5 * MiB + 123;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 4 * MiB);
	cfg.budget = 2 * MiB;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 2 * MiB);
	cfg.has_budget = false;
	cfg.has_headroom = true;
	cfg.headroom = 1;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), 0);
	assert_true(budget == 10 * GiB + 2 * MiB);
}

static void test_budget_below_granule(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct budget_config cfg = {.budget = 2 * MiB - 1, .has_budget = true};
	uint64_t budget = UNTOUCHED;
	char why[256] = "";

	(void)state;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_true(budget == UNTOUCHED);
	assert_contains(why, "2 MiB");
	cfg.budget = 0;
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);

	/* Headroom that leaves less than a granule. */
	cfg.has_budget = false;
	cfg.has_headroom = true;
	cfg.headroom = 16 * GiB - MiB;
	why[0] = '\0';
	assert_int_equal(device_budget(&cfg, &info, &budget, why, sizeof(why)), -EINVAL);
	assert_true(budget == UNTOUCHED);
	assert_contains(why, "granule");
}

static void test_init(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct device dev;

	(void)state;
	memset(&dev, 0xff, sizeof(dev));
	device_init(&dev, 3, &info, 12 * GiB);
	assert_int_equal(dev.index, 3);
	assert_string_equal(dev.name, "Test GPU");
	assert_int_equal(dev.handle_kind, 1);
	assert_true(dev.granule == 2 * MiB);
	assert_true(dev.total == 16 * GiB);
	assert_true(dev.budget == 12 * GiB);
	assert_true(dev.headroom == 4 * GiB);
	assert_true(dev.leased == 0);
	assert_true(dev.reserved == 0);
	assert_true(dev.leases == 0);
	assert_true(queue_empty(&dev.queue));
	assert_null(queue_head(&dev.queue));
	assert_true(device_free(&dev) == 12 * GiB);
}

static void test_accounting(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct device dev;

	(void)state;
	device_init(&dev, 0, &info, 8 * GiB);
	assert_true(device_fits(&dev, 8 * GiB));
	assert_false(device_fits(&dev, 8 * GiB + 1));
	assert_false(device_fits(&dev, UINT64_MAX));
	assert_true(device_fits(&dev, 0));

	device_charge(&dev, 2 * GiB);
	assert_true(dev.leased == 2 * GiB);
	assert_true(dev.leases == 1);
	assert_true(device_free(&dev) == 6 * GiB);
	device_charge(&dev, 4 * GiB);
	assert_true(dev.leases == 2);
	assert_true(device_free(&dev) == 2 * GiB);
	assert_true(device_fits(&dev, 2 * GiB));
	assert_false(device_fits(&dev, 2 * GiB + 1));

	/* Reservations count against the budget too. */
	dev.reserved = GiB;
	assert_true(device_free(&dev) == GiB);
	assert_false(device_fits(&dev, 2 * GiB));
	dev.reserved = 0;

	device_charge(&dev, 2 * GiB);
	assert_true(device_free(&dev) == 0);
	assert_false(device_fits(&dev, 1));
	assert_true(device_fits(&dev, 0));

	device_uncharge(&dev, 4 * GiB);
	assert_true(dev.leased == 4 * GiB);
	assert_true(dev.leases == 2);
	assert_true(device_free(&dev) == 4 * GiB);
	device_uncharge(&dev, 2 * GiB);
	device_uncharge(&dev, 2 * GiB);
	assert_true(dev.leased == 0);
	assert_true(dev.leases == 0);
	assert_true(device_free(&dev) == 8 * GiB);
	/* Accounting never touches the budget. */
	assert_true(dev.budget == 8 * GiB);
}

static void test_free_never_underflows(void **state)
{
	struct backend_device info = make_info(16 * GiB, GiB);
	struct device dev;

	(void)state;
	device_init(&dev, 0, &info, 8 * GiB);
	device_charge(&dev, 8 * GiB - 2 * MiB);
	/* A reservation that pushes the total use over the budget. */
	dev.reserved = 4 * MiB;
	assert_true(device_free(&dev) == 0);
	assert_false(device_fits(&dev, 1));
	assert_false(device_fits(&dev, 2 * MiB));
	/* A budget lowered below what is already leased. */
	dev.reserved = 0;
	dev.budget = GiB;
	assert_true(device_free(&dev) == 0);
	assert_false(device_fits(&dev, 2 * MiB));
	dev.budget = 8 * GiB;
	assert_true(device_free(&dev) == 2 * MiB);
	device_uncharge(&dev, 8 * GiB - 2 * MiB);
	assert_true(device_free(&dev) == 8 * GiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_budget_flag_wins),
	    cmocka_unit_test(test_budget_too_large),
	    cmocka_unit_test(test_budget_reason_truncated),
	    cmocka_unit_test(test_headroom),
	    cmocka_unit_test(test_default_headroom),
	    cmocka_unit_test(test_budget_rounding),
	    cmocka_unit_test(test_budget_below_granule),
	    cmocka_unit_test(test_init),
	    cmocka_unit_test(test_accounting),
	    cmocka_unit_test(test_free_never_underflows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
