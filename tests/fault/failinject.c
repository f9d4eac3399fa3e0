/* SPDX-License-Identifier: MIT */
/* failinject.c: an LD_PRELOAD library that makes the host backend's memfd calls fail on demand. */
/*
 * Loaded into a real rocmmemd with LD_PRELOAD, it stands between the daemon and the C library
 * for the four calls the host backend makes on a lease's memfd: memfd_create, ftruncate,
 * fcntl(F_ADD_SEALS) and fallocate. Calls on anything other than a memfd pass straight through.
 *
 * What fails is read from ROCMMEM_FAILINJECT_FILE (a file, read again before every call that
 * could fail, so that a test can change it while the daemon runs; whenever its text changes the
 * call counts start over) or, without it, from ROCMMEM_FAILINJECT. Absent or empty: nothing
 * fails. The text is a list of items separated by commas or white space:
 *   CALL=WHEN[:ERRNO]  CALL is memfd_create, ftruncate, add_seals or fallocate; WHEN is N (the
 *                      Nth call counted from when the text was read), N+ (the Nth and every one
 *                      after), * (every call) or P% (each call with probability P, 0-100);
 *                      ERRNO a name (EMFILE, ENOMEM, ENOSPC, ...) or a number, by default
 *                      ENOMEM.
 *   seed=N             the seed of the P% draws (default 1): the same text fails the same calls.
 * Lines starting with '#' are comments (a test writes a generation number there to make two
 * identical specifications distinct).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAILINJECT_EXPORT __attribute__((visibility("default")))

enum call { CALL_MEMFD, CALL_FTRUNCATE, CALL_ADD_SEALS, CALL_FALLOCATE, CALL_COUNT };

static const char *const call_names[CALL_COUNT] = {"memfd_create", "ftruncate", "add_seals",
						   "fallocate"};

/* When one call fails. */
struct rule {
	bool set;
	enum { WHEN_NTH, WHEN_FROM, WHEN_ALWAYS, WHEN_PERCENT } when;
	unsigned long n; /* the call number, or the percentage */
	int err;
};

static struct {
	pthread_mutex_t lock;
	char text[4096]; /* the specification now in force */
	struct rule rules[CALL_COUNT];
	unsigned long calls[CALL_COUNT];
	uint64_t rng;
} state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const struct {
	const char *name;
	int value;
} errnos[] = {
    {"EPERM", EPERM},	{"EIO", EIO},	    {"EBADF", EBADF},	{"ENOMEM", ENOMEM},
    {"EACCES", EACCES}, {"EBUSY", EBUSY},   {"EINVAL", EINVAL}, {"ENFILE", ENFILE},
    {"EMFILE", EMFILE}, {"EFBIG", EFBIG},   {"ENOSPC", ENOSPC}, {"EAGAIN", EAGAIN},
    {"EINTR", EINTR},	{"ENOSYS", ENOSYS}, {"EDQUOT", EDQUOT}, {"EOPNOTSUPP", EOPNOTSUPP},
};

static int parse_errno(const char *s)
{
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (strcmp(s, errnos[i].name) == 0)
			return errnos[i].value;
	v = strtol(s, &end, 10);
	return *s && !*end && v > 0 && v < 4096 ? (int)v : 0;
}

/* parse_item reads one CALL=WHEN[:ERRNO] or seed=N into the state; false when malformed. */
static bool parse_item(char *item)
{
	char *eq = strchr(item, '='), *colon, *end;
	struct rule r = {.set = true, .err = ENOMEM};
	int call = -1;

	if (!eq)
		return false;
	*eq = '\0';
	if (strcmp(item, "seed") == 0) {
		state.rng = strtoull(eq + 1, &end, 10);
		return *end == '\0';
	}
	for (int i = 0; i < CALL_COUNT; i++)
		if (strcmp(item, call_names[i]) == 0)
			call = i;
	if (call < 0)
		return false;
	colon = strchr(eq + 1, ':');
	if (colon) {
		*colon = '\0';
		r.err = parse_errno(colon + 1);
		if (!r.err)
			return false;
	}
	if (strcmp(eq + 1, "*") == 0) {
		r.when = WHEN_ALWAYS;
	} else {
		r.n = strtoul(eq + 1, &end, 10);
		if (end == eq + 1)
			return false;
		if (strcmp(end, "%") == 0 && r.n <= 100)
			r.when = WHEN_PERCENT;
		else if (strcmp(end, "+") == 0 && r.n > 0)
			r.when = WHEN_FROM;
		else if (*end == '\0' && r.n > 0)
			r.when = WHEN_NTH;
		else
			return false;
	}
	state.rules[call] = r;
	return true;
}

