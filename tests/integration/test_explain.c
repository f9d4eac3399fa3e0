/* SPDX-License-Identifier: MIT */
/* test_explain.c: every refusal explains itself with the true numbers, and status keeps it. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

/* The longest explanation the daemon writes (daemon/policy/explain.h). */
#define EXPLAIN_MAX 880u

static struct daemon_proc daemon_;

static int start(const char *const *args)
{
	return harness_daemon_start(&daemon_, args);
}

static int setup_plain(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "30", NULL};

	(void)state;
	return start(args);
}

static int setup_exclusive(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--exclusive", "transformer,vae",
					   NULL};

	(void)state;
	return start(args);
}

static int teardown(void **state)
{
	(void)state;
	return harness_daemon_stop(&daemon_) == 0 ? 0 : -1;
}

/* A client process that holds what it is told to: leases and models. */
enum op { OP_LEASE = 1, OP_MODEL, OP_QUIT };

struct host_spec {
	const char *name;
	bool ack; /* unload (ack) models when the daemon asks, or ignore the request */
};

struct host {
	struct child ch;
	struct host_spec spec;
};

static bool put_str(int fd, const char *s)
{
	size_t n = strlen(s);

	return pipe_put(fd, (int64_t)n) && write(fd, s, n) == (ssize_t)n;
}

static bool get_str(int fd, char *buf, size_t len)
{
	int64_t n;

	if (!pipe_get(fd, &n, 10000) || n < 0 || (size_t)n >= len)
		return false;
	if (n && read(fd, buf, (size_t)n) != (ssize_t)n)
		return false;
	buf[n] = '\0';
	return true;
}

static void host_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	const struct host_spec *spec = userdata;

	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST && spec->ack)
		rocmmem_model_evict_ack(c, ev->model_id);
}

/* host_main serves commands until told to quit, unloading models meanwhile if asked to. */
static int host_main(void *arg, int in, int out)
{
	struct host_spec *spec = arg;
	rocmmem_client *c = NULL;

	if (rocmmem_connect(daemon_.sock, spec->name, 5000, &c))
		return 20;
	rocmmem_set_event_callback(c, host_event, spec);
	for (;;) {
		struct pollfd p[2] = {{.fd = in, .events = POLLIN},
				      {.fd = rocmmem_event_fd(c), .events = POLLIN}};
		int64_t op, a, b, pinned, keep;
		char name[80];

		if (poll(p, 2, 60000) <= 0)
			return 21;
		if (p[1].revents)
			rocmmem_dispatch(c);
		if (!p[0].revents)
			continue;
		if (!pipe_get(in, &op, 1000))
			return 22;
		if (op == OP_QUIT)
			break;
		if (op == OP_LEASE) {
			struct rocmmem_lease_request req = {.struct_size = sizeof(req)};
			rocmmem_lease *l = NULL;
			int err;

			if (!pipe_get(in, &a, 1000) || !pipe_get(in, &b, 1000))
				return 23;
			req.size = (uint64_t)a;
			req.timeout_ms = b;
			err = rocmmem_lease_acquire(c, &req, &l);
			pipe_put(out, err ? err : (int64_t)rocmmem_lease_id(l));
		} else if (op == OP_MODEL) {
			struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
							  .name = name};
			uint64_t id = 0;
			int err;

			if (!pipe_get(in, &a, 1000) || !pipe_get(in, &b, 1000) ||
			    !pipe_get(in, &pinned, 1000) || !pipe_get(in, &keep, 1000) ||
			    !get_str(in, name, sizeof(name)))
				return 24;
			desc.model_class = (enum rocmmem_model_class)a;
			desc.size = (uint64_t)b;
			desc.pinned = (int)pinned;
			err = rocmmem_model_register(c, &desc, &id);
			if (!err)
				err = rocmmem_model_acquire(c, id, 5000);
			if (!err && !keep)
				err = rocmmem_model_release(c, id);
			pipe_put(out, err ? err : (int64_t)id);
		} else {
			return 25;
		}
	}
	rocmmem_disconnect(c);
	return 0;
}

static void host_start(struct host *h, const char *name, bool ack)
{
	h->spec.name = name;
	h->spec.ack = ack;
	assert_int_equal(child_start(&h->ch, host_main, &h->spec), 0);
}

