/* SPDX-License-Identifier: MIT */
/*
 * test_arena_restart.c: host arenas across a restart of the daemon, against forged records and
 * hostile re-declarations over a raw connection: another process's arena, a wrong memfd, an
 * arena re-declared twice, leases outside their arena or overlapping, at another offset, before
 * their arena; then what was not re-declared is punched out and what was keeps its contents.
 */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "platform/statefile.h"

#define MiB ((uint64_t)1 << 20)
#define ARENA (64 * MiB)

static int sealed_memfd(uint64_t size)
{
	int fd = memfd_create("rocmmem-arena-forged", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL), 0);
	return fd;
}

static uint64_t inode(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_ino;
}

/* record_arena writes the record a daemon keeps of an arena (its memfd fd) of uid and pid. */
static void record_arena(struct statefile *sf, int fd, uint32_t uid, int32_t pid)
{
	struct statefile_record r = {0};
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	r.kind = STATEFILE_ARENA;
	r.id = (uint64_t)st.st_ino;
	r.size = (uint64_t)st.st_size;
	r.ino_dev = (uint64_t)st.st_dev;
	r.ino = (uint64_t)st.st_ino;
	r.uid = uid;
	r.pid = pid;
	assert_true(statefile_add(sf, &r, NULL, 0) > 0);
}

/* record_lease writes the record of lease id: size bytes at offset of arena arena_id. */
static void record_lease(struct statefile *sf, uint64_t id, uint64_t arena_id, uint64_t offset,
			 uint64_t size)
{
	struct statefile_record r = {0};

	r.kind = STATEFILE_LEASE_ARENA;
	r.id = id;
	r.size = size;
	r.ino_dev = arena_id;
	r.ino = offset;
	r.uid = (uint32_t)getuid();
	r.pid = (int32_t)getpid();
	statefile_tag(&r, "forged");
	assert_true(statefile_add(sf, &r, NULL, 0) > 0);
}

/* call sends msg (with fds) and returns the reply's error. */
static int call(int fd, Rocmmem__Wire__ClientMessage *msg, uint64_t id, const int *fds,
		unsigned nfds)
{
	Rocmmem__Wire__ServerMessage *reply;
	int err = -EPROTO;

	msg->has_id = true;
	msg->id = id;
	assert_int_equal(harness_raw_send(fd, msg, fds, nfds), 0);
	reply = harness_raw_recv(fd, 5000, NULL, NULL, NULL);
	assert_non_null(reply);
	if (reply->kind_case == ROCMMEM__WIRE__SERVER_MESSAGE__KIND_REPLY) {
		assert_int_equal(reply->reply->id, id);
		err = reply->reply->has_error ? reply->reply->error : 0;
	}
	rocmmem__wire__server_message__free_unpacked(reply, NULL);
	return err;
}

static int redeclare_arena(int fd, uint64_t id, uint64_t arena_id, uint64_t size, int arena_fd)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__ArenaRedeclare req = ROCMMEM__WIRE__ARENA_REDECLARE__INIT;

	req.has_arena_id = req.has_device = req.has_size = req.has_fd_count = true;
	req.arena_id = arena_id;
	req.size = size;
	req.fd_count = arena_fd >= 0 ? 1 : 0;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_ARENA_REDECLARE;
	msg.arena_redeclare = &req;
	return call(fd, &msg, id, &arena_fd, arena_fd >= 0 ? 1 : 0);
}

static int redeclare_lease(int fd, uint64_t id, uint64_t lease_id, uint64_t arena_id,
			   uint64_t offset, uint64_t size)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRedeclare req = ROCMMEM__WIRE__LEASE_REDECLARE__INIT;

	req.has_lease_id = req.has_device = req.has_size = req.has_handle_kind = true;
	req.lease_id = lease_id;
	req.size = size;
	req.handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA;
	req.has_offset = req.has_arena_id = true;
	req.offset = offset;
	req.arena_id = arena_id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_REDECLARE;
	msg.lease_redeclare = &req;
	return call(fd, &msg, id, NULL, 0);
}

static int redeclare_done(int fd, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__RedeclareDone done = ROCMMEM__WIRE__REDECLARE_DONE__INIT;

	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_REDECLARE_DONE;
	msg.redeclare_done = &done;
	return call(fd, &msg, id, NULL, 0);
}

/* fill writes byte v into [offset, offset + len) of fd. */
static void fill(int fd, uint64_t offset, uint64_t len, int v)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);

	assert_true(p != MAP_FAILED);
	memset(p, v, len);
	munmap(p, len);
}

