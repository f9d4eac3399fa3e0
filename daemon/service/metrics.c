/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: the daemon's state as Prometheus metrics (text exposition format 0.0.4), for a
 * request (net/) and the textfile (app/metrics_file.c). Names follow
 * Prometheus' conventions: a rocmmemd_ prefix, base units (bytes, seconds, ratios, celsius,
 * watts), counters ending in _total. Series are labelled by device, never by lease id, whose
 * values come and go and would leave an unbounded trail of series behind; only the reconciled
 * books name client processes (name and pid), a bounded number of them (out_clients).
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "platform/fdlimit.h"
#include "policy/reconcile.h"
#include "memory.h"
#include "pool.h"
#include "version.h"

/* ------------------------------------------------------------------------------------------ */
/* The text */

/* Text being written into a fixed buffer; once something does not fit, nothing more is. */
struct out {
	char *buf;
	size_t cap;
	size_t len;
	bool full;
};

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len) {
		o->full = true;
		return;
	}
	o->len += (size_t)n;
}

/* A metric family: HELP and TYPE once, then its samples. */
struct family {
	const char *name;
	const char *type;  /* "gauge" or "counter" */
	const char *help;  /* plain text: no backslash, no newline (nothing to escape) */
	unsigned decimals; /* values are integers in units of 10^-decimals */
};

static void out_family(struct out *o, const struct family *f)
{
	out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

/* One value: an integer, negative when neg, in units of 10^-decimals of its family. */
struct value {
	bool present;
	bool neg;
	uint64_t v;
};

static void out_value(struct out *o, const struct family *f, const struct value *v)
{
	static const uint64_t scale[] = {1, 10, 100, 1000};
	uint64_t s = scale[f->decimals];

	if (f->decimals == 0)
		out_printf(o, " %s%" PRIu64 "\n", v->neg ? "-" : "", v->v);
	else
		out_printf(o, " %s%" PRIu64 ".%0*" PRIu64 "\n", v->neg ? "-" : "", v->v / s,
			   (int)f->decimals, v->v % s);
}

static struct value uval(uint64_t v)
{
	return (struct value){.present = true, .v = v};
}

static struct value sval(int64_t v)
{
	return (struct value){
	    .present = true, .neg = v < 0, .v = v < 0 ? 0 - (uint64_t)v : (uint64_t)v};
}

/*
 * utf8_len returns the length of the valid UTF-8 sequence at p (1 to 4), or 0 when p does not
 * start one: label values must be UTF-8, and one bad byte would make node_exporter reject the
 * whole file.
 */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range rules out overlong forms, surrogates and beyond U+10FFFF. */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++) {
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	}
	return n;
}

/*
 * label_escape writes s as a label value into out (max bytes plus a NUL): backslash, double
 * quote and newline escaped, bytes that are not UTF-8 replaced by '?', cut before the first
 * character or escape that would not fit.
 */
static void label_escape(char *out, size_t max, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = 0;

	while (*p) {
		size_t n = utf8_len(p), need = n;
		const char *put = (const char *)p;

		if (n == 0) {
			put = "?";
			need = n = 1;
		} else if (*p == '\\') {
			put = "\\\\";
			need = 2;
		} else if (*p == '"') {
			put = "\\\"";
			need = 2;
		} else if (*p == '\n') {
			put = "\\n";
			need = 2;
		}
		if (len + need > max)
			break;
		memcpy(out + len, put, need);
		len += need;
		p += n;
	}
	out[len] = '\0';
}

/* Per-device families with one sample per device (where the value is known). */
enum {
	DEV_TOTAL,
	DEV_BUDGET,
	DEV_HEADROOM,
	DEV_LEASED,
	DEV_RESERVED,
	DEV_FREE,
	DEV_LARGEST,
	DEV_LARGEST_EVICTING,
	DEV_EVICTABLE,
	DEV_RUNTIME_FREE,
	DEV_EXTERNAL,
	DEV_LEASES,
	DEV_WAITERS,
	DEV_OLDEST_WAIT,
	DEV_LOST,
	DEV_TEMPERATURE,
	DEV_POWER,
	DEV_BUSY,
	DEV_POOL,
	DEV_POOL_WARM,
	DEV_UNDECLARED,
	DEV_OUTSIDE,
	DEV_FAMILIES
};

