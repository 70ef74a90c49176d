/* SPDX-License-Identifier: MIT */
/*
 * Coordinator and policies on crafted cases whose right answer is known by
 * hand, on the H200 leaf list (15 x 8 SMs + 12, 59 pool entries), driving
 * ve_coord_* directly with profiles set through ve_profile_set.
 *
 * Pool indices used below (ve_pool_init order for that list): 0 root (132),
 * 1..16 leaves (leaf i = entry i + 1; leaf 15 has 12 SMs), 17/18 the halves
 * (64 = leaves 0-7, 68 = leaves 8-15), 19..22 quarters (32, 32, 32, 36),
 * 23..30 pairs (16 x 7, then 20), 31..46 leaf remainders (124, 120 for leaf
 * 15), 47..54 pair remainders (116, 112), 55..58 quarter remainders (100, 96).
 *
 * Validation cases use a scripted policy built as a shared object inside
 * the test (its C source is written to a temporary directory and compiled
 * with $CC or cc); they, and the external-policy checks, are skipped when no
 * compiler is found or the include directory cannot be located (run from
 * the repository root, or set VE_SRCDIR).
 */
#include "../harness.h"

#include "core/desc.h"
#include "coord/coord.h"
#include "policy/registry.h"
#include "policy/tput_impl.h"
#include "pool/pool.h"
#include "profile/profile.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint32_t h200[16] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 12};

/* Distinct entry sizes of the H200 pool. */
static const uint32_t sizes[] = {8, 12, 16, 20, 32, 36, 64, 68, 96, 100, 112, 116, 120, 124, 132};

#define K_FLAT	 0x1111ull /* 100 us on any size: no gain from SMs */
#define K_LINEAR 0x2222ull /* T(m) = 8 ms * 8 / m: scales perfectly */
#define K_STOP16 0x3333ull /* 300 us on 8, 200 on 12, 100 from 16 SMs up */
#define K_DECODE 0x4444ull /* 2 ms on 16 SMs, scales perfectly */

static struct ve_coord *mk_coord(const char *policy, bool log, bool keep)
{
	struct ve_coord_config cfg = {.leaf_sms = h200,
				      .nleaves = 16,
				      .max_clients = 8,
				      .policy = policy,
				      .seed = 42,
				      .log_decisions = log,
				      .keep_leases = keep};
	struct ve_coord *c = NULL;
	char err[256] = "";
	int rc = ve_coord_create(&cfg, &c, err, sizeof(err));
	VE_CHECK_MSG(rc == 0, "create %s: %d %s", policy, rc, err);
	const struct ve_pool *p = ve_coord_pool(c);
	VE_CHECK_EQ(p->nentries, 59);
	struct ve_profile *pr = ve_coord_profile(c);
	for (size_t i = 0; i < VE_ARRAY_SIZE(sizes); i++) {
		double m = sizes[i];
		VE_CHECK_EQ(ve_profile_set(pr, K_FLAT, sizes[i], 100000.0), 0);
		VE_CHECK_EQ(ve_profile_set(pr, K_LINEAR, sizes[i], 8e6 * 8.0 / m), 0);
		VE_CHECK_EQ(ve_profile_set(pr, K_STOP16, sizes[i],
					   m < 12   ? 300000.0
					   : m < 16 ? 200000.0
						    : 100000.0),
			    0);
		VE_CHECK_EQ(ve_profile_set(pr, K_DECODE, sizes[i], 2e6 * 16.0 / m), 0);
	}
	/* Virtual time near zero: no op is old enough for the starvation guard
	 * unless a test moves the clock. */
	ve_coord_set_now(c, 1);
	return c;
}

static void add_clients(struct ve_coord *c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		VE_CHECK_EQ(ve_coord_client_add(c, i, 0), 0);
}

static void ready(struct ve_coord *c, uint32_t client, uint64_t tok, uint64_t key, uint64_t t,
		  uint32_t min_sms, uint8_t flags)
{
	struct ve_ready_op o = {.tok = tok,
				.key = key,
				.ready_ns = t,
				.blocks = 1024,
				.threads = 256,
				.min_sms = min_sms,
				.client = client,
				.kind = VE_OP_KERNEL,
				.flags = flags};
	VE_CHECK_EQ(ve_coord_ready(c, &o), 0);
}

static int sched(struct ve_coord *c, struct ve_binding *b, int max)
{
	int n = ve_coord_schedule(c, b, max);
	VE_CHECK(n >= 0 && n <= max);
	return n;
}

static void done(struct ve_coord *c, const struct ve_binding *b)
{
	VE_CHECK_EQ(ve_coord_done(c, b->op.client, b->entry, b->op.key, 0), 0);
}

/* Ready slot holding (client, tok), or -1. */
static int32_t slot_of(struct ve_coord *c, uint32_t client, uint64_t tok)
{
	const struct ve_policy_view *v = ve_coord_view(c);
	for (uint32_t s = 0; s < v->nops; s++)
		if (v->ops[s].in_use && v->ops[s].client == client && v->ops[s].tok == tok)
			return (int32_t)s;
	return -1;
}

/* Tokens of a client's ready ops, oldest first. */
static int ready_toks(struct ve_coord *c, uint32_t client, uint64_t *out, int max)
{
	const struct ve_policy_view *v = ve_coord_view(c);
	int n = 0;
	for (uint32_t s = v->clients[client].head; s != VE_READY_NIL && n < max; s = v->ops[s].next)
		out[n++] = v->ops[s].tok;
	return n;
}

static uint16_t l2_of(const struct ve_pool *p, uint16_t e)
{
	for (uint16_t a = e; a != VE_POOL_NONE; a = p->e[a].parent)
		if (p->e[a].level == 2 && p->e[a].kind == VE_ENTRY_NODE)
			return a;
	return VE_POOL_NONE;
}

static uint64_t leaves_of(struct ve_coord *c, const struct ve_binding *b)
{
	return ve_coord_pool(c)->e[b->entry].leaves;
}

static uint32_t sms_of(struct ve_coord *c, const struct ve_binding *b)
{
	return ve_coord_pool(c)->e[b->entry].sms;
}

/* Bindings of one round never overlap unless they share. */
static void check_disjoint(struct ve_coord *c, const struct ve_binding *b, int n)
{
	uint64_t seen = 0;
	for (int i = 0; i < n; i++) {
		VE_CHECK_MSG((leaves_of(c, &b[i]) & seen) == 0 || (b[i].flags & VE_BIND_SHARE),
			     "binding %d (entry %u) overlaps an earlier one", i, b[i].entry);
		seen |= leaves_of(c, &b[i]);
	}
}

/* ------------------------------------------------------------------ stderr capture */

struct capture {
	int saved;
	FILE *f;
};

static void cap_begin(struct capture *cp)
{
	fflush(stderr);
	cp->f = tmpfile();
	VE_CHECK(cp->f != NULL);
	cp->saved = dup(2);
	VE_CHECK(cp->saved >= 0);
	VE_CHECK(dup2(fileno(cp->f), 2) == 2);
}

/* Returns what was written to stderr since cap_begin (caller frees). */
static char *cap_end(struct capture *cp)
{
	fflush(stderr);
	dup2(cp->saved, 2);
	close(cp->saved);
	long n = ftell(cp->f);
	char *buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	rewind(cp->f);
	if (buf && n > 0 && fread(buf, 1, (size_t)n, cp->f) != (size_t)n)
		buf[0] = 0;
	fclose(cp->f);
	/* Echo it, so a failing test still shows the log. */
	if (buf)
		fputs(buf, stderr);
	return buf;
}

/* ------------------------------------------------------------------ Throughput-Oriented */

VE_TEST(tput_alone_scaling_op_expands_to_whole_gpu)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 1);
	ready(c, 0, 1, K_LINEAR, 10, 0, 0);
	struct ve_binding b[8];
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(b[0].entry, ve_coord_pool(c)->root);
	VE_CHECK_EQ(sms_of(c, &b[0]), 132);
	VE_CHECK_EQ(b[0].flags & VE_BIND_SHARE, 0);
	done(c, &b[0]);
	/* An op that gains nothing from SMs stays on a minimum entry (a leaf). */
	ready(c, 0, 2, K_FLAT, 20, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(sms_of(c, &b[0]), 8);
	VE_CHECK_EQ(ve_coord_pool(c)->e[b[0].entry].kind, VE_ENTRY_LEAF);
	ve_coord_destroy(c);
}

/* Grant form: one tput grant round over hand-made demands. */
static void grant_from(const char *args, const struct ve_policy_view *v,
		       const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	const struct ve_policy_ops *ops = ve_policy_builtin("tput");
	VE_CHECK(ops && ops->grant);
	void *priv = NULL;
	VE_CHECK_EQ(ops->init(args, v, &priv), 0);
	VE_CHECK_EQ(ops->grant(priv, v, dem, plan), 0);
	ops->fini(priv);
}

/* No targets: every client ungranted, nothing shared. */
static void plan_clear(struct ve_grant_plan *plan)
{
	for (uint32_t k = 0; k < VE_POLICY_MAX_CLIENTS; k++) {
		plan->entry[k] = VE_POOL_NONE;
		plan->share[k] = 0;
		plan->lend[k] = VE_POOL_NONE;
	}
}

/* From no targets at all. */
static void grant_round(const char *args, const struct ve_policy_view *v,
			const struct ve_client_demand *dem, struct ve_grant_plan *plan)
{
	plan_clear(plan);
	grant_from(args, v, dem, plan);
}

/* A client whose target is set and wide enough waits for a drain, not for a
 * decision: while the SMs move, the next rounds keep every target. Treated
 * as waiting (first in MinBind order), the client whose grant had just been
 * taken re-planned everyone mid-transition, round after round (99,000 grant
 * changes in 85 s beside a decode server on the H200). */
VE_TEST(tput_grant_targets_hold_while_their_sms_drain)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	const struct ve_policy_view *v = ve_coord_view(c);
	const struct ve_pool *p = v->pool;
	struct ve_client_demand dem[VE_POLICY_MAX_CLIENTS] = {{0}};
	struct ve_grant_plan plan;
	/* A busy batch client on the whole GPU; a latency client arrives. */
	dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
					   .active_ns = 1, .entry = p->root, .op_us = 2000};
	dem[1] = (struct ve_client_demand){.ready = 1, .want_sms = 132, .active_ns = 1,
					   .entry = VE_POOL_NONE,
					   .flags = VE_DEMAND_LATENCY | VE_DEMAND_WAITING};
	plan_clear(&plan);
	plan.entry[0] = p->root;
	grant_from("", v, dem, &plan);
	uint16_t t0 = plan.entry[0], t1 = plan.entry[1];
	VE_CHECK(t0 != VE_POOL_NONE && t1 != VE_POOL_NONE && t0 != p->root);
	VE_CHECK_EQ(p->e[t0].leaves & p->e[t1].leaves, 0);
	/* Mid-transition: the batch client's grant was taken (it waits for its
	 * new target), the latency client waits for the batch's SMs to drain. */
	dem[0].entry = VE_POOL_NONE;
	dem[0].flags = VE_DEMAND_WAITING;
	for (int round = 0; round < 5; round++) {
		grant_from("", v, dem, &plan);
		VE_CHECK_EQ(plan.entry[0], t0);
		VE_CHECK_EQ(plan.entry[1], t1);
	}
	ve_coord_destroy(c);
}

VE_TEST(tput_grant_client_alone_keeps_the_whole_gpu_idle_or_narrow)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 1);
	const struct ve_policy_view *v = ve_coord_view(c);
	const struct ve_pool *p = v->pool;
	struct ve_client_demand dem[VE_POLICY_MAX_CLIENTS] = {{0}};
	struct ve_grant_plan plan;
	/* Busy with kernels that fill 8 SMs: alone, it still gets all 132. */
	dem[0] = (struct ve_client_demand){.ready = 1, .want_sms = 8, .active_ns = 1,
					   .entry = VE_POOL_NONE};
	grant_round("", v, dem, &plan);
	VE_CHECK_EQ(plan.entry[0], p->root);
	VE_CHECK_EQ(plan.share[0], 0);
	grant_round("alone=0", v, dem, &plan); /* the old rule: what its kernels fill */
	VE_CHECK_EQ(p->e[plan.entry[0]].sms, 8);
	/* Idle for longer than idle_ms (a host phase): alone, it keeps it. */
	dem[0] = (struct ve_client_demand){.want_sms = 8, .active_ns = 0, .entry = p->root};
	grant_round("", v, dem, &plan);
	VE_CHECK_EQ(plan.entry[0], p->root);
	grant_round("alone=0", v, dem, &plan);
	VE_CHECK_EQ(plan.entry[0], VE_POOL_NONE);
	/* A second client registers: the idle one gives its SMs up, the busy
	 * newcomer gets what its kernels fill, not the whole GPU. */
	VE_CHECK_EQ(ve_coord_client_add(c, 1, 0), 0);
	v = ve_coord_view(c);
	dem[1] = (struct ve_client_demand){.ready = 1, .want_sms = 8, .active_ns = 1,
					   .entry = VE_POOL_NONE, .flags = VE_DEMAND_WAITING};
	grant_round("", v, dem, &plan);
	VE_CHECK_EQ(plan.entry[0], VE_POOL_NONE);
	VE_CHECK(plan.entry[1] != VE_POOL_NONE);
	VE_CHECK_EQ(p->e[plan.entry[1]].sms, 8);
	/* Knob values are checked. */
	void *priv = NULL;
	VE_CHECK_EQ(ve_policy_builtin("tput")->init("alone=2", v, &priv), -EINVAL);
	ve_coord_destroy(c);
}

/* tpot in grant mode: the reservation stands while the decode server is
 * idle (standing=1, the default) or goes back to the batch client
 * (standing=0), and comes back as soon as the server has work. */
VE_TEST(tpot_grant_standing_reservation_held_or_yielded_while_idle)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	const struct ve_policy_view *v = ve_coord_view(c);
	const struct ve_pool *p = v->pool;
	const struct ve_policy_ops *ops = ve_policy_builtin("tpot");
	VE_CHECK(ops && ops->grant);
	struct ve_client_demand dem[VE_POLICY_MAX_CLIENTS] = {{0}};
	struct ve_grant_plan plan;
	const char *args[2] = {"", "standing=0"};
	for (int a = 0; a < 2; a++) {
		void *priv = NULL;
		VE_CHECK_EQ(ops->init(args[a], v, &priv), 0);
		/* Server idle for long (active_ns 0), training busy. */
		dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
						   .active_ns = 1, .entry = VE_POOL_NONE,
						   .flags = VE_DEMAND_WAITING};
		dem[1] = (struct ve_client_demand){.want_sms = 132, .entry = VE_POOL_NONE,
						   .flags = VE_DEMAND_LATENCY};
		plan_clear(&plan);
		VE_CHECK_EQ(ops->grant(priv, v, dem, &plan), 0);
		VE_CHECK(plan.entry[0] != VE_POOL_NONE);
		if (a == 0) {
			VE_CHECK(plan.entry[1] != VE_POOL_NONE);
			VE_CHECK_EQ(p->e[plan.entry[1]].sms, 16);
			VE_CHECK_EQ(p->e[plan.entry[0]].leaves & p->e[plan.entry[1]].leaves, 0);
			VE_CHECK(p->e[plan.entry[0]].sms < 132);
		} else {
			VE_CHECK_EQ(plan.entry[1], VE_POOL_NONE);
			VE_CHECK_EQ(plan.entry[0], p->root);
		}
		/* A request arrives: the server gets SMs of its own again. */
		dem[1].ready = 1;
		dem[1].active_ns = 1;
		dem[1].flags |= VE_DEMAND_WAITING;
		dem[0].entry = plan.entry[0];
		dem[0].flags = 0;
		VE_CHECK_EQ(ops->grant(priv, v, dem, &plan), 0);
		VE_CHECK(plan.entry[1] != VE_POOL_NONE);
		VE_CHECK(plan.entry[0] != VE_POOL_NONE);
		VE_CHECK_EQ(p->e[plan.entry[0]].leaves & p->e[plan.entry[1]].leaves, 0);
		ops->fini(priv);
	}
	void *priv = NULL;
	VE_CHECK_EQ(ops->init("standing=2", v, &priv), -EINVAL);
	ve_coord_destroy(c);
}

/* Grant rounds of one policy over two registered clients, by hand: a copy of
 * the coordinator's view (the test moves now_ns), demands and the plan. */
struct grant_fix {
	struct ve_coord *c;
	struct ve_policy_view v;
	const struct ve_pool *p;
	const struct ve_policy_ops *ops;
	void *priv;
	struct ve_client_demand dem[VE_POLICY_MAX_CLIENTS];
	struct ve_grant_plan plan;
};

static void grant_fix_init_n(struct grant_fix *f, const char *policy, const char *args,
			     uint32_t nclients)
{
	memset(f, 0, sizeof(*f));
	f->c = mk_coord("tput", false, false);
	add_clients(f->c, nclients);
	f->v = *ve_coord_view(f->c);
	f->p = f->v.pool;
	f->ops = ve_policy_builtin(policy);
	VE_CHECK(f->ops && f->ops->grant);
	VE_CHECK_EQ(f->ops->init(args, &f->v, &f->priv), 0);
	plan_clear(&f->plan);
}

static void grant_fix_init(struct grant_fix *f, const char *policy, const char *args)
{
	grant_fix_init_n(f, policy, args, 2);
}

static void grant_fix_round(struct grant_fix *f)
{
	VE_CHECK_EQ(f->ops->grant(f->priv, &f->v, f->dem, &f->plan), 0);
}

static void grant_fix_fini(struct grant_fix *f)
{
	f->ops->fini(f->priv);
	ve_coord_destroy(f->c);
}

/* After a round: clients 0 and 1 both granted, on disjoint SMs; client k's SMs. */
static uint32_t grant_fix_split_sms(const struct grant_fix *f, uint32_t k)
{
	VE_CHECK(f->plan.entry[0] != VE_POOL_NONE && f->plan.entry[1] != VE_POOL_NONE);
	VE_CHECK_EQ(f->p->e[f->plan.entry[0]].leaves & f->p->e[f->plan.entry[1]].leaves, 0);
	return f->p->e[f->plan.entry[k]].sms;
}

/* A knob value the policy must refuse. */
static void knob_refused(const char *policy, const char *args)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	void *priv = NULL;
	VE_CHECK_EQ(ve_policy_builtin(policy)->init(args, ve_coord_view(c), &priv), -EINVAL);
	ve_coord_destroy(c);
}

/* tpot's standing reservation is lent to the training's short kernels only
 * with lend_reserve=1, only while the server has been idle lend_idle_ms,
 * and not while it has work. */
VE_TEST(tpot_grant_lends_the_idle_reservation_only_with_lend_reserve)
{
	for (int a = 0; a < 2; a++) {
		struct grant_fix f;
		grant_fix_init(&f, "tpot", a ? "lend_reserve=1" : "");
		f.v.now_ns = 100000000;
		f.dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
						     .active_ns = f.v.now_ns,
						     .entry = VE_POOL_NONE,
						     .flags = VE_DEMAND_WAITING};
		f.dem[1] = (struct ve_client_demand){.want_sms = 132, .entry = VE_POOL_NONE,
						     .flags = VE_DEMAND_LATENCY};
		grant_fix_round(&f);
		uint16_t res = f.plan.entry[1], own = f.plan.entry[0];
		VE_CHECK(res != VE_POOL_NONE && own != VE_POOL_NONE);
		uint64_t rl = f.p->e[res].leaves;
		/* Both in effect; the server idle since long ago. */
		f.dem[0].entry = own;
		f.dem[0].flags = 0;
		f.dem[1].entry = res;
		f.v.now_ns += 10000000;
		f.dem[0].active_ns = f.v.now_ns;
		grant_fix_round(&f);
		VE_CHECK_EQ(f.plan.entry[1], res);
		VE_CHECK_EQ(f.plan.lend[1], VE_POOL_NONE);
		uint16_t l0 = f.plan.lend[0];
		if (a) {
			VE_CHECK(l0 != VE_POOL_NONE);
			VE_CHECK_EQ(f.p->e[l0].leaves & rl, rl);
			VE_CHECK_EQ(f.p->e[l0].leaves & f.p->e[own].leaves, f.p->e[own].leaves);
		} else {
			VE_CHECK(l0 == VE_POOL_NONE || !(f.p->e[l0].leaves & rl));
		}
		/* Work for the server 0.5 ms after its last: no lend of the reservation. */
		f.dem[1].active_ns = f.v.now_ns - 500000;
		grant_fix_round(&f);
		l0 = f.plan.lend[0];
		VE_CHECK(l0 == VE_POOL_NONE || !(f.p->e[l0].leaves & rl));
		f.dem[1].active_ns = f.v.now_ns;
		f.dem[1].ready = 1;
		grant_fix_round(&f);
		l0 = f.plan.lend[0];
		VE_CHECK(l0 == VE_POOL_NONE || !(f.p->e[l0].leaves & rl));
		grant_fix_fini(&f);
	}
	knob_refused("tpot", "lend_reserve=2");
	knob_refused("tput", "lend=2");
}

/* A bad policy argument is refused with its name, wherever it is in the
 * list (a user of VE_POLICY=tpot:reserve=64,... sees which key is wrong),
 * and a reload names it too. */
