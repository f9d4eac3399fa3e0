/* SPDX-License-Identifier: MIT */
/*
 * metrics_file.c: the metrics rewritten into a file every interval for node_exporter's textfile
 * collector, the file I/O on a libuv worker thread.
 */
#include "metrics_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "net/server.h"
#include "platform/safepath.h"
#include "service/metrics.h"

/* One rewrite of the file: the text formatted on the loop, written on a worker thread. */
struct metrics_write {
	uv_work_t work;
	struct metrics_file *file;
	char *text;
	size_t len;
	char tmp[NAME_MAX + 1]; /* in the file's directory */
	int err;		/* 0 or a negative errno */
	const char *step;	/* what failed, for the log */
};

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * create_temp creates a new file ".NAME.XXXXXXXX" (random hex) beside the metrics file: never
 * an existing one (O_EXCL), never through a link (O_NOFOLLOW; O_EXCL alone refuses one too).
 * Returns the fd (name in tmp), or a negative errno.
 */
static int create_temp(const struct metrics_file *mf, int dir_fd, char *tmp, size_t len)
{
	for (int tries = 0; tries < 16; tries++) {
		uint32_t r = 0;
		int fd;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
			r = (uint32_t)rand() ^ (uint32_t)tries;
		if (snprintf(tmp, len, ".%s.%08x", mf->base, (unsigned)r) >= (int)len)
			return -ENAMETOOLONG;
		fd = openat(dir_fd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

/*
 * write_work runs on a worker thread and touches only the job and the file's directory and
 * name, which do not change while it runs. No fsync: the file is rewritten every interval and
 * a reader needs only the rename's atomicity, not durability across a power cut.
 */
static void write_work(uv_work_t *work)
{
	struct metrics_write *w = work->data;
	struct metrics_file *mf = w->file;
	const char *base;
	char why[256];
	int dir_fd = safepath_open_dir(mf->path, &base, why, sizeof(why));
	int fd = dir_fd < 0 ? dir_fd : create_temp(mf, dir_fd, w->tmp, sizeof(w->tmp));

	if (fd < 0) {
		w->err = fd;
		w->step = "could not create a temporary file beside it";
		if (dir_fd >= 0)
			close(dir_fd);
		return;
	}
	/* Created 0600 (whatever the umask): node_exporter usually runs as another user. */
	if (fchmod(fd, 0644) < 0) {
		w->err = -errno;
		w->step = "could not make the temporary file readable";
	} else if ((w->err = write_all(fd, w->text, w->len)) < 0) {
		w->step = "could not write the temporary file";
	}
	if (close(fd) < 0 && w->err == 0) {
		w->err = -errno;
		w->step = "could not write the temporary file";
	}
	/* In the directory the temporary file is in, whatever became of the path meanwhile. */
	if (w->err == 0 && renameat(dir_fd, w->tmp, dir_fd, base) < 0) {
		w->err = -errno;
		w->step = "could not rename the temporary file over it";
	}
	if (w->err)
		unlinkat(dir_fd, w->tmp, 0);
	close(dir_fd);
}

static void remove_file(struct metrics_file *mf)
{
	const char *base;
	char why[256];
	int dir_fd = safepath_open_dir(mf->path, &base, why, sizeof(why));

	/* At stop: the loop has nothing left to serve, so this one unlink may block it. */
	if (dir_fd >= 0 && unlinkat(dir_fd, base, 0) == 0)
		log_debug("removed the metrics file %s", mf->path);
	else if (dir_fd >= 0 && errno != ENOENT)
		log_warn("Could not remove the metrics file %s: %s", mf->path, strerror(errno));
	if (dir_fd >= 0)
		close(dir_fd);
}

/* note_result logs a failed rewrite once per distinct error, and the recovery once. */
static void note_result(struct metrics_file *mf, int err, const char *step)
{
	if (err && (err != mf->last_err || step != mf->last_step))
		log_warn("Could not update the metrics file %s: %s: %s; trying again every %g s",
			 mf->path, step, strerror(-err), (double)mf->interval_ms / 1000.0);
	else if (!err && mf->last_err)
		log_info("the metrics file %s is updated again", mf->path);
	mf->last_err = err;
	mf->last_step = err ? step : NULL;
}

static void write_done(uv_work_t *work, int status)
{
	struct metrics_write *w = work->data;
	struct metrics_file *mf = w->file;

	mf->write = NULL;
	if (status < 0 && w->err == 0) {
		w->err = status;
		w->step = "the write was cancelled";
	}
	if (w->err == 0)
		mf->writes++;
	note_result(mf, w->err, w->step);
	free(w->text);
	free(w);
	if (mf->remove_pending) {
		mf->remove_pending = false;
		remove_file(mf);
	}
}

static void on_tick(uv_timer_t *timer)
{
	struct metrics_file *mf = timer->data;
	struct metrics_write *w;
	ssize_t len;
	int rc;

	if (mf->write) {
		/* The last one has not finished (a slow disk): skip rather than pile up. */
		mf->skipped++;
		log_debug("the metrics file %s is still being written: skipping this interval",
			  mf->path);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->text = malloc(METRICS_TEXT_MAX))) {
		free(w);
		note_result(mf, -ENOMEM, "could not format the metrics");
		return;
	}
	len = server_metrics(mf->server, w->text, METRICS_TEXT_MAX);
	if (len < 0) {
		free(w->text);
		free(w);
		note_result(mf, (int)len, "could not format the metrics");
		return;
	}
	w->len = (size_t)len;
	w->file = mf;
	w->work.data = w;
	rc = uv_queue_work(mf->loop, &w->work, write_work, write_done);
	if (rc < 0) {
		free(w->text);
		free(w);
		note_result(mf, rc, "could not start a write");
		return;
	}
	mf->write = w;
}

int metrics_file_open(struct metrics_file *mf, const char *path, uint64_t interval_ms, char *why,
		      size_t why_len)
{
	char probe[NAME_MAX + 1];
	struct stat st;
	int dir_fd, fd, err;

	memset(mf, 0, sizeof(*mf));
	mf->interval_ms = interval_ms;
	if (snprintf(mf->path, sizeof(mf->path), "%s", path) >= (int)sizeof(mf->path)) {
		snprintf(why, why_len, "the path is too long");
		return -ENAMETOOLONG;
	}
	dir_fd = safepath_open_dir(mf->path, &mf->base, why, why_len);
	if (dir_fd < 0) {
		if (dir_fd == -EISDIR)
			snprintf(why, why_len, "it names a directory, not a file");
		return dir_fd;
	}
	err = 0;
	if (fstatat(dir_fd, mf->base, &st, 0) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "it is a directory");
		err = -EISDIR;
	} else if ((fd = create_temp(mf, dir_fd, probe, sizeof(probe))) < 0) {
		/* Whether it may create files there is best learnt by creating one. */
		err = fd;
		snprintf(why, why_len, "could not create a file in the directory of %s: %s", path,
			 strerror(-err));
	} else {
		close(fd);
		unlinkat(dir_fd, probe, 0);
	}
	close(dir_fd);
	return err;
}

int metrics_file_start(struct metrics_file *mf, struct server *s, uv_loop_t *loop)
{
	int rc;

	mf->server = s;
	mf->loop = loop;
	rc = uv_timer_init(loop, &mf->timer);
	if (rc < 0)
		return rc;
	mf->timer.data = mf;
	rc = uv_timer_start(&mf->timer, on_tick, 0, mf->interval_ms);
	if (rc < 0) {
		uv_close((uv_handle_t *)&mf->timer, NULL);
		return rc;
	}
	mf->running = true;
	log_info("writing the metrics to %s every %g s", mf->path,
		 (double)mf->interval_ms / 1000.0);
	return 0;
}

void metrics_file_stop(struct metrics_file *mf)
{
	if (!mf->running)
		return;
	mf->running = false;
	uv_timer_stop(&mf->timer);
	uv_close((uv_handle_t *)&mf->timer, NULL);
	/* A write in flight would put the file back: remove it once that is done. */
	if (mf->write)
		mf->remove_pending = true;
	else
		remove_file(mf);
}
