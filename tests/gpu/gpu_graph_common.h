/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the tests/gpu/gpu_graph_*.cu programs: CUDA graphs as ordinary
 * operations under Vitamin-E (docs/semantics.md, "Capture and graphs").
 * Conditional nodes: CUDA Programming Guide, "Conditional graph nodes";
 * cudaGraphSetConditional is called by device code of the graph.
 */
#ifndef VE_GPU_GRAPH_COMMON_H
#define VE_GPU_GRAPH_COMMON_H

#include "gpu_common.h"

#include <cuda.h>

/* A driver API call that must succeed (the driver's CK()). Programs that use
 * it link with -lcuda. */
#define CU(call)                                                                                   \
	do {                                                                                       \
		CUresult cu_r_ = (call);                                                           \
		if (cu_r_ != CUDA_SUCCESS) {                                                       \
			const char *cu_n_ = "?";                                                   \
			cuGetErrorName(cu_r_, &cu_n_);                                             \
			std::printf("FAIL %s.driver_call: %s returned %s at %s:%d\n", g_prog,      \
				    #call, cu_n_, __FILE__, __LINE__);                             \
			std::_Exit(1);                                                             \
		}                                                                                  \
	} while (0)

/* Block b records the SM it ran on (+1, so 0 means "did not run") in
 * smid[b] after a short spin, so that the blocks spread over every SM the
 * launch may use, and tag * 1000 + b in val[b]. */
__global__ void k_where(uint32_t *smid, uint32_t *val, int tag)
{
	if (threadIdx.x == 0) {
		spin_ns(20000);
		uint32_t id;
		asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
		smid[blockIdx.x] = id + 1;
		val[blockIdx.x] = (uint32_t)tag * 1000u + blockIdx.x;
	}
}

/* *ctr -= 1 (by one thread); the loop goes on while it is non-zero. */
__global__ void k_dec_cond(cudaGraphConditionalHandle h, int *ctr)
{
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		int c = *ctr - 1;
		*ctr = c;
		cudaGraphSetConditional(h, c > 0 ? 1u : 0u);
	}
}

/* The condition from memory: value = *v (an if takes non-zero, a switch the index). */
__global__ void k_set_cond(cudaGraphConditionalHandle h, const int *v)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		cudaGraphSetConditional(h, (unsigned)*v);
}

/* x[i] = affine(x[i], add + *step, i): the step read from memory makes each
 * loop iteration's work distinct, so a dropped or repeated iteration shows. */
__global__ void k_affine_step(uint32_t *x, int n, uint32_t add, const int *step)
{
	uint32_t a = add + (uint32_t)*step * 0x9e3779b9u;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = affine(x[i], a, (uint32_t)i);
}

/* Adds a conditional node to g; returns the node, *body gets body graph k. */
inline cudaGraphNode_t add_conditional(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				       cudaGraphConditionalHandle h, cudaGraphConditionalNodeType t,
				       unsigned size, cudaGraph_t *bodies)
{
	cudaGraphNodeParams p = {};
	p.type = cudaGraphNodeTypeConditional;
	p.conditional.handle = h;
	p.conditional.type = t;
	p.conditional.size = size;
	cudaGraphNode_t n;
	CK(cudaGraphAddNode(&n, g, deps, nullptr, ndeps, &p));
	for (unsigned k = 0; k < size; k++)
		bodies[k] = p.conditional.phGraph_out[k];
	return n;
}

/* A kernel node x = affine(x, add) added to g after deps. */
inline cudaGraphNode_t add_affine_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				       uint32_t **x, int *n, uint32_t *add)
{
	cudaKernelNodeParams kp = {};
	void *args[] = {x, n, add};
	kp.func = (void *)k_affine;
	kp.gridDim = dim3(CHAIN_BLOCKS(*n));
	kp.blockDim = dim3(256);
	kp.kernelParams = args;
	cudaGraphNode_t node;
	CK(cudaGraphAddKernelNode(&node, g, deps, ndeps, &kp));
	return node;
}

inline void digest_dev(const uint32_t *d, int n, std::vector<uint32_t> *out = nullptr)
{
	std::vector<uint32_t> h(n);
	CK(cudaMemcpy(h.data(), d, (size_t)n * 4, cudaMemcpyDeviceToHost));
	digest_vec(h);
	if (out)
		*out = h;
}

#endif
