/* SPDX-License-Identifier: MIT */
/* model.h: a registered model: its memory, its use, its place in eviction order. */
#ifndef ROCMMEMD_MODEL_H
#define ROCMMEMD_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "base/idtable.h"
#include "version.h"

struct holder;

/* Classes as on the wire (ROCMMEM__WIRE__MODEL_CLASS__*). */
#define MODEL_CLASSES 5u

/* The highest generation a re-declaring client may carry over: far from wrapping. */
#define MODEL_GENERATION_MAX ((uint64_t)1 << 62)

enum model_state {
	MODEL_EVICTED,	/* holds no memory */
	MODEL_IDLE,	/* resident, not in use: evictable unless pinned */
	MODEL_IN_USE,	/* between acquire and release */
	MODEL_EVICTING, /* asked to unload; the owner has until the deadline */
};

struct model {
	uint64_t id;
	struct holder *owner;
	unsigned device;
	char name[ROCMMEM_NAME_MAX + 1];
	unsigned model_class;
	uint64_t size;	  /* reserved by acquire when not resident (0: leases only) */
	int32_t priority; /* higher stays resident longer */
	bool pinned;
	uint64_t reservation; /* bytes accounted without a lease */
	uint64_t lease_bytes; /* bytes of the owner's leases tagged with this model */
	unsigned use_count;   /* acquires not yet released */
	bool evicting;
	/* Its residency's number: 1 at registration, one more each time its memory is taken
	 * back (acked or revoked). Evictions name it, acks echo it (docs/residency.md). */
	uint64_t generation;
	uint64_t evict_started_ms;
	uint64_t last_used_ms; /* loop time of the last acquire or release */
	uint64_t evictions;
	unsigned waiters; /* requests waiting on this model's behalf */
	/* An administrator's evict request, answered when the eviction is done. */
	uint64_t evict_requester; /* the administrator's holder id, 0: none */
	uint64_t evict_request_id;
	uint32_t state_slot;   /* its reservation's record in the state file (adopt.c), 0: none */
	uint64_t evict_due_ms; /* while evicting: when it is revoked without an ack */
	uint32_t heap_slot;    /* that deadline in state.deadlines, 0: none */
	TAILQ_ENTRY(model) holder_link;
	TAILQ_ENTRY(model) device_link;
};

TAILQ_HEAD(model_list, model);

static inline uint64_t model_resident(const struct model *m)
{
	return m->reservation + m->lease_bytes;
}

static inline enum model_state model_state(const struct model *m)
{
	if (m->evicting)
		return MODEL_EVICTING;
	if (m->use_count > 0)
		return MODEL_IN_USE;
	return model_resident(m) > 0 ? MODEL_IDLE : MODEL_EVICTED;
}

/* model_evictable says whether the daemon may ask m's owner to unload it now. */
static inline bool model_evictable(const struct model *m)
{
	return model_state(m) == MODEL_IDLE && !m->pinned;
}

/*
 * Classes that may not be resident together on one device (--exclusive): bit d of excludes[c]
 * is set when classes c and d exclude each other. Each --exclusive group adds every pair of
 * its classes, so "transformer,vae" and "text_encoder,image_encoder" stay two separate rules.
 */
struct class_exclusion {
	unsigned excludes[MODEL_CLASSES];
};

/* class_exclusion_add makes every two classes of group (bit per class) exclude each other. */
void class_exclusion_add(struct class_exclusion *x, unsigned group);

/* class_exclusion_merge adds every pair of src to dst. */
void class_exclusion_merge(struct class_exclusion *dst, const struct class_exclusion *src);

/* class_exclusion_any says whether any two classes exclude each other. */
bool class_exclusion_any(const struct class_exclusion *x);

/* class_exclusion_conflict says whether distinct classes a and b may not be resident together. */
bool class_exclusion_conflict(const struct class_exclusion *x, unsigned a, unsigned b);

/* class_exclusion_format writes the pairs, e.g. "transformer/vae, text_encoder/image_encoder". */
void class_exclusion_format(const struct class_exclusion *x, char *buf, size_t len);

/* model_class_name names a class for messages ("transformer", ...). */
const char *model_class_name(unsigned model_class);

/*
 * model_class_parse maps a class name to its number. Returns 0 or -EINVAL.
 */
int model_class_parse(const char *name, unsigned *out);

#endif
