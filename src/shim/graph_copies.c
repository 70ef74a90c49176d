/* SPDX-License-Identifier: MIT */
/*
 * Per-context copies of an instantiated graph, so that a graph launched on a
 * pool entry's lane runs on that entry's SMs.
 *
 * A graph's kernel node runs in the context it was made in, whatever stream
 * the graph is launched into (measured on the H200, driver 580:
 * tests/gpu/gpu_graph_ctx). A graph captured in the application's context
 * therefore runs on every SM even when launched into a green context's
 * stream. The driver offers one way to give a node another context: its
 * parameters with func = NULL, kern = the node's CUkernel and ctx = the green
 * context ("ctx ... is ignored if func is set"); cuGraphExecKernelNodeSetParams
 * refuses a new context, so the change is made on a copy of the graph and the
 * copy instantiated. Nothing else changes: the same kernel, grid, block,
 * shared memory and argument bytes, the same edges, so the copy computes
 * exactly what the application's exec does.
 *
 * Per exec: a private clone of the graph it was instantiated from (the
 * application may change or destroy its own graph after instantiating) and up
 * to GCOPY_MAX execs of rewritten copies, one per entry context, made on first
 * use on the dispatcher thread (a clone, a rewrite, an instantiation: about
 * as costly as the application's own instantiation, paid once per entry) and
 * evicted least recently used ("if the executable graph is in-flight, it will
 * not be terminated, but rather freed asynchronously on completion").
 * Launch order across copies is the vctx's: each launch of an exec is ordered
 * after its previous one.
 *
 * A graph whose kernel nodes do not all have a CUkernel (functions of
 * modules: cuModuleGetFunction), or with conditional nodes, memory nodes (one
 * exec at a time) or device launch, gets no copies (graph.c decides): it runs
 * as natively, on every SM. A change of the exec (update, node parameters)
 * turns its copies off: later launches use the application's exec. On a
 * lane whose context has every SM no copy is needed (the application's exec
 * runs on exactly those SMs): graph.c launches that instead (lane_whole).
 */
#include "backend/cuda_driver.h"
#include "shim/shim.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define GCOPY_MAX 16

struct ve_gcopies {
	CUgraph src;		  /* private clone of the instantiated graph */
	unsigned long long flags; /* the application's instantiation flags */
	_Atomic int off;	  /* 1: the application's exec from now on */
	/* Dispatcher thread only: */
	uint32_t n;
	uint64_t clock;
	struct {
		CUcontext ctx;
		CUgraphExec x;
		uint64_t used;
	} v[GCOPY_MAX];
};

static _Atomic uint64_t n_copies, n_failed;

struct retarget {
	CUcontext ctx;
	bool ok;
};

/* A kernel node names r->ctx (r->ok false if it cannot). */
static void retarget_node(CUgraphNode n, CUgraphNodeType t, void *arg)
{
	struct retarget *r = arg;
	if (t != CU_GRAPH_NODE_TYPE_KERNEL || !r->ok)
		return;
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	r->ok = ve__real.cuGraphKernelNodeGetParams(n, &p) == CUDA_SUCCESS && p.kern;
	if (!r->ok)
		return;
	p.func = NULL; /* else ctx is ignored */
	p.ctx = r->ctx;
	r->ok = ve__real.cuGraphKernelNodeSetParams(n, &p) == CUDA_SUCCESS;
}

/* Every kernel node (child graphs included) names ctx; false if one cannot. */
static bool rewrite(CUgraph g, CUcontext ctx)
{
	struct retarget r = {ctx, true};
	return ve__graph_each_node(g, retarget_node, &r) && r.ok;
}

bool ve__gcopies_supported(void)
{
	return ve__real.cuGraphClone && ve__real.cuGraphDestroy &&
	       ve__real.cuGraphKernelNodeSetParams && ve__real.cuGraphKernelNodeGetParams &&
	       ve__real.cuGraphGetNodes && ve__real.cuGraphNodeGetType &&
	       ve__real.cuGraphChildGraphNodeGetGraph && ve__real.cuGraphInstantiateWithFlags &&
	       ve__real.cuGraphExecDestroy && ve__real.cuStreamGetCtx;
}

struct ve_gcopies *ve__gcopies_create(CUgraph g, unsigned long long inst_flags)
{
	if (!g || !ve__gcopies_supported())
		return NULL;
	struct ve_gcopies *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (ve__real.cuGraphClone(&c->src, g) != CUDA_SUCCESS) {
		free(c);
		return NULL;
	}
	c->flags = inst_flags;
	return c;
}

void ve__gcopies_off(struct ve_gcopies *c)
{
	if (c)
		atomic_store_explicit(&c->off, 1, memory_order_release);
}

bool ve__gcopies_on(const struct ve_gcopies *c)
{
	return c && !atomic_load_explicit(&c->off, memory_order_acquire);
}

void ve__gcopies_destroy(struct ve_gcopies *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		ve__real.cuGraphExecDestroy(c->v[i].x);
	ve__real.cuGraphDestroy(c->src);
	free(c);
}

static CUgraphExec make_copy(struct ve_gcopies *c, CUcontext ctx)
{
	CUgraph g = NULL;
	CUgraphExec x = NULL;
	/* What a copy can take of the application's flags: no upload stream
	 * here, and device launch never gets copies. */
	unsigned long long fl = c->flags & (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					    CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
	bool ok = ve__real.cuGraphClone(&g, c->src) == CUDA_SUCCESS && rewrite(g, ctx) &&
		  ve__real.cuGraphInstantiateWithFlags(&x, g, fl) == CUDA_SUCCESS;
	if (g)
		ve__real.cuGraphDestroy(g); /* the exec does not depend on it */
	if (!ok) {
		atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
		return NULL;
	}
	atomic_fetch_add_explicit(&n_copies, 1, memory_order_relaxed);
	return x;
}

CUgraphExec ve__gcopies_exec(struct ve_gcopies *c, CUcontext ctx, CUcontext app_ctx)
{
	if (!c || atomic_load_explicit(&c->off, memory_order_acquire))
		return NULL;
	if (!ctx || ctx == app_ctx)
		return NULL; /* the application's context: its own exec */
	uint32_t i, lru = 0;
	for (i = 0; i < c->n; i++) {
		if (c->v[i].ctx == ctx) {
			c->v[i].used = ++c->clock;
			return c->v[i].x;
		}
		if (c->v[i].used < c->v[lru].used)
			lru = i;
	}
	CUgraphExec x = make_copy(c, ctx);
	if (!x) {
		/* The same graph will not do better on another entry. */
		ve__gcopies_off(c);
		ve__notice_once(VE_NOTE_GRAPH_COPY,
				"a CUDA graph could not be copied for a pool entry; it runs on "
				"every SM, as natively (docs/semantics.md)");
		return NULL;
	}
	if (c->n < GCOPY_MAX) {
		i = c->n++;
	} else {
		i = lru;
		ve__real.cuGraphExecDestroy(c->v[i].x);
	}
	c->v[i].ctx = ctx;
	c->v[i].x = x;
	c->v[i].used = ++c->clock;
	return x;
}

void ve__gcopies_stats(uint64_t *copies, uint64_t *failed)
{
	*copies = atomic_load_explicit(&n_copies, memory_order_relaxed);
	*failed = atomic_load_explicit(&n_failed, memory_order_relaxed);
}
