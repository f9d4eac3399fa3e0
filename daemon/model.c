/* SPDX-License-Identifier: MIT */
/* model.c: model class names. */
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
