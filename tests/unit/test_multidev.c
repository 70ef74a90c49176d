/* SPDX-License-Identifier: MIT */
/*
 * Several GPUs in one host, end to end over simulated GPUs.
 *
 * Two or three modelled devices (ve_sim_create, with different SM counts),
 * each with its own coordinator and dispatcher, exactly the single-device
 * code instantiated once per device (docs/architecture.md, "Several GPUs").
 * Each client holds one vctx per device and runs a random program that spans
 * them: kernels (some cooperative), copies, memsets, host functions, timed and
 * untimed event records, local waits, over legacy, blocking, non-blocking and
 * per-thread streams of every device; events recorded on one device and
 * waited on another (ve_vctx_stream_wait_event_extern); peer copies, which
 * are copies on a stream of the source device; stream, event and context
 * queries and syncs. One thread drives everything; each device's virtual
 * clock moves on its own, in random steps, and the sims run with jitter and
 * a random submit latency, so completions interleave across devices
 * differently from seed to seed.
 *
 * The reference is built alongside the program, independently of the vctx:
 * per device and client, refmodel.h's rules of one context (S1, D1-D4,
 * E1-E4; written from the CUDA documentation only) give the explicit edges
 * inside that context; this test joins them into one graph per client and
 * adds the cross-device edges, from the NVIDIA CUDA Driver API reference:
 *  - cuStreamWaitEvent: "Makes all future work submitted to hStream wait for
 *    all work captured in hEvent ... hEvent may be from a different context
 *    or device than hStream": an edge from the generation current at the
 *    call (E2, E3) to the wait op on the waiting stream; a wait on an event
 *    never recorded has no event edge (E4) but is still an op on its stream
 *    (a legacy action on the legacy stream);
 *  - cuEventRecord: the event and the stream "must be on the same context",
 *    so a record is an op of its event's device;
 *  - cudaMemcpyPeerAsync: the copy "is asynchronous with respect to the host
 *    and all work on other devices": it is an op on its stream's device
 *    only, ordered with other devices through events like any other op;
 *  - cuStreamSynchronize/cuStreamQuery, cuEventSynchronize/cuEventQuery,
 *    cuCtxSynchronize: all work in the stream, captured in the event, issued
 *    to the context, which across devices includes what that work waits for.
 * The closure (ancestor bitsets, exact since predecessors always precede) is
 * the happens-before order a correct runtime must respect.
 *
 * Checked under chaos and tput, with injected submit failures on half the
 * seeds:
 *  (a) no op lost or run twice: every op is submitted, started, ended and
 *      completed exactly once (host functions run exactly once), every
 *      client's vctx on every device is idle at the end (no live op, no
 *      held cross-device marker, no armed watcher), each pool is idle, and
 *      each device's dispatcher saw only injected submit failures;
 *  (b) per device, two kernels that run at once on a common SM were bound to
 *      the same entry and the later binding asked for VE_BIND_SHARE; each
 *      kernel runs on the SMs of the entry it was bound to, on its device;
 *  (c) happens-before across devices: an op is submitted, starts (a host
 *      function runs) only after every reference ancestor completed, on any
 *      device; queries agree with the reference in both directions; a sync
 *      is issued once the matching query says done (a single thread cannot
 *      block), and then returns at once.
 *
 * Seeds are printed; VE_SEED=<seed> replays one (for every policy of the
 * test); VE_MULTIDEV_N sets the seeds per policy (default 40, 6 under
 * sanitizers).
 */
#include "../harness.h"
#include "refmodel.h"

#include "backend/sim.h"
#include "core/vctx.h"
#include "coord/coord.h"
#include "pool/pool.h"
#include "runtime/runtime.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MD_SANITIZED 1
#endif
#endif
#ifndef MD_SANITIZED
#define MD_SANITIZED 0
#endif

#define MAX_DEV	    3
#define MAX_CLIENTS 3
#define MAX_CALLS   300
#define MAX_GOPS    320 /* one op per call at most */
#define GWORDS	    (MAX_GOPS / 64)
#define MAX_EVENTS  5 /* real events per device and client; one more is the never-recorded one */
#define MAX_RUNNING 2048

_Static_assert(MAX_CALLS <= MAX_GOPS, "one op per call at most");
_Static_assert(MAX_GOPS % 64 == 0, "whole words");
_Static_assert(MAX_CALLS < RM_MAX_OPS, "a device model holds at most every call");

static const uint32_t dev_sms[] = {132, 114, 78};

enum call_kind {
	C_WORK,	  /* kernel, cooperative kernel, copy, memset, host function */
	C_PEER,	  /* peer copy: a copy on a stream of the source device */
	C_RECORD, /* event record on its own device */
	C_WAIT,	  /* cuStreamWaitEvent, event of the same device */
	C_XWAIT,  /* cuStreamWaitEvent, event of another device */
	C_SQUERY,
	C_EQUERY,
	C_SSYNC,
	C_ESYNC,
	C_CSYNC,
};
#define WL_OWN_CALL_KINDS
#include "workload.h"

static const struct wl_mix mix = {.kernel = 40, .coop = 48, .copy = 68, .memset = 80};

typedef struct {
	uint64_t w[GWORDS];
} gset;

static inline void gs_add(gset *s, int i)
{
	s->w[i >> 6] |= 1ull << (i & 63);
}
static inline bool gs_has(const gset *s, int i)
{
	return (s->w[i >> 6] >> (i & 63)) & 1;
}
static inline void gs_or(gset *d, const gset *s)
{
	for (int i = 0; i < GWORDS; i++)
		d->w[i] |= s->w[i];
}

struct call {
	uint8_t kind;
	uint8_t dev;  /* device of the stream (or of the event / context) */
	uint8_t sdev; /* C_XWAIT: the event's device */
	int16_t s, e, gop;
	gset req; /* queries and syncs: ops that must be complete */
};

/* One global op of a client: an op of one device's model. */
struct gop {
	uint8_t dev, wk, shp;
	bool ext; /* leaves the vctx: tracked through the observers */
	int16_t lop;
};

struct opst {
	uint8_t nsub, nstart, nend, ncomp, nhost, nbind;
	bool shared;
	int32_t status;
	uint32_t entry, lane;
	uint64_t bind_seq, cookie;
};

/* A client's part on one device: its context there. */
struct dpart {
	struct rm_model m;
	int16_t gid[RM_MAX_OPS]; /* model op -> global op */
	int nreal_events;	 /* events [0, nreal) are used; the next is never recorded */
	uint64_t skey[RM_MAX_STREAMS];
	int8_t sprio[RM_MAX_STREAMS];
	ve_stream sh[RM_MAX_STREAMS];
	ve_event eh[MAX_EVENTS];
	struct ve_vctx *v;
};

