/* SPDX-License-Identifier: MIT */
/* gen.c: a sequence of valid-but-hostile operations from a seed and the sequence's index. */
#include "stateful.h"

#include <stdint.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)

/* The generator's own view of a slot, so that most requests follow a hello. */
struct gen {
	uint64_t state;
	const struct gen_opts *opts;
	bool open[SF_CONNS], greeted[SF_CONNS];
};

uint64_t gen_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(struct gen *g)
{
	g->state += 0x9e3779b97f4a7c15ull;
	return gen_mix(g->state);
}

static uint64_t below(struct gen *g, uint64_t n)
{
	return n ? rnd(g) % n : 0;
}

/* chance says yes percent times in a hundred. */
static bool chance(struct gen *g, unsigned percent)
{
	return below(g, 100) < percent;
}

#define PICK(g, table) ((table)[below((g), sizeof(table) / sizeof((table)[0]))])

/* Values at the edges of every check: 0, 1, 2^63, 2^64-1 and their neighbours. */
static const uint64_t edge_u64[] = {0,
				    1,
				    2,
				    (uint64_t)1 << 32,
				    ((uint64_t)1 << 63) - 1,
				    (uint64_t)1 << 63,
				    UINT64_MAX - 2,
				    UINT64_MAX - 1,
				    UINT64_MAX};
static const uint64_t edge_u32[] = {0, 1, 2, 0x7fffffff, 0x80000000, UINT32_MAX};
static const int64_t edge_i64[] = {INT64_MIN, -2, -1, 0, 1, INT32_MAX, INT64_MAX};
static const int32_t edge_i32[] = {INT32_MIN, -1, 0, 5, 6, 127, INT32_MAX};

/* Sizes that matter with a 32 MiB budget and 2 MiB granules. */
static const uint64_t sizes[] = {1,	   4096,	 2 * MIB, 2 * MIB,  2 * MIB + 1,
				 4 * MIB,  6 * MIB,	 8 * MIB, 16 * MIB, 30 * MIB,
				 32 * MIB, 32 * MIB + 1, 64 * MIB};

static const uint64_t model_sizes[] = {0, 2 * MIB, 8 * MIB, 12 * MIB, 16 * MIB, 20 * MIB};

/* Names and tags: clean, empty, at and over 64 bytes, a control character, bad UTF-8. */
static const char *const names[] = {
    "a",
    "b",
    "c",
    "vae",
    "unet",
    "clip",
    "m\xc3\xa9lange",
    "",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
    "tab\there",
    "bad\xc3\x28utf8",
    "%s%n"};
static const char *const levels[] = {"debug", "info", "warn", "error", "", "loud"};

static uint64_t gen_size(struct gen *g)
{
	return chance(g, 12) ? PICK(g, edge_u64) : PICK(g, sizes);
}

static uint64_t gen_timeout(struct gen *g)
{
	static const int64_t normal[] = {0, 0, 0, 1, 20, 150, -1};

	return (uint64_t)(chance(g, 10) ? PICK(g, edge_i64) : PICK(g, normal));
}

static void gen_device(struct gen *g, struct val *v)
{
	v->v = chance(g, 10) ? PICK(g, edge_u32) : 0;
}

/* gen_id makes a lease or model id: mostly one the run has seen, sometimes an edge value. */
static void gen_id(struct gen *g, struct val *v, unsigned edge_percent)
{
	static const uint8_t refs[] = {REF_OWN,	  REF_OWN,   REF_OWN,  REF_OWN,	 REF_OWN,
				       REF_OTHER, REF_OTHER, REF_ANY,  REF_LAST, REF_NEXT,
				       REF_GONE,  REF_GONE,  REF_EVENT};

	if (chance(g, edge_percent)) {
		v->ref = REF_LIT;
		v->v = PICK(g, edge_u64);
		/* F1: a model id near 2^64 made the id counter wrap. */
		if (g->opts->avoid_id_wrap && v->v > UINT64_MAX - ((uint64_t)1 << 32))
			v->v -= (uint64_t)1 << 63;
		return;
	}
	v->ref = PICK(g, refs);
	v->v = v->ref == REF_NEXT ? 1 + below(g, 3) : below(g, 4);
}

