/* SPDX-License-Identifier: MIT */
/*
 * Property test: random CUDA-like programs run through the vctx and checked
 * against the reference model of CUDA's ordering rules (refmodel.h).
 *
 * Each program mixes blocking, non-blocking, legacy and per-thread default
 * streams, kernels, copies, memsets, host functions, timed and untimed event
 * records and re-records, waits (on never-recorded events too), stream and
 * event destroys with pending work, syncs, queries and elapsed times. It is
 * generated from one 64-bit seed together with its reference graph, then:
 *
 *  1. executed once with a random legal executor (pops, dispatches, requeues
 *     and completes in random order, interleaved with the program's calls):
 *     (a) an op is popped only after every reference predecessor completed;
 *     (b) every tracked op is popped once per requeue plus one and completed
 *         exactly once, and the vctx is empty at the end;
 *     (d) each query agrees with the reference in both directions (0 only
 *         when every required op completed, -EBUSY only when one did not),
 *         each sync returns only then (half of them from a real second
 *         thread that blocks), elapsed times match the completion stamps;
 *  2. (c) re-run adversarially for a sample of reference-incomparable pairs
 *     (a, b): only ops in anc(a) u anc(b) are completed (that set is closed
 *     under predecessors, so this is a legal execution in which nothing
 *     orders a and b); both must then be ready together, or the vctx holds
 *     an edge CUDA does not require.
 *
 * Tracked ops are the ones that leave the vctx (kernels, copies, memsets, host
 * functions, timed records); inline markers never do. Each tracked op's
 * descriptor names its model op, so a popped token maps back without a table.
 *
 * VE_PROP_N programs (default 10000; a tenth of that under sanitizers or with
 * VE_TSAN=1). VE_SEED=<seed> replays exactly one program, whose seed a
 * failure prints together with the listing, the reference graph and
 * ve_vctx_dump(). VE_PROP_VERBOSE=1 prints the listing of every program run.
 */
#include "../harness.h"
#include "refmodel.h"

#include "core/vctx.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PROP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PROP_SANITIZED 1
#endif
#endif
#ifndef PROP_SANITIZED
#define PROP_SANITIZED 0
#endif

#define MAX_CALLS   220
#define MAX_STREAMS 24 /* per program, legacy included */
#define MAX_EVENTS  16
#define MAX_OPS	    400
#define MAX_BIG	    12 /* kernels with a payload beyond the inline size */
#define ADV_PAIRS   6  /* adversarial re-runs per program */

#define CFG_MAX_OPS   (MAX_OPS + 64)
#define CFG_MAX_EDGES (CFG_MAX_OPS * (MAX_STREAMS + 4))

_Static_assert(MAX_OPS <= RM_MAX_OPS && MAX_STREAMS <= RM_MAX_STREAMS &&
		   MAX_EVENTS <= RM_MAX_EVENTS,
	       "program limits exceed the model's");

enum call_kind {
	C_STREAM,   /* create a stream; sub = VE_STREAM_* flags, prio */
	C_PTDS,	    /* the per-thread default stream of 'key' */
	C_EVENT,    /* create an event; sub = VE_EVENT_* flags */
	C_WORK,	    /* sub = VE_OP_KERNEL / MEMCPY / MEMSET / HOST_FN */
	C_RECORD,   /* record e on s */
	C_WAIT,	    /* s waits on e */
	C_SDESTROY, /* destroy s (pending work stays) */
	C_EDESTROY, /* destroy e (pending generation stays) */
	C_SSYNC,
	C_SQUERY,
	C_ESYNC,
	C_EQUERY,
	C_CSYNC,
	C_CQUERY,
	C_ELAPSED, /* elapsed time e -> e2 */
	C_STALE,   /* a call with a destroyed handle; sub = which call */
};

static const char *call_name[] = {
    "stream_create",  "per_thread",    "event_create", "work",	       "record",     "wait",
    "stream_destroy", "event_destroy", "stream_sync",  "stream_query", "event_sync", "event_query",
    "ctx_sync",	      "ctx_query",     "elapsed",      "stale",
};

enum stale_kind {
	ST_SUBMIT,
	ST_RECORD_S,
	ST_WAIT_S,
	ST_SSYNC,
	ST_SQUERY,
	ST_RECORD_E,
	ST_WAIT_E,
	ST_EQUERY,
	ST_ESYNC,
	ST_N
};

struct call {
	uint8_t kind;
	uint8_t sub;
	int8_t prio;
	int16_t s, e, e2;
	int16_t op, op2; /* model op created; for elapsed: generations of e and e2 */
	uint64_t key;
	rm_set req; /* syncs and queries: ops that must be complete */
};

struct prog {
	uint64_t seed;
	int ncalls;
	struct call c[MAX_CALLS];
	struct rm_model m;
	rm_set ext;		    /* tracked ops */
	uint8_t work_kind[MAX_OPS]; /* VE_OP_* of tracked ops */
	uint16_t plen[MAX_OPS];	    /* kernel payload bytes */
	uint8_t nparams[MAX_OPS];
	int8_t sprio[MAX_STREAMS];
};

enum op_state { OS_NONE = 0, OS_SUB, OS_POP, OS_DISP, OS_DONE };

struct exec {
	const struct prog *p;
	struct ve_vctx *v;
	bool adversarial;
	uint64_t rng;
	uint64_t clock;
	ve_stream sh[MAX_STREAMS];
	uint32_t sidx[MAX_STREAMS];
	ve_event eh[MAX_EVENTS];
	ve_stream dead_s; /* a destroyed stream handle, 0 if none yet */
	ve_event dead_e;
	uint8_t st[MAX_OPS];
	uint8_t npop[MAX_OPS];
	uint8_t nreq[MAX_OPS];
	ve_tok tok[MAX_OPS];
	uint64_t t_done[MAX_OPS];
	rm_set done;
	int16_t fl[MAX_OPS]; /* popped, not completed */
	int nfl;
	int a, b; /* adversarial: the delayed pair (b may be RM_NONE) */
	rm_set P; /* adversarial: ops allowed to complete */
	int call; /* current call, for messages */
};

static struct prog g_prog;
static uint64_t g_digest; /* of the executed sequence: replays must match */

