/* SPDX-License-Identifier: MIT */
/* model.h: a registered model: its memory, its use, its place in eviction order. */
#ifndef ROCMMEMD_MODEL_H
#define ROCMMEMD_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "books.h"
#include "base/idtable.h"
#include "version.h"

/*
 * Classes that may not be resident together on one device (--exclusive): bit d of excludes[c]
 * is set when classes c and d exclude each other. Each --exclusive group adds every pair of
 * its classes, so "transformer,vae" and "text_encoder,image_encoder" stay two separate rules.
 */
struct class_exclusion {
	unsigned excludes[MODEL_CLASSES];
};

/* class_exclusion_add makes every two classes of group (bit per class) exclude each other. */
void class_exclusion_add(struct class_exclusion *x, unsigned group);

/* class_exclusion_merge adds every pair of src to dst. */
void class_exclusion_merge(struct class_exclusion *dst, const struct class_exclusion *src);

/* class_exclusion_any says whether any two classes exclude each other. */
bool class_exclusion_any(const struct class_exclusion *x);

/* class_exclusion_conflict says whether distinct classes a and b may not be resident together. */
bool class_exclusion_conflict(const struct class_exclusion *x, unsigned a, unsigned b);

/* class_exclusion_format writes the pairs, e.g. "transformer/vae, text_encoder/image_encoder". */
void class_exclusion_format(const struct class_exclusion *x, char *buf, size_t len);

/* model_class_name names a class for messages ("transformer", ...). */
const char *model_class_name(unsigned model_class);

/*
 * model_class_parse maps a class name to its number. Returns 0 or -EINVAL.
 */
int model_class_parse(const char *name, unsigned *out);

#endif
