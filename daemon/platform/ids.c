/* SPDX-License-Identifier: MIT */
/* ids.c: user and group names and numbers, as settings give them (through NSS). */
#include "ids.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* listed says whether id is in l. */
static bool listed(const struct id_list *l, uint32_t id)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

/* parse_number reads a decimal id: 1 when text is one (*out set), 0 when it is not a number. */
static int parse_number(const char *text, uint32_t *out, char *why, size_t len)
{
	unsigned long long v;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return 0;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (*end)
		return 0; /* "1abc" may be a name */
	/* (uid_t)-1 means "no id" to chown and setresuid: never a real one. */
	if (errno || v >= UINT32_MAX)
		return text_why(why, len, -EINVAL, "id %s is out of range (0 to %u)", text,
				UINT32_MAX - 1);
	*out = (uint32_t)v;
	return 1;
}

/* lookup_buffer sizes the buffer getpwnam_r and getgrnam_r need, growing on ERANGE. */
#define LOOKUP_BUFFER_MIN 1024u
#define LOOKUP_BUFFER_MAX (1u << 20)

/*
 * lookup_id resolves text, a decimal id or a name, to a uid (groups false, through
 * getpwnam_r) or a gid (groups true, through getgrnam_r).
 */
static int lookup_id(const char *text, bool groups, uint32_t *out, char *why, size_t why_len)
{
	const char *what = groups ? "group" : "user";
	size_t size = LOOKUP_BUFFER_MIN;
	bool found = false;
	uint32_t id = 0;
	int rc = parse_number(text, &id, why, why_len);

	if (rc < 0)
		return rc;
	if (rc == 1) {
		*out = id;
		return 0;
	}
	if (!text[0])
		return text_why(why, why_len, -EINVAL, "a %s name or %s", what,
				groups ? "gid" : "uid");
	for (;;) {
		char *buf = malloc(size);

		if (!buf)
			return text_why(why, why_len, -EINVAL, "out of memory");
		if (groups) {
			struct group gr, *gp = NULL;

			rc = getgrnam_r(text, &gr, buf, size, &gp);
			found = rc == 0 && gp;
			if (found)
				*out = gr.gr_gid;
		} else {
			struct passwd pw, *pp = NULL;

			rc = getpwnam_r(text, &pw, buf, size, &pp);
			found = rc == 0 && pp;
			if (found)
				*out = pw.pw_uid;
		}
		free(buf);
		if (rc == ERANGE && size < LOOKUP_BUFFER_MAX) {
			size *= 2;
			continue;
		}
		break;
	}
	if (rc)
		return text_why(why, why_len, -EINVAL, "could not look up %s '%s': %s", what, text,
				strerror(rc));
	if (!found)
		return text_why(why, why_len, -EINVAL, "no %s named '%s'", what, text);
	return 0;
}

int ids_user_id(const char *text, uid_t *out, char *why, size_t why_len)
{
	uint32_t id = 0;
	int rc = lookup_id(text, false, &id, why, why_len);

	if (rc == 0)
		*out = (uid_t)id;
	return rc;
}

int ids_group_id(const char *text, gid_t *out, char *why, size_t why_len)
{
	uint32_t id = 0;
	int rc = lookup_id(text, true, &id, why, why_len);

	if (rc == 0)
		*out = (gid_t)id;
	return rc;
}

/* parse_list reads "a,b,c" through one of the lookups above. */
static int parse_list(const char *text, bool groups, struct id_list *out, char *why, size_t why_len)
{
	char buf[1024], *save = NULL, *tok;

	memset(out, 0, sizeof(*out));
	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		return text_why(why, why_len, -EINVAL, "too long");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t id;
		int rc;

		/* Spaces around a name are fine in a file: "alice, bob". */
		while (*tok == ' ')
			tok++;
		for (size_t n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		rc = lookup_id(tok, groups, &id, why, why_len);
		if (rc)
			return rc;
		if (listed(out, id))
			continue;
		if (out->n == IDS_MAX)
			return text_why(why, why_len, -EINVAL, "at most %u %s", IDS_MAX,
					groups ? "groups" : "users");
		out->ids[out->n++] = id;
	}
	if (out->n == 0)
		return text_why(why, why_len, -EINVAL, "a comma-separated list of %s",
				groups ? "group names or gids" : "user names or uids");
	return 0;
}

int ids_parse_users(const char *text, struct id_list *out, char *why, size_t why_len)
{
	return parse_list(text, false, out, why, why_len);
}

int ids_parse_groups(const char *text, struct id_list *out, char *why, size_t why_len)
{
	return parse_list(text, true, out, why, why_len);
}

const char *ids_user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *found = NULL;
	char tmp[4096];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &found) == 0 && found)
		snprintf(buf, len, "%s", pw.pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

const char *ids_group_name(gid_t gid, char *buf, size_t len)
{
	struct group gr, *found = NULL;
	char tmp[4096];

	if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &found) == 0 && found)
		snprintf(buf, len, "%s", gr.gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)gid);
	return buf;
}