static const struct family device_families[DEV_FAMILIES] = {
    [DEV_TOTAL] = {"rocmmemd_device_total_bytes", "gauge",
		   "Memory of the device, as its backend reports it.", 0},
    [DEV_BUDGET] = {"rocmmemd_device_budget_bytes", "gauge",
		    "The most the daemon leases at once on the device.", 0},
    [DEV_HEADROOM] = {"rocmmemd_device_headroom_bytes", "gauge",
		      "Memory of the device kept out of the budget.", 0},
    [DEV_LEASED] = {"rocmmemd_device_leased_bytes", "gauge", "Memory held by leases.", 0},
    [DEV_RESERVED] = {"rocmmemd_device_reserved_bytes", "gauge",
		      "Memory reserved by models without a lease.", 0},
    [DEV_FREE] = {"rocmmemd_device_free_bytes", "gauge", "Budget neither leased nor reserved.", 0},
    [DEV_LARGEST] = {"rocmmemd_device_largest_grantable_bytes", "gauge",
		     "The largest request the device could grant at once now.", 0},
    [DEV_LARGEST_EVICTING] = {"rocmmemd_device_largest_with_eviction_bytes", "gauge",
			      "The largest request grantable once idle, unpinned models are "
			      "evicted.",
			      0},
    [DEV_EVICTABLE] = {"rocmmemd_device_evictable_bytes", "gauge",
		       "Memory resident in idle, unpinned models.", 0},
    [DEV_RUNTIME_FREE] = {"rocmmemd_device_runtime_free_bytes", "gauge",
			  "Free memory as the GPU runtime last reported it.", 0},
    [DEV_EXTERNAL] = {"rocmmemd_device_external_bytes", "gauge",
		      "Memory used on the device outside rocmmemd, as last sampled.", 0},
    [DEV_LEASES] = {"rocmmemd_device_leases", "gauge", "Leases held now.", 0},
    [DEV_WAITERS] = {"rocmmemd_device_waiters", "gauge", "Requests waiting for memory.", 0},
    [DEV_OLDEST_WAIT] = {"rocmmemd_device_oldest_wait_seconds", "gauge",
			 "How long the oldest waiting request has waited (0: none waits).", 3},
    [DEV_LOST] = {"rocmmemd_device_lost", "gauge",
		  "1 when the runtime reported the device gone, else 0.", 0},
    [DEV_TEMPERATURE] = {"rocmmemd_device_temperature_celsius", "gauge",
			 "Temperature of the device, when its telemetry reads one.", 3},
    [DEV_POWER] = {"rocmmemd_device_power_watts", "gauge",
		   "Power drawn by the device, when its telemetry reads it.", 3},
    [DEV_BUSY] = {"rocmmemd_device_busy_ratio", "gauge",
		  "Fraction of time the device was busy, when its telemetry reads it.", 2},
    [DEV_POOL] = {"rocmmemd_device_pool_bytes", "gauge",
		  "Memory of released VMM leases the daemon keeps for their clients.", 0},
    [DEV_POOL_WARM] = {"rocmmemd_device_pool_warm_grants_total", "counter",
		       "Leases granted from the pool, without an allocation.", 0},
    [DEV_UNDECLARED] = {"rocmmemd_device_undeclared_bytes", "gauge",
			"Memory held beyond declarations and their tolerance, charged to the "
			"budget (measurable devices only).",
			0},
    [DEV_OUTSIDE] = {"rocmmemd_device_outside_bytes", "gauge",
		     "Of the undeclared memory, what processes outside rocmmemd hold.", 0},
};

/* Model states as status names them, in the order of the wire's ModelState. */
static const char *const model_states[] = {"idle", "in_use", "evicting", "evicted", "waiting"};
#define MODEL_STATES (sizeof(model_states) / sizeof(model_states[0]))

static unsigned model_state_index(const struct model *m)
{
	switch (model_state(m)) {
	case MODEL_IDLE:
		return 0;
	case MODEL_IN_USE:
		return 1;
	case MODEL_EVICTING:
		return 2;
	case MODEL_EVICTED:
		break;
	}
	return m->waiters ? 4 : 3;
}

