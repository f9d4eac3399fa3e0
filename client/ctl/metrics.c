/* SPDX-License-Identifier: MIT */
/* metrics.c: `rocmmemctl metrics`: the daemon's Prometheus metrics, as the daemon wrote them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"

int cmd_metrics(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = *global;
	rocmmem_client *client;
	char *text = NULL;
	int c, rc, err;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:", longopts, NULL)) != -1) {
		switch (c) {
		default:
			rc = ctl_common_option("metrics", c, &ctl, argv);
			if (rc)
				return rc;
			break;
		}
	}
	if (optind < argc)
		return ctl_usage("metrics", "unexpected argument '%s'", argv[optind]);
	/* The text format is the machine format here: there is no JSON form to choose. */
	if (ctl.json)
		return ctl_usage("metrics", "--json does not apply: the metrics are printed in "
					    "the Prometheus text format");
	rc = ctl_connect(&ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_metrics(client, &text);
	rocmmem_disconnect(client);
	if (err)
		return ctl_fail("metrics", err);
	fputs(text, stdout);
	free(text);
	return CTL_EXIT_OK;
}
