/* SPDX-License-Identifier: MIT */
/* arenafd.h: a host arena's memfd: created sealed and sparse, its ranges punched out. */
#ifndef ROCMMEMD_ARENAFD_H
#define ROCMMEMD_ARENAFD_H

#include <stddef.h>
#include <stdint.h>

#include "memfd.h"

/*
 * arenafd_create makes a memfd of size bytes named label, sealed against growing, shrinking
 * and further seals (as a host lease's memfd: the hole punch must stay possible), and writes
 * its identity into *id. Nothing is allocated: pages come as the client touches them. Returns
 * the fd (close-on-exec, the caller's) or a negative errno with the reason in why.
 */
int arenafd_create(uint64_t size, const char *label, struct memfd_id *id, char *why,
		   size_t why_len);

/*
 * arenafd_punch gives the pages of [offset, offset + len) back to the kernel: whoever maps the
 * range reads zeros from then on. Returns 0 or a negative errno.
 */
int arenafd_punch(int fd, uint64_t offset, uint64_t len);

#endif
