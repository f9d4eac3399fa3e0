/* SPDX-License-Identifier: MIT */
/*
 * main.c: stateful_fuzz, sequences of valid-but-hostile requests over several connections to
 * a live rocmmemd, with the daemon's books checked after each (docs/security.md, "Stateful
 * fuzzing"). Committed regression sequences run first, each on a fresh daemon.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shrink.h"
#include "stateful.h"

struct options {
	struct target t;
	struct gen_opts gen;
	uint64_t seed, sequences, check_text;
	long seconds, shrink_seconds;
	const char *regress, *out;
	const char *replay[16];
	unsigned nreplay;
	char avoid[128];
	bool keep_going, verbose, seeded;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: stateful_fuzz [OPTION]...\n"
	    "Drives a live rocmmemd with sequences of valid-but-hostile requests over several\n"
	    "connections and checks after each that it is alive, answers, keeps exact books,\n"
	    "holds no leaked fd and logged no sanitizer report.\n\n"
	    "  --daemon PATH        the rocmmemd to test (default: the build's)\n"
	    "  --seed N             replay the run of this seed (default: a new one, printed)\n"
	    "  --seconds S          fuzz for S seconds (default 20; 0: no time limit)\n"
	    "  --sequences N        fuzz at most N sequences (default 0: no limit)\n"
	    "  --regress DIR        first replay every DIR/*.seq, each on a fresh daemon\n"
	    "  --replay FILE        replay FILE (a printed reproducer), verbosely\n"
	    "  --avoid WHAT         never generate WHAT (id-wrap: model ids near 2^64, bug F1)\n"
	    "                       and skip regression files that say \"# finds: WHAT\"\n"
	    "  --no-restarts        never SIGKILL and restart the daemon within a sequence\n"
	    "  --keep-going         after a failure, start a fresh daemon and go on\n"
	    "  --shrink-seconds S   time to minimise a failure (default 120)\n"
	    "  --out DIR            write each reproducer there as sfuzz-SEED-INDEX.seq\n"
	    "  --verbose            print every operation as it runs\n"
	    "  --check-text N       check that N sequences read back from their text as they\n"
	    "                       were written (no daemon), then exit\n"
	    "Exit status: 0 nothing found, 1 a failure (reproducer printed), 2 bad usage.\n");
}

static int parse(int argc, char **argv, struct options *o)
{
	static const struct option longs[] = {{"daemon", required_argument, NULL, 'd'},
					      {"seed", required_argument, NULL, 's'},
					      {"seconds", required_argument, NULL, 't'},
					      {"sequences", required_argument, NULL, 'n'},
					      {"regress", required_argument, NULL, 'r'},
					      {"replay", required_argument, NULL, 'p'},
					      {"avoid", required_argument, NULL, 'a'},
					      {"no-restarts", no_argument, NULL, 'R'},
					      {"keep-going", no_argument, NULL, 'k'},
					      {"shrink-seconds", required_argument, NULL, 'S'},
					      {"out", required_argument, NULL, 'o'},
					      {"verbose", no_argument, NULL, 'v'},
					      {"check-text", required_argument, NULL, 'c'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	int ch;

	while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o->t.bin = optarg;
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 0);
			o->seeded = true;
			break;
		case 't':
			o->seconds = strtol(optarg, NULL, 0);
			break;
		case 'n':
			o->sequences = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			o->regress = optarg;
			break;
		case 'p':
			if (o->nreplay < 16)
				o->replay[o->nreplay++] = optarg;
			break;
		case 'a':
			if (strcmp(optarg, "id-wrap") != 0) {
				fprintf(stderr, "stateful_fuzz: nothing to avoid called '%s'\n",
					optarg);
				return -1;
			}
			o->gen.avoid_id_wrap = true;
			snprintf(o->avoid + strlen(o->avoid), sizeof(o->avoid) - strlen(o->avoid),
				 " %s ", optarg);
			break;
		case 'R':
			o->gen.restarts = false;
			break;
		case 'k':
			o->keep_going = true;
			break;
		case 'S':
			o->shrink_seconds = strtol(optarg, NULL, 0);
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'c':
			o->check_text = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

/* fresh_target replaces the daemon with a new one in a new directory. */
static int fresh_target(struct target *t, struct run *r)
{
	char why[256];

	if (r)
		run_reset(r);
	target_kill(t);
	target_remove(t);
	if (target_start(t, why, sizeof(why)) < 0) {
		fprintf(stderr, "stateful_fuzz: could not start %s: %s\n", t->bin, why);
		return -1;
	}
	return 0;
}

/* report prints a failure as found, with what the daemon logged last. */
static void report(struct options *o, struct run *r, enum fail_class cls, const char *what)
{
	printf("stateful_fuzz: FAILED (%s) %s:\n%s", fail_class_name(cls), what, run_failure(r));
	target_log_tail(&o->t, stdout, 12);
	fflush(stdout);
}

