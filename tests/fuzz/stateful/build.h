/* SPDX-License-Identifier: MIT */
/* build.h: turning an operation into the ClientMessage it sends. */
#ifndef ROCMMEM_TEST_STATEFUL_BUILD_H
#define ROCMMEM_TEST_STATEFUL_BUILD_H

#include "rocmmem.pb-c.h"
#include "stateful.h"

/* Chunk sizes a re-declaration carries at most (nchunks beyond is capped). */
#define BUILD_CHUNKS_MAX 80

/* A request and every body it may point to. */
struct outgoing {
	Rocmmem__Wire__ClientMessage msg;
	union {
		Rocmmem__Wire__Hello hello;
		Rocmmem__Wire__LeaseAcquire acquire;
		Rocmmem__Wire__LeaseRelease release;
		Rocmmem__Wire__StatusRequest status;
		Rocmmem__Wire__ModelRegister reg;
		Rocmmem__Wire__ModelAcquire macquire;
		Rocmmem__Wire__ModelRelease mrelease;
		Rocmmem__Wire__ModelResize resize;
		Rocmmem__Wire__ModelUnregister unregister;
		Rocmmem__Wire__EvictAck ack;
		Rocmmem__Wire__Subscribe subscribe;
		Rocmmem__Wire__Unsubscribe unsubscribe;
		Rocmmem__Wire__TrimRequest trim;
		Rocmmem__Wire__MetricsRequest metrics;
		Rocmmem__Wire__AdminRequest admin;
		Rocmmem__Wire__LeaseRedeclare lredeclare;
		Rocmmem__Wire__ModelRedeclare mredeclare;
		Rocmmem__Wire__RedeclareDone done;
	} b;
	union {
		Rocmmem__Wire__AdminEvictModel evict;
		Rocmmem__Wire__AdminPinModel pin;
		Rocmmem__Wire__AdminSetBudget budget;
		Rocmmem__Wire__AdminRevokeLease revoke;
		Rocmmem__Wire__AdminDisconnectClient disconnect;
		Rocmmem__Wire__AdminSetLogLevel level;
	} a;
	uint64_t chunks[BUILD_CHUNKS_MAX];
	char str[OP_STR_MAX];
};

/*
 * build_request fills o with op's request: id rid (absent with OPF_NOID), lease and model
 * ids as resolved by the caller, every other field as the operation sets it.
 */
void build_request(struct outgoing *o, const struct op *op, uint64_t rid, uint64_t lease,
		   uint64_t model);

#endif
