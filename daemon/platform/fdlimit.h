/* SPDX-License-Identifier: MIT */
/* fdlimit.h: the process's descriptor limit, and how many descriptors it has open. */
#ifndef ROCMMEMD_FDLIMIT_H
#define ROCMMEMD_FDLIMIT_H

#include <stdint.h>

/*
 * fdlimit_read reads RLIMIT_NOFILE's soft limit (UINT32_MAX when unlimited) into *limit and
 * counts the descriptors open now into *open_now: from /proc/self/fd's size where the kernel
 * gives it (Linux 6.2 and later, a constant cost), else by reading that directory (a cost per
 * descriptor), else a guess of 16.
 */
void fdlimit_read(uint64_t *limit, uint64_t *open_now);

/*
 * The two counts fdlimit_read tries, each alone: 0, or -EOPNOTSUPP (the kernel does not size
 * the directory; asked once, remembered) or -errno. Both count the descriptors open at the
 * call, none of their own.
 */
int fdlimit_count_stat(uint64_t *open_now);
int fdlimit_count_dir(uint64_t *open_now);

#endif
