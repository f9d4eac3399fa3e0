/* SPDX-License-Identifier: MIT */
/* status.c: `rocmmemctl status`: the daemon's state as tables or as the stable JSON contract. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "details.h"
#include "errors.h"
#include "format.h"
#include "json.h"
#include "show.h"
#include "size.h"
#include "status.h"
#include "table.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ----------------------------------------------------------------------------------------- */
/* The tables `status` shows, each also printable alone: `status TABLE [-o COLUMNS] [--csv]` */

enum {
	DEV_INDEX,
	DEV_NAME,
	DEV_TOTAL,
	DEV_BUDGET,
	DEV_LEASED,
	DEV_FREE,
	DEV_LEASES,
	DEV_WAITING,
	DEV_RESERVED,
	DEV_HEADROOM,
	DEV_EVICTABLE,
	DEV_LARGEST,
	DEV_BACKEND,
	DEV_SHARING,
	DEV_BUS,
	DEV_STATE
};
static const struct ctl_column device_columns[] = {
    [DEV_INDEX] = {"DEVICE", 0, "the device's index (--device N)"},
    [DEV_NAME] = {"NAME", 0, "its name, whole"},
    [DEV_TOTAL] = {"TOTAL", CTL_COL_RIGHT, "memory the backend reports"},
    [DEV_BUDGET] = {"BUDGET", CTL_COL_RIGHT, "the most the daemon leases at once"},
    [DEV_LEASED] = {"LEASED", CTL_COL_RIGHT, "held in leases"},
    [DEV_FREE] = {"FREE", CTL_COL_RIGHT, "budget neither leased nor reserved"},
    [DEV_LEASES] = {"LEASES", CTL_COL_RIGHT, "number of leases"},
    [DEV_WAITING] = {"WAITING", CTL_COL_RIGHT, "requests waiting in its queue"},
    [DEV_RESERVED] = {"RESERVED", CTL_COL_RIGHT | CTL_COL_EXTRA, "reserved for models"},
    [DEV_HEADROOM] = {"HEADROOM", CTL_COL_RIGHT | CTL_COL_EXTRA, "total minus budget"},
    [DEV_EVICTABLE] = {"EVICTABLE", CTL_COL_RIGHT | CTL_COL_EXTRA, "idle models' memory"},
    [DEV_LARGEST] = {"LARGEST", CTL_COL_RIGHT | CTL_COL_EXTRA, "largest lease grantable now"},
    [DEV_BACKEND] = {"BACKEND", CTL_COL_EXTRA, "host, hip or cuda"},
    [DEV_SHARING] = {"SHARING", CTL_COL_EXTRA, "how leases reach clients (memfd, vmm-fd...)"},
    [DEV_BUS] = {"BUS", CTL_COL_EXTRA, "PCI bus id"},
    [DEV_STATE] = {"STATE", CTL_COL_EXTRA, "ok, or why the device is unusable"},
};

enum {
	CL_PID,
	CL_UID,
	CL_NAME,
	CL_LEASES,
	CL_LEASED,
	CL_RESERVED,
	CL_MODELS,
	CL_CONNECTED,
	CL_GID,
	CL_WAITING,
	CL_ID,
	CL_DECLARED,
	CL_MEASURED,
	CL_UNDECLARED,
	CL_ARENA
};
static const struct ctl_column client_columns[] = {
    [CL_PID] = {"PID", 0, "the client's process"},
    [CL_UID] = {"UID", 0, "its user"},
    [CL_NAME] = {"CLIENT", 0, "the name it gave"},
    [CL_LEASES] = {"LEASES", CTL_COL_RIGHT, "leases it holds"},
    [CL_LEASED] = {"LEASED", CTL_COL_RIGHT, "bytes in those leases"},
    [CL_RESERVED] = {"RESERVED", CTL_COL_RIGHT, "bytes its models hold (reservations)"},
    [CL_MODELS] = {"MODELS", CTL_COL_RIGHT, "models it registered"},
    [CL_CONNECTED] = {"CONNECTED", CTL_COL_RIGHT, "how long ago it connected"},
    [CL_GID] = {"GID", CTL_COL_EXTRA, "its group"},
    [CL_WAITING] = {"WAITING", CTL_COL_RIGHT | CTL_COL_EXTRA, "its requests waiting for memory"},
    [CL_ID] = {"ID", CTL_COL_EXTRA, "the daemon's id of the connection"},
    [CL_DECLARED] = {"DECLARED", CTL_COL_RIGHT, "what its process declared (leased, reserved)"},
    [CL_MEASURED] = {"MEASURED", CTL_COL_RIGHT, "what its process holds on the devices"},
    [CL_UNDECLARED] = {"UNDECLARED", CTL_COL_RIGHT, "held past declared and tolerance: charged"},
    [CL_ARENA] = {"ARENA", CTL_COL_RIGHT | CTL_COL_EXTRA, "its host arena: used of its size"},
};

