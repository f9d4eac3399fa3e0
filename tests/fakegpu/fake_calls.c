/* SPDX-License-Identifier: MIT */
/*
 * fake_calls.c: how often each function of a fake was called, per process, in a file of the
 * state directory ("calls-hip-PID"), so that a test can count a daemon's runtime calls. Only
 * with FAKEGPU_COUNT_CALLS=1: other tests' state directories stay as they expect them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_common.h"

void fake_count_call(struct fake *f, const char *name)
{
	struct fake_calls *c;
	unsigned i;

	if (!f->state_dir[0])
		return;
	if (!f->calls || f->calls_pid != f->pid) {
		const char *on = getenv("FAKEGPU_COUNT_CALLS");

		if (!on || strcmp(on, "1") != 0)
			return;
		char path[sizeof(f->state_dir) + 64];
		int fd;

		f->calls = NULL;
		f->calls_pid = f->pid;
		snprintf(path, sizeof(path), "%s/calls-%s-%d", f->state_dir, f->kind, (int)f->pid);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return;
		if (ftruncate(fd, sizeof(*c)) == 0) {
			c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			f->calls = c == MAP_FAILED ? NULL : c;
		}
		close(fd);
		if (!f->calls)
			return;
	}
	c = f->calls;
	for (i = 0; i < FAKE_CALL_SLOTS && c->slot[i].name[0]; i++) {
		if (strcmp(c->slot[i].name, name) == 0)
			break;
	}
	if (i == FAKE_CALL_SLOTS)
		return;
	if (!c->slot[i].name[0])
		snprintf(c->slot[i].name, sizeof(c->slot[i].name), "%s", name);
	__atomic_add_fetch(&c->slot[i].count, 1, __ATOMIC_RELAXED);
}

uint64_t fake_calls_read(const char *state_dir, const char *kind, int pid, const char *name)
{
	char path[4096];
	struct fake_calls c;
	uint64_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/calls-%s-%d", state_dir, kind, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &c, sizeof(c), 0) == (ssize_t)sizeof(c)) {
		for (unsigned i = 0; i < FAKE_CALL_SLOTS; i++) {
			if (strncmp(c.slot[i].name, name, sizeof(c.slot[i].name)) == 0)
				n = c.slot[i].count;
		}
	}
	close(fd);
	return n;
}