static int64_t host_reply(struct host *h)
{
	int64_t v = 0;

	assert_true(pipe_get(h->ch.from_child, &v, 10000));
	return v;
}

/* host_lease_send asks for a lease without waiting for the answer. */
static void host_lease_send(struct host *h, uint64_t size, int64_t timeout_ms)
{
	assert_true(pipe_put(h->ch.to_child, OP_LEASE));
	assert_true(pipe_put(h->ch.to_child, (int64_t)size));
	assert_true(pipe_put(h->ch.to_child, timeout_ms));
}

static void host_lease(struct host *h, uint64_t size)
{
	host_lease_send(h, size, 0);
	assert_true(host_reply(h) > 0);
}

/* host_model registers a model and makes it resident: in use if keep, else idle. */
static uint64_t host_model(struct host *h, const char *name, enum rocmmem_model_class cls,
			   uint64_t size, bool pinned, bool keep)
{
	int64_t id;

	assert_true(pipe_put(h->ch.to_child, OP_MODEL));
	assert_true(pipe_put(h->ch.to_child, cls));
	assert_true(pipe_put(h->ch.to_child, (int64_t)size));
	assert_true(pipe_put(h->ch.to_child, pinned));
	assert_true(pipe_put(h->ch.to_child, keep));
	assert_true(put_str(h->ch.to_child, name));
	id = host_reply(h);
	assert_true(id > 0);
	return (uint64_t)id;
}

static void host_quit(struct host *h)
{
	assert_true(pipe_put(h->ch.to_child, OP_QUIT));
	assert_int_equal(child_wait(&h->ch, 10000), 0);
}

/* expect_has fails the test, showing the whole text, when it lacks part. */
static void expect_has(const char *text, const char *part)
{
	if (!strstr(text, part))
		fail_msg("expected \"%s\" in \"%s\"", part, text);
}

static void expect_hasf(const char *text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void expect_hasf(const char *text, const char *fmt, ...)
{
	char part[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(part, sizeof(part), fmt, ap);
	va_end(ap);
	expect_has(text, part);
}

static void expect_lacks(const char *text, const char *part)
{
	if (strstr(text, part))
		fail_msg("did not expect \"%s\" in \"%s\"", part, text);
}

/* expect_suggestion: the explanation ends with exactly this suggestion. */
static void expect_suggestion(const char *text, const char *suggestion)
{
	const char *s = strstr(text, "; suggestion: ");

	if (!s || strcmp(s + strlen("; suggestion: "), suggestion) != 0)
		fail_msg("expected the suggestion \"%s\" at the end of \"%s\"", suggestion, text);
	assert_null(strstr(s + 1, "; suggestion: "));
}

/* expect_denial: the latest refusal in status is this one, word for word. */
static void expect_denial(int err, uint64_t bytes, const char *client, const char *model,
			  const char *reason)
{
	rocmmem_client *c = harness_connect(&daemon_, "status");
	const struct rocmmem_denial_info *d;
	rocmmem_status *st = NULL;
	size_t n;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	n = rocmmem_status_denial_count(st);
	assert_true(n > 0);
	d = rocmmem_status_denial(st, n - 1);
	assert_int_equal(d->error, err);
	assert_int_equal(d->bytes, bytes);
	assert_int_equal(d->pid, getpid());
	assert_int_equal(d->device, 0);
	assert_string_equal(d->client_name, client);
	assert_string_equal(d->model_name, model);
	assert_string_equal(d->reason, reason);
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

/* wait_waiters polls until the device's queue holds n requests. */
static void wait_waiters(uint32_t n)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;
	struct harness_totals t;

	while (harness_now_ms() < end) {
		if (harness_totals(&daemon_, &t) == 0 && t.waiters == n)
			return;
		usleep(2000);
	}
	fail_msg("the queue never reached %u waiters", n);
}

static int lease(rocmmem_client *c, uint64_t size, int64_t timeout_ms, char *why, size_t len)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = timeout_ms};
	rocmmem_lease *l = NULL;
	int err = rocmmem_lease_acquire(c, &req, &l);

	snprintf(why, len, "%s", err ? rocmmem_last_error() : "");
	if (!err)
		rocmmem_lease_release(l);
	return err;
}

