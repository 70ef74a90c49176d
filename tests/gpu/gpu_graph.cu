/* SPDX-License-Identifier: MIT */
/*
 * Stream capture and graph launch:
 *  - capture (global mode) of kernels, a D2D copy, a memset, a D2H copy into
 *    pinned memory and a fork/join onto a second stream through events; the
 *    graph is instantiated and launched ITER times, interleaved with eager
 *    kernels and snapshot copies on the same stream, and also launched on a
 *    different stream and on the legacy stream, ordered through events;
 *  - captures in thread-local and relaxed mode of a 50-kernel chain;
 *  - cudaStreamIsCapturing during and after capture;
 *  - an explicitly built graph (kernel, memset and memcpy nodes) whose kernel
 *    node parameters are changed in the executable graph between launches
 *    (cudaGraphExecKernelNodeSetParams), so a launch must use the parameters
 *    current at its cudaGraphLaunch call.
 * Every result is compared with a CPU simulation of the same sequence.
 */
#include "gpu_common.h"

static const int N = 1 << 16;
static const int ITER = 12;

/* x[i] += y[i] */
__global__ void k_add(uint32_t *x, const uint32_t *y, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] += y[i];
}

#define L(k, s, ...)                                                                               \
	do {                                                                                       \
		k<<<CHAIN_BLOCKS(N), 256, 0, s>>>(__VA_ARGS__);                                    \
		CKL();                                                                             \
	} while (0)

/* The captured body; the CPU twin is ref_body(). */
static void body(cudaStream_t s, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join, uint32_t *x,
		 uint32_t *y, uint32_t *z, uint32_t *hout)
{
	L(k_affine, s, x, N, 0x100u);
	CK(cudaMemcpyAsync(y, x, N * 4, cudaMemcpyDeviceToDevice, s));
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(side, fork, 0));
	L(k_affine, side, y, N, 0x200u); /* branch 1 */
	CK(cudaEventRecord(join, side));
	L(k_affine, s, x, N, 0x300u); /* branch 2, concurrent with branch 1 */
	CK(cudaStreamWaitEvent(s, join, 0));
	L(k_add, s, x, y, N);
	CK(cudaMemsetAsync(z, 0x11, N * 4, s));
	L(k_add, s, x, z, N);
	CK(cudaMemcpyAsync(hout, x, N * 4, cudaMemcpyDeviceToHost, s));
}

static void ref_body(std::vector<uint32_t> &x, std::vector<uint32_t> &y)
{
	ref_affine(x, 0x100u);
	y = x;
	ref_affine(y, 0x200u);
	ref_affine(x, 0x300u);
	for (int i = 0; i < N; i++)
		x[i] += y[i] + 0x11111111u;
}

static const char *cap_status(cudaStreamCaptureStatus st)
{
	return st == cudaStreamCaptureStatusNone     ? "none"
	       : st == cudaStreamCaptureStatusActive ? "active"
						     : "invalidated";
}

