/* SPDX-License-Identifier: MIT */
/* test_fdlimit.c: the daemon's count of its open descriptors, both ways it takes it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "platform/fdlimit.h"

/* open_many opens n descriptors into fds. */
static void open_many(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds[i] >= 0);
	}
}

static void close_many(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* probe_count counts the open descriptors another way: asking about every number in the table. */
static uint64_t probe_count(void)
{
	long top = sysconf(_SC_OPEN_MAX);
	uint64_t n = 0;

	assert_true(top > 0);
	for (long fd = 0; fd < top; fd++)
		n += fcntl((int)fd, F_GETFD) >= 0;
	return n;
}

/* Both counts are the table's, exactly: not one more for the directory being read. */
static void test_counts_match_a_probe_of_the_table(void **state)
{
	enum { N = 10 };
	uint64_t by_dir, by_stat, probed;
	int fds[N];
	int err;

	(void)state;
	open_many(fds, N);
	close(fds[3]); /* a hole */
	probed = probe_count();
	assert_int_equal(fdlimit_count_dir(&by_dir), 0);
	assert_int_equal(by_dir, probed);
	err = fdlimit_count_stat(&by_stat);
	if (err != -EOPNOTSUPP) {
		assert_int_equal(err, 0);
		assert_int_equal(by_stat, probed);
	}
	fds[3] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close_many(fds, N);
}

/* The directory count follows what is opened and closed, one for one. */
static void test_dir_count_follows_opens(void **state)
{
	enum { N = 100 };
	int fds[N];
	uint64_t before, during, after;

	(void)state;
	assert_int_equal(fdlimit_count_dir(&before), 0);
	assert_true(before >= 3); /* stdin, stdout, stderr at least */
	open_many(fds, N);
	assert_int_equal(fdlimit_count_dir(&during), 0);
	close_many(fds, N);
	assert_int_equal(fdlimit_count_dir(&after), 0);
	assert_int_equal(during, before + N);
	assert_int_equal(after, before);
}

/* Where the kernel sizes the directory, the two counts agree, with holes in the table too. */
static void test_stat_count_agrees_with_dir(void **state)
{
	enum { N = 64 };
	int fds[N];
	uint64_t by_stat, by_dir;
	int err;

	(void)state;
	err = fdlimit_count_stat(&by_stat);
	if (err == -EOPNOTSUPP)
		skip(); /* before Linux 6.2: fdlimit_read reads the directory */
	assert_int_equal(err, 0);
	open_many(fds, N);
	for (int i = 0; i < N; i += 3) /* holes: the count is not the highest number */
		close(fds[i]);
	assert_int_equal(fdlimit_count_stat(&by_stat), 0);
	assert_int_equal(fdlimit_count_dir(&by_dir), 0);
	assert_int_equal(by_stat, by_dir);
	for (int i = 0; i < N; i++)
		if (i % 3)
			close(fds[i]);
}

/* fdlimit_read gives the limit and a count that moves with the table. */
static void test_read_gives_limit_and_count(void **state)
{
	uint64_t limit, before, after;
	int fd;

	(void)state;
	fdlimit_read(&limit, &before);
	assert_true(limit >= before && before >= 3);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	fdlimit_read(&limit, &after);
	close(fd);
	assert_int_equal(after, before + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_match_a_probe_of_the_table),
	    cmocka_unit_test(test_dir_count_follows_opens),
	    cmocka_unit_test(test_stat_count_agrees_with_dir),
	    cmocka_unit_test(test_read_gives_limit_and_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
