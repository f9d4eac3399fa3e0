/* SPDX-License-Identifier: MIT */
/* config.h: rocmmemd's configuration file: finding it, reading it, printing what applies. */
#ifndef ROCMMEMD_CONFIG_H
#define ROCMMEMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "options.h"

/* The system-wide file, read when the daemon runs as root. */
#define CONFIG_SYSTEM_PATH "/etc/rocmmemd/rocmmemd.conf"

/*
 * Lines longer than this (bytes, without the newline) are refused rather than split: libinih
 * as Debian builds it reads lines into a 200-byte buffer.
 */
#define CONFIG_MAX_LINE 199

/*
 * config_default_path writes the file read when --config is not given: CONFIG_SYSTEM_PATH for
 * root, else $XDG_CONFIG_HOME/rocmmemd/rocmmemd.conf ($HOME/.config/... when unset).
 * Returns 0, or -ENOENT when neither variable says where home is.
 */
int config_default_path(char *buf, size_t len);

/*
 * config_load reads an INI file into file (options_defaults first; each key through
 * options_set). Sections: [daemon], [policy], [limits], [metrics], [devices] and [device N].
 * Returns 0; -ENOENT when the file does not exist; another negative errno when it cannot be
 * read; -EINVAL for unknown sections or keys, bad values, keys given twice, lines too long and
 * syntax errors, with "PATH:LINE: ..." naming section and key in why. Only the first error is
 * reported. On error file is freed.
 */
int config_load(const char *path, struct options *file, char *why, size_t why_len);

/*
 * config_print writes the merged options as a configuration file that would give the same
 * result, each value's source in a comment. socket_path is the socket the daemon would use,
 * path the file that was read (NULL: none was found).
 */
void config_print(const struct options *eff, const char *socket_path, const char *path, FILE *out);

#endif
