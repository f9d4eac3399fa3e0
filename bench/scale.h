/* SPDX-License-Identifier: MIT */
/* scale.h: bench_scale's series, levels and samples, shared with its report (scale_report.c). */
#ifndef ROCMMEM_BENCH_SCALE_H
#define ROCMMEM_BENCH_SCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "rocmmem.pb-c.h"

#define MiB ((uint64_t)1 << 20)
#define GRANULE (2 * MiB)
#define MAX_LEVELS 6
#define MAX_ROUNDS 8
#define PIPELINE 32u /* acquires in flight per filler connection */
#define MAX_FILLERS 64
#define ARENA_BIT ((uint32_t)ROCMMEM__WIRE__FEATURE__FEATURE_HOST_ARENA)
/*
 * What the daemon keeps of RLIMIT_NOFILE for itself and 128 clients (--max-clients 128: three
 * descriptors set aside per client allowed) before host leases, and the part of the rest one
 * uid may hold (half: docs/security.md, "descriptors").
 */
#define FD_KEPT 512u

struct sample {
	bool run;
	struct bench_hist hist; /* on the probe */
	struct bench_hist own;	/* on the connection holding the most leases */
	double cpu_us_per_op, fill_us_per_lease, status_ms;
	uint64_t rss_kib, pss_kib, slab_kib, heap_bytes, fds_open_info, status_leases;
	long fds;
};

struct level {
	unsigned leases; /* or clients */
	const char *not_run;
	char why[200];
	struct sample rounds[MAX_ROUNDS];
};

struct series {
	const char *name;    /* "arena", "per-lease", "fake-cuda", "clients" */
	const char *backend; /* --backend */
	const char *budget;
	const char *const *env;
	uint32_t features;	 /* Hello.features of every connection */
	unsigned per_connection; /* leases per filler connection */
	bool fd_per_lease;	 /* each lease keeps a descriptor in the daemon */
	unsigned nlevels;
	struct level levels[MAX_LEVELS];
	unsigned rounds;
	const char *not_run;
	char why[200];
	/* Per round: how long a probe's operation took right after the connection holding the
	 * most leases hung up at the top level (the daemon frees them all first), and how many
	 * that connection held. */
	double hangup_ms[MAX_ROUNDS];
	unsigned hangup_leases;
};

/*
 * write_report writes the JSON of n series (to --json FILE or stdout); nofile and total say
 * what the machine allowed, fixture whether the host total came from a meminfo fixture.
 * Returns 0 or a negative errno.
 */
int write_report(const struct bench_args *a, struct series *const *all, unsigned n, uint64_t nofile,
		 uint64_t total, bool fixture);

#endif
