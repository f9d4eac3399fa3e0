/* SPDX-License-Identifier: MIT */
/* watch.h: `rocmmemctl watch`, as main.c's table of commands lists it. */
#ifndef ROCMMEMCTL_WATCH_H
#define ROCMMEMCTL_WATCH_H

#include "ctl.h"

extern const struct ctl_command ctl_watch_command;

#endif
