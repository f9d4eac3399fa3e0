/* SPDX-License-Identifier: MIT */
/*
 * test_books.c: the reconciled books end to end: the real daemon over the stand-in HIP runtime,
 * with KFD's per-process counters in a fake sysfs tree (read by the daemon's own telemetry,
 * through ROCMMEM_SYSFS_ROOT as on a real machine).
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "books_tools.h"
#include "fake_tree.h"
#include "fakegpu_paths.h"
#include "harness.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define GPU_ID 41000u

static char state_dir[64], root[TREE_PATH_MAX];

static int setup(void **state)
{
	char dev[512];

	(void)state;
	snprintf(state_dir, sizeof(state_dir), "/tmp/rocmmem-books-XXXXXX");
	if (!mkdtemp(state_dir))
		return -1;
	setenv("FAKEGPU_STATE_DIR", state_dir, 1);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so", 1);
	setenv("ROCMMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	setenv("ROCMMEM_HIP_LIBRARY", FAKEHIP_PATH, 1);
	setenv("FAKEHIP_DEVICES", "8G", 1);
	/* The card the stand-in reports, its KFD node, and no process on it yet. */
	tree_create(root);
	tree_pci_device(root, "0000:03:00.0", "amdgpu", dev, sizeof(dev));
	tree_card(root, "card0", dev);
	tree_amdgpu_memory(root, dev, 8 * GiB, 0, 256 * MiB, 0, 16 * GiB, 0);
	tree_kfd_node(root, 1, GPU_ID, 0, (3 << 8) | (0 << 3) | 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	tree_destroy(root);
	unsetenv("ROCMMEM_SYSFS_ROOT");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void start(struct daemon_proc *d, const char *backend)
{
	const char *const args[] = {"--backend", backend, "--budget", "4G", NULL};

	if (harness_daemon_start(d, args) != 0)
		fail_msg("rocmmemd did not start");
}

/* vram sets what KFD says pid holds on the device (a number, or any text). */
static void vram(int pid, const char *text)
{
	tree_kfd_vram(root, pid, GPU_ID, text);
}

static uint64_t reg(rocmmem_client *c, const char *name, uint64_t size)
{
	struct rocmmem_model_desc desc = ROCMMEM_MODEL_DESC_INIT;
	uint64_t id = 0;

	desc.name = name;
	desc.size = size;
	assert_int_equal(rocmmem_model_register(c, &desc, &id), 0);
	return id;
}

/* largest reads device 0's largest grantable request from a status. */
static uint64_t largest(rocmmem_client *c)
{
	rocmmem_status *st = NULL;
	uint64_t v;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	v = rocmmem_status_device(st, 0)->largest_grantable;
	rocmmem_status_free(st);
	return v;
}

/* wait_largest polls until device 0's largest grantable request is want. */
static void wait_largest(rocmmem_client *c, uint64_t want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	uint64_t v = 0;

	while (harness_now_ms() < end) {
		v = largest(c);
		if (v == want)
			return;
		usleep(20000);
	}
	fail_msg("largest grantable stayed %llu, wanted %llu", (unsigned long long)v,
		 (unsigned long long)want);
}

/*
 * A client that declares 1 GiB while its process holds 3 GiB is charged 3 GiB: a 2 GiB acquire
 * that the declarations alone would grant (4 GiB budget) is refused, naming the process, and a
 * warning is logged; once the process holds what it declared, the same acquire is granted.
 */
static void test_undeclared_use_is_charged(void **state)
{
	rocmmem_client *comfy, *other;
	struct daemon_proc d;
	uint64_t big, want;
	char text[64], expect[128];
	long end;
	int rc;

	(void)state;
	start(&d, "hip");
	comfy = harness_connect(&d, "ComfyUI");
	other = harness_connect(&d, "other");
	assert_int_equal(rocmmem_model_acquire(comfy, reg(comfy, "sdxl", GiB), 0), 0);
	big = reg(other, "big", 2 * GiB);
	/* The declarations alone: 3 GiB free. */
	assert_int_equal(largest(other), 3 * GiB);
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)(3 * GiB));
	vram(getpid(), text);
	/* Both connections are this process: what both declare is compared with its 3 GiB. */
	wait_largest(other, 4 * GiB - 3 * GiB);
	rc = rocmmem_model_acquire(other, big, 0);
	assert_int_equal(rc, -ENOMEM);
	snprintf(expect, sizeof(expect), "ComfyUI (pid %d) holds 3 GiB, declared 1 GiB",
		 (int)getpid());
	if (!strstr(rocmmem_last_error(), expect))
		fail_msg("the refusal does not say '%s': %s", expect, rocmmem_last_error());
	snprintf(expect, sizeof(expect), "ComfyUI (pid %d) holds 3 GiB on device 0 but declared",
		 (int)getpid());
	assert_true(harness_log_wait(&d, expect, HARNESS_WAIT_MS));
	/* Its process gives the memory back: granted again once the readings agree. */
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)GiB);
	vram(getpid(), text);
	want = 3 * GiB;
	for (end = harness_now_ms() + HARNESS_WAIT_MS; harness_now_ms() < end; usleep(20000))
		if (largest(other) == want)
			break;
	assert_int_equal(rocmmem_model_acquire(other, big, 0), 0);
	rocmmem_disconnect(other);
	rocmmem_disconnect(comfy);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A process outside rocmmemd holding 3 GiB leaves 1 GiB of the 4 GiB budget grantable. */
