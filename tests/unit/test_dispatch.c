/* SPDX-License-Identifier: MIT */
/*
 * Dispatcher + coordinator + policies end to end over the simulated GPU.
 *
 * Several vctxs (clients) are attached to one dispatcher (host functions run
 * inline) over the sim backend; the test drives everything from one thread
 * with ve_dispatcher_poll() and ve_sim_peek()/advance(), so a run is a pure
 * function of its seed. Each client runs a random program of kernels
 * (some cooperative, with a minimum SM count), copies, memsets, host
 * functions, timed and untimed event records and cross-stream waits over
 * legacy, blocking, non-blocking and per-thread streams; the reference
 * model of CUDA's ordering rules (refmodel.h) is built alongside. The sim
 * runs with jitter and a random submit latency, so completion orders vary.
 *
 * Every op is tracked through the dispatcher's on_submit / on_bind /
 * on_complete observers and the sim's on_event hook (START/END with the
 * op's SM set and cookie), identified by a code its descriptor carries.
 * Checked, under chaos, tput, tpot, fixed and whole:
 *  (a) no op is lost or run twice: each tracked op is submitted, started,
 *      ended and completed exactly once (host functions run exactly once),
 *      START and END carry the same cookie, every client's context is idle
 *      at the end, and the pool is back to idle;
 *  (b) two kernels that run at the same time on a common SM were bound to
 *      the same pool entry and the later binding asked for VE_BIND_SHARE;
 *      every kernel runs on the SM set of the entry it was bound to, which
 *      its client holds (LEASED/DRAINING) and which is big enough for it;
 *  (c) happens-before: an op is submitted (and starts, and a host function
 *      runs) only after every reference predecessor completed; stream and
 *      event queries agree with the reference in both directions;
 *  (d) injected submission failures (fail_submit_prob and ve_sim_fail_submit):
 *      the op is retried and still runs exactly once, and every failure the
 *      dispatcher saw was an injected one;
 *  (e) an injected execution fault surfaces as the sticky error of exactly
 *      the client that owned the op, the others stay clean;
 *  (f) ve_dispatcher_detach() mid-run: the client's ready ops are dropped,
 *      nothing of it is submitted later, its running ops still complete,
 *      after which no entry is leased or reserved for it; the others finish;
 *  and with bounded pipelining (window 1-3, dispatch_pipelined): an op
 *      submitted before its predecessors completed is queued behind all of
 *      them on their lane, and nothing starts before its predecessors ended.
 * tpot also runs with a 50 us TPOT target, so decodes are at risk and wider
 * entries get prepared (gates closed while work drains). When nothing runs
 * and nothing moves, the driver lets 100 us of virtual time pass (an idle
 * GPU's wall clock still runs; time-based decisions may wait for it), at
 * most 100 ms in all before the run counts as stuck.
 *
 * Seeds are printed; VE_SEED=<seed> replays one seed (for every policy of
 * the test); VE_DISPATCH_N sets the seeds per policy (default 30, 6 under
 * sanitizers); VE_DT_LOG=1 prints the coordinator's decision log.
 */
#include "../harness.h"
#include "sim_drive.h"
#include "refmodel.h"
#include "workload.h"

#include "backend/sim.h"
#include "core/vctx.h"
#include "coord/coord.h"
#include "dispatch/phase.h"
#include "pool/pool.h"
#include "runtime/runtime.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DT_SANITIZED 1
#endif
#endif
#ifndef DT_SANITIZED
#define DT_SANITIZED 0
#endif

#define MAX_CLIENTS 5
#define MAX_CALLS   240
#define MAX_EVENTS  6
#define MAX_RUNNING 2048

_Static_assert(MAX_CALLS <= WL_MAX_CALLS, "calls fit a program");

static const char *const all_policies[] = {"chaos", "tput", "tpot", "fixed", "whole"};
#define NPOL ((int)VE_ARRAY_SIZE(all_policies))

struct opst {
	uint8_t nsub, nstart, nend, ncomp, nhost, nbind;
	bool shared;
	bool lent; /* grant mode: submitted on an entry lent to its client, not its grant */
	int32_t status;
	uint32_t entry, lane;
	uint64_t bind_seq, cookie;
};

struct client {
	int id;
	struct wl_prog p; /* its program (workload.h) */
	int pc;
	rm_set done, ended; /* done: completion seen by the dispatcher; ended: by the sim */
	struct opst os[RM_MAX_OPS];
	ve_tok tok[RM_MAX_OPS];
	ve_stream sh[RM_MAX_STREAMS];
	ve_event eh[MAX_EVENTS];
	struct ve_vctx *v;
	bool detached;
	uint32_t nbound;
};

struct running {
	int client, op;
	uint32_t entry;
	uint64_t sms[VE_SIM_SM_WORDS];
};

struct opts {
	uint32_t window; /* dispatcher pipelining window (0 = strict late binding) */
	bool grant;	 /* grant mode: the coordinator grants entries, the dispatcher binds */
	bool defer;	 /* the sim really defers the completions of deferred submissions */
	double fail_submit_prob;
	uint64_t fail_submit_nth; /* armed after a while, relative */
	uint64_t fail_exec_nth;	  /* armed after a while, relative */
	bool detach;
};

struct run {
	uint64_t seed;
	const char *policy;
	struct opts o;
	int nclients, victim;
	uint32_t detach_after;
	bool detach_due, detach_done, victim_checked, armed;
	uint64_t accepted_at_arm;
	uint32_t detach_wait;
	struct client cl[MAX_CLIENTS];
	struct ve_backend *b;
	struct ve_runtime *rt;
	struct ve_coord *co; /* the runtime's embedded coordinator, for inspection */
	struct ve_dispatcher *d;
	const struct ve_pool *pool;
	uint64_t bind_seq;
	struct running rn[MAX_RUNNING];
	int nrn;
	/* coverage */
	uint64_t kernels, shared_overlaps, max_conc, wide_bindings, faults_seen, queries;
	uint64_t lent_overlaps; /* a kernel on lent SMs beside the lender's */
	bool failed;
	char err[1024];
};

static struct run g_run;

static struct {
	uint64_t runs, ops, kernels, shared_overlaps, max_conc, wide, submit_faults, coord_failed,
	    queries, exec_faults, detaches, dropped, never_run, gate_closes, reservations,
	    pipelined, local_binds, grant_changes, deferred, lend_binds, lent_overlaps;
} g_tot;

#define rnd wl_rnd

