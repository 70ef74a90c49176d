/* SPDX-License-Identifier: MIT */
/*
 * Baselines on the same mechanism (same vctx, pool, validation; only the
 * choices differ), plus the chaos policy used by tests.
 *
 *  whole: every op on the whole-GPU entry, shared by everyone. Models one
 *         context with no partitioning (the hardware scheduler interleaves
 *         concurrent kernels; across processes without MPS the driver time
 *         slices instead, which ve-sim cannot model this way, see docs).
 *  fixed: a static partition per client, like MPS percentages or MIG: the
 *         leaves are split into contiguous groups balanced by SMs, one per
 *         registered client (or `parts` groups, client i in group i % parts),
 *         and a client's ops share its group's largest entry. fixed:parts=N,
 *         or fixed:leaves=A/B/... for groups of A, B, ... leaves in order
 *         (the partitions ve-sim --oracle searches).
 *  chaos: a random ready op and a random eligible entry for every binding,
 *         sharing allowed. Results must still be bitwise identical to a
 *         native run; tests use it to prove bindings do not matter.
 */
#include "policy/policies.h"
#include "util/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- whole */

static int32_t whole_pick(void *priv, const struct ve_policy_view *v)
{
	return ve__policy_oldest(v);
}

static int32_t whole_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	*flags |= VE_BIND_SHARE;
	for (uint32_t i = 0; i < n; i++)
		if (eligible[i] == v->pool->root)
			return v->pool->root;
	return -1;
}

/* Grant mode: every client on the whole GPU, shared: what one MPS server
 * with no limits does, on the same mechanism. */
static int whole_grant(void *priv, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
		plan->entry[k] = v->clients[k].active ? v->pool->root : VE_POOL_NONE;
		plan->share[k] = 1;
		plan->why[k] = VE_WHY_SHARED;
	}
	return 0;
}

const struct ve_policy_ops ve_policy_whole = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "whole",
	.summary = "every op on the whole GPU, shared (one context, no partitioning)",
	.pick = whole_pick,
	.select = whole_select,
	.grant = whole_grant,
};

/* ---------------------------------------------------------------- fixed */

struct fixed {
	uint32_t parts;	 /* groups now in use */
	bool explicit_parts; /* fixed:parts=N given: keep N whatever the client count */
	uint32_t nsizes;     /* fixed:leaves=A/B/...: leaves per group, in leaf order */
	uint8_t sizes[VE_POOL_MAX_LEAVES];
	uint64_t group[VE_POOL_MAX_LEAVES]; /* leaf masks per part */
	uint16_t home[VE_POOL_MAX_LEAVES];  /* largest entry inside each group */
	int32_t rank[VE_POLICY_MAX_CLIENTS]; /* client -> its group, -1 = not registered */
	uint64_t round;
	/* Head slot of each client offered this round (VE_READY_NIL: none). A
	 * bitmask of clients tried used to stop a client after its first op, so
	 * a client with several ready ops got one binding per round; found by
	 * test_policy (fixed_keeps_each_client_in_its_half). */
	uint32_t tried[VE_POLICY_MAX_CLIENTS];
	const struct ve_pool *pool;
	/* Grant mode, a launch wider than its group: the client borrowing
	 * (-1: none), what and since when, since when each client's wide
	 * launch waits, and the clients whose group was lent while they had
	 * work and that have not had it in effect since (no new borrow takes
	 * their group until they have). */
	int32_t borrower;
	uint16_t borrowed;    /* the entry it borrows */
	uint64_t borrow_ns;   /* since when that entry is in effect (0: not yet) */
	uint64_t wide_from[VE_POLICY_MAX_CLIENTS]; /* since when its wide launch waits (0: none) */
	bool owed[VE_POLICY_MAX_CLIENTS];
};