/* save writes a reproducer to --out (when given) and prints it. */
static void save(struct options *o, const struct seq *s, uint64_t index, const char *header)
{
	char path[4096];
	FILE *f = NULL;

	printf("stateful_fuzz: reproducer (%zu operations; replay with --replay FILE):\n", s->n);
	printf("%s", header);
	seq_print(stdout, s, "");
	if (o->out) {
		snprintf(path, sizeof(path), "%s/sfuzz-%" PRIu64 "-%" PRIu64 ".seq", o->out,
			 o->seed, index);
		f = fopen(path, "w");
	}
	if (f) {
		fputs(header, f);
		seq_print(f, s, "");
		fclose(f);
		printf("stateful_fuzz: written to %s\n", path);
	}
	fflush(stdout);
}

static bool avoided(const struct options *o, const char *finds)
{
	char word[64];

	for (const char *p = finds; sscanf(p, "%63s", word) == 1;
	     p = strstr(p, word) + strlen(word)) {
		char key[72];

		snprintf(key, sizeof(key), " %s ", word);
		if (strstr(o->avoid, key))
			return true;
	}
	return false;
}

/* print_header prints a sequence file's opening comment: what it is the regression test of. */
static void print_header(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	printf("stateful_fuzz: %s says what it tests:\n", path);
	while (f && fgets(line, sizeof(line), f) && line[0] == '#')
		printf("  %s", line);
	if (f)
		fclose(f);
}

/* replay_file runs one sequence file on a fresh daemon; 1 when it failed. */
static int replay_file(struct options *o, struct run *r, const char *path, bool regress)
{
	char finds[256], why[256];
	struct seq s = {0};
	enum fail_class cls;
	FILE *f = fopen(path, "r");
	int rc;

	if (!f || seq_parse(f, &s, finds, sizeof(finds), why, sizeof(why)) < 0) {
		printf("stateful_fuzz: cannot read %s: %s\n", path, f ? why : strerror(errno));
		if (f)
			fclose(f);
		seq_free(&s);
		return 1;
	}
	fclose(f);
	if (regress && avoided(o, finds)) {
		printf("stateful_fuzz: skipped %s (finds:%s)\n", path, finds);
		seq_free(&s);
		return 0;
	}
	if (fresh_target(&o->t, r) < 0) {
		seq_free(&s);
		return 1;
	}
	cls = run_seq(r, &s);
	rc = cls != FAIL_NONE;
	if (rc) {
		report(o, r, cls, path);
		print_header(path);
	} else {
		printf("stateful_fuzz: passed %s (%zu operations)\n", path, s.n);
	}
	if (!regress) {
		printf("stateful_fuzz: as run:\n");
		seq_print(stdout, &s, "  ");
	}
	seq_free(&s);
	return rc;
}