VE_TEST(policy_bad_argument_named_in_the_error)
{
	static const struct {
		const char *spec, *named;
	} cases[] = {
		{"tpot:reserve=64,bogus=1", "rejected 'bogus=1' in its arguments 'reserve=64,bogus=1'"},
		{"tpot:reserve", "rejected 'reserve (not key=value)' in its arguments"},
		{"tput:min_gain=0.01,prio=-1", "rejected 'prio=-1' in its arguments"},
		{"tpot:reserve=32,min_gain=-3", "rejected 'min_gain=-3'"}, /* via the embedded tput */
		{"fixed:leaves=8/x", "rejected 'leaves=8/x'"},
		{"tpot:reserve=64,reserve=8", "rejected 'reserve (given twice)'"},
		{"whole:reserve=64", "policy whole takes no arguments (given 'reserve=64')"},
		{"chaos:garbage", "policy chaos takes no arguments"},
		/* Parsed, refused later (no entry that large): nothing is named,
		 * not even the key of the case before on this thread. */
		{"tpot:reserve=1000", "rejected its arguments 'reserve=1000'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ve_coord_config cfg = {.leaf_sms = h200, .nleaves = 16, .policy = cases[i].spec};
		struct ve_coord *c = NULL;
		char err[256] = "";
		VE_CHECK_EQ(ve_coord_create(&cfg, &c, err, sizeof(err)), -EINVAL);
		VE_CHECK(c == NULL);
		VE_CHECK_MSG(strstr(err, cases[i].named), "%s: %s", cases[i].spec, err);
	}
	/* Too long: said so, once. */
	char longspec[700] = "tpot:reserve=16";
	while (strlen(longspec) < 600)
		strcat(longspec, ",reserve=16");
	struct ve_coord_config lcfg = {.leaf_sms = h200, .nleaves = 16, .policy = longspec};
	struct ve_coord *lc = NULL;
	char lerr[256] = "";
	VE_CHECK_EQ(ve_coord_create(&lcfg, &lc, lerr, sizeof(lerr)), -E2BIG);
	VE_CHECK_MSG(strstr(lerr, "arguments are too long") && strstr(lerr, "at most 511"), "%s", lerr);
	/* Good arguments after a failure: nothing stale is named. */
	struct ve_coord *c = mk_coord("tput", false, false);
	char err[256] = "";
	VE_CHECK_EQ(ve_coord_set_policy(c, "tpot:standing=2", err, sizeof(err)), -EINVAL);
	VE_CHECK_MSG(strstr(err, "rejected 'standing=2'"), "reload: %s", err);
	VE_CHECK_EQ(ve_coord_set_policy(c, "whole:x=1", err, sizeof(err)), -EINVAL);
	VE_CHECK_MSG(strstr(err, "takes no arguments"), "reload: %s", err);
	VE_CHECK_EQ(ve_coord_set_policy(c, "tpot:standing=0", err, sizeof(err)), 0);
	VE_CHECK(ve_policy_args_error()[0] == 0);
	ve_coord_destroy(c);
}

/* tpot in grant mode: a busy latency client keeps its reservation and grows
 * past it only under deadline pressure (a latency op finished late, or one
 * waits with less than half a TPOT left); grow=0 grows whenever it is active
 * (a continuously decoding server then took all but batch_min SMs: ve-sim
 * llm-serving aggregate 0.35, prefill starved). */
static uint32_t tpot_lat_sms(const char *args, uint32_t flags, uint64_t deadline_ns)
{
	struct grant_fix f;
	grant_fix_init(&f, "tpot", args);
	f.v.now_ns = 1000000000ull;
	f.dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
					     .active_ns = f.v.now_ns, .entry = VE_POOL_NONE};
	f.dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
					     .active_ns = f.v.now_ns, .entry = VE_POOL_NONE,
					     .deadline_ns = deadline_ns,
					     .flags = VE_DEMAND_LATENCY | flags};
	grant_fix_round(&f);
	uint32_t sms = grant_fix_split_sms(&f, 1);
	grant_fix_fini(&f);
	return sms;
}

VE_TEST(tpot_grant_grows_past_the_reservation_only_under_pressure)
{
	VE_CHECK_EQ(tpot_lat_sms("tpot_ms=10,adapt=0", 0, 0), 16);
	VE_CHECK(tpot_lat_sms("tpot_ms=10,adapt=0", VE_DEMAND_LATE, 0) > 64);
	/* An op waiting with 2 ms left of a 10 ms TPOT; with 8 ms left, none. */
	VE_CHECK(tpot_lat_sms("tpot_ms=10,adapt=0", 0, 1000000000ull + 2000000ull) > 64);
	VE_CHECK_EQ(tpot_lat_sms("tpot_ms=10,adapt=0", 0, 1000000000ull + 8000000ull), 16);
	VE_CHECK(tpot_lat_sms("tpot_ms=10,grow=0", 0, 0) > 64);
	VE_CHECK(tpot_lat_sms("tpot_ms=10", VE_DEMAND_LATE, 0) > 64); /* adapt=0 is the default */
	/* adapt=1: a late op with nothing in effect yet changes nothing. */
	VE_CHECK_EQ(tpot_lat_sms("tpot_ms=10,adapt=1", VE_DEMAND_LATE, 0), 16);
	knob_refused("tpot", "grow=2");
	knob_refused("tpot", "adapt=2");
	knob_refused("tpot", "adapt_down_ms=0");
}

/* A client whose every launch needs the whole GPU (a graph whose cluster
 * kernels the driver could not place smaller, a cooperative grid as wide as
 * the GPU) beside a busy client that always has work ready. Here, as in the
 * coordinator, a target takes effect only once the SMs it takes from others
 * have drained (DRAIN rounds after they were revoked). The whole-GPU client's
 * target must survive until then: on the H200 the busy client's waiting
 * demand won MinBind on the next tick, took a leaf of that target, and the
 * other client's graphs each waited 10 s for the watchdog (0 requests
 * served in a run). It is then served within a bounded number of ticks. */
VE_TEST(tput_grant_whole_gpu_client_not_starved_by_a_busy_one)
{
	enum { DRAIN = 5, ROUNDS = 60 };
	struct grant_fix f;
	grant_fix_init(&f, "tput", NULL);
	const struct ve_pool *p = f.p;
	uint16_t held[2] = {p->root, VE_POOL_NONE};
	int drain_until[64] = {0}; /* per leaf bit: round until which it drains */
	f.dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
					     .min_sms = 8};
	f.dem[1] = (struct ve_client_demand){.ready = 1, .want_sms = 132, .min_sms = 132};
	f.plan.entry[0] = p->root;
	int served = -1;
	for (int r = 1; r <= ROUNDS && served < 0; r++) {
		f.v.now_ns = 1000000000ull + (uint64_t)r * 200000ull;
		for (int k = 0; k < 2; k++) {
			f.dem[k].active_ns = f.v.now_ns;
			f.dem[k].entry = held[k];
			bool fits = held[k] != VE_POOL_NONE && p->e[held[k]].sms >= f.dem[k].min_sms;
			f.dem[k].flags = fits ? 0 : VE_DEMAND_WAITING;
		}
		grant_fix_round(&f);
		/* Revoke what is not inside the new target: it drains. */
		for (int k = 0; k < 2; k++) {
			uint16_t t = f.plan.entry[k];
			if (held[k] == VE_POOL_NONE || t == held[k])
				continue;
			uint64_t hl = p->e[held[k]].leaves;
			if (t != VE_POOL_NONE && (p->e[t].leaves & hl) == hl)
				continue; /* growth: kept until the wider entry is free */
			for (int b = 0; b < 64; b++)
				if (hl >> b & 1)
					drain_until[b] = r + DRAIN;
			held[k] = VE_POOL_NONE;
		}
		/* Admit a target whose SMs nobody else holds or drains. */
		for (int k = 0; k < 2; k++) {
			uint16_t t = f.plan.entry[k];
			if (t == VE_POOL_NONE || t == held[k])
				continue;
			uint64_t tl = p->e[t].leaves, busy = 0;
			if (held[1 - k] != VE_POOL_NONE)
				busy |= p->e[held[1 - k]].leaves;
			for (int b = 0; b < 64; b++)
				if (drain_until[b] > r && !(held[k] != VE_POOL_NONE &&
							    (p->e[held[k]].leaves >> b & 1)))
					busy |= 1ull << b;
			if (!(tl & busy))
				held[k] = t;
		}
		if (getenv("VETEST_VERBOSE"))
			printf("# round %d: targets %d %d, held %d %d\n", r, (int)f.plan.entry[0],
			       (int)f.plan.entry[1], (int)held[0], (int)held[1]);
		if (held[1] == p->root)
			served = r;
	}
	if (served < 0)
		printf("# the whole-GPU client was not served in %d ticks\n", ROUNDS);
	VE_CHECK(served > 0 && served <= 2 * DRAIN + 2);
	grant_fix_fini(&f);
}

/* tpot's learned size (adapt=1, not the default): a late op raises the
 * latency client's grant one step of the tree above its reservation, once
 * the last size is in effect and has run grow_hold_ms (a raise before the
 * wider grant drained in would not have been tried); it stays there while
 * nothing is late, goes down a step after adapt_down_ms without a late op,
 * and never grows past what the client's kernels can use. (A GPU-bound decode server on the H200 stayed late on its
 * 32-SM reservation: TPOT 3.3 ms against 2.77.) */
VE_TEST(tpot_grant_learns_the_size_that_meets_the_deadline)
{
	struct grant_fix f;
	grant_fix_init(&f, "tpot", "reserve=16,adapt=1,grow_hold_ms=50,adapt_down_ms=1000");
	const uint64_t t0 = 1000000000ull, ms = 1000000ull;
	f.dem[0] = (struct ve_client_demand){.ready = 4, .inflight = 8, .want_sms = 132,
					     .entry = VE_POOL_NONE};
	f.dem[1] = (struct ve_client_demand){.ready = 1, .inflight = 1, .want_sms = 132,
					     .entry = VE_POOL_NONE, .flags = VE_DEMAND_LATENCY};
	/* The sizes of the entries that contain the reservation, ascending: the
	 * steps (the reservation is first). */
	f.v.now_ns = t0;
	grant_fix_round(&f);
	uint16_t res = f.plan.entry[1];
	VE_CHECK(res != VE_POOL_NONE);
	uint32_t chain[8], nc = 0;
	for (uint32_t i = 0; i < f.p->nentries && nc < 8; i++) {
		const struct ve_pool_entry *pe = &f.p->e[f.p->by_size[i]];
		if ((pe->leaves & f.p->e[res].leaves) == f.p->e[res].leaves &&
		    (!nc || pe->sms > chain[nc - 1]))
			chain[nc++] = pe->sms;
	}
	VE_CHECK(nc >= 4 && chain[0] == 16);
	/* at_ms, late, the expected step, and whether the grant then takes
	 * effect (its SMs drained to the client) before the next round. */
	static const struct {
		uint64_t at_ms;
		bool late;
		uint32_t step;
		bool admit;
	} steps[] = {
	    {1, false, 0, true},     /* the reservation, granted */
	    {30, true, 0, true},     /* late; seen in effect from here, not for grow_hold_ms */
	    {85, true, 1, false},    /* late: one step, which waits for a drain */
	    {200, true, 1, true},    /* late again, the step not in effect: no raise */
	    {220, true, 1, true},    /* in effect, but not for grow_hold_ms yet */
	    {275, true, 2, true},    /* still late after it: another step */
	    {300, false, 2, true},   /* on time: it stays */
	    {1200, false, 2, true},  /* ... for adapt_down_ms */
	    {1280, false, 1, true},  /* then one step down */
	    {1700, false, 1, true},  /* not before another adapt_down_ms */
	    {2290, false, 0, true},  /* down to the reservation, not below */
	    {4000, false, 0, true},
	};
	for (size_t i = 0; i < VE_ARRAY_SIZE(steps); i++) {
		f.v.now_ns = t0 + steps[i].at_ms * ms;
		f.dem[0].active_ns = f.dem[1].active_ns = f.v.now_ns;
		f.dem[1].flags = VE_DEMAND_LATENCY | (steps[i].late ? VE_DEMAND_LATE : 0);
		grant_fix_round(&f);
		if (steps[i].admit)
			f.dem[1].entry = f.plan.entry[1];
		uint32_t got = grant_fix_split_sms(&f, 1);
		if (got != chain[steps[i].step])
			printf("# step %zu (%llu ms): %u SMs, want %u\n", i,
			       (unsigned long long)steps[i].at_ms, got, chain[steps[i].step]);
		VE_CHECK_EQ(got, chain[steps[i].step]);
	}
	/* A client whose kernels fill a few SMs more than the reservation grows
	 * to the first size that holds them, and no further however late it is. */
	f.dem[1].want_sms = chain[0] + 2;
	for (int i = 0; i < 4; i++) {
		f.v.now_ns += 100 * ms;
		f.dem[0].active_ns = f.dem[1].active_ns = f.v.now_ns;
		f.dem[1].flags = VE_DEMAND_LATENCY | VE_DEMAND_LATE;
		grant_fix_round(&f);
		f.dem[1].entry = f.plan.entry[1];
	}
	VE_CHECK_EQ(grant_fix_split_sms(&f, 1), chain[1]);
	grant_fix_fini(&f);
}

/* Auto sharing (tput share=2) switches only after its test has said
 * otherwise for share_hold_ms: two dense jobs whose optimizer phases dip
 * under share_op_us for a moment stay shared (on the H200 the pair flipped
 * between shared and split grants ~2,500 times per process start, each a
 * drain). A sustained change switches; a latency-class client ends
 * sharing at once. */
VE_TEST(tput_grant_share_decision_holds_through_short_dips)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	struct ve_policy_view vv = *ve_coord_view(c);
	const struct ve_pool *p = vv.pool;
	const struct ve_policy_ops *ops = ve_policy_builtin("tput");
	void *priv = NULL;
	VE_CHECK_EQ(ops->init("share_hold_ms=50", &vv, &priv), 0);
	struct ve_client_demand dem[VE_POLICY_MAX_CLIENTS] = {{0}};
	struct ve_grant_plan plan;
	plan_clear(&plan);
	const uint64_t ms = 1000000;
	uint64_t t = 1000 * ms;
	/* Two clients of long kernels that fill the GPU. */
	for (int k = 0; k < 2; k++)
		dem[k] = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
						   .active_ns = t, .entry = VE_POOL_NONE,
						   .op_us = 3000};
#define ROUND(at)                                                                  \
	do {                                                                       \
		vv.now_ns = (at);                                                  \
		for (int k_ = 0; k_ < 2; k_++)                                     \
			dem[k_].active_ns = (at), dem[k_].entry = plan.entry[k_];  \
		VE_CHECK_EQ(ops->grant(priv, &vv, dem, &plan), 0);                 \
	} while (0)
	ROUND(t);
	VE_CHECK_EQ(plan.share[0], 0); /* not yet: the test must hold first */
	ROUND(t + 60 * ms);
	VE_CHECK_EQ(plan.entry[0], p->root);
	VE_CHECK_EQ(plan.entry[1], p->root);
	VE_CHECK(plan.share[0] && plan.share[1]);
	/* An optimizer phase: short kernels for 20 ms. Still shared. */
	dem[1].op_us = 40;
	ROUND(t + 70 * ms);
	ROUND(t + 90 * ms);
	VE_CHECK(plan.share[0] && plan.share[1]);
	dem[1].op_us = 3000;
	ROUND(t + 95 * ms);
	VE_CHECK(plan.share[0] && plan.share[1]);
	/* Sustained short kernels (a launch-bound phase): split after the hold. */
	dem[1].op_us = 40;
	dem[1].want_sms = 16;
	ROUND(t + 100 * ms);
	VE_CHECK(plan.share[1]);
	ROUND(t + 160 * ms);
	VE_CHECK_EQ(plan.share[0], 0);
	VE_CHECK_EQ(plan.share[1], 0);
	VE_CHECK_EQ(p->e[plan.entry[0]].leaves & p->e[plan.entry[1]].leaves, 0);
	/* Back to long kernels for the hold: shared again. */
	dem[1].op_us = 3000;
	dem[1].want_sms = 132;
	ROUND(t + 200 * ms);
	ROUND(t + 260 * ms);
	VE_CHECK(plan.share[0] && plan.share[1]);
	/* A latency-class client: split at once. */
	dem[1].flags = VE_DEMAND_LATENCY;
	ROUND(t + 261 * ms);
	VE_CHECK_EQ(plan.share[0], 0);
	VE_CHECK_EQ(plan.share[1], 0);
#undef ROUND
	ops->fini(priv);
	ve_coord_destroy(c);
}

/* A pair that shares from the start (both busy) and then one of them
 * takes host phases of 15 ms between GPU phases of 8 ms: it leaves the
 * plan in each host phase (idle past its hold). Sharing must still end
 * once the test has said 'split' for share_hold_ms of the pair's time: the
 * clock used to restart whenever fewer than two clients were active, so
 * the share never ended (through ved the pair never took turns). */
VE_TEST(tput_grant_share_ends_though_a_client_leaves_in_its_gaps)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", "");
	const uint64_t us = 1000, t0 = 1000000 * us;
	uint64_t last0 = t0;
	bool shared_at_first = false;
	for (uint64_t t = t0; t < t0 + 1000000 * us; t += 200 * us) {
		f.v.now_ns = t;
		/* Both busy for 100 ms, then client 0 busy 8 of every 23 ms. */
		bool busy0 = t < t0 + 100000 * us || (t - t0) % (23000 * us) < 8000 * us;
		if (busy0)
			last0 = t;
		f.dem[0] = (struct ve_client_demand){.inflight = busy0, .want_sms = 132,
						     .active_ns = last0, .entry = f.plan.entry[0],
						     .op_us = 2000};
		f.dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
						     .active_ns = t, .entry = f.plan.entry[1],
						     .op_us = 2000};
		grant_fix_round(&f);
		if (t == t0 + 99800 * us)
			shared_at_first = f.plan.share[1] & VE_GRANT_SHARE;
	}
	VE_CHECK(shared_at_first);
	VE_CHECK_MSG(!(f.plan.share[1] & VE_GRANT_SHARE), "still shared after 900 ms of host phases");
	grant_fix_fini(&f);
}

/* Duty weighting: a client with host phases (busy part of the time) and a
 * client busy all the time, both wanting the whole GPU. While both run, the
 * one with gaps gets the larger part, so its GPU phases end sooner and more
 * of its host time overlaps the other's kernels; with prio=0 (equal weights)
 * the split is even. Sampled at 1 ms ticks for 1 s: the part-time client has
 * work in 6 of every 10 ticks. */
static uint32_t duty_split_sms(const char *args, bool latency, uint32_t *other)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", args);
	const uint64_t ms = 1000000;
	uint64_t last_busy = 0;
	for (uint64_t i = 1; i <= 1000; i++) {
		f.v.now_ns = i * ms;
		bool busy = i % 10 < 6;
		/* active_ns: its last work, as the dispatcher reports it. */
		if (busy)
			last_busy = f.v.now_ns;
		f.dem[0] = (struct ve_client_demand){.ready = busy, .inflight = busy ? 4 : 0,
						     .want_sms = 132, .active_ns = last_busy,
						     .entry = f.plan.entry[0], .op_us = 100};
		f.dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
						     .active_ns = f.v.now_ns, .entry = f.plan.entry[1],
						     .op_us = 100,
						     .flags = latency ? VE_DEMAND_LATENCY : 0};
		grant_fix_round(&f);
	}
	/* Both wanting SMs now, the part-time one waiting: a fresh decision. */
	f.v.now_ns += ms;
	f.dem[0].ready = 1;
	f.dem[0].flags = VE_DEMAND_WAITING;
	f.dem[0].entry = VE_POOL_NONE;
	f.plan.entry[0] = VE_POOL_NONE;
	grant_fix_round(&f);
	uint32_t sms = grant_fix_split_sms(&f, 0);
	*other = grant_fix_split_sms(&f, 1);
	grant_fix_fini(&f);
	return sms;
}

VE_TEST(tput_grant_part_time_client_gets_the_larger_part)
{
	/* Splits, as without turns (both clients' kernels fill the GPU and
	 * run 100 us: turns would take them, tput_grant_wide_clients_*). */
	uint32_t other = 0;
	uint32_t even = duty_split_sms("prio=0,turns=0", false, &other);
	VE_CHECK(even <= other + 4 && other <= even + 4);
	uint32_t weighted = duty_split_sms("turns=0", false, &other);
	VE_CHECK_MSG(weighted >= 96 && other <= 36, "part-time %u SMs, full-time %u", weighted,
		     other);
	/* Beside a latency client, no weights: the batch client with gaps took
	 * the decode server's SMs (ve-sim llm-serving, TPOT violations 1% ->
	 * 40%). */
	even = duty_split_sms("turns=0", true, &other);
	VE_CHECK_MSG(even <= other + 4 && other <= even + 4, "batch %u SMs, latency %u", even,
		     other);
	/* Knob values are checked. */
	knob_refused("tput", "prio=-1");
	knob_refused("tput", "duty_ms=0");
}

/* Auto sharing between two clients of long kernels that fill the GPU, each
 * a loop of busy_us then gap_us (client 1 half a period later), for 1 s.
 * Ticks every 200 us, or (at_ends) at the end of each client's busy part,
 * when that client is idle for an instant, and 1 ms after the last tick
 * at the latest: as ve-sim runs the runtime at events (a kernel's end), as
 * ved runs at a client's report, and as any ticks that fall in a loop's
 * short gaps more often than their share. Their kernels run op_us on
 * average. Returns whether both ended shared. */
