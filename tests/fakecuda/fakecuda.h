/* SPDX-License-Identifier: MIT */
/*
 * fakecuda: a CPU stand-in for libcuda.so.1 (the CUDA driver API), so the
 * Vitamin-E shim and CUDA backend can be tested on machines without a GPU.
 *
 * The fake exports the driver entry points it implements under the names the
 * real driver exports (versioned _v2/_v3 names and the _ptsz/_ptds
 * per-thread-default-stream variants) with the ABI of the real cuda.h; a
 * function it does not implement does not exist, so the dynamic linker or
 * cuGetProcAddress reports it instead of a stub silently succeeding.
 *
 * Execution model (what makes ordering bugs in a layer above visible):
 *   - every stream is a FIFO run by its own worker thread; different streams
 *     run truly concurrently;
 *   - FAKECUDA_JITTER_US=max sleeps a random 0..max us before every operation
 *     (seeded by FAKECUDA_SEED), so a missing dependency gives wrong results;
 *   - device memory is host memory (malloc); allocations are tracked, and
 *     pointers and sizes are checked against them;
 *   - "kernels" are host functions registered below; a module or library of
 *     any image resolves names against this registry.
 *
 * Environment: FAKECUDA_DEVICES (1), FAKECUDA_SMS (132), FAKECUDA_MEM_MB
 * (143155), FAKECUDA_JITTER_US (0), FAKECUDA_SEED (1), FAKECUDA_TRACE=1 (print
 * each entry point call to stderr).
 *
 * Everything here is callable from any thread, before or after cuInit. The
 * int-returning functions return 0 or a negative errno.
 */
#ifndef VE_TESTS_FAKECUDA_H
#define VE_TESTS_FAKECUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUDA_MAX_SMS	 256
#define FAKECUDA_MAX_PARAMS	 64
#define FAKECUDA_LAUNCH_LOG_SIZE 4096

/* What a kernel function sees of its launch. Valid only during the call. */
struct fakecuda_exec {
	const char *name;	    /* registered kernel name */
	unsigned grid[3], block[3]; /* launch geometry, as given */
	unsigned shared_mem;	    /* dynamic shared memory bytes */
	int cooperative;	    /* cuLaunchCooperativeKernel or the Ex attribute */
	unsigned cluster[3];	    /* cluster dimensions, {0,0,0} without */
	const void *param_buf;	    /* packed copy of the parameters (taken at launch) */
	size_t param_size;
	uint32_t nparams;
	const size_t *param_offsets; /* as cuFuncGetParamInfo reports */
	const size_t *param_sizes;
	uint32_t nsm;		/* SMs this launch ran on: the green context's set or all */
	const uint32_t *sm_ids; /* ascending */
	CUcontext ctx;		/* context of the stream (a green context's CUcontext) */
	CUgreenCtx green;	/* NULL unless the stream belongs to a green context */
	CUstream stream;	/* stream handle (CU_STREAM_LEGACY / _PER_THREAD for those) */
	int device;
	uint64_t seq;	/* global launch sequence number, from 1 */
	int from_graph; /* replayed from a CUDA graph */
};

/* The %smid a block "ran" on: blocks are dealt round-robin over the SM set. */
static inline uint32_t fakecuda_exec_smid(const struct fakecuda_exec *e, uint64_t block_linear)
{
	return e->sm_ids[block_linear % e->nsm];
}

/*
 * A kernel, run on the worker thread of the stream it was launched on, once
 * per launch. params[i] points at the private copy of parameter i (the
 * kernelParams convention). Return 0, or nonzero to simulate a device fault:
 * the device then holds the sticky CUDA_ERROR_ILLEGAL_ADDRESS that later
 * calls in every context report, as on the H200. Like device code it must
 * not call the driver (such calls return CUDA_ERROR_NOT_PERMITTED).
 */
typedef int (*fakecuda_kernel_fn)(void *const *params, const struct fakecuda_exec *exec);

