/* SPDX-License-Identifier: MIT */
/*
 * The intercepted driver API. Compiled twice: by hooks.c (legacy-stream entry
 * points: cuLaunchKernel, cuMemcpyHtoD_v2, ...) and by hooks_ptsz.c with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM defined, where cuda.h's own macros turn
 * every definition below into its per-thread twin (cuLaunchKernel_ptsz,
 * cuMemcpyHtoD_v2_ptds, ...) and VE_PTSZ is 1: a NULL stream then means the
 * calling thread's default stream. Calls without a per-thread form are
 * compiled only in the legacy pass (#if !VE_PTSZ).
 *
 * What each call does under Vitamin-E is documented in docs/semantics.md
 * ("Intercepted calls"); the comments here say why, briefly.
 */
#include "backend/cuda_desc.h"
#include "backend/cuda.h"
#include "runtime/runtime.h"
#include "shim/shim.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if VE_PTSZ
#define VE_TABLE (&ve__real_ptsz)
#else
#define VE_TABLE (&ve__real)
#endif
/* Calls the real entry point of this pass, by table index (see shim.h):
 * VE_CALL(cuStreamQuery, (s)). A slot the driver left empty (no driver at
 * all, or one too old to have that entry point) answers with an error code
 * instead of a call through NULL (ve__real_missing). */
#define VE_SLOT(tab, id) (((void *const *)(const void *)(tab))[id])
#define VE_CALL_IN(tab, fn, id, args)                                                              \
	(ve__real_ready(), VE_SLOT(tab, id) ? ((__typeof__(&fn))VE_SLOT(tab, id)) args             \
					    : ve__real_missing(id))
#define VE_CALL(name, args) VE_CALL_IN(VE_TABLE, name, VE_REAL_ID_##name, args)
/* For macros that take the function name as a parameter: the id must be
 * pasted there, before the name is macro-expanded to its versioned symbol. */
#define VE_CALL_T(fn, id, args) VE_CALL_IN(VE_TABLE, fn, id, args)
/* Entry points without a per-thread variant, from the legacy table. */
#define VE_CALL0(name, args) VE_CALL_IN(&ve__real, name, VE_REAL_ID_##name, args)

#define VE_S(x) VE_S2(x)
#define VE_S2(x) #x

static inline struct ve_vctx *V(void)
{
	return ve__shim.v;
}

/* ------------------------------------------------------------------ helpers */

enum host_kind { HK_DEVICE = 0, HK_PINNED, HK_PAGEABLE };

/* Device, pinned host or pageable host memory, per the driver. */
static enum host_kind host_kind_of(const void *p)
{
	CUmemorytype t = 0;
	CUresult r = VE_CALL0(cuPointerGetAttribute, (&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
						      (CUdeviceptr)(uintptr_t)p));
	if (r != CUDA_SUCCESS)
		return HK_PAGEABLE; /* unregistered host memory */
	return t == CU_MEMORYTYPE_HOST ? HK_PINNED : HK_DEVICE;
}

static CUresult submit_wait(const struct ve_target *t, const struct ve_desc *d, bool wait)
{
	ve_tok tok;
	int rc = ve_vctx_submit(V(), t->ls, d, 0, &tok);
	if (rc)
		return ve__cu_error(rc);
	if (wait)
		return ve__cu_error(ve_vctx_tok_wait(V(), tok));
	return CUDA_SUCCESS;
}

static struct ve_desc copy_desc(uint32_t variant, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
				 const void *payload, uint32_t plen)
{
	struct ve_desc d = {.kind = VE_OP_MEMCPY, .payload = payload, .payload_len = plen};
	d.u.cp.dst = dst;
	d.u.cp.src = src;
	d.u.cp.bytes = bytes;
	d.u.cp.variant = variant;
	return d;
}

static CUresult submit_copy(const struct ve_target *t, uint32_t variant, CUdeviceptr dst,
			    CUdeviceptr src, size_t bytes, const void *payload, uint32_t plen,
			    bool wait)
{
	struct ve_desc d = copy_desc(variant, dst, src, bytes, payload, plen);
	return submit_wait(t, &d, wait);
}

static CUresult submit_memset(const struct ve_target *t, CUdeviceptr dst, uint64_t value,
			      uint32_t elem, size_t pitch, size_t width, size_t height, bool wait)
{
	struct ve_desc d = {.kind = VE_OP_MEMSET};
	d.u.ms.dst = dst;
	d.u.ms.value = value;
	d.u.ms.elem_size = elem;
	d.u.ms.pitch = pitch;
	d.u.ms.width = width;
	d.u.ms.height = height;
	return submit_wait(t, &d, wait);
}

/* The stream a synchronous (non-Async) call runs on: the default stream of
 * this pass (legacy, or the thread's own for the _ptds entry points). */
static void resolve_default(struct ve_target *t)
{
	ve__resolve_stream(NULL, VE_PTSZ, t);
}

/* Pass-through with ordering: wait for the stream's logical work, call the
 * driver on the app's real stream, then make later logical work wait for it. */
#define BARRIER_CALL(t, call)                                                                      \
	do {                                                                                       \
		CUresult br_ = ve__barrier_begin(t);                                               \
		if (br_ != CUDA_SUCCESS)                                                           \
			return br_;                                                                \
		return ve__barrier_end((t), (call));                                               \
	} while (0)

/* A copy that hands the host a result (to pageable memory it returns once
 * the data is there) ends a latency client's step (VE_TPOT_MS, api.c); a
 * copy from the host does not. Wraps the copy's result when to_host. */
static CUresult read_back(CUresult r, bool to_host)
{
	if (to_host)
		ve__step_end();
	return r;
}

/* Whether [src, src + n) lies inside one allocation of this process's
 * device: a copy from anywhere else goes to the driver as the app made it,
 * which reports a bad pointer at the call (a logical op would report it as
 * a sticky error of a later one). */
static bool device_range_ok(CUdeviceptr src, size_t n)
{
	unsigned int mt = 0, managed = 1;
	int ord = -1;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
				   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
	void *out[] = {&mt, &managed, &ord, &base, &size};
	/* One query (an unknown pointer reads as type 0, not an error; a
	 * driver without the entry point answers CUDA_ERROR_NOT_FOUND). */
	return VE_CALL0(cuPointerGetAttributes, (5, a, out, src)) == CUDA_SUCCESS &&
	       mt == CU_MEMORYTYPE_DEVICE && !managed && ord == (int)ve__shim.dev && size &&
	       src >= base && n <= size && src - base <= size - n;
}

/* A read-back the application's thread runs itself (ve_vctx_submit_self
 * kept the op for it): the driver's own copy into pageable memory, which
 * returns once the data is there, on the lane that holds the stream's last
 * op, so the GPU runs it right behind that op and the driver's wait is the
 * only one; no hand-over to the dispatcher and back. Then the op completes
 * once its predecessor has (the dispatcher has usually seen that by then:
 * the predecessor finished before the copy began). */
static CUresult read_self(const struct ve_target *t, void *dst, CUdeviceptr src, size_t n,
			  ve_tok tok, uint32_t lane, ve_tok after)
{
	CUstream st = t->real;
	if (lane != VE_VCTX_NO_LANE && ve_cuda_backend_lane_stream(ve__shim.backend, lane, &st)) {
		/* Not a stream of the backend's (cannot happen for a kernel or
		 * a copy): wait for the predecessor, then any stream will do. */
		ve_vctx_tok_wait(V(), after);
		st = t->real;
	}
	CUresult r = VE_CALL(cuMemcpyDtoHAsync, (dst, src, n, st));
	/* The op completes whatever the copy and the wait returned: a wait
	 * says -EIO once the context has a sticky error, its predecessor done
	 * all the same, and an op left live would hang every later sync of
	 * the stream (prog_shim_fault readback). Only a closed vctx leaves the
	 * predecessor live (self_done: -EBUSY). */
	int rc = ve_vctx_tok_wait(V(), after);
	int rd = ve_vctx_self_done(V(), tok);
	if (r == CUDA_SUCCESS && (rc || rd))
		r = ve__cu_error(rc ? rc : rd);
	if (r == CUDA_SUCCESS)
		atomic_fetch_add_explicit(&ve__shim.read_self, 1, memory_order_relaxed);
	return r;
}

/* A small copy from the device into pageable memory as a logical op: run
 * by the calling thread right behind the stream's work when that is on one
 * lane (read_self, VE_READ_SELF), else through a pinned bounce buffer
 * (bounce.c): it runs on the GPU right behind the stream's work and the
 * caller waits once, then the bytes are copied to dst. False when it
 * cannot (too large, no buffer free, a stream capture open, a source
 * outside this device's allocations or managed): the caller takes the
 * ordered pass-through, the driver's own copy. */