static void fail_run(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Callbacks run inside the sim (with its lock held) and the dispatcher: they
 * only record the first failure; the driving loop stops and reports it. */
static void fail_run(struct run *r, const char *fmt, ...)
{
	if (r->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->failed = true;
}

/* ------------------------------------------------------------------ programs */

static uint64_t code_of(int client, int op)
{
	return ((uint64_t)(client + 1) << 16) | (uint64_t)(op + 1);
}

static const struct wl_mix mix = {.kernel = 40, .coop = 48, .copy = 68, .memset = 80};

static void gen_client(struct client *cl, int id, uint64_t *r)
{
	memset(cl, 0, sizeof(*cl));
	cl->id = id;
	wl_prog_init(&cl->p, r, 0x100 + (uint64_t)id, MAX_EVENTS);
	int target = 30 + (int)rnd(r, MAX_CALLS - 30);
	wl_prog_calls(&cl->p, r, target, &mix, false);
}

static void host_fn(void *arg);

static void build_desc(const struct client *cl, int op, struct ve_desc *d)
{
	wl_build_desc(cl->p.wk[op], cl->p.shp[op], code_of(cl->id, op), op, host_fn, d);
}

/* ------------------------------------------------------------------ tracking */

static struct client *client_of_code(struct run *r, uint64_t code, int *op)
{
	int c = (int)(code >> 16) - 1, o = (int)(code & 0xffff) - 1;
	if (c < 0 || c >= r->nclients || o < 0 || o >= r->cl[c].p.m.nops ||
	    !rm_set_has(&r->cl[c].p.ext, o))
		return NULL;
	*op = o;
	return &r->cl[c];
}

static struct client *client_of_desc(struct run *r, const struct ve_desc *d, int *op)
{
	if (!d)
		return NULL;
	switch (d->kind) {
	case VE_OP_KERNEL:
		return client_of_code(r, d->u.k.name_id, op);
	case VE_OP_MEMCPY:
		return client_of_code(r, d->u.cp.src, op);
	case VE_OP_MEMSET:
		return client_of_code(r, d->u.ms.value, op);
	case VE_OP_HOST_FN:
		return client_of_code(r, (uint64_t)(uintptr_t)d->u.host.arg, op);
	case VE_OP_EVENT_RECORD:
		return client_of_code(r, d->u.ev.app_event, op);
	default:
		return NULL;
	}
}

static int first_missing_in(const struct client *cl, const rm_set *need, const rm_set *have)
{
	for (int w = 0; w < RM_WORDS; w++) {
		uint64_t miss = need->w[w] & cl->p.ext.w[w] & ~have->w[w];
		if (miss)
			return w * 64 + __builtin_ctzll(miss);
	}
	return RM_NONE;
}

static int first_missing(const struct client *cl, const rm_set *need)
{
	return first_missing_in(cl, need, &cl->done);
}

/* (c): late binding and H. */
static void check_preds(struct run *r, struct client *cl, int op, const char *what)
{
	int miss = first_missing(cl, &cl->p.m.anc[op]);
	if (miss != RM_NONE)
		fail_run(r, "client %d op%d %s before its predecessor op%d completed", cl->id, op,
			 what, miss);
}

/* (c) with pipelining: submitted early only behind its unfinished
 * predecessors, all on its own lane (whose FIFO order keeps the edges). */
static void check_preds_pipelined(struct run *r, struct client *cl, int op, uint32_t lane)
{
	for (int a = 0; a < cl->p.m.nops; a++) {
		if (!rm_set_has(&cl->p.m.anc[op], a) || !rm_set_has(&cl->p.ext, a) ||
		    rm_set_has(&cl->done, a))
			continue;
		if (cl->os[a].nsub != 1 || cl->os[a].lane != lane) {
			fail_run(r,
				 "client %d op%d submitted on lane %#x before its predecessor op%d "
				 "completed, which is not queued ahead of it on that lane",
				 cl->id, op, lane, a);
			return;
		}
	}
}

/* (c) on the device: nothing starts before every predecessor ended. */
static void check_preds_ended(struct run *r, struct client *cl, int op)
{
	int miss = first_missing_in(cl, &cl->p.m.anc[op], &cl->ended);
	if (miss != RM_NONE)
		fail_run(r, "client %d op%d started before its predecessor op%d ended", cl->id, op,
			 miss);
}

static bool is_sharer(const struct ve_pool *p, uint32_t e, int32_t client)
{
	for (unsigned i = 0; i < p->nsharers[e]; i++)
		if (p->sharers[e][i] == client)
			return true;
	return false;
}

static void host_fn(void *arg)
{
	struct run *r = &g_run;
	int op;
	struct client *cl = client_of_code(r, (uint64_t)(uintptr_t)arg, &op);
	if (!cl) {
		fail_run(r, "host function with an unknown argument %p", arg);
		return;
	}
	struct opst *o = &cl->os[op];
	if (++o->nhost > 1)
		fail_run(r, "client %d op%d: host function ran twice", cl->id, op);
	if (cl->detached)
		fail_run(r, "client %d op%d: host function ran after detach", cl->id, op);
	check_preds(r, cl, op, "ran (host function)");
	rm_set_add(&cl->done, op);
	rm_set_add(&cl->ended, op);
}

static void on_submit(void *arg, uint32_t client, ve_tok tok, uint32_t lane,
		      const struct ve_desc *d)
{
	struct run *r = arg;
	int op;
	struct client *cl = client_of_desc(r, d, &op);
	if (!cl) {
		fail_run(r, "submission of an untracked op (kind %s)", ve_op_kind_name(d->kind));
		return;
	}
	struct opst *o = &cl->os[op];
	if ((uint32_t)cl->id != client || tok != cl->tok[op])
		fail_run(r, "client %d op%d submitted as client %u token %#llx", cl->id, op, client,
			 (unsigned long long)tok);
	if (++o->nsub > 1)
		fail_run(r, "client %d op%d submitted twice", cl->id, op);
	if (cl->detached)
		fail_run(r, "client %d op%d submitted after its client was detached", cl->id, op);
	/* Kernels only on pool entries' lanes; the rest on copy lanes, unless
	 * pipelined behind a kernel on its entry's lane. */
	bool compute = d->kind == VE_OP_KERNEL,
	     on_entry = VE_LANE_ENTRY(lane) != VE_LANE_COPY_ENTRY;
	if (compute ? !on_entry : on_entry && !r->o.window && !r->o.grant)
		fail_run(r, "client %d op%d (%s) on lane %#x", cl->id, op, ve_op_kind_name(d->kind),
			 lane);
	o->lane = lane;
	/* A kernel submitted without a binding (on_bind follows at once for
	 * bound ones) was pipelined: behind its predecessor, on that entry. */
	o->entry = VE_LANE_ENTRY(lane);
	o->bind_seq = ++r->bind_seq;
	if (r->o.grant && on_entry && compute) {
		/* Grant mode: kernels only on the client's grant as the coordinator
		 * has it (the dispatcher read it at the start of this pass; grants
		 * change at the tick that ends a pass). A copy may still follow its
		 * kernel on an entry whose grant ended: it needs no SMs. */
		uint16_t ge, gl = ve_coord_lend(r->co, client);
		uint64_t gen;
		ve_coord_grant(r->co, client, &ge, &gen);
		if (ge != o->entry && gl != o->entry)
			fail_run(r,
				 "client %d op%d (%s) submitted on entry %u, its grant is %d, its "
				 "lend %d",
				 cl->id, op, ve_op_kind_name(d->kind), o->entry,
				 ge == VE_POOL_NONE ? -1 : (int)ge, gl == VE_POOL_NONE ? -1 : (int)gl);
		o->lent = o->entry == gl && gl != ge;
		uint32_t need = cl->p.wk[op] == W_COOP ? wl_cshapes[cl->p.shp[op]].min_sms : 1;
		if (compute && r->pool->e[o->entry].sms < need)
			fail_run(r, "client %d op%d needs %u SMs, submitted on entry %u of %u",
				 cl->id, op, need, o->entry, r->pool->e[o->entry].sms);
		o->shared = ve_coord_grant_shared(r->co, client);
	}
	if (r->o.grant) { /* no bindings here: count submissions for the detach trigger */
		cl->nbound++;
		if (r->o.detach && cl->id == r->victim && cl->nbound == r->detach_after)
			r->detach_due = true;
	}
	if (r->o.window || r->o.grant)
		check_preds_pipelined(r, cl, op, lane);
	else
		check_preds(r, cl, op, "submitted");
}

static void on_bind(void *arg, const struct ve_binding *b, uint32_t lane)
{
	struct run *r = arg;
	if (b->op.client >= (uint32_t)r->nclients) {
		fail_run(r, "binding for unknown client %u", b->op.client);
		return;
	}
	struct client *cl0 = &r->cl[b->op.client];
	int op;
	struct client *cl = client_of_desc(r, ve_vctx_desc(cl0->v, b->op.tok), &op);
	if (!cl || cl != cl0) {
		fail_run(r, "binding of client %u token %#llx names no tracked op", b->op.client,
			 (unsigned long long)b->op.tok);
		return;
	}
	struct opst *o = &cl->os[op];
	if (++o->nbind > 1 || o->nsub != 1)
		fail_run(r, "client %d op%d: binding %u after %u submissions", cl->id, op, o->nbind,
			 o->nsub);
	if (b->entry >= r->pool->nentries || VE_LANE_ENTRY(lane) != b->entry) {
		fail_run(r, "client %d op%d bound to entry %u but submitted on lane %#x", cl->id,
			 op, b->entry, lane);
		return;
	}
	const struct ve_pool_entry *pe = &r->pool->e[b->entry];
	uint32_t need = cl->p.wk[op] == W_COOP ? wl_cshapes[cl->p.shp[op]].min_sms : 1;
	if (pe->sms < need)
		fail_run(r, "client %d op%d needs %u SMs, bound to entry %u of %u", cl->id, op,
			 need, b->entry, pe->sms);
	if (pe->state != VE_ENTRY_LEASED || !is_sharer(r->pool, b->entry, cl->id))
		fail_run(r, "client %d op%d bound to entry %u (%s) it does not hold", cl->id, op,
			 b->entry, ve_entry_state_name(pe->state));
	o->shared = b->flags & VE_BIND_SHARE;
	o->entry = b->entry;
	o->bind_seq = ++r->bind_seq;
	cl->nbound++;
	r->wide_bindings += pe->sms > 8 && !(b->flags & VE_BIND_SHARE);
	if (r->o.detach && cl->id == r->victim && cl->nbound == r->detach_after)
		r->detach_due = true;
}

static void on_complete(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status)
{
	struct run *r = arg;
	if (client >= (uint32_t)r->nclients) {
		fail_run(r, "completion for unknown client %u", client);
		return;
	}
	struct client *cl = &r->cl[client];
	/* A token is live until its completion, so exactly one submitted and not
	 * yet completed op of this client carries it. */
	int op = RM_NONE;
	for (int i = 0; i < cl->p.m.nops; i++)
		if (cl->os[i].nsub == 1 && cl->os[i].ncomp == 0 && cl->tok[i] == tok) {
			if (op != RM_NONE)
				fail_run(r, "client %u: two live ops with token %#llx", client,
					 (unsigned long long)tok);
			op = i;
		}
	if (op == RM_NONE) {
		fail_run(r, "client %u: completion of token %#llx that is not in flight", client,
			 (unsigned long long)tok);
		return;
	}
	struct opst *o = &cl->os[op];
	o->ncomp++;
	if (o->nend != 1)
		fail_run(r, "client %u op%d completed with %u sim ends", client, op, o->nend);
	if (status != o->status)
		fail_run(r, "client %u op%d completed with status %d, the sim said %d", client, op,
			 status, o->status);
	rm_set_add(&cl->done, op);
}

static void on_event(void *arg, const struct ve_sim_event *ev)
{
	struct run *r = arg;
	int op;
	struct client *cl = client_of_desc(r, ev->desc, &op);
	if (!cl) {
		fail_run(r, "sim event for an untracked op");
		return;
	}
	struct opst *o = &cl->os[op];
	bool kernel = ev->desc->kind == VE_OP_KERNEL;
	if (ev->kind == VE_SIM_EV_START) {
		if (++o->nstart > 1)
			fail_run(r, "client %d op%d started twice", cl->id, op);
		if (o->nsub != 1)
			fail_run(r, "client %d op%d started after %u submissions", cl->id, op,
				 o->nsub);
		o->cookie = ev->cookie;
		if (r->o.window || r->o.grant)
			check_preds_ended(r, cl, op);
		else
			check_preds(r, cl, op, "started");
		if (!kernel)
			return;
		r->kernels++;
		const struct ve_pool_entry *pe = &r->pool->e[o->entry];
		if (ev->entry != o->entry || ev->leaves != pe->leaves || ev->nsms != pe->sms)
			fail_run(r,
				 "client %d op%d runs on entry %u (%u SMs), bound to %u (%u SMs)",
				 cl->id, op, ev->entry, ev->nsms, o->entry, pe->sms);
		/* A detached client left its shared leases at once (its queued
		 * work still runs there under the other sharers' lease). In grant
		 * mode the pool's leases are not used: the SM check below is it. */
		if (r->o.grant)
			;
		else if (pe->state != VE_ENTRY_LEASED && pe->state != VE_ENTRY_DRAINING)
			fail_run(r, "client %d op%d started on entry %u (%s)", cl->id, op, o->entry,
				 ve_entry_state_name(pe->state));
		else if (!cl->detached && !is_sharer(r->pool, o->entry, cl->id))
			fail_run(r,
				 "client %d op%d started on entry %u (%s) its client does not hold",
				 cl->id, op, o->entry, ve_entry_state_name(pe->state));
		/* (b): a common SM with a running kernel only on one shared lease. */
		for (int i = 0; i < r->nrn; i++) {
			struct running *q = &r->rn[i];
			bool overlap = false;
			for (int w = 0; w < VE_SIM_SM_WORDS; w++)
				overlap |= (q->sms[w] & ev->sms[w]) != 0;
			if (!overlap)
				continue;
			const struct opst *qo = &r->cl[q->client].os[q->op];
			const struct opst *later = qo->bind_seq > o->bind_seq ? qo : o;
			/* A pipelined kernel (no binding) joins its own client's
			 * lease only: the coordinator allows it while the client is
			 * alone on the GPU. */
			bool piped_ok = later->nbind == 0 && q->client == cl->id;
			if (r->o.grant) {
				/* Grants of different clients never share an SM, except
				 * where the policy shares them all (whole) or groups
				 * (fixed with more clients than groups); one client's
				 * kernels may (its streams run side by side). */
				/* Shared grants may overlap: where both clients hold one
				 * now, or held one when they submitted. */
				bool both = (ve_coord_grant_shared(r->co, (uint32_t)q->client) &&
					     ve_coord_grant_shared(r->co, (uint32_t)cl->id)) ||
					    (qo->shared && o->shared);
				/* Lent SMs run the borrower's short kernels beside the
				 * lender's (one of the two lent, never both: lends of
				 * different clients never overlap). */
				bool lend = q->client != cl->id && (qo->lent != o->lent);
				if (q->client != cl->id && qo->lent && o->lent)
					fail_run(r,
						 "client %d op%d (entry %u) and client %d op%d "
						 "(entry %u), both on lent SMs, run on a common SM",
						 cl->id, op, o->entry, q->client, q->op, q->entry);
				r->lent_overlaps += lend && !both;
				if (q->client != cl->id && !both && !lend)
					fail_run(r,
						 "client %d op%d (entry %u) and client %d op%d "
						 "(entry %u) of different grants run on a common SM",
						 cl->id, op, o->entry, q->client, q->op, q->entry);
				if (q->client != cl->id && !lend)
					r->shared_overlaps++;
				continue;
			}
			if (q->entry != o->entry || !(later->shared || piped_ok))
				fail_run(
				    r,
				    "client %d op%d (entry %u, %s) and client %d op%d (entry %u, "
				    "%s) run on a common SM and the later binding did not ask to "
				    "share",
				    cl->id, op, o->entry, o->shared ? "shared" : "exclusive",
				    q->client, q->op, q->entry,
				    qo->shared ? "shared" : "exclusive");
			r->shared_overlaps++;
		}
		if (r->nrn == MAX_RUNNING) {
			fail_run(r, "too many running kernels");
			return;
		}
		struct running *n = &r->rn[r->nrn++];
		n->client = cl->id;
		n->op = op;
		n->entry = o->entry;
		memcpy(n->sms, ev->sms, sizeof(n->sms));
		if ((uint64_t)r->nrn > r->max_conc)
			r->max_conc = (uint64_t)r->nrn;
	} else {
		if (++o->nend > 1 || o->nstart != 1)
			fail_run(r, "client %d op%d: end %u after %u starts", cl->id, op, o->nend,
				 o->nstart);
		if (ev->cookie != o->cookie)
			fail_run(r, "client %d op%d started with cookie %llu and ended with %llu",
				 cl->id, op, (unsigned long long)o->cookie,
				 (unsigned long long)ev->cookie);
		o->status = ev->status;
		r->faults_seen += ev->status != 0;
		rm_set_add(&cl->ended, op);
		if (!kernel)
			return;
		for (int i = 0; i < r->nrn; i++)
			if (r->rn[i].client == cl->id && r->rn[i].op == op) {
				r->rn[i] = r->rn[--r->nrn];
				return;
			}
		fail_run(r, "client %d op%d ended but was not running", cl->id, op);
	}
}

/* ------------------------------------------------------------------ calls */

static void check_query(struct run *r, struct client *cl, const struct wl_call *c, int rc)
{
	int miss = first_missing(cl, &c->req);
	r->queries++;
	bool faulted = ve_vctx_error(cl->v) != 0;
	if (rc == -EIO && faulted)
		rc = 0; /* a sticky error reports -EIO where it would report success */
	if (rc == 0 && miss != RM_NONE)
		fail_run(r, "client %d: query reported done but required op%d is incomplete",
			 cl->id, miss);
	else if (rc == -EBUSY && miss == RM_NONE)
		fail_run(r, "client %d: query reported busy although every required op completed",
			 cl->id);
	else if (rc != 0 && rc != -EBUSY)
		fail_run(r, "client %d: query returned %d", cl->id, rc);
}

static void issue(struct run *r, struct client *cl)
{
	const struct wl_call *c = &cl->p.c[cl->pc++];
	int rc = 0;
	switch (c->kind) {
	case C_WORK: {
		struct ve_desc d;
		build_desc(cl, c->op, &d);
		rc = ve_vctx_submit(cl->v, cl->sh[c->s], &d, VE_SUBMIT_NONBLOCK, &cl->tok[c->op]);
		break;
	}
	case C_RECORD:
		rc =
		    ve_vctx_event_record(cl->v, cl->eh[c->e], cl->sh[c->s], code_of(cl->id, c->op));
		if (rc == 0 && rm_set_has(&cl->p.ext, c->op))
			rc = ve_vctx_event_generation(cl->v, cl->eh[c->e], NULL, &cl->tok[c->op]);
		break;
	case C_WAIT:
		rc = ve_vctx_stream_wait_event(cl->v, cl->sh[c->s], cl->eh[c->e]);
		break;
	case C_SQUERY:
		check_query(r, cl, c, ve_vctx_stream_query(cl->v, cl->sh[c->s]));
		break;
	default:
		check_query(r, cl, c, ve_vctx_event_query(cl->v, cl->eh[c->e]));
		break;
	}
	if (rc)
		fail_run(r, "client %d call #%d (kind %d) returned %d", cl->id, cl->pc - 1, c->kind,
			 rc);
}

/* ------------------------------------------------------------------ a run */

static void print_listing(const struct run *r)
{
	if (r->o.grant) {
		ve_dispatcher_dump(r->d, stderr);
		for (int c = 0; c < r->nclients; c++) {
			uint16_t e;
			uint64_t gen;
			ve_coord_grant(r->co, (uint32_t)c, &e, &gen);
			fprintf(stderr, "  coordinator: client %d grant %d gen %llu\n", c,
				e == VE_POOL_NONE ? -1 : (int)e, (unsigned long long)gen);
		}
	}
	for (int c = 0; c < r->nclients; c++) {
		const struct client *cl = &r->cl[c];
		fprintf(stderr, "client %d: %d calls (%d issued), %d ops%s\n", c, cl->p.ncalls,
			cl->pc, cl->p.m.nops, cl->detached ? ", detached" : "");
		for (int i = 0; i < cl->p.m.nops; i++) {
			if (!rm_set_has(&cl->p.ext, i))
				continue;
			const struct opst *o = &cl->os[i];
			fprintf(stderr, "  ");
			rm_print_op(&cl->p.m, i, stderr);
			fprintf(stderr,
				" wk=%d sub=%u bind=%u start=%u end=%u comp=%u host=%u entry=%u%s "
				"st=%d\n",
				cl->p.wk[i], o->nsub, o->nbind, o->nstart, o->nend, o->ncomp,
				o->nhost, o->entry, o->shared ? " shared" : "", o->status);
		}
	}
	ve_pool_dump(r->pool, stderr);
	struct ve_sim_stats ss;
	struct ve_dispatcher_stats ds;
	struct ve_coord_stats cs;
	ve_sim_stats(r->b, &ss);
	ve_dispatcher_stats(r->d, &ds);
	ve_coord_stats(r->co, &cs);
	const struct ve_policy_view *v = ve_coord_view(r->co);
	fprintf(stderr,
		"coordinator: %u ready, %llu rounds, %llu picks, %llu bindings, %llu rejects, "
		"%llu defers, %llu failed submits, %llu completions; dispatcher: %llu submitted, "
		"%llu submit failures, %u in flight; sim: %llu submit calls, %llu injected "
		"failures, now %llu ns\n",
		v->nready, (unsigned long long)cs.rounds, (unsigned long long)cs.picks,
		(unsigned long long)cs.bindings, (unsigned long long)cs.rejects,
		(unsigned long long)cs.defers, (unsigned long long)cs.failed_submits,
		(unsigned long long)cs.completions, (unsigned long long)ds.submitted,
		(unsigned long long)ds.submit_failures, ds.inflight,
		(unsigned long long)ss.submit_calls, (unsigned long long)ss.submit_faults,
		(unsigned long long)ss.now_ns);
	for (uint32_t s = 0; s < v->nops; s++)
		if (v->ops[s].in_use)
			fprintf(stderr,
				"  ready slot %u: client %u key %016llx blocks %llu min_sms %u\n",
				s, v->ops[s].client, (unsigned long long)v->ops[s].key,
				(unsigned long long)v->ops[s].blocks, v->ops[s].min_sms);
}

/* No entry leased to or reserved for the victim; a DRAINING entry it still
 * shares is allowed only while other clients' work runs there. */
static void check_victim_released(struct run *r, bool at_end)
{
	const struct ve_pool *p = r->pool;
	int32_t v = r->victim;
	if (r->o.grant) {
		uint16_t e;
		uint64_t gen;
		ve_coord_grant(r->co, (uint32_t)v, &e, &gen);
		if (e != VE_POOL_NONE)
			fail_run(r, "detached client %d still holds a grant of entry %u", v, e);
		return;
	}
	for (uint32_t e = 0; e < p->nentries; e++) {
		const struct ve_pool_entry *pe = &p->e[e];
		if (pe->reserve_for == v)
			fail_run(r, "entry %u still reserved for detached client %d", e, v);
		if (!is_sharer(p, e, v) && pe->holder != v)
			continue;
		if (pe->state == VE_ENTRY_LEASED || at_end || pe->outstanding == 0)
			fail_run(r,
				 "entry %u (%s, %u outstanding) still held by detached client %d",
				 e, ve_entry_state_name(pe->state), pe->outstanding, v);
	}
}

static uint32_t victim_inflight(const struct run *r)
{
	const struct client *cl = &r->cl[r->victim];
	uint32_t n = 0;
	for (int i = 0; i < cl->p.m.nops; i++)
		n += cl->os[i].nsub - cl->os[i].ncomp;
	return n;
}

static void do_detach(struct run *r)
{
	struct client *cl = &r->cl[r->victim];
	g_tot.dropped += ve_coord_view(r->co)->clients[r->victim].nready;
	int rc = ve_dispatcher_detach(r->d, (uint32_t)r->victim);
	if (rc) {
		fail_run(r, "detach: %d", rc);
		return;
	}
	cl->detached = true;
	r->detach_done = true;
	const struct ve_policy_view *v = ve_coord_view(r->co);
	if (v->clients[r->victim].active || v->clients[r->victim].nready)
		fail_run(r, "detached client %d still active (%u ready ops in the coordinator)",
			 r->victim, v->clients[r->victim].nready);
	if (ve_dispatcher_detach(r->d, (uint32_t)r->victim) != -ENOENT)
		fail_run(r, "second detach of client %d accepted", r->victim);
	g_tot.detaches++;
}

static void drive(struct run *r, uint64_t *rng)
{
	int stall = 0;
	for (long it = 0; it < 5000000 && !r->failed; it++) {
		bool issued = false, all_issued = true;
		for (int c = 0; c < r->nclients; c++) {
			struct client *cl = &r->cl[c];
			if (cl->detached)
				continue;
			for (int k = (int)rnd(rng, 5); k > 0 && cl->pc < cl->p.ncalls; k--) {
				issue(r, cl);
				issued = true;
			}
			all_issued &= cl->pc == cl->p.ncalls;
		}
		if (!r->armed && r->bind_seq >= 10) {
			/* Faults relative to now, once work is flowing. */
			r->armed = true;
			struct ve_sim_stats ss;
			ve_sim_stats(r->b, &ss);
			for (int k = 0; k < VE_OP_KIND_MAX; k++)
				r->accepted_at_arm += ss.submitted[k];
			if (r->o.fail_submit_nth)
				ve_sim_fail_submit(r->b, r->o.fail_submit_nth, 0);
			if (r->o.fail_exec_nth)
				ve_sim_fail_exec(r->b, r->o.fail_exec_nth, 0);
		}
		if (r->o.detach && r->cl[r->victim].pc == r->cl[r->victim].p.ncalls)
			r->detach_due = true; /* a victim with few kernels: at its end */
		/* Detach while the victim has ready ops in the coordinator, if that
		 * happens soon, so they are dropped. */
		if (r->detach_due && !r->detach_done &&
		    (r->o.grant || ve_coord_view(r->co)->clients[r->victim].nready ||
		     ++r->detach_wait > 64))
			do_detach(r); /* grant mode: no ready queue in the coordinator */
		int moved = 0;
		for (int k = 0; k < 16; k++) {
			int n = ve_dispatcher_poll(r->d);
			if (n <= 0)
				break;
			moved += n;
		}
		if (r->detach_done && !r->victim_checked && victim_inflight(r) == 0) {
			r->victim_checked = true;
			check_victim_released(r, false);
		}
		uint64_t now = ve_sim_now(r->b), t;
		if (r->detach_due && !r->detach_done && rnd(rng, 2))
			continue; /* let the victim's ready ops pile up */
		if (ve_sim_peek(r->b, &t) == 0) {
			if (t > now && rnd(rng, 4) == 0)
				ve_sim_advance_to(
				    r->b, now + 1 + rnd(rng, (uint32_t)VE_MIN(t - now, 1u << 30)));
			else
				ve_sim_advance(r->b, NULL);
			stall = 0;
			continue;
		}
		if (issued || moved) {
			stall = 0;
			continue;
		}
		if (all_issued && ve_dispatcher_quiescent(r->d))
			return;
		/* Nothing runs and nothing moved, yet work is left: wall time still
		 * passes on an idle GPU (time-based policy decisions may be waiting
		 * for it), up to 100 ms of it. */
		if (++stall > 1000) {
			fail_run(r, "stuck: nothing runs, nothing moves, and work is left");
			return;
		}
		ve_sim_advance_to(r->b, now + 100000);
	}
	if (!r->failed)
		fail_run(r, "did not finish");
}

static void final_checks(struct run *r)
{
	struct ve_sim_stats ss;
	struct ve_dispatcher_stats ds;
	struct ve_coord_stats cs;
	ve_sim_stats(r->b, &ss);
	ve_dispatcher_stats(r->d, &ds);
	ve_coord_stats(r->co, &cs);
	int faulted = -1;
	for (int c = 0; c < r->nclients && !r->failed; c++) {
		struct client *cl = &r->cl[c];
		for (int i = 0; i < cl->p.m.nops && !r->failed; i++) {
			if (!rm_set_has(&cl->p.ext, i))
				continue;
			const struct opst *o = &cl->os[i];
			bool host = cl->p.wk[i] == W_HOST && r->cl[c].p.m.op[i].kind == RM_OP_WORK;
			if (o->status) {
				if (faulted >= 0 && faulted != c)
					fail_run(r, "faults in two clients");
				faulted = c;
			}
			if (cl->detached) {
				/* Whatever was submitted ran to its end exactly once. */
				g_tot.never_run += !o->nsub && !o->nhost;
				if (o->nsub > 1 || o->nstart != o->nsub || o->nend != o->nsub ||
				    o->ncomp != o->nsub || o->nhost > 1)
					fail_run(r,
						 "detached client %d op%d: sub %u start %u end %u "
						 "comp %u host %u",
						 c, i, o->nsub, o->nstart, o->nend, o->ncomp,
						 o->nhost);
				continue;
			}
			if (host
				? (o->nhost != 1 || o->nsub)
				: (o->nsub != 1 || o->nstart != 1 || o->nend != 1 || o->ncomp != 1))
				fail_run(
				    r,
				    "client %d op%d lost or duplicated: sub %u start %u end %u "
				    "comp %u host %u",
				    c, i, o->nsub, o->nstart, o->nend, o->ncomp, o->nhost);
		}
		if (r->failed || cl->detached)
			continue;
		struct ve_vctx_stats vs;
		ve_vctx_stats(cl->v, &vs);
		int q = ve_vctx_ctx_query(cl->v);
		int want = faulted == c ? -EIO : 0;
		if (vs.live_ops || vs.ready_ops || q != want)
			fail_run(r,
				 "client %d not idle at the end: %u live, %u ready, ctx_query %d",
				 c, vs.live_ops, vs.ready_ops, q);
	}
	if (r->failed)
		return;
	/* (e): the fault is the sticky error of its client and only of it. */
	for (int c = 0; c < r->nclients; c++) {
		int e = ve_vctx_error(r->cl[c].v);
		if (e != (c == faulted ? -EFAULT : 0))
			fail_run(r, "client %d sticky error %d (faulted client: %d)", c, e,
				 faulted);
	}
	uint64_t accepted = 0;
	for (int k = 0; k < VE_OP_KIND_MAX; k++)
		accepted += ss.submitted[k];
	/* The fault hits the nth op accepted after arming, if there was one. */
	bool fault_due =
	    r->o.fail_exec_nth && r->armed && accepted - r->accepted_at_arm >= r->o.fail_exec_nth;
	if (r->faults_seen != (fault_due ? 1u : 0u) || (fault_due && faulted < 0))
		fail_run(r, "expected %d execution fault(s), saw %llu", fault_due ? 1 : 0,
			 (unsigned long long)r->faults_seen);
	/* (d): every failure the dispatcher saw was injected. */
	if (ds.submit_failures != ss.submit_faults)
		fail_run(r, "dispatcher saw %llu submit failures, the sim injected %llu",
			 (unsigned long long)ds.submit_failures,
			 (unsigned long long)ss.submit_faults);
	if (!r->o.window && !r->o.grant && (cs.pipelined || ds.pipelined))
		fail_run(r, "pipelined with window 0");
	g_tot.pipelined += ds.pipelined;
	g_tot.local_binds += ds.local_binds;
	g_tot.lend_binds += ds.lend_binds;
	g_tot.grant_changes += cs.grant_changes;
	g_tot.deferred += ds.deferred;
	if (r->o.grant && (cs.bindings || cs.pipelined))
		fail_run(r, "grant mode, but the coordinator bound %llu ops op by op",
			 (unsigned long long)cs.bindings);
	if (cs.bindings + cs.pipelined != cs.failed_submits + cs.completions)
		fail_run(r,
			 "coordinator: %llu bindings + %llu pipelined, %llu failed submissions, "
			 "%llu completions",
			 (unsigned long long)cs.bindings, (unsigned long long)cs.pipelined,
			 (unsigned long long)cs.failed_submits, (unsigned long long)cs.completions);
	if (r->nrn)
		fail_run(r, "%d kernels still running", r->nrn);
	/* The pool is idle again, except reservations (active or pending) of
	 * an attached latency client (tpot: the standing one, and a wider one
	 * prepared for a deadline that has not passed yet). */
	bool lat = strncmp(r->policy, "tpot", 4) == 0 && !r->cl[0].detached;
	for (uint32_t e = 0; e < r->pool->nentries; e++) {
		const struct ve_pool_entry *pe = &r->pool->e[e];
		bool ok = pe->outstanding == 0 &&
			  ((pe->state == VE_ENTRY_IDLE && pe->reserve_for == VE_HOLDER_NONE) ||
			   (lat && pe->reserve_for == 0 &&
			    (pe->state == VE_ENTRY_RESERVED || pe->state == VE_ENTRY_IDLE)));
		if (!ok)
			fail_run(r, "entry %u left %s (holder %d, reserved for %d, %u outstanding)",
				 e, ve_entry_state_name(pe->state), pe->holder, pe->reserve_for,
				 pe->outstanding);
	}
	if (r->o.detach) {
		if (!r->detach_done)
			fail_run(r, "the detach never happened");
		else
			check_victim_released(r, true);
	}
	g_tot.submit_faults += ss.submit_faults;
	g_tot.coord_failed += cs.failed_submits;
	g_tot.gate_closes += cs.gate_closes;
	g_tot.reservations += cs.reservations;
	g_tot.exec_faults += r->faults_seen;
}

/* Runs one seed under one policy; returns false (after printing why and how to
 * replay) if a property failed. */
static bool run_one(const char *test, const char *policy, uint64_t seed, const struct opts *o)
{
	struct run *r = &g_run;
	memset(r, 0, sizeof(*r));
	r->seed = seed;
	r->policy = policy;
	r->o = *o;
	uint64_t rng = seed;
	/* With pipelining, single clients too: it only happens while a client
	 * is alone on the GPU. */
	r->nclients = o->window || o->grant ? 1 + (int)rnd(&rng, MAX_CLIENTS)
					    : 2 + (int)rnd(&rng, MAX_CLIENTS - 1);
	for (int c = 0; c < r->nclients; c++)
		gen_client(&r->cl[c], c, &rng);

	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = seed;
	sc.capacity = 4096; /* small tables: sanitizer builds allocate per run */
	sc.jitter = 0.05 + 0.4 * (double)rnd(&rng, 1000) / 1000.0;
	sc.submit_latency_ns = rnd(&rng, 4) ? rnd(&rng, 4000) : 0;
	sc.fail_submit_prob = o->fail_submit_prob;
	sc.defer_reports = o->defer;
	sc.on_event = on_event;
	sc.on_event_arg = r;
	int rc = ve_sim_create(&sc, &r->b);
	VE_CHECK_EQ(rc, 0);
	struct ve_gpu_info gi;
	r->b->ops->info(r->b, &gi);
	char err[256];
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .policy = policy,
					 .max_clients = 8,
					 .seed = seed,
					 .log_decisions = getenv("VE_DT_LOG") != NULL,
					 .per_op = !o->grant,
					 /* virtual ns: from a tick per pass to a few per run */
					 .tick_ns = o->grant ? 1 + rnd(&rng, 200000) : 0,
					 .dispatch = {.lanes_per_entry = 1 + rnd(&rng, 4),
						      .copy_lanes = 1 + rnd(&rng, 4),
						      .max_inflight = 4096,
						      .window = o->window,
						      .ahead_ns = o->grant && rnd(&rng, 4)
								      ? 1 + rnd(&rng, 300000)
								      : 0,
						      .ahead_max = 1 + rnd(&rng, 64),
						      .lend_ns = 1 + rnd(&rng, 2000000),
						      .mark_every = 1 + rnd(&rng, 16),
						      .idle_flush_ns = 1 + rnd(&rng, 50000),
						      .host_inline = true,
						      .on_submit = on_submit,
						      .on_complete = on_complete,
						      .on_bind = on_bind,
						      .observer_arg = r}};
	rc = ve_runtime_create(&rcfg, r->b, &r->rt, err, sizeof(err));
	VE_CHECK_MSG(rc == 0, "runtime (%s): %s", policy, err);
	r->co = ve_runtime_coord(r->rt);
	r->d = ve_runtime_dispatcher(r->rt);
	r->pool = ve_runtime_pool(r->rt);
	bool tpot = strncmp(policy, "tpot", 4) == 0;
	for (int c = 0; c < r->nclients; c++) {
		struct client *cl = &r->cl[c];
		struct ve_vctx_config vc = {.client_id = (uint32_t)c, .max_ops = 2048};
		VE_CHECK_EQ(ve_vctx_create(&vc, &cl->v), 0);
		for (int s = 1; s < cl->p.m.nstreams; s++) {
			int k = cl->p.m.st[s].kind;
			if (k == RM_PER_THREAD)
				rc = ve_vctx_stream_per_thread(cl->v, cl->p.skey[s], &cl->sh[s]);
			else
				rc = ve_vctx_stream_create(cl->v,
							   k == RM_NONBLOCKING
							       ? VE_STREAM_NON_BLOCKING
							       : VE_STREAM_DEFAULT,
							   cl->p.sprio[s], &cl->sh[s]);
			VE_CHECK_EQ(rc, 0);
		}
		for (int e = 0; e < cl->p.m.nevents; e++)
			VE_CHECK_EQ(ve_vctx_event_create(cl->v,
							 cl->p.m.ev[e].timing
							     ? VE_EVENT_DEFAULT
							     : VE_EVENT_DISABLE_TIMING,
							 &cl->eh[e]),
				    0);
		/* Under tpot client 0 is a latency-class client (decode). */
		VE_CHECK_EQ(ve_runtime_attach(r->rt, cl->v, (uint32_t)c,
					      tpot && c == 0 ? VE_READY_LATENCY : 0),
			    0);
	}
	if (o->detach) {
		r->victim = tpot ? 0 : (int)rnd(&rng, (uint32_t)r->nclients);
		r->detach_after = 1 + rnd(&rng, 12);
	}

	drive(r, &rng);
	if (!r->failed)
		final_checks(r);
	bool ok = !r->failed;
	if (!ok) {
		fprintf(stderr, "\n==== %s: policy %s seed %#llx: %s\n", test, policy,
			(unsigned long long)seed, r->err);
		print_listing(r);
		fprintf(stderr, "replay: VE_SEED=%#llx ./test_dispatch %s\n",
			(unsigned long long)seed, test);
	}
	g_tot.runs++;
	for (int c = 0; c < r->nclients; c++)
		g_tot.ops += (uint64_t)r->cl[c].p.m.nops;
	g_tot.kernels += r->kernels;
	g_tot.queries += r->queries;
	g_tot.shared_overlaps += r->shared_overlaps;
	g_tot.lent_overlaps += r->lent_overlaps;
	g_tot.wide += r->wide_bindings;
	if (r->max_conc > g_tot.max_conc)
		g_tot.max_conc = r->max_conc;
	ve_runtime_destroy(r->rt);
	for (int c = 0; c < r->nclients; c++)
		ve_vctx_destroy(r->cl[c].v);
	r->b->ops->destroy(r->b);
	return ok;
}

/* Runs every policy in 'pols' over the seeds of this test. */
static void run_all(const char *test, uint64_t base, const char *const *pols, int npol,
		    struct opts o, void (*tweak)(struct opts *, uint64_t))
{
	long n = ve_test_env_long("VE_DISPATCH_N", DT_SANITIZED ? 6 : 30);
	bool replay = getenv("VE_SEED") != NULL;
	if (replay)
		n = 1;
	memset(&g_tot, 0, sizeof(g_tot));
	int failures = 0;
	const char *only = getenv("VE_DT_POLICY"); /* replay one policy */
	for (int p = 0; p < npol; p++) {
		if (only && strcmp(only, pols[p]) != 0)
			continue;
		uint64_t seeds[64];
		long ns = n < 64 ? n : 64;
		for (long i = 0; i < ns; i++)
			seeds[i] = replay ? ve_test_seed(0) : ve__mix64(base + (uint64_t)i);
		printf("# %s %s: seeds", test, pols[p]);
		for (long i = 0; i < ns; i++)
			printf(" %#llx", (unsigned long long)seeds[i]);
		printf("\n");
		for (long i = 0; i < ns; i++) {
			struct opts oo = o;
			if (tweak)
				tweak(&oo, seeds[i]);
			if (!run_one(test, pols[p], seeds[i], &oo))
				failures++;
		}
	}
	printf("# %s: %llu runs, %llu ops, %llu kernels, %llu SM-sharing overlaps (all allowed)"
	       ", %llu exclusive bindings wider than a leaf, up to %llu kernels at once, "
	       "%llu injected submit failures (%llu of bindings), %llu execution faults, %llu "
	       "detaches (%llu ready ops dropped, %llu ops never ran), %llu queries, %llu "
	       "reservations, %llu gates closed by plans, %llu pipelined, %llu kernels on lent "
	       "SMs (%llu beside the lender's)\n",
	       test, (unsigned long long)g_tot.runs, (unsigned long long)g_tot.ops,
	       (unsigned long long)g_tot.kernels, (unsigned long long)g_tot.shared_overlaps,
	       (unsigned long long)g_tot.wide, (unsigned long long)g_tot.max_conc,
	       (unsigned long long)g_tot.submit_faults, (unsigned long long)g_tot.coord_failed,
	       (unsigned long long)g_tot.exec_faults, (unsigned long long)g_tot.detaches,
	       (unsigned long long)g_tot.dropped, (unsigned long long)g_tot.never_run,
	       (unsigned long long)g_tot.queries, (unsigned long long)g_tot.reservations,
	       (unsigned long long)g_tot.gate_closes, (unsigned long long)g_tot.pipelined,
	       (unsigned long long)g_tot.lend_binds, (unsigned long long)g_tot.lent_overlaps);
	VE_CHECK_MSG(failures == 0, "%d run(s) failed, see above", failures);
}

/* ------------------------------------------------------------------ tests */

/* (a), (b), (c) under each policy, with a few submit failures on half the seeds. */
static void tweak_random(struct opts *o, uint64_t seed)
{
	o->fail_submit_prob = (seed & 1) ? 0.03 : 0;
}

VE_TEST(dispatch_random_chaos)
{
	run_all("dispatch_random_chaos", 0xc4a05, (const char *const[]){"chaos"}, 1,
		(struct opts){0}, tweak_random);
	/* chaos shares entries at random: the overlap check must have seen it. */
	VE_CHECK(g_tot.shared_overlaps > 0);
}

VE_TEST(dispatch_random_tput)
{
	run_all("dispatch_random_tput", 0x7b07, (const char *const[]){"tput"}, 1, (struct opts){0},
		tweak_random);
	/* tput never shares, and widens scaling kernels. */
	VE_CHECK_EQ(g_tot.shared_overlaps, 0);
	VE_CHECK(g_tot.wide > 0);
	VE_CHECK(g_tot.max_conc > 1);
}

VE_TEST(dispatch_random_tpot)
{
	/* A tight TPOT target puts decodes at risk: wider entries are prepared
	 * by closing best-effort gates while work still runs. */
	run_all("dispatch_random_tpot", 0x7907, (const char *const[]){"tpot", "tpot:tpot_ms=0.05"},
		2, (struct opts){0}, tweak_random);
	VE_CHECK(g_tot.reservations > 0);
	VE_CHECK(g_tot.gate_closes > 0);
}

VE_TEST(dispatch_random_fixed)
{
	run_all("dispatch_random_fixed", 0xf1ed, (const char *const[]){"fixed"}, 1,
		(struct opts){0}, tweak_random);
	VE_CHECK(g_tot.shared_overlaps > 0);
}

VE_TEST(dispatch_random_whole)
{
	run_all("dispatch_random_whole", 0x3401e, (const char *const[]){"whole"}, 1,
		(struct opts){0}, tweak_random);
	VE_CHECK(g_tot.shared_overlaps > 0);
}

/* (d) */
static void tweak_submit(struct opts *o, uint64_t seed)
{
	o->fail_submit_prob = 0.15 + 0.1 * (double)(seed % 3);
	o->fail_submit_nth = 1 + seed % 7;
}

VE_TEST(dispatch_submit_failures)
{
	run_all("dispatch_submit_failures", 0x5b3f, all_policies, NPOL, (struct opts){0},
		tweak_submit);
	VE_CHECK(g_tot.submit_faults > 0);
	VE_CHECK(g_tot.coord_failed > 0); /* compute bindings failed, not just copies */
}

/* (e) */
static void tweak_fault(struct opts *o, uint64_t seed)
{
	o->fail_exec_nth = 1 + seed % 23;
}

VE_TEST(dispatch_exec_fault)
{
	run_all("dispatch_exec_fault", 0xfa017, all_policies, NPOL, (struct opts){0}, tweak_fault);
	VE_CHECK(g_tot.exec_faults > 0);
}

/* (f) */
VE_TEST(dispatch_detach)
{
	run_all("dispatch_detach", 0xde7a, all_policies, NPOL, (struct opts){.detach = true}, NULL);
	VE_CHECK(g_tot.detaches > 0);
	VE_CHECK(g_tot.dropped > 0);
}

/* Bounded pipelining (window K): an op may be submitted behind its
 * unfinished predecessors on their lane; H still holds on the device. */
static void tweak_window(struct opts *o, uint64_t seed)
{
	o->window = 1 + (uint32_t)(seed % 3);
	o->fail_submit_prob = (seed & 8) ? 0.05 : 0;
}

VE_TEST(dispatch_pipelined)
{
	run_all("dispatch_pipelined", 0x919e, all_policies, NPOL, (struct opts){0}, tweak_window);
	VE_CHECK(g_tot.pipelined > 0);
}

/* Grant mode: the coordinator grants entries each tick, the dispatcher binds
 * ready ops to its client's grant and submits successors ahead on the lane;
 * completions deferred and reported in batches (the sim defers them for
 * real on half the seeds). HB order (a)/(c), no common SM between grants of
 * different clients (b), nothing lost (d, e, f). */
static void tweak_grant(struct opts *o, uint64_t seed)
{
	o->grant = true;
	o->defer = seed & 2;
	o->fail_submit_prob = (seed & 4) ? 0.05 : 0;
}

VE_TEST(dispatch_grant)
{
	run_all("dispatch_grant", 0x96a7, all_policies, NPOL, (struct opts){0}, tweak_grant);
	VE_CHECK(g_tot.local_binds > 0);
	VE_CHECK(g_tot.lend_binds > 0); /* tput and tpot lend idle SMs */
	VE_CHECK(g_tot.grant_changes > 0);
	VE_CHECK(g_tot.pipelined > 0);
	VE_CHECK(g_tot.deferred > 0);
}

static void tweak_grant_faults(struct opts *o, uint64_t seed)
{
	tweak_grant(o, seed);
	o->fail_submit_prob = 0;
	o->fail_exec_nth = 1 + seed % 23;
}

VE_TEST(dispatch_grant_exec_fault)
{
	run_all("dispatch_grant_exec_fault", 0x96a8, all_policies, NPOL, (struct opts){0},
		tweak_grant_faults);
	VE_CHECK(g_tot.exec_faults > 0);
}

VE_TEST(dispatch_grant_detach)
{
	run_all("dispatch_grant_detach", 0x96a9, all_policies, NPOL,
		(struct opts){.detach = true, .grant = true}, NULL);
	VE_CHECK(g_tot.detaches > 0);
}

/* Grant mode, tput moving clients between split and shared grants (auto
 * sharing with no busy threshold, and always shared). */
VE_TEST(dispatch_grant_share)
{
	run_all("dispatch_grant_share", 0x96aa,
		(const char *const[]){"tput:share_op_us=0", "tput:share=1"}, 2, (struct opts){0},
		tweak_grant);
	VE_CHECK(g_tot.local_binds > 0);
}

/* Submit-ahead on a lane that has never reported a completion: its time per
 * op is unknown, so while another client may want the SMs back it holds at
 * most two kernels (one running, one queued), not the bound divided by a
 * guessed 10 us. On the H200 a server's first kernels queued behind a
 * guess kept a grant that ved took away from draining for 3.4 s. Once a
 * completion measured the lane, the time bound decides. */
VE_TEST(grant_ahead_unmeasured_lane_holds_two_kernels)
{
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = 11;
	struct ve_backend *b;
	VE_CHECK_EQ(ve_sim_create(&sc, &b), 0);
	char err[512] = "";
	struct ve_runtime_config rcfg = {
	    .daemon = "0",
	    .policy = "tput",
	    .max_clients = 2,
	    .dispatch = {.host_inline = true, .ahead_ns = 150000, .ahead_max = 256}};
	struct ve_runtime *rt;
	VE_CHECK_MSG(ve_runtime_create(&rcfg, b, &rt, err, sizeof(err)) == 0, "%s", err);
	struct ve_vctx *v[2];
	ve_stream s;
	for (int c = 0; c < 2; c++) {
		struct ve_vctx_config vc = {.client_id = (uint32_t)c, .max_ops = 1024};
		VE_CHECK_EQ(ve_vctx_create(&vc, &v[c]), 0);
		VE_CHECK_EQ(ve_runtime_attach(rt, v[c], (uint32_t)c, 0), 0);
	}
	VE_CHECK_EQ(ve_vctx_stream_create(v[0], VE_STREAM_NON_BLOCKING, 0, &s), 0);
	/* The other client has work too: the GPU is contended. */
	ve_stream s1;
	VE_CHECK_EQ(ve_vctx_stream_create(v[1], VE_STREAM_NON_BLOCKING, 0, &s1), 0);
	struct ve_desc k = {.kind = VE_OP_KERNEL};
	k.u.k.fn = 0x200;
	k.u.k.grid = (struct ve_dim3){4096, 1, 1};
	k.u.k.block = (struct ve_dim3){256, 1, 1};
	VE_CHECK_EQ(ve_vctx_submit(v[1], s1, &k, 0, NULL), 0);
	for (int i = 0; i < 40; i++)
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &k, 0, NULL), 0);
	struct ve_dispatcher *d = ve_runtime_dispatcher(rt);
	/* Passes without device time moving: nothing completes. */
	for (int i = 0; i < 200; i++)
		ve_dispatcher_poll(d);
	uint32_t inflight = ve_dispatcher_inflight(d);
	printf("# in flight before any completion: %u (2 clients, one lane each)\n", inflight);
	VE_CHECK(inflight >= 2);
	VE_CHECK_MSG(inflight <= 4, "%u kernels in flight on unmeasured lanes", inflight);
	sim_drive_until_done(d, b, v, 2);
	for (int c = 0; c < 2; c++)
		VE_CHECK_EQ(ve_vctx_ctx_query(v[c]), 0);
	ve_runtime_destroy(rt);
	for (int c = 0; c < 2; c++)
		ve_vctx_destroy(v[c]);
	b->ops->destroy(b);
}