/* Coverage counters, printed at the end so a weakened generator shows. */
static struct {
	unsigned long progs, ops, pops, requeues, eagain, sync_threaded, sync_polled, queries, busy,
	    elapsed_ok, elapsed_err, stale, adv_runs, adv_pairs, legacy_ops, ptds_ops, nb_ops,
	    waits_unrecorded, rerecords, destroyed_pending;
} g_n;
static char g_alarm_msg[160];
static int g_alarm_len;

static uint32_t rnd(uint64_t *r, uint32_t n)
{
	return n ? (uint32_t)(((ve_test_rand(r) >> 32) * (uint64_t)n) >> 32) : 0;
}

static void dummy_kernel(void)
{
}

static _Atomic unsigned long g_host_calls;

static void dummy_host(void *arg)
{
	(void)arg;
	g_host_calls++;
}

/* ------------------------------------------------------------------ generation */

static int live_stream(const struct prog *p, uint64_t *r, int legacy_pct)
{
	const struct rm_model *m = &p->m;
	if ((int)rnd(r, 100) < legacy_pct)
		return 0;
	int cand[MAX_STREAMS], n = 0;
	for (int s = 1; s < m->nstreams; s++)
		if (!m->st[s].destroyed)
			cand[n++] = s;
	return n ? cand[rnd(r, (uint32_t)n)] : 0;
}

static int live_event(const struct prog *p, uint64_t *r)
{
	int cand[MAX_EVENTS], n = 0;
	for (int e = 0; e < p->m.nevents; e++)
		if (!p->m.ev[e].destroyed)
			cand[n++] = e;
	return n ? cand[rnd(r, (uint32_t)n)] : RM_NONE;
}

static struct call *add_call(struct prog *p, int kind)
{
	struct call *c = &p->c[p->ncalls++];
	memset(c, 0, sizeof(*c));
	c->kind = (uint8_t)kind;
	c->s = c->e = c->e2 = c->op = c->op2 = RM_NONE;
	return c;
}

static void gen_stream(struct prog *p, uint64_t *r)
{
	struct call *c = add_call(p, C_STREAM);
	c->sub = rnd(r, 3) == 0 ? VE_STREAM_NON_BLOCKING : VE_STREAM_DEFAULT;
	c->prio = (int8_t) - (int)rnd(r, 3);
	c->s = (int16_t)rm_stream_create(&p->m, c->sub & VE_STREAM_NON_BLOCKING);
	p->sprio[c->s] = c->prio;
}

static void gen_ptds(struct prog *p, uint64_t *r)
{
	struct call *c = add_call(p, C_PTDS);
	c->key = 0x1000 + rnd(r, 4); /* a few "threads" */
	c->s = (int16_t)rm_stream_per_thread(&p->m, c->key);
	p->sprio[c->s] = 0;
}

static void gen_event(struct prog *p, uint64_t *r)
{
	struct call *c = add_call(p, C_EVENT);
	c->sub = rnd(r, 3) == 0 ? VE_EVENT_DISABLE_TIMING : VE_EVENT_DEFAULT;
	if (rnd(r, 4) == 0)
		c->sub |= VE_EVENT_BLOCKING_SYNC;
	c->e = (int16_t)rm_event_create(&p->m, !(c->sub & VE_EVENT_DISABLE_TIMING));
}

static void gen_prog(struct prog *p, uint64_t seed)
{
	uint64_t r = seed;
	memset(p, 0, sizeof(*p));
	p->seed = seed;
	rm_init(&p->m);
	struct rm_model *m = &p->m;
	int target = 6 + (int)rnd(&r, MAX_CALLS - 20);
	int legacy_pct = (int)rnd(&r, 35);
	/* Per-program mix: weights of work, record, wait, sync/query, other. */
	int w_work = 25 + (int)rnd(&r, 40), w_rec = 5 + (int)rnd(&r, 15);
	int w_wait = 5 + (int)rnd(&r, 15), w_sync = 2 + (int)rnd(&r, 10);
	int w_misc = 3 + (int)rnd(&r, 8);
	int wsum = w_work + w_rec + w_wait + w_sync + w_misc;
	int nbig = 0;

	for (int i = (int)rnd(&r, 4); i >= 0; i--)
		gen_stream(p, &r);
	for (int i = (int)rnd(&r, 3); i > 0; i--)
		gen_ptds(p, &r);
	for (int i = (int)rnd(&r, 4); i >= 0; i--)
		gen_event(p, &r);

	while (p->ncalls < target && m->nops < MAX_OPS - 1) {
		int x = (int)rnd(&r, (uint32_t)wsum);
		if ((x -= w_work) < 0) {
			struct call *c = add_call(p, C_WORK);
			static const uint8_t kinds[] = {VE_OP_KERNEL, VE_OP_KERNEL, VE_OP_KERNEL,
							VE_OP_MEMCPY, VE_OP_MEMSET, VE_OP_HOST_FN};
			c->sub = kinds[rnd(&r, sizeof(kinds))];
			c->s = (int16_t)live_stream(p, &r, legacy_pct);
			c->op = (int16_t)rm_work(m, c->s);
			rm_set_add(&p->ext, c->op);
			p->work_kind[c->op] = c->sub;
			if (c->sub == VE_OP_KERNEL) {
				uint32_t plen = 8 * rnd(&r, 9); /* ~0-64 bytes of params */
				if (nbig < MAX_BIG && rnd(&r, 16) == 0) {
					plen = 300 + rnd(&r, 3000);
					nbig++;
				}
				p->plen[c->op] = (uint16_t)plen;
				p->nparams[c->op] = (uint8_t)(plen >= 16 && rnd(&r, 2) ? 2 : 0);
			}
		} else if ((x -= w_rec) < 0) {
			int e = live_event(p, &r);
			if (e == RM_NONE)
				continue;
			struct call *c = add_call(p, C_RECORD);
			c->e = (int16_t)e;
			c->s = (int16_t)live_stream(p, &r, legacy_pct);
			c->op = (int16_t)rm_event_record(m, e, c->s);
			if (m->op[c->op].external) {
				rm_set_add(&p->ext, c->op);
				p->work_kind[c->op] = VE_OP_EVENT_RECORD;
			}
		} else if ((x -= w_wait) < 0) {
			int e = live_event(p, &r);
			if (e == RM_NONE)
				continue;
			struct call *c = add_call(p, C_WAIT);
			c->e = (int16_t)e;
			c->s = (int16_t)live_stream(p, &r, legacy_pct);
			c->op = (int16_t)rm_stream_wait_event(m, c->s, e);
		} else if ((x -= w_sync) < 0) {
			int k = (int)rnd(&r, 14);
			int kind = k < 4    ? C_SQUERY
				   : k < 7  ? C_SSYNC
				   : k < 9  ? C_EQUERY
				   : k < 11 ? C_ESYNC
				   : k < 12 ? C_CQUERY
				   : k < 13 ? C_CSYNC
					    : C_ELAPSED;
			struct call *c = add_call(p, kind);
			if (kind == C_SQUERY || kind == C_SSYNC) {
				c->s = (int16_t)live_stream(p, &r, 30);
				rm_required_stream(m, c->s, &c->req);
			} else if (kind == C_EQUERY || kind == C_ESYNC || kind == C_ELAPSED) {
				c->e = (int16_t)live_event(p, &r);
				c->e2 = (int16_t)live_event(p, &r);
				if (c->e == RM_NONE) {
					p->ncalls--;
					continue;
				}
				rm_required_event(m, c->e, &c->req);
				c->op = (int16_t)m->ev[c->e].gen;
				c->op2 = (int16_t)m->ev[c->e2].gen;
			} else {
				rm_required_ctx(m, &c->req);
			}
		} else {
			int k = (int)rnd(&r, 10);
			if (k < 2 && m->nstreams < MAX_STREAMS) {
				gen_stream(p, &r);
			} else if (k < 3 && m->nstreams < MAX_STREAMS) {
				gen_ptds(p, &r);
			} else if (k < 5 && m->nevents < MAX_EVENTS) {
				gen_event(p, &r);
			} else if (k < 7) {
				int s = live_stream(p, &r, 0);
				if (s == 0 || m->st[s].kind == RM_PER_THREAD)
					continue;
				struct call *c = add_call(p, C_SDESTROY);
				c->s = (int16_t)s;
				rm_stream_destroy(m, s);
			} else if (k < 8) {
				int e = live_event(p, &r);
				if (e == RM_NONE)
					continue;
				struct call *c = add_call(p, C_EDESTROY);
				c->e = (int16_t)e;
				rm_event_destroy(m, e);
			} else {
				struct call *c = add_call(p, C_STALE);
				c->sub = (uint8_t)rnd(&r, ST_N);
				c->s = (int16_t)live_stream(p, &r, 20);
				c->e = (int16_t)live_event(p, &r);
			}
		}
	}
	add_call(p, C_CSYNC);
	rm_required_ctx(m, &p->c[p->ncalls - 1].req);
}