static bool bounce_to_host(const struct ve_target *t, void *dst, CUdeviceptr src, size_t n,
			   CUresult *out)
{
	if (!dst || !ve__bounce_fits(n) ||
	    atomic_load_explicit(&ve__shim.captures, memory_order_acquire) || !device_range_ok(src, n))
		return false;
	uint32_t slot;
	void *b = ve__bounce_get(n, &slot);
	if (!b)
		return false;
	/* The descriptor a queued op needs: into the bounce buffer. */
	struct ve_desc d = copy_desc(VE_CP_DTOH, (CUdeviceptr)(uintptr_t)b, src, n, NULL, 0);
	ve_tok tok = VE_TOK_NONE, after = VE_TOK_NONE;
	uint32_t lane = VE_VCTX_NO_LANE;
	int rc = ve__shim.cfg.read_self ? ve_vctx_submit_self(V(), t->ls, &d, &tok, &lane, &after)
					: ve_vctx_submit(V(), t->ls, &d, 0, &tok);
	if (rc == 0 && !ve__shim.cfg.read_self)
		rc = 1; /* queued */
	CUresult r;
	if (rc == 0) {
		r = read_self(t, dst, src, n, tok, lane, after);
	} else if (rc == 1) {
		r = ve__cu_error(ve_vctx_tok_wait(V(), tok));
		if (r == CUDA_SUCCESS) {
			memcpy(dst, b, n);
			atomic_fetch_add_explicit(&ve__shim.bounced, 1, memory_order_relaxed);
		}
	} else {
		r = ve__cu_error(rc);
	}
	ve__bounce_put(slot);
	*out = read_back(r, true);
	return true;
}

/* ------------------------------------------------------------------ streams */

#if !VE_PTSZ
static CUresult stream_created(CUresult r, CUstream *ph, unsigned flags, int prio)
{
	if (r != CUDA_SUCCESS || !ve__shim_active())
		return r;
	CUcontext cur = NULL;
	VE_CALL0(cuCtxGetCurrent, (&cur));
	if (cur != ve__shim.ctx)
		return r; /* another context's stream: not ours to virtualize */
	ve_stream ls;
	int rc = ve_vctx_stream_create(V(), (flags & CU_STREAM_NON_BLOCKING) ? VE_STREAM_NON_BLOCKING : 0,
				       prio, &ls);
	struct ve_stream_info si = {.ls = ls, .flags = flags};
	if (rc == 0 && (rc = ve__smap_put(*ph, &si)) != 0)
		ve_vctx_stream_destroy(V(), ls);
	if (rc) {
		VE_CALL0(cuStreamDestroy, (*ph));
		return ve__cu_error(rc);
	}
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *ph, unsigned int flags)
{
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	return stream_created(VE_CALL0(cuStreamCreate, (ph, flags)), ph, flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = VE_CALL0(cuStreamCreateWithPriority, (ph, flags, priority));
	int prio = priority;
	if (r == CUDA_SUCCESS)
		VE_CALL0(cuStreamGetPriority, (*ph, &prio)); /* the driver clamps it */
	return stream_created(r, ph, flags, prio);
}

CUresult cuStreamDestroy(CUstream s)
{
	struct ve_stream_info si;
	if (ve__shim_is_active() && s && ve__smap_get(s, &si) == 0) {
		/* Returns at once; pending logical work still completes (vctx). */
		ve_vctx_stream_destroy(V(), si.ls);
		ve__smap_del(s);
	}
	return VE_CALL0(cuStreamDestroy, (s));
}
#endif

CUresult cuStreamSynchronize(CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamSynchronize, (s));
	int rc = ve_vctx_stream_sync(V(), t.ls);
	ve__step_end();
	return ve__sync_error(rc);
}

CUresult cuStreamQuery(CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamQuery, (s));
	return ve__cu_error(ve_vctx_stream_query(V(), t.ls));
}

/* A logical stream waits for a real event the vctx does not know. */
static int call_wait_foreign(uint64_t lane_stream, const void *payload, uint32_t len)
{
	CUevent ev;
	memcpy(&ev, payload, sizeof(ev));
	CUresult r = VE_CALL0(cuStreamWaitEvent, ((CUstream)(uintptr_t)lane_stream, ev, 0));
	return r == CUDA_SUCCESS ? 0 : (int)r;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	struct ve_event_info ei;
	bool known = ve__shim_is_active() && ve__emap_get(e, &ei) == 0;
	if (known && ei.graph && !ei.capture && !t.capturing) {
		/* Recorded by a graph's event node: the driver's event holds the
		 * truth once every graph launch made so far reached it. */
		ve__gexec_quiesce_all();
		known = false;
	}
	if (known && ei.capture && !t.virt && !t.capturing && s && s != CU_STREAM_LEGACY &&
	    s != CU_STREAM_PER_THREAD)
		return VE_CALL(cuStreamWaitEvent, (s, e, flags));
	if (t.capturing || (known && ei.capture)) {
		/* Waiting on an event recorded inside a capture joins this stream
		 * to the capture: from here on its work is recorded, not run. */
		if (known && ei.capture && !t.capturing) { /* a stream already in a capture keeps its group */
			if (s == CU_STREAM_PER_THREAD || (s == NULL && VE_PTSZ))
				ve__ptds_capture_set(ei.capture);
			else if (s && s != CU_STREAM_LEGACY)
				ve__smap_set_capture(s, ei.capture);
		}
		return VE_CALL(cuStreamWaitEvent, (s, e, flags));
	}
	if (!t.virt) {
		/* A stream the vctx does not see waits for one of our events: its
		 * generation may not have reached the driver yet (untimed records never
		 * do), so wait for it on the host first, as a barrier pass-through
		 * (prog_shim_launch "foreign"). */
		if (known)
			ve_vctx_event_sync(V(), ei.le);
		return VE_CALL(cuStreamWaitEvent, (s, e, flags));
	}
	if (!known) {
		struct ve_desc d = {.kind = VE_OP_CALL, .payload = (const void *)&e,
				    .payload_len = sizeof(e)};
		d.u.call.fn = call_wait_foreign;
		return submit_wait(&t, &d, false);
	}
	return ve__cu_error(ve_vctx_stream_wait_event(V(), t.ls, ei.le));
}

static void host_fn_desc(struct ve_desc *d, void (*fn)(void *), void *arg, uint32_t style,
			 CUstream s)
{
	memset(d, 0, sizeof(*d));
	d->kind = VE_OP_HOST_FN;
	d->u.host.fn = fn;
	d->u.host.arg = arg;
	d->u.host.style = style;
	d->u.host.stream_handle = (uint64_t)(uintptr_t)s;
}

CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *userData)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt || !fn)
		return VE_CALL(cuLaunchHostFunc, (s, fn, userData));
	struct ve_desc d;
	host_fn_desc(&d, fn, userData, 0, s);
	return submit_wait(&t, &d, false);
}

CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *userData, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt || !cb || flags)
		return VE_CALL(cuStreamAddCallback, (s, cb, userData, flags));
	struct ve_desc d;
	/* style 1: the host executor calls cb(stream, status, userData) */
	host_fn_desc(&d, (void (*)(void *))(void *)cb, userData, 1, s);
	return submit_wait(&t, &d, false);
}

/* ------------------------------------------------------------------ capture and graphs */

static _Atomic uint32_t next_capture_group = 1;

/* Captured work is recorded by the driver, not run: from here to the end of
 * capture the stream passes through (and so does every stream joined to the
 * capture through its events). No host wait: nothing captured runs now, and
 * a capture cannot depend on work recorded outside it (the driver refuses
 * such waits), so the logical work before it needs no barrier. */
static void capture_begun(CUstream s)
{
	uint32_t g = atomic_fetch_add(&next_capture_group, 1);
	atomic_fetch_add(&ve__shim.captures, 1);
	if (s == CU_STREAM_PER_THREAD || (s == NULL && VE_PTSZ))
		ve__ptds_capture_set(g);
	else
		ve__smap_set_capture(s, g);
	ve__notice_once(VE_NOTE_CAPTURE, "stream capture passes through to the driver; graph "
					 "launches are bound to the pool like kernels");
}

/* A legacy-stream handle: the driver refuses to capture it. */
static bool capture_legacy(CUstream s)
{
	return s == CU_STREAM_LEGACY || (s == NULL && !VE_PTSZ);
}

CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	CUresult r = VE_CALL(cuStreamBeginCapture, (s, mode));
	if (r == CUDA_SUCCESS && t.virt && !capture_legacy(s))
		capture_begun(s);
	return r;
}

/* Capture into an existing graph (a conditional node's body, say): the same
 * pass-through as cuStreamBeginCapture. */
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
				     const CUgraphEdgeData *edges, size_t ndeps,
				     CUstreamCaptureMode mode)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	CUresult r = VE_CALL(cuStreamBeginCaptureToGraph, (s, g, deps, edges, ndeps, mode));
	if (r == CUDA_SUCCESS && t.virt && !capture_legacy(s))
		capture_begun(s);
	return r;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
	struct ve_stream_info si;
	CUresult r = VE_CALL(cuStreamEndCapture, (s, g));
	if (!ve__shim_is_active())
		return r;
	bool ptds = s == CU_STREAM_PER_THREAD || (s == NULL && VE_PTSZ);
	uint32_t group = ptds ? ve__ptds_capture()
			 : (s && ve__smap_get(s, &si) == 0) ? si.capture
							    : 0;
	/* Ends whatever the driver said: an invalidated capture ends too. */
	if (group && r != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED &&
	    r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
		ve__smap_end_capture(group);
		ve__emap_end_capture(group);
		ve__ptds_capture_ended(group);
		/* Counted as open (bounce_to_host) until the driver says it
		 * ended: a bad argument leaves it capturing, and of two
		 * threads ending one capture only one succeeds. A capture
		 * never ended (its stream destroyed, its thread gone) keeps
		 * copies on the pass-through for good: the safe side. */
		if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
			atomic_fetch_sub(&ve__shim.captures, 1);
	}
	return r;
}