struct client {
	int id;
	struct dpart d[MAX_DEV];
	int ngops;
	struct gop g[MAX_GOPS];
	gset anc[MAX_GOPS];
	gset ext;
	/* Set by the observers of the op's device (its dispatcher thread when
	 * threaded), read by every other device's: atomics. */
	_Atomic uint8_t done[MAX_GOPS], ended[MAX_GOPS];
	struct opst os[MAX_GOPS]; /* touched only by the op's device */
	ve_tok tok[MAX_GOPS];
	struct call c[MAX_CALLS];
	int ncalls, pc;
	uint64_t xwaits, xwaits_pending, peers, syncs, queries;
	pthread_t th;
};

struct running {
	int client, gop;
	uint32_t entry;
	uint64_t sms[VE_SIM_SM_WORDS];
};

struct dev {
	int idx;
	struct ve_backend *b;
	struct ve_runtime *rt;
	struct ve_coord *co; /* the runtime's embedded coordinator, for inspection */
	struct ve_dispatcher *d;
	const struct ve_pool *pool;
	struct running rn[MAX_RUNNING];
	int nrn;
	uint64_t bind_seq, kernels, shared_overlaps, max_conc;
};

struct run {
	uint64_t seed;
	const char *policy;
	int ndev, nclients;
	struct dev dv[MAX_DEV];
	struct client cl[MAX_CLIENTS];
	bool threaded; /* dispatcher threads and client threads (see multidev_threads) */
	uint64_t xordered;
	atomic_bool failed;
	char err[1024];
};

static struct run g_run;

static struct {
	uint64_t runs, ops, kernels, shared_overlaps, max_conc, xwaits, xwaits_pending, peers,
	    syncs, queries, xordered, submit_faults;
} g_tot;

#define rnd wl_rnd

static void fail_run(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Observers run inside the sims and dispatchers: they record the first
 * failure only; the driving loop stops and reports it. */
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail_run(struct run *r, const char *fmt, ...)
{
	if (atomic_load(&r->failed))
		return;
	pthread_mutex_lock(&g_fail_lock);
	if (!atomic_load(&r->failed)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, sizeof(r->err), fmt, ap);
		va_end(ap);
		atomic_store(&r->failed, true);
	}
	pthread_mutex_unlock(&g_fail_lock);
}

/* ------------------------------------------------------------------ the reference */

/* Joins model op 'lop' of device 'dev' to the client's graph: its explicit
 * edges inside the context (refmodel.h) plus 'xpred' (a global op of another
 * device, the cross-device wait edge, or -1). */
static int join(struct client *cl, int dev, int lop, bool ext, int xpred)
{
	struct dpart *p = &cl->d[dev];
	int g = cl->ngops++;
	struct gop *o = &cl->g[g];
	*o = (struct gop){.dev = (uint8_t)dev, .ext = ext, .lop = (int16_t)lop};
	p->gid[lop] = (int16_t)g;
	memset(&cl->anc[g], 0, sizeof(cl->anc[g]));
	const struct rm_op *mo = &p->m.op[lop];
	for (int i = 0; i < mo->npred; i++) {
		int q = p->gid[mo->pred[i]];
		gs_add(&cl->anc[g], q);
		gs_or(&cl->anc[g], &cl->anc[q]);
	}
	if (xpred >= 0) {
		gs_add(&cl->anc[g], xpred);
		gs_or(&cl->anc[g], &cl->anc[xpred]);
	}
	if (ext)
		gs_add(&cl->ext, g);
	return g;
}

/* Everything 'frontier' (model ops of device dev) stands for, across devices. */
static void required(const struct client *cl, int dev, const int16_t *f, int n, gset *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < n; i++) {
		int g = cl->d[dev].gid[f[i]];
		gs_add(out, g);
		gs_or(out, &cl->anc[g]);
	}
}

/* ------------------------------------------------------------------ programs */

static uint64_t code_of(int client, int gop)
{
	return ((uint64_t)(client + 1) << 16) | (uint64_t)(gop + 1);
}


static void gen_client(struct run *run, struct client *cl, int id, uint64_t *r)
{
	memset(cl, 0, sizeof(*cl));
	cl->id = id;
	for (int dv = 0; dv < run->ndev; dv++) {
		struct dpart *p = &cl->d[dv];
		struct rm_model *m = &p->m;
		rm_init(m);
		wl_streams(m, r, 0x100 + (uint64_t)id, p->sprio, p->skey);
		p->nreal_events = 1 + (int)rnd(r, MAX_EVENTS);
		/* Threaded: untimed events only, so that every op the observers
		 * track has its token before its dispatcher can see it. */
		for (int i = 0; i < p->nreal_events; i++)
			rm_event_create(m, !run->threaded && rnd(r, 3) != 0);
		rm_event_create(m, false); /* never recorded: target of cross waits */
	}
	int target = run->threaded ? 30 + (int)rnd(r, 90) : 40 + (int)rnd(r, MAX_CALLS - 40);
	int legacy_pct = (int)rnd(r, 30);
	while (cl->ncalls < target) {
		struct call *c = &cl->c[cl->ncalls];
		memset(c, 0, sizeof(*c));
		c->dev = (uint8_t)rnd(r, (uint32_t)run->ndev);
		struct dpart *p = &cl->d[c->dev];
		struct rm_model *m = &p->m;
		c->s = (int16_t)wl_pick_stream(&p->m, r, legacy_pct);
		c->e = (int16_t)rnd(r, (uint32_t)p->nreal_events);
		c->gop = RM_NONE;
		int16_t f[RM_MAX_PREDS];
		int lop;
		uint32_t x = rnd(r, 100);
		if (x < 48) {
			uint8_t wk = wl_pick_work(r, &mix);
			c->kind = C_WORK;
			lop = rm_work(m, c->s);
			c->gop = (int16_t)join(cl, c->dev, lop, true, -1);
			cl->g[c->gop].wk = wk;
			cl->g[c->gop].shp = wl_pick_shape(r, wk);
		} else if (x < 54) {
			/* c->dev is the source device, whose stream runs the copy. */
			c->kind = C_PEER;
			lop = rm_work(m, c->s);
			c->gop = (int16_t)join(cl, c->dev, lop, true, -1);
			cl->g[c->gop].wk = W_PEER;
		} else if (x < 68) {
			c->kind = C_RECORD;
			lop = rm_event_record(m, c->e, c->s);
			c->gop = (int16_t)join(cl, c->dev, lop, m->op[lop].external, -1);
		} else if (x < 74) {
			c->kind = C_WAIT;
			lop = rm_stream_wait_event(m, c->s, c->e);
			c->gop = (int16_t)join(cl, c->dev, lop, false, -1);
		} else if (x < 87 && run->ndev > 1) {
			c->kind = C_XWAIT;
			c->sdev = (uint8_t)((c->dev + 1 + rnd(r, (uint32_t)run->ndev - 1)) %
					    (uint32_t)run->ndev);
			struct dpart *sp = &cl->d[c->sdev];
			c->e = (int16_t)rnd(r, (uint32_t)sp->nreal_events);
			int gen = sp->m.ev[c->e].gen;
			/* In the waiting context the wait is an op on its stream with
			 * no local event (E4 rules for the legacy stream included);
			 * the generation current now is the cross edge. */
			lop = rm_stream_wait_event(m, c->s, p->nreal_events);
			c->gop = (int16_t)join(cl, c->dev, lop, false,
					       gen == RM_NONE ? -1 : sp->gid[gen]);
		} else if (x < 90) {
			c->kind = C_SQUERY;
			required(cl, c->dev, f, rm_frontier(m, c->s, f), &c->req);
		} else if (x < 92) {
			c->kind = C_EQUERY;
			int n = 0;
			if (m->ev[c->e].gen != RM_NONE)
				f[n++] = (int16_t)m->ev[c->e].gen;
			required(cl, c->dev, f, n, &c->req);
		} else if (x < 94) {
			c->kind = C_SSYNC;
			required(cl, c->dev, f, rm_frontier(m, c->s, f), &c->req);
		} else if (x < 96) {
			c->kind = C_ESYNC;
			int n = 0;
			if (m->ev[c->e].gen != RM_NONE)
				f[n++] = (int16_t)m->ev[c->e].gen;
			required(cl, c->dev, f, n, &c->req);
		} else {
			/* cuCtxSynchronize: every op issued to the context so far
			 * (Y3), and what those wait for on other devices. */
			c->kind = C_CSYNC;
			memset(&c->req, 0, sizeof(c->req));
			for (int i = 0; i < m->nops; i++) {
				int g = p->gid[i];
				gs_add(&c->req, g);
				gs_or(&c->req, &cl->anc[g]);
			}
		}
		cl->ncalls++;
	}
}

