/* SPDX-License-Identifier: MIT */
/* bench.c: clocks, histograms, pinning, /proc readers, the daemon's process, JSON output. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a daemon may take to accept its first connection. */
#define DAEMON_START_MS 15000
#define DAEMON_STOP_MS 10000

static const char *program_name = "bench";

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

void bench_spin_ns(uint64_t ns)
{
	uint64_t end = bench_now_ns() + ns;

	while (bench_now_ns() < end) {
	}
}

/* ----------------------------------------------------------------------------------------- */
/* Histograms */

/* hist_index: values below 128 exactly, then 64 buckets per power of two. */
static unsigned hist_index(uint64_t v)
{
	unsigned e, idx;

	if (v < 2 * BENCH_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	idx = 2 * BENCH_HIST_SUB + (e - 7) * BENCH_HIST_SUB +
	      (unsigned)((v >> (e - 6)) - BENCH_HIST_SUB);
	return idx < BENCH_HIST_BUCKETS ? idx : BENCH_HIST_BUCKETS - 1;
}

/* hist_value returns the middle of bucket idx. */
static uint64_t hist_value(unsigned idx)
{
	unsigned e, shift;
	uint64_t sub;

	if (idx < 2 * BENCH_HIST_SUB)
		return idx;
	e = 7 + (idx - 2 * BENCH_HIST_SUB) / BENCH_HIST_SUB;
	sub = BENCH_HIST_SUB + (idx - 2 * BENCH_HIST_SUB) % BENCH_HIST_SUB;
	shift = e - 6;
	return (sub << shift) + ((1ull << shift) >> 1);
}

void bench_hist_init(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void bench_hist_add(struct bench_hist *h, uint64_t value)
{
	h->buckets[hist_index(value)]++;
	h->count++;
	h->sum += (double)value;
	if (value < h->min)
		h->min = value;
	if (value > h->max)
		h->max = value;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t bench_hist_pct(const struct bench_hist *h, double pct)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return 0;
	rank = (uint64_t)ceil(pct / 100.0 * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t v = hist_value(i);

			return v < h->min ? h->min : v > h->max ? h->max : v;
		}
	}
	return h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return a < b ? -1 : a > b;
}

double bench_median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double bench_ratio(double a, double b)
{
	return b != 0.0 ? a / b : 0.0;
}

/* ----------------------------------------------------------------------------------------- */
/* CPUs and processes */

int bench_cpu_count(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return (int)sysconf(_SC_NPROCESSORS_ONLN);
	return CPU_COUNT(&set);
}

static void fill_set(cpu_set_t *set, int cpu)
{
	CPU_ZERO(set);
	if (cpu >= 0) {
		CPU_SET(cpu, set);
		return;
	}
	for (long i = 0; i < sysconf(_SC_NPROCESSORS_CONF) && i < CPU_SETSIZE; i++)
		CPU_SET((int)i, set);
}

int bench_pin_self(int cpu)
{
	cpu_set_t set;

	fill_set(&set, cpu);
	return sched_setaffinity(0, sizeof(set), &set) < 0 ? -errno : 0;
}

int bench_pin_process(pid_t pid, int cpu)
{
	char path[64];
	struct dirent *e;
	cpu_set_t set;
	int err = 0;
	DIR *dir;

	fill_set(&set, cpu);
	snprintf(path, sizeof(path), "/proc/%d/task", pid ? (int)pid : (int)getpid());
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid > 0 && sched_setaffinity(tid, sizeof(set), &set) < 0 && errno != ESRCH)
			err = -errno;
	}
	closedir(dir);
	return err;
}

/* read_file reads a small /proc file into buf (NUL-terminated); returns its length or -errno. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)total < cap - 1 && (n = read(fd, buf + total, cap - 1 - (size_t)total)) > 0)
		total += n;
	close(fd);
	buf[total] = '\0';
	return total;
}

int bench_proc_cpu(pid_t pid, uint64_t *stat_ns, uint64_t *sched_ns)
{
	char path[320], buf[1024];
	unsigned long long utime = 0, stime = 0;
	struct dirent *e;
	const char *p;
	DIR *dir;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	p = strrchr(buf, ')');
	/* After the name: state is field 3; utime and stime are fields 14 and 15. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
			 &stime) != 2)
		return -EPROTO;
	*stat_ns = (uint64_t)(utime + stime) * (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
	*sched_ns = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((e = readdir(dir))) {
		unsigned long long on_cpu;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		if (read_file(path, buf, sizeof(buf)) > 0 && sscanf(buf, "%llu", &on_cpu) == 1)
			*sched_ns += on_cpu;
	}
	closedir(dir);
	return 0;
}

uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* field_kib finds "name: N kB" in text. */
static uint64_t field_kib(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, name, len) == 0 && p[len] == ':')
			return strtoull(p + len + 1, NULL, 10);
	}
	return 0;
}