enum { LS_ID, LS_PID, LS_DEVICE, LS_SIZE, LS_AGE, LS_TAG, LS_MODEL };
static const struct ctl_column lease_columns[] = {
    [LS_ID] = {"LEASE", 0, "the lease's id"},
    [LS_PID] = {"PID", 0, "its owner"},
    [LS_DEVICE] = {"DEVICE", 0, "its device"},
    [LS_SIZE] = {"SIZE", CTL_COL_RIGHT, "its bytes"},
    [LS_AGE] = {"AGE", CTL_COL_RIGHT, "how long it has been held"},
    [LS_TAG] = {"TAG", 0, "the owner's tag"},
    [LS_MODEL] = {"MODEL", CTL_COL_RIGHT | CTL_COL_EXTRA, "the model it belongs to (id)"},
};

enum { Q_PID, Q_DEVICE, Q_SIZE, Q_WAITED, Q_TIMEOUT, Q_MODEL, Q_TAG };
static const struct ctl_column queue_columns[] = {
    [Q_PID] = {"PID", 0, "the waiting process"},
    [Q_DEVICE] = {"DEVICE", 0, "the device it waits on"},
    [Q_SIZE] = {"SIZE", CTL_COL_RIGHT, "what it asked for"},
    [Q_WAITED] = {"WAITED", CTL_COL_RIGHT, "how long it has waited"},
    [Q_TIMEOUT] = {"TIMEOUT", CTL_COL_RIGHT, "how long it waits at most"},
    [Q_MODEL] = {"MODEL", 0, "the model it waits to load, or -"},
    [Q_TAG] = {"TAG", 0, "its tag"},
};

enum { DN_AGO, DN_PID, DN_CLIENT, DN_DEVICE, DN_SIZE, DN_ERROR, DN_REASON };
static const struct ctl_column denial_columns[] = {
    [DN_AGO] = {"AGO", 0, "how long ago"},
    [DN_PID] = {"PID", 0, "the refused process"},
    [DN_CLIENT] = {"CLIENT", 0, "its name"},
    [DN_DEVICE] = {"DEVICE", 0, "the device"},
    [DN_SIZE] = {"SIZE", CTL_COL_RIGHT, "what it asked for"},
    [DN_ERROR] = {"ERROR", 0, "the error it got"},
    [DN_REASON] = {"REASON", CTL_COL_WRAP, "the daemon's explanation, whole"},
};

enum { AW_PID, AW_UID, AW_DEVICE, AW_LEASES, AW_LEASED, AW_MODELS, AW_RESERVED, AW_LEFT };
static const struct ctl_column awaiting_columns[] = {
    [AW_PID] = {"PID", 0, "a process of the previous daemon"},
    [AW_UID] = {"UID", 0, "its user"},
    [AW_DEVICE] = {"DEVICE", 0, "the device"},
    [AW_LEASES] = {"LEASES", CTL_COL_RIGHT, "leases it has not re-declared yet"},
    [AW_LEASED] = {"LEASED", CTL_COL_RIGHT, "their bytes, counted as leased"},
    [AW_MODELS] = {"MODELS", CTL_COL_RIGHT, "models it has not re-declared yet"},
    [AW_RESERVED] = {"RESERVED", CTL_COL_RIGHT, "their reservations, counted as reserved"},
    [AW_LEFT] = {"FORGOTTEN IN", CTL_COL_RIGHT, "time left before the daemon forgets them"},
};

static const struct ctl_table_spec devices_table = {"devices", device_columns, N(device_columns)};
static const struct ctl_table_spec clients_table = {"clients", client_columns, N(client_columns)};
static const struct ctl_table_spec leases_table = {"leases", lease_columns, N(lease_columns)};
static const struct ctl_table_spec queue_table = {"queue", queue_columns, N(queue_columns)};
static const struct ctl_table_spec denials_table = {"denials", denial_columns, N(denial_columns)};
static const struct ctl_table_spec awaiting_table = {"awaiting", awaiting_columns,
						     N(awaiting_columns)};

