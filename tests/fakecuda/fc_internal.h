/* SPDX-License-Identifier: MIT */
/*
 * fakecuda internals. Every translation unit of the fake includes this first.
 *
 * __CUDA_API_VERSION_INTERNAL is how the driver itself is built against
 * cuda.h: the header then declares the per-thread (_ptsz/_ptds) variants
 * under their own names in its body and, at its end, the legacy and
 * non-per-thread names, so every exported symbol has its real prototype
 * (and -Wmissing-prototypes checks our definitions against it).
 *
 * Locking (outer to inner): fc_ctx.mu -> fc_stream.qmu -> done_mu, and
 * fc_ctx.mu -> fc_event.mu / fc_capture.mu / caps_mu. g.mu is taken alone
 * (workers take it to spread a device fault). The registry, the allocation
 * table, the kernel registry and the launch log are leaves.
 */
#ifndef VE_TESTS_FAKECUDA_INTERNAL_H
#define VE_TESTS_FAKECUDA_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda.h"

#define FC_HIDDEN __attribute__((visibility("hidden")))

#define FC_DRIVER_VERSION 13000
#define FC_MAX_DEVICES	  8
#define FC_MASK_WORDS	  (FAKECUDA_MAX_SMS / 64)

/* Handle kinds in the registry. */
enum fc_type {
	FC_T_NONE = 0,
	FC_T_CTX,
	FC_T_STREAM,
	FC_T_EVENT,
	FC_T_MODULE,
	FC_T_FUNC,
	FC_T_LIBRARY,
	FC_T_KERNEL,
	FC_T_GREEN,
	FC_T_DESC,
	FC_T_GRAPH,
	FC_T_GEXEC,
	FC_T_NODE,
	FC_T_COND,
};

struct fc_smset {
	uint64_t w[FC_MASK_WORDS];
};

struct fc_device {
	int ordinal;
	uint32_t nsm;
	/* SM ids in "physical" order: consecutive runs of it form split groups. */
	uint32_t phys_order[FAKECUDA_MAX_SMS];
	size_t total_mem;
	_Atomic size_t used_mem;
	_Atomic int sticky;	/* a device fault: every context of the device reports it */
	struct fc_ctx *primary; /* created at init, never freed before exit */
	/* protected by g.mu */
	int primary_refs;
	unsigned primary_flags;
};

struct fc_green;
struct fc_op;
struct fc_capture;

struct fc_ctx {
	struct fc_device *dev;
	struct fc_green *green; /* set for the CUcontext of a green context */
	unsigned flags;
	int is_primary;
	unsigned long long id;
	_Atomic int sticky;	    /* CUresult of a device fault, sticky */
	pthread_mutex_t mu;	    /* submission state below and of all its streams */
	struct fc_stream *streams;  /* every stream of the context, destroyed ones until reaped */
	struct fc_stream *legacy;   /* created on first use */
	struct fc_stream *aux;	    /* internal: ctx-wide event records */
	struct fc_op *wait_barrier; /* cuGreenCtxWaitEvent: streams created later start behind it */
	int destroyed;
	struct fc_ctx *next_all; /* g.ctxs, protected by g.mu */
};

enum fc_stream_kind { FC_S_USER, FC_S_LEGACY, FC_S_PERTHREAD, FC_S_AUX };

struct fc_stream {
	struct fc_ctx *ctx;
	int kind;
	unsigned flags;
	int priority;
	unsigned long long id;
	CUstream handle; /* what a callback / the launch log reports */
	/* protected by ctx->mu */
	struct fc_stream *next;
	struct fc_op *tail; /* last submitted op (ref) */
	struct fc_capture *capture;
	int destroyed; /* handle released: drain, then the reaper frees it */
	int detached;  /* its green context was destroyed */
	/* protected by qmu */
	pthread_mutex_t qmu;
	pthread_cond_t qcv;
	struct fc_op *qhead, *qtail;
	int qclose;  /* no more ops will come */
	int started; /* worker thread created */
	int exited;  /* worker returned */
	pthread_t thread;
	/* worker-private */
	uint64_t rng;
};

