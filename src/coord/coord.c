/* SPDX-License-Identifier: MIT */
#include "coord/coord.h"
#include "util/util.h"

#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct client_state {
	uint8_t active;
	uint32_t flags;
};

#define RECLAIM_SAMPLES 4096
#define TAKES_MAX	8 /* takes a client may have draining at once; more are merged */

/* Leaves taken from a client at one grant change, not known drained yet:
 * a reclaim, timed on its own (reclaim latency = take -> these SMs free). */
struct take {
	uint64_t leaves;
	uint64_t gen; /* the generation that took them: a report must have seen it */
	uint64_t ns;  /* when */
};

/* Grant mode, per client (ve_policy.h "Grant mode"). */
struct grant_client {
	uint16_t entry;	     /* granted now (VE_POOL_NONE) */
	uint16_t want;	     /* the policy's target; differs from entry while its SMs drain */
	uint8_t share, want_share;
	/* The grant fills another client's gaps (VE_GRANT_YIELD): taken back
	 * at once, not held hold_ns while the client has work. want_yield:
	 * the policy's for its target; yield: the grant's in effect. */
	bool yield, want_yield;
	/* An entry lent for short kernels (ve_grant_plan.lend): it contains
	 * entry, and its other SMs may be held by others that do not use them
	 * now. want_lend: the policy's; lend: in effect (admitted once no other
	 * lend and nothing being handed over is on those SMs). */
	uint16_t lend, want_lend;
	uint8_t why;	     /* the policy's reason for its target (VE_WHY_*, ABI 4) */
	uint64_t gen;	     /* bumped whenever entry or lend changes */
	uint64_t closing;    /* leaves taken away that may still run its work: the takes' */
	struct take take[TAKES_MAX];
	uint32_t ntakes;
	uint64_t want_ns;    /* when the target last changed */
	uint64_t entry_ns;   /* when the current entry was granted */
	bool held;	     /* the policy asked for another target, refused by hold_ns */
	struct ve_grant_usage use; /* since it registered (ve_coord_grant_usage) */
	uint64_t use_since;	   /* use counted up to here */
	struct ve_grant_report rep;
	bool paused;	     /* stopped answering: no grant until it answers again */
};

static int run_prepare(struct ve_coord *c, const struct ve_hint *h);
static uint64_t inuse(const struct ve_coord *c, uint32_t k);
static void take_add(struct ve_coord *c, struct grant_client *g, uint64_t lost);
static uint64_t coord_now(const struct ve_coord *c);
static void usage_note(struct ve_coord *c, struct grant_client *g);

/* A policy's init refused its arguments: say which one when a built-in
 * policy's parser named it (an external policy has only its errno). */
static void args_failed(char *err, size_t errlen, const char *name, const char *args, int rc)
{
	const char *bad = ve_policy_args_error();
	if (rc == -E2BIG)
		snprintf(err, errlen, "policy %s: its arguments are too long (%s)", name,
			 *bad ? bad : strerror(E2BIG));
	else if (*bad) /* named first: a long list would cut it off the end */
		snprintf(err, errlen, "policy %s rejected '%s' in its arguments '%s': %s", name, bad,
			 args, strerror(rc < 0 ? -rc : rc));
	else
		snprintf(err, errlen, "policy %s rejected its arguments '%s': %s", name, args,
			 strerror(rc < 0 ? -rc : rc));
}

/* Starts a policy with its arguments: 0, or a negative errno with the
 * reason in err. A policy without init takes no arguments: ignoring them
 * would run something else than the user asked for. */
static int policy_init(const struct ve_policy_ops *pol, const char *args,
		       const struct ve_policy_view *view, void **priv, char *err, size_t errlen)
{
	ve_policy_args_error_clear();
	if (!pol->init) {
		if (!args || !*args)
			return 0;
		snprintf(err, errlen, "policy %s takes no arguments (given '%s')", pol->name, args);
		return -EINVAL;
	}
	int rc = pol->init(args, view, priv);
	if (rc) {
		args_failed(err, errlen, pol->name, args, rc);
		return rc < 0 ? rc : -EINVAL;
	}
	return 0;
}

struct ve_coord {
	struct ve_pool pool;
	struct ve_readyq rq;
	struct ve_profile *prof;
	const struct ve_policy_ops *pol;
	void *pol_priv;
	void *pol_dl;
	char pol_name[64];
	struct ve_policy_view view;
	struct client_state cl[VE_COORD_MAX_CLIENTS];
	uint64_t *picked_round; /* per ready slot: last round it was picked in */
	uint64_t rng;
	uint64_t now_ns;
	bool now_external;
	bool log_decisions;
	bool keep_leases;
	struct ve_coord_stats st;
	/* grant mode */
	struct ve_policy_ops pol_own; /* the policy's table, as long as its ABI has */
	bool grant_mode, urgent;
	bool per_op; /* the configuration's: bind op by op whatever the policy offers */
	uint64_t tick_ns, last_tick_ns, hold_ns;
	struct grant_client gc[VE_COORD_MAX_CLIENTS];
	struct ve_client_demand dem[VE_COORD_MAX_CLIENTS];
	struct ve_grant_plan plan;
	uint64_t reclaim_ns[RECLAIM_SAMPLES];
	uint32_t nreclaim;
	uint32_t slow_reclaims_logged; /* reclaims over 10 ms said in the log (at most 8) */
	uint64_t watchdog_ns;
	bool share_contended;
};

/* ------------------------------------------------------------ view helpers */

static double view_predict(const struct ve_policy_view *v, const struct ve_ready_op *op,
			   uint32_t sms)
{
	const struct ve_coord *c = v->coord;
	return ve_profile_predict(c->prof, op, sms);
}

/* Admissible now for op's client: IDLE without conflicts, RESERVED for it,
 * or LEASED with an open gate (the last only with VE_BIND_SHARE, checked at
 * validation, because it puts two running ops on the same SMs). */
static bool admissible(const struct ve_coord *c, const struct ve_ready_op *op, uint16_t e)
{
	const struct ve_pool_entry *pe = &c->pool.e[e];
	if (pe->sms < op->min_sms)
		return false;
	return ve_pool_can_admit(&c->pool, e, (int32_t)op->client, true);
}

static uint32_t view_eligible(const struct ve_policy_view *v, uint32_t op, uint16_t *out,
			      uint32_t max)
{
	const struct ve_coord *c = v->coord;
	const struct ve_ready_op *o = ve_readyq_get(&c->rq, op);
	uint32_t n = 0;
	if (!o)
		return 0;
	for (uint32_t i = 0; i < c->pool.nentries && n < max; i++) {
		uint16_t e = c->pool.by_size[i];
		if (admissible(c, o, e))
			out[n++] = e;
	}
	return n;
}

static uint64_t view_rand(const struct ve_policy_view *v)
{
	struct ve_coord *c = v->coord;
	return ve__rand64(&c->rng);
}

static void refresh_view(struct ve_coord *c)
{
	c->view.now_ns = c->now_external ? c->now_ns : ve__now_ns();
	c->view.nready = c->rq.nready;
}

/* ------------------------------------------------------------ create */

