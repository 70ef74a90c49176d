/* SPDX-License-Identifier: MIT */
/*
 * Throughput-Oriented policy (paper section 5, Algorithm 1).
 *
 * Each scheduling round computes a plan from the ready queue and the free
 * leaves, then hands it out through pick/select:
 *  1. MinBind: age-aware round robin over clients (oldest head first), each
 *     turn binding the client's oldest op that fits to a minimum-size free
 *     entry, until no free entry or op remains. Among entries of the minimum
 *     size, the one whose largest free tree ancestor is biggest wins, so
 *     concurrent ops land in different subtrees and keep room to grow (buddy
 *     style spreading; without it two ops on sibling leaves block each other).
 *  2. Expansion: repeatedly apply the feasible widening (o, p -> p', p' a
 *     strict superset of p that overlaps no busy leaf and no other planned
 *     entry) with the largest marginal gain
 *        G = (P(m') - P(m)) / (m' - m),  P(m) = T(m_min) / T(m),
 *     until no widening gains at least min_gain relative progress.
 * Knobs (VE_POLICY=tput:k=v,...): min_gain (default 0.01), starve_ms (20):
 * when the oldest op has waited that long and does not fit, the round binds
 * nothing so the GPU drains for it (a guard against starving wide launches).
 */
#include "policy/policies.h"
#include "policy/tput_impl.h"
#include "util/util.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIES 4

/* Client k's bit in skip_clients (NULL: none set). */
static bool skipped(const uint64_t *skip_clients, uint32_t k)
{
	return skip_clients && (skip_clients[k / 64] >> (k % 64) & 1);
}

static int parse_kv(const char *k, const char *v, void *arg)
{
	struct tput *t = arg;
	double d;
	if (ve__parse_double(v, &d))
		return -EINVAL;
	if (strcmp(k, "min_gain") == 0 && d >= 0)
		t->min_gain = d;
	else if (strcmp(k, "starve_ms") == 0 && d >= 0)
		t->starve_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "idle_ms") == 0 && d >= 0)
		t->idle_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "idle_short_ms") == 0 && d >= 0)
		t->idle_short_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "lat_idle_ms") == 0 && d >= 0)
		t->lat_idle_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "hysteresis") == 0 && d >= 1)
		t->hysteresis = d;
	else if (strcmp(k, "share") == 0 && (d == 0 || d == 1 || d == 2))
		t->share = (int)d;
	else if (strcmp(k, "share_op_us") == 0)
		t->share_op_us = (uint32_t)d;
	else if (strcmp(k, "share_hold_ms") == 0 && d >= 0)
		t->share_hold_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "share_enter_ms") == 0 && d >= 0)
		t->share_enter_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "alone") == 0 && (d == 0 || d == 1))
		t->alone = (int)d;
	else if (strcmp(k, "lend") == 0 && (d == 0 || d == 1))
		t->lend = (int)d;
	else if (strcmp(k, "lend_idle_ms") == 0 && d >= 0)
		t->lend_idle_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "prio") == 0 && d >= 0 && d <= 16)
		t->prio = d;
	else if (strcmp(k, "share_duty") == 0 && d >= 0 && d <= 1)
		t->share_duty = d;
	else if (strcmp(k, "turns") == 0 && (d == 0 || d == 1))
		t->turns = (int)d;
	else if (strcmp(k, "turn_duty") == 0 && d >= 0 && d <= 1)
		t->turn_duty = d;
	else if (strcmp(k, "turn_op_us") == 0 && d >= 0 && d <= 1e6)
		t->turn_op_us = (uint32_t)d;
	else if (strcmp(k, "turn_idle_ms") == 0 && d >= 0)
		t->turn_idle_ns = (uint64_t)(d * 1e6);
	else if (strcmp(k, "duty_ms") == 0 && d >= 1)
		t->duty_tau_ns = (uint64_t)(d * 1e6);
	else
		return -EINVAL;
	return 0;
}

static int build_tables(struct tput *t, const struct ve_pool *p)
{
	t->nentries = p->nentries;
	uint32_t sizes[VE_TPUT_MAX_SIZES], ns = 0;
	for (uint32_t e = 0; e < p->nentries; e++) {
		uint32_t k;
		for (k = 0; k < ns && sizes[k] != p->e[e].sms; k++)
			;
		if (k == ns) {
			if (ns == VE_TPUT_MAX_SIZES)
				return -E2BIG;
			sizes[ns++] = p->e[e].sms;
		}
		t->size_idx[e] = (uint8_t)k;
	}
	t->sup_off = calloc(p->nentries, sizeof(*t->sup_off));
	t->sup_n = calloc(p->nentries, sizeof(*t->sup_n));
	t->sup = calloc((size_t)p->nentries * p->nentries, sizeof(*t->sup));
	if (!t->sup_off || !t->sup_n || !t->sup)
		return -ENOMEM;
	uint32_t off = 0;
	for (uint32_t e = 0; e < p->nentries; e++) {
		t->sup_off[e] = off;
		uint64_t le = p->e[e].leaves;
		/* by_size order makes each superset list ascending in size */
		for (uint32_t i = 0; i < p->nentries; i++) {
			uint16_t f = p->by_size[i];
			uint64_t lf = p->e[f].leaves;
			if (f != e && (lf & le) == le && lf != le)
				t->sup[off + t->sup_n[e]++] = f;
		}
		off += t->sup_n[e];
	}
	return 0;
}

void ve__tput_destroy(struct tput *t)
{
	if (!t)
		return;
	free(t->sup_off);
	free(t->sup_n);
	free(t->sup);
	ve__grant_tables_fini(&t->gt);
	free(t);
}