static void host_fn(void *arg);

static void build_desc(const struct client *cl, int g, struct ve_desc *d)
{
	wl_build_desc(cl->g[g].wk, cl->g[g].shp, code_of(cl->id, g), g, host_fn, d);
}

/* ------------------------------------------------------------------ tracking */

static struct client *client_of_code(struct run *r, uint64_t code, int *g)
{
	int c = (int)(code >> 16) - 1, o = (int)(code & 0xffff) - 1;
	if (c < 0 || c >= r->nclients || o < 0 || o >= r->cl[c].ngops || !gs_has(&r->cl[c].ext, o))
		return NULL;
	*g = o;
	return &r->cl[c];
}

static struct client *client_of_desc(struct run *r, const struct ve_desc *d, int *g)
{
	if (!d)
		return NULL;
	switch (d->kind) {
	case VE_OP_KERNEL:
		return client_of_code(r, d->u.k.name_id, g);
	case VE_OP_MEMCPY:
		return client_of_code(r, d->u.cp.src, g);
	case VE_OP_MEMSET:
		return client_of_code(r, d->u.ms.value, g);
	case VE_OP_HOST_FN:
		return client_of_code(r, (uint64_t)(uintptr_t)d->u.host.arg, g);
	case VE_OP_EVENT_RECORD:
		return client_of_code(r, d->u.ev.app_event, g);
	default:
		return NULL;
	}
}

/* Pairs with the release store in set_flag: what the completing thread did
 * before marking the op done is visible to whoever sees the flag. */
static int first_missing(const struct client *cl, const gset *need, const _Atomic uint8_t *have)
{
	for (int w = 0; w < GWORDS; w++) {
		uint64_t m = need->w[w] & cl->ext.w[w];
		while (m) {
			int g = w * 64 + __builtin_ctzll(m);
			if (!atomic_load_explicit(&have[g], memory_order_acquire))
				return g;
			m &= m - 1;
		}
	}
	return RM_NONE;
}

static void set_flag(_Atomic uint8_t *f, int g)
{
	atomic_store_explicit(&f[g], 1, memory_order_release);
}

/* (c): nothing before every ancestor, on any device, completed. */
static void check_preds(struct run *r, struct client *cl, int g, const char *what)
{
	int miss = first_missing(cl, &cl->anc[g], cl->done);
	if (miss != RM_NONE)
		fail_run(r,
			 "client %d op%d (dev %u) %s before its predecessor op%d (dev %u) "
			 "completed",
			 cl->id, g, cl->g[g].dev, what, miss, cl->g[miss].dev);
}

/* The op belongs to device dv: observers of one device never see another's. */
static void check_dev(struct run *r, const struct dev *dv, const struct client *cl, int g,
		      const char *what)
{
	if (cl->g[g].dev != dv->idx)
		fail_run(r, "client %d op%d of device %u %s on device %d", cl->id, g, cl->g[g].dev,
			 what, dv->idx);
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
	int g;
	struct client *cl = client_of_code(r, (uint64_t)(uintptr_t)arg, &g);
	if (!cl) {
		fail_run(r, "host function with an unknown argument %p", arg);
		return;
	}
	struct opst *o = &cl->os[g];
	if (++o->nhost > 1)
		fail_run(r, "client %d op%d: host function ran twice", cl->id, g);
	check_preds(r, cl, g, "ran (host function)");
	set_flag(cl->done, g);
	set_flag(cl->ended, g);
}

static void on_submit(void *arg, uint32_t client, ve_tok tok, uint32_t lane,
		      const struct ve_desc *d)
{
	struct dev *dv = arg;
	struct run *r = &g_run;
	int g;
	struct client *cl = client_of_desc(r, d, &g);
	if (!cl) {
		fail_run(r, "device %d: submission of an untracked op (kind %s)", dv->idx,
			 ve_op_kind_name(d->kind));
		return;
	}
	check_dev(r, dv, cl, g, "submitted");
	struct opst *o = &cl->os[g];
	if ((uint32_t)cl->id != client || tok != cl->tok[g])
		fail_run(r, "client %d op%d submitted as client %u token %#llx", cl->id, g, client,
			 (unsigned long long)tok);
	if (++o->nsub > 1)
		fail_run(r, "client %d op%d submitted twice", cl->id, g);
	bool compute = d->kind == VE_OP_KERNEL,
	     on_entry = VE_LANE_ENTRY(lane) != VE_LANE_COPY_ENTRY;
	if (compute != on_entry)
		fail_run(r, "client %d op%d (%s) on lane %#x", cl->id, g, ve_op_kind_name(d->kind),
			 lane);
	o->lane = lane;
	o->entry = VE_LANE_ENTRY(lane);
	o->bind_seq = ++dv->bind_seq;
	check_preds(r, cl, g, "submitted");
}