/* gen_scalar fills a field that is a plain number or flag. */
static void gen_scalar(struct gen *g, unsigned f, struct val *v)
{
	switch (f) {
	case F_CLASS:
		v->v = (uint64_t)(int64_t)(chance(g, 8) ? PICK(g, edge_i32) : (int32_t)below(g, 5));
		break;
	case F_PRIORITY:
		v->v = (uint64_t)(int64_t)(chance(g, 15) ? PICK(g, edge_i32)
							 : (int32_t)below(g, 3) - 1);
		break;
	case F_PINNED:
	case F_SAMPLES:
	case F_EVENTS:
		v->v = chance(g, f == F_PINNED ? 15 : 60);
		break;
	case F_INTERVAL: {
		static const uint32_t intervals[] = {9, 10, 50, 1000, 60000, 60001, 0, UINT32_MAX};

		v->v = PICK(g, intervals);
		break;
	}
	case F_VERSION:
		v->v = chance(g, 90) ? 1 : PICK(g, edge_u32);
		break;
	case F_HANDLE:
		v->v =
		    (uint64_t)(int64_t)(chance(g, 80) ? 1 + (int)below(g, 2) : PICK(g, edge_i32));
		break;
	case F_FD_COUNT:
	case F_NCHUNKS:
	case F_USE_COUNT:
		v->v = chance(g, 15) ? PICK(g, edge_u32) : below(g, 3);
		break;
	case F_CHUNK:
		v->v = chance(g, 20) ? PICK(g, edge_u64) : 2 * MIB;
		break;
	case F_PID: {
		static const int32_t pids[] = {0, 1, -1, INT32_MAX};

		v->v = (uint64_t)(int64_t)PICK(g, pids);
		break;
	}
	case F_MS:
		v->v = PICK(g, ((const uint32_t[]){0, 5, 30, 120, 300}));
		break;
	default:
		v->set = 0;
	}
}

/* gen_field fills one field of op with a value of its kind, mostly valid. */
static void gen_field(struct gen *g, struct op *op, unsigned f)
{
	struct val *v;

	if (f >= F_FIELDS)
		return;
	v = &op->f[f];
	v->set = 1;
	switch (f) {
	case F_DEVICE:
		gen_device(g, v);
		break;
	case F_SIZE:
	case F_RESERVATION:
	case F_BUDGET:
		/* Models are large: two or three fill the budget, so that they evict others. */
		v->v = (op->kind == OP_REGISTER || op->kind == OP_RESIZE) && chance(g, 60)
			   ? PICK(g, model_sizes)
			   : gen_size(g);
		if (f == F_RESERVATION && op->kind == OP_REGISTER && !chance(g, 10))
			v->set = 0; /* register takes none */
		break;
	case F_TIMEOUT:
		v->v = gen_timeout(g);
		break;
	case F_LEASE:
		gen_id(g, v, 8);
		break;
	case F_MODEL:
		if (op->kind == OP_ACQUIRE && chance(g, 60)) {
			v->set = 0; /* most leases count towards no model */
		} else if (op->kind == OP_EVICT_ACK && chance(g, 50)) {
			v->ref = REF_EVENT; /* the model the daemon asked to unload */
			v->v = 0;
		} else {
			gen_id(g, v, op->kind == OP_MODEL_REDECLARE ? 35 : 8);
		}
		break;
	case F_NAME: {
		const char *s = op->kind == OP_ADMIN_LOG_LEVEL ? PICK(g, levels)
				: chance(g, 85)		       ? names[below(g, 6)]
							       : PICK(g, names);

		snprintf(op->str, sizeof(op->str), "%s", s);
		if (op->kind == OP_ACQUIRE && chance(g, 50))
			v->set = 0;
		break;
	}
	default:
		gen_scalar(g, f, v);
	}
	/* Any field may be missing on the wire. */
	if (chance(g, 6))
		v->set = 0;
}

/* gen_fds attaches descriptors a request does not take (or the wrong ones to one that does). */
static void gen_fds(struct gen *g, struct op *op)
{
	unsigned groups = 1 + (unsigned)below(g, chance(g, 20) ? OP_FD_GROUPS : 2);

	for (unsigned i = 0; i < groups; i++) {
		op->fds[i].kind = (uint8_t)below(g, FD_KINDS);
		op->fds[i].count = (uint8_t)(chance(g, 10) ? 1 + below(g, 80) : 1 + below(g, 2));
	}
	op->nfdgroups = (uint8_t)groups;
}

/* The weights of the kinds a request slot picks from. */
static const uint8_t weights[OP_KINDS] = {
    [OP_CONNECT] = 1,	      [OP_HELLO] = 1,
    [OP_ACQUIRE] = 14,	      [OP_RELEASE] = 9,
    [OP_STATUS] = 3,	      [OP_REGISTER] = 10,
    [OP_MODEL_ACQUIRE] = 10,  [OP_MODEL_RELEASE] = 8,
    [OP_RESIZE] = 6,	      [OP_UNREGISTER] = 5,
    [OP_EVICT_ACK] = 6,	      [OP_SUBSCRIBE] = 2,
    [OP_UNSUBSCRIBE] = 1,     [OP_TRIM] = 2,
    [OP_METRICS] = 2,	      [OP_ADMIN_EVICT] = 2,
    [OP_ADMIN_PIN] = 2,	      [OP_ADMIN_BUDGET] = 1,
    [OP_ADMIN_REVOKE] = 1,    [OP_ADMIN_DISCONNECT] = 1,
    [OP_ADMIN_LOG_LEVEL] = 1, [OP_LEASE_REDECLARE] = 4,
    [OP_MODEL_REDECLARE] = 5, [OP_REDECLARE_DONE] = 2,
    [OP_EMPTY] = 1,	      [OP_CLOSE] = 3,
    [OP_PAUSE] = 2,	      [OP_CHECK] = 2,
    [OP_RESTART] = 1,
};

