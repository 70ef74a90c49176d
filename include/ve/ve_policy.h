/* SPDX-License-Identifier: MIT */
/*
 * Vitamin-E policy ABI (paper section 4.5, docs/policies.md).
 *
 * A policy is a versioned, const table of callbacks. It sees a read-only view
 * of the ready operations and the pool and proposes; the coordinator
 * validates every proposal (op still ready, entry large enough and admissible
 * for this client, share only when asked for) before anything changes, so a
 * policy can be wrong but never unsafe: it cannot alter a descriptor, bind an
 * op that is not ready, or overlap leases it was not allowed to overlap.
 *
 *   pick(view)                      -> index of a ready op, or -1 (defer)
 *   select(view, op, eligible[], n) -> entry index from eligible[], or -1 (defer)
 *   prepare(view, hint, plan)       -> a preparation plan for a lookahead hint
 *
 * Rounds: the coordinator calls pick/select repeatedly in one scheduling
 * round (view->round identifies it); an op picked twice in one round, or a
 * rejected proposal, ends the round. Plans computed in pick (Algorithm 1)
 * may therefore be cached per round.
 *
 * Building an external policy: include only this header, export
 *   const struct ve_policy_ops *ve_policy_entry(void);
 * from a shared object, and run with VE_POLICY=/path/to/policy.so. A policy
 * built for another VE_POLICY_ABI_VERSION is refused at load.
 */
#ifndef VE_PUBLIC_POLICY_H
#define VE_PUBLIC_POLICY_H

#include <stdint.h>

#include "ve/ve_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2 adds grant(), 3 ve_grant_plan.lend, 4 ve_grant_plan.why; older ones still load */
#define VE_POLICY_ABI_VERSION 4
#define VE_POLICY_MAX_CLIENTS 64

/* Ready-op flags. */
#define VE_READY_LATENCY     (1u << 0) /* latency class (decode) */
#define VE_READY_COOPERATIVE (1u << 1)

/* One ready operation as policies see it. Slots live in the coordinator's
 * ready queue; per-client FIFO (oldest first) via next/prev. */
struct ve_ready_op {
	uint64_t tok;	   /* client-local token (opaque to policies) */
	uint64_t key;	   /* profile key: (function, grid, block, smem) */
	uint64_t ready_ns; /* when it became ready: its age */
	uint64_t blocks;   /* grid size */
	uint64_t deadline_ns; /* 0 = none (set by latency-aware clients or hints) */
	uint32_t threads;  /* threads per block */
	uint32_t min_sms;  /* smallest entry it can run on unchanged */
	uint32_t blocks_per_sm; /* occupancy if known, else 0 */
	uint32_t client;
	uint32_t stream;
	int32_t priority;  /* CUDA stream priority: lower is more urgent */
	uint32_t next, prev; /* per-client list links, VE_READY_NIL at the ends */
	uint8_t kind;	   /* enum ve_op_kind */
	uint8_t flags;	   /* VE_READY_* */
	uint8_t in_use;
	uint8_t pad[5];
};
#define VE_READY_NIL 0xffffffffu

/* Per-client summary. */
struct ve_client_view {
	uint32_t head;	 /* oldest ready op slot, VE_READY_NIL if none */
	uint32_t nready;
	uint32_t running; /* ops bound and not complete */
	uint8_t active;	  /* registered */
	uint8_t latency;  /* latency-class client (e.g. an inference server) */
	uint8_t pad[2];
	uint64_t bound;	    /* bindings so far */
	uint64_t completed; /* completions so far */
};

struct ve_policy_view {
	uint32_t abi_version;
	uint32_t nclients;
	uint64_t now_ns;
	uint64_t round;
	const struct ve_pool *pool;
	const struct ve_ready_op *ops; /* ready queue slots (check in_use) */
	uint32_t nops;		       /* slot capacity */
	uint32_t nready;
	const struct ve_client_view *clients;
	/* Predicted exclusive run time in ns of op on an entry of 'sms' SMs
	 * (profile, refined online; a safe model for unknown launches). */
	double (*predict)(const struct ve_policy_view *v, const struct ve_ready_op *op,
			  uint32_t sms);
	/* Entries op can run on unchanged and that its client may use now,
	 * smallest first; returns the count (<= max). */
	uint32_t (*eligible)(const struct ve_policy_view *v, uint32_t op, uint16_t *out,
			     uint32_t max);
	/* A deterministic per-coordinator random source (chaos, tie breaks). */
	uint64_t (*rand)(const struct ve_policy_view *v);
	void *coord; /* opaque */
};

/* Lookahead hint: an op recorded but not yet ready, or an advisory. */
struct ve_hint {
	uint32_t client;
	uint32_t min_sms;
	uint64_t key;
	uint64_t blocks;
	uint32_t threads;
	uint32_t flags;	      /* VE_READY_* */
	uint64_t expect_ready_ns; /* 0 = unknown */
	uint64_t deadline_ns;	  /* 0 = none */
};

