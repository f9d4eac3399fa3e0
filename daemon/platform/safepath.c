/* SPDX-License-Identifier: MIT */
/* safepath.c: opening and checking the directories the daemon writes files in. */
#include "safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir_of writes the directory part of path into dir. Returns 0 or -ENAMETOOLONG. */
static int dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	int n;

	if (!slash)
		n = snprintf(dir, len, ".");
	else if (slash == path)
		n = snprintf(dir, len, "/");
	else
		n = snprintf(dir, len, "%.*s", (int)(slash - path), path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int safepath_open_dir(const char *path, const char **base, char *why, size_t why_len)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int fd;

	*base = slash ? slash + 1 : path;
	if (!(*base)[0] || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0) {
		snprintf(why, why_len, "%s names a directory, not a file", path);
		return -EISDIR;
	}
	if (dir_of(path, dir, sizeof(dir)) < 0) {
		snprintf(why, why_len, "the path is too long");
		return -ENAMETOOLONG;
	}
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;

		if (err == -ENOENT)
			snprintf(why, why_len, "its directory %s does not exist", dir);
		else if (err == -ENOTDIR)
			snprintf(why, why_len, "%s is not a directory", dir);
		else
			snprintf(why, why_len, "could not open its directory %s: %s", dir,
				 strerror(-err));
		return err;
	}
	return fd;
}

int safepath_check_dir(int dir_fd, const char *path, char *why, size_t why_len)
{
	uid_t me = geteuid();
	char dir[PATH_MAX];
	struct stat st;

	if (dir_of(path, dir, sizeof(dir)) < 0)
		snprintf(dir, sizeof(dir), "of %s", path);

	if (fstat(dir_fd, &st) < 0) {
		int err = -errno;

		snprintf(why, why_len, "could not examine the directory %s: %s", dir,
			 strerror(-err));
		return err;
	}
	if (st.st_uid != 0 && st.st_uid != me) {
		snprintf(why, why_len,
			 "the directory %s belongs to uid %u, neither root nor the daemon's uid "
			 "%u: its owner could replace what the daemon creates there; use a "
			 "directory of root's or of the daemon's user",
			 dir, (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	if (st.st_mode & S_ISVTX)
		return 0; /* others may add names, but not rename or remove the daemon's */
	if ((st.st_mode & S_IWOTH) ||
	    ((st.st_mode & S_IWGRP) && st.st_gid != 0 && st.st_gid != getegid())) {
		snprintf(why, why_len,
			 "the directory %s (mode %04o) is writable by %s without the sticky bit: "
			 "any of them could replace what the daemon creates there; run "
			 "`chmod %s %s` (or `chmod +t %s`), or use another directory",
			 dir, (unsigned)(st.st_mode & 07777),
			 (st.st_mode & S_IWOTH) ? "every user" : "the members of its group",
			 (st.st_mode & S_IWOTH) ? "o-w" : "g-w", dir, dir);
		return -EPERM;
	}
	return 0;
}
