/* SPDX-License-Identifier: MIT */
/* fdlimit.h: the process's descriptor limit, and how many descriptors it has open. */
#ifndef ROCMMEMD_FDLIMIT_H
#define ROCMMEMD_FDLIMIT_H

#include <stdint.h>

/*
 * fdlimit_read reads RLIMIT_NOFILE's soft limit (UINT32_MAX when unlimited) into *limit and
 * counts the descriptors open now into *open_now (a guess of 16 when /proc cannot tell).
 */
void fdlimit_read(uint64_t *limit, uint64_t *open_now);

#endif