static bool loops_share(uint64_t busy_us, uint64_t gap_us, uint16_t op_us, bool at_ends)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", "");
	const uint64_t us = 1000, period = (busy_us + gap_us) * us;
	uint64_t t = 1000000 * us, end = t + 1000000 * us, next[2] = {t + busy_us * us,
								      t + period / 2 + busy_us * us};
	while (t < end) {
		if (at_ends) {
			uint32_t k = next[0] <= next[1] ? 0 : 1;
			if (next[k] > t + 1000 * us) {
				t += 1000 * us;
			} else {
				t = next[k];
				next[k] += period;
			}
		} else {
			t += 200 * us;
		}
		f.v.now_ns = t;
		for (uint32_t k = 0; k < 2; k++) {
			uint64_t phase = (t - 1000000 * us + (k ? period / 2 : 0)) % period;
			bool busy = phase < busy_us * us;
			f.dem[k] = (struct ve_client_demand){
			    .ready = 0, .inflight = busy, .want_sms = 132,
			    /* its last work, as the dispatcher reports it */
			    .active_ns = busy ? t : t - (phase - busy_us * us),
			    .entry = f.plan.entry[k], .op_us = op_us};
		}
		grant_fix_round(&f);
	}
	bool shared = (f.plan.share[0] & VE_GRANT_SHARE) && (f.plan.share[1] & VE_GRANT_SHARE) &&
		      f.plan.entry[0] == f.p->root && f.plan.entry[1] == f.p->root;
	grant_fix_fini(&f);
	return shared;
}

VE_TEST(tput_grant_shares_loops_that_read_back_every_step)
{
	/* Two decode loops replaying a graph of ~300 us and reading the
	 * token back (a 40 us gap): on the H200 a split of such a pair ran at
	 * 0.68x of sharing. Busy 88% of the time, in gaps far shorter than
	 * any hand-over: shared, whenever the ticks come. Counting busy ticks
	 * instead, neither way shared (88% < share_duty; 0% at the ends). */
	VE_CHECK(loops_share(290, 40, 290, false));
	VE_CHECK(loops_share(290, 40, 290, true));
	/* Host phases of 15 ms in 33 ms steps (kernels of 1 ms): each side's
	 * GPU phase runs sooner on SMs of its own (or by turns); never
	 * shared. */
	VE_CHECK(!loops_share(18000, 15000, 1000, false));
	VE_CHECK(!loops_share(18000, 15000, 1000, true));
}

/* A tick at now_ns of a job with host phases (client 0, busy or not now;
 * *last_busy its last busy tick) beside an always-busy one (client 1), both
 * wanting the whole GPU, each on the entry of its last plan. */
static void periodic_pair_round(struct grant_fix *f, uint64_t now_ns, bool busy,
				uint64_t *last_busy)
{
	f->v.now_ns = now_ns;
	if (busy)
		*last_busy = now_ns;
	f->dem[0] = (struct ve_client_demand){.ready = busy, .inflight = busy, .want_sms = 132,
					      .active_ns = *last_busy, .entry = f->plan.entry[0],
					      .op_us = 100,
					      .flags = busy && f->plan.entry[0] == VE_POOL_NONE
							   ? VE_DEMAND_WAITING
							   : 0};
	f->dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
					      .active_ns = now_ns, .entry = f->plan.entry[1],
					      .op_us = 100};
	grant_fix_round(f);
}

/* The hold after a batch client's last work: idle_ms (10) while its gaps are
 * short, idle_short_ms (2) once they usually outlast idle_ms (host phases),
 * so a partner gets the SMs early. Client 0 runs busy_ms, idles gap_ms, over
 * and over, beside an always-busy client 1; returns whether client 0 still
 * holds a grant 5 ms after its last busy tick. */
static bool holds_5ms_into_gap(const char *args, uint64_t busy_ms, uint64_t gap_ms)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", args);
	const uint64_t ms = 1000000;
	uint64_t period = busy_ms + gap_ms, last_busy = 0, t = 0;
	bool held = false;
	for (uint64_t i = 1; i <= 20 * period + busy_ms + 4; i++) {
		t = i * ms;
		periodic_pair_round(&f, t, (i % period) < busy_ms, &last_busy);
		held = f.plan.entry[0] != VE_POOL_NONE;
	}
	/* The loop ended 5 ms after the last busy tick (i = 20 periods + busy_ms + 4). */
	VE_CHECK(t - last_busy == 5 * ms);
	grant_fix_fini(&f);
	return held;
}

VE_TEST(tput_grant_hold_short_for_clients_with_long_gaps)
{
	/* The holds of split grants (turns off: with them, these two clients
	 * would take turns, tput_grant_wide_clients_*). Host phases of 15 ms:
	 * the SMs go back 2 ms into a gap. */
	VE_CHECK(!holds_5ms_into_gap("turns=0", 20, 15));
	/* The same with the short hold off (idle_short_ms = idle_ms). */
	VE_CHECK(holds_5ms_into_gap("idle_short_ms=10,turns=0", 20, 15));
	/* Gaps of 6 ms (shorter than idle_ms): held through them. */
	VE_CHECK(holds_5ms_into_gap("turns=0", 20, 6));
	/* Host phases of 250 ms, longer than duty_ms: still a job's gaps (a
	 * restart of its history at each one kept the 10 ms hold). */
	VE_CHECK(holds_5ms_into_gap("", 100, 250) == false);
}

/* A job whose host phases all outlast duty_ms (100 ms busy, 300 ms away,
 * over and over) beside an always-busy one keeps the weight of its low duty
 * (1 + prio (1 - duty), ~1.7 here) while it runs: a restart of its history
 * at each return from such a gap made it 1.0. */
VE_TEST(tput_grant_long_host_phases_keep_their_weight)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", "");
	const uint64_t ms = 1000000, period = 400;
	uint64_t last_busy = 0;
	double sum = 0;
	uint32_t n = 0;
	for (uint64_t i = 1; i <= 6 * period; i++) {
		bool busy = (i % period) < 100;
		periodic_pair_round(&f, i * ms, busy, &last_busy);
		if (busy && i > 3 * period) {
			sum += ve__tput_weight(f.priv, 0);
			n++;
		}
	}
	VE_CHECK_MSG(n && sum / n > 1.3, "mean weight %.2f of the job with host phases", n ? sum / n : 0);
	grant_fix_fini(&f);
}

/* Turns: two clients whose kernels are long and fill the GPU, one with host
 * phases (busy 6 ms of every 10), one busy all the time (1 ms kernels).
 * Once the part-time client's share of time away is known (at least
 * 1 - turn_duty), it gets the whole GPU while it has work and the other
 * client none; from the first tick of its gap (the hand-over point: the
 * partner's 1 ms kernel, more than turn_idle_ms) the other gets it. Counts,
 * over the last 200 ticks of 1 s at 1 ms ticks, the ticks in which the plan
 * was a split (both granted) and those in which the holder's gap was not
 * handed on. */
struct turn_run {
	uint32_t split, turns_busy, turns_gap, wrong;
	uint32_t narrow_moves; /* with a narrow third client: ticks its grant changed or was none */
};

/* lag: a grant takes effect a tick after the plan names it (its SMs
 * drain meanwhile), so a target in transition is planned as one. */
static struct turn_run run_turns_n(const char *args, bool latency, bool narrow, bool lag)
{
	struct grant_fix f;
	grant_fix_init_n(&f, "tput", args, narrow ? 3 : 2);
	const uint64_t ms = 1000000;
	struct turn_run r = {0};
	uint64_t last_busy = 0;
	uint16_t eff[3] = {VE_POOL_NONE, VE_POOL_NONE, VE_POOL_NONE};
	for (uint64_t i = 1; i <= 1000; i++) {
		uint16_t planned[3] = {f.plan.entry[0], f.plan.entry[1], f.plan.entry[2]};
		f.v.now_ns = i * ms;
		bool busy = i % 10 < 6;
		if (busy)
			last_busy = f.v.now_ns;
		f.dem[0] = (struct ve_client_demand){
		    .ready = busy, .inflight = busy ? 2 : 0, .want_sms = busy ? 132 : 16,
		    .active_ns = last_busy, .entry = lag ? eff[0] : f.plan.entry[0], .op_us = 450,
		    .flags = busy && (lag ? eff[0] : f.plan.entry[0]) == VE_POOL_NONE
				     ? VE_DEMAND_WAITING
				     : 0};
		f.dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 2, .want_sms = 132,
						     .active_ns = f.v.now_ns,
						     .entry = lag ? eff[1] : f.plan.entry[1],
						     .op_us = 1000,
						     .flags = latency ? VE_DEMAND_LATENCY : 0};
		/* A launch-bound client of small kernels (8 SMs' worth). */
		uint16_t e2_was = f.plan.entry[2];
		if (narrow)
			f.dem[2] = (struct ve_client_demand){.ready = 1, .inflight = 1, .want_sms = 8,
							     .active_ns = f.v.now_ns,
							     .entry = lag ? eff[2] : f.plan.entry[2],
							     .op_us = 10};
		grant_fix_round(&f);
		memcpy(eff, planned, sizeof(eff));
		if (i <= 800)
			continue;
		uint16_t e0 = f.plan.entry[0], e1 = f.plan.entry[1], e2 = f.plan.entry[2];
		if (narrow) {
			r.narrow_moves += e2 == VE_POOL_NONE || e2 != e2_was;
			/* Its SMs are its own: never inside the turn's entry. */
			uint64_t l2 = e2 != VE_POOL_NONE ? f.p->e[e2].leaves : 0;
			if ((e0 != VE_POOL_NONE && (f.p->e[e0].leaves & l2)) ||
			    (e1 != VE_POOL_NONE && (f.p->e[e1].leaves & l2)))
				r.wrong++;
		}
		uint16_t whole = narrow && e2 != VE_POOL_NONE ? f.p->e[e2].remainder : f.p->root;
		if (e0 != VE_POOL_NONE && e1 != VE_POOL_NONE)
			r.split++;
		else if (busy && e0 == whole && e1 == VE_POOL_NONE)
			r.turns_busy++;
		else if (!busy && e1 == whole && e0 == VE_POOL_NONE)
			r.turns_gap++;
		else
			r.wrong++;
	}
	grant_fix_fini(&f);
	return r;
}

static struct turn_run run_turns(const char *args, bool latency)
{
	return run_turns_n(args, latency, false, false);
}

VE_TEST(tput_grant_wide_clients_take_turns_part_time_first)
{
	struct turn_run r = run_turns("", false);
	VE_CHECK_MSG(r.split == 0 && r.wrong == 0 && r.turns_busy == 120 && r.turns_gap == 80,
		     "split %u, busy turns %u, gap turns %u, other %u", r.split, r.turns_busy,
		     r.turns_gap, r.wrong);
	/* Off, or the part-time client busy more than turn_duty of the time:
	 * the SMs are split while both have work, as before turns. */
	r = run_turns("turns=0", false);
	VE_CHECK_MSG(r.split >= 100 && r.turns_busy == 0, "split %u, busy turns %u", r.split,
		     r.turns_busy);
	r = run_turns("turn_duty=0.5", false);
	VE_CHECK_MSG(r.split >= 100 && r.turns_busy == 0, "split %u, busy turns %u", r.split,
		     r.turns_busy);
	/* Beside a latency client: no turns (its SMs are tpot's business). */
	r = run_turns("", true);
	VE_CHECK_EQ(r.turns_busy, 0);
	/* A longer hold keeps the GPU idle into the gap: handed on later (and
	 * the holder is away less of the time: 0.2, so turn_duty 0.9). */
	r = run_turns("turn_idle_ms=1.5,turn_duty=0.9", false);
	VE_CHECK_MSG(r.turns_gap == 60 && r.turns_busy == 120 && r.wrong == 20,
		     "busy turns %u, gap turns %u, held idle %u", r.turns_busy, r.turns_gap, r.wrong);
	/* A client of narrow kernels beside them keeps its own leaf all along;
	 * the turns take everything else (the leaf's remainder entry). */
	r = run_turns_n("", false, true, false);
	VE_CHECK_MSG(r.split == 0 && r.wrong == 0 && r.turns_busy == 120 && r.turns_gap == 80 &&
			     r.narrow_moves == 0,
		     "split %u, busy turns %u, gap turns %u, other %u, narrow moved %u", r.split,
		     r.turns_busy, r.turns_gap, r.wrong, r.narrow_moves);
	/* ... also while grants take a tick to take effect: a holder waiting
	 * for its SMs is still the holder (its partner gets none of them, the
	 * narrow client keeps its own). */
	r = run_turns_n("", false, true, true);
	VE_CHECK_MSG(r.split == 0 && r.wrong == 0 && r.turns_busy >= 100 && r.turns_gap >= 60 &&
			     r.narrow_moves == 0,
		     "lag: split %u, busy turns %u, gap turns %u, other %u, narrow moved %u",
		     r.split, r.turns_busy, r.turns_gap, r.wrong, r.narrow_moves);
	knob_refused("tput", "turns=2");
	knob_refused("tput", "turn_duty=1.5");
	knob_refused("tput", "turn_idle_ms=-1");
	knob_refused("tput", "turn_op_us=-5");
}

/* A client slot taken by a new client between two ticks (the view never
 * shows it inactive): the newcomer starts afresh, it does not inherit the
 * last one's gaps and with them its turn. Here a turn holder with host
 * phases leaves and a dense job takes its slot at once: the partner, busy
 * all along, gets SMs within a few ticks (it waited 82 ms, until the
 * inherited share of time away decayed, when the policy looked for a new
 * client in its completion count, which ved does not keep for grants). */
VE_TEST(tput_grant_forgets_a_client_whose_slot_is_taken)
{
	const char *pols[] = {"tput", "tpot"};
	for (int pi = 0; pi < 2; pi++) {
		struct grant_fix f;
		grant_fix_init(&f, pols[pi], "");
		const uint64_t ms = 1000000;
		uint64_t last_busy = 0, turns = 0;
		int64_t waited = -1;
		for (uint64_t i = 1; i <= 1200; i++) {
			f.v.now_ns = i * ms;
			bool reborn = i > 1000;
			if (i == 1001) {
				/* What the coordinator tells a policy that listens. */
				struct ve_policy_event ev = {.kind = VE_PEV_CLIENT_REMOVED, .client = 0};
				if (f.ops->notify) {
					f.ops->notify(f.priv, &f.v, &ev);
					ev.kind = VE_PEV_CLIENT_ADDED;
					f.ops->notify(f.priv, &f.v, &ev);
				}
				f.plan.entry[0] = VE_POOL_NONE;
			}
			bool busy = reborn || i % 10 < 6;
			if (busy)
				last_busy = f.v.now_ns;
			f.dem[0] = (struct ve_client_demand){
			    .ready = busy, .inflight = busy ? 2 : 0, .want_sms = busy ? 132 : 16,
			    .active_ns = last_busy, .entry = f.plan.entry[0], .op_us = 450,
			    .flags = busy && f.plan.entry[0] == VE_POOL_NONE ? VE_DEMAND_WAITING : 0};
			f.dem[1] = (struct ve_client_demand){.ready = 2, .inflight = 2,
							     .want_sms = 132,
							     .active_ns = f.v.now_ns,
							     .entry = f.plan.entry[1],
							     .op_us = 1000};
			grant_fix_round(&f);
			if (i > 800 && i <= 1000)
				turns += busy && f.plan.entry[0] == f.p->root &&
					 f.plan.entry[1] == VE_POOL_NONE;
			if (reborn && waited < 0 && f.plan.entry[1] != VE_POOL_NONE)
				waited = (int64_t)(i - 1001);
		}
		VE_CHECK_MSG(turns == 120, "%s: %llu busy turns before", pols[pi],
			     (unsigned long long)turns);
		VE_CHECK_MSG(waited >= 0 && waited <= 5,
			     "%s: the partner waited %lld ms for SMs after the slot was taken",
			     pols[pi], (long long)waited);
		grant_fix_fini(&f);
	}
}

/* A client whose kernels want the whole GPU, at now_ns: busy (work ready,
 * two in flight once its grant is in effect) or not; *last its last busy
 * time; eff the grant in effect. */
static struct ve_client_demand wide_demand(bool busy, uint64_t now_ns, uint64_t *last,
					   uint16_t eff, uint32_t op_us)
{
	if (busy)
		*last = now_ns;
	return (struct ve_client_demand){
	    .ready = busy, .inflight = busy && eff != VE_POOL_NONE ? 2 : 0, .want_sms = 132,
	    .active_ns = *last, .entry = eff, .op_us = op_us,
	    .flags = busy && eff == VE_POOL_NONE ? VE_DEMAND_WAITING : 0};
}

/* A progress model of two wide clients (kernels fill the GPU, 1 ms each)
 * under the grants: client k needs gpu_ms of whole-GPU time per step (less
 * SMs, proportionally longer), then host_ms on the host; a grant takes
 * effect a tick (0.2 ms) after the plan names it. Steps of each in 10 s.
 * From stop_ms on (0: never) client 0 has no host phases any more; then
 * *starved_ms is the longest time client 1 had work and no SMs. */
static void turn_progress_to(const char *args, const double *gpu_ms, const double *host_ms,
			     uint32_t *steps, double stop_ms, double *starved_ms)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", args);
	const double tick_ms = 0.2;
	double left[2] = {gpu_ms[0], gpu_ms[1]}, host[2] = {0, 0}, starved = 0;
	uint64_t last[2] = {0, 0};
	uint16_t eff[2] = {VE_POOL_NONE, VE_POOL_NONE};
	steps[0] = steps[1] = 0;
	if (starved_ms)
		*starved_ms = 0;
	for (uint64_t i = 1; i <= 50000; i++) {
		f.v.now_ns = i * 200000;
		bool stopped = stop_ms > 0 && i * tick_ms >= stop_ms;
		for (int k = 0; k < 2; k++) {
			f.dem[k] = wide_demand(host[k] <= 0, f.v.now_ns, &last[k], eff[k], 1000);
		}
		grant_fix_round(&f);
		if (stopped && starved_ms) {
			starved = host[1] <= 0 && eff[1] == VE_POOL_NONE ? starved + tick_ms : 0;
			*starved_ms = VE_MAX(*starved_ms, starved);
		}
		for (int k = 0; k < 2; k++) {
			if (host[k] > 0) {
				host[k] -= tick_ms;
				continue;
			}
			if (eff[k] != VE_POOL_NONE)
				left[k] -= tick_ms * f.p->e[eff[k]].sms / 132.0;
			if (left[k] <= 1e-9) {
				steps[k]++;
				left[k] = gpu_ms[k];
				host[k] = k == 0 && stopped ? 0 : host_ms[k];
			}
			eff[k] = f.plan.entry[k];
		}
	}
	grant_fix_fini(&f);
}

static void turn_progress(const char *args, const double *gpu_ms, const double *host_ms,
			  uint32_t *steps)
{
	turn_progress_to(args, gpu_ms, host_ms, steps, 0, NULL);
}

/* Turns never leave a wide client without SMs for good: a partner whose
 * gaps are shorter than turn_idle_ms (busy 0.5 ms, 0.3 ms idle, duty 0.6)
 * starts no turns (it would never leave the GPU); two alike jobs with
 * host phases alternate, neither runs first all the time; and a job with
 * long host phases beside a dense one still gets its turns. */
VE_TEST(tput_grant_turns_leave_no_wide_client_starved)
{
	uint32_t on[2], off[2];
	double g_short[2] = {0.5, 30}, h_short[2] = {0.3, 0};
	turn_progress("", g_short, h_short, on);
	turn_progress("turns=0", g_short, h_short, off);
	VE_CHECK_MSG(on[1] * 10 >= off[1] * 9, "dense partner: %u steps with turns, %u without",
		     on[1], off[1]);
	double g_sym[2] = {3, 3}, h_sym[2] = {3, 3};
	turn_progress("", g_sym, h_sym, on);
	turn_progress("turns=0", g_sym, h_sym, off);
	VE_CHECK_MSG(on[0] * 10 <= on[1] * 13 && on[1] * 10 <= on[0] * 13,
		     "alike jobs: %u and %u steps", on[0], on[1]);
	VE_CHECK_MSG(on[0] + on[1] >= off[0] + off[1], "alike jobs: %u+%u with turns, %u+%u without",
		     on[0], on[1], off[0], off[1]);
	double g_hp[2] = {3, 30}, h_hp[2] = {3, 0};
	turn_progress("", g_hp, h_hp, on);
	turn_progress("turns=0", g_hp, h_hp, off);
	VE_CHECK_MSG(on[0] > off[0] && on[0] * 30.0 / 10 + on[1] * 30.0 / 10 >
					 off[0] * 30.0 / 10 + off[1] * 30.0 / 10,
		     "host-phase job %u (%u without turns), dense %u (%u)", on[0], off[0], on[1],
		     off[1]);
}

/* A turn holder whose gaps stop (an evaluation phase, a data loader that
 * caught up) hands the GPU on within about two of its usual runs (3 ms
 * here): its partner, busy all along, waited 104 ms for the holder's share
 * of time away to decay. Before the change, turns as usual. */
VE_TEST(tput_grant_turns_end_when_the_holder_stops_leaving)
{
	uint32_t steps[2];
	double starved, g[2] = {3, 30}, h[2] = {3, 0};
	turn_progress_to("", g, h, steps, 5000, &starved);
	VE_CHECK_MSG(starved <= 12, "the dense partner went %.1f ms without SMs", starved);
	/* Its steps after the stop: half the GPU or more (a split, or a
	 * share once the holder's time away has decayed). */
	VE_CHECK_MSG(steps[1] >= 5000 / 30 / 2 + 5000 / 30 / 2 * 9 / 10,
		     "dense partner: %u steps in 10 s", steps[1]);
	uint32_t before[2];
	turn_progress("", g, h, before);
	VE_CHECK_MSG(steps[0] * 10 >= before[0] * 5, "host-phase job: %u steps, %u without the stop",
		     steps[0], before[0]);
}

