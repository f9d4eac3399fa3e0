/* SPDX-License-Identifier: MIT */
/* collect.h: one scrape: the daemon's metrics and its clients' series, as exposition text. */
#ifndef ROCMMEM_EXPORTER_COLLECT_H
#define ROCMMEM_EXPORTER_COLLECT_H

#include <stdio.h>

/* Where and how the exporter reaches the daemon. */
struct collect_config {
	const char *socket_path; /* NULL: the library's resolution ($ROCMMEM_SOCKET, ...) */
	int timeout_ms;		 /* to connect and for each answer */
};

/*
 * collect_scrape writes one scrape in the Prometheus text format (0.0.4) to out: the
 * daemon's own metrics as it reports them, the clients' series (per client name, label
 * `name`), and rocmmemd_up (1 when the daemon answered, else 0 and a comment saying why,
 * with nothing else about the daemon). Returns 0, or -ENOMEM when out could not take the
 * text; a daemon that cannot be reached is not an error here.
 */
int collect_scrape(const struct collect_config *cfg, FILE *out);

/*
 * collect_label_value writes s to out as a label value of the text format: backslash,
 * double quote and line feed escaped, every other byte as it is.
 */
void collect_label_value(FILE *out, const char *s);

#endif