static void on_bind(void *arg, const struct ve_binding *b, uint32_t lane)
{
	struct dev *dv = arg;
	struct run *r = &g_run;
	if (b->op.client >= (uint32_t)r->nclients) {
		fail_run(r, "device %d: binding for unknown client %u", dv->idx, b->op.client);
		return;
	}
	struct client *cl0 = &r->cl[b->op.client];
	int g;
	struct client *cl = client_of_desc(r, ve_vctx_desc(cl0->d[dv->idx].v, b->op.tok), &g);
	if (!cl || cl != cl0) {
		fail_run(r, "device %d: binding of client %u token %#llx names no tracked op",
			 dv->idx, b->op.client, (unsigned long long)b->op.tok);
		return;
	}
	check_dev(r, dv, cl, g, "bound");
	struct opst *o = &cl->os[g];
	if (++o->nbind > 1 || o->nsub != 1)
		fail_run(r, "client %d op%d: binding %u after %u submissions", cl->id, g, o->nbind,
			 o->nsub);
	if (b->entry >= dv->pool->nentries || VE_LANE_ENTRY(lane) != b->entry) {
		fail_run(r, "client %d op%d bound to entry %u but submitted on lane %#x", cl->id, g,
			 b->entry, lane);
		return;
	}
	const struct ve_pool_entry *pe = &dv->pool->e[b->entry];
	uint32_t need = cl->g[g].wk == W_COOP ? wl_cshapes[cl->g[g].shp].min_sms : 1;
	if (pe->sms < need)
		fail_run(r, "client %d op%d needs %u SMs, bound to entry %u of %u", cl->id, g, need,
			 b->entry, pe->sms);
	if (pe->state != VE_ENTRY_LEASED || !is_sharer(dv->pool, b->entry, cl->id))
		fail_run(r, "client %d op%d bound to entry %u (%s) of device %d it does not hold",
			 cl->id, g, b->entry, ve_entry_state_name(pe->state), dv->idx);
	o->shared = b->flags & VE_BIND_SHARE;
	o->entry = b->entry;
	o->bind_seq = ++dv->bind_seq;
}

static void on_complete(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status)
{
	struct dev *dv = arg;
	struct run *r = &g_run;
	if (client >= (uint32_t)r->nclients) {
		fail_run(r, "device %d: completion for unknown client %u", dv->idx, client);
		return;
	}
	struct client *cl = &r->cl[client];
	/* A token is live until its completion: exactly one submitted, not yet
	 * completed op of this client on this device carries it. */
	int g = RM_NONE;
	for (int i = 0; i < cl->ngops; i++)
		if (cl->g[i].dev == dv->idx && cl->os[i].nsub == 1 && cl->os[i].ncomp == 0 &&
		    cl->tok[i] == tok) {
			if (g != RM_NONE)
				fail_run(r, "client %u: two live ops with token %#llx", client,
					 (unsigned long long)tok);
			g = i;
		}
	if (g == RM_NONE) {
		fail_run(r, "device %d client %u: completion of token %#llx that is not in flight",
			 dv->idx, client, (unsigned long long)tok);
		return;
	}
	struct opst *o = &cl->os[g];
	o->ncomp++;
	if (o->nend != 1)
		fail_run(r, "client %u op%d completed with %u sim ends", client, g, o->nend);
	if (status != o->status)
		fail_run(r, "client %u op%d completed with status %d, the sim said %d", client, g,
			 status, o->status);
	set_flag(cl->done, g);
}

static void on_event(void *arg, const struct ve_sim_event *ev)
{
	struct dev *dv = arg;
	struct run *r = &g_run;
	int g;
	struct client *cl = client_of_desc(r, ev->desc, &g);
	if (!cl) {
		fail_run(r, "device %d: sim event for an untracked op", dv->idx);
		return;
	}
	check_dev(r, dv, cl, g, "ran");
	struct opst *o = &cl->os[g];
	bool kernel = ev->desc->kind == VE_OP_KERNEL;
	if (ev->kind == VE_SIM_EV_START) {
		if (++o->nstart > 1)
			fail_run(r, "client %d op%d started twice", cl->id, g);
		if (o->nsub != 1)
			fail_run(r, "client %d op%d started after %u submissions", cl->id, g,
				 o->nsub);
		o->cookie = ev->cookie;
		check_preds(r, cl, g, "started");
		if (!kernel)
			return;
		dv->kernels++;
		const struct ve_pool_entry *pe = &dv->pool->e[o->entry];
		if (ev->entry != o->entry || ev->leaves != pe->leaves || ev->nsms != pe->sms)
			fail_run(r,
				 "device %d: client %d op%d runs on entry %u (%u SMs), bound to %u "
				 "(%u SMs)",
				 dv->idx, cl->id, g, ev->entry, ev->nsms, o->entry, pe->sms);
		if (pe->state != VE_ENTRY_LEASED && pe->state != VE_ENTRY_DRAINING)
			fail_run(r, "device %d: client %d op%d started on entry %u (%s)", dv->idx,
				 cl->id, g, o->entry, ve_entry_state_name(pe->state));
		else if (!is_sharer(dv->pool, o->entry, cl->id))
			fail_run(r,
				 "device %d: client %d op%d started on entry %u it does not hold",
				 dv->idx, cl->id, g, o->entry);
		/* (b), per device: a common SM only on one shared lease. */
		for (int i = 0; i < dv->nrn; i++) {
			struct running *q = &dv->rn[i];
			bool overlap = false;
			for (int w = 0; w < VE_SIM_SM_WORDS; w++)
				overlap |= (q->sms[w] & ev->sms[w]) != 0;
			if (!overlap)
				continue;
			const struct opst *qo = &r->cl[q->client].os[q->gop];
			const struct opst *later = qo->bind_seq > o->bind_seq ? qo : o;
			if (q->entry != o->entry || !later->shared)
				fail_run(r,
					 "device %d: client %d op%d (entry %u, %s) and client %d "
					 "op%d (entry %u, %s) run on a common SM and the later "
					 "binding did not ask to share",
					 dv->idx, cl->id, g, o->entry,
					 o->shared ? "shared" : "exclusive", q->client, q->gop,
					 q->entry, qo->shared ? "shared" : "exclusive");
			dv->shared_overlaps++;
		}
		if (dv->nrn == MAX_RUNNING) {
			fail_run(r, "too many running kernels");
			return;
		}
		struct running *n = &dv->rn[dv->nrn++];
		n->client = cl->id;
		n->gop = g;
		n->entry = o->entry;
		memcpy(n->sms, ev->sms, sizeof(n->sms));
		if ((uint64_t)dv->nrn > dv->max_conc)
			dv->max_conc = (uint64_t)dv->nrn;
	} else {
		if (++o->nend > 1 || o->nstart != 1)
			fail_run(r, "client %d op%d: end %u after %u starts", cl->id, g, o->nend,
				 o->nstart);
		if (ev->cookie != o->cookie)
			fail_run(r, "client %d op%d started with cookie %llu and ended with %llu",
				 cl->id, g, (unsigned long long)o->cookie,
				 (unsigned long long)ev->cookie);
		o->status = ev->status;
		set_flag(cl->ended, g);
		if (!kernel)
			return;
		for (int i = 0; i < dv->nrn; i++)
			if (dv->rn[i].client == cl->id && dv->rn[i].gop == g) {
				dv->rn[i] = dv->rn[--dv->nrn];
				return;
			}
		fail_run(r, "device %d: client %d op%d ended but was not running", dv->idx, cl->id,
			 g);
	}
}

