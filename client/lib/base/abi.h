/* SPDX-License-Identifier: MIT */
/*
 * abi.h: the rules that let the public structs grow (rocmmem.h's Conventions): a struct the
 * caller fills or provides is taken or filled by its struct_size, never by this library's
 * sizeof.
 */
#ifndef ROCMMEM_LIB_ABI_H
#define ROCMMEM_LIB_ABI_H

#include <stddef.h>

/* ABI_END: where a field ends, i.e. the size of a struct's version whose last field it is. */
#define ABI_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/*
 * abi_take copies the caller's struct src, of given bytes (its struct_size), into dst, this
 * library's struct of known bytes (zeroed first: fields an older caller does not know take
 * their defaults). first is the size of the struct's first version, what every caller has.
 * Returns 0; -EINVAL when given is below first; -EOPNOTSUPP when a byte beyond known is set (a
 * newer caller asks for what this library cannot do). what names the struct in the message.
 */
int abi_take(void *dst, size_t known, const void *src, size_t given, size_t first,
	     const char *what);

/*
 * abi_give fills the caller's struct dst of given bytes (its struct_size, left as it is) from
 * src, this library's of known bytes: what both know is copied, what only the caller knows is
 * zeroed. Returns 0, or -EINVAL when given is below first.
 */
int abi_give(void *dst, size_t given, const void *src, size_t known, size_t first,
	     const char *what);

#endif
