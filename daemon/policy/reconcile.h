/* SPDX-License-Identifier: MIT */
/*
 * reconcile.h: the reconciled books' rules: how a process's readings are smoothed, what
 * tolerance its declaration gets, what each client is charged (the larger of declared and
 * measured), what the device loses to use nobody declared, and how a refusal says so.
 */
#ifndef ROCMMEMD_RECONCILE_H
#define ROCMMEMD_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"

/* The tolerance: measured use may pass the declaration by max(64 MiB, 5 %) uncharged. */
#define POLICY_TRUTH_SLACK_MIN ((uint64_t)64 << 20)
#define POLICY_TRUTH_SLACK_DIV 20u

/* policy_truth_tolerance is how far measured use may pass declared bytes without a charge. */
uint64_t policy_truth_tolerance(uint64_t declared);

/*
 * policy_truth_plausible says whether a reading of raw bytes can be true on d: not beyond
 * twice what the device (or its runtime) says it has. Others are thrown away, not charged.
 */
bool policy_truth_plausible(const struct device *d, uint64_t raw);

/*
 * policy_truth_push adds one reading to p and moves its level the way the smoothing rule
 * says: only once TRUTH_WINDOW consecutive readings agree, up to the least of them when all
 * are above it, down to the largest when all are below. A spike or a dip shorter than the
 * window moves nothing; a process that is gone reads 0 and fades out after the window.
 */
void policy_truth_push(struct truth_proc *p, uint64_t raw);

/* One process's side of the reconciled books on a device. */
struct policy_charge {
	const struct holder *holder; /* its client (the lowest id of its pid), NULL: outside */
	uint64_t declared;	     /* leases and reservations of every client of its pid */
	uint64_t measured;	     /* its smoothed level, plus what its clients declared since */
	uint64_t charged;	     /* max(declared, measured) once past the tolerance */
	uint64_t undeclared;	     /* charged - declared: what admission adds to the books */
};

/*
 * policy_truth_charge fills c for record p of device d: NULL-holder records are outside
 * rocmmemd (undeclared: all they hold); the daemon's own record and records of clients that
 * left count nothing. Returns false for those that count nothing.
 */
bool policy_truth_charge(const struct state *s, const struct device *d, const struct truth_proc *p,
			 struct policy_charge *c);

/*
 * policy_truth_books fills c with the books of h's process on d (whatever client of that pid
 * the measured record names): declared, and where d is measurable, measured and undeclared.
 * Returns whether d is measurable (else only c->declared is set).
 */
bool policy_truth_books(const struct state *s, const struct device *d, const struct holder *h,
			struct policy_charge *c);

/*
 * policy_truth_totals sums what d's measured books add to the declared ones: *undeclared (all
 * of it: what device_free subtracts) and *outside (the part of processes outside rocmmemd, of
 * *nout processes). All 0 when the device is not measurable.
 */
void policy_truth_totals(const struct state *s, const struct device *d, uint64_t *undeclared,
			 uint64_t *outside, unsigned *nout);

/*
 * policy_truth_explain writes, for a refusal on d, who holds more than declared and what
 * processes outside rocmmemd hold ("; ComfyUI (pid 4242) holds 9.1 GiB, declared 6.0 GiB;
 * processes outside rocmmemd hold 3.0 GiB"), largest first; nothing when nothing is undeclared.
 * Returns the length written (at most len - 1).
 */
size_t policy_truth_explain(const struct state *s, const struct device *d, char *buf, size_t len);

#endif