static void print_call(const struct prog *p, int i, FILE *f)
{
	const struct call *c = &p->c[i];
	fprintf(f, "  #%-3d %-14s", i, call_name[c->kind]);
	if (c->kind == C_WORK)
		fprintf(f, " %s", ve_op_kind_name(c->sub));
	if (c->s != RM_NONE)
		fprintf(f, " s%d(%s)", c->s, rm_stream_kind_name(p->m.st[c->s].kind));
	if (c->e != RM_NONE)
		fprintf(f, " e%d%s", c->e, p->m.ev[c->e].timing ? "" : "(no timing)");
	if (c->kind == C_ELAPSED)
		fprintf(f, " e%d gens op%d op%d", c->e2, c->op, c->op2);
	if (c->kind == C_PTDS)
		fprintf(f, " key=%#llx", (unsigned long long)c->key);
	if (c->kind == C_STALE)
		fprintf(f, " which=%d", c->sub);
	if (c->op != RM_NONE && c->kind != C_ELAPSED) {
		fprintf(f, " -> ");
		rm_print_op(&p->m, c->op, f);
	}
	if (c->kind >= C_SSYNC && c->kind <= C_CQUERY) {
		fprintf(f, " needs={");
		int n = 0;
		for (int k = 0; k < p->m.nops; k++)
			if (rm_set_has(&c->req, k) && rm_set_has(&p->ext, k))
				fprintf(f, "%sop%d", n++ ? "," : "", k);
		fprintf(f, "}");
	}
	fputc('\n', f);
}

static void print_prog(const struct prog *p, FILE *f)
{
	fprintf(f, "program seed=%#llx: %d calls, %d ops, %d streams, %d events\n",
		(unsigned long long)p->seed, p->ncalls, p->m.nops, p->m.nstreams, p->m.nevents);
	for (int i = 0; i < p->ncalls; i++)
		print_call(p, i, f);
}

/* ------------------------------------------------------------------ failure */

static void fail(struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct exec *x, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "\n==== vctx property violated (%s run",
		x->adversarial ? "adversarial" : "random");
	if (x->adversarial)
		fprintf(stderr, ", delayed pair op%d op%d", x->a, x->b);
	fprintf(stderr, ") at call #%d:\n  ", x->call);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nreplay: VE_SEED=%#llx ./test_vctx_prop\n",
		(unsigned long long)x->p->seed);
	print_prog(x->p, stderr);
	fprintf(stderr, "executor state of tracked ops:");
	static const char *sn[] = {"-", "submitted", "popped", "dispatched", "done"};
	for (int i = 0; i < x->p->m.nops; i++)
		if (rm_set_has(&x->p->ext, i))
			fprintf(stderr, " op%d:%s", i, sn[x->st[i]]);
	fprintf(stderr, "\n");
	ve_vctx_dump(x->v, stderr);
	VE_CHECK_MSG(0, "see above (seed %#llx)", (unsigned long long)x->p->seed);
}

#define EXPECT(x, cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail((x), __VA_ARGS__);                                                    \
	} while (0)

/* First op of 'need' (restricted to tracked ops) not completed, or RM_NONE. */
static int first_missing(const struct exec *x, const rm_set *need)
{
	for (int w = 0; w < RM_WORDS; w++) {
		uint64_t miss = need->w[w] & x->p->ext.w[w] & ~x->done.w[w];
		if (miss)
			return w * 64 + __builtin_ctzll(miss);
	}
	return RM_NONE;
}

/* ------------------------------------------------------------------ executor */

