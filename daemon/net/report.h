/* SPDX-License-Identifier: MIT */
/* report.h: the daemon's state as wire messages, shared by status replies and telemetry samples. */
#ifndef ROCMMEMD_REPORT_H
#define ROCMMEMD_REPORT_H

#include <stdint.h>

#include "policy/limits.h"
#include "rocmmem.pb-c.h"
#include "service/denials.h"
#include "platform/telemetry/telemetry.h"

struct server;
struct device;
struct holder;
struct model;
struct counters;
struct svc;

/* One device's message and the storage its nested parts point into. */
struct report_device {
	Rocmmem__Wire__DeviceInfo info;
	Rocmmem__Wire__DeviceTelemetry telemetry;
	Rocmmem__Wire__DeviceProcess processes[TELEMETRY_MAX_PROCESSES];
	Rocmmem__Wire__DeviceProcess *process_ptrs[TELEMETRY_MAX_PROCESSES];
};

/*
 * The report_* functions fill wire messages from live state at loop time now_ms. Strings
 * point into that state: pack the message before the loop runs again.
 */
void report_daemon(Rocmmem__Wire__DaemonInfo *o, const struct server *s);
void report_device(struct report_device *o, const struct server *s, const struct device *d,
		   uint64_t now_ms);
void report_holder(Rocmmem__Wire__ClientInfo *o, const struct holder *h, uint64_t now_ms);
/*
 * report_books adds to o the books of h's process on each device where it declared or holds
 * anything, taking entries from pool (room of them; what does not fit is left out). Returns
 * the entries taken. prev_h and prev_o (or NULL) are the client reported just before in the
 * same message, unchanged since: when it is a connection of the same process, its books are
 * copied instead of summed again (a process's sum walks all its connections).
 */
size_t report_books(Rocmmem__Wire__ClientInfo *o, const struct svc *a, const struct holder *h,
		    Rocmmem__Wire__ClientBooks *pool, Rocmmem__Wire__ClientBooks **ptrs,
		    size_t room, const struct holder *prev_h,
		    const Rocmmem__Wire__ClientInfo *prev_o);
void report_model(Rocmmem__Wire__ModelInfo *o, const struct model *m, uint64_t now_ms);
void report_counters(Rocmmem__Wire__Counters *o, const struct counters *k);

/* A status reply's limits: LIMIT_COUNT messages and the pointers the reply lists. */
struct quota_report {
	Rocmmem__Wire__LimitInfo limits[LIMIT_COUNT];
	Rocmmem__Wire__LimitInfo *ptrs[LIMIT_COUNT];
};

/* quota_report fills r with every limit, its value and how often clients ran into it. */
void quota_report(struct quota_report *r, const struct svc *svc);

/* Wire messages for a status reply, pointing into a struct denials. */
struct denials_wire {
	Rocmmem__Wire__Denial items[DENIALS_KEEP];
	Rocmmem__Wire__Denial *ptrs[DENIALS_KEEP];
};

/* denials_fill lists the kept refusals oldest first into w and points *items at them. */
void denials_fill(const struct denials *ring, struct denials_wire *w, size_t *n,
		  Rocmmem__Wire__Denial ***items);

#endif
