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
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry empty()\n{\n\tret;\n}\n"
			  ".visible .entry step(.param .u64 p)\n{\n"
			  "\t.reg .u64 %rd<3>;\n\t.reg .b32 %r<3>;\n"
			  "\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
			  "\tld.global.u32 %r1, [%rd2];\n\tmad.lo.u32 %r2, %r1, 3, 1;\n"
			  "\tst.global.u32 [%rd2], %r2;\n\tret;\n}\n"
			  ".visible .entry spin(.param .u64 ns)\n{\n"
			  "\t.reg .u64 %rd<5>;\n\t.reg .pred %p<2>;\n"
			  "\tld.param.u64 %rd1, [ns];\n\tmov.u64 %rd2, %globaltimer;\n"
			  "\tadd.u64 %rd3, %rd2, %rd1;\nL:\n\tmov.u64 %rd4, %globaltimer;\n"
			  "\tsetp.lt.u64 %p1, %rd4, %rd3;\n\t@%p1 bra L;\n\tret;\n}\n";

#define CK(x)                                                                                      \
	do {                                                                                       \
		CUresult r_ = (x);                                                                 \
		if (r_ != CUDA_SUCCESS) {                                                          \
			const char *s_ = "?";                                                      \
			cuGetErrorName(r_, &s_);                                                   \
			fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, s_);          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

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
	CK(cuModuleLoadData(&mod, ptx));
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
		qsort(out, reps, sizeof(double), cmp);
	}
	qsort(launch, reps, sizeof(double), cmp);
	qsort(chain, reps, sizeof(double), cmp);
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