/* The ordered pass-through of old: the exec's map is full, or VE_GRAPHS=barrier. */
static CUresult graph_barrier(CUgraphExec exec, CUstream s, const struct ve_target *t, bool upload)
{
	ve__notice_once(VE_NOTE_GRAPH, "a CUDA graph launch runs as an ordered pass-through on "
				       "the app's stream (full GPU, not pooled)");
	BARRIER_CALL(t, upload ? VE_CALL(cuGraphUpload, (exec, s)) : VE_CALL(cuGraphLaunch, (exec, s)));
}

static CUresult graph_op(CUgraphExec exec, CUstream s, bool upload)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt) /* captured (a child graph node), or a stream the vctx does not see */
		return upload ? VE_CALL(cuGraphUpload, (exec, s)) : VE_CALL(cuGraphLaunch, (exec, s));
	if (!exec)
		return CUDA_ERROR_INVALID_VALUE;
	bool barrier = false;
	int rc = ve__gexec_submit(exec, &t, upload, &barrier);
	if (barrier)
		return graph_barrier(exec, s, &t, upload);
	return ve__cu_error(rc);
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s)
{
	return graph_op(exec, s, false);
}

CUresult cuGraphUpload(CUgraphExec exec, CUstream s)
{
	return graph_op(exec, s, true);
}

static CUresult instantiated(CUresult r, CUgraphExec *ph, CUgraph g, unsigned long long flags)
{
	if (r == CUDA_SUCCESS && ph && *ph && ve__shim_active()) {
		struct ve_gshape sh;
		ve__graph_shape(g, flags, &sh);
		ve__gexec_put(*ph, &sh, g, flags);
	}
	return r;
}

/* The upload stream, if any, is used as given: a new exec has no launches
 * to order against, and uploading changes no result. */
CUresult cuGraphInstantiateWithParams(CUgraphExec *ph, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r = VE_CALL(cuGraphInstantiateWithParams, (ph, g, p));
	return instantiated(r, ph, g, p ? p->flags : 0);
}

#if !VE_PTSZ
CUresult cuGraphInstantiateWithFlags(CUgraphExec *ph, CUgraph g, unsigned long long flags)
{
	return instantiated(VE_CALL0(cuGraphInstantiateWithFlags, (ph, g, flags)), ph, g, flags);
}

CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	return ve__gexec_destroy(exec);
}

CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
	ve__gexec_quiesce(exec);
	CUresult r = VE_CALL0(cuGraphExecUpdate, (exec, g, info));
	if (r == CUDA_SUCCESS && ve__shim_is_active()) {
		struct ve_gshape sh;
		ve__graph_shape(g, 0, &sh);
		ve__gexec_reshape(exec, &sh, true);
		ve__gexec_recopy(exec, g, &sh);
	}
	return r;
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode n,
					const CUDA_KERNEL_NODE_PARAMS *p)
{
	ve__gexec_quiesce(exec);
	CUresult r = VE_CALL0(cuGraphExecKernelNodeSetParams, (exec, n, p));
	if (r == CUDA_SUCCESS && p && ve__shim_is_active()) {
		struct ve_gshape sh = {.blocks = (uint64_t)p->gridDimX * p->gridDimY * p->gridDimZ,
				       .threads = p->blockDimX * p->blockDimY * p->blockDimZ};
		ve__gexec_reshape(exec, &sh, false);
	}
	return r;
}

/* Changes to an exec apply to "future launches": launches the vctx has not
 * handed to the driver yet must not see them, so they finish first. */
#define EXEC_SETTER(name, params, args)                                                            \
	CUresult name params                                                                       \
	{                                                                                          \
		ve__gexec_quiesce(exec);                                                           \
		return VE_CALL_T(name, VE_REAL_ID_##name, args);                                    \
	}
EXEC_SETTER(cuGraphExecMemcpyNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_MEMCPY3D *p, CUcontext ctx),
	    (exec, n, p, ctx))
EXEC_SETTER(cuGraphExecMemsetNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx),
	    (exec, n, p, ctx))
EXEC_SETTER(cuGraphExecHostNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p), (exec, n, p))
EXEC_SETTER(cuGraphExecChildGraphNodeSetParams, (CUgraphExec exec, CUgraphNode n, CUgraph child),
	    (exec, n, child))
EXEC_SETTER(cuGraphExecEventRecordNodeSetEvent, (CUgraphExec exec, CUgraphNode n, CUevent e),
	    (exec, n, e))
EXEC_SETTER(cuGraphExecEventWaitNodeSetEvent, (CUgraphExec exec, CUgraphNode n, CUevent e),
	    (exec, n, e))
EXEC_SETTER(cuGraphExecExternalSemaphoresSignalNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p),
	    (exec, n, p))
EXEC_SETTER(cuGraphExecExternalSemaphoresWaitNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p),
	    (exec, n, p))
EXEC_SETTER(cuGraphExecBatchMemOpNodeSetParams,
	    (CUgraphExec exec, CUgraphNode n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p),
	    (exec, n, p))
EXEC_SETTER(cuGraphExecNodeSetParams, (CUgraphExec exec, CUgraphNode n, CUgraphNodeParams *p),
	    (exec, n, p))
EXEC_SETTER(cuGraphNodeSetEnabled, (CUgraphExec exec, CUgraphNode n, unsigned int on),
	    (exec, n, on))
#endif

/* ------------------------------------------------------------------ other stream work */

/* Stream-ordered calls the vctx has no operation for (array copies, batched
 * and peer 3D copies, external semaphores, graphics interop, managed-memory
 * attach, sparse mapping, decompression, discards, batch memory ops): the
 * ordered pass-through, so they still run after the stream's logical work
 * and before its later work. */
