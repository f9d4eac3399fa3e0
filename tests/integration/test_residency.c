/* SPDX-License-Identifier: MIT */
/* test_residency.c: models across a real daemon: eviction on demand, from the host's side. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

/* idle_and_whole: the shared check, and the accounting invariant once every client is gone:
 * nothing held, nothing reserved (the whole budget free). */
static int idle_and_whole(void **state)
{
	struct harness_totals t;

	if (harness_case_idle(state) < 0 || harness_totals(&harness_group, &t) < 0)
		return -1;
	return t.free_bytes == t.budget_bytes ? 0 : -1;
}

/* A host that unloads whatever it is asked to, from inside its own waits. */
struct host {
	rocmmem_client *c;
	unsigned evict_requests, revoked;
	uint64_t last_evicted;
	int ack_result;
};

static void host_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct host *h = userdata;

	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST) {
		h->evict_requests++;
		h->last_evicted = ev->model_id;
		/* ... free the model's tensors here ... */
		h->ack_result = rocmmem_model_evict_ack(c, ev->model_id);
	} else if (ev->type == ROCMMEM_EVENT_MODEL_REVOKED) {
		h->revoked++;
	}
}

static uint64_t reg(rocmmem_client *c, const char *name, enum rocmmem_model_class cls,
		    uint64_t size, int32_t priority)
{
	struct rocmmem_model_desc desc = {.struct_size = sizeof(desc),
					  .name = name,
					  .model_class = cls,
					  .size = size,
					  .priority = priority};
	uint64_t id = 0;

	assert_int_equal(rocmmem_model_register(c, &desc, &id), 0);
	assert_true(id > 0);
	return id;
}

static const struct rocmmem_model_info *find_model(const rocmmem_status *st, uint64_t id)
{
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		if (rocmmem_status_model(st, i)->id == id)
			return rocmmem_status_model(st, i);
	return NULL;
}

static void test_single_threaded_host_swaps_its_models(void **state)
{
	struct host h = {0};
	rocmmem_status *st = NULL;
	uint64_t transformer, vae;

	(void)state;
	h.c = harness_connect(&harness_group, "framepack");
	rocmmem_set_event_callback(h.c, host_event, &h);
	transformer = reg(h.c, "transformer", ROCMMEM_MODEL_TRANSFORMER, 48 * MiB, 0);
	vae = reg(h.c, "vae", ROCMMEM_MODEL_VAE, 32 * MiB, 0);
	assert_int_equal(rocmmem_model_acquire(h.c, transformer, 0), 0);
	/* Both cannot be resident: while the transformer is in use, the VAE would wait forever
	 * on this client's own model: refused at once instead of hanging the host. */
	assert_int_equal(rocmmem_model_acquire(h.c, vae, 5000), -EDEADLK);
	assert_int_equal(rocmmem_model_release(h.c, transformer), 0);
	/* Idle now: acquiring the VAE evicts it, and this very thread unloads and acks from
	 * inside its own wait. */
	assert_int_equal(rocmmem_model_acquire(h.c, vae, 5000), 0);
	assert_int_equal(h.evict_requests, 1);
	assert_int_equal(h.last_evicted, transformer);
	assert_int_equal(h.ack_result, 0);
	assert_int_equal(rocmmem_status_get(h.c, &st), 0);
	assert_int_equal(find_model(st, transformer)->state, ROCMMEM_MODEL_EVICTED);
	assert_int_equal(find_model(st, transformer)->bytes, 0);
	assert_int_equal(find_model(st, transformer)->evictions, 1);
	assert_int_equal(find_model(st, vae)->state, ROCMMEM_MODEL_IN_USE);
	assert_int_equal(find_model(st, vae)->reservation_bytes, 32 * MiB);
	assert_int_equal(rocmmem_status_device(st, 0)->reserved_bytes, 32 * MiB);
	rocmmem_status_free(st);
	/* A second ack of the eviction that is over, an ack nobody asked for, and a release of
	 * what is not in use, are refused. */
	assert_int_equal(rocmmem_model_evict_ack(h.c, transformer), -ESTALE);
	assert_int_equal(rocmmem_model_evict_ack(h.c, vae), -EINVAL);
	assert_int_equal(rocmmem_model_release(h.c, transformer), -EINVAL);
	assert_int_equal(rocmmem_model_release(h.c, vae), 0);
	rocmmem_disconnect(h.c);
}

/* A host that reacquires its model while its eviction is under way: wait, then reserve anew. */
struct slow_host {
	rocmmem_client *c;
	uint64_t model;
	int evict_requests;
	int acquired;
};

static void *acquire_thread(void *arg)
{
	struct slow_host *h = arg;

	h->acquired = rocmmem_model_acquire(h->c, h->model, 5000);
	return NULL;
}

static void slow_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct slow_host *h = userdata;

	(void)c;
	if (ev->type == ROCMMEM_EVENT_EVICT_REQUEST && ev->model_id == h->model)
		h->evict_requests++; /* acked later, outside the callback */
}

static void test_reacquire_during_eviction(void **state)
{
	struct slow_host h = {0};
	rocmmem_client *admin = harness_connect(&harness_group, "admin");
	rocmmem_status *st = NULL;
	pthread_t t;
	pid_t pid;
	int status;

	(void)state;
	h.c = harness_connect(&harness_group, "slow");
	rocmmem_set_event_callback(h.c, slow_event, &h);
	h.model = reg(h.c, "unet", ROCMMEM_MODEL_TRANSFORMER, 24 * MiB, 0);
	assert_int_equal(rocmmem_model_acquire(h.c, h.model, 0), 0);
	assert_int_equal(rocmmem_model_release(h.c, h.model), 0);
	/* An administrator asks for it to go (and waits, in a child process). */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(rocmmem_model_evict(admin, h.model, NULL) == 0 ? 0 : 1);
	while (h.evict_requests == 0)
		assert_true(rocmmem_dispatch(h.c) >= 0);
	/* Acquire while evicting, from another thread: it waits behind the eviction... */
	assert_int_equal(rocmmem_model_acquire(h.c, h.model, 0), -ENOMEM);
	assert_int_equal(pthread_create(&t, NULL, acquire_thread, &h), 0);
	usleep(100000);
	assert_int_equal(rocmmem_model_evict_ack(h.c, h.model), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* ...and is granted once the model is out, reserving its whole size again. */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(h.acquired, 0);
	assert_int_equal(rocmmem_status_get(h.c, &st), 0);
	assert_int_equal(find_model(st, h.model)->reservation_bytes, 24 * MiB);
	assert_int_equal(find_model(st, h.model)->state, ROCMMEM_MODEL_IN_USE);
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_model_release(h.c, h.model), 0);
	rocmmem_disconnect(h.c);
	rocmmem_disconnect(admin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_single_threaded_host_swaps_its_models,
				      harness_case_idle),
	    cmocka_unit_test_teardown(test_reacquire_during_eviction, idle_and_whole),
	};

	signal(SIGPIPE, SIG_IGN);
	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "2", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