static int op_of_desc(const struct ve_desc *d)
{
	switch (d->kind) {
	case VE_OP_KERNEL:
		return (int)d->u.k.name_id - 1;
	case VE_OP_MEMCPY:
		return (int)d->u.cp.src - 1;
	case VE_OP_MEMSET:
		return (int)d->u.ms.value - 1;
	case VE_OP_HOST_FN:
		return (int)(uintptr_t)d->u.host.arg - 1;
	case VE_OP_EVENT_RECORD:
		return (int)d->u.ev.app_event - 1;
	default:
		return RM_NONE;
	}
}

static uint8_t pattern(int op, uint32_t i)
{
	return (uint8_t)(op * 131 + i * 7 + 1);
}

static void check_desc(struct exec *x, int op, const struct ve_desc *d)
{
	const struct prog *p = x->p;
	EXPECT(x, d->kind == p->work_kind[op], "op%d: descriptor kind %d, expected %d", op, d->kind,
	       p->work_kind[op]);
	if (d->kind == VE_OP_KERNEL) {
		uint32_t plen = p->plen[op], np = p->nparams[op];
		EXPECT(x,
		       d->u.k.param_bytes == plen && d->u.k.nparams == np &&
			   d->payload_len == ve_desc_kernel_payload_len(0, 0, plen, np),
		       "op%d: kernel payload layout changed", op);
		for (uint32_t i = 0; i < plen; i++)
			EXPECT(x, ve_desc_params(d)[i] == pattern(op, i),
			       "op%d: parameter byte %u changed", op, i);
		if (np) {
			const uint32_t *lay = ve_desc_param_layout(d);
			EXPECT(x, lay[0] == 0 && lay[1] == 8 && lay[2] == 8 && lay[3] == plen - 8,
			       "op%d: parameter layout changed", op);
		}
	} else if (d->kind == VE_OP_EVENT_RECORD) {
		EXPECT(x, d->flags & VE_DESC_TIMED, "op%d: popped record is not timed", op);
	}
}

static void on_pop(struct exec *x, const struct ve_ready_info *ri)
{
	const struct prog *p = x->p;
	const struct ve_desc *d = ve_vctx_desc(x->v, ri->tok);
	EXPECT(x, d != NULL, "popped token %#llx has no descriptor", (unsigned long long)ri->tok);
	int op = op_of_desc(d);
	EXPECT(x, op >= 0 && op < p->m.nops && rm_set_has(&p->ext, op),
	       "popped an op the reference does not track (kind %s)", ve_op_kind_name(d->kind));
	EXPECT(x, x->st[op] == OS_SUB, "op%d popped again (state %d): run twice", op, x->st[op]);
	EXPECT(x, ri->tok == x->tok[op], "op%d popped with a different token", op);
	EXPECT(x, ri->kind == d->kind && ri->cls == ve_desc_class(d), "op%d: ready info kind/class",
	       op);
	int s = p->m.op[op].stream;
	EXPECT(x, ri->stream_idx == x->sidx[s], "op%d: ready info stream %u, expected %u", op,
	       ri->stream_idx, x->sidx[s]);
	EXPECT(x, ri->priority == p->sprio[s], "op%d: ready info priority %d, expected %d", op,
	       ri->priority, p->sprio[s]);
	check_desc(x, op, d);
	/* (a): every reference predecessor (transitively) has completed. */
	int miss = first_missing(x, &p->m.anc[op]);
	EXPECT(x, miss == RM_NONE,
	       "ordering: op%d became ready before its predecessor op%d completed", op, miss);
	x->st[op] = OS_POP;
	x->npop[op]++;
	g_digest = ve__mix64(g_digest ^ ((uint64_t)op << 1 | x->adversarial));
	g_n.pops++;
	x->fl[x->nfl++] = (int16_t)op;
}

static void fl_remove(struct exec *x, int i)
{
	x->fl[i] = x->fl[--x->nfl];
}

static void do_complete(struct exec *x, int i)
{
	int op = x->fl[i];
	x->clock += 1000 + rnd(&x->rng, 5000);
	if (x->p->work_kind[op] == VE_OP_HOST_FN) {
		const struct ve_desc *d = ve_vctx_desc(x->v, x->tok[op]);
		d->u.host.fn(d->u.host.arg);
	}
	int rc = ve_vctx_complete(x->v, x->tok[op], 0, x->clock);
	EXPECT(x, rc == 0, "complete op%d: %d", op, rc);
	x->st[op] = OS_DONE;
	x->t_done[op] = x->clock;
	rm_set_add(&x->done, op);
	fl_remove(x, i);
	/* A second completion must be refused (the token is stale now). */
	if (!x->adversarial && rnd(&x->rng, 8) == 0)
		EXPECT(x, ve_vctx_complete(x->v, x->tok[op], 0, x->clock) == -ENOENT,
		       "double complete of op%d accepted", op);
}

/* One random executor step; false when nothing can make progress. */
static bool step(struct exec *x)
{
	if (x->nfl == 0 || rnd(&x->rng, 3) == 0) {
		struct ve_ready_info ri[8];
		int n = ve_vctx_pop_ready(x->v, ri, 1 + (int)rnd(&x->rng, 8));
		for (int i = 0; i < n; i++)
			on_pop(x, &ri[i]);
		if (n > 0)
			return true;
		if (x->nfl == 0)
			return false;
	}
	int i = (int)rnd(&x->rng, (uint32_t)x->nfl);
	int op = x->fl[i];
	uint32_t r = rnd(&x->rng, 32);
	if (r == 0) {
		/* Not dispatchable now: back to the ready list; popped again later. */
		EXPECT(x, ve_vctx_requeue(x->v, x->tok[op]) == 0, "requeue op%d", op);
		x->st[op] = OS_SUB;
		x->nreq[op]++;
		g_n.requeues++;
		fl_remove(x, i);
	} else if (x->st[op] == OS_POP && r < 20) {
		EXPECT(x, ve_vctx_dispatched(x->v, x->tok[op], r) == 0, "dispatched op%d", op);
		x->st[op] = OS_DISP;
		/* Once handed out it cannot be handed out twice. */
		if (r == 1)
			EXPECT(x, ve_vctx_dispatched(x->v, x->tok[op], r) == -EINVAL,
			       "op%d dispatched twice", op);
	} else {
		do_complete(x, i);
	}
	return true;
}

/* ------------------------------------------------------------------ sync helper */

