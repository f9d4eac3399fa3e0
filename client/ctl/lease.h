/* SPDX-License-Identifier: MIT */
/* lease.h: `rocmmemctl lease`, as main.c's table of commands lists it. */
#ifndef ROCMMEMCTL_LEASE_H
#define ROCMMEMCTL_LEASE_H

#include "ctl.h"

extern const struct ctl_command ctl_lease_command;

#endif
