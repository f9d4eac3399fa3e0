/* SPDX-License-Identifier: MIT */
/* fake_common.h: what the fake HIP runtime and the fake CUDA driver share (never exported). */
#ifndef ROCMMEM_TESTS_FAKE_COMMON_H
#define ROCMMEM_TESTS_FAKE_COMMON_H

/*
 * Both fakes model a GPU over host memory: every physical allocation is a memfd, a "device
 * pointer" is the host address of a mapping of it. Each fake owns one struct fake; every exported
 * function runs between fake_begin and fake_end, which hold its mutex, (re)read the
 * configuration in a new process and apply the fault injection.
 *
 * Error codes: HIP and CUDA agree on every value the fakes return, so the common code returns
 * them directly (checked against the project's constants in each fake).
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

enum {
	FAKE_SUCCESS = 0,
	FAKE_INVALID_VALUE = 1,
	FAKE_OUT_OF_MEMORY = 2,
	FAKE_NOT_INITIALIZED = 3,
	FAKE_NO_DEVICE = 100,
	FAKE_INVALID_DEVICE = 101,
	FAKE_INVALID_CONTEXT = 201,
	FAKE_ILLEGAL_ADDRESS = 700,
	FAKE_NOT_SUPPORTED = 801,
};

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_FAILS 32
#define FAKE_SLOTS 256

/* One process's usage of one device, in the shared state file. */
struct fake_slot {
	int32_t pid; /* 0: free */
	uint32_t unused;
	uint64_t start; /* the process's start time (proc_start), against pid reuse */
	uint64_t used;	/* bytes */
};

/* The state file of one device ("hip-dev0"), or a private copy without FAKEGPU_STATE_DIR. */
struct fake_shared {
	uint64_t magic;
	struct fake_slot slot[FAKE_SLOTS];
};

struct fake_counter {
	struct fake_shared *shared;
	int fd;	  /* the state file, locked with flock around updates; -1 without one */
	int slot; /* this process's slot in shared */
};

/* One FAKE*_FAIL entry: "function=N[:CODE]" or "function=*[:CODE]". */
struct fake_fail {
	char name[64];
	unsigned long nth; /* 0: every call */
	int code;	   /* -1: the function's default failure */
	unsigned long calls;
};

/* One FAKE*_SLOW entry: "function=MS": each call of it sleeps that long (after it is counted). */
struct fake_slow {
	char name[64];
	unsigned ms;
};

#define FAKE_MAX_SLOW 8

/* A physical allocation (hipMemCreate / cuMemCreate) or an imported one. */
struct fake_phys {
	struct fake_phys *next;
	int fd;
	int dev;
	size_t size;
	bool imported;	 /* from a shareable handle: not counted as used */
	bool exportable; /* created with the POSIX fd handle type */
	bool released;	 /* the handle is gone; the struct waits for maps and pins */
	unsigned maps;	 /* live mappings in this process */
	unsigned pins;	 /* live reservations that mapped it (HIP: memory stays used) */
};

struct fake_map {
	struct fake_map *next;
	char *addr;
	size_t size;
	struct fake_phys *phys;
	bool accessible;
};

struct fake_resv {
	struct fake_resv *next;
	char *base;
	size_t size;
	struct fake_map *maps;
	struct fake_phys **pinned;
	size_t npinned;
};

/* Calls of each function in one process (fake_calls.c), in the state directory. */
#define FAKE_CALL_SLOTS 128
struct fake_calls {
	struct {
		char name[56];
		uint64_t count;
	} slot[FAKE_CALL_SLOTS];
};

struct fake {
	/* Set by the fake. */
	const char *kind;   /* "hip" or "cuda": state and memfd names */
	const char *prefix; /* "FAKEHIP" or "FAKECUDA": environment variables */
	int default_version;
	/* HIP: released memory stays used while a reservation that mapped it lives (ROCm). */
	bool pin_until_address_free;
	void (*forget)(void); /* drops the fake's own per-process state (after fork) */
	pthread_mutex_t lock;