/* "A/B/...": leaves per group ('/' because ',' separates knobs). */
static int fixed_leaves(struct fixed *f, const char *val)
{
	char buf[256];
	if (strlen(val) >= sizeof(buf)) {
		VE_ERR("fixed: leaves=%s is too long", val);
		return -EINVAL;
	}
	strcpy(buf, val);
	f->nsizes = 0;
	char *save = NULL;
	for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		uint64_t n;
		if (ve__parse_u64(t, &n) || n == 0 || n > VE_POOL_MAX_LEAVES) {
			VE_ERR("fixed: leaves=%s: '%s' is not a leaf count in 1..%d", val, t,
			       VE_POOL_MAX_LEAVES);
			return -EINVAL;
		}
		if (f->nsizes == VE_POOL_MAX_LEAVES) {
			VE_ERR("fixed: leaves=%s: more than %d groups", val, VE_POOL_MAX_LEAVES);
			return -EINVAL;
		}
		f->sizes[f->nsizes++] = (uint8_t)n;
	}
	if (!f->nsizes || val[0] == '/' || val[strlen(val) - 1] == '/' || strstr(val, "//")) {
		VE_ERR("fixed: leaves=%s: expected leaf counts separated by '/', e.g. leaves=5/11",
		       val);
		return -EINVAL;
	}
	return 0;
}

static int fixed_kv(const char *k, const char *val, void *arg)
{
	struct fixed *f = arg;
	uint64_t n;
	if (strcmp(k, "leaves") == 0)
		return fixed_leaves(f, val);
	if (strcmp(k, "parts") != 0) {
		VE_ERR("fixed: unknown knob '%s' (parts=N or leaves=A/B/...)", k);
		return -EINVAL;
	}
	if (ve__parse_u64(val, &n) || n == 0 || n > 64) {
		VE_ERR("fixed: parts=%s: needs a count in 1..64", val);
		return -EINVAL;
	}
	f->parts = (uint32_t)n;
	f->explicit_parts = true;
	return 0;
}

/* A group's home: the largest pool entry inside it. Only groups that are a
 * pool entry use all their SMs (a tree node, or a remainder). */
static void set_home(struct fixed *f, uint32_t g)
{
	const struct ve_pool *p = f->pool;
	uint32_t best = 0;
	f->home[g] = VE_POOL_NONE;
	for (uint32_t e = 0; e < p->nentries; e++)
		if ((p->e[e].leaves & ~f->group[g]) == 0 && p->e[e].sms > best) {
			best = p->e[e].sms;
			f->home[g] = (uint16_t)e;
		}
}

/* Contiguous groups; a group takes the next leaf while that brings its
 * running total closer to its share (so powers of two give tree nodes),
 * leaving at least one leaf for each later group. */
static void build_groups(struct fixed *f)
{
	const struct ve_pool *p = f->pool;
	uint32_t leaf = 0;
	uint64_t acc = 0;
	memset(f->group, 0, sizeof(f->group));
	for (uint32_t g = 0; g < f->parts && f->nsizes; g++) {
		for (uint32_t i = 0; i < f->sizes[g]; i++)
			f->group[g] |= 1ull << leaf++;
		set_home(f, g);
	}
	for (uint32_t g = 0; g < f->parts && !f->nsizes; g++) {
		uint64_t target = (uint64_t)p->total_sms * (g + 1) / f->parts;
		uint32_t later = f->parts - g - 1;
		do {
			f->group[g] |= 1ull << leaf;
			acc += p->leaf_sms[leaf++];
		} while (leaf < p->nleaves && p->nleaves - leaf > later &&
			 (g == f->parts - 1 ||
			  (acc + p->leaf_sms[leaf] > target ? acc + p->leaf_sms[leaf] - target
							   : target - acc - p->leaf_sms[leaf]) <
				  (acc > target ? acc - target : target - acc)));
		set_home(f, g);
	}
}

/* Without fixed:parts=N the GPU is split evenly among the registered
 * clients, in registration order: recomputed when one comes or goes. */
static void assign_ranks(struct fixed *f)
{
	uint32_t n = 0;
	for (uint32_t c = 0; c < VE_POLICY_MAX_CLIENTS; c++)
		if (f->rank[c] >= 0)
			f->rank[c] = (int32_t)n++;
	if (!f->explicit_parts) {
		uint32_t parts = n ? n : 1;
		if (parts > f->pool->nleaves)
			parts = f->pool->nleaves;
		if (parts != f->parts) {
			f->parts = parts;
			build_groups(f);
		}
	}
}

