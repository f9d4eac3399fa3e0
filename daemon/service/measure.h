/* SPDX-License-Identifier: MIT */
/* measure.h: applying per-process readings to the measured books (state/measured.h). */
#ifndef ROCMMEMD_MEASURE_H
#define ROCMMEMD_MEASURE_H

#include <stdint.h>

#include "platform/telemetry/telemetry.h"
#include "svc.h"

/*
 * svc_truth_sample applies one telemetry sample of device (NULL: the reading failed, and what
 * is known stays): each process's reading goes into its record (smoothed, policy_truth_push),
 * processes missing from a complete list read 0, records of processes that faded out are
 * forgotten, each record is matched to its client, the device's undeclared total is set, a
 * client that just passed its declaration and tolerance is told to the bus (BUS_UNDECLARED,
 * warning), and the queues are pumped. A sample without a process list makes the device not
 * measurable: its measured books are emptied.
 */
void svc_truth_sample(struct svc *svc, unsigned device, const struct telemetry_sample *t);

/*
 * svc_truth_refresh sets each measurable device's undeclared total from the books as they
 * stand (what clients declared changes with every grant and release): before each decision.
 */
void svc_truth_refresh(struct svc *svc);

/* svc_truth_self is the daemon's own pid, whose device memory is the leases. */
int32_t svc_truth_self(void);

#endif
