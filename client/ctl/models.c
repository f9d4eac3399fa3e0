/* SPDX-License-Identifier: MIT */
/* models.c: `rocmmemctl models`, `evict`, `pin` and `unpin`, and how a model is printed. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "ctl.h"
#include "size.h"

/* The version of `models --json`; the same contract as status --json's models[] entries. */
#define MODELS_SCHEMA_VERSION 1

const char *ctl_model_class_name(enum rocmmem_model_class c)
{
	static const char *const names[] = {"other", "transformer", "vae", "text_encoder",
					    "image_encoder"};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "other";
}

const char *ctl_model_state_name(enum rocmmem_model_state s)
{
	static const char *const names[] = {"idle", "in_use", "evicting", "evicted", "waiting"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

/* state_label is the state as the tables show it: words, not identifiers. */
static const char *state_label(enum rocmmem_model_state s)
{
	return s == ROCMMEM_MODEL_IN_USE ? "in use" : ctl_model_state_name(s);
}

json_object *ctl_model_json(const struct rocmmem_model_info *v)
{
	json_object *o = json_object_new_object();

	/* The first keys in the order status --json always had them. */
	ctl_json_str(o, "name", v->name);
	ctl_json_str(o, "class", ctl_model_class_name(v->model_class));
	ctl_json_i64(o, "owner_pid", v->owner_pid);
	ctl_json_u64(o, "device", v->device);
	ctl_json_u64(o, "bytes", v->bytes);
	ctl_json_str(o, "state", ctl_model_state_name(v->state));
	ctl_json_u64(o, "id", v->id);
	ctl_json_i64(o, "priority", v->priority);
	ctl_json_bool(o, "pinned", v->pinned);
	ctl_json_u64(o, "size", v->size);
	ctl_json_u64(o, "reservation_bytes", v->reservation_bytes);
	ctl_json_u64(o, "lease_bytes", v->lease_bytes);
	ctl_json_u64(o, "idle_ms", v->idle_ms);
	ctl_json_u64(o, "use_count", v->use_count);
	ctl_json_u64(o, "evictions", v->evictions);
	return o;
}

void ctl_models_table(const rocmmem_status *st, long device)
{
	char resident[SIZE_FORMAT_MAX], size[SIZE_FORMAT_MAX], idle[32];
	int width = 4; /* "NAME" */

	/* Names are what evict and pin take: never truncated, the column fits the longest. */
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		int len = (int)strlen(rocmmem_status_model(st, i)->name);

		if (len > width)
			width = len;
	}
	printf("%-6s %-*s %-13s %-8s %-6s %-8s %10s %10s %8s %-6s %9s %9s\n", "ID", width, "NAME",
	       "CLASS", "PID", "DEVICE", "STATE", "RESIDENT", "SIZE", "PRIORITY", "PINNED", "IDLE",
	       "EVICTIONS");
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (device >= 0 && v->device != (unsigned long)device)
			continue;
		if (v->size)
			size_format(v->size, size, sizeof(size));
		else
			snprintf(size, sizeof(size), "-"); /* its memory is leases only */
		if (v->state == ROCMMEM_MODEL_IN_USE)
			snprintf(idle, sizeof(idle), "-");
		else
			ctl_duration(v->idle_ms / 1000, idle, sizeof(idle));
		printf("%-6llu %-*s %-13s %-8d %-6u %-8s %10s %10s %8d %-6s %9s %9llu\n",
		       (unsigned long long)v->id, width, v->name,
		       ctl_model_class_name(v->model_class), (int)v->owner_pid, v->device,
		       state_label(v->state), size_format(v->bytes, resident, sizeof(resident)),
		       size, (int)v->priority, v->pinned ? "yes" : "no", idle,
		       (unsigned long long)v->evictions);
	}
}

/* parse_device reads --device N for command. Returns 0, or -EINVAL after a usage message. */
static int parse_device(const char *command, const char *text, long *device)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-' || v > 1024) {
		ctl_usage(command, "invalid --device '%s'", text);
		return -EINVAL;
	}
	*device = (long)v;
	return 0;
}

/* query connects and takes a status snapshot. Returns CTL_EXIT_OK or why not (printed). */
static int query(const struct ctl *ctl, const char *command, rocmmem_client **client,
		 rocmmem_status **st)
{
	int rc = ctl_connect(ctl, client), err;

	if (rc)
		return rc;
	err = rocmmem_status_get(*client, st);
	if (err) {
		rc = ctl_fail(command, err);
		rocmmem_disconnect(*client);
		return rc;
	}
	return CTL_EXIT_OK;
}

