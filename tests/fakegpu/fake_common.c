/* SPDX-License-Identifier: MIT */
/* fake_common.c: configuration, cross-process usage, fault injection and VMM for the fakes. */
#include "fake_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAKE_MAGIC 0x31555047454b4146ull /* "FAKEGPU1" */
#define DEFAULT_GRANULARITY ((size_t)2 << 20)

uint64_t fake_align_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) / align * align;
}

/*
 * proc_start returns the start time of a live process (its /proc stat field 22, plus one so
 * that 0 means "gone"), or 0 when it has exited, zombies included: a dead process's device
 * memory is free again, as the kernel driver frees it when the process goes away.
 */
static uint64_t proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')
		return 0;
	p += 2; /* field 3, the state */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10) + 1;
}

/* parse_size reads "4G", "512M", "64K", "1024", with an optional "B" or "iB". */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0, mult = 1;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case 'k':
	case 'K':
		mult = 1ull << 10;
		break;
	case 'm':
	case 'M':
		mult = 1ull << 20;
		break;
	case 'g':
	case 'G':
		mult = 1ull << 30;
		break;
	case 't':
	case 'T':
		mult = 1ull << 40;
		break;
	default:
		break;
	}
	if (mult != 1) {
		s++;
		if (*s == 'i' || *s == 'I')
			s++;
	}
	if (*s == 'b' || *s == 'B')
		s++;
	if (*s != '\0' || (v && mult > UINT64_MAX / v))
		return -1;
	*out = v * mult;
	return 0;
}

static const char *env(const struct fake *f, const char *suffix)
{
	char name[64];

	snprintf(name, sizeof(name), "%s_%s", f->prefix, suffix);
	return getenv(name);
}

/* bad_config says what is wrong: a misconfigured fake would otherwise fail silently. */
static int bad_config(const struct fake *f, const char *what, const char *value)
{
	fprintf(stderr, "fake%s: cannot use %s_%s=\"%s\"\n", f->kind, f->prefix, what, value);
	return FAKE_NOT_INITIALIZED;
}

static int parse_devices(struct fake *f)
{
	const char *spec = env(f, "DEVICES"), *flags = env(f, "INTEGRATED");
	char buf[512], *save = NULL, *tok;

	if (!spec)
		spec = "4G";
	snprintf(buf, sizeof(buf), "%s", spec);
	f->ndev = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (f->ndev == FAKE_MAX_DEVICES || parse_size(tok, &f->total[f->ndev]) ||
		    !f->total[f->ndev])
			return bad_config(f, "DEVICES", spec);
		f->ndev++;
	}
	if (!flags)
		return 0;
	snprintf(buf, sizeof(buf), "%s", flags);
	save = NULL;
	for (int i = 0; (tok = strtok_r(i ? NULL : buf, ",", &save)); i++) {
		if (strcmp(tok, "0") && strcmp(tok, "1"))
			return bad_config(f, "INTEGRATED", flags);
		if (i < FAKE_MAX_DEVICES)
			f->integrated[i] = tok[0] == '1';
	}
	return 0;
}

static int parse_fails(struct fake *f)
{
	const char *spec = env(f, "FAIL");
	char buf[2048], *save = NULL, *tok;

	if (!spec)
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct fake_fail *x = &f->fails[f->nfails];
		char *eq = strchr(tok, '='), *end;

		if (f->nfails == FAKE_MAX_FAILS || !eq || eq == tok ||
		    (size_t)(eq - tok) >= sizeof(x->name))
			return bad_config(f, "FAIL", spec);
		memcpy(x->name, tok, (size_t)(eq - tok));
		x->name[eq - tok] = '\0';
		if (eq[1] == '*') {
			x->nth = 0;
			end = eq + 2;
		} else {
			x->nth = strtoul(eq + 1, &end, 10);
			if (end == eq + 1 || x->nth == 0)
				return bad_config(f, "FAIL", spec);
		}
		x->code = -1;
		if (*end == ':') {
			char *code_end;
			long code = strtol(end + 1, &code_end, 0);

			if (code_end == end + 1 || code < 0 || code > 100000)
				return bad_config(f, "FAIL", spec);
			x->code = (int)code;
			end = code_end;
		}
		if (*end != '\0')
			return bad_config(f, "FAIL", spec);
		f->nfails++;
	}
	return 0;
}

