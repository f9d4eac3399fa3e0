/* SPDX-License-Identifier: MIT */
/*
 * options_sched.c: the scheduling settings' values: evict deadlines and maximum holds by model
 * class, backfilling and its bounds, as a flag or the file gives them.
 */
#include "options_sched.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "size.h"
#include "text.h"

/* The longest deadline or hold a setting takes: an hour for a deadline, a week for a hold. */
#define DEADLINE_MAX_MS 3600000u
#define HOLD_MAX_MS ((uint64_t)7 * 24 * 3600 * 1000)

/* trim cuts the spaces around text: "transformer: 40" is fine in a file. */
static char *trim(char *text)
{
	size_t n;

	while (*text == ' ' || *text == '\t')
		text++;
	n = strlen(text);
	while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t'))
		text[--n] = '\0';
	return text;
}

/* seconds reads "2" or "0.25" into ms within [1 ms, max_ms]; "off" as 0 when off_ok. */
static int seconds(const char *text, uint64_t max_ms, bool off_ok, uint64_t *ms, char *why,
		   size_t len)
{
	int64_t v;

	if (off_ok && strcmp(text, "off") == 0) {
		*ms = 0;
		return 0;
	}
	if (duration_parse(text, &v) < 0 || v < 1 || (uint64_t)v > max_ms)
		return text_why(why, len, -EINVAL,
				"'%s': seconds, more than 0, at most %" PRIu64 "%s", text,
				max_ms / 1000, off_ok ? ", or off" : "");
	*ms = (uint64_t)v;
	return 0;
}

/*
 * per_class reads "[CLASS:]SECONDS,..." into *all (no class) and by_class (a class's own;
 * "off" there: POLICY_CLASS_OFF). Nothing is stored unless every item is good.
 */
static int per_class(const char *value, uint64_t max_ms, bool off_ok, uint64_t *all,
		     uint64_t *by_class, char *why, size_t len)
{
	uint64_t new_all = *all, new_class[MODEL_CLASSES];
	char *copy = strdup(value), *save = NULL, *item;
	int rc = 0, items = 0;

	if (!copy)
		return text_why(why, len, -EINVAL, "out of memory");
	memcpy(new_class, by_class, sizeof(new_class));
	for (item = strtok_r(copy, ",", &save); item && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		char *colon, *t = trim(item);
		unsigned cls;
		uint64_t ms;

		items++;
		colon = strchr(t, ':');
		if (!colon) {
			rc = seconds(t, max_ms, off_ok, &ms, why, len);
			if (rc == 0)
				new_all = ms;
			continue;
		}
		*colon = '\0';
		if (model_class_parse(trim(t), &cls) < 0) {
			rc = text_why(why, len, -EINVAL,
				      "unknown class '%s' (other, transformer, vae, text_encoder, "
				      "image_encoder)",
				      trim(t));
			break;
		}
		rc = seconds(trim(colon + 1), max_ms, off_ok, &ms, why, len);
		if (rc == 0)
			new_class[cls] = off_ok && ms == 0 ? POLICY_CLASS_OFF : ms;
	}
	free(copy);
	if (rc == 0 && items == 0)
		rc = text_why(why, len, -EINVAL, "expected [CLASS:]SECONDS, e.g. 20 or vae:5");
	if (rc == 0) {
		*all = new_all;
		memcpy(by_class, new_class, sizeof(new_class));
	}
	return rc;
}

