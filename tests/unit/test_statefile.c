/* SPDX-License-Identifier: MIT */
/* test_statefile.c: unit tests of daemon/statefile (the restart record) and of the ids a
 * restarted daemon keeps aside (daemon/idtable). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/idtable.h"
#include "platform/statefile.h"

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/rocmmem-statefile-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/s.state", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return rmdir(dir);
}

static struct statefile_record lease(uint64_t id, uint64_t size)
{
	struct statefile_record r = {0};

	r.kind = STATEFILE_LEASE_MEMFD;
	r.id = id;
	r.size = size;
	r.ino = id * 1000;
	r.uid = 1000;
	r.pid = 4242;
	statefile_tag(&r, "a tag that is longer than the sixty-four bytes a tag may have at most");
	return r;
}

static uint32_t live(const struct statefile *sf)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < statefile_capacity(sf); i++)
		n += statefile_get(sf, i) != NULL;
	return n;
}

static void test_records_outlive_the_process_that_wrote_them(void **state)
{
	struct statefile sf;
	struct statefile_record r;
	uint32_t handles[200];
	char why[256];

	(void)state;
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(sf.loaded, 0);
	assert_string_equal(sf.discarded, "");
	/* More than the first capacity: the file grows. */
	for (uint64_t i = 0; i < 200; i++) {
		r = lease(i + 1, (i + 1) << 21);
		handles[i] = statefile_add(&sf, &r, why, sizeof(why));
		assert_true(handles[i] > 0);
	}
	for (int i = 0; i < 200; i += 2)
		statefile_clear(&sf, handles[i]);
	r = lease(78, 2 << 20);
	r.size = 8 << 20;
	statefile_update(&sf, handles[77], &r);
	statefile_set_next_lease_id(&sf, 501);
	statefile_set_next_model_id(&sf, 17);
	statefile_close(&sf, false);

	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(sf.loaded, 100);
	assert_int_equal(sf.damaged, 0);
	assert_int_equal(live(&sf), 100);
	assert_int_equal(statefile_next_lease_id(&sf), 501);
	assert_int_equal(statefile_next_model_id(&sf), 17);
	for (uint32_t i = 0; i < statefile_capacity(&sf); i++) {
		const struct statefile_record *x = statefile_get(&sf, i);

		if (!x)
			continue;
		assert_true(x->id % 2 == 0);
		assert_int_equal(x->size, x->id == 78 ? 8u << 20 : x->id << 21);
		assert_int_equal(x->uid, 1000);
		assert_int_equal(strlen(x->tag), STATEFILE_TAG_MAX - 1);
	}
	/* Removed at a clean stop. */
	statefile_close(&sf, true);
	assert_int_equal(access(path, F_OK), -1);
}