/* Preparation plan returned by prepare(). prepare() is called with a hint
 * when a client sends one, and with h == NULL once at the start of every
 * scheduling round (a tick), so a policy can also act on what it saw. */
#define VE_PLAN_MAX_GATES 32
struct ve_plan {
	uint16_t reserve;	  /* entry to reserve, VE_POOL_NONE = none */
	uint16_t unreserve;	  /* reservation to drop, VE_POOL_NONE = none */
	uint32_t reserve_for;	  /* client the reservation is for (hint->client by default) */
	uint16_t ngates;	  /* entries whose gates to close (drain) */
	uint16_t gates[VE_PLAN_MAX_GATES];
};

/* Outcomes reported back to the policy (optional callback). */
enum ve_policy_event_kind {
	VE_PEV_BOUND = 1,   /* op bound to entry */
	VE_PEV_REJECTED,    /* proposal refused by validation (reason set) */
	VE_PEV_COMPLETED,   /* an op of client finished on entry, ns = measured time */
	VE_PEV_CLIENT_ADDED,
	VE_PEV_CLIENT_REMOVED,
};
struct ve_policy_event {
	uint32_t kind;
	uint32_t client;
	uint32_t op;	/* ready slot (BOUND/REJECTED) */
	uint16_t entry;
	uint16_t pad;
	uint64_t key;
	uint64_t ns;
	uint32_t flags;
	const char *reason;
};

/* ---- Grant mode (ABI 2; lends ABI 3) ----
 *
 * Per-op binding costs a coordinator decision per kernel. In grant mode the
 * coordinator instead decides, every tick, which pool entry each client may
 * use (its grant); the client binds its own ready ops to that entry with no
 * round trip, and submits a stream's successors right behind their
 * predecessors on the entry's lanes. A grant that changes closes the old
 * entry's gate: work already submitted there finishes where it is, the
 * stream's next op binds inside the new grant, and the coordinator hands the
 * old entry's SMs to another client only once the client reports them
 * drained. Descriptors never change, so results do not depend on grants.
 *
 * Each tick the policy sees every client's demand and fills a plan (it
 * arrives pre-filled with the current grants). The coordinator validates it:
 * grants of different clients never share a leaf unless both are marked
 * share; a grant whose SMs are still draining takes effect once they are free.
 * Since ABI 3 a plan may also lend a client a wider entry for its short
 * kernels (ve_grant_plan.lend), over SMs others hold and do not use now.
 */
struct ve_client_demand {
	uint32_t ready;	      /* compute ops ready and waiting to be submitted */
	uint32_t inflight;    /* compute ops submitted and not yet complete */
	uint32_t want_sms;    /* SMs its recent kernels could use at once (decaying max) */
	uint32_t min_sms;     /* widest waiting op that fits no entry of its grant (0: none) */
	uint64_t active_ns;   /* last time it had work ready or in flight, or saw work end (0: never) */
	uint64_t deadline_ns; /* earliest deadline among its waiting latency ops (0: none) */
	uint32_t flags;	      /* VE_DEMAND_* */
	uint16_t entry;	      /* entry granted now, VE_POOL_NONE if none */
	uint16_t op_us;	      /* mean run time of its recent ops on the GPU, us (capped) */
};
#define VE_DEMAND_LATENCY (1u << 0) /* latency-class client */
#define VE_DEMAND_WAITING (1u << 1) /* has ready work that no entry of its grant can run */
/* A latency op of it finished after its advisory deadline (ve_advise_deadline,
 * ve_advise_step) within the last VE_LATE_WINDOW_NS. Set by runtimes that
 * know it; a policy built for an older runtime never sees it. */
#define VE_DEMAND_LATE	  (1u << 2)
#define VE_LATE_WINDOW_NS (20ull * 1000000ull)

struct ve_grant_plan {
	uint16_t entry[VE_POLICY_MAX_CLIENTS]; /* per client: the entry to grant, VE_POOL_NONE */
	/* Per client, VE_GRANT_* bits: SHARE, may overlap other clients
	 * marked SHARE; YIELD (ABI 3), the grant fills another client's gaps
	 * and is taken back as soon as the policy says, not held hold_ns
	 * while its client has work (policies before it write 0 or 1). */
	uint8_t share[VE_POLICY_MAX_CLIENTS];
	/* ABI 3: per client, an entry lent for short kernels (VE_POOL_NONE: none).
	 * It contains the client's grant and may overlap other clients' grants
	 * (SMs they hold and do not use now); the client binds there only
	 * kernels predicted to run at most its lend bound (VE_LEND_US), so
	 * taking the lend back waits for that much work at most. The coordinator
	 * ignores a lend that does not contain the grant, overlaps another
	 * lend or SMs still being handed over, and takes a lend back by itself
	 * when another client's new grant needs its SMs. Arrives VE_POOL_NONE
	 * every tick: a lend lasts while the policy asks for it each tick.
	 * Policies built for ABI 2 never lend. */
	uint16_t lend[VE_POLICY_MAX_CLIENTS];
	/* ABI 4: per client, why it has the grant it has (VE_WHY_*), shown by
	 * `ve-ctl clients`. Arrives as the policy last left it; policies built
	 * for ABI 3 or older never write it (shown as "-"). Says nothing to
	 * the coordinator: it enforces entry, share and lend only. */
	uint8_t why[VE_POLICY_MAX_CLIENTS];
};

