/* SPDX-License-Identifier: MIT */
/* fdlimit.c: the process's descriptor limit, and how many descriptors it has open. */
#include "fdlimit.h"

#include <dirent.h>
#include <sys/resource.h>

void fdlimit_read(uint64_t *limit, uint64_t *open_now)
{
	struct rlimit rl = {0};
	DIR *d = opendir("/proc/self/fd");

	*open_now = 16; /* a guess for when /proc cannot tell */
	if (d) {
		struct dirent *e;

		*open_now = 0;
		while ((e = readdir(d)))
			*open_now += e->d_name[0] != '.';
		(*open_now)--; /* the directory being read */
		closedir(d);
	}
	*limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
		     ? (uint64_t)rl.rlim_cur
		     : UINT32_MAX;
}
