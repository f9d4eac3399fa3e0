/* SPDX-License-Identifier: MIT */
/*
 * fuzz_config.c: the configuration file parser (daemon/app/config.c over libinih and options_set):
 * any file is loaded or refused with a located reason, and what --check-config prints for a
 * loaded one loads again to the same configuration.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "app/config.h"
#include "fuzz.h"
#include "app/options_merge.h"

/* Inputs beyond this are skipped: longer files only repeat lines. */
#define FUZZ_CONFIG_MAX 8192

/* The file config_load reads: a memfd, opened afresh through /proc for every load. */
static int file_fd = -1;
static char file_path[64];

/* put replaces the file's contents. */
static void put(const void *data, size_t size)
{
	FUZZ_CHECK(ftruncate(file_fd, 0) == 0, "ftruncate: %s", strerror(errno));
	FUZZ_CHECK(size == 0 || pwrite(file_fd, data, size, 0) == (ssize_t)size, "pwrite: %s",
		   strerror(errno));
}

/* load loads the file and merges it over the defaults into eff, as settings_load does. */
static int load(struct options *eff, char *why, size_t len)
{
	struct options file, flags;
	int err;

	why[0] = '\0';
	err = config_load(file_path, &file, why, len);
	if (err)
		return err;
	options_defaults(&flags);
	FUZZ_CHECK(options_merge(eff, &flags, &file) == 0, "options_merge failed");
	options_free(&file);
	options_free(&flags);
	return 0;
}

/* print returns what --check-config prints for eff (free it). */
static char *print(const struct options *eff, size_t *len)
{
	char *text = NULL;
	FILE *out = open_memstream(&text, len);

	FUZZ_CHECK(out, "open_memstream: %s", strerror(errno));
	config_print(eff, eff->socket_path ? eff->socket_path : "/run/fuzz.sock", "fuzz.conf", out);
	FUZZ_CHECK(fclose(out) == 0, "could not print");
	return text;
}

/*
 * settings_of keeps a printed configuration's settings: every line without its comment (the
 * comments name where each value came from, which a second reading changes to "file").
 */
static char *settings_of(const char *text)
{
	char *out = malloc(strlen(text) + 1), *o = out;

	FUZZ_CHECK(out, "out of memory");
	while (*text) {
		const char *end = strchrnul(text, '\n'), *note = NULL;

		for (const char *p = text; p + 1 < end; p++)
			if (p[0] == ';' && p[1] == ' ')
				note = p;
		if (text[0] != ';') {
			const char *stop = note ? note : end;

			while (stop > text && stop[-1] == ' ')
				stop--;
			memcpy(o, text, (size_t)(stop - text));
			o += stop - text;
			*o++ = '\n';
		}
		text = *end ? end + 1 : end;
	}
	*o = '\0';
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct options eff, again;
	char why[512], *printed, *reprinted, *first, *second;
	size_t len, len_again;
	int err;

	if (file_fd < 0) {
		file_fd = memfd_create("fuzz.conf", MFD_CLOEXEC);
		FUZZ_CHECK(file_fd >= 0, "memfd_create: %s", strerror(errno));
		snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
	}
	if (size > FUZZ_CONFIG_MAX)
		return 0;
	put(data, size);
	err = load(&eff, why, sizeof(why));
	if (err) {
		/* Refused: as a bad file ("PATH:LINE: ..."), never as anything else. */
		FUZZ_CHECK(err == -EINVAL, "config_load returned %d (%s)", err, why);
		FUZZ_CHECK(strncmp(why, file_path, strlen(file_path)) == 0 &&
			       why[strlen(file_path)] == ':' && why[strlen(file_path) + 1] != '\0',
			   "the reason does not name the file and line: '%s'", why);
		return 0;
	}
	/* Loaded: the combination may still be refused, but only as -EINVAL with a reason. */
	why[0] = '\0';
	err = options_validate(&eff, why, sizeof(why));
	FUZZ_CHECK(err == 0 || (err == -EINVAL && why[0]), "options_validate returned %d", err);

	/* --check-config prints a file that loads to the same configuration. */
	printed = print(&eff, &len);
	put(printed, len);
	err = load(&again, why, sizeof(why));
	FUZZ_CHECK(err == 0, "what --check-config printed does not load: %s\n%s", why, printed);
	reprinted = print(&again, &len_again);
	/*
	 * Defaults such as [access]'s socket group depend on the machine's users and groups:
	 * printed again now, so that both prints see the same ones.
	 */
	free(printed);
	printed = print(&eff, &len);
	first = settings_of(printed);
	second = settings_of(reprinted);
	FUZZ_CHECK(strcmp(first, second) == 0,
		   "printing, loading and printing again changed the settings:\n%s\n--- became\n%s",
		   first, second);
	free(first);
	free(second);
	free(reprinted);
	free(printed);
	options_free(&again);
	options_free(&eff);
	return 0;
}