/* ------------------------------------------------------------------ calls */

/* A query's answer against the reference, both directions. */
static void check_query(struct run *r, struct client *cl, const struct call *c, int rc,
			const char *what)
{
	int miss = first_missing(cl, &c->req, cl->done);
	if (r->threaded && rc == -EBUSY)
		return; /* may still be true by now: only "done" can be checked */
	if (rc == 0 && miss != RM_NONE)
		fail_run(r,
			 "client %d: %s on device %u reported done but required op%d (dev %u) "
			 "is incomplete",
			 cl->id, what, c->dev, miss, cl->g[miss].dev);
	else if (rc == -EBUSY && miss == RM_NONE)
		fail_run(r,
			 "client %d: %s on device %u reported busy although every required op "
			 "completed",
			 cl->id, what, c->dev);
	else if (rc != 0 && rc != -EBUSY)
		fail_run(r, "client %d: %s on device %u returned %d", cl->id, what, c->dev, rc);
}

static int query_of(struct client *cl, const struct call *c)
{
	struct dpart *p = &cl->d[c->dev];
	switch (c->kind) {
	case C_SQUERY:
	case C_SSYNC:
		return ve_vctx_stream_query(p->v, p->sh[c->s]);
	case C_EQUERY:
	case C_ESYNC:
		return ve_vctx_event_query(p->v, p->eh[c->e]);
	default:
		return ve_vctx_ctx_query(p->v);
	}
}

/* Issues the client's next call; false if it is a sync that must wait
 * (one thread drives everything, so a sync is issued once its query says the
 * work is done, and must then return at once). */
static bool issue(struct run *r, struct client *cl)
{
	const struct call *c = &cl->c[cl->pc];
	struct dpart *p = &cl->d[c->dev];
	int rc = 0;
	switch (c->kind) {
	case C_WORK:
	case C_PEER: {
		struct ve_desc d;
		build_desc(cl, c->gop, &d);
		rc = ve_vctx_submit(p->v, p->sh[c->s], &d, VE_SUBMIT_NONBLOCK, &cl->tok[c->gop]);
		cl->peers += c->kind == C_PEER;
		break;
	}
	case C_RECORD:
		rc = ve_vctx_event_record(p->v, p->eh[c->e], p->sh[c->s], code_of(cl->id, c->gop));
		if (rc == 0 && gs_has(&cl->ext, c->gop))
			rc = ve_vctx_event_generation(p->v, p->eh[c->e], NULL, &cl->tok[c->gop]);
		break;
	case C_WAIT:
		rc = ve_vctx_stream_wait_event(p->v, p->sh[c->s], p->eh[c->e]);
		break;
	case C_XWAIT: {
		struct dpart *sp = &cl->d[c->sdev];
		cl->xwaits++;
		cl->xwaits_pending += ve_vctx_event_query(sp->v, sp->eh[c->e]) == -EBUSY;
		rc = ve_vctx_stream_wait_event_extern(p->v, p->sh[c->s], sp->v, sp->eh[c->e]);
		break;
	}
	case C_SQUERY:
	case C_EQUERY:
		cl->queries++;
		check_query(r, cl, c, query_of(cl, c), "query");
		break;
	default: {
		int q = query_of(cl, c);
		check_query(r, cl, c, q, "query before a sync");
		if (q == -EBUSY && !r->threaded)
			return false;
		cl->syncs++;
		rc = c->kind == C_SSYNC	  ? ve_vctx_stream_sync(p->v, p->sh[c->s])
		     : c->kind == C_ESYNC ? ve_vctx_event_sync(p->v, p->eh[c->e])
					  : ve_vctx_ctx_sync(p->v);
		int miss = first_missing(cl, &c->req, cl->done);
		if (rc == 0 && miss != RM_NONE)
			fail_run(r,
				 "client %d: sync on device %u returned before required op%d (dev "
				 "%u) completed",
				 cl->id, c->dev, miss, cl->g[miss].dev);
		break;
	}
	}
	if (rc)
		fail_run(r, "client %d call #%d (kind %d, device %u) returned %d", cl->id, cl->pc,
			 c->kind, c->dev, rc);
	cl->pc++;
	return true;
}

/* ------------------------------------------------------------------ a run */

