/* SPDX-License-Identifier: MIT */
/*
 * Launch overhead on a real GPU, driver API, kernels from embedded PTX:
 *  1. app-thread cost per launch: N empty launches on one stream, timed on
 *     the host before synchronizing (what a launch costs the application);
 *  2. dependent chain: N launches of x = 3x + 1 on one stream, synchronized,
 *     per-kernel end-to-end time (launch + dispatch + completion bubbles);
 *     the final value is checked against the host;
 *  3. synchronized steps: one kernel that runs T us on the GPU (a
 *     %globaltimer loop), then cuStreamSynchronize, repeated: per-step time
 *     at T = 0 and T = 300 us (a decode step's length), what a loop that
 *     synchronizes every step pays to see each completion.
 * Prints one JSON line. Run natively and under ve-run (bench/gpu/run_gpu.sh).
 * Build: gcc -O2 -std=c11 -I/usr/local/cuda/include launch_overhead.c \
 *        -L/usr/local/cuda/lib64/stubs -lcuda -o launch_overhead
 */
#define _GNU_SOURCE
#include "cu_bench.h"

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "native";
	int n = argc > 2 ? atoi(argv[2]) : 4000, reps = 15;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fe, fs, fspin;
	CUstream s;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, cu_bench_ptx));
	CK(cuModuleGetFunction(&fe, mod, "empty"));
	CK(cuModuleGetFunction(&fs, mod, "step"));
	CK(cuModuleGetFunction(&fspin, mod, "spin"));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr d;
	CK(cuMemAlloc(&d, 4));
	double launch[64], chain[64];
	for (int r = 0; r < reps + 1; r++) {
		double t0 = now_us();
		for (int i = 0; i < n; i++)
			CK(cuLaunchKernel(fe, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
		double t1 = now_us();
		CK(cuStreamSynchronize(s));
		if (r)
			launch[r - 1] = (t1 - t0) / n;
	}
	uint32_t host = 0, zero = 0;
	for (int r = 0; r < reps + 1; r++) {
		CK(cuMemcpyHtoD(d, &zero, 4));
		CK(cuCtxSynchronize());
		void *args[1] = {&d};
		double t0 = now_us();
		for (int i = 0; i < n; i++)
			CK(cuLaunchKernel(fs, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
		CK(cuStreamSynchronize(s));
		double t1 = now_us();
		if (r)
			chain[r - 1] = (t1 - t0) / n;
		uint32_t got;
		CK(cuMemcpyDtoH(&got, d, 4));
		host = 0;
		for (int i = 0; i < n; i++)
			host = host * 3u + 1u;
		if (got != host) {
			fprintf(stderr, "chain result %u, expected %u\n", got, host);
			return 1;
		}
	}
	/* Synchronized steps: T = 0 and 300 us, 300 steps a rep. */
	double step0[64], step300[64];
	for (int t = 0; t < 2; t++) {
		unsigned long long ns = t ? 300000ull : 0ull;
		void *args[1] = {&ns};
		double *out = t ? step300 : step0;
		for (int r = 0; r < reps + 1; r++) {
			int m = 300;
			double t0 = now_us();
			for (int i = 0; i < m; i++) {
				CK(cuLaunchKernel(fspin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
				CK(cuStreamSynchronize(s));
			}
			double t1 = now_us();
			if (r)
				out[r - 1] = (t1 - t0) / m;
		}
		qsort(out, reps, sizeof(double), cmp_double);
	}
	qsort(launch, reps, sizeof(double), cmp_double);
	qsort(chain, reps, sizeof(double), cmp_double);
	printf("{\"mode\": \"%s\", \"launches\": %d, \"reps\": %d, "
	       "\"launch_us_median\": %.3f, \"launch_us_p10\": %.3f, \"launch_us_p90\": %.3f, "
	       "\"chain_us_per_kernel_median\": %.3f, \"chain_us_p10\": %.3f, \"chain_us_p90\": %.3f, "
	       "\"chain_result_ok\": true, \"sync_step_us_t0_median\": %.3f, "
	       "\"sync_step_us_t300_median\": %.3f, \"sync_step_us_t300_p90\": %.3f}\n",
	       mode, n, reps, launch[reps / 2], launch[reps / 10], launch[reps * 9 / 10],
	       chain[reps / 2], chain[reps / 10], chain[reps * 9 / 10], step0[reps / 2],
	       step300[reps / 2], step300[reps * 9 / 10]);
	return 0;
}
