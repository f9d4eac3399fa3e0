/* SPDX-License-Identifier: MIT */
/* details.h: the lines under status's devices and clients tables. */
#ifndef ROCMMEMCTL_DETAILS_H
#define ROCMMEMCTL_DETAILS_H

#include "ctl.h"
#include "rocmmem.h"

/* ctl_print_device_details prints what is known of a device beyond its row. */
void ctl_print_device_details(const rocmmem_status *st, const struct rocmmem_device_info *v);
/* ctl_print_arenas prints a line per listed client with a host arena. */
void ctl_print_arenas(const struct ctl *ctl, const rocmmem_status *st);

#endif
