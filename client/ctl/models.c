/* SPDX-License-Identifier: MIT */
/* models.c: `rocmmemctl models`, `evict`, `pin` and `unpin`. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "common.h"
#include "errors.h"
#include "format.h"
#include "json.h"
#include "models.h"
#include "show.h"
#include "size.h"
#include "table.h"

/* The version of `models --json`; the same contract as status --json's models[] entries. */
#define MODELS_SCHEMA_VERSION 1

/* query connects and takes a status snapshot. Returns CTL_EXIT_OK or why not (reported). */
static int query(const struct ctl *ctl, const char *command, rocmmem_client **client,
		 rocmmem_status **st)
{
	int rc = ctl_connect(ctl, client), err;

	if (rc)
		return rc;
	err = rocmmem_status_get(*client, st);
	if (err) {
		rc = ctl_fail(ctl, command, err);
		rocmmem_disconnect(*client);
		return rc;
	}
	return CTL_EXIT_OK;
}

static int print_models(const struct ctl *ctl, const rocmmem_status *st, long device)
{
	struct ctl_table *t;
	int rc;

	if (ctl->json) {
		json_object *root = json_object_new_object(), *models = json_object_new_array();

		for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
			const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

			if (device < 0 || v->device == (unsigned long)device)
				json_object_array_add(models, ctl_model_json(v));
		}
		ctl_json_i64(root, "schema_version", MODELS_SCHEMA_VERSION);
		json_object_object_add(root, "models", models);
		return ctl_json_print(root) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
	}
	rc = ctl_table_new(ctl, &ctl_models_table, &t);
	if (rc)
		return rc;
	ctl_models_rows(ctl, t, st, device);
	return ctl_table_print(t) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}

static int cmd_models(struct ctl *ctl, int argc, char **argv)
{
	rocmmem_client *client;
	rocmmem_status *st;
	long device = -1;
	int c, rc;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0) {
		if (c == 'd' && ctl_parse_device(ctl->optarg, &device) < 0)
			return ctl_usage(ctl, "invalid --device '%s'", ctl->optarg);
		ctl_output_option(ctl, c);
	}
	if (c < 0)
		return ctl->exit;
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	if (ctl->json && (ctl->out.columns || ctl->out.csv))
		return ctl_usage(ctl, "--json prints every field; -o and --csv are for the table");
	rc = query(ctl, "models", &client, &st);
	if (rc)
		return rc;
	rocmmem_disconnect(client);
	if (device >= 0 && (size_t)device >= rocmmem_status_device_count(st))
		rc = ctl_error(ctl, CTL_EXIT_REFUSED, -ENODEV,
			       "no device %ld: the daemon manages %zu device(s), numbered from 0",
			       device, rocmmem_status_device_count(st));
	else
		rc = print_models(ctl, st, device);
	rocmmem_status_free(st);
	if (rc == 0 && fflush(stdout) != 0)
		rc = CTL_EXIT_USAGE;
	return rc;
}

static const struct ctl_option models_options[] = {
    {"device", 'd', "N", "only the models of device N"},
    CTL_OUTPUT_OPTIONS,
    {NULL, 0, NULL, NULL},
};

static void models_help_extra(void)
{
	ctl_table_columns_help(&ctl_models_table, stdout);
}

const struct ctl_command ctl_models_command = {
    .name = "models",
    .run = cmd_models,
    .args = "",
    .summary = "list registered models: owner, state, resident bytes, priority, evictions",
    .details = "Names are never cut: they are what evict and pin take.\n",
    .options = models_options,
    .help_extra = models_help_extra,
};

/* ----------------------------------------------------------------------------------------- */
/* evict, pin, unpin: one model, named by its id or its name */

/* A model a command acts on: its id, and what the snapshot said of it (NULL: not listed). */
struct target {
	uint64_t id;
	const struct rocmmem_model_info *info;
};

