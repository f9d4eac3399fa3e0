/* SPDX-License-Identifier: MIT */
/* show.h: the models table, which status and models both print. */
#ifndef ROCMMEMCTL_SHOW_H
#define ROCMMEMCTL_SHOW_H

#include "ctl.h"
#include "rocmmem.h"
#include "table.h"

/* The models table: status shows it, and `models`. */
extern const struct ctl_table_spec ctl_models_table;
/* ctl_models_rows fills a models table with the models of one device (device >= 0) or all. */
void ctl_models_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st,
		     long device);

#endif
