/* SPDX-License-Identifier: MIT */
/* bench.h: what every benchmark program shares: clocks, histograms, pinning, /proc, JSON. */
#ifndef ROCMMEM_BENCH_H
#define ROCMMEM_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ----------------------------------------------------------------------------------------- */
/* Clocks */

/* bench_now_ns returns CLOCK_MONOTONIC in nanoseconds: the same clock in every process. */
uint64_t bench_now_ns(void);

/* bench_sleep_ns sleeps at least ns nanoseconds (restarted after signals). */
void bench_sleep_ns(uint64_t ns);

/* bench_spin_ns busy-waits ns nanoseconds: work that must stay on the CPU. */
void bench_spin_ns(uint64_t ns);

/* ----------------------------------------------------------------------------------------- */
/* Histograms: 64 sub-buckets per power of two, so a percentile is within 1.6% of the truth */

#define BENCH_HIST_SUB 64u
#define BENCH_HIST_BUCKETS (2u * BENCH_HIST_SUB + 41u * BENCH_HIST_SUB)

struct bench_hist {
	uint64_t count;
	uint64_t min, max;
	double sum;
	uint32_t buckets[BENCH_HIST_BUCKETS];
};

void bench_hist_init(struct bench_hist *h);
void bench_hist_add(struct bench_hist *h, uint64_t value);
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);
/* bench_hist_pct returns the value at percentile pct (0..100); 0 for an empty histogram. */
uint64_t bench_hist_pct(const struct bench_hist *h, double pct);
double bench_hist_mean(const struct bench_hist *h);

/* bench_median returns the median of n values (sorts them in place); 0 when n is 0. */
double bench_median(double *v, size_t n);

/* ----------------------------------------------------------------------------------------- */
/* CPUs and processes */

/* bench_cpu_count returns the CPUs this process may run on. */
int bench_cpu_count(void);

/*
 * bench_pin_process pins every thread of pid (0: this process) to cpu, or lets them run
 * anywhere with cpu < 0. Returns 0 or a negative errno.
 */
int bench_pin_process(pid_t pid, int cpu);

/* bench_pin_self pins the calling thread only. */
int bench_pin_self(int cpu);

/*
 * bench_proc_cpu reads the CPU time pid has used: *stat_ns from utime+stime in /proc/PID/stat
 * (clock ticks), *sched_ns from /proc/PID/schedstat (nanoseconds; 0 where absent). Threads
 * included. Returns 0 or a negative errno.
 */
int bench_proc_cpu(pid_t pid, uint64_t *stat_ns, uint64_t *sched_ns);

/* bench_thread_cpu_ns returns the calling thread's CPU time in nanoseconds. */
uint64_t bench_thread_cpu_ns(void);

/* bench_proc_mem reads VmRSS (/proc/PID/status) and Pss (/proc/PID/smaps_rollup) in KiB. */
int bench_proc_mem(pid_t pid, uint64_t *rss_kib, uint64_t *pss_kib);

/* bench_proc_fds counts pid's open file descriptors; negative errno on failure. */
long bench_proc_fds(pid_t pid);

/* bench_meminfo_kib returns a /proc/meminfo field ("Slab", "Shmem") in KiB, 0 if absent. */
uint64_t bench_meminfo_kib(const char *field);

/*
 * bench_meminfo_fixture writes a /proc/meminfo lookalike whose MemAvailable (and MemTotal) is
 * bytes into a fresh temporary directory, for the daemon's ROCMMEM_HOST_MEMINFO
 * (docs/backends.md): the host backend's device total, for leases that are never touched.
 * Its path goes to path. Returns 0 or a negative errno. bench_meminfo_fixture_remove removes
 * it and its directory (an empty path is ignored).
 */
int bench_meminfo_fixture(uint64_t bytes, char *path, size_t len);
void bench_meminfo_fixture_remove(const char *path);

/*
 * bench_raise_nofile raises RLIMIT_NOFILE to at least want (hard limit too, which needs
 * CAP_SYS_RESOURCE); children inherit it. Returns the soft limit now in force.
 */
