/* SPDX-License-Identifier: MIT */
/*
 * Stream order of every stream kind, and the legacy default stream's implicit
 * synchronization (CUDA Runtime API, "Stream synchronization behavior"):
 *  - long dependent chains (STEPS launches of an order-sensitive affine step)
 *    on blocking, non-blocking and prioritized streams, on the legacy stream
 *    through both handles (0 and cudaStreamLegacy), and on cudaStreamPerThread;
 *  - chains that alternate between a blocking stream and the legacy stream,
 *    which CUDA orders in both directions ("the legacy stream first waits on
 *    all blocking streams ... then all blocking streams wait on the legacy
 *    stream"), and the same for the per-thread default stream, which "is not a
 *    non-blocking stream and will synchronize with the legacy default stream";
 *  - slow producer -> consumer handoffs A -> legacy -> B that are wrong unless
 *    those implicit waits happen;
 *  - synchronous cudaMemcpy (legacy stream) after work on blocking streams, and
 *    cudaStreamSynchronize(0) covering a blocking stream's work.
 * This program is compiled with the default (legacy) default stream.
 */
#include "gpu_common.h"

static const int N = 1 << 16;
static const int STEPS = 300;
static const uint64_t MS = 1000000ull;

/* A chain of STEPS steps on buffer d, step k issued on handles[k % nh]. */
struct Chain {
	cudaStream_t handles[4];
	int nh;
	uint32_t *d;
	uint32_t salt;
	cudaStream_t read; /* the stream the result is read back on */
};

/* Issues all chains interleaved step by step, so that the streams' launches
 * alternate in issue order, then reads each back and compares with the CPU. */
static void run_chains(const char *name, Chain *c, int nc)
{
	for (int j = 0; j < nc; j++) {
		CK(cudaMalloc(&c[j].d, N * sizeof(uint32_t)));
		k_init<<<CHAIN_BLOCKS(N), 256, 0, c[j].handles[0]>>>(c[j].d, N, c[j].salt);
		CKL();
	}
	for (int k = 0; k < STEPS; k++) {
		for (int j = 0; j < nc; j++) {
			cudaStream_t s = c[j].handles[k % c[j].nh];
			k_affine<<<CHAIN_BLOCKS(N), 256, 0, s>>>(c[j].d, N, step_add(c[j].salt, k));
			CKL();
		}
	}
	uint32_t *h;
	CK(cudaMallocHost(&h, N * sizeof(uint32_t)));
	for (int j = 0; j < nc; j++) {
		/* The last step's stream orders after every earlier step of the chain. */
		cudaStream_t last = c[j].handles[(STEPS - 1) % c[j].nh];
		CK(cudaMemcpyAsync(h, c[j].d, N * sizeof(uint32_t), cudaMemcpyDeviceToHost, last));
		CK(cudaStreamSynchronize(last));
		std::vector<uint32_t> ref(N);
		ref_init(ref, c[j].salt);
		for (int k = 0; k < STEPS; k++)
			ref_affine(ref, step_add(c[j].salt, k));
		char sub[128];
		std::snprintf(sub, sizeof(sub), "%s[%d]", name, j);
		check_array(sub, h, ref.data(), N);
		digest_add(h, N * sizeof(uint32_t));
		CK(cudaFree(c[j].d));
	}
	CK(cudaFreeHost(h));
}

static Chain mk(uint32_t salt, cudaStream_t a, cudaStream_t b = nullptr, cudaStream_t c = nullptr,
		cudaStream_t d = nullptr, int nh = 1)
{
	Chain ch = {};
	ch.handles[0] = a;
	ch.handles[1] = b;
	ch.handles[2] = c;
	ch.handles[3] = d;
	ch.nh = nh;
	ch.salt = salt;
	return ch;
}

