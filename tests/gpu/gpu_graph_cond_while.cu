/* SPDX-License-Identifier: MIT */
/*
 * Conditional WHILE nodes whose bodies are captured into the node's body graph
 * with cudaStreamBeginCaptureToGraph (as NVIDIA's graphConditionalNodes sample
 * does):
 *  - do-while: the handle's default is 1 (cudaGraphCondAssignDefault), the body
 *    does its work and then decrements a counter and sets the condition;
 *  - while: a kernel before the node sets the condition from the counter, so a
 *    counter of 0 runs no iteration;
 *  - captured work must not run at capture time (a runtime that missed the
 *    capture would run it at once and leave the body empty: a wrong value, or
 *    a loop that never ends);
 *  - launches with different counters on several streams, ordered through
 *    events, compared with a CPU model.
 */
#include "gpu_graph_common.h"

static const int N = 1 << 15;

struct loop {
	cudaGraph_t g;
	cudaGraphExec_t x;
};

/* Body: x = affine(x, add + ctr); then ctr -= 1 and condition = ctr > 0. */
static void capture_body(cudaStream_t s, cudaGraph_t body, cudaGraphConditionalHandle h,
			 uint32_t *x, int *ctr, uint32_t add)
{
	CK(cudaStreamBeginCaptureToGraph(s, body, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	check(st == cudaStreamCaptureStatusActive, "capturing", "status %d", (int)st);
	k_affine_step<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, add, ctr);
	CKL();
	k_dec_cond<<<1, 32, 0, s>>>(h, ctr);
	CKL();
	cudaGraph_t out;
	CK(cudaStreamEndCapture(s, &out));
	check(out == body, "capture_to_graph_returns_body", "got another graph");
}

static loop make_loop(cudaStream_t s, uint32_t *x, int *ctr, uint32_t add, bool do_while)
{
	loop l;
	CK(cudaGraphCreate(&l.g, 0));
	cudaGraphConditionalHandle h;
	CK(cudaGraphConditionalHandleCreate(&h, l.g, do_while ? 1 : 0,
					    do_while ? cudaGraphCondAssignDefault : 0));
	cudaGraphNode_t pre = nullptr;
	if (!do_while) {
		/* condition = (*ctr != 0), set by a node before the loop */
		cudaKernelNodeParams kp = {};
		const int *cp = ctr;
		void *args[] = {&h, &cp};
		kp.func = (void *)k_set_cond;
		kp.gridDim = dim3(1);
		kp.blockDim = dim3(32);
		kp.kernelParams = args;
		CK(cudaGraphAddKernelNode(&pre, l.g, nullptr, 0, &kp));
	}
	cudaGraph_t body;
	add_conditional(l.g, pre ? &pre : nullptr, pre ? 1 : 0, h, cudaGraphCondTypeWhile, 1, &body);
	capture_body(s, body, h, x, ctr, add);
	CK(cudaGraphInstantiate(&l.x, l.g, 0));
	return l;
}

static void ref_loop(std::vector<uint32_t> &x, int ctr, uint32_t add, bool do_while)
{
	if (!do_while && ctr == 0)
		return;
	do {
		uint32_t a = add + (uint32_t)ctr * 0x9e3779b9u;
		ref_affine(x, a);
		ctr--;
	} while (ctr > 0);
}

int main()
{
	gpu_init("graph_cond_while");
	cudaStream_t s, s2;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreate(&s2));
	uint32_t *x;
	int *ctr, *hctr;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&ctr, 64));
	CK(cudaMallocHost(&hctr, 64));
	k_init<<<CHAIN_BLOCKS(N), 256, 0, s>>>(x, N, 0x1234u);
	CKL();
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> ref(N), before;
	ref_init(ref, 0x1234u);

	loop dw = make_loop(s, x, ctr, 0x10u, true);
	loop wh = make_loop(s, x, ctr, 0x20u, false);
	CK(cudaStreamSynchronize(s));
	digest_dev(x, N, &before);
	check(before == ref, "capture_did_not_run", "captured loop bodies ran at capture");

	cudaEvent_t e;
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	const int counts[] = {10, 1, 0, 7, 3, 0, 25};
	for (int k = 0; k < 7; k++) {
		bool do_while = k % 2 == 0;
		cudaStream_t st = k % 3 == 2 ? s2 : s;
		hctr[k % 16] = counts[k];
		/* the counter, then the loop: on st, after the previous launch (on s or s2) */
		CK(cudaEventRecord(e, k % 3 == 0 ? s2 : s));
		CK(cudaStreamWaitEvent(st, e, 0));
		CK(cudaMemcpyAsync(ctr, &hctr[k % 16], 4, cudaMemcpyHostToDevice, st));
		CK(cudaGraphLaunch(do_while ? dw.x : wh.x, st));
		CK(cudaEventRecord(e, st));
		CK(cudaStreamWaitEvent(s, e, 0));
		CK(cudaStreamWaitEvent(s2, e, 0));
		ref_loop(ref, counts[k], do_while ? 0x10u : 0x20u, do_while);
	}
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> got;
	digest_dev(x, N, &got);
	check_array("loops", got.data(), ref.data(), (size_t)N);
	int final_ctr = -1;
	CK(cudaMemcpy(&final_ctr, ctr, 4, cudaMemcpyDeviceToHost));
	check(final_ctr == 0, "counter_drained", "counter %d", final_ctr);
	CK(cudaGraphExecDestroy(dw.x));
	CK(cudaGraphExecDestroy(wh.x));
	CK(cudaGraphDestroy(dw.g));
	CK(cudaGraphDestroy(wh.g));
	CK(cudaEventDestroy(e));
	CK(cudaFree(x));
	CK(cudaFree(ctr));
	CK(cudaFreeHost(hctr));
	return gpu_finish();
}
