/* SPDX-License-Identifier: MIT */
/* json.h: JSON output: helpers, and the shapes status, models and watch print. */
#ifndef ROCMMEMCTL_JSON_H
#define ROCMMEMCTL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocmmem.h"

struct json_object;

/* JSON helpers: add one member of the given type to o. */
void ctl_json_u64(struct json_object *o, const char *key, uint64_t v);
void ctl_json_i64(struct json_object *o, const char *key, int64_t v);
void ctl_json_str(struct json_object *o, const char *key, const char *v);
void ctl_json_bool(struct json_object *o, const char *key, bool v);

/* ctl_json_print prints o as one line and releases it. Returns 0, or -1 if stdout failed. */
int ctl_json_print(struct json_object *o);

/*
 * The shapes status --json and watch --json share (the caller owns the result): the daemon
 * (with the host fallback only where the daemon said it: a status), a device (with its
 * telemetry and processes), a client, and the counters (connections left out where two
 * queries of the same state must look the same: each query is a connection).
 */
struct json_object *ctl_daemon_json(const struct rocmmem_daemon_info *d, bool fallback);
struct json_object *ctl_device_json(const rocmmem_status *st, size_t index);
struct json_object *ctl_client_json(const struct rocmmem_client_info *v);
struct json_object *ctl_counters_json(const struct rocmmem_counters *k, bool connections);

/* ctl_model_json returns a model as status --json and models --json show it (caller puts). */
struct json_object *ctl_model_json(const struct rocmmem_model_info *v);

/* ctl_status_json is status --json: the stable contract, without this query's connection. */
struct json_object *ctl_status_json(const rocmmem_status *st);

/* watch --json's lines: a sample (of one device, or all for device < 0), an event. */
struct json_object *ctl_sample_json(const rocmmem_status *st,
				    const struct rocmmem_sample_info *info, long device);
struct json_object *ctl_event_json(const struct rocmmem_telemetry_event *e);

#endif