/* Kernels of very different lengths on one stream, as a training step has:
 * GEMMs back to back, then short elementwise kernels. RK_LONG takes 3 ms on
 * the whole GPU (4 waves of 750 us), 49.5 ms on an 8-SM leaf; RK_SHORT 7 us
 * anywhere. */
#define RK_LONG	 0x300
#define RK_SHORT 0x301

static int rk_model(void *arg, const struct ve_desc *d, struct ve_sim_kernel_params *p)
{
	(void)arg;
	p->blocks_per_sm = 1;
	p->t_launch_ns = 2000;
	p->t_wave_ns = d->u.k.fn == RK_LONG ? 750000 : 5000;
	return 0;
}

static void rk_kernel(struct ve_desc *k, uint64_t fn)
{
	memset(k, 0, sizeof(*k));
	k->kind = VE_OP_KERNEL;
	k->u.k.fn = fn;
	k->u.k.grid = (struct ve_dim3){fn == RK_LONG ? 132 * 4 : 8, 1, 1};
	k->u.k.block = (struct ve_dim3){256, 1, 1};
}

/* Client 0's long kernels in flight, and where its kernels ran (on its
 * grant or on a lend), seen through the dispatcher's hooks. */
struct rk_watch {
	ve_tok longs[64];
	uint32_t nlongs, inflight, max_inflight;
	uint32_t short_lent, long_lent, short_own, long_own; /* where client 0's kernels ran */
	struct ve_coord *co;				     /* the run's coordinator */
};