/* Two decode servers (kernels of 450 us that want the whole GPU, always
 * busy) that ran a few steps, waited half a second for each other, and
 * start together: the wait is not a host phase. Their time away during it
 * started turns, one server held the whole GPU for a third of a second while
 * the other got nothing (the H200 decode pair: one server at 1,030 steps/s
 * and the other at 1,600 in its first second, 1,460 each after). Within a
 * few milliseconds both hold SMs, and each gets as many SM-seconds. */
VE_TEST(tput_grant_a_long_wait_starts_no_turns)
{
	struct grant_fix f;
	grant_fix_init(&f, "tput", "");
	uint16_t eff[2] = {VE_POOL_NONE, VE_POOL_NONE};
	uint64_t last[2] = {0, 0};
	double starved[2] = {0, 0}, worst = 0, sm_ms[2] = {0, 0};
	for (uint64_t i = 1; i <= 5250; i++) { /* 0.2 ms ticks: 1,050 ms */
		f.v.now_ns = i * 200000;
		bool run = i <= 250 || i > 2750; /* busy, idle 500 ms, busy */
		for (int k = 0; k < 2; k++) {
			bool busy = run && !(k == 0 && i == 2751); /* one starts a tick later */
			f.dem[k] = wide_demand(busy, f.v.now_ns, &last[k], eff[k], 450);
		}
		grant_fix_round(&f);
		for (int k = 0; k < 2; k++) {
			eff[k] = f.plan.entry[k];
			if (i <= 2760)
				continue; /* the first two milliseconds after the wait: hand-over */
			starved[k] = eff[k] == VE_POOL_NONE ? starved[k] + 0.2 : 0;
			worst = VE_MAX(worst, starved[k]);
			sm_ms[k] += eff[k] != VE_POOL_NONE ? f.p->e[eff[k]].sms * 0.2 : 0;
		}
	}
	VE_CHECK_MSG(worst <= 5, "a busy server went %.1f ms without SMs after the wait", worst);
	VE_CHECK_MSG(sm_ms[0] >= 0.8 * sm_ms[1] && sm_ms[1] >= 0.8 * sm_ms[0],
		     "SM-ms after the wait: %.0f and %.0f", sm_ms[0], sm_ms[1]);
	grant_fix_fini(&f);
}

/* tpot's reservation with two latency-class clients (two inference servers
 * beside a training job): they share it, the batch client runs outside it.
 * The second one got no grant at all: each of its ops waited for the
 * watchdog (10 s) and then ran on the whole GPU. */
VE_TEST(tpot_grant_a_second_latency_client_gets_sms)
{
	struct grant_fix f;
	grant_fix_init_n(&f, "tpot", "", 3);
	for (uint64_t i = 1; i <= 50; i++) {
		f.v.now_ns = i * 1000000;
		for (int k = 0; k < 3; k++)
			f.dem[k] = (struct ve_client_demand){.ready = 1, .inflight = 1, .want_sms = 66,
							     .active_ns = f.v.now_ns,
							     .entry = f.plan.entry[k], .op_us = 100,
							     .flags = k < 2 ? VE_DEMAND_LATENCY : 0};
		grant_fix_round(&f);
	}
	uint16_t e0 = f.plan.entry[0], e1 = f.plan.entry[1], e2 = f.plan.entry[2];
	VE_CHECK_MSG(e0 != VE_POOL_NONE && e1 != VE_POOL_NONE && e2 != VE_POOL_NONE,
		     "grants %d %d %d", e0, e1, e2);
	if (e0 != VE_POOL_NONE && e1 != VE_POOL_NONE && e2 != VE_POOL_NONE) {
		VE_CHECK_EQ(e0, e1);
		VE_CHECK((f.plan.share[0] & VE_GRANT_SHARE) && (f.plan.share[1] & VE_GRANT_SHARE));
		VE_CHECK_EQ(f.p->e[e0].leaves & f.p->e[e2].leaves, 0);
		VE_CHECK_EQ(f.plan.why[0], VE_WHY_RESERVED);
		VE_CHECK_EQ(f.plan.why[1], VE_WHY_RESERVED);
		VE_CHECK_EQ(f.plan.why[2], VE_WHY_SPLIT);
	}
	/* One latency client: its reservation, not shared (as before). */
	f.dem[1] = (struct ve_client_demand){.entry = VE_POOL_NONE};
	f.v.now_ns += 1000000;
	f.dem[1].flags = 0;
	grant_fix_round(&f);
	VE_CHECK_EQ(f.plan.share[0], 0);
	grant_fix_fini(&f);
}

/* Busy clients, each wanting want[k] SMs, with launches that need need[k]
 * SMs at least (a cooperative grid, cluster kernels sized as the GPU) and
 * kernels of op_us[k]; lat[k]: latency class. Grants take effect a tick
 * (0.2 ms) after the plan names them, on SMs no other client's grant in
 * effect holds. The longest any client had work and no grant it could run
 * it on, in 2 s. */
struct busy_mix {
	uint32_t n, want[4], need[4], op_us[4];
	bool lat[4];
};

static double busy_mix_wait_ms(const char *pol, const char *args, const struct busy_mix *m)
{
	struct grant_fix f;
	grant_fix_init_n(&f, pol, args, m->n);
	uint16_t eff[4] = {VE_POOL_NONE, VE_POOL_NONE, VE_POOL_NONE, VE_POOL_NONE};
	double wait[4] = {0, 0, 0, 0}, worst = 0;
	for (uint64_t i = 1; i <= 10000; i++) {
		f.v.now_ns = i * 200000;
		for (uint32_t k = 0; k < m->n; k++) {
			bool fits = eff[k] != VE_POOL_NONE && f.p->e[eff[k]].sms >= m->need[k];
			f.dem[k] = (struct ve_client_demand){
			    .ready = fits ? 0 : 2, .inflight = fits ? 2 : 0, .want_sms = m->want[k],
			    .min_sms = fits ? 0 : m->need[k], .active_ns = f.v.now_ns,
			    .entry = eff[k], .op_us = m->op_us[k],
			    .flags = (fits ? 0 : VE_DEMAND_WAITING) |
				     (m->lat[k] ? VE_DEMAND_LATENCY : 0)};
			wait[k] = fits ? 0 : wait[k] + 0.2;
			worst = VE_MAX(worst, wait[k]);
		}
		grant_fix_round(&f);
		for (uint32_t k = 0; k < m->n; k++) {
			uint16_t tg = f.plan.entry[k];
			if (tg == eff[k])
				continue;
			uint64_t busy = 0;
			for (uint32_t j = 0; j < m->n; j++)
				if (j != k && eff[j] != VE_POOL_NONE &&
				    !((f.plan.share[k] & VE_GRANT_SHARE) && (f.plan.share[j] & VE_GRANT_SHARE)))
					busy |= f.p->e[eff[j]].leaves;
			eff[k] = tg != VE_POOL_NONE && !(f.p->e[tg].leaves & busy) ? tg : VE_POOL_NONE;
		}
	}
	grant_fix_fini(&f);
	return worst;
}

/* Clients waiting for a grant are planned longest-waiting first. In client
 * order, two clients whose launches each need the whole GPU took it in
 * turns (each one's grant in effect, it waits for nothing, and the other,
 * waiting, came first) and a narrow third never got any SMs. */
VE_TEST(tput_grant_serves_waiting_clients_in_the_order_they_began_to_wait)
{
	const struct busy_mix m = {
	    .n = 3, .want = {132, 132, 8}, .need = {132, 132, 0}, .op_us = {1000, 1000, 10}};
	const char *pols[][2] = {{"tput", ""}, {"tpot", ""}, {"tput", "turns=0"}};
	for (int i = 0; i < 3; i++) {
		double w = busy_mix_wait_ms(pols[i][0], pols[i][1], &m);
		VE_CHECK_MSG(w <= 50, "%s:%s: a client waited %.1f ms for a grant", pols[i][0],
			     pols[i][1], w);
	}
}

/* tpot keeps its reservation while the latency client has work; a batch
 * launch wider than every entry outside it (a cooperative grid sized as
 * the GPU) then never ran while the server was busy (each such launch
 * waited for the watchdog, 10 s). After starve_ms the reservation yields
 * for it, as tput's per-op rounds drain the GPU for such a launch. */
VE_TEST(tpot_grant_yields_the_reservation_to_a_starved_wide_launch)
{
	const struct busy_mix whole = {.n = 3,
				       .want = {16, 132, 132},
				       .need = {0, 132, 0},
				       .op_us = {100, 1000, 1000},
				       .lat = {true, false, false}};
	const struct busy_mix most = {.n = 2, .want = {64, 132}, .need = {0, 100}, .op_us = {100, 1000},
				      .lat = {true, false}};
	double w = busy_mix_wait_ms("tpot", "", &whole);
	VE_CHECK_MSG(w <= 100, "a launch needing the whole GPU waited %.1f ms", w);
	w = busy_mix_wait_ms("tpot", "reserve=64", &most);
	VE_CHECK_MSG(w <= 100, "a launch needing 100 SMs beside 64 reserved waited %.1f ms", w);
}

VE_TEST(tput_op_that_stops_scaling_keeps_16_rest_goes_to_scaling_op)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	ready(c, 0, 1, K_STOP16, 10, 0, 0);
	ready(c, 1, 2, K_LINEAR, 20, 0, 0);
	struct ve_binding b[8];
	VE_CHECK_EQ(sched(c, b, 8), 2);
	VE_CHECK_EQ(b[0].op.tok, 1); /* oldest first */
	VE_CHECK_EQ(sms_of(c, &b[0]), 16);
	/* The scaling op takes everything the other leaves: the 116-SM
	 * remainder of that 16-SM pair. */
	VE_CHECK_EQ(sms_of(c, &b[1]), 116);
	const struct ve_pool *p = ve_coord_pool(c);
	VE_CHECK_EQ(p->e[b[1].entry].kind, VE_ENTRY_REMAINDER);
	VE_CHECK_EQ(p->e[b[1].entry].complement, b[0].entry);
	VE_CHECK_EQ(leaves_of(c, &b[0]) | leaves_of(c, &b[1]), p->all_leaves);
	check_disjoint(c, b, 2);
	ve_coord_destroy(c);
}

VE_TEST(tput_age_aware_round_robin)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	/* Client 0: 20 old ops; client 1: one op, newer than all of them. */
	for (uint64_t i = 0; i < 20; i++)
		ready(c, 0, 100 + i, K_FLAT, 10 + i, 0, 0);
	ready(c, 1, 7, K_FLAT, 1000, 0, 0);
	struct ve_binding b[64];
	int n = sched(c, b, 64);
	VE_CHECK_EQ(n, 16); /* one per leaf: flat ops do not widen */
	VE_CHECK_EQ(b[0].op.client, 0);
	VE_CHECK_EQ(b[0].op.tok, 100);	/* the oldest client's oldest op first */
	VE_CHECK_EQ(b[1].op.client, 1); /* then B's, in the first turn of the round */
	VE_CHECK_EQ(b[1].op.tok, 7);
	for (int i = 2; i < n; i++)
		VE_CHECK_EQ(b[i].op.tok, 100 + (uint64_t)i - 1); /* A's in age order */
	check_disjoint(c, b, n);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 5);
	ve_coord_destroy(c);

	/* Two busy clients alternate, the one with the oldest head first. */
	c = mk_coord("tput", false, false);
	add_clients(c, 3);
	for (uint64_t i = 0; i < 20; i++) {
		ready(c, 0, 200 + i, K_FLAT, 50 + 2 * i, 0, 0);
		ready(c, 1, 300 + i, K_FLAT, 49 + 2 * i, 0, 0);
	}
	n = sched(c, b, 64);
	VE_CHECK_EQ(n, 16);
	for (int i = 0; i < n; i++) {
		VE_CHECK_EQ(b[i].op.client, (uint32_t)(i % 2 == 0 ? 1 : 0));
		VE_CHECK_EQ(b[i].op.tok, (i % 2 == 0 ? 300u : 200u) + (uint64_t)i / 2);
	}
	ve_coord_destroy(c);
}

VE_TEST(tput_min_binding_spreads_over_subtrees)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 1);
	struct ve_binding b[8];
	ready(c, 0, 1, K_FLAT, 10, 0, 0);
	ready(c, 0, 2, K_FLAT, 11, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 2);
	/* Two ops: one in each half of the GPU. */
	VE_CHECK((leaves_of(c, &b[0]) & p->e[17].leaves) != 0);
	VE_CHECK((leaves_of(c, &b[1]) & p->e[18].leaves) != 0);
	done(c, &b[0]);
	done(c, &b[1]);
	for (uint64_t i = 0; i < 4; i++)
		ready(c, 0, 10 + i, K_FLAT, 20 + i, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 4);
	/* Four ops: four different quarters, so each keeps room to grow. */
	uint64_t quarters = 0;
	for (int i = 0; i < 4; i++) {
		VE_CHECK_EQ(sms_of(c, &b[i]), 8);
		uint16_t q = l2_of(p, b[i].entry);
		VE_CHECK(q != VE_POOL_NONE);
		VE_CHECK_MSG(!(quarters & (1ull << (q - 19))), "two ops in quarter %u", q);
		quarters |= 1ull << (q - 19);
	}
	VE_CHECK_EQ(quarters, 0xf);
	ve_coord_destroy(c);
}

VE_TEST(tput_min_sms_gets_a_large_enough_entry_or_waits)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 2);
	struct ve_binding b[32];
	ready(c, 0, 1, K_FLAT, 10, 30, VE_READY_COOPERATIVE);
	VE_CHECK_EQ(sched(c, b, 32), 1);
	VE_CHECK_EQ(sms_of(c, &b[0]), 32); /* the smallest entry of >= 30 SMs */
	done(c, &b[0]);

	/* Fill every leaf, then a cooperative op needing 16 SMs must wait. */
	for (uint64_t i = 0; i < 16; i++)
		ready(c, 0, 100 + i, K_FLAT, 100 + i, 0, 0);
	VE_CHECK_EQ(sched(c, b, 32), 16);
	ready(c, 1, 9, K_FLAT, 500, 16, VE_READY_COOPERATIVE);
	struct ve_binding x[4];
	VE_CHECK_EQ(sched(c, x, 4), 0);
	int32_t s = slot_of(c, 1, 9);
	VE_CHECK(s >= 0);
	const struct ve_policy_view *v = ve_coord_view(c);
	uint16_t elig[VE_POOL_MAX_ENTRIES];
	VE_CHECK_EQ(v->eligible(v, (uint32_t)s, elig, VE_POOL_MAX_ENTRIES), 0);
	/* One leaf of a pair free: still not enough. */
	int on_leaf0 = -1, on_leaf1 = -1;
	for (int i = 0; i < 16; i++) {
		if (b[i].entry == p->leaf_entry[0])
			on_leaf0 = i;
		if (b[i].entry == p->leaf_entry[1])
			on_leaf1 = i;
	}
	VE_CHECK(on_leaf0 >= 0 && on_leaf1 >= 0);
	done(c, &b[on_leaf0]);
	VE_CHECK_EQ(sched(c, x, 4), 0);
	/* Both: the pair's 16-SM entry. */
	done(c, &b[on_leaf1]);
	VE_CHECK_EQ(sched(c, x, 4), 1);
	VE_CHECK_EQ(x[0].op.tok, 9);
	VE_CHECK_EQ(x[0].entry, 23);
	VE_CHECK(sms_of(c, &x[0]) >= 16);
	/* Every eligible entry it was offered was big enough. */
	v = ve_coord_view(c);
	ready(c, 1, 10, K_FLAT, 600, 100, VE_READY_COOPERATIVE);
	s = slot_of(c, 1, 10);
	uint32_t ne = v->eligible(v, (uint32_t)s, elig, VE_POOL_MAX_ENTRIES);
	for (uint32_t i = 0; i < ne; i++)
		VE_CHECK(p->e[elig[i]].sms >= 100);
	ve_coord_destroy(c);
}

VE_TEST(tput_starvation_guard_drains_for_a_wide_op)
{
	struct ve_coord *c = mk_coord("tput:starve_ms=1", false, false);
	add_clients(c, 3);
	struct ve_binding a[4], b[8];
	ve_coord_set_now(c, 1000);
	ready(c, 0, 1, K_FLAT, 1000, 0, 0);
	ready(c, 0, 2, K_FLAT, 1000, 0, 0);
	VE_CHECK_EQ(sched(c, a, 4), 2); /* one leaf in each half: no 64-SM entry is free */
	ready(c, 1, 10, K_FLAT, 2000, 64, VE_READY_COOPERATIVE); /* W */
	ready(c, 2, 20, K_FLAT, 3000, 0, 0);			 /* S1 */
	ve_coord_set_now(c, 2000 + 500000);
	/* W has waited 0.5 ms: not starving yet, S1 goes ahead. */
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(b[0].op.tok, 20);
	ready(c, 2, 21, K_FLAT, 2000 + 600000, 0, 0); /* S2 */
	ve_coord_set_now(c, 2000 + 2000000);
	/* W has waited 2 ms > 1 ms and still does not fit: nothing is bound, so
	 * the GPU drains for it, although S2 would fit. */
	VE_CHECK_EQ(sched(c, b + 1, 7), 0);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 2);
	done(c, &a[0]);
	done(c, &a[1]);
	done(c, &b[0]);
	VE_CHECK_EQ(sched(c, b, 8), 2);
	VE_CHECK_EQ(b[0].op.tok, 10);
	VE_CHECK(sms_of(c, &b[0]) >= 64);
	VE_CHECK_EQ(b[1].op.tok, 21);
	check_disjoint(c, b, 2);
	ve_coord_destroy(c);
}

VE_TEST(submit_failed_requeues_at_age_and_undoes_lease)
{
	struct ve_coord *c = mk_coord("tput", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 1);
	ready(c, 0, 1, K_FLAT, 10, 0, 0);
	ready(c, 0, 2, K_FLAT, 20, 0, 0);
	ready(c, 0, 3, K_FLAT, 30, 0, 0);
	struct ve_binding b[8];
	VE_CHECK_EQ(sched(c, b, 1), 1);
	VE_CHECK_EQ(b[0].op.tok, 1);
	VE_CHECK_EQ(p->e[b[0].entry].state, VE_ENTRY_LEASED);
	VE_CHECK_EQ(p->e[b[0].entry].outstanding, 1);
	VE_CHECK_EQ(ve_coord_view(c)->clients[0].running, 1);
	VE_CHECK_EQ(ve_coord_submit_failed(c, &b[0], -EIO), 0);
	VE_CHECK_EQ(p->e[b[0].entry].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(p->e[b[0].entry].outstanding, 0);
	VE_CHECK_EQ(p->e[b[0].entry].holder, VE_HOLDER_NONE);
	VE_CHECK_EQ(p->busy, 0);
	const struct ve_policy_view *v = ve_coord_view(c);
	VE_CHECK_EQ(v->clients[0].running, 0);
	VE_CHECK_EQ(v->nready, 3);
	uint64_t t[8];
	VE_CHECK_EQ(ready_toks(c, 0, t, 8), 3);
	VE_CHECK(t[0] == 1 && t[1] == 2 && t[2] == 3);
	struct ve_coord_stats st;
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.failed_submits, 1);
	/* The middle one fails: back between its elders and juniors. */
	VE_CHECK_EQ(sched(c, b, 8), 3);
	VE_CHECK_EQ(b[0].op.tok, 1);
	done(c, &b[0]);
	done(c, &b[2]);
	VE_CHECK_EQ(b[1].op.tok, 2);
	ready(c, 0, 4, K_FLAT, 40, 0, 0);
	ready(c, 0, 0, K_FLAT, 5, 0, 0);
	VE_CHECK_EQ(ve_coord_submit_failed(c, &b[1], -EAGAIN), 0);
	VE_CHECK_EQ(ready_toks(c, 0, t, 8), 3);
	VE_CHECK(t[0] == 4 && t[1] == 0 && t[2] == 2); /* pushed in arrival order: 4 then 0 */
	VE_CHECK_EQ(p->busy, 0);
	/* A client that went away gets nothing back. */
	VE_CHECK_EQ(sched(c, b, 1), 1);
	VE_CHECK_EQ(ve_coord_client_remove(c, 0), 0);
	VE_CHECK_EQ(ve_coord_submit_failed(c, &b[0], -EIO), -ENOENT);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 0);
	VE_CHECK_EQ(p->busy, 0);
	ve_coord_destroy(c);
}

