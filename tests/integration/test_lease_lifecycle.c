/* SPDX-License-Identifier: MIT */
/* test_lease_lifecycle.c: the lease lifecycle through a real daemon, from real client processes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

static rocmmem_lease *acquire(rocmmem_client *c, uint64_t size, int64_t timeout_ms, const char *tag)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = timeout_ms, .tag = tag};
	rocmmem_lease *l = NULL;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("acquire %llu: %s (%s)", (unsigned long long)size, rocmmem_strerror(err),
			 rocmmem_last_error());
	return l;
}

/* write_and_verify is run in a child: write a pattern through the mapping and read it back. */
static int write_and_verify(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	rocmmem_client *c = NULL;
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 8 * MiB, .tag = "pattern"};
	rocmmem_lease *l = NULL;
	uint64_t *p;
	size_t n;

	(void)in;
	if (rocmmem_connect(d->sock, "writer", 5000, &c) || rocmmem_lease_acquire(c, &req, &l))
		return 10;
	p = rocmmem_lease_ptr(l);
	if (!p || rocmmem_lease_size(l) != 8 * MiB)
		return 11;
	if (((uintptr_t)p & (2 * MiB - 1)) != 0)
		return 12; /* the library aligns host leases to 2 MiB for huge pages */
	n = rocmmem_lease_size(l) / sizeof(*p);
	for (size_t i = 0; i < n; i++)
		p[i] = i * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++)
		if (p[i] != i * 0x9e3779b97f4a7c15ull)
			return 13;
	pipe_put(out, (int64_t)rocmmem_lease_id(l));
	if (rocmmem_lease_release(l))
		return 14;
	rocmmem_disconnect(c);
	return 0;
}

static void test_write_read_back(void **state)
{
	struct child ch;
	int64_t id = 0;

	(void)state;
	assert_int_equal(child_start(&ch, write_and_verify, &harness_group), 0);
	assert_true(pipe_get(ch.from_child, &id, 10000));
	assert_true(id > 0);
	assert_int_equal(child_wait(&ch, 10000), 0);
}

/* per_lease_client connects a client that asks for no host arena: a memfd per lease. */
static rocmmem_client *per_lease_client(const char *name)
{
	rocmmem_client *c;

	setenv("ROCMMEM_HOST_ARENA", "0", 1);
	c = harness_connect(&harness_group, name);
	unsetenv("ROCMMEM_HOST_ARENA");
	return c;
}

static void test_memfd_is_sealed(void **state)
{
	rocmmem_client *c = per_lease_client("sealed");
	rocmmem_lease *l = acquire(c, 4 * MiB, 0, NULL);
	int fd = rocmmem_lease_fd(l);
	int seals = fcntl(fd, F_GET_SEALS);

	(void)state;
	assert_int_equal(rocmmem_lease_handle_kind(l), ROCMMEM_HANDLE_MEMFD);
	assert_true(seals >= 0);
	assert_true(seals & F_SEAL_GROW);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_SEAL);
	/* A client can neither grow its lease beyond the budget nor re-seal it. */
	assert_int_equal(ftruncate(fd, 64 * MiB), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 2 * MiB), -1);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(c);
}

static void test_status_reflects_leases(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "status-live");
	rocmmem_lease *a = acquire(c, 3 * MiB, 0, "alpha"); /* rounds up to 4 MiB */
	rocmmem_lease *b = acquire(c, 10 * MiB, 0, "beta");
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *dev;
	bool seen_alpha = false, seen_beta = false;

	(void)state;
	assert_int_equal(rocmmem_lease_size(a), 4 * MiB);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	dev = rocmmem_status_device(st, 0);
	assert_non_null(dev);
	assert_int_equal(dev->budget_bytes, 64 * MiB);
	assert_int_equal(dev->leased_bytes, 14 * MiB);
	assert_int_equal(dev->free_bytes, 50 * MiB);
	assert_int_equal(dev->leases, 2);
	assert_int_equal(rocmmem_status_lease_count(st), 2);
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *li = rocmmem_status_lease(st, i);

		assert_int_equal(li->owner_pid, getpid());
		if (li->id == rocmmem_lease_id(a)) {
			seen_alpha = strcmp(li->tag, "alpha") == 0 && li->bytes == 4 * MiB;
		} else if (li->id == rocmmem_lease_id(b)) {
			seen_beta = strcmp(li->tag, "beta") == 0 && li->bytes == 10 * MiB;
		}
	}
	assert_true(seen_alpha && seen_beta);
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *ci = rocmmem_status_client(st, i);

		if (strcmp(ci->name, "status-live") == 0) {
			assert_int_equal(ci->leases, 2);
			assert_int_equal(ci->leased_bytes, 14 * MiB);
			assert_int_equal(ci->pid, getpid());
		}
	}
	rocmmem_status_free(st);

	assert_int_equal(rocmmem_lease_release(a), 0);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 10 * MiB);
	assert_int_equal(rocmmem_status_lease_count(st), 1);
	assert_int_equal(rocmmem_status_lease(st, 0)->id, rocmmem_lease_id(b));
	rocmmem_status_free(st);
	assert_int_equal(rocmmem_lease_release(b), 0);
	rocmmem_disconnect(c);
}