static void rk_on_submit(void *arg, uint32_t client, ve_tok tok, uint32_t lane,
			 const struct ve_desc *desc)
{
	struct rk_watch *w = arg;
	if (client != 0 || desc->kind != VE_OP_KERNEL)
		return;
	uint16_t ge, gl = ve_coord_lend(w->co, 0);
	uint64_t gen;
	ve_coord_grant(w->co, 0, &ge, &gen);
	bool lent = VE_LANE_ENTRY(lane) == gl && gl != ge;
	bool lng = desc->u.k.fn == RK_LONG;
	*(lng ? (lent ? &w->long_lent : &w->long_own) : (lent ? &w->short_lent : &w->short_own)) +=
	    1;
	if (!lng || w->nlongs == VE_ARRAY_SIZE(w->longs))
		return;
	w->longs[w->nlongs++] = tok;
	if (++w->inflight > w->max_inflight)
		w->max_inflight = w->inflight;
}

static void rk_on_complete(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status)
{
	struct rk_watch *w = arg;
	(void)lane;
	(void)status;
	for (uint32_t i = 0; client == 0 && i < w->nlongs; i++)
		if (w->longs[i] == tok)
			w->inflight--;
}

/* Two clients in grant mode, client 0 running 'iters' times [2 long, 10
 * short] (after 'lead' short ones), client 1 'n1' short kernels (attached
 * with 'flags1'); returns the coordinator's figures and what the hooks saw.
 * nleaves 2: two 66-SM leaves; else the H200 split. */
