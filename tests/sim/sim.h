/* SPDX-License-Identifier: MIT */
/*
 * sim.h: the deterministic simulator of the daemon's service (docs/architecture.md, "The
 * simulator"): thousands of virtual clients drive the real state, policy and service through
 * a recorder in place of connections, a virtual backend and a job runner on a virtual clock,
 * and the invariants are checked after every step. One seed decides everything.
 */
#ifndef ROCMMEM_SIM_H
#define ROCMMEM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/idtable.h"
#include "rng.h"
#include "service/service.h"

#define SIM_MAX_DEVICES 4u
#define SIM_MAX_OUT 8u	   /* requests one client has outstanding at once */
#define SIM_MAX_LEASES 16u /* leases one client holds */
#define SIM_MAX_MODELS 4u  /* models one client registers */
#define SIM_TRACE 64u	   /* the last actions, printed on failure */
#define SIM_GRANULE (2ull << 20)
#define SIM_EVICT_DEADLINE_MS 2000u
#define SIM_EPOCH_MS 1000000u /* where the virtual monotonic clock starts */

struct sim_options {
	uint64_t seed;
	uint64_t steps;
	unsigned clients; /* at most connected at once */
	unsigned devices;
	const char *mix;      /* "all" or one behaviour's name */
	uint64_t trace_from;  /* print every action from this step on (UINT64_MAX: none) */
	unsigned check_every; /* the full recount, every this many steps */
	uint64_t lose_after;  /* from this step on a backend job may report its device gone */
};

enum sim_behaviour {
	SIM_LEASER,    /* leases of random sizes and timeouts, released after a while */
	SIM_FRAMEPACK, /* one model in use while acquiring another: hold and wait */
	SIM_SWITCHER,  /* ComfyUI: acquire one of its models, release, the next */
	SIM_RESIZER,   /* a model's reservation grown and shrunk */
	SIM_ADMIN,     /* root: evicts and pins anyone's models, trims */
	SIM_BEHAVIOURS,
};

/* How an owner answers an evict request. */
enum sim_ack { ACK_NOW, ACK_LATE, ACK_NEVER, ACK_DIE };

enum sim_req_kind {
	REQ_LEASE,
	REQ_RELEASE,
	REQ_REGISTER,
	REQ_ACQUIRE,
	REQ_MODEL_RELEASE,
	REQ_RESIZE,
	REQ_UNREGISTER,
	REQ_ACK,
	REQ_ADMIN_EVICT,
	REQ_PIN,
	REQ_TRIM,
};

/* A request sent and not answered yet. */
struct sim_req {
	uint64_t id;
	enum sim_req_kind kind;
	unsigned slot; /* the model's slot in the client, where it applies */
	uint64_t arg;  /* the lease or model id it names, where it applies */
	uint64_t sent_ms;
	/* Progress (invariant 13): asked for, and what the last notice said and when. */
	bool progress;
	bool told;
	uint64_t told_ms;
	unsigned told_reason;
	uint64_t told_model;
};

struct sim_model {
	bool used;   /* the slot is taken (registering or registered) */
	uint64_t id; /* 0 until registered */
	unsigned device;
	unsigned cls;
	uint64_t size;
	unsigned in_use; /* acquires granted and not released */
	bool busy;	 /* a request about it is outstanding */
};

struct sim_lease {
	uint64_t id;
	uint64_t size;
	bool releasing;
};

struct sim_client {
	uint64_t holder; /* its holder's id in the service */
	unsigned index;	 /* in world.clients */
	enum sim_behaviour kind;
	enum sim_ack ack;
	unsigned device;      /* where it works */
	unsigned phase;	      /* where its behaviour stands */
	uint64_t patience_ms; /* how long it waits for memory before it gives up and goes */
	uint64_t next_id;
	struct sim_req out[SIM_MAX_OUT];
	unsigned nout;
	struct sim_lease leases[SIM_MAX_LEASES];
	unsigned nleases;
	struct sim_model models[SIM_MAX_MODELS];
	bool dying; /* asked to unload and dies for it: disconnects at the next step */
	/* The oracle's marks: behind the head it judges (stamp), at which first request. */
	uint64_t stamp;
	uint64_t first_seq;
	uint64_t idle_stamp;
};

/* Something a client does later: an ack, or dying. */
enum sim_later_kind { LATER_ACK, LATER_DIE };

struct sim_later {
	uint64_t due_ms;
	enum sim_later_kind kind;
	uint64_t holder;
	uint64_t model;
	uint64_t generation;
};

/* An evict request told to an owner, which must end (ack or revocation) by its deadline. */
struct sim_eviction {
	uint64_t model;
	uint64_t generation;
	uint64_t holder;
	uint64_t due_ms;
};

struct sim_stats {
	uint64_t connects, disconnects, requests, replies, grants, refusals, notices;
	uint64_t jobs, job_failures, acks, revocations, reconfigures, bypasses, full_checks;
	uint64_t oracle_checks;
	uint64_t backfills, progress, hold_asks, forced, idle_checks;
	uint64_t stalls; /* steps at which every client waited and only timeouts could help */
	uint64_t first_stall;
	unsigned longest_queue; /* the most requests waiting on one device after a step */
};