/* One operation as executed by a worker; also a graph node (without the op). */
enum fc_cmd_kind {
	FC_CMD_NOP = 0, /* event record / wait / barrier: ordering only */
	FC_CMD_KERNEL,
	FC_CMD_COPY,
	FC_CMD_COPYV, /* batch of 1-D copies */
	FC_CMD_MEMSET,
	FC_CMD_HOSTFN,
	FC_CMD_CALLBACK,
	FC_CMD_FREE,
	FC_CMD_MEMOPS, /* write/wait value, batch mem ops */
	FC_CMD_GRAPH,
	FC_CMD_EVRECORD, /* graph node: external event record */
	FC_CMD_EVWAIT,	 /* graph node: external event wait */
	FC_CMD_CHILD,	 /* graph node: an embedded graph */
	FC_CMD_COND,	 /* graph node: conditional (if, while, switch) over body graphs */
};

/* A registered kernel: name, function and parameter layout. Never freed before exit. */
struct fc_kentry {
	char *name;
	fakecuda_kernel_fn fn;
	uint32_t nparams;
	size_t size[FAKECUDA_MAX_PARAMS];
	size_t offset[FAKECUDA_MAX_PARAMS];
	size_t total; /* bytes of the packed parameter buffer */
	_Atomic int loaded; /* FAKECUDA_LOAD_US: its code loaded (modules are per device) */
	_Atomic uint32_t max_threads; /* per block, as register use limits it (0: 1024) */
	struct fc_kentry *next;
};

struct fc_copy {
	char *dst;
	const char *src;
	size_t width, height, depth;
	size_t spitch, sheight, dpitch, dheight;
};

struct fc_memop {
	int wait; /* wait (1) or write (0) */
	int is64;
	uintptr_t addr;
	uint64_t value;
	unsigned flags;
};

struct fc_gexec;

struct fc_cmd {
	int kind;
	union {
		struct {
			struct fc_kentry *k;
			/* As a graph node holds them (cuGraphKernelNodeGetParams):
			 * the function as launched, its CUkernel if it has one, and
			 * the context the node runs in. Measured on driver 580: a
			 * graph's kernel node runs on the SMs of the context it was
			 * made in (the capturing stream's, or the ctx given with a
			 * kern), whatever stream the graph is launched into. */
			CUfunction fn;
			CUkernel kern;
			struct fc_ctx *nctx;
			unsigned grid[3], block[3], smem;
			int coop;
			unsigned cluster[3];
			void *params; /* packed copy */
			void **pptrs; /* pointers into params, one per parameter */
			int inject_fault; /* FAKECUDA_FAULT_LAUNCH_AT: fault instead of running */
		} k;
		struct {
			struct fc_copy c;
			void *staging; /* owned snapshot of a pageable source, c.src points in */
			size_t staging_size;
		} copy;
		struct {
			size_t n;
			struct fc_copy *v;
			void *staging; /* snapshots of pageable sources, v[i].src may point in */
			size_t staging_size;
		} copyv;
		struct {
			char *dst;
			size_t pitch, width, height;
			unsigned elem;
			uint32_t value;
		} memset;
		struct {
			CUhostFn fn;
			void *ud;
		} host;
		struct {
			CUstreamCallback fn;
			void *ud;
			CUstream handle;
		} cb;
		struct {
			uintptr_t ptr;
		} free;
		struct {
			unsigned n;
			struct fc_memop *v;
		} memops;
		struct {
			struct fc_gexec *exec;
			struct fc_cmd *nodes; /* the exec's nodes at launch (kept by exec) */
			size_t n;
		} graph;
		struct {
			struct fc_event *e;
		} ev;
		struct {
			struct fc_graph *g; /* owned */
		} child;
		struct {
			struct fc_cond *h;
			int type; /* CUgraphConditionalNodeType */
			unsigned n;
			struct fc_graph **body; /* n owned bodies */
			CUgraph *out;		/* the array handed out at creation (owned) */
		} cond;
	} u;
};

