/* SPDX-License-Identifier: MIT */
/*
 * Events (CUDA Runtime API, Event Management and cudaStreamWaitEvent):
 *  - cross-stream waits between non-blocking streams (slow producer, consumer
 *    that reads poison unless it waited), and a ping-pong chain whose steps
 *    alternate streams through two re-recorded events;
 *  - re-record after a wait: "cudaStreamWaitEvent() ... use[s] the most recently
 *    captured state at the time of the API call, and [is] not affected by later
 *    calls to cudaEventRecord()". The work behind the later record itself
 *    waits for the waiting stream, so a wait retargeted to the new record
 *    would be a dependency cycle (caught by a 5 s poll, no hang). No host
 *    function here blocks on other CUDA work: cudaLaunchHostFunc forbids it
 *    ("must not perform any synchronization that may depend on outstanding
 *    CUDA work not mandated to run earlier");
 *  - queries and syncs use the newest record; a never-recorded event is an
 *    empty set of work (query succeeds, sync returns, waits are no-ops);
 *  - a wait issued on the legacy stream;
 *  - cudaEventBlockingSync events;
 *  - timing: cudaEventElapsedTime around spin kernels of known length, checked
 *    for plausibility and reported; errors for events without timing.
 */
#include "gpu_common.h"

#include <cmath>

static const int N = 1 << 16;
static const uint64_t MS = 1000000ull;

/* Clears a non-sticky "not ready" so the next CKL() sees only launch errors. */
static cudaError_t query_event(cudaEvent_t e)
{
	cudaError_t r = cudaEventQuery(e);
	if (r != cudaSuccess)
		(void)cudaGetLastError();
	return r;
}

/* Spins ns, then reports its own duration in globaltimer ns and clock64 cycles. */
__global__ void k_spin_report(unsigned long long *out, uint64_t ns)
{
	uint64_t t0 = gtimer();
	long long c0 = clock64();
	spin_ns(ns);
	long long c1 = clock64();
	uint64_t t1 = gtimer();
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		out[0] = t1 - t0;
		out[1] = (unsigned long long)(c1 - c0);
	}
}