int ve_coord_create(const struct ve_coord_config *cfg, struct ve_coord **out, char *err,
		    size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg || !out || !cfg->leaf_sms || !cfg->nleaves) {
		snprintf(err, errlen, "coordinator needs a leaf list");
		return -EINVAL;
	}
	uint32_t max_clients = cfg->max_clients ? cfg->max_clients : 16;
	if (max_clients > VE_COORD_MAX_CLIENTS) {
		snprintf(err, errlen, "max_clients %u > %u", max_clients, VE_COORD_MAX_CLIENTS);
		return -EINVAL;
	}
	struct ve_coord *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int rc = ve_pool_init(&c->pool, cfg->leaf_sms, cfg->nleaves, cfg->max_entries);
	if (rc) {
		snprintf(err, errlen, "bad pool configuration (%u leaves, bound %u)", cfg->nleaves,
			 cfg->max_entries);
		goto fail;
	}
	rc = ve_readyq_init(&c->rq, cfg->ready_cap ? cfg->ready_cap : 4096, max_clients);
	if (rc)
		goto fail;
	c->picked_round = calloc(c->rq.cap, sizeof(*c->picked_round));
	if (!c->picked_round) {
		rc = -ENOMEM;
		goto fail;
	}
	uint32_t sizes[VE_POOL_MAX_ENTRIES];
	for (uint32_t i = 0; i < c->pool.nentries; i++)
		sizes[i] = c->pool.e[i].sms;
	uint32_t sm_count = cfg->sm_count ? cfg->sm_count : c->pool.total_sms;
	rc = ve_profile_create(sizes, c->pool.nentries, 16384, sm_count, &c->prof);
	if (rc) {
		snprintf(err, errlen, "profile store: %s", strerror(-rc));
		goto fail;
	}
	if (cfg->profile_path && *cfg->profile_path) {
		rc = ve_profile_load(c->prof, cfg->profile_path, err, errlen);
		if (rc)
			goto fail;
	}
	c->rng = cfg->seed ? cfg->seed : 0x5eed;
	c->log_decisions = cfg->log_decisions || ve__log_level >= VE_LOG_DEBUG;
	c->keep_leases = cfg->keep_leases;
	c->view = (struct ve_policy_view){
		.abi_version = VE_POLICY_ABI_VERSION,
		.nclients = max_clients,
		.pool = &c->pool,
		.ops = c->rq.ops,
		.nops = c->rq.cap,
		.clients = c->rq.clients,
		.predict = view_predict,
		.eligible = view_eligible,
		.rand = view_rand,
		.coord = c,
	};
	const char *args = "";
	rc = ve_policy_resolve(cfg->policy ? cfg->policy : "tput", &c->pol, &args, &c->pol_dl,
			       err, errlen);
	if (rc)
		goto fail;
	/* Members past what the policy's ABI version has are absent from its
	 * table: read only those, the rest stay NULL. */
	memcpy(&c->pol_own, c->pol,
	       c->pol->abi_version >= 2 ? sizeof(c->pol_own) : offsetof(struct ve_policy_ops, grant));
	c->pol = &c->pol_own;
	c->per_op = cfg->per_op;
	c->grant_mode = c->pol->grant && !cfg->per_op;
	c->tick_ns = cfg->tick_ns ? cfg->tick_ns : VE_COORD_TICK_NS;
	c->share_contended = cfg->share_contended;
	c->hold_ns = cfg->hold_ns ? cfg->hold_ns : 5000000;
	c->watchdog_ns = cfg->watchdog_ns;
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++)
		c->gc[i].entry = c->gc[i].want = c->gc[i].lend = c->gc[i].want_lend = VE_POOL_NONE;
	snprintf(c->pol_name, sizeof(c->pol_name), "%s", c->pol->name);
	if ((rc = policy_init(c->pol, args, &c->view, &c->pol_priv, err, errlen))) {
		c->pol = NULL;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	ve_coord_destroy(c);
	return rc;
}

void ve_coord_destroy(struct ve_coord *c)
{
	if (!c)
		return;
	if (c->pol && c->pol->fini)
		c->pol->fini(c->pol_priv);
	if (c->pol_dl)
		dlclose(c->pol_dl);
	ve_profile_destroy(c->prof);
	free(c->picked_round);
	ve_readyq_fini(&c->rq);
	ve_pool_fini(&c->pool);
	free(c);
}

int ve_coord_set_policy(struct ve_coord *c, const char *spec, char *err, size_t errlen)
{
	const struct ve_policy_ops *ops;
	const char *args = "";
	void *dl = NULL, *priv = NULL;
	int rc = ve_policy_resolve(spec && *spec ? spec : "tput", &ops, &args, &dl, err, errlen);
	if (rc)
		return rc;
	struct ve_policy_ops own;
	memset(&own, 0, sizeof(own));
	memcpy(&own, ops, ops->abi_version >= 2 ? sizeof(own) : offsetof(struct ve_policy_ops, grant));
	/* Grant mode and per-op binding keep different state (grants, leases):
	 * switching between them is a restart, not a reload. The mode follows
	 * the configuration's per_op, not the running policy (with per_op and a
	 * policy without grants running, a reload to tpot was refused). */
	bool grant_mode = own.grant && !c->per_op;
	if (grant_mode != c->grant_mode) {
		snprintf(err, errlen,
			 "policy %s binds %s, the running %s %s: switching needs a restart", own.name,
			 grant_mode ? "by grants" : "per op", c->pol_name,
			 c->grant_mode ? "by grants" : "per op");
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = policy_init(&own, args, &c->view, &priv, err, errlen)))
		goto fail;
	if (c->pol->fini)
		c->pol->fini(c->pol_priv);
	if (c->pol_dl)
		dlclose(c->pol_dl);
	c->pol_own = own;
	c->pol = &c->pol_own;
	c->pol_priv = priv;
	c->pol_dl = dl;
	snprintf(c->pol_name, sizeof(c->pol_name), "%s", own.name);
	/* The old policy's reservations (tpot's standing one, a prepared wider
	 * entry, a pending claim) go with it: kept, they held SMs for a client
	 * no policy would use them for (tpot -> tput kept 16 SMs reserved,
	 * reserve=16 -> 32 held both). A watchdog claim is made again if its
	 * op still waits. */
	for (uint32_t e = 0; e < c->pool.nentries; e++)
		if (c->pool.e[e].reserve_for != VE_HOLDER_NONE)
			ve_pool_unreserve(&c->pool, (uint16_t)e);
	/* The new policy has seen no client come: tell it of every one
	 * registered (fixed numbers its groups from these; without them it
	 * granted nobody anything, and every client hung). */
	if (c->pol->notify)
		for (uint32_t k = 0; k < c->rq.nclients; k++)
			if (c->cl[k].active) {
				struct ve_policy_event ev = {.kind = VE_PEV_CLIENT_ADDED,
							     .client = k,
							     .flags = c->cl[k].flags};
				c->pol->notify(c->pol_priv, &c->view, &ev);
			}
	/* The new policy plans from scratch at the next tick. */
	c->urgent = true;
	return 0;
fail:
	if (dl)
		dlclose(dl);
	return rc;
}

/* ------------------------------------------------------------ clients */