static int parse_slow(struct fake *f)
{
	const char *spec = env(f, "SLOW");
	char buf[512], *save = NULL, *tok;

	if (!spec)
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct fake_slow *x = &f->slow[f->nslow];
		char *eq = strchr(tok, '='), *end;
		unsigned long ms;

		if (f->nslow == FAKE_MAX_SLOW || !eq || eq == tok ||
		    (size_t)(eq - tok) >= sizeof(x->name))
			return bad_config(f, "SLOW", spec);
		ms = strtoul(eq + 1, &end, 10);
		if (end == eq + 1 || *end || ms == 0 || ms > 60000)
			return bad_config(f, "SLOW", spec);
		memcpy(x->name, tok, (size_t)(eq - tok));
		x->name[eq - tok] = '\0';
		x->ms = (unsigned)ms;
		f->nslow++;
	}
	return 0;
}

static int read_config(struct fake *f)
{
	const char *v = env(f, "VERSION"), *dir = getenv("FAKEGPU_STATE_DIR");
	uint64_t gran = DEFAULT_GRANULARITY;
	int err;

	f->version = f->default_version;
	if (v) {
		char *end;
		long n = strtol(v, &end, 10);

		if (end == v || *end || n <= 0 || n > 1000000000L)
			return bad_config(f, "VERSION", v);
		f->version = (int)n;
	}
	err = parse_devices(f);
	if (err)
		return err;
	v = env(f, "VMM");
	f->vmm = !v || strcmp(v, "0") != 0;
	v = env(f, "DMABUF");
	f->dmabuf = !v || strcmp(v, "0") != 0;
	v = env(f, "AUTOTRIM");
	f->autotrim = v && strcmp(v, "0") != 0;
	v = env(f, "GRANULARITY");
	if (v &&
	    (parse_size(v, &gran) || gran < (uint64_t)sysconf(_SC_PAGESIZE) || (gran & (gran - 1))))
		return bad_config(f, "GRANULARITY", v);
	f->granularity = (size_t)gran;
	if (dir && dir[0]) {
		if (strlen(dir) >= sizeof(f->state_dir) - 64) {
			fprintf(stderr, "fake%s: FAKEGPU_STATE_DIR is too long\n", f->kind);
			return FAKE_NOT_INITIALIZED;
		}
		snprintf(f->state_dir, sizeof(f->state_dir), "%s", dir);
	}
	err = parse_slow(f);
	return err ? err : parse_fails(f);
}

static void counter_lock(struct fake_counter *c)
{
	if (c->fd >= 0)
		while (flock(c->fd, LOCK_EX) && errno == EINTR) {
		}
}

static void counter_unlock(struct fake_counter *c)
{
	if (c->fd >= 0)
		flock(c->fd, LOCK_UN);
}

static bool slot_dead(const struct fake_counter *c, int i)
{
	const struct fake_slot *s = &c->shared->slot[i];

	return c->fd >= 0 && i != c->slot &&
	       proc_start(__atomic_load_n(&s->pid, __ATOMIC_ACQUIRE)) !=
		   __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
}

