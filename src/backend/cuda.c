/* SPDX-License-Identifier: MIT */
/*
 * CUDA backend: green contexts, lanes and completion detection (contract in
 * cuda.h, copy/memset encoding in cuda_desc.h).
 *
 * Records. Every lane has a FIFO of in-flight records (preallocated, a power
 * of two, free-running head/tail). submit fills the record at the tail,
 * enqueues the op and then a completion marker; poll retires records from
 * the head. A record the driver refused at submit carries its CUresult and
 * no marker of its own: it completes as soon as everything before it on the
 * lane has, which keeps completions in lane FIFO order.
 *
 * Counter protocol (COUNTER mode). Lane l owns one 64-byte slot of a
 * host-mapped block (cuMemHostAlloc DEVICEMAP|PORTABLE). After op i the lane
 * enqueues cuStreamWriteValue64(slot, seq_i) with seq_i = 1, 2, 3...; the
 * default flags put a memory fence before the write (CUstreamWriteValue_flags
 * in cuda.h: "similar semantics to __threadfence_system() but scoped to the
 * stream"), so when poll's acquire load sees seq_i, everything op i wrote
 * is visible too. Stream order makes the value monotonic, so one load per
 * lane tells how many records are done. The slots are 64 bytes apart so the
 * device's writes to one lane do not invalidate the line another is read
 * from.
 *
 * Event protocol (EVENT mode: the device cannot do 64-bit stream memory ops,
 * or VE_COMPLETION=event). The marker is cuEventRecord of an event from a
 * preallocated pool (DISABLE_TIMING); poll queries the head record's event.
 *
 * Stalls and sticky errors. A faulting kernel leaves its stream (in fact the
 * whole context) in a sticky error state, and the markers behind it are never
 * written. A lane with work that made no progress for cfg.stall_ns gets a
 * cuStreamQuery: NOT_READY means still running (asked again stall_ns later);
 * an error code completes every outstanding record of the lane with it
 * (records the driver had already refused keep their own code); SUCCESS with
 * the counter still behind means a marker was lost, reported as
 * CUDA_ERROR_UNKNOWN so that nothing hangs.
 *
 * Times. t_submit is taken at submit; t_end is when poll saw the completion;
 * t_start is max(t_submit, the lane's previous t_end): the op cannot have
 * started before its predecessor on the lane finished, so it is an upper
 * bound on queueing and a lower bound of the start, off by the polling
 * interval.
 *
 * Active lanes. Lanes with outstanding records sit in an array (swap-removed
 * when they drain), so poll and wait touch only those and an idle pool costs
 * nothing.
 */
#include "backend/cuda.h"
#include "backend/cuda_desc.h"
#include "backend/cuda_driver.h"
#include "util/util.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every driver call goes through the real table; a slot the driver did not
 * provide reads as CUDA_ERROR_NOT_SUPPORTED instead of a NULL call. */
#define CU(fn, ...) (ve__real.fn ? ve__real.fn(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

#define MAX_ENTRIES	   256 /* = VE_POOL_MAX_ENTRIES */
#define MAX_LANE_STREAMS   256 /* VE_LANE's 8-bit stream field */
#define CTR_STRIDE	   64  /* bytes per counter slot */
#define STAGE_ALIGN	   64
#define NO_EVENT	   (-1)
#define DEFAULT_DEPTH	   1024u
#define DEFAULT_MAX_LANES  4096u
#define DEFAULT_EVENTS	   8192u
#define DEFAULT_STAGING	   (1u << 20)
#define DEFAULT_STALL_NS   2000000ull
#define DEFAULT_DESTROY_NS 10000000000ull
#define WAIT_SLICE_NS	   20000ull

struct rec {
	uint64_t cookie;
	uint64_t t_submit;
	uint64_t seq;	    /* COUNTER: counter value at which it is done */
	uint64_t stage_end; /* staging head after this op: the tail moves here when it is done */
	/* Style-1 host callback (cuStreamAddCallback semantics), read by the trampoline. */
	void (*cb_fn)(void *);
	void *cb_arg;
	uint64_t cb_stream;
	int32_t status; /* non-zero: refused at submit (or its marker was) */
	int32_t ev;	/* EVENT: pool slot, NO_EVENT if none */
};

struct lane {
	uint32_t id; /* VE_LANE value */
	CUstream s;
	_Atomic uint64_t *ctr; /* host view of the counter slot */
	CUdeviceptr ctr_dev;
	uint64_t issued; /* last sequence number enqueued */
	uint64_t ok;	 /* highest counter value seen */
	uint32_t unmarked; /* records at the tail waiting for the next marker (deferred) */
	/* After a sticky error: records with seq <= err_seq (COUNTER) or index <
	 * err_end (EVENT) that are not done complete with err. */
	int32_t err;
	uint64_t err_seq;
	uint32_t err_end;
	struct rec *q;
	uint32_t mask, head, tail; /* free-running indices */
	int32_t apos;		   /* index in b->active, -1 when idle */
	uint64_t next_check_ns;	   /* when a stalled lane gets its cuStreamQuery */
	uint64_t last_end_ns;
	uint8_t *stage; /* pinned staging ring (copy lanes), NULL if none */
	uint64_t stage_size, stage_head, stage_tail;
};

struct entry {
	bool live;
	CUgreenCtx g;
	CUcontext ctx;
	uint64_t leaves;
	uint32_t sms, nlanes;
	struct lane *lanes;
};

struct cu_backend {
	struct ve_backend base; /* first: b->ops works */
	struct ve_cuda_config cfg;
	ve_cuda_record_current_fn record_current; /* NULL: every timed record reaches the driver */
	void *record_current_arg;
	uint64_t gen; /* names this backend in the per-thread binding */
	CUdevice dev;
	CUcontext primary;
	bool retained;
	uint32_t mode;
	struct ve_gpu_info info;
	CUdevResource leaves[VE_MAX_LEAVES];
	struct entry entries[MAX_ENTRIES];
	struct lane *copy;
	uint32_t ncopy;
	/* Counter block. */
	uint8_t *ctr_host;
	CUdeviceptr ctr_dev;
	uint32_t nslots, slots_used;
	/* Event pool. */
	CUevent *events;
	int32_t *ev_free;
	uint32_t nev, nev_free;
	/* Lanes with outstanding records. */
	struct lane **active;
	uint32_t nactive;
	/* Pool figures (written before the dispatcher starts). */
	struct ve_cuda_pool_stats ps;
	/* Runtime counters: one writer (the dispatcher thread), relaxed readers. */
	_Atomic uint64_t n_submitted, n_completed, n_rejected, n_exec_errors, n_eagain, n_stall,
	    n_staged;
};

static _Atomic uint64_t next_gen = 1;
static _Thread_local uint64_t tls_gen;

static struct cu_backend *to_cu(const struct ve_backend *b)
{
	return b && b->ops == &ve_cuda_backend_ops ? (struct cu_backend *)(uintptr_t)b : NULL;
}

bool ve_cuda_backend_is_cuda(const struct ve_backend *b)
{
	return to_cu(b) != NULL;
}