int ve__tput_create(const char *args, const struct ve_policy_view *v, struct tput **out)
{
	struct tput *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->min_gain = 0.01;
	t->starve_ns = 20 * 1000000ull;
	/* A batch client keeps its SMs idle_ms after its last work, so the
	 * short gaps of a launch-bound loop or a step boundary cost no drain;
	 * but a client whose gaps usually outlast that (host phases) gives
	 * them up after idle_short_ms: holding them wastes them while a
	 * partner waits, and the drain its return costs is cheaper. On the
	 * H200, a job with 13 ms host phases beside a dense one gave 1.105 /
	 * 1.147 / 1.157-1.167 aggregate at a 10 / 4 / 2 ms hold (MPS 1.121),
	 * while a 2 ms hold for every client cost the launch-bound pairs 3%
	 * (1.594 -> 1.545, 1.842 -> 1.794). Latency clients keep theirs
	 * lat_idle_ms whatever their gaps (the long gaps between requests must
	 * not shorten the hold between a decode server's tokens). 20 ms cost
	 * training 10% in ve-sim train-infer (bursty requests 5-15 ms apart)
	 * for a lower inference p50 (before lending). With lending (below)
	 * a held grant costs the others only their long kernels: 50 ms keeps a
	 * request stream's grant across its gaps, so a request rarely waits for
	 * a batch client's long kernels to drain (ve-sim train-infer, 3 seeds:
	 * reclaim p99 485 us vs 1.4 ms at 10 ms, aggregate 1.78 vs 1.80).
	 * Without lending (lend=0) the hold stays 10 ms, as it was. */
	t->idle_ns = 10 * 1000000ull;
	t->idle_short_ns = 2 * 1000000ull;
	t->lat_idle_ns = UINT64_MAX; /* 50 ms with lending, 10 without (after the knobs) */
	/* Lending: SMs a client holds and has not used for lend_idle_ms (or
	 * that nobody holds) run a busy batch client's short kernels. The
	 * guard keeps a launch-bound client's gaps of a few microseconds
	 * between kernels (an eager decode step is full of them) from lending
	 * its SMs out and taking them back every tick. ve-sim train-infer (3
	 * seeds): aggregate 1.63 -> 1.78 (0.87 -> 0.96 of the best static
	 * partition), inference p99 10.5 -> 10.0 ms; no change on the other
	 * scenarios. */
	t->lend = 1;
	t->lend_idle_ns = 1000000ull;
	t->hysteresis = 1.05;
	t->share = 2;
	t->share_op_us = 200;
	t->share_hold_ns = 200 * 1000000ull;
	t->share_enter_ns = 10 * 1000000ull;
	t->alone = 1;
	t->prio = 1.0;
	t->share_duty = 0.95;
	t->duty_tau_ns = 200 * 1000000ull;
	t->turns = 1;
	t->turn_duty = 0.8;
	t->turn_idle_ns = 500000ull;
	/* Kernels of a job with host phases average less than share_op_us
	 * (200): on the H200 the coloc host-phase job beside the dense one
	 * took no turns at 200 (1.174 aggregate) and 1.323 at 50, same call
	 * (bench/results/gpu-2026-12-05/call2). */
	t->turn_op_us = 50;
	t->turn_k = -1;
	t->round = UINT64_MAX;
	int rc = ve__policy_parse_args(args, parse_kv, t);
	if (t->lat_idle_ns == UINT64_MAX)
		t->lat_idle_ns = (t->lend ? 50 : 10) * 1000000ull;
	t->turn_hold_ns = t->turn_idle_ns;
	if (!rc)
		rc = build_tables(t, v->pool);
	if (!rc)
		rc = ve__grant_tables_init(&t->gt, v->pool);
	if (rc) {
		ve__tput_destroy(t);
		return rc;
	}
	*out = t;
	return 0;
}

static int tput_init(const char *args, const struct ve_policy_view *v, void **priv)
{
	return ve__tput_create(args, v, (struct tput **)priv);
}

static void tput_fini(void *priv)
{
	ve__tput_destroy(priv);
}

/* Largest tree ancestor of e (e itself included) whose leaves are all in avail. */
static uint32_t free_ancestor_sms(const struct ve_pool *p, uint16_t e, uint64_t avail)
{
	uint32_t best = p->e[e].sms;
	for (uint16_t a = p->e[e].parent; a != VE_POOL_NONE; a = p->e[a].parent) {
		if ((p->e[a].leaves & ~avail) != 0)
			break;
		best = p->e[a].sms;
	}
	return best;
}

static uint16_t best_min_entry(const struct ve_pool *p, const struct ve_ready_op *o,
			       uint64_t avail)
{
	uint16_t best = VE_POOL_NONE;
	uint32_t best_sms = 0, best_score = 0;
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t e = p->by_size[i];
		const struct ve_pool_entry *pe = &p->e[e];
		if (best != VE_POOL_NONE && pe->sms > best_sms)
			break; /* by_size: only the minimum size class competes */
		if (pe->sms < o->min_sms || (pe->leaves & ~avail) != 0 ||
		    pe->state != VE_ENTRY_IDLE)
			continue;
		uint32_t score = free_ancestor_sms(p, e, avail);
		if (best == VE_POOL_NONE || score > best_score) {
			best = e;
			best_sms = pe->sms;
			best_score = score;
		}
	}
	return best;
}

static double T_of(struct tput *t, const struct ve_policy_view *v, struct tput_assign *a, uint16_t e)
{
	uint8_t k = t->size_idx[e];
	if (isnan(a->t[k]))
		a->t[k] = v->predict(v, &v->ops[a->op], v->pool->e[e].sms);
	return a->t[k];
}