#define BARRIER_HOOK(name, sarg, params, args)                                                     \
	CUresult name params                                                                       \
	{                                                                                          \
		struct ve_target t;                                                                \
		ve__resolve_stream(sarg, VE_PTSZ, &t);                                             \
		if (!t.virt)                                                                       \
			return VE_CALL_T(name, VE_REAL_ID_##name, args);                            \
		BARRIER_CALL(&t, VE_CALL_T(name, VE_REAL_ID_##name, args));                         \
	}
BARRIER_HOOK(cuStreamBatchMemOp, s,
	     (CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int flags),
	     (s, n, p, flags))
BARRIER_HOOK(cuMemcpyAtoHAsync, s,
	     (void *dst, CUarray src, size_t off, size_t bytes, CUstream s),
	     (dst, src, off, bytes, s))
BARRIER_HOOK(cuMemcpyHtoAAsync, s,
	     (CUarray dst, size_t off, const void *src, size_t bytes, CUstream s),
	     (dst, off, src, bytes, s))
BARRIER_HOOK(cuMemcpy3DPeerAsync, s, (const CUDA_MEMCPY3D_PEER *p, CUstream s), (p, s))
BARRIER_HOOK(cuMemcpy3DBatchAsync, s,
	     (size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream s),
	     (n, ops, flags, s))
BARRIER_HOOK(cuSignalExternalSemaphoresAsync, s,
	     (const CUexternalSemaphore *sems, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *p,
	      unsigned int n, CUstream s),
	     (sems, p, n, s))
BARRIER_HOOK(cuWaitExternalSemaphoresAsync, s,
	     (const CUexternalSemaphore *sems, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *p,
	      unsigned int n, CUstream s),
	     (sems, p, n, s))
BARRIER_HOOK(cuGraphicsMapResources, s, (unsigned int n, CUgraphicsResource *res, CUstream s),
	     (n, res, s))
BARRIER_HOOK(cuGraphicsUnmapResources, s, (unsigned int n, CUgraphicsResource *res, CUstream s),
	     (n, res, s))
BARRIER_HOOK(cuStreamAttachMemAsync, s,
	     (CUstream s, CUdeviceptr p, size_t len, unsigned int flags), (s, p, len, flags))
BARRIER_HOOK(cuMemMapArrayAsync, s, (CUarrayMapInfo *info, unsigned int n, CUstream s),
	     (info, n, s))
BARRIER_HOOK(cuMemBatchDecompressAsync, s,
	     (CUmemDecompressParams *p, size_t n, unsigned int flags, size_t *err, CUstream s),
	     (p, n, flags, err, s))
BARRIER_HOOK(cuMemDiscardBatchAsync, s,
	     (CUdeviceptr *p, size_t *sizes, size_t n, unsigned long long flags, CUstream s),
	     (p, sizes, n, flags, s))
BARRIER_HOOK(cuMemDiscardAndPrefetchBatchAsync, s,
	     (CUdeviceptr *p, size_t *sizes, size_t n, CUmemLocation *locs, size_t *idx,
	      size_t nlocs, unsigned long long flags, CUstream s),
	     (p, sizes, n, locs, idx, nlocs, flags, s))

/* ------------------------------------------------------------------ events */

#if !VE_PTSZ
CUresult cuEventCreate(CUevent *ph, unsigned int flags)
{
	CUresult r = VE_CALL0(cuEventCreate, (ph, flags));
	if (r != CUDA_SUCCESS || !ve__shim_active())
		return r;
	CUcontext cur = NULL;
	VE_CALL0(cuCtxGetCurrent, (&cur));
	if (cur != ve__shim.ctx)
		return r;
	ve_event le;
	unsigned vf = flags & (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
			       CU_EVENT_INTERPROCESS);
	int rc = ve_vctx_event_create(V(), vf, &le);
	struct ve_event_info ei = {.le = le, .flags = flags};
	if (rc == 0 && (rc = ve__emap_put(*ph, &ei)) != 0)
		ve_vctx_event_destroy(V(), le);
	if (rc == -EAGAIN || rc == -ENOSPC) {
		/* Full: the event stays the driver's alone, as another context's
		 * would be (records wait on the host for the stream's work, waits
		 * happen on the lanes): slower, still in order. */
		ve__notice_once(VE_NOTE_EVENTS_FULL,
				"more live events than Vitamin-E tracks: the rest are recorded in order "
				"by host waits (slower); destroy events no longer needed");
		return CUDA_SUCCESS;
	}
	if (rc) {
		VE_CALL0(cuEventDestroy, (*ph));
		return ve__cu_error(rc);
	}
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
	struct ve_event_info ei;
	if (ve__shim_is_active() && ve__emap_get(e, &ei) == 0) {
		ve_tok tok = VE_TOK_NONE;
		ve_vctx_event_generation(V(), ei.le, NULL, &tok);
		ve_vctx_event_destroy(V(), ei.le);
		ve__emap_del(e);
		/* A pending timed record still names the real event: destroy it
		 * after that record ran (CUDA lets the app destroy it now). */
		if (!(ei.flags & CU_EVENT_DISABLE_TIMING) && !ve_vctx_tok_done(V(), tok)) {
			ve__defer_event_destroy(e, tok);
			return CUDA_SUCCESS;
		}
	}
	return VE_CALL0(cuEventDestroy, (e));
}

CUresult cuEventQuery(CUevent e)
{
	struct ve_event_info ei;
	if (!ve__shim_is_active() || ve__emap_get(e, &ei) || ei.capture)
		return VE_CALL0(cuEventQuery, (e));
	if (ei.graph) {
		/* Recorded by graph launches: those the vctx still holds have not
		 * reached the driver, so NOT_READY while any is pending. */
		if (ve__gexec_pending())
			return CUDA_ERROR_NOT_READY;
		return VE_CALL0(cuEventQuery, (e));
	}
	return ve__cu_error(ve_vctx_event_query(V(), ei.le));
}

CUresult cuEventSynchronize(CUevent e)
{
	struct ve_event_info ei;
	if (!ve__shim_is_active() || ve__emap_get(e, &ei) || ei.capture)
		return VE_CALL0(cuEventSynchronize, (e));
	if (ei.graph) {
		ve__gexec_quiesce_all();
		return read_back(VE_CALL0(cuEventSynchronize, (e)), true);
	}
	int rc = ve_vctx_event_sync(V(), ei.le);
	ve__step_end();
	return ve__sync_error(rc);
}

typedef CUresult (*elapsed_fn)(float *ms, CUevent a, CUevent b);

/* Both ABIs of cuEventElapsedTime: the driver's own answer comes from 'real'
 * (the version the application asked for), or from the current one. */
static CUresult elapsed_time(float *ms, CUevent a, CUevent b, elapsed_fn real)
{
	struct ve_event_info ea, eb;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
#define ELAPSED_REAL() (real ? real(ms, a, b) : VE_CALL0(cuEventElapsedTime, (ms, a, b)))
	if (!ve__shim_is_active() || ve__emap_get(a, &ea) || ve__emap_get(b, &eb))
		return ELAPSED_REAL();
	float host_ms = 0;
	int rc = ve_vctx_event_elapsed(V(), ea.le, eb.le, &host_ms);
	if (rc == -EBUSY)
		return CUDA_ERROR_NOT_READY;
	if (rc == -EINVAL || (rc == -ENODATA && (!(ea.flags & CU_EVENT_DISABLE_TIMING))))
		; /* fall through to the driver for its exact error or value */
	else if (rc)
		return ve__cu_error(rc);
	/* Both generations complete: the backend recorded the real events at
	 * those points, so the driver's own timing applies. */
	CUresult r = ELAPSED_REAL();
#undef ELAPSED_REAL
	if (r != CUDA_SUCCESS && rc == 0) {
		*ms = host_ms; /* completion-observed times (coarser, see semantics.md) */
		return CUDA_SUCCESS;
	}
	return r;
}

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	return elapsed_time(ms, a, b, NULL);
}
#endif

static CUresult event_record(CUevent e, CUstream s, unsigned flags, bool with_flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	struct ve_event_info ei;
	bool known = ve__shim_is_active() && ve__emap_get(e, &ei) == 0;
#define REAL_RECORD()                                                                              \
	(with_flags ? VE_CALL(cuEventRecordWithFlags, (e, s, flags)) : VE_CALL(cuEventRecord, (e, s)))
	if (t.capturing) {
		CUresult r = REAL_RECORD();
		if (r == CUDA_SUCCESS && known) {
			ve__emap_set_capture(e, t.capture);
			/* An external record becomes a node that graph launches run. */
			if (with_flags && (flags & CU_EVENT_RECORD_EXTERNAL))
				ve__emap_set_graph(e, 1);
		}
		return r;
	}
	if (!t.virt) {
		/* Our event recorded on a stream the vctx does not see: logical work can
		 * only wait for it through the vctx, which knows nothing of that stream,
		 * so let it complete here (host-blocking, like a barrier pass-through);
		 * the vctx then has nothing pending for it (prog_shim_launch "foreign"). */
		CUresult r = REAL_RECORD();
		if (r == CUDA_SUCCESS && known) {
			/* Ours, not the app's: no unsafe call against a
			 * global-mode capture elsewhere in the process. */
			CUstreamCaptureMode mode;
			bool relaxed = ve__capture_relax(&mode);
			r = VE_CALL0(cuEventSynchronize, (e));
			ve__capture_restore(relaxed, &mode);
		}
		return r;
	}
	if (!known) /* someone else's event on our stream: record it in order */
		BARRIER_CALL(&t, REAL_RECORD());
	if (ei.flags & CU_EVENT_INTERPROCESS) {
		/* Another process may wait for the driver's event as soon as this
		 * returns (cuIpcGetEventHandle; torch.multiprocessing shares CUDA
		 * tensors so): record it now, in order, as an ordered pass-through
		 * (the stream's earlier work done first), and logically below for
		 * this process's own waits. Recorded only logically, the other
		 * process's waits and queries passed at once. */
		CUresult br = ve__barrier_begin(&t);
		if (br == CUDA_SUCCESS)
			br = ve__barrier_end(&t, REAL_RECORD());
		if (br != CUDA_SUCCESS)
			return br;
	}
#undef REAL_RECORD
	if (ei.capture)
		ve__emap_set_capture(e, 0);
	if (ei.graph)
		ve__emap_set_graph(e, 0);
	uint64_t app = (ei.flags & CU_EVENT_DISABLE_TIMING) ? 0 : (uint64_t)(uintptr_t)e;
	return ve__cu_error(ve_vctx_event_record(V(), ei.le, t.ls, app));
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	return event_record(e, s, 0, false);
}

CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
	return event_record(e, s, flags, true);
}

/* ------------------------------------------------------------------ launches */

/* Where the launch-time copy of parameters is built: per thread, so the fast
 * path allocates nothing. */
static _Thread_local uint8_t launch_buf[VE_DESC_MAX_PAYLOAD];

static uint32_t cluster_size(const uint32_t c[3])
{
	return (c[0] ? c[0] : 1) * (c[1] ? c[1] : 1) * (c[2] ? c[2] : 1);
}

static CUresult build_kernel_desc(struct ve_desc *d, CUfunction f, struct ve_dim3 grid,
				  struct ve_dim3 block, unsigned smem, void **params, void **extra,
				  const CUlaunchAttribute *attrs, unsigned nattrs, bool coop)
{
	memset(d, 0, sizeof(*d));
	/* Errors the driver reports at the call must come from this call, not as a
	 * sticky error of a later sync (prog_shim_launch "launch_errors"). */
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	const uint32_t g3[3] = {grid.x, grid.y, grid.z}, b3[3] = {block.x, block.y, block.z};
	CUresult lr = ve__check_launch_config(f, g3, b3, smem);
	if (lr != CUDA_SUCCESS)
		return lr;
	d->kind = VE_OP_KERNEL;
	d->u.k.fn = (uint64_t)(uintptr_t)f;
	d->u.k.grid = grid;
	d->u.k.block = block;
	d->u.k.smem = smem;
	if (nattrs > VE_DESC_MAX_ATTRS)
		return CUDA_ERROR_INVALID_VALUE;
	uint32_t asz = (uint32_t)sizeof(CUlaunchAttribute);
	uint8_t *p = launch_buf;
	if (nattrs)
		memcpy(p, attrs, (size_t)nattrs * asz);
	for (unsigned i = 0; i < nattrs; i++) {
		if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && attrs[i].value.cooperative)
			coop = true;
		if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
			d->u.k.cluster[0] = attrs[i].value.clusterDim.x;
			d->u.k.cluster[1] = attrs[i].value.clusterDim.y;
			d->u.k.cluster[2] = attrs[i].value.clusterDim.z;
		}
	}
	const uint32_t *cl = d->u.k.cluster;
	if (cl[0] || cl[1] || cl[2]) {
		/* As the driver, at the call: no dimension 0, at most 8 blocks (16
		 * where the function allows non-portable sizes). */
		uint64_t n = (uint64_t)cl[0] * cl[1] * cl[2];
		if (!n || n > 16)
			return CUDA_ERROR_INVALID_CLUSTER_SIZE;
		int np = 0;
		if (n > 8 &&
		    (VE_CALL0(cuFuncGetAttribute,
			      (&np, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, f)) !=
			 CUDA_SUCCESS ||
		     !np))
			return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	}
	if (cluster_size(d->u.k.cluster) > 1 &&
	    (grid.x % (d->u.k.cluster[0] ? d->u.k.cluster[0] : 1) ||
	     grid.y % (d->u.k.cluster[1] ? d->u.k.cluster[1] : 1) ||
	     grid.z % (d->u.k.cluster[2] ? d->u.k.cluster[2] : 1)))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE; /* as the driver, at the call */
	d->u.k.nattrs = (uint16_t)nattrs;
	d->u.k.attr_size = (uint16_t)asz;
	uint8_t *pb = p + (size_t)nattrs * asz;
	size_t room = sizeof(launch_buf) - (size_t)nattrs * asz;
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE; /* the driver's answer to both forms */
	/* The function's layout, cached: it also tells an invalid handle and the
	 * function's own thread limit (its register use or launch bounds), which
	 * the driver checks at the call. */
	struct ve_param_layout L = {0};
	bool have_layout = params || ve__real.cuFuncGetParamInfo;
	if (have_layout && ve__param_layout(f, &L))
		return CUDA_ERROR_INVALID_HANDLE;
	if (L.max_threads && (uint64_t)block.x * block.y * block.z > L.max_threads)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (params) {
		if (L.total > room || L.nparams * 8u + 8u > room - L.total)
			return CUDA_ERROR_INVALID_VALUE;
		memset(pb, 0, L.total);
		for (uint32_t i = 0; i < L.nparams; i++) {
			if (!params[i])
				return CUDA_ERROR_INVALID_VALUE;
			memcpy(pb + L.pairs[2 * i], params[i], L.pairs[2 * i + 1]);
		}
		d->u.k.param_bytes = L.total;
		d->u.k.nparams = L.nparams;
		uint32_t pad = (8 - (L.total & 7)) & 7;
		if (L.nparams)
			memcpy(pb + L.total + pad, L.pairs, (size_t)L.nparams * 8);
	} else if (extra) {
		void *buf = NULL;
		size_t *sz = NULL;
		for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				sz = extra[i + 1];
			else
				return CUDA_ERROR_INVALID_VALUE;
			if (i > 64)
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (!buf || !sz || *sz > room)
			return CUDA_ERROR_INVALID_VALUE;
		/* The handle and the buffer size are checked at the call, as the
		 * driver does (H200 probe: size 0 is invalid unless the kernel has no
		 * parameters, more than the layout is out of resources); the layout
		 * is cached per function. */
		if (have_layout) {
			if (*sz > L.total)
				return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
			if (*sz == 0 && L.total)
				return CUDA_ERROR_INVALID_VALUE;
		}
		memcpy(pb, buf, *sz);
		d->u.k.param_bytes = (uint32_t)*sz;
		d->flags |= VE_DESC_PARAMS_EXTRA;
	} else if (have_layout) {
		/* Neither form: valid only for a kernel without parameters. */
		if (L.nparams)
			return CUDA_ERROR_INVALID_VALUE;
	}
	d->payload = launch_buf;
	d->payload_len = ve_desc_kernel_payload_len(nattrs, asz, d->u.k.param_bytes, d->u.k.nparams);
	uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
	uint32_t threads = block.x * block.y * block.z;
	if (coop) {
		/* All blocks must be co-resident: only entries with enough SMs at
		 * this kernel's occupancy may run it. */
		int per_sm = 0;
		if (VE_CALL0(cuOccupancyMaxActiveBlocksPerMultiprocessor, (&per_sm, f, (int)threads,
									   smem)) != CUDA_SUCCESS ||
		    per_sm <= 0)
			return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
		d->flags |= VE_DESC_COOPERATIVE;
		d->u.k.blocks_per_sm = (uint32_t)per_sm;
		d->u.k.min_sms = (uint32_t)((blocks + (uint64_t)per_sm - 1) / (uint64_t)per_sm);
	}
	uint32_t cs = cluster_size(d->u.k.cluster);
	if (cs > 2) {
		/* The exit report's "largest": only clusters larger than 2 count. */
		uint32_t w = atomic_load_explicit(&ve__shim.widest_cluster, memory_order_relaxed);
		while (cs > w && !atomic_compare_exchange_weak_explicit(
				     &ve__shim.widest_cluster, &w, cs, memory_order_relaxed,
				     memory_order_relaxed))
			;
		/* Clusters need their blocks in one GPC; a leaf holds only two SMs of
		 * each GPC: the entries that can hold this one come from the
		 * driver's occupancy calculator (cluster.c), the whole GPU if it
		 * cannot say. */
		const uint32_t blk[3] = {block.x, block.y, block.z};
		uint32_t m = ve__cluster_min_sms(f, d->u.k.cluster, blk, smem);
		if (m == UINT32_MAX) {
			d->u.k.min_sms = UINT32_MAX;
			atomic_fetch_add_explicit(&ve__shim.wide_cluster, 1, memory_order_relaxed);
		} else {
			d->u.k.min_sms = VE_MAX(d->u.k.min_sms, m);
			atomic_fetch_add_explicit(&ve__shim.fit_cluster, 1, memory_order_relaxed);
		}
	} else if (coop && d->u.k.min_sms == ve_runtime_pool(ve__shim.rt)->total_sms) {
		/* (wider ones are refused at the call) */
		atomic_fetch_add_explicit(&ve__shim.wide_coop, 1, memory_order_relaxed);
	}
	if (ve__shim.cfg.latency) {
		d->flags |= VE_DESC_LATENCY;
		d->deadline_ns = ve__op_deadline(); /* advice or VE_TPOT_MS, 0 = none */
	}
	return CUDA_SUCCESS;
}

