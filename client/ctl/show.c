/* SPDX-License-Identifier: MIT */
/* show.c: the models table, which `status` and `models` both print. */
#include <stdio.h>

#include "format.h"
#include "show.h"
#include "size.h"

enum {
	M_ID,
	M_NAME,
	M_CLASS,
	M_PID,
	M_DEVICE,
	M_STATE,
	M_RESIDENT,
	M_SIZE,
	M_PRIORITY,
	M_PINNED,
	M_IDLE,
	M_EVICTIONS,
	M_RESERVATION,
	M_USES
};
static const struct ctl_column model_columns[] = {
    [M_ID] = {"ID", 0, "the model's id (what evict and pin take)"},
    [M_NAME] = {"NAME", 0, "its name, whole"},
    [M_CLASS] = {"CLASS", 0, "transformer, vae, text_encoder, image_encoder, other"},
    [M_PID] = {"PID", 0, "its owner"},
    [M_DEVICE] = {"DEVICE", 0, "its device"},
    [M_STATE] = {"STATE", 0, "idle, in use, evicting, evicted, waiting"},
    [M_RESIDENT] = {"RESIDENT", CTL_COL_RIGHT, "bytes it holds now"},
    [M_SIZE] = {"SIZE", CTL_COL_RIGHT, "its declared size (- : leases only)"},
    [M_PRIORITY] = {"PRIORITY", CTL_COL_RIGHT, "higher stays resident longer"},
    [M_PINNED] = {"PINNED", 0, "never evicted to make room"},
    [M_IDLE] = {"IDLE", CTL_COL_RIGHT, "time since its last use"},
    [M_EVICTIONS] = {"EVICTIONS", CTL_COL_RIGHT, "times it was evicted"},
    [M_RESERVATION] = {"RESERVATION", CTL_COL_RIGHT | CTL_COL_EXTRA, "bytes reserved for it"},
    [M_USES] = {"USES", CTL_COL_RIGHT | CTL_COL_EXTRA, "times it was acquired"},
};

const struct ctl_table_spec ctl_models_table = {"models", model_columns,
						sizeof(model_columns) / sizeof(model_columns[0])};

void ctl_models_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st,
		     long device)
{
	char a[SIZE_FORMAT_MAX], idle[32];

	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (device >= 0 && v->device != (unsigned long)device)
			continue;
		ctl_table_row(t);
		ctl_table_set(t, M_ID, "%llu", (unsigned long long)v->id);
		ctl_table_set(t, M_NAME, "%s", v->name);
		ctl_table_set(t, M_CLASS, "%s", ctl_model_class_name(v->model_class));
		ctl_table_set(t, M_PID, "%d", (int)v->owner_pid);
		ctl_table_set(t, M_DEVICE, "%u", v->device);
		ctl_table_set(t, M_STATE, "%s", ctl_model_state_label(v->state));
		ctl_table_set(t, M_RESIDENT, "%s", ctl_size(ctl, v->bytes, a, sizeof(a)));
		/* A model without a size has its memory in leases only. */
		ctl_table_set(t, M_SIZE, "%s",
			      v->size ? ctl_size(ctl, v->size, a, sizeof(a)) : "-");
		ctl_table_set(t, M_PRIORITY, "%d", (int)v->priority);
		ctl_table_set(t, M_PINNED, "%s", v->pinned ? "yes" : "no");
		ctl_table_set(t, M_IDLE, "%s",
			      v->state == ROCMMEM_MODEL_IN_USE
				  ? "-"
				  : ctl_duration(v->idle_ms / 1000, idle, sizeof(idle)));
		ctl_table_set(t, M_EVICTIONS, "%llu", (unsigned long long)v->evictions);
		ctl_table_set(t, M_RESERVATION, "%s",
			      ctl_size(ctl, v->reservation_bytes, a, sizeof(a)));
		ctl_table_set(t, M_USES, "%llu", (unsigned long long)v->use_count);
	}
}
