/* SPDX-License-Identifier: MIT */
/*
 * Internal state of the LD_PRELOAD shim (libve.so). One process, one
 * virtualized context: the primary context of VE_DEVICE (default 0). Calls
 * on any other context, or on streams/events the shim did not create, pass
 * through to the driver unchanged (docs/semantics.md, "What is virtualized").
 */
#ifndef VE_SHIM_H
#define VE_SHIM_H

#include "core/vctx.h"
#include "backend/cuda_driver.h"

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Step-time histogram (VE_TPOT_MS): microseconds in ve__log8_bucket's
 * buckets (util.h) up to 2^37 us (about 38 hours); longer steps land in
 * the last. */
#define VE_STEP_HIST (8 * 35)
/* The q-quantile (0..1) of the steps recorded (a bucket's middle), 0 if none. */
uint64_t ve__step_quantile_ns(double q);

enum ve_shim_state {
	VE_SHIM_UNINIT = 0,
	VE_SHIM_ACTIVE,	     /* virtualizing */
	VE_SHIM_PASSTHROUGH, /* disabled or unusable: every call goes to the driver */
};

struct ve_shim_config {
	int disabled;	    /* VE_DISABLE=1 */
	int device;	    /* VE_DEVICE */
	char policy[256];   /* VE_POLICY */
	uint32_t pool_entries; /* VE_POOL_ENTRIES (0 = full hierarchy) */
	uint32_t leaf_sms;  /* VE_LEAF_SMS (minimum SMs per leaf, default 8) */
	uint32_t lanes;	    /* VE_LANES: streams per pool entry */
	uint32_t copy_lanes; /* VE_COPY_LANES */
	uint32_t max_ops;   /* VE_MAX_OPS */
	uint32_t window;    /* VE_WINDOW: pipelining window per logical stream */
	uint32_t pipe_budget; /* VE_PIPE_BUDGET: pipelined ops per stream between bindings when shared */
	uint32_t per_op;       /* VE_BIND=op: per-op binding (the paper's strict mode) */
	uint64_t tick_us;      /* VE_TICK_US: grant ticks (embedded coordinator) */
	uint64_t ahead_us;     /* VE_AHEAD_US: submit-ahead bound per lane (grant mode) */
	uint64_t lend_us;      /* VE_LEND_US: longest kernel run on lent SMs (grant mode) */
	uint32_t mark_every;   /* VE_MARK_EVERY: a completion marker every N ops */
	uint32_t mark_long_tail; /* VE_MARK_LONG_TAIL: a long kernel's marker waits for its read-back */
	uint32_t phase;		 /* VE_PHASE: line up host gaps against another process's kernels */
	uint64_t sync_spin_us; /* VE_SYNC_SPIN_US: a waiting thread spins this long first */
	uint64_t poll_us;      /* VE_POLL_US: dispatcher completion poll interval */
	uint64_t idle_spin_us; /* VE_IDLE_SPIN_US: dispatcher spin before an idle sleep */
	uint32_t want_spread;  /* VE_WANT=spread (default fill) */
	uint32_t latency;   /* VE_CLASS=latency */
	uint64_t tpot_ns;   /* VE_TPOT_MS: a latency client's step deadline (0: none) */
	char trace[512];    /* VE_TRACE */
	char profile[512];  /* VE_PROFILE */
	char profile_out[512]; /* VE_PROFILE_OUT: save refined profiles at exit */
	uint64_t watchdog_ms; /* VE_WATCHDOG_MS: bind deadline, stuck-lane and sync-wait dumps */
	uint32_t graphs;      /* VE_GRAPHS: enum ve_graphs_mode */
	uint32_t strict;      /* VE_STRICT=1: any fallback at start is fatal */
	uint32_t preload;     /* VE_PRELOAD: load a kernel on the launching thread (lazy loading) */
	uint32_t bounce_kb;   /* VE_BOUNCE_KB: small copies into pageable memory bounce (bounce.c) */
	uint32_t read_self;   /* VE_READ_SELF: such copies run on the caller's thread (hooks_body.h) */
	uint64_t exit_drain_ms; /* VE_EXIT_DRAIN_MS: how long exit lets queued work finish */
};

/* VE_GRAPHS: where graph launches run (src/shim/graph.c). */
enum ve_graphs_mode {
	VE_GRAPHS_AUTO = 0,
	VE_GRAPHS_POOL,
	VE_GRAPHS_WHOLE,
	VE_GRAPHS_STREAM,
	VE_GRAPHS_BARRIER,
};