static void slot_clear(struct fake_slot *s)
{
	__atomic_store_n(&s->used, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
}

/* counter_sum adds every live process's usage and frees the slots of dead ones (lock held). */
static uint64_t counter_sum(struct fake_counter *c)
{
	uint64_t sum = 0;

	for (int i = 0; i < FAKE_SLOTS; i++) {
		struct fake_slot *s = &c->shared->slot[i];

		if (!__atomic_load_n(&s->pid, __ATOMIC_ACQUIRE))
			continue;
		if (slot_dead(c, i)) {
			slot_clear(s);
			continue;
		}
		sum += __atomic_load_n(&s->used, __ATOMIC_ACQUIRE);
	}
	return sum;
}

static int claim_slot(struct fake *f, struct fake_counter *c)
{
	int free_slot = -1;

	c->slot = -1;
	for (int i = 0; i < FAKE_SLOTS; i++) {
		struct fake_slot *s = &c->shared->slot[i];
		int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);

		if (pid == (int32_t)f->pid &&
		    __atomic_load_n(&s->start, __ATOMIC_ACQUIRE) == f->start) {
			c->slot = i;
			return FAKE_SUCCESS;
		}
		if (free_slot < 0 && (!pid || slot_dead(c, i)))
			free_slot = i;
	}
	if (free_slot < 0) {
		fprintf(stderr, "fake%s: no free slot in the state file\n", f->kind);
		return FAKE_NOT_INITIALIZED;
	}
	c->slot = free_slot;
	__atomic_store_n(&c->shared->slot[free_slot].used, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->shared->slot[free_slot].start, f->start, __ATOMIC_RELEASE);
	__atomic_store_n(&c->shared->slot[free_slot].pid, (int32_t)f->pid, __ATOMIC_RELEASE);
	return FAKE_SUCCESS;
}

static int counter_open(struct fake *f, int dev)
{
	struct fake_counter *c = &f->counter[dev];
	char path[sizeof(f->state_dir) + 64];
	struct stat st;
	void *map;
	int err;

	c->fd = -1;
	if (!f->state_dir[0]) {
		c->shared = calloc(1, sizeof(*c->shared));
		if (!c->shared)
			return FAKE_NOT_INITIALIZED;
		c->slot = 0;
		c->shared->slot[0].pid = (int32_t)f->pid;
		c->shared->slot[0].start = f->start;
		return FAKE_SUCCESS;
	}
	snprintf(path, sizeof(path), "%s/%s-dev%d", f->state_dir, f->kind, dev);
	c->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (c->fd < 0) {
		fprintf(stderr, "fake%s: cannot open %s: %s\n", f->kind, path, strerror(errno));
		return FAKE_NOT_INITIALIZED;
	}
	counter_lock(c);
	if (fstat(c->fd, &st) ||
	    ((size_t)st.st_size < sizeof(*c->shared) &&
	     ftruncate(c->fd, (off_t)sizeof(*c->shared))) ||
	    (map = mmap(NULL, sizeof(*c->shared), PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0)) ==
		MAP_FAILED) {
		fprintf(stderr, "fake%s: cannot map %s: %s\n", f->kind, path, strerror(errno));
		counter_unlock(c);
		close(c->fd);
		c->fd = -1;
		return FAKE_NOT_INITIALIZED;
	}
	c->shared = map;
	if (c->shared->magic != FAKE_MAGIC)
		c->shared->magic = FAKE_MAGIC;
	err = claim_slot(f, c);
	counter_unlock(c);
	return err;
}

static void counter_close(struct fake_counter *c)
{
	if (!c->shared)
		return;
	if (c->fd >= 0) {
		munmap(c->shared, sizeof(*c->shared));
		close(c->fd);
	} else {
		free(c->shared);
	}
	c->shared = NULL;
	c->fd = -1;
}

static void release_slot(struct fake *f, struct fake_counter *c)
{
	if (!c->shared || c->slot < 0)
		return;
	counter_lock(c);
	if (__atomic_load_n(&c->shared->slot[c->slot].pid, __ATOMIC_ACQUIRE) == (int32_t)f->pid)
		slot_clear(&c->shared->slot[c->slot]);
	counter_unlock(c);
}

static void free_resv(struct fake_resv *r)
{
	while (r->maps) {
		struct fake_map *m = r->maps;

		r->maps = m->next;
		free(m);
	}
	free(r->pinned);
	free(r);
}

