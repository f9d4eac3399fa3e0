/* SPDX-License-Identifier: MIT */
/*
 * feed_sample.h: one round's telemetry sample: the devices, the largest clients and models
 * (as many as fit one packet), the queue and the counters, packed once for every subscriber.
 */
#ifndef ROCMMEMD_FEED_SAMPLE_H
#define ROCMMEMD_FEED_SAMPLE_H

#include "net.h"

/*
 * feed_build_sample packs this round's sample into f->sample (f->sample_len), listing fewer
 * clients and models when long names would not fit one packet. Returns 0 or -ENOMEM.
 */
int feed_build_sample(struct feed *f);

#endif