struct rk_opts {
	const char *policy;
	uint32_t nleaves;
	int lead, iters, n1;
	uint32_t flags1;
};

static void rk_run(const struct rk_opts *o, struct ve_coord_stats *cs, struct rk_watch *w)
{
	const char *policy = o->policy;
	uint32_t nleaves = o->nleaves;
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = 5;
	sc.kernel_model = rk_model;
	if (nleaves == 2) {
		sc.nleaves = 2;
		sc.leaf_sms[0] = sc.leaf_sms[1] = 66;
	}
	struct ve_backend *b;
	VE_CHECK_EQ(ve_sim_create(&sc, &b), 0);
	char err[512] = "";
	memset(w, 0, sizeof(*w));
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .policy = policy,
					 .max_clients = 2,
					 .dispatch = {.host_inline = true,
						      .ahead_ns = 150000,
						      .ahead_max = 256,
						      .on_submit = rk_on_submit,
						      .on_complete = rk_on_complete,
						      .observer_arg = w}};
	struct ve_runtime *rt;
	VE_CHECK_MSG(ve_runtime_create(&rcfg, b, &rt, err, sizeof(err)) == 0, "%s", err);
	w->co = ve_runtime_coord(rt);
	struct ve_vctx *v[2];
	ve_stream s[2];
	for (int c = 0; c < 2; c++) {
		struct ve_vctx_config vc = {.client_id = (uint32_t)c, .max_ops = 8192};
		VE_CHECK_EQ(ve_vctx_create(&vc, &v[c]), 0);
		VE_CHECK_EQ(ve_runtime_attach(rt, v[c], (uint32_t)c, c ? o->flags1 : 0), 0);
		VE_CHECK_EQ(ve_vctx_stream_create(v[c], VE_STREAM_NON_BLOCKING, 0, &s[c]), 0);
	}
	struct ve_desc lk, sk;
	rk_kernel(&lk, RK_LONG);
	rk_kernel(&sk, RK_SHORT);
	for (int i = 0; i < o->lead; i++)
		VE_CHECK_EQ(ve_vctx_submit(v[0], s[0], &sk, 0, NULL), 0);
	for (int i = 0; i < o->iters; i++) {
		VE_CHECK_EQ(ve_vctx_submit(v[0], s[0], &lk, 0, NULL), 0);
		VE_CHECK_EQ(ve_vctx_submit(v[0], s[0], &lk, 0, NULL), 0);
		for (int j = 0; j < 10; j++)
			VE_CHECK_EQ(ve_vctx_submit(v[0], s[0], &sk, 0, NULL), 0);
	}
	for (int i = 0; i < o->n1; i++)
		VE_CHECK_EQ(ve_vctx_submit(v[1], s[1], &sk, 0, NULL), 0);
	sim_drive_until_done(ve_runtime_dispatcher(rt), b, v, 2);
	for (int c = 0; c < 2; c++)
		VE_CHECK_EQ(ve_vctx_ctx_query(v[c]), 0);
	ve_coord_stats(ve_runtime_coord(rt), cs);
	printf("# %s, %u leaves: %llu reclaims, p50 %.1f us, p99 %.1f us, max %.1f us; at most "
	       "%u long kernels of client 0 in flight; client 0 short kernels %u lent / %u own, "
	       "long %u lent / %u own; %llu lends, %llu taken back; done at %.1f ms\n",
	       policy, nleaves, (unsigned long long)cs->reclaims, cs->reclaim_ns_p50 / 1e3,
	       cs->reclaim_ns_p99 / 1e3, cs->reclaim_ns_max / 1e3, w->max_inflight, w->short_lent,
	       w->short_own, w->long_lent, w->long_own, (unsigned long long)cs->lends,
	       (unsigned long long)cs->lend_takes, ve_sim_now(b) / 1e6);
	ve_runtime_destroy(rt);
	for (int c = 0; c < 2; c++)
		ve_vctx_destroy(v[c]);
	b->ops->destroy(b);
}