static void test_outside_process_shrinks_grantable(void **state)
{
	rocmmem_status *st = NULL;
	struct daemon_proc d;
	rocmmem_client *c;
	char text[64];

	(void)state;
	start(&d, "hip");
	c = harness_connect(&d, "client");
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)(3 * GiB));
	vram(4242, text);
	wait_largest(c, GiB);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_true(rocmmem_status_device(st, 0)->measurable);
	assert_int_equal(rocmmem_status_device(st, 0)->outside_bytes, 3 * GiB);
	assert_int_equal(rocmmem_status_device(st, 0)->undeclared_bytes, 3 * GiB);
	assert_int_equal(rocmmem_status_device(st, 0)->free_bytes, GiB);
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_model_acquire(c, reg(c, "two", 2 * GiB), 0), -ENOMEM);
	if (!strstr(rocmmem_last_error(), "processes outside rocmmemd hold 3 GiB"))
		fail_msg("the refusal does not name the outside use: %s", rocmmem_last_error());
	assert_int_equal(rocmmem_model_acquire(c, reg(c, "one", GiB), 0), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/*
 * Bad readings never wedge the books: garbage and an impossible figure (beyond twice the device)
 * are not charged, and a process that exits (its KFD directory gone) between samples fades out.
 */
static void test_bad_readings(void **state)
{
	struct daemon_proc d;
	rocmmem_client *c;
	char text[64], dir[TREE_PATH_MAX + 64], cmd[TREE_PATH_MAX + 80];

	(void)state;
	start(&d, "hip");
	c = harness_connect(&d, "client");
	vram(4242, "garbage\n");
	vram(4243, "99999999999999999999999\n");
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)(1024 * GiB));
	vram(4244, text);
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)GiB);
	vram(4245, text);
	/* Only the plausible reading counts: 4 - 1 GiB. */
	wait_largest(c, 3 * GiB);
	/* The process exits: its directory goes between two samples. */
	snprintf(dir, sizeof(dir), "%s/class/kfd/kfd/proc/4245", root);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	wait_largest(c, 4 * GiB);
	assert_int_equal(rocmmem_model_acquire(c, reg(c, "all", 4 * GiB), 0), 0);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* What the feed told the test: undeclared_use events and the test process's books in samples. */
struct feed_seen {
	uint64_t events, samples;
	struct rocmmem_telemetry_event last;
	char name[64];
	uint64_t measured; /* the process's measured bytes in the last sample */
};

static void on_feed(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct feed_seen *s = userdata;

	(void)c;
	if (ev->type == ROCMMEM_EVENT_TELEMETRY &&
	    ev->telemetry->type == ROCMMEM_TELEMETRY_UNDECLARED_USE) {
		s->events++;
		s->last = *ev->telemetry;
		snprintf(s->name, sizeof(s->name), "%s", ev->telemetry->client_name);
	} else if (ev->type == ROCMMEM_EVENT_SAMPLE) {
		for (size_t i = 0; i < rocmmem_status_client_count(ev->sample); i++) {
			const struct rocmmem_client_info *v = rocmmem_status_client(ev->sample, i);

			if (v->pid == getpid())
				s->measured = v->measured_bytes;
		}
		s->samples++;
	}
}

/* pump_until dispatches c's events until *value equals want; fails after the deadline. */
static void pump_until(rocmmem_client *c, const uint64_t *value, uint64_t want, const char *what)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	while (*value != want && harness_now_ms() < end) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (poll(&p, 1, 100) > 0)
			assert_true(rocmmem_dispatch(c) >= 0);
	}
	if (*value != want)
		fail_msg("%s stayed %llu, wanted %llu", what, (unsigned long long)*value,
			 (unsigned long long)want);
}

/* vram_set makes KFD say the test process holds bytes, and waits until a sample shows it. */
static void vram_set(rocmmem_client *c, struct feed_seen *s, uint64_t bytes)
{
	char text[64];

	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)bytes);
	vram(getpid(), text);
	pump_until(c, &s->measured, bytes, "the measured bytes in the samples");
}