static void test_at_once_names_every_holder(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a, b;
	char why[1024], s[256];

	(void)state;
	host_start(&a, "holder-a", true);
	host_start(&b, "holder-b", true);
	host_lease(&a, 24 * MiB);
	host_model(&b, "flux", ROCMMEM_MODEL_OTHER, 16 * MiB, false, true);
	assert_int_equal(lease(c, 39 * MiB, 0, why, sizeof(why)), -ENOMEM);
	expect_has(why, "requested 39 MiB (40 MiB in 2 MiB granules) on device 0 (host memory): "
			"24 MiB of its 64 MiB budget is free; the largest request that fits now is "
			"24 MiB;");
	expect_lacks(why, "with eviction");
	expect_hasf(why,
		    "; held by pid %d 'holder-a' 24 MiB, pid %d 'holder-b' 16 MiB (16 MiB in "
		    "models);",
		    (int)a.ch.pid, (int)b.ch.pid);
	expect_hasf(why, "; not evictable: 'flux' 16 MiB in use by pid %d;", (int)b.ch.pid);
	expect_lacks(why, "this client holds");
	expect_lacks(why, "wait ahead");
	expect_lacks(why, "being freed");
	snprintf(s, sizeof(s),
		 "ask for at most 24 MiB, or wait (timeout 0 never waits) for pid %d 'holder-a' to "
		 "release some of its 24 MiB",
		 (int)a.ch.pid);
	expect_suggestion(why, s);
	expect_denial(-ENOMEM, 39 * MiB, "asker", "", why);
	/* The log says the same. */
	assert_true(harness_log_wait(&daemon_, why, HARNESS_WAIT_MS));

	/* What the requester holds itself is told apart from the others. */
	{
		struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 8 * MiB};
		rocmmem_lease *mine = NULL;

		assert_int_equal(rocmmem_lease_acquire(c, &req, &mine), 0);
		assert_int_equal(lease(c, 20 * MiB, 0, why, sizeof(why)), -ENOMEM);
		expect_has(why, "16 MiB of its 64 MiB budget is free");
		expect_has(why, "; this client holds 8 MiB;");
		expect_suggestion(why, "release some of this client's own 8 MiB of leases first");
		rocmmem_lease_release(mine);
	}
	host_quit(&a);
	host_quit(&b);
	rocmmem_disconnect(c);
}

static void test_timed_out_behind_the_queue(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a, w;
	char why[1024];

	(void)state;
	host_start(&a, "holder-a", true);
	host_start(&w, "early-bird", true);
	host_lease(&a, 48 * MiB);
	host_lease_send(&w, 32 * MiB, 20000);
	wait_waiters(1);
	/* 8 MiB would fit, but the earlier 32 MiB comes first. */
	assert_int_equal(lease(c, 8 * MiB, 300, why, sizeof(why)), -ETIMEDOUT);
	expect_has(why,
		   "timed out after 300 ms: requested 8 MiB on device 0 (host memory): 16 MiB "
		   "of its 64 MiB budget is free; the largest request that fits now is 16 MiB; "
		   "1 earlier request(s) for 32 MiB wait ahead (the oldest for ");
	expect_hasf(why, "; held by pid %d 'holder-a' 48 MiB;", (int)a.ch.pid);
	expect_suggestion(why, "wait longer: 1 earlier request(s) for 32 MiB are served first");
	expect_denial(-ETIMEDOUT, 8 * MiB, "asker", "", why);
	/* Timeout 0 says so too. */
	assert_int_equal(lease(c, 8 * MiB, 0, why, sizeof(why)), -ENOMEM);
	expect_has(why, "; 1 earlier request(s) for 32 MiB wait ahead");
	expect_suggestion(why,
			  "wait longer: timeout 0 never waits, and earlier requests come first");
	child_kill(&w.ch);
	host_quit(&a);
	rocmmem_disconnect(c);
}