static CUresult launch_virtual(const struct ve_target *t, struct ve_desc *d)
{
	uint32_t total = ve_runtime_pool(ve__shim.rt)->total_sms;
	/* More co-resident blocks than the whole GPU holds: no pool entry could
	 * ever run it (it would wait forever); the driver refuses it at the call
	 * (cuLaunchCooperativeKernel and cuLaunchKernelEx alike). */
	if ((d->flags & VE_DESC_COOPERATIVE) && d->u.k.min_sms > total &&
	    d->u.k.min_sms != UINT32_MAX)
		return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	if (d->u.k.min_sms == UINT32_MAX)
		d->u.k.min_sms = total;
	int rc = ve_vctx_submit(V(), t->ls, d, 0, NULL);
	return ve__cu_error(rc);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
			CUstream s, void **params, void **extra)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuLaunchKernel, (f, gx, gy, gz, bx, by, bz, smem, s, params, extra));
	struct ve_desc d;
	CUresult r = build_kernel_desc(&d, f, (struct ve_dim3){gx, gy, gz},
				       (struct ve_dim3){bx, by, bz}, smem, params, extra, NULL, 0,
				       false);
	return r != CUDA_SUCCESS ? r : launch_virtual(&t, &d);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	struct ve_target t;
	ve__resolve_stream(config->hStream, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuLaunchKernelEx, (config, f, params, extra));
	struct ve_desc d;
	CUresult r = build_kernel_desc(
		&d, f, (struct ve_dim3){config->gridDimX, config->gridDimY, config->gridDimZ},
		(struct ve_dim3){config->blockDimX, config->blockDimY, config->blockDimZ},
		config->sharedMemBytes, params, extra, config->attrs, config->numAttrs, false);
	return r != CUDA_SUCCESS ? r : launch_virtual(&t, &d);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
				   unsigned int gz, unsigned int bx, unsigned int by,
				   unsigned int bz, unsigned int smem, CUstream s, void **params)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuLaunchCooperativeKernel, (f, gx, gy, gz, bx, by, bz, smem, s,
							  params));
	struct ve_desc d;
	CUresult r = build_kernel_desc(&d, f, (struct ve_dim3){gx, gy, gz},
				       (struct ve_dim3){bx, by, bz}, smem, params, NULL, NULL, 0,
				       true);
	return r != CUDA_SUCCESS ? r : launch_virtual(&t, &d);
}

/* ------------------------------------------------------------------ copies */

/* Async copies: virtualized when no pageable host memory is involved; else
 * an ordered pass-through (the driver stages pageable memory itself). */
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyHtoDAsync, (dst, src, n, s));
	if (host_kind_of(src) == HK_PAGEABLE)
		BARRIER_CALL(&t, VE_CALL(cuMemcpyHtoDAsync, (dst, src, n, s)));
	return submit_copy(&t, VE_CP_HTOD, dst, (CUdeviceptr)(uintptr_t)src, n, NULL, 0, false);
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyDtoHAsync, (dst, src, n, s));
	if (host_kind_of(dst) == HK_PAGEABLE) {
		CUresult r;
		if (bounce_to_host(&t, dst, src, n, &r))
			return r;
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpyDtoHAsync, (dst, src, n, s)), true));
	}
	return submit_copy(&t, VE_CP_DTOH, (CUdeviceptr)(uintptr_t)dst, src, n, NULL, 0, false);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyDtoDAsync, (dst, src, n, s));
	return submit_copy(&t, VE_CP_DTOD, dst, src, n, NULL, 0, false);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyAsync, (dst, src, n, s));
	bool dst_pageable = host_kind_of((void *)(uintptr_t)dst) == HK_PAGEABLE;
	CUresult br;
	if (dst_pageable && bounce_to_host(&t, (void *)(uintptr_t)dst, src, n, &br))
		return br;
	if (dst_pageable || host_kind_of((void *)(uintptr_t)src) == HK_PAGEABLE)
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpyAsync, (dst, src, n, s)), dst_pageable));
	return submit_copy(&t, VE_CP_DEFAULT, dst, src, n, NULL, 0, false);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
			   size_t n, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyPeerAsync, (dst, dctx, src, sctx, n, s));
	/* Only copies within the virtualized context are deferred: for any other
	 * context the driver must see the call now, so that an invalid context is
	 * reported by this call, not as a sticky error of a later one
	 * (prog_shim_memory "2d_3d_peer"). */
	if (dctx != ve__shim.ctx || sctx != ve__shim.ctx)
		BARRIER_CALL(&t, VE_CALL(cuMemcpyPeerAsync, (dst, dctx, src, sctx, n, s)));
	struct ve_cp_peer pc = {.dst_ctx = dctx, .src_ctx = sctx};
	return submit_copy(&t, VE_CP_PEER, dst, src, n, &pc, sizeof(pc), false);
}