/* forget_process drops what a parent process owned, in a child after fork. */
static void forget_process(struct fake *f)
{
	while (f->phys) {
		struct fake_phys *p = f->phys;

		f->phys = p->next;
		close(p->fd);
		free(p);
	}
	while (f->resv) {
		struct fake_resv *r = f->resv;

		f->resv = r->next;
		free_resv(r);
	}
	for (int i = 0; i < FAKE_MAX_DEVICES; i++)
		counter_close(&f->counter[i]);
	if (f->forget)
		f->forget();
}

static void setup(struct fake *f)
{
	if (f->ready)
		forget_process(f);
	f->pid = getpid();
	f->start = proc_start(f->pid);
	f->ndev = 0;
	memset(f->total, 0, sizeof(f->total));
	memset(f->integrated, 0, sizeof(f->integrated));
	f->state_dir[0] = '\0';
	f->nfails = 0;
	memset(f->fails, 0, sizeof(f->fails));
	f->nslow = 0;
	f->setup_error = read_config(f);
	for (int i = 0; !f->setup_error && i < f->ndev; i++)
		f->setup_error = counter_open(f, i);
	f->ready = true;
}

static int fail_check(struct fake *f, const char *name, int default_failure)
{
	int err = FAKE_SUCCESS;

	for (int i = 0; i < f->nfails; i++) {
		struct fake_fail *x = &f->fails[i];

		if (strcmp(x->name, name))
			continue;
		x->calls++;
		if (!err && (x->nth == 0 || x->calls == x->nth))
			err = x->code >= 0 ? x->code : default_failure;
	}
	return err;
}

int fake_begin(struct fake *f, const char *name, int default_failure)
{
	pthread_mutex_lock(&f->lock);
	if (!f->ready || f->pid != getpid())
		setup(f);
	if (f->setup_error)
		return f->setup_error;
	fake_count_call(f, name);
	for (int i = 0; i < f->nslow; i++)
		if (strcmp(f->slow[i].name, name) == 0)
			usleep(f->slow[i].ms * 1000u); /* the lock held: the runtime is busy */
	return fail_check(f, name, default_failure);
}

int fake_end(struct fake *f, int err)
{
	pthread_mutex_unlock(&f->lock);
	return err;
}

void fake_teardown(struct fake *f)
{
	/*
	 * At exit another thread may still be inside the fake: then only give the usage back and
	 * leave the state mapped. In a child that never called the fake, the slots are the
	 * parent's: leave them.
	 */
	bool locked = pthread_mutex_trylock(&f->lock) == 0;

	if (f->ready && f->pid == getpid()) {
		for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
			release_slot(f, &f->counter[i]);
			if (locked)
				counter_close(&f->counter[i]);
		}
		if (locked)
			f->ready = false;
	}
	if (locked)
		pthread_mutex_unlock(&f->lock);
}

bool fake_device_lost(struct fake *f, int dev)
{
	char path[sizeof(f->state_dir) + 64];

	if (!f->state_dir[0])
		return false;
	snprintf(path, sizeof(path), "%s/lost-%s-%d", f->state_dir, f->kind, dev);
	return access(path, F_OK) == 0;
}

