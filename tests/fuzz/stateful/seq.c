/* SPDX-License-Identifier: MIT */
/* seq.c: the fuzzer's operation kinds and fields, and a sequence's text form (print, parse). */
#include "stateful.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define BIT(f) (1u << (f))

static const struct {
	const char *name;
	uint32_t fields;
	bool sends;
} kinds[OP_KINDS] = {
    [OP_CONNECT] = {"connect", 0, false},
    [OP_HELLO] = {"hello", BIT(F_VERSION) | BIT(F_NAME), true},
    [OP_ACQUIRE] = {"acquire",
		    BIT(F_DEVICE) | BIT(F_SIZE) | BIT(F_TIMEOUT) | BIT(F_NAME) | BIT(F_MODEL),
		    true},
    [OP_RELEASE] = {"release", BIT(F_LEASE), true},
    [OP_STATUS] = {"status", 0, true},
    [OP_REGISTER] = {"register",
		     BIT(F_DEVICE) | BIT(F_NAME) | BIT(F_CLASS) | BIT(F_SIZE) | BIT(F_PRIORITY) |
			 BIT(F_PINNED) | BIT(F_RESERVATION),
		     true},
    [OP_MODEL_ACQUIRE] = {"model_acquire", BIT(F_MODEL) | BIT(F_TIMEOUT), true},
    [OP_MODEL_RELEASE] = {"model_release", BIT(F_MODEL), true},
    [OP_RESIZE] = {"resize", BIT(F_MODEL) | BIT(F_RESERVATION) | BIT(F_TIMEOUT), true},
    [OP_UNREGISTER] = {"unregister", BIT(F_MODEL), true},
    [OP_EVICT_ACK] = {"evict_ack", BIT(F_MODEL), true},
    [OP_SUBSCRIBE] = {"subscribe", BIT(F_INTERVAL) | BIT(F_SAMPLES) | BIT(F_EVENTS), true},
    [OP_UNSUBSCRIBE] = {"unsubscribe", 0, true},
    [OP_TRIM] = {"trim", BIT(F_DEVICE), true},
    [OP_METRICS] = {"metrics", 0, true},
    [OP_ADMIN_EVICT] = {"admin_evict", BIT(F_MODEL), true},
    [OP_ADMIN_PIN] = {"admin_pin", BIT(F_MODEL) | BIT(F_PINNED), true},
    [OP_ADMIN_BUDGET] = {"admin_budget", BIT(F_DEVICE) | BIT(F_BUDGET), true},
    [OP_ADMIN_REVOKE] = {"admin_revoke", BIT(F_LEASE), true},
    [OP_ADMIN_DISCONNECT] = {"admin_disconnect", BIT(F_PID), true},
    [OP_ADMIN_LOG_LEVEL] = {"admin_log_level", BIT(F_NAME), true},
    [OP_LEASE_REDECLARE] = {"lease_redeclare",
			    BIT(F_LEASE) | BIT(F_DEVICE) | BIT(F_SIZE) | BIT(F_HANDLE) |
				BIT(F_FD_COUNT) | BIT(F_NCHUNKS) | BIT(F_CHUNK) | BIT(F_MODEL),
			    true},
    [OP_MODEL_REDECLARE] = {"model_redeclare",
			    BIT(F_MODEL) | BIT(F_DEVICE) | BIT(F_NAME) | BIT(F_CLASS) |
				BIT(F_SIZE) | BIT(F_PRIORITY) | BIT(F_PINNED) | BIT(F_RESERVATION) |
				BIT(F_USE_COUNT),
			    true},
    [OP_REDECLARE_DONE] = {"redeclare_done", 0, true},
    [OP_EMPTY] = {"empty", 0, true},
    [OP_CLOSE] = {"close", 0, false},
    [OP_PAUSE] = {"pause", BIT(F_MS), false},
    [OP_CHECK] = {"check", 0, false},
    [OP_RESTART] = {"restart", 0, false},
};

