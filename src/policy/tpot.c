/* SPDX-License-Identifier: MIT */
/*
 * TPOT-First (paper section 5): Throughput-Oriented plus decode protection.
 *
 *  - A standing exclusive reservation of `reserve` SMs (the smallest tree
 *    entry of at least that size, taken from the high end of the leaf range
 *    so best-effort work keeps one large contiguous block) for the first
 *    latency-class client. Latency ops run there; best-effort ops never can.
 *  - Per-op deadlines: the op's own deadline_ns if the client sent one,
 *    else the completion of that client's previous latency op + tpot_ms.
 *  - Risk: predicted finish = now + predicted time of the client's latency
 *    ops queued ahead of it + T(op, reservation size). An op at risk gets,
 *    through prepare (on a lookahead hint, or at the next tick if it is
 *    already ready), the smallest wider entry containing the reservation
 *    predicted to meet its deadline: overlapping best-effort gates close
 *    (their running work finishes, nothing new enters) and the entry is
 *    reserved, taking effect when they have drained. It is released after
 *    the op completed on it.
 *  - Pick: earliest-deadline latency op first (at-risk ones before others),
 *    then the Throughput-Oriented plan for everyone else. If the prepared or
 *    standing entry is not available, a latency op takes an idle entry big
 *    enough for its deadline, else the reservation shared, else it waits.
 * Knobs: tpot:reserve=16,tpot_ms=50,min_gain=...,starve_ms=... (the last two
 * go to the embedded Throughput-Oriented plan); in grant mode also
 * batch_min=8, lat_idle_ms=20, standing=1|0 (0: the reservation is held
 * only while its owner is active, see struct tpot), grow=1|0 and
 * grow_hold_ms=50 (growth past the reservation under deadline pressure),
 * adapt=0|1 and adapt_down_ms=5000 (a learned size instead of that growth),
 * lend_reserve=0|1 (the idle reservation lent for short kernels), and
 * lend=1|0 and lend_idle_ms=1 for the embedded plan's lending.
 * An unmodified server sends no deadlines: VE_TPOT_MS in its environment
 * gives its ops step deadlines (src/shim/api.c), or none of this applies.
 */
#include "policy/policies.h"
#include "policy/tput_impl.h"
#include "pool/pool.h"
#include "util/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tpot {
	struct tput *tp;
	uint32_t reserve_sms;
	uint64_t tpot_ns;
	uint16_t standing;	/* entry of the standing reservation */
	int32_t holder;		/* latency client owning it, -1 none */
	bool want_standing;	/* reservation to (re)establish at the next tick */
	uint16_t wide;		/* prepared wider entry, VE_POOL_NONE */
	bool wide_used;		/* a latency op completed on it: release at next tick */
	uint64_t wide_until;	/* given up when unused past this (its deadline) */
	uint64_t round;
	uint64_t lat_mask[VE_POLICY_MAX_CLIENTS / 64 + 1];
	uint64_t last_done[VE_POLICY_MAX_CLIENTS];
	/* Round in which each ready slot was offered by pick (0 = never). This
	 * replaces a count of latency ops handed out, with which pick skipped the
	 * first N latency ops still queued: once those it had offered were bound
	 * and gone, it skipped ops never offered, out of deadline order. Found by
	 * test_policy (tpot_latency_ops_earliest_deadline_first_all_offered). */
	uint64_t *offered;
	char tput_args[256];
	/* grant mode */
	uint32_t batch_min;   /* SMs left to best-effort clients while a latency one runs */
	uint64_t lat_idle_ns; /* a latency client counts as active this long after its work */
	/* Whether the reservation stands while its owner is idle (the paper's
	 * standing reservation, 1) or only while it is active (0): then a
	 * best-effort client gets those SMs between requests, and a request's
	 * first op waits for the best-effort kernels running there to finish
	 * (one kernel's length, which TTFT pays; TPOT does not, lat_idle_ms
	 * covers the gaps between decode steps). */
	bool standing_idle;
	/* The best-effort client the reservation yields to (-1: none): its
	 * launch fits in no entry outside the reservation (wide_launch). */
	int32_t yield_to;
	/* Growth past the reservation: only under deadline pressure (1, the
	 * default: a latency op of it finished late recently, VE_DEMAND_LATE,
	 * or one waits for SMs with less than half a TPOT left; held
	 * grow_hold_ms after the last such tick) or whenever it is active (0:
	 * it took all but batch_min SMs while active, and a continuously
	 * decoding server starved the rest: ve-sim llm-serving aggregate 0.35,
	 * 94% TTFT violations). */
	bool grow_on_pressure;
	/* The standing reservation of an idle server lent to best-effort
	 * clients for their short kernels (docs/policies.md, "Lending"): a
	 * request then runs at once on it beside at most VE_LEND_US of borrowed
	 * work, instead of on SMs of its own. 0 by default: the reservation is
	 * what tpot guarantees. */
	bool lend_reserve;
	uint64_t grow_hold_ns;
	uint64_t pressure_until; /* growth allowed until then */
	/* The learned size (adapt=1; with the default 0 the client grows to its
	 * want under pressure instead): the SMs the latency client gets while
	 * active, at least the reservation. A late op (VE_DEMAND_LATE) raises
	 * it one step of the tree above the reservation once the last size is
	 * in effect and has run grow_hold_ms (so that a step's effect is seen
	 * before the next), and adapt_down_ms without one lowers it a step. A GPU-bound
	 * decode server (CUDA graphs: a token 1.8x slower on 32 SMs than on the
	 * whole H200) then settles at the size that meets its TPOT instead of
	 * staying late on the reservation or jumping to all but batch_min SMs
	 * and back every grow_hold_ms, a drain of the training each time. Not
	 * the default: where lateness comes from queueing, not from too few
	 * SMs, raising the size does not end it, and the size stays high
	 * (ve-sim train-infer, tpot:reserve=32: training 0.405 -> 0.33, late
	 * requests 15.1% -> 16.8%). Unmeasured on the GPU so far. */
	bool adapt;
	uint64_t adapt_down_ns;
	uint32_t floor_sms;
	uint64_t floor_ns;     /* its last change */
	uint64_t effect_ns;    /* when a grant that wide was first seen in effect (0: not yet) */
	uint64_t late_seen_ns; /* the last tick that saw VE_DEMAND_LATE */
};

