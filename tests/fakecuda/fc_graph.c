/* SPDX-License-Identifier: MIT */
/*
 * fakecuda stream capture and graphs.
 *
 * While a stream captures, its kernels, copies, memsets, host functions and
 * memory operations are recorded, not executed. A stream that waits on an
 * event recorded inside a capture joins it (cross-stream fork/join); all
 * captured nodes form one list in capture order, and a graph launch replays
 * that list in order as ONE operation on the launch stream (a valid
 * linearization of the captured DAG), on that stream's SM set.
 *
 * Not modelled: node handles and dependency edges (cuStreamGetCaptureInfo
 * reports one opaque dependency once a node exists), the unjoined-stream check at
 * cuStreamEndCapture (every stream of the capture simply leaves it),
 * graph memory nodes (stream-ordered allocation during capture is refused)
 * and external event nodes.
 */
#include "fc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FC_DEF(sym, decl, call)                                                                    \
	CUresult CUDAAPI sym decl                                                                  \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return call;                                                                       \
	}

static struct fc_graph *graph_new(struct fc_ctx *c)
{
	struct fc_graph *g = calloc(1, sizeof(*g));
	if (g)
		g->ctx = c;
	return g;
}

void fakecuda__graph_free(struct fc_graph *g)
{
	if (!g)
		return;
	fakecuda__registry_del(g);
	for (size_t i = 0; i < g->n; i++) {
		fakecuda__cmd_fini(&g->nodes[i]);
		if (g->handles && g->handles[i]) {
			fakecuda__registry_del(g->handles[i]);
			free(g->handles[i]);
		}
	}
	free(g->handles);
	free(g->nodes);
	free(g);
}

static void graph_free(struct fc_graph *g)
{
	fakecuda__graph_free(g);
}

static int graph_append(struct fc_graph *g, struct fc_cmd *cmd)
{
	if (g->n == g->cap) {
		size_t ncap = g->cap ? 2 * g->cap : 16;
		struct fc_cmd *nv = realloc(g->nodes, ncap * sizeof(*nv));
		if (!nv)
			return -1;
		g->nodes = nv;
		struct fc_gnode **nh = realloc(g->handles, ncap * sizeof(*nh));
		if (!nh)
			return -1;
		memset(nh + g->cap, 0, (ncap - g->cap) * sizeof(*nh));
		g->handles = nh;
		g->cap = ncap;
	}
	g->nodes[g->n++] = *cmd;
	memset(cmd, 0, sizeof(*cmd));
	return 0;
}

/* A deep copy: bodies and child graphs included (an exec is independent of
 * the graph it came from). Node handles are not copied. */
struct fc_graph *fakecuda__graph_clone(const struct fc_graph *src)
{
	struct fc_graph *g = graph_new(src->ctx);
	if (!g)
		return NULL;
	g->owned_by_node = src->owned_by_node;
	for (size_t i = 0; i < src->n; i++) {
		struct fc_cmd c;
		if (fakecuda__cmd_clone(&c, &src->nodes[i]) != 0 || graph_append(g, &c) != 0) {
			fakecuda__graph_free(g);
			return NULL;
		}
	}
	return g;
}

/* Runs a graph's nodes in order on @s (a child graph, a conditional body). */
int fakecuda__graph_run(struct fc_stream *s, const struct fc_graph *g)
{
	int fault = 0;
	for (size_t i = 0; g && i < g->n && !fault; i++) {
		if (atomic_load(&s->ctx->sticky) || atomic_load(&g_fc.shutdown))
			break;
		fault = fakecuda__cmd_run(s, &g->nodes[i], 1);
	}
	return fault;
}

/* At each launch: conditional handles created with CU_GRAPH_COND_ASSIGN_DEFAULT
 * take their default value again. */
void fakecuda__cond_reset(const struct fc_cmd *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct fc_cmd *c = &nodes[i];
		if (c->kind == FC_CMD_CHILD) {
			fakecuda__cond_reset(c->u.child.g->nodes, c->u.child.g->n);
		} else if (c->kind == FC_CMD_COND) {
			if (c->u.cond.h->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
				atomic_store(&c->u.cond.h->value, c->u.cond.h->dflt);
			for (unsigned k = 0; k < c->u.cond.n; k++)
				fakecuda__cond_reset(c->u.cond.body[k]->nodes, c->u.cond.body[k]->n);
		}
	}
}

/* ---- capture -------------------------------------------------------------------------- */

/* Active captures, for the capture-mode rules of unsafe calls. */
static pthread_mutex_t caps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_capture *caps;