int options_set_sched(struct options *o, enum option_id id, const char *value, char *why,
		      size_t len)
{
	uint64_t ms;
	int rc;

	switch (id) {
	case OPTION_EVICT_DEADLINE:
		return per_class(value, DEADLINE_MAX_MS, false, &o->evict_deadline_ms,
				 o->evict_deadline_class_ms, why, len);
	case OPTION_MAX_HOLD:
		return per_class(value, HOLD_MAX_MS, true, &o->max_hold_ms, o->max_hold_class_ms,
				 why, len);
	case OPTION_BACKFILL:
		if (strcmp(value, "on") && strcmp(value, "off"))
			return text_why(why, len, -EINVAL, "on or off");
		o->backfill = strcmp(value, "on") == 0;
		return 0;
	case OPTION_BACKFILL_PASSES: {
		unsigned long long v;
		char *end;

		errno = 0;
		v = strtoull(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || value[0] == '+' || v < 1 ||
		    v > 1000000)
			return text_why(why, len, -EINVAL, "a whole number from 1 to 1000000");
		o->backfill_passes = (unsigned)v;
		return 0;
	}
	case OPTION_BACKFILL_WAIT:
		rc = seconds(value, DEADLINE_MAX_MS, false, &ms, why, len);
		if (rc == 0)
			o->backfill_wait_ms = ms;
		return rc;
	default:
		return 1;
	}
}

void options_merge_sched(struct options *eff, const struct options *src, enum option_id id)
{
	switch (id) {
	case OPTION_EVICT_DEADLINE:
		eff->evict_deadline_ms = src->evict_deadline_ms;
		memcpy(eff->evict_deadline_class_ms, src->evict_deadline_class_ms,
		       sizeof(eff->evict_deadline_class_ms));
		break;
	case OPTION_MAX_HOLD:
		eff->max_hold_ms = src->max_hold_ms;
		memcpy(eff->max_hold_class_ms, src->max_hold_class_ms,
		       sizeof(eff->max_hold_class_ms));
		break;
	case OPTION_BACKFILL:
		eff->backfill = src->backfill;
		break;
	case OPTION_BACKFILL_PASSES:
		eff->backfill_passes = src->backfill_passes;
		break;
	case OPTION_BACKFILL_WAIT:
		eff->backfill_wait_ms = src->backfill_wait_ms;
		break;
	default:
		break;
	}
}

/* append_ms adds "[prefix]SECONDS" (or "off" for 0 or POLICY_CLASS_OFF) to buf. */
static void append_ms(char *buf, size_t len, const char *prefix, uint64_t ms)
{
	size_t used = strlen(buf);
	char v[32];

	if (used >= len)
		return;
	if (ms == 0 || ms == POLICY_CLASS_OFF)
		snprintf(v, sizeof(v), "off");
	else if (ms % 1000 == 0)
		snprintf(v, sizeof(v), "%" PRIu64, ms / 1000);
	else
		snprintf(v, sizeof(v), "%" PRIu64 ".%03" PRIu64, ms / 1000, ms % 1000);
	snprintf(buf + used, len - used, "%s%s%s", used ? ", " : "", prefix, v);
}

/* classes writes all, then each class's own value (0: none). */
static const char *classes(uint64_t all, const uint64_t *by_class, char *buf, size_t len)
{
	char prefix[32];

	buf[0] = '\0';
	append_ms(buf, len, "", all);
	for (unsigned c = 0; c < MODEL_CLASSES; c++) {
		if (!by_class[c])
			continue;
		snprintf(prefix, sizeof(prefix), "%s:", model_class_name(c));
		append_ms(buf, len, prefix, by_class[c]);
	}
	return buf;
}

const char *options_sched_text(const struct options *o, enum option_id id, char *buf, size_t len)
{
	buf[0] = '\0';
	switch (id) {
	case OPTION_EVICT_DEADLINE:
		return classes(o->evict_deadline_ms, o->evict_deadline_class_ms, buf, len);
	case OPTION_MAX_HOLD:
		return classes(o->max_hold_ms, o->max_hold_class_ms, buf, len);
	case OPTION_BACKFILL:
		snprintf(buf, len, "%s", o->backfill ? "on" : "off");
		return buf;
	case OPTION_BACKFILL_PASSES:
		snprintf(buf, len, "%u", o->backfill_passes);
		return buf;
	case OPTION_BACKFILL_WAIT:
		append_ms(buf, len, "", o->backfill_wait_ms);
		return buf;
	default:
		return buf;
	}
}
