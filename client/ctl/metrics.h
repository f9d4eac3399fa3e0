/* SPDX-License-Identifier: MIT */
/* metrics.h: `rocmmemctl metrics`, as main.c's table of commands lists it. */
#ifndef ROCMMEMCTL_METRICS_H
#define ROCMMEMCTL_METRICS_H

#include "ctl.h"

extern const struct ctl_command ctl_metrics_command;

#endif
