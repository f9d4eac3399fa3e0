/* SPDX-License-Identifier: MIT */
/* abi_dump.c: the layout of every rocmmem.h struct the Python package mirrors, for test_abi. */
#include <stddef.h>
#include <stdio.h>

#include "rocmmem.h"

/* Lines: "struct NAME SIZE ALIGN", "field NAME.FIELD OFFSET SIZE", "const NAME VALUE". */
#define STRUCT(s) printf("struct %s %zu %zu\n", #s, sizeof(struct s), _Alignof(struct s))
#define FIELD(s, f) \
	printf("field %s.%s %zu %zu\n", #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))

static void lease_request(void)
{
	STRUCT(rocmmem_lease_request);
	FIELD(rocmmem_lease_request, struct_size);
	FIELD(rocmmem_lease_request, device);
	FIELD(rocmmem_lease_request, size);
	FIELD(rocmmem_lease_request, timeout_ms);
	FIELD(rocmmem_lease_request, tag);
	FIELD(rocmmem_lease_request, flags);
	FIELD(rocmmem_lease_request, model_id);
}

static void daemon_info(void)
{
	STRUCT(rocmmem_daemon_info);
	FIELD(rocmmem_daemon_info, version);
	FIELD(rocmmem_daemon_info, pid);
	FIELD(rocmmem_daemon_info, uptime_s);
	FIELD(rocmmem_daemon_info, backend);
	FIELD(rocmmem_daemon_info, protocol_version);
	FIELD(rocmmem_daemon_info, host_fallback);
	FIELD(rocmmem_daemon_info, host_fallback_reason);
	FIELD(rocmmem_daemon_info, heap_bytes);
	FIELD(rocmmem_daemon_info, fds_open);
	FIELD(rocmmem_daemon_info, fds_limit);
}

static void device_info(void)
{
	STRUCT(rocmmem_device_info);
	FIELD(rocmmem_device_info, index);
	FIELD(rocmmem_device_info, name);
	FIELD(rocmmem_device_info, backend);
	FIELD(rocmmem_device_info, total_bytes);
	FIELD(rocmmem_device_info, budget_bytes);
	FIELD(rocmmem_device_info, headroom_bytes);
	FIELD(rocmmem_device_info, leased_bytes);
	FIELD(rocmmem_device_info, reserved_bytes);
	FIELD(rocmmem_device_info, free_bytes);
	FIELD(rocmmem_device_info, granule_bytes);
	FIELD(rocmmem_device_info, waiters);
	FIELD(rocmmem_device_info, leases);
	FIELD(rocmmem_device_info, handle_kind);
	FIELD(rocmmem_device_info, pci_bus_id);
	FIELD(rocmmem_device_info, integrated);
	FIELD(rocmmem_device_info, sharing);
	FIELD(rocmmem_device_info, state);
	FIELD(rocmmem_device_info, valid);
	FIELD(rocmmem_device_info, runtime_total_bytes);
	FIELD(rocmmem_device_info, runtime_free_bytes);
	FIELD(rocmmem_device_info, external_bytes);
	FIELD(rocmmem_device_info, telemetry_source);
	FIELD(rocmmem_device_info, vram_total_bytes);
	FIELD(rocmmem_device_info, vram_used_bytes);
	FIELD(rocmmem_device_info, gtt_total_bytes);
	FIELD(rocmmem_device_info, gtt_used_bytes);
	FIELD(rocmmem_device_info, temperature_mc);
	FIELD(rocmmem_device_info, power_mw);
	FIELD(rocmmem_device_info, busy_percent);
	FIELD(rocmmem_device_info, largest_grantable);
	FIELD(rocmmem_device_info, evictable_bytes);
	FIELD(rocmmem_device_info, largest_with_eviction);
	FIELD(rocmmem_device_info, oldest_wait_ms);
	FIELD(rocmmem_device_info, models_resident);
	FIELD(rocmmem_device_info, awaiting_redeclare_bytes);
	FIELD(rocmmem_device_info, measurable);
	FIELD(rocmmem_device_info, undeclared_bytes);
	FIELD(rocmmem_device_info, outside_bytes);
	FIELD(rocmmem_device_info, pool_bytes);
	FIELD(rocmmem_device_info, pool_chunks);
	FIELD(rocmmem_device_info, pool_limit_bytes);
	FIELD(rocmmem_device_info, pool_warm_grants);
	FIELD(rocmmem_device_info, pool_dropped_bytes);
}

static void process_info(void)
{
	STRUCT(rocmmem_process_info);
	FIELD(rocmmem_process_info, pid);
	FIELD(rocmmem_process_info, vram_bytes);
	FIELD(rocmmem_process_info, client);
}

static void client_info(void)
{
	STRUCT(rocmmem_client_info);
	FIELD(rocmmem_client_info, pid);
	FIELD(rocmmem_client_info, uid);
	FIELD(rocmmem_client_info, gid);
	FIELD(rocmmem_client_info, name);
	FIELD(rocmmem_client_info, leases);
	FIELD(rocmmem_client_info, leased_bytes);
	FIELD(rocmmem_client_info, connected_s);
	FIELD(rocmmem_client_info, client_id);
	FIELD(rocmmem_client_info, models);
	FIELD(rocmmem_client_info, reserved_bytes);
	FIELD(rocmmem_client_info, waiting);
	FIELD(rocmmem_client_info, pidfd);
	FIELD(rocmmem_client_info, books);
	FIELD(rocmmem_client_info, nbooks);
	FIELD(rocmmem_client_info, measurable);
	FIELD(rocmmem_client_info, declared_bytes);
	FIELD(rocmmem_client_info, measured_bytes);
	FIELD(rocmmem_client_info, undeclared_bytes);
	FIELD(rocmmem_client_info, arena_bytes);
	FIELD(rocmmem_client_info, arena_used_bytes);
	FIELD(rocmmem_client_info, arena_free_bytes);
	FIELD(rocmmem_client_info, arena_largest_free);
	FIELD(rocmmem_client_info, arena_fallbacks);
	STRUCT(rocmmem_client_books);
	FIELD(rocmmem_client_books, device);
	FIELD(rocmmem_client_books, measurable);
	FIELD(rocmmem_client_books, declared_bytes);
	FIELD(rocmmem_client_books, measured_bytes);
	FIELD(rocmmem_client_books, undeclared_bytes);
}

static void lease_info(void)
{
	STRUCT(rocmmem_lease_info);
	FIELD(rocmmem_lease_info, id);
	FIELD(rocmmem_lease_info, owner_pid);
	FIELD(rocmmem_lease_info, device);
	FIELD(rocmmem_lease_info, bytes);
	FIELD(rocmmem_lease_info, tag);
	FIELD(rocmmem_lease_info, age_ms);
	FIELD(rocmmem_lease_info, model_id);
}

static void model_info(void)
{
	STRUCT(rocmmem_model_info);
	FIELD(rocmmem_model_info, id);
	FIELD(rocmmem_model_info, name);
	FIELD(rocmmem_model_info, model_class);
	FIELD(rocmmem_model_info, owner_pid);
	FIELD(rocmmem_model_info, device);
	FIELD(rocmmem_model_info, bytes);
	FIELD(rocmmem_model_info, state);
	FIELD(rocmmem_model_info, priority);
	FIELD(rocmmem_model_info, pinned);
	FIELD(rocmmem_model_info, size);
	FIELD(rocmmem_model_info, reservation_bytes);
	FIELD(rocmmem_model_info, lease_bytes);
	FIELD(rocmmem_model_info, idle_ms);
	FIELD(rocmmem_model_info, use_count);
	FIELD(rocmmem_model_info, evictions);
}

static void waiter_info(void)
{
	STRUCT(rocmmem_waiter_info);
	FIELD(rocmmem_waiter_info, owner_pid);
	FIELD(rocmmem_waiter_info, device);
	FIELD(rocmmem_waiter_info, bytes);
	FIELD(rocmmem_waiter_info, waited_ms);
	FIELD(rocmmem_waiter_info, timeout_ms);
	FIELD(rocmmem_waiter_info, tag);
	FIELD(rocmmem_waiter_info, model_id);
}

static void counters(void)
{
	STRUCT(rocmmem_counters);
	FIELD(rocmmem_counters, grants);
	FIELD(rocmmem_counters, denials);
	FIELD(rocmmem_counters, timeouts);
	FIELD(rocmmem_counters, evictions);
	FIELD(rocmmem_counters, revocations);
	FIELD(rocmmem_counters, trims);
	FIELD(rocmmem_counters, bytes_trimmed);
	FIELD(rocmmem_counters, releases);
	FIELD(rocmmem_counters, reclaimed);
	FIELD(rocmmem_counters, failures);
	FIELD(rocmmem_counters, connections);
}

static void limit_info(void)
{
	STRUCT(rocmmem_limit_info);
	FIELD(rocmmem_limit_info, name);
	FIELD(rocmmem_limit_info, value);
	FIELD(rocmmem_limit_info, unlimited);
	FIELD(rocmmem_limit_info, hits);
}

static void access_info(void)
{
	STRUCT(rocmmem_access_info);
	FIELD(rocmmem_access_info, peers_refused);
	FIELD(rocmmem_access_info, requests_refused);
}

static void awaiting_info(void)
{
	STRUCT(rocmmem_awaiting_info);
	FIELD(rocmmem_awaiting_info, device);
	FIELD(rocmmem_awaiting_info, pid);
	FIELD(rocmmem_awaiting_info, uid);
	FIELD(rocmmem_awaiting_info, leases);
	FIELD(rocmmem_awaiting_info, lease_bytes);
	FIELD(rocmmem_awaiting_info, models);
	FIELD(rocmmem_awaiting_info, reserved_bytes);
	FIELD(rocmmem_awaiting_info, grace_left_ms);
}

static void denial_info(void)
{
	STRUCT(rocmmem_denial_info);
	FIELD(rocmmem_denial_info, timestamp_ms);
	FIELD(rocmmem_denial_info, pid);
	FIELD(rocmmem_denial_info, client_name);
	FIELD(rocmmem_denial_info, device);
	FIELD(rocmmem_denial_info, bytes);
	FIELD(rocmmem_denial_info, model_id);
	FIELD(rocmmem_denial_info, model_name);
	FIELD(rocmmem_denial_info, error);
	FIELD(rocmmem_denial_info, reason);
}

static void model_desc(void)
{
	STRUCT(rocmmem_model_desc);
	FIELD(rocmmem_model_desc, struct_size);
	FIELD(rocmmem_model_desc, device);
	FIELD(rocmmem_model_desc, name);
	FIELD(rocmmem_model_desc, model_class);
	FIELD(rocmmem_model_desc, size);
	FIELD(rocmmem_model_desc, priority);
	FIELD(rocmmem_model_desc, pinned);
}

static void sample_info(void)
{
	STRUCT(rocmmem_sample_info);
	FIELD(rocmmem_sample_info, timestamp_ms);
	FIELD(rocmmem_sample_info, interval_ms);
	FIELD(rocmmem_sample_info, dropped);
	FIELD(rocmmem_sample_info, clients_omitted);
	FIELD(rocmmem_sample_info, models_omitted);
	FIELD(rocmmem_sample_info, waiters);
	FIELD(rocmmem_sample_info, oldest_wait_ms);
	FIELD(rocmmem_sample_info, uptime_ms);
}

static void telemetry_event(void)
{
	STRUCT(rocmmem_telemetry_event);
	FIELD(rocmmem_telemetry_event, type);
	FIELD(rocmmem_telemetry_event, timestamp_ms);
	FIELD(rocmmem_telemetry_event, pid);
	FIELD(rocmmem_telemetry_event, client_name);
	FIELD(rocmmem_telemetry_event, client_id);
	FIELD(rocmmem_telemetry_event, has_device);
	FIELD(rocmmem_telemetry_event, device);
	FIELD(rocmmem_telemetry_event, bytes);
	FIELD(rocmmem_telemetry_event, lease_id);
	FIELD(rocmmem_telemetry_event, model_id);
	FIELD(rocmmem_telemetry_event, model_name);
	FIELD(rocmmem_telemetry_event, error);
	FIELD(rocmmem_telemetry_event, waited_ms);
	FIELD(rocmmem_telemetry_event, detail);
	FIELD(rocmmem_telemetry_event, dropped);
	FIELD(rocmmem_telemetry_event, declared_bytes);
}

static void event(void)
{
	STRUCT(rocmmem_event);
	FIELD(rocmmem_event, type);
	FIELD(rocmmem_event, seq);
	FIELD(rocmmem_event, reason);
	FIELD(rocmmem_event, model_id);
	FIELD(rocmmem_event, lease_id);
	FIELD(rocmmem_event, bytes_needed);
	FIELD(rocmmem_event, deadline_ms);
	FIELD(rocmmem_event, sample);
	FIELD(rocmmem_event, sample_info);
	FIELD(rocmmem_event, telemetry);
	FIELD(rocmmem_event, generation);
}

static void wait_progress(void)
{
	STRUCT(rocmmem_wait_progress);
	FIELD(rocmmem_wait_progress, struct_size);
	FIELD(rocmmem_wait_progress, request);
	FIELD(rocmmem_wait_progress, request_model_id);
	FIELD(rocmmem_wait_progress, requested);
	FIELD(rocmmem_wait_progress, device);
	FIELD(rocmmem_wait_progress, position);
	FIELD(rocmmem_wait_progress, queued);
	FIELD(rocmmem_wait_progress, reason);
	FIELD(rocmmem_wait_progress, needed);
	FIELD(rocmmem_wait_progress, free_bytes);
	FIELD(rocmmem_wait_progress, model_id);
	FIELD(rocmmem_wait_progress, model_name);
	FIELD(rocmmem_wait_progress, owner_pid);
	FIELD(rocmmem_wait_progress, owner_name);
	FIELD(rocmmem_wait_progress, owner_client_id);
	FIELD(rocmmem_wait_progress, deadline_ms);
	FIELD(rocmmem_wait_progress, bytes);
	FIELD(rocmmem_wait_progress, evictions);
	FIELD(rocmmem_wait_progress, waited_ms);
	FIELD(rocmmem_wait_progress, eviction_ended);
}

static void connect_options(void)
{
	STRUCT(rocmmem_connect_options);
	FIELD(rocmmem_connect_options, struct_size);
	FIELD(rocmmem_connect_options, socket_path);
	FIELD(rocmmem_connect_options, name);
	FIELD(rocmmem_connect_options, timeout_ms);
	FIELD(rocmmem_connect_options, flags);
	FIELD(rocmmem_connect_options, reconnect_window_ms);
}

static void evict_result(void)
{
	STRUCT(rocmmem_evict_result);
	FIELD(rocmmem_evict_result, struct_size);
	FIELD(rocmmem_evict_result, bytes_freed);
	FIELD(rocmmem_evict_result, revoked);
}

static void constants(void)
{
	printf("enum %zu\n", sizeof(enum rocmmem_event_type));
	CONST(ROCMMEM_HANDLE_NONE);
	CONST(ROCMMEM_HANDLE_MEMFD);
	CONST(ROCMMEM_HANDLE_VMM_FD);
	CONST(ROCMMEM_HANDLE_DMABUF);
	CONST(ROCMMEM_HANDLE_IPC);
	CONST(ROCMMEM_LEASE_NOMAP);
	CONST(ROCMMEM_DEVICE_HAS_RUNTIME);
	CONST(ROCMMEM_DEVICE_HAS_VRAM);
	CONST(ROCMMEM_DEVICE_HAS_GTT);
	CONST(ROCMMEM_DEVICE_HAS_TEMPERATURE);
	CONST(ROCMMEM_DEVICE_HAS_POWER);
	CONST(ROCMMEM_DEVICE_HAS_BUSY);
	CONST(ROCMMEM_MODEL_OTHER);
	CONST(ROCMMEM_MODEL_TRANSFORMER);
	CONST(ROCMMEM_MODEL_VAE);
	CONST(ROCMMEM_MODEL_TEXT_ENCODER);
	CONST(ROCMMEM_MODEL_IMAGE_ENCODER);
	CONST(ROCMMEM_MODEL_IDLE);
	CONST(ROCMMEM_MODEL_IN_USE);
	CONST(ROCMMEM_MODEL_EVICTING);
	CONST(ROCMMEM_MODEL_EVICTED);
	CONST(ROCMMEM_MODEL_WAITING);
	CONST(ROCMMEM_EVENT_SHUTDOWN);
	CONST(ROCMMEM_EVENT_EVICT_REQUEST);
	CONST(ROCMMEM_EVENT_MODEL_REVOKED);
	CONST(ROCMMEM_EVENT_LEASE_REVOKED);
	CONST(ROCMMEM_EVENT_DISCONNECTED);
	CONST(ROCMMEM_EVENT_SAMPLE);
	CONST(ROCMMEM_EVENT_TELEMETRY);
	CONST(ROCMMEM_EVENT_RECONNECTING);
	CONST(ROCMMEM_EVENT_RECONNECTED);
	CONST(ROCMMEM_EVENT_OTHER);
	CONST(ROCMMEM_CONNECT_NO_RECONNECT);
	CONST(ROCMMEM_CONNECT_NO_WAIT);
	CONST(ROCMMEM_CONNECTED);
	CONST(ROCMMEM_RECONNECTING);
	CONST(ROCMMEM_DISCONNECTED);
	CONST(ROCMMEM_SUBSCRIBE_SAMPLES);
	CONST(ROCMMEM_SUBSCRIBE_EVENTS);
	CONST(ROCMMEM_SAMPLE_INTERVAL_MIN_MS);
	CONST(ROCMMEM_SAMPLE_INTERVAL_MAX_MS);
	CONST(ROCMMEM_VERSION_MAJOR);
	CONST(ROCMMEM_VERSION_MINOR);
	CONST(ROCMMEM_VERSION_PATCH);
	CONST(ROCMMEM_VERSION_NUMBER);
	CONST(ROCMMEM_NO_WAIT);
	CONST(ROCMMEM_WAIT_FOREVER);
	CONST(ROCMMEM_ALL_DEVICES);
	/* Whether each is signed: -1 converted to it is below 1 only then. */
	printf("typedef rocmmem_timeout_ms %zu %d\n", sizeof(rocmmem_timeout_ms),
	       (rocmmem_timeout_ms)-1 < (rocmmem_timeout_ms)1);
	printf("typedef rocmmem_device_index %zu %d\n", sizeof(rocmmem_device_index),
	       (rocmmem_device_index)-1 < (rocmmem_device_index)1);
}

int main(void)
{
	lease_request();
	daemon_info();
	device_info();
	process_info();
	client_info();
	lease_info();
	model_info();
	waiter_info();
	counters();
	denial_info();
	limit_info();
	access_info();
	awaiting_info();
	model_desc();
	sample_info();
	telemetry_event();
	event();
	wait_progress();
	connect_options();
	evict_result();
	constants();
	return fflush(stdout) == 0 ? 0 : 1;
}