static void device_values(struct value *v, const struct device *d, uint64_t now)
{
	const struct telemetry_sample *t = &d->telemetry;

	v[DEV_TOTAL] = uval(d->total);
	v[DEV_BUDGET] = uval(d->budget);
	v[DEV_HEADROOM] = uval(d->headroom);
	v[DEV_LEASED] = uval(d->leased);
	v[DEV_RESERVED] = uval(d->reserved);
	v[DEV_FREE] = uval(device_free(d));
	v[DEV_LARGEST] = uval(device_largest_grantable(d));
	v[DEV_LARGEST_EVICTING] = uval(device_largest_with_eviction(d));
	v[DEV_EVICTABLE] = uval(device_evictable(d));
	if (d->has_meminfo) {
		v[DEV_RUNTIME_FREE] = uval(d->runtime_free);
		v[DEV_EXTERNAL] = uval(device_external(d));
	}
	v[DEV_LEASES] = uval(d->leases);
	v[DEV_WAITERS] = uval(d->queue.count);
	v[DEV_OLDEST_WAIT] = uval(device_oldest_wait_ms(d, now));
	v[DEV_LOST] = uval(d->lost ? 1 : 0);
	if (d->has_telemetry && (t->valid & TELEMETRY_HAS_TEMPERATURE))
		v[DEV_TEMPERATURE] = sval(t->temperature_mc);
	if (d->has_telemetry && (t->valid & TELEMETRY_HAS_POWER))
		v[DEV_POWER] = uval(t->power_mw);
	if (d->has_telemetry && (t->valid & TELEMETRY_HAS_BUSY))
		v[DEV_BUSY] = uval(t->busy_percent > 100 ? 100 : t->busy_percent);
	if (d->truth.measurable) {
		v[DEV_UNDECLARED] = uval(d->truth.undeclared);
		v[DEV_OUTSIDE] = uval(d->truth.outside);
	}
}

/* Daemon-wide counters, in the order and with the names of the wire's Counters. */
static void out_counters(struct out *o, const struct counters *k)
{
	const struct {
		struct family f;
		uint64_t v;
	} list[] = {
	    {{"rocmmemd_grants_total", "counter", "Leases granted.", 0}, k->grants},
	    {{"rocmmemd_denials_total", "counter",
	      "Memory requests refused, other than by their wait timing out.", 0},
	     k->denials},
	    {{"rocmmemd_timeouts_total", "counter",
	      "Memory requests refused because their wait timed out.", 0},
	     k->timeouts},
	    {{"rocmmemd_evictions_total", "counter",
	      "Requests sent to owners to unload an idle model.", 0},
	     k->evictions},
	    {{"rocmmemd_revocations_total", "counter",
	      "Models whose owner missed the eviction deadline: their memory was taken back.", 0},
	     k->revocations},
	    {{"rocmmemd_trims_total", "counter", "Trims of the GPU runtime's cached memory.", 0},
	     k->trims},
	    {{"rocmmemd_trimmed_bytes_total", "counter", "Memory the trims returned to the driver.",
	      0},
	     k->bytes_trimmed},
	    {{"rocmmemd_releases_total", "counter", "Leases released by their owner.", 0},
	     k->releases},
	    {{"rocmmemd_reclaimed_total", "counter",
	      "Leases reclaimed from clients that went away.", 0},
	     k->reclaimed},
	    {{"rocmmemd_failures_total", "counter", "Allocations the backend refused.", 0},
	     k->failures},
	    {{"rocmmemd_connections_total", "counter", "Clients that connected since the start.",
	      0},
	     k->connections},
	    {{"rocmmemd_undeclared_use_total", "counter",
	      "Times a client's measured memory crossed its declaration and tolerance.", 0},
	     k->undeclared},
	    {{"rocmmemd_lane_requests_total", "counter",
	      "Requests answered through a connection's request lane instead of its socket.", 0},
	     k->lane_requests},
	};

	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		struct value v = uval(list[i].v);

		out_family(o, &list[i].f);
		out_printf(o, "%s", list[i].f.name);
		out_value(o, &list[i].f, &v);
	}
}

