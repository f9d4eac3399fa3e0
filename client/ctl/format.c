/* SPDX-License-Identifier: MIT */
/* format.c: how rocmmemctl reads arguments and writes values: sizes, durations, devices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "size.h"

int64_t ctl_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *ctl_duration(uint64_t s, char *buf, size_t len)
{
	if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	return buf;
}

const char *ctl_size(const struct ctl *ctl, uint64_t bytes, char *buf, size_t len)
{
	if (ctl->out.bytes)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		size_format(bytes, buf, len);
	return buf;
}

int ctl_parse_device(const char *text, long *device)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || text[0] < '0' || text[0] > '9' || v > 1024)
		return -EINVAL;
	*device = (long)v;
	return 0;
}

bool ctl_is_self(const struct rocmmem_client_info *v)
{
	return v->pid == (int32_t)getpid();
}

const char *ctl_host_fallback_line(const struct rocmmem_daemon_info *d, bool color, char *buf,
				   size_t len)
{
	buf[0] = '\0';
	if (!d->host_fallback)
		return buf;
	snprintf(buf, len,
		 "%sWARNING%s: host memory, not GPU memory: rocmmemd found no GPU runtime (%s); "
		 "leases are system RAM. Set backend = host if that is meant.",
		 color ? CTL_YELLOW : "", color ? CTL_RESET : "",
		 d->host_fallback_reason && d->host_fallback_reason[0] ? d->host_fallback_reason
								       : "no reason given");
	return buf;
}

const char *ctl_clock_text(uint64_t ms, bool millis, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char hms[16] = "--:--:--";

	if (localtime_r(&t, &tm))
		strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
	if (millis)
		snprintf(buf, len, "%s.%03u", hms, (unsigned)(ms % 1000));
	else
		snprintf(buf, len, "%s", hms);
	return buf;
}

const char *ctl_ms_text(uint64_t ms, char *buf, size_t len)
{
	if (ms < 1000)
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
	else
		ctl_duration(ms / 1000, buf, len);
	return buf;
}

int ctl_parse_interval(const char *text, uint32_t *ms)
{
	int64_t v;

	if (duration_parse(text, &v) < 0 || v < (int64_t)ROCMMEM_SAMPLE_INTERVAL_MIN_MS ||
	    v > (int64_t)ROCMMEM_SAMPLE_INTERVAL_MAX_MS)
		return -EINVAL;
	*ms = (uint32_t)v;
	return 0;
}

int ctl_parse_count(const char *text, uint64_t *count)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end || text[0] < '0' || text[0] > '9' || v == 0)
		return -EINVAL;
	*count = v;
	return 0;
}

const char *ctl_errno_name(int err, char *buf, size_t len)
{
	const char *name = err < 0 ? strerrorname_np(-err) : NULL;

	if (name)
		return name;
	snprintf(buf, len, "errno %d", -err);
	return buf;
}

const char *ctl_model_class_name(enum rocmmem_model_class c)
{
	static const char *const names[] = {"other", "transformer", "vae", "text_encoder",
					    "image_encoder"};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "other";
}

const char *ctl_model_state_name(enum rocmmem_model_state s)
{
	static const char *const names[] = {"idle", "in_use", "evicting", "evicted", "waiting"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

const char *ctl_model_state_label(enum rocmmem_model_state s)
{
	return s == ROCMMEM_MODEL_IN_USE ? "in use" : ctl_model_state_name(s);
}