/*
 * Registers kernel @name with @nparams parameters of the given sizes. Offsets
 * use natural alignment: each parameter is aligned to the largest power of
 * two dividing its size, at most 8 (a 12-byte float3 struct gets 4, a pointer
 * 8); the _aligned variant takes explicit alignments (e.g. 16 for float4).
 * -EEXIST if the name is taken, -EINVAL for bad arguments.
 */
int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, uint32_t nparams,
			     const size_t *param_sizes);
int fakecuda_register_kernel_aligned(const char *name, fakecuda_kernel_fn fn, uint32_t nparams,
				     const size_t *param_sizes, const size_t *param_aligns);

/* Limits kernel @name to @max_threads threads per block, as a kernel's register
 * use does on a GPU: CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK reports it and a
 * launch with more is refused (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). 0 restores
 * 1024. -ENOENT for an unknown name. */
int fakecuda_kernel_set_max_threads(const char *name, uint32_t max_threads);

/* One executed kernel launch (graph replays included), in execution order. */
struct fakecuda_launch_record {
	uint64_t seq;
	const char *name;
	CUcontext ctx;
	CUgreenCtx green;	     /* NULL for non-green streams */
	unsigned long long green_id; /* cuGreenCtxGetId value, 0 for none */
	CUstream stream;
	int device;
	uint32_t nsm;
	uint32_t stream_nsm; /* SMs of the context of the stream it was launched into */
	uint64_t sm_mask[FAKECUDA_MAX_SMS / 64];
	unsigned grid[3], block[3];
	int cooperative;
	int from_graph;
	int fault; /* the kernel returned nonzero */
};

/*
 * Copies up to @max records with seq > @after_seq (oldest first) into @out and
 * returns how many. The log keeps the last FAKECUDA_LAUNCH_LOG_SIZE launches.
 */
size_t fakecuda_launch_log(struct fakecuda_launch_record *out, size_t max, uint64_t after_seq);

/* Kernel launches executed so far (not counting skipped ones after a fault). */
uint64_t fakecuda_launch_count(void);
/* Highest launch sequence number handed out so far (0 before the first launch). */
uint64_t fakecuda_launch_seq(void);
/* Launches executed on streams of green context @g (0 for an unknown handle). */
uint64_t fakecuda_green_launch_count(CUgreenCtx g);

/*
 * Calls of an exported entry point so far, by exact symbol name
 * ("cuLaunchKernel_ptsz", "cuMemAlloc_v2"), or summed over all variants of a
 * base name ("cuLaunchKernel" counts cuLaunchKernel and cuLaunchKernel_ptsz;
 * "cuMemcpyHtoD" counts _v2 and _v2_ptds). Calls through pointers from
 * cuGetProcAddress count too: they are the same functions.
 */
uint64_t fakecuda_call_count(const char *symbol);
uint64_t fakecuda_call_count_base(const char *base);
/* Zeroes call counters, launch counters and the launch log. */
void fakecuda_counters_reset(void);

/* SM ids of a green context / an SM resource; returns the count (<= max copied) or -EINVAL. */
int fakecuda_green_sm_ids(CUgreenCtx g, uint32_t *ids, uint32_t max);
int fakecuda_resource_sm_ids(const CUdevResource *r, uint32_t *ids, uint32_t max);

/* Nodes captured into @g, or -EINVAL. */
long fakecuda_graph_node_count(CUgraph g);

/*
 * cudaGraphSetConditional for fake kernels: sets the value of conditional
 * handle @h, as device code does from a kernel of the graph. Values are kept
 * per handle (the driver keeps them per executable graph): two execs of one
 * graph running at once share them. Returns 0, or -EINVAL for an unknown handle.
 */
int fakecuda_cond_set(CUgraphConditionalHandle h, unsigned value);

/* Worker threads currently alive (streams with pending or past work, not yet reaped). */
int fakecuda_live_workers(void);

/* Overrides FAKECUDA_JITTER_US (for every stream, at once) and FAKECUDA_SEED (for streams
 * created afterwards). */
void fakecuda_set_jitter(unsigned max_us, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