static bool side_pageable(CUmemorytype mt, const void *host, CUdeviceptr dev)
{
	if (mt == CU_MEMORYTYPE_HOST)
		return host_kind_of(host) == HK_PAGEABLE;
	if (mt == CU_MEMORYTYPE_UNIFIED)
		return host_kind_of((const void *)(uintptr_t)dev) == HK_PAGEABLE;
	return false;
}

static bool copy2d_virtualizable(const CUDA_MEMCPY2D *c, bool *to_host)
{
	if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return false;
	*to_host = c->dstMemoryType == CU_MEMORYTYPE_HOST;
	return !side_pageable(c->srcMemoryType, c->srcHost, c->srcDevice) &&
	       !side_pageable(c->dstMemoryType, c->dstHost, c->dstDevice);
}

static bool copy3d_virtualizable(const CUDA_MEMCPY3D *c, bool *to_host)
{
	if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return false;
	*to_host = c->dstMemoryType == CU_MEMORYTYPE_HOST;
	return !side_pageable(c->srcMemoryType, c->srcHost, c->srcDevice) &&
	       !side_pageable(c->dstMemoryType, c->dstHost, c->dstDevice);
}

CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	bool to_host;
	if (!t.virt || !c)
		return VE_CALL(cuMemcpy2DAsync, (c, s));
	if (!copy2d_virtualizable(c, &to_host))
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpy2DAsync, (c, s)),
					   side_pageable(c->dstMemoryType, c->dstHost, c->dstDevice)));
	return submit_copy(&t, VE_CP_2D, 0, 0, (size_t)c->WidthInBytes * c->Height, c, sizeof(*c),
			   false);
}

CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	bool to_host;
	if (!t.virt || !c)
		return VE_CALL(cuMemcpy3DAsync, (c, s));
	if (!copy3d_virtualizable(c, &to_host))
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpy3DAsync, (c, s)),
					   side_pageable(c->dstMemoryType, c->dstHost, c->dstDevice)));
	return submit_copy(&t, VE_CP_3D, 0, 0, (size_t)c->WidthInBytes * c->Height * c->Depth, c,
			   sizeof(*c), false);
}

/* Synchronous copies run on the default stream and keep CUDA's host
 * synchronization rules ("API synchronization behavior"): pageable memory
 * goes through the driver after the stream's logical work; from or to pinned
 * host memory the call returns once the copy is done; device to device it
 * returns at once. */
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpyHtoD, (dst, src, n));
	if (host_kind_of(src) == HK_PAGEABLE)
		BARRIER_CALL(&t, VE_CALL(cuMemcpyHtoD, (dst, src, n)));
	return submit_copy(&t, VE_CP_HTOD, dst, (CUdeviceptr)(uintptr_t)src, n, NULL, 0, true);
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpyDtoH, (dst, src, n));
	if (host_kind_of(dst) == HK_PAGEABLE) {
		CUresult r;
		if (bounce_to_host(&t, dst, src, n, &r))
			return r;
		/* Returns only when done, so nothing later can overtake it. */
		r = ve__barrier_begin(&t);
		return r != CUDA_SUCCESS ? r : read_back(VE_CALL(cuMemcpyDtoH, (dst, src, n)), true);
	}
	return read_back(
	    submit_copy(&t, VE_CP_DTOH, (CUdeviceptr)(uintptr_t)dst, src, n, NULL, 0, true), true);
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpyDtoD, (dst, src, n));
	return submit_copy(&t, VE_CP_DTOD, dst, src, n, NULL, 0, false);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpy, (dst, src, n));
	enum host_kind kd = host_kind_of((void *)(uintptr_t)dst);
	CUresult br;
	if (kd == HK_PAGEABLE && bounce_to_host(&t, (void *)(uintptr_t)dst, src, n, &br))
		return br;
	enum host_kind ks = host_kind_of((void *)(uintptr_t)src);
	if (kd == HK_PAGEABLE || ks == HK_PAGEABLE)
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpy, (dst, src, n)), kd == HK_PAGEABLE));
	bool host_side = kd == HK_PINNED || ks == HK_PINNED;
	return read_back(submit_copy(&t, VE_CP_DEFAULT, dst, src, n, NULL, 0, host_side),
			 kd == HK_PINNED);
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpyPeer, (dst, dctx, src, sctx, n));
	if (dctx != ve__shim.ctx || sctx != ve__shim.ctx) /* see cuMemcpyPeerAsync */
		BARRIER_CALL(&t, VE_CALL(cuMemcpyPeer, (dst, dctx, src, sctx, n)));
	struct ve_cp_peer pc = {.dst_ctx = dctx, .src_ctx = sctx};
	return submit_copy(&t, VE_CP_PEER, dst, src, n, &pc, sizeof(pc), false);
}

CUresult cuMemcpy2D(const CUDA_MEMCPY2D *c)
{
	struct ve_target t;
	resolve_default(&t);
	bool to_host = false;
	if (!t.virt || !c)
		return VE_CALL(cuMemcpy2D, (c));
	if (!copy2d_virtualizable(c, &to_host))
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpy2D, (c)),
					   c->dstMemoryType == CU_MEMORYTYPE_HOST));
	bool host_side = to_host || c->srcMemoryType == CU_MEMORYTYPE_HOST;
	return read_back(submit_copy(&t, VE_CP_2D, 0, 0, (size_t)c->WidthInBytes * c->Height, c,
				     sizeof(*c), host_side),
			 to_host);
}

CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *c)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpy2DUnaligned, (c));
	BARRIER_CALL(&t, VE_CALL(cuMemcpy2DUnaligned, (c)));
}

/* Synchronous copies the vctx has no operation for (CUDA arrays, peer 3D,
 * as cudaMemcpyToArray, cudaMemcpy3DPeer and friends make them): the ordered
 * pass-through on the default stream (a NULL stream), after its logical work
 * (unhooked, an array copy read its source before the kernel writing it had
 * run). */
BARRIER_HOOK(cuMemcpyHtoA, NULL, (CUarray dst, size_t off, const void *src, size_t n),
	     (dst, off, src, n))
CUresult cuMemcpyAtoH(void *dst, CUarray src, size_t off, size_t n)
{
	struct ve_target t;
	resolve_default(&t);
	if (!t.virt)
		return VE_CALL(cuMemcpyAtoH, (dst, src, off, n));
	/* Hands the host a result: ends a latency client's step, as cuMemcpyDtoH. */
	BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpyAtoH, (dst, src, off, n)), true));
}
BARRIER_HOOK(cuMemcpyDtoA, NULL, (CUarray dst, size_t off, CUdeviceptr src, size_t n),
	     (dst, off, src, n))
BARRIER_HOOK(cuMemcpyAtoD, NULL, (CUdeviceptr dst, CUarray src, size_t off, size_t n),
	     (dst, src, off, n))
BARRIER_HOOK(cuMemcpyAtoA, NULL,
	     (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n),
	     (dst, doff, src, soff, n))
BARRIER_HOOK(cuMemcpy3DPeer, NULL, (const CUDA_MEMCPY3D_PEER *p), (p))

CUresult cuMemcpy3D(const CUDA_MEMCPY3D *c)
{
	struct ve_target t;
	resolve_default(&t);
	bool to_host = false;
	if (!t.virt || !c)
		return VE_CALL(cuMemcpy3D, (c));
	if (!copy3d_virtualizable(c, &to_host))
		BARRIER_CALL(&t, read_back(VE_CALL(cuMemcpy3D, (c)),
					   c->dstMemoryType == CU_MEMORYTYPE_HOST));
	bool host_side = to_host || c->srcMemoryType == CU_MEMORYTYPE_HOST;
	return read_back(submit_copy(&t, VE_CP_3D, 0, 0,
				     (size_t)c->WidthInBytes * c->Height * c->Depth, c, sizeof(*c),
				     host_side),
			 to_host);
}

/* ------------------------------------------------------------------ memset */

