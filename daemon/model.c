/* SPDX-License-Identifier: MIT */
/* model.c: model class names and the exclusion relation between classes. */
#include "model.h"

#include <errno.h>
#include <string.h>

static const char *const class_names[MODEL_CLASSES] = {
    "other", "transformer", "vae", "text_encoder", "image_encoder",
};

const char *model_class_name(unsigned model_class)
{
	return model_class < MODEL_CLASSES ? class_names[model_class] : "unknown";
}

int model_class_parse(const char *name, unsigned *out)
{
	for (unsigned i = 0; i < MODEL_CLASSES; i++) {
		if (strcmp(name, class_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

void class_exclusion_add(struct class_exclusion *x, unsigned group)
{
	for (unsigned c = 0; c < MODEL_CLASSES; c++)
		if (group & (1u << c))
			x->excludes[c] |= group & ~(1u << c);
}

void class_exclusion_merge(struct class_exclusion *dst, const struct class_exclusion *src)
{
	for (unsigned c = 0; c < MODEL_CLASSES; c++)
		dst->excludes[c] |= src->excludes[c];
}

bool class_exclusion_any(const struct class_exclusion *x)
{
	for (unsigned c = 0; c < MODEL_CLASSES; c++)
		if (x->excludes[c])
			return true;
	return false;
}

bool class_exclusion_conflict(const struct class_exclusion *x, unsigned a, unsigned b)
{
	return a < MODEL_CLASSES && b < MODEL_CLASSES && a != b && (x->excludes[a] & (1u << b));
}