/* parse_model_command reads `COMMAND [--json] [--socket PATH] MODEL`. Returns 0 or the exit. */
static int parse_model_command(struct ctl *ctl, int argc, char **argv, const char **model)
{
	int c;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		;
	if (c < 0)
		return CTL_DONE;
	if (optind >= argc)
		return ctl_usage(ctl, "missing MODEL (a model id or name)");
	*model = argv[optind++];
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	if (!(*model)[0])
		return ctl_usage(ctl, "MODEL must not be empty");
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
static int resolve(const struct ctl *ctl, const rocmmem_status *st, const char *text,
		   struct target *t)
{
	char sz[SIZE_FORMAT_MAX];
	size_t matches = 0;

	memset(t, 0, sizeof(*t));
	if (is_id(text)) {
		errno = 0;
		t->id = strtoull(text, NULL, 10);
		if (errno)
			return ctl_error(ctl, CTL_EXIT_REFUSED, -ENOENT, "no model %s", text);
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
	if (matches == 0)
		return ctl_error(ctl, CTL_EXIT_REFUSED, -ENOENT,
				 "no model named '%s' ('rocmmemctl models' lists them)", text);
	ctl_error(ctl, CTL_EXIT_REFUSED, -EEXIST,
		  "%zu models are named '%s'; name one by its id:", matches, text);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *v = rocmmem_status_model(st, i);

		if (strcmp(v->name, text) == 0)
			fprintf(stderr, "  id %llu: pid %d, device %u, %s, %s\n",
				(unsigned long long)v->id, (int)v->owner_pid, v->device,
				ctl_model_state_label(v->state),
				size_format(v->bytes, sz, sizeof(sz)));
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

/* parse_evict reads `evict [--force] [--json] [--socket PATH] MODEL`. */
static int parse_evict(struct ctl *ctl, int argc, char **argv, const char **model, bool *force)
{
	int c;

	while ((c = ctl_next_option(ctl, argc, argv)) > 0)
		if (c == 'f')
			*force = true;
	if (c < 0)
		return CTL_DONE;
	if (optind >= argc)
		return ctl_usage(ctl, "missing MODEL (a model id or name)");
	*model = argv[optind++];
	if (optind < argc)
		return ctl_usage(ctl, "unexpected argument '%s'", argv[optind]);
	if (!(*model)[0])
		return ctl_usage(ctl, "MODEL must not be empty");
	return CTL_EXIT_OK;
}

static int cmd_evict(struct ctl *ctl, int argc, char **argv)
{
	const char *model = NULL;
	rocmmem_client *client;
	rocmmem_status *st;
	struct target t;
	int64_t started, elapsed;
	struct rocmmem_evict_result result = ROCMMEM_EVICT_RESULT_INIT;
	uint64_t freed;
	bool resident, revoked, force = false;
	char what[160], sz[SIZE_FORMAT_MAX];
	int rc, err;

	rc = parse_evict(ctl, argc, argv, &model, &force);
	if (rc)
		return rc == CTL_DONE ? ctl->exit : rc;
	rc = query(ctl, "evict", &client, &st);
	if (rc)
		return rc;
	rc = resolve(ctl, st, model, &t);
	if (rc)
		goto out;
	started = ctl_monotonic_ms();
	/* Waits until the owner has unloaded it, or the daemon took it back at the deadline. */
	err = force ? rocmmem_model_evict_force(client, t.id, &result)
		    : rocmmem_model_evict(client, t.id, &result);
	elapsed = ctl_monotonic_ms() - started;
	if (err < 0) {
		rc = ctl_fail(ctl, "evict", err);
		goto out;
	}
	freed = result.bytes_freed;
	revoked = result.revoked != 0;
	resident = freed > 0;
	describe(&t, what, sizeof(what));
	if (ctl->json) {
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
static int pin_command(struct ctl *ctl, bool pinned, int argc, char **argv)
{
	const char *command = ctl->command->name;
	const char *model = NULL;
	rocmmem_client *client;
	rocmmem_status *st;
	struct target t;
	bool changed;
	char what[160];
	int rc, err;

	rc = parse_model_command(ctl, argc, argv, &model);
	if (rc)
		return rc == CTL_DONE ? ctl->exit : rc;
	rc = query(ctl, command, &client, &st);
	if (rc)
		return rc;
	rc = resolve(ctl, st, model, &t);
	if (rc)
		goto out;
	changed = !t.info || !t.info->pinned != !pinned;
	err = rocmmem_model_pin(client, t.id, pinned);
	if (err) {
		rc = ctl_fail(ctl, command, err);
		goto out;
	}
	describe(&t, what, sizeof(what));
	if (ctl->json) {
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

static int cmd_pin(struct ctl *ctl, int argc, char **argv)
{
	return pin_command(ctl, true, argc, argv);
}

static int cmd_unpin(struct ctl *ctl, int argc, char **argv)
{
	return pin_command(ctl, false, argc, argv);
}

static const struct ctl_option no_options[] = {{NULL, 0, NULL, NULL}};

static const struct ctl_option evict_options[] = {
    {"force", 'f', NULL,
     "a model in use too: its owner is asked to release and\n"
     "unload it by its deadline, then revoked (root or the\n"
     "admin group only; the daemon logs who forced it)"},
    {NULL, 0, NULL, NULL},
};

const struct ctl_command ctl_evict_command = {
    .name = "evict",
    .run = cmd_evict,
    .args = "MODEL",
    .summary = "ask a model's owner to unload it now, and wait until it has",
    .details = "Waits until the owner has unloaded it; an owner that does not in time has the\n"
	       "model's memory revoked.\n"
	       "Evicting takes the model's owner or root; a model in use is refused unless\n"
	       "--force is given, which takes root or the daemon's admin group.\n",
    .options = evict_options,
};

const struct ctl_command ctl_pin_command = {
    .name = "pin",
    .run = cmd_pin,
    .args = "MODEL",
    .summary = "pin a model: the daemon never evicts it to make room (evict still may)",
    .details = "Pinning takes the model's owner or root.\n",
    .options = no_options,
};

const struct ctl_command ctl_unpin_command = {
    .name = "unpin",
    .run = cmd_unpin,
    .args = "MODEL",
    .summary = "let the daemon evict a model again when it is idle",
    .options = no_options,
};