/* load makes text the specification in force if it differs from the one before. */
static void load(const char *text)
{
	char copy[sizeof(state.text)], *save = NULL;

	if (strcmp(text, state.text) == 0)
		return;
	snprintf(state.text, sizeof(state.text), "%s", text);
	memset(state.rules, 0, sizeof(state.rules));
	memset(state.calls, 0, sizeof(state.calls));
	state.rng = 1;
	snprintf(copy, sizeof(copy), "%s", text);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *item_save = NULL;

		if (line[0] == '#')
			continue;
		for (char *item = strtok_r(line, ", \t\r", &item_save); item;
		     item = strtok_r(NULL, ", \t\r", &item_save)) {
			if (!parse_item(item)) {
				/* A broken specification must not pass for "no failures". */
				fprintf(stderr, "failinject: cannot parse '%s': every call fails\n",
					item);
				for (int i = 0; i < CALL_COUNT; i++)
					state.rules[i] = (struct rule){
					    .set = true, .when = WHEN_ALWAYS, .err = EINVAL};
				return;
			}
		}
	}
}

/* refresh reads the specification from the file or the environment. */
static void refresh(void)
{
	const char *path = getenv("ROCMMEM_FAILINJECT_FILE");
	char text[sizeof(state.text)] = "";

	if (path) {
		/* Plain open and read: neither is interposed here. */
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			ssize_t n = read(fd, text, sizeof(text) - 1);

			text[n > 0 ? n : 0] = '\0';
			close(fd);
		}
	} else if (getenv("ROCMMEM_FAILINJECT")) {
		snprintf(text, sizeof(text), "%s", getenv("ROCMMEM_FAILINJECT"));
	}
	load(text);
}

/* next_random is splitmix64: a fixed sequence per seed, whatever the C library does. */
static uint64_t next_random(void)
{
	uint64_t z = (state.rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* should_fail counts a call and returns the errno it must fail with, or 0. */
static int should_fail(enum call call)
{
	const struct rule *r;
	unsigned long n;
	int err = 0;

	pthread_mutex_lock(&state.lock);
	refresh();
	n = ++state.calls[call];
	r = &state.rules[call];
	if (r->set) {
		switch (r->when) {
		case WHEN_NTH:
			err = n == r->n ? r->err : 0;
			break;
		case WHEN_FROM:
			err = n >= r->n ? r->err : 0;
			break;
		case WHEN_ALWAYS:
			err = r->err;
			break;
		case WHEN_PERCENT:
			err = next_random() % 100 < r->n ? r->err : 0;
			break;
		}
	}
	pthread_mutex_unlock(&state.lock);
	return err;
}

/* is_memfd says whether fd is a memfd (its /proc link reads "/memfd:NAME (deleted)"). */
static bool is_memfd(int fd)
{
	char path[64], target[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return strncmp(target, "/memfd:", 7) == 0;
}

/* The C library's own functions, found once. */
static struct {
	pthread_once_t once;
	int (*memfd_create)(const char *, unsigned int);
	int (*ftruncate)(int, off_t);
	int (*fallocate)(int, int, off_t, off_t);
	int (*fcntl)(int, int, ...);
} real = {.once = PTHREAD_ONCE_INIT};

/* next finds the next definition of name; aborting is right for a test tool that cannot. */
static void *next(const char *name)
{
	void *fn = dlsym(RTLD_NEXT, name);

	if (!fn) {
		fprintf(stderr, "failinject: no next %s: %s\n", name, dlerror());
		abort();
	}
	return fn;
}

static void find_real(void)
{
	real.memfd_create = (int (*)(const char *, unsigned int))next("memfd_create");
	real.ftruncate = (int (*)(int, off_t))next("ftruncate");
	real.fallocate = (int (*)(int, int, off_t, off_t))next("fallocate");
	real.fcntl = (int (*)(int, int, ...))next("fcntl");
}

FAILINJECT_EXPORT int memfd_create(const char *name, unsigned int flags)
{
	int err = should_fail(CALL_MEMFD);

	if (err) {
		errno = err;
		return -1;
	}
	pthread_once(&real.once, find_real);
	return real.memfd_create(name, flags);
}

FAILINJECT_EXPORT int ftruncate(int fd, off_t length)
{
	int err = is_memfd(fd) ? should_fail(CALL_FTRUNCATE) : 0;

	if (err) {
		errno = err;
		return -1;
	}
	pthread_once(&real.once, find_real);
	return real.ftruncate(fd, length);
}

FAILINJECT_EXPORT int fallocate(int fd, int mode, off_t offset, off_t len)
{
	int err = is_memfd(fd) ? should_fail(CALL_FALLOCATE) : 0;

	if (err) {
		errno = err;
		return -1;
	}
	pthread_once(&real.once, find_real);
	return real.fallocate(fd, mode, offset, len);
}

FAILINJECT_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	int err;

	/* Every fcntl command takes at most one argument, an int or a pointer: passed on as the
	 * C library's own fcntl reads it. */
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	err = cmd == F_ADD_SEALS && is_memfd(fd) ? should_fail(CALL_ADD_SEALS) : 0;
	if (err) {
		errno = err;
		return -1;
	}
	pthread_once(&real.once, find_real);
	return real.fcntl(fd, cmd, arg);
}