void ve__tput_plan(struct tput *t, const struct ve_policy_view *v, const uint64_t *skip_clients)
{
	const struct ve_pool *p = v->pool;
	t->n = 0;
	t->cursor = 0;
	t->round = v->round;
	uint64_t avail = p->e[p->root].leaves & ~p->busy & ~p->claimed;
	if (!avail || !v->nready)
		return;

	/* Clients with ready ops, oldest head first. */
	uint32_t order[VE_POLICY_MAX_CLIENTS], no = 0, cur[VE_POLICY_MAX_CLIENTS];
	for (uint32_t c = 0; c < v->nclients && no < VE_POLICY_MAX_CLIENTS; c++) {
		if (v->clients[c].head == VE_READY_NIL)
			continue;
		if (skipped(skip_clients, c))
			continue;
		uint32_t j = no++;
		uint64_t age = v->ops[v->clients[c].head].ready_ns;
		while (j > 0 && v->ops[v->clients[order[j - 1]].head].ready_ns > age) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = c;
	}
	for (uint32_t i = 0; i < no; i++)
		cur[i] = v->clients[order[i]].head;

	/* Starvation guard: the oldest op waited too long and cannot fit. */
	if (no) {
		const struct ve_ready_op *old = &v->ops[cur[0]];
		if (v->now_ns > old->ready_ns && v->now_ns - old->ready_ns > t->starve_ns &&
		    best_min_entry(p, old, avail) == VE_POOL_NONE)
			return;
	}

	/* 1. MinBind, age-aware round robin. */
	bool progress = true;
	while (progress && avail && t->n < VE_TPUT_MAX_PLAN) {
		progress = false;
		for (uint32_t i = 0; i < no && avail && t->n < VE_TPUT_MAX_PLAN; i++) {
			uint32_t s = cur[i];
			bool placed = false;
			for (int tries = 0; s != VE_READY_NIL && tries < MAX_TRIES;
			     tries++, s = v->ops[s].next) {
				uint16_t e = best_min_entry(p, &v->ops[s], avail);
				if (e == VE_POOL_NONE)
					continue;
				struct tput_assign *a = &t->a[t->n++];
				a->op = s;
				a->entry = e;
				for (int k = 0; k < VE_TPUT_MAX_SIZES; k++)
					a->t[k] = NAN;
				a->tmin = T_of(t, v, a, e);
				avail &= ~p->e[e].leaves;
				progress = placed = true;
				break;
			}
			/* A client whose next few ops do not fit is done for this round. */
			cur[i] = placed ? v->ops[s].next : VE_READY_NIL;
		}
	}

	/* 2. Greedy expansion by marginal gain per SM. */
	uint64_t blocked = p->busy | p->claimed;
	for (;;) {
		uint64_t taken = 0;
		for (uint32_t i = 0; i < t->n; i++)
			taken |= p->e[t->a[i].entry].leaves;
		double best_g = 0;
		int bi = -1;
		uint16_t be = VE_POOL_NONE;
		for (uint32_t i = 0; i < t->n; i++) {
			struct tput_assign *a = &t->a[i];
			uint16_t ce = a->entry;
			uint64_t others = taken & ~p->e[ce].leaves;
			double pc = a->tmin / T_of(t, v, a, ce);
			const uint16_t *sup = t->sup + t->sup_off[ce];
			for (uint32_t k = 0; k < t->sup_n[ce]; k++) {
				uint16_t f = sup[k];
				if (p->e[f].leaves & (blocked | others))
					continue;
				if (p->e[f].state != VE_ENTRY_IDLE)
					continue;
				double pf = a->tmin / T_of(t, v, a, f);
				if (!(pf > pc * (1.0 + t->min_gain)))
					continue;
				double g = (pf - pc) / (double)(p->e[f].sms - p->e[ce].sms);
				if (g > best_g) {
					best_g = g;
					bi = (int)i;
					be = f;
				}
			}
		}
		if (bi < 0)
			break;
		t->a[bi].entry = be;
	}
}

int32_t ve__tput_next(struct tput *t, const struct ve_policy_view *v)
{
	while (t->cursor < t->n) {
		uint32_t op = t->a[t->cursor++].op;
		if (v->ops[op].in_use)
			return (int32_t)op;
	}
	return -1;
}

int32_t ve__tput_entry_for(const struct tput *t, uint32_t op)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->a[i].op == op)
			return t->a[i].entry;
	return -1;
}

static int32_t tput_pick(void *priv, const struct ve_policy_view *v)
{
	struct tput *t = priv;
	if (t->round != v->round)
		ve__tput_plan(t, v, NULL);
	return ve__tput_next(t, v);
}

static int32_t tput_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			   const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	return ve__tput_entry_for(priv, op);
}

/* Client k as a newcomer: busy, never away, no gaps or runs seen. */
static void duty_fresh(struct tput *t, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, uint32_t k)
{
	if (t->turn_k == (int32_t)k)
		t->turn_k = -1;
	t->peak[k] = VE_MAX(dem[k].want_sms, dem[k].min_sms);
	t->away[k] = 0;
	t->duty[k] = 1.0;
	t->duty_ns[k] = VE_MAX(v->now_ns, 1ull);
	t->gap_from[k] = 0;
	t->gap_ns[k] = 0;
	t->run_from[k] = 0;
	t->run_ns[k] = 0;
}

/* Back from a gap as long as the averages' memory and far longer than its
 * usual gaps: a pause (servers waiting for each other, a job between
 * phases), not a host phase of its steps. Its time away would start turns
 * and hand the GPU to whoever waited longest while the other waits for
 * 'away' to decay (a decode server without SMs for a third of a second on
 * the H200; test tput_grant_a_long_wait_starts_no_turns). The turn state
 * restarts; its duty and its gaps' average keep the pause, as any gap: a
 * job whose host phases all last this long keeps its weight and its short
 * hold (tput_grant_hold_short_for_clients_with_long_gaps,
 * tput_grant_long_host_phases_keep_their_weight), and after a few such
 * gaps they are its usual ones. */
static void turns_forget(struct tput *t, uint32_t k)
{
	if (t->turn_k == (int32_t)k)
		t->turn_k = -1;
	t->away[k] = 0;
	t->run_from[k] = 0;
	t->run_ns[k] = 0;
}

/* Exponential average of 'has work ready or in flight', sampled at every
 * grant decision, over duty_tau (default 200 ms: several steps of a training
 * job with host phases, so the weight does not follow each phase). A client
 * starts at duty 1 (no priority until it has shown gaps) and is forgotten
 * when it leaves. */
