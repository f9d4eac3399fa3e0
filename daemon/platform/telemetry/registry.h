/* SPDX-License-Identifier: MIT */
/* registry.h: opening the telemetry source a GPU vendor has, and sampling devices through it. */
#ifndef ROCMMEMD_TELEMETRY_REGISTRY_H
#define ROCMMEMD_TELEMETRY_REGISTRY_H

#include <stddef.h>

#include "telemetry.h"

struct telemetry;

/*
 * telemetry_open picks a source: for AMD, rocm-smi-lib if it loads and initialises, else sysfs
 * if any amdgpu card is found; for NVIDIA, NVML. On success *out is the caller's to close with
 * telemetry_close, and why is "" or says why a preferred source was passed over (worth a log
 * line). Returns 0, -ENOENT with the reason in why (the daemon runs without telemetry),
 * -ENOMEM, or -EINVAL (unknown vendor).
 */
int telemetry_open(enum telemetry_vendor vendor, struct telemetry **out, char *why, size_t why_len);

/* telemetry_source names the source in use: "rocm-smi", "sysfs" or "nvml" (a static string). */
const char *telemetry_source(const struct telemetry *t);

/*
 * telemetry_sample fills out for the device with this PCI bus id ("0000:03:00.0", any case,
 * domain optional). It blocks (file reads, library calls): call it from a worker thread, never
 * from the event loop. Fields it cannot read are left out of out->valid. Returns 0, -ENODEV
 * (no such device), -EINVAL (not a PCI bus id) or -EIO (the source failed as a whole). Not
 * reentrant: one caller at a time, from any thread.
 */
int telemetry_sample(struct telemetry *t, const char *pci_bus_id, struct telemetry_sample *out);

/* telemetry_close shuts the source down and unloads its library; t may be NULL. */
void telemetry_close(struct telemetry *t);

#endif
