/* SPDX-License-Identifier: MIT */
/*
 * measured.h: what each process really holds on a device, as the telemetry measured it (KFD's
 * per-process counters, NVML's process list), kept as plain data beside the declared books:
 * one record per process seen, its recent readings and the level admission charges.
 */
#ifndef ROCMMEMD_MEASURED_H
#define ROCMMEMD_MEASURED_H

#include <stdbool.h>
#include <stdint.h>

/* How many consecutive readings must agree before a process's charged level moves. */
#define TRUTH_WINDOW 3u

/* The most processes kept per device: a full sample (64) and as many fading out. */
#define TRUTH_MAX_PROCS 128u

/* One process with memory on the device. */
struct truth_proc {
	int32_t pid;
	uint64_t holder; /* the lowest id of the clients of this pid, 0: outside rocmmemd */
	bool self;	 /* the daemon itself: its memory is the leases, already in the books */
	uint64_t ring[TRUTH_WINDOW]; /* the last readings, oldest overwritten first */
	unsigned nring, pos;
	uint64_t raw;	/* the last reading */
	uint64_t level; /* the smoothed figure admission charges (policy_truth_push) */
	bool over;	/* its undeclared use crossed the tolerance and was told (measure.c) */
	uint64_t declared_at_sample; /* its clients' declarations when last read: what they
				      * declared since is new memory the level cannot show yet */
};

/* A device's measured side of the books. */
struct device_truth {
	bool measurable;    /* the telemetry reads per-process memory on this device */
	uint64_t sample_ms; /* when the last sample was applied */
	uint64_t samples;   /* samples applied */
	uint64_t rejected;  /* readings thrown away as impossible (beyond twice the device) */
	unsigned nprocs;
	struct truth_proc procs[TRUTH_MAX_PROCS];
	/* Set by the service from policy_truth_totals after each sample and before each
	 * decision: what admission charges beyond the declared books (clients' use past their
	 * declarations and tolerance, and processes outside rocmmemd), and of that the outside
	 * part. device_free subtracts `undeclared`. */
	uint64_t undeclared;
	uint64_t outside;
	unsigned outside_procs;
};

/* truth_find returns the record of pid, or NULL. */
struct truth_proc *truth_find(struct device_truth *t, int32_t pid);

/* truth_add returns a fresh record for pid (no reading yet), or NULL when full. */
struct truth_proc *truth_add(struct device_truth *t, int32_t pid);

/* truth_remove forgets the record at index i (the last one takes its place). */
void truth_remove(struct device_truth *t, unsigned i);

/* truth_reset forgets every record and figure: the device cannot be measured (now). */
void truth_reset(struct device_truth *t);

#endif
