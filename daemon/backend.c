/* SPDX-License-Identifier: MIT */
/* backend.c: the table of backends and the choice among them for --backend. */
#include "backend.h"

#include <errno.h>
#include <string.h>

#include "log.h"

/* In order of preference for --backend auto: GPU runtimes first, host memory last. */
static const struct backend_ops *const backends[] = {
    &backend_host_ops,
};

const char *backend_names(void)
{
	return "auto, host";
}

bool backend_known(const char *name)
{
	if (strcmp(name, "auto") == 0)
		return true;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(name, backends[i]->name) == 0)
			return true;
	return false;
}

int backend_open(const char *name, struct backend **out)
{
	bool any = strcmp(name, "auto") == 0;
	int err = -ENOENT;

	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		char why[256] = "";

		if (!any && strcmp(name, backends[i]->name) != 0)
			continue;
		err = backends[i]->create(out, why, sizeof(why));
		if (err == 0) {
			log_info("using the %s backend%s", backends[i]->name,
				 any ? " (chosen by --backend auto)" : "");
			return 0;
		}
		if (any)
			log_info("backend %s unavailable: %s", backends[i]->name, why);
		else
			log_error("Could not open the %s backend: %s", backends[i]->name, why);
	}
	return err;
}
