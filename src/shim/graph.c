/* SPDX-License-Identifier: MIT */
/*
 * CUDA graphs as ordinary operations (docs/semantics.md, "Capture and graphs").
 *
 * A graph launch on a virtualized stream is one vctx op (VE_OP_CALL with
 * VE_DESC_CALL_COMPUTE): bound late to a pool entry like a kernel, its
 * function calls the real cuGraphLaunch on the entry's lane (a green-context
 * stream) once its predecessors completed, unchanged. CUDA orders "each
 * launch ... behind ... any previous launches of hGraphExec" (cuGraphLaunch):
 * here that is an edge from the exec's previous launch (or upload) to the
 * next one, so the vctx keeps it whatever stream each launch is on.
 *
 * Per executable graph the shim keeps (this file's map): the shape policies
 * size it by (its widest kernel node, the SMs its cooperative or clustered
 * nodes need), where it runs (placement, below), and its last launch token.
 * The shape is read from the graph at instantiation (cuGraphGetNodes, child
 * graphs recursively); an exec instantiated before the shim started, or
 * through a call the shim does not see, has an unknown shape and runs
 * anywhere (VE_G_UNKNOWN: sized as if it filled the GPU).
 *
 * Placement (VE_GRAPHS=auto|pool|whole|stream|barrier, default auto):
 *   pool    the lane of the bound entry. Its kernel nodes run on the entry's
 *           SMs when the graph has per-context copies (graph_copies.c: every
 *           kernel node has a CUkernel; no conditional, memory or device-
 *           launch nodes); otherwise, as the driver runs a graph in the
 *           context its nodes were made in, on every SM. auto binds such a
 *           graph to the whole GPU (whole, below).
 *   whole   the same (copies included), with min_sms = the whole GPU.
 *   stream  bound to the whole-GPU entry, launched on a stream of the
 *           application's (primary) context joined to that entry's lane
 *           with events: runs as natively, no confinement, no host wait.
 *           auto uses it for graphs the driver may not confine or run in a
 *           green context: conditional nodes (their ctx must be the one of
 *           the handle and of every body kernel), device-launchable graphs,
 *           and every graph once the app has a device-launchable one (any
 *           graph's kernel may launch it).
 *   barrier the old ordered pass-through: the caller waits for the stream's
 *           logical work, the driver launches on the app's stream.
 *
 * Exec changes (cuGraphExecUpdate, cuGraphExec*SetParams, ...) apply "to
 * future launches" only; a launch the vctx has not submitted yet is a future
 * launch to the driver, so the caller first waits until the exec's pending
 * launches completed. cuGraphExecDestroy of an exec with pending launches is
 * deferred until they completed.
 */
#include "backend/cuda_driver.h"
#include "runtime/runtime.h"
#include "shim/shim.h"
#include "shim/hmap.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GMAP_CAP   8192u /* power of two */
#define KEY_EMPTY  ((uintptr_t)0)
#define MAX_DEPTH  8
#define MAX_NODES  (1u << 20)

struct gslot {
	uintptr_t key; /* CUgraphExec */
	struct ve_gshape shape;
	uint64_t salt;
	ve_tok last; /* last launch or upload (VE_TOK_NONE: none pending) */
	struct ve_gcopies *copies; /* per-context copies, NULL if none */
	unsigned long long iflags; /* instantiation flags */
};

static struct gslot gmap[GMAP_CAP];
static uint32_t gmap_n;
static pthread_mutex_t gmap_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_salt = 1;
static _Atomic int devlaunch_seen; /* a device-launchable exec was instantiated */

/* Real destroys waiting for the last launch of their exec. */
struct gdeferred {
	CUgraphExec x;
	struct ve_gcopies *copies;
	ve_tok tok;
};
static struct gdeferred gdef[256];
static uint32_t ngdef;
static void sweep_deferred_locked(void);

/* k's slot (gmap_lock held; slots move when another is removed, so a
 * pointer lives only as long as the lock). Kept at most 3/4 full so probes
 * stay short. */