static void test_pinned_model_in_the_way(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a, b;
	char why[1024], s[256];
	uint64_t vae;

	(void)state;
	host_start(&a, "pin-owner", true);
	host_start(&b, "holder-b", true);
	vae = host_model(&a, "vae", ROCMMEM_MODEL_VAE, 24 * MiB, true, false);
	host_lease(&b, 16 * MiB);
	assert_int_equal(lease(c, 32 * MiB, 0, why, sizeof(why)), -ENOMEM);
	expect_has(why, "requested 32 MiB on device 0 (host memory): 24 MiB of its 64 MiB budget "
			"is free; the largest request that fits now is 24 MiB;");
	expect_hasf(why,
		    "; held by pid %d 'pin-owner' 24 MiB (24 MiB in models), pid %d "
		    "'holder-b' 16 MiB;",
		    (int)a.ch.pid, (int)b.ch.pid);
	expect_has(why, "; not evictable: 'vae' 24 MiB pinned;");
	expect_lacks(why, "evictable: 24 MiB");
	snprintf(s, sizeof(s), "unpin model 'vae' (rocmmemctl unpin %llu)",
		 (unsigned long long)vae);
	expect_suggestion(why, s);
	expect_denial(-ENOMEM, 32 * MiB, "asker", "", why);

	/* Beside the pinned 24 MiB, 48 MiB can never fit: refused for good, whatever the wait. */
	assert_int_equal(lease(c, 48 * MiB, 5000, why, sizeof(why)), -E2BIG);
	snprintf(
	    s, sizeof(s),
	    "pinned models hold 24 MiB of the 64 MiB budget: 48 MiB can never fit beside them; "
	    "suggestion: ask for at most 40 MiB, or unpin model 'vae' (rocmmemctl unpin %llu)",
	    (unsigned long long)vae);
	assert_string_equal(why, s);
	expect_denial(-E2BIG, 48 * MiB, "asker", "", why);
	host_quit(&a);
	host_quit(&b);
	rocmmem_disconnect(c);
}

static void test_models_in_use_by_another(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a;
	char why[1024], s[256];

	(void)state;
	host_start(&a, "busy-owner", true);
	host_model(&a, "unet", ROCMMEM_MODEL_TRANSFORMER, 40 * MiB, false, true);
	assert_int_equal(lease(c, 32 * MiB, 0, why, sizeof(why)), -ENOMEM);
	expect_has(why, "requested 32 MiB on device 0 (host memory): 24 MiB of its 64 MiB budget "
			"is free; the largest request that fits now is 24 MiB;");
	expect_hasf(why, "; held by pid %d 'busy-owner' 40 MiB (40 MiB in models);", (int)a.ch.pid);
	expect_hasf(why, "; not evictable: 'unet' 40 MiB in use by pid %d;", (int)a.ch.pid);
	snprintf(s, sizeof(s),
		 "ask for at most 24 MiB, or wait (timeout 0 never waits) for pid %d 'busy-owner' "
		 "to release some of its 40 MiB",
		 (int)a.ch.pid);
	expect_suggestion(why, s);

	/* Waiting did not help either: nothing idle to evict, the model stayed in use. */
	assert_int_equal(lease(c, 32 * MiB, 200, why, sizeof(why)), -ETIMEDOUT);
	expect_has(why, "timed out after 200 ms: requested 32 MiB");
	expect_hasf(why, "; not evictable: 'unet' 40 MiB in use by pid %d;", (int)a.ch.pid);
	snprintf(s, sizeof(s),
		 "ask for at most 24 MiB, or wait longer for pid %d 'busy-owner' to release some "
		 "of its 40 MiB",
		 (int)a.ch.pid);
	expect_suggestion(why, s);
	expect_denial(-ETIMEDOUT, 32 * MiB, "asker", "", why);
	host_quit(&a);
	rocmmem_disconnect(c);
}

static uint64_t reg(rocmmem_client *c, const char *name, enum rocmmem_model_class cls,
		    uint64_t size)
{
	struct rocmmem_model_desc desc = {
	    .struct_size = sizeof(desc), .name = name, .model_class = cls, .size = size};
	uint64_t id = 0;

	assert_int_equal(rocmmem_model_register(c, &desc, &id), 0);
	return id;
}

