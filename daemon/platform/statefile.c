/* SPDX-License-Identifier: MIT */
/* statefile.c: the mapped record of live leases and reservations, created and checked safely. */
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safepath.h"
#include "text.h"

#define STATEFILE_MAGIC "ROCMMEMS"
#define STATEFILE_LIVE 0x4556494cu /* "LIVE" */
/* Slots in a new file (8 KiB of records), and the most a file may claim (256 MiB). */
#define STATEFILE_INITIAL 64u
#define STATEFILE_MAX (1u << 21)

struct statefile_header {
	char magic[8];
	uint32_t version;
	uint32_t record_size;
	uint8_t boot_id[16]; /* the boot that wrote it: memory does not survive a reboot */
	uint32_t capacity;   /* records after the header (the file may be longer mid-growth) */
	uint32_t check;	     /* FNV-1a of magic .. boot_id */
	uint64_t next_lease_id;
	uint64_t next_model_id;
	uint8_t spare[8];
};

static_assert(sizeof(struct statefile_header) == 64, "the header is 64 bytes");

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

static uint32_t fnv1a(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t h = FNV_OFFSET;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* fnv1a_zeros goes on with n zero bytes: each only multiplies by the prime (h ^ 0 is h), so
 * together by the prime to the n, found by squaring. */
static uint32_t fnv1a_zeros(uint32_t h, size_t n)
{
	uint32_t f = FNV_PRIME, m = 1;

	for (; n; n >>= 1, f *= f)
		if (n & 1)
			m *= f;
	return h * m;
}

/* The checksum covers kind .. tag, the tag last (so that its zeros end what is hashed). */
static_assert(offsetof(struct statefile_record, check) ==
		  offsetof(struct statefile_record, tag) + STATEFILE_TAG_MAX,
	      "the tag ends the checked bytes");

/* record_check is the FNV-1a of everything between live and check, whatever the bytes. */
static uint32_t record_check(const struct statefile_record *r)
{
	const uint8_t *start = (const uint8_t *)r + offsetof(struct statefile_record, kind);

	return fnv1a(start, offsetof(struct statefile_record, check) -
				offsetof(struct statefile_record, kind));
}

/*
 * record_check_zeroed is record_check of a record whose tag is zero from its end on (publish
 * makes it so): the same FNV-1a, with the tag's zeros taken at once. Every grant publishes a
 * record, and most tags are short or empty: this hashes 53 bytes of 120, typically.
 */
static uint32_t record_check_zeroed(const struct statefile_record *r, size_t tag_len)
{
	const uint8_t *start = (const uint8_t *)r + offsetof(struct statefile_record, kind);
	uint32_t h = fnv1a(start, offsetof(struct statefile_record, tag) -
				      offsetof(struct statefile_record, kind) + tag_len);

	return fnv1a_zeros(h, STATEFILE_TAG_MAX - tag_len);
}

static uint32_t header_check(const struct statefile_header *h)
{
	return fnv1a(h, offsetof(struct statefile_header, capacity));
}

/* boot_id reads this boot's id (16 bytes from the kernel's UUID text); zeros if unreadable. */
static void boot_id(uint8_t out[16])
{
	char text[64] = "";
	unsigned n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	memset(out, 0, 16);
	if (!f)
		return;
	if (!fgets(text, sizeof(text), f))
		text[0] = '\0';
	fclose(f);
	for (const char *p = text; *p && n < 32; p++) {
		unsigned v;

		if (*p >= '0' && *p <= '9')
			v = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			v = (unsigned)(*p - 'a' + 10);
		else
			continue;
		out[n / 2] = (uint8_t)(out[n / 2] | (n % 2 ? v : v << 4));
		n++;
	}
}

static size_t file_len(uint32_t capacity)
{
	return sizeof(struct statefile_header) + (size_t)capacity * sizeof(struct statefile_record);
}

static int map(struct statefile *sf, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sf->fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	sf->hdr = p;
	sf->rec = (struct statefile_record *)(sf->hdr + 1);
	sf->map_len = len;
	return 0;
}

/* reset empties the file and writes a fresh header for this boot. */
static int reset(struct statefile *sf)
{
	size_t len = file_len(STATEFILE_INITIAL);
	int err;

	if (sf->hdr)
		munmap(sf->hdr, sf->map_len);
	sf->hdr = NULL;
	if (ftruncate(sf->fd, 0) < 0 || ftruncate(sf->fd, (off_t)len) < 0)
		return -errno;
	err = map(sf, len);
	if (err)
		return err;
	memcpy(sf->hdr->magic, STATEFILE_MAGIC, sizeof(sf->hdr->magic));
	sf->hdr->version = STATEFILE_VERSION;
	sf->hdr->record_size = sizeof(struct statefile_record);
	boot_id(sf->hdr->boot_id);
	sf->hdr->check = header_check(sf->hdr);
	sf->hdr->capacity = STATEFILE_INITIAL;
	sf->capacity = STATEFILE_INITIAL;
	return 0;
}

/* examine maps an existing file and says why it cannot be used as it is ("" if it can). */
static int examine(struct statefile *sf, off_t size, char *why, size_t why_len)
{
	uint8_t boot[16];
	uint32_t cap;
	int err;

	why[0] = '\0';
	if (size < (off_t)sizeof(struct statefile_header)) {
		snprintf(why, why_len, "it is truncated (%lld bytes)", (long long)size);
		return 0;
	}
	if ((size_t)size > file_len(STATEFILE_MAX)) {
		snprintf(why, why_len, "it is too large (%lld bytes)", (long long)size);
		return 0;
	}
	err = map(sf, (size_t)size);
	if (err)
		return err;
	boot_id(boot);
	if (memcmp(sf->hdr->magic, STATEFILE_MAGIC, sizeof(sf->hdr->magic)) != 0 ||
	    sf->hdr->check != header_check(sf->hdr)) {
		snprintf(why, why_len, "it is not a rocmmemd state file, or its header is damaged");
	} else if (sf->hdr->version != STATEFILE_VERSION ||
		   sf->hdr->record_size != sizeof(struct statefile_record)) {
		snprintf(why, why_len, "it has version %u, this rocmmemd writes version %u",
			 sf->hdr->version, STATEFILE_VERSION);
	} else if (memcmp(sf->hdr->boot_id, boot, sizeof(boot)) != 0) {
		snprintf(why, why_len, "it was written before the machine last booted");
	} else {
		cap = sf->hdr->capacity;
		/* Killed while growing: the file is longer than the header says, never shorter
		 * unless damaged. */
		if ((size_t)size < file_len(cap))
			snprintf(why, why_len, "it is shorter than its header says (%u records)",
				 cap);
		else
			sf->capacity = cap;
	}
	return 0;
}

static int build_free_list(struct statefile *sf)
{
	uint32_t *slots = malloc((sf->capacity ? sf->capacity : 1) * sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	free(sf->free_slots);
	sf->free_slots = slots;
	sf->nfree = 0;
	sf->loaded = 0;
	/* Highest first on the stack: slots are reused from the lowest, keeping records dense. */
	for (uint32_t i = sf->capacity; i-- > 0;) {
		struct statefile_record *r = &sf->rec[i];

		if (r->live == STATEFILE_LIVE && r->check == record_check(r) && r->id != 0) {
			sf->loaded++;
			continue;
		}
		if (r->live != 0) {
			sf->damaged++;
			memset(r, 0, sizeof(*r));
		}
		sf->free_slots[sf->nfree++] = i;
	}
	return 0;
}

int statefile_open(struct statefile *sf, const char *path, char *why, size_t why_len)
{
	const char *base;
	struct stat st;
	int err;

	memset(sf, 0, sizeof(*sf));
	sf->fd = -1;
	if (strlen(path) >= sizeof(sf->path)) {
		snprintf(why, why_len, "the path is too long");
		return -ENAMETOOLONG;
	}
	snprintf(sf->path, sizeof(sf->path), "%s", path);
	sf->dir_fd = safepath_open_dir(sf->path, &base, why, why_len);
	if (sf->dir_fd < 0) {
		err = sf->dir_fd;
		sf->dir_fd = -1;
		return err;
	}
	/* Non-blocking: a FIFO planted under its name must not hang the start. */
	sf->fd = openat(sf->dir_fd, base,
			O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
	if (sf->fd < 0) {
		err = -errno;
		snprintf(why, why_len, "%s",
			 err == -ELOOP ? "it is a symbolic link" : strerror(-err));
		goto fail;
	}
	if (fstat(sf->fd, &st) < 0) {
		err = -errno;
		snprintf(why, why_len, "fstat: %s", strerror(-err));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "it is not a regular file");
		err = -EINVAL;
		goto fail;
	}
	if (st.st_uid != geteuid()) {
		snprintf(why, why_len, "it belongs to uid %u, not to the daemon's uid %u",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		err = -EPERM;
		goto fail;
	}
	if (st.st_nlink != 1) {
		snprintf(why, why_len, "it has %lu links", (unsigned long)st.st_nlink);
		err = -EPERM;
		goto fail;
	}
	if (flock(sf->fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(why, why_len, "%s",
			 err == -EBUSY ? "another rocmmemd uses it" : strerror(-err));
		goto fail;
	}
	/* Ours, but readable by others (made by hand?): what it holds is nobody else's business. */
	if ((st.st_mode & 0077) && fchmod(sf->fd, 0600) < 0) {
		err = -errno;
		snprintf(why, why_len, "chmod 0600: %s", strerror(-err));
		goto fail;
	}
	if (st.st_size == 0) {
		err = reset(sf);
	} else {
		err = examine(sf, st.st_size, sf->discarded, sizeof(sf->discarded));
		if (err == 0 && sf->discarded[0])
			err = reset(sf);
	}
	if (err == 0)
		err = build_free_list(sf);
	if (err) {
		snprintf(why, why_len, "%s", strerror(-err));
		goto fail;
	}
	return 0;
fail:
	statefile_close(sf, false);
	return err;
}

void statefile_close(struct statefile *sf, bool remove)
{
	const char *slash = strrchr(sf->path, '/');

	if (remove && sf->fd >= 0 && sf->dir_fd >= 0 && sf->path[0])
		unlinkat(sf->dir_fd, slash ? slash + 1 : sf->path, 0);
	if (sf->hdr)
		munmap(sf->hdr, sf->map_len);
	sf->hdr = NULL;
	sf->rec = NULL;
	if (sf->fd >= 0)
		close(sf->fd); /* drops the lock */
	sf->fd = -1;
	if (sf->dir_fd >= 0)
		close(sf->dir_fd);
	sf->dir_fd = -1;
	free(sf->free_slots);
	sf->free_slots = NULL;
	sf->nfree = 0;
	sf->capacity = 0;
}

uint32_t statefile_capacity(const struct statefile *sf)
{
	return sf->hdr ? sf->capacity : 0;
}

const struct statefile_record *statefile_get(const struct statefile *sf, uint32_t slot)
{
	if (!sf->hdr || slot >= sf->capacity || sf->rec[slot].live != STATEFILE_LIVE)
		return NULL;
	return &sf->rec[slot];
}

/* grow doubles the number of slots. */
static int grow(struct statefile *sf)
{
	uint32_t cap = sf->capacity * 2, *slots;
	size_t len = file_len(cap);
	void *p;

	if (cap > STATEFILE_MAX)
		return -EFBIG;
	slots = realloc(sf->free_slots, cap * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	sf->free_slots = slots;
	if (ftruncate(sf->fd, (off_t)len) < 0)
		return -errno;
	p = mremap(sf->hdr, sf->map_len, len, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return -errno;
	sf->hdr = p;
	sf->rec = (struct statefile_record *)(sf->hdr + 1);
	sf->map_len = len;
	/* Only now: a kill before this leaves a longer file that still reads as the old one. */
	sf->hdr->capacity = cap;
	for (uint32_t i = cap; i-- > sf->capacity;)
		sf->free_slots[sf->nfree++] = i;
	sf->capacity = cap;
	return 0;
}

/*
 * publish writes r into slot: cleared, filled, checked, and made live by the last store (the
 * release orders the stores before it, for a reader after this process is gone).
 */
static void publish(struct statefile_record *slot, const struct statefile_record *r)
{
	size_t tag_len = strnlen(r->tag, sizeof(r->tag) - 1);

	__atomic_store_n(&slot->live, 0, __ATOMIC_RELEASE);
	memcpy((uint8_t *)slot + sizeof(slot->live), (const uint8_t *)r + sizeof(r->live),
	       offsetof(struct statefile_record, tag) + tag_len - sizeof(r->live));
	/* What follows the tag's text is zeros on disk (whatever r had there), for the check. */
	memset(slot->tag + tag_len, 0, sizeof(slot->tag) - tag_len);
	slot->check = record_check_zeroed(slot, tag_len);
	__atomic_store_n(&slot->live, STATEFILE_LIVE, __ATOMIC_RELEASE);
}

uint32_t statefile_add(struct statefile *sf, const struct statefile_record *r, char *why,
		       size_t why_len)
{
	uint32_t slot;

	if (!sf->hdr)
		return 0;
	if (sf->nfree == 0) {
		int err = grow(sf);

		if (err) {
			if (!sf->full_warned && why)
				snprintf(why, why_len, "Could not grow %s: %s", sf->path,
					 strerror(-err));
			sf->full_warned = true;
			return 0;
		}
	}
	slot = sf->free_slots[--sf->nfree];
	publish(&sf->rec[slot], r);
	return slot + 1;
}

void statefile_update(struct statefile *sf, uint32_t handle, const struct statefile_record *r)
{
	if (!sf->hdr || handle == 0 || handle > sf->capacity)
		return;
	publish(&sf->rec[handle - 1], r);
}

void statefile_clear(struct statefile *sf, uint32_t handle)
{
	struct statefile_record *r;

	if (!sf->hdr || handle == 0 || handle > sf->capacity)
		return;
	r = &sf->rec[handle - 1];
	__atomic_store_n(&r->live, 0, __ATOMIC_RELEASE);
	sf->free_slots[sf->nfree++] = handle - 1;
}

uint64_t statefile_next_lease_id(const struct statefile *sf)
{
	return sf->hdr ? sf->hdr->next_lease_id : 0;
}

uint64_t statefile_next_model_id(const struct statefile *sf)
{
	return sf->hdr ? sf->hdr->next_model_id : 0;
}

void statefile_set_next_lease_id(struct statefile *sf, uint64_t next)
{
	if (sf->hdr)
		__atomic_store_n(&sf->hdr->next_lease_id, next, __ATOMIC_RELAXED);
}

void statefile_set_next_model_id(struct statefile *sf, uint64_t next)
{
	if (sf->hdr)
		__atomic_store_n(&sf->hdr->next_model_id, next, __ATOMIC_RELAXED);
}

void statefile_tag(struct statefile_record *r, const char *text)
{
	text_copy(r->tag, sizeof(r->tag), text ? text : ""); /* every grant: no printf */
}