static std::vector<uint32_t> d2h(const uint32_t *d, cudaStream_t s)
{
	std::vector<uint32_t> h(N);
	CK(cudaMemcpyAsync(h.data(), d, N * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	return h;
}

int main()
{
	gpu_init("events");

	cudaStream_t s1, s2, s3;
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
	uint32_t *a, *b, *c;
	CK(cudaMalloc(&a, N * sizeof(uint32_t)));
	CK(cudaMalloc(&b, N * sizeof(uint32_t)));
	CK(cudaMalloc(&c, N * sizeof(uint32_t)));
	cudaEvent_t e;
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

	/* Cross-stream wait. */
	{
		CK(cudaMemsetAsync(a, 0xee, N * sizeof(uint32_t), s1));
		CK(cudaMemsetAsync(b, 0xee, N * sizeof(uint32_t), s2));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 3, 7, 50 * MS);
		CKL();
		CK(cudaEventRecord(e, s1));
		CK(cudaStreamWaitEvent(s2, e, 0));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s2>>>(b, a, N, 5, 1, 0);
		CKL();
		std::vector<uint32_t> h = d2h(b, s2), ra(N), rb(N);
		ref_slow_map(ra, nullptr, 3, 7);
		ref_slow_map(rb, &ra, 5, 1);
		check_array("cross_stream_wait", h.data(), rb.data(), N);
		digest_vec(h);
	}

	/* Ping-pong chain: step k on s[k&1] after the other stream's step k-1. */
	{
		const int STEPS = 200;
		cudaStream_t s[2] = {s1, s2};
		cudaEvent_t ev[2];
		CK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));
		k_init<<<CHAIN_BLOCKS(N), 256, 0, s1>>>(a, N, 0x77u);
		CKL();
		CK(cudaEventRecord(ev[0], s1));
		for (int k = 0; k < STEPS; k++) {
			int cur = (k + 1) & 1, prev = k & 1;
			CK(cudaStreamWaitEvent(s[cur], ev[prev], 0));
			k_affine<<<CHAIN_BLOCKS(N), 256, 0, s[cur]>>>(a, N, step_add(0x77u, k));
			CKL();
			CK(cudaEventRecord(ev[cur], s[cur]));
		}
		int last = STEPS & 1; /* stream of step STEPS-1 */
		std::vector<uint32_t> h = d2h(a, s[last]), r(N);
		ref_init(r, 0x77u);
		for (int k = 0; k < STEPS; k++)
			ref_affine(r, step_add(0x77u, k));
		check_array("event_pingpong_chain", h.data(), r.data(), N);
		digest_vec(h);
		CK(cudaDeviceSynchronize());
		CK(cudaEventDestroy(ev[0]));
		CK(cudaEventDestroy(ev[1]));
	}

	/* Re-record after a wait keeps the old record for that wait. s1's second
	 * kernel K2 waits (through event f) for s2's consumer, which waits for
	 * record 1 of e; record 2 of e comes after K2. Correct semantics: no
	 * cycle. A wait retargeted to record 2 would make the consumer wait for
	 * K2, which waits for the consumer: a dependency cycle, caught by the
	 * 5 s poll below (the program then exits, it could not finish). */
	{
		cudaEvent_t f;
		CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
		CK(cudaMemsetAsync(b, 0xee, N * sizeof(uint32_t), s2));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 7, 3, 30 * MS); /* K1 */
		CKL();
		CK(cudaEventRecord(e, s1));        /* record 1: K1 */
		CK(cudaStreamWaitEvent(s2, e, 0)); /* captures record 1 */
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s2>>>(b, a, N, 5, 9, 0); /* consumer of K1's a */
		CKL();
		CK(cudaEventRecord(f, s2));
		CK(cudaStreamWaitEvent(s1, f, 0));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 0, 0xdead, 200 * MS); /* K2 */
		CKL();
		CK(cudaEventRecord(e, s1)); /* record 2: K1, consumer, K2 */
		uint64_t t0 = host_ns();
		cudaError_t q;
		while ((q = query_event(f)) == cudaErrorNotReady && host_ns() - t0 < 5000 * MS)
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		if (q != cudaSuccess) {
			check(false, "rerecord_keeps_old_wait",
			      "the consumer did not finish within 5 s (%s): its wait followed the "
			      "later record, a dependency cycle; exiting",
			      cudaGetErrorName(q));
			std::fflush(stdout);
			std::_Exit(1);
		}
		check(true, "rerecord_keeps_old_wait", "ok");
		/* Record 1 is complete now; record 2 still waits for K2's 200 ms spin. */
		q = query_event(e);
		check(q == cudaErrorNotReady, "query_uses_newest_record",
		      "cudaEventQuery after re-record returned %s (K2 still spinning)",
		      cudaGetErrorName(q));
		CK(cudaEventSynchronize(e));
		q = query_event(e);
		check(q == cudaSuccess, "query_after_completion", "cudaEventQuery returned %s",
		      cudaGetErrorName(q));
		std::vector<uint32_t> h = d2h(b, s2), ra(N), rb(N);
		ref_slow_map(ra, nullptr, 7, 3);
		ref_slow_map(rb, &ra, 5, 9);
		check_array("rerecord_wait_saw_first_record_data", h.data(), rb.data(), N);
		digest_vec(h);
		std::vector<uint32_t> h2 = d2h(a, s1), r2(N, 0xdeadu);
		check_array("rerecord_later_kernel_ran_after", h2.data(), r2.data(), N);
		CK(cudaEventDestroy(f));
	}

	/* Never-recorded events: an empty set of work. */
	{
		cudaEvent_t never;
		CK(cudaEventCreate(&never));
		cudaError_t q = query_event(never);
		check(q == cudaSuccess, "never_recorded_query", "cudaEventQuery returned %s",
		      cudaGetErrorName(q));
		uint64_t t0 = host_ns();
		CK(cudaEventSynchronize(never));
		check(host_ns() - t0 < 1000 * MS, "never_recorded_sync", "took %.1f ms",
		      (host_ns() - t0) / 1e6);
		CK(cudaStreamWaitEvent(s3, never, 0));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s3>>>(c, nullptr, N, 3, 3, 0);
		CKL();
		std::vector<uint32_t> h = d2h(c, s3), r(N);
		ref_slow_map(r, nullptr, 3, 3);
		check_array("never_recorded_wait_is_noop", h.data(), r.data(), N);
		digest_vec(h);
		CK(cudaEventDestroy(never));
	}

	/* Query/sync of a pending record; the result is in host-mapped memory that
	 * the host reads right after cudaEventSynchronize, with no other CUDA call. */
	{
		uint32_t *hm, *dm;
		CK(cudaHostAlloc(&hm, N * sizeof(uint32_t), cudaHostAllocMapped));
		CK(cudaHostGetDevicePointer(&dm, hm, 0));
		cudaEvent_t flavors[2];
		CK(cudaEventCreateWithFlags(&flavors[0], cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&flavors[1],
					    cudaEventBlockingSync | cudaEventDisableTiming));
		const char *names[2] = {"event_sync_default", "event_sync_blocking_sync"};
		for (int f = 0; f < 2; f++) {
			std::memset(hm, 0xee, N * sizeof(uint32_t));
			k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(dm, nullptr, N, 21u + f, 5, 100 * MS);
			CKL();
			CK(cudaEventRecord(flavors[f], s1));
			cudaError_t q = query_event(flavors[f]);
			char qn[64];
			std::snprintf(qn, sizeof(qn), "%s_query_pending", names[f]);
			check(q == cudaErrorNotReady, qn, "cudaEventQuery returned %s",
			      cudaGetErrorName(q));
			CK(cudaEventSynchronize(flavors[f]));
			std::vector<uint32_t> got(hm, hm + N), r(N);
			ref_slow_map(r, nullptr, 21u + f, 5);
			check_array(names[f], got.data(), r.data(), N);
			digest_vec(got);
		}
		CK(cudaDeviceSynchronize());
		CK(cudaEventDestroy(flavors[0]));
		CK(cudaEventDestroy(flavors[1]));
		CK(cudaFreeHost(hm));
	}

	/* A wait issued on the legacy stream. */
	{
		CK(cudaMemset(b, 0xee, N * sizeof(uint32_t)));
		CK(cudaDeviceSynchronize());
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 13, 2, 40 * MS);
		CKL();
		CK(cudaEventRecord(e, s1));
		CK(cudaStreamWaitEvent(0, e, 0));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, 0>>>(b, a, N, 3, 4, 0);
		CKL();
		std::vector<uint32_t> h(N), ra(N), rb(N);
		CK(cudaMemcpy(h.data(), b, N * sizeof(uint32_t), cudaMemcpyDeviceToHost));
		ref_slow_map(ra, nullptr, 13, 2);
		ref_slow_map(rb, &ra, 3, 4);
		check_array("legacy_stream_wait_event", h.data(), rb.data(), N);
		digest_vec(h);
	}

	/* Timing. */
	{
		cudaStream_t ts;
		CK(cudaStreamCreate(&ts));
		cudaEvent_t t[3];
		for (int i = 0; i < 3; i++)
			CK(cudaEventCreate(&t[i]));
		unsigned long long *dout, hout[4];
		CK(cudaMalloc(&dout, 4 * sizeof(unsigned long long)));
		/* Warm-up so that module loading is not timed. */
		k_spin_report<<<1, 32, 0, ts>>>(dout, 1000);
		CKL();
		CK(cudaStreamSynchronize(ts));

		CK(cudaEventRecord(t[0], ts));
		k_spin_report<<<1, 32, 0, ts>>>(dout, 50 * MS);
		CKL();
		CK(cudaEventRecord(t[1], ts));
		CK(cudaEventSynchronize(t[1]));
		CK(cudaMemcpy(hout, dout, 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
		float ms = -1;
		CK(cudaEventElapsedTime(&ms, t[0], t[1]));
		double kms = hout[0] / 1e6;
		report("elapsed %.3f ms for a 50 ms spin kernel (kernel's own globaltimer %.3f ms, "
		       "%llu clock64 cycles = %.0f MHz)",
		       ms, kms, hout[1], hout[1] / (kms * 1e3));
		/* Loose bounds: Vitamin-E may time records by completion detection
		 * (docs/semantics.md, Y4), which adds its polling error. */
		check(ms > 0 && ms >= 0.8 * kms && ms <= 2.0 * kms + 20.0, "elapsed_time_plausible",
		      "elapsed %.3f ms, kernel measured %.3f ms", ms, kms);

		/* Two back-to-back intervals, 20 ms then 60 ms. */
		CK(cudaEventRecord(t[0], ts));
		k_spin_report<<<1, 32, 0, ts>>>(dout, 20 * MS);
		CKL();
		CK(cudaEventRecord(t[1], ts));
		k_spin_report<<<1, 32, 0, ts>>>(dout + 2, 60 * MS);
		CKL();
		CK(cudaEventRecord(t[2], ts));
		CK(cudaEventSynchronize(t[2]));
		float m01 = -1, m12 = -1, m02 = -1;
		CK(cudaEventElapsedTime(&m01, t[0], t[1]));
		CK(cudaEventElapsedTime(&m12, t[1], t[2]));
		CK(cudaEventElapsedTime(&m02, t[0], t[2]));
		report("elapsed 20 ms spin: %.3f ms, 60 ms spin: %.3f ms, both: %.3f ms", m01, m12,
		       m02);
		check(m01 >= 16 && m01 <= 60 && m12 >= 48 && m12 <= 140 && m12 > m01 &&
			      std::fabs(m02 - (m01 + m12)) < 1.0,
		      "elapsed_time_intervals", "20 ms -> %.3f, 60 ms -> %.3f, sum %.3f", m01, m12,
		      m02);

		/* Errors: timing disabled, never recorded. */
		cudaEvent_t nt, never;
		CK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
		CK(cudaEventCreate(&never));
		CK(cudaEventRecord(nt, ts));
		CK(cudaEventSynchronize(nt));
		float x = 0;
		cudaError_t r1 = cudaEventElapsedTime(&x, t[0], nt);
		(void)cudaGetLastError();
		check(r1 != cudaSuccess, "elapsed_time_disable_timing_refused", "returned %s",
		      cudaGetErrorName(r1));
		cudaError_t r2 = cudaEventElapsedTime(&x, t[0], never);
		(void)cudaGetLastError();
		check(r2 != cudaSuccess, "elapsed_time_never_recorded_refused", "returned %s",
		      cudaGetErrorName(r2));
		report("cudaEventElapsedTime errors: disable-timing %s, never-recorded %s",
		       cudaGetErrorName(r1), cudaGetErrorName(r2));
		CK(cudaEventDestroy(nt));
		CK(cudaEventDestroy(never));
		for (int i = 0; i < 3; i++)
			CK(cudaEventDestroy(t[i]));
		CK(cudaFree(dout));
		CK(cudaStreamDestroy(ts));
	}

	/* Destroying an event with a pending record returns at once; the stream's
	 * work still runs. */
	{
		cudaEvent_t pend;
		CK(cudaEventCreateWithFlags(&pend, cudaEventDisableTiming));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s1>>>(a, nullptr, N, 31, 1, 50 * MS);
		CKL();
		CK(cudaEventRecord(pend, s1));
		CK(cudaStreamWaitEvent(s2, pend, 0));
		CK(cudaEventDestroy(pend));
		k_slow_map<<<SLOW_BLOCKS, 256, 0, s2>>>(b, a, N, 3, 3, 0);
		CKL();
		std::vector<uint32_t> h = d2h(b, s2), ra(N), rb(N);
		ref_slow_map(ra, nullptr, 31, 1);
		ref_slow_map(rb, &ra, 3, 3);
		check_array("destroy_pending_event_keeps_wait", h.data(), rb.data(), N);
		digest_vec(h);
	}

	CK(cudaEventDestroy(e));
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	CK(cudaStreamDestroy(s3));
	return gpu_finish();
}
