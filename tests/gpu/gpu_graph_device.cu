/* SPDX-License-Identifier: MIT */
/*
 * Device graph launch: a graph D instantiated with
 * cudaGraphInstantiateFlagDeviceLaunch and uploaded, then launched from a
 * kernel of a host-launched graph H, as a tail launch (D runs after H
 * completes, so the order is deterministic) and fire-and-forget into a
 * separate buffer (H is complete only once it is). D is also launched from the
 * host. Compared with a CPU model. Built with -rdc=true -lcudadevrt.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 14;

__global__ void k_launch_tail(cudaGraphExec_t d)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		cudaGraphLaunch(d, cudaStreamGraphTailLaunch);
}

__global__ void k_launch_fnf(cudaGraphExec_t d)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		cudaGraphLaunch(d, cudaStreamGraphFireAndForget);
}

static cudaGraph_t one_affine(uint32_t *x, uint32_t add)
{
	cudaGraph_t g;
	CK(cudaGraphCreate(&g, 0));
	int n = N;
	add_affine_node(g, nullptr, 0, &x, &n, &add);
	return g;
}

static cudaGraph_t launcher(uint32_t *x, uint32_t add, void *kernel, cudaGraphExec_t d)
{
	cudaGraph_t g = one_affine(x, add);
	size_t nn = 1;
	cudaGraphNode_t first;
	CK(cudaGraphGetNodes(g, &first, &nn));
	cudaKernelNodeParams kp = {};
	void *args[] = {&d};
	kp.func = kernel;
	kp.gridDim = dim3(1);
	kp.blockDim = dim3(32);
	kp.kernelParams = args;
	cudaGraphNode_t k;
	CK(cudaGraphAddKernelNode(&k, g, &first, 1, &kp));
	return g;
}

int main()
{
	gpu_init("graph_device");
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *x, *y;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 11u);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, N, 12u);
	CKL();
	std::vector<uint32_t> rx(N), ry(N);
	ref_init(rx, 11u);
	ref_init(ry, 12u);

	cudaGraph_t gd = one_affine(x, 0x33u), gf = one_affine(y, 0x44u);
	cudaGraphExec_t xd, xf;
	CK(cudaGraphInstantiate(&xd, gd, cudaGraphInstantiateFlagDeviceLaunch));
	CK(cudaGraphInstantiate(&xf, gf, cudaGraphInstantiateFlagDeviceLaunch));
	CK(cudaGraphUpload(xd, s));
	CK(cudaGraphUpload(xf, s));
	cudaGraph_t gt = launcher(x, 0x1u, (void *)k_launch_tail, xd);
	cudaGraph_t gn = launcher(x, 0x2u, (void *)k_launch_fnf, xf);
	cudaGraphExec_t xt, xn;
	CK(cudaGraphInstantiate(&xt, gt, 0));
	CK(cudaGraphInstantiate(&xn, gn, 0));
	for (int k = 0; k < 10; k++) {
		CK(cudaGraphLaunch(xt, s)); /* x: +1 then, tail, +0x33 */
		ref_affine(rx, 0x1u);
		ref_affine(rx, 0x33u);
		CK(cudaGraphLaunch(xn, s)); /* x: +2; y: +0x44 (fire and forget) */
		ref_affine(rx, 0x2u);
		ref_affine(ry, 0x44u);
		if (k % 3 == 0) {
			CK(cudaGraphLaunch(xd, s)); /* the device graph from the host */
			ref_affine(rx, 0x33u);
		}
	}
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> gx, gy;
	digest_dev(x, N, &gx);
	digest_dev(y, N, &gy);
	check_array("tail_launch", gx.data(), rx.data(), (size_t)N);
	check_array("fire_and_forget", gy.data(), ry.data(), (size_t)N);
	for (cudaGraphExec_t e : {xt, xn, xd, xf})
		CK(cudaGraphExecDestroy(e));
	for (cudaGraph_t g : {gd, gf, gt, gn})
		CK(cudaGraphDestroy(g));
	CK(cudaFree(x));
	CK(cudaFree(y));
	return gpu_finish();
}
