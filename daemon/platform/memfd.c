/* SPDX-License-Identifier: MIT */
/* memfd.c: a host lease's memfd, told apart from any other file by what the kernel says of it. */
#include "memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#define HOST_SEALS (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

int memfd_identify(int fd, struct memfd_id *out)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	out->dev = (uint64_t)st.st_dev;
	out->ino = (uint64_t)st.st_ino;
	out->size = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
	return 0;
}

int memfd_matches(const struct memfd_id *want, int fd, char *why, size_t len)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, len, "its fd is not a memfd");
		return -EPERM;
	}
	if ((uint64_t)st.st_dev != want->dev || (uint64_t)st.st_ino != want->ino) {
		snprintf(why, len, "its fd is not the memfd that was granted");
		return -EPERM;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size != want->size) {
		snprintf(why, len, "its memfd is %lld bytes, not %" PRIu64, (long long)st.st_size,
			 want->size);
		return -EPERM;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & HOST_SEALS) != HOST_SEALS) {
		snprintf(why, len, "its memfd is not sealed against growing and shrinking");
		return -EPERM;
	}
	return 0;
}