/* Reads n words of d back with a synchronous copy (legacy stream). */
static std::vector<uint32_t> readback(const uint32_t *d, int n)
{
	std::vector<uint32_t> h(n);
	CK(cudaMemcpy(h.data(), d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
	return h;
}

int main()
{
	gpu_init("streams");

	cudaStream_t blk[4], nb[4], pr[2];
	for (int i = 0; i < 4; i++) {
		CK(cudaStreamCreate(&blk[i]));
		CK(cudaStreamCreateWithFlags(&nb[i], cudaStreamNonBlocking));
	}
	int lo = 0, hi = 0;
	CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	CK(cudaStreamCreateWithPriority(&pr[0], cudaStreamNonBlocking, hi));
	CK(cudaStreamCreateWithPriority(&pr[1], cudaStreamDefault, lo));

	{
		Chain c[4];
		for (int i = 0; i < 4; i++)
			c[i] = mk(0x1000u + i, blk[i]);
		run_chains("blocking_chain", c, 4);
	}
	{
		Chain c[4];
		for (int i = 0; i < 4; i++)
			c[i] = mk(0x2000u + i, nb[i]);
		run_chains("nonblocking_chain", c, 4);
	}
	{
		Chain c[2] = {mk(0x3000u, pr[0]), mk(0x3001u, pr[1])};
		run_chains("priority_chain", c, 2);
	}
	{
		/* 0 and cudaStreamLegacy name the same stream here. */
		Chain c[1] = {mk(0x4000u, 0, cudaStreamLegacy, nullptr, nullptr, 2)};
		run_chains("legacy_chain_0_and_cudaStreamLegacy", c, 1);
	}
	{
		Chain c[1] = {mk(0x5000u, cudaStreamPerThread)};
		run_chains("per_thread_chain", c, 1);
	}
	{
		/* blk[0], legacy, blk[1], legacy, ...: totally ordered by the implicit waits. */
		Chain c[1] = {mk(0x6000u, blk[0], 0, blk[1], cudaStreamLegacy, 4)};
		run_chains("blocking_legacy_alternating_chain", c, 1);
	}
	{
		Chain c[1] = {mk(0x7000u, cudaStreamPerThread, cudaStreamLegacy, nullptr, nullptr, 2)};
		run_chains("per_thread_legacy_alternating_chain", c, 1);
	}
	{
		/* Non-blocking streams interleaved with a legacy chain: each stream is
		 * still in order (no implicit waits are needed for that). */
		Chain c[3] = {mk(0x8000u, nb[0]), mk(0x8001u, 0), mk(0x8002u, nb[1])};
		run_chains("nonblocking_with_legacy_chain", c, 3);
	}

	uint32_t *a, *b, *cc, *dd;
	CK(cudaMalloc(&a, N * sizeof(uint32_t)));
	CK(cudaMalloc(&b, N * sizeof(uint32_t)));
	CK(cudaMalloc(&cc, N * sizeof(uint32_t)));
	CK(cudaMalloc(&dd, N * sizeof(uint32_t)));

	/* A -> legacy -> B: each consumer reads its producer's output. Without the
	 * implicit waits the consumers start during the producers' spins and read
	 * the poison values written before. */
	{
		CK(cudaMemset(a, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(b, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(cc, 0xee, N * sizeof(uint32_t)));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, blk[0]>>>(a, nullptr, N, 5, 11, 40 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, 0>>>(b, a, N, 7, 13, 20 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, blk[1]>>>(cc, b, N, 9, 17, 0);
		CKL();
		std::vector<uint32_t> h(N);
		CK(cudaMemcpyAsync(h.data(), cc, N * sizeof(uint32_t), cudaMemcpyDeviceToHost,
				   blk[1]));
		CK(cudaStreamSynchronize(blk[1]));
		std::vector<uint32_t> ra(N), rb(N), rc(N);
		ref_slow_map(ra, nullptr, 5, 11);
		ref_slow_map(rb, &ra, 7, 13);
		ref_slow_map(rc, &rb, 9, 17);
		check_array("legacy_implicit_sync_A_0_B", h.data(), rc.data(), N);
		digest_vec(h);
	}

	/* Per-thread default stream -> cudaStreamLegacy -> per-thread. */
	{
		CK(cudaMemset(a, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(b, 0xee, N * sizeof(uint32_t)));
		CK(cudaMemset(cc, 0xee, N * sizeof(uint32_t)));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, cudaStreamPerThread>>>(a, nullptr, N, 3, 1, 40 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, cudaStreamLegacy>>>(b, a, N, 5, 2, 20 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, cudaStreamPerThread>>>(cc, b, N, 7, 3, 0);
		CKL();
		std::vector<uint32_t> h(N);
		CK(cudaMemcpyAsync(h.data(), cc, N * sizeof(uint32_t), cudaMemcpyDeviceToHost,
				   cudaStreamPerThread));
		CK(cudaStreamSynchronize(cudaStreamPerThread));
		std::vector<uint32_t> ra(N), rb(N), rc(N);
		ref_slow_map(ra, nullptr, 3, 1);
		ref_slow_map(rb, &ra, 5, 2);
		ref_slow_map(rc, &rb, 7, 3);
		check_array("per_thread_legacy_sync", h.data(), rc.data(), N);
		digest_vec(h);
	}

	/* A synchronous cudaMemcpy is a legacy-stream operation: it waits for the
	 * slow kernels of two blocking streams without any explicit sync. */
	{
		k_slow_map<<<SLOW_BLOCKS, 256, 0, blk[2]>>>(a, nullptr, N, 11, 5, 30 * MS);
		CKL();
		k_slow_map<<<SLOW_BLOCKS, 256, 0, blk[3]>>>(dd, nullptr, N, 13, 7, 30 * MS);
		CKL();
		std::vector<uint32_t> ha = readback(a, N), hd = readback(dd, N);
		std::vector<uint32_t> ra(N), rd(N);
		ref_slow_map(ra, nullptr, 11, 5);
		ref_slow_map(rd, nullptr, 13, 7);
		check_array("sync_memcpy_waits_blocking_stream[0]", ha.data(), ra.data(), N);
		check_array("sync_memcpy_waits_blocking_stream[1]", hd.data(), rd.data(), N);
		digest_vec(ha);
		digest_vec(hd);
	}

	/* cudaStreamSynchronize(0) "uses standard default stream semantics": it
	 * waits for the blocking stream's kernel, which writes host-mapped memory
	 * that the host then reads without any further CUDA call. */
	{
		uint32_t *hm, *dm;
		CK(cudaHostAlloc(&hm, N * sizeof(uint32_t), cudaHostAllocMapped));
		CK(cudaHostGetDevicePointer(&dm, hm, 0));
		std::memset(hm, 0xee, N * sizeof(uint32_t));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, blk[0]>>>(dm, nullptr, N, 17, 9, 50 * MS);
		CKL();
		CK(cudaStreamSynchronize(0));
		std::vector<uint32_t> got(hm, hm + N), r(N);
		ref_slow_map(r, nullptr, 17, 9);
		check_array("legacy_stream_sync_covers_blocking_stream", got.data(), r.data(), N);
		digest_vec(got);
		CK(cudaDeviceSynchronize());
		CK(cudaFreeHost(hm));
	}

	/* Stream query/sync basics on a busy and an idle stream. */
	{
		k_slow_map<<<SLOW_BLOCKS, 256, 0, nb[2]>>>(a, nullptr, N, 1, 1, 100 * MS);
		CKL();
		cudaError_t q = cudaStreamQuery(nb[2]);
		if (q == cudaErrorNotReady)
			(void)cudaGetLastError(); /* not an error; keep CKL() meaningful */
		check(q == cudaErrorNotReady, "stream_query_busy", "cudaStreamQuery returned %s",
		      cudaGetErrorName(q));
		CK(cudaStreamSynchronize(nb[2]));
		q = cudaStreamQuery(nb[2]);
		check(q == cudaSuccess, "stream_query_done", "cudaStreamQuery returned %s",
		      cudaGetErrorName(q));
		q = cudaStreamQuery(nb[3]);
		check(q == cudaSuccess, "stream_query_idle", "cudaStreamQuery returned %s",
		      cudaGetErrorName(q));
	}

	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(cc));
	CK(cudaFree(dd));
	for (int i = 0; i < 4; i++) {
		CK(cudaStreamDestroy(blk[i]));
		CK(cudaStreamDestroy(nb[i]));
	}
	CK(cudaStreamDestroy(pr[0]));
	CK(cudaStreamDestroy(pr[1]));
	return gpu_finish();
}
