/* SPDX-License-Identifier: MIT */
/*
 * CUDA backend (docs/architecture.md, "CUDA backend"): pool entries are green contexts over
 * the leaves of ONE cuDevSmResourceSplitByCount call, lanes are streams, and
 * completions come from a per-lane sequence counter that each lane writes
 * into host-mapped memory after every op (cuStreamWriteValue64), or from
 * events where the device cannot do that. Every driver call goes through the
 * table of real entry points (cuda_driver.h), never through a symbol the shim
 * overrides.
 *
 * Leaves. info() reports the groups of one split with minCount =
 * cfg.min_leaf_sms, in the driver's order, followed by the split's remainder
 * as the last leaf when it has SMs (H200: 15 x 8 + 12). Any union of them can
 * form one green context (cuDevResourceGenerateDesc takes any outputs of one
 * split), so a leaf mask names the same SMs for the life of the backend, and,
 * as measured on the H200, in every process (docs/architecture.md, "GPU facts
 * the code relies on").
 *
 * Descriptors are executed unchanged (see cuda_desc.h for copies/memsets):
 *   kernel        cuLaunchKernel (kernelParams into the payload's param bytes,
 *                 or the 'extra' buffer form), cuLaunchKernelEx when launch
 *                 attributes are present, cuLaunchCooperativeKernel for
 *                 VE_DESC_COOPERATIVE without attributes
 *   memcpy/memset the Async form on the lane
 *   event record  cuEventRecord(app_event, lane)
 *   host fn       cuLaunchHostFunc (style 1 gets its app stream and status
 *                 through a trampoline, as cuStreamAddCallback would)
 *   call          fn(lane_stream, payload, len); 0 = enqueued, -EAGAIN or
 *                 -EBUSY = nothing enqueued, retry later; any other value is
 *                 a permanent failure reported through the completion status
 *
 * Completion status (an addition to backend.h): 0, a positive CUresult, or a
 * negative errno. The driver's rejection of a submission (bad handle, too
 * many resources, a sticky error already present...) is permanent: submit
 * accepts the op, enqueues nothing for it, and reports the CUresult through
 * its completion, in FIFO order on the lane, so the dispatcher never retries
 * it forever. An execution error found later (a kernel faulted: the stream
 * is in a sticky error state, found by cuStreamQuery on a lane that made no
 * progress for cfg.stall_ns) completes every outstanding op of that lane
 * with the CUresult, so nothing hangs. Only capacity (lane FIFO, event pool,
 * staging memory full) is transient: submit returns -EAGAIN and enqueues
 * nothing.
 *
 * Threads. submit, poll and wait must be called from one thread at a time
 * (the dispatcher thread); they take no lock. info, now, pool_stats,
 * lane_stream and entry_ctx may be called from any thread (lanes and entries
 * never change once made; the shim's read-backs run on a lane's stream from
 * the application's thread). entry_create and copy_lanes_create run before
 * the dispatcher starts. destroy may be called from any thread once the
 * dispatcher has stopped (its pthread_join orders everything before it); it
 * is safe at process exit (driver errors are ignored, and work still running
 * after cfg.destroy_timeout_ns is abandoned, leaking its resources rather
 * than freeing memory the GPU may still write).
 * On its first submit a thread gets the backend's primary context made
 * current (cuCtxSetCurrent), unless that context is already current: CUfunction
 * handles belong to it, and copies with unified addressing resolve their
 * pointers in it.
 *
 * No allocation and no syscall per op: records live in a preallocated FIFO
 * per lane, counters in one host-mapped block, events in a preallocated pool.
 */
#ifndef VE_BACKEND_CUDA_H
#define VE_BACKEND_CUDA_H

#include "backend/backend.h"

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ve_cuda_completion {
	/* env VE_COMPLETION=event|counter if set, else counter where the device can */
	VE_CUDA_COMPLETION_AUTO = 0,
	VE_CUDA_COMPLETION_COUNTER, /* cuStreamWriteValue64 into host-mapped memory */
	VE_CUDA_COMPLETION_EVENT,   /* one event per op from a pool, polled with cuEventQuery */
};