/* Lending, end to end on the sim: client 1 (latency class) runs a few
 * short kernels and goes idle holding its grant; client 0 runs [2 long, 10
 * short] kernels. Its short kernels (7 us) run on the lent entry, its long
 * ones (3 ms on the whole GPU, more than the lend bound) only on its own
 * grant: taking the lend back never waits for a long kernel. */
VE_TEST(grant_lend_runs_short_kernels_only)
{
	for (int variant = 0; variant < 2; variant++) {
		struct ve_coord_stats cs;
		struct rk_watch w;
		rk_run(&(struct rk_opts){.policy = variant ? "tput:lend=0" : "tput",
					 .nleaves = 16,
					 .iters = 40,
					 .n1 = 30,
					 .flags1 = VE_READY_LATENCY},
		       &cs, &w);
		VE_CHECK_EQ(w.long_lent, 0);
		if (variant)
			VE_CHECK_EQ(w.short_lent, 0);
		else
			VE_CHECK(w.short_lent > 0 && cs.lends > 0);
	}
}

/* What a client asks for per launch (VE_WANT): fill = its blocks over the
 * blocks an SM holds, spread = one SM per block; both at most the GPU and
 * at least one SM. */
VE_TEST(grant_want_fill_or_spread)
{
	/* 64 blocks of 256 threads: 8 fit an SM (2048 threads), so 8 SMs
	 * hold them in one wave; spread, 64. */
	VE_CHECK_EQ(ve__launch_sms(64, 0, 256, 132, false), 8);
	VE_CHECK_EQ(ve__launch_sms(64, 0, 256, 132, true), 64);
	/* The occupancy the launch reported wins over the thread guess. */
	VE_CHECK_EQ(ve__launch_sms(64, 2, 256, 132, false), 32);
	/* Wider than the GPU: the GPU, both ways. */
	VE_CHECK_EQ(ve__launch_sms(1000, 0, 256, 132, false), 125);
	VE_CHECK_EQ(ve__launch_sms(1000, 0, 256, 132, true), 132);
	VE_CHECK_EQ(ve__launch_sms(2000, 0, 256, 132, false), 132);
	/* One block, or none reported: one SM. */
	VE_CHECK_EQ(ve__launch_sms(1, 0, 1024, 132, false), 1);
	VE_CHECK_EQ(ve__launch_sms(0, 0, 0, 132, true), 1);
}

