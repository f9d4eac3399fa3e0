/* SPDX-License-Identifier: MIT */
/* registry.h: the backends there are, and opening the one --backend names. */
#ifndef ROCMMEMD_BACKEND_REGISTRY_H
#define ROCMMEMD_BACKEND_REGISTRY_H

#include <stdbool.h>

#include "backend.h"

/* backend_names lists the accepted --backend values, for help and errors. */
const char *backend_names(void);
bool backend_known(const char *name);

/*
 * backend_open opens the backend called name, or for "auto" the first that works in order of
 * preference (hip, cuda, host), logging why each one before it was skipped. Returns 0 or a
 * negative errno.
 */
int backend_open(const char *name, struct backend **out);

/*
 * backend_host_fallback says why the last backend_open("auto") ended on host memory (each GPU
 * backend's reason, "hip: ...; cuda: ..."), or returns NULL when it did not: a backend named
 * explicitly, host included, is never a fallback. The text is owned by this module.
 */
const char *backend_host_fallback(void);

#endif
