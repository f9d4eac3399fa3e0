/* SPDX-License-Identifier: MIT */
/* trim.c: `rocmmemctl trim`: have the daemon return cached GPU memory to the driver. */
#include <json-c/json.h>
#include <stdio.h>

#include "common.h"
#include "errors.h"
#include "format.h"
#include "json.h"
#include "size.h"
#include "trim.h"

static int cmd_trim(struct ctl *ctl, int argc, char **argv)
{
	rocmmem_client *client;
	uint64_t released = 0;
	long device = -1;
	int c, rc, err;
	char size[SIZE_FORMAT_MAX];

	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		if (c == 'd' && ctl_parse_device(ctl->optarg, &device) < 0)
			return ctl_usage(ctl, "invalid --device '%s'", ctl->optarg);
	if (c < 0)
		return ctl->exit;
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	rc = ctl_connect(ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_trim(client, device < 0 ? ROCMMEM_ALL_DEVICES : (rocmmem_device_index)device,
			   &released);
	rocmmem_disconnect(client);
	if (err)
		return ctl_fail(ctl, "trim", err);
	if (ctl->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "device", json_object_new_int((int)device));
		json_object_object_add(o, "bytes_trimmed", json_object_new_uint64(released));
		ctl_json_print(o);
	} else if (device < 0) {
		printf("trimmed %s on all devices\n", size_format(released, size, sizeof(size)));
	} else {
		printf("trimmed %s on device %ld\n", size_format(released, size, sizeof(size)),
		       device);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

static const struct ctl_option trim_options[] = {
    {"device", 'd', "N", "only device N (default: every device)"},
    {NULL, 0, NULL, NULL},
};

const struct ctl_command ctl_trim_command = {
    .name = "trim",
    .run = cmd_trim,
    .args = "",
    .summary = "return memory the GPU runtime caches to the driver, on one device or all",
    .options = trim_options,
};