static const struct {
	const char *name;
	enum field_type type;
} fields[F_FIELDS] = {
    [F_DEVICE] = {"device", T_U32},	  [F_SIZE] = {"size", T_U64},
    [F_TIMEOUT] = {"timeout", T_I64},	  [F_LEASE] = {"lease", T_LEASE},
    [F_MODEL] = {"model", T_MODEL},	  [F_NAME] = {"name", T_STR},
    [F_CLASS] = {"class", T_I32},	  [F_PRIORITY] = {"priority", T_I32},
    [F_PINNED] = {"pinned", T_BOOL},	  [F_RESERVATION] = {"reservation", T_U64},
    [F_INTERVAL] = {"interval", T_U32},	  [F_SAMPLES] = {"samples", T_BOOL},
    [F_EVENTS] = {"events", T_BOOL},	  [F_VERSION] = {"version", T_U32},
    [F_HANDLE] = {"handle", T_I32},	  [F_FD_COUNT] = {"fd_count", T_U32},
    [F_NCHUNKS] = {"nchunks", T_U32},	  [F_CHUNK] = {"chunk", T_U64},
    [F_USE_COUNT] = {"use_count", T_U32}, [F_PID] = {"pid", T_I32},
    [F_BUDGET] = {"budget", T_U64},	  [F_MS] = {"ms", T_U32},
};

static const char *const fd_names[FD_KINDS] = {
    [FD_PIPE] = "pipe",	  [FD_DIR] = "dir",   [FD_SOCKET] = "socket",	[FD_MEMFD] = "memfd",
    [FD_LEASE] = "lease", [FD_NULL] = "null", [FD_EVENTFD] = "eventfd",
};

static const char *const ref_names[] = {
    [REF_LIT] = "",	 [REF_ANY] = "any",   [REF_OWN] = "own",   [REF_OTHER] = "other",
    [REF_LAST] = "last", [REF_NEXT] = "next", [REF_GONE] = "gone", [REF_EVENT] = "event",
};
#define REF_KINDS (sizeof(ref_names) / sizeof(ref_names[0]))

const char *seq_kind_name(unsigned kind)
{
	return kind < OP_KINDS ? kinds[kind].name : "?";
}

const char *seq_field_name(unsigned field)
{
	return field < F_FIELDS ? fields[field].name : "?";
}

enum field_type seq_field_type(unsigned field)
{
	return fields[field].type;
}

const char *seq_fd_name(unsigned kind)
{
	return kind < FD_KINDS ? fd_names[kind] : "?";
}

bool seq_kind_takes(unsigned kind, unsigned field)
{
	return kind < OP_KINDS && (kinds[kind].fields & BIT(field));
}

bool seq_kind_sends(unsigned kind)
{
	return kind < OP_KINDS && kinds[kind].sends;
}

struct op *seq_push(struct seq *s)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct op *ops = realloc(s->ops, cap * sizeof(*ops));

		if (!ops) {
			fprintf(stderr, "stateful_fuzz: out of memory\n");
			exit(2);
		}
		s->ops = ops;
		s->cap = cap;
	}
	memset(&s->ops[s->n], 0, sizeof(s->ops[0]));
	return &s->ops[s->n++];
}

void seq_append(struct seq *s, const struct op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*seq_push(s) = ops[i];
}

void seq_free(struct seq *s)
{
	free(s->ops);
	memset(s, 0, sizeof(*s));
}

/* print_str writes a string so that it reads back as one token: odd bytes as %XX. */
static void print_str(FILE *out, const char *str)
{
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		if (*p > 0x20 && *p < 0x7f && !strchr("%=#,()", *p))
			fputc(*p, out);
		else
			fprintf(out, "%%%02X", *p);
	}
}