struct fc_op {
	_Atomic int refs;
	_Atomic int done;
	struct fc_op *qnext;
	uint32_t ndeps;
	struct fc_op *deps[4];
	struct fc_op **xdeps; /* deps beyond 4 */
	uint64_t t_ns;	      /* host clock when it ran (event timing) */
	struct fc_cmd cmd;
};

/* Stream capture sequence. mode, origin, thread: set at begin; graph: under mu. */
struct fc_capture {
	unsigned long long id;
	pthread_mutex_t mu;
	struct fc_graph *graph; /* owned until cuStreamEndCapture hands it out */
	int to_graph;		/* cuStreamBeginCaptureToGraph: the graph is the app's */
	int mode;
	_Atomic int invalidated;
	struct fc_stream *origin;
	pthread_t thread;
	_Atomic int refs; /* streams capturing into it + events recorded in it */
	int counted;	  /* still counted in the capture-mode bookkeeping (under caps_mu) */
	int active;	  /* on the list of active captures (under caps_mu) */
	struct fc_capture *next_active;
	CUgraphNode tail; /* opaque "last node" handle that cuStreamGetCaptureInfo reports */
};

struct fc_graph {
	struct fc_ctx *ctx;
	size_t n, cap;
	struct fc_cmd *nodes;
	struct fc_gnode **handles; /* node handles, created on demand (cap entries) */
	int owned_by_node;	   /* a child or conditional body: freed with its node */
};

/* A node handle: (graph, index). Valid while the graph lives. */
struct fc_gnode {
	struct fc_graph *g;
	size_t idx;
};

/* A conditional handle: its value, set by kernels (fakecuda_cond_set). */
struct fc_cond {
	unsigned dflt;
	unsigned flags;
	_Atomic unsigned value;
};

struct fc_gexec {
	_Atomic int refs;
	size_t n;
	unsigned long long flags; /* instantiation flags */
	struct fc_cmd *nodes;
	pthread_mutex_t mu;
	struct fc_op *last; /* previous launch: launches of one exec are serialized */
	struct fc_cmd **retired; /* node arrays replaced by cuGraphExecUpdate (running launches
				  * may still read them): freed with the exec */
	size_t *retired_n;
	size_t nretired;
};

struct fc_event {
	struct fc_ctx *ctx;
	unsigned flags;
	pthread_mutex_t mu;
	struct fc_op *op;	/* generation of the last record (ref), NULL if never recorded */
	struct fc_capture *cap; /* recorded during this capture */
};

struct fc_green {
	int destroyed;	    /* cuGreenCtxDestroy ran; kept until exit */
	struct fc_ctx *ctx; /* its CUcontext */
	struct fc_device *dev;
	struct fc_smset sms;
	uint32_t nsm;
	uint32_t sm_ids[FAKECUDA_MAX_SMS];
	unsigned long long id;
	_Atomic uint64_t launches;
};

struct fc_desc {
	int dev;
	struct fc_smset sms;
};

/* Global state. */
struct fc_global {
	pthread_mutex_t mu; /* init, devices' primary state, ctx list, kernel registry */
	int initialized;
	_Atomic int forked; /* this is a child forked after cuInit: nothing works (as CUDA) */
	int ndev;
	struct fc_device dev[FC_MAX_DEVICES];
	struct fc_ctx *ctxs;
	_Atomic unsigned jitter_us;
	_Atomic uint64_t seed;
	int trace;
	_Atomic int shutdown;
	_Atomic int live_workers;
	_Atomic unsigned long long next_id;
	_Atomic int global_captures; /* active GLOBAL-mode captures */
	/* Injected driver errors (FAKECUDA_FAIL_ALLOC_AT, FAKECUDA_FAIL_LAUNCH_AT,
	 * FAKECUDA_FAULT_LAUNCH_AT, FAKECUDA_FAULT_CODE): counted from 1. */
	long fail_alloc_at, fail_launch_at, fault_launch_at;
	int fault_code;
	/* FAKECUDA_LOAD_US: lazy loading; a kernel's first launch (or cuFuncLoad)
	 * takes this long in the calling thread. 0: every kernel loaded. */
	long load_us;
	long green_create_us; /* FAKECUDA_GREEN_CREATE_US: each cuGreenCtxCreate sleeps this long */
	long ctx_sms; /* FAKECUDA_CTX_SMS: SMs cuCtxGetDevResource reports for an ordinary context (0: all) */
	_Atomic long nallocs, nlaunches;
};

