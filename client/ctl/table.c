/* SPDX-License-Identifier: MIT */
/* table.c: rocmmemctl's tables through libsmartcols: column selection (-o), CSV, colour. */
#include <errno.h>
#include <libsmartcols/libsmartcols.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errors.h"
#include "table.h"

#define TABLE_MAX_COLUMNS 32

struct ctl_table {
	const struct ctl *ctl;
	const struct ctl_table_spec *spec;
	struct libscols_table *tb;
	struct libscols_line *row;
	int shown[TABLE_MAX_COLUMNS]; /* per spec column: its position in tb, or -1 */
};

/* find_column returns the spec's column called name (any case), or -1. */
static int find_column(const struct ctl_table_spec *spec, const char *name, size_t len)
{
	for (size_t i = 0; i < spec->ncolumns; i++)
		if (strlen(spec->columns[i].name) == len &&
		    strncasecmp(spec->columns[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

/* longest_word is the narrowest a wrapped cell can be: its longest word (in bytes). */
static size_t longest_word(const struct libscols_column *cl, const char *data, void *userdata)
{
	size_t best = 0, len;

	(void)cl;
	(void)userdata;
	while (data && *data) {
		len = strcspn(data, " ");
		if (len > best)
			best = len;
		data += len;
		data += strspn(data, " ");
	}
	return best;
}

/*
 * next_line ends a wrapped cell's line at the last blank that fits the column, in place, and
 * returns the rest (NULL: the rest fits). libsmartcols' own wrapping cuts words in two.
 */
static char *next_line(const struct libscols_column *cl, char *data, void *userdata)
{
	size_t width = scols_column_get_width(cl), len = data ? strlen(data) : 0;
	char *cut = NULL;

	(void)userdata;
	if (len <= width)
		return NULL;
	for (size_t i = 0; i <= width; i++)
		if (data[i] == ' ')
			cut = data + i;
	if (!cut)
		cut = strchr(data + width, ' '); /* a word wider than the column: whole */
	if (!cut)
		return NULL;
	*cut = '\0';
	return cut + 1 + strspn(cut + 1, " ");
}

/* add_column puts spec column i into the table, once. Returns 0 or -ENOMEM. */
static int add_column(struct ctl_table *t, size_t i)
{
	const struct ctl_column *c = &t->spec->columns[i];
	struct libscols_column *cl;
	int flags = 0;

	if (t->shown[i] >= 0)
		return 0;
	if (c->flags & CTL_COL_RIGHT)
		flags |= SCOLS_FL_RIGHT;
	/* On a terminal, long text wraps at blanks within its width; piped, it stays whole. */
	if ((c->flags & CTL_COL_WRAP) && t->ctl->tty)
		flags |= SCOLS_FL_WRAP;
	cl = scols_table_new_column(t->tb, c->name, 0, flags);
	if (!cl)
		return -ENOMEM;
	if (flags & SCOLS_FL_WRAP)
		scols_column_set_wrapfunc(cl, longest_word, next_line, NULL);
	if (t->ctl->color)
		scols_cell_set_color(scols_column_get_header(cl), "bold");
	t->shown[i] = (int)scols_table_get_ncols(t->tb) - 1;
	return 0;
}

/* select_columns adds what -o names (after the default ones for "+LIST"), else the default. */
static int select_columns(struct ctl_table *t, const char *list)
{
	const char *p = list;

	if (!list || list[0] == '+') {
		for (size_t i = 0; i < t->spec->ncolumns; i++)
			if (!(t->spec->columns[i].flags & CTL_COL_EXTRA) && add_column(t, i) < 0)
				return -ENOMEM;
		if (!list)
			return 0;
		p++;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		int i = find_column(t->spec, p, len);

		if (i < 0) {
			char names[512] = "";

			for (size_t k = 0; k < t->spec->ncolumns; k++)
				snprintf(names + strlen(names), sizeof(names) - strlen(names),
					 "%s%s", k ? ", " : "", t->spec->columns[k].name);
			return ctl_usage(t->ctl,
					 "unknown column '%.*s' of the %s table (columns: %s)",
					 (int)len, p, t->spec->name, names);
		}
		if (add_column(t, (size_t)i) < 0)
			return -ENOMEM;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int ctl_table_new(const struct ctl *ctl, const struct ctl_table_spec *spec, struct ctl_table **out)
{
	struct ctl_table *t = calloc(1, sizeof(*t));
	int rc;

	*out = NULL;
	if (!t || spec->ncolumns > TABLE_MAX_COLUMNS || !(t->tb = scols_new_table())) {
		free(t);
		return ctl_error(ctl, CTL_EXIT_USAGE, -ENOMEM, "out of memory");
	}
	t->ctl = ctl;
	t->spec = spec;
	for (size_t i = 0; i < TABLE_MAX_COLUMNS; i++)
		t->shown[i] = -1;
	scols_table_enable_colors(t->tb, ctl->color);
	scols_table_enable_noheadings(t->tb, ctl->out.noheadings);
	rc = select_columns(t, ctl->out.columns);
	if (rc != 0) {
		scols_unref_table(t->tb);
		free(t);
		return rc < 0 ? ctl_error(ctl, CTL_EXIT_USAGE, rc, "out of memory") : rc;
	}
	*out = t;
	return CTL_EXIT_OK;
}

void ctl_table_row(struct ctl_table *t)
{
	t->row = scols_table_new_line(t->tb, NULL);
}

void ctl_table_set(struct ctl_table *t, size_t column, const char *fmt, ...)
{
	char *data = NULL;
	va_list ap;

	if (!t->row || column >= t->spec->ncolumns || t->shown[column] < 0)
		return;
	va_start(ap, fmt);
	if (vasprintf(&data, fmt, ap) < 0)
		data = NULL;
	va_end(ap);
	/* The line owns data from here on. */
	if (data && scols_line_refer_data(t->row, (size_t)t->shown[column], data) < 0)
		free(data);
}

/* put_csv_field writes one field as RFC 4180 has it: quoted when it must be. */
static void put_csv_field(const char *s, bool first)
{
	if (!first)
		fputc(',', stdout);
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n") && s[0] != ' ' && (!s[0] || s[strlen(s) - 1] != ' ')) {
		fputs(s, stdout);
		return;
	}
	fputc('"', stdout);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', stdout);
		fputc(*s, stdout);
	}
	fputc('"', stdout);
}

/* print_csv writes the table's cells: libsmartcols' raw output encodes blanks ("\x20"). */
static void print_csv(struct ctl_table *t)
{
	size_t ncols = scols_table_get_ncols(t->tb);
	struct libscols_iter *it = scols_new_iter(SCOLS_ITER_FORWARD);
	struct libscols_line *ln;

	if (!t->ctl->out.noheadings) {
		for (size_t i = 0; i < ncols; i++) {
			struct libscols_column *cl = scols_table_get_column(t->tb, i);

			put_csv_field(scols_cell_get_data(scols_column_get_header(cl)), i == 0);
		}
		fputc('\n', stdout);
	}
	while (it && scols_table_next_line(t->tb, it, &ln) == 0) {
		for (size_t i = 0; i < ncols; i++)
			put_csv_field(scols_cell_get_data(scols_line_get_cell(ln, i)), i == 0);
		fputc('\n', stdout);
	}
	scols_free_iter(it);
}

int ctl_table_print(struct ctl_table *t)
{
	int rc = 0;

	if (t->ctl->out.csv) {
		print_csv(t);
	} else if (scols_table_get_nlines(t->tb) == 0) {
		/* libsmartcols prints nothing for no rows: the headings say what is empty. */
		for (size_t i = 0; !t->ctl->out.noheadings && i < scols_table_get_ncols(t->tb); i++)
			printf("%s%s", i ? " " : "",
			       scols_cell_get_data(
				   scols_column_get_header(scols_table_get_column(t->tb, i))));
		if (!t->ctl->out.noheadings)
			putchar('\n');
	} else if (scols_print_table(t->tb) < 0) {
		rc = -EIO;
	}
	scols_unref_table(t->tb);
	free(t);
	return rc;
}

int ctl_output_option(struct ctl *ctl, int c)
{
	switch (c) {
	case 'o':
		ctl->out.columns = ctl->optarg;
		return 1;
	case CTL_OUTPUT_CSV:
		ctl->out.csv = true;
		return 1;
	case 'n':
		ctl->out.noheadings = true;
		return 1;
	case 'b':
		ctl->out.bytes = true;
		return 1;
	default:
		return 0;
	}
}

void ctl_table_columns_help(const struct ctl_table_spec *spec, FILE *f)
{
	fprintf(f, "\nColumns of %s (-o; * marks the default ones):\n", spec->name);
	for (size_t i = 0; i < spec->ncolumns; i++) {
		const struct ctl_column *c = &spec->columns[i];

		fprintf(f, "  %-12s%c %s\n", c->name, c->flags & CTL_COL_EXTRA ? ' ' : '*',
			c->help);
	}
}