static void test_own_models_in_use(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	uint64_t te, vae;
	struct host b;
	char why[1024];

	(void)state;
	/* Only this client could make room: it would wait forever on itself. */
	te = reg(c, "te", ROCMMEM_MODEL_TEXT_ENCODER, 40 * MiB);
	vae = reg(c, "vae", ROCMMEM_MODEL_VAE, 32 * MiB);
	assert_int_equal(rocmmem_model_acquire(c, te, 0), 0);
	assert_int_equal(rocmmem_model_acquire(c, vae, 5000), -EDEADLK);
	snprintf(why, sizeof(why), "%s", rocmmem_last_error());
	assert_string_equal(why, "model 'vae': this client's models in use hold 40 MiB of the 64 "
				 "MiB budget (pinned models 0 B): 32 MiB fits only if it releases "
				 "some first; suggestion: release model 'te' (40 MiB) first");
	expect_denial(-EDEADLK, 32 * MiB, "asker", "vae", why);

	/* With another client holding the rest, it is only a wait: the suggestion is the same. */
	assert_int_equal(rocmmem_model_release(c, te), 0);
	assert_int_equal(rocmmem_model_resize(c, te, 24 * MiB, 0), 0);
	assert_int_equal(rocmmem_model_acquire(c, te, 0), 0);
	host_start(&b, "holder-b", true);
	host_lease(&b, 24 * MiB);
	assert_int_equal(rocmmem_model_acquire(c, vae, 0), -ENOMEM);
	snprintf(why, sizeof(why), "%s", rocmmem_last_error());
	expect_has(why, "model 'vae': requested 32 MiB on device 0 (host memory): 16 MiB of its 64 "
			"MiB budget is free;");
	expect_has(why, "; this client holds 24 MiB;");
	expect_has(why, "; not evictable: 'te' 24 MiB in use by this client");
	expect_suggestion(why, "release this client's models in use first ('te' holds 24 MiB)");
	expect_denial(-ENOMEM, 32 * MiB, "asker", "vae", why);
	assert_int_equal(rocmmem_model_release(c, te), 0);
	host_quit(&b);
	rocmmem_disconnect(c);
}

static void test_more_than_the_budget(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	char why[1024];

	(void)state;
	assert_int_equal(lease(c, 65 * MiB, 10000, why, sizeof(why)), -E2BIG);
	expect_has(why, "requested 65 MiB on device 0 (host memory), more than its whole budget of "
			"64 MiB: it can never be granted; suggestion: ask for at most 64 MiB, or "
			"raise --budget (the device has ");
	expect_denial(-E2BIG, 65 * MiB, "asker", "", why);
	rocmmem_disconnect(c);
}

static void test_evictable_models_not_enough(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	rocmmem_status *st = NULL;
	struct host a, b;
	char why[1024], s[256];

	(void)state;
	host_start(&a, "idle-owner", true);
	host_start(&b, "lease-holder", true);
	host_model(&a, "a", ROCMMEM_MODEL_OTHER, 16 * MiB, false, false);
	host_model(&a, "b", ROCMMEM_MODEL_OTHER, 8 * MiB, false, false);
	host_lease(&b, 32 * MiB);
	/* 8 free and 24 evictable: 48 would not fit even with both unloaded. */
	assert_int_equal(lease(c, 48 * MiB, 300, why, sizeof(why)), -ETIMEDOUT);
	expect_has(why, "timed out after 300 ms: requested 48 MiB on device 0 (host memory): 8 MiB "
			"of its 64 MiB budget is free; the largest request that fits now is 8 MiB "
			"(with eviction 32 MiB);");
	expect_hasf(why,
		    "; held by pid %d 'lease-holder' 32 MiB, pid %d 'idle-owner' 24 MiB (24 "
		    "MiB in models);",
		    (int)b.ch.pid, (int)a.ch.pid);
	expect_has(why, "; evictable: 24 MiB in 2 idle model(s) ('a' 16 MiB, 'b' 8 MiB), not asked "
			"to unload: all of it would still be too little;");
	snprintf(s, sizeof(s),
		 "ask for at most 32 MiB, or wait longer for pid %d 'lease-holder' to release some "
		 "of its 32 MiB",
		 (int)b.ch.pid);
	expect_suggestion(why, s);
	expect_denial(-ETIMEDOUT, 48 * MiB, "asker", "", why);
	/* Indeed nobody was asked. */
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_counters(st)->evictions, 0);
	rocmmem_status_free(st);

	/* 24 would fit once they are unloaded, which timeout 0 does not wait for. */
	assert_int_equal(lease(c, 24 * MiB, 0, why, sizeof(why)), -ENOMEM);
	expect_has(why, "; evictable: 24 MiB in 2 idle model(s) ('a' 16 MiB, 'b' 8 MiB), not asked "
			"to unload: timeout 0 never waits for that");
	expect_suggestion(why, "wait longer: timeout 0 never waits for idle models to be evicted");
	/* And with a wait it is granted, as suggested. */
	assert_int_equal(lease(c, 24 * MiB, 10000, why, sizeof(why)), 0);
	host_quit(&a);
	host_quit(&b);
	rocmmem_disconnect(c);
}

