/* SPDX-License-Identifier: MIT */
/*
 * test_arena.c: host leases as ranges of one arena per client, through a real daemon: one fd
 * for many leases, ranges punched at release, per-lease clients beside arena clients, the
 * daemon's descriptors not growing with leases, the per-lease fallback, a client that dies
 * between its grant and its mapping.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "proc.h"

#define MiB ((uint64_t)1 << 20)

static rocmmem_lease *acquire(rocmmem_client *c, uint64_t size)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = size};
	rocmmem_lease *l = NULL;
	int err = rocmmem_lease_acquire(c, &req, &l);

	if (err)
		fail_msg("acquire %llu: %s (%s)", (unsigned long long)size, rocmmem_strerror(err),
			 rocmmem_last_error());
	return l;
}

/* per_lease_client connects a client that asks for no arena: a memfd per lease. */
static rocmmem_client *per_lease_client(const struct daemon_proc *d, const char *name)
{
	rocmmem_client *c;

	setenv("ROCMMEM_HOST_ARENA", "0", 1);
	c = harness_connect(d, name);
	unsetenv("ROCMMEM_HOST_ARENA");
	return c;
}

/* arena_fds counts this process's arena memfds; *last gets one of them (-1: none). */
static int arena_fds(int *last)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	*last = -1;
	assert_non_null(dir);
	while ((e = readdir(dir))) {
		char path[300], target[256];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strstr(target, "memfd:rocmmem-arena")) {
			n++;
			*last = atoi(e->d_name);
		}
	}
	closedir(dir);
	return n;
}

/* daemon_fds reads the daemon's open descriptors from its status. */
static uint64_t daemon_fds(rocmmem_client *c, uint64_t *limit)
{
	rocmmem_status *st = NULL;
	uint64_t open;

	assert_int_equal(rocmmem_status_get(c, &st), 0);
	open = rocmmem_status_daemon(st)->fds_open;
	if (limit)
		*limit = rocmmem_status_daemon(st)->fds_limit;
	rocmmem_status_free(st);
	return open;
}

/* Many leases, one fd: each is a range of one mapping, none has an fd of its own. */
static void test_one_arena_many_leases(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "arena");
	rocmmem_lease *l[6];
	int fd;

	(void)state;
	for (int i = 0; i < 6; i++) {
		l[i] = acquire(c, (uint64_t)(i % 3 + 1) * 2 * MiB);
		assert_int_equal(rocmmem_lease_handle_kind(l[i]), ROCMMEM_HANDLE_MEMFD);
		assert_int_equal(rocmmem_lease_fd(l[i]), -1);
		assert_int_equal((uintptr_t)rocmmem_lease_ptr(l[i]) % (2 * MiB), 0);
		memset(rocmmem_lease_ptr(l[i]), 0x10 + i, rocmmem_lease_size(l[i]));
	}
	assert_int_equal(arena_fds(&fd), 1);
	/* Ranges of one arena, apart: each still holds what was written to it. */
	for (int i = 0; i < 6; i++) {
		uint8_t *p = rocmmem_lease_ptr(l[i]);
		uint64_t n = rocmmem_lease_size(l[i]);

		assert_int_equal(p[0], 0x10 + i);
		assert_int_equal(p[n - 1], 0x10 + i);
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(rocmmem_lease_release(l[i]), 0);
	/* The arena stays with the connection: the next lease comes without an fd. */
	l[0] = acquire(c, 2 * MiB);
	assert_int_equal(arena_fds(&fd), 1);
	assert_int_equal(rocmmem_lease_release(l[0]), 0);
	rocmmem_disconnect(c);
	assert_int_equal(arena_fds(&fd), 0);
}

/* hole_at says whether the arena's memfd holds no page from off on (SEEK_DATA: ENXIO). */
static bool hole_at(int fd, uint64_t off)
{
	errno = 0;
	return lseek(fd, (off_t)off, SEEK_DATA) == -1 && errno == ENXIO;
}

/*
 * A released range stays warm for its client's next lease of that size (no punch, no page
 * fault: what it left there is still there), a trim punches it at once, and otherwise the
 * daemon punches it within its warm time: no page is left and the mapping reads zeros.
 */