static void test_captured(void)
{
	cudaStream_t s, side, other;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
	cudaEvent_t fork, join, e1, e2;
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
	uint32_t *x, *y, *z, *hist, *hout;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	CK(cudaMalloc(&z, N * 4));
	CK(cudaMalloc(&hist, (size_t)ITER * N * 4));
	CK(cudaMallocHost(&hout, N * 4));
	L(k_init, s, x, N, 0xabcu);
	CK(cudaStreamSynchronize(s));

	cudaGraph_t g;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	bool active = st == cudaStreamCaptureStatusActive;
	body(s, side, fork, join, x, y, z, hout);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaStreamIsCapturing(s, &st));
	check(active && st == cudaStreamCaptureStatusNone, "is_capturing",
	      "during capture: %s; after: %s", active ? "active" : "not active", cap_status(st));
	size_t nodes = 0;
	CK(cudaGraphGetNodes(g, nullptr, &nodes));
	report("captured graph has %zu nodes", nodes);
	/* 8 operations (event record/wait only add edges). More nodes would mean
	 * something else was issued into the capturing streams. */
	check(nodes >= 8, "captured_node_count", "%zu nodes (expected 8)", nodes);
	if (nodes != 8)
		note("captured_node_count", "%zu nodes, 8 expected", nodes);
	cudaGraphExec_t ge;
	CK(cudaGraphInstantiate(&ge, g, 0));

	std::vector<uint32_t> rx(N), ry(N), want((size_t)ITER * N);
	ref_init(rx, 0xabcu);
	for (int k = 0; k < ITER; k++) {
		int where = k % 4; /* 0, 1: on s; 2: on `other`; 3: on the legacy stream */
		if (where < 2) {
			CK(cudaGraphLaunch(ge, s));
		} else {
			cudaStream_t t = where == 2 ? other : (cudaStream_t)0;
			CK(cudaEventRecord(e1, s));
			CK(cudaStreamWaitEvent(t, e1, 0));
			CK(cudaGraphLaunch(ge, t));
			CK(cudaEventRecord(e2, t));
			CK(cudaStreamWaitEvent(s, e2, 0));
		}
		ref_body(rx, ry);
		/* Eager work on s between launches: a step and a snapshot. */
		L(k_affine, s, x, N, step_add(0x400u, k));
		ref_affine(rx, step_add(0x400u, k));
		CK(cudaMemcpyAsync(hist + (size_t)k * N, x, N * 4, cudaMemcpyDeviceToDevice, s));
		std::memcpy(want.data() + (size_t)k * N, rx.data(), N * 4);
	}
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> got((size_t)ITER * N);
	CK(cudaMemcpy(got.data(), hist, got.size() * 4, cudaMemcpyDeviceToHost));
	check_array("captured_graph_interleaved_snapshots", got.data(), want.data(), got.size());
	digest_vec(got);
	/* hout holds x as the last launch's D2H node wrote it (before its eager step). */
	{
		std::vector<uint32_t> r2(N);
		/* Recompute x after the last graph launch: want[ITER-1] minus the eager step. */
		ref_init(r2, 0xabcu);
		std::vector<uint32_t> ty(N);
		for (int k = 0; k < ITER; k++) {
			ref_body(r2, ty);
			if (k < ITER - 1)
				ref_affine(r2, step_add(0x400u, k));
		}
		check_array("captured_graph_d2h_node", hout, r2.data(), N);
		digest_add(hout, N * 4);
	}

	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaEventDestroy(e1));
	CK(cudaEventDestroy(e2));
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(side));
	CK(cudaStreamDestroy(other));
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFree(z));
	CK(cudaFree(hist));
	CK(cudaFreeHost(hout));
}

