/* SPDX-License-Identifier: MIT */
/*
 * valgrind.c: rocmmemd under valgrind's memcheck through an integration scenario: leases
 * taken, touched and released, status and metrics, a model evicted for another client's
 * lease, a telemetry subscription, a request that times out and one refused, a protocol
 * violation, a client killed with SIGKILL holding memory, then SIGTERM while a client still
 * holds a lease (the drain). The daemon must exit 0 (valgrind exits 99 on any error or
 * definite leak) and valgrind's own log must say 0 errors and 0 bytes definitely lost.
 *
 * Every wait of the test is long (valgrind runs the daemon 20-50 times slower) and the
 * daemon's own deadlines are set far beyond the scenario (evictions, the hello handshake, the
 * shutdown drain), so a slow run is never a failing one.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "fault.h"

/* Patience under valgrind: for connecting, for the books to settle. */
#define SLOW_MS 60000

static struct daemon_proc daemon_;
static char vg_dir[64], vg_log[128];

static rocmmem_client *connect_slow(const char *name)
{
	rocmmem_client *c = NULL;
	int err = rocmmem_connect(daemon_.sock, name, SLOW_MS, &c);

	if (err)
		fail_msg("could not connect as %s: %s (%s)", name, rocmmem_strerror(err),
			 rocmmem_last_error());
	return c;
}

static rocmmem_lease *lease(rocmmem_client *c, uint64_t size, int64_t timeout_ms, const char *tag)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = timeout_ms, .tag = tag};
	rocmmem_lease *l = NULL;
	unsigned char *p;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("acquire of %" PRIu64 " bytes (%s): %s (%s)", size, tag,
			 rocmmem_strerror(err), rocmmem_last_error());
	p = rocmmem_lease_ptr(l);
	p[0] = 1;
	p[size - 1] = 2;
	return l;
}

/* A model owner in its own thread: unloads whatever it is asked to. */
struct owner {
	pthread_t thread;
	rocmmem_client *c;
	uint64_t model;
	volatile bool stop;
	unsigned evictions;
	int ack;
};

static void owner_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct owner *o = userdata;

	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST) {
		o->ack = rocmmem_model_evict_ack(c, ev->model_id);
		__atomic_add_fetch(&o->evictions, 1, __ATOMIC_SEQ_CST);
	}
}

static void *owner_loop(void *arg)
{
	struct owner *o = arg;

	while (!o->stop) {
		struct pollfd p = {.fd = rocmmem_event_fd(o->c), .events = POLLIN};

		poll(&p, 1, 50);
		if (rocmmem_dispatch(o->c) < 0)
			break;
	}
	return NULL;
}

/* wait_evictions waits (up to SLOW_MS) until o has counted want evictions, and no more. */
static void wait_evictions(struct owner *o, unsigned want)
{
	long end = harness_now_ms() + SLOW_MS;

	while (__atomic_load_n(&o->evictions, __ATOMIC_SEQ_CST) < want) {
		assert_true(harness_now_ms() < end);
		usleep(1000);
	}
	assert_int_equal(__atomic_load_n(&o->evictions, __ATOMIC_SEQ_CST), want);
}

/* A subscriber's tally. */
struct tally {
	unsigned samples, events;
};

static void count(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct tally *t = userdata;

	(void)c;
	if (ev->type == ROCMMEM_EVENT_SAMPLE)
		t->samples++;
	else if (ev->type == ROCMMEM_EVENT_TELEMETRY)
		t->events++;
}

/* dispatch_until dispatches c's events until *counter reaches want (up to SLOW_MS). */
static void dispatch_until(rocmmem_client *c, const unsigned *counter, unsigned want)
{
	long end = harness_now_ms() + SLOW_MS;

	while (*counter < want && harness_now_ms() < end) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		poll(&p, 1, 100);
		assert_true(rocmmem_dispatch(c) >= 0);
	}
	assert_true(*counter >= want);
}

/* wait_clients waits until the daemon lists `want` clients besides the reader. */
static void wait_clients(size_t want)
{
	long end = harness_now_ms() + SLOW_MS;
	struct fault_books b;

	do {
		assert_int_equal(fault_books(&daemon_, &b), 0);
		if (b.clients == want)
			return;
		fault_sleep_us(50000);
	} while (harness_now_ms() < end);
	fail_msg("%zu clients connected, want %zu", b.clients, want);
}