/* The limits in force and how often clients ran into them; what the access policy refused. */
static void out_limits(struct out *o, const struct svc *s)
{
	static const struct family value = {"rocmmemd_limit", "gauge",
					    "A limit in force: a count or bytes (none when "
					    "unlimited).",
					    0};
	static const struct family handshake = {"rocmmemd_handshake_timeout_seconds", "gauge",
						"How long a new connection has to say hello.", 3};
	static const struct family hits = {"rocmmemd_limit_hits_total", "counter",
					   "Times a client ran into a limit.", 0};
	static const struct family peers = {"rocmmemd_peers_refused_total", "counter",
					    "Connections refused: not an allowed user or group.",
					    0};
	static const struct family requests = {
	    "rocmmemd_requests_refused_total", "counter",
	    "Requests refused: not the owner of what they name, nor an administrator.", 0};
	struct value v;

	out_family(o, &value);
	for (unsigned i = 0; i < LIMIT_COUNT; i++) {
		uint64_t x;
		bool unlimited;

		limit_value(&s->cfg.limits, s->cfg.fd_limit, (enum limit_id)i, &x, &unlimited);
		if (unlimited || i == LIMIT_HANDSHAKE_TIMEOUT)
			continue;
		v = uval(x);
		out_printf(o, "%s{limit=\"%s\"}", value.name, limit_name((enum limit_id)i));
		out_value(o, &value, &v);
	}
	out_family(o, &handshake);
	v = uval(s->cfg.limits.handshake_timeout_ms);
	out_printf(o, "%s", handshake.name);
	out_value(o, &handshake, &v);
	out_family(o, &hits);
	for (unsigned i = 0; i < LIMIT_COUNT; i++)
		out_printf(o, "%s{limit=\"%s\"} %" PRIu64 "\n", hits.name,
			   limit_name((enum limit_id)i), s->counters.hits[i]);
	out_family(o, &peers);
	out_printf(o, "%s %" PRIu64 "\n", peers.name, s->counters.peers_refused);
	out_family(o, &requests);
	out_printf(o, "%s %" PRIu64 "\n", requests.name, s->counters.requests_refused);
}

/* out_daemon writes the daemon's own families: its build, when it started, its clients. */
static void out_daemon(struct out *o, const struct svc *s, const struct metrics_facts *facts)
{
	static const struct family build = {"rocmmemd_build_info", "gauge",
					    "Version and memory backend of the running rocmmemd.",
					    0};
	static const struct family start = {"rocmmemd_start_time_seconds", "gauge",
					    "When the daemon started, in seconds since the Unix "
					    "epoch.",
					    3};
	static const struct family clients = {"rocmmemd_clients", "gauge", "Clients connected now.",
					      0};
	char esc[2][METRICS_NAME_LABEL_MAX + 1];
	uint64_t uptime = facts->uptime_ms;
	uint64_t real_ms = s->clock->real_ms(s->clock->ctx);
	struct value v;

	label_escape(esc[0], sizeof(esc[0]) - 1, ROCMMEM_VERSION_STRING);
	label_escape(esc[1], sizeof(esc[1]) - 1, backend_name(s->backend));
	out_family(o, &build);
	out_printf(o, "%s{version=\"%s\",backend=\"%s\"} 1\n", build.name, esc[0], esc[1]);
	v = uval(real_ms > uptime ? real_ms - uptime : 0);
	out_family(o, &start);
	out_printf(o, "%s", start.name);
	out_value(o, &start, &v);
	out_family(o, &clients);
	out_printf(o, "%s %u\n", clients.name, facts->clients);
}

