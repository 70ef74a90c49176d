/* SPDX-License-Identifier: MIT */
/*
 * Where a synchronized step's overhead goes (a decode step: a graph replay,
 * a read-back of a few bytes, a synchronize), driver API, kernels from
 * embedded PTX (%globaltimer spins). Each part alone and together, on the
 * legacy default stream as PyTorch's current stream is, and on a
 * non-blocking stream:
 *   k    one 400 us kernel, synchronize
 *   kc   the kernel, a 4-byte copy into pinned memory, synchronize
 *   g    a graph of 40 kernels of 10 us, synchronize
 *   gc   the graph, the pinned copy, synchronize
 *   gp   the graph, a 4-byte copy into pageable memory (returns when done)
 *   gcs  gc on a non-blocking stream
 * Per-step time in us, median and p90 of 7 reps of 300 steps. Prints one
 * JSON line. Run natively and under ve-run (bench/gpu/probe/step_parts.sh).
 */
#define _GNU_SOURCE
#include "../cu_bench.h"

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { REPS = 7, STEPS = 300 };
static CUfunction fspin;
static CUdeviceptr dbuf;
static uint32_t *pinned;

static void step(const char *m, CUstream s, CUgraphExec x)
{
	unsigned long long ns = 400000ull;
	void *args[1] = {&ns};
	if (m[0] == 'k')
		CK(cuLaunchKernel(fspin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
	else
		CK(cuGraphLaunch(x, s));
	if (m[1] == 'c')
		CK(cuMemcpyDtoHAsync(pinned, dbuf, 4, s));
	if (m[1] == 'p') {
		uint32_t v;
		CK(cuMemcpyDtoHAsync(&v, dbuf, 4, s));
	}
	CK(cuStreamSynchronize(s));
}

int main(int argc, char **argv)
{
	const char *label = argc > 1 ? argv[1] : "native";
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, cu_bench_ptx));
	CK(cuModuleGetFunction(&fspin, mod, "spin"));
	CK(cuMemAlloc(&dbuf, 4));
	CK(cuMemHostAlloc((void **)&pinned, 4, 0));
	CUstream nb;
	CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	/* The graph: 40 kernels of 10 us, captured on the non-blocking stream. */
	CUgraph g;
	CUgraphExec x;
	unsigned long long ns10 = 10000ull;
	void *a10[1] = {&ns10};
	CK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	for (int i = 0; i < 40; i++)
		CK(cuLaunchKernel(fspin, 1, 1, 1, 1, 1, 1, 0, nb, a10, NULL));
	CK(cuStreamEndCapture(nb, &g));
	CK(cuGraphInstantiate(&x, g, 0));
	static const char *modes[] = {"k", "kc", "g", "gc", "gp", "gcs"};
	printf("{\"label\": \"%s\"", label);
	for (size_t mi = 0; mi < sizeof(modes) / sizeof(modes[0]); mi++) {
		const char *m = modes[mi];
		CUstream s = m[2] == 's' ? nb : NULL;
		double t[REPS];
		for (int i = 0; i < 20; i++)
			step(m, s, x);
		for (int r = 0; r < REPS; r++) {
			double t0 = now_us();
			for (int i = 0; i < STEPS; i++)
				step(m, s, x);
			t[r] = (now_us() - t0) / STEPS;
		}
		qsort(t, REPS, sizeof(double), cmp_double);
		printf(", \"%s_us\": %.2f, \"%s_us_p90\": %.2f", m, t[REPS / 2], m, t[REPS * 9 / 10]);
		fflush(stdout);
	}
	printf("}\n");
	return 0;
}