/* ----------------------------------------------------------------------------------------- */
/* Table rows */

static void device_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX];

	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *v = rocmmem_status_device(st, i);

		ctl_table_row(t);
		ctl_table_set(t, DEV_INDEX, "%u", v->index);
		ctl_table_set(t, DEV_NAME, "%s", v->name);
		ctl_table_set(t, DEV_TOTAL, "%s", ctl_size(ctl, v->total_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_BUDGET, "%s", ctl_size(ctl, v->budget_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_LEASED, "%s", ctl_size(ctl, v->leased_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_FREE, "%s", ctl_size(ctl, v->free_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_LEASES, "%llu", (unsigned long long)v->leases);
		ctl_table_set(t, DEV_WAITING, "%u", v->waiters);
		ctl_table_set(t, DEV_RESERVED, "%s",
			      ctl_size(ctl, v->reserved_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_HEADROOM, "%s",
			      ctl_size(ctl, v->headroom_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_EVICTABLE, "%s",
			      ctl_size(ctl, v->evictable_bytes, a, sizeof(a)));
		ctl_table_set(t, DEV_LARGEST, "%s",
			      ctl_size(ctl, v->largest_grantable, a, sizeof(a)));
		ctl_table_set(t, DEV_BACKEND, "%s", v->backend);
		ctl_table_set(t, DEV_SHARING, "%s", v->sharing);
		ctl_table_set(t, DEV_BUS, "%s", v->pci_bus_id[0] ? v->pci_bus_id : "-");
		ctl_table_set(t, DEV_STATE, "%s", v->state);
	}
}

static void client_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], when[32];

	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);

		if (ctl_is_self(v))
			continue;
		ctl_table_row(t);
		ctl_table_set(t, CL_PID, "%d", (int)v->pid);
		ctl_table_set(t, CL_UID, "%u", v->uid);
		ctl_table_set(t, CL_NAME, "%s", v->name[0] ? v->name : "-");
		ctl_table_set(t, CL_LEASES, "%u", v->leases);
		ctl_table_set(t, CL_LEASED, "%s", ctl_size(ctl, v->leased_bytes, a, sizeof(a)));
		ctl_table_set(t, CL_RESERVED, "%s", ctl_size(ctl, v->reserved_bytes, a, sizeof(a)));
		ctl_table_set(t, CL_MODELS, "%u", v->models);
		ctl_table_set(t, CL_CONNECTED, "%s",
			      ctl_duration(v->connected_s, when, sizeof(when)));
		ctl_table_set(t, CL_GID, "%u", v->gid);
		ctl_table_set(t, CL_WAITING, "%u", v->waiting);
		ctl_table_set(t, CL_ID, "%llu", (unsigned long long)v->client_id);
		ctl_table_set(t, CL_DECLARED, "%s", ctl_size(ctl, v->declared_bytes, a, sizeof(a)));
		if (v->arena_bytes)
			ctl_table_set(t, CL_ARENA, "%s of %s",
				      ctl_size(ctl, v->arena_used_bytes, a, sizeof(a)),
				      ctl_size(ctl, v->arena_bytes, b, sizeof(b)));
		else
			ctl_table_set(t, CL_ARENA, "-");
		if (!v->measurable) {
			ctl_table_set(t, CL_MEASURED, "cannot measure");
			ctl_table_set(t, CL_UNDECLARED, "-");
			continue;
		}
		ctl_table_set(t, CL_MEASURED, "%s", ctl_size(ctl, v->measured_bytes, a, sizeof(a)));
		ctl_table_set(t, CL_UNDECLARED, "%s",
			      ctl_size(ctl, v->undeclared_bytes, a, sizeof(a)));
	}
}

static void lease_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX], age[32];

	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);

		ctl_table_row(t);
		ctl_table_set(t, LS_ID, "%llu", (unsigned long long)v->id);
		ctl_table_set(t, LS_PID, "%d", (int)v->owner_pid);
		ctl_table_set(t, LS_DEVICE, "%u", v->device);
		ctl_table_set(t, LS_SIZE, "%s", ctl_size(ctl, v->bytes, a, sizeof(a)));
		ctl_table_set(t, LS_AGE, "%s", ctl_duration(v->age_ms / 1000, age, sizeof(age)));
		ctl_table_set(t, LS_TAG, "%s", v->tag);
		if (v->model_id)
			ctl_table_set(t, LS_MODEL, "%llu", (unsigned long long)v->model_id);
		else
			ctl_table_set(t, LS_MODEL, "-");
	}
}

