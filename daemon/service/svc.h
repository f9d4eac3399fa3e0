/* SPDX-License-Identifier: MIT */
/*
 * svc.h: the service's state and the hooks its user installs: where replies and notices go
 * (the sink), the clock, and the backend jobs. Shared by every file of service/; the requests
 * it serves are in service.h.
 */
#ifndef ROCMMEMD_SVC_H
#define ROCMMEMD_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "clock.h"
#include "counters.h"
#include "denials.h"
#include "eventlog.h"
#include "platform/backend/backend.h"
#include "platform/job.h"
#include "platform/statefile.h"
#include "policy/policy.h"
#include "progress.h"
#include "state/state.h"

/*
 * The state file (service/adopt.c): what the previous daemon left is in state.adoption;
 * this is the file itself and what recording into it needs.
 */
struct adopt {
	struct svc *svc;
	struct adoption *books; /* the records awaiting re-declaration: svc->state.adoption */
	struct statefile file;
	bool have_file;
	uint64_t grace_ms;
	uint64_t issued_model_ids; /* model ids below it were handed out by an earlier daemon */
	char why_full[256];
};

/* What a reply carries (net/ turns it into the wire's Reply). */
enum svc_reply_kind {
	SVC_OK,	       /* success, no body */
	SVC_ERROR,     /* err and message */
	SVC_LEASE,     /* a lease granted: lease (its fds ride with it), waited_ms */
	SVC_RESIDENCY, /* an acquire or resize: model's id, generation and reservation */
	SVC_MODEL,     /* a registration (or re-declaration: with reservation and a note) */
	SVC_TRIM,      /* bytes trimmed */
	SVC_EVICTED,   /* an administrator's eviction: bytes freed, revoked */
};

struct svc_reply {
	enum svc_reply_kind kind;
	int err;	     /* SVC_ERROR: a negative errno */
	const char *message; /* SVC_ERROR's text; SVC_MODEL's note, or NULL */
	const struct lease *lease;
	uint64_t waited_ms;
	const struct model *model;
	bool has_reservation; /* SVC_MODEL */
	uint64_t bytes;	      /* SVC_TRIM: trimmed; SVC_EVICTED: freed */
	bool revoked;	      /* SVC_EVICTED */
	bool send_arena_fd;   /* SVC_LEASE in an arena: its fd goes with it (the first time) */
};

/* What the service tells a holder unasked (net/ numbers it as an Event). */
enum svc_notice_kind {
	NOTE_EVICT_REQUEST, /* unload model_id (generation) by deadline_ms for bytes_needed */
	NOTE_MODEL_REVOKED, /* model_id (generation) was taken back: reason */
	NOTE_LEASE_REVOKED, /* lease_id went with model_id's residency (generation): reason */
	NOTE_WAIT_PROGRESS, /* what a waiting request waits for: progress (service/progress.c) */
};

struct svc_notice {
	enum svc_notice_kind kind;
	uint64_t model_id;
	uint64_t generation;
	uint64_t lease_id;
	uint64_t bytes_needed;
	uint64_t deadline_ms; /* how long the owner has */
	const char *reason;
	const struct svc_progress *progress; /* NOTE_WAIT_PROGRESS */
};

/* Installed by the service's user (net/, or the simulator's recorder). */
struct svc_sink {
	void *ctx;
	/* reply answers request_id of a holder; what r points to is valid during the call. */
	void (*reply)(void *ctx, uint64_t holder, uint64_t request_id, const struct svc_reply *r);
	void (*notify)(void *ctx, uint64_t holder, const struct svc_notice *n);
	/* due_changed says when svc_tick must be called next (UINT64_MAX: no deadline). */
	void (*due_changed)(void *ctx, uint64_t due_ms);
};

/* Runs backend jobs (platform/job.h): at once, or on a worker thread and done later. */
struct job_runner {
	void *ctx;
	/* submit returns 0 (job->done is called, perhaps before submit returns) or a negative
	 * errno (done is not called). */
	int (*submit)(void *ctx, struct job *job);
};

/* Residency settings from the command line (or configuration). */
struct residency_config {
	uint64_t evict_deadline_ms;
	/* Per device: classes never resident together; _all applies to every device. */
	struct class_exclusion exclusive[BACKEND_MAX_DEVICES];
	struct class_exclusion exclusive_all;
};

struct svc {
	struct state state;	  /* the books */
	struct policy_config cfg; /* the settings in force */
	struct policy_scratch scratch;
	struct backend *backend;
	struct job_runner runner;
	const struct svc_clock *clock;
	struct svc_sink sink;
	struct bus bus;		  /* what happens, told once, to: */
	struct eventlog eventlog; /* the log, */
	struct counters counters; /* the counters, */
	struct denials denials;	  /* the latest refusals (status); and the feed (net/) */
	struct adopt *adopt;	  /* the state file (service/adopt.c) */
	/* The apply loop over policy_next (service/pump.c), which the lower files of the service
	 * run after what may let a waiting request through. */
	void (*pump)(struct svc *svc);
	bool pumping;
	bool pump_again;
	unsigned pump_decisions; /* what the last svc_pump applied (the simulator bounds it) */
	/* Told each decision of policy_next before svc_pump applies it, the books as the policy
	 * saw them; NULL in the daemon (the simulator judges them: tests/sim/decide.c). */
	void (*decided)(struct svc *svc, const struct policy_decision *d);
	uint64_t due_ms;	  /* what due_changed last said */
	struct progress progress; /* waiting requests told what they wait for */
	int32_t self_pid;	  /* the daemon's pid: its measured memory is the leases */
};

static inline uint64_t svc_now(const struct svc *svc)
{
	return svc->clock->mono_ms(svc->clock->ctx);
}

#endif
