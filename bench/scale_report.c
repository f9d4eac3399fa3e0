/* SPDX-License-Identifier: MIT */
/* scale_report.c: bench_scale's JSON: each level's medians over rounds and its ratios. */
#include <stdio.h>
#include <string.h>

#include "scale.h"

static double median_of(const struct level *lv, unsigned rounds,
			double (*get)(const struct sample *))
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < rounds; r++)
		if (lv->rounds[r].run)
			v[n++] = get(&lv->rounds[r]);
	return bench_median(v, n);
}

static double get_p50(const struct sample *s)
{
	return (double)bench_hist_pct(&s->hist, 50) / 1000.0;
}

static double get_p99(const struct sample *s)
{
	return (double)bench_hist_pct(&s->hist, 99) / 1000.0;
}

static double get_own_p50(const struct sample *s)
{
	return (double)bench_hist_pct(&s->own, 50) / 1000.0;
}

static double get_own_p99(const struct sample *s)
{
	return (double)bench_hist_pct(&s->own, 99) / 1000.0;
}

static double get_cpu(const struct sample *s)
{
	return s->cpu_us_per_op;
}

static double get_status(const struct sample *s)
{
	return s->status_ms;
}

static double get_fill(const struct sample *s)
{
	return s->fill_us_per_lease;
}

/*
 * ratio_vs_first returns the median over rounds of (this level's figure / the first level's
 * figure in the same round): each round compares states measured minutes apart at most.
 */
static double ratio_vs_first(const struct series *s, unsigned li,
			     double (*get)(const struct sample *))
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < s->rounds; r++) {
		const struct sample *a = &s->levels[0].rounds[r], *b = &s->levels[li].rounds[r];

		if (a->run && b->run && get(a) > 0)
			v[n++] = get(b) / get(a);
	}
	return bench_median(v, n);
}

enum growth { GROW_RSS, GROW_PSS, GROW_HEAP, GROW_SLAB };

/* per_item: the median over rounds of a figure's growth from level 0 to level li, per item. */
static double per_item(const struct series *s, unsigned li, enum growth g)
{
	double v[MAX_ROUNDS];
	size_t n = 0;

	for (unsigned r = 0; r < s->rounds; r++) {
		const struct sample *a = &s->levels[0].rounds[r], *b = &s->levels[li].rounds[r];
		double grown;

		if (!a->run || !b->run || s->levels[li].leases <= s->levels[0].leases)
			continue;
		switch (g) {
		case GROW_RSS:
			grown = ((double)b->rss_kib - (double)a->rss_kib) * 1024.0;
			break;
		case GROW_PSS:
			grown = ((double)b->pss_kib - (double)a->pss_kib) * 1024.0;
			break;
		case GROW_HEAP:
			if (!a->heap_bytes || !b->heap_bytes)
				continue;
			grown = (double)b->heap_bytes - (double)a->heap_bytes;
			break;
		default:
			grown = ((double)b->slab_kib - (double)a->slab_kib) * 1024.0;
			break;
		}
		v[n++] = grown / (double)(s->levels[li].leases - s->levels[0].leases);
	}
	return bench_median(v, n);
}