/* The submit-ahead bound is predicted time, not a count. Counted from the
 * lane's average time per op (7 us after the 40 short kernels) it let 21
 * ops in, four long ones (6-6.75 ms) among them, all of which a grant taken away
 * would wait for. Now a kernel with no prediction runs alone on its lane
 * and is timed there, and one predicted longer than the bound (150 us)
 * waits for the lane to empty: one long kernel in flight at a time (a
 * short one may queue behind it), and no time lost (the same end time). */
VE_TEST(grant_ahead_bound_is_predicted_time_not_count)
{
	struct ve_coord_stats cs;
	struct rk_watch w;
	rk_run(&(struct rk_opts){.policy = "fixed", .nleaves = 16, .lead = 40, .iters = 8, .n1 = 4000},
	       &cs, &w);
	VE_CHECK_EQ(w.nlongs, 16);
	VE_CHECK_EQ(cs.reclaims, 0); /* fixed: a static split, nothing taken */
	VE_CHECK_MSG(w.max_inflight == 1, "%u long kernels in flight on one lane at once",
		     w.max_inflight);
}

/* Reclaim latency is timed per take: from the grant change that took some
 * SMs to the report that those SMs are free. One time per client (the
 * first take's, kept until every taken SM was free at once) made a chain
 * of moves one sample: chaos moved client 0 every few ms while each move
 * waited for its long kernel, and ved counted 30 ms (two 66-SM leaves) and
 * 400 ms (the H200 split) where no single drain took longer than one long
 * kernel on its leaf: 6 ms and 49.5 ms, which is now the maximum. */
/* An embedded runtime of one client over the sim (rk_model), its
 * dispatcher driven by hand: no thread, host functions inline. */
struct one_rt {
	struct ve_backend *b;
	struct ve_runtime *rt;
	struct ve_dispatcher *d;
};

static void one_rt_create_ahead(struct one_rt *o, uint64_t seed, bool per_op, uint64_t ahead_ns,
				bool long_tail)
{
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = seed;
	sc.kernel_model = rk_model;
	VE_CHECK_EQ(ve_sim_create(&sc, &o->b), 0);
	char err[512] = "";
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .policy = "tput",
					 .max_clients = 1,
					 .per_op = per_op,
					 .dispatch = {.host_inline = true,
						      .ahead_ns = ahead_ns,
						      .long_tail = long_tail}};
	VE_CHECK_MSG(ve_runtime_create(&rcfg, o->b, &o->rt, err, sizeof(err)) == 0, "%s", err);
	o->d = ve_runtime_dispatcher(o->rt);
}

/* ... only ready ops submitted (no submit-ahead), or as chosen. */
static void one_rt_create_mode(struct one_rt *o, uint64_t seed, bool per_op)
{
	one_rt_create_ahead(o, seed, per_op, 0, false);
}

static void one_rt_create(struct one_rt *o, uint64_t seed)
{
	one_rt_create_mode(o, seed, false);
}

/* The runtime, then its clients' n vctxs, then the sim. */
static void one_rt_destroy(struct one_rt *o, struct ve_vctx **v, int n)
{
	ve_runtime_destroy(o->rt);
	for (int i = 0; i < n; i++)
		ve_vctx_destroy(v[i]);
	o->b->ops->destroy(o->b);
}

/* A vctx for client 0 with one non-blocking stream. */
static struct ve_vctx *one_rt_vctx(ve_stream *s)
{
	struct ve_vctx *v;
	struct ve_vctx_config vc = {.client_id = 0, .max_ops = 64};
	VE_CHECK_EQ(ve_vctx_create(&vc, &v), 0);
	VE_CHECK_EQ(ve_vctx_stream_create(v, VE_STREAM_NON_BLOCKING, 0, s), 0);
	return v;
}

/* A client's last work (demand.active_ns) is dated to where it ended, not
 * to the dispatcher pass before: between passes a kernel is not seen to
 * end, and with nothing else moving, the pass before a 3 ms kernel's end
 * is its launch. Policies measure gaps from it (tput's duty, 'away', the
 * hold after the last work); dated at the launch, a loop that syncs every
 * step had a gap as long as its step at every sync. */
VE_TEST(grant_report_dates_the_last_work_to_its_end)
{
	struct one_rt o;
	one_rt_create(&o, 5);
	ve_stream s;
	struct ve_vctx *v[1] = {one_rt_vctx(&s)};
	VE_CHECK_EQ(ve_runtime_attach(o.rt, v[0], 0, 0), 0);
	struct ve_desc lk;
	rk_kernel(&lk, RK_LONG);
	VE_CHECK_EQ(ve_vctx_submit(v[0], s, &lk, 0, NULL), 0);
	sim_drive_until_done(o.d, o.b, v, 1);
	ve_dispatcher_poll(o.d);
	struct ve_client_demand dm;
	VE_CHECK_EQ(ve_coord_demand(ve_runtime_coord(o.rt), 0, &dm), 0);
	uint64_t end = ve_sim_now(o.b);
	printf("# 3 ms kernel: done at %.1f us, last work reported at %.1f us\n", end / 1e3,
	       dm.active_ns / 1e3);
	VE_CHECK_EQ(dm.ready + dm.inflight, 0);
	VE_CHECK_MSG(dm.active_ns <= end && dm.active_ns + 10000 >= end,
		     "last work at %.1f us, its kernel done by %.1f us", dm.active_ns / 1e3,
		     end / 1e3);
	one_rt_destroy(&o, v, 1);
}

/* A long kernel sent to an idle lane gets no marker of its own
 * (VE_MARK_LONG_TAIL): what its stream puts behind it next carries the one
 * marker (a decode step: the graph replay, then its read-back; a fenced
 * marker between the two held the copy back on the GPU at every token). A
 * kernel behind it instead has the long one's marker written first, so that
 * one's end is heard on its own. (On a real clock idle passes do not write
 * it either, only the idle flush's timer; on the sim's virtual clock they
 * do, below, so these checks stay under IDLE_FLUSH_PASSES passes.) */
/* One client on the sim with long tails on, a long kernel lk and a 4-byte
 * read-back cp, lk learned (an unpredicted kernel is marked to time it). */
static struct ve_vctx *long_tail_client(struct one_rt *o, ve_stream *s, struct ve_desc *lk,
					struct ve_desc *cp)
{
	one_rt_create_ahead(o, 9, false, 150000, true);
	struct ve_vctx *v = one_rt_vctx(s);
	VE_CHECK_EQ(ve_runtime_attach(o->rt, v, 0, 0), 0);
	rk_kernel(lk, RK_LONG);
	memset(cp, 0, sizeof(*cp));
	cp->kind = VE_OP_MEMCPY;
	cp->u.cp.bytes = 4;
	cp->u.cp.dst = 0x1000;
	cp->u.cp.src = 0x2000;
	VE_CHECK_EQ(ve_vctx_submit(v, *s, lk, 0, NULL), 0);
	sim_drive_until_done(o->d, o->b, &v, 1);
	return v;
}

VE_TEST(grant_long_kernel_marker_waits_for_its_read_back)
{
	for (int next_is_copy = 1; next_is_copy >= 0; next_is_copy--) {
		struct one_rt o;
		ve_stream s;
		struct ve_desc lk, cp;
		struct ve_vctx *v[1] = {long_tail_client(&o, &s, &lk, &cp)};
		/* The first long kernel on an idle lane: a sample, marked. */
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &lk, 0, NULL), 0);
		sim_drive_until_done(o.d, o.b, v, 1);
		struct ve_dispatcher_stats a, b;
		ve_dispatcher_stats(o.d, &a);
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &lk, 0, NULL), 0);
		for (int i = 0; i < 20; i++)
			ve_dispatcher_poll(o.d);
		ve_dispatcher_stats(o.d, &b);
		VE_CHECK_EQ(b.submitted - a.submitted, 1);
		VE_CHECK_EQ(b.long_tails - a.long_tails, 1);
		VE_CHECK_EQ(b.marks - a.marks, 0);
		VE_CHECK_EQ(b.flushes - a.flushes, 0);
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, next_is_copy ? &cp : &lk, 0, NULL), 0);
		for (int i = 0; i < 20; i++)
			ve_dispatcher_poll(o.d);
		ve_dispatcher_stats(o.d, &b);
		printf("# then a %s: %llu markers written, %llu for the deferred kernel\n",
		       next_is_copy ? "copy" : "kernel", (unsigned long long)(b.marks - a.marks),
		       (unsigned long long)(b.flushes - a.flushes));
		VE_CHECK_EQ(b.submitted - a.submitted, 2);
		VE_CHECK_EQ(b.marks - a.marks, 1);
		VE_CHECK_EQ(b.flushes - a.flushes, next_is_copy ? 0 : 1);
		sim_drive_until_done(o.d, o.b, v, 1);
		VE_CHECK_EQ(ve_vctx_ctx_query(v[0]), 0);
		one_rt_destroy(&o, v, 1);
	}
}

