/* SPDX-License-Identifier: MIT */
/*
 * books.h: the allocator's books: the one lock that guards them, the counters
 * rocmmem_torch_stats returns, and the latest failure with its reason.
 */
#ifndef ROCMMEM_TORCH_BOOKS_H
#define ROCMMEM_TORCH_BOOKS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem_torch.h"

/*
 * books_lock guards books_counters and the allocator's arenas and leases (allocator.c). No call
 * to the daemon or the GPU runtime is made while holding it: a thread waiting for memory never
 * stalls another thread's sub-allocation or free.
 */
extern pthread_mutex_t books_lock;
extern struct rocmmem_torch_stats books_counters;

/* books_error_locked records the latest failure for rocmmem_torch_stats; lock held. */
void books_error_locked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* books_error records the latest failure (the lock taken here). */
void books_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* books_failed counts a NULL returned to PyTorch whose reason is recorded already. */
void books_failed(void);

/* books_alloc_failed counts a NULL returned to PyTorch and says why. */
void books_alloc_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* books_fmt_bytes writes n as "64 MiB", "1.50 GiB" or "512 bytes". */
void books_fmt_bytes(char *buf, size_t len, uint64_t n);

#endif
