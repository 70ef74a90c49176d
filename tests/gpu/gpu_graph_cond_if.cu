/* SPDX-License-Identifier: MIT */
/*
 * Conditional IF (with an else body) and SWITCH nodes. The condition is set by
 * a kernel node before the conditional from a value in device memory that the
 * host changes between launches (with an async copy in stream order), so each
 * launch must take the branch of the value current in stream order. Bodies
 * are filled both ways: captured with cudaStreamBeginCaptureToGraph, and built
 * with cudaGraphAddKernelNode. Compared with a CPU model; launched on a
 * created stream, the legacy stream and the per-thread stream.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 15;

static void capture_affine(cudaStream_t s, cudaGraph_t body, uint32_t *x, uint32_t add)
{
	CK(cudaStreamBeginCaptureToGraph(s, body, nullptr, nullptr, 0,
					 cudaStreamCaptureModeThreadLocal));
	k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, add);
	CKL();
	k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, add + 1);
	CKL();
	cudaGraph_t out;
	CK(cudaStreamEndCapture(s, &out));
}

/* graph: set_cond(*v) -> conditional(type, size) with bodies */
static cudaGraphExec_t make(cudaStream_t s, cudaGraph_t *g, cudaGraphConditionalNodeType t,
			    unsigned size, uint32_t *x, int *v)
{
	CK(cudaGraphCreate(g, 0));
	cudaGraphConditionalHandle h;
	CK(cudaGraphConditionalHandleCreate(&h, *g, 0, cudaGraphCondAssignDefault));
	cudaKernelNodeParams kp = {};
	const int *vp = v;
	void *args[] = {&h, &vp};
	kp.func = (void *)k_set_cond;
	kp.gridDim = dim3(1);
	kp.blockDim = dim3(32);
	kp.kernelParams = args;
	cudaGraphNode_t pre;
	CK(cudaGraphAddKernelNode(&pre, *g, nullptr, 0, &kp));
	cudaGraph_t bodies[4];
	add_conditional(*g, &pre, 1, h, t, size, bodies);
	for (unsigned k = 0; k < size; k++) {
		if (k % 2 == 0) {
			capture_affine(s, bodies[k], x, 0x100u * (k + 1));
		} else {
			int n = N;
			uint32_t a0 = 0x100u * (k + 1), a1 = a0 + 1;
			cudaGraphNode_t n0 = add_affine_node(bodies[k], nullptr, 0, &x, &n, &a0);
			add_affine_node(bodies[k], &n0, 1, &x, &n, &a1);
		}
	}
	cudaGraphExec_t ex;
	CK(cudaGraphInstantiate(&ex, *g, 0));
	return ex;
}

int main()
{
	gpu_init("graph_cond_if");
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *x;
	int *v, *hv;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&v, 64));
	CK(cudaMallocHost(&hv, 4096));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 0x77u);
	CKL();
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> ref(N);
	ref_init(ref, 0x77u);
	cudaGraph_t gif, gsw;
	cudaGraphExec_t xif = make(s, &gif, cudaGraphCondTypeIf, 2, x, v);
	cudaGraphExec_t xsw = make(s, &gsw, cudaGraphCondTypeSwitch, 3, x, v);
	std::vector<uint32_t> now;
	digest_dev(x, N, &now);
	check(now == ref, "capture_did_not_run", "captured bodies ran at capture");

	Rng r(42);
	/* All on one logical order: s, then the legacy stream, then the per-thread
	 * stream, each joined to the previous by a device-wide sync point. */
	cudaStream_t on[] = {s, 0, cudaStreamPerThread};
	for (int k = 0; k < 24; k++) {
		cudaStream_t st = on[(k / 8) % 3];
		bool sw = k % 3 == 2;
		int val = (int)(r.u32() % (sw ? 4 : 2)); /* switch: 3 = no body */
		hv[k] = val;
		CK(cudaMemcpyAsync(v, &hv[k], 4, cudaMemcpyHostToDevice, st));
		CK(cudaGraphLaunch(sw ? xsw : xif, st));
		/* if: body 0 when non-zero, body 1 (else) when zero; switch: body val */
		int b = sw ? val : (val ? 0 : 1);
		if (!sw || val < 3) {
			ref_affine(ref, 0x100u * (b + 1));
			ref_affine(ref, 0x100u * (b + 1) + 1);
		}
		if (k % 8 == 7)
			CK(cudaDeviceSynchronize());
	}
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> got;
	digest_dev(x, N, &got);
	check_array("branches", got.data(), ref.data(), (size_t)N);
	CK(cudaGraphExecDestroy(xif));
	CK(cudaGraphExecDestroy(xsw));
	CK(cudaGraphDestroy(gif));
	CK(cudaGraphDestroy(gsw));
	CK(cudaFree(x));
	CK(cudaFree(v));
	CK(cudaFreeHost(hv));
	return gpu_finish();
}
