/* SPDX-License-Identifier: MIT */
/* size.h: parsing and printing of byte sizes ("64M", "1.5GiB") and durations. */
#ifndef ROCMMEM_COMMON_SIZE_H
#define ROCMMEM_COMMON_SIZE_H

#include <stddef.h>
#include <stdint.h>

/*
 * size_parse parses a byte count: ASCII decimal digits, an optional fraction of 1 to 18 digits
 * after a '.', and an optional binary suffix K, M, G, T (any case, optionally followed by "iB"),
 * or "B" for bytes. A fraction needs a K, M, G or T suffix, and the result is the value times
 * the unit truncated to whole bytes ("0.9G" is 966367641). No sign, space, exponent, hex or
 * decimal comma, whatever the locale. Returns 0 and stores the value in *out (only then),
 * -EINVAL for malformed text, or -ERANGE when well-formed text does not fit in 64 bits.
 */
int size_parse(const char *text, uint64_t *out);

/*
 * size_suggest reads text that size_parse refused as the size it most likely meant: a decimal
 * or spelled-out unit ("4GB", "512 mb", "2 GiB", "1.5Gi", "8 bytes") becomes "4G", "512M", "2G",
 * "1.5G", "8". Writes that into buf and the unit's binary name ("GiB", or "bytes") into *unit.
 * Returns 0, or -EINVAL when text does not read as a size with a unit.
 */
int size_suggest(const char *text, char *buf, size_t len, const char **unit);

/*
 * size_format writes a human form of bytes ("512 B", "64 MiB", "1.50 GiB") into buf, always
 * NUL-terminated. Returns buf.
 */
char *size_format(uint64_t bytes, char *buf, size_t len);

/* Enough room for any size_format result. */
#define SIZE_FORMAT_MAX 32

/*
 * size_round_up rounds bytes up to a multiple of granule (a power of two). Returns 0, or
 * -ERANGE when the result would overflow.
 */
int size_round_up(uint64_t bytes, uint64_t granule, uint64_t *out);

/*
 * duration_parse parses seconds with an optional fraction ("2", "0.25") or "inf"/"-1" (no
 * limit, stored as -1) into milliseconds. Returns 0, -EINVAL or -ERANGE.
 */
int duration_parse(const char *text, int64_t *ms_out);

#endif
