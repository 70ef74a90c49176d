/* SPDX-License-Identifier: MIT */
/*
 * The coordinator: ready queue + pool lease state + policy + profiles, and
 * the validation between a policy's proposal and a binding (paper sections
 * 4.4-4.5). One implementation serves both placements: a thread inside a
 * single client (embedded) and the ved daemon for many processes; it never
 * touches a CUDA handle, it only names entries by index.
 *
 * Life of a compute op here:
 *   ve_coord_ready()          the op is ready (all predecessors complete)
 *   ve_coord_schedule()       policy pick/select; each validated proposal
 *                             leases the entry (provisionally) and becomes a
 *                             binding handed to the client's submit path
 *   ve_coord_submit_failed()  the submission failed: lease accounting undone,
 *                             the op goes back to the ready queue at its age
 *   ve_coord_done()           it completed: outstanding--, a lease with no
 *                             work left closes its gate and is released
 * Not thread-safe: one thread (the dispatcher or the daemon loop) owns it.
 */
#ifndef VE_COORD_H
#define VE_COORD_H

#include "coord/readyq.h"
#include "policy/registry.h"
#include "pool/pool.h"
#include "profile/profile.h"
#include "ve/ve_policy.h"

#include <stdbool.h>
#include <stdint.h>

#define VE_COORD_MAX_CLIENTS VE_POLICY_MAX_CLIENTS

/* Default grant tick (ve_coord_config.tick_ns 0). */
#define VE_COORD_TICK_NS 200000ull

struct ve_coord_config {
	const uint32_t *leaf_sms; /* the split: leaf SM counts */
	uint32_t nleaves;
	uint32_t max_entries;	/* pool bound, 0 = full hierarchy */
	uint32_t max_clients;	/* <= VE_COORD_MAX_CLIENTS (default 16) */
	uint32_t ready_cap;	/* ready queue slots (default 4096) */
	const char *policy;	/* "name[:args]" or a path to a .so; default "tput" */
	const char *profile_path; /* optional profile file to load */
	uint32_t sm_count;	/* for profile checks (0 = sum of leaves) */
	uint64_t seed;		/* chaos and tie breaks */
	bool log_decisions;	/* one debug line per decision (also VE_LOG_LEVEL=debug) */
	bool keep_leases;	/* keep an entry leased at zero outstanding (default: release) */
	/* Grant mode (ve_policy.h): used when the policy has grant() unless
	 * per_op is set (the paper's strict per-op binding). */
	bool per_op;
	uint64_t tick_ns; /* grant ticks at most this often, unless urgent (0: VE_COORD_TICK_NS) */
	uint64_t hold_ns; /* a client's grant target holds at least this long (default 5 ms) */
	/* Bind deadline (VE_WATCHDOG_MS): an op ready this long is bound to the
	 * root entry, shared, its descriptor unchanged, whatever the policy
	 * says: the safe fallback. 0 = off. */
	uint64_t watchdog_ns;
	/* A client sharing one entry with the others (a settled shared grant)
	 * counts as contended: short submit-ahead. Default false: no reclaim
	 * is pending between sharers, so they queue like a client alone (a
	 * dense job with 150 us ahead had one kernel queued, the GPU waited
	 * for its dispatcher between kernels). */
	bool share_contended;
};

struct ve_binding {
	struct ve_ready_op op; /* copy of the ready record */
	uint16_t entry;
	uint16_t pad;
	uint32_t flags; /* VE_BIND_* */
};

struct ve_coord_stats {
	uint64_t rounds, picks, bindings, rejects, defers, failed_submits, completions;
	uint64_t drains, reservations, hints, gate_closes, pipelined;
	uint64_t decide_ns; /* time spent in schedule() */
	/* Grant mode. */
	uint64_t ticks, grant_changes, grants_refused, reclaims;
	uint64_t lends, lend_takes; /* lends admitted, lends taken back (ve_grant_plan.lend) */
	uint64_t reclaim_ns_p50, reclaim_ns_p99, reclaim_ns_max; /* grant taken -> SMs drained */
	uint64_t watchdog_binds; /* ops bound by the bind deadline, not the policy */
};

/* What a client in grant mode reports every pass: its demand, the grant
 * generation it acted on, and the leaves it still runs work on or may
 * submit to (the leaves of its grant as of ack_gen, plus those of entries
 * taken away that still hold its work). */
struct ve_grant_report {
	struct ve_client_demand demand;
	uint64_t ack_gen;
	uint64_t busy_leaves;
	uint64_t binds, done; /* cumulative: ops bound to its grants, completed (metrics) */
	uint64_t late;	      /* cumulative: its ops that finished after their deadline */
};

/* A client's grants since it registered (grant mode): how long it has been
 * registered, granted anything, granted a shared entry, and the SM-time of
 * its grants (sm_ns / span_ns = the SMs it held on average). */
struct ve_grant_usage {
	uint64_t span_ns, granted_ns, shared_ns, sm_ns;
};

struct ve_coord;

int ve_coord_create(const struct ve_coord_config *cfg, struct ve_coord **out, char *err,
		    size_t errlen);
void ve_coord_destroy(struct ve_coord *c);

/* Clients. flags: VE_READY_LATENCY marks a latency-class client. */
int ve_coord_client_add(struct ve_coord *c, uint32_t client, uint32_t flags);
/* The client is gone: drop its ready ops, close gates of its leases and drop
 * its reservations; its running ops may still complete through ve_coord_done. */
int ve_coord_client_remove(struct ve_coord *c, uint32_t client);