static void duty_update(struct tput *t, const struct ve_policy_view *v,
			const struct ve_client_demand *dem)
{
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
		if (!v->clients[k].active) {
			t->duty_ns[k] = 0;
			if (t->turn_k == (int32_t)k)
				t->turn_k = -1;
			continue;
		}
		bool busy = dem[k].ready || dem[k].inflight;
		/* The last time it had work (active_ns): ticks are not spread
		 * evenly over a client's time. In ve-sim they come at events
		 * (a kernel's end: the client idle for an instant), and a decode
		 * loop that reads its token back every step read as idle at
		 * nearly every tick (duty 0, away 1) while busy 88% of the time. */
		uint64_t act = dem[k].active_ns <= v->now_ns ? dem[k].active_ns : 0;
		if (!t->duty_ns[k] || v->now_ns < t->duty_ns[k]) {
			duty_fresh(t, v, dem, k);
			continue;
		}
		/* Gaps: from its last work to its next, ended by work seen now
		 * or since the gap began (then at that work's last moment, an
		 * upper bound); their lengths a running average of the last
		 * few. */
		uint64_t prev = t->duty_ns[k];
		if (t->gap_from[k] && (busy || act > t->gap_from[k])) {
			uint64_t end = busy ? v->now_ns : act;
			double g = (double)(end - t->gap_from[k]);
			if (g >= (double)t->duty_tau_ns && g > 4 * t->gap_ns[k])
				turns_forget(t, k);
			t->gap_ns[k] += (g - t->gap_ns[k]) * 0.25;
			/* Runs: from the end of a gap past the hand-over point
			 * to the start of the next such gap (turn_away). */
			if (g > (double)t->turn_hold_ns) {
				if (t->run_from[k] && t->gap_from[k] > t->run_from[k]) {
					double r = (double)(t->gap_from[k] - t->run_from[k]);
					t->run_ns[k] += t->run_ns[k] > 0 ? (r - t->run_ns[k]) * 0.25 : r;
				}
				t->run_from[k] = end;
			}
			t->gap_from[k] = 0;
		}
		if (!busy && !t->gap_from[k])
			t->gap_from[k] = act ? act : v->now_ns;
		double dt = (double)(v->now_ns - prev);
		double a = 1.0 - exp(-dt / (double)t->duty_tau_ns);
		/* Busy share of the time since the last tick: all of it with
		 * work now, else up to its last work. */
		double x = busy ? 1.0 : act > prev ? (double)(act - prev) / dt : 0.0;
		t->duty[k] += (x - t->duty[k]) * a;
		/* Away: in a gap past the hand-over point (turn_hold_ns), the
		 * time a turn holder leaves to the others (turn_holder); the
		 * share of the time since the last tick spent so. */
		double xa = 0.0;
		if (!busy && dt > 0) {
			uint64_t from = VE_MAX(prev, t->gap_from[k] + t->turn_hold_ns);
			xa = v->now_ns > from ? (double)(v->now_ns - from) / dt : 0.0;
		}
		t->away[k] += (xa - t->away[k]) * a;
		t->duty_ns[k] = VE_MAX(v->now_ns, 1ull);
		/* Its want while it runs: a host phase (or a wait for a
		 * grant) halves want_sms every few ms, so at the start of a
		 * GPU phase the client looks narrow for a tick or two; the
		 * peak forgets only over time with work on the GPU (a tick's
		 * worth at most: no tick for long says nothing about it). */
		if (dem[k].inflight) {
			double w = VE_MAX(dem[k].want_sms, dem[k].min_sms);
			double ap = dt < 1e6 ? a : 1.0 - exp(-1e6 / (double)t->duty_tau_ns);
			t->peak[k] = VE_MAX(w, t->peak[k] * (1.0 - ap));
		}
	}
}

/* How long client k keeps its grant after its last work (see idle_ns). */
static uint64_t hold_ns(const struct tput *t, uint32_t k, const struct ve_client_demand *d)
{
	if (d->flags & VE_DEMAND_LATENCY)
		return t->lat_idle_ns;
	if ((int32_t)k == t->turn_k)
		return VE_MIN(t->turn_hold_ns, t->idle_ns);
	if (t->duty_ns[k] && t->gap_ns[k] >= (double)t->idle_ns)
		return VE_MIN(t->idle_short_ns, t->idle_ns);
	return t->idle_ns;
}

double ve__tput_weight(const struct tput *t, uint32_t k)
{
	if (k >= VE_POLICY_MAX_CLIENTS || !t->duty_ns[k])
		return 1.0;
	double d = t->duty[k] < 0 ? 0 : t->duty[k] > 1 ? 1 : t->duty[k];
	return 1.0 + t->prio * (1.0 - d);
}

static int grant_entries(struct tput *t, const struct ve_policy_view *v,
			 const struct ve_client_demand *dem, struct ve_grant_plan *plan, uint64_t avail,
			 const uint64_t *skip_clients);

bool ve__tput_lendable(const struct tput *t, const struct ve_policy_view *v,
		       const struct ve_client_demand *d)
{
	return !d->ready && !d->inflight && !(d->flags & VE_DEMAND_WAITING) &&
	       (!d->active_ns || v->now_ns >= d->active_ns + t->lend_idle_ns);
}

/* Lends (ve_grant_plan.lend): SMs inside avail that are granted to a client
 * with no work now, or to nobody, are lent to a busy batch client for its
 * short kernels: the widest entry that contains its settled grant and only
 * such SMs besides, each SM to one borrower. A client that gets work back
 * runs at once on its own grant beside the borrowed short kernels, and the
 * coordinator takes the lend back at the next tick (it drains within the
 * client's lend bound). Clients of skip_clients neither lend nor borrow. */
static void plan_lends(const struct tput *t, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, struct ve_grant_plan *plan,
		       uint64_t avail, const uint64_t *skip_clients, uint64_t lendable)
{
	const struct ve_pool *p = v->pool;
	uint64_t idle = avail, lent = 0;
	uint32_t nc = VE_MIN(v->nclients, (uint32_t)VE_POLICY_MAX_CLIENTS);
	for (uint32_t k = 0; k < VE_POLICY_MAX_CLIENTS; k++) {
		plan->lend[k] = VE_POOL_NONE;
		if (k >= nc)
			continue;
		const struct ve_client_demand *d = &dem[k];
		uint64_t mine = 0;
		if (plan->entry[k] < p->nentries)
			mine |= p->e[plan->entry[k]].leaves;
		if (d->entry < p->nentries)
			mine |= p->e[d->entry].leaves;
		/* Not lent: what a busy, skipped or sharing client holds, and a
		 * grant in transition (its SMs are being handed over). */
		if (!ve__tput_lendable(t, v, d) || skipped(skip_clients, k) ||
		    (plan->share[k] & VE_GRANT_SHARE) ||
		    plan->entry[k] != d->entry)
			idle &= ~mine;
	}
	if (!t->lend)
		return;
	idle |= lendable & ~avail;
	for (uint32_t k = 0; k < nc; k++) {
		const struct ve_client_demand *d = &dem[k];
		uint16_t own = plan->entry[k];
		if (!v->clients[k].active || skipped(skip_clients, k) ||
		    (d->flags & VE_DEMAND_LATENCY) || own >= p->nentries || own != d->entry ||
		    (plan->share[k] & VE_GRANT_SHARE) || !(d->ready || d->inflight))
			continue;
		uint64_t ol = p->e[own].leaves, free = (idle & ~lent) | ol;
		uint16_t best = VE_POOL_NONE;
		for (uint32_t i = 0; i < t->sup_n[own]; i++) {
			uint16_t f = t->sup[t->sup_off[own] + i];
			if (!(p->e[f].leaves & ~free) &&
			    (best == VE_POOL_NONE || p->e[f].sms > p->e[best].sms))
				best = f;
		}
		if (best != VE_POOL_NONE) {
			plan->lend[k] = best;
			lent |= p->e[best].leaves & ~ol;
		}
	}
}