int cmd_models(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"device", required_argument, NULL, 'd'},
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = *global;
	rocmmem_client *client;
	rocmmem_status *st;
	long device = -1;
	int c, rc;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:js:", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (parse_device("models", optarg, &device) < 0)
				return CTL_EXIT_USAGE;
			break;
		default:
			rc = ctl_common_option("models", c, &ctl, argv);
			if (rc)
				return rc;
			break;
		}
	}
	if (optind < argc)
		return ctl_usage("models", "unexpected argument '%s'", argv[optind]);
	rc = query(&ctl, "models", &client, &st);
	if (rc)
		return rc;
	rocmmem_disconnect(client);
	if (device >= 0 && (size_t)device >= rocmmem_status_device_count(st)) {
		fprintf(stderr,
			"rocmmemctl: models: no device %ld: the daemon manages %zu device(s), "
			"numbered from 0\n",
			device, rocmmem_status_device_count(st));
		rocmmem_status_free(st);
		return CTL_EXIT_REFUSED;
	}
	if (ctl.json) {
		json_object *root = json_object_new_object(), *models = json_object_new_array();

		for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
			const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

			if (device < 0 || v->device == (unsigned long)device)
				json_object_array_add(models, ctl_model_json(v));
		}
		ctl_json_i64(root, "schema_version", MODELS_SCHEMA_VERSION);
		json_object_object_add(root, "models", models);
		ctl_json_print(root);
	} else {
		ctl_models_table(st, device);
	}
	rocmmem_status_free(st);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

/* ----------------------------------------------------------------------------------------- */
/* evict, pin, unpin: one model, named by its id or its name */

/* A model a command acts on: its id, and what the snapshot said of it (NULL: not listed). */
struct target {
	uint64_t id;
	const struct rocmmem_model_info *info;
};

/* parse_model_command reads `COMMAND [--json] [--socket PATH] MODEL`. Returns 0 or exit 1. */
static int parse_model_command(const char *command, struct ctl *ctl, int argc, char **argv,
			       const char **model)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	char name[64];
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":js:", longopts, NULL)) != -1) {
		if (c == 'j')
			ctl->json = true;
		else if (c == 's')
			ctl->socket = optarg;
		else if (c == ':')
			return ctl_usage(command, "option '%s' needs a value",
					 args_bad_option(argv, name, sizeof(name)));
		else
			return ctl_usage(command, "unknown option '%s'",
					 args_bad_option(argv, name, sizeof(name)));
	}
	if (optind >= argc)
		return ctl_usage(command, "missing MODEL (a model id or name)");
	*model = argv[optind++];
	if (optind < argc)
		return ctl_usage(command, "unexpected argument '%s'", argv[optind]);
	if (!(*model)[0])
		return ctl_usage(command, "MODEL must not be empty");
	return CTL_EXIT_OK;
}

/* is_id: MODEL in decimal digits is an id; anything else is a name. */
static bool is_id(const char *text)
{
	return text[strspn(text, "0123456789")] == '\0';
}

/*
 * resolve finds the model text names in the snapshot. An id the snapshot does not list is
 * still tried (the daemon has the last word); a name must match exactly one model. Returns
 * CTL_EXIT_OK, or CTL_EXIT_REFUSED after saying why.
 */
static int resolve(const char *command, const rocmmem_status *st, const char *text,
		   struct target *t)
{
	char sz[SIZE_FORMAT_MAX];
	size_t matches = 0;

	memset(t, 0, sizeof(*t));
	if (is_id(text)) {
		errno = 0;
		t->id = strtoull(text, NULL, 10);
		if (errno) {
			fprintf(stderr, "rocmmemctl: %s: no model %s\n", command, text);
			return CTL_EXIT_REFUSED;
		}
		for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
			if (rocmmem_status_model(st, i)->id == t->id)
				t->info = rocmmem_status_model(st, i);
		}
		return CTL_EXIT_OK;
	}
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (strcmp(v->name, text) == 0) {
			t->info = v;
			matches++;
		}
	}
	if (matches == 1) {
		t->id = t->info->id;
		return CTL_EXIT_OK;
	}
	if (matches == 0) {
		fprintf(stderr,
			"rocmmemctl: %s: no model named '%s' ('rocmmemctl models' lists them)\n",
			command, text);
		return CTL_EXIT_REFUSED;
	}
	fprintf(stderr, "rocmmemctl: %s: %zu models are named '%s'; name one by its id:\n", command,
		matches, text);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (strcmp(v->name, text) == 0)
			fprintf(stderr, "  id %llu: pid %d, device %u, %s, %s\n",
				(unsigned long long)v->id, (int)v->owner_pid, v->device,
				state_label(v->state), size_format(v->bytes, sz, sizeof(sz)));
	}
	return CTL_EXIT_REFUSED;
}