extern FC_HIDDEN struct fc_global fakecuda__g;
#define g_fc fakecuda__g

/* Thread-local state. */
struct fc_tls {
	struct fc_ctx *stack[64];
	int depth;
	int in_callback;     /* running a host function: CUDA calls are not permitted */
	int capture_mode;    /* cuThreadExchangeStreamCaptureMode (GLOBAL = 0) */
	int strict_captures; /* this thread's non-relaxed captures */
	int global_captures; /* this thread's GLOBAL-mode captures */
};
FC_HIDDEN struct fc_tls *fakecuda__tls(void);

/* fc_core.c */
FC_HIDDEN CUresult fakecuda__enter(const char *fn, _Atomic int *slot, int need_init);
FC_HIDDEN void fakecuda__registry_add(const void *h, int type);
FC_HIDDEN void fakecuda__registry_del(const void *h);
FC_HIDDEN int fakecuda__registry_is(const void *h, int type);
FC_HIDDEN size_t fakecuda__registry_take(int type, void ***out);
FC_HIDDEN struct fc_ctx *fakecuda__ctx_current(void);
FC_HIDDEN int fakecuda__kargs_alloc(const struct fc_kentry *k, void **params, void ***pptrs);
FC_HIDDEN CUresult fakecuda__kernel_node_set(struct fc_cmd *c, const CUDA_KERNEL_NODE_PARAMS *p);
FC_HIDDEN CUresult fakecuda__ctx_get(struct fc_ctx **out);
FC_HIDDEN struct fc_ctx *fakecuda__ctx_new(struct fc_device *dev, unsigned flags, int primary);
FC_HIDDEN void fakecuda__ctx_free(struct fc_ctx *c);
FC_HIDDEN CUresult fakecuda__device_get(CUdevice d, struct fc_device **out);
FC_HIDDEN uint64_t fakecuda__now_ns(void);
FC_HIDDEN unsigned long long fakecuda__new_id(void);
FC_HIDDEN CUresult fakecuda__capture_unsafe(void);
FC_HIDDEN CUresult fakecuda__ctx_sync_api(struct fc_ctx *c);

/* FC_ENTER: count the call (by exported symbol name) and refuse calls from host functions. */
#define FC_ENTER_(need_init)                                                                       \
	do {                                                                                       \
		static _Atomic int fc_slot_ = -1;                                                  \
		CUresult fc_r_ = fakecuda__enter(__func__, &fc_slot_, (need_init));                \
		if (fc_r_ != CUDA_SUCCESS)                                                         \
			return fc_r_;                                                              \
	} while (0)
#define FC_ENTER()     FC_ENTER_(1)
#define FC_ENTER_ANY() FC_ENTER_(0)

/* fc_stream.c */
FC_HIDDEN struct fc_op *fakecuda__op_new(void);
FC_HIDDEN void fakecuda__op_ref(struct fc_op *op);
FC_HIDDEN void fakecuda__op_unref(struct fc_op *op);
FC_HIDDEN void fakecuda__op_wait(struct fc_op *op);
FC_HIDDEN int fakecuda__op_done(const struct fc_op *op);
FC_HIDDEN CUresult fakecuda__stream_resolve(CUstream h, int ptds, struct fc_stream **out);
/* GPC of SM id sm of device d (fc_green.c: the fake's topology). */
FC_HIDDEN uint32_t fakecuda__gpc_of(const struct fc_device *d, uint32_t sm);
FC_HIDDEN struct fc_stream *fakecuda__stream_new(struct fc_ctx *c, int kind, unsigned flags,
						 int prio);
