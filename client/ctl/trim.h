/* SPDX-License-Identifier: MIT */
/* trim.h: `rocmmemctl trim`, as main.c's table of commands lists it. */
#ifndef ROCMMEMCTL_TRIM_H
#define ROCMMEMCTL_TRIM_H

#include "ctl.h"

extern const struct ctl_command ctl_trim_command;

#endif