static void test_release_punches_the_range(void **state)
{
	rocmmem_client *c = harness_connect(&harness_group, "punch");
	rocmmem_lease *keep = acquire(c, 2 * MiB), *l = acquire(c, 8 * MiB);
	uint8_t *p = rocmmem_lease_ptr(l), *k = rocmmem_lease_ptr(keep);
	uint64_t off = (uint64_t)(p - k) + 0; /* keep is at offset 0: the arena's first range */
	struct stat st;
	long started;
	off_t data;
	int fd, rc;

	(void)state;
	assert_int_equal(arena_fds(&fd), 1);
	memset(k, 0x5a, 2 * MiB);
	memset(p, 0xab, 8 * MiB);
	assert_int_equal(lseek(fd, 0, SEEK_DATA), 0);
	data = lseek(fd, (off_t)off, SEEK_DATA);
	assert_int_equal(data, (off_t)off);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_blocks * 512 >= (off_t)(10 * MiB));
	assert_int_equal(rocmmem_lease_release(l), 0);
	/* Warm: the same client's next lease of that size is the same range, as it was left. */
	l = acquire(c, 8 * MiB);
	assert_ptr_equal(rocmmem_lease_ptr(l), p);
	assert_int_equal(p[8 * MiB - 1], 0xab);
	assert_int_equal(rocmmem_lease_release(l), 0);
	/* A trim takes what is kept warm back at once: nothing left from the range on. */
	rc = rocmmem_trim(c, ROCMMEM_ALL_DEVICES, NULL);
	assert_true(rc == 0 || rc == -EOPNOTSUPP);
	assert_true(hole_at(fd, off));
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_blocks * 512 < (off_t)(4 * MiB));
	/* The kept lease is intact; released too, its range is punched by the warm deadline
	 * (250 ms; waited for with a deadline far beyond it, for a busy machine). */
	assert_int_equal(k[2 * MiB - 1], 0x5a);
	assert_int_equal(rocmmem_lease_release(keep), 0);
	started = harness_now_ms();
	while (!hole_at(fd, 0)) {
		assert_true(harness_now_ms() - started < 30000);
		usleep(10000);
	}
	/* Still mapped (a release unmaps nothing), reading zeros (a read of a hole brings a
	 * page back, as through a kept per-lease mapping: hence checked last). */
	assert_int_equal(p[0], 0);
	assert_int_equal(p[8 * MiB - 1], 0);
	assert_int_equal(k[0], 0);
	rocmmem_disconnect(c);
}

/* An arena client and a per-lease client side by side, on one budget. */
static void test_arena_and_per_lease_clients(void **state)
{
	rocmmem_client *a = harness_connect(&harness_group, "with-arena");
	rocmmem_client *b = per_lease_client(&harness_group, "per-lease");
	rocmmem_lease *la = acquire(a, 4 * MiB), *lb = acquire(b, 4 * MiB);
	struct harness_totals t;
	struct stat st;
	int fd;

	(void)state;
	assert_int_equal(rocmmem_lease_fd(la), -1);
	assert_true(rocmmem_lease_fd(lb) >= 0);
	assert_int_equal(fstat(rocmmem_lease_fd(lb), &st), 0);
	assert_int_equal(st.st_size, (off_t)(4 * MiB));
	assert_int_equal(arena_fds(&fd), 1); /* a's only */
	memset(rocmmem_lease_ptr(la), 1, 4 * MiB);
	memset(rocmmem_lease_ptr(lb), 2, 4 * MiB);
	assert_int_equal(((uint8_t *)rocmmem_lease_ptr(la))[4 * MiB - 1], 1);
	assert_int_equal(((uint8_t *)rocmmem_lease_ptr(lb))[4 * MiB - 1], 2);
	assert_int_equal(harness_totals(&harness_group, &t), 0);
	assert_int_equal(t.leased_bytes, 8 * MiB);
	assert_int_equal(t.leases, 2);
	assert_int_equal(rocmmem_lease_release(la), 0);
	assert_int_equal(rocmmem_lease_release(lb), 0);
	rocmmem_disconnect(a);
	rocmmem_disconnect(b);
}

/*
 * The daemon's descriptors do not grow with leases: 2000 leases on one arena client leave
 * fds_open where it was give or take the arena; the same count measured on a per-lease client
 * grows with every lease (the measure can fail).
 */