void fakecuda__capture_invalidate(struct fc_capture *cap)
{
	atomic_store(&cap->invalidated, 1);
}

/* Caller holds caps_mu. Ends @cap's part in the capture-mode bookkeeping. */
static void capture_retire_locked(struct fc_capture *cap)
{
	if (cap->active) {
		struct fc_capture **pp = &caps;
		while (*pp != cap)
			pp = &(*pp)->next_active;
		*pp = cap->next_active;
		cap->active = 0;
	}
	if (!cap->counted)
		return;
	cap->counted = 0;
	int mine = pthread_equal(cap->thread, pthread_self());
	struct fc_tls *t = fakecuda__tls();
	if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && mine && t->strict_captures > 0)
		t->strict_captures--;
	if (cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
		atomic_fetch_sub(&g_fc.global_captures, 1);
		if (mine && t->global_captures > 0)
			t->global_captures--;
	}
}

void fakecuda__capture_put(struct fc_capture *cap)
{
	if (atomic_fetch_sub_explicit(&cap->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_lock(&caps_mu);
	capture_retire_locked(cap);
	pthread_mutex_unlock(&caps_mu);
	if (!cap->to_graph)
		graph_free(cap->graph);
	pthread_mutex_destroy(&cap->mu);
	free(cap);
}

/*
 * "If the local thread has an ongoing capture sequence that was not
 * initiated with CU_STREAM_CAPTURE_MODE_RELAXED, or if any other thread has a
 * concurrent capture sequence initiated with CU_STREAM_CAPTURE_MODE_GLOBAL,
 * this thread is prohibited from potentially unsafe API calls"
 * (cuThreadExchangeStreamCaptureMode). Measured on the real driver: the call
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the captures that
 * prohibit it are invalidated. Unsafe here (measured or cudaFree-like):
 * cuMemAlloc*, cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister, cuMemFree,
 * cuMemFreeHost and cuCtxSynchronize; synchronous copies and memsets are not.
 */
CUresult fakecuda__capture_unsafe(void)
{
	struct fc_tls *t = fakecuda__tls();
	/* The calling thread's own mode decides which captures concern it. */
	int mode = t->capture_mode;
	if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	int others = mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
		     atomic_load(&g_fc.global_captures) - t->global_captures > 0;
	if (t->strict_captures <= 0 && !others)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&caps_mu);
	for (struct fc_capture *c = caps; c; c = c->next_active) {
		int mine = pthread_equal(c->thread, pthread_self());
		if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
		    (!mine && others && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL))
			fakecuda__capture_invalidate(c);
	}
	pthread_mutex_unlock(&caps_mu);
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* "Sets the calling thread's stream capture interaction mode to the value
 * contained in *mode, and overwrites *mode with the previous mode." */
CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	FC_ENTER_ANY();
	if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
		      *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
		      *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_tls *t = fakecuda__tls();
	CUstreamCaptureMode old = (CUstreamCaptureMode)t->capture_mode;
	t->capture_mode = (int)*mode;
	*mode = old;
	return CUDA_SUCCESS;
}

/* Caller holds s->ctx->mu. Consumes @cmd. */
CUresult fakecuda__capture_add(struct fc_stream *s, struct fc_cmd *cmd)
{
	struct fc_capture *cap = s->capture;
	CUresult r = CUDA_SUCCESS;
	if (atomic_load(&cap->invalidated)) {
		fakecuda__cmd_fini(cmd);
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	/* Ordering-only markers carry nothing a replay needs. */
	if (cmd->kind == FC_CMD_NOP)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&cap->mu);
	if (!cap->graph || graph_append(cap->graph, cmd) != 0) {
		fakecuda__cmd_fini(cmd);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&cap->mu);
	return r;
}

/* A wait on an event recorded in @cap: @s forks into the capture. */
FC_HIDDEN CUresult fakecuda__capture_join(struct fc_stream *s, struct fc_capture *cap);
CUresult fakecuda__capture_join(struct fc_stream *s, struct fc_capture *cap)
{
	CUresult r = CUDA_SUCCESS;
	pthread_mutex_lock(&s->ctx->mu);
	if (s->capture == cap) {
		/* join back: ordering inside one list is already capture order */
	} else if (s->capture) {
		fakecuda__capture_invalidate(s->capture);
		fakecuda__capture_invalidate(cap);
		r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
	} else if (s->kind == FC_S_LEGACY) {
		fakecuda__capture_invalidate(cap);
		r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	} else {
		atomic_fetch_add(&cap->refs, 1);
		s->capture = cap;
	}
	pthread_mutex_unlock(&s->ctx->mu);
	return r;
}

