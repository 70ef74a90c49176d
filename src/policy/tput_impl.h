/* SPDX-License-Identifier: MIT */
/* Internals of the Throughput-Oriented policy, shared with TPOT-First, which
 * runs the same plan for best-effort work. */
#ifndef VE_POLICY_TPUT_IMPL_H
#define VE_POLICY_TPUT_IMPL_H

#include "policy/grant.h"
#include "ve/ve_policy.h"

#include <stdbool.h>
#include <stdint.h>

#define VE_TPUT_MAX_PLAN  VE_POOL_MAX_LEAVES
#define VE_TPUT_MAX_SIZES 64

struct tput_assign {
	uint32_t op;
	uint16_t entry;
	uint16_t pad;
	double tmin;			/* T at the min-bound size */
	double t[VE_TPUT_MAX_SIZES];	/* cached T per size index, NAN = not computed */
};

struct tput {
	uint64_t round;
	uint32_t n, cursor;
	struct tput_assign a[VE_TPUT_MAX_PLAN];
	double min_gain;
	uint64_t starve_ns;
	uint32_t nentries;
	uint8_t size_idx[VE_POOL_MAX_ENTRIES];
	uint32_t *sup_off, *sup_n;
	uint16_t *sup; /* strict supersets of each entry, ascending size */
	/* grant mode */
	struct ve_grant_tables gt;
	uint64_t idle_ns;  /* a batch client keeps its grant this long after its last work */
	uint64_t idle_short_ns; /* ... this long if its gaps usually outlast idle_ns */
	uint64_t lat_idle_ns; /* ... a latency-class client this long */
	double hysteresis; /* a new plan must beat the current one by this factor */
	int share;	   /* 1: every active client on the whole GPU, shared (like MPS);
			    * 2 (auto): so when every active client runs long kernels
			    * and wants all of it; 0: never */
	uint32_t share_op_us; /* auto: 'long kernels': mean run time at least this */
	uint64_t share_hold_ns;	 /* auto: the test must say 'split' this long to stop sharing */
	uint64_t share_enter_ns; /* auto: ... and 'share' this long to start */
	bool shared;		/* auto: sharing now */
	uint64_t share_flip_ns; /* auto: since when the test disagrees with 'shared' (0: it agrees) */
	int alone;	      /* 1: a client alone keeps the widest entry, busy or idle */
	int lend;	      /* 1: lend SMs held idle or granted to nobody to busy batch
			       * clients for short kernels (ve_grant_plan.lend) */
	uint64_t lend_idle_ns; /* ... held by a client idle at least this long */
	/* Duty weighting: a client busy a smaller share of the time (host
	 * phases, request gaps) weighs more when SMs are split, so its GPU
	 * phases end sooner and its host phases overlap the others' work. */
	double prio;	      /* weight = 1 + prio * (1 - duty); 0: equal weights */
	uint64_t duty_tau_ns; /* time constant of the duty average */
	double share_duty;    /* auto share: every client away (away[]) at most 1 - this */
	double duty[VE_POLICY_MAX_CLIENTS];	 /* share of time with work ready or in flight */
	uint64_t duty_ns[VE_POLICY_MAX_CLIENTS]; /* last update (0: not tracked) */
	uint64_t gap_from[VE_POLICY_MAX_CLIENTS]; /* start of its current gap (0: busy) */
	double gap_ns[VE_POLICY_MAX_CLIENTS];	  /* running average of its gap lengths */
	/* Turns: clients whose kernels all fill the GPU take it in turns, the
	 * one busy the smallest share of the time first (turn_holder). */
	int turns;		/* 1: on; 0: such clients split the SMs as any others */
	double turn_duty;	/* the holder must be away at least 1 - this share of the time */
	uint32_t turn_op_us;	/* wide clients' mean kernel at least this (us) */
	uint64_t turn_idle_ns;	/* the holder keeps the GPU at least this long after its last work */
	uint64_t turn_hold_ns;	/* ... this long: turn_idle_ns, or a partner's mean kernel if longer */
	int32_t turn_k;		/* the client whose turn it is (-1: no turns now) */
	double peak[VE_POLICY_MAX_CLIENTS];	  /* want_sms while busy, decaying over busy time */
	uint64_t wait_from[VE_POLICY_MAX_CLIENTS]; /* since when it waits for a grant (0: not) */
	double away[VE_POLICY_MAX_CLIENTS];	  /* share of time in gaps past turn_hold_ns */
	uint64_t run_from[VE_POLICY_MAX_CLIENTS]; /* end of its last gap past turn_hold_ns */
	double run_ns[VE_POLICY_MAX_CLIENTS];	  /* running average of its runs between such gaps */
};

/* Whether a client's SMs may be lent: no work ready, in flight or waiting,
 * none for lend_idle_ms (tput.c, plan_lends; tpot's lend_reserve). */
bool ve__tput_lendable(const struct tput *t, const struct ve_policy_view *v,
		       const struct ve_client_demand *d);

/* Forgets what the plan learned of a client that registers or leaves
 * (VE_PEV_CLIENT_ADDED/REMOVED; other events are ignored). */
void ve__tput_client_event(struct tput *t, const struct ve_policy_event *ev);

/* The duty-based weight of client k (1 when duty weighting is off). */
double ve__tput_weight(const struct tput *t, uint32_t k);

int ve__tput_create(const char *args, const struct ve_policy_view *v, struct tput **out);
void ve__tput_destroy(struct tput *t);
/* Plans this round over free leaves; clients whose bit is set in skip_clients
 * (may be NULL) are left out. */
void ve__tput_plan(struct tput *t, const struct ve_policy_view *v, const uint64_t *skip_clients);
int32_t ve__tput_next(struct tput *t, const struct ve_policy_view *v);
int32_t ve__tput_entry_for(const struct tput *t, uint32_t op);
/* Grant mode: demand-sized disjoint entries for the active clients whose
 * bit is not set in skip_clients (may be NULL), inside the leaves 'avail',
 * and lends (tput.c, plan_lends) over SMs inside avail held idle or by
 * nobody, and over 'lendable' (leaves outside avail a caller lends: tpot's
 * idle reservation with lend_reserve=1). */
int ve__tput_grant(struct tput *t, const struct ve_policy_view *v,
		   const struct ve_client_demand *dem, struct ve_grant_plan *plan, uint64_t avail,
		   const uint64_t *skip_clients, uint64_t lendable);

#endif
