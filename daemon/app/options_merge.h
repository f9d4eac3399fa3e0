/* SPDX-License-Identifier: MIT */
/* options_merge.h: the sources combined (flag > file > default), and what no one value says. */
#ifndef ROCMMEMD_OPTIONS_MERGE_H
#define ROCMMEMD_OPTIONS_MERGE_H

#include <stddef.h>

#include "options.h"

/*
 * options_merge combines the sources into eff: a flag's value wins over the file's, the file's
 * over the default; each value's source is recorded. Per device, the first source that gives
 * a budget or a headroom decides: the flag for that device, the flag for all devices, the
 * file's [device N], the file's [devices]. Any --exclusive replaces the file's rules. eff
 * owns copies of the strings. Returns 0 or -ENOMEM.
 */
int options_merge(struct options *eff, const struct options *flags, const struct options *file);

/* options_validate checks what no single value can: returns 0 or -EINVAL with why. */
int options_validate(const struct options *eff, char *why, size_t why_len);

/* options_budget gives device's budget and headroom as the merged options decide them. */
void options_budget(const struct options *eff, unsigned device, struct budget_config *out);

#endif