FC_HIDDEN CUresult fakecuda__submit(struct fc_stream *s, struct fc_cmd *cmd, struct fc_op *dep,
				    struct fc_op **out);
FC_HIDDEN CUresult fakecuda__submit_sync(struct fc_stream *s, struct fc_cmd *cmd, int wait);
FC_HIDDEN CUresult fakecuda__ctx_sync(struct fc_ctx *c);
FC_HIDDEN CUresult fakecuda__device_sync(struct fc_device *d);
FC_HIDDEN void fakecuda__ctx_teardown(struct fc_ctx *c);
FC_HIDDEN void fakecuda__cmd_fini(struct fc_cmd *cmd);
FC_HIDDEN int fakecuda__cmd_clone(struct fc_cmd *dst, const struct fc_cmd *src);
FC_HIDDEN int fakecuda__cmd_run(struct fc_stream *s, struct fc_cmd *cmd, int from_graph);
FC_HIDDEN void fakecuda__event_free(struct fc_event *e);
FC_HIDDEN void fakecuda__ctx_fault(struct fc_ctx *c);
FC_HIDDEN void fakecuda__streams_shutdown(void);

/* fc_mem.c */
enum fc_mem_kind { FC_MEM_NONE = 0, FC_MEM_DEVICE, FC_MEM_PINNED, FC_MEM_REGISTERED };
struct fc_alloc {
	uintptr_t base;
	size_t size;
	int kind;
	struct fc_ctx *ctx;
	unsigned flags;
	unsigned long long id;
	int async;   /* from cuMemAllocAsync */
	int freeing; /* a cuMemFreeAsync is pending */
};
FC_HIDDEN int fakecuda__mem_find(uintptr_t p, struct fc_alloc *out);
FC_HIDDEN void fakecuda__mem_release(uintptr_t base);
FC_HIDDEN void fakecuda__mem_teardown(void);

/* fc_module.c */
FC_HIDDEN void fakecuda__kernel_run(struct fc_stream *s, struct fc_cmd *cmd, int from_graph,
				    int *fault);
FC_HIDDEN void fakecuda__module_teardown(void);
FC_HIDDEN void fakecuda__launch_log_reset(void);

/* fc_green.c */
FC_HIDDEN void fakecuda__device_topology(struct fc_device *d);
FC_HIDDEN void fakecuda__green_teardown(void);

/* fc_graph.c */
FC_HIDDEN CUresult fakecuda__capture_add(struct fc_stream *s, struct fc_cmd *cmd);
FC_HIDDEN void fakecuda__capture_invalidate(struct fc_capture *cap);
FC_HIDDEN void fakecuda__capture_put(struct fc_capture *cap);
FC_HIDDEN void fakecuda__gexec_unref(struct fc_gexec *x);
FC_HIDDEN void fakecuda__graph_free(struct fc_graph *g);
FC_HIDDEN struct fc_graph *fakecuda__graph_clone(const struct fc_graph *g);
FC_HIDDEN int fakecuda__graph_run(struct fc_stream *s, const struct fc_graph *g);
FC_HIDDEN void fakecuda__cond_reset(const struct fc_cmd *nodes, size_t n);
FC_HIDDEN void fakecuda__graph_teardown(void);

/* Small helpers. */
static inline void fc_smset_set(struct fc_smset *s, uint32_t i)
{
	s->w[i / 64] |= 1ull << (i % 64);
}
static inline int fc_smset_has(const struct fc_smset *s, uint32_t i)
{
	return (s->w[i / 64] >> (i % 64)) & 1;
}
static inline uint32_t fc_smset_count(const struct fc_smset *s)
{
	uint32_t n = 0;
	for (int i = 0; i < FC_MASK_WORDS; i++)
		n += (uint32_t)__builtin_popcountll(s->w[i]);
	return n;
}

#define FC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FC_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