struct ve_shim {
	_Atomic int state;
	pid_t pid; /* the process that started the runtime: a forked child is not it */
	struct ve_shim_config cfg;
	CUdevice dev;
	CUcontext ctx; /* the virtualized (primary) context */
	struct ve_vctx *v;
	struct ve_backend *backend;
	struct ve_runtime *rt; /* the device's stack: dispatcher, link, trace */
	uint64_t init_ns;
	/* Launches that only the whole GPU may run, by cause (reported at exit:
	 * each waits for every other client to drain). */
	_Atomic uint64_t wide_cluster; /* thread-block clusters larger than 2 the driver
					* could not place in a smaller entry */
	_Atomic uint64_t fit_cluster;  /* clusters larger than 2 placed by occupancy */
	_Atomic uint64_t wide_coop;    /* cooperative grids needing every SM */
	_Atomic uint32_t widest_cluster;
	/* Graph launches by the SMs they need: a pool entry, or the whole GPU
	 * (clusters the driver could not place, cooperative nodes filling it,
	 * no copies, stream placement). */
	_Atomic uint64_t graph_pool, graph_whole;
	/* Steps of a latency client with VE_TPOT_MS (api.c): from the first
	 * launch after the host waited for results to its next such wait. */
	_Atomic uint64_t steps, steps_late, step_max_ns;
	/* Their times, log-linear: 8 buckets per octave of microseconds (a
	 * bucket spans 12.5% at most), for the exit summary's percentiles. */
	_Atomic uint32_t step_hist[VE_STEP_HIST];
	/* Ordered pass-through calls (pageable copies, ...) by how they joined
	 * the logical order: done when they returned, or linked by an event. */
	_Atomic uint64_t barrier_done_at_once;
	_Atomic uint64_t barrier_linked;
	/* Copies into pageable memory that ran as logical ops through a pinned
	 * bounce buffer (bounce.c), and those that found every buffer taken. */
	_Atomic uint64_t bounced, bounce_full, read_self;
	/* Stream captures begun and not yet ended: while any is open, copies
	 * into pageable memory go to the driver, which decides what they do
	 * to a capture (bounce_to_host). */
	_Atomic uint32_t captures;
	_Atomic uint64_t preloaded; /* kernels loaded on the launching thread (VE_PRELOAD) */
};

extern struct ve_shim ve__shim;

/* False under VE_DISABLE=1: hooks are then never installed. */
bool ve__shim_hooking(void);
/* Initializes on first use; returns true if the shim virtualizes. */
bool ve__shim_active(void);
/* For calls that do not need the pool: true once initialized and active. */
static inline bool ve__shim_is_active(void)
{
	return atomic_load_explicit(&ve__shim.state, memory_order_acquire) == VE_SHIM_ACTIVE;
}

/* SMs of the smallest entries that can run a launch with thread-block
 * clusters of these dimensions (every entry of at least that many SMs can),
 * from the driver's occupancy calculator, cached per configuration;
 * UINT32_MAX: only the whole GPU (the driver could not say). cluster.c. */
uint32_t ve__cluster_min_sms(CUfunction f, const uint32_t cluster[3], const uint32_t block[3],
			     uint32_t smem);

/* Per-thread default stream key of the calling thread. */
uint64_t ve__thread_key(void);

/* ---- handle maps (thread-safe) ---- */
struct ve_stream_info {
	ve_stream ls;	  /* logical stream */
	unsigned flags;	  /* CU_STREAM_* */
	uint32_t capture; /* capture group id while capturing, 0 otherwise */
};
int ve__smap_put(CUstream s, const struct ve_stream_info *info);
int ve__smap_get(CUstream s, struct ve_stream_info *out);
int ve__smap_del(CUstream s);
int ve__smap_set_capture(CUstream s, uint32_t group);
/* Clears capture on every stream of the group. */
void ve__smap_end_capture(uint32_t group);

struct ve_event_info {
	ve_event le;
	unsigned flags;	  /* CU_EVENT_* */
	uint32_t capture; /* last record happened during capture of this group */
	uint32_t graph;	  /* last recorded by a graph's event record node (external record
			   * in a capture): the driver's event is the truth, once the graph
			   * launches pending in the vctx ran */
};
int ve__emap_put(CUevent e, const struct ve_event_info *info);
int ve__emap_get(CUevent e, struct ve_event_info *out);
int ve__emap_del(CUevent e);
int ve__emap_set_capture(CUevent e, uint32_t group);
int ve__emap_set_graph(CUevent e, uint32_t graph);
/* The capture ended: its events are no longer "recorded in a capture". */
void ve__emap_end_capture(uint32_t group);

