/* SPDX-License-Identifier: MIT */
/* telemetry.h: read-only device telemetry (memory, temperature, power, load, processes). */
#ifndef ROCMMEMD_TELEMETRY_H
#define ROCMMEMD_TELEMETRY_H

/*
 * Telemetry informs the daemon; it never decides a budget on its own. Sources, one per file
 * under telemetry/: rocm-smi-lib (AMD, loaded with dlopen), sysfs (AMD fallback: amdgpu and
 * KFD files), NVML (NVIDIA, loaded with dlopen). No source is linked at build time, so one
 * binary runs with any ROCm or driver version, or with none.
 *
 * Environment: ROCMMEM_ROCM_SMI_LIBRARY and ROCMMEM_NVML_LIBRARY name the library to load
 * instead of searching; ROCMMEM_SYSFS_ROOT replaces "/sys" (tests build fake trees there).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum telemetry_vendor { TELEMETRY_AMD, TELEMETRY_NVIDIA };

#define TELEMETRY_HAS_VRAM (1u << 0) /* vram_total, vram_used */
#define TELEMETRY_HAS_VIS_VRAM (1u << 1)
#define TELEMETRY_HAS_GTT (1u << 2)
#define TELEMETRY_HAS_TEMPERATURE (1u << 3)
#define TELEMETRY_HAS_POWER (1u << 4)
#define TELEMETRY_HAS_BUSY (1u << 5)
#define TELEMETRY_HAS_MEM_BUSY (1u << 6)
#define TELEMETRY_HAS_PROCESSES (1u << 7)

#define TELEMETRY_MAX_PROCESSES 64

/* The longest canonical PCI bus id ("ffffffff:ff:1f.7") plus its NUL. */
#define TELEMETRY_PCI_ID_SIZE 17

struct telemetry_process {
	int32_t pid;
	uint64_t
	    vram_bytes; /* on this device; 0 when the source cannot say (NVML, no permission) */
};

/*
 * One reading of one device. Fields are meaningful only where their TELEMETRY_HAS_* bit is set
 * in `valid`. On APUs (integrated GPUs) VRAM is a small BIOS carve-out and GTT is most of RAM:
 * both are reported as read and must never be added together (ROCM_FACTS.md).
 */
struct telemetry_sample {
	uint32_t valid; /* TELEMETRY_HAS_* */
	uint64_t vram_total, vram_used, vis_vram_total, vis_vram_used, gtt_total, gtt_used;
	int32_t temperature_mc; /* milli-degrees Celsius: the edge sensor, else junction/GPU */
	uint32_t power_mw;	/* average power if known, else current */
	uint32_t busy_percent, mem_busy_percent;
	/*
	 * Processes holding memory on this device, largest first, at most TELEMETRY_MAX_PROCESSES
	 * of them; nprocesses_total says how many the source saw. AMD sources list only processes
	 * with VRAM on this device (KFD's per-device counters); NVML lists compute processes.
	 */
	unsigned nprocesses, nprocesses_total;
	struct telemetry_process processes[TELEMETRY_MAX_PROCESSES];
	/*
	 * AMD: the device is runtime-suspended (power/runtime_status), so temperature, power and
	 * load were not read: reading them can wake the GPU. Memory figures are still read.
	 */
	bool runtime_suspended;
	const char *source; /* "rocm-smi", "sysfs" or "nvml": a static string */
};

/*
 * telemetry_normalize_pci writes the canonical lower-case "dddd:bb:dd.f" form of a PCI bus id
 * ("0000:03:00.0"; a domain above 0xffff keeps all its digits, as Linux prints it). It accepts
 * any case, an omitted domain ("03:00.0") and domains of up to 8 digits ("00000000:03:00.0",
 * as NVML writes them). Returns 0, or -EINVAL for anything else or when len is too small.
 */
int telemetry_normalize_pci(const char *in, char *out, size_t len);

#endif
