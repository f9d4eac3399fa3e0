/* SPDX-License-Identifier: MIT */
/* statefile.h: the record of live leases and reservations that a restarted daemon adopts. */
#ifndef ROCMMEMD_STATEFILE_H
#define ROCMMEMD_STATEFILE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The file lives beside the socket (or in systemd's runtime directory) and only has to outlive
 * the daemon's process, not the machine (no memory it describes survives a reboot): it is a
 * fixed-size header and an array of fixed-size records, mapped MAP_SHARED and written with
 * plain stores, so that a daemon killed at any instant leaves it as current as its last store.
 * A record is written with `live` clear and made live by one last store; each carries a
 * checksum, so that a record torn by a kill mid-write, or garbage, is dropped on load rather
 * than trusted. No write ever waits for the disk.
 */

#define STATEFILE_VERSION 1u
#define STATEFILE_TAG_MAX 68u /* a lease tag or a model name, NUL-terminated */

enum statefile_kind {
	STATEFILE_LEASE_MEMFD = 1, /* a host lease: a sealed memfd, known by its inode */
	STATEFILE_LEASE_VMM = 2,   /* GPU VMM physical memory exported as fds, nchunks of them */
	STATEFILE_MODEL = 3,	   /* a model's reservation (size bytes, tag its name) */
	STATEFILE_ARENA = 4, /* a holder's host arena: id, size, its memfd's ino_dev and ino */
	STATEFILE_LEASE_ARENA = 5, /* a host lease in an arena: ino_dev holds the arena's id and
				    * ino the lease's offset in it */
};

struct statefile_record {
	uint32_t live; /* STATEFILE_LIVE once complete; 0 for a free slot */
	uint8_t kind;  /* enum statefile_kind */
	uint8_t nchunks;
	uint16_t device;
	uint64_t id; /* the lease id, or the model id */
	uint64_t size;
	uint64_t ino_dev; /* memfd: st_dev and st_ino, unique while the memfd lives */
	uint64_t ino;
	uint64_t model_id; /* a lease: the model it counts towards, or 0 */
	uint32_t uid;	   /* the owner, from SO_PEERCRED */
	int32_t pid;
	char tag[STATEFILE_TAG_MAX];
	uint32_t check; /* FNV-1a of everything between live and check */
};

static_assert(sizeof(struct statefile_record) == 128, "statefile records are 128 bytes");

struct statefile_header;

struct statefile {
	int fd;
	int dir_fd; /* its directory (safepath.h): removed from there, not by path */
	char path[4096];
	struct statefile_header *hdr;
	struct statefile_record *rec; /* capacity records, right after the header */
	size_t map_len;
	uint32_t capacity;
	uint32_t *free_slots; /* a stack of free slot indexes */
	uint32_t nfree;
	bool full_warned;
	/* What open found. */
	uint32_t loaded;     /* live, intact records */
	uint32_t damaged;    /* live records whose checksum failed: dropped */
	char discarded[256]; /* why the whole file was thrown away ("" if it was not) */
};

/*
 * statefile_open opens path, creating it 0600 (the directory must exist), and locks it; the
 * directory is opened first and the file found in it without following a link. It refuses
 * (returning a negative errno with the reason in why; sf is then unusable) a symbolic link,
 * anything but a regular file, a file owned by another user, one with several links, and
 * one another daemon holds locked. A file that is truncated, of another version, of an earlier
 * boot, or garbage, is emptied and used afresh (sf->discarded says why); a record that fails
 * its checksum is dropped (counted in sf->damaged). Returns 0.
 */
int statefile_open(struct statefile *sf, const char *path, char *why, size_t why_len);

/* statefile_close unmaps and unlocks; with remove, the file is deleted first (a clean stop). */
void statefile_close(struct statefile *sf, bool remove);

/* statefile_capacity: the number of slots, for iterating with statefile_get. */
uint32_t statefile_capacity(const struct statefile *sf);

/* statefile_get returns the live record in slot (0-based), or NULL. */
const struct statefile_record *statefile_get(const struct statefile *sf, uint32_t slot);

/*
 * statefile_add stores a copy of r (live and check are set here) in a free slot, growing the
 * file when full. Returns the slot + 1, or 0 when it could not (the file could not grow: the
 * first time, why says so).
 */
uint32_t statefile_add(struct statefile *sf, const struct statefile_record *r, char *why,
		       size_t why_len);

/* statefile_clear frees the slot statefile_add returned (slot + 1 as returned; 0 is ignored). */
void statefile_clear(struct statefile *sf, uint32_t handle);

/* statefile_update rewrites a slot's record in place (cleared first, live again last). */
void statefile_update(struct statefile *sf, uint32_t handle, const struct statefile_record *r);

/* The id counters of the daemon that wrote the file (0 when unknown), and their update. */
uint64_t statefile_next_lease_id(const struct statefile *sf);
uint64_t statefile_next_model_id(const struct statefile *sf);
void statefile_set_next_lease_id(struct statefile *sf, uint64_t next);
void statefile_set_next_model_id(struct statefile *sf, uint64_t next);

/* statefile_tag copies text into a record's tag, cut to fit (at a character boundary). */
void statefile_tag(struct statefile_record *r, const char *text);

#endif
