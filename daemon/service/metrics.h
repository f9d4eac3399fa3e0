/* SPDX-License-Identifier: MIT */
/* metrics.h: the daemon's state as Prometheus metrics. */
#ifndef ROCMMEMD_METRICS_H
#define ROCMMEMD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "svc.h"

/* The longest text rendered: one reply packet (64 KiB), with room for the envelope around it. */
#define METRICS_TEXT_MAX (65536u - 512u)

/*
 * A device's name label is cut to this many bytes (escaped, at a character boundary), so that
 * 16 devices stay well inside METRICS_TEXT_MAX whatever their names.
 */
#define METRICS_NAME_LABEL_MAX 40u

/*
 * The per-client series (rocmmemd_client_*_bytes): at most this many (device, process) pairs,
 * those with the most undeclared, then measured, memory; the rest are counted in
 * rocmmemd_client_series_omitted. A client's name label is cut like a device's.
 */
#define METRICS_CLIENT_SERIES 32u

/* What the service does not know itself: its connections and how long it has served. */
struct metrics_facts {
	unsigned clients;
	uint64_t uptime_ms;
};

/*
 * metrics_format writes the daemon's state in the Prometheus text exposition format 0.0.4
 * into buf (cap bytes, NUL-terminated). Returns the length without the NUL, or -EMSGSIZE when
 * it does not fit (nothing partial is ever used).
 */
ssize_t metrics_format(const struct svc *s, const struct metrics_facts *facts, char *buf,
		       size_t cap);

#endif