static CUresult begin_capture_into(CUstream hs, int mode, int ptds, struct fc_graph *into)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	/* "Capture may not be initiated if stream is CU_STREAM_LEGACY." */
	if (s->kind == FC_S_LEGACY)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
	    mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_capture *cap = calloc(1, sizeof(*cap));
	struct fc_graph *g = into ? into : graph_new(s->ctx);
	if (!cap || !g) {
		free(cap);
		if (!into)
			free(g);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	cap->id = fakecuda__new_id();
	pthread_mutex_init(&cap->mu, NULL);
	cap->graph = g;
	cap->to_graph = into != NULL;
	cap->mode = mode;
	cap->origin = s;
	cap->thread = pthread_self();
	atomic_init(&cap->refs, 1);
	pthread_mutex_lock(&s->ctx->mu);
	if (s->capture) {
		pthread_mutex_unlock(&s->ctx->mu);
		fakecuda__capture_put(cap);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	s->capture = cap;
	pthread_mutex_unlock(&s->ctx->mu);
	pthread_mutex_lock(&caps_mu);
	cap->active = cap->counted = 1;
	cap->next_active = caps;
	caps = cap;
	struct fc_tls *t = fakecuda__tls();
	if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		t->strict_captures++;
	if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
		t->global_captures++;
		atomic_fetch_add(&g_fc.global_captures, 1);
	}
	pthread_mutex_unlock(&caps_mu);
	return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream hs, int mode, int ptds)
{
	return begin_capture_into(hs, mode, ptds, NULL);
}

/* Nodes captured are added to @hGraph (a new graph's or a conditional body's);
 * dependencies are not modelled: the graph is one list in insertion order. */
static CUresult begin_capture_to_graph(CUstream hs, CUgraph hg, size_t ndeps, int mode, int ptds)
{
	if (!fakecuda__registry_is(hg, FC_T_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	(void)ndeps;
	return begin_capture_into(hs, mode, ptds, (struct fc_graph *)hg);
}

FC_DEF(cuStreamBeginCaptureToGraph,
       (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
	const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
       begin_capture_to_graph(hStream, hGraph, numDependencies, mode, 0))
FC_DEF(cuStreamBeginCaptureToGraph_ptsz,
       (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
	const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
       begin_capture_to_graph(hStream, hGraph, numDependencies, mode, 1))

FC_DEF(cuStreamBeginCapture, (CUstream hStream),
       begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0))
FC_DEF(cuStreamBeginCapture_ptsz, (CUstream hStream),
       begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1))
FC_DEF(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),
       begin_capture(hStream, mode, 0))
FC_DEF(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode),
       begin_capture(hStream, mode, 1))

static CUresult end_capture(CUstream hs, CUgraph *out, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_ctx *c = s->ctx;
	pthread_mutex_lock(&c->mu);
	struct fc_capture *cap = s->capture;
	if (!cap) {
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	if (cap->origin != s) {
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	}
	/* "If mode is not CU_STREAM_CAPTURE_MODE_RELAXED, cuStreamEndCapture must be
	 * called on this stream from the same thread." */
	if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
	    !pthread_equal(cap->thread, pthread_self())) {
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	}
	pthread_mutex_lock(&cap->mu);
	struct fc_graph *g = cap->graph;
	cap->graph = NULL;
	pthread_mutex_unlock(&cap->mu);
	int invalid = atomic_load(&cap->invalidated);
	int to_graph = cap->to_graph; /* cap may be freed below */
	pthread_mutex_lock(&caps_mu);
	capture_retire_locked(cap);
	pthread_mutex_unlock(&caps_mu);
	for (struct fc_stream *t = c->streams; t; t = t->next)
		if (t->capture == cap) {
			t->capture = NULL;
			fakecuda__capture_put(cap);
		}
	pthread_mutex_unlock(&c->mu);
	if (invalid) {
		if (!to_graph)
			graph_free(g);
		*out = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	if (!to_graph)
		fakecuda__registry_add(g, FC_T_GRAPH);
	*out = (CUgraph)g;
	return CUDA_SUCCESS;
}

FC_DEF(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph), end_capture(hStream, phGraph, 0))
FC_DEF(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph),
       end_capture(hStream, phGraph, 1))