VE_TEST(completion_at_zero_outstanding_releases_the_lease)
{
	struct ve_coord *c = mk_coord("whole", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 2);
	ready(c, 0, 1, K_FLAT, 10, 0, 0);
	ready(c, 1, 2, K_FLAT, 20, 0, 0);
	struct ve_binding b[8];
	VE_CHECK_EQ(sched(c, b, 8), 2);
	uint16_t r = p->root;
	VE_CHECK(b[0].entry == r && b[1].entry == r);
	VE_CHECK_EQ(p->e[r].outstanding, 2);
	done(c, &b[0]);
	VE_CHECK_EQ(p->e[r].state, VE_ENTRY_LEASED); /* the other op still runs there */
	done(c, &b[1]);
	VE_CHECK_EQ(p->e[r].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(p->e[r].holder, VE_HOLDER_NONE);
	VE_CHECK_EQ(p->busy, 0);
	/* Completing what is not outstanding is refused and changes nothing. */
	VE_CHECK(ve_coord_done(c, 0, r, K_FLAT, 0) < 0);
	VE_CHECK_EQ(ve_coord_done(c, 0, 999, K_FLAT, 0), -EINVAL);
	ve_coord_destroy(c);

	/* keep_leases: the entry stays leased (gate open) at zero outstanding. */
	c = mk_coord("tput", false, true);
	p = ve_coord_pool(c);
	add_clients(c, 1);
	ready(c, 0, 1, K_FLAT, 10, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 1);
	done(c, &b[0]);
	VE_CHECK_EQ(p->e[b[0].entry].state, VE_ENTRY_LEASED);
	VE_CHECK_EQ(p->e[b[0].entry].outstanding, 0);
	VE_CHECK_EQ(p->e[b[0].entry].holder, 0);
	ve_coord_destroy(c);
}

VE_TEST(completion_feeds_the_profile_only_when_exclusive)
{
	struct ve_coord *c = mk_coord("whole", false, false);
	add_clients(c, 2);
	const uint64_t key = 0x5555;
	struct ve_ready_op o = {.tok = 1,
				.key = key,
				.ready_ns = 1,
				.blocks = 1,
				.threads = 32,
				.client = 0,
				.kind = VE_OP_KERNEL};
	VE_CHECK_EQ(ve_coord_ready(c, &o), 0);
	o.tok = 2;
	o.client = 1;
	VE_CHECK_EQ(ve_coord_ready(c, &o), 0);
	struct ve_binding b[4];
	VE_CHECK_EQ(sched(c, b, 4), 2);
	double ns;
	VE_CHECK_EQ(ve_coord_done(c, 0, b[0].entry, key, 777000), 0); /* shared: not a sample */
	VE_CHECK_EQ(ve_profile_lookup(ve_coord_profile(c), key, 132, &ns), -ENOENT);
	VE_CHECK_EQ(ve_coord_done(c, 1, b[1].entry, key, 0), 0);
	o.tok = 3;
	VE_CHECK_EQ(ve_coord_ready(c, &o), 0);
	VE_CHECK_EQ(sched(c, b, 4), 1);
	VE_CHECK_EQ(ve_coord_done(c, 1, b[0].entry, key, 123000), 0); /* alone: a sample */
	VE_CHECK_EQ(ve_profile_lookup(ve_coord_profile(c), key, 132, &ns), 0);
	VE_CHECK(ns > 122999 && ns < 123001);
	ve_coord_destroy(c);
}

/* ------------------------------------------------------------------ baselines */

VE_TEST(fixed_keeps_each_client_in_its_half)
{
	struct ve_coord *c = mk_coord("fixed:parts=2", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 3);
	for (uint64_t i = 0; i < 5; i++)
		for (uint32_t k = 0; k < 3; k++)
			ready(c, k, 10 * k + i, K_LINEAR, 100 * i + k, 0, 0);
	struct ve_binding b[32];
	int n = sched(c, b, 32);
	VE_CHECK_EQ(n, 15);
	for (int i = 0; i < n; i++) {
		/* Clients 0 and 2 share the first half (leaves 0-7), client 1 has
		 * the second; a scaling op does not take the other half. */
		uint16_t want = b[i].op.client % 2 == 0 ? 17 : 18;
		VE_CHECK_MSG(b[i].entry == want, "client %u op on entry %u", b[i].op.client,
			     b[i].entry);
		VE_CHECK(b[i].flags & VE_BIND_SHARE);
	}
	VE_CHECK_EQ(p->e[17].holder, VE_HOLDER_SHARED);
	VE_CHECK_EQ(p->e[18].holder, 1);
	ve_coord_destroy(c);

	/* Without parts=N: one group per registered client. Two clients: halves. */
	c = mk_coord("fixed", false, false);
	p = ve_coord_pool(c);
	add_clients(c, 2);
	ready(c, 0, 1, K_LINEAR, 1, 0, 0);
	ready(c, 1, 2, K_LINEAR, 2, 0, 0);
	n = sched(c, b, 32);
	VE_CHECK_EQ(n, 2);
	VE_CHECK(b[0].entry == 17 && b[1].entry == 18);
	for (int i = 0; i < n; i++)
		done(c, &b[i]);
	/* Three clients: three disjoint groups; a cooperative launch larger
	 * than its group's largest entry still runs (on an entry containing it). */
	VE_CHECK_EQ(ve_coord_client_add(c, 2, 0), 0);
	uint64_t seen = 0;
	for (uint32_t k = 0; k < 3; k++) {
		ready(c, k, 10 + k, K_FLAT, 10 + k, 0, 0);
		VE_CHECK_EQ(sched(c, b, 32), 1);
		VE_CHECK_EQ(b[0].op.client, k);
		VE_CHECK_EQ(p->e[b[0].entry].leaves & seen, 0);
		seen |= p->e[b[0].entry].leaves;
		done(c, &b[0]);
	}
	ready(c, 1, 20, K_FLAT, 20, 32, VE_READY_COOPERATIVE);
	VE_CHECK_EQ(sched(c, b, 32), 1);
	VE_CHECK(sms_of(c, &b[0]) >= 32);
	ve_coord_destroy(c);
}

/* fixed:leaves=A/B/...: client i (registration order, modulo the groups)
 * runs on the largest entry inside its i-th run of contiguous leaves, op by
 * op and in grant mode. These are the partitions ve-sim --oracle searches. */
static uint64_t leaves_of_client(struct ve_coord *c, uint32_t client, uint64_t tok)
{
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[8];
	ready(c, client, tok, K_LINEAR, tok, 0, 0);
	int n = sched(c, b, 8);
	VE_CHECK_EQ(n, 1);
	if (n != 1)
		return 0;
	VE_CHECK_EQ(b[0].op.client, client);
	uint64_t m = p->e[b[0].entry].leaves;
	done(c, &b[0]);
	return m;
}

VE_TEST(fixed_leaves_gives_each_client_its_run_of_leaves)
{
	static const struct {
		const char *spec;
		uint32_t nclients;
		uint64_t want[4]; /* leaves each client's ops run on */
	} cases[] = {
		/* a quarter and its remainder: both pool entries, every SM used */
		{"fixed:leaves=4/12", 2, {0x000f, 0xfff0}},
		{"fixed:leaves=12/4", 2, {0x0fff, 0xf000}},
		/* 9 leaves are no entry: the half inside (leaf 8 idle); 7 leaves
		 * (9-15) hold the last quarter at most */
		{"fixed:leaves=9/7", 2, {0x00ff, 0xf000}},
		{"fixed:leaves=2/2/4/8", 4, {0x0003, 0x000c, 0x00f0, 0xff00}},
		/* more clients than groups: client 2 shares group 0 */
		{"fixed:leaves=8/8", 3, {0x00ff, 0xff00, 0x00ff}},
		/* one group: everyone on the whole GPU */
		{"fixed:leaves=16", 2, {0xffff, 0xffff}},
	};
	for (size_t i = 0; i < VE_ARRAY_SIZE(cases); i++) {
		struct ve_coord *c = mk_coord(cases[i].spec, false, false);
		if (!c)
			continue;
		add_clients(c, cases[i].nclients);
		for (uint32_t k = 0; k < cases[i].nclients; k++) {
			uint64_t m = leaves_of_client(c, k, 100 * i + k + 1);
			VE_CHECK_MSG(m == cases[i].want[k], "%s: client %u on leaves %#llx, want %#llx",
				     cases[i].spec, k, (unsigned long long)m,
				     (unsigned long long)cases[i].want[k]);
		}
		/* Grant mode: the same entries, granted whether or not there is work. */
		VE_CHECK(ve_coord_grant_mode(c));
		{
			ve_coord_tick(c, true);
			for (uint32_t k = 0; k < cases[i].nclients; k++) {
				uint16_t e = VE_POOL_NONE;
				uint64_t gen;
				VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
				uint64_t m = e == VE_POOL_NONE ? 0 : ve_coord_pool(c)->e[e].leaves;
				VE_CHECK_MSG(m == cases[i].want[k],
					     "%s: client %u granted leaves %#llx, want %#llx",
					     cases[i].spec, k, (unsigned long long)m,
					     (unsigned long long)cases[i].want[k]);
			}
		}
		ve_coord_destroy(c);
	}
}

static uint64_t granted_leaves(struct ve_coord *c, uint32_t k)
{
	uint16_t e = VE_POOL_NONE;
	uint64_t gen;
	VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
	return e == VE_POOL_NONE ? 0 : ve_coord_pool(c)->e[e].leaves;
}

/* Client k's dispatcher has seen its current grant and has work on 'busy'. */
static void grant_report_busy(struct ve_coord *c, uint32_t k, uint64_t busy)
{
	uint16_t e = VE_POOL_NONE;
	uint64_t gen = 0;
	VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
	struct ve_grant_report r = {.ack_gen = gen, .busy_leaves = busy};
	r.demand.entry = e;
	VE_CHECK_EQ(ve_coord_report(c, k, &r), 0);
}

static void switch_policy(struct ve_coord *c, const char *spec, uint64_t now)
{
	char err[256] = "";
	ve_coord_set_now(c, now);
	VE_CHECK_MSG(ve_coord_set_policy(c, spec, err, sizeof(err)) == 0, "%s: %s", spec, err);
	ve_coord_tick(c, true);
}

/* Each take (the SMs taken from a client at one grant change) is timed and
 * handed on by itself. Client 0 goes from 8 leaves to 4 (take A, 0x00f0)
 * at 10 ms and to 2 (take B, 0x000c) at 20 ms; at 30 ms its old kernel is
 * done (A free) and one on leaves 0-3 still runs (B busy). A's reclaim took
 * 20 ms, and client 1, which wants A, gets it. With one time and one set of
 * closing leaves per client, A stayed closing until B drained (client 1
 * waited) and the two were one sample, timed from 10 ms. */
VE_TEST(grant_takes_timed_and_released_each_on_its_own)
{
	struct ve_coord *c = mk_coord("fixed:leaves=8/8", false, false);
	add_clients(c, 2);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x00ff);
	VE_CHECK_EQ(granted_leaves(c, 1), 0xff00);
	grant_report_busy(c, 0, 0x00ff);
	grant_report_busy(c, 1, 0xff00);
	switch_policy(c, "fixed:leaves=4/12", 10000000);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x000f);
	VE_CHECK_EQ(granted_leaves(c, 1), 0xff00); /* 0xfff0 once A is free */
	grant_report_busy(c, 0, 0x00ff);
	switch_policy(c, "fixed:leaves=2/14", 20000000);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x0003);
	grant_report_busy(c, 0, 0x00ff);
	struct ve_coord_stats st;
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.reclaims, 0);
	ve_coord_set_now(c, 30000000);
	grant_report_busy(c, 0, 0x000f);
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.reclaims, 1);
	VE_CHECK_EQ(st.reclaim_ns_max, 20000000);
	/* Client 1 back to 0xfff0 (client 0 to 0x000f, its own leaves): A is free. */
	switch_policy(c, "fixed:leaves=4/12", 30000000);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x000f);
	VE_CHECK_EQ(granted_leaves(c, 1), 0xfff0);
	/* B came back to client 0 before it drained: no reclaim of it. */
	ve_coord_set_now(c, 40000000);
	grant_report_busy(c, 0, 0);
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.reclaims, 1);
	VE_CHECK_EQ(st.reclaim_ns_max, 20000000);
	ve_coord_destroy(c);
}

/* Clients driven as their dispatchers would, with drains: each tick every
 * client reports the leaves its work still runs on, its grant's and those
 * of a grant it lost, which drain for 'drain' ticks. */
struct drain_model {
	int drain;
	uint64_t lost[4], prev[4]; /* leaves draining; granted after the last tick */
	int lost_at[4];
};

/* Client k's grant now (its entry, VE_POOL_NONE) and the report that
 * acknowledges it with 'demand'. */
static uint16_t drain_grant(struct ve_coord *c, uint32_t k, struct ve_grant_report *r)
{
	uint16_t e = VE_POOL_NONE;
	uint64_t gen = 0;
	VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
	*r = (struct ve_grant_report){.ack_gen = gen};
	return e;
}

static void drain_report(struct ve_coord *c, struct drain_model *m, uint32_t k, int tick,
			 struct ve_grant_report *r)
{
	uint16_t e = r->demand.entry;
	if (tick - m->lost_at[k] >= m->drain)
		m->lost[k] = 0;
	r->busy_leaves = (e == VE_POOL_NONE ? 0 : ve_coord_pool(c)->e[e].leaves) | m->lost[k];
	VE_CHECK_EQ(ve_coord_report(c, k, r), 0);
}

/* After a tick: what each of the n clients lost starts to drain. */
static void drain_after_tick(struct ve_coord *c, struct drain_model *m, uint32_t n, int tick)
{
	for (uint32_t k = 0; k < n; k++) {
		uint64_t now_l = granted_leaves(c, k);
		if (m->prev[k] & ~now_l) {
			m->lost[k] |= m->prev[k] & ~now_l;
			m->lost_at[k] = tick;
		}
		m->prev[k] = now_l;
	}
}

/* The same starvation through the coordinator, with drains: a client whose
 * launches need the whole GPU beside one that always has work ready. Each
 * tick both report their demand and the leaves their work still runs on (a
 * lost entry drains for DRAIN ticks). Once granted the root, the whole-GPU
 * client keeps it for the coordinator's hold (5 ms) while it has work: it
 * was taken back on the next tick before (the busy client's waiting demand
 * won the next plan, and a move to no entry was never held), so it ran one
 * tick in twelve, with two drains a cycle. */
VE_TEST(grant_whole_gpu_client_keeps_its_grant_while_busy)
{
	enum { TICKS = 120 };
	struct ve_coord *c = mk_coord("tput", false, false);
	add_clients(c, 2);
	const struct ve_pool *p = ve_coord_pool(c);
	struct drain_model m = {.drain = 5};
	int run = 0, best_run = 0, held_ticks = 0;
	for (int tick = 1; tick <= TICKS; tick++) {
		ve_coord_set_now(c, 1000000ull + (uint64_t)tick * 200000ull);
		for (uint32_t k = 0; k < 2; k++) {
			struct ve_grant_report r;
			uint16_t e = drain_grant(c, k, &r);
			uint32_t min = k == 1 ? p->total_sms : 8;
			bool fits = e != VE_POOL_NONE && p->e[e].sms >= min;
			r.demand = (struct ve_client_demand){
			    .ready = 2, .inflight = fits ? 4 : 0, .want_sms = 132, .min_sms = min,
			    .active_ns = 1000000ull + (uint64_t)tick * 200000ull, .entry = e,
			    .op_us = 3000, .flags = fits ? 0 : VE_DEMAND_WAITING};
			drain_report(c, &m, k, tick, &r);
		}
		ve_coord_tick(c, true);
		drain_after_tick(c, &m, 2, tick);
		bool root = granted_leaves(c, 1) == p->all_leaves;
		held_ticks += root;
		run = root ? run + 1 : 0;
		best_run = run > best_run ? run : best_run;
	}
	printf("# whole-GPU client: root for %d of %d ticks, longest %d in a row\n", held_ticks,
	       TICKS, best_run);
	VE_CHECK(best_run >= 20); /* 5 ms hold / 0.2 ms ticks = 25 */
	ve_coord_destroy(c);
}

/* Through the coordinator with drains (as above), three busy clients whose
 * launches need need[k] SMs (a cooperative grid sized as the GPU: 132) and
 * report it only while they wait (the dispatcher's min_sms: its widest
 * waiting launch); want[k]: the SMs their kernels fill. got[k]: ticks in
 * which client k had a grant that runs its launches. */
static void wide_launch_mix(const char *policy, const uint32_t *need, const uint32_t *want,
			    int ticks, int drain, int *got)
{
	struct ve_coord *c = mk_coord(policy, false, false);
	add_clients(c, 3);
	const struct ve_pool *p = ve_coord_pool(c);
	struct drain_model m = {.drain = drain};
	got[0] = got[1] = got[2] = 0;
	for (int tick = 1; tick <= ticks; tick++) {
		uint64_t now = 1000000ull + (uint64_t)tick * 200000ull;
		ve_coord_set_now(c, now);
		for (uint32_t k = 0; k < 3; k++) {
			struct ve_grant_report r;
			uint16_t e = drain_grant(c, k, &r);
			bool fits = e != VE_POOL_NONE && p->e[e].sms >= need[k];
			r.demand = (struct ve_client_demand){
			    .ready = fits ? 0 : 2, .inflight = fits ? 4 : 0,
			    .want_sms = want[k], .min_sms = fits || need[k] <= 1 ? 0 : need[k],
			    .active_ns = now, .entry = e, .op_us = want[k] < 16 ? 10 : 1000,
			    .flags = fits ? 0 : VE_DEMAND_WAITING};
			drain_report(c, &m, k, tick, &r);
		}
		ve_coord_tick(c, true);
		drain_after_tick(c, &m, 3, tick);
		for (uint32_t k = 0; k < 3; k++) {
			struct ve_grant_report r;
			uint16_t e = drain_grant(c, k, &r);
			got[k] += e != VE_POOL_NONE && p->e[e].sms >= need[k];
		}
	}
	ve_coord_destroy(c);
}

/* A client whose launches need the whole GPU beside two busy ones, and
 * three whose launches need 100 SMs, under tput, tpot and fixed: each gets
 * a grant that runs its launches an eighth of the time or more (under
 * fixed, where one such launch runs at a time and each borrow drains the
 * groups it takes, about a sixth each). Under fixed the borrower took the
 * others' groups again as soon as its launch ran, before their grants
 * took effect: they had none in 2,000 ticks; three alike borrowers got
 * 45, 500 and 20 ticks with a borrow per launch. */
VE_TEST(grant_whole_gpu_client_gets_a_share_beside_two_busy_clients)
{
	const char *pols[] = {"tput", "tpot", "fixed"};
	const uint32_t need[2][3] = {{1, 132, 1}, {100, 100, 100}};
	const uint32_t want[2][3] = {{132, 132, 8}, {132, 132, 132}};
	for (int m = 0; m < 2; m++)
		for (int i = 0; i < 3; i++) {
			int got[3];
			wide_launch_mix(pols[i], need[m], want[m], 2000, 5, got);
			printf("# %s, needs %u/%u/%u: %d %d %d of 2000 ticks\n", pols[i], need[m][0],
			       need[m][1], need[m][2], got[0], got[1], got[2]);
			for (int k = 0; k < 3; k++)
				VE_CHECK_MSG(got[k] >= 2000 / 8, "%s: client %d had a grant %d of 2000 ticks",
					     pols[i], k, got[k]);
		}
}

/* Two latency clients sharing tpot's reservation, through the coordinator
 * with drains (50 ticks), beside batch clients: (a) two dense ones sharing
 * the GPU when the servers register: no server grant on SMs where batch
 * work still drains (any sharer was exempt from the admission check, so a
 * server joined the reservation on leaves the batch clients' shared grant
 * still ran on: 100 client-ticks); (b) one busy batch client, the servers
 * late from tick 300 (deadline pressure: the shared reservation grows):
 * they keep the reservation while the wider entry drains (taken away, they
 * had no grant for 98 client-ticks, where one server alone had 0). */
static void two_servers_run(bool pressure, int *overlap, int *without)
{
	struct ve_coord *c = mk_coord("tpot", false, false);
	uint32_t nb = pressure ? 1 : 2, n = nb + 2;
	for (uint32_t k = 0; k < nb; k++)
		VE_CHECK_EQ(ve_coord_client_add(c, k, 0), 0);
	struct drain_model m = {.drain = 50};
	*overlap = *without = 0;
	bool joined = pressure;
	if (pressure)
		for (uint32_t k = nb; k < n; k++)
			VE_CHECK_EQ(ve_coord_client_add(c, k, VE_READY_LATENCY), 0);
	for (int tick = 1; tick <= 600; tick++) {
		uint64_t now = 1000000ull + (uint64_t)tick * 200000ull;
		ve_coord_set_now(c, now);
		if (!joined && tick == 200) {
			for (uint32_t k = nb; k < n; k++)
				VE_CHECK_EQ(ve_coord_client_add(c, k, VE_READY_LATENCY), 0);
			joined = true;
		}
		uint32_t on = joined ? n : nb;
		for (uint32_t k = 0; k < on; k++) {
			struct ve_grant_report r;
			uint16_t e = drain_grant(c, k, &r);
			bool lat = k >= nb, late = lat && pressure && tick >= 300;
			r.demand = (struct ve_client_demand){
			    .ready = 2, .inflight = e != VE_POOL_NONE ? 4 : 0,
			    .want_sms = lat ? (pressure ? 64 : 16) : 132, .active_ns = now, .entry = e,
			    .op_us = lat ? 100 : 3000,
			    .flags = (e != VE_POOL_NONE ? 0 : VE_DEMAND_WAITING) | (late ? VE_DEMAND_LATE : 0)};
			drain_report(c, &m, k, tick, &r);
		}
		ve_coord_tick(c, true);
		drain_after_tick(c, &m, on, tick);
		uint64_t batch = 0;
		for (uint32_t k = 0; k < nb; k++)
			batch |= m.lost[k] | granted_leaves(c, k);
		for (uint32_t k = nb; joined && k < n; k++) {
			*overlap += (granted_leaves(c, k) & batch) != 0;
			*without += pressure && tick > 300 && !granted_leaves(c, k);
		}
	}
	ve_coord_destroy(c);
}

