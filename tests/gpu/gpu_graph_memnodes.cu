/* SPDX-License-Identifier: MIT */
/*
 * Graph memory nodes:
 *  - captured stream-ordered allocation: cudaMallocAsync / kernels through the
 *    temporary / cudaFreeAsync inside one capture (alloc and free nodes),
 *    replayed 20 times between eager kernels on the same stream;
 *  - explicit cudaGraphAddMemAllocNode -> kernel -> cudaGraphAddMemFreeNode;
 *  - an allocation that outlives the launch (no free node, instantiated with
 *    cudaGraphInstantiateFlagAutoFreeOnLaunch): its contents are read back
 *    after each launch, before the next one frees and reuses it.
 * Compared with a CPU model.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 16;

/* t[i] = x[i] ^ salt */
__global__ void k_xor(uint32_t *t, const uint32_t *x, int n, uint32_t salt)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		t[i] = x[i] ^ salt;
}

int main()
{
	gpu_init("graph_memnodes");
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *x, *y;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 5u);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, N, 6u);
	CKL();
	std::vector<uint32_t> rx(N), ry(N), tmp(N);
	ref_init(rx, 5u);
	ref_init(ry, 6u);

	/* 1. captured: tmp = alloc; tmp = x ^ 0xff; y = 3y + tmp; free(tmp) */
	cudaGraph_t g1;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	uint32_t *t = nullptr;
	CK(cudaMallocAsync(&t, N * 4, s));
	k_xor<<<CHAIN_BLOCKS(N), 256, 0, s>>>(t, x, N, 0xffu);
	CKL();
	k_mix<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, t, N);
	CKL();
	CK(cudaFreeAsync(t, s));
	CK(cudaStreamEndCapture(s, &g1));
	cudaGraphExec_t x1;
	CK(cudaGraphInstantiate(&x1, g1, 0));
	for (int k = 0; k < 20; k++) {
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, (uint32_t)k);
		CKL();
		ref_affine(rx, (uint32_t)k);
		CK(cudaGraphLaunch(x1, s));
		for (int i = 0; i < N; i++)
			ry[i] = ry[i] * 3u + (rx[i] ^ 0xffu);
	}
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> got;
	digest_dev(y, N, &got);
	check_array("captured_alloc_free", got.data(), ry.data(), (size_t)N);

	/* 2. explicit nodes: alloc -> kernel -> free, the kernel through the node's pointer */
	cudaGraph_t g2;
	CK(cudaGraphCreate(&g2, 0));
	cudaMemAllocNodeParams ap = {};
	ap.poolProps.allocType = cudaMemAllocationTypePinned;
	ap.poolProps.location.type = cudaMemLocationTypeDevice;
	ap.poolProps.location.id = 0;
	ap.bytesize = N * 4;
	cudaGraphNode_t na, nk, nm, nf;
	CK(cudaGraphAddMemAllocNode(&na, g2, nullptr, 0, &ap));
	uint32_t *ta = (uint32_t *)ap.dptr;
	cudaKernelNodeParams kp = {};
	int n = N;
	uint32_t salt = 0x3c3cu;
	const uint32_t *xs = x;
	void *args[] = {&ta, &xs, &n, &salt};
	kp.func = (void *)k_xor;
	kp.gridDim = dim3(CHAIN_BLOCKS(N));
	kp.blockDim = dim3(256);
	kp.kernelParams = args;
	CK(cudaGraphAddKernelNode(&nk, g2, &na, 1, &kp));
	cudaKernelNodeParams mp = {};
	uint32_t *ys = y;
	const uint32_t *tac = ta;
	void *margs[] = {&ys, &tac, &n};
	mp.func = (void *)k_mix;
	mp.gridDim = dim3(CHAIN_BLOCKS(N));
	mp.blockDim = dim3(256);
	mp.kernelParams = margs;
	CK(cudaGraphAddKernelNode(&nm, g2, &nk, 1, &mp));
	CK(cudaGraphAddMemFreeNode(&nf, g2, &nm, 1, (void *)ta));
	cudaGraphExec_t x2;
	CK(cudaGraphInstantiate(&x2, g2, 0));
	for (int k = 0; k < 10; k++) {
		CK(cudaGraphLaunch(x2, k % 2 ? s : cudaStreamPerThread));
		for (int i = 0; i < N; i++)
			ry[i] = ry[i] * 3u + (rx[i] ^ 0x3c3cu);
		CK(cudaDeviceSynchronize());
	}
	digest_dev(y, N, &got);
	check_array("explicit_alloc_free", got.data(), ry.data(), (size_t)N);

	/* 3. an allocation that outlives the launch, freed at the next launch */
	cudaGraph_t g3;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	uint32_t *keep = nullptr;
	CK(cudaMallocAsync(&keep, N * 4, s));
	k_xor<<<CHAIN_BLOCKS(N), 256, 0, s>>>(keep, y, N, 0x5au);
	CKL();
	CK(cudaStreamEndCapture(s, &g3));
	cudaGraphExec_t x3;
	CK(cudaGraphInstantiate(&x3, g3, cudaGraphInstantiateFlagAutoFreeOnLaunch));
	std::vector<uint32_t> out(N);
	for (int k = 0; k < 5; k++) {
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, N, 0x900u + (uint32_t)k);
		CKL();
		ref_affine(ry, 0x900u + (uint32_t)k);
		CK(cudaGraphLaunch(x3, s));
		CK(cudaMemcpyAsync(out.data(), keep, N * 4, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		for (int i = 0; i < N; i++)
			tmp[i] = ry[i] ^ 0x5au;
		check_array("kept_allocation", out.data(), tmp.data(), (size_t)N);
		digest_vec(out);
	}
	CK(cudaGraphExecDestroy(x1));
	CK(cudaGraphExecDestroy(x2));
	CK(cudaGraphExecDestroy(x3));
	CK(cudaDeviceSynchronize());
	CK(cudaDeviceGraphMemTrim(0));
	CK(cudaGraphDestroy(g1));
	CK(cudaGraphDestroy(g2));
	CK(cudaGraphDestroy(g3));
	CK(cudaFree(x));
	CK(cudaFree(y));
	return gpu_finish();
}