int ve_coord_client_add(struct ve_coord *c, uint32_t client, uint32_t flags)
{
	if (client >= c->rq.nclients)
		return -EINVAL;
	if (c->cl[client].active)
		return -EEXIST;
	c->cl[client].active = 1;
	c->cl[client].flags = flags;
	c->rq.clients[client] = (struct ve_client_view){
		.head = VE_READY_NIL, .active = 1, .latency = !!(flags & VE_READY_LATENCY)};
	c->rq.tail[client] = VE_READY_NIL;
	/* Generations only grow, across reuse of the slot too; leaves a former
	 * client of this slot still drains stay closing. */
	struct grant_client *g = &c->gc[client];
	struct grant_client old = *g;
	*g = (struct grant_client){.entry = VE_POOL_NONE,
				   .want = VE_POOL_NONE,
				   .lend = VE_POOL_NONE,
				   .want_lend = VE_POOL_NONE,
				   .gen = old.gen + 1,
				   .closing = old.closing,
				   .ntakes = old.ntakes,
				   .use_since = VE_MAX(coord_now(c), 1ull)};
	for (uint32_t i = 0; i < old.ntakes; i++)
		g->take[i] = (struct take){.leaves = old.take[i].leaves, .gen = g->gen,
					   .ns = old.take[i].ns};
	c->urgent = true;
	if (c->pol->notify) {
		struct ve_policy_event ev = {.kind = VE_PEV_CLIENT_ADDED, .client = client,
					     .flags = flags};
		c->pol->notify(c->pol_priv, &c->view, &ev);
	}
	VE_INFO("coord: client %u registered%s", client,
		(flags & VE_READY_LATENCY) ? " (latency class)" : "");
	return 0;
}

int ve_coord_client_remove(struct ve_coord *c, uint32_t client)
{
	if (client >= c->rq.nclients || !c->cl[client].active)
		return -ENOENT;
	uint32_t dropped = ve_readyq_drop_client(&c->rq, client);
	ve_pool_release_client(&c->pool, (int32_t)client);
	c->cl[client].active = 0;
	c->rq.clients[client].active = 0;
	/* Its grant goes with it. What it submitted may still run: those leaves
	 * stay closing until its dispatcher reports them drained (a process that
	 * died: ve_coord_client_forget, the driver ended its work). */
	struct grant_client *g = &c->gc[client];
	usage_note(c, g);
	struct grant_client old = *g;
	uint64_t left = inuse(c, client);
	/* Its usage stays readable (ve_coord_grant_usage) until the slot is
	 * reused; it no longer grows. */
	*g = (struct grant_client){.entry = VE_POOL_NONE,
				   .want = VE_POOL_NONE,
				   .lend = VE_POOL_NONE,
				   .want_lend = VE_POOL_NONE,
				   .gen = old.gen + 1,
				   .closing = old.closing,
				   .ntakes = old.ntakes,
				   .use = old.use};
	memcpy(g->take, old.take, sizeof(g->take));
	take_add(c, g, left & ~old.closing);
	c->urgent = true;
	if (c->pol->notify) {
		struct ve_policy_event ev = {.kind = VE_PEV_CLIENT_REMOVED, .client = client};
		c->pol->notify(c->pol_priv, &c->view, &ev);
	}
	VE_INFO("coord: client %u removed (%u ready ops dropped, leases draining)", client,
		dropped);
	return 0;
}

/* ------------------------------------------------------------ ready / schedule */

int ve_coord_ready(struct ve_coord *c, const struct ve_ready_op *op)
{
	if (op->client >= c->rq.nclients || !c->cl[op->client].active)
		return -ENOENT;
	int s = ve_readyq_push(&c->rq, op);
	return s < 0 ? s : 0;
}

static void decision_log(struct ve_coord *c, const struct ve_ready_op *o, int entry,
			 const char *verdict, const char *reason)
{
	if (!c->log_decisions)
		return;
	ve__log(VE_LOG_DEBUG,
		"decide round=%llu policy=%s op=%u:%llx key=%016llx blocks=%llu proposal=%d(%u SMs) "
		"verdict=%s%s%s",
		(unsigned long long)c->st.rounds, c->pol_name, o->client,
		(unsigned long long)o->tok, (unsigned long long)o->key,
		(unsigned long long)o->blocks, entry,
		entry >= 0 && (uint32_t)entry < c->pool.nentries ? c->pool.e[entry].sms : 0,
		verdict, reason ? " reason=" : "", reason ? reason : "");
}

static void notify_reject(struct ve_coord *c, uint32_t op, int entry, const char *why)
{
	c->st.rejects++;
	decision_log(c, &c->rq.ops[op], entry, "reject", why);
	if (c->pol->notify) {
		struct ve_policy_event ev = {.kind = VE_PEV_REJECTED,
					     .client = c->rq.ops[op].client,
					     .op = op,
					     .entry = (uint16_t)(entry < 0 ? (int)VE_POOL_NONE : entry),
					     .key = c->rq.ops[op].key,
					     .reason = why};
		c->pol->notify(c->pol_priv, &c->view, &ev);
	}
}

/* The dispatcher-side check of a proposal (paper 4.4: op ready, entry
 * eligible to run the descriptor unchanged, lease and gate compatible). */
static const char *validate(struct ve_coord *c, const struct ve_ready_op *o, int32_t e,
			    uint32_t flags)
{
	if (e < 0 || (uint32_t)e >= c->pool.nentries)
		return "no such entry";
	const struct ve_pool_entry *pe = &c->pool.e[e];
	if (pe->sms < o->min_sms)
		return "entry smaller than the launch needs (cooperative/cluster)";
	bool share = flags & VE_BIND_SHARE;
	if (!ve_pool_can_admit(&c->pool, (uint16_t)e, (int32_t)o->client, share))
		return pe->state == VE_ENTRY_DRAINING ? "gate closed (draining)"
		       : pe->state == VE_ENTRY_RESERVED ? "reserved for another client"
		       : (pe->leaves & c->pool.claimed) ? "SMs claimed by a pending reservation"
							: "conflicts with a busy entry";
	if (pe->outstanding > 0 && !share)
		return "entry has running work and the policy did not ask to share";
	return NULL;
}

/* The root's SMs are wanted by an overdue op of 'client' but other work holds
 * some: reserve the root (no new lease may take its SMs) and close the gates
 * of the leases in it, so they drain and a later round can bind. */
static void watchdog_claim(struct ve_coord *c, uint32_t client)
{
	uint16_t root = c->pool.root;
	if (c->pool.e[root].reserve_for != VE_HOLDER_NONE)
		return; /* claimed already (by us, or a policy's reservation to wait for) */
	if (ve_pool_reserve(&c->pool, root, (int32_t)client) < 0)
		return; /* a pending reservation claims SMs there: it completes first */
	for (uint32_t e = 0; e < c->pool.nentries; e++)
		if (c->pool.e[e].state == VE_ENTRY_LEASED && ve_pool_close_gate(&c->pool, (uint16_t)e) == 0)
			c->st.gate_closes++;
}

/* The bind deadline (VE_WATCHDOG_MS): the oldest ready op of each client, if
 * it has waited longer than watchdog_ns, runs on the whole GPU, shared, its
 * descriptor unchanged: what safe mode would do. It runs before the policy
 * in every round, so a policy that defers forever cannot hang a client; the
 * lease accounting is the usual one (the root is an entry like any other). */