VE_TEST(grant_two_servers_share_the_reservation_safely)
{
	int overlap, without;
	two_servers_run(false, &overlap, &without);
	VE_CHECK_MSG(overlap == 0, "a server's grant overlapped draining batch work in %d ticks",
		     overlap);
	two_servers_run(true, &overlap, &without);
	VE_CHECK_MSG(overlap == 0 && without == 0,
		     "under pressure: overlap in %d ticks, a server without SMs in %d", overlap,
		     without);
}

/* Clients settled in one shared entry are not "contended": nothing is taken
 * back between sharers, so their dispatchers queue the lone client's 2 ms
 * of work, not 150 us (a dense job then had one kernel queued and the GPU
 * waited for its dispatcher between kernels). Split grants, or
 * share_contended set, keep the short bound. */
static struct ve_coord *share_coord(const char *policy, bool share_contended)
{
	struct ve_coord_config cfg = {.leaf_sms = h200, .nleaves = 16, .max_clients = 8,
				      .policy = policy, .seed = 42,
				      .share_contended = share_contended};
	struct ve_coord *c = NULL;
	char err[256] = "";
	VE_CHECK_MSG(ve_coord_create(&cfg, &c, err, sizeof(err)) == 0, "%s: %s", policy, err);
	add_clients(c, 2);
	ve_coord_set_now(c, 1000000);
	for (uint32_t k = 0; k < 2; k++) {
		struct ve_grant_report r = {0};
		r.demand = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
						     .active_ns = 1000000, .entry = VE_POOL_NONE,
						     .op_us = 3000, .flags = VE_DEMAND_WAITING};
		VE_CHECK_EQ(ve_coord_report(c, k, &r), 0);
	}
	ve_coord_tick(c, true);
	/* Each acknowledges its grant and stays busy. */
	for (uint32_t k = 0; k < 2; k++) {
		uint16_t e = VE_POOL_NONE;
		uint64_t gen = 0;
		VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
		struct ve_grant_report r = {.ack_gen = gen};
		r.demand = (struct ve_client_demand){.ready = 2, .inflight = 4, .want_sms = 132,
						     .active_ns = 1000000, .entry = e, .op_us = 3000};
		VE_CHECK_EQ(ve_coord_report(c, k, &r), 0);
	}
	return c;
}

VE_TEST(grant_shared_settled_is_not_contended)
{
	struct ve_coord *c = share_coord("tput:share=1", false);
	for (uint32_t k = 0; k < 2; k++) {
		VE_CHECK(ve_coord_grant_shared(c, k));
		VE_CHECK(ve_coord_share_settled(c, k));
		VE_CHECK(!ve_coord_contended(c, k));
	}
	ve_coord_destroy(c);
	c = share_coord("tput:share=1", true); /* ved's share_contended = 1 */
	for (uint32_t k = 0; k < 2; k++) {
		VE_CHECK(ve_coord_grant_shared(c, k));
		VE_CHECK(!ve_coord_share_settled(c, k));
		VE_CHECK(ve_coord_contended(c, k));
	}
	ve_coord_destroy(c);
	c = share_coord("tput:share=0", false); /* split: SMs may be taken back */
	for (uint32_t k = 0; k < 2; k++) {
		VE_CHECK(!ve_coord_grant_shared(c, k));
		VE_CHECK(ve_coord_contended(c, k));
	}
	ve_coord_destroy(c);
	/* A third client with work waiting for a grant: the next tick may take
	 * the sharers' SMs, so they keep the short bound now. */
	c = share_coord("tput:share=1", false);
	VE_CHECK_EQ(ve_coord_client_add(c, 2, 0), 0);
	VE_CHECK(ve_coord_share_settled(c, 0)); /* registered, no demand yet */
	struct ve_grant_report r = {0};
	r.demand = (struct ve_client_demand){.ready = 1, .want_sms = 8, .active_ns = 1000000,
					     .entry = VE_POOL_NONE, .flags = VE_DEMAND_WAITING};
	VE_CHECK_EQ(ve_coord_report(c, 2, &r), 0);
	VE_CHECK(!ve_coord_share_settled(c, 0) && ve_coord_contended(c, 0));
	ve_coord_destroy(c);
	/* A latency-class client, even idle: its next request ends the share
	 * and would wait for whatever the sharers queued. */
	c = share_coord("tput:share=1", false);
	VE_CHECK_EQ(ve_coord_client_add(c, 2, VE_READY_LATENCY), 0);
	VE_CHECK(!ve_coord_share_settled(c, 0) && ve_coord_contended(c, 0));
	ve_coord_destroy(c);
	/* A split the policy asked for within hold_ns (refused for now): the
	 * change is coming, so not settled; once it lands, not shared. */
	c = share_coord("tput:share=1", false);
	switch_policy(c, "tput:share=0", 2000000);
	VE_CHECK(ve_coord_grant_shared(c, 0)); /* still the shared entry ... */
	VE_CHECK(!ve_coord_share_settled(c, 0) && ve_coord_contended(c, 0)); /* ... leaving */
	switch_policy(c, "tput:share=0", 20000000);
	VE_CHECK(!ve_coord_grant_shared(c, 0) && ve_coord_contended(c, 0));
	ve_coord_destroy(c);
}

/* What each client was granted over time (ved logs it when a client
 * leaves; benchmarks read it): SM-time, time granted, time shared, counted
 * at every change of its grant and up to now, frozen at its removal. */
/* Client k reports its demand; its dispatcher has seen the current grant
 * (and lend) and has work on 'busy'. */
static void lend_report(struct ve_coord *c, uint32_t k, uint32_t ready, uint32_t inflight,
			uint64_t active_ns, uint64_t busy)
{
	uint16_t e = VE_POOL_NONE;
	uint64_t gen = 0;
	VE_CHECK_EQ(ve_coord_grant(c, k, &e, &gen), 0);
	struct ve_grant_report r = {.ack_gen = gen, .busy_leaves = busy};
	r.demand = (struct ve_client_demand){.ready = ready, .inflight = inflight, .want_sms = 132,
					     .active_ns = active_ns, .entry = e, .op_us = 50};
	if (ready && e == VE_POOL_NONE)
		r.demand.flags |= VE_DEMAND_WAITING;
	VE_CHECK_EQ(ve_coord_report(c, k, &r), 0);
}

/* Lending (ve_grant_plan.lend): SMs a latency client holds and has not used
 * for lend_idle_ms run the batch client's short kernels. The lender keeps
 * its grant throughout, so work it gets runs at once; the lend is taken back
 * at the next tick (urgent: the lender's report asks for it), and the take
 * is timed until the borrower reports those SMs free. lend=0 never lends. */
VE_TEST(grant_lend_idle_sms_taken_back_when_the_lender_has_work)
{
	for (int variant = 0; variant < 2; variant++) {
		struct ve_coord *c = mk_coord(variant ? "tput:lend=0" : "tput", false, false);
		const struct ve_pool *p = ve_coord_pool(c);
		VE_CHECK_EQ(ve_coord_client_add(c, 0, 0), 0);
		VE_CHECK_EQ(ve_coord_client_add(c, 1, VE_READY_LATENCY), 0);
		uint64_t now = 1000000;
		/* Both busy: two disjoint grants. */
		for (int i = 0; i < 20; i++) {
			ve_coord_set_now(c, now);
			lend_report(c, 0, 4, 4, now, granted_leaves(c, 0));
			lend_report(c, 1, 2, 2, now, granted_leaves(c, 1));
			ve_coord_tick(c, true);
			now += 200000;
		}
		uint64_t l0 = granted_leaves(c, 0), l1 = granted_leaves(c, 1);
		VE_CHECK(l0 && l1 && !(l0 & l1));
		VE_CHECK_EQ(ve_coord_lend(c, 0), VE_POOL_NONE);
		/* The server goes idle; half a millisecond later nothing is lent
		 * (its gaps between kernels must not lend its SMs out). */
		uint64_t idle_from = now;
		lend_report(c, 1, 0, 0, idle_from, 0);
		now += 500000;
		ve_coord_set_now(c, now);
		lend_report(c, 0, 4, 4, now, l0);
		ve_coord_tick(c, true);
		VE_CHECK_EQ(ve_coord_lend(c, 0), VE_POOL_NONE);
		/* Idle for 2 ms: its SMs are lent to the batch client, which keeps
		 * its own grant; the server keeps its grant too. */
		now += 1500000;
		ve_coord_set_now(c, now);
		lend_report(c, 0, 4, 4, now, l0);
		lend_report(c, 1, 0, 0, idle_from, 0);
		ve_coord_tick(c, true);
		uint16_t lend = ve_coord_lend(c, 0);
		VE_CHECK_EQ(granted_leaves(c, 0), l0);
		VE_CHECK_EQ(granted_leaves(c, 1), l1);
		if (variant) {
			VE_CHECK_EQ(lend, VE_POOL_NONE);
			ve_coord_destroy(c);
			continue;
		}
		VE_CHECK(lend != VE_POOL_NONE);
		uint64_t ll = p->e[lend].leaves;
		VE_CHECK_EQ(ll & l0, l0);
		VE_CHECK(ll & l1); /* the server's SMs */
		struct ve_coord_stats st0;
		ve_coord_stats(c, &st0);
		VE_CHECK_EQ(st0.lends, 1);
		/* The borrower runs short kernels there. */
		lend_report(c, 0, 4, 8, now, ll);
		/* A request: the server's report makes the next tick urgent, and
		 * that tick takes the lend back; the server's grant never moved. */
		now += 100000;
		ve_coord_set_now(c, now);
		lend_report(c, 1, 1, 0, now, 0);
		ve_coord_tick(c, false);
		VE_CHECK_EQ(ve_coord_lend(c, 0), VE_POOL_NONE);
		VE_CHECK_EQ(granted_leaves(c, 1), l1);
		VE_CHECK_EQ(granted_leaves(c, 0), l0);
		struct ve_coord_stats st;
		ve_coord_stats(c, &st);
		VE_CHECK_EQ(st.lend_takes, 1);
		/* Its short kernels there finish 300 us later: one reclaim of 300 us. */
		lend_report(c, 0, 4, 8, now, ll);
		now += 300000;
		ve_coord_set_now(c, now);
		lend_report(c, 0, 4, 4, now, l0);
		ve_coord_stats(c, &st);
		VE_CHECK_EQ(st.reclaims, st0.reclaims + 1);
		VE_CHECK(st.reclaim_ns_max >= 300000);
		/* Lent again only after the server is idle a while again. */
		ve_coord_tick(c, true);
		VE_CHECK_EQ(ve_coord_lend(c, 0), VE_POOL_NONE);
		ve_coord_destroy(c);
	}
}

VE_TEST(grant_usage_counts_sm_time_per_client)
{
	struct ve_coord *c = mk_coord("fixed:leaves=8/8", false, false);
	add_clients(c, 2); /* at t = 1 ns */
	ve_coord_set_now(c, 1000001);
	ve_coord_tick(c, true); /* granted at 1 ms: 64 and 68 SMs */
	VE_CHECK_EQ(granted_leaves(c, 0), 0x00ff);
	struct ve_grant_usage u;
	ve_coord_set_now(c, 11000001);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 0, &u), 0);
	VE_CHECK_EQ(u.span_ns, 11000000);
	VE_CHECK_EQ(u.granted_ns, 10000000);
	VE_CHECK_EQ(u.sm_ns, 64ull * 10000000);
	VE_CHECK_EQ(u.shared_ns, 0);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 1, &u), 0);
	VE_CHECK_EQ(u.sm_ns, 68ull * 10000000);
	/* 4/12 at 11 ms: client 0 keeps 32 SMs (inside its 64), client 1 gets
	 * 100 once client 0's other leaves are reported free (at 21 ms). */
	switch_policy(c, "fixed:leaves=4/12", 11000001);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x000f);
	ve_coord_set_now(c, 21000001);
	grant_report_busy(c, 0, 0x000f);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(granted_leaves(c, 1), 0xfff0);
	ve_coord_set_now(c, 31000001);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 0, &u), 0);
	VE_CHECK_EQ(u.sm_ns, 64ull * 10000000 + 32ull * 20000000);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 1, &u), 0);
	VE_CHECK_EQ(u.sm_ns, 68ull * 20000000 + 100ull * 10000000);
	/* Removed at 31 ms: frozen there. */
	VE_CHECK_EQ(ve_coord_client_remove(c, 0), 0);
	ve_coord_set_now(c, 41000001);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 0, &u), 0);
	VE_CHECK_EQ(u.span_ns, 31000000);
	VE_CHECK_EQ(u.sm_ns, 64ull * 10000000 + 32ull * 20000000);
	VE_CHECK_EQ(ve_coord_grant_usage(c, 9, &u), -ENOENT);
	ve_coord_destroy(c);
}

VE_TEST(fixed_leaves_refuses_what_is_not_a_partition_of_the_leaves)
{
	/* The H200 pool has 16 leaves: every spec below is refused at create,
	 * with the policy named in the error (the detail goes to the log). */
	static const char *const bad[] = {
		"fixed:leaves=8/7",	   /* 15 leaves */
		"fixed:leaves=8/9",	   /* 17 */
		"fixed:leaves=0/16",	   /* an empty group */
		"fixed:leaves=8//8",	   /* an empty field */
		"fixed:leaves=/8/8",	   "fixed:leaves=8/8/", "fixed:leaves=",
		"fixed:leaves=a/b",	   "fixed:leaves=8/8x", "fixed:leaves=-8/24",
		"fixed:leaves=65/1",	   /* above any pool */
		"fixed:leaves=1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1", /* 17 groups */
		"fixed:parts=3,leaves=8/8", /* disagree */
		"fixed:leaves=8/8,parts=3", "fixed:size=2", "fixed:parts=17",
	};
	for (size_t i = 0; i < VE_ARRAY_SIZE(bad); i++) {
		struct ve_coord_config cfg = {
		    .leaf_sms = h200, .nleaves = 16, .max_clients = 8, .policy = bad[i]};
		struct ve_coord *c = NULL;
		char err[256] = "";
		int rc = ve_coord_create(&cfg, &c, err, sizeof(err));
		VE_CHECK_MSG(rc != 0 && !c, "%s accepted", bad[i]);
		VE_CHECK_MSG(strstr(err, "fixed"), "%s: error '%s'", bad[i], err);
		if (c)
			ve_coord_destroy(c);
	}
	static const char *const good[] = {"fixed:leaves=16", "fixed:parts=2,leaves=8/8",
					   "fixed:leaves=1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1",
					   "fixed:leaves=15/1"};
	for (size_t i = 0; i < VE_ARRAY_SIZE(good); i++) {
		struct ve_coord_config cfg = {
		    .leaf_sms = h200, .nleaves = 16, .max_clients = 8, .policy = good[i]};
		struct ve_coord *c = NULL;
		char err[256] = "";
		VE_CHECK_MSG(ve_coord_create(&cfg, &c, err, sizeof(err)) == 0, "%s refused: %s",
			     good[i], err);
		if (c)
			ve_coord_destroy(c);
	}
}