static struct gslot *gfind(uintptr_t k, bool insert)
{
	if (k == KEY_EMPTY)
		return NULL;
	uint32_t i = ve__probe_find(gmap, sizeof(gmap[0]), GMAP_CAP, k, insert);
	if (i == VE__PROBE_NONE)
		return NULL;
	struct gslot *s = &gmap[i];
	if (s->key == k)
		return s;
	if (4 * (gmap_n + 1) > 3 * GMAP_CAP)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->key = k;
	gmap_n++;
	return s;
}

/* ------------------------------------------------------------------ shape */

static void shape_unknown(struct ve_gshape *sh)
{
	memset(sh, 0, sizeof(*sh));
	sh->flags = VE_G_UNKNOWN;
}

static void kernel_node(CUgraphNode n, struct ve_gshape *sh)
{
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	if (!ve__real.cuGraphKernelNodeGetParams ||
	    ve__real.cuGraphKernelNodeGetParams(n, &p) != CUDA_SUCCESS) {
		sh->flags |= VE_G_UNKNOWN;
		return;
	}
	uint64_t blocks = (uint64_t)p.gridDimX * p.gridDimY * p.gridDimZ;
	uint32_t threads = p.blockDimX * p.blockDimY * p.blockDimZ;
	sh->nkernels++;
	if (!p.kern)
		sh->flags |= VE_G_NOKERN;
	if (blocks > sh->blocks) {
		sh->blocks = blocks;
		sh->threads = threads;
	}
	if (!ve__real.cuGraphKernelNodeGetAttribute)
		return;
	CUlaunchAttributeValue v;
	memset(&v, 0, sizeof(v));
	if (ve__real.cuGraphKernelNodeGetAttribute(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v) ==
		CUDA_SUCCESS) {
		uint32_t cs = (v.clusterDim.x ? v.clusterDim.x : 1) *
			      (v.clusterDim.y ? v.clusterDim.y : 1) *
			      (v.clusterDim.z ? v.clusterDim.z : 1);
		/* As for kernels (cluster.c): a leaf holds two SMs of a GPC, so a
		 * cluster larger than 2 fits only entries the driver's occupancy
		 * calculator finds wide enough, the whole GPU if it cannot say.
		 * Every such graph taking the whole GPU (the earlier rule) made a
		 * decode server's graph of cuBLAS kernels with clusters of 4 wait
		 * for the training beside it to drain, every token (H200: TPOT
		 * 2x alone, training 0.41) or starve under tput's grants. */
		if (cs > 2) {
			sh->flags |= VE_G_CLUSTER;
			const uint32_t cl[3] = {v.clusterDim.x, v.clusterDim.y, v.clusterDim.z};
			const uint32_t blk[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
			/* The kernel the copies run in an entry's context. */
			CUfunction f = p.kern ? (CUfunction)(void *)p.kern : p.func;
			uint32_t m = f ? ve__cluster_min_sms(f, cl, blk, p.sharedMemBytes) : UINT32_MAX;
			if (m > sh->min_sms)
				sh->min_sms = m;
		}
	}
	memset(&v, 0, sizeof(v));
	if (ve__real.cuGraphKernelNodeGetAttribute(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v) ==
		    CUDA_SUCCESS &&
	    v.cooperative) {
		sh->flags |= VE_G_COOP;
		int per_sm = 0;
		CUfunction f = p.func ? p.func : (CUfunction)(void *)p.kern;
		if (ve__real.cuOccupancyMaxActiveBlocksPerMultiprocessor &&
		    ve__real.cuOccupancyMaxActiveBlocksPerMultiprocessor(
			&per_sm, f, (int)threads, p.sharedMemBytes) == CUDA_SUCCESS &&
		    per_sm > 0) {
			uint64_t need = (blocks + (uint64_t)per_sm - 1) / (uint64_t)per_sm;
			uint32_t m = need > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)need;
			if (m > sh->min_sms)
				sh->min_sms = m;
		} else {
			sh->min_sms = UINT32_MAX; /* unknown occupancy: the whole GPU */
		}
	}
}