static int watchdog_bind(struct ve_coord *c, struct ve_binding *out, int max)
{
	uint64_t now = c->view.now_ns;
	uint16_t root = c->pool.root;
	int n = 0;
	for (uint32_t k = 0; k < c->rq.nclients && n < max; k++) {
		while (n < max) {
			uint32_t slot = c->rq.clients[k].head;
			if (slot == VE_READY_NIL)
				break;
			const struct ve_ready_op *o = &c->rq.ops[slot];
			if (now < o->ready_ns || now - o->ready_ns < c->watchdog_ns)
				break;
			if (!ve_pool_can_admit(&c->pool, root, (int32_t)k, true)) {
				watchdog_claim(c, k);
				break;
			}
			if (ve_pool_lease(&c->pool, root, (int32_t)k, true) ||
			    ve_pool_op_start(&c->pool, root))
				break;
			struct ve_binding *b = &out[n++];
			b->op = *o;
			b->entry = root;
			b->flags = VE_BIND_SHARE;
			c->rq.clients[k].running++;
			c->rq.clients[k].bound++;
			c->st.bindings++;
			c->st.watchdog_binds++;
			decision_log(c, &b->op, root, "bind", "watchdog: bind deadline passed");
			VE_WARN("watchdog: op %u:%llx was ready %.0f ms without a binding (policy %s); "
				"bound to the whole GPU (entry %u), the safe fallback; %llu so far",
				k, (unsigned long long)o->tok, (double)(now - o->ready_ns) / 1e6,
				c->pol_name, root, (unsigned long long)c->st.watchdog_binds);
			ve_readyq_remove(&c->rq, slot);
			if (c->pol->notify) {
				struct ve_policy_event ev = {.kind = VE_PEV_BOUND,
							     .client = k,
							     .op = slot,
							     .entry = root,
							     .key = b->op.key,
							     .flags = VE_BIND_SHARE};
				c->pol->notify(c->pol_priv, &c->view, &ev);
			}
		}
	}
	return n;
}

int ve_coord_schedule(struct ve_coord *c, struct ve_binding *out, int max)
{
	uint64_t t0 = ve__now_ns();
	c->st.rounds++;
	c->view.round = c->st.rounds;
	refresh_view(c);
	run_prepare(c, NULL); /* the policy's tick */
	int n = 0, rejects = 0;
	if (c->watchdog_ns && c->rq.nready)
		n = watchdog_bind(c, out, max);
	uint16_t elig[VE_POOL_MAX_ENTRIES];
	while (n < max && c->rq.nready) {
		int32_t op = c->pol->pick(c->pol_priv, &c->view);
		if (op < 0)
			break;
		c->st.picks++;
		if ((uint32_t)op >= c->rq.cap || !c->rq.ops[op].in_use) {
			VE_WARN("policy %s picked slot %d, which holds no ready op", c->pol_name, op);
			c->st.rejects++;
			break;
		}
		if (c->picked_round[op] == c->st.rounds)
			break; /* picked twice in one round: it has nothing new to say */
		c->picked_round[op] = c->st.rounds;
		uint32_t ne = view_eligible(&c->view, (uint32_t)op, elig, VE_POOL_MAX_ENTRIES);
		if (ne == 0) {
			c->st.defers++;
			decision_log(c, &c->rq.ops[op], -1, "defer", "no eligible entry now");
			continue;
		}
		uint32_t flags = 0;
		int32_t e = c->pol->select(c->pol_priv, &c->view, (uint32_t)op, elig, ne, &flags);
		if (e < 0) {
			c->st.defers++;
			decision_log(c, &c->rq.ops[op], -1, "defer", "policy deferred");
			continue;
		}
		const char *why = validate(c, &c->rq.ops[op], e, flags);
		if (why) {
			notify_reject(c, (uint32_t)op, e, why);
			if (++rejects >= 4)
				break;
			continue;
		}
		struct ve_pool_entry *pe = &c->pool.e[e];
		int rc = 0;
		if (pe->state != VE_ENTRY_LEASED || pe->holder != (int32_t)c->rq.ops[op].client)
			rc = ve_pool_lease(&c->pool, (uint16_t)e, (int32_t)c->rq.ops[op].client,
					   flags & VE_BIND_SHARE);
		if (rc == 0)
			rc = ve_pool_op_start(&c->pool, (uint16_t)e);
		if (rc) {
			notify_reject(c, (uint32_t)op, e, "pool refused the lease");
			if (++rejects >= 4)
				break;
			continue;
		}
		struct ve_binding *b = &out[n++];
		b->op = c->rq.ops[op];
		b->entry = (uint16_t)e;
		b->flags = flags;
		c->rq.clients[b->op.client].running++;
		c->rq.clients[b->op.client].bound++;
		c->st.bindings++;
		decision_log(c, &b->op, e, "bind", NULL);
		ve_readyq_remove(&c->rq, (uint32_t)op);
		if (c->pol->notify) {
			struct ve_policy_event ev = {.kind = VE_PEV_BOUND,
						     .client = b->op.client,
						     .op = (uint32_t)op,
						     .entry = (uint16_t)e,
						     .key = b->op.key,
						     .flags = flags};
			c->pol->notify(c->pol_priv, &c->view, &ev);
		}
	}
	c->st.decide_ns += ve__now_ns() - t0;
	return n;
}

/* Releases a lease whose last op finished, unless leases are kept. */
static void maybe_release(struct ve_coord *c, uint16_t entry)
{
	struct ve_pool_entry *pe = &c->pool.e[entry];
	if (pe->state == VE_ENTRY_LEASED && pe->outstanding == 0 && !c->keep_leases) {
		ve_pool_close_gate(&c->pool, entry);
		c->st.drains++;
	}
}

int ve_coord_submit_failed(struct ve_coord *c, const struct ve_binding *b, int status)
{
	c->st.failed_submits++;
	if (b->entry < c->pool.nentries) {
		ve_pool_op_done(&c->pool, b->entry);
		maybe_release(c, b->entry);
	}
	if (b->op.client < c->rq.nclients && c->rq.clients[b->op.client].running)
		c->rq.clients[b->op.client].running--;
	VE_DEBUG("coord: submission of op %u:%llx on entry %u failed (%d); back to the ready queue",
		 b->op.client, (unsigned long long)b->op.tok, b->entry, status);
	if (b->op.client >= c->rq.nclients || !c->cl[b->op.client].active)
		return -ENOENT;
	int s = ve_readyq_push_aged(&c->rq, &b->op);
	return s < 0 ? s : 0;
}

int ve_coord_done(struct ve_coord *c, uint32_t client, uint16_t entry, uint64_t key,
		  uint64_t measured_ns)
{
	if (entry >= c->pool.nentries)
		return -EINVAL;
	struct ve_pool_entry *pe = &c->pool.e[entry];
	bool exclusive = pe->holder != VE_HOLDER_SHARED && pe->outstanding == 1;
	int rc = ve_pool_op_done(&c->pool, entry);
	if (rc < 0)
		return rc;
	maybe_release(c, entry);
	c->st.completions++;
	if (client < c->rq.nclients) {
		if (c->rq.clients[client].running)
			c->rq.clients[client].running--;
		c->rq.clients[client].completed++;
	}
	/* Only an op that had its entry to itself says what T(key, m) is. */
	if (measured_ns && exclusive && key)
		ve_profile_observe(c->prof, key, pe->sms, (double)measured_ns);
	if (c->pol->notify) {
		struct ve_policy_event ev = {.kind = VE_PEV_COMPLETED,
					     .client = client,
					     .entry = entry,
					     .key = key,
					     .ns = measured_ns};
		c->pol->notify(c->pol_priv, &c->view, &ev);
	}
	return 0;
}