int bench_proc_mem(pid_t pid, uint64_t *rss_kib, uint64_t *pss_kib)
{
	char path[64], buf[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	*rss_kib = field_kib(buf, "VmRSS");
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	n = read_file(path, buf, sizeof(buf));
	*pss_kib = n > 0 ? field_kib(buf, "Pss") : 0;
	return 0;
}

long bench_proc_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	long n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

uint64_t bench_meminfo_kib(const char *field)
{
	char buf[8192];

	if (read_file("/proc/meminfo", buf, sizeof(buf)) <= 0)
		return 0;
	return field_kib(buf, field);
}

int bench_meminfo_fixture(uint64_t bytes, char *path, size_t len)
{
	char dir[] = "/tmp/rocmmem-meminfo-XXXXXX";
	FILE *f;

	if (!mkdtemp(dir))
		return -errno;
	snprintf(path, len, "%s/meminfo", dir);
	f = fopen(path, "we");
	if (!f) {
		int err = -errno;

		rmdir(dir);
		return err;
	}
	fprintf(f, "MemTotal:       %" PRIu64 " kB\nMemAvailable:   %" PRIu64 " kB\n", bytes / 1024,
		bytes / 1024);
	return fclose(f) ? -errno : 0;
}

void bench_meminfo_fixture_remove(const char *path)
{
	char dir[512];
	char *slash;

	if (!path || !path[0])
		return;
	unlink(path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		rmdir(dir);
	}
}

uint64_t bench_raise_nofile(uint64_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	if (rl.rlim_cur >= want)
		return rl.rlim_cur;
	if (rl.rlim_max < want) {
		struct rlimit more = {.rlim_cur = want, .rlim_max = want};

		/* Root may raise the hard limit (up to fs.nr_open). */
		if (setrlimit(RLIMIT_NOFILE, &more) == 0)
			return want;
	}
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur;
}

/* ----------------------------------------------------------------------------------------- */
/* The daemon */

const char *bench_rocmmemd_path(const char *arg)
{
	const char *env = getenv("ROCMMEMD");

	if (arg && arg[0])
		return arg;
	return env && env[0] ? env : NULL;
}

static void print_log_tail(const char *path)
{
	char buf[4096];
	ssize_t n = read_file(path, buf, sizeof(buf));

	if (n > 0)
		fprintf(stderr, "%s: the daemon's log (%s) ends with:\n%s\n", program_name, path,
			n > 2000 ? buf + n - 2000 : buf);
}

static bool can_connect(const char *sock)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd;
	bool ok;

	if (strlen(sock) >= sizeof(addr.sun_path))
		return false;
	memcpy(addr.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
	close(fd);
	return ok;
}

/*
 * daemon_knows says whether the daemon's --help names option: the benchmarks lift limits that
 * only some versions have (one user's connections), and must not pass an unknown option.
 */
static bool daemon_knows(const char *path, const char *option)
{
	static char help[65536], help_path[512];
	int fds[2];
	pid_t pid;

	if (strcmp(help_path, path) != 0) {
		size_t len = 0;
		ssize_t n;

		help[0] = '\0';
		snprintf(help_path, sizeof(help_path), "%s", path);
		if (pipe2(fds, O_CLOEXEC) < 0)
			return false;
		pid = fork();
		if (pid == 0) {
			dup2(fds[1], STDOUT_FILENO);
			dup2(fds[1], STDERR_FILENO);
			execl(path, path, "--help", (char *)NULL);
			_exit(127);
		}
		close(fds[1]);
		while (pid > 0 && len < sizeof(help) - 1 &&
		       (n = read(fds[0], help + len, sizeof(help) - 1 - len)) > 0)
			len += (size_t)n;
		help[len] = '\0';
		close(fds[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	return strstr(help, option) != NULL;
}

int bench_daemon_start(struct bench_daemon *d, const char *path, int cpu, const char *const *args,
		       const char *const *env)
{
	const char *argv[64];
	unsigned argc = 0;
	uint64_t deadline;
	pid_t pid;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/rocmmem-bench-XXXXXX");
	if (!mkdtemp(d->dir))
		return -errno;
	snprintf(d->sock, sizeof(d->sock), "%s/rocmmemd.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/rocmmemd.log", d->dir);
	argv[argc++] = path;
	argv[argc++] = "--config";
	argv[argc++] = "/dev/null";
	argv[argc++] = "--socket";
	argv[argc++] = d->sock;
	/* Every client here is this user: a per-user cap would be what is measured. */
	if (daemon_knows(path, "--max-clients-per-uid")) {
		argv[argc++] = "--max-clients-per-uid";
		argv[argc++] = "1048576";
	}
	for (unsigned i = 0; args && args[i] && argc < 63; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		/* A benchmark that dies must not leave its daemon behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (cpu >= 0)
			bench_pin_self(cpu);
		for (unsigned i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		/* Not under systemd: the log goes to the file, as plain lines. */
		unsetenv("JOURNAL_STREAM");
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execv(path, (char *const *)argv);
		fprintf(stderr, "Could not run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	d->pid = pid;
	deadline = bench_now_ns() + (uint64_t)DAEMON_START_MS * 1000000u;
	while (bench_now_ns() < deadline) {
		int status;

		if (can_connect(d->sock))
			return 0;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "%s: rocmmemd (%s) exited at start (status %d)\n",
				program_name, path, status);
			print_log_tail(d->log);
			d->pid = 0;
			return -ECHILD;
		}
		bench_sleep_ns(5000000);
	}
	fprintf(stderr, "%s: rocmmemd did not listen on %s within %d ms\n", program_name, d->sock,
		DAEMON_START_MS);
	print_log_tail(d->log);
	bench_daemon_stop(d);
	return -ETIMEDOUT;
}

static void remove_dir(const char *path)
{
	char file[512];
	struct dirent *e;
	DIR *dir = opendir(path);

	if (!dir)
		return;
	while ((e = readdir(dir))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		unlink(file);
	}
	closedir(dir);
	rmdir(path);
}

int bench_daemon_stop(struct bench_daemon *d)
{
	uint64_t deadline = bench_now_ns() + (uint64_t)DAEMON_STOP_MS * 1000000u;
	int status = 0;
	bool done = false;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		while (!done && bench_now_ns() < deadline) {
			pid_t r = waitpid(d->pid, &status, WNOHANG);

			if (r == d->pid || (r < 0 && errno == ECHILD))
				done = true;
			else
				bench_sleep_ns(2000000);
		}
		if (!done) {
			fprintf(stderr, "%s: rocmmemd did not stop within %d ms: killed\n",
				program_name, DAEMON_STOP_MS);
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "%s: rocmmemd ended with status %d\n", program_name,
				status);
			print_log_tail(d->log);
		}
		d->pid = 0;
	}
	if (d->dir[0] && getenv("ROCMMEM_BENCH_KEEP"))
		fprintf(stderr, "%s: kept the daemon's directory %s\n", program_name, d->dir);
	else if (d->dir[0])
		remove_dir(d->dir);
	d->dir[0] = '\0';
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ----------------------------------------------------------------------------------------- */
/* JSON */

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* json_key starts a member (or an array element when key is NULL). */
static void json_key(struct bench_json *j, const char *key)
{
	if (j->need_comma[j->depth])
		fputc(',', j->f);
	j->need_comma[j->depth] = true;
	if (key) {
		json_string(j->f, key);
		fputc(':', j->f);
	}
}

void bench_json_open(struct bench_json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	fputc('{', f);
	j->depth = 1;
}

void bench_json_close(struct bench_json *j)
{
	fputs("}\n", j->f);
	fflush(j->f);
}

void bench_json_object(struct bench_json *j, const char *key)
{
	json_key(j, key);
	fputc('{', j->f);
	j->need_comma[++j->depth] = false;
}

void bench_json_array(struct bench_json *j, const char *key)
{
	json_key(j, key);
	fputc('[', j->f);
	j->need_comma[++j->depth] = false;
}

void bench_json_end_object(struct bench_json *j)
{
	fputc('}', j->f);
	j->depth--;
}

void bench_json_end_array(struct bench_json *j)
{
	fputc(']', j->f);
	j->depth--;
}

void bench_json_str(struct bench_json *j, const char *key, const char *value)
{
	json_key(j, key);
	json_string(j->f, value);
}

void bench_json_num(struct bench_json *j, const char *key, double value)
{
	json_key(j, key);
	if (isfinite(value))
		fprintf(j->f, "%.6g", value);
	else
		fputs("null", j->f);
}

void bench_json_int(struct bench_json *j, const char *key, int64_t value)
{
	json_key(j, key);
	fprintf(j->f, "%lld", (long long)value);
}

void bench_json_bool(struct bench_json *j, const char *key, bool value)
{
	json_key(j, key);
	fputs(value ? "true" : "false", j->f);
}

void bench_json_null(struct bench_json *j, const char *key)
{
	json_key(j, key);
	fputs("null", j->f);
}

void bench_json_hist(struct bench_json *j, const char *key, const struct bench_hist *h)
{
	bench_json_object(j, key);
	bench_json_int(j, "n", (int64_t)h->count);
	bench_json_num(j, "p50", (double)bench_hist_pct(h, 50) / 1000.0);
	bench_json_num(j, "p99", (double)bench_hist_pct(h, 99) / 1000.0);
	bench_json_num(j, "p999", (double)bench_hist_pct(h, 99.9) / 1000.0);
	bench_json_num(j, "mean", bench_hist_mean(h) / 1000.0);
	bench_json_num(j, "min", h->count ? (double)h->min / 1000.0 : 0.0);
	bench_json_num(j, "max", (double)h->max / 1000.0);
	bench_json_end_object(j);
}

/* ----------------------------------------------------------------------------------------- */
/* Command lines */

int bench_parse_common(int argc, char **argv, struct bench_args *a)
{
	int out = 1;
	const char *slash = strrchr(argv[0], '/');

	program_name = slash ? slash + 1 : argv[0];
	memset(a, 0, sizeof(*a));
	a->mode = BENCH_QUICK;
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];

		if ((strcmp(opt, "--rocmmemd") == 0 || strcmp(opt, "--json") == 0 ||
		     strcmp(opt, "--mode") == 0) &&
		    i + 1 >= argc) {
			fprintf(stderr, "%s: %s needs a value\n", program_name, opt);
			return -1;
		}
		if (strcmp(opt, "--rocmmemd") == 0) {
			a->rocmmemd = argv[++i];
		} else if (strcmp(opt, "--json") == 0) {
			a->json = argv[++i];
		} else if (strcmp(opt, "--mode") == 0) {
			const char *m = argv[++i];

			if (strcmp(m, "tiny") == 0)
				a->mode = BENCH_TINY;
			else if (strcmp(m, "quick") == 0)
				a->mode = BENCH_QUICK;
			else if (strcmp(m, "full") == 0)
				a->mode = BENCH_FULL;
			else {
				fprintf(stderr, "%s: --mode is tiny, quick or full, not '%s'\n",
					program_name, m);
				return -1;
			}
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	a->rocmmemd = bench_rocmmemd_path(a->rocmmemd);
	return out;
}

int bench_usage(const char *prog, const char *extra)
{
	fprintf(stderr, "usage: %s [--rocmmemd PATH] [--json FILE] [--mode tiny|quick|full]%s\n",
		prog, extra);
	return 2;
}

int bench_need_daemon(const char *prog)
{
	fprintf(stderr, "%s: give the daemon with --rocmmemd or $ROCMMEMD\n", prog);
	return 2;
}

FILE *bench_open_output(const struct bench_args *a)
{
	FILE *f;

	if (!a->json || strcmp(a->json, "-") == 0)
		return stdout;
	f = fopen(a->json, "w");
	if (!f)
		fprintf(stderr, "%s: Could not write %s: %s\n", program_name, a->json,
			strerror(errno));
	return f;
}

void bench_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
