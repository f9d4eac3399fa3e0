/* SPDX-License-Identifier: MIT */
/* model.c: model class names and the exclusion relation between classes. */
#include "model.h"

#include <errno.h>
#include <stdio.h>
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

void class_exclusion_format(const struct class_exclusion *x, char *buf, size_t len)
{
	size_t used = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (unsigned a = 0; a < MODEL_CLASSES; a++) {
		for (unsigned b = a + 1; b < MODEL_CLASSES; b++) {
			int n;

			if (!class_exclusion_conflict(x, a, b) || used >= len)
				continue;
			n = snprintf(buf + used, len - used, "%s%s/%s", used ? ", " : "",
				     class_names[a], class_names[b]);
			if (n > 0)
				used += (size_t)n;
		}
	}
}