static int regress_dir(struct options *o, struct run *r)
{
	struct dirent **names;
	int n = scandir(o->regress, &names, NULL, alphasort), failed = 0;

	if (n < 0) {
		printf("stateful_fuzz: cannot read %s: %s\n", o->regress, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		size_t len = strlen(names[i]->d_name);
		char path[4096];

		if (len > 4 && strcmp(names[i]->d_name + len - 4, ".seq") == 0) {
			snprintf(path, sizeof(path), "%s/%s", o->regress, names[i]->d_name);
			failed += replay_file(o, r, path, true);
		}
		free(names[i]);
	}
	free(names);
	return failed;
}

/* found shrinks the failure of sequence index and prints its reproducer. */
static void found(struct options *o, struct run *r, enum fail_class cls, uint64_t index)
{
	struct shrink_ctx x = {.t = &o->t,
			       .run = r,
			       .gen = &o->gen,
			       .seed = o->seed,
			       .index = index,
			       .cls = cls,
			       .deadline_ms = target_now_ms() + 1000 * o->shrink_seconds};
	char header[2048], first[512];
	struct seq s = {0};
	long start = target_now_ms();
	bool ok;

	snprintf(first, sizeof(first), "%s", run_failure(r));
	first[strcspn(first, "\n")] = '\0';
	printf("stateful_fuzz: minimising (up to %ld s) ...\n", o->shrink_seconds);
	fflush(stdout);
	ok = shrink_run(&x, &s);
	snprintf(header, sizeof(header),
		 "# stateful_fuzz --seed %" PRIu64 ": sequence %" PRIu64 " failed (%s): %s\n"
		 "# %s in %u fresh daemons, %.1f s\n",
		 o->seed, index, fail_class_name(cls), first,
		 ok ? "minimised" : "did NOT fail again alone or after its predecessors; as run",
		 x.tries, (double)(target_now_ms() - start) / 1000.0);
	if (!ok)
		gen_sequence(o->seed, index, &o->gen, &s);
	else if (run_failure(r)[0])
		printf("stateful_fuzz: the minimised sequence fails with: %s", run_failure(r));
	else
		printf("stateful_fuzz: the minimised sequence did not fail on its last run: the "
		       "failure depends on timing\n");
	save(o, &s, index, header);
	seq_free(&s);
}

/* fuzz generates and runs sequences until the time or count is up; returns failures. */
static int fuzz(struct options *o, struct run *r)
{
	long start = target_now_ms(), end = start + 1000 * o->seconds;
	int failures = 0;
	struct seq s = {0};

	if (fresh_target(&o->t, r) < 0)
		return 1;
	for (uint64_t i = 0;
	     (!o->sequences || i < o->sequences) && (!o->seconds || target_now_ms() < end); i++) {
		enum fail_class cls;
		char what[256];

		gen_sequence(o->seed, i, &o->gen, &s);
		if (o->verbose)
			printf("sequence %" PRIu64 " (%zu operations):\n", i, s.n);
		cls = run_seq(r, &s);
		if (cls == FAIL_NONE)
			continue;
		failures++;
		snprintf(what, sizeof(what),
			 "at sequence %" PRIu64 " of seed %" PRIu64 ", after %.1f s", i, o->seed,
			 (double)(target_now_ms() - start) / 1000.0);
		report(o, r, cls, what);
		printf("stateful_fuzz: this run's sequence %" PRIu64 ":\n", i);
		seq_print(stdout, &s, "  ");
		found(o, r, cls, i);
		if (!o->keep_going || fresh_target(&o->t, r) < 0)
			break;
	}
	seq_free(&s);
	return failures;
}

/* check_text prints sequences, reads them back and prints them again: the same text, or 1. */
static int check_text(const struct options *o)
{
	struct seq a = {0}, b = {0};
	int rc = 0;

	for (uint64_t i = 0; i < o->check_text && rc == 0; i++) {
		char *one = NULL, *two = NULL, why[256];
		size_t n1 = 0, n2 = 0;
		FILE *f = open_memstream(&one, &n1);

		gen_sequence(o->seed, i, &o->gen, &a);
		seq_print(f, &a, "");
		fclose(f);
		f = fmemopen(one, n1, "r");
		b.n = 0;
		rc = seq_parse(f, &b, NULL, 0, why, sizeof(why)) < 0 || b.n != a.n;
		fclose(f);
		f = open_memstream(&two, &n2);
		seq_print(f, &b, "");
		fclose(f);
		if (rc || n1 != n2 || memcmp(one, two, n1) != 0) {
			printf("stateful_fuzz: sequence %" PRIu64
			       " does not read back (%s):\n%s---\n%s",
			       i, rc ? why : "differs", one, two);
			rc = 1;
		}
		free(one);
		free(two);
	}
	seq_free(&a);
	seq_free(&b);
	if (rc == 0)
		printf("stateful_fuzz: %" PRIu64 " sequences read back as written\n",
		       o->check_text);
	return rc;
}

int main(int argc, char **argv)
{
	struct options o = {.t = {.bin = ROCMMEMD_BIN, .scale = 1},
			    .gen = {.restarts = true},
			    .seconds = 20,
			    .shrink_seconds = 120};
	const char *scale = getenv("ROCMMEM_SFUZZ_SCALE");
	struct run *r;
	char why[512];
	int failures = 0;

	if (parse(argc, argv, &o) < 0)
		return 2;
#ifdef ROCMMEM_SANITIZED
	o.t.scale = 4; /* the daemon runs several times slower under ASan */
#endif
	if (scale)
		o.t.scale = strtol(scale, NULL, 0) > 0 ? strtol(scale, NULL, 0) : 1;
	if (!o.seeded) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		o.seed = gen_mix((uint64_t)ts.tv_sec ^ ((uint64_t)ts.tv_nsec << 20) ^
				 (uint64_t)getpid()) >>
			 16;
	}
	printf("stateful_fuzz: seed %" PRIu64 " (--seed %" PRIu64 " replays this run)%s%s\n",
	       o.seed, o.seed, o.gen.avoid_id_wrap ? ", avoiding id-wrap" : "",
	       o.gen.restarts ? "" : ", no restarts");
	fflush(stdout);
	if (o.check_text)
		return check_text(&o);
	r = run_create(&o.t, o.verbose);
	if (!r)
		return 2;
	if (o.regress)
		failures += regress_dir(&o, r);
	for (unsigned i = 0; i < o.nreplay; i++)
		failures += replay_file(&o, r, o.replay[i], false);
	if (o.seconds > 0 || o.sequences > 0)
		failures += fuzz(&o, r);
	run_stats(r, stdout);
	run_destroy(r);
	/* A clean stop, and nothing reported on the way out (leaks, in a sanitized build). */
	if (failures == 0 && (target_stop(&o.t, why, sizeof(why)) < 0 ||
			      target_log_report(&o.t, why, sizeof(why)))) {
		printf("stateful_fuzz: FAILED (%s): %s\n", fail_class_name(FAIL_STOP), why);
		target_log_tail(&o.t, stdout, 12);
		failures++;
	}
	target_kill(&o.t);
	if (failures == 0)
		target_remove(&o.t);
	else
		printf("stateful_fuzz: %d failure(s); the last daemon's log: %s\n", failures,
		       o.t.log);
	return failures ? 1 : 0;
}
