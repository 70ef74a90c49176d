/* SPDX-License-Identifier: MIT */
/*
 * cuBLAS (libcublas launches through cuLaunchKernelEx): SGEMM bitwise
 * reproducibility. cuBLAS documents that its routines give bit-wise identical
 * results run to run on the same architecture and SM count when a single
 * stream is active (cuBLAS docs, "Results reproducibility"); Vitamin-E keeps
 * the launches unchanged, so the result must also match the native run (the
 * DIGEST line). Checks:
 *  - 20 repetitions of C = A*B (random floats, 512^3) are bitwise equal to the
 *    first, and close to a CPU reference (a sanity bound, not bitwise);
 *  - a GEMM on small integers is exact, so it equals the CPU result bitwise;
 *  - the same GEMM on the legacy stream equals the one on the created stream.
 */
#include "gpu_common.h"

#include <cmath>
#include <cublas_v2.h>

#define CB(call)                                                                                   \
	do {                                                                                       \
		cublasStatus_t cb_s_ = (call);                                                     \
		if (cb_s_ != CUBLAS_STATUS_SUCCESS) {                                              \
			std::printf("FAIL %s.cublas_call: %s returned %d at %s:%d\n", g_prog,      \
				    #call, (int)cb_s_, __FILE__, __LINE__);                        \
			std::fflush(stdout);                                                       \
			std::_Exit(1);                                                             \
		}                                                                                  \
	} while (0)

static const int M = 512, NN = 512, K = 512, REPS = 20;

static void cpu_gemm(const std::vector<float> &a, const std::vector<float> &b, std::vector<double> &c)
{
	/* column-major: C[i + j*M] = sum_k A[i + k*M] * B[k + j*K] */
	c.assign((size_t)M * NN, 0.0);
	for (int j = 0; j < NN; j++)
		for (int k = 0; k < K; k++) {
			double bv = b[k + (size_t)j * K];
			for (int i = 0; i < M; i++)
				c[i + (size_t)j * M] += (double)a[i + (size_t)k * M] * bv;
		}
}

int main()
{
	gpu_init("cublas");
	cublasHandle_t h;
	CB(cublasCreate(&h));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CB(cublasSetStream(h, s));

	Rng rng(42);
	std::vector<float> a((size_t)M * K), b((size_t)K * NN);
	for (auto &v : a)
		v = (float)((int)(rng.u32() % 2001) - 1000) / 1024.0f;
	for (auto &v : b)
		v = (float)((int)(rng.u32() % 2001) - 1000) / 1024.0f;
	float *da, *db, *dc;
	CK(cudaMalloc(&da, a.size() * 4));
	CK(cudaMalloc(&db, b.size() * 4));
	CK(cudaMalloc(&dc, (size_t)M * NN * 4));
	CK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
	const float one = 1.0f, zero = 0.0f;

	std::vector<float> first((size_t)M * NN), cur((size_t)M * NN);
	int differing = 0, first_bad_rep = -1;
	for (int r = 0; r < REPS; r++) {
		CK(cudaMemsetAsync(dc, 0xff, (size_t)M * NN * 4, s)); /* NaN poison */
		CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, da, M, db, K, &zero, dc,
			       M));
		CK(cudaMemcpyAsync(r ? cur.data() : first.data(), dc, cur.size() * 4,
				   cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		if (r && std::memcmp(cur.data(), first.data(), cur.size() * 4) != 0) {
			differing++;
			if (first_bad_rep < 0)
				first_bad_rep = r;
		}
	}
	check(differing == 0, "sgemm_bitwise_repeatable", "%d of %d repetitions differ (first: %d)",
	      differing, REPS - 1, first_bad_rep);
	digest_vec(first);
	{
		std::vector<double> ref;
		cpu_gemm(a, b, ref);
		double worst = 0;
		for (size_t i = 0; i < ref.size(); i++)
			worst = std::max(worst, std::fabs((double)first[i] - ref[i]));
		report("sgemm %dx%dx%d: max |gpu - cpu(double)| = %.3g", M, NN, K, worst);
		check(worst < 1e-2, "sgemm_close_to_cpu", "max abs error %.3g", worst);
	}

	/* Small integers: every product and partial sum is exact in float. */
	for (auto &v : a)
		v = (float)((int)(rng.u32() % 9) - 4);
	for (auto &v : b)
		v = (float)((int)(rng.u32() % 9) - 4);
	CK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
	CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, da, M, db, K, &zero, dc, M));
	CK(cudaMemcpyAsync(cur.data(), dc, cur.size() * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	{
		std::vector<double> ref;
		cpu_gemm(a, b, ref);
		std::vector<float> want(ref.size());
		for (size_t i = 0; i < ref.size(); i++)
			want[i] = (float)ref[i];
		size_t bad = 0;
		for (size_t i = 0; i < want.size(); i++)
			bad += std::memcmp(&want[i], &cur[i], 4) != 0;
		check(bad == 0, "sgemm_integer_exact", "%zu of %zu elements differ", bad, want.size());
		digest_vec(cur);
	}

	/* Same GEMM on the legacy stream (one stream active at a time). */
	CB(cublasSetStream(h, 0));
	std::vector<float> leg((size_t)M * NN);
	CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, da, M, db, K, &zero, dc, M));
	CK(cudaMemcpy(leg.data(), dc, leg.size() * 4, cudaMemcpyDeviceToHost));
	check(std::memcmp(leg.data(), cur.data(), leg.size() * 4) == 0, "sgemm_legacy_stream_same",
	      "result on the legacy stream differs");

	CB(cublasDestroy(h));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dc));
	return gpu_finish();
}