/* A second thread that really blocks in the vctx's sync calls while the
 * executor runs on this one. */
struct helper {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 idle, 1 request posted, 2 returned, 3 exit */
	int kind;
	struct ve_vctx *v;
	uint64_t h;
	int rc;
};

static struct helper g_helper;
static bool g_helper_started;

static int do_sync(struct ve_vctx *v, int kind, uint64_t h)
{
	switch (kind) {
	case C_SSYNC:
		return ve_vctx_stream_sync(v, h);
	case C_ESYNC:
		return ve_vctx_event_sync(v, h);
	default:
		return ve_vctx_ctx_sync(v);
	}
}

static void *helper_main(void *arg)
{
	struct helper *hp = arg;
	pthread_mutex_lock(&hp->mu);
	for (;;) {
		while (hp->state != 1 && hp->state != 3)
			pthread_cond_wait(&hp->cv, &hp->mu);
		if (hp->state == 3)
			break;
		struct ve_vctx *v = hp->v;
		int kind = hp->kind;
		uint64_t h = hp->h;
		pthread_mutex_unlock(&hp->mu);
		int rc = do_sync(v, kind, h);
		pthread_mutex_lock(&hp->mu);
		hp->rc = rc;
		hp->state = 2;
		pthread_cond_broadcast(&hp->cv);
	}
	pthread_mutex_unlock(&hp->mu);
	return NULL;
}

static void helper_start(void)
{
	if (g_helper_started)
		return;
	pthread_mutex_init(&g_helper.mu, NULL);
	pthread_cond_init(&g_helper.cv, NULL);
	pthread_create(&g_helper.th, NULL, helper_main, &g_helper);
	g_helper_started = true;
}

static void helper_stop(void)
{
	if (!g_helper_started)
		return;
	pthread_mutex_lock(&g_helper.mu);
	g_helper.state = 3;
	pthread_cond_broadcast(&g_helper.cv);
	pthread_mutex_unlock(&g_helper.mu);
	pthread_join(g_helper.th, NULL);
	pthread_mutex_destroy(&g_helper.mu);
	pthread_cond_destroy(&g_helper.cv);
	g_helper_started = false;
}

static int helper_state(void)
{
	pthread_mutex_lock(&g_helper.mu);
	int s = g_helper.state;
	pthread_mutex_unlock(&g_helper.mu);
	return s;
}

/* ------------------------------------------------------------------ calls */

static int query(struct exec *x, const struct call *c)
{
	switch (c->kind) {
	case C_SSYNC:
	case C_SQUERY:
		return ve_vctx_stream_query(x->v, x->sh[c->s]);
	case C_ESYNC:
	case C_EQUERY:
		return ve_vctx_event_query(x->v, x->eh[c->e]);
	default:
		return ve_vctx_ctx_query(x->v);
	}
}

/* (d) in both directions. */
static void check_query(struct exec *x, const struct call *c, int rc)
{
	int miss = first_missing(x, &c->req);
	EXPECT(x, rc == 0 || rc == -EBUSY, "%s returned %d", call_name[c->kind], rc);
	g_n.queries++;
	g_n.busy += rc == -EBUSY;
	EXPECT(x, rc != 0 || miss == RM_NONE, "%s reported done but required op%d is incomplete",
	       call_name[c->kind], miss);
	EXPECT(x, rc != -EBUSY || miss != RM_NONE,
	       "%s reported busy although every required op completed (extra wait)",
	       call_name[c->kind]);
}

static uint64_t sync_handle(const struct exec *x, const struct call *c)
{
	return c->kind == C_SSYNC ? x->sh[c->s] : c->kind == C_ESYNC ? x->eh[c->e] : 0;
}

/* Sync in a single-threaded driver: drive the executor until the vctx says
 * the synced thing is done, checking its answer at every step. */
static void sync_polled(struct exec *x, const struct call *c)
{
	for (;;) {
		int rc = query(x, c);
		check_query(x, c, rc);
		if (rc == 0)
			break;
		EXPECT(x, step(x), "stuck: %s pending but nothing is ready or in flight",
		       call_name[c->kind]);
	}
	/* Done now, so the real call must return at once. */
	int rc = do_sync(x->v, c->kind, sync_handle(x, c));
	EXPECT(x, rc == 0, "%s returned %d after its query said done", call_name[c->kind], rc);
	g_n.sync_polled++;
}

/* Sync from a second thread that blocks; the executor steps exactly as far
 * as the reference requires (deterministic, so seeds replay), watching that
 * the blocked call does not return early. */
static void sync_threaded(struct exec *x, const struct call *c)
{
	helper_start();
	pthread_mutex_lock(&g_helper.mu);
	g_helper.v = x->v;
	g_helper.kind = c->kind;
	g_helper.h = sync_handle(x, c);
	g_helper.state = 1;
	pthread_cond_broadcast(&g_helper.cv);
	pthread_mutex_unlock(&g_helper.mu);
	int miss;
	while ((miss = first_missing(x, &c->req)) != RM_NONE) {
		EXPECT(x, helper_state() != 2, "%s returned while required op%d was incomplete",
		       call_name[c->kind], miss);
		EXPECT(x, step(x), "stuck: %s pending but nothing is ready or in flight",
		       call_name[c->kind]);
	}
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += PROP_SANITIZED ? 60 : 20;
	pthread_mutex_lock(&g_helper.mu);
	while (g_helper.state != 2) {
		if (pthread_cond_timedwait(&g_helper.cv, &g_helper.mu, &dl) == ETIMEDOUT)
			break;
	}
	int st = g_helper.state, rc = g_helper.rc;
	if (st == 2)
		g_helper.state = 0;
	pthread_mutex_unlock(&g_helper.mu);
	EXPECT(x, st == 2, "%s still blocked although every required op completed",
	       call_name[c->kind]);
	EXPECT(x, rc == 0, "%s returned %d", call_name[c->kind], rc);
	g_n.sync_threaded++;
}

