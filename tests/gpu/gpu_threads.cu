/* SPDX-License-Identifier: MIT */
/*
 * Several host threads using CUDA at once:
 *  - T threads, each with its own blocking and non-blocking stream, run
 *    order-sensitive chains on both, joined both ways through events every
 *    JOIN steps, with periodic stream syncs, plus a chain on the thread's
 *    per-thread default stream (cudaStreamPerThread), all concurrently;
 *  - one thread launches a slow kernel (it writes host-mapped memory) on a
 *    non-blocking stream and records an event; other threads then wait with
 *    cudaStreamSynchronize, cudaEventSynchronize and a cudaStreamQuery poll
 *    on that stream/event and read the mapped memory directly: each must see
 *    the kernel's result;
 *  - concurrent cudaDeviceSynchronize calls from all threads at the end.
 * Threads record their results; the main thread prints the checks.
 */
#include "gpu_common.h"

#include <condition_variable>
#include <mutex>
#include <string>

static const int T = 8;
static const int N = 1 << 14;
static const int STEPS = 200;
static const int JOIN = 20;
static const uint64_t MS = 1000000ull;

struct Result {
	bool ok = false;
	std::string msg;
	std::vector<uint32_t> a, b, p;
};

static bool cmp(const std::vector<uint32_t> &got, const std::vector<uint32_t> &want,
		const char *what, std::string &msg)
{
	for (size_t i = 0; i < got.size(); i++) {
		if (got[i] != want[i]) {
			char buf[160];
			std::snprintf(buf, sizeof(buf), "%s[%zu]: got 0x%x want 0x%x; ", what, i, got[i],
				      want[i]);
			msg += buf;
			return false;
		}
	}
	return true;
}

static void worker(int t, Result *res)
{
	CK(cudaSetDevice(0));
	cudaStream_t sa, sb;
	CK(cudaStreamCreate(&sa));
	CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	cudaEvent_t ea, eb;
	CK(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
	uint32_t *da, *db, *dp;
	CK(cudaMalloc(&da, N * 4));
	CK(cudaMalloc(&db, N * 4));
	CK(cudaMalloc(&dp, N * 4));
	uint32_t sa_salt = 0x10000u * (t + 1), sb_salt = sa_salt + 0x5000u, sp_salt = sa_salt + 0x7000u;
	k_init<<<CHAIN_BLOCKS(N), 256, 0, sa>>>(da, N, sa_salt);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, sb>>>(db, N, sb_salt);
	CKL();
	k_init<<<CHAIN_BLOCKS(N), 256, 0, cudaStreamPerThread>>>(dp, N, sp_salt);
	CKL();
	std::vector<uint32_t> ra(N), rb(N), rp(N);
	ref_init(ra, sa_salt);
	ref_init(rb, sb_salt);
	ref_init(rp, sp_salt);
	for (int k = 0; k < STEPS; k++) {
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, sa>>>(da, N, step_add(sa_salt, k));
		CKL();
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, sb>>>(db, N, step_add(sb_salt, k));
		CKL();
		k_affine<<<CHAIN_BLOCKS(N), 256, 0, cudaStreamPerThread>>>(dp, N, step_add(sp_salt, k));
		CKL();
		ref_affine(ra, step_add(sa_salt, k));
		ref_affine(rb, step_add(sb_salt, k));
		ref_affine(rp, step_add(sp_salt, k));
		if (k % JOIN == JOIN - 1) {
			/* b = 3b + a, with a stable while b reads it and b's write done
			 * before a moves on. */
			CK(cudaEventRecord(ea, sa));
			CK(cudaStreamWaitEvent(sb, ea, 0));
			k_mix<<<CHAIN_BLOCKS(N), 256, 0, sb>>>(db, da, N);
			CKL();
			CK(cudaEventRecord(eb, sb));
			CK(cudaStreamWaitEvent(sa, eb, 0));
			ref_mix(rb, ra);
		}
		if (k % 50 == 49)
			CK(cudaStreamSynchronize((k / 50) & 1 ? sa : sb));
	}
	res->a.assign(N, 0);
	res->b.assign(N, 0);
	res->p.assign(N, 0);
	CK(cudaMemcpyAsync(res->a.data(), da, N * 4, cudaMemcpyDeviceToHost, sa));
	CK(cudaMemcpyAsync(res->b.data(), db, N * 4, cudaMemcpyDeviceToHost, sb));
	CK(cudaMemcpyAsync(res->p.data(), dp, N * 4, cudaMemcpyDeviceToHost, cudaStreamPerThread));
	CK(cudaStreamSynchronize(sa));
	CK(cudaStreamSynchronize(sb));
	CK(cudaStreamSynchronize(cudaStreamPerThread));
	bool ok = cmp(res->a, ra, "blocking", res->msg);
	ok &= cmp(res->b, rb, "nonblocking", res->msg);
	ok &= cmp(res->p, rp, "per_thread", res->msg);
	res->ok = ok;
	CK(cudaDeviceSynchronize());
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dp));
	CK(cudaEventDestroy(ea));
	CK(cudaEventDestroy(eb));
	CK(cudaStreamDestroy(sa));
	CK(cudaStreamDestroy(sb));
}