static int fixed_init(const char *args, const struct ve_policy_view *v, void **priv)
{
	struct fixed *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->parts = 1;
	f->pool = v->pool;
	f->borrower = -1;
	for (uint32_t c = 0; c < VE_POLICY_MAX_CLIENTS; c++)
		f->rank[c] = -1;
	int rc = ve__policy_parse_args(args, fixed_kv, f);
	if (!rc && f->nsizes) {
		uint32_t sum = 0;
		for (uint32_t g = 0; g < f->nsizes; g++)
			sum += f->sizes[g];
		if (f->explicit_parts && f->parts != f->nsizes) {
			VE_ERR("fixed: parts=%u and leaves= with %u groups disagree (give one)",
			       f->parts, f->nsizes);
			rc = -EINVAL;
		} else if (sum != v->pool->nleaves) {
			VE_ERR("fixed: leaves= covers %u leaves, the pool has %u (every leaf in "
			       "exactly one group)",
			       sum, v->pool->nleaves);
			rc = -EINVAL;
		}
		f->parts = f->nsizes;
		f->explicit_parts = true;
	}
	if (!rc && f->parts > v->pool->nleaves) {
		VE_ERR("fixed: parts=%u but the pool has only %u leaves", f->parts,
		       v->pool->nleaves);
		rc = -EINVAL;
	}
	if (rc) {
		free(f);
		return rc;
	}
	build_groups(f);
	f->round = UINT64_MAX;
	*priv = f;
	return 0;
}

static void fixed_notify(void *priv, const struct ve_policy_view *v,
			 const struct ve_policy_event *ev)
{
	struct fixed *f = priv;
	if (ev->client >= VE_POLICY_MAX_CLIENTS)
		return;
	if (ev->kind != VE_PEV_CLIENT_ADDED && ev->kind != VE_PEV_CLIENT_REMOVED)
		return;
	f->rank[ev->client] =
	    ev->kind == VE_PEV_CLIENT_ADDED ? (int32_t)VE_POLICY_MAX_CLIENTS /* renumbered */ : -1;
	assign_ranks(f);
	/* Groups renumbered: a borrow names an entry of the old numbering, and
	 * the slot's borrowing state is the last client's. */
	f->borrower = -1;
	f->owed[ev->client] = false;
	f->wide_from[ev->client] = 0;
}

static void fixed_fini(void *priv)
{
	free(priv);
}

static int32_t fixed_pick(void *priv, const struct ve_policy_view *v)
{
	struct fixed *f = priv;
	if (f->round != v->round) {
		f->round = v->round;
		memset(f->tried, 0xff, sizeof(f->tried)); /* VE_READY_NIL */
	}
	/* Oldest head among clients whose head was not offered yet this round:
	 * each client's partition is independent, so one full partition must not
	 * stop the rest; a head that was bound leaves, so its successor is new. */
	int32_t best = -1;
	uint64_t age = UINT64_MAX;
	for (uint32_t c = 0; c < v->nclients && c < VE_POLICY_MAX_CLIENTS; c++) {
		uint32_t h = v->clients[c].head;
		if (h == VE_READY_NIL || f->tried[c] == h)
			continue;
		if (v->ops[h].ready_ns < age) {
			age = v->ops[h].ready_ns;
			best = (int32_t)h;
		}
	}
	if (best >= 0)
		f->tried[v->ops[best].client] = (uint32_t)best;
	return best;
}

static int32_t fixed_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	struct fixed *f = priv;
	int32_t r = f->rank[v->ops[op].client];
	uint32_t g = (uint32_t)(r < 0 ? 0 : r) % f->parts;
	uint16_t home = f->home[g];
	*flags |= VE_BIND_SHARE; /* a client's concurrent kernels share its partition */
	for (uint32_t i = 0; i < n; i++)
		if (eligible[i] == home)
			return home;
	/* A group's largest entry can be smaller than a launch's minimum (a
	 * cooperative kernel; with three clients the middle group's home is 16
	 * SMs): deferring would then wait forever. Run that launch on the
	 * smallest eligible entry containing the home (eligible[] is smallest
	 * first and holds only entries of at least min_sms SMs). Found by
	 * test_dispatch (dispatch_random_fixed: stuck). */
	const struct ve_pool *p = v->pool;
	if (home != VE_POOL_NONE && p->e[home].sms < v->ops[op].min_sms) {
		uint64_t hl = p->e[home].leaves;
		for (uint32_t i = 0; i < n; i++)
			if ((p->e[eligible[i]].leaves & hl) == hl)
				return eligible[i];
	}
	return -1;
}

/* How long a borrow lasts once in effect (fixed_grant). */
#define FIXED_BORROW_NS 5000000ull

/* The entry a launch of min_sms borrows from client k's group: the
 * smallest that contains the group and has that many SMs (VE_POOL_NONE:
 * its group runs it, or nothing does). */