/* The watch a test runs (its output buffer is large: not on the stack). */
static struct watch_proc watcher;

/* check_books: status (the library's view and rocmmemctl --json) says 1 GiB declared, 3 GiB
 * measured, 2 GiB undeclared for ComfyUI, on device 0. */
static void check_books(rocmmem_client *c, const struct daemon_proc *d)
{
	const struct rocmmem_client_info *v = NULL;
	rocmmem_status *st = NULL;
	json_object *o, *books;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		if (strcmp(rocmmem_status_client(st, i)->name, "ComfyUI") == 0)
			v = rocmmem_status_client(st, i);
	assert_non_null(v);
	assert_true(v->measurable);
	assert_int_equal(v->declared_bytes, GiB);
	assert_int_equal(v->measured_bytes, 3 * GiB);
	assert_int_equal(v->undeclared_bytes, 2 * GiB);
	assert_int_equal(v->nbooks, 1);
	assert_int_equal(v->books[0].device, 0);
	assert_true(v->books[0].measurable);
	assert_int_equal(v->books[0].declared_bytes, GiB);
	assert_int_equal(v->books[0].measured_bytes, 3 * GiB);
	assert_int_equal(v->books[0].undeclared_bytes, 2 * GiB);
	rocmmem_status_free(st);
	o = ctl_status_json(d);
	assert_int_equal(json_u64(o, "declared_bytes"), GiB);
	assert_int_equal(json_u64(o, "measured_bytes"), 3 * GiB);
	assert_int_equal(json_u64(o, "undeclared_bytes"), 2 * GiB);
	assert_true(json_object_object_get_ex(o, "books", &books));
	assert_int_equal(json_object_array_length(books), 1);
	assert_int_equal(json_u64(json_object_array_get_idx(books, 0), "measured_bytes"), 3 * GiB);
	json_object_put(o);
}

/* check_metrics: the per-client series and the count of crossings, as Prometheus reads them. */
static void check_metrics(rocmmem_client *c, unsigned crossings)
{
	static const char *const families[] = {"declared", "measured", "undeclared"};
	const uint64_t values[] = {GiB, 3 * GiB, 2 * GiB};
	char *text = NULL, want[160];

	assert_int_equal(rocmmem_metrics(c, &text), 0);
	for (unsigned i = 0; i < 3; i++) {
		snprintf(want, sizeof(want),
			 "rocmmemd_client_%s_bytes{device=\"0\",name=\"ComfyUI\",pid=\"%d\"} "
			 "%llu\n",
			 families[i], (int)getpid(), (unsigned long long)values[i]);
		if (!strstr(text, want))
			fail_msg("the metrics lack '%s':\n%s", want, text);
	}
	snprintf(want, sizeof(want), "\nrocmmemd_undeclared_use_total %u\n", crossings);
	if (!strstr(text, want))
		fail_msg("the metrics lack '%s':\n%s", want + 1, text);
	free(text);
}

/*
 * A client that declares 1 GiB while its process holds 3 GiB: status, rocmmemctl --json and the
 * metrics show 1 GiB declared, 3 GiB measured, 2 GiB undeclared; the feed tells undeclared_use
 * once when it crosses, not again while it hovers between half the tolerance and the whole,
 * and again once it came back and crosses anew.
 */
