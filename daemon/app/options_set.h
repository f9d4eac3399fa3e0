/* SPDX-License-Identifier: MIT */
/* options_set.h: one setting's value, checked and stored, as a flag or the file gives it. */
#ifndef ROCMMEMD_OPTIONS_SET_H
#define ROCMMEMD_OPTIONS_SET_H

#include <stddef.h>

#include "options.h"

/*
 * options_set checks value for setting id and stores it in o, marking it set. device is the
 * device a [device N] section or a "N:" prefix named, or -1. A value for every device may carry
 * its own "N:" prefix where the flag allows one (--budget, --headroom, --exclusive). Returns 0,
 * or -EINVAL with the reason in why (without the setting's name).
 */
int options_set(struct options *o, enum option_id id, int device, const char *value, char *why,
		size_t why_len);

#endif