static bool each_node(CUgraph g, void (*fn)(CUgraphNode, CUgraphNodeType, void *), void *arg,
		      int depth)
{
	size_t n = 0;
	if (depth > MAX_DEPTH || !ve__real.cuGraphGetNodes || !ve__real.cuGraphNodeGetType ||
	    ve__real.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || n > MAX_NODES)
		return false;
	if (!n)
		return true;
	CUgraphNode *nodes = malloc(n * sizeof(*nodes));
	if (!nodes || ve__real.cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS) {
		free(nodes);
		return false;
	}
	bool ok = true;
	for (size_t i = 0; i < n; i++) {
		CUgraphNodeType t;
		if (ve__real.cuGraphNodeGetType(nodes[i], &t) != CUDA_SUCCESS) {
			ok = false;
			continue;
		}
		fn(nodes[i], t, arg);
		if (t != CU_GRAPH_NODE_TYPE_GRAPH)
			continue;
		/* "This call does not clone the graph. Changes to the graph will be
		 * reflected in the node". */
		CUgraph child = NULL;
		if (ve__real.cuGraphChildGraphNodeGetGraph &&
		    ve__real.cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS)
			ok = each_node(child, fn, arg, depth + 1) && ok;
		else
			ok = false;
	}
	free(nodes);
	return ok;
}

bool ve__graph_each_node(CUgraph g, void (*fn)(CUgraphNode, CUgraphNodeType, void *), void *arg)
{
	return each_node(g, fn, arg, 0);
}

static void shape_node(CUgraphNode n, CUgraphNodeType t, void *arg)
{
	struct ve_gshape *sh = arg;
	switch (t) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		kernel_node(n, sh);
		break;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		/* The driver hands out no bodies of an existing node: their
		 * kernels are not counted. */
		sh->flags |= VE_G_COND;
		break;
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		sh->flags |= VE_G_MEMNODE;
		break;
	case CU_GRAPH_NODE_TYPE_HOST:
		sh->flags |= VE_G_HOSTNODE;
		break;
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		sh->flags |= VE_G_EVENTNODE;
		break;
	default:
		break;
	}
	sh->nodes++;
}

