/* SPDX-License-Identifier: MIT */
/* memfd.h: a host lease's memfd, told apart from any other file by what the kernel says of it. */
#ifndef ROCMMEMD_MEMFD_H
#define ROCMMEMD_MEMFD_H

#include <stddef.h>
#include <stdint.h>

/* What identifies a memfd while it lives: its device and inode, and its size. */
struct memfd_id {
	uint64_t dev;
	uint64_t ino;
	uint64_t size;
};

/* memfd_identify reads fd's identity. Returns 0 or a negative errno. */
int memfd_identify(int fd, struct memfd_id *out);

/*
 * memfd_matches checks that fd is the very memfd want names, of want->size bytes, still sealed
 * against growing and shrinking. Returns 0, or -EPERM with the reason in why.
 */
int memfd_matches(const struct memfd_id *want, int fd, char *why, size_t len);

#endif