int fake_check_device(struct fake *f, int dev)
{
	if (dev < 0 || dev >= f->ndev)
		return FAKE_INVALID_DEVICE;
	return fake_device_lost(f, dev) ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

int fake_charge(struct fake *f, int dev, uint64_t bytes)
{
	struct fake_counter *c = &f->counter[dev];
	uint64_t used;
	int err = FAKE_SUCCESS;

	counter_lock(c);
	used = counter_sum(c);
	if (bytes > f->total[dev] || used > f->total[dev] - bytes)
		err = FAKE_OUT_OF_MEMORY;
	else
		__atomic_add_fetch(&c->shared->slot[c->slot].used, bytes, __ATOMIC_ACQ_REL);
	counter_unlock(c);
	return err;
}

void fake_uncharge(struct fake *f, int dev, uint64_t bytes)
{
	struct fake_counter *c = &f->counter[dev];
	uint64_t *used = &c->shared->slot[c->slot].used;

	counter_lock(c);
	if (__atomic_load_n(used, __ATOMIC_ACQUIRE) < bytes)
		bytes = __atomic_load_n(used, __ATOMIC_ACQUIRE);
	__atomic_sub_fetch(used, bytes, __ATOMIC_ACQ_REL);
	counter_unlock(c);
}

uint64_t fake_used(struct fake *f, int dev)
{
	struct fake_counter *c = &f->counter[dev];
	uint64_t used;

	counter_lock(c);
	used = counter_sum(c);
	counter_unlock(c);
	return used;
}

int fake_memfd(struct fake *f, int dev, uint64_t size)
{
	char name[32];
	int fd;

	snprintf(name, sizeof(name), "fake%s-dev%d", f->kind, dev);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size)) {
		close(fd);
		return -1;
	}
	return fd;
}

int fake_memfd_device(struct fake *f, int fd, uint64_t *size)
{
	char link[64], target[256], prefix[64], *end;
	struct stat st;
	size_t len;
	ssize_t n;
	long dev;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -1;
	target[n] = '\0';
	len = (size_t)snprintf(prefix, sizeof(prefix), "/memfd:fake%s-dev", f->kind);
	if (strncmp(target, prefix, len))
		return -1;
	dev = strtol(target + len, &end, 10);
	if (end == target + len || (*end != ' ' && *end != '\0') || dev < 0 ||
	    dev >= FAKE_MAX_DEVICES || fstat(fd, &st) || st.st_size <= 0)
		return -1;
	*size = (uint64_t)st.st_size;
	return (int)dev;
}

/* phys_put frees a released allocation once nothing in this process maps or pins it. */
static void phys_put(struct fake *f, struct fake_phys *p)
{
	struct fake_phys **pp;

	if (!p->released || p->maps || p->pins)
		return;
	for (pp = &f->phys; *pp && *pp != p; pp = &(*pp)->next) {
	}
	if (*pp)
		*pp = p->next;
	if (!p->imported)
		fake_uncharge(f, p->dev, p->size);
	close(p->fd);
	free(p);
}

int fake_vmm_create(struct fake *f, int dev, size_t size, bool exportable, struct fake_phys **out)
{
	struct fake_phys *p;
	int err = fake_check_device(f, dev);

	if (err)
		return err;
	if (!size || size % f->granularity)
		return FAKE_INVALID_VALUE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return FAKE_OUT_OF_MEMORY;
	err = fake_charge(f, dev, size);
	if (err) {
		free(p);
		return err;
	}
	p->fd = fake_memfd(f, dev, size);
	if (p->fd < 0) {
		fake_uncharge(f, dev, size);
		free(p);
		return FAKE_OUT_OF_MEMORY;
	}
	p->dev = dev;
	p->size = size;
	p->exportable = exportable;
	p->next = f->phys;
	f->phys = p;
	*out = p;
	return FAKE_SUCCESS;
}

struct fake_phys *fake_vmm_find(struct fake *f, const void *handle)
{
	for (struct fake_phys *p = f->phys; p; p = p->next)
		if ((const void *)p == handle && !p->released)
			return p;
	return NULL;
}