static void check_elapsed(struct exec *x, const struct call *c)
{
	const struct rm_model *m = &x->p->m;
	float ms = -1;
	int rc = ve_vctx_event_elapsed(x->v, x->eh[c->e], x->eh[c->e2], &ms);
	int exp, g1 = c->op, g2 = c->op2;
	if (!m->ev[c->e].timing || !m->ev[c->e2].timing)
		exp = -EINVAL;
	else if (g1 == RM_NONE || g2 == RM_NONE)
		exp = -ENODATA;
	else if (x->st[g1] != OS_DONE || x->st[g2] != OS_DONE)
		exp = -EBUSY;
	else
		exp = 0;
	EXPECT(x, rc == exp, "elapsed(e%d, e%d) = %d, expected %d", c->e, c->e2, rc, exp);
	if (exp == 0)
		g_n.elapsed_ok++;
	else
		g_n.elapsed_err++;
	if (exp == 0) {
		double want = (double)(int64_t)(x->t_done[g2] - x->t_done[g1]) / 1e6;
		EXPECT(x, fabs(ms - want) <= 1e-6 + 1e-6 * fabs(want),
		       "elapsed(e%d, e%d) = %g ms, completion stamps say %g", c->e, c->e2, ms,
		       want);
	}
}

static void build_desc(const struct prog *p, int op, struct ve_desc *d, uint8_t *buf)
{
	memset(d, 0, sizeof(*d));
	d->kind = p->work_kind[op];
	switch (d->kind) {
	case VE_OP_KERNEL: {
		uint32_t plen = p->plen[op], np = p->nparams[op];
		d->u.k.fn = (uint64_t)(uintptr_t)&dummy_kernel;
		d->u.k.name_id = (uint64_t)op + 1;
		d->u.k.grid = (struct ve_dim3){1 + (uint32_t)op % 7, 1, 1};
		d->u.k.block = (struct ve_dim3){32, 1, 1};
		d->u.k.param_bytes = plen;
		d->u.k.nparams = np;
		d->payload_len = ve_desc_kernel_payload_len(0, 0, plen, np);
		for (uint32_t i = 0; i < plen; i++)
			buf[i] = pattern(op, i);
		if (np) {
			uint32_t lay[4] = {0, 8, 8, plen - 8};
			memcpy(buf + plen + ((8 - (plen & 7)) & 7), lay, sizeof(lay));
		}
		d->payload = buf;
		break;
	}
	case VE_OP_MEMCPY:
		d->u.cp.dst = 0x10000ull * (uint64_t)(op + 1);
		d->u.cp.src = (uint64_t)op + 1;
		d->u.cp.bytes = 64ull * (uint64_t)(op + 1);
		d->u.cp.dir = 1;
		break;
	case VE_OP_MEMSET:
		d->u.ms.dst = 0x20000ull * (uint64_t)(op + 1);
		d->u.ms.value = (uint64_t)op + 1;
		d->u.ms.width = 256;
		d->u.ms.height = 1;
		d->u.ms.pitch = 256;
		d->u.ms.elem_size = 1u << (op % 3);
		break;
	default:
		d->u.host.fn = dummy_host;
		d->u.host.arg = (void *)(uintptr_t)(op + 1);
		break;
	}
}

static void submit_work(struct exec *x, const struct call *c)
{
	static uint8_t buf[4096];
	struct ve_desc d;
	build_desc(x->p, c->op, &d, buf);
	for (;;) {
		struct ve_vctx_stats before, after;
		ve_vctx_stats(x->v, &before);
		ve_tok tok = 0;
		int rc = ve_vctx_submit(x->v, x->sh[c->s], &d, VE_SUBMIT_NONBLOCK, &tok);
		if (rc == 0) {
			x->tok[c->op] = tok;
			x->st[c->op] = OS_SUB;
			/* The payload was copied: scribbling on ours must not matter. */
			memset(buf, 0xa5, sizeof(buf));
			return;
		}
		EXPECT(x, rc == -EAGAIN, "submit op%d: %d", c->op, rc);
		g_n.eagain++;
		ve_vctx_stats(x->v, &after);
		EXPECT(x, after.submitted == before.submitted && after.live_ops == before.live_ops,
		       "submit op%d: -EAGAIN but something was recorded", c->op);
		/* Back-pressure: run something, then retry. */
		EXPECT(x, !x->adversarial && step(x), "submit op%d: -EAGAIN and nothing can run",
		       c->op);
	}
}

static void stale_call(struct exec *x, const struct call *c)
{
	struct ve_vctx_stats before, after;
	ve_vctx_stats(x->v, &before);
	ve_stream ds = x->dead_s, ls = x->sh[c->s];
	ve_event de = x->dead_e, le = c->e != RM_NONE ? x->eh[c->e] : 0;
	int rc = -ENOENT;
	struct ve_desc d = {.kind = VE_OP_MEMCPY};
	switch (c->sub) {
	case ST_SUBMIT:
		if (ds)
			rc = ve_vctx_submit(x->v, ds, &d, VE_SUBMIT_NONBLOCK, NULL);
		break;
	case ST_RECORD_S:
		if (ds && le)
			rc = ve_vctx_event_record(x->v, le, ds, 0);
		break;
	case ST_WAIT_S:
		if (ds && le)
			rc = ve_vctx_stream_wait_event(x->v, ds, le);
		break;
	case ST_SSYNC:
		if (ds)
			rc = ve_vctx_stream_sync(x->v, ds);
		break;
	case ST_SQUERY:
		if (ds)
			rc = ve_vctx_stream_query(x->v, ds);
		break;
	case ST_RECORD_E:
		if (de)
			rc = ve_vctx_event_record(x->v, de, ls, 0);
		break;
	case ST_WAIT_E:
		if (de)
			rc = ve_vctx_stream_wait_event(x->v, ls, de);
		break;
	case ST_EQUERY:
		if (de)
			rc = ve_vctx_event_query(x->v, de);
		break;
	default:
		if (de)
			rc = ve_vctx_event_sync(x->v, de);
		break;
	}
	EXPECT(x, rc == -ENOENT, "call %d with a destroyed handle returned %d", c->sub, rc);
	ve_vctx_stats(x->v, &after);
	EXPECT(x, after.submitted == before.submitted,
	       "call with a destroyed handle recorded an op");
	g_n.stale += rc == -ENOENT && (c->sub < ST_RECORD_E ? ds : de) != 0;
}