/* Single writer: a plain load/store pair is enough and costs no locked op. */
static inline void bump(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static const char *cu_name(CUresult r)
{
	const char *s = NULL;
	if (ve__real.cuGetErrorName && ve__real.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "CUDA error";
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* Calls that need a current context (allocation, stream creation in the
 * primary context) run between these two, which leave the calling thread's
 * own current context as it was. */
static bool push_primary(struct cu_backend *b)
{
	return CU(cuCtxPushCurrent, b->primary) == CUDA_SUCCESS;
}

static void pop_primary(bool pushed)
{
	CUcontext dummy;
	if (pushed)
		CU(cuCtxPopCurrent, &dummy);
}

static void mem_info(struct cu_backend *b, uint64_t *free_b, uint64_t *total_b)
{
	size_t f = 0, t = 0;
	bool p = push_primary(b);
	if (CU(cuMemGetInfo, &f, &t) != CUDA_SUCCESS)
		f = t = 0;
	pop_primary(p);
	*free_b = f;
	if (total_b)
		*total_b = t;
}

/* ------------------------------------------------------------------ lanes */

static struct lane *find_lane(struct cu_backend *b, uint32_t id)
{
	uint32_t e = VE_LANE_ENTRY(id), k = VE_LANE_STREAM(id);
	if (e == VE_LANE_COPY_ENTRY)
		return k < b->ncopy ? &b->copy[k] : NULL;
	if (e >= MAX_ENTRIES || !b->entries[e].live || k >= b->entries[e].nlanes)
		return NULL;
	return &b->entries[e].lanes[k];
}

static int lane_init(struct cu_backend *b, struct lane *l, uint32_t id, CUstream s, bool staging)
{
	uint32_t depth = b->cfg.lane_depth;
	memset(l, 0, sizeof(*l));
	l->id = id;
	l->s = s;
	l->apos = -1;
	l->mask = depth - 1;
	l->q = calloc(depth, sizeof(*l->q));
	if (!l->q)
		return -ENOMEM;
	/* Bounded by max_lanes: the active array and the counter block are sized by it. */
	if (b->slots_used >= b->nslots)
		return -ENOSPC;
	uint32_t slot = b->slots_used++;
	if (b->mode == VE_CUDA_COMPLETION_COUNTER) {
		/* The block was zeroed and the slot is this lane's alone. */
		l->ctr = (_Atomic uint64_t *)(void *)(b->ctr_host + (size_t)slot * CTR_STRIDE);
		l->ctr_dev = b->ctr_dev + (CUdeviceptr)slot * CTR_STRIDE;
	}
	if (staging && !b->cfg.no_staging) {
		void *p = NULL;
		bool pushed = push_primary(b);
		CUresult r = CU(cuMemHostAlloc, &p, b->cfg.staging_bytes, CU_MEMHOSTALLOC_PORTABLE);
		pop_primary(pushed);
		if (r == CUDA_SUCCESS && p) {
			l->stage = p;
			l->stage_size = b->cfg.staging_bytes;
			b->ps.pinned_bytes += b->cfg.staging_bytes;
		} else {
			VE_WARN(
			    "cuda backend: no pinned staging for lane %#x (%s); snapshots go to "
			    "the driver as pageable memory",
			    id, cu_name(r));
		}
	}
	return 0;
}

static void lane_free_host(struct cu_backend *b, struct lane *l)
{
	if (l->stage) {
		bool pushed = push_primary(b);
		CU(cuMemFreeHost, l->stage);
		pop_primary(pushed);
	}
	l->stage = NULL;
	free(l->q);
	l->q = NULL;
}

/* lane_init on a new stream; on failure the stream and the lane's host slot
 * are released again, so the caller unwinds only lanes [0, k). */
static int lane_add(struct cu_backend *b, struct lane *l, uint32_t id, CUstream s, bool staging)
{
	int rc = lane_init(b, l, id, s, staging);
	if (rc) {
		CU(cuStreamDestroy, s);
		lane_free_host(b, l);
	}
	return rc;
}

/* Undoes a partial pool-creation step: lanes [0, n) and the array. */
static void lanes_unwind(struct cu_backend *b, struct lane *lanes, uint32_t n)
{
	while (n-- > 0) {
		CU(cuStreamDestroy, lanes[n].s);
		lane_free_host(b, &lanes[n]);
	}
	free(lanes);
}

static void activate(struct cu_backend *b, struct lane *l, uint64_t now)
{
	if (l->apos >= 0)
		return;
	l->apos = (int32_t)b->nactive;
	b->active[b->nactive++] = l;
	l->next_check_ns = now + b->cfg.stall_ns;
}

static void deactivate(struct cu_backend *b, struct lane *l)
{
	uint32_t i = (uint32_t)l->apos;
	struct lane *last = b->active[--b->nactive];
	b->active[i] = last;
	last->apos = (int32_t)i;
	l->apos = -1;
}

/* Staging ring: contiguous chunks, reclaimed in lane FIFO order. */
static void *stage_alloc(struct lane *l, uint64_t n)
{
	uint64_t need = (n + STAGE_ALIGN - 1) & ~(uint64_t)(STAGE_ALIGN - 1);
	uint64_t pos = l->stage_head % l->stage_size;
	uint64_t skip = pos + need > l->stage_size ? l->stage_size - pos : 0;
	if (l->stage_head + skip + need - l->stage_tail > l->stage_size)
		return NULL;
	l->stage_head += skip;
	void *p = l->stage + l->stage_head % l->stage_size;
	l->stage_head += need;
	return p;
}

/* ------------------------------------------------------------------ info */

static int cu_info(struct ve_backend *vb, struct ve_gpu_info *out)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || !out)
		return -EINVAL;
	*out = b->info;
	return 0;
}

/* ------------------------------------------------------------------ pool creation */

static int cu_entry_create(struct ve_backend *vb, uint32_t idx, uint64_t leaf_mask,
			   uint32_t nstreams)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || idx >= MAX_ENTRIES || !leaf_mask || !nstreams || nstreams > MAX_LANE_STREAMS)
		return -EINVAL;
	if (b->info.nleaves < 64 && (leaf_mask >> b->info.nleaves))
		return -EINVAL;
	struct entry *e = &b->entries[idx];
	if (e->live)
		return -EEXIST;
	uint64_t t0 = ve__now_ns();
	CUdevResource res[VE_MAX_LEAVES];
	unsigned n = 0;
	uint32_t sms = 0;
	for (uint64_t m = leaf_mask; m; m &= m - 1) {
		int i = __builtin_ctzll(m);
		res[n++] = b->leaves[i];
		sms += b->info.leaf_sms[i];
	}
	CUdevResourceDesc desc;
	CUresult r = CU(cuDevResourceGenerateDesc, &desc, res, n);
	if (r != CUDA_SUCCESS) {
		VE_ERR("cuda backend: entry %u (leaves %#llx): cuDevResourceGenerateDesc: %s", idx,
		       (unsigned long long)leaf_mask, cu_name(r));
		return -EINVAL;
	}
	CUgreenCtx g;
	r = CU(cuGreenCtxCreate, &g, desc, b->dev, CU_GREEN_CTX_DEFAULT_STREAM);
	if (r != CUDA_SUCCESS) {
		VE_ERR("cuda backend: entry %u (%u SMs): cuGreenCtxCreate: %s", idx, sms,
		       cu_name(r));
		return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	struct lane *lanes = calloc(nstreams, sizeof(*lanes));
	if (!lanes) {
		CU(cuGreenCtxDestroy, g);
		return -ENOMEM;
	}
	CUcontext c = NULL;
	CU(cuCtxFromGreenCtx, &c, g);
	int rc = 0;
	uint32_t k, slots0 = b->slots_used;
	for (k = 0; k < nstreams; k++) {
		CUstream s;
		r = CU(cuGreenCtxStreamCreate, &s, g, CU_STREAM_NON_BLOCKING, b->cfg.priority);
		if (r != CUDA_SUCCESS) {
			VE_ERR("cuda backend: entry %u: cuGreenCtxStreamCreate: %s", idx,
			       cu_name(r));
			rc = -EIO;
			break;
		}
		rc = lane_add(b, &lanes[k], VE_LANE(idx, k), s, false);
		if (rc)
			break;
	}
	if (rc) {
		lanes_unwind(b, lanes, k);
		CU(cuGreenCtxDestroy, g);
		b->slots_used = slots0;
		return rc;
	}
	*e = (struct entry){.live = true,
			    .g = g,
			    .ctx = c,
			    .leaves = leaf_mask,
			    .sms = sms,
			    .nlanes = nstreams,
			    .lanes = lanes};
	uint64_t dt = ve__now_ns() - t0;
	b->ps.entries++;
	b->ps.streams += nstreams;
	b->ps.create_ns += dt;
	if (dt > b->ps.entry_max_ns)
		b->ps.entry_max_ns = dt;
	mem_info(b, &b->ps.mem_free_after, NULL);
	return 0;
}