static void print_listing(const struct run *r)
{
	static const char *wkn[] = {"kernel", "coop", "copy", "memset", "host", "peer"};
	for (int c = 0; c < r->nclients; c++) {
		const struct client *cl = &r->cl[c];
		fprintf(stderr, "client %d: %d calls (%d issued), %d ops\n", c, cl->ncalls, cl->pc,
			cl->ngops);
		for (int i = 0; i < cl->ncalls; i++) {
			const struct call *k = &cl->c[i];
			if (k->kind == C_XWAIT)
				fprintf(stderr,
					"  call %d: op%d = wait on dev %u s%d for dev %u e%d\n", i,
					k->gop, k->dev, k->s, k->sdev, k->e);
			else if (k->kind >= C_SQUERY)
				fprintf(stderr, "  call %d: %s on dev %u s%d e%d\n", i,
					k->kind == C_SQUERY   ? "stream query"
					: k->kind == C_EQUERY ? "event query"
					: k->kind == C_SSYNC  ? "stream sync"
					: k->kind == C_ESYNC  ? "event sync"
							      : "ctx sync",
					k->dev, k->s, k->e);
		}
		for (int g = 0; g < cl->ngops; g++) {
			const struct gop *o = &cl->g[g];
			fprintf(stderr, "  op%d dev %u: ", g, o->dev);
			rm_print_op(&cl->d[o->dev].m, o->lop, stderr);
			fprintf(stderr, " anc={");
			for (int a = 0; a < g; a++)
				if (gs_has(&cl->anc[g], a) && cl->g[a].dev != o->dev)
					fprintf(stderr, " op%d@dev%u", a, cl->g[a].dev);
			fprintf(stderr, " } (cross-device ancestors)");
			if (o->ext) {
				const struct opst *s = &cl->os[g];
				fprintf(stderr,
					" wk=%s sub=%u bind=%u start=%u end=%u comp=%u host=%u "
					"entry=%u%s",
					cl->d[o->dev].m.op[o->lop].kind == RM_OP_WORK ? wkn[o->wk]
										      : "record",
					s->nsub, s->nbind, s->nstart, s->nend, s->ncomp, s->nhost,
					s->entry, s->shared ? " shared" : "");
			}
			fprintf(stderr, "\n");
		}
	}
	for (int d = 0; d < r->ndev; d++) {
		fprintf(stderr, "device %d:\n", d);
		if (r->dv[d].pool)
			ve_pool_dump(r->dv[d].pool, stderr);
		for (int c = 0; c < r->nclients; c++)
			if (r->cl[c].d[d].v)
				ve_vctx_dump(r->cl[c].d[d].v, stderr);
	}
}

static void drive(struct run *r, uint64_t *rng)
{
	int stall = 0;
	for (long it = 0; it < 5000000 && !r->failed; it++) {
		bool issued = false, all_issued = true;
		for (int c = 0; c < r->nclients; c++) {
			struct client *cl = &r->cl[c];
			for (int k = (int)rnd(rng, 9); k > 0 && cl->pc < cl->ncalls; k--) {
				if (!issue(r, cl))
					break;
				issued = true;
			}
			all_issued &= cl->pc == cl->ncalls;
		}
		int moved = 0;
		uint32_t first = rnd(rng, (uint32_t)r->ndev);
		for (int i = 0; i < r->ndev; i++) {
			struct dev *dv = &r->dv[(first + (uint32_t)i) % (uint32_t)r->ndev];
			for (int k = 0; k < 16; k++) {
				int n = ve_dispatcher_poll(dv->d);
				if (n <= 0)
					break;
				moved += n;
			}
		}
		/* Each device's clock moves on its own: one device, picked at
		 * random among those with work, advances to its next event (or
		 * part of the way), so devices race each other. */
		int busy[MAX_DEV], nbusy = 0;
		uint64_t tnext[MAX_DEV];
		for (int i = 0; i < r->ndev; i++)
			if (ve_sim_peek(r->dv[i].b, &tnext[i]) == 0)
				busy[nbusy++] = i;
		if (nbusy) {
			int i = busy[rnd(rng, (uint32_t)nbusy)];
			struct ve_backend *b = r->dv[i].b;
			uint64_t now = ve_sim_now(b);
			if (tnext[i] > now && rnd(rng, 4) == 0)
				ve_sim_advance_to(
				    b,
				    now + 1 + rnd(rng, (uint32_t)VE_MIN(tnext[i] - now, 1u << 30)));
			else
				ve_sim_advance(b, NULL);
			stall = 0;
			continue;
		}
		if (issued || moved) {
			stall = 0;
			continue;
		}
		bool quiet = true;
		for (int i = 0; i < r->ndev; i++)
			quiet &= ve_dispatcher_quiescent(r->dv[i].d);
		if (all_issued && quiet)
			return;
		if (++stall > 1000) {
			fail_run(r, "stuck: nothing runs, nothing moves, and work is left");
			return;
		}
		for (int i = 0; i < r->ndev; i++)
			ve_sim_advance_to(r->dv[i].b, ve_sim_now(r->dv[i].b) + 100000);
	}
	if (!r->failed)
		fail_run(r, "did not finish");
}

static void final_checks(struct run *r)
{
	for (int c = 0; c < r->nclients && !r->failed; c++) {
		struct client *cl = &r->cl[c];
		for (int g = 0; g < cl->ngops && !r->failed; g++) {
			if (!cl->g[g].ext)
				continue;
			const struct opst *o = &cl->os[g];
			bool host = cl->g[g].wk == W_HOST &&
				    cl->d[cl->g[g].dev].m.op[cl->g[g].lop].kind == RM_OP_WORK;
			if (host
				? (o->nhost != 1 || o->nsub)
				: (o->nsub != 1 || o->nstart != 1 || o->nend != 1 || o->ncomp != 1))
				fail_run(r,
					 "client %d op%d (dev %u) lost or duplicated: sub %u start "
					 "%u end %u comp %u host %u",
					 c, g, cl->g[g].dev, o->nsub, o->nstart, o->nend, o->ncomp,
					 o->nhost);
		}
		for (int d = 0; d < r->ndev && !r->failed; d++) {
			struct ve_vctx_stats vs;
			ve_vctx_stats(cl->d[d].v, &vs);
			int q = ve_vctx_ctx_query(cl->d[d].v);
			if (vs.live_ops || vs.ready_ops || vs.watchers || vs.extern_holds || q)
				fail_run(r,
					 "client %d not idle on device %d at the end: %u live, %u "
					 "ready, %u watchers, %u held cross-device waits, "
					 "ctx_query %d",
					 c, d, vs.live_ops, vs.ready_ops, vs.watchers,
					 vs.extern_holds, q);
		}
		/* Cross-device order was exercised: ops with an ancestor on another device. */
		for (int g = 0; g < cl->ngops; g++)
			for (int a = 0; a < g; a++)
				if (gs_has(&cl->anc[g], a) && cl->g[a].dev != cl->g[g].dev &&
				    cl->g[g].ext) {
					r->xordered++;
					break;
				}
	}
	for (int d = 0; d < r->ndev && !r->failed; d++) {
		struct dev *dv = &r->dv[d];
		struct ve_sim_stats ss;
		struct ve_dispatcher_stats ds;
		struct ve_coord_stats cs;
		ve_sim_stats(dv->b, &ss);
		ve_dispatcher_stats(dv->d, &ds);
		ve_coord_stats(dv->co, &cs);
		g_tot.submit_faults += ss.submit_faults;
		if (ds.submit_failures != ss.submit_faults)
			fail_run(r,
				 "device %d: dispatcher saw %llu submit failures, the sim injected "
				 "%llu",
				 d, (unsigned long long)ds.submit_failures,
				 (unsigned long long)ss.submit_faults);
		if (cs.bindings + cs.pipelined != cs.failed_submits + cs.completions)
			fail_run(
			    r,
			    "device %d coordinator: %llu bindings + %llu pipelined, %llu failed "
			    "submissions, %llu completions",
			    d, (unsigned long long)cs.bindings, (unsigned long long)cs.pipelined,
			    (unsigned long long)cs.failed_submits,
			    (unsigned long long)cs.completions);
		if (dv->nrn)
			fail_run(r, "device %d: %d kernels still running", d, dv->nrn);
		for (uint32_t e = 0; e < dv->pool->nentries; e++) {
			const struct ve_pool_entry *pe = &dv->pool->e[e];
			if (pe->outstanding || pe->state != VE_ENTRY_IDLE ||
			    pe->reserve_for != VE_HOLDER_NONE)
				fail_run(
				    r, "device %d: entry %u left %s (holder %d, %u outstanding)", d,
				    e, ve_entry_state_name(pe->state), pe->holder, pe->outstanding);
		}
	}
}

