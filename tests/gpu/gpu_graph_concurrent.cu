/* SPDX-License-Identifier: MIT */
/*
 * Concurrent replay: four executable graphs, each a chain of 8 kernels that
 * spin 250 us on 16 blocks, replayed 20 times each on four streams at once.
 * CUDA lets graphs on different streams run concurrently; a runtime that makes
 * the host wait at each launch, or puts the four streams behind each other,
 * takes about four times as long. Reports the wall time of the concurrent
 * replay and of the same replays on one stream ("TIME" lines, read by
 * bench/gpu/graphs/run), checks every result. Concurrency itself is a NOTE:
 * CUDA does not promise it.
 */
#include "gpu_graph_common.h"

static const int NS = 4, CHAIN = 8, REPS = 20, M = 4096;
static const uint64_t SPIN_NS = 250000;

int main()
{
	gpu_init("graph_concurrent");
	cudaStream_t s[NS];
	uint32_t *buf[NS];
	cudaGraph_t g[NS];
	cudaGraphExec_t x[NS];
	std::vector<std::vector<uint32_t>> ref(NS, std::vector<uint32_t>(M));
	for (int i = 0; i < NS; i++) {
		CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
		CK(cudaMalloc(&buf[i], 2 * M * 4));
		k_init<<<CHAIN_BLOCKS(M), 256, 0, s[i]>>>(buf[i], M, (uint32_t)i);
		CKL();
		ref_init(ref[i], (uint32_t)i);
		CK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal));
		for (int k = 0; k < CHAIN; k++) {
			uint32_t *src = buf[i] + (k % 2) * M, *dst = buf[i] + ((k + 1) % 2) * M;
			k_slow_map<<<SLOW_BLOCKS, 256, 0, s[i]>>>(dst, src, M, 3u, (uint32_t)(i * 16 + k),
								   SPIN_NS);
			CKL();
		}
		CK(cudaStreamEndCapture(s[i], &g[i]));
		CK(cudaGraphInstantiate(&x[i], g[i], 0));
	}
	auto model = [&](int i, int reps) {
		for (int r = 0; r < reps; r++)
			for (int k = 0; k < CHAIN; k++) {
				std::vector<uint32_t> src = ref[i];
				ref_slow_map(ref[i], &src, 3u, (uint32_t)(i * 16 + k));
			}
	};
	/* warm-up: one replay each */
	for (int i = 0; i < NS; i++) {
		CK(cudaGraphLaunch(x[i], s[i]));
		model(i, 1);
	}
	CK(cudaDeviceSynchronize());

	uint64_t t0 = host_ns();
	for (int r = 0; r < REPS; r++)
		for (int i = 0; i < NS; i++)
			CK(cudaGraphLaunch(x[i], s[i]));
	CK(cudaDeviceSynchronize());
	double conc_ms = (double)(host_ns() - t0) / 1e6;
	for (int i = 0; i < NS; i++)
		model(i, REPS);

	t0 = host_ns();
	for (int r = 0; r < REPS / 4; r++)
		for (int i = 0; i < NS; i++)
			CK(cudaGraphLaunch(x[i], s[0]));
	CK(cudaDeviceSynchronize());
	double serial_ms = (double)(host_ns() - t0) / 1e6 * 4; /* as for REPS */
	for (int i = 0; i < NS; i++)
		model(i, REPS / 4);

	for (int i = 0; i < NS; i++) {
		std::vector<uint32_t> got(M);
		/* after an even number of chain steps the data is back in the first half */
		CK(cudaMemcpy(got.data(), buf[i], M * 4, cudaMemcpyDeviceToHost));
		char name[32];
		std::snprintf(name, sizeof(name), "stream%d", i);
		check_array(name, got.data(), ref[i].data(), (size_t)M);
		digest_vec(got);
		CK(cudaGraphExecDestroy(x[i]));
		CK(cudaGraphDestroy(g[i]));
		CK(cudaFree(buf[i]));
		CK(cudaStreamDestroy(s[i]));
	}
	double ideal = REPS * CHAIN * SPIN_NS / 1e6;
	std::printf("TIME graph_concurrent replay_ms=%.2f serial_ms=%.2f ideal_ms=%.2f\n", conc_ms,
		    serial_ms, ideal);
	report("%d graphs x %d replays on %d streams: %.1f ms (one stream: %.1f ms, fully "
	       "concurrent: %.1f ms)",
	       NS, REPS, NS, conc_ms, serial_ms, ideal);
	if (conc_ms > 0.6 * serial_ms)
		note("overlap", "the replays on four streams did not overlap (%.1f vs %.1f ms)",
		     conc_ms, serial_ms);
	return gpu_finish();
}