static int tpot_kv(const char *k, const char *val, void *arg)
{
	struct tpot *t = arg;
	double d;
	if (ve__parse_double(val, &d) || d < 0)
		return -EINVAL;
	if (strcmp(k, "reserve") == 0 && d >= 1)
		t->reserve_sms = (uint32_t)d;
	else if (strcmp(k, "tpot_ms") == 0 && d > 0)
		t->tpot_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "batch_min") == 0)
		t->batch_min = (uint32_t)d;
	else if (strcmp(k, "lat_idle_ms") == 0)
		t->lat_idle_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "standing") == 0 && (d == 0 || d == 1))
		t->standing_idle = d == 1;
	else if (strcmp(k, "grow") == 0 && (d == 0 || d == 1))
		t->grow_on_pressure = d == 1;
	else if (strcmp(k, "grow_hold_ms") == 0)
		t->grow_hold_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "adapt") == 0 && (d == 0 || d == 1))
		t->adapt = d == 1;
	else if (strcmp(k, "adapt_down_ms") == 0 && d > 0)
		t->adapt_down_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "lend_reserve") == 0 && (d == 0 || d == 1))
		t->lend_reserve = d == 1;
	else if (strcmp(k, "min_gain") == 0 || strcmp(k, "starve_ms") == 0 ||
		 strcmp(k, "idle_ms") == 0 || strcmp(k, "hysteresis") == 0 ||
		 strcmp(k, "lend") == 0 || strcmp(k, "lend_idle_ms") == 0 ||
		 strcmp(k, "turns") == 0 || strcmp(k, "turn_duty") == 0 ||
		 strcmp(k, "turn_idle_ms") == 0 || strcmp(k, "turn_op_us") == 0) {
		size_t n = strlen(t->tput_args);
		snprintf(t->tput_args + n, sizeof(t->tput_args) - n, "%s%s=%s", n ? "," : "", k,
			 val);
	} else
		return -EINVAL;
	return 0;
}

/* Smallest tree entry (not a remainder) of >= want SMs; among equals, the
 * one over the highest leaves. */
static uint16_t choose_standing(const struct ve_pool *p, uint32_t want)
{
	uint16_t best = VE_POOL_NONE;
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t e = p->by_size[i];
		const struct ve_pool_entry *pe = &p->e[e];
		if (pe->kind == VE_ENTRY_REMAINDER || pe->sms < want)
			continue;
		if (best != VE_POOL_NONE && pe->sms > p->e[best].sms)
			break;
		if (best == VE_POOL_NONE || pe->leaves > p->e[best].leaves)
			best = e;
	}
	return best;
}