static void exec_call(struct exec *x, const struct call *c)
{
	struct ve_vctx *v = x->v;
	int rc = 0;
	switch (c->kind) {
	case C_STREAM:
		rc = ve_vctx_stream_create(v, c->sub, c->prio, &x->sh[c->s]);
		EXPECT(x, rc == 0, "stream_create: %d", rc);
		rc = ve_vctx_stream_index(v, x->sh[c->s], &x->sidx[c->s]);
		break;
	case C_PTDS: {
		ve_stream h;
		rc = ve_vctx_stream_per_thread(v, c->key, &h);
		EXPECT(x, rc == 0, "per_thread: %d", rc);
		/* The same key must give the same stream every time. */
		EXPECT(x, !x->sh[c->s] || x->sh[c->s] == h, "per_thread(%#llx) changed handle",
		       (unsigned long long)c->key);
		x->sh[c->s] = h;
		rc = ve_vctx_stream_index(v, h, &x->sidx[c->s]);
		break;
	}
	case C_EVENT:
		rc = ve_vctx_event_create(v, c->sub, &x->eh[c->e]);
		break;
	case C_WORK:
		submit_work(x, c);
		break;
	case C_RECORD: {
		bool timed = rm_set_has(&x->p->ext, c->op);
		rc = ve_vctx_event_record(v, x->eh[c->e], x->sh[c->s], (uint64_t)c->op + 1);
		EXPECT(x, rc == 0, "record: %d", rc);
		if (timed) {
			rc = ve_vctx_event_generation(v, x->eh[c->e], NULL, &x->tok[c->op]);
			x->st[c->op] = OS_SUB;
		}
		break;
	}
	case C_WAIT:
		rc = ve_vctx_stream_wait_event(v, x->sh[c->s], x->eh[c->e]);
		break;
	case C_SDESTROY:
		rc = ve_vctx_stream_destroy(v, x->sh[c->s]);
		x->dead_s = x->sh[c->s];
		break;
	case C_EDESTROY:
		rc = ve_vctx_event_destroy(v, x->eh[c->e]);
		x->dead_e = x->eh[c->e];
		break;
	case C_SQUERY:
	case C_EQUERY:
	case C_CQUERY:
		if (!x->adversarial)
			check_query(x, c, query(x, c));
		break;
	case C_SSYNC:
	case C_ESYNC:
	case C_CSYNC:
		if (x->adversarial)
			break;
		if (rnd(&x->rng, 2))
			sync_threaded(x, c);
		else
			sync_polled(x, c);
		break;
	case C_ELAPSED:
		if (!x->adversarial)
			check_elapsed(x, c);
		break;
	case C_STALE:
		if (!x->adversarial)
			stale_call(x, c);
		break;
	}
	EXPECT(x, rc == 0, "%s returned %d", call_name[c->kind], rc);
}

static void exec_init(struct exec *x, const struct prog *p, bool adversarial, int big)
{
	memset(x, 0, sizeof(*x));
	x->p = p;
	x->adversarial = adversarial;
	x->rng = ve__mix64(p->seed ^ (adversarial ? 0xad5e ^ (uint64_t)big : 0x5eed));
	x->clock = 1000000;
	x->a = x->b = RM_NONE;
	x->sh[0] = VE_STREAM_LEGACY;
	struct ve_vctx_config cfg = {
	    .client_id = 7,
	    .max_ops = CFG_MAX_OPS,
	    .max_edges = CFG_MAX_EDGES,
	    .max_streams = MAX_STREAMS + 2,
	    .max_events = MAX_EVENTS + 2,
	    .big_payloads = (uint32_t)big,
	};
	int rc = ve_vctx_create(&cfg, &x->v);
	VE_CHECK_EQ(rc, 0);
}

/* Random legal execution interleaved with the program's calls. */
static void run_random(const struct prog *p)
{
	static struct exec x;
	exec_init(&x, p, false, 0);
	/* Few big payload buffers, so big kernels hit back-pressure. */
	uint64_t r = p->seed ^ 0xb16;
	int big = 2 + (int)rnd(&r, 7);
	ve_vctx_destroy(x.v);
	exec_init(&x, p, false, big);
	for (x.call = 0; x.call < p->ncalls; x.call++) {
		exec_call(&x, &p->c[x.call]);
		for (int k = (int)rnd(&x.rng, 4); k > 0; k--)
			step(&x);
	}
	/* The last call was a context sync: everything ran exactly once. */
	for (int op = 0; op < p->m.nops; op++) {
		if (!rm_set_has(&p->ext, op))
			continue;
		EXPECT(&x, x.st[op] == OS_DONE, "op%d lost (state %d)", op, x.st[op]);
		EXPECT(&x, x.npop[op] == x.nreq[op] + 1, "op%d popped %d times with %d requeues",
		       op, x.npop[op], x.nreq[op]);
	}
	struct ve_vctx_stats st;
	ve_vctx_stats(x.v, &st);
	struct ve_ready_info ri;
	EXPECT(&x, ve_vctx_pop_ready(x.v, &ri, 1) == 0, "ready op left after context sync");
	EXPECT(&x,
	       st.live_ops == 0 && st.ready_ops == 0 && st.submitted == st.completed &&
		   st.free_slots == CFG_MAX_OPS - 1 && st.free_edges == CFG_MAX_EDGES,
	       "vctx not empty after context sync: live=%u ready=%u submitted=%llu "
	       "completed=%llu free_slots=%u free_edges=%u",
	       st.live_ops, st.ready_ops, (unsigned long long)st.submitted,
	       (unsigned long long)st.completed, st.free_slots, st.free_edges);
	ve_vctx_destroy(x.v);
}

/* (c): complete only anc(a) u anc(b), never a or b themselves, and nothing
 * else; both must then be ready at the same time. */
