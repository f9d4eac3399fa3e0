/* SPDX-License-Identifier: MIT */
/* status.h: `rocmmemctl status`, as main.c's table of commands lists it. */
#ifndef ROCMMEMCTL_STATUS_H
#define ROCMMEMCTL_STATUS_H

#include "ctl.h"

extern const struct ctl_command ctl_status_command;

#endif