static void test_disconnect_reclaims_all(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "many");
	struct harness_totals t;

	(void)state;
	for (int i = 0; i < 5; i++)
		assert_non_null(acquire(c, 4 * MiB, 0, NULL));
	assert_int_equal(harness_totals(&harness_group, &t), 0);
	assert_int_equal(t.leased_bytes, 20 * MiB);
	assert_int_equal(t.leases, 5);
	/* Disconnect unmaps and frees the handles; the daemon reclaims the memory. */
	rocmmem_disconnect(c);
	assert_true(harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0);
}

static void test_release_returns_memory(void **state)
{
	rocmmem_client *c = per_lease_client("punch");
	rocmmem_lease *l = acquire(c, 8 * MiB, 0, NULL);
	uint8_t *p = rocmmem_lease_ptr(l);
	int keep = dup(rocmmem_lease_fd(l));
	struct stat st;
	uint8_t *view;

	(void)state;
	assert_true(keep >= 0);
	memset(p, 0xab, 8 * MiB);
	assert_int_equal(fstat(keep, &st), 0);
	assert_true(st.st_blocks * 512 >= (off_t)(8 * MiB));
	assert_int_equal(rocmmem_lease_release(l), 0);
	/*
	 * Even a client that kept a reference cannot keep the memory once released: the daemon
	 * punched the pages out, so the budget it reports is true.
	 */
	assert_int_equal(fstat(keep, &st), 0);
	assert_int_equal(st.st_blocks, 0);
	view = mmap(NULL, 8 * MiB, PROT_READ, MAP_SHARED, keep, 0);
	assert_true(view != MAP_FAILED);
	assert_int_equal(view[0], 0);
	assert_int_equal(view[8 * MiB - 1], 0);
	munmap(view, 8 * MiB);
	close(keep);
	rocmmem_disconnect(c);
}

static void test_refusal_explains(void **state)
{
	rocmmem_client *holder = harness_connect(&harness_group, "big-holder");
	rocmmem_client *asker = harness_connect(&harness_group, "asker");
	rocmmem_lease *l = acquire(holder, 48 * MiB, 0, NULL);
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 32 * MiB, .timeout_ms = 0};
	rocmmem_lease *denied = NULL;
	char pid[32];

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(asker, &req, &denied), -ENOMEM);
	assert_null(denied);
	/* What was asked, what is free, and who holds the rest. */
	assert_non_null(strstr(rocmmem_last_error(), "requested 32 MiB"));
	assert_non_null(strstr(rocmmem_last_error(), "16 MiB of its 64 MiB budget is free"));
	snprintf(pid, sizeof(pid), "pid %d 'big-holder' 48 MiB", (int)getpid());
	assert_non_null(strstr(rocmmem_last_error(), pid));

	req.size = 65 * MiB;
	assert_int_equal(rocmmem_lease_acquire(asker, &req, &denied), -E2BIG);
	assert_non_null(strstr(rocmmem_last_error(), "whole budget of 64 MiB"));
	req.size = 0;
	assert_int_equal(rocmmem_lease_acquire(asker, &req, &denied), -EINVAL);
	req.size = 2 * MiB;
	req.device = 3;
	assert_int_equal(rocmmem_lease_acquire(asker, &req, &denied), -ENODEV);
	req.device = 0;
	req.flags = 0x80;
	assert_int_equal(rocmmem_lease_acquire(asker, &req, &denied), -EINVAL);
	assert_int_equal(rocmmem_lease_acquire(NULL, &req, &denied), -EINVAL);
	assert_string_equal(rocmmem_strerror(-E2BIG), "larger than the device's whole budget");
	assert_int_equal(rocmmem_lease_release(l), 0);
	rocmmem_disconnect(holder);
	rocmmem_disconnect(asker);
}

static void test_nomap_and_accessors(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "nomap");
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = 2 * MiB, .flags = ROCMMEM_LEASE_NOMAP};
	rocmmem_lease *l = NULL;

	(void)state;
	assert_int_equal(rocmmem_lease_acquire(c, &req, &l), 0);
	assert_null(rocmmem_lease_ptr(l));
	assert_true(rocmmem_lease_fd(l) >= 0);
	assert_int_equal(rocmmem_lease_device(l), 0);
	assert_int_equal(rocmmem_lease_waited_ms(l), 0);
	assert_string_equal(rocmmem_client_backend(c), "host");
	assert_int_equal(rocmmem_client_device_count(c), 1);
	assert_non_null(rocmmem_client_daemon_version(c));
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_lease_release(NULL), 0);
	rocmmem_disconnect(c);
	rocmmem_disconnect(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_write_read_back, harness_case_idle),
	    cmocka_unit_test_teardown(test_memfd_is_sealed, harness_case_idle),
	    cmocka_unit_test_teardown(test_status_reflects_leases, harness_case_idle),
	    cmocka_unit_test_teardown(test_disconnect_reclaims_all, harness_case_idle),
	    cmocka_unit_test_teardown(test_release_returns_memory, harness_case_idle),
	    cmocka_unit_test_teardown(test_refusal_explains, harness_case_idle),
	    cmocka_unit_test_teardown(test_nomap_and_accessors, harness_case_idle),
	};

	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