/* write_level writes one level: merged histograms, medians over rounds, ratios, growth. */
static void write_level(struct bench_json *j, const struct series *s, unsigned li, const char *unit)
{
	const struct level *lv = &s->levels[li];
	const struct sample *first = NULL;
	struct bench_hist all, own;

	bench_json_object(j, NULL);
	bench_json_int(j, unit, lv->leases);
	if (lv->not_run) {
		bench_json_str(j, "not_run", lv->why);
		bench_json_end_object(j);
		return;
	}
	bench_hist_init(&all);
	bench_hist_init(&own);
	for (unsigned r = 0; r < s->rounds; r++) {
		if (!lv->rounds[r].run)
			continue;
		bench_hist_merge(&all, &lv->rounds[r].hist);
		bench_hist_merge(&own, &lv->rounds[r].own);
		if (!first)
			first = &lv->rounds[r];
	}
	if (!first) {
		bench_json_str(j, "not_run", "no round reached this level");
		bench_json_end_object(j);
		return;
	}
	bench_json_hist(j, "op", &all);
	bench_json_hist(j, "op_fullest_connection", &own);
	bench_json_num(j, "op_p50_us_median_of_rounds", median_of(lv, s->rounds, get_p50));
	bench_json_num(j, "op_p99_us_median_of_rounds", median_of(lv, s->rounds, get_p99));
	bench_json_num(j, "fullest_p50_us_median_of_rounds", median_of(lv, s->rounds, get_own_p50));
	bench_json_num(j, "daemon_cpu_us_per_op", median_of(lv, s->rounds, get_cpu));
	bench_json_num(j, "status_ms", median_of(lv, s->rounds, get_status));
	bench_json_int(j, "status_leases_listed", (int64_t)first->status_leases);
	bench_json_num(j, "fill_us_per_lease", median_of(lv, s->rounds, get_fill));
	bench_json_num(j, "ratio_p50_vs_first", ratio_vs_first(s, li, get_p50));
	bench_json_num(j, "ratio_p99_vs_first", ratio_vs_first(s, li, get_p99));
	bench_json_num(j, "ratio_fullest_p50_vs_first", ratio_vs_first(s, li, get_own_p50));
	bench_json_num(j, "ratio_fullest_p99_vs_first", ratio_vs_first(s, li, get_own_p99));
	bench_json_num(j, "ratio_cpu_vs_first", ratio_vs_first(s, li, get_cpu));
	bench_json_int(j, "rss_kib", (int64_t)first->rss_kib);
	bench_json_int(j, "pss_kib", (int64_t)first->pss_kib);
	bench_json_int(j, "heap_bytes", (int64_t)first->heap_bytes);
	bench_json_int(j, "daemon_fds", first->fds);
	if (first->fds_open_info)
		bench_json_int(j, "daemon_fds_open_status", (int64_t)first->fds_open_info);
	if (li > 0) {
		bench_json_num(j, "rss_bytes_per_item", per_item(s, li, GROW_RSS));
		bench_json_num(j, "pss_bytes_per_item", per_item(s, li, GROW_PSS));
		if (first->heap_bytes)
			bench_json_num(j, "heap_bytes_per_item", per_item(s, li, GROW_HEAP));
		bench_json_num(j, "kernel_slab_bytes_per_item_noisy", per_item(s, li, GROW_SLAB));
	}
	bench_json_end_object(j);
}

static void write_series(struct bench_json *j, const struct series *s)
{
	const char *unit = strcmp(s->name, "clients") == 0 ? "clients" : "leases";

	bench_json_object(j, NULL);
	bench_json_str(j, "name", s->name);
	bench_json_str(j, "backend", s->backend);
	bench_json_str(j, "budget", s->budget ? s->budget : "");
	bench_json_str(j, "unit", unit);
	bench_json_int(j, "features", s->features);
	bench_json_bool(j, "fd_per_lease", s->fd_per_lease);
	bench_json_int(j, "leases_per_filler_connection", s->per_connection);
	if (s->not_run) {
		bench_json_str(j, "not_run", s->why);
		bench_json_end_object(j);
		return;
	}
	bench_json_int(j, "rounds", s->rounds);
	if (s->hangup_leases) {
		double v[MAX_ROUNDS];

		memcpy(v, s->hangup_ms, sizeof(v));
		bench_json_num(j, "hangup_op_ms", bench_median(v, s->rounds));
		bench_json_int(j, "hangup_leases", s->hangup_leases);
	}
	bench_json_array(j, "levels");
	for (unsigned i = 0; i < s->nlevels; i++)
		write_level(j, s, i, unit);
	bench_json_end_array(j);
	bench_json_end_object(j);
}

int write_report(const struct bench_args *a, struct series *const *all, unsigned n, uint64_t nofile,
		 uint64_t total, bool fixture)
{
	struct bench_json j;
	FILE *out = bench_open_output(a);

	if (!out)
		return -1;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "scale");
	bench_json_str(&j, "operation", "lease acquire + release (2 MiB, any fd closed, unmapped)");
	bench_json_int(&j, "rlimit_nofile", (int64_t)nofile);
	bench_json_int(&j, "host_device_total_bytes", (int64_t)total);
	bench_json_bool(&j, "host_total_from_meminfo_fixture", fixture);
	bench_json_array(&j, "series");
	for (unsigned i = 0; i < n; i++)
		write_series(&j, all[i]);
	bench_json_end_array(&j);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	return 0;
}