static int tpot_init(const char *args, const struct ve_policy_view *v, void **priv)
{
	struct tpot *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->reserve_sms = 16;
	t->tpot_ns = 50 * 1000000ull;
	t->batch_min = 8;
	t->lat_idle_ns = 20 * 1000000ull;
	t->standing_idle = true;
	t->grow_on_pressure = true;
	t->grow_hold_ns = 50 * 1000000ull;
	t->adapt = false;
	t->adapt_down_ns = 5000 * 1000000ull;
	t->holder = -1;
	t->wide = VE_POOL_NONE;
	t->round = UINT64_MAX;
	t->yield_to = -1;
	int rc = ve__policy_parse_args(args, tpot_kv, t);
	if (!rc && t->reserve_sms >= v->pool->total_sms)
		rc = -EINVAL;
	if (!rc)
		rc = ve__tput_create(t->tput_args, v, &t->tp);
	if (!rc && !(t->offered = calloc(v->nops, sizeof(*t->offered))))
		rc = -ENOMEM;
	if (!rc) {
		t->standing = choose_standing(v->pool, t->reserve_sms);
		if (t->standing == VE_POOL_NONE || t->standing == v->pool->root)
			rc = -EINVAL;
		else
			t->floor_sms = v->pool->e[t->standing].sms;
	}
	if (rc) {
		if (t->tp)
			ve__tput_destroy(t->tp);
		free(t->offered);
		free(t);
		return rc;
	}
	*priv = t;
	return 0;
}

static void tpot_fini(void *priv)
{
	struct tpot *t = priv;
	ve__tput_destroy(t->tp);
	free(t->offered);
	free(t);
}

static bool is_latency(const struct tpot *t, const struct ve_ready_op *o)
{
	return (o->flags & VE_READY_LATENCY) || (t->lat_mask[o->client / 64] >> (o->client % 64) & 1);
}

static uint64_t deadline_of(const struct tpot *t, const struct ve_ready_op *o)
{
	if (o->deadline_ns)
		return o->deadline_ns;
	uint64_t base = t->last_done[o->client];
	if (!base || base < o->ready_ns)
		base = o->ready_ns;
	return base + t->tpot_ns;
}

/* Predicted finish on an entry of m SMs, behind the client's older latency ops. */
static uint64_t predict_finish(const struct tpot *t, const struct ve_policy_view *v,
			       const struct ve_ready_op *o, uint32_t m)
{
	double ahead = 0;
	for (uint32_t s = v->clients[o->client].head; s != VE_READY_NIL; s = v->ops[s].next) {
		if (&v->ops[s] == o)
			break;
		if (is_latency(t, &v->ops[s]))
			ahead += v->predict(v, &v->ops[s], m);
	}
	return v->now_ns + (uint64_t)(ahead + v->predict(v, o, m));
}

/* Smallest entry containing the standing reservation predicted to meet d. */
static uint16_t widen_for(const struct tpot *t, const struct ve_policy_view *v,
			  const struct ve_ready_op *o, uint64_t start, uint64_t d)
{
	const struct ve_pool *p = v->pool;
	uint64_t core = p->e[t->standing].leaves;
	uint16_t last = VE_POOL_NONE;
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t e = p->by_size[i];
		/* Not narrower than the launch needs (a cooperative grid, a
		 * graph of clusters): prepared there, it waited for that
		 * preparation to expire, two TPOTs. */
		if (e == t->standing || (p->e[e].leaves & core) != core || p->e[e].sms < o->min_sms)
			continue;
		last = e;
		if (start + (uint64_t)v->predict(v, o, p->e[e].sms) <= d)
			return e;
	}
	return last; /* nothing meets it: the widest helps most */
}

