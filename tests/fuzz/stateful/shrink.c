/* SPDX-License-Identifier: MIT */
/* shrink.c: from a failing run to the shortest sequence that fails alike on a fresh daemon. */
#include "shrink.h"

#include <string.h>

/* fresh replaces the daemon with a new one in a new directory (no state file). */
static bool fresh(struct shrink_ctx *x)
{
	char why[256];

	run_reset(x->run);
	target_kill(x->t);
	target_remove(x->t);
	if (target_start(x->t, why, sizeof(why)) < 0) {
		fprintf(stderr, "stateful_fuzz: could not start rocmmemd: %s\n", why);
		return false;
	}
	return true;
}

/* fails runs s on a fresh daemon and says whether it fails with the class looked for. */
static bool fails(struct shrink_ctx *x, struct seq *s)
{
	enum fail_class got;

	if (!fresh(x))
		return false;
	x->tries++;
	got = run_seq(x->run, s);
	return fail_alike(got, x->cls);
}

/* close_all ends one sequence within a concatenation as run_seq would: every slot closed. */
static void close_all(struct seq *s)
{
	for (unsigned c = 0; c < SF_CONNS; c++) {
		struct op *op = seq_push(s);

		op->kind = OP_CLOSE;
		op->conn = (uint8_t)c;
	}
}

/* window concatenates the run's sequences first..last. */
static void window(struct shrink_ctx *x, uint64_t first, uint64_t last, struct seq *out)
{
	struct seq one = {0};

	out->n = 0;
	for (uint64_t i = first; i <= last; i++) {
		gen_sequence(x->seed, i, x->gen, &one);
		seq_append(out, one.ops, one.n);
		if (i < last)
			close_all(out);
	}
	seq_free(&one);
}

static bool out_of_time(const struct shrink_ctx *x)
{
	return target_now_ms() > x->deadline_ms;
}

/* without copies s less the ops [from, to) into out. */
static void without(const struct seq *s, size_t from, size_t to, struct seq *out)
{
	out->n = 0;
	seq_append(out, s->ops, from);
	seq_append(out, s->ops + to, s->n - to);
}

/* ddmin removes chunks of ops, halving their size, as long as the failure stays. */
static void ddmin(struct shrink_ctx *x, struct seq *s)
{
	struct seq trial = {0};
	size_t chunks = 2;

	while (s->n >= 2 && !out_of_time(x)) {
		size_t size = (s->n + chunks - 1) / chunks;
		bool removed = false;

		for (size_t from = 0; from < s->n && !out_of_time(x); from += size) {
			size_t to = from + size < s->n ? from + size : s->n;

			without(s, from, to, &trial);
			if (trial.n > 0 && fails(x, &trial)) {
				s->n = 0;
				seq_append(s, trial.ops, trial.n);
				removed = true;
				break;
			}
		}
		if (removed) {
			chunks = chunks > 2 ? chunks - 1 : 2;
		} else if (size == 1) {
			break;
		} else {
			chunks = chunks * 2 < s->n ? chunks * 2 : s->n;
		}
	}
	seq_free(&trial);
}

/*
 * While shrinking, a daemon that does not answer in 1.5 s counts as hung: every trial that
 * hangs costs that long, and the daemon answers a healthy request in well under a millisecond.
 */
#define SHRINK_DEADLINE_MS 1500

bool shrink_run(struct shrink_ctx *x, struct seq *out)
{
	uint64_t width = 1;
	bool found = false;

	x->tries = 0;
	run_set_deadline(x->run, SHRINK_DEADLINE_MS);
	/* The failing sequence alone, then with more and more of the ones before it. */
	for (;;) {
		uint64_t first = x->index + 1 > width ? x->index + 1 - width : 0;

		window(x, first, x->index, out);
		if (fails(x, out)) {
			found = true;
			break;
		}
		if (first == 0 || out_of_time(x))
			break;
		width *= 2;
	}
	if (found) {
		ddmin(x, out);
		/* Once more, so that the printed ids are the ones of this very run. */
		fails(x, out);
	}
	run_set_deadline(x->run, 0);
	return found;
}