void ve__graph_shape(CUgraph g, unsigned long long inst_flags, struct ve_gshape *sh)
{
	memset(sh, 0, sizeof(*sh));
	if (!ve__graph_each_node(g, shape_node, sh))
		sh->flags |= VE_G_UNKNOWN;
	if (inst_flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
		sh->flags |= VE_G_DEVLAUNCH;
}

/* ------------------------------------------------------------------ map */

/* Graphs whose kernels can be moved to a pool entry's context. */
static bool copyable(const struct ve_gshape *sh)
{
	const uint32_t never = VE_G_UNKNOWN | VE_G_COND | VE_G_DEVLAUNCH | VE_G_MEMNODE | VE_G_NOKERN;
	return sh->nkernels && !(sh->flags & never) &&
	       (ve__shim.cfg.graphs == VE_GRAPHS_AUTO || ve__shim.cfg.graphs == VE_GRAPHS_POOL ||
		ve__shim.cfg.graphs == VE_GRAPHS_WHOLE);
}

void ve__gexec_put(CUgraphExec x, const struct ve_gshape *sh, CUgraph g,
		   unsigned long long inst_flags)
{
	if (!x || !ve__shim_is_active())
		return;
	if (sh->flags & VE_G_DEVLAUNCH)
		atomic_store_explicit(&devlaunch_seen, 1, memory_order_relaxed);
	/* Made here, on the app's thread: the app may change or destroy g as
	 * soon as this call returns. */
	struct ve_gcopies *copies = copyable(sh) ? ve__gcopies_create(g, inst_flags) : NULL;
	pthread_mutex_lock(&gmap_lock);
	struct gslot *s = gfind((uintptr_t)x, true);
	if (s) {
		/* A handle reused after a destroy is a new graph to the profiles. */
		s->shape = *sh;
		s->salt = atomic_fetch_add(&next_salt, 1);
		s->last = VE_TOK_NONE;
		s->copies = copies;
		s->iflags = inst_flags;
		copies = NULL;
	}
	pthread_mutex_unlock(&gmap_lock);
	ve__gcopies_destroy(copies); /* no slot: the exec is never launched through the pool */
}

void ve__gexec_recopy(CUgraphExec x, CUgraph g, const struct ve_gshape *sh)
{
	if (!ve__shim_is_active())
		return;
	pthread_mutex_lock(&gmap_lock);
	struct gslot *s = gfind((uintptr_t)x, false);
	unsigned long long fl = s ? s->iflags : 0;
	pthread_mutex_unlock(&gmap_lock);
	if (!s)
		return;
	struct ve_gcopies *fresh = copyable(sh) ? ve__gcopies_create(g, fl) : NULL, *old = NULL;
	pthread_mutex_lock(&gmap_lock);
	s = gfind((uintptr_t)x, false);
	if (s) {
		old = s->copies;
		s->copies = fresh;
		fresh = NULL;
		/* The caller quiesced x, so no launch made before the update uses
		 * the old copies; one made meanwhile by another thread (a race in
		 * the app) may: they go when x's last launch is done. */
		ve_tok t = s->last;
		sweep_deferred_locked();
		if (old && t != VE_TOK_NONE && !ve_vctx_tok_done(ve__shim.v, t) &&
		    ngdef < VE_ARRAY_SIZE(gdef)) {
			gdef[ngdef++] = (struct gdeferred){NULL, old, t};
			old = NULL;
		}
	}
	pthread_mutex_unlock(&gmap_lock);
	ve__gcopies_destroy(old);
	ve__gcopies_destroy(fresh);
}

void ve__gexec_reshape(CUgraphExec x, const struct ve_gshape *sh, bool replace)
{
	pthread_mutex_lock(&gmap_lock);
	struct gslot *s = gfind((uintptr_t)x, false);
	if (s) {
		if (replace) {
			s->shape = *sh;
		} else {
			/* A node changed: widen, never narrow (the others are unknown). */
			if (sh->blocks > s->shape.blocks) {
				s->shape.blocks = sh->blocks;
				s->shape.threads = sh->threads;
			}
			if (sh->min_sms > s->shape.min_sms)
				s->shape.min_sms = sh->min_sms;
			s->shape.flags |= sh->flags;
		}
	}
	pthread_mutex_unlock(&gmap_lock);
}

void ve__gexec_quiesce(CUgraphExec x)
{
	if (!ve__shim_is_active())
		return;
	pthread_mutex_lock(&gmap_lock);
	struct gslot *s = gfind((uintptr_t)x, false);
	ve_tok t = s ? s->last : VE_TOK_NONE;
	pthread_mutex_unlock(&gmap_lock);
	if (t != VE_TOK_NONE)
		ve_vctx_tok_wait(ve__shim.v, t);
	/* Launches made before the change keep their copies (they ran above);
	 * later ones use the changed exec (cuGraphExecUpdate makes new copies). */
	pthread_mutex_lock(&gmap_lock);
	s = gfind((uintptr_t)x, false);
	if (s)
		ve__gcopies_off(s->copies);
	pthread_mutex_unlock(&gmap_lock);
}

void ve__gexec_quiesce_all(void)
{
	if (!ve__shim_is_active())
		return;
	/* Every exec's last launch, taken at once (slots move when an exec is
	 * destroyed, so a scan that dropped the lock could miss one), then
	 * waited for without the lock. */
	static ve_tok toks[GMAP_CAP];
	static pthread_mutex_t toks_lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&toks_lock);
	uint32_t n = 0;
	pthread_mutex_lock(&gmap_lock);
	for (uint32_t i = 0; i < GMAP_CAP; i++)
		if (gmap[i].key != KEY_EMPTY && gmap[i].last != VE_TOK_NONE)
			toks[n++] = gmap[i].last;
	pthread_mutex_unlock(&gmap_lock);
	for (uint32_t i = 0; i < n; i++)
		ve_vctx_tok_wait(ve__shim.v, toks[i]);
	pthread_mutex_unlock(&toks_lock);
}

bool ve__gexec_pending(void)
{
	if (!ve__shim_is_active())
		return false;
	bool any = false;
	pthread_mutex_lock(&gmap_lock);
	for (uint32_t i = 0; i < GMAP_CAP && !any; i++)
		any = gmap[i].key != KEY_EMPTY && gmap[i].last != VE_TOK_NONE &&
		      !ve_vctx_tok_done(ve__shim.v, gmap[i].last);
	pthread_mutex_unlock(&gmap_lock);
	return any;
}