VE_TEST(whole_shares_the_root)
{
	struct ve_coord *c = mk_coord("whole", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	add_clients(c, 3);
	for (uint64_t i = 0; i < 4; i++)
		for (uint32_t k = 0; k < 3; k++)
			ready(c, k, 10 * k + i, k == 1 ? K_LINEAR : K_FLAT, 100 * i + k, 0, 0);
	struct ve_binding b[32];
	int n = sched(c, b, 32);
	VE_CHECK_EQ(n, 12);
	for (int i = 0; i < n; i++) {
		VE_CHECK_EQ(b[i].entry, p->root);
		VE_CHECK(b[i].flags & VE_BIND_SHARE);
		if (i)
			VE_CHECK(b[i].op.ready_ns >= b[i - 1].op.ready_ns); /* oldest first */
	}
	VE_CHECK_EQ(p->e[p->root].holder, VE_HOLDER_SHARED);
	VE_CHECK_EQ(p->nsharers[p->root], 3);
	VE_CHECK_EQ(p->e[p->root].outstanding, 12);
	ve_coord_destroy(c);
}

/* ------------------------------------------------------------------ TPOT-First */

/* The smallest 16-SM tree entry at the high end (leaves 12-13): tpot's
 * standing reservation with reserve=16. */
#define TPOT_STANDING16 29

/* A coordinator under 'spec' (reserve=16) with clients 0..n-1, latency class
 * where lat has bit k; at 1 us its first round establishes the standing
 * reservation for client 0. */
static struct ve_coord *tpot_reserved(const char *spec, uint32_t n, uint32_t lat)
{
	struct ve_coord *c = mk_coord(spec, false, false);
	for (uint32_t k = 0; k < n; k++)
		VE_CHECK_EQ(ve_coord_client_add(c, k, (lat >> k & 1) ? VE_READY_LATENCY : 0), 0);
	ve_coord_set_now(c, 1000);
	struct ve_binding b[64];
	VE_CHECK_EQ(sched(c, b, 64), 0);
	const struct ve_pool *p = ve_coord_pool(c);
	VE_CHECK_EQ(p->e[TPOT_STANDING16].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(p->e[TPOT_STANDING16].reserve_for, 0);
	return c;
}

VE_TEST(tpot_standing_reservation_renewed_and_never_entered)
{
	struct ve_coord *c = tpot_reserved("tpot:reserve=16", 2, 1);
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[64], l[4];
	const uint16_t st = TPOT_STANDING16;
	const uint64_t res = p->e[st].leaves;
	for (uint64_t i = 0; i < 20; i++)
		ready(c, 1, 100 + i, i % 2 ? K_LINEAR : K_FLAT, 1000 + i, 0, 0);
	int n = sched(c, b, 64);
	VE_CHECK(n > 0);
	for (int i = 0; i < n; i++)
		VE_CHECK_MSG((leaves_of(c, &b[i]) & res) == 0, "best-effort op on entry %u",
			     b[i].entry);
	/* A latency op goes to the reservation; a second one joins it. */
	ready(c, 0, 1, K_DECODE, 2000, 0, VE_READY_LATENCY);
	VE_CHECK_EQ(sched(c, l, 4), 1);
	VE_CHECK_EQ(l[0].entry, st);
	ready(c, 0, 2, K_DECODE, 2100, 0, VE_READY_LATENCY);
	VE_CHECK_EQ(sched(c, l + 1, 3), 1);
	VE_CHECK_EQ(l[1].entry, st);
	VE_CHECK(l[1].flags & VE_BIND_SHARE);
	done(c, &l[0]);
	done(c, &l[1]);
	/* Every best-effort op done, more waiting, and the GPU otherwise free:
	 * the tick renews the reservation before the plan can take it. */
	for (int i = 0; i < n; i++)
		done(c, &b[i]);
	for (uint64_t i = 0; i < 40; i++)
		ready(c, 1, 200 + i, i % 2 ? K_LINEAR : K_FLAT, 3000 + i, 0, 0);
	int m = sched(c, b, 64);
	VE_CHECK(m > 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(p->e[st].reserve_for, 0);
	for (int i = 0; i < m; i++)
		VE_CHECK((leaves_of(c, &b[i]) & res) == 0);
	/* And again after the next latency op. */
	ready(c, 0, 3, K_DECODE, 4000, 0, VE_READY_LATENCY);
	VE_CHECK_EQ(sched(c, l, 4), 1);
	VE_CHECK_EQ(l[0].entry, st);
	done(c, &l[0]);
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	struct ve_coord_stats s;
	ve_coord_stats(c, &s);
	VE_CHECK(s.reservations >= 3);
	/* The latency client leaves: its reservation goes with it, and the
	 * waiting best-effort work may now use those SMs. */
	VE_CHECK_EQ(ve_coord_client_remove(c, 0), 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_IDLE);
	n = sched(c, b, 64);
	VE_CHECK(n > 0);
	uint64_t got = 0;
	for (int i = 0; i < n; i++)
		got |= leaves_of(c, &b[i]);
	VE_CHECK_EQ(got & res, res);
	VE_CHECK(p->e[st].reserve_for != 0);
	ve_coord_destroy(c);
}

/* Per-op mode: when the latency client holding the standing reservation
 * leaves, the reservation passes to another latency client (it had none
 * until yet another one registered). */
VE_TEST(tpot_reservation_passes_to_the_next_latency_client)
{
	struct ve_coord *c = tpot_reserved("tpot:reserve=16", 3, 5);
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[8];
	const uint16_t st = TPOT_STANDING16;
	VE_CHECK_EQ(ve_coord_client_remove(c, 0), 0);
	ve_coord_set_now(c, 2000000);
	VE_CHECK_EQ(sched(c, b, 8), 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(p->e[st].reserve_for, 2);
	ready(c, 2, 1, K_DECODE, 3000000, 0, VE_READY_LATENCY);
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(b[0].entry, st);
	ve_coord_destroy(c);
}

/* A reload drops the old policy's reservations: tpot -> tput kept the 16-SM
 * standing reservation for good (tput never uses it up), and a reload to a
 * wider reservation held both. */
VE_TEST(reload_drops_the_old_policys_reservations)
{
	struct ve_coord *c = tpot_reserved("tpot:reserve=16", 2, 1);
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[8];
	const uint16_t st = TPOT_STANDING16;
	char err[256] = "";
	VE_CHECK_MSG(ve_coord_set_policy(c, "tput", err, sizeof(err)) == 0, "%s", err);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(p->e[st].reserve_for, VE_HOLDER_NONE);
	VE_CHECK_MSG(ve_coord_set_policy(c, "tpot:reserve=16", err, sizeof(err)) == 0, "%s", err);
	ve_coord_set_now(c, 2000);
	VE_CHECK_EQ(sched(c, b, 8), 0);
	VE_CHECK_MSG(ve_coord_set_policy(c, "tpot:reserve=32", err, sizeof(err)) == 0, "%s", err);
	ve_coord_set_now(c, 3000);
	VE_CHECK_EQ(sched(c, b, 8), 0);
	uint32_t reserved = 0, sms = 0;
	for (uint32_t e = 0; e < p->nentries; e++)
		if (p->e[e].reserve_for != VE_HOLDER_NONE) {
			reserved++;
			sms += p->e[e].sms;
		}
	VE_CHECK_MSG(reserved == 1 && sms == 32, "%u reservations, %u SMs", reserved, sms);
	ve_coord_destroy(c);
}

/* A reload keeps the configuration's per-op binding: with per_op set and a
 * policy without grants running, a reload to tpot (which has grants) was
 * refused as a switch to grant mode. */
VE_TEST(reload_keeps_per_op_binding)
{
	struct ve_coord_config cfg = {.leaf_sms = h200, .nleaves = 16, .max_clients = 8,
				      .policy = "sweep", .seed = 42, .per_op = true};
	struct ve_coord *c = NULL;
	char err[256] = "";
	VE_CHECK_MSG(ve_coord_create(&cfg, &c, err, sizeof(err)) == 0, "%s", err);
	VE_CHECK(!ve_coord_grant_mode(c));
	VE_CHECK_MSG(ve_coord_set_policy(c, "tpot", err, sizeof(err)) == 0, "%s", err);
	VE_CHECK(!ve_coord_grant_mode(c));
	ve_coord_destroy(c);
	/* Without per_op, from a grant policy to one without grants: refused. */
	c = mk_coord("tput", false, false);
	VE_CHECK(ve_coord_grant_mode(c));
	VE_CHECK_EQ(ve_coord_set_policy(c, "sweep", err, sizeof(err)), -EINVAL);
	ve_coord_destroy(c);
}

/* Per-op mode: a decode as wide as the GPU (min_sms 132: a cooperative grid,
 * a graph of clusters) cannot run on the standing reservation; it is at
 * risk at once, and the entry prepared for it is one it can run on. The
 * preparation was sized by predicted time alone (a 36-SM entry), and the
 * decode waited for it to expire: bound after two TPOTs. */
VE_TEST(tpot_wide_decode_prepared_an_entry_it_can_run_on)
{
	struct ve_coord *c = tpot_reserved("tpot:reserve=16,tpot_ms=20", 2, 1);
	struct ve_binding b[16];
	ready(c, 0, 1, K_DECODE, 1000, 132, VE_READY_LATENCY);
	int got = 0;
	uint64_t t = 1000;
	for (; t < 200000000ull && !got; t += 1000000) {
		ve_coord_set_now(c, t);
		got = sched(c, b, 16);
	}
	VE_CHECK_EQ(got, 1);
	VE_CHECK_EQ(sms_of(c, &b[0]), 132);
	VE_CHECK_MSG(t <= 5000000, "the wide decode was bound after %.1f ms (TPOT 20 ms)", t / 1e6);
	ve_coord_destroy(c);
}

/* Per-op mode: a best-effort launch that fits in no entry outside the
 * standing reservation (a cooperative grid as wide as the GPU) beside an
 * idle server: the reservation yields, the launch runs, and the other
 * best-effort client's work goes on. It never ran, and tput's starvation
 * guard (nothing else binds while the oldest op fits nowhere) stopped the
 * other client: 3 of its ops in 3,000. */
VE_TEST(tpot_reservation_yields_to_a_wide_best_effort_launch)
{
	struct ve_coord *c = tpot_reserved("tpot:reserve=16", 3, 1);
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[64];
	ready(c, 1, 1, K_LINEAR, 1000, 132, 0);
	bool wide_ran = false;
	int others = 0, offered = 0;
	for (uint64_t r = 1; r <= 100; r++) {
		for (int i = 0; i < 4; i++, offered++)
			ready(c, 2, 100 * r + (uint64_t)i, K_FLAT, r * 1000000, 0, 0);
		ve_coord_set_now(c, r * 1000000 + 500);
		int n = sched(c, b, 64);
		for (int i = 0; i < n; i++) {
			wide_ran |= b[i].op.client == 1;
			others += b[i].op.client == 2;
			done(c, &b[i]);
		}
	}
	VE_CHECK_MSG(wide_ran, "the wide launch never ran");
	VE_CHECK_MSG(others * 10 >= offered * 9, "the other client ran %d of %d ops", others,
		     offered);
	/* The reservation comes back afterwards. */
	VE_CHECK_EQ(p->e[TPOT_STANDING16].reserve_for, 0);
	ve_coord_destroy(c);
}

VE_TEST(tpot_latency_ops_earliest_deadline_first_all_offered)
{
	struct ve_coord *c = mk_coord("tpot:reserve=16", false, false);
	VE_CHECK_EQ(ve_coord_client_add(c, 0, VE_READY_LATENCY), 0);
	VE_CHECK_EQ(ve_coord_client_add(c, 1, 0), 0);
	struct ve_binding b[8];
	VE_CHECK_EQ(sched(c, b, 8), 0);
	/* Three decodes, none at risk (2 ms each on the reservation, queued one
	 * behind the other), deadlines out of queue order. */
	const uint64_t dl[3] = {10000000, 5000000, 20000000};
	for (int i = 0; i < 3; i++) {
		struct ve_ready_op o = {.tok = 1 + (uint64_t)i,
					.key = K_DECODE,
					.ready_ns = 1,
					.blocks = 1024,
					.threads = 256,
					.client = 0,
					.kind = VE_OP_KERNEL,
					.flags = VE_READY_LATENCY,
					.deadline_ns = dl[i]};
		VE_CHECK_EQ(ve_coord_ready(c, &o), 0);
	}
	ready(c, 1, 100, K_FLAT, 1, 0, 0);
	int n = sched(c, b, 8);
	VE_CHECK_EQ(n, 4);
	/* Every decode is offered in the first round, earliest deadline first,
	 * all on the reservation (shared once it has work), then best effort. */
	const uint64_t order[3] = {2, 1, 3};
	for (int i = 0; i < 3; i++) {
		VE_CHECK_MSG(b[i].op.tok == order[i], "binding %d: decode %llu", i,
			     (unsigned long long)b[i].op.tok);
		VE_CHECK_EQ(b[i].entry, 29);
		VE_CHECK_EQ(!!(b[i].flags & VE_BIND_SHARE), i > 0);
	}
	VE_CHECK_EQ(b[3].op.tok, 100);
	ve_coord_destroy(c);
}

VE_TEST(tpot_at_risk_decode_gets_wider_entry_after_drain)
{
	struct ve_coord *c = mk_coord("tpot:reserve=16,tpot_ms=1", false, false);
	const struct ve_pool *p = ve_coord_pool(c);
	VE_CHECK_EQ(ve_coord_client_add(c, 0, VE_READY_LATENCY), 0);
	VE_CHECK_EQ(ve_coord_client_add(c, 1, 0), 0);
	ve_coord_set_now(c, 1000000);
	struct ve_binding b[8], l[4];
	VE_CHECK_EQ(sched(c, b, 8), 0);
	const uint16_t st = 29, wide = 22; /* 16 SMs (leaves 12-13); 36 (leaves 12-15) */
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	/* Best effort takes everything but the reservation. */
	ready(c, 1, 100, K_LINEAR, 1000000, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(sms_of(c, &b[0]), 116);
	uint16_t be = b[0].entry;
	VE_CHECK(p->e[be].leaves & p->e[wide].leaves);
	/* A decode is coming with a 1 ms deadline: 2 ms on the 16-SM
	 * reservation misses it, 0.89 ms on 36 SMs meets it. */
	struct ve_hint h = {.client = 0,
			    .key = K_DECODE,
			    .blocks = 1024,
			    .threads = 256,
			    .flags = VE_READY_LATENCY,
			    .expect_ready_ns = 1000000,
			    .deadline_ns = 2000000};
	VE_CHECK_EQ(ve_coord_hint(c, &h), 0);
	/* The overlapping best-effort gate closed (its op still runs), the wider
	 * entry is claimed, not yet reserved; nothing new enters it. */
	VE_CHECK_EQ(p->e[be].state, VE_ENTRY_DRAINING);
	VE_CHECK(ve_pool_pending(p, wide));
	VE_CHECK_EQ(p->e[wide].reserve_for, 0);
	ready(c, 1, 101, K_LINEAR, 1000100, 0, 0);
	int n = sched(c, b + 1, 7);
	for (int i = 1; i <= n; i++)
		VE_CHECK((leaves_of(c, &b[i]) & p->e[wide].leaves) == 0);
	/* The drain completes: the wider entry is reserved for the decode. */
	VE_CHECK_EQ(ve_coord_done(c, 1, be, K_LINEAR, 0), 0);
	int m = sched(c, b + 1 + n, 7 - n);
	for (int i = 1 + n; i < 1 + n + m; i++)
		VE_CHECK((leaves_of(c, &b[i]) & p->e[wide].leaves) == 0);
	VE_CHECK_MSG(p->e[wide].state == VE_ENTRY_RESERVED && p->e[wide].reserve_for == 0,
		     "wide entry %s, reserved for %d", ve_entry_state_name(p->e[wide].state),
		     p->e[wide].reserve_for);
	ready(c, 0, 1, K_DECODE, 1200000, 0, VE_READY_LATENCY);
	VE_CHECK_EQ(sched(c, l, 4), 1);
	VE_CHECK_EQ(l[0].op.tok, 1);
	VE_CHECK_MSG(l[0].entry == wide, "decode bound to entry %u (%u SMs)", l[0].entry,
		     sms_of(c, &l[0]));
	done(c, &l[0]);
	/* Done with it: the wide entry is given back, the standing one renewed. */
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(p->e[wide].reserve_for == 0 && p->e[wide].state == VE_ENTRY_RESERVED, 0);

	/* A preparation whose decode never comes is given up once its deadline
	 * has passed, and best-effort work gets those SMs back. */
	for (int i = 1; i < 1 + n + m; i++)
		done(c, &b[i]);
	h.expect_ready_ns = 1000000;
	h.deadline_ns = 2000000;
	VE_CHECK_EQ(ve_coord_hint(c, &h), 0);
	VE_CHECK_EQ(p->e[wide].reserve_for, 0);
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK_EQ(p->e[wide].state, VE_ENTRY_RESERVED); /* nothing to drain: at once */
	ve_coord_set_now(c, 2500000);
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK_EQ(sched(c, l, 4), 0);
	VE_CHECK(p->e[wide].reserve_for != 0);
	VE_CHECK_EQ(p->e[st].state, VE_ENTRY_RESERVED);
	ready(c, 1, 102, K_LINEAR, 2500000, 0, 0);
	VE_CHECK_EQ(sched(c, b, 8), 1);
	VE_CHECK_EQ(leaves_of(c, &b[0]) & p->e[st].leaves, 0);
	VE_CHECK(leaves_of(c, &b[0]) & p->e[wide].leaves & ~p->e[st].leaves);
	ve_coord_destroy(c);
}

/* ------------------------------------------------------------------ scripted policy */

/* Shared by the test and the policy it compiles, so both agree on the layout. */
#define SCRIPT_CTL_DEF                                                                             \
	struct script_ctl {                                                                        \
		int32_t slots[8];                                                                  \
		uint32_t nslots, next, repeat;                                                     \
		int32_t entry;                                                                     \
		uint32_t flags;                                                                    \
		uint64_t round;                                                                    \
		uint32_t npicks, nselects, nbound, nrejected, ncompleted, nadded, nremoved;        \
		uint32_t ninit, nfini, nelig;                                                      \
		uint16_t elig[256];                                                                \
		char reason[160];                                                                  \
		char args[64];                                                                     \
		uint16_t gentry[8], glend[8]; /* the grant variant's plan, per client */           \
		uint8_t gshare[8];                                                                 \
		uint32_t ngrants;                                                                  \
	};
#define XSTR(...) STR(__VA_ARGS__)
#define STR(...)  #__VA_ARGS__
SCRIPT_CTL_DEF

/* The policy's source: includes, the control block, the callbacks. */
/* clang-format off */
static const char script_head[] =
	"#include \"ve/ve_policy.h\"\n"
	"#include <errno.h>\n"
	"#include <string.h>\n"
	"\n";
static const char script_ctl_src[] = XSTR(SCRIPT_CTL_DEF) "\n";
static const char script_src[] =
	"struct script_ctl script_ctl;\n"
	"static int32_t pick(void *priv, const struct ve_policy_view *v)\n"
	"{\n"
	"	struct script_ctl *s = &script_ctl;\n"
	"	if (!s->nslots || (!s->repeat && s->round == v->round))\n"
	"		return -1;\n"
	"	s->round = v->round;\n"
	"	s->npicks++;\n"
	"	return s->slots[s->next++ % s->nslots];\n"
	"}\n"
	"static int32_t sel(void *priv, const struct ve_policy_view *v, uint32_t op,\n"
	"		   const uint16_t *el, uint32_t n, uint32_t *flags)\n"
	"{\n"
	"	struct script_ctl *s = &script_ctl;\n"
	"	s->nselects++;\n"
	"	s->nelig = n < 256 ? n : 256;\n"
	"	memcpy(s->elig, el, s->nelig * sizeof(*el));\n"
	"	*flags = s->flags;\n"
	"	return s->entry;\n"
	"}\n"
	"static void notify(void *priv, const struct ve_policy_view *v,\n"
	"		   const struct ve_policy_event *ev)\n"
	"{\n"
	"	struct script_ctl *s = &script_ctl;\n"
	"	switch (ev->kind) {\n"
	"	case VE_PEV_BOUND: s->nbound++; break;\n"
	"	case VE_PEV_REJECTED:\n"
	"		s->nrejected++;\n"
	"		strncpy(s->reason, ev->reason ? ev->reason : \"(null)\", sizeof(s->reason) - 1);\n"
	"		break;\n"
	"	case VE_PEV_COMPLETED: s->ncompleted++; break;\n"
	"	case VE_PEV_CLIENT_ADDED: s->nadded++; break;\n"
	"	case VE_PEV_CLIENT_REMOVED: s->nremoved++; break;\n"
	"	}\n"
	"}\n"
	"static int init(const char *args, const struct ve_policy_view *v, void **priv)\n"
	"{\n"
	"	script_ctl.ninit++;\n"
	"	strncpy(script_ctl.args, args, sizeof(script_ctl.args) - 1);\n"
	"	*priv = &script_ctl;\n"
	"	return strcmp(args, \"fail\") == 0 ? -EINVAL : 0;\n"
	"}\n"
	"static void fini(void *priv) { script_ctl.nfini++; }\n"
	"#ifdef SCRIPT_GRANT\n"
	"static int grant(void *priv, const struct ve_policy_view *v,\n"
	"		 const struct ve_client_demand *d, struct ve_grant_plan *plan)\n"
	"{\n"
	"	struct script_ctl *s = &script_ctl;\n"
	"	s->ngrants++;\n"
	"	for (int k = 0; k < 8; k++) {\n"
	"		plan->entry[k] = s->gentry[k];\n"
	"		plan->share[k] = s->gshare[k];\n"
	"		plan->lend[k] = s->glend[k];\n"
	"	}\n"
	"	return 0;\n"
	"}\n"
	"#define GRANT_CB .grant = grant,\n"
	"#else\n"
	"#define GRANT_CB\n"
	"#endif\n"
	"static const struct ve_policy_ops ops __attribute__((unused)) = {\n"
	"	.abi_version = SCRIPT_ABI, .name = \"scripted\", .summary = \"test\",\n"
	"	.init = init, .fini = fini, .pick = pick, .select = sel, .notify = notify,\n"
	"	GRANT_CB\n"
	"};\n"
	"#ifndef SCRIPT_NO_ENTRY\n"
	"const struct ve_policy_ops *ve_policy_entry(void);\n"
	"const struct ve_policy_ops *ve_policy_entry(void) { return &ops; }\n"
	"#endif\n";
/* clang-format on */

/* snprintf that reports truncation (paths here come from the environment). */
static bool sfmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool sfmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < len;
}

static char g_dir[PATH_MAX];
static char g_so[4][PATH_MAX]; /* good, wrong ABI, no entry point, with grant() */
static int g_built;	       /* 0 not tried, 1 built, -1 unavailable, -2 broken */
static char g_why[256];

static void cleanup_build(void)
{
	for (int i = 0; i < 4; i++)
		if (g_so[i][0])
			unlink(g_so[i]);
	char src[PATH_MAX + 16];
	sfmt(src, sizeof(src), "%s/policy.c", g_dir);
	unlink(src);
	if (g_dir[0])
		rmdir(g_dir);
}

static bool find_root(char *root, size_t len)
{
	const char *env = getenv("VE_SRCDIR");
	char cand[3][PATH_MAX];
	int n = 0;
	if (env && *env)
		sfmt(cand[n++], PATH_MAX, "%s", env);
	if (getcwd(cand[n], PATH_MAX))
		n++;
	/* The binary lives in <root>/<build>/tests/. */
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = 0;
		for (int up = 0; up < 3; up++) {
			char *sl = strrchr(exe, '/');
			if (!sl)
				break;
			*sl = 0;
		}
		sfmt(cand[n++], PATH_MAX, "%s", exe);
	}
	for (int i = 0; i < n; i++) {
		char probe[PATH_MAX + 32];
		struct stat sb;
		sfmt(probe, sizeof(probe), "%s/include/ve/ve_policy.h", cand[i]);
		if (stat(probe, &sb) == 0) {
			sfmt(root, len, "%s", cand[i]);
			return true;
		}
	}
	return false;
}

/* Builds the scripted policy (three variants) once; false (with g_why) if it
 * cannot be built here. */
static bool build_policies(void)
{
	if (g_built)
		return g_built > 0;
	g_built = -1;
	char root[PATH_MAX];
	if (!find_root(root, sizeof(root))) {
		sfmt(g_why, sizeof(g_why), "include/ve/ve_policy.h not found (set VE_SRCDIR)");
		return false;
	}
	const char *cc = getenv("CC");
	if (!cc || !*cc)
		cc = "cc";
	char cmd[3 * PATH_MAX + 256];
	sfmt(cmd, sizeof(cmd), "%s --version >/dev/null 2>&1", cc);
	if (system(cmd) != 0) {
		sfmt(g_why, sizeof(g_why), "no C compiler (%s)", cc);
		return false;
	}
	const char *tmp = getenv("TMPDIR");
	if (!sfmt(g_dir, sizeof(g_dir), "%s/ve_policy_XXXXXX", tmp && *tmp ? tmp : P_tmpdir) ||
	    !mkdtemp(g_dir)) {
		sfmt(g_why, sizeof(g_why), "mkdtemp: %s", strerror(errno));
		g_dir[0] = 0;
		return false;
	}
	atexit(cleanup_build);
	char src[PATH_MAX + 16];
	sfmt(src, sizeof(src), "%s/policy.c", g_dir);
	FILE *f = fopen(src, "w");
	if (!f || fputs(script_head, f) < 0 || fputs(script_ctl_src, f) < 0 ||
	    fputs(script_src, f) < 0 || fclose(f)) {
		sfmt(g_why, sizeof(g_why), "cannot write %s", src);
		return false;
	}
	static const char *const defs[4] = {"-DSCRIPT_ABI=VE_POLICY_ABI_VERSION", "-DSCRIPT_ABI=99",
					    "-DSCRIPT_ABI=1 -DSCRIPT_NO_ENTRY",
					    "-DSCRIPT_ABI=VE_POLICY_ABI_VERSION -DSCRIPT_GRANT"};
	static const char *const names[4] = {"good", "abi99", "noentry", "grant"};
	for (int i = 0; i < 4; i++) {
		bool ok = sfmt(g_so[i], PATH_MAX, "%s/%s.so", g_dir, names[i]);
		ok =
		    ok &&
		    sfmt(
			cmd, sizeof(cmd),
			"%s -std=c11 -shared -fPIC -Wall -Werror %s -I'%s/include' '%s' "
			"-o '%s'",
			cc, defs[i], root, src, g_so[i]);
		if (!ok || system(cmd) != 0) {
			/* A compiler that works but refuses our source is a test bug. */
			sfmt(g_why, sizeof(g_why), "compiling the test policy failed: %s", cmd);
			g_built = -2;
			return false;
		}
	}
	g_built = 1;
	return true;
}

/* Skips the current test where no policy can be built here; fails it if
 * the build itself broke. */
static void need_policies(void)
{
	if (build_policies())
		return;
	VE_CHECK_MSG(g_built != -2, "%s", g_why);
	VE_SKIP(g_why);
}

/* The scripted policy's control block, as loaded by the coordinator. */
struct scripted {
	struct ve_coord *c;
	void *h;
	struct script_ctl *s;
};

static void scripted_open(struct scripted *sp, bool keep)
{
	need_policies();
	struct ve_coord_config cfg = {.leaf_sms = h200,
				      .nleaves = 16,
				      .max_clients = 8,
				      .policy = g_so[0],
				      .log_decisions = true,
				      .keep_leases = keep};
	char err[512] = "";
	int rc = ve_coord_create(&cfg, &sp->c, err, sizeof(err));
	VE_CHECK_MSG(rc == 0, "%s", err);
	/* Same path: the object the coordinator loaded (a reference of our own). */
	sp->h = dlopen(g_so[0], RTLD_NOW | RTLD_NOLOAD);
	VE_CHECK(sp->h != NULL);
	sp->s = dlsym(sp->h, "script_ctl");
	VE_CHECK(sp->s != NULL);
	memset(sp->s, 0, sizeof(*sp->s));
	sp->s->entry = -1;
	VE_CHECK_EQ(strcmp(ve_coord_policy_name(sp->c), "scripted"), 0);
	add_clients(sp->c, 3);
}

static void scripted_close(struct scripted *sp)
{
	ve_coord_destroy(sp->c);
	dlclose(sp->h);
}

/* The scripted policy with grant(): its plan (entries and lends per client)
 * is what the test writes into the control block, all none at first. */
static void scripted_grant_open(struct scripted *sp)
{
	need_policies();
	struct ve_coord_config cfg = {.leaf_sms = h200, .nleaves = 16, .max_clients = 8,
				      .policy = g_so[3]};
	char err[512] = "";
	VE_CHECK_MSG(ve_coord_create(&cfg, &sp->c, err, sizeof(err)) == 0, "%s", err);
	VE_CHECK(ve_coord_grant_mode(sp->c));
	sp->h = dlopen(g_so[3], RTLD_NOW | RTLD_NOLOAD);
	VE_CHECK(sp->h != NULL);
	sp->s = dlsym(sp->h, "script_ctl");
	VE_CHECK(sp->s != NULL);
	memset(sp->s, 0, sizeof(*sp->s));
	for (int k = 0; k < 8; k++)
		sp->s->gentry[k] = sp->s->glend[k] = VE_POOL_NONE;
	add_clients(sp->c, 3);
}

static uint64_t lend_leaves(struct ve_coord *c, uint32_t k)
{
	uint16_t l = ve_coord_lend(c, k);
	return l == VE_POOL_NONE ? 0 : ve_coord_pool(c)->e[l].leaves;
}

/* Lends of two clients never cover a common SM. Client 0 borrows client
 * 1's idle pair of leaves (its grant: leaves 0-1, lend: the quarter 0-3);
 * client 1 asking for a lend over its own pair and more is refused while
 * client 0's lend covers its SMs, and after that lend is taken back, until
 * client 0 reports its lent work there drained. Checking only the SMs
 * outside client 1's own grant let both lends cover leaves 2-3 (random
 * chaos lends found it: 6 seeds in 1,500). */
VE_TEST(grant_lends_never_overlap)
{
	struct scripted sp;
	scripted_grant_open(&sp);
	struct ve_coord *c = sp.c;
	const uint16_t PAIR01 = 23, PAIR23 = 24, QUARTER0 = 19, HALF0 = 17;
	VE_CHECK_EQ(ve_coord_pool(c)->e[PAIR01].leaves, 0x3);
	VE_CHECK_EQ(ve_coord_pool(c)->e[PAIR23].leaves, 0xc);
	VE_CHECK_EQ(ve_coord_pool(c)->e[QUARTER0].leaves, 0xf);
	sp.s->gentry[0] = PAIR01;
	sp.s->gentry[1] = PAIR23;
	ve_coord_set_now(c, 1000000);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(granted_leaves(c, 0), 0x3);
	VE_CHECK_EQ(granted_leaves(c, 1), 0xc);
	sp.s->glend[0] = QUARTER0;
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 0), 0xf);
	grant_report_busy(c, 0, 0xf); /* its short kernels on leaves 2-3 too */
	/* Client 1 asks for the quarter (its pair and client 0's) or the half. */
	sp.s->glend[1] = QUARTER0;
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 1), 0);
	sp.s->glend[1] = HALF0;
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 1), 0);
	/* Client 0's lend taken back; its lent work still runs on leaves 2-3. */
	sp.s->glend[0] = VE_POOL_NONE;
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 0), 0);
	VE_CHECK_EQ(lend_leaves(c, 1), 0);
	grant_report_busy(c, 0, 0xf);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 1), 0);
	/* Drained: client 1's lend takes effect. */
	grant_report_busy(c, 0, 0x3);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 1), 0xff);
	/* A reload to a policy that never writes plan.lend ends every lend. */
	char err[256] = "";
	VE_CHECK_MSG(ve_coord_set_policy(c, "fixed", err, sizeof(err)) == 0, "%s", err);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(lend_leaves(c, 1), 0);
	scripted_close(&sp);
}

