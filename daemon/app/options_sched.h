/* SPDX-License-Identifier: MIT */
/*
 * options_sched.h: the scheduling settings' values: evict deadlines and maximum holds by model
 * class, backfilling and its bounds (docs/residency.md).
 */
#ifndef ROCMMEMD_OPTIONS_SCHED_H
#define ROCMMEMD_OPTIONS_SCHED_H

#include <stddef.h>
#include <stdio.h>

#include "options.h"

/*
 * options_set_sched checks and stores one of the scheduling settings: evict_deadline and
 * max_hold ("[CLASS:]SECONDS" items, comma-separated; max_hold also "off"), backfill ("on" or
 * "off"), backfill_passes, backfill_wait. Returns 0, -EINVAL with the reason in why, or 1 when
 * id is none of these.
 */
int options_set_sched(struct options *o, enum option_id id, const char *value, char *why,
		      size_t why_len);

/* options_merge_sched copies setting id (one of the above) from src to eff. */
void options_merge_sched(struct options *eff, const struct options *src, enum option_id id);

/* options_sched_text writes setting id's value as the file takes it ("20, transformer:40"). */
const char *options_sched_text(const struct options *o, enum option_id id, char *buf, size_t len);

#endif
