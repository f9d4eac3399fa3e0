/* SPDX-License-Identifier: MIT */
/* books_tools.c: test_books' outside tools: rocmmemctl (status --json, watch), the daemon's log,
 * promtool. */
#include "books_tools.h"

#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

/* ctl_path is the rocmmemctl to run: $ROCMMEMCTL (a copied build), else the one built. */
const char *ctl_path(void)
{
	return getenv("ROCMMEMCTL") ? getenv("ROCMMEMCTL") : ROCMMEMCTL_BUILT;
}

/* watch_start runs rocmmemctl --json watch on d, its output into w. */
void watch_start(struct watch_proc *w, const struct daemon_proc *d)
{
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	w->used = 0;
	w->pid = fork();
	assert_true(w->pid >= 0);
	if (w->pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(ctl_path(), "rocmmemctl", "--socket", d->sock, "--json", "watch", "-i", "0.1",
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	w->fd = fds[0];
}

/* watch_count counts the occurrences of want in what w printed. */
unsigned watch_count(const struct watch_proc *w, const char *want)
{
	unsigned n = 0;

	for (const char *at = w->buf; (at = strstr(at, want)) != NULL; at++)
		n++;
	return n;
}

/* watch_until reads w's output until want appears in it; fails at the deadline. */
void watch_until(struct watch_proc *w, const char *want)
{
	long end = harness_now_ms() + HARNESS_WAIT_MS;

	w->buf[w->used] = '\0';
	while (!watch_count(w, want) && harness_now_ms() < end && w->used < sizeof(w->buf) - 1) {
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(w->fd, w->buf + w->used, sizeof(w->buf) - 1 - w->used);
		if (n <= 0)
			break;
		w->used += (size_t)n;
		w->buf[w->used] = '\0';
	}
	if (!watch_count(w, want))
		fail_msg("rocmmemctl watch never showed '%s':\n%s", want, w->buf);
}

/* watch_stop ends the watch (SIGTERM) and reaps it; what it printed stays in w. */
void watch_stop(struct watch_proc *w)
{
	kill(w->pid, SIGTERM);
	waitpid(w->pid, NULL, 0);
	close(w->fd);
}

/* ctl_status_json runs rocmmemctl --json status and returns the ComfyUI client's object. */
json_object *ctl_status_json(const struct daemon_proc *d)
{
	const char *ctl = ctl_path();
	char cmd[512], out[65536];
	json_object *doc, *clients;
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s --socket %s --json status", ctl, d->sock);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	doc = json_tokener_parse(out);
	assert_non_null(doc);
	assert_true(json_object_object_get_ex(doc, "clients", &clients));
	for (size_t i = 0; i < json_object_array_length(clients); i++) {
		json_object *o = json_object_array_get_idx(clients, i), *name;

		if (json_object_object_get_ex(o, "name", &name) &&
		    strcmp(json_object_get_string(name), "ComfyUI") == 0) {
			json_object_get(o);
			json_object_put(doc);
			return o;
		}
	}
	fail_msg("no ComfyUI client in rocmmemctl --json status: %s", out);
	return NULL;
}

/* json_u64 reads o's key as a number (fails when it is missing). */
uint64_t json_u64(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no %s in %s", key, json_object_to_json_string(o));
	return (uint64_t)json_object_get_uint64(v);
}

/* log_count counts the daemon's log lines that contain text. */
unsigned log_count(const struct daemon_proc *d, const char *text)
{
	char line[4096];
	unsigned n = 0;
	FILE *f = fopen(d->log, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

/* promtool_ok: Prometheus' own checker accepts text (skipped, saying so, where not installed). */
void promtool_ok(const char *text)
{
	char path[] = "/tmp/rocmmem-books-prom-XXXXXX", cmd[128], out[4096];
	int fd = mkstemp(path);
	size_t n;
	FILE *p;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		unlink(path);
		print_message("promtool is not installed (Debian's prometheus): not run\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	if (pclose(p) != 0 || n)
		fail_msg("promtool check metrics: %s\n--- text ---\n%s", out, text);
	unlink(path);
}
