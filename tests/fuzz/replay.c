/* SPDX-License-Identifier: MIT */
/*
 * replay.c: main for the fuzz targets where libFuzzer is not linked (gcc builds): runs every
 * file named, and every file in every directory named, through LLVMFuzzerTestOneInput once.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* replay_file runs one input; returns 0, or -errno when it cannot be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long size;
	int err = 0;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		err = -errno;
		goto out;
	}
	buf = malloc(size > 0 ? (size_t)size : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
		err = -EIO;
		goto out;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)size);
out:
	free(buf);
	fclose(f);
	return err;
}

/* replay_dir runs every regular file of dir, in name order; returns how many, or -errno. */
static int replay_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort), count = 0, err = 0;

	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (!err && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			err = replay_file(path);
			if (err)
				fprintf(stderr, "Could not read %s: %s\n", path, strerror(-err));
			count++;
		}
		free(names[i]);
	}
	free(names);
	return err ? err : count;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int n;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "Could not read %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode)		? replay_dir(argv[i])
		    : replay_file(argv[i]) == 0 ? 1
						: -EIO;
		if (n < 0)
			return 1;
		total += n;
	}
	/* An empty corpus would pass without testing anything. */
	if (total == 0) {
		fprintf(stderr, "no input found\n");
		return 1;
	}
	printf("%d input(s) replayed, every invariant held\n", total);
	return 0;
}