static bool setup_dev(struct run *r, int i, uint64_t *rng)
{
	struct dev *dv = &r->dv[i];
	dv->idx = i;
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.sm_count = dev_sms[i];
	sc.nleaves = 0; /* derive this device's split (the default is the H200's) */
	sc.seed = r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
	sc.capacity = 4096;
	sc.jitter = 0.05 + 0.4 * (double)rnd(rng, 1000) / 1000.0;
	sc.submit_latency_ns = rnd(rng, 4) ? rnd(rng, 4000) : 0;
	sc.fail_submit_prob = (r->seed & 1) ? 0.03 : 0;
	sc.wait_advances = r->threaded; /* the dispatcher thread's waits move its clock */
	sc.on_event = on_event;
	sc.on_event_arg = dv;
	if (ve_sim_create(&sc, &dv->b))
		return false;
	struct ve_gpu_info gi;
	dv->b->ops->info(dv->b, &gi);
	char err[256];
	/* One stack per device, as a multi-GPU process builds them. */
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .device = i,
					 .policy = r->policy,
					 .max_clients = 8,
					 .seed = sc.seed,
					 /* per-op binding: its checks follow each binding's
					  * lease; grant mode is test_dispatch's */
					 .per_op = true,
					 .dispatch = {.lanes_per_entry = 1 + rnd(rng, 4),
						      .copy_lanes = 1 + rnd(rng, 4),
						      .max_inflight = 4096,
						      .host_inline = true,
						      .on_submit = on_submit,
						      .on_complete = on_complete,
						      .on_bind = on_bind,
						      .observer_arg = dv}};
	if (ve_runtime_create(&rcfg, dv->b, &dv->rt, err, sizeof(err))) {
		fprintf(stderr, "runtime (%s) of device %d: %s\n", r->policy, i, err);
		return false;
	}
	dv->co = ve_runtime_coord(dv->rt);
	dv->d = ve_runtime_dispatcher(dv->rt);
	dv->pool = ve_runtime_pool(dv->rt);
	return true;
}

static bool setup_client(struct run *r, struct client *cl)
{
	for (int d = 0; d < r->ndev; d++) {
		struct dpart *p = &cl->d[d];
		struct ve_vctx_config vc = {
		    .client_id = (uint32_t)cl->id, .max_ops = 1024, .max_watchers = 64};
		if (ve_vctx_create(&vc, &p->v))
			return false;
		for (int s = 1; s < p->m.nstreams; s++) {
			int k = p->m.st[s].kind, rc;
			if (k == RM_PER_THREAD)
				rc = ve_vctx_stream_per_thread(p->v, p->skey[s], &p->sh[s]);
			else
				rc = ve_vctx_stream_create(p->v,
							   k == RM_NONBLOCKING
							       ? VE_STREAM_NON_BLOCKING
							       : VE_STREAM_DEFAULT,
							   p->sprio[s], &p->sh[s]);
			if (rc)
				return false;
		}
		for (int e = 0; e < p->nreal_events; e++)
			if (ve_vctx_event_create(p->v,
						 p->m.ev[e].timing ? VE_EVENT_DEFAULT
								   : VE_EVENT_DISABLE_TIMING,
						 &p->eh[e]))
				return false;
		if (ve_runtime_attach(r->dv[d].rt, p->v, (uint32_t)cl->id, 0))
			return false;
	}
	return true;
}

/* Threaded: one thread per client issues its program with real blocking
 * syncs, then synchronises every context it has. */
static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct run *r = &g_run;
	while (cl->pc < cl->ncalls && !atomic_load(&r->failed))
		issue(r, cl);
	for (int d = 0; d < r->ndev && !atomic_load(&r->failed); d++) {
		int rc = ve_vctx_ctx_sync(cl->d[d].v);
		if (rc)
			fail_run(r, "client %d: final ctx_sync on device %d: %d", cl->id, d, rc);
	}
	return NULL;
}

static void drive_threaded(struct run *r)
{
	int started = 0, spawned = 0;
	for (; started < r->ndev; started++)
		if (ve_runtime_start(r->dv[started].rt)) {
			fail_run(r, "dispatcher thread of device %d", started);
			break;
		}
	for (; spawned < r->nclients && started == r->ndev; spawned++)
		if (pthread_create(&r->cl[spawned].th, NULL, client_main, &r->cl[spawned])) {
			fail_run(r, "client thread %d", spawned);
			break;
		}
	for (int c = 0; c < spawned; c++)
		pthread_join(r->cl[c].th, NULL);
	/* Every op completed (ctx_sync), but a dispatcher may still be finishing
	 * its bookkeeping after the last completion: stop (join) them first. */
	for (int i = 0; i < started; i++)
		ve_runtime_stop(r->dv[i].rt);
}