static int cu_copy_lanes_create(struct ve_backend *vb, uint32_t n)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || !n || n > MAX_LANE_STREAMS)
		return -EINVAL;
	if (b->copy)
		return -EEXIST;
	uint64_t t0 = ve__now_ns();
	struct lane *lanes = calloc(n, sizeof(*lanes));
	if (!lanes)
		return -ENOMEM;
	int rc = 0;
	uint32_t k, slots0 = b->slots_used;
	for (k = 0; k < n; k++) {
		CUstream s;
		bool pushed = push_primary(b);
		CUresult r =
		    CU(cuStreamCreateWithPriority, &s, CU_STREAM_NON_BLOCKING, b->cfg.priority);
		pop_primary(pushed);
		if (r != CUDA_SUCCESS) {
			VE_ERR("cuda backend: copy lane %u: cuStreamCreateWithPriority: %s", k,
			       cu_name(r));
			rc = -EIO;
			break;
		}
		rc = lane_add(b, &lanes[k], VE_LANE(VE_LANE_COPY_ENTRY, k), s, true);
		if (rc)
			break;
	}
	if (rc) {
		lanes_unwind(b, lanes, k);
		b->slots_used = slots0;
		return rc;
	}
	b->copy = lanes;
	b->ncopy = n;
	b->ps.copy_lanes = n;
	b->ps.streams += n;
	b->ps.create_ns += ve__now_ns() - t0;
	mem_info(b, &b->ps.mem_free_after, NULL);
	return 0;
}

/* ------------------------------------------------------------------ submit */

static void bind_thread(struct cu_backend *b)
{
	CUcontext cur = NULL;
	if (CU(cuCtxGetCurrent, &cur) != CUDA_SUCCESS || cur != b->primary)
		CU(cuCtxSetCurrent, b->primary);
	/* This thread's own calls (stall queries, syncs at teardown) must not
	 * count as unsafe against an app's global-mode stream capture, which
	 * would invalidate the app's graph: relaxed mode for this thread. */
	if (ve__real.cuThreadExchangeStreamCaptureMode) {
		CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		ve__real.cuThreadExchangeStreamCaptureMode(&mode);
	}
	tls_gen = b->gen;
}

static void CUDA_CB host_trampoline(void *arg)
{
	const struct rec *r = arg;
	/* The shim stored the app's CUstreamCallback in cb_fn; it is called
	 * through its own type. The stream is the app's, as the app expects.
	 * The record cannot be reused before this returns: the lane's marker
	 * runs after it. */
	CUstreamCallback fn = (CUstreamCallback)(void (*)(void))r->cb_fn;
	fn((CUstream)(uintptr_t)r->cb_stream, CUDA_SUCCESS, r->cb_arg);
}

static int has_attr(const CUlaunchAttribute *a, uint32_t n, CUlaunchAttributeID id)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].id == id)
			return 1;
	return 0;
}