/* waiter_model names the model a request waits for: "flux (3)", "model 3" if not listed, "-". */
static const char *waiter_model(const rocmmem_status *st, const struct rocmmem_waiter_info *w,
				char *buf, size_t len)
{
	snprintf(buf, len, "-");
	if (!w->model_id)
		return buf;
	snprintf(buf, len, "model %llu", (unsigned long long)w->model_id);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->id == w->model_id)
			snprintf(buf, len, "%s (%llu)", m->name, (unsigned long long)m->id);
	}
	return buf;
}

static void queue_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX], waited[32], timeout[32], model[160];

	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);

		if (v->timeout_ms < 0)
			snprintf(timeout, sizeof(timeout), "none");
		else
			ctl_duration((uint64_t)v->timeout_ms / 1000, timeout, sizeof(timeout));
		ctl_table_row(t);
		ctl_table_set(t, Q_PID, "%d", (int)v->owner_pid);
		ctl_table_set(t, Q_DEVICE, "%u", v->device);
		ctl_table_set(t, Q_SIZE, "%s", ctl_size(ctl, v->bytes, a, sizeof(a)));
		ctl_table_set(t, Q_WAITED, "%s",
			      ctl_duration(v->waited_ms / 1000, waited, sizeof(waited)));
		ctl_table_set(t, Q_TIMEOUT, "%s", timeout);
		ctl_table_set(t, Q_MODEL, "%s", waiter_model(st, v, model, sizeof(model)));
		ctl_table_set(t, Q_TAG, "%s", v->tag);
	}
}

static void denial_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char ago[32], a[SIZE_FORMAT_MAX], name[32];
	struct timespec ts;
	uint64_t now_ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	for (size_t i = 0; i < rocmmem_status_denial_count(st); i++) {
		const struct rocmmem_denial_info *v = rocmmem_status_denial(st, i);
		uint64_t age = now_ms > v->timestamp_ms ? now_ms - v->timestamp_ms : 0;

		ctl_table_row(t);
		ctl_table_set(t, DN_AGO, "%s", ctl_duration(age / 1000, ago, sizeof(ago)));
		ctl_table_set(t, DN_PID, "%d", (int)v->pid);
		ctl_table_set(t, DN_CLIENT, "%s", v->client_name[0] ? v->client_name : "-");
		ctl_table_set(t, DN_DEVICE, "%u", v->device);
		ctl_table_set(t, DN_SIZE, "%s", ctl_size(ctl, v->bytes, a, sizeof(a)));
		ctl_table_set(t, DN_ERROR, "%s", ctl_errno_name(v->error, name, sizeof(name)));
		ctl_table_set(t, DN_REASON, "%s", v->reason);
	}
}

/* awaiting_rows: after a restart, what the previous daemon's processes have not re-declared. */
static void awaiting_rows(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st)
{
	char a[SIZE_FORMAT_MAX];

	for (size_t i = 0; i < rocmmem_status_awaiting_count(st); i++) {
		const struct rocmmem_awaiting_info *v = rocmmem_status_awaiting(st, i);

		ctl_table_row(t);
		ctl_table_set(t, AW_PID, "%d", (int)v->pid);
		ctl_table_set(t, AW_UID, "%u", v->uid);
		ctl_table_set(t, AW_DEVICE, "%u", v->device);
		ctl_table_set(t, AW_LEASES, "%u", v->leases);
		ctl_table_set(t, AW_LEASED, "%s", ctl_size(ctl, v->lease_bytes, a, sizeof(a)));
		ctl_table_set(t, AW_MODELS, "%u", v->models);
		ctl_table_set(t, AW_RESERVED, "%s", ctl_size(ctl, v->reserved_bytes, a, sizeof(a)));
		ctl_table_set(t, AW_LEFT, "%.1f s", (double)v->grace_left_ms / 1000.0);
	}
}

/* The tables by name, for `status TABLE`, in the order the whole view shows them. */
static const struct status_table {
	const struct ctl_table_spec *spec;
	void (*rows)(const struct ctl *ctl, struct ctl_table *t, const rocmmem_status *st);
} tables[] = {
    {&devices_table, device_rows},    {&clients_table, client_rows}, {&leases_table, lease_rows},
    {&ctl_models_table, NULL},	      {&queue_table, queue_rows},    {&denials_table, denial_rows},
    {&awaiting_table, awaiting_rows},
};

