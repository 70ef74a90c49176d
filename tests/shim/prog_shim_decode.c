/* SPDX-License-Identifier: MIT */
/*
 * A decode loop shaped like bench/gpu/graphs/decode_replay.py: one CUDA graph
 * replay per step (a kernel of a library, as PyTorch launches them, that
 * holds its stream VETEST_STEP_US, default 200), then a read of the step's
 * result into pageable memory (torch's .item()) and a synchronize.
 * VETEST_STEPS steps (default 500). Self-checking (the value read each step);
 * prints "decode: N steps in S s (R steps/s)".
 */
#include "prog_shim.h"

static CUfunction f_step;

/* *p += 1 after holding the stream for us microseconds (a busy wait: a
 * sleep would measure the host's timer slack, not the runtime). */
static int k_step(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *);
	uint64_t end = now_ns() + (uint64_t)P(1, uint32_t) * 1000u;
	while (now_ns() < end)
		;
	*p += 1;
	return 0;
}

int main(void)
{
	static const size_t step_sz[] = {8, 4};
	if (fakecuda_register_kernel("step", k_step, 2, step_sz)) {
		fprintf(stderr, "FAIL: kernel registration\n");
		return 1;
	}
	setup_common();
	CUlibrary lib;
	CUkernel k;
	CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&k, lib, "step"));
	f_step = (CUfunction)(void *)k;
	const char *e = getenv("VETEST_STEPS");
	uint32_t steps = e ? (uint32_t)atoi(e) : 500;
	e = getenv("VETEST_STEP_US");
	uint32_t us = e ? (uint32_t)atoi(e) : 200;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(sizeof(uint32_t));
	CUgraph g;
	CUgraphExec x;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	void *args[] = {&p, &us};
	CK(launch1(f_step, s, args));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	uint64_t t0 = now_ns();
	for (uint32_t i = 1; i <= steps && !failures; i++) {
		CK(cuGraphLaunch(x, s));
		uint32_t v = 0;
		CK(cuMemcpyDtoHAsync(&v, p, sizeof(v), s)); /* pageable: done on return */
		CK(cuStreamSynchronize(s));
		CHECKF(v == i, "step %u read %u", i, v);
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	printf("decode: %u steps in %.3f s (%.1f steps/s), %d failed checks\n", steps, secs,
	       secs > 0 ? steps / secs : 0.0, (int)failures);
	return failures ? 1 : 0;
}