/* Kernel parameter layouts, cached per function. */
#define VE_SHIM_MAX_INLINE_PARAMS 64
struct ve_param_layout {
	uint32_t nparams;
	uint32_t total; /* bytes: last offset + size */
	uint32_t max_threads; /* the function's threads per block limit, 0 unknown */
	const uint32_t *pairs; /* nparams (offset, size) pairs */
};
int ve__param_layout(CUfunction f, struct ve_param_layout *out);
/* Forgets what was cached about the functions of 'mod' (NULL: of every
 * module and library): they are being unloaded, and their handles may come
 * back as other functions. */
void ve__forget_functions(CUmodule mod);
/* The launch configuration limits the driver checks at the call (grid and
 * block dimensions against the device's, dynamic shared memory against the
 * function's): CUDA_SUCCESS or the driver's error, so a bad launch fails at
 * its call instead of as a sticky error at a later sync. */
CUresult ve__check_launch_config(CUfunction f, const uint32_t grid[3], const uint32_t block[3],
				 unsigned smem);

/* ---- stream resolution ---- */
/* What a CUstream argument means for the vctx. */
struct ve_target {
	bool virt;	   /* handled by the vctx */
	ve_stream ls;	   /* logical stream when virt */
	CUstream real;	   /* the app-visible real stream (for pass-through) */
	bool capturing;	   /* real stream is capturing: pass through */
	uint32_t capture;
};
/* ptsz: the call came through a per-thread-default-stream entry point. */
void ve__resolve_stream(CUstream s, bool ptsz, struct ve_target *t);

/* ---- errors ---- */
CUresult ve__cu_error(int rc);
/* Sticky device error of the vctx as the CUresult the app should see. */
CUresult ve__sticky(void);
/* The result of a synchronizing call (stream, event or context sync) from
 * the vctx's rc: its error, else an op refused at submission not yet
 * reported (once: natively the call that enqueued it failed instead). */
CUresult ve__sync_error(int rc);

/* ---- barrier pass-through (docs/semantics.md, "The table": O) ---- */
/* Waits until the logical work before this point on t's stream is done. */
CUresult ve__barrier_begin(const struct ve_target *t);

/* Pinned bounce buffers (bounce.c): a buffer of at least n bytes, its slot
 * in *slot, or NULL (too large, all taken, none available); put it back
 * with ve__bounce_put once the copy into it is done and read.
 * ve__bounce_fits: whether a copy of n bytes may get one at all (cheap). */
#define VE__BOUNCE_SLOTS 8
bool ve__bounce_fits(size_t n);
void *ve__bounce_get(size_t n, uint32_t *slot);
void ve__bounce_put(uint32_t slot);
/* After the real call was enqueued on t->real: later logical work on the
 * stream waits for it (an event recorded there, waited on by a marker op). */
CUresult ve__barrier_end(const struct ve_target *t, CUresult call_rc);
/* The calling thread in relaxed stream-capture mode for Vitamin-E's own
 * driver calls, so they never count as the app's unsafe calls against a
 * global-mode capture (which would invalidate the app's graph): relax
 * returns whether the mode was exchanged, restore puts it back. */
bool ve__capture_relax(CUstreamCaptureMode *saved);
void ve__capture_restore(bool relaxed, CUstreamCaptureMode *saved);