static void test_eviction_under_way(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a, b;
	char why[1024];

	(void)state;
	/* An owner that never unloads: its model stays "being evicted" until the deadline. */
	host_start(&a, "slow-owner", false);
	host_start(&b, "lease-holder", true);
	host_model(&a, "slow", ROCMMEM_MODEL_OTHER, 32 * MiB, false, false);
	host_lease(&b, 24 * MiB);
	assert_int_equal(lease(c, 32 * MiB, 500, why, sizeof(why)), -ETIMEDOUT);
	expect_has(why,
		   "timed out after 500 ms: requested 32 MiB on device 0 (host memory): 8 MiB "
		   "of its 64 MiB budget is free; the largest request that fits now is 8 MiB;");
	expect_has(why, "; 32 MiB is being freed: models being evicted 'slow' 32 MiB asked ");
	expect_hasf(why,
		    "; held by pid %d 'slow-owner' 32 MiB (32 MiB in models), pid %d "
		    "'lease-holder' 24 MiB;",
		    (int)a.ch.pid, (int)b.ch.pid);
	expect_suggestion(why, "wait longer: 32 MiB is still being freed (owners have 30 s to "
			       "unload)");
	expect_denial(-ETIMEDOUT, 32 * MiB, "asker", "", why);
	assert_true(harness_log_wait(&daemon_, why, HARNESS_WAIT_MS));
	host_quit(&a);
	host_quit(&b);
	rocmmem_disconnect(c);
}

static void test_exclusive_rival_in_use(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host a;
	char why[1024], s[256];
	uint64_t v, own, pinned;

	(void)state;
	host_start(&a, "rival-owner", true);
	host_model(&a, "t", ROCMMEM_MODEL_TRANSFORMER, 8 * MiB, false, true);
	v = reg(c, "v", ROCMMEM_MODEL_VAE, 8 * MiB);
	assert_int_equal(rocmmem_model_acquire(c, v, 0), -ENOMEM);
	snprintf(why, sizeof(why), "%s", rocmmem_last_error());
	expect_hasf(why,
		    "model 'v': requested 8 MiB on device 0 (host memory): 56 MiB of its 64 "
		    "MiB budget is free; the largest request that fits now is 56 MiB; "
		    "transformer 't' (8 MiB) of pid %d 'rival-owner' is in use, and its class "
		    "excludes vae on device 0;",
		    (int)a.ch.pid);
	snprintf(s, sizeof(s),
		 "wait (timeout 0 never waits) for pid %d 'rival-owner' to release transformer "
		 "'t': --exclusive keeps it apart from vae",
		 (int)a.ch.pid);
	expect_suggestion(why, s);
	expect_denial(-ENOMEM, 8 * MiB, "asker", "v", why);

	/* An excluded model of its own in use: it would wait on itself. */
	own = reg(c, "own-t", ROCMMEM_MODEL_TRANSFORMER, 4 * MiB);
	assert_int_equal(rocmmem_model_acquire(c, own, 0), 0);
	assert_int_equal(rocmmem_model_acquire(c, v, 5000), -EDEADLK);
	snprintf(why, sizeof(why), "%s", rocmmem_last_error());
	assert_string_equal(why, "model 'v': transformer 'own-t' (4 MiB) is in use by this client "
				 "and its class excludes vae on this device; suggestion: release "
				 "model 'own-t' first");
	expect_denial(-EDEADLK, 8 * MiB, "asker", "v", why);
	assert_int_equal(rocmmem_model_release(c, own), 0);

	/* An excluded model that is pinned: never, until it is unpinned. */
	pinned = host_model(&a, "pt", ROCMMEM_MODEL_TRANSFORMER, 2 * MiB, true, false);
	assert_int_equal(rocmmem_model_acquire(c, v, 5000), -EDEADLK);
	snprintf(s, sizeof(s),
		 "model 'v': transformer 'pt' is pinned and its class excludes vae on this device "
		 "(it holds 2 MiB); suggestion: unpin model 'pt' (rocmmemctl unpin %llu)",
		 (unsigned long long)pinned);
	assert_string_equal(rocmmem_last_error(), s);
	expect_denial(-EDEADLK, 8 * MiB, "asker", "v", s);
	host_quit(&a);
	rocmmem_disconnect(c);
}