/* fnv1a is the format's checksum, restated: FNV-1a (32 bits) of the record's bytes 4 to 124. */
static uint32_t fnv1a(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/*
 * The checksum on disk is the format's (version 1: a file an older rocmmemd wrote reads the
 * same): FNV-1a of every byte between live and check, whatever the tag's length; and what
 * follows the tag's text is zeros on disk, whatever the record handed in held there.
 */
static void test_check_is_the_formats(void **state)
{
	static const char *const tags[] = {"", "x", "weights of a model"};
	char longest[STATEFILE_TAG_MAX + 8], why[256];
	uint8_t raw[128];
	struct statefile sf;
	struct statefile_record r;
	uint32_t handles[5], check;
	int fd;

	(void)state;
	memset(longest, 'L', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	for (unsigned i = 0; i < 5; i++) {
		r = lease(i + 1, 2 << 20);
		memset(r.tag, 'g', sizeof(r.tag)); /* garbage past the text */
		if (i < 3)
			memcpy(r.tag, tags[i], strlen(tags[i]) + 1);
		else if (i == 3)
			statefile_tag(&r, longest);
		else
			r.tag[sizeof(r.tag) - 1] = 'g'; /* no end at all: cut at the last byte */
		handles[i] = statefile_add(&sf, &r, NULL, 0);
		assert_true(handles[i] > 0);
	}
	statefile_close(&sf, false);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	for (unsigned i = 0; i < 5; i++) {
		size_t len;

		assert_int_equal(pread(fd, raw, sizeof(raw), (off_t)(64 + (handles[i] - 1) * 128)),
				 (ssize_t)sizeof(raw));
		memcpy(&check, raw + 124, sizeof(check));
		assert_int_equal(check, fnv1a(raw + 4, 120));
		len = strnlen((const char *)raw + 56, STATEFILE_TAG_MAX);
		assert_int_equal(len, i < 3 ? strlen(tags[i]) : STATEFILE_TAG_MAX - 1);
		for (size_t k = 56 + len; k < 124; k++)
			assert_int_equal(raw[k], 0);
	}
	close(fd);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(sf.loaded, 5);
	assert_int_equal(sf.damaged, 0);
	statefile_close(&sf, false);
	/* The zeros after a tag are checked too: one changed drops its record. */
	fd = open(path, O_RDWR);
	assert_int_equal(pwrite(fd, "Z", 1, (off_t)(64 + (handles[0] - 1) * 128 + 120)), 1);
	close(fd);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(sf.loaded, 4);
	assert_int_equal(sf.damaged, 1);
	statefile_close(&sf, true);
}

static void test_damage_is_dropped_not_trusted(void **state)
{
	struct statefile sf;
	struct statefile_record r = lease(5, 2 << 20);
	char why[256], junk[300];
	uint32_t h;
	int fd;

	(void)state;
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	h = statefile_add(&sf, &r, NULL, 0);
	r = lease(6, 2 << 20);
	statefile_add(&sf, &r, NULL, 0);
	statefile_close(&sf, false);
	/* One record torn: its checksum fails, the other survives. */
	fd = open(path, O_RDWR);
	assert_int_equal(pwrite(fd, "X", 1, (off_t)(64 + (h - 1) * 128 + 20)), 1);
	close(fd);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(sf.loaded, 1);
	assert_int_equal(sf.damaged, 1);
	statefile_close(&sf, false);
	/* A header of garbage: the whole file is thrown away, and used afresh. */
	memset(junk, 'j', sizeof(junk));
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_non_null(strstr(sf.discarded, "not a rocmmemd state file"));
	assert_int_equal(sf.loaded, 0);
	statefile_close(&sf, false);
	/* Truncated into the header. */
	assert_int_equal(truncate(path, 10), 0);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_non_null(strstr(sf.discarded, "truncated"));
	statefile_close(&sf, false);
	/* Shorter than its header says. */
	assert_int_equal(truncate(path, 64 + 128), 0);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_non_null(strstr(sf.discarded, "shorter than its header"));
	statefile_close(&sf, true);
}

static void test_unsafe_files_are_refused(void **state)
{
	struct statefile sf, other;
	char why[256];
	struct stat st;
	int fd;

	(void)state;
	/* A symbolic link, even to a file that would do. */
	assert_int_equal(symlink("/nonexistent/target", path), 0);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), -ELOOP);
	assert_non_null(strstr(why, "symbolic link"));
	unlink(path);
	/* Not a regular file. */
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_true(statefile_open(&sf, path, why, sizeof(why)) < 0);
	unlink(path);
	/* Several links. */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	{
		char second[160];

		snprintf(second, sizeof(second), "%s.2", path);
		assert_int_equal(link(path, second), 0);
		assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), -EPERM);
		unlink(second);
	}
	/* Another user's, when that can be arranged (as root). */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), -EPERM);
		assert_non_null(strstr(why, "belongs to uid 65534"));
		assert_int_equal(chown(path, 0, 0), 0);
	}
	/* Readable by others: made private. Locked by one daemon: refused to a second. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(statefile_open(&other, path, why, sizeof(why)), -EBUSY);
	statefile_close(&sf, true);
}

static void test_reserved_ids(void **state)
{
	struct idtable t;
	int items[4];
	uint64_t id;

	(void)state;
	idtable_init(&t);
	/* A restarted daemon keeps 3 and 7 aside and goes on above 10. */
	assert_int_equal(idtable_reserve(&t, 3), 0);
	assert_int_equal(idtable_reserve(&t, 7), 0);
	idtable_skip_to(&t, 11);
	assert_null(idtable_find(&t, 3));
	assert_null(idtable_next(&t, 0, NULL));
	assert_int_equal(idtable_add(&t, &items[0], &id), 0);
	assert_int_equal(id, 11);
	assert_int_equal(idtable_fill(&t, 7, &items[1]), 0);
	assert_ptr_equal(idtable_find(&t, 7), &items[1]);
	assert_int_equal(idtable_fill(&t, 7, &items[1]), -ENOENT); /* live now */
	assert_int_equal(idtable_fill(&t, 5, &items[1]), -ENOENT); /* never reserved */
	assert_ptr_equal(idtable_next(&t, 0, &id), &items[1]);
	assert_int_equal(id, 7);
	/* A free id below the counter, and one taken. */
	assert_int_equal(idtable_insert(&t, 5, &items[2]), 0);
	assert_int_equal(idtable_insert(&t, 5, &items[3]), -EEXIST);
	assert_int_equal(idtable_insert(&t, 11, &items[3]), -EEXIST);
	assert_ptr_equal(idtable_next(&t, 0, &id), &items[2]);
	assert_int_equal(id, 5);
	idtable_unreserve(&t, 3);
	idtable_remove(&t, 5);
	idtable_remove(&t, 7);
	idtable_remove(&t, 11);
	assert_int_equal(idtable_add(&t, &items[0], &id), 0);
	assert_int_equal(id, 12);
	idtable_remove(&t, 12);
	idtable_finish(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_records_outlive_the_process_that_wrote_them, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_check_is_the_formats, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damage_is_dropped_not_trusted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unsafe_files_are_refused, setup, teardown),
	    cmocka_unit_test(test_reserved_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
