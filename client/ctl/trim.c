/* SPDX-License-Identifier: MIT */
/* trim.c: `rocmmemctl trim`: have the daemon return cached GPU memory to the driver. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"
#include "size.h"

int cmd_trim(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"device", required_argument, NULL, 'd'},
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = *global;
	rocmmem_client *client;
	uint64_t released = 0;
	int device = -1, c, rc, err;
	char size[SIZE_FORMAT_MAX];

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:js:", longopts, NULL)) != -1) {
		char *end;
		unsigned long v;

		switch (c) {
		case 'd':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || v > 1024)
				return ctl_usage("trim", "invalid --device '%s'", optarg);
			device = (int)v;
			break;
		default:
			rc = ctl_common_option("trim", c, &ctl, argv);
			if (rc)
				return rc;
			break;
		}
	}
	if (optind < argc)
		return ctl_usage("trim", "unexpected argument '%s'", argv[optind]);
	rc = ctl_connect(&ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_trim(client, device, &released);
	rocmmem_disconnect(client);
	if (err)
		return ctl_fail("trim", err);
	if (ctl.json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "device", json_object_new_int(device));
		json_object_object_add(o, "bytes_trimmed", json_object_new_uint64(released));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else if (device < 0) {
		printf("trimmed %s on all devices\n", size_format(released, size, sizeof(size)));
	} else {
		printf("trimmed %s on device %d\n", size_format(released, size, sizeof(size)),
		       device);
	}
	return CTL_EXIT_OK;
}