static void print_value(FILE *out, const struct op *op, unsigned field)
{
	const struct val *v = &op->f[field];

	switch (fields[field].type) {
	case T_STR:
		print_str(out, op->str);
		return;
	case T_BOOL:
		fputs(v->v ? "true" : "false", out);
		return;
	case T_I32:
	case T_I64:
		fprintf(out, "%" PRId64, (int64_t)v->v);
		return;
	case T_LEASE:
	case T_MODEL: {
		int slot = fields[field].type == T_LEASE ? 0 : 1;
		unsigned flag = slot == 0 ? OPF_RESOLVED_LEASE : OPF_RESOLVED_MODEL;

		if (v->ref == REF_LIT) {
			fprintf(out, "%" PRIu64, v->v);
			return;
		}
		fprintf(out, "@%s", ref_names[v->ref]);
		if (v->ref != REF_LAST && v->ref != REF_EVENT)
			fprintf(out, "%" PRIu64, v->v);
		if (op->flags & flag)
			fprintf(out, "(=%" PRIu64 ")", op->resolved[slot]);
		return;
	}
	default:
		fprintf(out, "%" PRIu64, v->v);
	}
}

void seq_print_op(FILE *out, const struct op *op)
{
	fprintf(out, "c%u %s", op->conn, seq_kind_name(op->kind));
	if (op->flags & OPF_NOWAIT)
		fputs(" nowait", out);
	if (op->flags & OPF_NOID)
		fputs(" noid", out);
	if (op->flags & OPF_ASGRANTED)
		fputs(" asgranted", out);
	if (op->rid.set)
		fprintf(out, " rid=%" PRIu64, op->rid.v);
	for (unsigned f = 0; f < F_FIELDS; f++) {
		if (!op->f[f].set)
			continue;
		fprintf(out, " %s=", fields[f].name);
		print_value(out, op, f);
	}
	for (unsigned g = 0; g < op->nfdgroups; g++) {
		fputs(g == 0 ? " fds=" : ",", out);
		if (op->fds[g].count != 1)
			fprintf(out, "%u*", op->fds[g].count);
		fputs(seq_fd_name(op->fds[g].kind), out);
	}
	fputc('\n', out);
}

void seq_print(FILE *out, const struct seq *s, const char *indent)
{
	for (size_t i = 0; i < s->n; i++) {
		fputs(indent, out);
		seq_print_op(out, &s->ops[i]);
	}
}

/* Parsing ------------------------------------------------------------------------------- */