int ve__tput_grant(struct tput *t, const struct ve_policy_view *v,
		   const struct ve_client_demand *dem, struct ve_grant_plan *plan, uint64_t avail,
		   const uint64_t *skip_clients, uint64_t lendable)
{
	int rc = grant_entries(t, v, dem, plan, avail, skip_clients);
	if (!rc)
		plan_lends(t, v, dem, plan, avail, skip_clients, lendable);
	return rc;
}

/* Auto sharing began or ended (share=2): what the test saw of each client
 * (mean op, SMs wanted, time away), so a log tells why a pair split. Flips
 * are rare by construction (share_enter_ms, share_hold_ms). */
static void log_share_flip(const struct tput *t, const struct ve_pool *p,
			   const struct ve_client_demand *dem, const uint32_t *cl,
			   const uint32_t *want, uint32_t n)
{
	char why[256];
	size_t o = 0;
	why[0] = 0;
	for (uint32_t i = 0; i < n && o < sizeof(why); i++)
		o += (size_t)snprintf(why + o, sizeof(why) - o,
				      "%sclient %u op %u us, wants %u of %u SMs, away %.3f",
				      i ? "; " : "", cl[i], (unsigned)dem[cl[i]].op_us, want[i],
				      p->total_sms, t->away[cl[i]]);
	VE_INFO("tput: %s (%s)", t->shared ? "sharing the whole GPU" : "splitting the GPU", why);
}

/* Widest entry whose leaves are all inside 'inside' (VE_POOL_NONE: none). */
static uint16_t widest_inside(const struct ve_pool *p, uint64_t inside)
{
	uint16_t w = VE_POOL_NONE;
	for (uint32_t e = 0; e < p->nentries; e++)
		if (!(p->e[e].leaves & ~inside) && (w == VE_POOL_NONE || p->e[e].sms > p->e[w].sms))
			w = (uint16_t)e;
	return w;
}

/* Turns. Clients whose kernels each fill the GPU (want at least 90% of
 * the SMs while they run, kernels of turn_op_us or longer on average) gain
 * nothing from a split: each kernel runs as many times longer as it has
 * fewer SMs, and one started on a narrow grant keeps those SMs for all of
 * it (a GEMM of 31 waves on 8 SMs runs 50 ms) while the SMs its partner
 * leaves idle wait for its next kernel. If one of two such clients spends at least
 * 1 - turn_duty of the time in gaps past the hand-over point (host
 * phases: 'away'), it gets the GPU while it has work and the other runs in
 * its gaps: its GPU phases run as fast as alone and its gaps are filled
 * (ve-sim, a host-phase job beside a dense one: aggregate 1.34 against
 * 1.16 split, 1.13 shared, docs/policies.md). The partner gets the time it
 * is away, so short gaps (a launch-bound loop busy 70% of the time in
 * 0.3 ms gaps) start no turns: its partner would never get the GPU.
 * Clients of narrow kernels keep SMs of their own beside the turns.
 *
 * Index into cl of the client to get the GPU (what the narrow ones leave),
 * with wide[] set for every wide client, or -1 when turns do not apply:
 * the holder (the wide client away the largest share of the time; the
 * current holder while within TURN_MARGIN of that), with two wide clients
 * (exactly); or, while the holder is away (in a gap, out of cl), the one wide
 * client left, which runs in its gap (*away set) and takes the turn over
 * (*pass set) if it is away about as much as the holder: two alike jobs
 * then alternate instead of one always running first. *here: the holder
 * is in cl. While the holder waits for its target's SMs (pinned, not in
 * cl) no other wide client gets SMs: -1, and the caller plans the turn
 * with no one to place. */
#define TURN_MARGIN 0.1

/* Client k's share of time away as turns see it: 0 while its current run
 * (work and gaps shorter than the hand-over point) has lasted more than
 * twice its usual run plus the hand-over point. Its gaps have stopped (an
 * evaluation phase, a data loader that caught up): waiting for 'away' to
 * decay kept a busy partner without SMs for 80 ms and more (test
 * tput_grant_turns_end_when_the_holder_stops_leaving). Its history is
 * kept: at its next gap it may hold the turn again. */
static double turn_away(const struct tput *t, uint32_t k, uint64_t now)
{
	bool in_run = !t->gap_from[k] || now < t->gap_from[k] + t->turn_hold_ns;
	if (in_run && t->run_ns[k] > 0 && t->run_from[k] && now > t->run_from[k] &&
	    (double)(now - t->run_from[k]) > 2 * t->run_ns[k] + (double)t->turn_hold_ns)
		return 0;
	return t->away[k];
}