static void sweep_deferred_locked(void)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < ngdef; i++) {
		if (ve_vctx_tok_done(ve__shim.v, gdef[i].tok)) {
			if (gdef[i].x)
				ve__real.cuGraphExecDestroy(gdef[i].x);
			ve__gcopies_destroy(gdef[i].copies);
		} else
			gdef[keep++] = gdef[i];
	}
	ngdef = keep;
}

CUresult ve__gexec_destroy(CUgraphExec x)
{
	if (!ve__shim_is_active() || !ve__real.cuGraphExecDestroy)
		return ve__real.cuGraphExecDestroy ? ve__real.cuGraphExecDestroy(x)
						   : CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&gmap_lock);
	sweep_deferred_locked();
	struct gslot *s = gfind((uintptr_t)x, false);
	ve_tok t = VE_TOK_NONE;
	struct ve_gcopies *copies = NULL;
	if (s) {
		t = s->last;
		copies = s->copies;
		s->copies = NULL;
		ve__probe_remove(gmap, sizeof(gmap[0]), GMAP_CAP, (uint32_t)(s - gmap));
		gmap_n--;
	}
	if (t != VE_TOK_NONE && !ve_vctx_tok_done(ve__shim.v, t) &&
	    ngdef < VE_ARRAY_SIZE(gdef)) {
		/* "cuGraphExecDestroy: ... may be destroyed while it is executing";
		 * a launch the driver has not seen yet must still find it (and
		 * its copies). */
		gdef[ngdef++] = (struct gdeferred){x, copies, t};
		pthread_mutex_unlock(&gmap_lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&gmap_lock);
	if (t != VE_TOK_NONE)
		ve_vctx_tok_wait(ve__shim.v, t);
	ve__gcopies_destroy(copies);
	return ve__real.cuGraphExecDestroy(x);
}

/* ------------------------------------------------------------------ launch */

/* Per lane stream: its context (for graph copies) and, for graphs placed on
 * it with VE_GP_STREAM, a stream of the app's context and two events, made
 * on first use. Only the dispatcher thread runs call bodies. */
#define SLANES 1024
static struct lane_info {
	CUstream lane;
	CUcontext ctx;
	int8_t whole; /* the lane's context has every SM: 1, not: 0, unknown: -1 */
	bool joined; /* s, in and out made */
	CUstream s;
	CUevent in, out;
} slanes[SLANES];

/* The lane's entry, found or added; NULL when the table is full. */
static struct lane_info *lane_info(CUstream lane)
{
	uint32_t h = (uint32_t)ve__mix64((uint64_t)(uintptr_t)lane) & (SLANES - 1);
	for (uint32_t i = 0; i < SLANES; i++, h = (h + 1) & (SLANES - 1)) {
		if (slanes[h].lane == lane)
			return &slanes[h];
		if (!slanes[h].lane) {
			slanes[h].lane = lane;
			slanes[h].whole = -1;
			return &slanes[h];
		}
	}
	return NULL;
}

/* The context of a lane's stream (a green context's, as cuCtxFromGreenCtx
 * gives it); NULL if unknown. */
static CUcontext lane_ctx(CUstream lane)
{
	struct lane_info *L = lane_info(lane);
	if (L && !L->ctx && (!ve__real.cuStreamGetCtx || ve__real.cuStreamGetCtx(lane, &L->ctx) != CUDA_SUCCESS))
		L->ctx = NULL;
	return L ? L->ctx : NULL;
}