static uint16_t fixed_wide_entry(const struct fixed *f, const struct ve_pool *p, uint32_t k,
				 uint32_t min_sms)
{
	uint16_t home = f->home[(uint32_t)f->rank[k] % f->parts];
	if (home == VE_POOL_NONE || min_sms <= p->e[home].sms)
		return VE_POOL_NONE;
	uint64_t hl = p->e[home].leaves;
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t e = p->by_size[i];
		if (p->e[e].sms >= min_sms && (p->e[e].leaves & hl) == hl)
			return e;
	}
	return VE_POOL_NONE;
}

/* Grant mode: each client its group's largest entry, whether it has work
 * or not (a static partition); clients of one group share it. A launch
 * wider than its group waits, as it would under a real static partition,
 * unless it fits nowhere in a group: then it borrows the smallest entry
 * that contains its group and runs (a cooperative grid must not wait
 * forever). */
static int fixed_grant(void *priv, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	struct fixed *f = priv;
	const struct ve_pool *p = v->pool;
	uint32_t nreg = 0, n = VE_MIN(v->nclients, (uint32_t)VE_POLICY_MAX_CLIENTS);
	for (uint32_t k = 0; k < VE_POLICY_MAX_CLIENTS; k++)
		nreg += f->rank[k] >= 0;
	for (uint32_t k = 0; k < n; k++) {
		bool on = v->clients[k].active && f->rank[k] >= 0;
		uint16_t home = on ? f->home[(uint32_t)f->rank[k] % f->parts] : VE_POOL_NONE;
		plan->entry[k] = home;
		plan->share[k] = on && nreg > f->parts;
		plan->why[k] = on ? VE_WHY_FIXED : VE_WHY_UNKNOWN;
		/* Square again: its group in effect, or no work. */
		if (!on || dem[k].entry == home || !(dem[k].ready || dem[k].inflight))
			f->owed[k] = false;
	}
	/* One borrower at a time: the current one while its launch still
	 * waits, else the client whose wide launch has waited longest, once no
	 * group it would borrow is still owed from the last borrow (no other
	 * borrow starts meanwhile, so those groups take effect and it goes
	 * next). Borrowing again at once kept the lent groups from ever taking
	 * effect (a client whose every launch needs the whole GPU beside two
	 * busy ones: they had no grant in 2,000 ticks), and borrowers in client
	 * order or in turn skipped one whose group the others kept borrowing
	 * (three clients whose launches need 100 SMs: one never ran; test
	 * grant_whole_gpu_client_gets_a_share_beside_two_busy_clients). */
	int32_t first = -1;
	for (uint32_t k = 0; k < n; k++) {
		bool wide = plan->entry[k] != VE_POOL_NONE &&
			    fixed_wide_entry(f, p, k, dem[k].min_sms) != VE_POOL_NONE;
		if (!wide)
			f->wide_from[k] = 0;
		else if (!f->wide_from[k])
			f->wide_from[k] = VE_MAX(v->now_ns, 1ull);
		if (wide && (first < 0 || f->wide_from[k] < f->wide_from[first]))
			first = (int32_t)k;
	}
	/* A borrow lasts FIXED_BORROW_NS once in effect (the launches of such
	 * a client come one after another: a borrow per launch ran one launch
	 * per two drains), and ends when the borrower leaves. */
	if (f->borrower >= 0) {
		uint32_t b = (uint32_t)f->borrower;
		if (b < n && !f->borrow_ns && dem[b].entry == f->borrowed)
			f->borrow_ns = VE_MAX(v->now_ns, 1ull);
		bool done = f->borrow_ns ? v->now_ns - f->borrow_ns >= FIXED_BORROW_NS
					 : !f->wide_from[b];
		if (b >= n || plan->entry[b] == VE_POOL_NONE || done)
			f->borrower = -1;
	}
	if (f->borrower < 0 && first >= 0) {
		uint16_t e = fixed_wide_entry(f, p, (uint32_t)first, dem[first].min_sms);
		uint64_t lent = p->e[e].leaves & ~p->e[plan->entry[first]].leaves;
		bool owed = false;
		for (uint32_t j = 0; j < n; j++)
			owed |= (int32_t)j != first && f->owed[j] && plan->entry[j] != VE_POOL_NONE &&
				(p->e[plan->entry[j]].leaves & lent);
		if (!owed) {
			f->borrower = first;
			f->borrowed = e;
			f->borrow_ns = 0;
		}
	}
	if (f->borrower < 0)
		return 0;
	/* The groups it borrows wait until that launch has run. */
	uint32_t b = (uint32_t)f->borrower;
	uint16_t e = f->borrowed;
	uint64_t lent = p->e[e].leaves & ~p->e[plan->entry[b]].leaves;
	plan->entry[b] = e;
	for (uint32_t k = 0; k < n; k++)
		if (k != b && plan->entry[k] != VE_POOL_NONE && (p->e[plan->entry[k]].leaves & lent)) {
			plan->entry[k] = VE_POOL_NONE;
			plan->why[k] = VE_WHY_WAITING;
			f->owed[k] |= dem[k].ready || dem[k].inflight;
		}
	return 0;
}