/* killed: a child holding two leases, SIGKILLed. */
static void killed_client(void)
{
	int p[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 4 * MIB, .timeout_ms = 0};
		rocmmem_client *cl = NULL;
		rocmmem_lease *l[2];

		close(p[0]);
		if (rocmmem_connect(daemon_.sock, "doomed", SLOW_MS, &cl) ||
		    rocmmem_lease_acquire(cl, &req, &l[0]) ||
		    rocmmem_lease_acquire(cl, &req, &l[1]))
			_exit(1);
		if (write(p[1], "R", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* log_number finds the first line with key in the valgrind log and reads the number after. */
static bool log_number(const char *key, unsigned long long *value)
{
	FILE *f = fopen(vg_log, "r");
	char line[1024];
	bool found = false;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, key);
		char digits[64];
		size_t n = 0;

		if (!at)
			continue;
		/* Valgrind writes 1,234 for large numbers. */
		for (at += strlen(key); *at && n + 1 < sizeof(digits); at++) {
			if (*at >= '0' && *at <= '9')
				digits[n++] = *at;
			else if (*at != ',' && *at != ' ')
				break;
		}
		digits[n] = '\0';
		found = n > 0;
		*value = strtoull(digits, NULL, 10);
	}
	fclose(f);
	return found;
}

static bool log_has(const char *text)
{
	FILE *f = fopen(vg_log, "r");
	char line[1024];
	bool found = false;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

static void test_scenario_under_memcheck(void **state)
{
	static char log_opt[160];
	const char *const valgrind[] = {VALGRIND_BIN,
					"--tool=memcheck",
					"--error-exitcode=99",
					"--leak-check=full",
					"--errors-for-leak-kinds=definite",
					"--show-leak-kinds=definite",
					"--num-callers=30",
					log_opt,
					NULL};
	/* Deadlines far beyond anything valgrind slows down. */
	const char *const args[] = {"--budget",
				    "64M",
				    "--log-level",
				    "info",
				    "--evict-deadline",
				    "600",
				    "--shutdown-timeout",
				    "600",
				    "--handshake-timeout",
				    "600",
				    NULL};
	struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
					  .name = "vg-model",
					  .model_class = ROCMMEM_MODEL_TRANSFORMER,
					  .size = 32 * MIB};
	struct owner owner = {0};
	struct tally tally = {0};
	uint32_t interval = 0;
	rocmmem_client *a, *b, *sub;
	rocmmem_lease *held[3], *evicting, *kept;
	rocmmem_status *st = NULL;
	unsigned long long errors = 1, lost = 1;
	char *metrics = NULL;
	long t0 = harness_now_ms();
	int raw, rc;

	(void)state;
	snprintf(vg_dir, sizeof(vg_dir), "/tmp/rocmmem-valgrind-XXXXXX");
	assert_non_null(mkdtemp(vg_dir));
	snprintf(vg_log, sizeof(vg_log), "%s/memcheck.log", vg_dir);
	snprintf(log_opt, sizeof(log_opt), "--log-file=%s", vg_log);
	if (fault_daemon_start(&daemon_, valgrind, NULL, args, SLOW_MS) != 0)
		fail_msg("rocmmemd did not start under valgrind");
	print_message("rocmmemd up under memcheck after %ld ms\n", harness_now_ms() - t0);

	/* Leases: taken, touched, one released; status and metrics. */
	a = connect_slow("vg-leases");
	held[0] = lease(a, 8 * MIB, 0, "one");
	held[1] = lease(a, 8 * MIB, 0, "two");
	held[2] = lease(a, 4 * MIB, 0, "three");
	assert_int_equal(rocmmem_lease_release(held[1]), 0);
	b = connect_slow("vg-status");
	assert_int_equal(rocmmem_status_get(b, &st), 0);
	assert_int_equal(rocmmem_status_lease_count(st), 2);
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_metrics(b, &metrics), 0);
	assert_non_null(strstr(metrics, "rocmmem"));
	free(metrics);

	/* A subscriber to samples and events, then to events alone (kept to the end). */
	sub = connect_slow("vg-subscriber");
	rocmmem_set_event_callback(sub, count, &tally);
	assert_int_equal(rocmmem_subscribe(sub,
					   ROCMMEM_SUBSCRIBE_SAMPLES | ROCMMEM_SUBSCRIBE_EVENTS,
					   100, &interval),
			 0);
	assert_int_equal(interval, 100);

	/* A model, resident and idle, evicted for b's lease (12 MiB held by a, 32 by it). */
	owner.c = connect_slow("vg-owner");
	rocmmem_set_event_callback(owner.c, owner_event, &owner);
	assert_int_equal(rocmmem_model_register(owner.c, &desc, &owner.model), 0);
	assert_int_equal(rocmmem_model_acquire(owner.c, owner.model, 0), 0);
	assert_int_equal(rocmmem_model_release(owner.c, owner.model), 0);
	assert_int_equal(pthread_create(&owner.thread, NULL, owner_loop, &owner), 0);
	evicting = lease(b, 40 * MIB, SLOW_MS, "needs-eviction");
	/* The owner's thread counts the eviction once its ack is answered, which may be after
	 * the daemon granted b's lease: waited for, not read once. */
	wait_evictions(&owner, 1);
	assert_int_equal(owner.ack, 0);
	dispatch_until(sub, &tally.samples, 2);
	dispatch_until(sub, &tally.events, 3);
	assert_int_equal(rocmmem_unsubscribe(sub), 0);
	assert_int_equal(rocmmem_subscribe(sub, ROCMMEM_SUBSCRIBE_EVENTS, 0, NULL), 0);

	/* A wait that times out and a request that can never fit. */
	{
		struct rocmmem_lease_request req = {
		    .struct_size = sizeof(req), .size = 32 * MIB, .timeout_ms = 200};
		rocmmem_lease *l = NULL;

		assert_int_equal(rocmmem_lease_acquire(a, &req, &l), -ETIMEDOUT);
		req.size = 128 * MIB;
		req.timeout_ms = 0;
		assert_int_equal(rocmmem_lease_acquire(a, &req, &l), -E2BIG);
	}
	assert_int_equal(rocmmem_lease_release(evicting), 0);

	/* A protocol violation: garbage before hello gets a disconnect. */
	raw = harness_raw_connect(&daemon_);
	assert_true(raw >= 0);
	assert_int_equal(harness_raw_send_bytes(raw, "\xff\xff\xff\xff garbage", 12, NULL, 0), 0);
	{
		bool eof = false;
		Rocmmem__Wire__ServerMessage *m;

		while ((m = harness_raw_recv(raw, SLOW_MS, &eof, NULL, NULL)))
			rocmmem__wire__server_message__free_unpacked(m, NULL);
		assert_true(eof);
	}
	close(raw);

	/* A client killed holding memory. */
	killed_client();
	wait_clients(4); /* a, b, the subscriber and the owner */

	/* The owner goes with its model registered, b with nothing. */
	owner.stop = true;
	pthread_join(owner.thread, NULL);
	rocmmem_disconnect(owner.c);
	rocmmem_disconnect(b);
	kept = held[0];
	assert_int_equal(rocmmem_lease_release(held[2]), 0);
	wait_clients(2);

	/* SIGTERM while a still holds a lease: the daemon drains until it is given back. */
	kill(daemon_.pid, SIGTERM);
	/* Released only once the daemon is draining (its log says so), whatever the load. */
	assert_true(harness_log_wait(&daemon_, "stopping", SLOW_MS));
	assert_int_equal(rocmmem_lease_release(kept), 0);
	rocmmem_disconnect(a);
	rocmmem_disconnect(sub);
	rc = fault_daemon_wait_exit(&daemon_, 120000);
	if (rc == -2)
		print_message("rocmmemd did not finish its drain in 120 s\n");
	if (fault_daemon_stop(&daemon_, 10000, false) != 0 && rc == -2)
		rc = -1;
	print_message("rocmmemd exited %d after %ld ms under memcheck\n", rc,
		      harness_now_ms() - t0);

	/* Valgrind's own summary, read rather than trusted to the exit status alone. */
	if (!log_has("Memcheck, a memory error detector") || !log_has("rocmmemd"))
		fail_msg("%s is not memcheck's log of rocmmemd", vg_log);
	if (!log_number("ERROR SUMMARY:", &errors))
		fail_msg("no ERROR SUMMARY in %s: valgrind did not finish", vg_log);
	if (!log_number("definitely lost:", &lost))
		lost = log_has("All heap blocks were freed") || log_has("no leaks are possible")
			   ? 0
			   : 1;
	if (rc != 0 || errors != 0 || lost != 0) {
		char cmd[PATH_MAX];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", vg_log);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not print %s)\n", vg_log);
	}
	unlink(vg_log);
	rmdir(vg_dir);
	if (rc == 99)
		fail_msg("memcheck found errors or definite leaks (exit 99)");
	assert_int_equal(rc, 0);
	if (errors != 0)
		fail_msg("memcheck reported %llu errors", errors);
	if (lost != 0)
		fail_msg("memcheck found %llu bytes definitely lost", lost);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scenario_under_memcheck),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