struct world {
	struct sim_options opt;
	struct rng rng;
	uint64_t now; /* the virtual monotonic clock, ms */
	uint64_t due; /* when the service said svc_tick is due next */
	struct svc svc;
	struct svc_clock clock;
	struct job_runner runner;
	struct budget_config budgets[BACKEND_MAX_DEVICES];
	struct residency_config residency;
	struct policy_config cfg;
	/* Backend jobs submitted and not done, and what they hold on each device. */
	struct job **jobs;
	size_t njobs, jobs_cap;
	uint64_t allocating[SIM_MAX_DEVICES];
	uint64_t releasing[SIM_MAX_DEVICES];
	/* The clients connected now, and by holder id. */
	struct sim_client **clients;
	unsigned nclients, clients_cap;
	struct idtable by_holder;
	uint64_t highest_model;
	pid_t next_pid;
	struct sim_later *later;
	size_t nlater, later_cap;
	struct sim_eviction *evictions;
	size_t nevictions, evictions_cap;
	/* Invariant 1: a device over its budget after a reload grants nothing until under. */
	bool over[SIM_MAX_DEVICES];
	uint64_t over_used[SIM_MAX_DEVICES];
	bool device_lost;
	bool forcing;	       /* an administrator's forced eviction is being made (invariant 12) */
	bool backfill_toggles; /* reloads turn backfilling on and off */
	unsigned passes_max;   /* the highest --backfill-passes in force over the run */
	uint64_t *pieces, *sums; /* invariants 9 and 11: models in use by size, running sums */
	size_t pieces_cap;
	uint64_t idle_stamp; /* invariant 11's walk: holders seen (sim_client.idle_stamp) */
	uint64_t stamp;	     /* the oracle's current mark (sim_client.stamp) */
	uint64_t step;
	struct sim_stats stats;
	char trace[SIM_TRACE][192];
	unsigned trace_next;
	bool failed;
};

/* sim.c */
void sim_trace(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sim_fail reports a broken invariant (the first one ends the run). */
void sim_fail(struct world *w, const char *invariant, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* vbackend.c: the "sim" backend: devices that exist only in the books. */
struct backend *vbackend_create(unsigned devices);
uint64_t vbackend_total(void);

/* runner.c: jobs done at the simulator's choosing. */
void runner_init(struct world *w);
/* runner_complete finishes one job: the oldest, or (out of order) a random one. */
void runner_complete(struct world *w, bool random_one);
void runner_finish(struct world *w);

/* recorder.c: the service's sink, handing replies and notices to the clients. */
void recorder_install(struct world *w);

/* world.c: clients coming, acting and going. */
struct sim_client *world_connect(struct world *w);
void world_disconnect(struct world *w, struct sim_client *c, const char *why);
void world_act(struct world *w, struct sim_client *c);
struct sim_client *world_client(struct world *w, uint64_t holder);
void world_later(struct world *w, const struct sim_later *l);
void world_run_later(struct world *w);
void world_on_reply(struct world *w, struct sim_client *c, const struct sim_req *q,
		    const struct svc_reply *r);
void world_on_notice(struct world *w, struct sim_client *c, const struct svc_notice *n);
/* world_send records a request before it is made; returns its id. */
uint64_t world_send(struct world *w, struct sim_client *c, enum sim_req_kind kind, unsigned slot,
		    uint64_t arg);

/* behave.c: what each kind of client does next. */
void behave(struct world *w, struct sim_client *c);
/* behave_release_model releases the model c has in use (an owner asked to give it up);
 * false when it holds none in use that it may release now. */
bool behave_release_model(struct world *w, struct sim_client *c, uint64_t model);

/* checks.c: the invariants. */
void checks_step(struct world *w);
void checks_full(struct world *w);
void checks_end(struct world *w);
/* checks_dump prints the books (after a failure). */
void checks_dump(struct world *w);
/* checks_eviction_told / _over: evictions told to owners, and their ends. */
void checks_eviction_told(struct world *w, uint64_t holder, const struct svc_notice *n);
void checks_eviction_over(struct world *w, uint64_t model);

/* checks_pump is svc_pump with invariant 3's bound on the decisions it applies. */
void checks_pump(struct svc *svc);

/* decide.c: the queues' decisions judged before they are applied (invariants 9 to 11). */
void decide_install(struct world *w);
void decide_step(struct world *w);
void decide_sweep(struct world *w);

/* notices.c: maximum holds, per-class deadlines and progress (invariants 12 and 13). */
void notices_evict(struct world *w, const struct svc_notice *n);
void notices_progress(struct world *w, struct sim_client *c, const struct svc_notice *n);
void notices_sweep(struct world *w);

/* oracle.c: the hold-and-wait rule done again, slowly, and the stall detector. */
bool oracle_fits(const struct device *d, const struct waiter *w);
void oracle_check(struct world *w);

#endif
