/* SPDX-License-Identifier: MIT */
/* fdlimit.c: the process's descriptor limit, and how many descriptors it has open. */
#include "fdlimit.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/stat.h>

/*
 * FDLIMIT_DIR: the process's descriptor directory. Since Linux 6.2 its size (stat) is the
 * number of descriptors open, counted by the kernel from its table's bitmap; reading the
 * directory instead makes a dentry for every descriptor, which at a few hundred connections
 * was most of a status request's cost.
 */
#define FDLIMIT_DIR "/proc/self/fd"

int fdlimit_count_stat(uint64_t *open_now)
{
	static bool unsized; /* the kernel said so once: it will not change while we run */
	struct stat st;

	if (unsized)
		return -EOPNOTSUPP;
	if (stat(FDLIMIT_DIR, &st) < 0)
		return -errno;
	/* Before 6.2 the size is 0. A process that asks has descriptors open (the daemon: its
	 * socket, its loop's), so 0 means the kernel does not size the directory. */
	if (st.st_size <= 0) {
		unsized = true;
		return -EOPNOTSUPP;
	}
	*open_now = (uint64_t)st.st_size;
	return 0;
}

int fdlimit_count_dir(uint64_t *open_now)
{
	DIR *d = opendir(FDLIMIT_DIR);
	struct dirent *e;
	uint64_t n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	*open_now = n > 0 ? n - 1 : 0; /* not the directory being read */
	return 0;
}

void fdlimit_read(uint64_t *limit, uint64_t *open_now)
{
	struct rlimit rl = {0};

	if (fdlimit_count_stat(open_now) < 0 && fdlimit_count_dir(open_now) < 0)
		*open_now = 16; /* a guess for when /proc cannot tell */
	*limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
		     ? (uint64_t)rl.rlim_cur
		     : UINT32_MAX;
}
