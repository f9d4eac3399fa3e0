/* SPDX-License-Identifier: MIT */
/* poison.h: marking memory a pool keeps as unusable, for AddressSanitizer (no-ops without). */
#ifndef ROCMMEM_COMMON_POISON_H
#define ROCMMEM_COMMON_POISON_H

/*
 * Memory recycled by hand (a spare lease, an arena's buffer) is not freed, so ASan would not
 * see it used after its owner let it go: poisoned while it waits, it is reported as freed
 * memory would be.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ROCMMEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROCMMEM_ASAN 1
#endif
#endif

#ifdef ROCMMEM_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