static void test_client_books_and_event(void **state)
{
	struct feed_seen seen = {0};
	struct daemon_proc d;
	rocmmem_client *comfy;
	uint64_t later;
	char want[64], *line;

	(void)state;
	start(&d, "hip");
	comfy = harness_connect(&d, "ComfyUI");
	rocmmem_set_event_callback(comfy, on_feed, &seen);
	assert_int_equal(rocmmem_subscribe(
			     comfy, ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS, 50, NULL),
			 0);
	assert_int_equal(rocmmem_model_acquire(comfy, reg(comfy, "sdxl", GiB), 0), 0);
	/* rocmmemctl watch shows the event too (its first sample says it is subscribed). */
	watch_start(&watcher, &d);
	watch_until(&watcher, "{\"type\":\"sample\"");
	vram_set(comfy, &seen, 3 * GiB);
	pump_until(comfy, &seen.events, 1, "undeclared_use events");
	watch_until(&watcher, "\"event\":\"undeclared_use\"");
	watch_stop(&watcher);
	assert_int_equal(watch_count(&watcher, "\"event\":\"undeclared_use\""), 1);
	/* Its line: the client, what it holds and what it declared. */
	line = strstr(watcher.buf, "\"undeclared_use\"");
	*strchrnul(line, '\n') = '\0';
	snprintf(want, sizeof(want), "\"bytes\":%llu,", (unsigned long long)(3 * GiB));
	assert_non_null(strstr(line, want));
	snprintf(want, sizeof(want), "\"declared_bytes\":%llu}", (unsigned long long)GiB);
	assert_non_null(strstr(line, want));
	assert_non_null(strstr(line, "\"client_name\":\"ComfyUI\""));
	assert_string_equal(seen.name, "ComfyUI");
	assert_int_equal(seen.last.pid, getpid());
	assert_true(seen.last.has_device);
	assert_int_equal(seen.last.device, 0);
	assert_int_equal(seen.last.bytes, 3 * GiB);
	assert_int_equal(seen.last.declared_bytes, GiB);
	check_books(comfy, &d);
	check_metrics(comfy, 1);
	/* Within the tolerance but not within half of it, then past it again: told once. */
	vram_set(comfy, &seen, GiB + 48 * MiB);
	vram_set(comfy, &seen, 3 * GiB);
	later = seen.samples + 5;
	pump_until(comfy, &seen.samples, later, "samples");
	assert_int_equal(seen.events, 1);
	/* Back within what it declared: re-armed, and told at the next crossing. */
	vram_set(comfy, &seen, GiB);
	vram_set(comfy, &seen, 3 * GiB);
	pump_until(comfy, &seen.events, 2, "undeclared_use events");
	check_metrics(comfy, 2);
	/* The warning line, once per crossing as the event. */
	snprintf(want, sizeof(want), "ComfyUI (pid %d) holds 3 GiB on device 0 but declared",
		 (int)getpid());
	assert_int_equal(log_count(&d, want), 2);
	rocmmem_disconnect(comfy);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* A client named to break the exposition text: its series are escaped, and promtool agrees. */
static void test_hostile_name_in_metrics(void **state)
{
	static const char name[] = "a\"b\\c\"} 1 x{y=\"z\",\xc3\xa9";
	struct daemon_proc d;
	rocmmem_client *c;
	char *text = NULL, want[200], vtext[64];
	long end;

	(void)state;
	start(&d, "hip");
	c = harness_connect(&d, name);
	assert_int_equal(rocmmem_model_acquire(c, reg(c, "m", GiB), 0), 0);
	snprintf(vtext, sizeof(vtext), "%llu\n", (unsigned long long)(3 * GiB));
	vram(getpid(), vtext);
	snprintf(want, sizeof(want),
		 "rocmmemd_client_undeclared_bytes{device=\"0\",name=\"a\\\"b\\\\c\\\"} 1 "
		 "x{y=\\\"z\\\",\xc3\xa9\",pid=\"%d\"} %llu\n",
		 (int)getpid(), (unsigned long long)(2 * GiB));
	for (end = harness_now_ms() + HARNESS_WAIT_MS; harness_now_ms() < end; usleep(20000)) {
		free(text);
		assert_int_equal(rocmmem_metrics(c, &text), 0);
		if (strstr(text, want))
			break;
	}
	if (!strstr(text, want))
		fail_msg("the metrics lack '%s':\n%s", want, text);
	promtool_ok(text);
	free(text);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* On host memory nothing measures per-process device memory: status says so, with no figures,
 * and a process KFD would list changes nothing. */
static void test_host_cannot_measure(void **state)
{
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v;
	const struct rocmmem_client_info *cl;
	struct daemon_proc d;
	rocmmem_client *c;
	char text[64];

	(void)state;
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)(3 * GiB));
	vram(4242, text);
	vram(getpid(), text);
	start(&d, "host");
	c = harness_connect(&d, "client");
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	v = rocmmem_status_device(st, 0);
	assert_false(v->measurable);
	assert_int_equal(v->undeclared_bytes, 0);
	assert_int_equal(v->outside_bytes, 0);
	assert_int_equal(v->free_bytes, v->budget_bytes);
	rocmmem_status_free(st);
	/* Its client: what it declared, and no measured figure. */
	assert_int_equal(rocmmem_model_acquire(c, reg(c, "one", GiB), 0), 0);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_client_count(st), 1);
	cl = rocmmem_status_client(st, 0);
	assert_false(cl->measurable);
	assert_int_equal(cl->declared_bytes, GiB);
	assert_int_equal(cl->measured_bytes, 0);
	assert_int_equal(cl->undeclared_bytes, 0);
	assert_int_equal(cl->nbooks, 1);
	assert_false(cl->books[0].measurable);
	assert_int_equal(cl->books[0].declared_bytes, GiB);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_undeclared_use_is_charged, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outside_process_shrinks_grantable, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_bad_readings, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_host_cannot_measure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_books_and_event, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_name_in_metrics, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