const struct ve_policy_ops ve_policy_fixed = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "fixed",
	.summary = "static partition per client (like MIG or MPS percentages): an even split "
		   "among registered clients, fixed:parts=N, or fixed:leaves=A/B/...",
	.init = fixed_init,
	.fini = fixed_fini,
	.pick = fixed_pick,
	.select = fixed_select,
	.notify = fixed_notify,
	.grant = fixed_grant,
};

/* ---------------------------------------------------------------- chaos */

static int32_t chaos_pick(void *priv, const struct ve_policy_view *v)
{
	if (!v->nready)
		return -1;
	uint32_t k = (uint32_t)(v->rand(v) % v->nready);
	for (uint32_t s = 0; s < v->nops; s++)
		if (v->ops[s].in_use && k-- == 0)
			return (int32_t)s;
	return -1;
}

static int32_t chaos_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	*flags |= VE_BIND_SHARE;
	return n ? eligible[v->rand(v) % n] : -1;
}

/* Grant mode: every tick, clients in random order each get a random entry
 * among those still free that can run their widest waiting op, or now and
 * then nothing at all; grants change all the time, results must not. */
static int chaos_grant(void *priv, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	const struct ve_pool *p = v->pool;
	uint32_t order[VE_POLICY_MAX_CLIENTS], n = 0;
	for (uint32_t k = 0; k < v->nclients && k < VE_POLICY_MAX_CLIENTS; k++) {
		plan->entry[k] = VE_POOL_NONE;
		plan->share[k] = 0;
		plan->lend[k] = VE_POOL_NONE;
		plan->why[k] = VE_WHY_RANDOM;
		if (v->clients[k].active)
			order[n++] = k;
	}
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)(v->rand(v) % i), x = order[i - 1];
		order[i - 1] = order[j];
		order[j] = x;
	}
	uint64_t avail = p->all_leaves;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = order[i];
		if (v->rand(v) % 8 == 0)
			continue; /* a client with no grant for a tick */
		uint16_t cand[VE_POOL_MAX_ENTRIES];
		uint32_t nc = 0;
		for (uint32_t e = 0; e < p->nentries; e++)
			if (!(p->e[e].leaves & ~avail) && p->e[e].sms >= dem[k].min_sms)
				cand[nc++] = (uint16_t)e;
		if (!nc)
			continue;
		uint16_t e = cand[v->rand(v) % nc];
		plan->entry[k] = e;
		avail &= ~p->e[e].leaves;
	}
	/* Random lends too (a third of the granted clients): a wider entry
	 * over SMs others may be running on, which the coordinator admits
	 * where no other lend and nothing handed over is, and takes back on
	 * the next tick that draws another. */
	uint64_t lent = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = order[i];
		uint16_t g = plan->entry[k];
		if (g == VE_POOL_NONE || v->rand(v) % 3)
			continue;
		uint16_t cand[VE_POOL_MAX_ENTRIES];
		uint32_t nc = 0;
		uint64_t gl = p->e[g].leaves;
		for (uint32_t e = 0; e < p->nentries; e++)
			if ((p->e[e].leaves & gl) == gl && p->e[e].leaves != gl &&
			    !(p->e[e].leaves & ~gl & lent))
				cand[nc++] = (uint16_t)e;
		if (!nc)
			continue;
		uint16_t e = cand[v->rand(v) % nc];
		plan->lend[k] = e;
		lent |= p->e[e].leaves & ~gl;
	}
	return 0;
}

const struct ve_policy_ops ve_policy_chaos = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "chaos",
	.summary = "random ready op, random eligible entry (tests: bindings must not matter); "
		   "in grant mode random grants every tick",
	.pick = chaos_pick,
	.select = chaos_select,
	.grant = chaos_grant,
};
