/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the single-file driver-API benchmarks (launch_overhead.c,
 * probe/step_parts.c): their kernels as embedded PTX (no nvcc needed), a
 * check that exits on a driver error, a clock and a comparator for qsort.
 * Header-only: each benchmark still builds with one gcc line.
 */
#ifndef VE_BENCH_CU_BENCH_H
#define VE_BENCH_CU_BENCH_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* empty(): nothing; step(p): *p = 3 * *p + 1; spin(ns): holds its SM ns
 * nanoseconds of %globaltimer. */
static const char cu_bench_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
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

static inline double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#endif