static void run_adversarial(const struct prog *p, int a, int b, int k)
{
	static struct exec x;
	exec_init(&x, p, true, MAX_BIG + k + 4);
	x.a = a;
	x.b = b;
	x.P = p->m.anc[a];
	if (b != RM_NONE)
		rm_set_or(&x.P, &p->m.anc[b]);
	for (x.call = 0; x.call < p->ncalls; x.call++)
		exec_call(&x, &p->c[x.call]);
	x.call = p->ncalls;
	for (;;) {
		struct ve_ready_info ri[64];
		int n = ve_vctx_pop_ready(x.v, ri, 64);
		for (int i = 0; i < n; i++)
			on_pop(&x, &ri[i]);
		/* Complete the allowed in-flight ops, in random order. */
		int16_t todo[MAX_OPS];
		int nt = 0;
		for (int i = 0; i < x.nfl; i++)
			if (rm_set_has(&x.P, x.fl[i]))
				todo[nt++] = x.fl[i];
		for (int i = nt - 1; i > 0; i--) {
			int j = (int)rnd(&x.rng, (uint32_t)i + 1);
			int16_t t = todo[i];
			todo[i] = todo[j];
			todo[j] = t;
		}
		for (int i = 0; i < nt; i++)
			for (int j = 0; j < x.nfl; j++)
				if (x.fl[j] == todo[i]) {
					do_complete(&x, j);
					break;
				}
		bool progress = nt > 0;
		if (n == 0 && !progress)
			break;
	}
	int miss = first_missing(&x, &x.P);
	EXPECT(&x, miss == RM_NONE,
	       "extra edge: op%d never became ready although all its reference predecessors "
	       "completed",
	       miss);
	EXPECT(&x, x.st[a] == OS_POP,
	       "extra edge: op%d not ready although all its reference predecessors completed", a);
	EXPECT(&x, b == RM_NONE || x.st[b] == OS_POP,
	       "extra edge: op%d not ready although all its reference predecessors completed "
	       "(op%d is incomparable and was held back)",
	       b, a);
	ve_vctx_destroy(x.v);
}

static void count_prog(const struct prog *p)
{
	const struct rm_model *m = &p->m;
	bool recorded[MAX_EVENTS] = {0}, waited[MAX_EVENTS] = {0};
	g_n.progs++;
	g_n.ops += (unsigned long)m->nops;
	for (int i = 0; i < p->ncalls; i++) {
		const struct call *c = &p->c[i];
		if (c->kind == C_WORK) {
			int k = m->st[c->s].kind;
			g_n.legacy_ops += k == RM_LEGACY;
			g_n.ptds_ops += k == RM_PER_THREAD;
			g_n.nb_ops += k == RM_NONBLOCKING;
		} else if (c->kind == C_WAIT) {
			g_n.waits_unrecorded += m->op[c->op].waited == RM_NONE;
			waited[c->e] = true;
		} else if (c->kind == C_RECORD) {
			g_n.rerecords += recorded[c->e] && waited[c->e];
			recorded[c->e] = true;
		} else if (c->kind == C_SDESTROY) {
			g_n.destroyed_pending += m->st[c->s].last != RM_NONE;
		}
	}
}

static void print_counts(void)
{
	printf("# %lu programs, %lu ops (%lu legacy, %lu per-thread, %lu non-blocking work), "
	       "%lu pops, %lu requeues, %lu -EAGAIN retries\n",
	       g_n.progs, g_n.ops, g_n.legacy_ops, g_n.ptds_ops, g_n.nb_ops, g_n.pops, g_n.requeues,
	       g_n.eagain);
	printf("# %lu waits on never-recorded events, %lu re-records after a wait, %lu destroys "
	       "of streams with work\n",
	       g_n.waits_unrecorded, g_n.rerecords, g_n.destroyed_pending);
	printf("# %lu queries (%lu busy), %lu polled syncs, %lu blocking syncs from a 2nd thread, "
	       "%lu elapsed ok, %lu elapsed errors, %lu stale-handle calls\n",
	       g_n.queries, g_n.busy, g_n.sync_polled, g_n.sync_threaded, g_n.elapsed_ok,
	       g_n.elapsed_err, g_n.stale);
	printf("# %lu adversarial runs (%lu incomparable pairs, %lu single ops)\n", g_n.adv_runs,
	       g_n.adv_pairs, g_n.adv_runs - g_n.adv_pairs);
}

static void run_prog(uint64_t seed, bool verbose)
{
	struct prog *p = &g_prog;
	gen_prog(p, seed);
	g_alarm_len = snprintf(g_alarm_msg, sizeof(g_alarm_msg),
			       "\ntest_vctx_prop: watchdog: program hung; replay: VE_SEED=%#llx "
			       "./test_vctx_prop\n",
			       (unsigned long long)seed);
	alarm(PROP_SANITIZED ? 120 : 30);
	if (verbose)
		print_prog(p, stdout);
	count_prog(p);
	run_random(p);
	/* Sample incomparable tracked pairs; b = none delays a alone. */
	int trk[MAX_OPS], n = 0;
	for (int i = 0; i < p->m.nops; i++)
		if (rm_set_has(&p->ext, i))
			trk[n++] = i;
	uint64_t r = seed ^ 0xc0ffee;
	for (int k = 0, tries = 0; k < ADV_PAIRS && n > 0 && tries < 64; tries++) {
		int a = trk[rnd(&r, (uint32_t)n)];
		int b = rnd(&r, 4) == 0 ? RM_NONE : trk[rnd(&r, (uint32_t)n)];
		if (b != RM_NONE && rm_comparable(&p->m, a, b))
			continue;
		run_adversarial(p, a, b, k);
		g_n.adv_runs++;
		g_n.adv_pairs += b != RM_NONE;
		k++;
	}
	alarm(0);
}

static void on_alarm(int sig)
{
	(void)sig;
	ssize_t w = write(2, g_alarm_msg, (size_t)g_alarm_len);
	(void)w;
	_exit(1);
}

VE_TEST(vctx_matches_reference_model)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	bool verbose = ve_test_env_long("VE_PROP_VERBOSE", 0) != 0;
	if (getenv("VE_SEED")) {
		uint64_t seed = ve_test_seed(0);
		printf("# replaying program seed %#llx\n", (unsigned long long)seed);
		run_prog(seed, verbose);
		helper_stop();
		printf("# execution digest %#llx\n", (unsigned long long)g_digest);
		return;
	}
	long n = ve_test_env_long("VE_PROP_N", 10000);
	const char *tsan = getenv("VE_TSAN");
	if (!getenv("VE_PROP_N") && (PROP_SANITIZED || (tsan && atoi(tsan) == 1)))
		n /= 10;
	uint64_t base = 0x7e57c0de5eedull;
	printf("# %ld programs, base %#llx\n", n, (unsigned long long)base);
	for (long i = 0; i < n; i++)
		run_prog(ve__mix64(base + (uint64_t)i), verbose);
	helper_stop();
	print_counts();
	printf("# execution digest %#llx\n", (unsigned long long)g_digest);
}