#define MEMSET_ASYNC(name, elem, type)                                                             \
	CUresult name(CUdeviceptr dst, type v, size_t n, CUstream s)                                \
	{                                                                                          \
		struct ve_target t;                                                                \
		ve__resolve_stream(s, VE_PTSZ, &t);                                                \
		if (!t.virt)                                                                       \
			return VE_CALL_T(name, VE_REAL_ID_##name, (dst, v, n, s));                                        \
		return submit_memset(&t, dst, v, elem, 0, n, 1, false);                            \
	}
MEMSET_ASYNC(cuMemsetD8Async, 1, unsigned char)
MEMSET_ASYNC(cuMemsetD16Async, 2, unsigned short)
MEMSET_ASYNC(cuMemsetD32Async, 4, unsigned int)

#define MEMSET2D_ASYNC(name, elem, type)                                                           \
	CUresult name(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h, CUstream s)        \
	{                                                                                          \
		struct ve_target t;                                                                \
		ve__resolve_stream(s, VE_PTSZ, &t);                                                \
		if (!t.virt)                                                                       \
			return VE_CALL_T(name, VE_REAL_ID_##name, (dst, pitch, v, w, h, s));                              \
		return submit_memset(&t, dst, v, elem, pitch, w, h, false);                        \
	}
MEMSET2D_ASYNC(cuMemsetD2D8Async, 1, unsigned char)
MEMSET2D_ASYNC(cuMemsetD2D16Async, 2, unsigned short)
MEMSET2D_ASYNC(cuMemsetD2D32Async, 4, unsigned int)

/* Synchronous memsets are asynchronous to the host unless the target is host
 * memory ("API synchronization behavior"). */
#define MEMSET_SYNC(name, elem, type)                                                              \
	CUresult name(CUdeviceptr dst, type v, size_t n)                                            \
	{                                                                                          \
		struct ve_target t;                                                                \
		resolve_default(&t);                                                               \
		if (!t.virt)                                                                       \
			return VE_CALL_T(name, VE_REAL_ID_##name, (dst, v, n));                                           \
		return submit_memset(&t, dst, v, elem, 0, n, 1,                                    \
				     host_kind_of((void *)(uintptr_t)dst) != HK_DEVICE);           \
	}
MEMSET_SYNC(cuMemsetD8, 1, unsigned char)
MEMSET_SYNC(cuMemsetD16, 2, unsigned short)
MEMSET_SYNC(cuMemsetD32, 4, unsigned int)

#define MEMSET2D_SYNC(name, elem, type)                                                            \
	CUresult name(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h)                    \
	{                                                                                          \
		struct ve_target t;                                                                \
		resolve_default(&t);                                                               \
		if (!t.virt)                                                                       \
			return VE_CALL_T(name, VE_REAL_ID_##name, (dst, pitch, v, w, h));                                 \
		return submit_memset(&t, dst, v, elem, pitch, w, h,                                \
				     host_kind_of((void *)(uintptr_t)dst) != HK_DEVICE);           \
	}
MEMSET2D_SYNC(cuMemsetD2D8, 1, unsigned char)
MEMSET2D_SYNC(cuMemsetD2D16, 2, unsigned short)
MEMSET2D_SYNC(cuMemsetD2D32, 4, unsigned int)

/* ------------------------------------------------------------------ stream memory ops */

struct write_value {
	CUdeviceptr addr;
	cuuint64_t value;
	unsigned flags;
	unsigned width;
};

static int call_write_value(uint64_t lane, const void *payload, uint32_t len)
{
	struct write_value w;
	memcpy(&w, payload, sizeof(w));
	CUresult r = w.width == 8 ? VE_CALL0(cuStreamWriteValue64, ((CUstream)(uintptr_t)lane,
								   w.addr, w.value, w.flags))
				  : VE_CALL0(cuStreamWriteValue32, ((CUstream)(uintptr_t)lane,
								   w.addr, (cuuint32_t)w.value,
								   w.flags));
	return r == CUDA_SUCCESS ? 0 : (int)r;
}

static CUresult write_value(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned flags,
			    unsigned width, struct ve_target *t)
{
	struct write_value w = {addr, value, flags, width};
	struct ve_desc d = {.kind = VE_OP_CALL, .payload = (const void *)&w, .payload_len = sizeof(w)};
	d.u.call.fn = call_write_value;
	return submit_wait(t, &d, false);
}

CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamWriteValue32, (s, addr, value, flags));
	return write_value(s, addr, value, flags, 4, &t);
}

CUresult cuStreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamWriteValue64, (s, addr, value, flags));
	return write_value(s, addr, value, flags, 8, &t);
}

/* A wait blocks its stream on the GPU until memory holds a value; on a
 * shared copy lane it could hold up unrelated work, so it passes through. */
CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamWaitValue32, (s, addr, value, flags));
	BARRIER_CALL(&t, VE_CALL(cuStreamWaitValue32, (s, addr, value, flags)));
}

CUresult cuStreamWaitValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuStreamWaitValue64, (s, addr, value, flags));
	BARRIER_CALL(&t, VE_CALL(cuStreamWaitValue64, (s, addr, value, flags)));
}

/* ------------------------------------------------------------------ allocation */

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemFreeAsync, (p, s));
	/* Freed in stream order: after the logical work before it. */
	BARRIER_CALL(&t, VE_CALL(cuMemFreeAsync, (p, s)));
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			    CUmemcpyAttributes *attrs, size_t *attrIdxs, size_t numAttrs,
			    CUstream s)
{
	struct ve_target t;
	ve__resolve_stream(s, VE_PTSZ, &t);
	if (!t.virt)
		return VE_CALL(cuMemcpyBatchAsync, (dsts, srcs, sizes, count, attrs, attrIdxs, numAttrs,
						   s));
	ve__notice_once(VE_NOTE_BATCH, "batched copies pass through in order");
	BARRIER_CALL(&t, VE_CALL(cuMemcpyBatchAsync, (dsts, srcs, sizes, count, attrs, attrIdxs,
						     numAttrs, s)));
}

#if !VE_PTSZ
/* Frees wait for the logical work that may still use the memory: the driver
 * cannot know about work the vctx has not submitted yet. */
CUresult cuMemFree(CUdeviceptr p)
{
	if (ve__shim_is_active())
		ve_vctx_ctx_sync(V());
	return VE_CALL0(cuMemFree, (p));
}

CUresult cuMemFreeHost(void *p)
{
	if (ve__shim_is_active())
		ve_vctx_ctx_sync(V());
	return VE_CALL0(cuMemFreeHost, (p));
}

CUresult cuMemHostUnregister(void *p)
{
	if (ve__shim_is_active())
		ve_vctx_ctx_sync(V());
	return VE_CALL0(cuMemHostUnregister, (p));
}

/* Other frees of what queued kernels may use (arrays behind texture and
 * surface objects, the objects themselves, imported memory) and a reset of
 * the context that owns it all (cudaDeviceReset): after the logical work,
 * as cuMemFree. */
#define FREE_AFTER_WORK(name, params, args)                                                        \
	CUresult name params                                                                       \
	{                                                                                          \
		if (ve__shim_is_active())                                                          \
			ve_vctx_ctx_sync(V());                                                     \
		return VE_CALL_IN(&ve__real, name, VE_REAL_ID_##name, args);                       \
	}
FREE_AFTER_WORK(cuArrayDestroy, (CUarray a), (a))
FREE_AFTER_WORK(cuMipmappedArrayDestroy, (CUmipmappedArray a), (a))
FREE_AFTER_WORK(cuTexObjectDestroy, (CUtexObject o), (o))
FREE_AFTER_WORK(cuSurfObjectDestroy, (CUsurfObject o), (o))
FREE_AFTER_WORK(cuDestroyExternalMemory, (CUexternalMemory m), (m))
FREE_AFTER_WORK(cuDevicePrimaryCtxReset, (CUdevice d), (d))

/* Context-wide event record and wait (CUDA 12.5). The driver's call comes
 * first, for its checks and errors (a capture in progress fails it and
 * invalidates the capture); then, on the application's context, the logical
 * work it must cover, which the driver cannot see: the record becomes a
 * logical record after every stream's pending work (on a stream of the
 * shim's own, so it orders no application stream), and the wait puts every
 * stream, and every stream created later, behind the event. Neither blocks.
 * A wait of another context on one of our events first waits on the host,
 * as a foreign stream's cuStreamWaitEvent does. */
static bool shim_ctx(CUcontext c)
{
	if (!ve__shim_is_active())
		return false;
	if (!c && ve__real.cuCtxGetCurrent)
		ve__real.cuCtxGetCurrent(&c);
	return c == ve__shim.ctx;
}

static int ctx_record_stream(ve_stream *out)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static ve_stream ls;
	static bool made;
	int rc = 0;
	pthread_mutex_lock(&mu);
	if (!made && (rc = ve_vctx_stream_create(V(), VE_STREAM_NON_BLOCKING, 0, &ls)) == 0)
		made = true;
	*out = ls;
	pthread_mutex_unlock(&mu);
	return rc;
}

CUresult cuCtxRecordEvent(CUcontext c, CUevent e)
{
	CUresult r = VE_CALL0(cuCtxRecordEvent, (c, e));
	struct ve_event_info ei;
	if (r != CUDA_SUCCESS || !shim_ctx(c) || ve__emap_get(e, &ei))
		return r;
	ve_stream ls;
	int rc = ctx_record_stream(&ls);
	if (rc)
		return ve__cu_error(rc);
	if (ei.capture)
		ve__emap_set_capture(e, 0);
	if (ei.graph)
		ve__emap_set_graph(e, 0);
	uint64_t app = (ei.flags & CU_EVENT_DISABLE_TIMING) ? 0 : (uint64_t)(uintptr_t)e;
	return ve__cu_error(ve_vctx_event_record_after_all(V(), ei.le, ls, app));
}