int fake_vmm_release(struct fake *f, struct fake_phys *p)
{
	bool lost = fake_device_lost(f, p->dev);

	p->released = true;
	phys_put(f, p);
	return lost ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

int fake_vmm_export(struct fake *f, struct fake_phys *p, int *fd)
{
	int err = fake_check_device(f, p->dev);

	if (err)
		return err;
	if (!p->exportable)
		return FAKE_INVALID_VALUE;
	/* Out of descriptors reads as out of memory, as with the real runtimes. */
	*fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	return *fd < 0 ? FAKE_OUT_OF_MEMORY : FAKE_SUCCESS;
}

int fake_vmm_import(struct fake *f, int fd, struct fake_phys **out)
{
	struct fake_phys *p;
	uint64_t size;
	int dev = fake_memfd_device(f, fd, &size), err;

	if (dev < 0 || dev >= f->ndev)
		return FAKE_INVALID_VALUE;
	err = fake_check_device(f, dev);
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p)
		return FAKE_OUT_OF_MEMORY;
	p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p->fd < 0) {
		free(p);
		return FAKE_OUT_OF_MEMORY;
	}
	p->dev = dev;
	p->size = (size_t)size;
	p->imported = true;
	p->exportable = true;
	p->next = f->phys;
	f->phys = p;
	*out = p;
	return FAKE_SUCCESS;
}

static struct fake_resv *find_resv(struct fake *f, const void *ptr, size_t size)
{
	uintptr_t a = (uintptr_t)ptr;

	for (struct fake_resv *r = f->resv; r; r = r->next) {
		uintptr_t base = (uintptr_t)r->base;

		if (a >= base && a - base < r->size && size <= r->size - (a - base))
			return r;
	}
	return NULL;
}

int fake_vmm_reserve(struct fake *f, size_t size, size_t alignment, void **out)
{
	struct fake_resv *r;
	uintptr_t raw, base;
	size_t len;
	void *map;

	if (!out || !size || size % f->granularity || (alignment & (alignment - 1)))
		return FAKE_INVALID_VALUE;
	if (alignment < f->granularity)
		alignment = f->granularity;
	if (size > SIZE_MAX - alignment)
		return FAKE_OUT_OF_MEMORY;
	r = calloc(1, sizeof(*r));
	if (!r)
		return FAKE_OUT_OF_MEMORY;
	len = size + alignment;
	map = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED) {
		free(r);
		return FAKE_OUT_OF_MEMORY;
	}
	raw = (uintptr_t)map;
	base = (uintptr_t)fake_align_up(raw, alignment);
	if (base > raw)
		munmap(map, base - raw);
	if (raw + len > base + size)
		munmap((void *)(base + size), raw + len - base - size);
	r->base = (char *)base;
	r->size = size;
	r->next = f->resv;
	f->resv = r;
	*out = r->base;
	return FAKE_SUCCESS;
}

int fake_vmm_free(struct fake *f, void *ptr, size_t size)
{
	struct fake_resv **rp, *r;

	for (rp = &f->resv; *rp && ((*rp)->base != ptr || (*rp)->size != size); rp = &(*rp)->next) {
	}
	r = *rp;
	if (!r)
		return FAKE_INVALID_VALUE;
	*rp = r->next;
	munmap(r->base, r->size);
	for (struct fake_map *m = r->maps; m; m = m->next) {
		m->phys->maps--;
		phys_put(f, m->phys);
	}
	for (size_t i = 0; i < r->npinned; i++) {
		r->pinned[i]->pins--;
		phys_put(f, r->pinned[i]);
	}
	free_resv(r);
	return FAKE_SUCCESS;
}

static int pin(struct fake_resv *r, struct fake_phys *p)
{
	struct fake_phys **grown;

	for (size_t i = 0; i < r->npinned; i++)
		if (r->pinned[i] == p)
			return FAKE_SUCCESS;
	grown = realloc(r->pinned, (r->npinned + 1) * sizeof(*grown));
	if (!grown)
		return FAKE_OUT_OF_MEMORY;
	r->pinned = grown;
	r->pinned[r->npinned++] = p;
	p->pins++;
	return FAKE_SUCCESS;
}