static int bad(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int parse_u64(const char *text, bool is_signed, uint64_t *out)
{
	char *end;

	errno = 0;
	if (is_signed)
		*out = (uint64_t)strtoll(text, &end, 0);
	else if (text[0] == '-')
		return -EINVAL;
	else
		*out = strtoull(text, &end, 0);
	return errno || end == text || (*end && *end != '(') ? -EINVAL : 0;
}

static int parse_str(const char *text, char *out)
{
	size_t n = 0;

	for (const char *p = text; *p; p++) {
		unsigned byte;

		if (n + 1 >= OP_STR_MAX)
			return -EINVAL;
		if (*p == '%') {
			if (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2]) ||
			    sscanf(p + 1, "%2x", &byte) != 1 || byte == 0)
				return -EINVAL;
			out[n++] = (char)byte;
			p += 2;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return 0;
}

static int parse_ref(const char *text, struct val *v)
{
	for (unsigned r = 1; r < REF_KINDS; r++) {
		size_t n = strlen(ref_names[r]);

		if (strncmp(text + 1, ref_names[r], n) != 0)
			continue;
		v->ref = (uint8_t)r;
		if (r == REF_LAST || r == REF_EVENT)
			return text[1 + n] == '\0' || text[1 + n] == '(' ? 0 : -EINVAL;
		return parse_u64(text + 1 + n, false, &v->v);
	}
	return -EINVAL;
}

static int parse_fds(struct op *op, char *text)
{
	for (char *save = NULL, *g = strtok_r(text, ",", &save); g;
	     g = strtok_r(NULL, ",", &save)) {
		char *star = strchr(g, '*');
		unsigned long count = 1;
		unsigned k;

		if (op->nfdgroups == OP_FD_GROUPS)
			return -EINVAL;
		if (star) {
			*star = '\0';
			count = strtoul(g, NULL, 10);
			g = star + 1;
		}
		for (k = 0; k < FD_KINDS && strcmp(g, fd_names[k]) != 0; k++)
			;
		if (k == FD_KINDS || count == 0 || count > 255)
			return -EINVAL;
		op->fds[op->nfdgroups].kind = (uint8_t)k;
		op->fds[op->nfdgroups].count = (uint8_t)count;
		op->nfdgroups++;
	}
	return 0;
}

/* parse_token reads one "name=value" or flag token into op. */
static int parse_token(struct op *op, char *tok)
{
	char *eq = strchr(tok, '=');
	unsigned f;

	if (!eq) {
		if (strcmp(tok, "nowait") == 0)
			op->flags |= OPF_NOWAIT;
		else if (strcmp(tok, "noid") == 0)
			op->flags |= OPF_NOID;
		else if (strcmp(tok, "asgranted") == 0)
			op->flags |= OPF_ASGRANTED;
		else
			return -EINVAL;
		return 0;
	}
	*eq++ = '\0';
	if (strcmp(tok, "rid") == 0) {
		op->rid.set = 1;
		return parse_u64(eq, false, &op->rid.v);
	}
	if (strcmp(tok, "fds") == 0)
		return parse_fds(op, eq);
	for (f = 0; f < F_FIELDS && strcmp(tok, fields[f].name) != 0; f++)
		;
	if (f == F_FIELDS)
		return -EINVAL;
	op->f[f].set = 1;
	switch (fields[f].type) {
	case T_STR:
		return parse_str(eq, op->str);
	case T_BOOL:
		op->f[f].v = strcmp(eq, "true") == 0;
		return strcmp(eq, "true") == 0 || strcmp(eq, "false") == 0 ? 0 : -EINVAL;
	case T_LEASE:
	case T_MODEL:
		if (eq[0] == '@')
			return parse_ref(eq, &op->f[f]);
		return parse_u64(eq, false, &op->f[f].v);
	case T_I32:
	case T_I64:
		return parse_u64(eq, true, &op->f[f].v);
	default:
		return parse_u64(eq, false, &op->f[f].v);
	}
}

static int parse_line(struct seq *s, char *line, char *why, size_t len, unsigned lineno)
{
	char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
	struct op *op;
	unsigned k;

	if (!tok)
		return 0;
	if (tok[0] != 'c' || !isdigit((unsigned char)tok[1]))
		return bad(why, len, "line %u: '%s' is not a connection (c0, c1, ...)", lineno,
			   tok);
	op = seq_push(s);
	op->conn = (uint8_t)strtoul(tok + 1, NULL, 10);
	tok = strtok_r(NULL, " \t\r\n", &save);
	for (k = 0; tok && k < OP_KINDS && strcmp(tok, kinds[k].name) != 0; k++)
		;
	if (!tok || k == OP_KINDS)
		return bad(why, len, "line %u: unknown operation '%s'", lineno, tok ? tok : "");
	op->kind = (uint8_t)k;
	while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
		char copy[256];

		snprintf(copy, sizeof(copy), "%s", tok);
		if (parse_token(op, tok) < 0)
			return bad(why, len, "line %u: cannot read '%s'", lineno, copy);
	}
	return 0;
}

int seq_parse(FILE *in, struct seq *s, char *finds, size_t len, char *why, size_t why_len)
{
	char line[1024];
	unsigned lineno = 0;

	if (finds && len)
		finds[0] = '\0';
	while (fgets(line, sizeof(line), in)) {
		char *hash = strchr(line, '#');

		lineno++;
		if (hash) {
			char *word = strstr(hash, "finds:");

			if (word && finds) {
				word += strlen("finds:");
				word[strcspn(word, "\r\n")] = '\0';
				strncat(finds, word, len - strlen(finds) - 1);
				strncat(finds, " ", len - strlen(finds) - 1);
			}
			*hash = '\0';
		}
		if (parse_line(s, line, why, why_len, lineno) < 0)
			return -EINVAL;
	}
	return 0;
}
