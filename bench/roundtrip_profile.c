/* SPDX-License-Identifier: MIT */
/* roundtrip_profile.c: bench_roundtrip's profiles, perf and strace attached during round trips. */
#include "roundtrip_profile.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* attach starts a tool (perf record, strace -c) attached to a process; 0 if it could not. */
static pid_t attach(const char *const *argv)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return 0;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	/* Give it time to attach; a tool that is missing or refused has exited by then. */
	bench_sleep_ns(700000000);
	if (waitpid(pid, &status, WNOHANG) == pid)
		return 0;
	return pid;
}

static void detach(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGINT);
	waitpid(pid, NULL, 0);
}

/* profile_one profiles one client's operations; returns which tools ran (1 perf, 2 strace). */
static unsigned profile_one(const struct profile *pf, pid_t daemon, const struct profiled *w,
			    int (*op)(rocmmem_client *c))
{
	char pid[16], self[16], data[512], sd[512], sc[512];
	unsigned ran = 0;
	pid_t tool, tool2;

	snprintf(pid, sizeof(pid), "%d", (int)daemon);
	snprintf(self, sizeof(self), "%d", (int)getpid());
	snprintf(data, sizeof(data), "%s/%sperf.data", pf->dir, w->prefix);
	snprintf(sd, sizeof(sd), "%s/%sstrace-daemon.txt", pf->dir, w->prefix);
	snprintf(sc, sizeof(sc), "%s/%sstrace-client.txt", pf->dir, w->prefix);
	{
		const char *argv[] = {"perf", "record", "-q", "-F", "4999", "-e", "cpu-clock",
				      "-g",   "-p",	pid,  "-o", data,   NULL};

		tool = attach(argv);
		for (unsigned i = 0; i < pf->ops && tool > 0; i++)
			op(w->client);
		detach(tool);
		ran |= tool > 0 ? 1u : 0u;
	}
	{
		const char *argv[] = {"strace", "-c", "-f", "-p", pid, "-o", sd, NULL};
		const char *argv2[] = {"strace", "-c", "-p", self, "-o", sc, NULL};

		tool = attach(argv);
		tool2 = tool > 0 ? attach(argv2) : 0;
		for (unsigned i = 0; i < pf->ops && tool > 0; i++)
			op(w->client);
		detach(tool2);
		detach(tool);
		ran |= tool > 0 && tool2 > 0 ? 2u : 0u;
	}
	return ran;
}

void profile_daemon(struct profile *pf, pid_t daemon, const struct profiled *who, unsigned n,
		    int (*op)(rocmmem_client *c))
{
	unsigned ran = 3;

	bench_pin_self(0);
	bench_pin_process(daemon, 0);
	for (unsigned k = 0; k < n; k++)
		ran &= profile_one(pf, daemon, &who[k], op);
	pf->perf = n > 0 && (ran & 1u);
	pf->strace = n > 0 && (ran & 2u);
}
