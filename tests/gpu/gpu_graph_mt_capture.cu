/* SPDX-License-Identifier: MIT */
/*
 * Multi-threaded capture and replay. Phase 1: eight threads capture their own
 * graphs at once in thread-local and relaxed mode while two more run eager
 * work with stream syncs (allowed: no global-mode capture is in progress).
 * Phase 2: four threads capture in global mode at once while the others only
 * launch (a global capture forbids "potentially unsafe" calls in every thread;
 * a runtime's own threads must not make them either, or the captures are
 * invalidated). Phase 3: every thread replays its graph 40 times on its own
 * stream, concurrently. Compared with a CPU model per thread.
 */
#include "gpu_graph_common.h"

#include <condition_variable>
#include <mutex>

/* std::barrier is C++20; the programs build as C++17. */
struct barrier {
	std::mutex m;
	std::condition_variable cv;
	int n, waiting = 0;
	unsigned gen = 0;
	explicit barrier(int count) : n(count) {}
	void arrive_and_wait()
	{
		std::unique_lock<std::mutex> l(m);
		unsigned g = gen;
		if (++waiting == n) {
			waiting = 0;
			gen++;
			cv.notify_all();
			return;
		}
		cv.wait(l, [&] { return gen != g; });
	}
};

static const int N = 1 << 14;
static const int T = 8;
static const int REPS = 40;

struct th {
	uint32_t *x;
	cudaGraph_t g1 = nullptr, g2 = nullptr;
	std::vector<uint32_t> ref;
	int id;
};

static void capture(cudaStream_t s, th &t, cudaGraph_t *g, cudaStreamCaptureMode mode, uint32_t salt)
{
	CK(cudaStreamBeginCapture(s, mode));
	for (int k = 0; k < 6; k++) {
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(t.x, N, salt + (uint32_t)k);
		CKL();
	}
	sleep_ms(5); /* overlap with the other threads' captures */
	CK(cudaStreamEndCapture(s, g));
}

int main()
{
	gpu_init("graph_mt_capture");
	std::vector<th> ts(T);
	for (int i = 0; i < T; i++) {
		ts[i].id = i;
		CK(cudaMalloc(&ts[i].x, N * 4));
		k_init<<<CHAIN_BLOCKS(N), 256>>>(ts[i].x, N, (uint32_t)i);
		CKL();
		ts[i].ref.resize(N);
		ref_init(ts[i].ref, (uint32_t)i);
	}
	uint32_t *eager;
	CK(cudaMalloc(&eager, N * 4));
	CK(cudaMemset(eager, 0, N * 4));
	CK(cudaDeviceSynchronize());
	barrier bar(T + 2);
	std::vector<std::thread> pool;
	for (int i = 0; i < T; i++) {
		pool.emplace_back([&, i] {
			th &t = ts[i];
			cudaStream_t s;
			CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
			bar.arrive_and_wait(); /* phase 1 */
			capture(s, t, &t.g1,
				i % 2 ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeThreadLocal,
				0x100u * (uint32_t)i);
			bar.arrive_and_wait(); /* phase 2 */
			if (i < 4)
				capture(s, t, &t.g2, cudaStreamCaptureModeGlobal, 0x7000u + (uint32_t)i);
			bar.arrive_and_wait(); /* phase 3 */
			cudaGraphExec_t x1, x2 = nullptr;
			CK(cudaGraphInstantiate(&x1, t.g1, 0));
			if (t.g2)
				CK(cudaGraphInstantiate(&x2, t.g2, 0));
			for (int r = 0; r < REPS; r++) {
				CK(cudaGraphLaunch(x1, s));
				if (x2 && r % 4 == 0)
					CK(cudaGraphLaunch(x2, s));
			}
			CK(cudaStreamSynchronize(s));
			CK(cudaGraphExecDestroy(x1));
			if (x2)
				CK(cudaGraphExecDestroy(x2));
			CK(cudaStreamDestroy(s));
		});
	}
	for (int j = 0; j < 2; j++) {
		pool.emplace_back([&, j] {
			cudaStream_t s;
			CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
			bar.arrive_and_wait();
			for (int k = 0; k < 50; k++) { /* phase 1: syncs are allowed */
				k_affine<<<CHAIN_BLOCKS(N / 2), 256, 0, s>>>(eager + j * (N / 2), N / 2,
									  (uint32_t)k);
				CKL();
				if (k % 10 == 9)
					CK(cudaStreamSynchronize(s));
			}
			CK(cudaStreamSynchronize(s));
			bar.arrive_and_wait();
			for (int k = 0; k < 50; k++) { /* phase 2: launches only */
				k_affine<<<CHAIN_BLOCKS(N / 2), 256, 0, s>>>(eager + j * (N / 2), N / 2,
									  0x1000u + (uint32_t)k);
				CKL();
			}
			bar.arrive_and_wait();
			CK(cudaStreamSynchronize(s));
			CK(cudaStreamDestroy(s));
		});
	}
	for (auto &p : pool)
		p.join();
	for (int i = 0; i < T; i++) {
		th &t = ts[i];
		for (int r = 0; r < REPS; r++) {
			for (int k = 0; k < 6; k++)
				ref_affine(t.ref, 0x100u * (uint32_t)i + (uint32_t)k);
			if (i < 4 && r % 4 == 0)
				for (int k = 0; k < 6; k++)
					ref_affine(t.ref, 0x7000u + (uint32_t)i + (uint32_t)k);
		}
		std::vector<uint32_t> got;
		digest_dev(t.x, N, &got);
		char name[32];
		std::snprintf(name, sizeof(name), "thread%d", i);
		check_array(name, got.data(), t.ref.data(), (size_t)N);
		CK(cudaGraphDestroy(t.g1));
		if (t.g2)
			CK(cudaGraphDestroy(t.g2));
		CK(cudaFree(t.x));
	}
	/* the eager halves: index-dependent affine chains */
	std::vector<uint32_t> e(N, 0), want(N, 0);
	CK(cudaMemcpy(e.data(), eager, N * 4, cudaMemcpyDeviceToHost));
	for (int j = 0; j < 2; j++) {
		std::vector<uint32_t> h(N / 2, 0);
		for (int k = 0; k < 50; k++)
			ref_affine(h, (uint32_t)k);
		for (int k = 0; k < 50; k++)
			ref_affine(h, 0x1000u + (uint32_t)k);
		std::copy(h.begin(), h.end(), want.begin() + j * (N / 2));
	}
	check_array("eager_work", e.data(), want.data(), (size_t)N);
	digest_vec(e);
	CK(cudaFree(eager));
	return gpu_finish();
}
