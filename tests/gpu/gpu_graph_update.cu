/* SPDX-License-Identifier: MIT */
/*
 * Changing an executable graph between launches: cudaGraphExecKernelNodeSetParams,
 * cudaGraphNodeSetEnabled, cudaGraphExecUpdate (from a graph of the same topology
 * with other parameters), each made while the previous launch is still queued
 * behind a slow kernel. "Already enqueued or running launches of hGraphExec are
 * not affected" (cudaGraphExecKernelNodeSetParams): every launch must use the
 * exec as it was at its cudaGraphLaunch call. Then a destroy with a launch still
 * queued. Compared with a CPU model.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 15;
static const uint64_t SLOW_NS = 3000000; /* 3 ms: the launch is queued meanwhile */

static cudaGraph_t make(uint32_t *x, uint32_t a0, uint32_t a1, cudaGraphNode_t *k0,
			cudaGraphNode_t *k1)
{
	cudaGraph_t g;
	CK(cudaGraphCreate(&g, 0));
	int n = N;
	*k0 = add_affine_node(g, nullptr, 0, &x, &n, &a0);
	*k1 = add_affine_node(g, k0, 1, &x, &n, &a1);
	return g;
}

static void slow(cudaStream_t s, uint32_t *scratch)
{
	k_slow_map<<<SLOW_BLOCKS, 256, 0, s>>>(scratch, nullptr, 1024, 1u, 0u, SLOW_NS);
	CKL();
}

int main()
{
	gpu_init("graph_update");
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *x, *scratch;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&scratch, 1024 * 4));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 9u);
	CKL();
	std::vector<uint32_t> ref(N);
	ref_init(ref, 9u);
	cudaGraphNode_t a0, a1, b0, b1;
	cudaGraph_t ga = make(x, 0x1u, 0x2u, &a0, &a1), gb = make(x, 0x7u, 0x8u, &b0, &b1);
	cudaGraphExec_t ex;
	CK(cudaGraphInstantiate(&ex, ga, 0));

	/* 1. new parameters for node a1 */
	slow(s, scratch);
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x1u);
	ref_affine(ref, 0x2u);
	cudaKernelNodeParams kp = {};
	int n = N;
	uint32_t add = 0x55u;
	void *args[] = {&x, &n, &add};
	kp.func = (void *)k_affine;
	kp.gridDim = dim3(CHAIN_BLOCKS(N));
	kp.blockDim = dim3(256);
	kp.kernelParams = args;
	CK(cudaGraphExecKernelNodeSetParams(ex, a1, &kp));
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x1u);
	ref_affine(ref, 0x55u);

	/* 2. node a0 disabled, then enabled again */
	slow(s, scratch);
	CK(cudaGraphNodeSetEnabled(ex, a0, 0));
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x55u);
	slow(s, scratch);
	CK(cudaGraphNodeSetEnabled(ex, a0, 1));
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x1u);
	ref_affine(ref, 0x55u);

	/* 3. the whole exec updated from gb */
	slow(s, scratch);
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x1u);
	ref_affine(ref, 0x55u);
	cudaGraphExecUpdateResultInfo info;
	CK(cudaGraphExecUpdate(ex, gb, &info));
	check(info.result == cudaGraphExecUpdateSuccess, "update_accepted", "result %d",
	      (int)info.result);
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x7u);
	ref_affine(ref, 0x8u);
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> got;
	digest_dev(x, N, &got);
	check_array("launches_see_exec_at_launch", got.data(), ref.data(), (size_t)N);

	/* 4. destroyed while a launch is queued: the launch still runs */
	slow(s, scratch);
	CK(cudaGraphLaunch(ex, s));
	ref_affine(ref, 0x7u);
	ref_affine(ref, 0x8u);
	CK(cudaGraphExecDestroy(ex));
	CK(cudaStreamSynchronize(s));
	digest_dev(x, N, &got);
	check_array("destroy_with_queued_launch", got.data(), ref.data(), (size_t)N);
	CK(cudaGraphDestroy(ga));
	CK(cudaGraphDestroy(gb));
	CK(cudaFree(x));
	CK(cudaFree(scratch));
	return gpu_finish();
}