static void apply_plan(struct ve_coord *c, const struct ve_plan *plan)
{
	for (uint32_t i = 0; i < plan->ngates && i < VE_PLAN_MAX_GATES; i++) {
		uint16_t g = plan->gates[i];
		if (g < c->pool.nentries && c->pool.e[g].state == VE_ENTRY_LEASED &&
		    ve_pool_close_gate(&c->pool, g) == 0)
			c->st.gate_closes++;
	}
	/* A pending reservation (asked for, conflicts still draining) can be
	 * dropped too: ve_pool_unreserve cancels it (tpot gives up a preparation
	 * whose deadline passed before it took effect; test_dispatch). */
	if (plan->unreserve < c->pool.nentries &&
	    (c->pool.e[plan->unreserve].state == VE_ENTRY_RESERVED ||
	     ve_pool_pending(&c->pool, plan->unreserve)))
		ve_pool_unreserve(&c->pool, plan->unreserve);
	if (plan->reserve < c->pool.nentries) {
		int rc = ve_pool_reserve(&c->pool, plan->reserve, (int32_t)plan->reserve_for);
		if (rc >= 0)
			c->st.reservations++;
		else
			VE_DEBUG("coord: reservation of entry %u for client %u refused (%d)",
				 plan->reserve, plan->reserve_for, rc);
	}
}

static int run_prepare(struct ve_coord *c, const struct ve_hint *h)
{
	if (!c->pol->prepare)
		return 0;
	struct ve_plan plan = {.reserve = VE_POOL_NONE,
			       .unreserve = VE_POOL_NONE,
			       .reserve_for = h ? h->client : 0};
	int rc = c->pol->prepare(c->pol_priv, &c->view, h, &plan);
	if (rc == 0)
		apply_plan(c, &plan);
	return rc;
}

int ve_coord_hint(struct ve_coord *c, const struct ve_hint *h)
{
	if (!h || h->client >= c->rq.nclients || !c->cl[h->client].active)
		return -ENOENT;
	c->st.hints++;
	refresh_view(c);
	return run_prepare(c, h);
}

int ve_coord_pipeline(struct ve_coord *c, uint32_t client, uint16_t entry, bool may_contend)
{
	if (entry >= c->pool.nentries || client >= c->rq.nclients)
		return -EINVAL;
	const struct ve_pool_entry *pe = &c->pool.e[entry];
	if (pe->state != VE_ENTRY_LEASED || !pe->gate_open || pe->holder != (int32_t)client)
		return -EBUSY;
	if (pe->leaves & c->pool.claimed)
		return -EBUSY;
	/* With anyone else running or waiting the answer is 1: allowed, but
	 * the caller bounds the run of pipelined ops per stream (its budget), so
	 * allocations keep following demand (an unbounded chain would keep its
	 * entry forever). Alone, 0: no bound but the window. */
	bool contended = false;
	for (uint32_t k = 0; k < c->rq.nclients && !contended; k++)
		contended = k != client && c->cl[k].active &&
			    (c->rq.clients[k].running || c->rq.clients[k].nready);
	if (contended && !may_contend)
		return -EBUSY;
	int rc = ve_pool_op_start(&c->pool, entry);
	if (rc)
		return -EBUSY;
	c->rq.clients[client].running++;
	c->st.pipelined++;
	return contended ? 1 : 0;
}

int ve_coord_pipeline_join(struct ve_coord *c, uint32_t client, uint16_t entry)
{
	if (entry >= c->pool.nentries || client >= c->rq.nclients)
		return -EINVAL;
	int rc = ve_pool_op_join(&c->pool, entry, (int32_t)client);
	if (rc)
		return rc;
	c->rq.clients[client].running++;
	c->st.pipelined++;
	return 0;
}

void ve_coord_pipeline_cancel(struct ve_coord *c, uint32_t client, uint16_t entry)
{
	if (entry >= c->pool.nentries || client >= c->rq.nclients)
		return;
	ve_pool_op_done(&c->pool, entry);
	maybe_release(c, entry);
	if (c->rq.clients[client].running)
		c->rq.clients[client].running--;
	c->st.pipelined--;
}

/* ------------------------------------------------------------ grants */

bool ve_coord_grant_mode(const struct ve_coord *c)
{
	return c->grant_mode;
}

static uint64_t coord_now(const struct ve_coord *c)
{
	return c->now_external ? c->now_ns : ve__now_ns();
}

static uint64_t leaves_of(const struct ve_coord *c, uint16_t e)
{
	return e < c->pool.nentries ? c->pool.e[e].leaves : 0;
}

/* Leaves client k may have work on: its grant and lend, what it reported
 * busy and what was taken from it and is not known drained. */
static uint64_t inuse(const struct ve_coord *c, uint32_t k)
{
	const struct grant_client *g = &c->gc[k];
	return leaves_of(c, g->entry) | leaves_of(c, g->lend) | g->rep.busy_leaves | g->closing;
}

static void reclaim_sample(struct ve_coord *c, uint64_t ns);

/* Leaves just taken from g (generation g->gen): a take of their own, timed
 * from now until its leaves are free. One time for all of a client's
 * closing leaves (the first take's, until every taken leaf was free at
 * once) made a chain of takes one sample: a client moved every few ms,
 * each move waiting for a long kernel, never had them all free at once
 * (the sim, test_dispatch: 30 ms and 528 ms where no single drain took
 * longer than 6 and 49.5 ms), and the leaves of the first take stayed
 * closing to everyone else until the last one drained. */
static void take_add(struct ve_coord *c, struct grant_client *g, uint64_t lost)
{
	if (!lost)
		return;
	g->closing |= lost;
	if (g->ntakes == TAKES_MAX) {
		/* Full: into the newest (its time is earlier: timed long, not short). */
		struct take *t = &g->take[TAKES_MAX - 1];
		t->leaves |= lost;
		t->gen = g->gen;
		return;
	}
	g->take[g->ntakes++] = (struct take){.leaves = lost, .gen = g->gen, .ns = coord_now(c)};
}

/* Takes a report settles: one whose generation the client has seen keeps
 * only the leaves it still reports busy (the rest are free for others now)
 * and is timed when none is left. 'regranted' leaves are the client's own
 * again (its new grant): no longer reclaimed, dropped untimed. */
static void takes_settle(struct ve_coord *c, struct grant_client *g, uint64_t ack_gen,
			 uint64_t busy, uint64_t regranted)
{
	uint64_t closing = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->ntakes; i++) {
		struct take t = g->take[i];
		t.leaves &= ~regranted;
		if (!t.leaves)
			continue;
		if (ack_gen >= t.gen) {
			t.leaves &= busy;
			if (!t.leaves) {
				uint64_t ns = coord_now(c) - t.ns;
				reclaim_sample(c, ns);
				/* A slow one is worth a line (the first few): which client,
				 * how much it still ran when it said so. */
				if (ns >= 10000000ull && c->slow_reclaims_logged < 8) {
					c->slow_reclaims_logged++;
					VE_INFO("coord: SMs taken from client %u were free only after "
						"%.1f ms (leaves %#llx; it reports %u ops in flight, "
						"%u ready)",
						(unsigned)(g - c->gc), (double)ns / 1e6,
						(unsigned long long)g->take[i].leaves,
						(unsigned)g->rep.demand.inflight,
						(unsigned)g->rep.demand.ready);
				}
				continue;
			}
		}
		g->take[n++] = t;
		closing |= t.leaves;
	}
	g->ntakes = n;
	g->closing = closing;
}