/* add_target puts what is known of the model into a JSON result. */
static void add_target(json_object *o, const struct target *t)
{
	ctl_json_u64(o, "id", t->id);
	if (t->info) {
		ctl_json_str(o, "name", t->info->name);
		ctl_json_i64(o, "owner_pid", t->info->owner_pid);
		ctl_json_u64(o, "device", t->info->device);
	}
}

/* describe writes "model 3 'flux' of pid 1234" (or "model 3" when not listed). */
static const char *describe(const struct target *t, char *buf, size_t len)
{
	if (t->info)
		snprintf(buf, len, "model %llu '%s' of pid %d", (unsigned long long)t->id,
			 t->info->name, (int)t->info->owner_pid);
	else
		snprintf(buf, len, "model %llu", (unsigned long long)t->id);
	return buf;
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cmd_evict(const struct ctl *global, int argc, char **argv)
{
	struct ctl ctl = *global;
	const char *model = NULL;
	rocmmem_client *client;
	rocmmem_status *st;
	struct target t;
	int64_t started, elapsed;
	uint64_t freed;
	bool resident, revoked;
	char what[160], sz[SIZE_FORMAT_MAX];
	int rc, err;

	rc = parse_model_command("evict", &ctl, argc, argv, &model);
	if (rc)
		return rc;
	rc = query(&ctl, "evict", &client, &st);
	if (rc)
		return rc;
	rc = resolve("evict", st, model, &t);
	if (rc)
		goto out;
	started = monotonic_ms();
	/* Waits until the owner has unloaded it, or the daemon took it back at the deadline. */
	err = rocmmem_model_evict(client, t.id, &freed);
	elapsed = monotonic_ms() - started;
	if (err < 0) {
		rc = ctl_fail("evict", err);
		goto out;
	}
	revoked = err == 1;
	resident = freed > 0;
	describe(&t, what, sizeof(what));
	if (ctl.json) {
		json_object *o = json_object_new_object();

		add_target(o, &t);
		ctl_json_bool(o, "evicted", resident);
		ctl_json_bool(o, "revoked", revoked);
		ctl_json_u64(o, "bytes_freed", freed);
		ctl_json_i64(o, "elapsed_ms", elapsed);
		ctl_json_print(o);
	} else if (!resident) {
		printf("%s holds no memory: nothing to evict\n", what);
	} else if (revoked) {
		printf("%s did not unload in time: its %s were revoked after %.2f s\n", what,
		       size_format(freed, sz, sizeof(sz)), (double)elapsed / 1000.0);
	} else {
		printf("evicted %s: %s freed in %.2f s\n", what, size_format(freed, sz, sizeof(sz)),
		       (double)elapsed / 1000.0);
	}
out:
	rocmmem_status_free(st);
	rocmmem_disconnect(client);
	return rc;
}

/* pin_command is pin (pinned true) and unpin (false). */
static int pin_command(const char *command, bool pinned, const struct ctl *global, int argc,
		       char **argv)
{
	struct ctl ctl = *global;
	const char *model = NULL;
	rocmmem_client *client;
	rocmmem_status *st;
	struct target t;
	bool changed;
	char what[160];
	int rc, err;

	rc = parse_model_command(command, &ctl, argc, argv, &model);
	if (rc)
		return rc;
	rc = query(&ctl, command, &client, &st);
	if (rc)
		return rc;
	rc = resolve(command, st, model, &t);
	if (rc)
		goto out;
	changed = !t.info || !t.info->pinned != !pinned;
	err = rocmmem_model_pin(client, t.id, pinned);
	if (err) {
		rc = ctl_fail(command, err);
		goto out;
	}
	describe(&t, what, sizeof(what));
	if (ctl.json) {
		json_object *o = json_object_new_object();

		add_target(o, &t);
		ctl_json_bool(o, "pinned", pinned);
		ctl_json_bool(o, "changed", changed);
		ctl_json_print(o);
	} else if (!changed) {
		printf("%s was already %s\n", what, pinned ? "pinned" : "unpinned");
	} else if (pinned) {
		printf("pinned %s: the daemon will not evict it to make room\n", what);
	} else {
		printf("unpinned %s: the daemon may evict it when it is idle\n", what);
	}
out:
	rocmmem_status_free(st);
	rocmmem_disconnect(client);
	return rc;
}

int cmd_pin(const struct ctl *ctl, int argc, char **argv)
{
	return pin_command("pin", true, ctl, argc, argv);
}

int cmd_unpin(const struct ctl *ctl, int argc, char **argv)
{
	return pin_command("unpin", false, ctl, argc, argv);
}
