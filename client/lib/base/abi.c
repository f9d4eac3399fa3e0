/* SPDX-License-Identifier: MIT */
/* abi.c: taking and filling the structs that grow, and the library's own version. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "abi.h"
#include "error.h"
#include "rocmmem.h"

#define STRING(x) #x
#define VERSION_TEXT(major, minor, patch) STRING(major) "." STRING(minor) "." STRING(patch)

int abi_take(void *dst, size_t known, const void *src, size_t given, size_t first, const char *what)
{
	const uint8_t *tail = (const uint8_t *)src + known;

	if (given < first)
		return error_set(-EINVAL,
				 "struct %s of %zu bytes: set its struct_size (at least %zu: "
				 "sizeof the struct)",
				 what, given, first);
	for (size_t i = 0; given > known && i < given - known; i++)
		if (tail[i])
			return error_set(-EOPNOTSUPP,
					 "struct %s sets fields beyond the %zu bytes librocmmem %s "
					 "knows: the program was built against a newer rocmmem.h",
					 what, known, rocmmem_version());
	memset(dst, 0, known);
	memcpy(dst, src, given < known ? given : known);
	return 0;
}

int abi_give(void *dst, size_t given, const void *src, size_t known, size_t first, const char *what)
{
	size_t keep = sizeof(size_t); /* struct_size, the caller's */

	if (given < first)
		return error_set(-EINVAL,
				 "struct %s of %zu bytes: set its struct_size (at least %zu: "
				 "sizeof the struct)",
				 what, given, first);
	memcpy((uint8_t *)dst + keep, (const uint8_t *)src + keep,
	       (given < known ? given : known) - keep);
	if (given > known)
		memset((uint8_t *)dst + known, 0, given - known);
	return 0;
}

ROCMMEM_EXPORT const char *rocmmem_version(void)
{
	return VERSION_TEXT(ROCMMEM_VERSION_MAJOR, ROCMMEM_VERSION_MINOR, ROCMMEM_VERSION_PATCH);
}

ROCMMEM_EXPORT uint32_t rocmmem_version_number(void)
{
	return ROCMMEM_VERSION_NUMBER;
}