/* print_one prints one table; the models table is filled by models.c. Returns an exit status. */
static int print_one(const struct ctl *ctl, const struct status_table *which,
		     const rocmmem_status *st)
{
	struct ctl_table *t;
	int rc = ctl_table_new(ctl, which->spec, &t);

	if (rc)
		return rc;
	if (which->rows)
		which->rows(ctl, t, st);
	else
		ctl_models_rows(ctl, t, st, -1);
	return ctl_table_print(t) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

/* ----------------------------------------------------------------------------------------- */
/* The whole view */

static void print_counters(const struct rocmmem_counters *k)
{
	char a[SIZE_FORMAT_MAX];

	printf("grants %llu, denials %llu, timeouts %llu, releases %llu, reclaimed %llu, "
	       "failures %llu, evictions %llu, revocations %llu, trims %llu (%s)\n\n",
	       (unsigned long long)k->grants, (unsigned long long)k->denials,
	       (unsigned long long)k->timeouts, (unsigned long long)k->releases,
	       (unsigned long long)k->reclaimed, (unsigned long long)k->failures,
	       (unsigned long long)k->evictions, (unsigned long long)k->revocations,
	       (unsigned long long)k->trims, size_format(k->bytes_trimmed, a, sizeof(a)));
}

/* limit_value writes a limit as its configuration has it: a size, seconds or a count. */
static const char *limit_value(const struct rocmmem_limit_info *v, char *a, size_t len)
{
	if (v->unlimited)
		snprintf(a, len, "unlimited");
	else if (strcmp(v->name, "queued") == 0 || strcmp(v->name, "message_size") == 0 ||
		 strcmp(v->name, "bytes_per_uid") == 0)
		size_format(v->value, a, len);
	else if (strcmp(v->name, "handshake_timeout") == 0)
		snprintf(a, len, "%.3g s", (double)v->value / 1000.0);
	else
		snprintf(a, len, "%llu", (unsigned long long)v->value);
	return a;
}

/*
 * print_limits says which limits clients ran into, and what the access policy refused: a line
 * each, only when something was.
 */
static void print_limits(const rocmmem_status *st)
{
	const struct rocmmem_access_info *acc = rocmmem_status_access(st);
	bool any = false;

	for (size_t i = 0; i < rocmmem_status_limit_count(st); i++) {
		const struct rocmmem_limit_info *v = rocmmem_status_limit(st, i);
		char a[SIZE_FORMAT_MAX];

		if (!v->hits)
			continue;
		printf("%s %s %llu time(s) (limit %s)", any ? "," : "limits hit:", v->name,
		       (unsigned long long)v->hits, limit_value(v, a, sizeof(a)));
		any = true;
	}
	if (any)
		printf("\n");
	if (acc->peers_refused || acc->requests_refused)
		printf("access refused: %llu connection(s) of users not allowed, %llu request(s) "
		       "not permitted\n",
		       (unsigned long long)acc->peers_refused,
		       (unsigned long long)acc->requests_refused);
	if (any || acc->peers_refused || acc->requests_refused)
		printf("\n");
}

static bool has_other_clients(const rocmmem_status *st)
{
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		if (!ctl_is_self(rocmmem_status_client(st, i)))
			return true;
	return false;
}

static int print_view(const struct ctl *ctl, const rocmmem_status *st)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	char line[1536], t[32];
	int rc;

	/* The first line, where it cannot be missed: GPU models would be counted in RAM. */
	if (ctl_host_fallback_line(d, ctl->color, line, sizeof(line))[0])
		printf("%s\n", line);
	printf("rocmmemd %s, pid %d, up %s, backend %s\n", d->version, (int)d->pid,
	       ctl_duration(d->uptime_s, t, sizeof(t)), d->backend);
	/* What one client can exhaust: host leases take an fd per client arena, not per lease. */
	if (d->fds_limit)
		printf("fds %llu of %llu\n", (unsigned long long)d->fds_open,
		       (unsigned long long)d->fds_limit);
	print_counters(rocmmem_status_counters(st));
	print_limits(st);
	rc = print_one(ctl, &tables[0], st);
	for (size_t i = 0; rc == 0 && i < rocmmem_status_device_count(st); i++)
		ctl_print_device_details(st, rocmmem_status_device(st, i));
	printf("\n");
	if (rc == 0 && has_other_clients(st)) {
		rc = print_one(ctl, &tables[1], st);
		if (rc == 0)
			ctl_print_arenas(ctl, st);
	} else if (rc == 0)
		printf("no clients connected\n");
	if (rc == 0 && rocmmem_status_lease_count(st) && printf("\n") > 0)
		rc = print_one(ctl, &tables[2], st);
	if (rc == 0 && rocmmem_status_awaiting_count(st) &&
	    printf("\nAWAITING RE-DECLARATION (held under the previous daemon, counted as "
		   "leased)\n") > 0)
		rc = print_one(ctl, &tables[6], st);
	if (rc == 0 && rocmmem_status_model_count(st) && printf("\n") > 0)
		rc = print_one(ctl, &tables[3], st);
	if (rc == 0 && rocmmem_status_waiter_count(st) && printf("\nQUEUE\n") > 0)
		rc = print_one(ctl, &tables[4], st);
	if (rc == 0 && rocmmem_status_denial_count(st) && printf("\nRECENT DENIALS\n") > 0)
		rc = print_one(ctl, &tables[5], st);
	return rc;
}

