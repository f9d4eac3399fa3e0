/* SPDX-License-Identifier: MIT */
/*
 * residency.h: what the residency decisions do to models: a reservation made, an owner asked to
 * unload, a model's memory taken back (acked or revoked), a model forgotten.
 */
#ifndef ROCMMEMD_SVC_RESIDENCY_H
#define ROCMMEMD_SVC_RESIDENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "svc.h"

/*
 * svc_model_grant applies a model request's grant: reserve bytes (GRANT_MODEL_LOAD, GROW), a
 * resize ending at target exactly; in use (LOAD, IN_USE); the reservation set to bytes
 * (SHRINK); and answers holder's request_id with the residency.
 */
void svc_model_grant(struct svc *svc, struct model *m, enum policy_grant grant, uint64_t bytes,
		     uint64_t target, uint64_t holder, uint64_t request_id, uint64_t waited_ms);

/*
 * svc_evict asks m's owner to unload it by due_ms, for for_holder's request of bytes_needed
 * (for_holder 0: an administrator's, or its maximum hold); a model in use is asked to be
 * released too, for the reason `released` says. Returns false when it could not (out of
 * memory): m is not being evicted then.
 */
bool svc_evict(struct svc *svc, struct model *m, uint64_t bytes_needed, uint64_t for_holder,
	       uint64_t due_ms, const char *released);

/* svc_hold_start arms m's maximum hold as it comes into use (none when off for its class);
 * svc_hold_end disarms it as it stops being in use. */
void svc_hold_start(struct svc *svc, struct model *m);
void svc_hold_end(struct svc *svc, struct model *m);

/*
 * svc_unload takes a model's memory back: after its owner's ack, or when revoked (reason set).
 * Its tagged leases are freed and revoked, and an administrator waiting is answered.
 */
void svc_unload(struct svc *svc, struct model *m, const char *revoked);

/* svc_answer_admin tells an administrator waiting on m's eviction how it ended. */
void svc_answer_admin(struct svc *svc, struct model *m, bool revoked, uint64_t bytes_freed);

/* svc_model_destroy frees everything a model holds and forgets it; its waiters must be gone. */
void svc_model_destroy(struct svc *svc, struct model *m);

/* A model as its owner registers (or re-declares) it. */
struct svc_model_desc {
	unsigned device;
	const char *name;
	unsigned model_class; /* < MODEL_CLASSES */
	bool has_size;
	uint64_t size; /* reserved by acquire when not resident (0: leases only) */
	int32_t priority;
	bool pinned;
};

/*
 * svc_model_create registers a model for holder h as desc says, without replying on success:
 * under want_id when that id is free or reserved for it (a model re-declared after a restart),
 * else under a fresh id. Returns the model, or NULL after answering the refusal.
 */
struct model *svc_model_create(struct svc *svc, struct holder *h, uint64_t request_id,
			       const struct svc_model_desc *desc, uint64_t want_id);

#endif