static void plan_widen(struct tpot *t, const struct ve_policy_view *v, uint16_t w,
		       uint32_t client, uint64_t d, struct ve_plan *plan)
{
	const struct ve_pool *p = v->pool;
	plan->reserve = w;
	plan->reserve_for = client;
	/* w contains the standing reservation, which the pool counts as busy
	 * like any other: while it stays RESERVED the reservation of w pends
	 * forever and the decode only ever gets the standing SMs. Give it up
	 * (apply_plan unreserves before it reserves); the tick renews it, and it
	 * takes effect once w is released. Found by test_policy
	 * (tpot_at_risk_decode_gets_wider_entry_after_drain). */
	const struct ve_pool_entry *se = &p->e[t->standing];
	if (se->state == VE_ENTRY_RESERVED && se->reserve_for == (int32_t)client &&
	    (se->leaves & p->e[w].leaves))
		plan->unreserve = t->standing;
	for (uint32_t e = 0; e < p->nentries && plan->ngates < VE_PLAN_MAX_GATES; e++) {
		const struct ve_pool_entry *pe = &p->e[e];
		if (pe->state == VE_ENTRY_LEASED && (pe->leaves & p->e[w].leaves) &&
		    pe->holder != (int32_t)client)
			plan->gates[plan->ngates++] = (uint16_t)e;
	}
	t->wide = w;
	t->wide_used = false;
	/* Kept at least one TPOT period, so a decode that is late already
	 * is not given up at the next tick. */
	t->wide_until = d > v->now_ns + t->tpot_ns ? d : v->now_ns + t->tpot_ns;
}

/* The widest entry outside the leaves 'core' (its SMs). */
static uint32_t widest_outside(const struct ve_pool *p, uint64_t core)
{
	uint32_t w = 0;
	for (uint32_t i = 0; i < p->nentries; i++)
		if (!(p->e[i].leaves & core))
			w = VE_MAX(w, p->e[i].sms);
	return w;
}

/* Per-op mode: whether a best-effort op that fits in no entry outside the
 * standing reservation waits, with the holder idle or for tput's
 * starve_ms. Kept, the reservation let such a launch never run, and
 * tput's starvation guard (the round binds nothing else while the oldest
 * op fits nowhere) stopped all other best-effort work behind it. */
static bool wide_launch_waits(const struct tpot *t, const struct ve_policy_view *v)
{
	uint32_t free_max = widest_outside(v->pool, v->pool->e[t->standing].leaves);
	const struct ve_client_view *hc = &v->clients[t->holder];
	bool idle = !hc->nready && !hc->running;
	for (uint32_t k = 0; k < v->nclients; k++)
		for (uint32_t s = v->clients[k].head; s != VE_READY_NIL; s = v->ops[s].next) {
			const struct ve_ready_op *o = &v->ops[s];
			if (!is_latency(t, o) && o->min_sms > free_max &&
			    (idle || v->now_ns >= o->ready_ns + t->tp->starve_ns))
				return true;
		}
	return false;
}