/* ... and one such kernel in 64 still has a marker of its own, so its run
 * time keeps being sampled (predictions, profiles): a decode loop of a
 * kernel and its read-back was never sampled (the one-in-64 rule counts
 * every op of the lane, and the kernel missed it at every turn). */
VE_TEST(grant_long_tail_kernels_still_sampled)
{
	struct one_rt o;
	ve_stream s;
	struct ve_desc lk, cp;
	struct ve_vctx *v[1] = {long_tail_client(&o, &s, &lk, &cp)};
	struct ve_dispatcher_stats a, b;
	ve_dispatcher_stats(o.d, &a);
	enum { STEPS = 128 };
	for (int step = 0; step < STEPS; step++) {
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &lk, 0, NULL), 0);
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &cp, 0, NULL), 0);
		sim_drive_until_done(o.d, o.b, v, 1);
	}
	ve_dispatcher_stats(o.d, &b);
	printf("# %d steps: %llu long kernels waited for their copy, %llu markers\n", STEPS,
	       (unsigned long long)(b.long_tails - a.long_tails),
	       (unsigned long long)(b.marks - a.marks));
	VE_CHECK_EQ(b.long_tails - a.long_tails, STEPS - STEPS / 64);
	VE_CHECK_EQ(b.marks - a.marks, STEPS + STEPS / 64); /* each copy's, each sample's */
	one_rt_destroy(&o, v, 1);
}

/* Where time stands while nothing runs (the sim's virtual clock, its
 * dispatcher thread waiting on the sim), idle passes still report a long
 * kernel that ended early: its completion, held for the marker, would
 * otherwise wait for the idle flush's timer, which never fires there. */
static uint64_t lt_wave_ns = 100000;

static int lt_model(void *arg, const struct ve_desc *d, struct ve_sim_kernel_params *p)
{
	(void)arg;
	(void)d;
	p->blocks_per_sm = 1;
	p->t_launch_ns = 2000;
	p->t_wave_ns = lt_wave_ns;
	return 0;
}

VE_TEST(grant_long_tail_shorter_than_predicted_on_a_virtual_clock)
{
	struct one_rt o;
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = 3;
	sc.kernel_model = lt_model;
	sc.defer_reports = true;
	sc.wait_advances = true;
	VE_CHECK_EQ(ve_sim_create(&sc, &o.b), 0);
	char err[512] = "";
	struct ve_runtime_config rcfg = {
	    .daemon = "0",
	    .policy = "tput",
	    .max_clients = 1,
	    .dispatch = {.host_inline = true, .ahead_ns = 150000, .long_tail = true}};
	VE_CHECK_MSG(ve_runtime_create(&rcfg, o.b, &o.rt, err, sizeof(err)) == 0, "%s", err);
	o.d = ve_runtime_dispatcher(o.rt);
	ve_stream s;
	struct ve_vctx *v[1] = {one_rt_vctx(&s)};
	VE_CHECK_EQ(ve_runtime_attach(o.rt, v[0], 0, 0), 0);
	struct ve_desc k;
	rk_kernel(&k, RK_SHORT);
	lt_wave_ns = 100000; /* learned at ~100 us */
	for (int i = 0; i < 3; i++) {
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &k, 0, NULL), 0);
		sim_drive_until_done(o.d, o.b, v, 1);
	}
	lt_wave_ns = 1000; /* then it runs 3 us; nobody waits, the test polls */
	VE_CHECK_EQ(ve_runtime_start(o.rt), 0);
	VE_CHECK_EQ(ve_vctx_submit(v[0], s, &k, 0, NULL), 0);
	int ms = 0;
	while (ve_vctx_ctx_query(v[0]) != 0 && ms < 2000) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		ms++;
	}
	ve_dispatcher_stop(o.d); /* its thread owns the stats */
	struct ve_dispatcher_stats st;
	ve_dispatcher_stats(o.d, &st);
	printf("# reported after %d ms (%llu long kernels waited for a next op)\n", ms,
	       (unsigned long long)st.long_tails);
	VE_CHECK(st.long_tails >= 1);
	VE_CHECK_MSG(ms < 2000, "the kernel's completion was never reported");
	one_rt_destroy(&o, v, 1);
}

/* A client slot is not attached again while the work of the client that
 * left it still runs: the new client's reports would leave those kernels'
 * leaves out of busy_leaves (the coordinator could hand them on while they
 * run), their completions would go to the new vctx, and its in-flight count
 * would wrap below zero when they end. */
VE_TEST(grant_slot_not_reattached_while_its_work_drains)
{
	for (int per_op = 0; per_op < 2; per_op++) {
		struct one_rt o;
		one_rt_create_mode(&o, 7, per_op);
		ve_stream s, s1;
		struct ve_vctx *v[2] = {one_rt_vctx(&s), one_rt_vctx(&s1)};
		VE_CHECK_EQ(ve_runtime_attach(o.rt, v[0], 0, 0), 0);
		struct ve_desc lk;
		rk_kernel(&lk, RK_LONG);
		VE_CHECK_EQ(ve_vctx_submit(v[0], s, &lk, 0, NULL), 0);
		for (int i = 0; i < 20; i++)
			ve_dispatcher_poll(o.d); /* bound and submitted; the sim's clock stands */
		struct ve_sim_stats ss;
		ve_sim_stats(o.b, &ss);
		VE_CHECK_EQ(ss.submitted[VE_OP_KERNEL], 1);
		VE_CHECK_EQ(ve_runtime_detach(o.rt, 0), 0);
		VE_CHECK_EQ(ve_runtime_attach(o.rt, v[1], 0, 0), -EBUSY);
		sim_drive_until_done(o.d, o.b, v, 1);
		/* Drained: attached again (per-op mode has no grant report to say
		 * so, and refused it for good). */
		VE_CHECK_MSG(ve_runtime_attach(o.rt, v[1], 0, 0) == 0, "per_op %d", per_op);
		one_rt_destroy(&o, v, 2);
	}
}

VE_TEST(grant_reclaim_timed_per_take_waits_for_one_kernel)
{
	struct ve_coord_stats cs;
	struct rk_watch w;
	rk_run(&(struct rk_opts){.policy = "chaos", .nleaves = 2, .iters = 30, .n1 = 4000}, &cs, &w);
	VE_CHECK(cs.reclaims > 20);
	VE_CHECK_MSG(cs.reclaim_ns_max <= 6000000 + 150000 + 20000,
		     "reclaim max %.1f us with one 6 ms kernel running at a time",
		     cs.reclaim_ns_max / 1e3);
	rk_run(&(struct rk_opts){.policy = "chaos", .nleaves = 16, .iters = 30, .n1 = 4000}, &cs,
	       &w);
	VE_CHECK(cs.reclaims > 20);
	VE_CHECK_MSG(cs.reclaim_ns_max <= 49500000 + 150000 + 20000,
		     "reclaim max %.1f us with one 49.5 ms kernel running at a time",
		     cs.reclaim_ns_max / 1e3);
}

/* VE_PHASE through the dispatcher: two clients of one embedded runtime in a
 * step loop (a short kernel, its completion, a 20 us host gap). With the
 * knob on and the other client there, steps get held now and then (their
 * first op waits, then runs: nothing lost, nothing hung); alone, or with
 * the knob off, never. (Which phase pays is test_phase's; the sim's model
 * runs both clients' kernels side by side at full speed, so no phase pays
 * here and the tries back off.) */
struct phase_run {
	uint64_t holds, hold_ns, end_ns;
};

static struct phase_run phase_loop(bool phase, int nclients)
{
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = 17;
	sc.kernel_model = rk_model;
	struct one_rt o;
	VE_CHECK_EQ(ve_sim_create(&sc, &o.b), 0);
	char err[512] = "";
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .policy = "tput",
					 .max_clients = 2,
					 .dispatch = {.host_inline = true, .phase = phase}};
	VE_CHECK_MSG(ve_runtime_create(&rcfg, o.b, &o.rt, err, sizeof(err)) == 0, "%s", err);
	o.d = ve_runtime_dispatcher(o.rt);
	struct ve_vctx *v[2];
	ve_stream s[2];
	for (int c = 0; c < nclients; c++) {
		struct ve_vctx_config vc = {.client_id = (uint32_t)c, .max_ops = 64};
		VE_CHECK_EQ(ve_vctx_create(&vc, &v[c]), 0);
		VE_CHECK_EQ(ve_vctx_stream_create(v[c], VE_STREAM_NON_BLOCKING, 0, &s[c]), 0);
		VE_CHECK_EQ(ve_runtime_attach(o.rt, v[c], (uint32_t)c, 0), 0);
	}
	struct ve_desc k;
	rk_kernel(&k, RK_SHORT);
	int steps = 24 * (int)VE__PHASE_WINDOW;
	for (int i = 0; i < steps; i++) {
		for (int c = 0; c < nclients; c++)
			VE_CHECK_EQ(ve_vctx_submit(v[c], s[c], &k, 0, NULL), 0);
		sim_drive_until_done(o.d, o.b, v, nclients);
		ve_sim_advance_to(o.b, ve_sim_now(o.b) + 20000);
	}
	for (int c = 0; c < nclients; c++)
		VE_CHECK_EQ(ve_vctx_ctx_query(v[c]), 0);
	struct ve_dispatcher_stats st;
	ve_dispatcher_stats(o.d, &st);
	VE_CHECK_EQ(st.submitted, (uint64_t)steps * (uint64_t)nclients);
	printf("# phase %d, %d clients: %llu steps held, %.1f us in all\n", phase, nclients,
	       (unsigned long long)st.phase_holds, st.phase_hold_ns / 1e3);
	struct phase_run r = {st.phase_holds, st.phase_hold_ns, ve_sim_now(o.b)};
	one_rt_destroy(&o, v, nclients);
	return r;
}

VE_TEST(grant_phase_holds_steps_only_beside_another_client)
{
	struct phase_run on = phase_loop(true, 2), off = phase_loop(false, 2);
	VE_CHECK(on.holds >= 1);
	VE_CHECK_EQ(off.holds, 0u);
	VE_CHECK_EQ(phase_loop(true, 1).holds, 0u);
	/* The held ops really waited: each held step ended later (the loop
	 * waits for both clients' kernels every step; not by the whole hold:
	 * the held kernel then runs alone, faster than beside the other's). */
	VE_CHECK_MSG(on.end_ns > off.end_ns + on.holds * 1000,
		     "with holds %.1f us, without %.1f us, held %.1f us", on.end_ns / 1e3,
		     off.end_ns / 1e3, on.hold_ns / 1e3);
}