static void test_modes(void)
{
	const int K = 50, LAUNCHES = 5;
	struct {
		cudaStreamCaptureMode mode;
		const char *name;
	} modes[2] = {{cudaStreamCaptureModeThreadLocal, "capture_thread_local_chain"},
		      {cudaStreamCaptureModeRelaxed, "capture_relaxed_chain"}};
	for (auto &m : modes) {
		cudaStream_t s;
		CK(cudaStreamCreate(&s)); /* a blocking stream this time */
		uint32_t *x;
		CK(cudaMalloc(&x, N * 4));
		L(k_init, s, x, N, 0x55u);
		CK(cudaStreamSynchronize(s));
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(s, m.mode));
		for (int k = 0; k < K; k++)
			L(k_affine, s, x, N, step_add(0x600u, k));
		CK(cudaStreamEndCapture(s, &g));
		cudaGraphExec_t ge;
		CK(cudaGraphInstantiate(&ge, g, 0));
		for (int l = 0; l < LAUNCHES; l++)
			CK(cudaGraphLaunch(ge, s));
		std::vector<uint32_t> got(N), r(N);
		CK(cudaMemcpyAsync(got.data(), x, N * 4, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		ref_init(r, 0x55u);
		for (int l = 0; l < LAUNCHES; l++)
			for (int k = 0; k < K; k++)
				ref_affine(r, step_add(0x600u, k));
		check_array(m.name, got.data(), r.data(), N);
		digest_vec(got);
		CK(cudaGraphExecDestroy(ge));
		CK(cudaGraphDestroy(g));
		CK(cudaFree(x));
		CK(cudaStreamDestroy(s));
	}
}

static void test_explicit(void)
{
	uint32_t *x, *y;
	CK(cudaMalloc(&x, N * 4));
	CK(cudaMalloc(&y, N * 4));
	cudaGraph_t g;
	CK(cudaGraphCreate(&g, 0));

	/* memset(y, 0x02) -> kernel affine(x, add) -> memcpy y <- x -> kernel mix(x, y) */
	cudaMemsetParams mp = {};
	mp.dst = y;
	mp.value = 0x02;
	mp.elementSize = 1;
	mp.width = N * 4;
	mp.height = 1;
	mp.pitch = 0;
	cudaGraphNode_t nmem, nk1, ncp, nk2;
	CK(cudaGraphAddMemsetNode(&nmem, g, nullptr, 0, &mp));

	int n = N;
	uint32_t add = 0x700u;
	void *a1[] = {&x, &n, &add};
	cudaKernelNodeParams kp = {};
	kp.func = (void *)k_affine;
	kp.gridDim = dim3(CHAIN_BLOCKS(N));
	kp.blockDim = dim3(256);
	kp.kernelParams = a1;
	CK(cudaGraphAddKernelNode(&nk1, g, &nmem, 1, &kp));
	CK(cudaGraphAddMemcpyNode1D(&ncp, g, &nk1, 1, y, x, N * 4, cudaMemcpyDeviceToDevice));
	const uint32_t *yc = y;
	void *a2[] = {&x, &yc, &n};
	cudaKernelNodeParams kp2 = kp;
	kp2.func = (void *)k_mix;
	kp2.kernelParams = a2;
	CK(cudaGraphAddKernelNode(&nk2, g, &ncp, 1, &kp2));
	cudaGraphExec_t ge;
	CK(cudaGraphInstantiate(&ge, g, 0));

	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	L(k_init, s, x, N, 0x99u);
	uint32_t *hout;
	const int LAUNCHES = 6;
	CK(cudaMallocHost(&hout, (size_t)LAUNCHES * N * 4));
	for (int l = 0; l < LAUNCHES; l++) {
		/* New parameters for the kernel node; the values are copied at the call. */
		uint32_t a = 0x700u + 0x10u * l;
		void *an[] = {&x, &n, &a};
		cudaKernelNodeParams kn = kp;
		kn.kernelParams = an;
		CK(cudaGraphExecKernelNodeSetParams(ge, nk1, &kn));
		CK(cudaGraphLaunch(ge, s));
		CK(cudaMemcpyAsync(hout + (size_t)l * N, x, N * 4, cudaMemcpyDeviceToHost, s));
	}
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> want((size_t)LAUNCHES * N);
	{
		std::vector<uint32_t> r(N), t(N);
		ref_init(r, 0x99u);
		for (int l = 0; l < LAUNCHES; l++) {
			ref_affine(r, 0x700u + 0x10u * l);
			t = r;
			ref_mix(r, t);
			std::memcpy(want.data() + (size_t)l * N, r.data(), N * 4);
		}
	}
	check_array("explicit_graph_exec_set_params", hout, want.data(), want.size());
	digest_add(hout, (size_t)LAUNCHES * N * 4);
	CK(cudaFreeHost(hout));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(x));
	CK(cudaFree(y));
}

int main()
{
	gpu_init("graph");
	test_captured();
	test_modes();
	test_explicit();
	return gpu_finish();
}