static int tpot_prepare(void *priv, const struct ve_policy_view *v, const struct ve_hint *h,
			struct ve_plan *plan)
{
	struct tpot *t = priv;
	const struct ve_pool *p = v->pool;
	if (h) {
		/* Lookahead: an anticipated latency op (e.g. a decode behind a copy). */
		if (t->holder < 0 || h->client != (uint32_t)t->holder || t->wide != VE_POOL_NONE)
			return 0;
		struct ve_ready_op o = {.key = h->key, .blocks = h->blocks, .threads = h->threads,
					.min_sms = h->min_sms, .client = h->client,
					.deadline_ns = h->deadline_ns};
		uint64_t start = h->expect_ready_ns > v->now_ns ? h->expect_ready_ns : v->now_ns;
		uint64_t d = h->deadline_ns ? h->deadline_ns : start + t->tpot_ns;
		if (o.min_sms <= p->e[t->standing].sms &&
		    start + (uint64_t)v->predict(v, &o, p->e[t->standing].sms) <= d)
			return 0;
		uint16_t w = widen_for(t, v, &o, start, d);
		if (w != VE_POOL_NONE)
			plan_widen(t, v, w, h->client, d, plan);
		return 0;
	}
	/* Tick. A best-effort launch that fits in no entry outside the standing
	 * reservation runs only if the reservation yields (wide_launch_waits);
	 * renewed below once it has been bound, with the gates of what then
	 * runs on those SMs closed. */
	if (t->holder >= 0 && wide_launch_waits(t, v)) {
		const struct ve_pool_entry *se = &p->e[t->standing];
		if (se->reserve_for == t->holder &&
		    (se->state == VE_ENTRY_RESERVED || ve_pool_pending(p, t->standing)))
			plan->unreserve = t->standing;
		t->want_standing = true;
		return 0;
	}
	/* Keep the standing reservation in place: leasing a reserved entry
	 * uses the reservation up, so after each latency op drains it is renewed
	 * here, before any best-effort plan of this round can take those SMs. */
	if (t->holder >= 0) {
		const struct ve_pool_entry *se = &p->e[t->standing];
		bool held = se->reserve_for == t->holder &&
			    (se->state == VE_ENTRY_RESERVED || ve_pool_pending(p, t->standing));
		bool in_use = se->state == VE_ENTRY_LEASED && se->holder == t->holder;
		if (!held && !in_use && se->state != VE_ENTRY_DRAINING) {
			plan->reserve = t->standing;
			plan->reserve_for = (uint32_t)t->holder;
			/* Best-effort work on those SMs drains; nothing new enters. */
			if (t->want_standing)
				for (uint32_t e = 0; e < p->nentries && plan->ngates < VE_PLAN_MAX_GATES;
				     e++)
					if (p->e[e].state == VE_ENTRY_LEASED &&
					    (p->e[e].leaves & se->leaves))
						plan->gates[plan->ngates++] = (uint16_t)e;
			t->want_standing = false;
			return 0;
		}
	}
	/* A preparation serves one deadline. Once that has passed with the entry
	 * unused (the decode ran elsewhere, or never came), give it back: else a
	 * reserved wide entry (the whole GPU when nothing meets the deadline)
	 * keeps best-effort work out until some later decode happens to use it,
	 * forever if none comes. Found by test_dispatch (dispatch_random_tpot,
	 * tpot_ms=0.05: stuck). */
	if (t->wide != VE_POOL_NONE && !t->wide_used && v->now_ns > t->wide_until) {
		const struct ve_pool_entry *we = &p->e[t->wide];
		if (we->reserve_for == t->holder &&
		    (we->state == VE_ENTRY_RESERVED || ve_pool_pending(p, t->wide))) {
			plan->unreserve = t->wide;
			t->wide = VE_POOL_NONE;
			return 0;
		}
	}
	/* Release a wider entry once its op is done with it. */
	if (t->wide != VE_POOL_NONE && t->wide_used) {
		const struct ve_pool_entry *we = &p->e[t->wide];
		if (we->state == VE_ENTRY_RESERVED) {
			plan->unreserve = t->wide;
			t->wide = VE_POOL_NONE;
			return 0;
		}
		if (we->state == VE_ENTRY_IDLE && we->reserve_for == VE_HOLDER_NONE)
			t->wide = VE_POOL_NONE;
	}
	/* A ready latency op already at risk and nothing prepared: prepare now. */
	if (t->holder >= 0 && t->wide == VE_POOL_NONE) {
		uint32_t c = (uint32_t)t->holder;
		for (uint32_t s = v->clients[c].head; s != VE_READY_NIL; s = v->ops[s].next) {
			const struct ve_ready_op *o = &v->ops[s];
			if (!is_latency(t, o))
				continue;
			uint64_t d = deadline_of(t, o);
			/* At risk: predicted late on the reservation, or unable to
			 * run there at all (wider than it). */
			if (o->min_sms <= p->e[t->standing].sms &&
			    predict_finish(t, v, o, p->e[t->standing].sms) <= d)
				break;
			uint16_t w = widen_for(t, v, o, v->now_ns, d);
			if (w != VE_POOL_NONE)
				plan_widen(t, v, w, c, d, plan);
			break;
		}
	}
	return 0;
}

static int32_t tpot_pick(void *priv, const struct ve_policy_view *v)
{
	struct tpot *t = priv;
	if (t->round != v->round) {
		t->round = v->round;
		ve__tput_plan(t->tp, v, t->lat_mask);
	}
	/* Latency ops first: at-risk, then earliest deadline. Each is offered once
	 * per round (the coordinator ends a round on a repeated pick). */
	int32_t best = -1;
	bool best_risk = false;
	uint64_t best_d = UINT64_MAX;
	uint32_t m = v->pool->e[t->standing].sms;
	for (uint32_t c = 0; c < v->nclients; c++) {
		/* predict_finish() of each op, summed along the queue once instead
		 * of once per op (that was quadratic in the client's queue). */
		double ahead = 0;
		for (uint32_t s = v->clients[c].head; s != VE_READY_NIL; s = v->ops[s].next) {
			const struct ve_ready_op *o = &v->ops[s];
			if (!is_latency(t, o))
				continue;
			double mine = v->predict(v, o, m);
			uint64_t fin = v->now_ns + (uint64_t)(ahead + mine);
			ahead += mine;
			if (t->offered[s] == v->round)
				continue;
			uint64_t d = deadline_of(t, o);
			bool risk = fin > d;
			if (best < 0 || (risk && !best_risk) || (risk == best_risk && d < best_d)) {
				best = (int32_t)s;
				best_risk = risk;
				best_d = d;
			}
		}
	}
	if (best >= 0) {
		t->offered[best] = v->round;
		return best;
	}
	return ve__tput_next(t->tp, v);
}