/* out_descriptors writes the daemon's descriptors against its limit, and its host arenas. */
static void out_descriptors(struct out *o, const struct svc *s)
{
	static const struct family open = {"rocmmemd_fds_open", "gauge",
					   "File descriptors the daemon has open now.", 0};
	static const struct family limit = {"rocmmemd_fds_limit", "gauge",
					    "The daemon's descriptor limit (RLIMIT_NOFILE).", 0};
	static const struct family arenas = {"rocmmemd_host_arenas", "gauge",
					     "Clients' host arenas open (one memfd each).", 0};
	static const struct family fallbacks = {
	    "rocmmemd_arena_fallbacks_total", "counter",
	    "Host leases that fitted no free range of their arena and got a memfd of their own.",
	    0};
	static const struct family kept = {
	    "rocmmemd_gpu_pool_fds", "gauge",
	    "Exported GPU memory fds kept open for grants from the chunk pool (--gpu-pool-fds).",
	    0};
	static const struct family kept_limit = {
	    "rocmmemd_gpu_pool_fds_limit", "gauge",
	    "How many such fds may be kept before grants close theirs again.", 0};
	uint64_t fds_limit, fds_open;

	fdlimit_read(&fds_limit, &fds_open);
	out_family(o, &open);
	out_printf(o, "%s %" PRIu64 "\n", open.name, fds_open);
	out_family(o, &limit);
	out_printf(o, "%s %" PRIu64 "\n", limit.name, fds_limit);
	out_family(o, &arenas);
	out_printf(o, "%s %" PRIu64 "\n", arenas.name, s->state.arenas);
	out_family(o, &fallbacks);
	out_printf(o, "%s %" PRIu64 "\n", fallbacks.name, s->state.arena_fallbacks);
	out_family(o, &kept);
	out_printf(o, "%s %" PRIu64 "\n", kept.name, backend_kept_fds());
	out_family(o, &kept_limit);
	out_printf(o, "%s %" PRIu64 "\n", kept_limit.name, svc_export_keep_cap(s));
}

/* out_devices writes the devices' families: what each is, its figures, its models by state. */
static void out_devices(struct out *o, const struct svc *s)
{
	static const struct family info = {"rocmmemd_device_info", "gauge",
					   "A device's PCI bus id and how its memory reaches "
					   "clients (always 1).",
					   0};
	static const struct family models = {"rocmmemd_device_models", "gauge",
					     "Registered models by state.", 0};
	struct value values[BACKEND_MAX_DEVICES][DEV_FAMILIES];
	unsigned per_state[BACKEND_MAX_DEVICES][MODEL_STATES];
	char labels[BACKEND_MAX_DEVICES][32 + METRICS_NAME_LABEL_MAX];
	char esc[2][METRICS_NAME_LABEL_MAX + 1];
	unsigned n =
	    s->state.ndevices < BACKEND_MAX_DEVICES ? s->state.ndevices : BACKEND_MAX_DEVICES;
	uint64_t now = svc_now(s);

	memset(values, 0, sizeof(values));
	memset(per_state, 0, sizeof(per_state));
	for (unsigned i = 0; i < n; i++) {
		const struct device *d = &s->state.devices[i];
		const struct model *m;

		label_escape(esc[0], sizeof(esc[0]) - 1, d->name);
		snprintf(labels[i], sizeof(labels[i]), "device=\"%u\",name=\"%s\"", d->index,
			 esc[0]);
		device_values(values[i], d, now);
		if (svc_pool_limit(s, d) || d->pool.bytes || d->pool.dropped_bytes) {
			values[i][DEV_POOL] = uval(d->pool.bytes);
			values[i][DEV_POOL_WARM] = uval(d->pool.warm_grants);
		}
		TAILQ_FOREACH (m, &d->models, device_link)
			per_state[i][model_state_index(m)]++;
	}
	if (n > 0)
		out_family(o, &info);
	for (unsigned i = 0; i < n; i++) {
		const struct device *d = &s->state.devices[i];

		label_escape(esc[0], sizeof(esc[0]) - 1, d->pci_bus_id);
		label_escape(esc[1], sizeof(esc[1]) - 1, backend_sharing_name(d->handle_kind));
		out_printf(o, "%s{%s,pci_bus_id=\"%s\",sharing=\"%s\",integrated=\"%s\"} 1\n",
			   info.name, labels[i], esc[0], esc[1], d->integrated ? "true" : "false");
	}
	for (unsigned f = 0; f < DEV_FAMILIES; f++) {
		bool any = false;

		for (unsigned i = 0; i < n; i++)
			any = any || values[i][f].present;
		if (!any)
			continue;
		out_family(o, &device_families[f]);
		for (unsigned i = 0; i < n; i++) {
			if (!values[i][f].present)
				continue;
			out_printf(o, "%s{%s}", device_families[f].name, labels[i]);
			out_value(o, &device_families[f], &values[i][f]);
		}
	}
	if (n > 0)
		out_family(o, &models);
	for (unsigned i = 0; i < n; i++) {
		for (unsigned k = 0; k < MODEL_STATES; k++)
			out_printf(o, "%s{%s,state=\"%s\"} %u\n", models.name, labels[i],
				   model_states[k], per_state[i][k]);
	}
}