static void test_fds_do_not_grow_with_leases(void **state)
{
	static const char *const args[] = {"--budget", "8G", NULL};
	enum { N = 2000, PER_LEASE = 40 };
	static rocmmem_lease *l[N];
	struct daemon_proc d;
	rocmmem_client *c, *p;
	uint64_t before, after, limit;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "many");
	before = daemon_fds(c, &limit);
	assert_true(before > 0 && limit >= before);
	for (int i = 0; i < N; i++)
		l[i] = acquire(c, 2 * MiB);
	after = daemon_fds(c, NULL);
	print_message("daemon fds: %llu before, %llu with %d leases (limit %llu)\n",
		      (unsigned long long)before, (unsigned long long)after, N,
		      (unsigned long long)limit);
	assert_true(after <= before + 1); /* the arena's memfd */
	p = per_lease_client(&d, "per-lease");
	before = daemon_fds(p, NULL);
	for (int i = 0; i < PER_LEASE; i++)
		acquire(p, 2 * MiB);
	assert_true(daemon_fds(p, NULL) >= before + PER_LEASE);
	rocmmem_disconnect(p);
	for (int i = 0; i < N; i++)
		assert_int_equal(rocmmem_lease_release(l[i]), 0);
	rocmmem_disconnect(c);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* set_budget writes a configuration file with this budget. */
static void set_budget(const char *path, const char *budget)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "[devices]\nbudget = %s\n", budget);
	assert_int_equal(fclose(f), 0);
}

/*
 * A lease that fits no free range of the arena gets a memfd of its own, counted: here the
 * arena was sized for a budget of 32 MiB (64 MiB of address space) and a reload raised the
 * budget to 256 MiB.
 */
static void test_no_range_fits_gives_a_memfd(void **state)
{
	char conf[128];
	const char *args[] = {"--config", conf, NULL};
	struct daemon_proc d;
	rocmmem_client *c;
	rocmmem_lease *a, *b, *own;
	rocmmem_status *st = NULL;
	char *text = NULL;
	int fd;

	(void)state;
	snprintf(conf, sizeof(conf), "/tmp/rocmmem-arena-conf-%d", (int)getpid());
	set_budget(conf, "32M");
	assert_int_equal(harness_daemon_start(&d, args), 0);
	c = harness_connect(&d, "grown");
	a = acquire(c, 16 * MiB); /* the arena: 64 MiB */
	set_budget(conf, "256M");
	kill(d.pid, SIGHUP);
	assert_true(harness_log_wait(&d, "reloaded the configuration", HARNESS_WAIT_MS));
	b = acquire(c, 40 * MiB); /* 56 of 64 MiB in the arena */
	assert_int_equal(rocmmem_lease_fd(b), -1);
	own = acquire(c, 32 * MiB); /* 8 MiB left in the arena: its own memfd */
	assert_true(rocmmem_lease_fd(own) >= 0);
	memset(rocmmem_lease_ptr(own), 7, 32 * MiB);
	assert_int_equal(((uint8_t *)rocmmem_lease_ptr(own))[32 * MiB - 1], 7);
	assert_int_equal(arena_fds(&fd), 1);
	assert_int_equal(rocmmem_status_get(c, &st), 0);
	assert_int_equal(rocmmem_status_device(st, 0)->leased_bytes, 88 * MiB);
	/* Its arena as status shows it: the memfd of its own is no part of it, but counted. */
	assert_int_equal(rocmmem_status_client_count(st), 1);
	assert_int_equal(rocmmem_status_client(st, 0)->arena_bytes, 64 * MiB);
	assert_int_equal(rocmmem_status_client(st, 0)->arena_used_bytes, 56 * MiB);
	assert_int_equal(rocmmem_status_client(st, 0)->arena_free_bytes, 8 * MiB);
	assert_int_equal(rocmmem_status_client(st, 0)->arena_largest_free, 8 * MiB);
	assert_int_equal(rocmmem_status_client(st, 0)->arena_fallbacks, 1);
	assert_int_equal(rocmmem_status_client(st, 0)->leased_bytes, 88 * MiB);
	rocmmem_status_free(st);
	/* Counted where an operator sees it. */
	assert_int_equal(rocmmem_metrics(c, &text), 0);
	assert_non_null(strstr(text, "\nrocmmemd_arena_fallbacks_total 1\n"));
	assert_non_null(strstr(text, "\nrocmmemd_host_arenas 1\n"));
	free(text);
	assert_int_equal(rocmmem_lease_release(own), 0);
	assert_int_equal(rocmmem_lease_release(b), 0);
	assert_int_equal(rocmmem_lease_release(a), 0);
	rocmmem_disconnect(c);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(harness_daemon_stop(&d), 0);
	unlink(conf);
}

