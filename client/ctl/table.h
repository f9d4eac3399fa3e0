/* SPDX-License-Identifier: MIT */
/* table.h: tables over libsmartcols: columns chosen with -o, CSV, headings. */
#ifndef ROCMMEMCTL_TABLE_H
#define ROCMMEMCTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#include "ctl.h"

/* Column flags. */
#define CTL_COL_RIGHT 0x1 /* numbers: aligned right */
#define CTL_COL_WRAP 0x2  /* long text: wrapped on a terminal, whole when piped */
#define CTL_COL_EXTRA 0x4 /* only when -o names it */

struct ctl_column {
	const char *name; /* the heading, and what -o takes */
	unsigned flags;
	const char *help;
};

/* A table that `status TABLE` (and -o, --csv) can print on its own. */
struct ctl_table_spec {
	const char *name; /* "clients" */
	const struct ctl_column *columns;
	size_t ncolumns;
};

struct ctl_table;

/*
 * ctl_table_new starts a table of spec with the columns ctl->out.columns selects (NULL: the
 * default ones). Returns 0, or CTL_EXIT_USAGE after a usage error naming the bad column.
 */
int ctl_table_new(const struct ctl *ctl, const struct ctl_table_spec *spec, struct ctl_table **out);

/* ctl_table_row adds a row; ctl_table_set fills its cell of column (an index into the spec's
 * columns; a column not shown is ignored). */
void ctl_table_row(struct ctl_table *t);
void ctl_table_set(struct ctl_table *t, size_t column, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ctl_table_print prints the table (a terminal table, or CSV) and frees it. Returns 0 or -EIO. */
int ctl_table_print(struct ctl_table *t);

/* ctl_table_columns_help lists the columns of spec for --help. */
void ctl_table_columns_help(const struct ctl_table_spec *spec, FILE *f);

/* The options of commands that print tables (status, models), and their parser: returns 1
 * when c was one of them. */
#define CTL_OUTPUT_CSV (CTL_LONG_ONLY + 1)
#define CTL_OUTPUT_OPTIONS                                           \
	{"output", 'o', "COLUMNS",                                   \
	 "the columns, comma-separated (+LIST: the default\n"        \
	 "ones and LIST); they are listed below"},                   \
	    {"csv", CTL_OUTPUT_CSV, NULL, "print the table as CSV"}, \
	    {"noheadings", 'n', NULL, "leave the heading line out"}, \
	{                                                            \
		"bytes", 'b', NULL, "sizes as byte counts"           \
	}
int ctl_output_option(struct ctl *ctl, int c);

#endif