/* Knobs the caller passes; 0 means the default everywhere. */
struct ve_cuda_config {
	int device;		/* device ordinal */
	CUcontext ctx;		/* the app's primary context; NULL = retain it here */
	uint32_t min_leaf_sms;	/* minCount of the split; 0 = 8 */
	int priority;		/* stream priority of every lane (CUDA: lower = higher) */
	bool priority_high;	/* lanes at the greatest priority the context offers
				 * (cuCtxGetStreamPriorityRange); overrides priority */
	uint32_t completion;	/* enum ve_cuda_completion */
	uint32_t lane_depth;	/* ops in flight per lane, rounded up to a power of 2; 0 = 1024 */
	uint32_t max_lanes;	/* counter slots for all lanes; 0 = 4096 */
	uint32_t event_pool;	/* events for EVENT completion; 0 = 8192 */
	uint32_t staging_bytes; /* pinned staging per copy lane for snapshots; 0 = 1 MiB */
	bool no_staging;	/* hand snapshots to the driver as pageable memory */
	uint64_t stall_ns;	/* no progress this long -> cuStreamQuery; 0 = 2 ms */
	uint64_t destroy_timeout_ns; /* destroy waits this long for running work; 0 = 10 s */
};

/* Start-up cost and runtime counters, for logs, docs and benchmarks. */
struct ve_cuda_pool_stats {
	uint32_t entries; /* green contexts created */
	uint32_t streams; /* lanes: green-context streams + copy lanes */
	uint32_t copy_lanes;
	uint32_t completion;	  /* enum ve_cuda_completion actually used */
	uint64_t create_ns;	  /* total time spent in entry_create and copy_lanes_create */
	uint64_t entry_max_ns;	  /* slowest single entry_create */
	uint64_t mem_free_before; /* cuMemGetInfo free bytes at backend creation */
	uint64_t mem_free_after;  /* ... after the last entry/lane creation */
	uint64_t mem_total;
	uint64_t mem_used_bytes; /* before - after (0 if the app freed memory meanwhile) */
	uint64_t pinned_bytes;	 /* host memory the backend allocated with cuMemHostAlloc */
	/* Runtime counters (relaxed; exact once the dispatcher stopped). */
	uint64_t submitted, completed, rejected; /* rejected = driver refused at submit */
	uint64_t exec_errors;			 /* completions with a sticky error */
	uint64_t eagain;			 /* transient capacity refusals */
	uint64_t stall_queries;			 /* cuStreamQuery calls on stalled lanes */
	uint64_t staged_bytes;			 /* snapshot bytes copied into pinned staging */
};

/*
 * Creates the backend for cfg->device: initializes the driver (cuInit),
 * retains the primary context if cfg->ctx is NULL, splits the SMs, and
 * allocates the counter block. On failure *out is NULL, err holds a one-line
 * reason (the caller falls back to pass-through) and the return value is
 * -ENOENT (no driver), -ENOTSUP (no green contexts / stream memory ops where
 * required), -ENODEV (no such or unusable device), -EINVAL (bad
 * configuration) or -ENOMEM.
 */
int ve_cuda_backend_create(const struct ve_cuda_config *cfg, struct ve_backend **out, char *err,
			   size_t errlen);

extern const struct ve_backend_ops ve_cuda_backend_ops;

bool ve_cuda_backend_is_cuda(const struct ve_backend *b);

/* 0, or -EINVAL if b is not a CUDA backend. */
int ve_cuda_backend_pool_stats(struct ve_backend *b, struct ve_cuda_pool_stats *out);

/* The stream of a lane (-ENOENT if not created): for tests and tools. */
int ve_cuda_backend_lane_stream(struct ve_backend *b, uint32_t lane, CUstream *out);
/* The green context of entry idx and its CUcontext (cuCtxFromGreenCtx). */
int ve_cuda_backend_entry_ctx(struct ve_backend *b, uint32_t idx, CUgreenCtx *g, CUcontext *c);
/* The primary context the backend works in. */
CUcontext ve_cuda_backend_primary(struct ve_backend *b);

/* Whether a timed record op (its event slot and generation) is still its
 * event's current record when it reaches the driver. The vctx answers it
 * (ve_vctx_event_record_current). */
typedef bool (*ve_cuda_record_current_fn)(void *arg, uint32_t event_idx, uint64_t generation);
/* With fn set, a timed record that is no longer current is enqueued as an
 * untimed marker: its real cuEventRecord, issued after a later record of the
 * same event (it waited for its predecessors), would overwrite that one's
 * state, and cuEventElapsedTime would return the superseded time. -EINVAL
 * if b is not a CUDA backend. */
int ve_cuda_backend_set_record_filter(struct ve_backend *b, ve_cuda_record_current_fn fn,
				      void *arg);

#endif
