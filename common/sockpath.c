/* SPDX-License-Identifier: MIT */
/* sockpath.c: resolution of the daemon's socket path for daemon, library and CLI. */
#include "sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int copy_path(const char *path, char *out, size_t len)
{
	size_t n = strlen(path);

	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(((struct sockaddr_un *)0)->sun_path) || n >= len)
		return -ENAMETOOLONG;
	memcpy(out, path, n + 1);
	return 0;
}

static int user_path(char *out, size_t len)
{
	const char *dir = getenv("XDG_RUNTIME_DIR");
	char buf[4096];
	int n;

	if (!dir || dir[0] != '/')
		return -ENOENT;
	n = snprintf(buf, sizeof(buf), "%s/%s", dir, SOCKPATH_USER_NAME);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENAMETOOLONG;
	return copy_path(buf, out, len);
}

int sockpath_resolve(const char *explicit_path, enum sockpath_role role, char *out, size_t len)
{
	const char *env = getenv(SOCKPATH_ENV);
	struct stat st;
	int err;

	if (explicit_path && explicit_path[0])
		return copy_path(explicit_path, out, len);
	if (env && env[0])
		return copy_path(env, out, len);
	if (geteuid() == 0)
		return copy_path(SOCKPATH_SYSTEM, out, len);
	err = user_path(out, len);
	if (role == SOCKPATH_DAEMON)
		return err;
	/* A desktop user's client reaches their own daemon if it runs, else the system one. */
	if (err == 0 && stat(out, &st) == 0 && S_ISSOCK(st.st_mode))
		return 0;
	return copy_path(SOCKPATH_SYSTEM, out, len);
}
