/* SPDX-License-Identifier: MIT */
/*
 * safepath.h: the directories of the files the daemon creates, renames and removes (as root,
 * often), held open so that no later path lookup can be sent elsewhere by a symbolic link.
 */
#ifndef ROCMMEMD_SAFEPATH_H
#define ROCMMEMD_SAFEPATH_H

#include <stddef.h>

/*
 * safepath_open_dir opens the directory that holds path (O_PATH: usable with openat, fstatat,
 * fchownat, renameat and unlinkat, nothing else) and sets *base to path's last component
 * (inside path). Symbolic links in the directory's own path are followed once, here: what
 * the daemon then does in it stays in the directory it opened. Returns the fd, or a negative
 * errno with the reason in why (the directory named).
 */
int safepath_open_dir(const char *path, const char **base, char *why, size_t why_len);

/*
 * safepath_check_dir refuses the directory of path (dir_fd from safepath_open_dir) in which a user
 * other than root and the daemon's own could replace a file the daemon created: one owned by
 * another user, or writable by others (or by a group other than root's and the daemon's) without
 * the sticky bit. Returns 0, or -EPERM with the reason and the fix in why.
 */
int safepath_check_dir(int dir_fd, const char *path, char *why, size_t why_len);

#endif