/* SMs of a context, 0 if the driver cannot say. */
static unsigned ctx_sms(CUcontext ctx)
{
	CUdevResource r;
	if (!ctx || !ve__real.cuCtxGetDevResource ||
	    ve__real.cuCtxGetDevResource(ctx, &r, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS)
		return 0;
	return r.sm.smCount;
}

/* Whether the lane's (green) context and the application's both hold every
 * SM of the device: then the application's own exec runs on exactly the
 * SMs a copy would, and faster (a copy ran the decode replay's graph about
 * 1% slower on an H100, bench/results/gpu-2026-12-05e, calls 5 and 7). The
 * application's context too: one limited to fewer SMs (an MPS client with
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) would run the exec on those. Asked
 * once per lane. */
static bool lane_whole(CUstream lane)
{
	struct lane_info *L = lane_info(lane);
	if (!L)
		return false;
	if (L->whole < 0) {
		CUdevResource all;
		unsigned n = 0;
		if (ve__real.cuDeviceGetDevResource &&
		    ve__real.cuDeviceGetDevResource(ve__shim.dev, &all, CU_DEV_RESOURCE_TYPE_SM) ==
			    CUDA_SUCCESS)
			n = all.sm.smCount;
		L->whole = n && ctx_sms(lane_ctx(lane)) == n && ctx_sms(ve__shim.ctx) == n;
	}
	return L->whole > 0;
}

static int stream_lane(CUstream lane, CUstream *s, CUevent *in, CUevent *out)
{
	struct lane_info *L = lane_info(lane);
	if (!L)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!L->joined) {
		CUcontext cur = NULL;
		ve__real.cuCtxGetCurrent(&cur);
		bool push = cur != ve__shim.ctx && ve__real.cuCtxPushCurrent(ve__shim.ctx) == 0;
		CUresult r = ve__real.cuStreamCreateWithPriority(&L->s, CU_STREAM_NON_BLOCKING, 0);
		if (r == CUDA_SUCCESS)
			r = ve__real.cuEventCreate(&L->in, CU_EVENT_DISABLE_TIMING);
		if (r == CUDA_SUCCESS)
			r = ve__real.cuEventCreate(&L->out, CU_EVENT_DISABLE_TIMING);
		if (push) {
			CUcontext dummy;
			ve__real.cuCtxPopCurrent(&dummy);
		}
		if (r != CUDA_SUCCESS)
			return (int)r; /* the next call retries the creation */
		L->joined = true;
	}
	*s = L->s;
	*in = L->in;
	*out = L->out;
	return 0;
}

struct glaunch {
	CUgraphExec x;
	struct ve_gcopies *copies; /* lives until x's last launch completed */
	uint32_t placement;
	uint32_t upload;
};

/* The op's body on the dispatcher thread: the unchanged launch, on the lane. */
static int call_graph(uint64_t lane_stream, const void *payload, uint32_t len)
{
	struct glaunch g;
	if (len != sizeof(g))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&g, payload, sizeof(g));
	CUstream lane = (CUstream)(uintptr_t)lane_stream;
	if ((g.placement == VE_GP_POOL || g.placement == VE_GP_WHOLE) && g.copies &&
	    !lane_whole(lane)) {
		/* The copy whose kernels run in the lane's (green) context. */
		CUgraphExec c = ve__gcopies_exec(g.copies, lane_ctx(lane), ve__shim.ctx);
		if (c)
			g.x = c;
	}
	if (g.upload)
		return (int)ve__real.cuGraphUpload(g.x, lane);
	if (g.placement != VE_GP_STREAM)
		return (int)ve__real.cuGraphLaunch(g.x, lane);
	/* On a stream of the app's context, between the lane's earlier work
	 * (the op may be queued behind it) and its later work. */
	CUstream s;
	CUevent in, out;
	int rc = stream_lane(lane, &s, &in, &out);
	if (rc)
		return rc;
	CUresult r = ve__real.cuEventRecord(in, lane);
	if (r == CUDA_SUCCESS)
		r = ve__real.cuStreamWaitEvent(s, in, 0);
	if (r == CUDA_SUCCESS)
		r = ve__real.cuGraphLaunch(g.x, s);
	if (r == CUDA_SUCCESS)
		r = ve__real.cuEventRecord(out, s);
	if (r == CUDA_SUCCESS)
		r = ve__real.cuStreamWaitEvent(lane, out, 0);
	return (int)r;
}