uint64_t bench_raise_nofile(uint64_t want);

/* ----------------------------------------------------------------------------------------- */
/* The daemon under test */

struct bench_daemon {
	pid_t pid;
	char dir[64];	/* a private temporary directory, removed at stop */
	char sock[108]; /* its socket (as long as sockaddr_un allows) */
	char log[128];	/* its stderr */
};

/*
 * bench_daemon_start starts rocmmemd (the program at path) with --config /dev/null and
 * --socket in a fresh temporary directory, then the NULL-terminated args, pinned to cpu
 * (< 0: anywhere), with env (NULL-terminated "NAME=value" entries, may be NULL) added to the
 * environment, and waits until it accepts connections. Returns 0, or a negative errno with
 * the daemon's last log lines on stderr.
 */
int bench_daemon_start(struct bench_daemon *d, const char *path, int cpu, const char *const *args,
		       const char *const *env);

/* bench_daemon_stop stops it with SIGTERM (SIGKILL after 10 s); returns its exit status. */
int bench_daemon_stop(struct bench_daemon *d);

/* bench_rocmmemd_path returns the daemon to test: argument, else $ROCMMEMD, else NULL. */
const char *bench_rocmmemd_path(const char *arg);

/* ----------------------------------------------------------------------------------------- */
/* JSON output: every program writes one object (what the runner puts in the report) */

struct bench_json {
	FILE *f;
	int depth;
	bool need_comma[32];
};

void bench_json_open(struct bench_json *j, FILE *f);
void bench_json_close(struct bench_json *j);
void bench_json_object(struct bench_json *j, const char *key); /* key NULL inside arrays */
void bench_json_array(struct bench_json *j, const char *key);
void bench_json_end_object(struct bench_json *j);
void bench_json_end_array(struct bench_json *j);
void bench_json_str(struct bench_json *j, const char *key, const char *value);
void bench_json_num(struct bench_json *j, const char *key, double value);
void bench_json_int(struct bench_json *j, const char *key, int64_t value);
void bench_json_bool(struct bench_json *j, const char *key, bool value);
void bench_json_null(struct bench_json *j, const char *key);

/*
 * bench_json_hist writes a histogram of nanosecond values as an object in microseconds:
 * {"n", "p50", "p99", "p999", "mean", "min", "max"}.
 */
void bench_json_hist(struct bench_json *j, const char *key, const struct bench_hist *h);

/* bench_ratio returns a / b, or 0 when b is 0. */
double bench_ratio(double a, double b);

/* ----------------------------------------------------------------------------------------- */
/* Command lines: every program takes --rocmmemd, --json, --mode and its own options */

enum bench_mode { BENCH_TINY, BENCH_QUICK, BENCH_FULL };

struct bench_args {
	const char *rocmmemd;
	const char *json; /* NULL: stdout */
	enum bench_mode mode;
};

/*
 * bench_parse_common takes the common options out of argv (--rocmmemd PATH, --json FILE,
 * --mode tiny|quick|full) and leaves the others, in order, in argv; returns the new argc, or
 * -1 after printing an error.
 */
int bench_parse_common(int argc, char **argv, struct bench_args *a);

/*
 * bench_usage prints the usage line of prog (the common options, then extra, its own) on
 * stderr; bench_need_daemon says that prog needs --rocmmemd. Both return 2, the exit status.
 */
int bench_usage(const char *prog, const char *extra);
int bench_need_daemon(const char *prog);

/* bench_mode_pick returns the value for the mode in force. */
static inline uint64_t bench_mode_pick(const struct bench_args *a, uint64_t tiny, uint64_t quick,
				       uint64_t full)
{
	return a->mode == BENCH_TINY ? tiny : a->mode == BENCH_QUICK ? quick : full;
}

/* bench_open_output opens the JSON output (stdout when a->json is NULL). */
FILE *bench_open_output(const struct bench_args *a);

/* bench_log prints a progress line on stderr, prefixed with the program's name. */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
