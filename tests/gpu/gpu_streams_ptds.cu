/* SPDX-License-Identifier: MIT */
/*
 * The same program model compiled with `nvcc --default-stream per-thread`:
 * the handle 0 and the implicit stream of synchronous calls (cudaMemcpy,
 * cudaMemset) are now the calling thread's per-thread default stream, which the
 * runtime reaches through the driver's _ptsz/_ptds entry points. Checks:
 *  - a chain on stream 0 read back with a synchronous cudaMemcpy and no explicit
 *    sync (same per-thread stream, so stream order covers it);
 *  - several host threads, each with its own per-thread default stream, running
 *    chains concurrently;
 *  - per-thread stream <-> cudaStreamLegacy implicit synchronization ("The
 *    per-thread default stream ... will synchronize with the legacy default
 *    stream if both are used in a program"), and the same for a blocking stream.
 */
#include "gpu_common.h"

#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build with nvcc --default-stream per-thread"
#endif

static const int N = 1 << 16;
static const int STEPS = 300;
static const uint64_t MS = 1000000ull;

/* Chain on the calling thread's default stream (handles 0 and cudaStreamPerThread
 * alternate: both name it here), read back synchronously on the same stream. */
static bool chain_on_default(uint32_t salt, std::vector<uint32_t> &out, char *msg, size_t msz)
{
	uint32_t *d;
	CK(cudaMalloc(&d, N * sizeof(uint32_t)));
	k_init<<<CHAIN_BLOCKS(N), 256>>>(d, N, salt);
	CKL();
	for (int k = 0; k < STEPS; k++) {
		cudaStream_t s = (k & 1) ? cudaStreamPerThread : (cudaStream_t)0;
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(d, N, step_add(salt, k));
		CKL();
	}
	out.assign(N, 0);
	CK(cudaMemcpy(out.data(), d, N * sizeof(uint32_t), cudaMemcpyDeviceToHost));
	CK(cudaFree(d));
	std::vector<uint32_t> ref(N);
	ref_init(ref, salt);
	for (int k = 0; k < STEPS; k++)
		ref_affine(ref, step_add(salt, k));
	for (int i = 0; i < N; i++) {
		if (out[i] != ref[i]) {
			std::snprintf(msg, msz, "[%d]: got 0x%x want 0x%x", i, out[i], ref[i]);
			return false;
		}
	}
	return true;
}

int main()
{
	gpu_init("streams_ptds");

	{
		std::vector<uint32_t> out;
		char msg[160] = "";
		check(chain_on_default(0xa000u, out, msg, sizeof(msg)), "default_stream_chain_sync_copy",
		      "%s", msg);
		digest_vec(out);
	}

	{
		const int T = 4;
		std::vector<uint32_t> out[T];
		char msg[T][160] = {};
		bool ok[T] = {};
		std::vector<std::thread> th;
		for (int t = 0; t < T; t++)
			th.emplace_back([&, t] {
				ok[t] = chain_on_default(0xb000u + t, out[t], msg[t], sizeof(msg[t]));
			});
		for (auto &x : th)
			x.join();
		for (int t = 0; t < T; t++) {
			char name[64];
			std::snprintf(name, sizeof(name), "threads_default_stream_chain[%d]", t);
			check(ok[t], name, "%s", msg[t]);
			digest_vec(out[t]);
		}
	}

	uint32_t *a, *b, *c;
	CK(cudaMalloc(&a, N * sizeof(uint32_t)));
	CK(cudaMalloc(&b, N * sizeof(uint32_t)));
	CK(cudaMalloc(&c, N * sizeof(uint32_t)));

	/* per-thread (0) -> legacy -> per-thread */
	{
		CK(cudaMemset(a, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(b, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(c, 0xee, N * sizeof(uint32_t)));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, 0>>>(a, nullptr, N, 3, 1, 40 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, cudaStreamLegacy>>>(b, a, N, 5, 2, 20 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, 0>>>(c, b, N, 7, 3, 0);
		CKL();
		std::vector<uint32_t> h(N);
		CK(cudaMemcpy(h.data(), c, N * sizeof(uint32_t), cudaMemcpyDeviceToHost));
		std::vector<uint32_t> ra(N), rb(N), rc(N);
		ref_slow_map(ra, nullptr, 3, 1);
		ref_slow_map(rb, &ra, 5, 2);
		ref_slow_map(rc, &rb, 7, 3);
		check_array("per_thread_legacy_per_thread", h.data(), rc.data(), N);
		digest_vec(h);
	}

	/* blocking stream -> legacy -> blocking stream, and the legacy stream's
	 * sync covering it. */
	{
		cudaStream_t s1, s2;
		CK(cudaStreamCreate(&s1));
		CK(cudaStreamCreate(&s2));
		CK(cudaMemset(a, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(b, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(c, 0xee, N * sizeof(uint32_t)));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 9, 4, 40 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, cudaStreamLegacy>>>(b, a, N, 11, 5, 20 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s2>>>(c, b, N, 13, 6, 0);
		CKL();
		std::vector<uint32_t> h(N);
		CK(cudaMemcpyAsync(h.data(), c, N * sizeof(uint32_t), cudaMemcpyDeviceToHost, s2));
		CK(cudaStreamSynchronize(s2));
		std::vector<uint32_t> ra(N), rb(N), rc(N);
		ref_slow_map(ra, nullptr, 9, 4);
		ref_slow_map(rb, &ra, 11, 5);
		ref_slow_map(rc, &rb, 13, 6);
		check_array("blocking_legacy_blocking", h.data(), rc.data(), N);
		digest_vec(h);
		CK(cudaStreamDestroy(s1));
		CK(cudaStreamDestroy(s2));
	}

	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	return gpu_finish();
}