uint32_t ve__graph_placement(const struct ve_gshape *sh)
{
	switch (ve__shim.cfg.graphs) {
	case VE_GRAPHS_POOL:
		return VE_GP_POOL;
	case VE_GRAPHS_WHOLE:
		return VE_GP_WHOLE;
	case VE_GRAPHS_STREAM:
		return VE_GP_STREAM;
	case VE_GRAPHS_BARRIER:
		return VE_GP_BARRIER;
	default:
		/* A kernel of any graph may launch a device graph, which may need the
		 * context it was uploaded in: once the app has one, every graph runs
		 * where it would natively. */
		if (atomic_load_explicit(&devlaunch_seen, memory_order_relaxed))
			return VE_GP_STREAM;
		return (sh->flags & (VE_G_COND | VE_G_DEVLAUNCH)) ? VE_GP_STREAM : VE_GP_POOL;
	}
}

int ve__gexec_submit(CUgraphExec x, const struct ve_target *t, bool upload, bool *barrier)
{
	struct ve_desc d = {.kind = VE_OP_CALL};
	struct glaunch g = {.x = x, .upload = upload};
	uint32_t total = ve_runtime_pool(ve__shim.rt)->total_sms;
	*barrier = false;
	pthread_mutex_lock(&gmap_lock);
	struct gslot *s = gfind((uintptr_t)x, false);
	if (!s) {
		/* Not instantiated through the shim (or destroyed): the driver says
		 * whether it is an exec, at the call, as its cuGraphLaunch would. */
		cuuint64_t fl;
		if (ve__real.cuGraphExecGetFlags && ve__real.cuGraphExecGetFlags(x, &fl) != CUDA_SUCCESS) {
			pthread_mutex_unlock(&gmap_lock);
			return -EINVAL;
		}
		s = gfind((uintptr_t)x, true);
		if (s) {
			shape_unknown(&s->shape);
			s->salt = atomic_fetch_add(&next_salt, 1);
		}
	}
	if (!s) {
		/* No room to keep the exec's launch order: the old barrier path. */
		pthread_mutex_unlock(&gmap_lock);
		*barrier = true;
		return 0;
	}
	const struct ve_gshape *sh = &s->shape;
	g.placement = ve__graph_placement(sh);
	g.copies = s->copies;
	/* A graph that runs on every SM whatever entry it is bound to (no
	 * copies: module functions, memory nodes, a changed exec, a failed
	 * copy) is bound to the whole GPU, so that the SMs the policy accounts
	 * for are the SMs it uses. VE_GRAPHS=pool keeps it on its entry. */
	if (g.placement == VE_GP_POOL && ve__shim.cfg.graphs == VE_GRAPHS_AUTO &&
	    !ve__gcopies_on(s->copies))
		g.placement = VE_GP_WHOLE;
	if (g.placement == VE_GP_BARRIER && !upload) {
		pthread_mutex_unlock(&gmap_lock);
		*barrier = true;
		return 0;
	}
	d.u.call.fn = call_graph;
	d.u.call.handle = (uint64_t)(uintptr_t)x;
	d.u.call.salt = s->salt;
	d.payload = (const uint8_t *)&g;
	d.payload_len = sizeof(g);
	if (!upload) {
		d.flags = VE_DESC_CALL_COMPUTE;
		/* A graph is many kernels: its widest node says little about how it
		 * scales. Until T(graph, m) is measured (the profile key is the exec),
		 * it is sized as one wave over the whole GPU, so the default model
		 * lets it scale to all SMs when nothing else runs. */
		d.u.call.blocks = (uint64_t)total * 8;
		d.u.call.threads = 256;
		d.u.call.blocks_per_sm = 8;
		uint32_t m = sh->min_sms;
		if (g.placement != VE_GP_POOL || m > total)
			m = total; /* the whole GPU (clusters, unknown occupancy, stream placement) */
		d.u.call.min_sms = m;
		atomic_fetch_add_explicit(m >= total ? &ve__shim.graph_whole : &ve__shim.graph_pool, 1,
					  memory_order_relaxed);
		if (ve__shim.cfg.latency) {
			d.flags |= VE_DESC_LATENCY;
			d.deadline_ns = ve__op_deadline();
		}
	}
	ve_tok prev = s->last, tok = VE_TOK_NONE;
	int rc = ve_vctx_submit_ex(ve__shim.v, t->ls, &d, 0, &prev, prev != VE_TOK_NONE ? 1 : 0,
				   &tok);
	if (rc == 0)
		s->last = tok;
	pthread_mutex_unlock(&gmap_lock);
	return rc;
}