/* ve_grant_plan.why values. */
enum ve_grant_why {
	VE_WHY_UNKNOWN = 0, /* the policy does not say */
	VE_WHY_IDLE,	    /* no work for longer than its hold: its SMs went to others */
	VE_WHY_ALONE,	    /* the only client: the widest entry, busy or idle */
	VE_WHY_SPLIT,	    /* SMs of its own, sized by its demand beside the others' */
	VE_WHY_SHARED,	    /* the whole GPU, shared with the others (like MPS) */
	VE_WHY_TURN,	    /* holds the turn: the GPU while it has work (host phases) */
	VE_WHY_IN_GAP,	    /* runs in the turn holder's gap, yields when it is back */
	VE_WHY_WAITING,	    /* another client holds the turn: no SMs while it runs */
	VE_WHY_NARROW,	    /* narrow kernels: SMs of its own beside the turns */
	VE_WHY_RESERVED,    /* a latency client's reservation (tpot) */
	VE_WHY_FIXED,	    /* its part of a static partition (fixed) */
	VE_WHY_RANDOM,	    /* a random grant (chaos) */
	VE_WHY_COUNT
};

/* A short name for a VE_WHY_* value ("-" for unknown ones). */
static inline const char *ve_grant_why_name(unsigned why)
{
	static const char *const names[VE_WHY_COUNT] = {
	    "-",      "idle",	"alone",    "split", "shared", "turn",
	    "in-gap", "waiting", "narrow", "reserved", "fixed", "random"};
	return why < VE_WHY_COUNT ? names[why] : "-";
}

/* ve_grant_plan.share bits. */
#define VE_GRANT_SHARE (1u << 0)
#define VE_GRANT_YIELD (1u << 1)

/* Select flags. */
#define VE_BIND_SHARE (1u << 0) /* allow sharing a leased entry with other ops/clients */

struct ve_policy_ops {
	uint32_t abi_version; /* VE_POLICY_ABI_VERSION */
	const char *name;
	const char *summary;
	/* args: the text after ':' in VE_POLICY=name:args (may be ""). */
	int (*init)(const char *args, const struct ve_policy_view *v, void **priv);
	void (*fini)(void *priv);
	int32_t (*pick)(void *priv, const struct ve_policy_view *v);
	int32_t (*select)(void *priv, const struct ve_policy_view *v, uint32_t op,
			  const uint16_t *eligible, uint32_t n, uint32_t *flags);
	int (*prepare)(void *priv, const struct ve_policy_view *v, const struct ve_hint *h,
		       struct ve_plan *plan);
	void (*notify)(void *priv, const struct ve_policy_view *v, const struct ve_policy_event *ev);
	/* ABI 2 (absent from policies built for ABI 1). Grant mode: called every
	 * tick with demand[c] for every client c (inactive clients zeroed).
	 * NULL: the policy binds op by op through pick/select. Return 0, or a
	 * negative errno to keep the current grants this tick. */
	int (*grant)(void *priv, const struct ve_policy_view *v, const struct ve_client_demand *demand,
		     struct ve_grant_plan *plan);
};

/* Entry point an external policy .so exports. */
typedef const struct ve_policy_ops *(*ve_policy_entry_fn)(void);

/* The ABI: these layouts are what external policies were compiled against. */
#ifdef __cplusplus
#define VE__POLICY_ASSERT static_assert
#else
#define VE__POLICY_ASSERT _Static_assert
#endif
VE__POLICY_ASSERT(sizeof(struct ve_ready_op) == 80, "ready op layout (policy ABI)");
VE__POLICY_ASSERT(sizeof(struct ve_client_view) == 32, "client view layout (policy ABI)");
VE__POLICY_ASSERT(sizeof(struct ve_hint) == 48, "hint layout (policy ABI)");
VE__POLICY_ASSERT(sizeof(struct ve_plan) == 76, "plan layout (policy ABI)");
#undef VE__POLICY_ASSERT

#ifdef __cplusplus
}
#endif
#endif