static unsigned pick_kind(struct gen *g)
{
	unsigned total = 0, k;
	uint64_t r;

	for (k = 0; k < OP_KINDS; k++)
		total += weights[k];
	r = below(g, total);
	for (k = 0; k < OP_KINDS; k++) {
		if (r < weights[k])
			break;
		r -= weights[k];
	}
	if (k == OP_RESTART && !g->opts->restarts)
		k = OP_CHECK;
	return k;
}

/* push_hello opens slot c (if needed) and greets the daemon as a client should. */
static void push_hello(struct gen *g, struct seq *s, unsigned c)
{
	struct op *op;

	if (!g->open[c]) {
		op = seq_push(s);
		op->kind = OP_CONNECT;
		op->conn = (uint8_t)c;
		g->open[c] = true;
	}
	op = seq_push(s);
	op->kind = OP_HELLO;
	op->conn = (uint8_t)c;
	op->f[F_VERSION].set = 1;
	op->f[F_VERSION].v = 1;
	op->f[F_NAME].set = 1;
	snprintf(op->str, sizeof(op->str), "fuzz-%u", c);
	g->greeted[c] = true;
}

/* gen_request fills a request's fields and the hostile twists to it. */
static void gen_request(struct gen *g, struct op *op)
{
	for (unsigned f = 0; f < F_FIELDS; f++)
		if (seq_kind_takes(op->kind, f))
			gen_field(g, op, f);
	if (op->kind == OP_HELLO && chance(g, 70))
		snprintf(op->str, sizeof(op->str), "fuzz-%u", op->conn);
	if ((op->kind == OP_LEASE_REDECLARE || op->kind == OP_MODEL_REDECLARE) && chance(g, 50))
		op->flags |= OPF_ASGRANTED;
	else if (chance(g, op->kind == OP_LEASE_REDECLARE ? 60 : 2))
		gen_fds(g, op);
	/* Mostly as many fds as the re-declaration says it carries. */
	if (op->kind == OP_LEASE_REDECLARE && op->f[F_FD_COUNT].set && chance(g, 75)) {
		unsigned n = 0;

		for (unsigned i = 0; i < op->nfdgroups; i++)
			n += op->fds[i].count;
		op->f[F_FD_COUNT].v = n < OP_FDS_MAX ? n : OP_FDS_MAX;
	}
	if (chance(g, 12))
		op->flags |= OPF_NOWAIT;
	if (chance(g, 2))
		op->flags |= OPF_NOID;
	else if (chance(g, 3)) {
		op->rid.set = 1;
		op->rid.v = PICK(g, edge_u64);
	}
}

/* gen_op adds the next operation on slot c, with the hello it needs most of the time. */
static void gen_op(struct gen *g, struct seq *s, unsigned c)
{
	unsigned kind = pick_kind(g);
	struct op *op;

	if (seq_kind_sends(kind) && kind != OP_HELLO && !g->greeted[c] && chance(g, 90))
		push_hello(g, s, c);
	op = seq_push(s);
	op->kind = (uint8_t)kind;
	op->conn = (uint8_t)c;
	if (seq_kind_sends(kind)) {
		gen_request(g, op);
		g->open[c] = true;
		/* A second hello, anything before hello, no id, or fds where none belong: the
		 * daemon hangs up. */
		if ((kind == OP_HELLO && g->greeted[c]) || (kind != OP_HELLO && !g->greeted[c]) ||
		    (op->flags & OPF_NOID) || (op->rid.set && op->rid.v == 0) ||
		    (op->nfdgroups && kind != OP_LEASE_REDECLARE))
			g->open[c] = g->greeted[c] = false;
		else if (kind == OP_HELLO)
			g->greeted[c] = true;
	} else if (kind == OP_PAUSE) {
		gen_field(g, op, F_MS);
		op->f[F_MS].set = 1;
	} else if (kind == OP_CONNECT || kind == OP_CLOSE) {
		g->open[c] = kind == OP_CONNECT;
		g->greeted[c] = false;
	} else if (kind == OP_RESTART) {
		memset(g->open, 0, sizeof(g->open));
		memset(g->greeted, 0, sizeof(g->greeted));
	}
}

void gen_sequence(uint64_t seed, uint64_t index, const struct gen_opts *o, struct seq *out)
{
	struct gen g = {.state = gen_mix(seed ^ gen_mix(index)), .opts = o};
	unsigned conns = 1 + (unsigned)below(&g, SF_CONNS);
	size_t len = 4 + below(&g, 45);

	out->n = 0;
	for (unsigned c = 0; c < conns; c++)
		if (chance(&g, 90))
			push_hello(&g, out, c);
	while (out->n < len)
		gen_op(&g, out, (unsigned)below(&g, conns));
}
