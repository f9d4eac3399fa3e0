/* SPDX-License-Identifier: MIT */
/* test_metrics.c: unit tests of daemon/metrics: the exposition text from a made-up state. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/metrics.h"
#include "net/server.h"

static const struct backend_ops fake_ops = {.name = "hip"};

/* The service's clock in the fixture: the loop's time and the wall clock, as the daemon's. */
static uint64_t loop_ms(void *ctx)
{
	return uv_now(ctx);
}

static uint64_t wall_ms(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct svc_clock fixture_clock = {.mono_ms = loop_ms, .real_ms = wall_ms};
static struct backend fake_backend = {.ops = &fake_ops};

struct fixture {
	uv_loop_t loop;
	struct server *s;
	char text[METRICS_TEXT_MAX];
};

/* make_server sets up a server with n devices named name, as svc_init would. */
static struct fixture *make_server(unsigned n, const char *name)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct backend_device info = {.total_bytes = 64ull << 30,
				      .granule = 2u << 20,
				      .handle_kind = 2,
				      .default_headroom = 1u << 30};

	assert_non_null(f);
	f->s = calloc(1, sizeof(*f->s));
	assert_non_null(f->s);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	f->s->loop = &f->loop;
	fixture_clock.ctx = &f->loop;
	f->s->svc.clock = &fixture_clock;
	f->s->start_ms = uv_now(&f->loop);
	TAILQ_INIT(&f->s->clients);
	f->s->svc.backend = &fake_backend;
	f->s->svc.state.ndevices = n;
	snprintf(info.name, sizeof(info.name), "%s", name);
	snprintf(info.pci_bus_id, sizeof(info.pci_bus_id), "0000:03:00.0");
	for (unsigned i = 0; i < n; i++)
		device_init(&f->s->svc.state.devices[i], i, &info, 32ull << 30);
	return f;
}

static void free_server(struct fixture *f)
{
	assert_int_equal(uv_loop_close(&f->loop), 0);
	free(f->s);
	free(f);
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("the metrics do not contain '%s':\n%s", needle, haystack);
}

/* check_lines: every line is a comment or "name{labels} value", and the text ends a line. */
static void check_lines(const char *text, size_t len)
{
	const char *line = text;

	assert_true(len > 0 && text[len - 1] == '\n');
	assert_int_equal(strlen(text), len);
	while (*line) {
		const char *end = strchr(line, '\n');

		assert_non_null(end);
		assert_true(end > line);
		if (line[0] != '#') {
			assert_true(strncmp(line, "rocmmemd_", 9) == 0);
			assert_non_null(memchr(line, ' ', (size_t)(end - line)));
		}
		line = end + 1;
	}
}

static void test_basic(void **state)
{
	struct fixture *f = make_server(1, "Radeon RX 7900 XTX");
	struct device *d = &f->s->svc.state.devices[0];
	ssize_t len;

	(void)state;
	d->leased = 6u << 20;
	d->leases = 3;
	f->s->svc.counters.grants = 7;
	f->s->client_count = 2;
	f->s->svc.cfg.limits.max_clients = 4096;
	f->s->svc.cfg.limits.max_message = 65536;
	f->s->svc.cfg.limits.handshake_timeout_ms = 1500;
	f->s->svc.counters.hits[LIMIT_CLIENTS_PER_UID] = 44;
	f->s->svc.counters.peers_refused = 3;
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	assert_contains(f->text, "# HELP rocmmemd_build_info ");
	assert_contains(f->text, "# TYPE rocmmemd_build_info gauge\n"
				 "rocmmemd_build_info{version=\"" ROCMMEM_VERSION_STRING
				 "\",backend=\"hip\"} 1\n");
	assert_contains(f->text, "rocmmemd_device_leased_bytes{device=\"0\",name=\"Radeon RX "
				 "7900 XTX\"} 6291456\n");
	assert_contains(f->text, "rocmmemd_device_free_bytes{device=\"0\",name=\"Radeon RX 7900 "
				 "XTX\"} 34353446912\n");
	assert_contains(f->text, "rocmmemd_device_leases{device=\"0\",name=\"Radeon RX 7900 "
				 "XTX\"} 3\n");
	assert_contains(f->text, "# TYPE rocmmemd_grants_total counter\nrocmmemd_grants_total 7\n");
	assert_contains(f->text, "rocmmemd_clients 2\n");
	assert_contains(f->text, "rocmmemd_device_info{device=\"0\",name=\"Radeon RX 7900 XTX\","
				 "pci_bus_id=\"0000:03:00.0\",sharing=\"vmm-fd\","
				 "integrated=\"false\"} 1\n");
	assert_contains(f->text,
			"# TYPE rocmmemd_limit gauge\nrocmmemd_limit{limit=\"clients\"} 4096\n");
	assert_contains(f->text, "rocmmemd_limit{limit=\"message_size\"} 65536\n");
	assert_contains(f->text, "rocmmemd_handshake_timeout_seconds 1.500\n");
	/* bytes_per_uid 0: unlimited, left out. */
	assert_null(strstr(f->text, "rocmmemd_limit{limit=\"bytes_per_uid\"}"));
	assert_contains(f->text, "rocmmemd_limit_hits_total{limit=\"clients_per_uid\"} 44\n");
	assert_contains(f->text, "rocmmemd_limit_hits_total{limit=\"subscribers\"} 0\n");
	assert_contains(f->text, "rocmmemd_peers_refused_total 3\n");
	assert_contains(f->text, "rocmmemd_requests_refused_total 0\n");
	/* Not sampled yet: those families are left out, not written as 0. */
	assert_null(strstr(f->text, "runtime_free"));
	assert_null(strstr(f->text, "temperature"));
	free_server(f);
}

