/* SPDX-License-Identifier: MIT */
/* limits.c: the caps' names and values, and the descriptor arithmetic. */
#include "limits.h"

static const char *const names[LIMIT_COUNT] = {
    [LIMIT_CLIENTS] = "clients",
    [LIMIT_CLIENTS_PER_UID] = "clients_per_uid",
    [LIMIT_PENDING] = "pending",
    [LIMIT_LEASES] = "leases",
    [LIMIT_MODELS] = "models",
    [LIMIT_QUEUED] = "queued",
    [LIMIT_BYTES_PER_UID] = "bytes_per_uid",
    [LIMIT_MESSAGE_SIZE] = "message_size",
    [LIMIT_HANDSHAKE_TIMEOUT] = "handshake_timeout",
    [LIMIT_SUBSCRIBERS] = "subscribers",
    [LIMIT_DESCRIPTORS] = "descriptors",
};

const char *limit_name(enum limit_id id)
{
	return (unsigned)id < LIMIT_COUNT ? names[id] : "?";
}

void limit_value(const struct limits *l, uint64_t fd_limit, enum limit_id id, uint64_t *value,
		 bool *unlimited)
{
	*unlimited = false;
	switch (id) {
	case LIMIT_CLIENTS:
		*value = l->max_clients;
		break;
	case LIMIT_CLIENTS_PER_UID:
		*value = l->max_clients_per_uid;
		break;
	case LIMIT_PENDING:
		*value = l->max_pending;
		break;
	case LIMIT_LEASES:
		*value = l->max_leases;
		break;
	case LIMIT_MODELS:
		*value = LIMITS_MAX_MODELS;
		break;
	case LIMIT_QUEUED:
		*value = l->max_queued_out;
		break;
	case LIMIT_BYTES_PER_UID:
		*value = l->max_bytes_per_uid;
		*unlimited = l->max_bytes_per_uid == 0;
		break;
	case LIMIT_MESSAGE_SIZE:
		*value = l->max_message;
		break;
	case LIMIT_HANDSHAKE_TIMEOUT:
		*value = l->handshake_timeout_ms;
		break;
	case LIMIT_SUBSCRIBERS:
		*value = l->max_subscribers;
		break;
	default:
		*value = fd_limit;
		break;
	}
}

void fd_caps_compute(uint64_t fd_limit, uint64_t fd_own, const struct limits *l,
		     struct fd_caps *out)
{
	uint64_t room;

	out->limit = fd_limit;
	out->own = fd_own;
	room = out->limit > out->own ? out->limit - out->own : 0;
	out->connections = LIMITS_FDS_PER_CONNECTION * (uint64_t)l->max_clients;
	if (out->connections > room / 2)
		out->connections = room / 2;
	out->total = room - out->connections;
	out->per_uid = out->total / 2;
}