__global__ void k_slow_mapped(volatile uint32_t *m, int n, uint32_t v, uint64_t ns)
{
	if (threadIdx.x == 0)
		spin_ns(ns);
	__syncthreads();
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		m[i] = v + (uint32_t)i;
	__threadfence_system();
}

/* Cross-thread sync: published stream/event, waited on by other threads. */
struct Shared {
	std::mutex mu;
	std::condition_variable cv;
	int round = -1;
	cudaStream_t s = nullptr;
	cudaEvent_t e = nullptr;
	volatile uint32_t *m = nullptr;
};

static void test_cross_thread(void)
{
	const int M = 1024, ROUNDS = 3;
	uint32_t *hm, *dm;
	CK(cudaHostAlloc(&hm, ROUNDS * M * 4, cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer(&dm, hm, 0));
	std::memset(hm, 0, ROUNDS * M * 4);
	Shared sh;
	sh.m = hm;
	const char *how[ROUNDS] = {"stream_sync", "event_sync", "stream_query_poll"};
	uint32_t bad[ROUNDS] = {};
	bool waited[ROUNDS] = {};

	std::thread launcher([&] {
		CK(cudaSetDevice(0));
		cudaStream_t s;
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		cudaEvent_t e;
		CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
		for (int r = 0; r < ROUNDS; r++) {
			k_slow_mapped<<<1, 256, 0, s>>>(dm + r * M, M, 0x1000u * (r + 1), 150 * MS);
			CKL();
			CK(cudaEventRecord(e, s));
			{
				std::lock_guard<std::mutex> lk(sh.mu);
				sh.s = s;
				sh.e = e;
				sh.round = r;
			}
			sh.cv.notify_all();
			/* Wait for the waiter of this round before the next launch. */
			std::unique_lock<std::mutex> lk(sh.mu);
			sh.cv.wait(lk, [&] { return sh.round == -2 - r; });
		}
		CK(cudaStreamSynchronize(s));
		CK(cudaEventDestroy(e));
		CK(cudaStreamDestroy(s));
	});
	std::thread waiter([&] {
		CK(cudaSetDevice(0));
		for (int r = 0; r < ROUNDS; r++) {
			cudaStream_t s;
			cudaEvent_t e;
			{
				std::unique_lock<std::mutex> lk(sh.mu);
				sh.cv.wait(lk, [&] { return sh.round == r; });
				s = sh.s;
				e = sh.e;
			}
			if (r == 0) {
				CK(cudaStreamSynchronize(s));
				waited[r] = true;
			} else if (r == 1) {
				CK(cudaEventSynchronize(e));
				waited[r] = true;
			} else {
				uint64_t t0 = host_ns();
				for (;;) {
					cudaError_t q = cudaStreamQuery(s);
					if (q == cudaSuccess) {
						waited[r] = true;
						break;
					}
					if (q != cudaErrorNotReady)
						CK(q);
					if (host_ns() - t0 > 5000 * MS)
						break;
					std::this_thread::sleep_for(std::chrono::microseconds(100));
				}
			}
			for (int i = 0; i < M; i++)
				if (sh.m[r * M + i] != 0x1000u * (r + 1) + (uint32_t)i)
					bad[r]++;
			{
				std::lock_guard<std::mutex> lk(sh.mu);
				sh.round = -2 - r;
			}
			sh.cv.notify_all();
		}
	});
	launcher.join();
	waiter.join();
	for (int r = 0; r < ROUNDS; r++) {
		char name[64];
		std::snprintf(name, sizeof(name), "cross_thread_%s", how[r]);
		check(waited[r] && bad[r] == 0, name, "%s; %u of %d words not yet written",
		      waited[r] ? "returned" : "timed out", bad[r], M);
	}
	digest_add(hm, ROUNDS * M * 4);
	CK(cudaFreeHost(hm));
}

int main()
{
	gpu_init("threads");
	{
		Result res[T];
		std::vector<std::thread> th;
		for (int t = 0; t < T; t++)
			th.emplace_back(worker, t, &res[t]);
		for (auto &x : th)
			x.join();
		for (int t = 0; t < T; t++) {
			char name[64];
			std::snprintf(name, sizeof(name), "thread_streams[%d]", t);
			check(res[t].ok, name, "%s", res[t].msg.c_str());
			digest_vec(res[t].a);
			digest_vec(res[t].b);
			digest_vec(res[t].p);
		}
	}
	test_cross_thread();
	return gpu_finish();
}