static void test_hostile_arena_redeclarations(void **state)
{
	static const char *const args[] = {"--budget", "32M", NULL};
	int mine = sealed_memfd(ARENA), other = sealed_memfd(ARENA), impostor = sealed_memfd(ARENA);
	uint64_t a = inode(mine), b = inode(other);
	char path[256], why[256];
	struct statefile sf;
	struct daemon_proc d;
	uint8_t byte = 0;
	uint64_t n = 1;
	int fd;

	(void)state;
	assert_int_equal(harness_daemon_start(&d, args), 0);
	kill(d.pid, SIGKILL);
	assert_int_equal(waitpid(d.pid, NULL, 0), d.pid);
	d.pid = 0;
	/* What a daemon would have left: this process's arena with four leases, another's. */
	snprintf(path, sizeof(path), "%s.state", d.sock);
	assert_int_equal(statefile_open(&sf, path, why, sizeof(why)), 0);
	record_arena(&sf, mine, (uint32_t)getuid(), (int32_t)getpid());
	record_arena(&sf, other, (uint32_t)getuid(), (int32_t)getpid() + 100000);
	record_lease(&sf, 201, a, 0, 2 * MiB);
	record_lease(&sf, 202, a, 4 * MiB, 2 * MiB);
	record_lease(&sf, 203, a, 2 * MiB, 4 * MiB);  /* overlaps 202 */
	record_lease(&sf, 204, a, 62 * MiB, 4 * MiB); /* past the arena's end */
	record_lease(&sf, 205, a, 8 * MiB, 2 * MiB);
	statefile_set_next_lease_id(&sf, 300);
	statefile_close(&sf, false);
	fill(mine, 0, 2 * MiB, 0x21);
	fill(mine, 4 * MiB, 2 * MiB, 0x22);
	fill(mine, 10 * MiB, 2 * MiB, 0x99); /* no lease's: goes at RedeclareDone */
	assert_int_equal(harness_daemon_restart(&d, args), 0);

	fd = harness_raw_connect(&d);
	assert_true(fd >= 0);
	assert_int_equal(harness_raw_hello_features(fd, 1, "forger", true, 1), 0);
	/* A lease before its arena; another process's arena; a memfd not the one on record; no
	 * fd at all; an arena never made. */
	assert_int_equal(redeclare_lease(fd, ++n, 201, a, 0, 2 * MiB), -EPERM);
	assert_int_equal(redeclare_arena(fd, ++n, b, ARENA, other), -EPERM);
	assert_int_equal(redeclare_arena(fd, ++n, a, ARENA, impostor), -EPERM);
	assert_int_equal(redeclare_arena(fd, ++n, a, ARENA, -1), -EINVAL);
	assert_int_equal(redeclare_arena(fd, ++n, 12345, ARENA, mine), -ESTALE);
	assert_int_equal(redeclare_arena(fd, ++n, a, 32 * MiB, mine), -EPERM); /* its size */
	/* The genuine one, then once more. */
	assert_int_equal(redeclare_arena(fd, ++n, a, ARENA, mine), 0);
	assert_int_equal(redeclare_arena(fd, ++n, a, ARENA, mine), -EEXIST);
	/* Its leases: as recorded; overlapping; outside; at another offset; twice. */
	assert_int_equal(redeclare_lease(fd, ++n, 201, a, 0, 2 * MiB), 0);
	assert_int_equal(redeclare_lease(fd, ++n, 202, a, 4 * MiB, 2 * MiB), 0);
	assert_int_equal(redeclare_lease(fd, ++n, 203, a, 2 * MiB, 4 * MiB), -EPERM);
	assert_int_equal(redeclare_lease(fd, ++n, 204, a, 62 * MiB, 4 * MiB), -EPERM);
	assert_int_equal(redeclare_lease(fd, ++n, 205, a, 6 * MiB, 2 * MiB), -EPERM);
	assert_int_equal(redeclare_lease(fd, ++n, 201, a, 0, 2 * MiB), -ESTALE);
	assert_int_equal(redeclare_lease(fd, ++n, 205, b, 8 * MiB, 2 * MiB), -EPERM);
	assert_int_equal(redeclare_done(fd, ++n), 0);
	assert_true(harness_log_wait(&d, "took over arena", HARNESS_WAIT_MS));
	/* The two leases taken over hold what was written; the rest of the arena holds nothing. */
	assert_true(harness_wait_totals(&d, 4 * MiB, 2, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(pread(mine, &byte, 1, 0), 1);
	assert_int_equal(byte, 0x21);
	assert_int_equal(pread(mine, &byte, 1, 6 * MiB - 1), 1);
	assert_int_equal(byte, 0x22);
	errno = 0;
	assert_int_equal(lseek(mine, 6 * MiB, SEEK_DATA), -1);
	assert_int_equal(errno, ENXIO);
	/* Gone with its connection: punched and given back. */
	close(fd);
	assert_true(harness_wait_totals(&d, 0, 0, HARNESS_WAIT_MS) >= 0);
	assert_int_equal(lseek(mine, 0, SEEK_DATA), -1);
	close(mine);
	close(other);
	close(impostor);
	assert_int_equal(harness_daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostile_arena_redeclarations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