/* Capture status of @hs; for the legacy stream CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * while a blocking stream of its context captures. */
static CUresult capture_status(CUstream hs, int ptds, CUstreamCaptureStatus *st,
			       unsigned long long *id, struct fc_graph **g,
			       const CUgraphNode **tail)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_ctx *c = s->ctx;
	pthread_mutex_lock(&c->mu);
	if (s->kind == FC_S_LEGACY) {
		for (struct fc_stream *t = c->streams; t; t = t->next)
			if (t->capture && t->kind != FC_S_AUX &&
			    !(t->flags & CU_STREAM_NON_BLOCKING)) {
				pthread_mutex_unlock(&c->mu);
				return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
			}
	}
	struct fc_capture *cap = s->capture;
	if (!cap)
		*st = CU_STREAM_CAPTURE_STATUS_NONE;
	else if (atomic_load(&cap->invalidated))
		*st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
	else
		*st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (cap && id)
		*id = cap->id;
	if (cap && g) {
		pthread_mutex_lock(&cap->mu);
		*g = cap->graph;
		if (tail) {
			/* An opaque handle: node handles are not modelled. */
			cap->tail = (CUgraphNode)&cap->tail;
			*tail = cap->graph && cap->graph->n ? &cap->tail : NULL;
		}
		pthread_mutex_unlock(&cap->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream hs, CUstreamCaptureStatus *st, int ptds)
{
	return capture_status(hs, ptds, st, NULL, NULL, NULL);
}

FC_DEF(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
       is_capturing(hStream, captureStatus, 0))
FC_DEF(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
       is_capturing(hStream, captureStatus, 1))

static CUresult capture_info(CUstream hs, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
			     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps,
			     int ptds)
{
	unsigned long long cid = 0;
	struct fc_graph *g = NULL;
	const CUgraphNode *tail = NULL;
	CUresult r = capture_status(hs, ptds, st, &cid, &g, &tail);
	if (r)
		return r;
	if (*st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return CUDA_SUCCESS;
	if (id)
		*id = cid;
	if (graph)
		*graph = (CUgraph)g;
	/* Captured work is one ordered list, so the only dependency of the next
	 * node is the last one (the driver reports 1 after any node). */
	if (deps)
		*deps = tail;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = tail ? 1 : 0;
	return CUDA_SUCCESS;
}

FC_DEF(cuStreamGetCaptureInfo,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out),
       capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, 0))
FC_DEF(cuStreamGetCaptureInfo_ptsz,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out),
       capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, 1))
FC_DEF(cuStreamGetCaptureInfo_v2,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
	CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out),
       capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
		    numDependencies_out, 0))
FC_DEF(cuStreamGetCaptureInfo_v2_ptsz,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
	CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out),
       capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
		    numDependencies_out, 1))
FC_DEF(cuStreamGetCaptureInfo_v3,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
	CUgraph *graph_out, const CUgraphNode **dependencies_out,
	const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out),
       capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
		    numDependencies_out, 0))
FC_DEF(cuStreamGetCaptureInfo_v3_ptsz,
       (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
	CUgraph *graph_out, const CUgraphNode **dependencies_out,
	const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out),
       capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
		    numDependencies_out, 1))

/* ---- graphs ------------------------------------------------------------------------------ */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_graph *g = graph_new(c);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fakecuda__registry_add(g, FC_T_GRAPH);
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hGraph, FC_T_GRAPH) ||
	    ((struct fc_graph *)hGraph)->owned_by_node)
		return CUDA_ERROR_INVALID_VALUE;
	graph_free((struct fc_graph *)hGraph);
	return CUDA_SUCCESS;
}

long fakecuda_graph_node_count(CUgraph g)
{
	if (!fakecuda__registry_is(g, FC_T_GRAPH))
		return -EINVAL;
	return (long)((struct fc_graph *)g)->n;
}

void fakecuda__gexec_unref(struct fc_gexec *x)
{
	if (!x || atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < x->n; i++)
		fakecuda__cmd_fini(&x->nodes[i]);
	free(x->nodes);
	for (size_t k = 0; k < x->nretired; k++) {
		for (size_t i = 0; i < x->retired_n[k]; i++)
			fakecuda__cmd_fini(&x->retired[k][i]);
		free(x->retired[k]);
	}
	free(x->retired);
	free(x->retired_n);
	fakecuda__op_unref(x->last);
	pthread_mutex_destroy(&x->mu);
	free(x);
}

