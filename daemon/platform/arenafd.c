/* SPDX-License-Identifier: MIT */
/* arenafd.c: a host arena's memfd: created sealed and sparse, its ranges punched out. */
#include "arenafd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int arenafd_create(uint64_t size, const char *label, struct memfd_id *id, char *why, size_t why_len)
{
	int fd, err;

	if (size == 0 || size > (uint64_t)INT64_MAX) {
		snprintf(why, why_len, "an arena of %llu bytes", (unsigned long long)size);
		return -EINVAL;
	}
	fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		err = -errno;
		snprintf(why, why_len, "memfd_create: %s", strerror(-err));
		return err;
	}
	/* ftruncate allocates nothing on a memfd: the size is address space until touched. */
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	err = memfd_identify(fd, id);
	if (err) {
		errno = -err;
		goto fail;
	}
	return fd;
fail:
	err = -errno;
	snprintf(why, why_len, "sizing and sealing a memfd (an arena): %s", strerror(-err));
	close(fd);
	return err;
}

int arenafd_punch(int fd, uint64_t offset, uint64_t len)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) <
	    0)
		return -errno;
	return 0;
}