static int32_t tpot_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			   const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	struct tpot *t = priv;
	const struct ve_ready_op *o = &v->ops[op];
	const struct ve_pool *p = v->pool;
	if (!is_latency(t, o))
		return ve__tput_entry_for(t->tp, op);
	bool has_wide = false, has_standing = false;
	for (uint32_t i = 0; i < n; i++) {
		has_wide |= eligible[i] == t->wide;
		has_standing |= eligible[i] == t->standing;
	}
	if (t->wide != VE_POOL_NONE && has_wide && p->e[t->wide].state == VE_ENTRY_RESERVED)
		return t->wide;
	if (has_standing && p->e[t->standing].state != VE_ENTRY_IDLE) {
		if (p->e[t->standing].outstanding)
			*flags |= VE_BIND_SHARE;
		return t->standing;
	}
	/* No reservation usable: the smallest idle entry that meets the deadline. */
	uint64_t d = deadline_of(t, o);
	int32_t fallback = -1;
	for (uint32_t i = 0; i < n; i++) {
		const struct ve_pool_entry *pe = &p->e[eligible[i]];
		if (pe->state != VE_ENTRY_IDLE)
			continue;
		fallback = eligible[i];
		if (v->now_ns + (uint64_t)v->predict(v, o, pe->sms) <= d)
			return eligible[i];
	}
	return fallback;
}

static void tpot_notify(void *priv, const struct ve_policy_view *v,
			const struct ve_policy_event *ev)
{
	struct tpot *t = priv;
	ve__tput_client_event(t->tp, ev);
	switch (ev->kind) {
	case VE_PEV_CLIENT_ADDED:
		if (ev->flags & VE_READY_LATENCY) {
			t->lat_mask[ev->client / 64] |= 1ull << (ev->client % 64);
			if (t->holder < 0) {
				t->holder = (int32_t)ev->client;
				t->want_standing = true;
			}
		}
		break;
	case VE_PEV_CLIENT_REMOVED:
		t->lat_mask[ev->client / 64] &= ~(1ull << (ev->client % 64));
		if (t->yield_to == (int32_t)ev->client)
			t->yield_to = -1;
		if (t->holder == (int32_t)ev->client) {
			/* The reservation passes to the next latency client, if
			 * any (it stayed unprotected until another registered). */
			t->holder = -1;
			t->wide = VE_POOL_NONE;
			for (uint32_t k = 0; k < VE_POLICY_MAX_CLIENTS && t->holder < 0; k++)
				if (t->lat_mask[k / 64] >> (k % 64) & 1) {
					t->holder = (int32_t)k;
					t->want_standing = true;
				}
		}
		break;
	case VE_PEV_COMPLETED:
		if (ev->client < VE_POLICY_MAX_CLIENTS &&
		    (t->lat_mask[ev->client / 64] >> (ev->client % 64) & 1)) {
			t->last_done[ev->client] = v->now_ns;
			if (ev->entry == t->wide)
				t->wide_used = true;
		}
		break;
	default:
		break;
	}
}

/* The size of the next entry containing the reservation above (up) or
 * below (down) `from` SMs: up at most `cap`, down at least the reservation;
 * `from` itself if there is none. */
static uint32_t core_step(const struct ve_pool *p, uint64_t core, uint32_t from, uint32_t cap,
			  uint32_t least, bool up)
{
	uint32_t best = from;
	for (uint32_t i = 0; i < p->nentries; i++) {
		const struct ve_pool_entry *pe = &p->e[p->by_size[i]];
		if ((pe->leaves & core) != core)
			continue;
		if (up && pe->sms > from && pe->sms <= cap)
			return pe->sms; /* by_size ascends: the first above is the next */
		if (!up && pe->sms < from && pe->sms >= least)
			best = pe->sms; /* the last below is the next */
	}
	return best;
}

/* adapt=1: raise the learned size on a late op, lower it when none was late
 * for adapt_down_ms (struct tpot). Never above what the client's kernels
 * can use (its want), nor above `cap`. */