static CUresult instantiate(CUgraphExec *out, CUgraph hg, unsigned long long flags)
{
	if (!out || !fakecuda__registry_is(hg, FC_T_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	const unsigned long long ok = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
				      CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
				      CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
	if (flags & ~ok)
		return CUDA_ERROR_INVALID_VALUE;
	const struct fc_graph *g = (const struct fc_graph *)hg;
	struct fc_gexec *x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->nodes = calloc(g->n ? g->n : 1, sizeof(*x->nodes));
	if (!x->nodes) {
		free(x);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_init(&x->mu, NULL);
	atomic_init(&x->refs, 1);
	/* The exec is independent of the graph: later graph changes or its
	 * destruction do not affect it. */
	for (size_t i = 0; i < g->n; i++) {
		if (fakecuda__cmd_clone(&x->nodes[i], &g->nodes[i]) != 0) {
			x->n = i;
			fakecuda__gexec_unref(x);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	x->n = g->n;
	x->flags = flags;
	fakecuda__registry_add(x, FC_T_GEXEC);
	*out = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	FC_ENTER();
	return instantiate(phGraphExec, hGraph, flags);
}

static CUresult instantiate_v1(CUgraphExec *out, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
	if (err)
		*err = NULL;
	if (log && n)
		log[0] = 0;
	return instantiate(out, g, 0);
}

FC_DEF(cuGraphInstantiate,
       (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
	size_t bufferSize),
       instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))
FC_DEF(cuGraphInstantiate_v2,
       (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
	size_t bufferSize),
       instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	p->hErrNode_out = NULL;
	CUresult r = instantiate(out, g, p->flags);
	p->result_out = r ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
	return r;
}

FC_DEF(cuGraphInstantiateWithParams,
       (CUgraphExec * phGraphExec, CUgraph hGraph,
	CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
       instantiate_params(phGraphExec, hGraph, instantiateParams))
FC_DEF(cuGraphInstantiateWithParams_ptsz,
       (CUgraphExec * phGraphExec, CUgraph hGraph,
	CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
       instantiate_params(phGraphExec, hGraph, instantiateParams))

/* "The executable graph may be destroyed while it is executing": launches hold a reference. */
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hGraphExec, FC_T_GEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	fakecuda__registry_del(hGraphExec);
	fakecuda__gexec_unref((struct fc_gexec *)hGraphExec);
	return CUDA_SUCCESS;
}

/*
 * "Each launch is ordered behind both any previous work in hStream and any
 * previous launches of hGraphExec." Launching into a capturing stream
 * appends the exec's nodes to that capture.
 */
static CUresult graph_launch(CUgraphExec hx, CUstream hs, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!fakecuda__registry_is(hx, FC_T_GEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_gexec *x = (struct fc_gexec *)hx;
	pthread_mutex_lock(&s->ctx->mu);
	if (s->capture) {
		for (size_t i = 0; i < x->n && !r; i++) {
			struct fc_cmd c;
			if (fakecuda__cmd_clone(&c, &x->nodes[i]) != 0)
				r = CUDA_ERROR_OUT_OF_MEMORY;
			else
				r = fakecuda__capture_add(s, &c);
		}
		pthread_mutex_unlock(&s->ctx->mu);
		return r;
	}
	pthread_mutex_unlock(&s->ctx->mu);
	struct fc_cmd cmd = {.kind = FC_CMD_GRAPH, .u.graph.exec = x};
	pthread_mutex_lock(&x->mu);
	struct fc_op *prev = x->last;
	if (prev)
		fakecuda__op_ref(prev);
	/* "Updates ... take effect the next time the graph is launched". */
	cmd.u.graph.nodes = x->nodes;
	cmd.u.graph.n = x->n;
	pthread_mutex_unlock(&x->mu);
	atomic_fetch_add(&x->refs, 1);
	struct fc_op *op = NULL;
	r = fakecuda__submit(s, &cmd, prev, &op);
	fakecuda__op_unref(prev);
	if (r)
		return r;
	pthread_mutex_lock(&x->mu);
	struct fc_op *old = x->last;
	x->last = op;
	pthread_mutex_unlock(&x->mu);
	fakecuda__op_unref(old);
	return CUDA_SUCCESS;
}

FC_DEF(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),
       graph_launch(hGraphExec, hStream, 0))
FC_DEF(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream),
       graph_launch(hGraphExec, hStream, 1))

/* Uploading prepares device state; the fake has none, so it is ordering only. */
static CUresult graph_upload(CUgraphExec hx, CUstream hs, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!fakecuda__registry_is(hx, FC_T_GEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

FC_DEF(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream),
       graph_upload(hGraphExec, hStream, 0))
FC_DEF(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream),
       graph_upload(hGraphExec, hStream, 1))

void fakecuda__graph_teardown(void)
{
	void **v;
	size_t n = fakecuda__registry_take(FC_T_GEXEC, &v);
	for (size_t i = 0; i < n; i++)
		fakecuda__gexec_unref(v[i]);
	free(v);
	n = fakecuda__registry_take(FC_T_GRAPH, &v);
	/* Bodies and child graphs of nodes are registered too (the app may
	 * capture into them): they go with their node's graph. */
	size_t top = 0;
	for (size_t i = 0; i < n; i++)
		if (!((struct fc_graph *)v[i])->owned_by_node)
			v[top++] = v[i];
	for (size_t i = 0; i < top; i++)
		graph_free(v[i]);
	free(v);
	n = fakecuda__registry_take(FC_T_COND, &v);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- nodes ----------------------------------------------------------------------------- */

static CUgraphNode node_handle(struct fc_graph *g, size_t i)
{
	if (!g->handles[i]) {
		struct fc_gnode *h = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		h->g = g;
		h->idx = i;
		g->handles[i] = h;
		fakecuda__registry_add(h, FC_T_NODE);
	}
	return (CUgraphNode)g->handles[i];
}

static struct fc_cmd *node_cmd(CUgraphNode n)
{
	if (!fakecuda__registry_is(n, FC_T_NODE))
		return NULL;
	struct fc_gnode *h = (struct fc_gnode *)n;
	return &h->g->nodes[h->idx];
}

/* "If numNodes is higher than the actual number of nodes, the remaining entries
 * in nodes will be set to NULL, and the number of nodes actually obtained will
 * be returned in numNodes." */
CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hGraph, FC_T_GRAPH) || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_graph *g = (struct fc_graph *)hGraph;
	if (!nodes) {
		*numNodes = g->n;
		return CUDA_SUCCESS;
	}
	size_t k = 0;
	for (; k < *numNodes && k < g->n; k++)
		if (!(nodes[k] = node_handle(g, k)))
			return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t j = k; j < *numNodes; j++)
		nodes[j] = NULL;
	*numNodes = k;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	FC_ENTER();
	struct fc_cmd *c = node_cmd(hNode);
	if (!c || !type)
		return CUDA_ERROR_INVALID_VALUE;
	switch (c->kind) {
	case FC_CMD_KERNEL: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
	case FC_CMD_COPY:
	case FC_CMD_COPYV: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
	case FC_CMD_MEMSET: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
	case FC_CMD_HOSTFN:
	case FC_CMD_CALLBACK: *type = CU_GRAPH_NODE_TYPE_HOST; break;
	case FC_CMD_FREE: *type = CU_GRAPH_NODE_TYPE_MEM_FREE; break;
	case FC_CMD_MEMOPS: *type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP; break;
	case FC_CMD_EVRECORD: *type = CU_GRAPH_NODE_TYPE_EVENT_RECORD; break;
	case FC_CMD_EVWAIT: *type = CU_GRAPH_NODE_TYPE_WAIT_EVENT; break;
	case FC_CMD_CHILD: *type = CU_GRAPH_NODE_TYPE_GRAPH; break;
	case FC_CMD_COND: *type = CU_GRAPH_NODE_TYPE_CONDITIONAL; break;
	default: *type = CU_GRAPH_NODE_TYPE_EMPTY; break;
	}
	return CUDA_SUCCESS;
}

/* The geometry as launched, the function as launched, its CUkernel (NULL
 * for a module's function) and the node's context (measured: a captured
 * runtime launch's node holds func, kern and the capturing context). */
CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
	FC_ENTER();
	struct fc_cmd *c = node_cmd(hNode);
	if (!c || !p || c->kind != FC_CMD_KERNEL)
		return CUDA_ERROR_INVALID_VALUE;
	memset(p, 0, sizeof(*p));
	p->gridDimX = c->u.k.grid[0];
	p->gridDimY = c->u.k.grid[1];
	p->gridDimZ = c->u.k.grid[2];
	p->blockDimX = c->u.k.block[0];
	p->blockDimY = c->u.k.block[1];
	p->blockDimZ = c->u.k.block[2];
	p->sharedMemBytes = c->u.k.smem;
	p->kernelParams = c->u.k.pptrs;
	p->func = c->u.k.fn;
	p->kern = c->u.k.kern;
	p->ctx = (CUcontext)c->u.k.nctx;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p)
{
	FC_ENTER();
	struct fc_cmd *c = node_cmd(hNode);
	if (!c || !p || c->kind != FC_CMD_KERNEL)
		return CUDA_ERROR_INVALID_VALUE;
	return fakecuda__kernel_node_set(c, p);
}

/* Child graphs of a clone are graphs the app may read (GetGraph). */
static void register_children(struct fc_graph *g)
{
	for (size_t i = 0; i < g->n; i++) {
		if (g->nodes[i].kind == FC_CMD_CHILD) {
			fakecuda__registry_add(g->nodes[i].u.child.g, FC_T_GRAPH);
			register_children(g->nodes[i].u.child.g);
		} else if (g->nodes[i].kind == FC_CMD_COND) {
			for (unsigned k = 0; k < g->nodes[i].u.cond.n; k++) {
				fakecuda__registry_add(g->nodes[i].u.cond.body[k], FC_T_GRAPH);
				register_children(g->nodes[i].u.cond.body[k]);
			}
		}
	}
}

CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	FC_ENTER();
	if (!phGraphClone || !fakecuda__registry_is(originalGraph, FC_T_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_graph *g = fakecuda__graph_clone((struct fc_graph *)originalGraph);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->owned_by_node = 0;
	fakecuda__registry_add(g, FC_T_GRAPH);
	register_children(g);
	*phGraphClone = (CUgraph)g;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
					      CUkernelNodeAttrValue *v)
{
	FC_ENTER();
	struct fc_cmd *c = node_cmd(hNode);
	if (!c || !v || c->kind != FC_CMD_KERNEL)
		return CUDA_ERROR_INVALID_VALUE;
	memset(v, 0, sizeof(*v));
	if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
		v->cooperative = c->u.k.coop;
	} else if (attr == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
		v->clusterDim.x = c->u.k.cluster[0];
		v->clusterDim.y = c->u.k.cluster[1];
		v->clusterDim.z = c->u.k.cluster[2];
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* "Gets a handle to the embedded graph in a child graph node. This call does
 * not clone the graph." */
CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	FC_ENTER();
	struct fc_cmd *c = node_cmd(hNode);
	if (!c || !phGraph || c->kind != FC_CMD_CHILD)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraph = (CUgraph)c->u.child.g;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
						CUgraph hGraph, CUcontext ctx,
						unsigned int defaultLaunchValue, unsigned int flags)
{
	FC_ENTER();
	if (!pHandle_out || !fakecuda__registry_is(hGraph, FC_T_GRAPH) ||
	    (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
		return CUDA_ERROR_INVALID_VALUE;
	(void)ctx;
	struct fc_cond *h = calloc(1, sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->dflt = defaultLaunchValue;
	h->flags = flags;
	atomic_init(&h->value, defaultLaunchValue);
	fakecuda__registry_add(h, FC_T_COND);
	*pHandle_out = (CUgraphConditionalHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}

int fakecuda_cond_set(CUgraphConditionalHandle h, unsigned value)
{
	void *p = (void *)(uintptr_t)h;
	if (!fakecuda__registry_is(p, FC_T_COND))
		return -EINVAL;
	atomic_store(&((struct fc_cond *)p)->value, value);
	return 0;
}

static CUresult add_node(CUgraphNode *ph, CUgraph hg, struct fc_cmd *cmd)
{
	struct fc_graph *g = (struct fc_graph *)hg;
	size_t i = g->n;
	if (graph_append(g, cmd) != 0) {
		fakecuda__cmd_fini(cmd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (ph && !(*ph = node_handle(g, i)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

/* Dependencies are not modelled: insertion order is a topological order. */
static CUresult add_node_params(CUgraphNode *ph, CUgraph hg, CUgraphNodeParams *p)
{
	if (!ph || !p || !fakecuda__registry_is(hg, FC_T_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_cmd cmd;
	memset(&cmd, 0, sizeof(cmd));
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_EMPTY:
		cmd.kind = FC_CMD_NOP;
		return add_node(ph, hg, &cmd);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (!fakecuda__registry_is(p->graph.graph, FC_T_GRAPH))
			return CUDA_ERROR_INVALID_VALUE;
		cmd.kind = FC_CMD_CHILD;
		cmd.u.child.g = fakecuda__graph_clone((struct fc_graph *)p->graph.graph);
		if (!cmd.u.child.g)
			return CUDA_ERROR_OUT_OF_MEMORY;
		cmd.u.child.g->owned_by_node = 1;
		fakecuda__registry_add(cmd.u.child.g, FC_T_GRAPH);
		return add_node(ph, hg, &cmd);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
		CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
		void *hp = (void *)(uintptr_t)c->handle;
		unsigned n = c->size;
		int t = c->type;
		if (!fakecuda__registry_is(hp, FC_T_COND) || !n || n > 64 ||
		    (t == CU_GRAPH_COND_TYPE_WHILE && n != 1) ||
		    (t == CU_GRAPH_COND_TYPE_IF && n > 2) ||
		    (t != CU_GRAPH_COND_TYPE_WHILE && t != CU_GRAPH_COND_TYPE_IF &&
		     t != CU_GRAPH_COND_TYPE_SWITCH))
			return CUDA_ERROR_INVALID_VALUE;
		cmd.kind = FC_CMD_COND;
		cmd.u.cond.h = hp;
		cmd.u.cond.type = t;
		cmd.u.cond.body = calloc(n, sizeof(*cmd.u.cond.body));
		cmd.u.cond.out = calloc(n, sizeof(*cmd.u.cond.out));
		if (!cmd.u.cond.body || !cmd.u.cond.out) {
			fakecuda__cmd_fini(&cmd);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (unsigned k = 0; k < n; k++) {
			struct fc_graph *b = graph_new(((struct fc_graph *)hg)->ctx);
			if (!b) {
				fakecuda__cmd_fini(&cmd);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			b->owned_by_node = 1;
			fakecuda__registry_add(b, FC_T_GRAPH);
			cmd.u.cond.body[k] = b;
			cmd.u.cond.out[k] = (CUgraph)b;
			cmd.u.cond.n = k + 1;
		}
		c->phGraph_out = cmd.u.cond.out;
		return add_node(ph, hg, &cmd);
	}
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				const CUgraphNode *dependencies, size_t numDependencies,
				CUgraphNodeParams *nodeParams)
{
	FC_ENTER();
	return add_node_params(phGraphNode, hGraph, nodeParams);
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
				   const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
				   size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	FC_ENTER();
	return add_node_params(phGraphNode, hGraph, nodeParams);
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					  const CUgraphNode *dependencies, size_t numDependencies,
					  CUgraph childGraph)
{
	FC_ENTER();
	CUgraphNodeParams p;
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_GRAPH;
	p.graph.graph = childGraph;
	return add_node_params(phGraphNode, hGraph, &p);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies)
{
	FC_ENTER();
	CUgraphNodeParams p;
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_EMPTY;
	return add_node_params(phGraphNode, hGraph, &p);
}

CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hGraphExec, FC_T_GEXEC) || !flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = ((struct fc_gexec *)hGraphExec)->flags;
	return CUDA_SUCCESS;
}

/*
 * "Update the parameters of an executable graph from a graph with the same
 * topology": here the same node count and kinds. Launches already made keep
 * the nodes they started with (the fake runs them from the old array, kept
 * until the exec is destroyed); later launches use the new ones.
 */
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
				      CUgraphExecUpdateResultInfo *resultInfo)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hGraphExec, FC_T_GEXEC) ||
	    !fakecuda__registry_is(hGraph, FC_T_GRAPH) || !resultInfo)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_gexec *x = (struct fc_gexec *)hGraphExec;
	const struct fc_graph *g = (const struct fc_graph *)hGraph;
	memset(resultInfo, 0, sizeof(*resultInfo));
	int same = g->n == x->n;
	for (size_t i = 0; same && i < g->n; i++)
		same = g->nodes[i].kind == x->nodes[i].kind;
	if (!same) {
		resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
		return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	}
	struct fc_cmd *nodes = calloc(g->n ? g->n : 1, sizeof(*nodes));
	struct fc_cmd **rv = realloc(x->retired, (x->nretired + 1) * sizeof(*rv));
	if (rv)
		x->retired = rv;
	size_t *rn = realloc(x->retired_n, (x->nretired + 1) * sizeof(*rn));
	if (rn)
		x->retired_n = rn;
	if (!nodes || !rv || !rn) {
		free(nodes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < g->n; i++) {
		if (fakecuda__cmd_clone(&nodes[i], &g->nodes[i]) != 0) {
			for (size_t j = 0; j < i; j++)
				fakecuda__cmd_fini(&nodes[j]);
			free(nodes);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	pthread_mutex_lock(&x->mu);
	x->retired[x->nretired] = x->nodes;
	x->retired_n[x->nretired] = x->n;
	x->nretired++;
	x->nodes = nodes;
	pthread_mutex_unlock(&x->mu);
	resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	return CUDA_SUCCESS;
}