static void reclaim_sample(struct ve_coord *c, uint64_t ns)
{
	c->reclaim_ns[c->nreclaim++ % RECLAIM_SAMPLES] = ns;
	c->st.reclaims++;
}

int ve_coord_report(struct ve_coord *c, uint32_t client, const struct ve_grant_report *r)
{
	if (client >= c->rq.nclients || !r)
		return -ENOENT;
	struct grant_client *g = &c->gc[client];
	if (!c->cl[client].active) {
		/* A detached client's work drains: leaves it no longer runs on are free. */
		if (!g->closing)
			return -ENOENT;
		g->rep.busy_leaves = r->busy_leaves;
		takes_settle(c, g, UINT64_MAX, r->busy_leaves, 0);
		return 0;
	}
	/* A report can only speak for leaves its grants covered: what it says
	 * busy beyond them is ignored (a confused client must not lock out the
	 * others), what it leaves out of them counts busy until acknowledged. */
	/* Busy only where it was granted: its grant, what is draining, what it
	 * reported before (a confused or hostile report cannot claim more). */
	uint64_t mine = leaves_of(c, g->entry) | leaves_of(c, g->lend);
	uint64_t may = mine | g->closing | g->rep.busy_leaves;
	g->rep = *r;
	g->rep.busy_leaves &= may;
	if (r->ack_gen < g->gen)
		g->rep.busy_leaves |= mine;
	if (g->closing)
		takes_settle(c, g, r->ack_gen, r->busy_leaves, 0);
	if ((r->demand.flags & VE_DEMAND_WAITING) ||
	    (r->demand.ready && g->entry == VE_POOL_NONE))
		c->urgent = true;
	/* Work of a client whose SMs are lent out: the policy takes the lend
	 * back at the next tick, and that tick should be now. */
	if ((r->demand.ready || r->demand.inflight) && g->entry != VE_POOL_NONE &&
	    !c->urgent) {
		uint64_t el = leaves_of(c, g->entry);
		for (uint32_t j = 0; j < c->rq.nclients; j++)
			if (j != client && (leaves_of(c, c->gc[j].lend) & el)) {
				c->urgent = true;
				break;
			}
	}
	return 0;
}

int ve_coord_grant(const struct ve_coord *c, uint32_t client, uint16_t *entry, uint64_t *gen)
{
	if (client >= c->rq.nclients)
		return -ENOENT;
	*entry = c->gc[client].entry;
	*gen = c->gc[client].gen;
	return 0;
}

uint16_t ve_coord_lend(const struct ve_coord *c, uint32_t client)
{
	return client < c->rq.nclients ? c->gc[client].lend : VE_POOL_NONE;
}

uint8_t ve_coord_why(const struct ve_coord *c, uint32_t client)
{
	return client < c->rq.nclients && c->cl[client].active ? c->gc[client].why
							       : VE_WHY_UNKNOWN;
}

void ve_coord_client_forget(struct ve_coord *c, uint32_t client)
{
	if (client >= c->rq.nclients)
		return;
	struct grant_client *g = &c->gc[client];
	if (g->entry != VE_POOL_NONE || g->closing || g->rep.busy_leaves) {
		usage_note(c, g);
		g->entry = g->want = g->lend = g->want_lend = VE_POOL_NONE;
		g->closing = 0;
		g->ntakes = 0;
		g->rep.busy_leaves = 0;
		g->gen++;
		c->st.grant_changes++;
		c->urgent = true;
	}
}

void ve_coord_client_pause(struct ve_coord *c, uint32_t client, bool paused)
{
	if (client >= c->rq.nclients || c->gc[client].paused == paused)
		return;
	c->gc[client].paused = paused;
	if (paused)
		ve_coord_client_forget(c, client);
	c->urgent = true;
}

void ve_coord_client_drained(struct ve_coord *c, uint32_t client)
{
	if (client >= c->rq.nclients)
		return;
	struct grant_client *g = &c->gc[client];
	g->rep.busy_leaves &= leaves_of(c, g->entry) | leaves_of(c, g->lend);
	if (g->closing) {
		takes_settle(c, g, UINT64_MAX, 0, 0);
		c->urgent = true; /* someone may wait for these leaves */
	}
}

bool ve_coord_contended(const struct ve_coord *c, uint32_t client)
{
	return !ve_coord_share_settled(c, client) && ve_coord_others(c, client) > 0;
}

uint32_t ve_coord_others(const struct ve_coord *c, uint32_t client)
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < c->rq.nclients; k++)
		n += k != client && c->cl[k].active;
	return n;
}

void ve_coord_observe(struct ve_coord *c, uint32_t client, uint16_t entry, uint64_t key,
		      uint64_t measured_ns)
{
	(void)client;
	if (entry < c->pool.nentries && key && measured_ns)
		ve_profile_observe(c->prof, key, c->pool.e[entry].sms, (double)measured_ns);
}

bool ve_coord_grant_shared(const struct ve_coord *c, uint32_t client)
{
	return client < c->rq.nclients && c->gc[client].entry != VE_POOL_NONE &&
	       c->gc[client].share;
}

/* In a shared grant that nothing is about to change: its own target is
 * what it holds (no move pending, none refused by hold_ns, nothing of its
 * draining), and every other active client either holds the same shared
 * entry just as settled or has no demand at all and is not latency-class.
 * Anyone else with work or a pending change, or a latency client (a
 * request would end the share and wait for what the sharers queued), may
 * take these SMs at the next tick: then the sharers keep the short bound. */
static bool share_settled_one(const struct ve_coord *c, uint32_t k, uint16_t entry)
{
	const struct grant_client *g = &c->gc[k];
	return g->entry == entry && g->share && g->want == entry && g->want_share && !g->held &&
	       !g->closing;
}

bool ve_coord_share_settled(const struct ve_coord *c, uint32_t client)
{
	if (c->share_contended || !ve_coord_grant_shared(c, client))
		return false;
	uint16_t e = c->gc[client].entry;
	if (!share_settled_one(c, client, e))
		return false;
	for (uint32_t k = 0; k < c->rq.nclients; k++) {
		if (k == client || !c->cl[k].active)
			continue;
		if (c->cl[k].flags & VE_READY_LATENCY)
			return false;
		if (share_settled_one(c, k, e))
			continue;
		const struct ve_client_demand *d = &c->gc[k].rep.demand;
		if (d->ready || d->inflight || (d->flags & VE_DEMAND_WAITING) ||
		    c->gc[k].want != VE_POOL_NONE || c->gc[k].entry != VE_POOL_NONE)
			return false;
	}
	return true;
}

/* What g held from use_since to now, added to its usage. Called before
 * every change of its entry. */
static void usage_add(const struct ve_coord *c, const struct grant_client *g,
		      struct ve_grant_usage *u, uint64_t now)
{
	if (!g->use_since || now <= g->use_since)
		return;
	uint64_t dt = now - g->use_since;
	u->span_ns += dt;
	if (g->entry != VE_POOL_NONE && g->entry < c->pool.nentries) {
		u->granted_ns += dt;
		u->sm_ns += (uint64_t)c->pool.e[g->entry].sms * dt;
		if (g->share)
			u->shared_ns += dt;
	}
}

