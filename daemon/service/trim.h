/* SPDX-License-Identifier: MIT */
/* trim.h: asking the backend to return cached memory: for a client, or by itself when tight. */
#ifndef ROCMMEMD_TRIM_H
#define ROCMMEMD_TRIM_H

#include <stdbool.h>
#include <stdint.h>

#include "svc.h"

/*
 * svc_trim_start trims one device (all false) or every usable device not being trimmed, for
 * holder's request_id (holder 0: the daemon's own), and answers with the bytes released once
 * every device is done.
 */
void svc_trim_start(struct svc *svc, uint64_t holder, uint64_t request_id, bool all,
		    unsigned device);

/* svc_auto_trim trims device by itself when the policy says memory is tight there. */
void svc_auto_trim(struct svc *svc, unsigned device);

#endif