static void adapt_floor(struct tpot *t, const struct ve_pool *p, const struct ve_client_demand *d,
			uint32_t cap, uint64_t now)
{
	uint64_t core = p->e[t->standing].leaves;
	uint32_t least = p->e[t->standing].sms;
	/* A raise only once the last size is in effect (its SMs drained to the
	 * client) and has run grow_hold_ms: one made while the wider grant
	 * still waits for a drain would not have been tried. */
	bool in_effect = d->entry != VE_POOL_NONE && d->entry < p->nentries &&
			 p->e[d->entry].sms >= t->floor_sms;
	if (in_effect && !t->effect_ns)
		t->effect_ns = VE_MAX(now, 1ull);
	if (d->flags & VE_DEMAND_LATE) {
		t->late_seen_ns = now;
		uint32_t use = VE_MAX(ve__grant_want(p, d), d->min_sms);
		if (t->floor_sms < use && in_effect && now - t->effect_ns >= t->grow_hold_ns) {
			uint32_t s = core_step(p, core, t->floor_sms, cap, least, true);
			if (s != t->floor_sms) {
				t->floor_sms = s;
				t->floor_ns = VE_MAX(now, 1ull);
				t->effect_ns = 0;
			}
		}
	} else if (t->floor_sms > least && now - t->late_seen_ns >= t->adapt_down_ns &&
		   now - t->floor_ns >= t->adapt_down_ns) {
		t->floor_sms = core_step(p, core, t->floor_sms, cap, least, false);
		t->floor_ns = VE_MAX(now, 1ull);
		t->effect_ns = 0;
	}
}

/* Whether the reservation yields to a best-effort launch that fits in no
 * entry outside it (a cooperative grid or cluster kernels sized as the
 * GPU): at once while the latency clients are idle, after tput's starve_ms
 * of waiting while they have work (kept then, such a launch never ran
 * while a server was busy: each waited for the watchdog, 10 s), and until
 * that client's grant has taken effect (granted the whole GPU and then
 * planned outside the reservation again, it waited for good). */
static bool wide_launch(struct tpot *t, const struct ve_policy_view *v,
			const struct ve_client_demand *dem, const uint64_t *skip, uint64_t held,
			bool active)
{
	/* Outside what the latency clients are to hold: the reservation, or
	 * what it grew to under pressure. */
	uint32_t free_max = widest_outside(v->pool, held);
	uint32_t nk = VE_MIN(v->nclients, (uint32_t)VE_POLICY_MAX_CLIENTS);
	int32_t y = t->yield_to;
	if (y >= 0 && ((uint32_t)y >= nk || !v->clients[y].active ||
		       !(dem[y].flags & VE_DEMAND_WAITING) || dem[y].min_sms <= free_max))
		t->yield_to = -1;
	for (uint32_t k = 0; k < nk && t->yield_to < 0; k++) {
		if ((skip[k / 64] >> (k % 64) & 1) || !v->clients[k].active ||
		    dem[k].min_sms <= free_max)
			continue;
		uint64_t w = t->tp->wait_from[k];
		if (!active || (w && v->now_ns >= w && v->now_ns - w >= t->tp->starve_ns))
			t->yield_to = (int32_t)k;
	}
	return t->yield_to >= 0;
}

/* Grant mode. The latency-class clients always hold the standing
 * reservation (shared, when there are several), so a request that arrives
 * finds SMs of its own at once; under deadline pressure (and with grow=0
 * whenever they have work, or lat_idle_ms after) it grows to what their
 * kernels can use (the widest want, at most all but batch_min SMs; with
 * adapt=1 to the learned size), in an entry that contains the reservation
 * so the growth never waits for their own work. Best-effort clients share
 * the rest by the Throughput-Oriented plan. The reservation yields to a
 * best-effort launch that cannot run outside it (wide_launch), and with
 * standing=0 whenever its owners are idle. */