int fake_vmm_map(struct fake *f, void *ptr, size_t size, size_t offset, struct fake_phys *p)
{
	char *a = ptr;
	struct fake_resv *r;
	struct fake_map *m;
	int err = fake_check_device(f, p->dev);

	if (err)
		return err;
	if (offset || size != p->size || (uintptr_t)a % f->granularity)
		return FAKE_INVALID_VALUE;
	r = find_resv(f, a, size);
	if (!r)
		return FAKE_INVALID_VALUE;
	for (m = r->maps; m; m = m->next)
		if (a < m->addr + m->size && m->addr < a + size)
			return FAKE_INVALID_VALUE; /* already mapped */
	m = calloc(1, sizeof(*m));
	if (!m)
		return FAKE_OUT_OF_MEMORY;
	if (f->pin_until_address_free && pin(r, p)) {
		free(m);
		return FAKE_OUT_OF_MEMORY;
	}
	/* Mapped without access: touching it before SetAccess faults, as on a GPU. */
	if (mmap(a, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, 0) == MAP_FAILED) {
		free(m);
		return FAKE_OUT_OF_MEMORY;
	}
	m->addr = a;
	m->size = size;
	m->phys = p;
	m->next = r->maps;
	r->maps = m;
	p->maps++;
	return FAKE_SUCCESS;
}

/* whole_maps says whether [ptr, ptr+size) is exactly a run of whole, adjacent mappings. */
static bool whole_maps(struct fake_resv *r, char *ptr, size_t size)
{
	char *cur = ptr, *end = ptr + size;

	if (!size)
		return false;
	while (cur < end) {
		struct fake_map *m;

		for (m = r->maps; m && m->addr != cur; m = m->next) {
		}
		if (!m || m->size > (size_t)(end - cur))
			return false;
		cur += m->size;
	}
	return true;
}

int fake_vmm_unmap(struct fake *f, void *ptr, size_t size)
{
	char *a = ptr;
	struct fake_resv *r = find_resv(f, a, size);
	struct fake_map **mp;
	bool lost = false;

	if (!r || !whole_maps(r, a, size))
		return FAKE_INVALID_VALUE;
	/* The reservation stays: the range goes back to inaccessible address space. */
	if (mmap(a, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
		 0) == MAP_FAILED)
		return FAKE_INVALID_VALUE;
	for (mp = &r->maps; *mp;) {
		struct fake_map *m = *mp;

		if (m->addr < a || m->addr >= a + size) {
			mp = &m->next;
			continue;
		}
		*mp = m->next;
		lost |= fake_device_lost(f, m->phys->dev);
		m->phys->maps--;
		phys_put(f, m->phys);
		free(m);
	}
	return lost ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

int fake_vmm_set_access(struct fake *f, void *ptr, size_t size)
{
	char *a = ptr;
	struct fake_resv *r = find_resv(f, a, size);

	if (!r || !whole_maps(r, a, size))
		return FAKE_INVALID_VALUE;
	for (struct fake_map *m = r->maps; m; m = m->next)
		if (m->addr >= a && m->addr < a + size && fake_device_lost(f, m->phys->dev))
			return FAKE_NO_DEVICE;
	if (mprotect(a, size, PROT_READ | PROT_WRITE))
		return FAKE_INVALID_VALUE;
	for (struct fake_map *m = r->maps; m; m = m->next)
		if (m->addr >= a && m->addr < a + size)
			m->accessible = true;
	return FAKE_SUCCESS;
}

int fake_vmm_accessible(struct fake *f, const void *ptr, size_t size)
{
	const char *cur = ptr, *end = cur + size;

	while (cur < end) {
		struct fake_resv *r = find_resv(f, cur, 1);
		struct fake_map *m = NULL;

		if (r)
			for (m = r->maps; m && !(m->addr <= cur && cur < m->addr + m->size);
			     m = m->next) {
			}
		if (!m)
			return FAKE_INVALID_VALUE;
		if (fake_device_lost(f, m->phys->dev))
			return FAKE_NO_DEVICE;
		if (!m->accessible)
			return FAKE_ILLEGAL_ADDRESS;
		cur = m->addr + m->size;
	}
	return FAKE_SUCCESS;
}
