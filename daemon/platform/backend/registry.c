/* SPDX-License-Identifier: MIT */
/* registry.c: the table of backends and the choice among them for --backend. */
#include "registry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

/* In order of preference for --backend auto: GPU runtimes first, host memory last. */
static const struct backend_ops *const backends[] = {
    &backend_hip_ops,
    &backend_cuda_ops,
    &backend_host_ops,
};

/* Why --backend auto ended on host memory ("hip: ...; cuda: ..."); "" when it did not. */
static char host_fallback[1024];

const char *backend_names(void)
{
	return "auto, hip, cuda, host";
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
	char skipped[sizeof(host_fallback)] = "";
	int err = -ENOENT;

	host_fallback[0] = '\0';
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		char why[512] = "";
		size_t used = strlen(skipped);

		if (!any && strcmp(name, backends[i]->name) != 0)
			continue;
		err = backends[i]->create(out, why, sizeof(why));
		if (err == 0) {
			log_info("using the %s backend%s", backends[i]->name,
				 any ? " (chosen by --backend auto)" : "");
			/* Host memory the user did not ask for: GPU models would be counted
			 * against system RAM. Said loudly, and kept for status. */
			if (any && backends[i] == &backend_host_ops) {
				snprintf(host_fallback, sizeof(host_fallback), "%s", skipped);
				log_warn(
				    "no GPU runtime found (%s): serving host memory (system RAM), "
				    "not GPU memory; set backend = host to mean it, or make the "
				    "runtime loadable (docs/backends.md)",
				    skipped);
			}
			return 0;
		}
		if (any) {
			log_info("backend %s unavailable: %s", backends[i]->name, why);
			snprintf(skipped + used, sizeof(skipped) - used, "%s%s: %s",
				 used ? "; " : "", backends[i]->name, why);
		} else {
			log_error("Could not open the %s backend: %s", backends[i]->name, why);
		}
	}
	return err;
}

const char *backend_host_fallback(void)
{
	return host_fallback[0] ? host_fallback : NULL;
}
