/* SPDX-License-Identifier: MIT */
/* source.h: what the telemetry sources share: their vtable, PCI ids, file readers, KFD. */
#ifndef ROCMMEMD_TELEMETRY_SOURCE_H
#define ROCMMEMD_TELEMETRY_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "telemetry.h"

/* A parsed PCI bus id. */
struct telemetry_pci {
	uint32_t domain;
	uint8_t bus, device, function; /* device < 32, function < 8 */
};

/* One source, one file: smi.c, sysfs.c, nvml.c. */
struct telemetry_source {
	const char *name; /* the static string put in telemetry_sample.source */
	/* open sets *state (the source's to free in close). Returns 0 or a negative errno + why. */
	int (*open)(void **state, char *why, size_t why_len);
	/* sample fills what it can of out (zeroed by the caller); returns as telemetry_sample. */
	int (*sample)(void *state, const struct telemetry_pci *pci, struct telemetry_sample *out);
	void (*close)(void *state);
};

extern const struct telemetry_source telemetry_smi_source;
extern const struct telemetry_source telemetry_sysfs_source;
extern const struct telemetry_source telemetry_nvml_source;

/* The environment variable replacing "/sys" and the one naming each library. */
#define TELEMETRY_SYSFS_ROOT_ENV "ROCMMEM_SYSFS_ROOT"
#define TELEMETRY_ROCM_SMI_LIBRARY_ENV "ROCMMEM_ROCM_SMI_LIBRARY"
#define TELEMETRY_NVML_LIBRARY_ENV "ROCMMEM_NVML_LIBRARY"

/* telemetry_sysfs_root returns $ROCMMEM_SYSFS_ROOT, or "/sys" when unset or empty. */
const char *telemetry_sysfs_root(void);

/* telemetry_pci_parse accepts what telemetry_normalize_pci accepts. Returns 0 or -EINVAL. */
int telemetry_pci_parse(const char *in, struct telemetry_pci *out);
/* telemetry_pci_format writes the canonical form; len >= TELEMETRY_PCI_ID_SIZE always fits. */
void telemetry_pci_format(const struct telemetry_pci *pci, char *out, size_t len);
bool telemetry_pci_equal(const struct telemetry_pci *a, const struct telemetry_pci *b);

/*
 * telemetry_process_add counts one process and keeps it if it is among the
 * TELEMETRY_MAX_PROCESSES largest seen so far; telemetry_sample sorts the list afterwards.
 */
void telemetry_process_add(struct telemetry_sample *out, int32_t pid, uint64_t vram_bytes);

/*
 * sysread_path formats a path into buf. Returns 0, or -ENAMETOOLONG (buf holds no usable
 * path: callers treat the file as missing).
 */
int sysread_path(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * sysread_text reads at most size - 1 bytes of a small file and NUL-terminates them, with
 * trailing whitespace removed. Returns the length, or a negative errno (missing, unreadable,
 * a directory, ...).
 */
int sysread_text(const char *path, char *buf, size_t size);

/*
 * sysread_u64/sysread_s64 read a file holding one decimal number (surrounding whitespace
 * allowed). Returns 0, or a negative errno: -EINVAL for garbage, -ERANGE for too large.
 */
int sysread_u64(const char *path, uint64_t *out);
int sysread_s64(const char *path, int64_t *out);

/* sysread_parse_u64 parses one whole decimal number of text (no whitespace). 0 or -errno. */
int sysread_parse_u64(const char *text, uint64_t *out);

/*
 * sysread_runtime_suspended says whether device_dir/power/runtime_status says the device is
 * (being) runtime-suspended; false when it cannot be read.
 */
bool sysread_runtime_suspended(const char *device_dir);

/*
 * kfd_read_processes lists the processes holding VRAM on the device at pci from KFD's
 * counters under root (root/class/kfd/kfd/proc/<pid>/vram_<gpu_id>, the gpu_id of every
 * topology node whose properties carry this device's domain and location_id). Sets
 * TELEMETRY_HAS_PROCESSES when the device was found in the topology and the process
 * directory could be read; leaves out anything unreadable.
 */
void kfd_read_processes(const char *root, const struct telemetry_pci *pci,
			struct telemetry_sample *out);

#endif