/* One (device, client process) pair of the reconciled books. */
struct client_series {
	unsigned device;
	int32_t pid;
	struct policy_charge c;
};

/* ranks_before says whether a comes before b: more undeclared, then more measured memory. */
static bool ranks_before(const struct policy_charge *a, const struct policy_charge *b)
{
	if (a->undeclared != b->undeclared)
		return a->undeclared > b->undeclared;
	return a->measured > b->measured;
}

/*
 * top_clients keeps in top the METRICS_CLIENT_SERIES pairs that rank first among the client
 * processes the measurable devices' telemetry lists. Returns how many it kept; *omitted: the
 * rest.
 */
static unsigned top_clients(const struct svc *s, struct client_series *top, unsigned *omitted)
{
	unsigned n = 0;

	*omitted = 0;
	for (unsigned i = 0; i < s->state.ndevices && i < BACKEND_MAX_DEVICES; i++) {
		const struct device *d = &s->state.devices[i];

		for (unsigned k = 0; d->truth.measurable && k < d->truth.nprocs; k++) {
			struct client_series x = {.device = i, .pid = d->truth.procs[k].pid};
			unsigned at;

			if (!policy_truth_charge(&s->state, d, &d->truth.procs[k], &x.c) ||
			    !x.c.holder)
				continue;
			for (at = n; at > 0 && ranks_before(&x.c, &top[at - 1].c); at--)
				if (at < METRICS_CLIENT_SERIES)
					top[at] = top[at - 1];
			*omitted += n == METRICS_CLIENT_SERIES;
			if (at < METRICS_CLIENT_SERIES)
				top[at] = x;
			n += n < METRICS_CLIENT_SERIES;
		}
	}
	return n;
}

/*
 * out_clients writes the reconciled books of the client processes the devices' telemetry
 * measures, labelled by device, client name (its lowest connection's) and pid: a bounded
 * number of them (METRICS_CLIENT_SERIES), so that clients cannot grow the text without end.
 */
static void out_clients(struct out *o, const struct svc *s)
{
	static const struct family families[3] = {
	    {"rocmmemd_client_declared_bytes", "gauge",
	     "What a client process declared on a measurable device (leases, reservations).", 0},
	    {"rocmmemd_client_measured_bytes", "gauge",
	     "What a client process holds on the device, as its telemetry measures it.", 0},
	    {"rocmmemd_client_undeclared_bytes", "gauge",
	     "What a client process holds beyond its declaration and tolerance (charged).", 0},
	};
	static const struct family omitted_family = {
	    "rocmmemd_client_series_omitted", "gauge",
	    "Client processes left out of the rocmmemd_client_*_bytes series (the bound).", 0};
	struct client_series top[METRICS_CLIENT_SERIES];
	char esc[METRICS_NAME_LABEL_MAX + 1];
	unsigned omitted, n = top_clients(s, top, &omitted);

	for (unsigned f = 0; f < 3; f++) {
		out_family(o, &families[f]);
		for (unsigned i = 0; i < n; i++) {
			const struct policy_charge *c = &top[i].c;
			uint64_t v = f == 0 ? c->declared : f == 1 ? c->measured : c->undeclared;

			label_escape(esc, sizeof(esc) - 1, c->holder->name);
			out_printf(o, "%s{device=\"%u\",name=\"%s\",pid=\"%d\"} %" PRIu64 "\n",
				   families[f].name, top[i].device, esc, (int)top[i].pid, v);
		}
	}
	out_family(o, &omitted_family);
	out_printf(o, "%s %u\n", omitted_family.name, omitted);
}

ssize_t metrics_format(const struct svc *s, const struct metrics_facts *facts, char *buf,
		       size_t cap)
{
	struct out o = {.buf = buf, .cap = cap};

	if (cap == 0)
		return -EMSGSIZE;
	buf[0] = '\0';
	out_daemon(&o, s, facts);
	out_descriptors(&o, s);
	out_counters(&o, &s->counters);
	out_limits(&o, s);
	out_devices(&o, s);
	out_clients(&o, s);
	if (o.full) {
		buf[0] = '\0';
		return -EMSGSIZE;
	}
	return (ssize_t)o.len;
}
