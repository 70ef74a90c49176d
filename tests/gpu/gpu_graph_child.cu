/* SPDX-License-Identifier: MIT */
/*
 * Child graphs: a graph C of two kernel nodes; a graph M = child(C) -> kernel;
 * a top graph T = child(M) -> child(C) with a parallel branch; and a capture
 * that launches another executable graph into the capturing stream (which the
 * driver records as a child-graph node). Launched on several streams between
 * eager work, compared with a CPU model.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 15;

static cudaGraph_t make_c(uint32_t *x, uint32_t base)
{
	cudaGraph_t c;
	CK(cudaGraphCreate(&c, 0));
	int n = N;
	uint32_t a0 = base, a1 = base + 1;
	cudaGraphNode_t k0 = add_affine_node(c, nullptr, 0, &x, &n, &a0);
	add_affine_node(c, &k0, 1, &x, &n, &a1);
	return c;
}

int main()
{
	gpu_init("graph_child");
	cudaStream_t s, s2;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreate(&s2));
	uint32_t *x, *y;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 1u);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, N, 2u);
	CKL();
	std::vector<uint32_t> rx(N), ry(N);
	ref_init(rx, 1u);
	ref_init(ry, 2u);

	cudaGraph_t c = make_c(x, 0x10u), m, t;
	CK(cudaGraphCreate(&m, 0));
	cudaGraphNode_t mc;
	CK(cudaGraphAddChildGraphNode(&mc, m, nullptr, 0, c));
	int n = N;
	uint32_t a = 0x20u;
	add_affine_node(m, &mc, 1, &x, &n, &a);
	CK(cudaGraphCreate(&t, 0));
	cudaGraphNode_t tm, tc;
	CK(cudaGraphAddChildGraphNode(&tm, t, nullptr, 0, m));
	CK(cudaGraphAddChildGraphNode(&tc, t, &tm, 1, c));
	uint32_t ay = 0x30u;
	add_affine_node(t, nullptr, 0, &y, &n, &ay); /* a parallel branch on y */
	cudaGraphExec_t xt;
	CK(cudaGraphInstantiate(&xt, t, 0));
	auto ref_t = [&]() {
		ref_affine(rx, 0x10u);
		ref_affine(rx, 0x11u);
		ref_affine(rx, 0x20u);
		ref_affine(rx, 0x10u);
		ref_affine(rx, 0x11u);
		ref_affine(ry, 0x30u);
	};

	/* A capture that launches xc (an exec of C) inside it: a child node,
	 * where the driver supports it. The H200's driver 580 refuses the
	 * launch (cudaErrorStreamCaptureUnsupported, which invalidates the
	 * capture): the same work then goes on the stream directly. */
	cudaGraphExec_t xc;
	CK(cudaGraphInstantiate(&xc, c, 0));
	cudaGraph_t cap = nullptr;
	cudaGraphExec_t xcap = nullptr;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	k_mix<<<CHAIN_BLOCKS(N), 256, 0, s>>>(y, x, N);
	CKL();
	cudaError_t le = cudaGraphLaunch(xc, s);
	if (le == cudaErrorStreamCaptureUnsupported) {
		(void)cudaGetLastError();
		cudaGraph_t junk = nullptr;
		(void)cudaStreamEndCapture(s, &junk); /* invalidated: no graph */
		(void)cudaGetLastError();
		if (junk)
			CK(cudaGraphDestroy(junk));
		note("launch_in_capture", "cudaGraphLaunch during capture: %s; launched directly",
		     cudaGetErrorString(le));
	} else {
		CK(le);
		k_mix<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, y, N);
		CKL();
		CK(cudaStreamEndCapture(s, &cap));
		size_t nn = 0;
		CK(cudaGraphGetNodes(cap, nullptr, &nn));
		check(nn == 3, "launch_in_capture_is_a_node", "%zu nodes, want 3", nn);
		CK(cudaGraphInstantiate(&xcap, cap, 0));
	}
	auto ref_cap = [&]() {
		ref_mix(ry, rx);
		ref_affine(rx, 0x10u);
		ref_affine(rx, 0x11u);
		ref_mix(rx, ry);
	};

	cudaEvent_t e;
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	for (int k = 0; k < 9; k++) {
		cudaStream_t st = k % 3 == 1 ? s2 : s;
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, st>>>(x, N, 0x40u + (uint32_t)k);
		CKL();
		ref_affine(rx, 0x40u + (uint32_t)k);
		if (k % 2) {
			CK(cudaGraphLaunch(xt, st));
			ref_t();
		} else {
			if (xcap) {
				CK(cudaGraphLaunch(xcap, st));
			} else {
				k_mix<<<CHAIN_BLOCKS(N), 256, 0, st>>>(y, x, N);
				CKL();
				CK(cudaGraphLaunch(xc, st));
				k_mix<<<CHAIN_BLOCKS(N), 256, 0, st>>>(x, y, N);
				CKL();
			}
			ref_cap();
		}
		CK(cudaEventRecord(e, st));
		CK(cudaStreamWaitEvent(st == s ? s2 : s, e, 0));
	}
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> gx, gy;
	digest_dev(x, N, &gx);
	digest_dev(y, N, &gy);
	check_array("x", gx.data(), rx.data(), (size_t)N);
	check_array("y", gy.data(), ry.data(), (size_t)N);
	for (cudaGraphExec_t ex : {xt, xc, xcap})
		if (ex)
			CK(cudaGraphExecDestroy(ex));
	for (cudaGraph_t g : {c, m, t, cap})
		if (g)
			CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(e));
	CK(cudaFree(x));
	CK(cudaFree(y));
	return gpu_finish();
}