static void test_telemetry_and_models(void **state)
{
	struct fixture *f = make_server(1, "gpu");
	struct device *d = &f->s->svc.state.devices[0];
	struct model m[4];
	ssize_t len;

	(void)state;
	d->has_meminfo = true;
	d->runtime_total = 64ull << 30;
	d->runtime_free = 60ull << 30;
	d->has_telemetry = true;
	d->telemetry.valid = TELEMETRY_HAS_TEMPERATURE | TELEMETRY_HAS_POWER | TELEMETRY_HAS_BUSY;
	d->telemetry.temperature_mc = -5250;
	d->telemetry.power_mw = 123456;
	d->telemetry.busy_percent = 7;
	memset(m, 0, sizeof(m));
	m[0].reservation = 2u << 20; /* idle */
	m[1].reservation = 2u << 20; /* in use */
	m[1].use_count = 1;
	m[2].waiters = 1;     /* evicted, waiting to be resident */
	m[3].evicting = true; /* evicting */
	m[3].lease_bytes = 4u << 20;
	for (unsigned i = 0; i < 4; i++)
		TAILQ_INSERT_TAIL(&d->models, &m[i], device_link);
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	assert_contains(f->text, "rocmmemd_device_temperature_celsius{device=\"0\",name=\"gpu\"} "
				 "-5.250\n");
	assert_contains(f->text,
			"rocmmemd_device_power_watts{device=\"0\",name=\"gpu\"} 123.456\n");
	assert_contains(f->text, "rocmmemd_device_busy_ratio{device=\"0\",name=\"gpu\"} 0.07\n");
	assert_contains(f->text, "rocmmemd_device_runtime_free_bytes{device=\"0\",name=\"gpu\"} "
				 "64424509440\n");
	assert_contains(f->text, "rocmmemd_device_external_bytes{device=\"0\",name=\"gpu\"} "
				 "4294967296\n");
	assert_contains(f->text,
			"rocmmemd_device_models{device=\"0\",name=\"gpu\",state=\"idle\"} 1\n"
			"rocmmemd_device_models{device=\"0\",name=\"gpu\",state=\"in_use\"} 1\n"
			"rocmmemd_device_models{device=\"0\",name=\"gpu\",state=\"evicting\"} 1\n"
			"rocmmemd_device_models{device=\"0\",name=\"gpu\",state=\"evicted\"} 0\n"
			"rocmmemd_device_models{device=\"0\",name=\"gpu\",state=\"waiting\"} 1\n");
	assert_contains(f->text, "rocmmemd_device_evictable_bytes{device=\"0\",name=\"gpu\"} "
				 "2097152\n");
	free_server(f);
}

static void test_escaping(void **state)
{
	/* Escapes, bytes that are not UTF-8 (an invalid lead, an overlong lead, a surrogate) and
	 * a 2-byte character: 37 bytes as a label. */
	struct fixture *f =
	    make_server(2, "a\"b\\c\nd\xff\xc0\xed\xa0\x80 0123456789012345\xc3\xa9xyz");
	ssize_t len;

	(void)state;
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	assert_contains(f->text, "rocmmemd_device_total_bytes{device=\"1\",name=\"a\\\"b\\\\c\\nd"
				 "????? 0123456789012345\xc3\xa9xyz\"} ");
	free_server(f);

	f = make_server(1, "0123456789012345678901234567890123456789\xc3\xa9");
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	assert_contains(f->text, "name=\"0123456789012345678901234567890123456789\"}");
	free_server(f);

	f = make_server(1, "012345678901234567890123456789012345678\"");
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	/* The escape would end past 40 bytes: cut before it, never in its middle. */
	assert_contains(f->text, "name=\"012345678901234567890123456789012345678\"}");
	free_server(f);
}