static bool run_one(const char *test, const char *policy, uint64_t seed, bool threaded)
{
	struct run *r = &g_run;
	memset(r, 0, sizeof(*r));
	atomic_init(&r->failed, false);
	for (int c = 0; c < MAX_CLIENTS; c++)
		for (int g = 0; g < MAX_GOPS; g++) {
			atomic_init(&r->cl[c].done[g], 0);
			atomic_init(&r->cl[c].ended[g], 0);
		}
	r->seed = seed;
	r->policy = policy;
	r->threaded = threaded;
	uint64_t rng = seed;
	r->ndev = 2 + (int)rnd(&rng, MAX_DEV - 1);
	r->nclients = 1 + (int)rnd(&rng, MAX_CLIENTS);
	for (int c = 0; c < r->nclients; c++)
		gen_client(r, &r->cl[c], c, &rng);
	bool ok = true;
	for (int i = 0; i < r->ndev && ok; i++)
		ok = setup_dev(r, i, &rng);
	for (int c = 0; c < r->nclients && ok; c++)
		ok = setup_client(r, &r->cl[c]);
	if (!ok)
		fail_run(r, "setup failed");
	else if (threaded)
		drive_threaded(r);
	else
		drive(r, &rng);
	if (!r->failed)
		final_checks(r);
	ok = !r->failed;
	if (!ok) {
		fprintf(stderr, "\n==== %s: policy %s seed %#llx (%d devices, %d clients): %s\n",
			test, policy, (unsigned long long)seed, r->ndev, r->nclients, r->err);
		print_listing(r);
		fprintf(stderr, "replay: VE_SEED=%#llx ./test_multidev %s%s\n",
			(unsigned long long)seed, test,
			threaded ? " (the program; thread interleavings differ run to run)" : "");
	}
	g_tot.runs++;
	for (int c = 0; c < r->nclients; c++) {
		const struct client *cl = &r->cl[c];
		g_tot.ops += (uint64_t)cl->ngops;
		g_tot.xwaits += cl->xwaits;
		g_tot.xwaits_pending += cl->xwaits_pending;
		g_tot.peers += cl->peers;
		g_tot.syncs += cl->syncs;
		g_tot.queries += cl->queries;
	}
	for (int i = 0; i < r->ndev; i++) {
		g_tot.kernels += r->dv[i].kernels;
		g_tot.shared_overlaps += r->dv[i].shared_overlaps;
		if (r->dv[i].max_conc > g_tot.max_conc)
			g_tot.max_conc = r->dv[i].max_conc;
	}
	g_tot.xordered += r->xordered;
	/* Runtimes first (their dispatchers reference the vctxs), then every
	 * vctx, then sims. */
	for (int i = 0; i < r->ndev; i++)
		ve_runtime_destroy(r->dv[i].rt);
	for (int c = 0; c < r->nclients; c++)
		for (int d = 0; d < r->ndev; d++)
			ve_vctx_destroy(r->cl[c].d[d].v);
	for (int i = 0; i < r->ndev; i++) {
		if (r->dv[i].b)
			r->dv[i].b->ops->destroy(r->dv[i].b);
	}
	return ok;
}

static void run_all(const char *test, uint64_t base, const char *policy, bool threaded)
{
	long n = ve_test_env_long("VE_MULTIDEV_N", MD_SANITIZED ? 6 : 40);
	if (threaded)
		n = n / 4 > 2 ? n / 4 : 2; /* real threads: fewer, smaller programs */
	bool replay = getenv("VE_SEED") != NULL;
	if (replay)
		n = 1;
	if (n > 256)
		n = 256;
	memset(&g_tot, 0, sizeof(g_tot));
	uint64_t seeds[256];
	for (long i = 0; i < n; i++)
		seeds[i] = replay ? ve_test_seed(0) : ve__mix64(base + (uint64_t)i);
	printf("# %s %s: seeds", test, policy);
	for (long i = 0; i < n; i++)
		printf(" %#llx", (unsigned long long)seeds[i]);
	printf("\n");
	int failures = 0;
	for (long i = 0; i < n; i++)
		failures += !run_one(test, policy, seeds[i], threaded);
	printf("# %s (%s): %llu runs, %llu ops, %llu kernels, %llu cross-device waits (%llu on a "
	       "pending generation), %llu ops ordered after another device's, %llu peer "
	       "copies, %llu syncs, %llu queries, %llu SM-sharing overlaps (all allowed), up to "
	       "%llu kernels at once on a device, %llu injected submit failures\n",
	       test, policy, (unsigned long long)g_tot.runs, (unsigned long long)g_tot.ops,
	       (unsigned long long)g_tot.kernels, (unsigned long long)g_tot.xwaits,
	       (unsigned long long)g_tot.xwaits_pending, (unsigned long long)g_tot.xordered,
	       (unsigned long long)g_tot.peers, (unsigned long long)g_tot.syncs,
	       (unsigned long long)g_tot.queries, (unsigned long long)g_tot.shared_overlaps,
	       (unsigned long long)g_tot.max_conc, (unsigned long long)g_tot.submit_faults);
	VE_CHECK_MSG(failures == 0, "%d run(s) failed, see above", failures);
	if (!replay && !threaded) {
		/* The properties were exercised, not vacuous (with threads, how
		 * much overlaps is up to the scheduler: printed above). */
		VE_CHECK(g_tot.xwaits_pending > 0);
		VE_CHECK(g_tot.xordered > 0);
		VE_CHECK(g_tot.peers > 0);
		VE_CHECK(g_tot.syncs > 0);
	}
}

/* ------------------------------------------------------------------ tests */

VE_TEST(multidev_random_chaos)
{
	run_all("multidev_random_chaos", 0x3d1c4a05, "chaos", false);
	/* chaos shares entries at random: the overlap check saw it. */
	if (!getenv("VE_SEED"))
		VE_CHECK(g_tot.shared_overlaps > 0);
}

VE_TEST(multidev_random_tput)
{
	run_all("multidev_random_tput", 0x3d7b07, "tput", false);
	/* tput never shares an entry; kernels of one device do run side by side. */
	VE_CHECK_EQ(g_tot.shared_overlaps, 0);
	if (!getenv("VE_SEED"))
		VE_CHECK(g_tot.max_conc > 1);
}

/* The same programs with the runtime's own threads: each device's dispatcher
 * on its thread (its sim's clock moved by that thread's backend waits), one
 * thread per client issuing calls with real blocking syncs. A cross-device
 * wait is released on the source device's dispatcher thread, which wakes the
 * waiting device's dispatcher: the path a multi-GPU process takes. Checked:
 * (a), (b) and (c) except "busy" answers (a query may turn done at any time).
 * Under TSan this is the data-race check of the cross-vctx calls. */
VE_TEST(multidev_threads)
{
	alarm(MD_SANITIZED ? 300 : 60); /* a lost wake-up or a held marker would hang */
	run_all("multidev_threads", 0x3d7e4d, "chaos", true);
	run_all("multidev_threads", 0x3d7e4e, "tput", true);
	alarm(0);
}
