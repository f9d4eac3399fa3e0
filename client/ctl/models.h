/* SPDX-License-Identifier: MIT */
/* models.h: `rocmmemctl models`, `evict`, `pin` and `unpin`, as main.c lists them. */
#ifndef ROCMMEMCTL_MODELS_H
#define ROCMMEMCTL_MODELS_H

#include "ctl.h"

extern const struct ctl_command ctl_models_command;
extern const struct ctl_command ctl_evict_command;
extern const struct ctl_command ctl_pin_command;
extern const struct ctl_command ctl_unpin_command;

#endif