static void usage_note(struct ve_coord *c, struct grant_client *g)
{
	uint64_t now = coord_now(c);
	usage_add(c, g, &g->use, now);
	g->use_since = VE_MAX(now, 1ull);
}

int ve_coord_demand(const struct ve_coord *c, uint32_t client, struct ve_client_demand *out)
{
	if (client >= c->rq.nclients || !out)
		return -ENOENT;
	*out = c->gc[client].rep.demand;
	return 0;
}

int ve_coord_grant_usage(const struct ve_coord *c, uint32_t client, struct ve_grant_usage *u)
{
	if (client >= c->rq.nclients || !u)
		return -ENOENT;
	const struct grant_client *g = &c->gc[client];
	*u = g->use;
	usage_add(c, g, u, coord_now(c));
	return 0;
}

/* Takes the client's entry away, and its lend with it (SMs outside 'keep'
 * go on draining). */
static void grant_take(struct ve_coord *c, uint32_t k, uint64_t keep)
{
	struct grant_client *g = &c->gc[k];
	uint64_t lost = (leaves_of(c, g->entry) | leaves_of(c, g->lend)) & ~keep;
	usage_note(c, g);
	g->entry = VE_POOL_NONE;
	g->share = 0; /* no entry, nothing shared (admit_pending reads it) */
	g->lend = VE_POOL_NONE;
	g->gen++;
	c->st.grant_changes++;
	take_add(c, g, lost);
}

/* Takes client k's lend back: its SMs outside the grant drain (at most the
 * short kernels the client put there) and are timed as a reclaim. */
static void lend_take(struct ve_coord *c, uint32_t k)
{
	struct grant_client *g = &c->gc[k];
	if (g->lend == VE_POOL_NONE)
		return;
	uint64_t lost = leaves_of(c, g->lend) & ~leaves_of(c, g->entry);
	g->lend = VE_POOL_NONE;
	g->gen++;
	c->st.grant_changes++;
	c->st.lend_takes++;
	take_add(c, g, lost);
}

/* Whether lend t may take effect for client k now: it contains k's settled,
 * unshared grant; none of its SMs, k's own included, carries another
 * client's lend or that lend's draining work (another client may have
 * borrowed k's idle grant: k borrows more only once that is back and
 * drained); and its SMs outside k's grant carry no target waiting for them
 * and no other work being handed over. Other clients' grants there are what
 * is lent (the policy's choice: they hold SMs they do not use now). */
static bool lend_fits(const struct ve_coord *c, uint32_t k, uint16_t t)
{
	const struct grant_client *g = &c->gc[k];
	if (t >= c->pool.nentries || g->entry == VE_POOL_NONE || g->share || g->want != g->entry ||
	    t == g->entry)
		return false;
	uint64_t el = leaves_of(c, g->entry), tl = leaves_of(c, t);
	if ((tl & el) != el)
		return false;
	uint64_t extra = tl & ~el, blocked = 0, lent = 0;
	for (uint32_t j = 0; j < c->rq.nclients; j++) {
		if (j == k)
			continue;
		const struct grant_client *o = &c->gc[j];
		lent |= o->closing | leaves_of(c, o->lend);
		if (c->cl[j].active && o->want != o->entry)
			blocked |= leaves_of(c, o->want);
		/* Busy outside its grant: work still draining there. */
		blocked |= o->rep.busy_leaves & ~leaves_of(c, o->entry) & ~leaves_of(c, o->lend);
	}
	return !(extra & blocked) && !(tl & lent);
}

/* The policy's lend for client k: a change takes the old lend back now; the
 * new one takes effect in admit_lends once it fits. */
static int lend_target(struct ve_coord *c, uint32_t k, uint16_t t)
{
	struct grant_client *g = &c->gc[k];
	if (t >= c->pool.nentries || g->entry == VE_POOL_NONE || g->want != g->entry || g->share)
		t = VE_POOL_NONE;
	g->want_lend = t;
	if (g->lend == t || g->lend == VE_POOL_NONE)
		return 0;
	lend_take(c, k);
	return 1;
}

static int admit_lends(struct ve_coord *c)
{
	int changes = 0;
	for (uint32_t k = 0; k < c->rq.nclients; k++) {
		struct grant_client *g = &c->gc[k];
		if (!c->cl[k].active || g->want_lend == VE_POOL_NONE || g->want_lend == g->lend ||
		    !lend_fits(c, k, g->want_lend))
			continue;
		g->lend = g->want_lend;
		g->gen++;
		if (g->closing)
			takes_settle(c, g, 0, ~0ull, leaves_of(c, g->lend));
		c->st.grant_changes++;
		c->st.lends++;
		changes++;
	}
	return changes;
}

/* Grants every pending target whose SMs no other client may still use. A
 * lend on those SMs is taken back (the target waits for its drain). */
static int admit_pending(struct ve_coord *c)
{
	int changes = 0;
	for (uint32_t pass = 0; pass < 2; pass++) {
		/* Latency-class clients first: their grants matter most. */
		for (uint32_t k = 0; k < c->rq.nclients; k++) {
			struct grant_client *g = &c->gc[k];
			bool lat = c->cl[k].flags & VE_READY_LATENCY;
			if (!c->cl[k].active || (pass == 0) != lat)
				continue;
			if (g->want == g->entry && g->want_share == g->share)
				continue;
			if (g->want == VE_POOL_NONE)
				continue;
			uint64_t want = leaves_of(c, g->want), others = 0;
			bool deadlock = false;
			for (uint32_t j = 0; j < c->rq.nclients; j++) {
				if (j == k)
					continue;
				const struct grant_client *h = &c->gc[j];
				if (leaves_of(c, h->lend) & ~leaves_of(c, h->entry) & want) {
					lend_take(c, j);
					c->gc[j].want_lend = VE_POOL_NONE;
					changes++;
				}
				if (!c->cl[j].active && !h->closing)
					continue;
				/* A sharer of the entry it wants, or of the one it
				 * grows from toward the same target, counts only with
				 * what it still runs elsewhere. Any sharer exempt, a
				 * latency client joined tpot's shared reservation on
				 * SMs where batch clients sharing another entry still
				 * drained. */
				bool with = g->want_share && h->share && h->entry != VE_POOL_NONE &&
					    (h->entry == g->want ||
					     (h->entry == g->entry && h->want == g->want));
				uint64_t u = inuse(c, j) & ~(with ? leaves_of(c, h->entry) : 0);
				others |= u;
				/* Both growing into one shared entry from different
				 * ones: each keeps its own and waits for the other's. */
				deadlock |= g->entry != VE_POOL_NONE && g->want_share && h->want == g->want &&
					    h->want_share && h->entry != VE_POOL_NONE &&
					    h->entry != g->entry && (u & want & ~leaves_of(c, g->entry));
			}
			if (want & others) {
				/* This one lets go of its entry: it waits with nothing,
				 * the other is admitted once its SMs have drained. */
				if (deadlock) {
					grant_take(c, k, 0);
					changes++;
				}
				c->st.grants_refused++;
				continue;
			}
			/* An entry still held here is inside the target (a growth,
			 * see grant_target): its SMs stay this client's. */
			usage_note(c, g);
			g->entry = g->want;
			g->share = g->want_share;
			g->yield = g->want_yield;
			g->entry_ns = coord_now(c);
			g->gen++;
			if (g->closing)
				takes_settle(c, g, 0, ~0ull, want);
			c->st.grant_changes++;
			changes++;
		}
	}
	return changes;
}

