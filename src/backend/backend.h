/* SPDX-License-Identifier: MIT */
/*
 * Backend contract (docs/architecture.md, "CUDA backend", "Simulated GPU"): what the dispatcher needs from a
 * GPU. Two implementations: cuda.c (green contexts, driver API resolved at
 * run time) and sim.c (a modelled GPU in virtual time). A versioned ops table
 * in the style of SQLite's VFS: new members go at the end and bump
 * VE_BACKEND_OPS_VERSION.
 *
 * Lanes. A lane is one backend stream: either stream k of pool entry e
 * (VE_LANE(e, k)) or copy lane k (VE_LANE(VE_LANE_COPY_ENTRY, k)), which
 * belongs to no SM partition and carries copies, memsets and timed event
 * records. Work on one lane runs in submission (FIFO) order; work on different
 * lanes is unordered unless the dispatcher orders it (it never submits an op
 * before its predecessors completed, except behind them on the same lane).
 */
#ifndef VE_BACKEND_H
#define VE_BACKEND_H

#include "core/desc.h"

#include <stdint.h>

#define VE_BACKEND_OPS_VERSION 2
#define VE_MAX_LEAVES	       64
#define VE_LANE_COPY_ENTRY     0xffffu
#define VE_LANE(entry, k)      (((uint32_t)(entry) << 8) | ((uint32_t)(k) & 0xffu))
#define VE_LANE_ENTRY(lane)    ((lane) >> 8)
#define VE_LANE_STREAM(lane)   ((lane) & 0xffu)

struct ve_gpu_info {
	char name[96];
	uint32_t sm_count;
	uint32_t min_partition_sms; /* backend allocation granularity */
	uint32_t nleaves;	    /* leaves of ONE split (the pool's minimum units) */
	uint32_t leaf_sms[VE_MAX_LEAVES];
	uint32_t max_threads_per_sm;
	uint32_t max_blocks_per_sm;
};

struct ve_completion {
	uint64_t cookie; /* what the dispatcher passed to submit */
	/* 0, or an error: a negative errno, or (CUDA backend) the positive
	 * CUresult the driver returned when the op was submitted or that the
	 * lane's stream reported after it failed on the device; with
	 * VE_STATUS_REFUSED when the submission was refused and the context is
	 * still usable. */
	int32_t status;
	uint32_t lane;
	uint64_t t_submit_ns, t_start_ns, t_end_ns; /* backend clock (virtual in the sim) */
};

struct ve_backend;

struct ve_backend_ops {
	uint32_t version;
	const char *name;
	/* Device facts and the leaf split the pool is built from. */
	int (*info)(struct ve_backend *b, struct ve_gpu_info *out);
	/* Pre-create pool entry 'idx' over the union of leaves in 'leaf_mask',
	 * with 'nstreams' lanes. Called at start, never on the dispatch path. */
	int (*entry_create)(struct ve_backend *b, uint32_t idx, uint64_t leaf_mask,
			    uint32_t nstreams);
	/* Create 'n' copy lanes. */
	int (*copy_lanes_create)(struct ve_backend *b, uint32_t n);
	/* Submit the unchanged descriptor on 'lane'. 0 on success; on failure
	 * nothing was enqueued and the op stays the dispatcher's to retry.
	 * Besides bad arguments (-EINVAL, -ENOENT for a lane never created),
	 * only transient conditions (capacity: -EAGAIN) should fail here. An op
	 * the device refuses permanently (the CUDA driver rejecting a launch:
	 * bad handle, too many resources, a sticky error) is accepted instead
	 * and reported through its completion's status, in lane FIFO order,
	 * so that it is never retried forever. */
	int (*submit)(struct ve_backend *b, uint32_t lane, const struct ve_desc *d,
		      uint64_t cookie);
	/* Up to 'max' completions, in no particular order across lanes and in
	 * FIFO order within a lane. Never blocks. */
	int (*poll)(struct ve_backend *b, struct ve_completion *out, int max);
	/* Blocks up to timeout_ns until poll may return something (or returns at
	 * once if work is outstanding and the backend cannot sleep on it). */
	int (*wait)(struct ve_backend *b, uint64_t timeout_ns);
	/* Backend clock in ns (virtual time in the sim). */
	uint64_t (*now)(struct ve_backend *b);
	void (*destroy)(struct ve_backend *b);
	/* Version 2. Like submit, but the op's completion may be reported late:
	 * it completes, in lane order, together with the next op of its lane
	 * submitted with submit() or at the next flush() of the lane. This is
	 * what makes a launch cost one driver call instead of two (a completion
	 * marker per op doubles the submit path). A backend for which reporting
	 * is free may implement it as submit. */
	int (*submit_deferred)(struct ve_backend *b, uint32_t lane, const struct ve_desc *d,
			       uint64_t cookie);
	/* Version 2. Every op submitted on 'lane' so far will be reported by
	 * poll() once it completes. 0, -ENOENT for an unknown lane, or a
	 * transient error (-EAGAIN: retry). A no-op where nothing is deferred. */
	int (*flush)(struct ve_backend *b, uint32_t lane);
	uint32_t caps; /* Version 2: VE_BACKEND_CAP_* */
};

/* The backend's clock is virtual and moves only through wait() (the sim):
 * a dispatcher thread must call wait() instead of sleeping in real time. */
#define VE_BACKEND_CAP_VIRTUAL_CLOCK (1u << 0)

struct ve_backend {
	const struct ve_backend_ops *ops;
};

#endif
