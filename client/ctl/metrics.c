/* SPDX-License-Identifier: MIT */
/* metrics.c: `rocmmemctl metrics`: the daemon's Prometheus metrics, as the daemon wrote them. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "errors.h"
#include "metrics.h"

static int cmd_metrics(struct ctl *ctl, int argc, char **argv)
{
	rocmmem_client *client;
	char *text = NULL;
	int c, rc, err;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		;
	if (c < 0)
		return ctl->exit;
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	/* The text format is the machine format here: there is no JSON form to choose. */
	if (ctl->json)
		return ctl_usage(ctl, "--json does not apply: the metrics are printed in the "
				      "Prometheus text format");
	rc = ctl_connect(ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_metrics(client, &text);
	rocmmem_disconnect(client);
	if (err)
		return ctl_fail(ctl, "metrics", err);
	fputs(text, stdout);
	free(text);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

static const struct ctl_option no_options[] = {{NULL, 0, NULL, NULL}};

const struct ctl_command ctl_metrics_command = {
    .name = "metrics",
    .run = cmd_metrics,
    .args = "",
    .summary = "print the daemon's metrics in the Prometheus text format",
    .options = no_options,
};