static int tpot_grant(void *priv, const struct ve_policy_view *v,
		      const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	struct tpot *t = priv;
	const struct ve_pool *p = v->pool;
	uint64_t skip[VE_POLICY_MAX_CLIENTS / 64 + 1] = {0};
	int32_t lat = -1;
	uint32_t nlat = 0;
	/* One reservation for the latency clients together: with several (two
	 * inference servers beside a training job) they share it, sized by
	 * the demand of all of them (the first one's grant in effect, any
	 * one's lateness, the widest want and launch, the latest work). Left
	 * out of the plan, every one but the first got no grant at all (each
	 * of its ops waited for the watchdog, 10 s); planned with the batch
	 * clients, the second waited for their long kernels at every request
	 * (ve-sim, two servers beside train-infer's training: p99 33 ms
	 * against 2.6 ms for the first). */
	struct ve_client_demand agg = {0};
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
		if (!v->clients[k].active || !(dem[k].flags & VE_DEMAND_LATENCY))
			continue;
		const struct ve_client_demand *dk = &dem[k];
		if (lat < 0) {
			lat = (int32_t)k;
			agg = *dk;
		} else {
			agg.ready += dk->ready;
			agg.inflight += dk->inflight;
			agg.want_sms = VE_MAX(agg.want_sms, dk->want_sms);
			agg.min_sms = VE_MAX(agg.min_sms, dk->min_sms);
			agg.active_ns = VE_MAX(agg.active_ns, dk->active_ns);
			agg.flags |= dk->flags;
			if (dk->deadline_ns && (!agg.deadline_ns || dk->deadline_ns < agg.deadline_ns))
				agg.deadline_ns = dk->deadline_ns;
		}
		nlat++;
		skip[k / 64] |= 1ull << (k % 64);
	}
	uint64_t avail = p->all_leaves, lendable = 0;
	if (lat >= 0) {
		const struct ve_client_demand *d = &agg;
		uint64_t core = p->e[t->standing].leaves;
		bool active = ve__grant_active(d, v->now_ns, t->lat_idle_ns);
		uint16_t target = t->standing;
		/* Deadline pressure: a latency op of it finished late recently, or
		 * its earliest op waiting for SMs has less than half a TPOT left.
		 * Without advisory deadlines (an unmodified server) there is none:
		 * it keeps its reservation. */
		if ((d->flags & VE_DEMAND_LATE) ||
		    (d->deadline_ns && d->deadline_ns < v->now_ns + t->tpot_ns / 2))
			t->pressure_until = v->now_ns + t->grow_hold_ns;
		uint32_t cap = p->total_sms > t->batch_min ? p->total_sms - t->batch_min : 0;
		/* Not growing: only as wide as a launch wider than the reservation. */
		uint32_t want = d->min_sms;
		if (active && !t->grow_on_pressure)
			want = VE_MAX(ve__grant_want(p, d), d->min_sms); /* grow=0 */
		else if (active && t->adapt) {
			adapt_floor(t, p, d, cap, v->now_ns);
			want = VE_MAX(t->floor_sms, d->min_sms); /* the learned size */
		} else if (active && v->now_ns < t->pressure_until)
			want = VE_MAX(ve__grant_want(p, d), d->min_sms); /* adapt=0 */
		if (want > p->e[t->standing].sms) {
			want = VE_MIN(want, VE_MAX(cap, d->min_sms));
			uint16_t best = t->standing;
			for (uint32_t i = 0; i < p->nentries; i++) {
				uint16_t e = p->by_size[i];
				if ((p->e[e].leaves & core) != core)
					continue;
				if (p->e[e].sms > VE_MAX(cap, d->min_sms))
					break;
				best = e;
				if (p->e[e].sms >= want)
					break;
			}
			target = best;
		} else if (!active && !t->standing_idle) {
			target = VE_POOL_NONE; /* standing=0: the SMs go back while idle */
		}
		/* else: no pressure, its reservation (target as set above) */
		if (target != VE_POOL_NONE && wide_launch(t, v, dem, skip, p->e[target].leaves, active))
			target = VE_POOL_NONE;
		for (uint32_t k = (uint32_t)lat; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
			if (!(skip[k / 64] >> (k % 64) & 1))
				continue;
			plan->entry[k] = target;
			plan->share[k] = nlat > 1 ? VE_GRANT_SHARE : 0;
			plan->why[k] = target != VE_POOL_NONE ? VE_WHY_RESERVED : VE_WHY_IDLE;
		}
		if (target != VE_POOL_NONE)
			avail &= ~p->e[target].leaves;
		/* lend_reserve: the reservation in effect, its owner idle for
		 * the lend guard (tput's lend_idle_ms). */
		if (t->lend_reserve && target == t->standing && d->entry == target &&
		    ve__tput_lendable(t->tp, v, d))
			lendable = p->e[target].leaves;
	}
	return ve__tput_grant(t->tp, v, dem, plan, avail, skip, lendable);
}

const struct ve_policy_ops ve_policy_tpot = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "tpot",
	.summary = "TPOT-First: standing reservation and deadlines for latency-class (decode) "
		   "ops, Throughput-Oriented for the rest",
	.init = tpot_init,
	.fini = tpot_fini,
	.pick = tpot_pick,
	.select = tpot_select,
	.prepare = tpot_prepare,
	.notify = tpot_notify,
	.grant = tpot_grant,
};