int ve_coord_ready(struct ve_coord *c, const struct ve_ready_op *op);
int ve_coord_schedule(struct ve_coord *c, struct ve_binding *out, int max);
int ve_coord_submit_failed(struct ve_coord *c, const struct ve_binding *b, int status);
/* measured_ns: the op's run time on the entry (0 if unknown). */
int ve_coord_done(struct ve_coord *c, uint32_t client, uint16_t entry, uint64_t key,
		  uint64_t measured_ns);
int ve_coord_hint(struct ve_coord *c, const struct ve_hint *h);
/* May 'client' put one more op behind its running work on 'entry' (bounded
 * pipelining)? The entry must be leased to this client with its gate open
 * and no pending reservation may claim those SMs. On 0 (the client is alone
 * on the GPU) or 1 (others run or wait: the caller applies its per-stream
 * budget; with may_contend false that case is -EBUSY) the op counts as
 * outstanding there (completion goes through ve_coord_done); -EBUSY otherwise. */
int ve_coord_pipeline(struct ve_coord *c, uint32_t client, uint16_t entry, bool may_contend);
/* A client (through ved) already submitted an op behind its running work on
 * entry: count it there (ve_pool_op_join). 0, or -EPERM if the entry is not
 * that client's with work outstanding (a protocol violation). */
int ve_coord_pipeline_join(struct ve_coord *c, uint32_t client, uint16_t entry);
/* Undoes a ve_coord_pipeline whose op was not submitted after all. */
void ve_coord_pipeline_cancel(struct ve_coord *c, uint32_t client, uint16_t entry);

/* ---- grant mode (ve_policy.h, "Grant mode") ---- */
bool ve_coord_grant_mode(const struct ve_coord *c);
/* A client's report (above). Urgent when it waits for work it cannot place:
 * the next tick then runs at once. */
int ve_coord_report(struct ve_coord *c, uint32_t client, const struct ve_grant_report *r);
/* The client's grant: the entry it may bind to (VE_POOL_NONE: none yet) and
 * the generation, bumped whenever the entry changes. */
int ve_coord_grant(const struct ve_coord *c, uint32_t client, uint16_t *entry, uint64_t *gen);
/* The entry lent to the client for short kernels (VE_POOL_NONE: none); a
 * change of it bumps the generation above too. */
uint16_t ve_coord_lend(const struct ve_coord *c, uint32_t client);
/* Grant mode: the policy's reason for the client's grant (VE_WHY_*;
 * VE_WHY_UNKNOWN when it gives none, before its first tick, or in per-op
 * mode). */
uint8_t ve_coord_why(const struct ve_coord *c, uint32_t client);
/* Whether the client's grant is shared (it may overlap other shared grants). */
bool ve_coord_grant_shared(const struct ve_coord *c, uint32_t client);
/* The demand of the client's last report (inspection: tests, status). */
int ve_coord_demand(const struct ve_coord *c, uint32_t client, struct ve_client_demand *out);
/* Its grant usage, counted up to now (up to its removal once removed). */
int ve_coord_grant_usage(const struct ve_coord *c, uint32_t client, struct ve_grant_usage *u);
/* True while the client's grant is a shared one it already holds and keeps
 * (no change pending or refused by hold_ns), every other active client is
 * settled in the same entry or has no demand, none is latency-class, and
 * share_contended is off: its submit-ahead is then a lone client's. */
bool ve_coord_share_settled(const struct ve_coord *c, uint32_t client);
/* Runs the policy's grant() if a tick is due (tick_ns since the last one),
 * a report asked for one, or force. Returns the grants changed. */
int ve_coord_tick(struct ve_coord *c, bool force);
/* The client's process is gone (or stopped answering, paused): its grant
 * and the leaves it was draining are released now, since the driver ended
 * its work (or a stopped process's submitted work has long finished).
 * pause(true) also keeps it out of the grants until pause(false). */
void ve_coord_client_forget(struct ve_coord *c, uint32_t client);
void ve_coord_client_pause(struct ve_coord *c, uint32_t client, bool paused);
/* The client has nothing in flight and will read its grant before it submits
 * again (it sleeps): what was taken from it is drained now. */
void ve_coord_client_drained(struct ve_coord *c, uint32_t client);
/* Another client is registered (and could want SMs back at any tick),
 * unless this one's shared grant is settled (ve_coord_share_settled). */
bool ve_coord_contended(const struct ve_coord *c, uint32_t client);
/* How many other clients are registered and active (whatever they share). */
uint32_t ve_coord_others(const struct ve_coord *c, uint32_t client);
/* A measured run time of an op the client bound itself: refines T(key, m). */
void ve_coord_observe(struct ve_coord *c, uint32_t client, uint16_t entry, uint64_t key,
		      uint64_t measured_ns);

struct ve_pool *ve_coord_pool(struct ve_coord *c);
struct ve_profile *ve_coord_profile(struct ve_coord *c);
const struct ve_policy_view *ve_coord_view(struct ve_coord *c);
const char *ve_coord_policy_name(const struct ve_coord *c);
void ve_coord_stats(const struct ve_coord *c, struct ve_coord_stats *st);
/* Replaces the policy (ved's reload) between two decisions: leases, grants,
 * reservations and ready ops stay; the new policy starts with fresh private
 * state. Refused (nothing changes) if the spec does not resolve, its init
 * fails, or it would switch between grant mode and per-op binding. */
int ve_coord_set_policy(struct ve_coord *c, const char *spec, char *err, size_t errlen);
/* Virtual or real clock for ages and deadlines (the sim sets virtual time). */
void ve_coord_set_now(struct ve_coord *c, uint64_t now_ns);

#endif