/* Notices printed once per kind. */
void ve__notice_once(int which, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum { VE_NOTE_OTHER_CTX = 0, VE_NOTE_UNKNOWN_STREAM, VE_NOTE_CAPTURE, VE_NOTE_GRAPH,
       VE_NOTE_BATCH, VE_NOTE_ARRAY, VE_NOTE_DEVICE, VE_NOTE_DISABLED, VE_NOTE_GRAPH_COPY,
       VE_NOTE_EVENTS_FULL, VE_NOTE_PTDS_FULL, VE_NOTE_MAX };

/* Hook tables built by hooks.c (legacy) and hooks_ptsz.c (per-thread). */
struct ve_hook {
	int id;			 /* enum ve_real_id of the base name, -1 ends the table */
	const char *export_name; /* symbol name ("cuMemcpyHtoD_v2_ptds") */
	void *fn;
};
extern const struct ve_hook ve__hooks_legacy[];
extern const struct ve_hook ve__hooks_ptsz[];

/* Capture of the calling thread's per-thread default stream (0 = none). */
void ve__ptds_capture_set(uint32_t group);
uint32_t ve__ptds_capture(void);
/* A capture ended (on any thread): per-thread default streams leave it. */
void ve__ptds_capture_ended(uint32_t group);

/* ---- graphs (graph.c) ---- */
/* What a graph launch is sized and placed by. */
struct ve_gshape {
	uint64_t blocks;  /* widest kernel node */
	uint32_t threads; /* its threads per block */
	uint32_t min_sms; /* cooperative nodes' co-residency; UINT32_MAX = the whole GPU */
	uint32_t flags;	  /* VE_G_* */
	uint32_t nodes, nkernels;
};
#define VE_G_UNKNOWN   (1u << 0) /* not (fully) read: sized as the whole GPU */
#define VE_G_COND      (1u << 1) /* conditional nodes */
#define VE_G_DEVLAUNCH (1u << 2) /* instantiated for device launch */
#define VE_G_COOP      (1u << 3)
#define VE_G_CLUSTER   (1u << 4)
#define VE_G_MEMNODE   (1u << 5) /* memory alloc/free nodes */
#define VE_G_NOKERN    (1u << 8) /* a kernel node without a CUkernel (a module's function) */
#define VE_G_HOSTNODE  (1u << 6)
#define VE_G_EVENTNODE (1u << 7) /* event record/wait nodes */
/* Placement of one launch. */
enum { VE_GP_POOL = 0, VE_GP_WHOLE, VE_GP_STREAM, VE_GP_BARRIER };

extern _Thread_local uint64_t ve__deadline_ns;
/* The deadline a latency op launched now carries: the app's advice
 * (ve_advise_deadline/step) if it gave one, else, with VE_TPOT_MS, the start
 * of the process's current step plus VE_TPOT_MS; 0 = none (api.c). */
uint64_t ve__op_deadline(void);
/* The host waited for results (a synchronize, a copy to host memory): the
 * open step, if any, ends here. */
void ve__step_end(void);
void ve__graph_shape(CUgraph g, unsigned long long inst_flags, struct ve_gshape *sh);
/* Calls fn for every node of g and of its child graphs (to a depth of 8);
 * false when a graph or a node could not be read (it is skipped). */
bool ve__graph_each_node(CUgraph g, void (*fn)(CUgraphNode, CUgraphNodeType, void *), void *arg);
uint32_t ve__graph_placement(const struct ve_gshape *sh);
/* A new exec (instantiation) of g with inst_flags. */
void ve__gexec_put(CUgraphExec x, const struct ve_gshape *sh, CUgraph g,
		   unsigned long long inst_flags);
/* After cuGraphExecUpdate (replace) or a node's new parameters (widen). */
void ve__gexec_reshape(CUgraphExec x, const struct ve_gshape *sh, bool replace);
/* After cuGraphExecUpdate(x, g) (x quiesced): copies of g from now on. */
void ve__gexec_recopy(CUgraphExec x, CUgraph g, const struct ve_gshape *sh);
/* Before changing x: waits until every launch of x made so far completed,
 * and stops using x's per-context copies (they would not see the change). */
void ve__gexec_quiesce(CUgraphExec x);
void ve__gexec_quiesce_all(void);
/* Some graph launch or upload is still pending in the vctx (lock-free guess). */
bool ve__gexec_pending(void);
/* Destroys x now, or once its pending launches completed. */
CUresult ve__gexec_destroy(CUgraphExec x);
/* Records a launch (or upload) of x on t's logical stream, after x's
 * previous one. *barrier: the caller must use the ordered pass-through. */
int ve__gexec_submit(CUgraphExec x, const struct ve_target *t, bool upload, bool *barrier);

/* Per-context copies of a graph (graph_copies.c): a graph launched on a
 * pool entry's lane runs on its SMs only as a copy whose kernel nodes name
 * the entry's context. */
struct ve_gcopies;
bool ve__gcopies_supported(void);
/* A private clone of g; NULL when the driver lacks an entry point or fails. */
struct ve_gcopies *ve__gcopies_create(CUgraph g, unsigned long long inst_flags);
/* The copy for ctx (a lane's context), made on first use; NULL: use the
 * app's exec (ctx is unknown or the app's, the copies are off, or a copy
 * failed). Dispatcher thread only. */
CUgraphExec ve__gcopies_exec(struct ve_gcopies *c, CUcontext ctx, CUcontext app_ctx);
void ve__gcopies_off(struct ve_gcopies *c);
/* c exists and is not off: launches run on their entry's SMs. */
bool ve__gcopies_on(const struct ve_gcopies *c);
void ve__gcopies_destroy(struct ve_gcopies *c);
/* Copies made and copies that failed, since start. */
void ve__gcopies_stats(uint64_t *copies, uint64_t *failed);

/* VE_WATCHDOG_MS (watchdog.c): started once the shim is active. */
void ve__watchdog_start(void);

/* Deferred real destruction of events whose pending records still use them. */
void ve__defer_event_destroy(CUevent e, ve_tok pending);

#endif