	/* Read from the environment on first use in each process. */
	bool ready;
	pid_t pid;
	uint64_t start;
	int setup_error; /* returned by every call when the configuration is unusable */
	int version;
	int ndev;
	uint64_t total[FAKE_MAX_DEVICES];
	int integrated[FAKE_MAX_DEVICES];
	bool vmm;
	bool dmabuf;
	bool autotrim; /* HIP: trim this process's cache before failing for memory, as ROCr */
	size_t granularity;
	char state_dir[3072];
	struct fake_fail fails[FAKE_MAX_FAILS];
	int nfails;
	struct fake_slow slow[FAKE_MAX_SLOW];
	int nslow;

	struct fake_counter counter[FAKE_MAX_DEVICES];
	struct fake_phys *phys;
	struct fake_resv *resv;
	struct fake_calls *calls; /* mapped on the first call in a process (fake_calls.c) */
	pid_t calls_pid;
};

/*
 * fake_begin locks f, sets it up in a new process (or after fork), and returns the configured
 * failure of `name` for this call, the setup error, or FAKE_SUCCESS. The lock is held in every
 * case: finish with `return fake_end(f, err)`.
 */
int fake_begin(struct fake *f, const char *name, int default_failure);
int fake_end(struct fake *f, int err);

/* fake_count_call counts a call of name in this process's calls file (with a state dir and
 * FAKEGPU_COUNT_CALLS=1). */
void fake_count_call(struct fake *f, const char *name);

/*
 * fake_calls_read returns how often process pid called function name of the fake kind ("hip",
 * "cuda") with state_dir as its FAKEGPU_STATE_DIR (0 when it never did). For tests: link
 * fake_calls.c.
 */
uint64_t fake_calls_read(const char *state_dir, const char *kind, int pid, const char *name);

/* fake_teardown gives this process's usage back on unload (a library destructor). */
void fake_teardown(struct fake *f);

/* fake_check_device: FAKE_INVALID_DEVICE out of range, FAKE_NO_DEVICE once the device is lost. */
int fake_check_device(struct fake *f, int dev);
bool fake_device_lost(struct fake *f, int dev);

/* Usage of a device across processes; fake_charge fails with FAKE_OUT_OF_MEMORY past total. */
int fake_charge(struct fake *f, int dev, uint64_t bytes);
void fake_uncharge(struct fake *f, int dev, uint64_t bytes);
uint64_t fake_used(struct fake *f, int dev);

uint64_t fake_align_up(uint64_t value, uint64_t align);

/* fake_memfd creates the memfd of an allocation, named after the fake and the device. */
int fake_memfd(struct fake *f, int dev, uint64_t size);
/* fake_memfd_device returns the device of one of this fake's memfds (and its size), or -1. */
int fake_memfd_device(struct fake *f, int fd, uint64_t *size);

/* VMM over memfds: reservations are PROT_NONE until fake_vmm_set_access. */
int fake_vmm_create(struct fake *f, int dev, size_t size, bool exportable, struct fake_phys **out);
struct fake_phys *fake_vmm_find(struct fake *f, const void *handle);
int fake_vmm_release(struct fake *f, struct fake_phys *p);
int fake_vmm_export(struct fake *f, struct fake_phys *p, int *fd);
int fake_vmm_import(struct fake *f, int fd, struct fake_phys **out);
int fake_vmm_reserve(struct fake *f, size_t size, size_t alignment, void **out);
int fake_vmm_free(struct fake *f, void *ptr, size_t size);
int fake_vmm_map(struct fake *f, void *ptr, size_t size, size_t offset, struct fake_phys *p);
int fake_vmm_unmap(struct fake *f, void *ptr, size_t size);
int fake_vmm_set_access(struct fake *f, void *ptr, size_t size);
/* fake_vmm_accessible: FAKE_SUCCESS when [ptr, ptr+size) is mapped with access, else why not. */
int fake_vmm_accessible(struct fake *f, const void *ptr, size_t size);

#endif