/* A grant that fills another client's gaps (VE_GRANT_YIELD, tput's turns)
 * is taken back on the policy's word, even while its client has work; any
 * other grant that just took effect is held for the coordinator's hold
 * (5 ms) while its client has work, so its SMs are not lost on the next
 * tick. Client 0 is granted the whole GPU, busy, and the policy takes it
 * away 1 ms later. */
static bool taken_at_once(uint8_t bits)
{
	struct scripted sp;
	scripted_grant_open(&sp);
	struct ve_coord *c = sp.c;
	const struct ve_pool *p = ve_coord_pool(c);
	sp.s->gentry[0] = p->root;
	sp.s->gshare[0] = bits;
	ve_coord_set_now(c, 1000000);
	ve_coord_tick(c, true);
	VE_CHECK_EQ(granted_leaves(c, 0), p->all_leaves);
	uint16_t e = VE_POOL_NONE;
	uint64_t gen = 0;
	VE_CHECK_EQ(ve_coord_grant(c, 0, &e, &gen), 0);
	struct ve_grant_report r = {.ack_gen = gen, .busy_leaves = p->all_leaves};
	r.demand = (struct ve_client_demand){.ready = 1, .inflight = 2, .want_sms = 132,
					     .active_ns = 2000000, .entry = e, .op_us = 3000};
	VE_CHECK_EQ(ve_coord_report(c, 0, &r), 0);
	sp.s->gentry[0] = VE_POOL_NONE;
	ve_coord_set_now(c, 2000000);
	ve_coord_tick(c, true);
	bool taken = granted_leaves(c, 0) == 0;
	scripted_close(&sp);
	return taken;
}

VE_TEST(grant_yield_is_taken_back_at_once)
{
	VE_CHECK(taken_at_once(VE_GRANT_YIELD));
	VE_CHECK(!taken_at_once(0));
}

/* One round proposing (slot, entry, flags); returns the bindings made. */
static int propose(struct scripted *sp, int32_t slot, int32_t entry, uint32_t flags,
		   struct ve_binding *b)
{
	sp->s->slots[0] = slot;
	sp->s->nslots = 1;
	sp->s->next = 0;
	sp->s->repeat = 0;
	sp->s->entry = entry;
	sp->s->flags = flags;
	return ve_coord_schedule(sp->c, b, 4);
}

/* A proposal that validation must refuse, with 'reason' in the decision log
 * and in the policy's notification; the op stays ready. */
static void expect_reject(struct scripted *sp, uint32_t client, uint64_t tok, int32_t entry,
			  uint32_t flags, const char *reason)
{
	struct ve_binding b[4];
	int32_t slot = slot_of(sp->c, client, tok);
	VE_CHECK(slot >= 0);
	uint32_t nready = ve_coord_view(sp->c)->nready;
	uint32_t rej = sp->s->nrejected;
	uint64_t busy = ve_coord_pool(sp->c)->busy;
	struct capture cp;
	cap_begin(&cp);
	int n = propose(sp, slot, entry, flags, b);
	char *log = cap_end(&cp);
	VE_CHECK(log != NULL);
	bool in_log = strstr(log, "verdict=reject") && strstr(log, reason);
	free(log);
	VE_CHECK_EQ(n, 0);
	VE_CHECK_MSG(in_log, "decision log lacks the rejection '%s'", reason);
	VE_CHECK_EQ(sp->s->nrejected, rej + 1);
	VE_CHECK_MSG(strstr(sp->s->reason, reason), "notified reason '%s', expected '%s'",
		     sp->s->reason, reason);
	VE_CHECK_EQ(ve_coord_view(sp->c)->nready, nready);
	VE_CHECK_EQ(slot_of(sp->c, client, tok), slot);
	VE_CHECK_EQ(ve_coord_pool(sp->c)->busy, busy);
}

VE_TEST(validation_rejects_bad_proposals_with_reasons)
{
	struct scripted sp;
	scripted_open(&sp, false);
	struct ve_coord *c = sp.c;
	struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[4];
	VE_CHECK_EQ(sp.s->nadded, 3);

	/* Client 0 leases leaf 0 (entry 1). */
	ready(c, 0, 1, K_FLAT, 10, 0, 0);
	VE_CHECK_EQ(propose(&sp, slot_of(c, 0, 1), 1, 0, b), 1);
	VE_CHECK_EQ(b[0].entry, 1);
	VE_CHECK_EQ(sp.s->nbound, 1);

	ready(c, 1, 2, K_FLAT, 20, 0, 0);
	ready(c, 1, 3, K_FLAT, 30, 24, VE_READY_COOPERATIVE);
	/* A slot that holds no ready op (the bound op's, now free, or one never
	 * used): refused, with a warning in the log. */
	struct capture cp;
	cap_begin(&cp);
	int n = propose(&sp, 7, 2, 0, b);
	char *log = cap_end(&cp);
	VE_CHECK(log && strstr(log, "picked slot 7, which holds no ready op"));
	free(log);
	VE_CHECK_EQ(n, 0);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 2);
	struct ve_coord_stats st;
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.rejects, 1);
	/* Out of range. */
	expect_reject(&sp, 1, 2, 999, 0, "no such entry");
	/* Smaller than the launch's minimum: 16 SMs for a 24-SM cooperative op. */
	expect_reject(&sp, 1, 3, 23, 0, "entry smaller than the launch needs");
	/* Another client's lease, without asking to share. */
	expect_reject(&sp, 1, 2, 1, 0, "conflicts with a busy entry");
	/* Overlapping another client's lease (the pair containing leaf 0). */
	expect_reject(&sp, 1, 2, 23, 0, "conflicts with a busy entry");
	expect_reject(&sp, 1, 2, 23, VE_BIND_SHARE, "conflicts with a busy entry");
	/* The same client's entry with work running, without asking to share. */
	ready(c, 0, 4, K_FLAT, 40, 0, 0);
	expect_reject(&sp, 0, 4, 1, 0, "did not ask to share");
	/* With VE_BIND_SHARE both are fine. */
	VE_CHECK_EQ(propose(&sp, slot_of(c, 0, 4), 1, VE_BIND_SHARE, b), 1);
	VE_CHECK_EQ(propose(&sp, slot_of(c, 1, 2), 1, VE_BIND_SHARE, b + 1), 1);
	VE_CHECK_EQ(p->e[1].holder, VE_HOLDER_SHARED);
	VE_CHECK_EQ(p->e[1].outstanding, 3);

	/* A draining entry: nothing new enters, not even for its holder. */
	ready(c, 2, 5, K_FLAT, 50, 0, 0);
	VE_CHECK_EQ(propose(&sp, slot_of(c, 2, 5), 2, 0, b + 2), 1); /* leaf 1 */
	VE_CHECK_EQ(ve_pool_close_gate(p, 2), 0);
	VE_CHECK_EQ(p->e[2].state, VE_ENTRY_DRAINING);
	ready(c, 2, 6, K_FLAT, 60, 0, 0);
	expect_reject(&sp, 2, 6, 2, VE_BIND_SHARE, "gate closed (draining)");
	VE_CHECK_EQ(ve_coord_done(c, 2, 2, K_FLAT, 0), 0);
	VE_CHECK_EQ(p->e[2].state, VE_ENTRY_IDLE);

	/* Another client's reservation. */
	VE_CHECK_EQ(ve_pool_reserve(p, 3, 0), 0);
	expect_reject(&sp, 2, 6, 3, VE_BIND_SHARE, "reserved for another client");
	/* SMs claimed by another client's pending reservation: leaves 0-3
	 * (entry 19) wait for leaf 0's lease; leaf 2 (entry 4) is claimed. */
	VE_CHECK_EQ(ve_pool_unreserve(p, 3), 0);
	VE_CHECK_EQ(ve_pool_reserve(p, 19, 0), VE_POOL_PENDING);
	expect_reject(&sp, 2, 6, 4, 0, "claimed by a pending reservation");
	/* The claimant itself may use free entries inside its claim. */
	ready(c, 0, 7, K_FLAT, 70, 0, 0);
	VE_CHECK_EQ(propose(&sp, slot_of(c, 0, 7), 4, 0, b + 3), 1);
	VE_CHECK_EQ(ve_coord_done(c, 0, 4, K_FLAT, 0), 0);
	VE_CHECK_EQ(ve_pool_unreserve(p, 19), 0);

	/* Every refusal left the op ready and counted. */
	ve_coord_stats(c, &st);
	VE_CHECK_EQ(st.rejects, 1 + (uint64_t)sp.s->nrejected);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 2); /* ops 3 and 6 */

	/* A policy that keeps proposing refused bindings: the round ends after
	 * four rejections instead of spinning. */
	for (uint64_t i = 8; i < 12; i++)
		ready(c, 2, i, K_FLAT, 10 * i, 0, 0);
	uint32_t rej = sp.s->nrejected, picks0 = sp.s->npicks;
	sp.s->slots[0] = slot_of(c, 1, 3);
	sp.s->slots[1] = slot_of(c, 2, 6);
	for (int i = 0; i < 4; i++)
		sp.s->slots[2 + i] = slot_of(c, 2, 8 + (uint64_t)i);
	sp.s->nslots = 6;
	sp.s->next = 0;
	sp.s->repeat = 1;
	sp.s->entry = 999;
	VE_CHECK_EQ(ve_coord_schedule(c, b, 4), 0);
	VE_CHECK_EQ(sp.s->nrejected - rej, 4);
	VE_CHECK_EQ(sp.s->npicks - picks0, 4);
	VE_CHECK_EQ(ve_coord_view(c)->nready, 6);
	/* A policy picking the same op twice in a round ends it too. */
	sp.s->nslots = 1;
	sp.s->entry = -1;
	uint32_t picks = sp.s->npicks;
	VE_CHECK_EQ(ve_coord_schedule(c, b, 4), 0);
	VE_CHECK_EQ(sp.s->npicks - picks, 2);
	scripted_close(&sp);
}

VE_TEST(scripted_submit_failure_back_at_its_age)
{
	struct scripted sp;
	scripted_open(&sp, false);
	struct ve_coord *c = sp.c;
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_binding b[4];
	for (uint64_t i = 1; i <= 5; i++)
		ready(c, 0, i, K_FLAT, 10 * i, 0, 0);
	/* Bind the middle one, on a shared lease with another op. */
	VE_CHECK_EQ(propose(&sp, slot_of(c, 0, 3), 17, 0, b), 1);
	VE_CHECK_EQ(propose(&sp, slot_of(c, 0, 1), 17, VE_BIND_SHARE, b + 1), 1);
	VE_CHECK_EQ(p->e[17].outstanding, 2);
	VE_CHECK_EQ(ve_coord_submit_failed(c, &b[0], -EIO), 0);
	/* The lease stays (the other op runs), the count is undone. */
	VE_CHECK_EQ(p->e[17].state, VE_ENTRY_LEASED);
	VE_CHECK_EQ(p->e[17].outstanding, 1);
	uint64_t t[8];
	VE_CHECK_EQ(ready_toks(c, 0, t, 8), 4);
	VE_CHECK(t[0] == 2 && t[1] == 3 && t[2] == 4 && t[3] == 5);
	VE_CHECK_EQ(ve_coord_view(c)->clients[0].running, 1);
	VE_CHECK_EQ(ve_coord_submit_failed(c, &b[1], -EIO), 0);
	VE_CHECK_EQ(p->e[17].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(ready_toks(c, 0, t, 8), 5);
	for (int i = 0; i < 5; i++)
		VE_CHECK_EQ(t[i], (uint64_t)i + 1);
	VE_CHECK_EQ(p->busy, 0);
	/* Notifications: 2 bound; completions do not count failed submissions. */
	VE_CHECK_EQ(sp.s->nbound, 2);
	VE_CHECK_EQ(sp.s->ncompleted, 0);
	scripted_close(&sp);
}

VE_TEST(external_policy_so_loads_and_wrong_abi_is_refused)
{
	need_policies();
	const struct ve_policy_ops *ops = NULL;
	const char *args = NULL;
	void *h = NULL;
	char err[512] = "";
	char spec[PATH_MAX + 32];
	sfmt(spec, sizeof(spec), "%s:alpha=1", g_so[0]);
	VE_CHECK_EQ(ve_policy_resolve(spec, &ops, &args, &h, err, sizeof(err)), 0);
	VE_CHECK(ops && h);
	VE_CHECK_EQ(strcmp(ops->name, "scripted"), 0);
	VE_CHECK_EQ(ops->abi_version, VE_POLICY_ABI_VERSION);
	VE_CHECK_EQ(strcmp(args, "alpha=1"), 0);
	dlclose(h);

	/* Through the coordinator, with its arguments; a failing init is refused. */
	struct ve_coord_config cfg = {.leaf_sms = h200, .nleaves = 16, .policy = spec};
	struct ve_coord *c = NULL;
	VE_CHECK_EQ(ve_coord_create(&cfg, &c, err, sizeof(err)), 0);
	void *own = dlopen(g_so[0], RTLD_NOW | RTLD_NOLOAD);
	VE_CHECK(own != NULL);
	struct script_ctl *s = dlsym(own, "script_ctl");
	VE_CHECK(s != NULL);
	VE_CHECK_EQ(strcmp(s->args, "alpha=1"), 0);
	uint32_t fini = s->nfini;
	ve_coord_destroy(c);
	VE_CHECK_EQ(s->nfini, fini + 1);
	sfmt(spec, sizeof(spec), "%s:fail", g_so[0]);
	c = NULL;
	VE_CHECK_EQ(ve_coord_create(&cfg, &c, err, sizeof(err)), -EINVAL);
	VE_CHECK(c == NULL);
	VE_CHECK_MSG(strstr(err, "rejected its arguments 'fail'"), "message: %s", err);
	/* An external policy parses its own arguments: no key is named (and
	 * none left from an earlier built-in failure on this thread). */
	VE_CHECK_MSG(!strstr(err, "rejected 'fail'") && strstr(err, "rejected its arguments"),
		     "message: %s", err);
	dlclose(own);

	/* Another ABI version: refused, with a message that says what to do. */
	h = (void *)1;
	err[0] = 0;
	VE_CHECK_EQ(ve_policy_resolve(g_so[1], &ops, &args, &h, err, sizeof(err)), -EPROTO);
	VE_CHECK(h == NULL);
	char speaks[48];
	snprintf(speaks, sizeof(speaks), "speaks version %d", VE_POLICY_ABI_VERSION);
	VE_CHECK_MSG(strstr(err, "built for policy ABI version 99") && strstr(err, speaks) &&
			 strstr(err, "rebuild it"),
		     "message: %s", err);
	cfg.policy = g_so[1];
	VE_CHECK_EQ(ve_coord_create(&cfg, &c, err, sizeof(err)), -EPROTO);
	VE_CHECK(strstr(err, "ABI version 99"));
	/* No entry point, or no such file. */
	VE_CHECK_EQ(ve_policy_resolve(g_so[2], &ops, &args, &h, err, sizeof(err)), -ENOENT);
	VE_CHECK_MSG(strstr(err, "does not export ve_policy_entry()"), "message: %s", err);
	char missing[PATH_MAX + 16];
	sfmt(missing, sizeof(missing), "%s/none.so", g_dir);
	VE_CHECK_EQ(ve_policy_resolve(missing, &ops, &args, &h, err, sizeof(err)), -ENOENT);
	VE_CHECK(strstr(err, "cannot load policy"));
	/* Built-ins by name; unknown names list them. */
	VE_CHECK_EQ(ve_policy_resolve("tput:min_gain=0.1", &ops, &args, &h, err, sizeof(err)), 0);
	VE_CHECK(h == NULL && strcmp(ops->name, "tput") == 0 && strcmp(args, "min_gain=0.1") == 0);
	VE_CHECK_EQ(ve_policy_resolve("nosuch", &ops, &args, &h, err, sizeof(err)), -ENOENT);
	VE_CHECK(strstr(err, "tput, tpot, fixed, whole, chaos"));
}

/* A store full of exact shapes makes room for new ones by dropping the keys
 * observed longest ago (a server sees every prompt length over its life):
 * a new key is learned, and a key observed all along survives. */
VE_TEST(profile_store_full_drops_the_oldest_keys)
{
	static const uint32_t psizes[] = {8, 16, 132};
	struct ve_profile *pr = NULL;
	VE_CHECK_EQ(ve_profile_create(psizes, 3, 64, 132, &pr), 0);
	uint32_t n0 = 0;
	for (uint64_t k = 1; k <= 2000; k++) {
		VE_CHECK_EQ(ve_profile_observe(pr, 1000000 + k, 16, 5000.0), 0);
		VE_CHECK_EQ(ve_profile_observe(pr, 7, 16, 1234.0), 0); /* hot all along */
		if (k == 1)
			n0 = ve_profile_nkeys(pr);
	}
	VE_CHECK_EQ(n0, 2u);
	VE_CHECK(ve_profile_evicted(pr) > 0);
	VE_CHECK(ve_profile_nkeys(pr) <= 64);
	double ns = 0;
	VE_CHECK_EQ(ve_profile_lookup(pr, 7, 16, &ns), 0);
	VE_CHECK(ns > 1233.9 && ns < 1234.1);
	VE_CHECK_EQ(ve_profile_lookup(pr, 1002000, 16, &ns), 0); /* the newest */
	VE_CHECK(ve_profile_lookup(pr, 1000001, 16, &ns) != 0);	/* the oldest went */
	ve_profile_destroy(pr);
}