static int turn_holder(struct tput *t, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, const uint32_t *cl, uint32_t n,
		       bool holder_pinned, bool *wide, bool *away, bool *pass, bool *here)
{
	*away = *pass = *here = false;
	if (!t->turns)
		return -1;
	int best = -1, cur = -1;
	double aw[VE_POLICY_MAX_CLIENTS];
	uint32_t nw = 0, op_max = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = cl[i];
		*here |= (int32_t)k == t->turn_k;
		wide[i] = t->duty_ns[k] && dem[k].op_us >= t->turn_op_us &&
			  t->peak[k] * 10 >= (double)v->pool->total_sms * 9;
		if (!wide[i])
			continue;
		nw++;
		op_max = VE_MAX(op_max, (uint32_t)dem[k].op_us);
		if ((int32_t)k == t->turn_k)
			cur = (int)i;
		aw[i] = turn_away(t, k, v->now_ns);
		if (best < 0 || aw[i] > aw[best])
			best = (int)i;
	}
	/* The hand-over rule (ski rental): the holder's gap is handed on once
	 * it has lasted as long as what taking the GPU back costs the holder,
	 * a partner's kernel (the longest mean of the wide clients), and at
	 * least turn_idle_ms. So a gap shorter than a partner's kernel never
	 * makes the holder wait for one, and a long one loses at most that
	 * much; 'away' counts gaps past this point. */
	if (nw >= 2)
		t->turn_hold_ns = VE_MAX(t->turn_idle_ns, (uint64_t)op_max * 1000);
	if (holder_pinned)
		return -1;
	double need = 1.0 - t->turn_duty;
	/* Two wide clients: with three or more, the ones waiting while a
	 * third runs in the holder's gap count as busy, are never away, and
	 * one of them would never get the GPU (a split serves them all). */
	if (nw == 2) {
		if (cur >= 0 && aw[cur] + TURN_MARGIN >= aw[best])
			best = cur;
		return aw[best] >= need ? best : -1;
	}
	if (nw == 1 && t->turn_k >= 0 && !*here) {
		*away = true;
		*pass = aw[best] >= need && aw[best] + TURN_MARGIN >= t->away[t->turn_k];
		return best;
	}
	return -1;
}

/* The plan for turns (turn_holder): the narrow clients keep their current
 * grants where those still fit, else get planned grants inside avail; the
 * client at index turn (none if turn < 0) gets the widest entry of what is
 * left, the other wide clients none. False (plan untouched) if that entry
 * cannot run the turn's work. */
static bool plan_turns(struct tput *t, const struct ve_pool *p, uint64_t avail,
		       struct ve_grant_plan *plan, const uint32_t *cl, uint32_t n, const bool *wide,
		       int turn, bool yield, const uint32_t *want, const uint32_t *min,
		       const double *weight, const uint16_t *cur)
{
	uint16_t out[VE_POLICY_MAX_CLIENTS];
	uint32_t ncl[VE_POLICY_MAX_CLIENTS], nwant[VE_POLICY_MAX_CLIENTS],
	    nmin[VE_POLICY_MAX_CLIENTS], idx[VE_POLICY_MAX_CLIENTS], nn = 0;
	double nweight[VE_POLICY_MAX_CLIENTS];
	uint16_t ncand[VE_POLICY_MAX_CLIENTS];
	uint64_t left = avail;
	for (uint32_t i = 0; i < n; i++) {
		out[i] = VE_POOL_NONE;
		if (wide[i])
			continue;
		/* Its current grant if it still fits and is within a factor
		 * of two of what it wants (a grant from before its want fell
		 * would keep those SMs from the turns for as long as they
		 * last; one from before it rose would keep it narrow). */
		uint64_t l = cur[i] != VE_POOL_NONE ? p->e[cur[i]].leaves : ~0ull;
		uint32_t cs = cur[i] != VE_POOL_NONE ? p->e[cur[i]].sms : 0;
		if (cur[i] != VE_POOL_NONE && !(plan->share[cl[i]] & VE_GRANT_SHARE) && !(l & ~left) &&
		    cs >= min[i] && cs <= 2 * want[i] && cs * 2 >= want[i]) {
			out[i] = cur[i];
			left &= ~l;
			continue;
		}
		ncl[nn] = cl[i];
		nwant[nn] = want[i];
		nmin[nn] = min[i];
		nweight[nn] = weight[i];
		idx[nn++] = i;
	}
	if (nn) {
		ve__grant_plan(&t->gt, p, left, ncl, nn, nwant, nmin, nweight, ncand);
		for (uint32_t j = 0; j < nn; j++) {
			out[idx[j]] = ncand[j];
			if (ncand[j] != VE_POOL_NONE)
				left &= ~p->e[ncand[j]].leaves;
		}
	}
	if (turn >= 0) {
		/* Turns pay only if the turn takes most of the GPU: narrow
		 * clients that want a quarter of it or more leave the wide
		 * ones a split instead. */
		uint16_t w = widest_inside(p, left), all = widest_inside(p, avail);
		if (w == VE_POOL_NONE || p->e[w].sms < min[turn] ||
		    p->e[w].sms * 4 < p->e[all].sms * 3)
			return false;
		out[turn] = w;
	}
	for (uint32_t i = 0; i < n; i++) {
		plan->entry[cl[i]] = out[i];
		plan->share[cl[i]] = (int)i == turn && yield ? VE_GRANT_YIELD : 0;
		plan->why[cl[i]] = !wide[i]	 ? VE_WHY_NARROW
				   : (int)i != turn ? VE_WHY_WAITING
				   : yield	 ? VE_WHY_IN_GAP
						 : VE_WHY_TURN;
	}
	return true;
}

/* Whether client a has waited for a grant longer than client b (a client
 * not waiting, wait_from 0, after every waiting one; ties in client order). */
static bool wait_before(const struct tput *t, uint32_t a, uint32_t b)
{
	uint64_t wa = t->wait_from[a], wb = t->wait_from[b];
	if (!wa || !wb)
		return wa && !wb;
	return wa < wb || (wa == wb && a < b);
}