/* ----------------------------------------------------------------------------------------- */
/* The command */

static const struct ctl_option status_options[] = {CTL_OUTPUT_OPTIONS, {NULL, 0, NULL, NULL}};

static void status_help_extra(void)
{
	for (size_t i = 0; i < N(tables); i++)
		ctl_table_columns_help(tables[i].spec, stdout);
}

/* parse_status reads `status [TABLE] [options]` into *which (NULL: the whole view). */
static int parse_status(struct ctl *ctl, int argc, char **argv, const struct status_table **which)
{
	int c;

	*which = NULL;
	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		ctl_output_option(ctl, c);
	if (c < 0)
		return CTL_DONE;
	if (optind < argc) {
		for (size_t i = 0; i < N(tables); i++)
			if (strcmp(argv[optind], tables[i].spec->name) == 0)
				*which = &tables[i];
		if (!*which)
			return ctl_usage(ctl,
					 "unexpected argument '%s' (a table: devices, clients, "
					 "leases, models, queue, denials or awaiting)",
					 argv[optind]);
		if (optind + 1 < argc)
			return ctl_usage(ctl, "unexpected argument '%s'", argv[optind + 1]);
	}
	if (ctl->json && (*which || ctl->out.columns || ctl->out.csv))
		return ctl_usage(ctl, "--json prints the whole status; a TABLE, -o and --csv are "
				      "for the tables");
	if (!*which && (ctl->out.columns || ctl->out.csv))
		return ctl_usage(ctl, "-o and --csv print one table: name it (status TABLE -o "
				      "COLUMNS; TABLE: devices, clients, leases, models, queue, "
				      "denials)");
	return CTL_EXIT_OK;
}

static int cmd_status(struct ctl *ctl, int argc, char **argv)
{
	const struct status_table *which;
	rocmmem_client *client;
	rocmmem_status *st;
	int rc, err;

	rc = parse_status(ctl, argc, argv, &which);
	if (rc)
		return rc == CTL_DONE ? ctl->exit : rc;
	rc = ctl_connect(ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_status_get(client, &st);
	rocmmem_disconnect(client);
	if (err)
		return ctl_fail(ctl, "status", err);
	if (ctl->json)
		rc = ctl_json_print(ctl_status_json(st)) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
	else if (which)
		rc = print_one(ctl, which, st);
	else
		rc = print_view(ctl, st);
	rocmmem_status_free(st);
	if (rc == 0 && fflush(stdout) != 0)
		rc = CTL_EXIT_USAGE;
	return rc;
}

const struct ctl_command ctl_status_command = {
    .name = "status",
    .run = cmd_status,
    .args = "[TABLE]",
    .summary = "show devices, budgets, clients, leases, models, the queue and refusals",
    .details = "With a TABLE (devices, clients, leases, models, queue, denials), only that\n"
	       "table, whose columns -o chooses and --csv prints for a spreadsheet. Memory a\n"
	       "client holds through its models is RESERVED. The first line warns when the\n"
	       "daemon serves host memory because it found no GPU runtime. --json prints the\n"
	       "stable machine format (man rocmmemctl).\n",
    .options = status_options,
    .help_extra = status_help_extra,
};