CUresult cuCtxWaitEvent(CUcontext c, CUevent e)
{
	struct ve_event_info ei;
	bool ours = ve__shim_is_active() && ve__emap_get(e, &ei) == 0 && !ei.capture;
	if (ours && (ei.graph || !shim_ctx(c))) {
		CUresult sr = cuEventSynchronize(e);
		if (sr != CUDA_SUCCESS)
			return sr;
		return VE_CALL0(cuCtxWaitEvent, (c, e));
	}
	CUresult r = VE_CALL0(cuCtxWaitEvent, (c, e));
	if (r != CUDA_SUCCESS || !ours)
		return r;
	return ve__cu_error(ve_vctx_ctx_wait_event(V(), ei.le));
}

/* Unloading a module frees its functions: launches of them still queued in
 * the vctx would reach the driver afterwards and fail (natively they were
 * enqueued at their calls and run). So, as for frees, the caller first waits
 * for the logical work; and what the shim cached per function is forgotten,
 * since a later function may get the same handle with another layout. */
CUresult cuModuleUnload(CUmodule m)
{
	if (ve__shim_is_active()) {
		ve_vctx_ctx_sync(V());
		ve__forget_functions(m);
	}
	return VE_CALL0(cuModuleUnload, (m));
}

CUresult cuLibraryUnload(CUlibrary lib)
{
	if (ve__shim_is_active()) {
		ve_vctx_ctx_sync(V());
		ve__forget_functions(NULL);
	}
	return VE_CALL0(cuLibraryUnload, (lib));
}

CUresult cuCtxSynchronize(void)
{
	if (ve__shim_active()) {
		CUcontext cur = NULL;
		VE_CALL0(cuCtxGetCurrent, (&cur));
		if (cur == ve__shim.ctx) {
			int rc = ve_vctx_ctx_sync(V());
			ve__step_end();
			CUresult r = rc ? ve__cu_error(rc) : VE_CALL0(cuCtxSynchronize, ());
			return r == CUDA_SUCCESS ? ve__sync_error(0) : r;
		}
	}
	return VE_CALL0(cuCtxSynchronize, ());
}

/* The CUDA 13 form names the context (NULL = the current one). */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	if (ve__shim_active()) {
		CUcontext cur = ctx;
		if (!cur)
			VE_CALL0(cuCtxGetCurrent, (&cur));
		if (cur == ve__shim.ctx) {
			int rc = ve_vctx_ctx_sync(V());
			ve__step_end();
			CUresult r = rc ? ve__cu_error(rc) : VE_CALL0(cuCtxSynchronize_v2, (ctx));
			return r == CUDA_SUCCESS ? ve__sync_error(0) : r;
		}
	}
	return VE_CALL0(cuCtxSynchronize_v2, (ctx));
}
#endif

/* ------------------------------------------------------------------ hook table */

/* Every function above, for cuGetProcAddress and dlsym: X(base name). */
#define VE_HOOKS_BOTH(X)                                                                           \
	X(cuStreamSynchronize)                                                                     \
	X(cuStreamQuery)                                                                           \
	X(cuStreamWaitEvent)                                                                       \
	X(cuLaunchHostFunc)                                                                        \
	X(cuStreamAddCallback)                                                                     \
	X(cuStreamBeginCapture)                                                                    \
	X(cuStreamBeginCaptureToGraph)                                                             \
	X(cuStreamEndCapture)                                                                      \
	X(cuGraphLaunch)                                                                           \
	X(cuGraphUpload)                                                                           \
	X(cuGraphInstantiateWithParams)                                                            \
	X(cuStreamBatchMemOp)                                                                      \
	X(cuMemcpyAtoHAsync)                                                                       \
	X(cuMemcpyHtoAAsync)                                                                       \
	X(cuMemcpy3DPeerAsync)                                                                     \
	X(cuMemcpy3DBatchAsync)                                                                    \
	X(cuSignalExternalSemaphoresAsync)                                                         \
	X(cuWaitExternalSemaphoresAsync)                                                           \
	X(cuGraphicsMapResources)                                                                  \
	X(cuGraphicsUnmapResources)                                                                \
	X(cuStreamAttachMemAsync)                                                                  \
	X(cuMemMapArrayAsync)                                                                      \
	X(cuMemBatchDecompressAsync)                                                               \
	X(cuMemDiscardBatchAsync)                                                                  \
	X(cuMemDiscardAndPrefetchBatchAsync)                                                       \
	X(cuEventRecord)                                                                           \
	X(cuEventRecordWithFlags)                                                                  \
	X(cuLaunchKernel)                                                                          \
	X(cuLaunchKernelEx)                                                                        \
	X(cuLaunchCooperativeKernel)                                                               \
	X(cuMemcpyHtoDAsync)                                                                       \
	X(cuMemcpyDtoHAsync)                                                                       \
	X(cuMemcpyDtoDAsync)                                                                       \
	X(cuMemcpyAsync)                                                                           \
	X(cuMemcpyPeerAsync)                                                                       \
	X(cuMemcpy2DAsync)                                                                         \
	X(cuMemcpy3DAsync)                                                                         \
	X(cuMemcpyHtoD)                                                                            \
	X(cuMemcpyDtoH)                                                                            \
	X(cuMemcpyDtoD)                                                                            \
	X(cuMemcpy)                                                                                \
	X(cuMemcpyPeer)                                                                            \
	X(cuMemcpy2D)                                                                              \
	X(cuMemcpy2DUnaligned)                                                                     \
	X(cuMemcpyHtoA)                                                                            \
	X(cuMemcpyAtoH)                                                                            \
	X(cuMemcpyDtoA)                                                                            \
	X(cuMemcpyAtoD)                                                                            \
	X(cuMemcpyAtoA)                                                                            \
	X(cuMemcpy3DPeer)                                                                          \
	X(cuMemcpy3D)                                                                              \
	X(cuMemsetD8Async)                                                                         \
	X(cuMemsetD16Async)                                                                        \
	X(cuMemsetD32Async)                                                                        \
	X(cuMemsetD2D8Async)                                                                       \
	X(cuMemsetD2D16Async)                                                                      \
	X(cuMemsetD2D32Async)                                                                      \
	X(cuMemsetD8)                                                                              \
	X(cuMemsetD16)                                                                             \
	X(cuMemsetD32)                                                                             \
	X(cuMemsetD2D8)                                                                            \
	X(cuMemsetD2D16)                                                                           \
	X(cuMemsetD2D32)                                                                           \
	X(cuStreamWriteValue32)                                                                    \
	X(cuStreamWriteValue64)                                                                    \
	X(cuStreamWaitValue32)                                                                     \
	X(cuStreamWaitValue64)                                                                     \
	X(cuMemFreeAsync)                                                                          \
	X(cuMemcpyBatchAsync)

#define VE_HOOKS_LEGACY_ONLY(X)                                                                    \
	X(cuStreamCreate)                                                                          \
	X(cuStreamCreateWithPriority)                                                              \
	X(cuStreamDestroy)                                                                         \
	X(cuEventCreate)                                                                           \
	X(cuEventDestroy)                                                                          \
	X(cuEventQuery)                                                                            \
	X(cuEventSynchronize)                                                                      \
	X(cuEventElapsedTime)                                                                      \
	X(cuMemFree)                                                                               \
	X(cuMemFreeHost)                                                                           \
	X(cuMemHostUnregister)                                                                     \
	X(cuCtxRecordEvent)                                                                        \
	X(cuCtxWaitEvent)                                                                          \
	X(cuArrayDestroy)                                                                          \
	X(cuMipmappedArrayDestroy)                                                                 \
	X(cuTexObjectDestroy)                                                                      \
	X(cuSurfObjectDestroy)                                                                     \
	X(cuDestroyExternalMemory)                                                                 \
	X(cuDevicePrimaryCtxReset)                                                                 \
	X(cuModuleUnload)                                                                          \
	X(cuLibraryUnload)                                                                         \
	X(cuCtxSynchronize)                                                                        \
	X(cuCtxSynchronize_v2)                                                                     \
	X(cuGraphInstantiateWithFlags)                                                             \
	X(cuGraphExecDestroy)                                                                      \
	X(cuGraphExecUpdate)                                                                       \
	X(cuGraphExecKernelNodeSetParams)                                                          \
	X(cuGraphExecMemcpyNodeSetParams)                                                          \
	X(cuGraphExecMemsetNodeSetParams)                                                          \
	X(cuGraphExecHostNodeSetParams)                                                            \
	X(cuGraphExecChildGraphNodeSetParams)                                                      \
	X(cuGraphExecEventRecordNodeSetEvent)                                                      \
	X(cuGraphExecEventWaitNodeSetEvent)                                                        \
	X(cuGraphExecExternalSemaphoresSignalNodeSetParams)                                        \
	X(cuGraphExecExternalSemaphoresWaitNodeSetParams)                                          \
	X(cuGraphExecBatchMemOpNodeSetParams)                                                      \
	X(cuGraphExecNodeSetParams)                                                                \
	X(cuGraphNodeSetEnabled)

#define VE_HOOK_ENTRY(n) {VE_REAL_ID_##n, VE_S(n), (void *)&n},

#if VE_PTSZ
const struct ve_hook ve__hooks_ptsz[] = {VE_HOOKS_BOTH(VE_HOOK_ENTRY){-1, NULL, NULL}};
#else
const struct ve_hook ve__hooks_legacy[] = {
	VE_HOOKS_BOTH(VE_HOOK_ENTRY) VE_HOOKS_LEGACY_ONLY(VE_HOOK_ENTRY){-1, NULL, NULL}};
#endif