static void test_long_names_stay_bounded(void **state)
{
	enum { HOLDERS = 6 };
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	struct host h[HOLDERS];
	char names[HOLDERS][65], why[1024], s[256];

	(void)state;
	for (int i = 0; i < HOLDERS; i++) {
		memset(names[i], 'n', 64);
		names[i][63] = (char)('0' + i);
		names[i][64] = '\0';
		host_start(&h[i], names[i], true);
		host_lease(&h[i], (uint64_t)(HOLDERS + 1 - i) * 2 * MiB);
	}
	/* 14+12+10+8+6+4 = 54 MiB held: 10 MiB free. */
	assert_int_equal(lease(c, 40 * MiB, 0, why, sizeof(why)), -ENOMEM);
	assert_true(strlen(why) <= EXPLAIN_MAX);
	/* The three largest are named, the rest summed up. */
	expect_hasf(why,
		    "; held by pid %d '%s' 14 MiB, pid %d '%s' 12 MiB, pid %d '%s' 10 MiB and 3 "
		    "others: 18 MiB;",
		    (int)h[0].ch.pid, names[0], (int)h[1].ch.pid, names[1], (int)h[2].ch.pid,
		    names[2]);
	snprintf(s, sizeof(s),
		 "ask for at most 10 MiB, or wait (timeout 0 never waits) for pid %d '%s' to "
		 "release some of its 14 MiB",
		 (int)h[0].ch.pid, names[0]);
	expect_suggestion(why, s);
	for (int i = 0; i < HOLDERS; i++)
		host_quit(&h[i]);
	rocmmem_disconnect(c);
}

static void test_status_keeps_the_latest_eight(void **state)
{
	rocmmem_client *c = harness_connect(&daemon_, "asker");
	rocmmem_status *st = NULL;
	uint64_t denials_before;
	char why[1024];

	(void)state;
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_denial_count(st), 0);
	denials_before = rocmmem_status_counters(st)->denials;
	rocmmem_status_free(st);
	for (uint64_t i = 0; i < 11; i++)
		assert_int_equal(lease(c, (65 + i) * MiB, 0, why, sizeof(why)), -E2BIG);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_counters(st)->denials, denials_before + 11);
	assert_int_equal(rocmmem_status_denial_count(st), 8);
	for (size_t i = 0; i < 8; i++) {
		const struct rocmmem_denial_info *d = rocmmem_status_denial(st, i);
		char want[64];

		/* Oldest first: the first three went. */
		assert_int_equal(d->bytes, (68 + i) * MiB);
		assert_int_equal(d->error, -E2BIG);
		assert_int_equal(d->pid, getpid());
		snprintf(want, sizeof(want), "requested %llu MiB on device 0",
			 (unsigned long long)(68 + i));
		expect_has(d->reason, want);
		if (i)
			assert_true(d->timestamp_ms >=
				    rocmmem_status_denial(st, i - 1)->timestamp_ms);
	}
	assert_null(rocmmem_status_denial(st, 8));
	rocmmem_status_free(st);
	rocmmem_disconnect(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_at_once_names_every_holder, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_timed_out_behind_the_queue, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_pinned_model_in_the_way, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_models_in_use_by_another, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_own_models_in_use, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_more_than_the_budget, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_evictable_models_not_enough, setup_plain,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_eviction_under_way, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_exclusive_rival_in_use, setup_exclusive, teardown),
	    cmocka_unit_test_setup_teardown(test_long_names_stay_bounded, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_status_keeps_the_latest_eight, setup_plain,
					    teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