/* Sixteen devices with the longest names, every value at its widest: still one packet. */
static void test_worst_case_fits(void **state)
{
	char name[64];
	struct fixture *f;
	ssize_t len;

	(void)state;
	memset(name, '"', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	f = make_server(BACKEND_MAX_DEVICES, name);
	memset(&f->s->svc.counters, 0xff, sizeof(f->s->svc.counters));
	f->s->client_count = UINT32_MAX;
	for (unsigned i = 0; i < BACKEND_MAX_DEVICES; i++) {
		struct device *d = &f->s->svc.state.devices[i];

		memset(d->pci_bus_id, '\\', sizeof(d->pci_bus_id) - 1);
		d->total = d->budget = d->headroom = d->leased = d->reserved = UINT64_MAX;
		d->leases = UINT64_MAX;
		d->has_meminfo = true;
		d->runtime_total = UINT64_MAX;
		d->runtime_free = UINT64_MAX - 1;
		d->has_telemetry = true;
		d->telemetry.valid = UINT32_MAX;
		d->telemetry.temperature_mc = INT32_MIN;
		d->telemetry.power_mw = UINT32_MAX;
		d->telemetry.busy_percent = UINT32_MAX;
		d->lost = true;
	}
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	/* Well inside the frame, and comfortably so. */
	if ((size_t)len > WIRE_MAX_FRAME * 3 / 4)
		fail_msg("%zd bytes of metrics for 16 devices", len);
	assert_contains(f->text, "rocmmemd_device_busy_ratio{device=\"15\",name=\"\\\"\\\"\\\"");
	assert_contains(f->text, "} 1.00\n"); /* busy capped at 100 % */
	assert_contains(f->text, "} -2147483.648\n");
	assert_contains(f->text, "rocmmemd_grants_total 18446744073709551615\n");

	/* Too small a buffer: an error and an empty string, never a partial text. */
	assert_int_equal(server_metrics(f->s, f->text, (size_t)len), -EMSGSIZE);
	assert_string_equal(f->text, "");
	assert_int_equal(server_metrics(f->s, f->text, 1), -EMSGSIZE);
	assert_int_equal(server_metrics(f->s, f->text, 0), -EMSGSIZE);
	assert_true(server_metrics(f->s, f->text, (size_t)len + 1) == len);
	free_server(f);
}

/* promtool_check runs Prometheus' own checker over text, where it is installed: no problem. */
static void promtool_check(const char *text)
{
	char path[] = "/tmp/rocmmem-metrics-XXXXXX", cmd[128], out[4096];
	size_t n;
	FILE *p;
	int fd;

	if (system("command -v promtool >/dev/null 2>&1") != 0)
		return; /* the cli tests say so where it is missing; check_lines checked the rest */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	if (pclose(p) != 0 || n != 0)
		fail_msg("promtool check metrics: %s\n--- text ---\n%s", out, text);
	unlink(path);
}

/*
 * Forty client processes measured past their declarations, named to break the text format:
 * only the 32 with the most undeclared memory get series, the rest are counted; the names are
 * escaped and cut, and Prometheus' own checker accepts the text.
 */
static void test_client_series(void **state)
{
	struct fixture *f = make_server(1, "gpu");
	struct device *d = &f->s->svc.state.devices[0];
	struct holder *h[40];
	char want[256];
	ssize_t len;

	(void)state;
	state_init(&f->s->svc.state);
	f->s->svc.state.ndevices = 1;
	d->truth.measurable = true;
	for (unsigned i = 0; i < 40; i++) {
		struct identity who = {.pid = 1000 + (pid_t)i, .uid = 1000, .gid = 1000};
		struct truth_proc *p;

		assert_int_equal(state_holder_add(&f->s->svc.state, &who, 0, &h[i]), 0);
		snprintf(h[i]->name, sizeof(h[i]->name), "\"} 1\\n%s{x=\"%u\",\\", "evil", i);
		p = truth_add(&d->truth, 1000 + (int32_t)i);
		p->holder = h[i]->id;
		p->level = (uint64_t)(i + 1) << 30;
	}
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	promtool_check(f->text);
	assert_contains(f->text, "rocmmemd_client_series_omitted 8\n");
	snprintf(want, sizeof(want),
		 "rocmmemd_client_undeclared_bytes{device=\"0\",name=\"\\\"} 1\\\\n"
		 "evil{x=\\\"39\\\",\\\\\",pid=\"1039\"} %llu\n",
		 40ull << 30);
	assert_contains(f->text, want);
	assert_contains(f->text, "rocmmemd_client_declared_bytes{device=\"0\"");
	/* The smallest eight are left out. */
	assert_null(strstr(f->text, "pid=\"1007\""));
	assert_contains(f->text, "pid=\"1008\"");
	for (unsigned i = 0; i < 40; i++) {
		state_holder_leave(&f->s->svc.state, h[i]);
		state_holder_free(h[i]);
	}
	state_finish(&f->s->svc.state);
	free_server(f);
}

static void test_no_devices(void **state)
{
	struct fixture *f = make_server(0, "");
	ssize_t len;

	(void)state;
	len = server_metrics(f->s, f->text, sizeof(f->text));
	assert_true(len > 0);
	check_lines(f->text, (size_t)len);
	assert_null(strstr(f->text, "rocmmemd_device_"));
	free_server(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_basic),      cmocka_unit_test(test_telemetry_and_models),
	    cmocka_unit_test(test_escaping),   cmocka_unit_test(test_worst_case_fits),
	    cmocka_unit_test(test_no_devices), cmocka_unit_test(test_client_series),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