/* Moves a client's target to T: an entry that is not inside T is taken
 * away now (its running work drains where it is); a growth keeps serving
 * until T's SMs are free. */
static int grant_target(struct ve_coord *c, uint32_t k, uint16_t t, uint8_t bits)
{
	struct grant_client *g = &c->gc[k];
	uint8_t share = bits & VE_GRANT_SHARE ? 1 : 0;
	bool yield = bits & VE_GRANT_YIELD;
	if (t == g->want && share == g->want_share) {
		/* Same SMs: a change of yield alone drains nothing. */
		g->want_yield = yield;
		if (g->entry == g->want)
			g->yield = yield;
		g->held = false;
		return 0;
	}
	/* A target holds for hold_ns (unless the client goes idle or had none):
	 * a policy whose plan swings between near-equal choices must not move
	 * a client every tick, each move a drain, and a pending target that
	 * keeps moving is never admitted (a latency client starved this way on
	 * the H200: 53,000 grant changes in a minute, no request served). */
	uint64_t now = coord_now(c);
	if (g->want != VE_POOL_NONE && t != VE_POOL_NONE && now - g->want_ns < c->hold_ns) {
		g->held = true; /* a change is coming: ve_coord_share_settled says no */
		return 0;
	}
	/* A grant that just took effect is not taken away outright for hold_ns
	 * while its client has work: a target whose SMs took a drain to free
	 * was otherwise lost on the next tick (a client that needs the whole
	 * GPU, beside one that always has work ready, held it one tick in
	 * twelve, two drains a cycle). An idle client loses it at once; a move
	 * to another entry follows the rule above. A grant that fills another
	 * client's gaps (VE_GRANT_YIELD, tput's turns) is not held: its owner
	 * back from a short gap would otherwise wait hold_ns for it. */
	const struct ve_client_demand *d = &c->dem[k];
	if (t == VE_POOL_NONE && g->entry != VE_POOL_NONE && g->entry == g->want && !g->yield &&
	    (d->ready || d->inflight) && now - g->entry_ns < c->hold_ns) {
		g->held = true;
		return 0;
	}
	g->held = false;
	g->want_ns = now;
	g->want = t;
	g->want_share = share;
	g->want_yield = yield;
	if (g->entry == VE_POOL_NONE || g->entry == t)
		return 0;
	uint64_t tl = leaves_of(c, t), el = leaves_of(c, g->entry);
	/* Growth: keep the entry until the wider one is free. Into a shared
	 * grant only from a shared one: the sharers of one entry grow
	 * together (admit_pending counts none of them against the others), as
	 * tpot's latency clients sharing its reservation do under deadline
	 * pressure (taken away instead, both servers had no SMs until the
	 * batch kernels drained, when they were already late). Two clients of
	 * different entries growing into one shared entry would each keep
	 * theirs and wait for the other's forever; admit_pending breaks that. */
	if (t != VE_POOL_NONE && (tl & el) == el && (!share || g->share))
		return 0;
	grant_take(c, k, tl);
	return 1;
}

int ve_coord_tick(struct ve_coord *c, bool force)
{
	if (!c->grant_mode)
		return 0;
	uint64_t now = coord_now(c);
	int changes = 0;
	bool planned = false;
	if (force || c->urgent || now - c->last_tick_ns >= c->tick_ns) {
		c->last_tick_ns = now;
		c->urgent = false;
		c->st.ticks++;
		refresh_view(c);
		for (uint32_t k = 0; k < VE_COORD_MAX_CLIENTS; k++) {
			struct grant_client *g = &c->gc[k];
			bool on = k < c->rq.nclients && c->cl[k].active && !g->paused;
			c->dem[k] = on ? g->rep.demand : (struct ve_client_demand){0};
			c->dem[k].entry = on ? g->entry : VE_POOL_NONE;
			if (on && (c->cl[k].flags & VE_READY_LATENCY))
				c->dem[k].flags |= VE_DEMAND_LATENCY;
			c->plan.entry[k] = on ? g->want : VE_POOL_NONE;
			c->plan.share[k] =
			    on ? (uint8_t)((g->want_share ? VE_GRANT_SHARE : 0) |
					   (g->want_yield ? VE_GRANT_YIELD : 0))
			       : 0;
			/* Lends last while the policy asks for them: one that
			 * never writes plan.lend (a reload to fixed) ends them. */
			c->plan.lend[k] = VE_POOL_NONE;
			c->plan.why[k] = on ? g->why : VE_WHY_UNKNOWN;
		}
		if (c->pol->grant(c->pol_priv, &c->view, c->dem, &c->plan) == 0) {
			bool lends = c->pol->abi_version >= 3;
			planned = true;
			for (uint32_t k = 0; k < c->rq.nclients; k++) {
				if (!c->cl[k].active)
					continue;
				/* Older policies leave 'why' as it came: unknown. */
				c->gc[k].why = c->pol->abi_version >= 4 && !c->gc[k].paused
						   ? c->plan.why[k]
						   : VE_WHY_UNKNOWN;
				uint16_t t = c->gc[k].paused ? VE_POOL_NONE : c->plan.entry[k];
				if (t != VE_POOL_NONE && t >= c->pool.nentries) {
					VE_WARN("policy %s granted client %u entry %u, which does not "
						"exist; ignored",
						c->pol_name, k, t);
					continue;
				}
				/* Policies before ABI 3 wrote any non-zero for share. */
				uint8_t bits = c->pol->abi_version >= 3
						   ? c->plan.share[k]
						   : (c->plan.share[k] ? VE_GRANT_SHARE : 0);
				changes += grant_target(c, k, t, bits);
				changes += lend_target(c, k, lends ? c->plan.lend[k] : VE_POOL_NONE);
			}
		}
	}
	changes += admit_pending(c);
	/* Lends only as the policy just decided them: admitted later, a lend
	 * could cover a lender that has had work since (its report asks for
	 * no tick while nothing of it is lent). */
	return changes + (planned ? admit_lends(c) : 0);
}

/* ------------------------------------------------------------ accessors */

struct ve_pool *ve_coord_pool(struct ve_coord *c)
{
	return &c->pool;
}

struct ve_profile *ve_coord_profile(struct ve_coord *c)
{
	return c->prof;
}

const struct ve_policy_view *ve_coord_view(struct ve_coord *c)
{
	refresh_view(c);
	return &c->view;
}

const char *ve_coord_policy_name(const struct ve_coord *c)
{
	return c->pol_name;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ve_coord_stats(const struct ve_coord *c, struct ve_coord_stats *st)
{
	*st = c->st;
	uint32_t n = c->nreclaim < RECLAIM_SAMPLES ? c->nreclaim : RECLAIM_SAMPLES;
	if (!n)
		return;
	/* Not a fast path: a copy sorted for the percentiles of the recent ones. */
	uint64_t *v = malloc(n * sizeof(*v));
	if (!v)
		return;
	memcpy(v, c->reclaim_ns, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u64);
	st->reclaim_ns_p50 = v[n / 2];
	st->reclaim_ns_p99 = v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
	st->reclaim_ns_max = v[n - 1];
	free(v);
}

void ve_coord_set_now(struct ve_coord *c, uint64_t now_ns)
{
	c->now_external = true;
	c->now_ns = now_ns;
}
