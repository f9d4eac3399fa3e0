/* SPDX-License-Identifier: MIT */
/* fake_tree.h: building fake /sys trees (amdgpu cards, hwmon, KFD) in a temporary directory. */
#ifndef ROCMMEM_TESTS_FAKE_TREE_H
#define ROCMMEM_TESTS_FAKE_TREE_H

#include <stddef.h>
#include <stdint.h>

#define TREE_PATH_MAX 4096

/* tree_create makes a fresh directory under $TMPDIR and points ROCMMEM_SYSFS_ROOT at it. */
void tree_create(char root[TREE_PATH_MAX]);
/* tree_destroy removes the whole tree. */
void tree_destroy(const char *root);

/* tree_write writes root/rel (parents created), formatted. */
void tree_write(const char *root, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* tree_link makes root/rel a symbolic link to target (parents created). */
void tree_link(const char *root, const char *rel, const char *target);
/* tree_mkdir makes root/rel and its parents. */
void tree_mkdir(const char *root, const char *rel);
/* tree_fifo makes root/rel a FIFO (a file nobody ever writes). */
void tree_fifo(const char *root, const char *rel);

/*
 * tree_pci_device makes devices/pci<domain>:00/<domain>:00:01.0/<bus_id> with a driver link
 * to driver (none when NULL) and bus/pci/devices/<bus_id>; returns its path relative to root
 * in rel (so tests can write files into it).
 */
void tree_pci_device(const char *root, const char *bus_id, const char *driver, char *rel,
		     size_t len);

/*
 * tree_card links class/drm/<name> to <device>/drm/<name> with its device link back to the
 * PCI device, as the kernel lays them out (connectors and render nodes are made the same way).
 */
void tree_card(const char *root, const char *name, const char *device_rel);

/* tree_dev_write writes one file of a PCI device made by tree_pci_device. */
void tree_dev_write(const char *root, const char *device_rel, const char *file, const char *fmt,
		    ...) __attribute__((format(printf, 4, 5)));

/* tree_amdgpu_memory writes mem_info_{vram,vis_vram,gtt}_{total,used}. */
void tree_amdgpu_memory(const char *root, const char *device_rel, uint64_t vram_total,
			uint64_t vram_used, uint64_t vis_total, uint64_t vis_used,
			uint64_t gtt_total, uint64_t gtt_used);

/* tree_kfd_node writes topology/nodes/<node> (gpu_id and properties with domain, location). */
void tree_kfd_node(const char *root, unsigned node, uint64_t gpu_id, uint32_t domain,
		   uint32_t location_id);

/* tree_kfd_vram writes proc/<pid>/vram_<gpu_id>. */
void tree_kfd_vram(const char *root, int pid, uint64_t gpu_id, const char *value);

#endif
