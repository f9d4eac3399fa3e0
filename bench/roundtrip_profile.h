/* SPDX-License-Identifier: MIT */
/* roundtrip_profile.h: bench_roundtrip's profiles, perf and strace attached during round trips. */
#ifndef ROCMMEM_BENCH_ROUNDTRIP_PROFILE_H
#define ROCMMEM_BENCH_ROUNDTRIP_PROFILE_H

#include <stdbool.h>
#include <sys/types.h>

#include "rocmmem.h"

struct profile {
	const char *dir;   /* --profile DIR; NULL: no profile */
	unsigned ops;	   /* lease operations under each tool, per client */
	bool perf, strace; /* whether each tool ran for every client */
};

/* One client profiled: its files in DIR are named PREFIX + perf.data, strace-daemon.txt... */
struct profiled {
	const char *prefix;
	rocmmem_client *client;
};

/*
 * profile_daemon runs pf->ops operations (op) of each client in who[0..n) with this process and
 * the daemon pinned to CPU 0: under perf record attached to the daemon (DIR/PREFIXperf.data),
 * then under strace -c attached to the daemon (DIR/PREFIXstrace-daemon.txt) and to this process
 * (DIR/PREFIXstrace-client.txt). A tool that is missing or refused leaves its flag false.
 */
void profile_daemon(struct profile *pf, pid_t daemon, const struct profiled *who, unsigned n,
		    int (*op)(rocmmem_client *c));

#endif
