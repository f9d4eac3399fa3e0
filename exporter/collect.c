/* SPDX-License-Identifier: MIT */
/* collect.c: one scrape: ask the daemon through librocmmem, write the exposition text. */
#include "collect.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rocmmem.h"

/* The clients of one name, summed: names stay when processes come and go. */
struct name_sums {
	const char *name; /* owned by the status snapshot */
	uint64_t connections, leases, leased_bytes, reserved_bytes, models, waiting;
};

/* A family of the per-name series: its name, help text and the sum it shows. */
struct family {
	const char *name;
	const char *help;
	size_t offset; /* of the uint64_t in struct name_sums */
};

static const struct family families[] = {
    {"rocmmemd_client_connections", "Connections of clients with this name.",
     offsetof(struct name_sums, connections)},
    {"rocmmemd_client_leases", "Leases held by clients with this name.",
     offsetof(struct name_sums, leases)},
    {"rocmmemd_client_leased_bytes", "Bytes leased by clients with this name.",
     offsetof(struct name_sums, leased_bytes)},
    {"rocmmemd_client_reserved_bytes", "Bytes reserved by the models of clients with this name.",
     offsetof(struct name_sums, reserved_bytes)},
    {"rocmmemd_client_models", "Models registered by clients with this name.",
     offsetof(struct name_sums, models)},
    {"rocmmemd_client_waiting", "Requests of clients with this name waiting for memory.",
     offsetof(struct name_sums, waiting)},
};

void collect_label_value(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '"')
			fputs("\\\"", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct name_sums *)a)->name, ((const struct name_sums *)b)->name);
}

/*
 * sum_by_name sums the clients of st per name, leaving out the exporter's own connection
 * (its pid). Returns the sums sorted by name (the caller frees them) and their count in *n,
 * or NULL with *n 0 when there is no client or no memory.
 */
static struct name_sums *sum_by_name(const rocmmem_status *st, size_t *n)
{
	size_t count = rocmmem_status_client_count(st), used = 0;
	struct name_sums *sums = calloc(count ? count : 1, sizeof(*sums));
	pid_t self = getpid();

	*n = 0;
	if (!sums)
		return NULL;
	for (size_t i = 0; i < count; i++) {
		const struct rocmmem_client_info *ci = rocmmem_status_client(st, i);
		const char *name = ci->name ? ci->name : "";
		struct name_sums *s = NULL;

		if (ci->pid == self)
			continue;
		for (size_t j = 0; j < used && !s; j++)
			if (strcmp(sums[j].name, name) == 0)
				s = &sums[j];
		if (!s) {
			s = &sums[used++];
			s->name = name;
		}
		s->connections++;
		s->leases += ci->leases;
		s->leased_bytes += ci->leased_bytes;
		s->reserved_bytes += ci->reserved_bytes;
		s->models += ci->models;
		s->waiting += ci->waiting;
	}
	qsort(sums, used, sizeof(*sums), by_name);
	*n = used;
	return sums;
}

/* write_clients writes the per-name families; a family with no client is still declared. */
static void write_clients(FILE *out, const struct name_sums *sums, size_t n)
{
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", families[f].name, families[f].help,
			families[f].name);
		for (size_t i = 0; i < n; i++) {
			const uint64_t *v =
			    (const uint64_t *)((const char *)&sums[i] + families[f].offset);

			fprintf(out, "%s{name=\"", families[f].name);
			collect_label_value(out, sums[i].name);
			fprintf(out, "\"} %llu\n", (unsigned long long)*v);
		}
	}
}

/* write_up writes rocmmemd_up; when down, a comment says why (for a human reading the page). */
static void write_up(FILE *out, int err)
{
	if (err) {
		fputs("# rocmmemd could not be asked: ", out);
		for (const char *s = rocmmem_last_error(); *s; s++)
			fputc(*s == '\n' ? ' ' : *s, out);
		fputc('\n', out);
	}
	fputs("# HELP rocmmemd_up Whether the exporter could read the daemon's metrics.\n"
	      "# TYPE rocmmemd_up gauge\n",
	      out);
	fprintf(out, "rocmmemd_up %d\n", err ? 0 : 1);
}

int collect_scrape(const struct collect_config *cfg, FILE *out)
{
	struct rocmmem_connect_options opts = {
	    .struct_size = sizeof(opts),
	    .socket_path = cfg->socket_path,
	    .name = "rocmmem-exporter",
	    .timeout_ms = cfg->timeout_ms,
	    .flags = ROCMMEM_CONNECT_NO_RECONNECT,
	};
	rocmmem_client *client = NULL;
	rocmmem_status *st = NULL;
	struct name_sums *sums = NULL;
	char *text = NULL;
	size_t n = 0;
	int err;

	err = rocmmem_connect_with(&opts, &client);
	if (!err)
		err = rocmmem_metrics(client, &text);
	if (!err)
		err = rocmmem_status_get(client, &st);
	write_up(out, err);
	if (!err) {
		fputs(text, out);
		sums = sum_by_name(st, &n);
		write_clients(out, sums, n);
	}
	free(sums);
	rocmmem_status_free(st);
	free(text);
	rocmmem_disconnect(client);
	return ferror(out) ? -ENOMEM : 0;
}
