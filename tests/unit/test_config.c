/* SPDX-License-Identifier: MIT */
/*
 * test_config.c: unit tests of daemon/config and the settings half of daemon/options: reading
 * configuration files, every kind of bad value, precedence, and printing what applies.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/config.h"
#include "app/options_merge.h"
#include "app/options_set.h"
#include "policy/policy.h"

/* Model classes as on the wire. */
#define TRANSFORMER_CLASS 1
#define VAE_CLASS 2

#define GiB ((uint64_t)1 << 30)
#define MiB ((uint64_t)1 << 20)

static char dir[] = "/tmp/rocmmem-config-XXXXXX";
static char path[sizeof(dir) + 32];

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/rocmmemd.conf", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return rmdir(dir);
}

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* load writes text to the file and loads it; the error text goes to why. */
static int load(const char *text, struct options *o, char *why, size_t len)
{
	write_file(text);
	why[0] = '\0';
	return config_load(path, o, why, len);
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* expect_error loads text and checks it is refused with every needle in the message. */
static void expect_error(const char *text, unsigned line, const char *needle)
{
	struct options o;
	char why[1024], where[sizeof(path) + 16];

	if (load(text, &o, why, sizeof(why)) != -EINVAL) {
		options_free(&o);
		fail_msg("accepted: '%s' (%s)", text, why);
	}
	snprintf(where, sizeof(where), "%s:%u: ", path, line);
	assert_contains(why, where);
	assert_contains(why, needle);
	/* Refused files own nothing any more (ASan would see a leak otherwise). */
	assert_null(o.socket_path);
}

static void test_every_key(void **state)
{
	struct options o;
	char why[512];

	(void)state;
	assert_int_equal(load("; a comment\n"
			      "# another\n"
			      "[daemon]\n"
			      "socket = /run/x/rocmmemd.sock\n"
			      "backend = host\n"
			      "sharing = dmabuf ; inline comment\n"
			      "log_level = debug\n"
			      "shutdown_timeout = 2.5\n"
			      "restart_grace = 30\n"
			      "\n"
			      "[policy]\n"
			      "evict_deadline = 7, vae: 2.5, transformer:40\n"
			      "max_hold = 600, vae:off, transformer:0.5\n"
			      "backfill = off\n"
			      "backfill_passes = 3\n"
			      "backfill_wait = 1.5\n"
			      "exclusive = transformer, vae\n"
			      "exclusive = 1:text_encoder,image_encoder\n"
			      "[limits]\n"
			      "clients = 10\n"
			      "pending = 3\n"
			      "leases = 100\n"
			      "queued = 256K\n"
			      "clients_per_uid = 7\n"
			      "bytes_per_uid = 1G\n"
			      "message_size = 4K\n"
			      "handshake_timeout = 0.5\n"
			      "subscribers = 9\n"
			      "[access]\n"
			      "socket_user = root\n"
			      "socket_group = 0\n"
			      "socket_mode = 0640\n"
			      "allowed_users = root, 65534\n"
			      "allowed_groups = root,4321\n"
			      "admin_group = 1234\n"
			      "[metrics]\n"
			      "textfile = /var/lib/node/r.prom\n"
			      "interval = 30\n"
			      "[devices]\n"
			      "budget = 8G\n"
			      "gpu_pool = 512M\n"
			      "gpu_pool_idle = 2.5\n"
			      "gpu_pool_fds = 12\n"
			      "[device 2]\n"
			      "headroom = 1G\n"
			      "exclusive = other,vae\n",
			      &o, why, sizeof(why)),
			 0);
	assert_string_equal(o.socket_path, "/run/x/rocmmemd.sock");
	assert_string_equal(o.backend, "host");
	assert_string_equal(o.sharing, "dmabuf");
	assert_int_equal(o.log_level, LOG_LEVEL_DEBUG);
	assert_true(o.shutdown_timeout_ms == 2500);
	assert_true(o.restart_grace_ms == 30000);
	assert_true(o.evict_deadline_ms == 7000);
	assert_true(o.evict_deadline_class_ms[VAE_CLASS] == 2500);
	assert_true(o.evict_deadline_class_ms[TRANSFORMER_CLASS] == 40000);
	assert_true(o.evict_deadline_class_ms[0] == 0); /* other: the default */
	assert_true(o.max_hold_ms == 600000);
	assert_true(o.max_hold_class_ms[VAE_CLASS] == POLICY_CLASS_OFF);
	assert_true(o.max_hold_class_ms[TRANSFORMER_CLASS] == 500);
	assert_false(o.backfill);
	assert_int_equal(o.backfill_passes, 3);
	assert_true(o.backfill_wait_ms == 1500);
	assert_true(class_exclusion_conflict(&o.exclusive_all, 1, 2));	/* transformer, vae */
	assert_true(class_exclusion_conflict(&o.exclusive[1], 3, 4));	/* encoders, device 1 */
	assert_false(class_exclusion_conflict(&o.exclusive_all, 3, 4)); /* only on device 1 */
	assert_true(class_exclusion_conflict(&o.exclusive[2], 0, 2));
	assert_int_equal(o.max_clients, 10);
	assert_int_equal(o.max_pending, 3);
	assert_int_equal(o.max_leases, 100);
	assert_true(o.max_queued == 256 << 10);
	assert_int_equal(o.max_clients_per_uid, 7);
	assert_true(o.max_bytes_per_uid == GiB);
	assert_int_equal(o.max_message, 4096);
	assert_true(o.handshake_timeout_ms == 500);
	assert_int_equal(o.max_subscribers, 9);
	assert_int_equal(o.socket_uid, 0);
	assert_int_equal(o.socket_gid, 0);
	assert_int_equal(o.socket_mode, 0640);
	assert_int_equal(o.allowed_uids.n, 2);
	assert_int_equal(o.allowed_uids.ids[0], 0);
	assert_int_equal(o.allowed_uids.ids[1], 65534);
	assert_int_equal(o.allowed_gids.n, 2);
	assert_int_equal(o.allowed_gids.ids[1], 4321);
	assert_int_equal(o.admin_gid, 1234);
	assert_string_equal(o.metrics_textfile, "/var/lib/node/r.prom");
	assert_true(o.metrics_interval_ms == 30000);
	assert_true(o.devices.has_budget && o.devices.budget == 8 * GiB);
	assert_true(o.gpu_pool == 512 * MiB);
	assert_true(o.gpu_pool_idle_ms == 2500);
	assert_true(o.gpu_pool_fds == 12);
	assert_true(o.device[2].has_headroom && o.device[2].headroom == GiB);
	assert_false(o.device[0].has_budget || o.device[0].has_headroom);
	assert_true(o.set == ((uint64_t)1 << OPTION_COUNT) - 1); /* every setting given */
	options_free(&o);
}

static void test_bad_files(void **state)
{
	(void)state;
	/* Unknown sections and keys, named with their line. */
	expect_error("[daemon]\nlog_level = info\n[deamon]\nsocket = /x\n", 4,
		     "[deamon]: unknown section");
	expect_error("[daemon]\nbudget = 1G\n", 2, "[daemon] budget: unknown key");
	expect_error("[device 0]\nsocket = /x\n", 2, "[device 0] socket: unknown key");
	expect_error("[device 16]\nbudget = 1G\n", 2, "unknown section");
	expect_error("[device -1]\nbudget = 1G\n", 2, "unknown section");
	expect_error("[device x]\nbudget = 1G\n", 2, "unknown section");
	expect_error("budget = 1G\n", 1, "[]: unknown section");
	/* Bad sizes, negatives, out of range, bad words. */
	expect_error("[devices]\nbudget = 4GB\n", 2, "[devices] budget = 4GB: expected bytes");
	expect_error("[devices]\nbudget = -1G\n", 2, "[devices] budget = -1G");
	expect_error("[devices]\nbudget = 0\n", 2, "must be larger than 0");
	expect_error("[devices]\nheadroom = lots\n", 2, "[devices] headroom = lots");
	expect_error("[devices]\nbudget = 99999999999T\n", 2, "too large");
	expect_error("[devices]\ngpu_pool = some\n", 2,
		     "[devices] gpu_pool = some: expected bytes");
	expect_error("[devices]\ngpu_pool = -1G\n", 2, "[devices] gpu_pool = -1G");
	expect_error("[devices]\ngpu_pool = 18446744073709551615\n", 2, "too large");
	expect_error("[devices]\ngpu_pool_idle = -1\n", 2, "[devices] gpu_pool_idle = -1");
	expect_error("[devices]\ngpu_pool_idle = 86401\n", 2, "from 0 to 86400");
	expect_error("[devices]\ngpu_pool_fds = many\n", 2, "[devices] gpu_pool_fds = many");
	expect_error("[devices]\ngpu_pool_fds = -1\n", 2, "[devices] gpu_pool_fds = -1");
	expect_error("[devices]\ngpu_pool_fds = 16777217\n", 2,
		     "[devices] gpu_pool_fds = 16777217");
	expect_error("[devices]\ngpu_pool_fds = 12x\n", 2, "[devices] gpu_pool_fds = 12x");
	expect_error("[limits]\nclients = 0\n", 2, "[limits] clients = 0: a whole number");
	expect_error("[limits]\npending = -3\n", 2, "[limits] pending = -3");
	expect_error("[limits]\nleases = 99999999999\n", 2, "from 1 to");
	expect_error("[limits]\nqueued = 1K\n", 2, "from 64K to 1G");
	expect_error("[policy]\nevict_deadline = 0\n", 2, "more than 0");
	expect_error("[policy]\nevict_deadline = 3601\n", 2, "at most 3600");
	expect_error("[policy]\nevict_deadline = unet:5\n", 2, "unknown class 'unet'");
	expect_error("[policy]\nevict_deadline = vae:\n", 2, "'': seconds");
	expect_error("[policy]\nevict_deadline = vae:off\n", 2, "'off': seconds");
	expect_error("[policy]\nevict_deadline = ,\n", 2, "expected [CLASS:]SECONDS");
	expect_error("[policy]\nmax_hold = -1\n", 2, "seconds, more than 0");
	expect_error("[policy]\nmax_hold = 604801\n", 2, "at most 604800, or off");
	expect_error("[policy]\nbackfill = maybe\n", 2, "on or off");
	expect_error("[policy]\nbackfill_passes = 0\n", 2, "from 1 to 1000000");
	expect_error("[policy]\nbackfill_wait = 0\n", 2, "more than 0");
	expect_error("[policy]\nexclusive = vae\n", 2, "at least two classes");
	expect_error("[policy]\nexclusive = vae,unet\n", 2, "unknown class 'unet'");
	expect_error("[device 1]\nexclusive = 1:vae,other\n", 2, "no device prefix here");
	expect_error("[daemon]\nshutdown_timeout = 601\n", 2, "from 0 to 600");
	expect_error("[daemon]\nlog_level = loud\n", 2, "a log level");
	expect_error("[daemon]\nbackend = rocm\n", 2, "unknown backend");
	expect_error("[daemon]\nsharing = nvlink\n", 2, "unknown sharing method");
	expect_error("[daemon]\nsocket =\n", 2, "needs a non-empty path");
	/* "=;x" is ";x" to inih, "= ;x" empty: a value starting with ';' could not be printed. */
	expect_error("[daemon]\nsocket =;/run/x.sock\n", 2, "cannot start with ';'");
	expect_error("[metrics]\ntextfile = /x/metrics.txt\n", 2, "ending in .prom");
	expect_error("[metrics]\ninterval = 0.5\n", 2, "from 1 to 3600");
	/* Access and the limits beyond the above: names that do not exist, modes, ranges. */
	expect_error("[access]\nsocket_mode = 0999\n", 2, "[access] socket_mode = 0999: an octal");
	expect_error("[access]\nsocket_mode = 66\n", 2, "3 or 4 digits");
	expect_error("[access]\nsocket_mode = 4660\n", 2, "no setuid");
	expect_error("[access]\nsocket_mode = -660\n", 2, "an octal mode");
	expect_error("[access]\nsocket_user = no-such-user-rocmmem\n", 2,
		     "no user named 'no-such-user-rocmmem'");
	expect_error("[access]\nsocket_group = no-such-group-rocmmem\n", 2,
		     "no group named 'no-such-group-rocmmem'");
	expect_error("[access]\nsocket_user = 4294967295\n", 2, "out of range");
	expect_error("[access]\nsocket_group = 99999999999\n", 2, "out of range");
	expect_error("[access]\nallowed_users = root,no-such-user-rocmmem\n", 2,
		     "[access] allowed_users = root,no-such-user-rocmmem: no user named");
	expect_error("[access]\nallowed_groups = ,\n", 2, "a comma-separated list of group");
	expect_error("[access]\nadmin_group = no-such-group-rocmmem\n", 2, "no group named");
	expect_error("[access]\nadmin_group = -1\n", 2, "no group named '-1'");
	expect_error("[limits]\nclients_per_uid = 0\n", 2, "a whole number from 1");
	expect_error("[limits]\nclients_per_uid = -5\n", 2, "a whole number from 1");
	expect_error("[limits]\nbytes_per_uid = 0\n", 2, "more than 0 bytes, or unlimited");
	expect_error("[limits]\nbytes_per_uid = -1G\n", 2, "expected bytes");
	expect_error("[limits]\nbytes_per_uid = 99999999999T\n", 2, "too large");
	expect_error("[limits]\nmessage_size = 65537\n", 2, "from 1K to 64K");
	expect_error("[limits]\nmessage_size = 512\n", 2, "from 1K to 64K");
	expect_error("[limits]\nhandshake_timeout = 0\n", 2, "more than 0");
	expect_error("[limits]\nhandshake_timeout = 3601\n", 2, "at most 3600");
	expect_error("[limits]\nsubscribers = 99999999999999999999\n", 2, "from 1 to");
	/* Syntax errors: the line, whatever comes after it. */
	expect_error("[daemon\nlog_level = info\n", 1, "syntax error");
	expect_error("[daemon]\nlog_level info\n", 2, "syntax error");
	expect_error("[daemon]\nlog_level = info\njunk\n[limits]\nclients = 0\n", 3,
		     "syntax error");
	/* The first error is the one reported, even when a later line is also wrong. */
	expect_error("[limits]\nclients = 0\n[daemon]\njunk\n", 2, "clients = 0");
	/* A key given twice in one section is an error; exclusive adds a rule each time. */
	expect_error("[devices]\nbudget = 1G\nbudget = 2G\n", 3, "given twice (first on line 2)");
	expect_error("[device 3]\nbudget = 1G\n[device 3]\nbudget = 2G\n", 4, "given twice");
	/* Lines too long for the parser are refused, not split. */
	{
		char text[600] = "[daemon]\nsocket = /";

		memset(text + strlen(text), 'a', 400);
		strcat(text, "\n");
		expect_error(text, 2, "line longer than");
	}
}

static void test_device_section_does_not_leak(void **state)
{
	struct options o;
	char why[512];

	(void)state;
	/* Two devices' budgets and a [devices] one: each where it was given. */
	assert_int_equal(load("[device 0]\nbudget = 1G\n[device 1]\nbudget = 2G\n[devices]\n"
			      "headroom = 3G\n",
			      &o, why, sizeof(why)),
			 0);
	assert_true(o.device[0].budget == GiB && !o.device[0].has_headroom);
	assert_true(o.device[1].budget == 2 * GiB);
	assert_true(o.devices.has_headroom && !o.devices.has_budget);
	options_free(&o);
}

static void test_missing_and_unreadable(void **state)
{
	struct options o;
	char why[512], missing[sizeof(dir) + 32];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/none.conf", dir);
	assert_int_equal(config_load(missing, &o, why, sizeof(why)), -ENOENT);
	assert_contains(why, missing);
	/* A directory is not a configuration file. */
	assert_true(config_load(dir, &o, why, sizeof(why)) < 0);
	/* An empty file is a valid one: nothing set. */
	assert_int_equal(load("", &o, why, sizeof(why)), 0);
	assert_int_equal(o.set, 0);
	options_free(&o);
}

/* set is options_set for the tests: it must succeed. */
static void set(struct options *o, enum option_id id, int device, const char *value)
{
	char why[256];

	if (options_set(o, id, device, value, why, sizeof(why)) < 0)
		fail_msg("options_set %s: %s", value, why);
}

static void test_precedence(void **state)
{
	struct options flags, file, eff;
	struct budget_config cfg;

	(void)state;
	options_defaults(&flags);
	options_defaults(&file);
	set(&file, OPTION_LOG_LEVEL, -1, "debug");
	set(&file, OPTION_EVICT_DEADLINE, -1, "9");
	set(&file, OPTION_BACKEND, -1, "host");
	set(&flags, OPTION_EVICT_DEADLINE, -1, "3");
	set(&file, OPTION_EXCLUSIVE, -1, "transformer,vae");
	set(&flags, OPTION_EXCLUSIVE, -1, "text_encoder,image_encoder");
	/* Budgets: file for all and for device 1; flag for device 2; file for device 3. */
	set(&file, OPTION_BUDGET, -1, "8G");
	set(&file, OPTION_HEADROOM, 1, "1G");
	set(&flags, OPTION_BUDGET, -1, "2:4G");
	set(&file, OPTION_BUDGET, 3, "6G");
	assert_int_equal(options_merge(&eff, &flags, &file), 0);

	assert_int_equal(eff.log_level, LOG_LEVEL_DEBUG); /* file over default */
	assert_int_equal(eff.from[OPTION_LOG_LEVEL], FROM_FILE);
	assert_true(eff.evict_deadline_ms == 3000); /* flag over file */
	assert_int_equal(eff.from[OPTION_EVICT_DEADLINE], FROM_FLAG);
	assert_string_equal(eff.backend, "host");
	assert_int_equal(eff.max_clients, 4096); /* default */
	assert_int_equal(eff.from[OPTION_MAX_CLIENTS], FROM_DEFAULT);
	/* Any --exclusive replaces the file's rules. */
	assert_false(class_exclusion_conflict(&eff.exclusive_all, 1, 2));
	assert_true(class_exclusion_conflict(&eff.exclusive_all, 3, 4));

	options_budget(&eff, 0, &cfg); /* file, every device */
	assert_true(cfg.has_budget && cfg.budget == 8 * GiB && !cfg.named);
	options_budget(&eff, 1, &cfg); /* file, this device: its headroom */
	assert_true(!cfg.has_budget && cfg.has_headroom && cfg.headroom == GiB && cfg.named);
	options_budget(&eff, 2, &cfg); /* flag, this device */
	assert_true(cfg.has_budget && cfg.budget == 4 * GiB && cfg.named);
	assert_int_equal(eff.device[2].from, FROM_FLAG);
	options_budget(&eff, 3, &cfg);
	assert_true(cfg.budget == 6 * GiB);
	options_free(&eff);

	/* A flag for every device beats the file's per-device setting. */
	set(&flags, OPTION_HEADROOM, -1, "512M");
	assert_int_equal(options_merge(&eff, &flags, &file), 0);
	options_budget(&eff, 1, &cfg);
	assert_true(cfg.has_headroom && cfg.headroom == 512 * MiB && !cfg.named);
	options_budget(&eff, 2, &cfg); /* its own flag still wins */
	assert_true(cfg.has_budget && cfg.budget == 4 * GiB);
	options_free(&eff);
	options_free(&flags);
	options_free(&file);
}

/* A printed configuration reads back to the same settings. */
static void test_print_round_trip(void **state)
{
	struct options file, eff, again, eff2;
	char why[512], *text = NULL;
	size_t len = 0;
	FILE *out;

	(void)state;
	assert_int_equal(load("[daemon]\nlog_level = warn\nshutdown_timeout = 0.25\n[policy]\n"
			      "exclusive = vae,transformer,other\n[limits]\nqueued = 3M\n"
			      "[metrics]\ntextfile = /m/r.prom\ninterval = 1.5\n[devices]\n"
			      "headroom = 1536M\n[device 4]\nbudget = 123456\nexclusive = "
			      "text_encoder,image_encoder\n",
			      &file, why, sizeof(why)),
			 0);
	assert_int_equal(options_merge(&eff, NULL, &file), 0);
	out = open_memstream(&text, &len);
	assert_non_null(out);
	config_print(&eff, "/run/rocmmemd/rocmmemd.sock", path, out);
	assert_int_equal(fclose(out), 0);
	assert_contains(text, "log_level = warn");
	assert_contains(text, "; file");
	assert_contains(text, "; default");
	assert_contains(text, "[device 4]");
	assert_contains(text, "headroom = 1536M");
	assert_contains(text, "shutdown_timeout = 0.25");
	/* Read it back (the socket line is the resolved default: drop nothing, it parses). */
	assert_int_equal(load(text, &again, why, sizeof(why)), 0);
	assert_int_equal(options_merge(&eff2, NULL, &again), 0);
	assert_int_equal(eff2.log_level, eff.log_level);
	assert_true(eff2.shutdown_timeout_ms == eff.shutdown_timeout_ms);
	assert_true(eff2.max_queued == eff.max_queued);
	assert_true(eff2.metrics_interval_ms == eff.metrics_interval_ms);
	assert_memory_equal(&eff2.exclusive_all, &eff.exclusive_all, sizeof(eff.exclusive_all));
	assert_memory_equal(&eff2.exclusive[4], &eff.exclusive[4], sizeof(eff.exclusive[4]));
	assert_true(eff2.devices.headroom == eff.devices.headroom);
	assert_true(eff2.device[4].budget == 123456);
	free(text);
	options_free(&file);
	options_free(&again);
	options_free(&eff);
	options_free(&eff2);
}

static void test_new_flags(void **state)
{
	struct options o;
	char why[256];

	(void)state;
	options_defaults(&o);
	set(&o, OPTION_MAX_CLIENTS, -1, "1");
	set(&o, OPTION_MAX_QUEUED, -1, "1G");
	set(&o, OPTION_SHUTDOWN_TIMEOUT, -1, "0");
	set(&o, OPTION_BUDGET, -1, "15:1G");
	assert_true(o.device[15].has_budget);
	assert_int_equal(options_set(&o, OPTION_BUDGET, -1, "16:1G", why, sizeof(why)), -EINVAL);
	assert_contains(why, "device number below 16");
	assert_int_equal(options_set(&o, OPTION_HEADROOM, -1, ":1G", why, sizeof(why)), -EINVAL);
	assert_int_equal(options_set(&o, OPTION_HEADROOM, -1, "x:1G", why, sizeof(why)), -EINVAL);
	assert_int_equal(options_set(&o, OPTION_MAX_LEASES, -1, "1e3", why, sizeof(why)), -EINVAL);
	assert_int_equal(options_set(&o, OPTION_MAX_CLIENTS, -1, "+5", why, sizeof(why)), -EINVAL);
	assert_int_equal(options_set(&o, OPTION_SOCKET, -1, NULL, why, sizeof(why)), -EINVAL);
	{
		char longpath[200];

		memset(longpath, 'a', sizeof(longpath) - 1);
		longpath[0] = '/';
		longpath[sizeof(longpath) - 1] = '\0';
		assert_int_equal(options_set(&o, OPTION_SOCKET, -1, longpath, why, sizeof(why)),
				 -EINVAL);
		assert_contains(why, "too long for a socket path");
	}
	options_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_device_section_does_not_leak),
	    cmocka_unit_test(test_missing_and_unreadable),
	    cmocka_unit_test(test_precedence),
	    cmocka_unit_test(test_print_round_trip),
	    cmocka_unit_test(test_new_flags),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