/* Returns 0 or the driver's (or a malformed descriptor's) CUresult. */
static int32_t launch(struct lane *l, const struct ve_desc *d)
{
	const struct ve_kernel_desc *k = &d->u.k;
	if (k->nattrs > VE_DESC_MAX_ATTRS || k->nparams > VE_DESC_MAX_PARAMS ||
	    (k->nattrs && k->attr_size != sizeof(CUlaunchAttribute)))
		return CUDA_ERROR_INVALID_VALUE;
	uint32_t need =
	    ve_desc_kernel_payload_len(k->nattrs, k->attr_size, k->param_bytes, k->nparams);
	if (need > d->payload_len || (need && !d->payload))
		return CUDA_ERROR_INVALID_VALUE;
	/* The driver only reads kernelParams and the extra buffer. */
	void *params = need ? (void *)(uintptr_t)ve_desc_params(d) : NULL;
	void *kp[VE_DESC_MAX_PARAMS];
	void **kparams = NULL;
	size_t psize = k->param_bytes;
	void *extra[5];
	void **pextra = NULL;
	bool use_extra = (d->flags & VE_DESC_PARAMS_EXTRA) || (!k->nparams && k->param_bytes);
	if (use_extra) {
		extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
		extra[1] = params;
		extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
		extra[3] = &psize;
		extra[4] = CU_LAUNCH_PARAM_END;
		pextra = extra;
	} else if (k->nparams) {
		const uint8_t *lay = (const uint8_t *)ve_desc_param_layout(d);
		for (uint32_t i = 0; i < k->nparams; i++) {
			uint32_t off, sz;
			memcpy(&off, lay + 8 * (size_t)i, 4);
			memcpy(&sz, lay + 8 * (size_t)i + 4, 4);
			if (off > k->param_bytes || sz > k->param_bytes - off)
				return CUDA_ERROR_INVALID_VALUE;
			kp[i] = (uint8_t *)params + off;
		}
		kparams = kp;
	}
	CUfunction f = (CUfunction)(uintptr_t)k->fn; /* a CUkernel casts to CUfunction */
	bool coop = d->flags & VE_DESC_COOPERATIVE;
	if (k->nattrs || (coop && use_extra)) {
		/* Copied: the payload need not be aligned for CUlaunchAttribute. */
		CUlaunchAttribute at[VE_DESC_MAX_ATTRS + 1];
		uint32_t na = k->nattrs;
		if (na)
			memcpy(at, ve_desc_attrs(d), (size_t)na * sizeof(at[0]));
		if (coop && !has_attr(at, na, CU_LAUNCH_ATTRIBUTE_COOPERATIVE)) {
			memset(&at[na], 0, sizeof(at[na]));
			at[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
			at[na].value.cooperative = 1;
			na++;
		}
		CUlaunchConfig cfg = {.gridDimX = k->grid.x,
				      .gridDimY = k->grid.y,
				      .gridDimZ = k->grid.z,
				      .blockDimX = k->block.x,
				      .blockDimY = k->block.y,
				      .blockDimZ = k->block.z,
				      .sharedMemBytes = k->smem,
				      .hStream = l->s,
				      .attrs = at,
				      .numAttrs = na};
		return CU(cuLaunchKernelEx, &cfg, f, kparams, pextra);
	}
	if (coop)
		return CU(cuLaunchCooperativeKernel, f, k->grid.x, k->grid.y, k->grid.z, k->block.x,
			  k->block.y, k->block.z, k->smem, l->s, kparams);
	return CU(cuLaunchKernel, f, k->grid.x, k->grid.y, k->grid.z, k->block.x, k->block.y,
		  k->block.z, k->smem, l->s, kparams, pextra);
}

static int32_t do_memcpy(struct cu_backend *b, struct lane *l, const struct ve_desc *d, int *again)
{
	const struct ve_memcpy_desc *c = &d->u.cp;
	CUstream s = l->s;
	bool snap = d->flags & VE_DESC_SRC_SNAPSHOT;
	if (snap && c->variant != VE_CP_HTOD && c->variant != VE_CP_DEFAULT)
		return CUDA_ERROR_INVALID_VALUE;
	switch (c->variant) {
	case VE_CP_HTOD:
	case VE_CP_DEFAULT: {
		const void *src = (const void *)(uintptr_t)c->src;
		if (snap) {
			if (c->bytes > d->payload_len || (c->bytes && !d->payload))
				return CUDA_ERROR_INVALID_VALUE;
			src = d->payload;
			if (l->stage && c->bytes && c->bytes <= l->stage_size) {
				void *p = stage_alloc(l, c->bytes);
				if (!p) {
					*again = -EAGAIN;
					return 0;
				}
				memcpy(p, d->payload, c->bytes);
				bump(&b->n_staged, c->bytes);
				src = p;
			}
		}
		if (c->variant == VE_CP_HTOD)
			return CU(cuMemcpyHtoDAsync, (CUdeviceptr)c->dst, src, c->bytes, s);
		return CU(cuMemcpyAsync, (CUdeviceptr)c->dst, (CUdeviceptr)(uintptr_t)src, c->bytes,
			  s);
	}
	case VE_CP_DTOH:
		return CU(cuMemcpyDtoHAsync, (void *)(uintptr_t)c->dst, (CUdeviceptr)c->src,
			  c->bytes, s);
	case VE_CP_DTOD:
		return CU(cuMemcpyDtoDAsync, (CUdeviceptr)c->dst, (CUdeviceptr)c->src, c->bytes, s);
	case VE_CP_PEER: {
		struct ve_cp_peer p;
		if (d->payload_len < sizeof(p) || !d->payload)
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&p, d->payload, sizeof(p));
		return CU(cuMemcpyPeerAsync, (CUdeviceptr)c->dst, p.dst_ctx, (CUdeviceptr)c->src,
			  p.src_ctx, c->bytes, s);
	}
	case VE_CP_2D: {
		CUDA_MEMCPY2D m;
		if (d->payload_len < sizeof(m) || !d->payload)
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&m, d->payload, sizeof(m));
		return CU(cuMemcpy2DAsync, &m, s);
	}
	case VE_CP_3D: {
		CUDA_MEMCPY3D m;
		if (d->payload_len < sizeof(m) || !d->payload)
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&m, d->payload, sizeof(m));
		return CU(cuMemcpy3DAsync, &m, s);
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static int32_t do_memset(struct lane *l, const struct ve_desc *d)
{
	const struct ve_memset_desc *m = &d->u.ms;
	CUdeviceptr p = (CUdeviceptr)m->dst;
	CUstream s = l->s;
	bool one_d = m->pitch == 0 && m->height <= 1;
	switch (m->elem_size) {
	case 1:
		if (one_d)
			return CU(cuMemsetD8Async, p, (unsigned char)m->value, m->width, s);
		return CU(cuMemsetD2D8Async, p, m->pitch, (unsigned char)m->value, m->width,
			  m->height, s);
	case 2:
		if (one_d)
			return CU(cuMemsetD16Async, p, (unsigned short)m->value, m->width, s);
		return CU(cuMemsetD2D16Async, p, m->pitch, (unsigned short)m->value, m->width,
			  m->height, s);
	case 4:
		if (one_d)
			return CU(cuMemsetD32Async, p, (unsigned int)m->value, m->width, s);
		return CU(cuMemsetD2D32Async, p, m->pitch, (unsigned int)m->value, m->width,
			  m->height, s);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* Errors after which the context is unusable: cuda.h says of each that it
 * "leaves the process in an inconsistent state" (or that the context "cannot
 * be used anymore"), and every later call returns it. Any other error a
 * submission gets is the op's own (a bad argument): natively the call fails
 * and the context goes on. Unknown codes count as breaking it. */
static bool breaks_context(CUresult r)
{
	switch ((int)r) {
	case 214: /* ECC_UNCORRECTABLE */
	case 220: /* NVLINK_UNCORRECTABLE */
	case 226: /* CONTAINED */
	case 700: /* ILLEGAL_ADDRESS */
	case 702: /* LAUNCH_TIMEOUT */
	case 709: /* CONTEXT_IS_DESTROYED */
	case 710: /* ASSERT */
	case 714: case 715: case 716: case 717: case 718: /* stack, instruction, alignment, address space, PC */
	case 719: /* LAUNCH_FAILED */
	case 721: /* TENSOR_MEMORY_LEAK */
	case 810: /* MPS_CLIENT_TERMINATED */
	case 911: /* EXTERNAL_DEVICE */
	case 999: /* UNKNOWN */
		return true;
	default:
		return r > 999 || r == 3 || r == 4; /* NOT_INITIALIZED, DEINITIALIZED */
	}
}

/* Enqueues the op. 0, or a permanent status (CUresult or negative errno);
 * *again set (to a negative errno) = transient, nothing enqueued. */
static int32_t enqueue(struct cu_backend *b, struct lane *l, const struct ve_desc *d, struct rec *r,
		       int *again)
{
	switch (d->kind) {
	case VE_OP_KERNEL:
		return launch(l, d);
	case VE_OP_MEMCPY:
		return do_memcpy(b, l, d, again);
	case VE_OP_MEMSET:
		return do_memset(l, d);
	case VE_OP_EVENT_RECORD:
		if (!d->u.ev.app_event)
			return 0; /* an untimed marker: the completion marker is all it needs */
		/* Superseded by a later record of its event: as an untimed marker
		 * (ve_cuda_backend_set_record_filter). */
		if (b->record_current &&
		    !b->record_current(b->record_current_arg, d->u.ev.event_idx, d->u.ev.generation))
			return 0;
		return CU(cuEventRecord, (CUevent)(uintptr_t)d->u.ev.app_event, l->s);
	case VE_OP_EVENT_WAIT:
		return 0; /* satisfied by lane order: its predecessors completed first */
	case VE_OP_HOST_FN:
		if (!d->u.host.fn)
			return CUDA_ERROR_INVALID_VALUE;
		if (d->u.host.style == 0)
			return CU(cuLaunchHostFunc, l->s, (CUhostFn)d->u.host.fn, d->u.host.arg);
		r->cb_fn = d->u.host.fn;
		r->cb_arg = d->u.host.arg;
		r->cb_stream = d->u.host.stream_handle;
		return CU(cuLaunchHostFunc, l->s, host_trampoline, r);
	case VE_OP_CALL: {
		if (!d->u.call.fn)
			return CUDA_ERROR_INVALID_VALUE;
		int rc = d->u.call.fn((uint64_t)(uintptr_t)l->s, d->payload, d->payload_len);
		if (rc == -EAGAIN || rc == -EBUSY) {
			*again = rc;
			return 0;
		}
		return rc;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult mark(struct cu_backend *b, struct lane *l, struct rec *r)
{
	if (b->mode == VE_CUDA_COMPLETION_EVENT)
		return CU(cuEventRecord, b->events[r->ev], l->s);
	uint64_t seq = l->issued + 1;
	CUresult cr =
	    CU(cuStreamWriteValue64, l->s, l->ctr_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
	if (cr == CUDA_SUCCESS) {
		l->issued = seq;
		r->seq = seq;
	}
	return cr;
}

/* Enqueues a marker for every record at the lane's tail that has none yet. */
static CUresult flush_lane(struct cu_backend *b, struct lane *l)
{
	if (!l->unmarked)
		return CUDA_SUCCESS;
	uint64_t seq = l->issued + 1;
	CUresult cr =
	    CU(cuStreamWriteValue64, l->s, l->ctr_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
	if (cr == CUDA_SUCCESS) {
		l->issued = seq;
		l->unmarked = 0;
	}
	return cr;
}

static int submit_op(struct cu_backend *b, uint32_t lane, const struct ve_desc *d, uint64_t cookie,
		     bool defer)
{
	if (!b || !d)
		return -EINVAL;
	struct lane *l = find_lane(b, lane);
	if (!l)
		return -ENOENT;
	/* A deferred record is done when the marker after it is: only the
	 * counter protocol numbers markers, so events mark every op. */
	defer = defer && b->mode == VE_CUDA_COMPLETION_COUNTER;
	if (l->tail - l->head > l->mask) {
		bump(&b->n_eagain, 1);
		return -EAGAIN;
	}
	int32_t ev = NO_EVENT;
	if (b->mode == VE_CUDA_COMPLETION_EVENT) {
		if (!b->nev_free) {
			bump(&b->n_eagain, 1);
			return -EAGAIN;
		}
		ev = b->ev_free[--b->nev_free];
	}
	if (VE_UNLIKELY(tls_gen != b->gen))
		bind_thread(b);
	uint64_t now = ve__now_ns();
	struct rec *r = &l->q[l->tail & l->mask];
	r->cookie = cookie;
	r->t_submit = now;
	r->status = 0;
	r->ev = ev;
	uint64_t stage0 = l->stage_head;
	int again = 0;
	int32_t st = enqueue(b, l, d, r, &again);
	if (again) {
		l->stage_head = stage0;
		if (ev != NO_EVENT)
			b->ev_free[b->nev_free++] = ev;
		bump(&b->n_eagain, 1);
		return again;
	}
	if (st == 0 && defer) {
		/* Done with the lane's next marker (a marked submit or a flush). */
		r->seq = l->issued + 1;
		l->unmarked++;
	} else if (st == 0) {
		CUresult mr = mark(b, l, r);
		if (mr == CUDA_SUCCESS)
			l->unmarked = 0; /* this marker covers every deferred record before it */
		if (mr != CUDA_SUCCESS) {
			/* The op is enqueued but cannot be observed: the context is
			 * broken (sticky error) or out of resources. Report it now,
			 * in lane order, with the marker's error. */
			VE_WARN("cuda backend: lane %#x: completion marker failed: %s", lane,
				cu_name(mr));
			st = (int32_t)mr;
		}
	} else {
		l->stage_head = stage0; /* nothing was enqueued: nothing reads the staging */
		bump(&b->n_rejected, 1);
		if (st > 0 && !breaks_context((CUresult)st))
			st |= VE_STATUS_REFUSED; /* reported once, as the call would have */
	}
	if (st) {
		r->status = st;
		r->seq = l->issued; /* done once everything before it is */
		if (ev != NO_EVENT) {
			b->ev_free[b->nev_free++] = ev;
			r->ev = NO_EVENT;
		}
	}
	r->stage_end = l->stage_head;
	l->tail++;
	activate(b, l, now);
	bump(&b->n_submitted, 1);
	return 0;
}

static int cu_submit(struct ve_backend *vb, uint32_t lane, const struct ve_desc *d, uint64_t cookie)
{
	return submit_op(to_cu(vb), lane, d, cookie, false);
}

static int cu_submit_deferred(struct ve_backend *vb, uint32_t lane, const struct ve_desc *d,
			      uint64_t cookie)
{
	return submit_op(to_cu(vb), lane, d, cookie, true);
}

static int cu_flush(struct ve_backend *vb, uint32_t lane)
{
	struct cu_backend *b = to_cu(vb);
	if (!b)
		return -EINVAL;
	struct lane *l = find_lane(b, lane);
	if (!l)
		return -ENOENT;
	if (!l->unmarked)
		return 0;
	if (VE_UNLIKELY(tls_gen != b->gen))
		bind_thread(b);
	CUresult cr = flush_lane(b, l);
	if (cr != CUDA_SUCCESS) {
		/* Broken context: the stall check queries the lane and fails what
		 * it holds, so nothing waits for a marker that never comes. */
		VE_WARN("cuda backend: lane %#x: completion marker failed: %s", lane, cu_name(cr));
		l->next_check_ns = 0;
	}
	return 0;
}

/* ------------------------------------------------------------------ poll */

static void emit(struct cu_backend *b, struct lane *l, struct rec *r, int32_t status,
		 struct ve_completion *out, uint64_t now)
{
	out->cookie = r->cookie;
	out->status = status;
	out->lane = l->id;
	out->t_submit_ns = r->t_submit;
	out->t_start_ns = VE_MAX(r->t_submit, l->last_end_ns);
	out->t_end_ns = now;
	l->last_end_ns = now;
	l->stage_tail = r->stage_end;
	if (r->ev != NO_EVENT) {
		b->ev_free[b->nev_free++] = r->ev;
		r->ev = NO_EVENT;
	}
	l->head++;
	bump(&b->n_completed, 1);
	if (status && !r->status)
		bump(&b->n_exec_errors, 1);
}

/* Is the head record done? 1 = yes with *status, 0 = not yet. */
static int head_done(struct cu_backend *b, struct lane *l, int32_t *status)
{
	struct rec *r = &l->q[l->head & l->mask];
	if (b->mode == VE_CUDA_COMPLETION_COUNTER) {
		if (r->seq <= l->ok) {
			*status = r->status;
			return 1;
		}
		if (l->err && r->seq <= l->err_seq) {
			*status = r->status ? r->status : l->err;
			return 1;
		}
		return 0;
	}
	if (r->ev == NO_EVENT) {
		*status = r->status;
		return 1;
	}
	CUresult q = CU(cuEventQuery, b->events[r->ev]);
	if (q == CUDA_SUCCESS) {
		*status = r->status;
		return 1;
	}
	if (q != CUDA_ERROR_NOT_READY) {
		*status = r->status ? r->status : (int32_t)q;
		return 1;
	}
	if (l->err && (int32_t)(l->head - l->err_end) < 0) {
		*status = r->status ? r->status : l->err;
		return 1;
	}
	return 0;
}

static void read_counter(struct cu_backend *b, struct lane *l)
{
	if (b->mode != VE_CUDA_COMPLETION_COUNTER)
		return;
	/* Pairs with the device's fenced cuStreamWriteValue64 of this slot:
	 * seeing seq_i makes op i's writes visible. */
	uint64_t c = atomic_load_explicit(l->ctr, memory_order_acquire);
	if (c > l->ok)
		l->ok = c;
}

/* A lane with work that did not move for stall_ns: ask the driver why. */
static void stall_check(struct cu_backend *b, struct lane *l, uint64_t now)
{
	bump(&b->n_stall, 1);
	CUresult q = CU(cuStreamQuery, l->s);
	l->next_check_ns = now + b->cfg.stall_ns;
	if (q == CUDA_ERROR_NOT_READY)
		return;
	read_counter(b, l);
	int32_t st;
	if (q == CUDA_SUCCESS) {
		if (head_done(b, l, &st))
			return;
		if (l->unmarked && flush_lane(b, l) == CUDA_SUCCESS) {
			/* Deferred records nobody flushed: mark them now (a safety
			 * net; the dispatcher flushes what it waits for). */
			return;
		}
		VE_ERR("cuda backend: lane %#x is idle but its completion marker never arrived; "
		       "failing %u ops",
		       l->id, l->tail - l->head);
		q = CUDA_ERROR_UNKNOWN;
	} else {
		VE_WARN("cuda backend: lane %#x: %s; failing its %u outstanding ops", l->id,
			cu_name(q), l->tail - l->head);
	}
	l->err = (int32_t)q;
	/* Deferred records wait for marker issued + 1, which never comes now. */
	l->err_seq = l->issued + (l->unmarked ? 1 : 0);
	l->err_end = l->tail;
}

static int drain_lane(struct cu_backend *b, struct lane *l, struct ve_completion *out, int max,
		      uint64_t now)
{
	int n = 0;
	read_counter(b, l);
	for (int pass = 0; pass < 2; pass++) {
		int32_t st;
		while (n < max && l->head != l->tail && head_done(b, l, &st)) {
			emit(b, l, &l->q[l->head & l->mask], st, &out[n], now);
			n++;
		}
		if (n) {
			l->next_check_ns = now + b->cfg.stall_ns;
			break;
		}
		if (l->head == l->tail || now < l->next_check_ns)
			break;
		stall_check(b, l, now);
	}
	return n;
}

static int cu_poll(struct ve_backend *vb, struct ve_completion *out, int max)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || !out)
		return -EINVAL;
	if (!b->nactive || max <= 0)
		return 0;
	uint64_t now = ve__now_ns();
	int n = 0;
	for (uint32_t i = 0; i < b->nactive && n < max;) {
		struct lane *l = b->active[i];
		n += drain_lane(b, l, out + n, max - n, now);
		if (l->head == l->tail)
			deactivate(b, l); /* moves the last active lane into slot i */
		else
			i++;
	}
	return n;
}

/* Something for poll to do: a completed head, or a stall check due. */
static bool any_ready(struct cu_backend *b, uint64_t now)
{
	for (uint32_t i = 0; i < b->nactive; i++) {
		struct lane *l = b->active[i];
		int32_t st;
		if (now >= l->next_check_ns)
			return true;
		read_counter(b, l);
		if (head_done(b, l, &st))
			return true;
	}
	return false;
}

static int cu_wait(struct ve_backend *vb, uint64_t timeout_ns)
{
	struct cu_backend *b = to_cu(vb);
	if (!b)
		return -EINVAL;
	uint64_t now = ve__now_ns();
	uint64_t deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
	for (;;) {
		if (any_ready(b, now))
			return 0;
		if (now >= deadline)
			return -EAGAIN;
		/* In flight: look again every slice. Nothing in flight: nothing
		 * can move before this thread's next submit, so sleep it out. */
		uint64_t left = deadline - now;
		sleep_ns(b->nactive ? VE_MIN(left, WAIT_SLICE_NS) : left);
		now = ve__now_ns();
	}
}

static uint64_t cu_now(struct ve_backend *vb)
{
	(void)vb;
	return ve__now_ns();
}

/* ------------------------------------------------------------------ destroy */

/* Waits until s has no running work or the deadline passes: false if it still has. */
static bool lane_quiesce(struct lane *l, uint64_t deadline)
{
	for (;;) {
		CUresult q = CU(cuStreamQuery, l->s);
		if (q != CUDA_ERROR_NOT_READY)
			return true; /* done, sticky error, or a driver already torn down */
		if (ve__now_ns() >= deadline)
			return false;
		sleep_ns(100000);
	}
}

static void cu_destroy(struct ve_backend *vb)
{
	struct cu_backend *b = to_cu(vb);
	if (!b)
		return;
	uint64_t deadline = ve__now_ns() + b->cfg.destroy_timeout_ns;
	bool stuck = false;
	for (uint32_t e = 0; e < MAX_ENTRIES; e++)
		for (uint32_t k = 0; b->entries[e].live && k < b->entries[e].nlanes; k++)
			stuck |= !lane_quiesce(&b->entries[e].lanes[k], deadline);
	for (uint32_t k = 0; k < b->ncopy; k++)
		stuck |= !lane_quiesce(&b->copy[k], deadline);
	if (stuck) {
		/* Work still runs: the GPU may write counters and staging, and host
		 * callbacks may read records. Leak all of it rather than free it. */
		VE_WARN("cuda backend: work still running after %.0f ms; leaking the pool",
			(double)b->cfg.destroy_timeout_ns / 1e6);
		free(b->active);
		free(b);
		return;
	}
	bool pushed = push_primary(b);
	for (uint32_t e = 0; e < MAX_ENTRIES; e++) {
		struct entry *en = &b->entries[e];
		if (!en->live)
			continue;
		/* Streams first: cuGreenCtxDestroy does not destroy them, and
		 * cuStreamDestroy after it fails (CUDA_ERROR_CONTEXT_IS_DESTROYED). */
		for (uint32_t k = 0; k < en->nlanes; k++) {
			CU(cuStreamDestroy, en->lanes[k].s);
			lane_free_host(b, &en->lanes[k]);
		}
		free(en->lanes);
		CU(cuGreenCtxDestroy, en->g);
		en->live = false;
	}
	for (uint32_t k = 0; k < b->ncopy; k++) {
		CU(cuStreamDestroy, b->copy[k].s);
		lane_free_host(b, &b->copy[k]);
	}
	free(b->copy);
	for (uint32_t i = 0; i < b->nev; i++)
		CU(cuEventDestroy, b->events[i]);
	if (b->ctr_host)
		CU(cuMemFreeHost, b->ctr_host);
	pop_primary(pushed);
	if (b->retained)
		CU(cuDevicePrimaryCtxRelease, b->dev);
	free(b->events);
	free(b->ev_free);
	free(b->active);
	free(b);
}

/* ------------------------------------------------------------------ create */

const struct ve_backend_ops ve_cuda_backend_ops = {
    .version = VE_BACKEND_OPS_VERSION,
    .name = "cuda",
    .info = cu_info,
    .entry_create = cu_entry_create,
    .copy_lanes_create = cu_copy_lanes_create,
    .submit = cu_submit,
    .poll = cu_poll,
    .wait = cu_wait,
    .now = cu_now,
    .destroy = cu_destroy,
    .submit_deferred = cu_submit_deferred,
    .flush = cu_flush,
};

#define FAIL(code, ...)                                                                            \
	do {                                                                                       \
		if (err && errlen)                                                                 \
			snprintf(err, errlen, __VA_ARGS__);                                        \
		rc = (code);                                                                       \
		goto fail;                                                                         \
	} while (0)

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static int attr(struct cu_backend *b, CUdevice_attribute a)
{
	int v = 0;
	if (CU(cuDeviceGetAttribute, &v, a, b->dev) != CUDA_SUCCESS)
		return 0;
	return v;
}

int ve_cuda_backend_create(const struct ve_cuda_config *cfg, struct ve_backend **out, char *err,
			   size_t errlen)
{
	int rc = 0;
	struct cu_backend *b = NULL;
	bool pushed = false;
	if (err && errlen)
		err[0] = '\0';
	if (!out)
		return -EINVAL;
	*out = NULL;
	struct ve_cuda_config c = {0};
	if (cfg)
		c = *cfg;
	if (!c.min_leaf_sms)
		c.min_leaf_sms = 8;
	if (!c.lane_depth)
		c.lane_depth = DEFAULT_DEPTH;
	if (!c.max_lanes)
		c.max_lanes = DEFAULT_MAX_LANES;
	if (!c.event_pool)
		c.event_pool = DEFAULT_EVENTS;
	if (!c.staging_bytes)
		c.staging_bytes = DEFAULT_STAGING;
	if (!c.stall_ns)
		c.stall_ns = DEFAULT_STALL_NS;
	if (!c.destroy_timeout_ns)
		c.destroy_timeout_ns = DEFAULT_DESTROY_NS;
	if (c.lane_depth > (1u << 20) || c.max_lanes > (1u << 20) || c.event_pool > (1u << 20) ||
	    c.completion > VE_CUDA_COMPLETION_EVENT || c.device < 0)
		FAIL(-EINVAL,
		     "bad CUDA backend configuration (device %d, lane depth %u, %u lanes, "
		     "%u events, completion %u)",
		     c.device, c.lane_depth, c.max_lanes, c.event_pool, c.completion);
	c.lane_depth = pow2_at_least(c.lane_depth);
	c.staging_bytes = (c.staging_bytes + STAGE_ALIGN - 1) & ~(uint32_t)(STAGE_ALIGN - 1);
	if (c.completion == VE_CUDA_COMPLETION_AUTO) {
		const char *e = getenv("VE_COMPLETION");
		if (e && *e && strcmp(e, "event") == 0)
			c.completion = VE_CUDA_COMPLETION_EVENT;
		else if (e && *e && strcmp(e, "counter") == 0)
			c.completion = VE_CUDA_COMPLETION_COUNTER;
		else if (e && *e)
			FAIL(-EINVAL, "VE_COMPLETION=%s is neither 'counter' nor 'event'", e);
	}

	if (ve__real_init())
		FAIL(-ENOENT,
		     "no CUDA driver could be loaded (libcuda.so.1, or the file VE_LIBCUDA "
		     "names)");
	static const struct {
		int id;
		bool green;
	} needed[] = {
	    {VE_REAL_ID_cuInit, false},
	    {VE_REAL_ID_cuDeviceGet, false},
	    {VE_REAL_ID_cuDeviceGetAttribute, false},
	    {VE_REAL_ID_cuDevicePrimaryCtxRetain, false},
	    {VE_REAL_ID_cuCtxPushCurrent, false},
	    {VE_REAL_ID_cuCtxPopCurrent, false},
	    {VE_REAL_ID_cuCtxSetCurrent, false},
	    {VE_REAL_ID_cuStreamCreateWithPriority, false},
	    {VE_REAL_ID_cuStreamQuery, false},
	    {VE_REAL_ID_cuStreamDestroy, false},
	    {VE_REAL_ID_cuEventCreate, false},
	    {VE_REAL_ID_cuEventRecord, false},
	    {VE_REAL_ID_cuEventQuery, false},
	    {VE_REAL_ID_cuLaunchKernel, false},
	    {VE_REAL_ID_cuMemHostAlloc, false},
	    {VE_REAL_ID_cuMemFreeHost, false},
	    {VE_REAL_ID_cuDeviceGetDevResource, true},
	    {VE_REAL_ID_cuDevSmResourceSplitByCount, true},
	    {VE_REAL_ID_cuDevResourceGenerateDesc, true},
	    {VE_REAL_ID_cuGreenCtxCreate, true},
	    {VE_REAL_ID_cuGreenCtxDestroy, true},
	    {VE_REAL_ID_cuGreenCtxStreamCreate, true},
	};
	for (size_t i = 0; i < VE_ARRAY_SIZE(needed); i++) {
		if (((void **)&ve__real)[needed[i].id])
			continue;
		if (needed[i].green)
			FAIL(-ENOTSUP,
			     "the CUDA driver has no green contexts (%s is missing: "
			     "they appeared in CUDA 12.4; update the driver)",
			     ve__real_name(needed[i].id));
		FAIL(-ENOTSUP, "the CUDA driver lacks %s", ve__real_name(needed[i].id));
	}

	b = calloc(1, sizeof(*b));
	if (!b)
		FAIL(-ENOMEM, "out of memory");
	b->base.ops = &ve_cuda_backend_ops;
	b->gen = atomic_fetch_add(&next_gen, 1);
	b->cfg = c;
	CUresult r = ve__real.cuInit(0);
	if (r != CUDA_SUCCESS)
		FAIL(r == CUDA_ERROR_NO_DEVICE ? -ENODEV : -ENOENT, "cuInit failed: %s",
		     cu_name(r));
	r = ve__real.cuDeviceGet(&b->dev, c.device);
	if (r != CUDA_SUCCESS) {
		int n = 0;
		CU(cuDeviceGetCount, &n);
		FAIL(-ENODEV, "no CUDA device %d (%d present): %s", c.device, n, cu_name(r));
	}
	if (CU(cuDeviceGetName, b->info.name, (int)sizeof(b->info.name), b->dev) != CUDA_SUCCESS)
		snprintf(b->info.name, sizeof(b->info.name), "CUDA device %d", c.device);
	if (c.ctx) {
		b->primary = c.ctx;
	} else {
		r = ve__real.cuDevicePrimaryCtxRetain(&b->primary, b->dev);
		if (r != CUDA_SUCCESS)
			FAIL(-ENODEV, "device %d (%s) is unusable: cuDevicePrimaryCtxRetain: %s",
			     c.device, b->info.name, cu_name(r));
		b->retained = true;
	}
	int mode = attr(b, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);
	if (mode == CU_COMPUTEMODE_PROHIBITED)
		FAIL(-ENODEV, "device %d (%s) is in compute-prohibited mode", c.device,
		     b->info.name);

	CUdevResource whole;
	memset(&whole, 0, sizeof(whole));
	r = ve__real.cuDeviceGetDevResource(b->dev, &whole, CU_DEV_RESOURCE_TYPE_SM);
	if (r != CUDA_SUCCESS)
		FAIL(r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP : -ENODEV,
		     "green contexts are not available on device %d (%s): "
		     "cuDeviceGetDevResource(SM): %s",
		     c.device, b->info.name, cu_name(r));
	unsigned nb = 0;
	r = ve__real.cuDevSmResourceSplitByCount(NULL, &nb, &whole, NULL, 0, c.min_leaf_sms);
	if (r != CUDA_SUCCESS || nb == 0)
		FAIL(r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP : -EINVAL,
		     "cannot split the %u SMs of device %d (%s) into groups of at least %u "
		     "(minimum partition %u): %s",
		     whole.sm.smCount, c.device, b->info.name, c.min_leaf_sms,
		     whole.sm.minSmPartitionSize, r ? cu_name(r) : "no group");
	/* One leaf is kept for the remainder; more groups than that would be
	 * merged into it by the driver (a smaller nbGroups is allowed). */
	if (nb > VE_MAX_LEAVES - 1)
		nb = VE_MAX_LEAVES - 1;
	CUdevResource rem;
	memset(&rem, 0, sizeof(rem));
	r = ve__real.cuDevSmResourceSplitByCount(b->leaves, &nb, &whole, &rem, 0, c.min_leaf_sms);
	if (r != CUDA_SUCCESS || nb == 0)
		FAIL(r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP : -EINVAL,
		     "cuDevSmResourceSplitByCount(minCount=%u) on device %d (%s): %s",
		     c.min_leaf_sms, c.device, b->info.name, r ? cu_name(r) : "no group");
	uint32_t nleaves = nb;
	if (rem.type == CU_DEV_RESOURCE_TYPE_SM && rem.sm.smCount > 0)
		b->leaves[nleaves++] = rem;
	b->info.nleaves = nleaves;
	for (uint32_t i = 0; i < nleaves; i++)
		b->info.leaf_sms[i] = b->leaves[i].sm.smCount;
	b->info.sm_count = whole.sm.smCount;
	b->info.min_partition_sms = whole.sm.minSmPartitionSize;
	b->info.max_threads_per_sm =
	    (uint32_t)attr(b, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
	b->info.max_blocks_per_sm =
	    (uint32_t)attr(b, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
	if (c.priority_high) {
		/* Where this process's lanes share SMs with others' (a lend, a
		 * shared grant), the block scheduler prefers pending blocks of
		 * higher-priority streams; it preempts nothing. */
		int least = 0, greatest = 0;
		bool pushed_p = push_primary(b);
		if (ve__real.cuCtxGetStreamPriorityRange &&
		    CU(cuCtxGetStreamPriorityRange, &least, &greatest) == CUDA_SUCCESS)
			b->cfg.priority = greatest;
		else
			VE_WARN("cuda backend: no stream priority range; lanes at priority %d",
				b->cfg.priority);
		pop_primary(pushed_p);
	}

	bool memops = ve__real.cuStreamWriteValue64 && ve__real.cuMemHostGetDevicePointer &&
		      attr(b, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) != 0;
	if (c.completion == VE_CUDA_COMPLETION_COUNTER && !memops)
		FAIL(-ENOTSUP,
		     "completion counters need 64-bit stream memory operations, which "
		     "device %d (%s) lacks (use VE_COMPLETION=event)",
		     c.device, b->info.name);
	b->mode = c.completion == VE_CUDA_COMPLETION_AUTO
		      ? (memops ? VE_CUDA_COMPLETION_COUNTER : VE_CUDA_COMPLETION_EVENT)
		      : c.completion;

	pushed = push_primary(b);
	if (!pushed)
		FAIL(-ENODEV, "device %d (%s) is unusable: cannot make its primary context current",
		     c.device, b->info.name);
	size_t mfree = 0, mtotal = 0;
	if (CU(cuMemGetInfo, &mfree, &mtotal) == CUDA_SUCCESS) {
		b->ps.mem_free_before = b->ps.mem_free_after = mfree;
		b->ps.mem_total = mtotal;
	}
	b->nslots = c.max_lanes;
	if (b->mode == VE_CUDA_COMPLETION_COUNTER) {
		void *p = NULL;
		size_t len = (size_t)c.max_lanes * CTR_STRIDE;
		r = ve__real.cuMemHostAlloc(&p, len,
					    CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
		CUdeviceptr dp = 0;
		if (r == CUDA_SUCCESS)
			r = ve__real.cuMemHostGetDevicePointer(&dp, p, 0);
		if (r != CUDA_SUCCESS) {
			if (p)
				ve__real.cuMemFreeHost(p);
			if (c.completion == VE_CUDA_COMPLETION_COUNTER)
				FAIL(-ENOMEM, "cannot allocate host-mapped completion counters: %s",
				     cu_name(r));
			VE_WARN("cuda backend: no host-mapped counters (%s); using events",
				cu_name(r));
			b->mode = VE_CUDA_COMPLETION_EVENT;
		} else {
			memset(p, 0, len);
			b->ctr_host = p;
			b->ctr_dev = dp;
			b->ps.pinned_bytes += len;
		}
	}
	if (b->mode == VE_CUDA_COMPLETION_EVENT) {
		b->events = calloc(c.event_pool, sizeof(*b->events));
		b->ev_free = calloc(c.event_pool, sizeof(*b->ev_free));
		if (!b->events || !b->ev_free)
			FAIL(-ENOMEM, "out of memory");
		for (uint32_t i = 0; i < c.event_pool; i++) {
			r = ve__real.cuEventCreate(&b->events[i], CU_EVENT_DISABLE_TIMING);
			if (r != CUDA_SUCCESS)
				FAIL(-ENOMEM, "cuEventCreate (completion event %u of %u): %s", i,
				     c.event_pool, cu_name(r));
			b->nev++;
			b->ev_free[b->nev_free++] = (int32_t)(c.event_pool - 1 - i);
		}
	}
	pop_primary(pushed);
	pushed = false;
	b->active = calloc(c.max_lanes, sizeof(*b->active));
	if (!b->active)
		FAIL(-ENOMEM, "out of memory");
	b->ps.completion = b->mode;
	VE_DEBUG("cuda backend: %s, %u SMs, %u leaves (min %u), %s completion", b->info.name,
		 b->info.sm_count, nleaves, c.min_leaf_sms,
		 b->mode == VE_CUDA_COMPLETION_COUNTER ? "counter" : "event");
	*out = &b->base;
	return 0;
fail:
	pop_primary(pushed);
	if (b) {
		for (uint32_t i = 0; i < b->nev; i++)
			CU(cuEventDestroy, b->events[i]);
		if (b->ctr_host)
			CU(cuMemFreeHost, b->ctr_host);
		if (b->retained)
			CU(cuDevicePrimaryCtxRelease, b->dev);
		free(b->events);
		free(b->ev_free);
		free(b->active);
		free(b);
	}
	return rc;
}

/* ------------------------------------------------------------------ accessors */

int ve_cuda_backend_pool_stats(struct ve_backend *vb, struct ve_cuda_pool_stats *out)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || !out)
		return -EINVAL;
	*out = b->ps;
	out->mem_used_bytes = b->ps.mem_free_before > b->ps.mem_free_after
				  ? b->ps.mem_free_before - b->ps.mem_free_after
				  : 0;
	out->submitted = atomic_load_explicit(&b->n_submitted, memory_order_relaxed);
	out->completed = atomic_load_explicit(&b->n_completed, memory_order_relaxed);
	out->rejected = atomic_load_explicit(&b->n_rejected, memory_order_relaxed);
	out->exec_errors = atomic_load_explicit(&b->n_exec_errors, memory_order_relaxed);
	out->eagain = atomic_load_explicit(&b->n_eagain, memory_order_relaxed);
	out->stall_queries = atomic_load_explicit(&b->n_stall, memory_order_relaxed);
	out->staged_bytes = atomic_load_explicit(&b->n_staged, memory_order_relaxed);
	return 0;
}

int ve_cuda_backend_lane_stream(struct ve_backend *vb, uint32_t lane, CUstream *out)
{
	struct cu_backend *b = to_cu(vb);
	if (!b || !out)
		return -EINVAL;
	struct lane *l = find_lane(b, lane);
	if (!l)
		return -ENOENT;
	*out = l->s;
	return 0;
}

int ve_cuda_backend_entry_ctx(struct ve_backend *vb, uint32_t idx, CUgreenCtx *g, CUcontext *c)
{
	struct cu_backend *b = to_cu(vb);
	if (!b)
		return -EINVAL;
	if (idx >= MAX_ENTRIES || !b->entries[idx].live)
		return -ENOENT;
	if (g)
		*g = b->entries[idx].g;
	if (c)
		*c = b->entries[idx].ctx;
	return 0;
}

CUcontext ve_cuda_backend_primary(struct ve_backend *vb)
{
	struct cu_backend *b = to_cu(vb);
	return b ? b->primary : NULL;
}

int ve_cuda_backend_set_record_filter(struct ve_backend *vb, ve_cuda_record_current_fn fn,
				      void *arg)
{
	struct cu_backend *b = to_cu(vb);
	if (!b)
		return -EINVAL;
	b->record_current_arg = arg;
	b->record_current = fn;
	return 0;
}
