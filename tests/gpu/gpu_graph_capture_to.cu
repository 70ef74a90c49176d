/* SPDX-License-Identifier: MIT */
/*
 * Capture into an existing graph: cudaStreamBeginCaptureToGraph with
 * dependencies on nodes already in the graph, two captures appended to one
 * graph (the second after the first's last node, found with
 * cudaStreamGetCaptureInfo), cudaStreamUpdateCaptureDependencies to add a
 * dependency on an explicit node mid-capture, and a fork/join to a second
 * stream inside a capture-to-graph. Captured work must not run at capture;
 * launches compared with a CPU model.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 15;

int main()
{
	gpu_init("graph_capture_to");
	cudaStream_t s, side;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	uint32_t *x, *y;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 3u);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, N, 4u);
	CKL();
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> rx(N), ry(N), now;
	ref_init(rx, 3u);
	ref_init(ry, 4u);

	cudaGraph_t g;
	CK(cudaGraphCreate(&g, 0));
	int n = N;
	uint32_t a0 = 0xa0u, a9 = 0xa9u;
	cudaGraphNode_t first = add_affine_node(g, nullptr, 0, &x, &n, &a0);
	cudaGraphNode_t other = add_affine_node(g, nullptr, 0, &y, &n, &a9);

	/* capture 1, after `first`: x = affine(x, 0xb0); fork: y = 3y + x on side; join */
	CK(cudaStreamBeginCaptureToGraph(s, g, &first, nullptr, 1, cudaStreamCaptureModeGlobal));
	k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 0xb0u);
	CKL();
	cudaEvent_t fork, join;
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(side, fork, 0));
	/* the y branch must also follow the explicit node `other` */
	cudaStreamCaptureStatus st;
	const cudaGraphNode_t *deps = nullptr;
	size_t nd = 0;
	CK(cudaStreamGetCaptureInfo(side, &st, nullptr, nullptr, &deps, nullptr, &nd));
	check(st == cudaStreamCaptureStatusActive && nd >= 1, "side_joined", "status %d, %zu deps",
	      (int)st, nd);
	CK(cudaStreamUpdateCaptureDependencies(side, &other, nullptr, 1,
					       cudaStreamAddCaptureDependencies));
	k_mix<<<CHAIN_BLOCKS(N), 256, 0, side>>>(y, x, N);
	CKL();
	CK(cudaEventRecord(join, side));
	CK(cudaStreamWaitEvent(s, join, 0));
	k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 0xc0u);
	CKL();
	const cudaGraphNode_t *tail = nullptr;
	size_t ntail = 0;
	CK(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &tail, nullptr, &ntail));
	check(ntail == 1, "one_tail", "%zu", ntail);
	cudaGraphNode_t last = ntail ? tail[0] : nullptr;
	cudaGraph_t out;
	CK(cudaStreamEndCapture(s, &out));
	check(out == g, "same_graph", "capture returned another graph");

	/* capture 2, appended after capture 1's last node */
	CK(cudaStreamBeginCaptureToGraph(s, g, &last, nullptr, 1, cudaStreamCaptureModeRelaxed));
	k_mix<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, y, N);
	CKL();
	CK(cudaStreamEndCapture(s, &out));
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamSynchronize(side));
	digest_dev(x, N, &now);
	check(now == rx, "capture_did_not_run", "captured work ran at capture");

	cudaGraphExec_t ex;
	CK(cudaGraphInstantiate(&ex, g, 0));
	for (int k = 0; k < 8; k++) {
		cudaStream_t on = k % 2 ? side : s;
		CK(cudaGraphLaunch(ex, on));
		CK(cudaEventRecord(fork, on));
		CK(cudaStreamWaitEvent(k % 2 ? s : side, fork, 0));
		ref_affine(rx, 0xa0u);
		ref_affine(ry, 0xa9u);
		ref_affine(rx, 0xb0u);
		ref_mix(ry, rx);
		ref_affine(rx, 0xc0u);
		ref_mix(rx, ry);
	}
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> gx, gy;
	digest_dev(x, N, &gx);
	digest_dev(y, N, &gy);
	check_array("x", gx.data(), rx.data(), (size_t)N);
	check_array("y", gy.data(), ry.data(), (size_t)N);
	CK(cudaGraphExecDestroy(ex));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaFree(x));
	CK(cudaFree(y));
	return gpu_finish();
}