/* The grants (entries and sharing) of ve__tput_grant. */
static int grant_entries(struct tput *t, const struct ve_policy_view *v,
			 const struct ve_client_demand *dem, struct ve_grant_plan *plan, uint64_t avail,
			 const uint64_t *skip_clients)
{
	const struct ve_pool *p = v->pool;
	uint32_t cl[VE_POLICY_MAX_CLIENTS], want[VE_POLICY_MAX_CLIENTS],
	    min[VE_POLICY_MAX_CLIENTS], n = 0;
	uint16_t cur[VE_POLICY_MAX_CLIENTS], cand[VE_POLICY_MAX_CLIENTS];
	double weight[VE_POLICY_MAX_CLIENTS];
	bool force = false;
	duty_update(t, v, dem);
	/* A client alone (the only one registered) has nothing to share with:
	 * it keeps its grant through host gaps of any length and gets the
	 * widest entry it may use, not the SMs its recent kernels could fill.
	 * A narrower grant would only cost it: its want decays in host phases
	 * (5 ms halving), and a target holds hold_ns, so each step would start
	 * narrow and wait for a grant again (a host-phase training job alone ran
	 * at 0.95x native on the H200). A newcomer takes SMs from it as from
	 * any other client. */
	uint32_t registered = 0;
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++)
		registered += v->clients[k].active != 0;
	bool alone = t->alone && registered == 1;
	/* A target in transition (set, wide enough, not yet in effect, its
	 * client with work waiting for it) keeps its SMs: they are out of what
	 * the others are planned in. A busy client that always has work ready
	 * otherwise won MinBind on the next tick, took part of that target, and
	 * a client that needs those SMs to run at all (a graph of cluster
	 * kernels sized as the whole GPU, a cooperative grid) never got them: on
	 * the H200 each of its launches waited 10 s for the watchdog. Once in
	 * effect, the target is planned again like any other. Shared targets
	 * are not kept (the shared entry is everyone's). */
	uint64_t pinned[VE_POLICY_MAX_CLIENTS / 64 + 1] = {0};
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
		if (skipped(skip_clients, k))
			continue;
		const struct ve_client_demand *d = &dem[k];
		uint16_t tg = plan->entry[k];
		if (!v->clients[k].active || tg == VE_POOL_NONE || tg >= p->nentries ||
		    (plan->share[k] & VE_GRANT_SHARE) || tg == d->entry || p->e[tg].sms < d->min_sms ||
		    !(d->ready || (d->flags & VE_DEMAND_WAITING)) || (p->e[tg].leaves & ~avail))
			continue;
		pinned[k / 64] |= 1ull << (k % 64);
		avail &= ~p->e[tg].leaves;
	}
	/* Clients waiting for a grant go first (MinBind order), those waiting
	 * longest first, then the rest. In client order, two clients whose
	 * launches each need the whole GPU took it in turns (one's grant in
	 * effect, it waits for nothing, and the other, waiting, came first)
	 * while a third client never got any SMs (test
	 * tput_grant_serves_waiting_clients_in_the_order_they_began_to_wait). */
	uint32_t nk = VE_MIN(v->nclients, (uint32_t)VE_POLICY_MAX_CLIENTS);
	uint32_t by_wait[VE_POLICY_MAX_CLIENTS];
	for (uint32_t j = 0; j < nk; j++) {
		uint32_t i = j;
		for (; i > 0 && wait_before(t, j, by_wait[i - 1]); i--)
			by_wait[i] = by_wait[i - 1];
		by_wait[i] = j;
	}
	for (uint32_t pass = 0; pass < 2; pass++) {
		for (uint32_t j = 0; j < nk; j++) {
			uint32_t k = pass == 0 ? by_wait[j] : j;
			if (skipped(skip_clients, k))
				continue;
			if (pinned[k / 64] >> (k % 64) & 1)
				continue;
			const struct ve_client_demand *d = &dem[k];
			/* Waiting for a decision, not for a drain: a client whose
			 * target is set and wide enough only waits for its SMs to
			 * be freed. Re-planning for it (first in MinBind order)
			 * moved the targets of everyone mid-transition, each move
			 * a drain: 99,000 grant changes in 85 s beside a decode
			 * server on the H200, and the server starved. */
			uint16_t tg = plan->entry[k];
			bool target_ok = tg != VE_POOL_NONE && tg < p->nentries &&
					 p->e[tg].sms >= d->min_sms;
			bool waiting = ((d->flags & VE_DEMAND_WAITING) || d->ready) && !target_ok;
			if ((pass == 0) != waiting)
				continue;
			if (!v->clients[k].active ||
			    (!alone && !ve__grant_active(d, v->now_ns, hold_ns(t, k, d)))) {
				plan->entry[k] = VE_POOL_NONE; /* idle: its SMs go to the others */
				plan->share[k] = 0;
				plan->why[k] = VE_WHY_IDLE;
				t->wait_from[k] = 0;
				continue;
			}
			if (!waiting)
				t->wait_from[k] = 0;
			else if (!t->wait_from[k])
				t->wait_from[k] = VE_MAX(v->now_ns, 1ull);
			force |= waiting;
			cl[n] = k;
			want[n] = ve__grant_want(p, d);
			min[n] = d->min_sms;
			weight[n] = ve__tput_weight(t, k);
			cur[n] = plan->entry[k];
			n++;
		}
	}
	if (!n)
		return 0;
	/* Duty weights only among batch clients: beside a latency client they
	 * took its SMs for whoever had gaps (ve-sim llm-serving: decode TPOT
	 * violations 1.3% -> 40%), and a latency client itself is held to its
	 * arrivals, so more SMs cut its latency (tpot's job), not add to its
	 * throughput (ve-sim train-infer: training 0.63 -> 0.44). */
	bool latency = false;
	for (uint32_t i = 0; i < n; i++)
		latency |= (dem[cl[i]].flags & VE_DEMAND_LATENCY) != 0;
	for (uint32_t i = 0; latency && i < n; i++)
		weight[i] = 1.0;
	/* Clients whose kernels are long and want the whole GPU lose to a
	 * split what interleaving their kernels on every SM wins (tails,
	 * imbalance: 0.97 split vs 1.03 shared on the dense pair,
	 * bench/results/coloc.json), while a launch-bound client of short
	 * kernels gains from SMs of its own: its kernels never queue behind the
	 * other's (1.86 split vs 1.45 shared on big+small). A busy-time test
	 * took both pairs for sharing (a launch-bound client with work queued
	 * ahead looks busy all the time). */
	bool share = t->share == 1;
	if (t->share == 2) {
		/* The test flips within a step (an optimizer phase of short
		 * kernels lowers op_us, a host gap decays want), and every flip
		 * is a drain of both clients: the dense pair on the H200 moved
		 * between shared and split grants ~2,500 times per process start,
		 * p50 2.2 ms each. So sharing ends only after the test has said
		 * 'split' for share_hold_ms, and starts after it has said 'share'
		 * for share_enter_ms (shorter: starting to share drains nothing,
		 * the shared entry contains both split ones; ending it waits for
		 * both clients' work there). A latency-class client ends sharing
		 * at once. With fewer than two active clients there is nothing to
		 * decide: the state stays, unless a switch was pending (below). */
		bool test = n >= 2;
		for (uint32_t i = 0; i < n; i++) {
			/* ... and is busy nearly all the time: a client with
			 * host phases runs its GPU phases sooner on SMs of its
			 * own, weighted by its duty (sharing, a host-phase job
			 * beside a dense one ran at MPS's 0.27x, as under MPS).
			 * Gaps shorter than the hand-over point count as busy
			 * (1 - away): a decode loop that reads its token back
			 * every step is idle ~12% of the time in 40 us gaps, and
			 * two such loops split ran at 0.68x of sharing on the
			 * H200 (ve-sim decode-pair-graphs: 1.07 split, 1.16
			 * shared). */
			test = test && dem[cl[i]].op_us >= t->share_op_us &&
			       want[i] * 10 >= p->total_sms * 9 &&
			       (t->prio == 0 || 1.0 - t->away[cl[i]] >= t->share_duty);
		}
		if (latency) {
			t->shared = false;
			t->share_flip_ns = 0;
		} else {
			/* With fewer than two active clients nothing is
			 * decided: a share starts only on evidence from both,
			 * but a pending end keeps its clock, since a client
			 * with host phases leaves the plan in each of them,
			 * and restarting the clock there kept a share that its
			 * GPU phases said to end, for good (a pair that shared
			 * from the start through ved never took turns). */
			if ((n >= 2 && test == t->shared) || (n < 2 && !t->shared))
				t->share_flip_ns = 0;
			else if (n >= 2 && !t->share_flip_ns)
				t->share_flip_ns = VE_MAX(v->now_ns, 1ull);
			uint64_t hold = t->shared ? t->share_hold_ns : t->share_enter_ns;
			if (t->share_flip_ns && v->now_ns >= t->share_flip_ns &&
			    v->now_ns - t->share_flip_ns >= hold) {
				t->shared = !t->shared;
				t->share_flip_ns = 0;
				log_share_flip(t, p, dem, cl, want, n);
			}
		}
		share = t->shared;
	}
	bool wide[VE_POLICY_MAX_CLIENTS], away = false, pass = false, here = false;
	bool holder_pinned = t->turn_k >= 0 && (pinned[t->turn_k / 64] >> (t->turn_k % 64) & 1);
	int turn = share || latency ? -1
				    : turn_holder(t, v, dem, cl, n, holder_pinned, wide, &away,
						  &pass, &here);
	/* The holder keeps its turn through its gaps: out of the plan once
	 * idle past the hand-over point (hold_ns), still the holder until it
	 * is back or turns end (else its next tick held it idle_ms again). A
	 * partner in its gap fills it: that grant yields at once when the
	 * holder is back (VE_GRANT_YIELD). */
	bool turned = (turn >= 0 || (holder_pinned && !share && !latency && t->turns)) &&
		      plan_turns(t, p, avail, plan, cl, n, wide, turn, away && !pass, want, min,
				 weight, cur);
	if (turned && turn >= 0 && (!away || pass))
		t->turn_k = (int32_t)cl[turn];
	else if (!turned && (here || share || latency || turn >= 0))
		t->turn_k = -1;
	if (turned)
		return 0;
	/* Widest entry inside avail (the whole GPU unless tpot holds a
	 * reservation out of it): the shared grant, or a lone client's. */
	uint16_t widest = share || (alone && n == 1) ? widest_inside(p, avail) : VE_POOL_NONE;
	if (share && widest != VE_POOL_NONE) {
		for (uint32_t i = 0; i < n; i++) {
			plan->entry[cl[i]] = widest;
			plan->share[cl[i]] = VE_GRANT_SHARE;
			plan->why[cl[i]] = VE_WHY_SHARED;
		}
		return 0;
	}
	if (alone && n == 1) {
		if (widest != VE_POOL_NONE && p->e[widest].sms >= min[0]) {
			plan->entry[cl[0]] = widest;
			plan->share[cl[0]] = 0;
			plan->why[cl[0]] = VE_WHY_ALONE;
			return 0;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		plan->why[cl[i]] = VE_WHY_SPLIT; /* a new plan, or the current one kept */
	/* The current grants still fit when they are disjoint, inside avail
	 * and wide enough for what waits. */
	uint64_t seen = 0;
	for (uint32_t i = 0; i < n && !force; i++) {
		uint64_t l = cur[i] != VE_POOL_NONE ? p->e[cur[i]].leaves : 0;
		if (cur[i] == VE_POOL_NONE || (l & seen) || (l & ~avail) || p->e[cur[i]].sms < min[i] ||
		    (plan->share[cl[i]] & VE_GRANT_SHARE))
			force = true;
		seen |= l;
	}
	ve__grant_plan(&t->gt, p, avail, cl, n, want, min, weight, cand);
	if (!force && ve__grant_utility(p, n, want, weight, cand) <=
			      t->hysteresis * ve__grant_utility(p, n, want, weight, cur))
		return 0; /* not worth the drain */
	for (uint32_t i = 0; i < n; i++) {
		plan->entry[cl[i]] = cand[i];
		plan->share[cl[i]] = 0;
	}
	return 0;
}

/* A client that registers or leaves starts afresh: a slot taken by another
 * client between two ticks (never seen inactive by duty_update) must not
 * inherit the last one's duty, gaps and turn. */
void ve__tput_client_event(struct tput *t, const struct ve_policy_event *ev)
{
	if (ev->client >= VE_POLICY_MAX_CLIENTS ||
	    (ev->kind != VE_PEV_CLIENT_ADDED && ev->kind != VE_PEV_CLIENT_REMOVED))
		return;
	t->duty_ns[ev->client] = 0;
	t->wait_from[ev->client] = 0;
	if (t->turn_k == (int32_t)ev->client)
		t->turn_k = -1;
}

static void tput_notify(void *priv, const struct ve_policy_view *v,
			const struct ve_policy_event *ev)
{
	(void)v;
	ve__tput_client_event(priv, ev);
}

static int tput_grant(void *priv, const struct ve_policy_view *v,
		      const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	return ve__tput_grant(priv, v, dem, plan, v->pool->all_leaves, NULL, 0);
}

const struct ve_policy_ops ve_policy_tput = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "tput",
	.summary = "Throughput-Oriented (Algorithm 1): min-bind the most ready ops, then widen "
		   "by marginal gain",
	.init = tput_init,
	.fini = tput_fini,
	.pick = tput_pick,
	.select = tput_select,
	.grant = tput_grant,
	.notify = tput_notify,
};