/* A revoked lease's range is punched: the mapping the client keeps reads zeros. */
static void test_revoked_lease_reads_zeros(void **state)
{
	static const char *const args[] = {"--budget", "64M", "--evict-deadline", "1", NULL};
	struct rocmmem_model_desc desc = {.struct_size = sizeof(desc), .name = "unet"};
	struct rocmmem_lease_request req = {.struct_size = sizeof(req), .size = 4 * MiB};
	struct rocmmem_evict_result res = ROCMMEM_EVICT_RESULT_INIT;
	struct daemon_proc d;
	rocmmem_client *owner, *admin;
	rocmmem_lease *keep, *l = NULL;
	uint8_t *p;
	int fd;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	owner = harness_connect(&d, "owner");
	admin = harness_connect(&d, "admin");
	keep = acquire(owner, 2 * MiB);
	assert_int_equal(rocmmem_model_register(owner, &desc, &req.model_id), 0);
	assert_int_equal(rocmmem_lease_acquire(owner, &req, &l), 0);
	p = rocmmem_lease_ptr(l);
	memset(p, 0xee, 4 * MiB);
	assert_int_equal(arena_fds(&fd), 1);
	/* The owner never acks: its model is revoked at the deadline, the tagged lease with it. */
	assert_int_equal(rocmmem_model_evict(admin, req.model_id, &res), 0);
	assert_true(res.revoked);
	errno = 0;
	assert_int_equal(lseek(fd, (off_t)2 * MiB, SEEK_DATA), -1);
	assert_int_equal(errno, ENXIO);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[4 * MiB - 1], 0);
	/* The owner learns it from the event: then its release is quietly fine. */
	for (long end = harness_now_ms() + HARNESS_WAIT_MS;
	     !rocmmem_lease_revoked(l) && harness_now_ms() < end;) {
		rocmmem_dispatch(owner);
		usleep(5000);
	}
	assert_true(rocmmem_lease_revoked(l));
	assert_int_equal(rocmmem_lease_release(l), 0);
	assert_int_equal(rocmmem_lease_release(keep), 0);
	rocmmem_disconnect(admin);
	rocmmem_disconnect(owner);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

/* grant_and_die takes a lease (the arena's fd comes with it) and is killed before mapping it. */
static int grant_and_die(void *arg, int in, int out)
{
	const struct daemon_proc *d = arg;
	int fd = harness_raw_connect(d), lease_fd = -1;
	Rocmmem__Wire__ServerMessage *m;

	(void)in;
	if (fd < 0 || harness_raw_hello_features(fd, 1, "dies", true, 1) != 0)
		return 1;
	m = harness_raw_acquire(fd, 2, 0, 6 * MiB, 0, &lease_fd);
	if (!m || m->reply->error != 0 || lease_fd < 0 ||
	    m->reply->lease->handle_kind != ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA)
		return 2;
	pipe_put(out, 1);
	pause(); /* killed here, the fd unmapped */
	return 0;
}

/* A client that dies between its grant and its mapping: the daemon takes everything back. */
static void test_client_dies_between_grant_and_map(void **state)
{
	rocmmem_client *obs = harness_connect(&harness_group, "observer");
	uint64_t before = daemon_fds(obs, NULL);
	int64_t v;
	struct child ch;

	(void)state;
	assert_int_equal(child_start(&ch, grant_and_die, &harness_group), 0);
	assert_true(pipe_get(ch.from_child, &v, 10000));
	assert_true(harness_wait_totals(&harness_group, 6 * MiB, 1, HARNESS_WAIT_MS) >= 0);
	kill(ch.pid, SIGKILL);
	child_wait(&ch, 10000);
	assert_true(harness_wait_totals(&harness_group, 0, 0, HARNESS_WAIT_MS) >= 0);
	/* Its connection and its arena are closed: the daemon is back to what it held. */
	for (long end = harness_now_ms() + HARNESS_WAIT_MS;
	     daemon_fds(obs, NULL) > before && harness_now_ms() < end;)
		usleep(10000);
	assert_true(daemon_fds(obs, NULL) <= before);
	rocmmem_disconnect(obs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_one_arena_many_leases, harness_case_idle),
	    cmocka_unit_test_teardown(test_release_punches_the_range, harness_case_idle),
	    cmocka_unit_test_teardown(test_arena_and_per_lease_clients, harness_case_idle),
	    cmocka_unit_test_teardown(test_client_dies_between_grant_and_map, harness_case_idle),
	    cmocka_unit_test(test_fds_do_not_grow_with_leases),
	    cmocka_unit_test(test_no_range_fits_gives_a_memfd),
	    cmocka_unit_test(test_revoked_lease_reads_zeros),
	};

	static const char *const args[] = {"--budget", "64M", NULL};

	harness_group_args = args;
	return cmocka_run_group_tests(tests, harness_group_setup, harness_group_teardown);
}
