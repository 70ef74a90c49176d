/* SPDX-License-Identifier: MIT */
/*
 * Cooperative launches (cudaLaunchCooperativeKernel): all blocks of the grid
 * are guaranteed co-resident, so a grid-wide barrier works. Two kernels:
 *  - k_coop_timed: a hand-written grid barrier with a timeout (2 s) and a
 *    global abort flag; if the blocks were not all resident the barrier times
 *    out, the kernel finishes anyway and the result says so (no hang);
 *  - k_coop_cg: the same computation with cooperative_groups grid.sync(); run
 *    only if the timed kernel passed at that size (it would hang otherwise,
 *    until run.sh's timeout).
 * Every round each block reads values other blocks wrote in the previous
 * round, so a barrier that does not hold changes the result. Grids: 8 blocks,
 * one 8-SM partition's worth (occupancy x 8) and the whole GPU (occupancy x
 * SMs, from cudaOccupancyMaxActiveBlocksPerMultiprocessor); on a created
 * non-blocking stream and on the legacy stream, interleaved with ordinary
 * launches on the same stream. Last, a grid one block too large must be
 * refused with an error at the call (cudaErrorCooperativeLaunchTooLarge).
 */
#include "gpu_common.h"

#include <algorithm>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

static const int THREADS = 256;
static const int ROUNDS = 20;
static const uint64_t TIMEOUT_NS = 2000000000ull;

struct Bar {
	unsigned count, gen, abort, timeouts;
};

/* Sense-free generation barrier among the grid's blocks, thread 0 of each. */
__device__ bool grid_barrier(Bar *b, unsigned nb, uint64_t deadline)
{
	__shared__ int ok_s;
	__syncthreads();
	if (threadIdx.x == 0) {
		int ok = 1;
		volatile unsigned *vgen = &b->gen, *vabort = &b->abort;
		unsigned g = *vgen; /* cannot advance before this block arrives */
		__threadfence();
		if (atomicAdd(&b->count, 1u) == nb - 1) {
			atomicExch(&b->count, 0u);
			__threadfence(); /* the reset is visible before the release */
			atomicAdd(&b->gen, 1u);
		} else {
			while (*vgen == g) {
				if (*vabort) {
					ok = 0;
					break;
				}
				if (gtimer() > deadline) {
					atomicExch(&b->abort, 1u);
					atomicAdd(&b->timeouts, 1u);
					ok = 0;
					break;
				}
			}
		}
		__threadfence();
		ok_s = ok;
	}
	__syncthreads();
	return ok_s != 0;
}

__device__ __forceinline__ uint32_t coop_step(const volatile uint32_t *cur, unsigned b, unsigned nb,
					      int r)
{
	return cur[b] * 3u + cur[(b + 1) % nb] + cur[(b * 7u + (unsigned)r + 1u) % nb];
}

/* a: 2 * gridDim.x words (ping-pong halves); out: gridDim.x words. */
__global__ void k_coop_timed(uint32_t *a, uint32_t *out, Bar *bar, int rounds, uint64_t timeout_ns)
{
	unsigned nb = gridDim.x, b = blockIdx.x;
	uint64_t deadline = gtimer() + timeout_ns;
	if (threadIdx.x == 0)
		a[b] = b * 2654435761u + 1u;
	bool ok = grid_barrier(bar, nb, deadline);
	for (int r = 0; r < rounds && ok; r++) {
		if (threadIdx.x == 0)
			a[((r + 1) & 1) * nb + b] = coop_step(a + (r & 1) * nb, b, nb, r);
		ok = grid_barrier(bar, nb, deadline);
	}
	if (threadIdx.x == 0)
		out[b] = ok ? ((volatile uint32_t *)a)[(rounds & 1) * nb + b] : 0xffffffffu;
}

__global__ void k_coop_cg(uint32_t *a, uint32_t *out, int rounds)
{
	cg::grid_group g = cg::this_grid();
	unsigned nb = gridDim.x, b = blockIdx.x;
	if (threadIdx.x == 0)
		a[b] = b * 2654435761u + 1u;
	g.sync();
	for (int r = 0; r < rounds; r++) {
		if (threadIdx.x == 0)
			a[((r + 1) & 1) * nb + b] = coop_step(a + (r & 1) * nb, b, nb, r);
		g.sync();
	}
	if (threadIdx.x == 0)
		out[b] = ((volatile uint32_t *)a)[(rounds & 1) * nb + b];
}

static std::vector<uint32_t> coop_ref(unsigned nb, int rounds)
{
	std::vector<uint32_t> cur(nb), nxt(nb);
	for (unsigned b = 0; b < nb; b++)
		cur[b] = b * 2654435761u + 1u;
	for (int r = 0; r < rounds; r++) {
		for (unsigned b = 0; b < nb; b++)
			nxt[b] = cur[b] * 3u + cur[(b + 1) % nb] + cur[(b * 7u + (unsigned)r + 1u) % nb];
		cur.swap(nxt);
	}
	return cur;
}

struct Bufs {
	uint32_t *a, *out, *x;
	Bar *bar;
	unsigned max_nb;
};

/* One cooperative launch of nb blocks on s, followed by an ordinary chain
 * step on x on the same stream. Returns the per-block results. */
static std::vector<uint32_t> coop_once(bool use_cg, unsigned nb, cudaStream_t s, Bufs &B,
				       uint32_t step)
{
	CK(cudaMemsetAsync(B.bar, 0, sizeof(Bar), s));
	CK(cudaMemsetAsync(B.out, 0xee, nb * 4, s));
	int rounds = ROUNDS;
	uint64_t tmo = TIMEOUT_NS;
	if (use_cg) {
		void *args[] = {&B.a, &B.out, &rounds};
		CK(cudaLaunchCooperativeKernel((void *)k_coop_cg, dim3(nb), dim3(THREADS), args, 0, s));
	} else {
		void *args[] = {&B.a, &B.out, &B.bar, &rounds, &tmo};
		CK(cudaLaunchCooperativeKernel((void *)k_coop_timed, dim3(nb), dim3(THREADS), args, 0,
					       s));
	}
	k_affine<<<64, 256, 0, s>>>(B.x, 1 << 14, step);
	CKL();
	std::vector<uint32_t> h(nb);
	Bar hb;
	CK(cudaMemcpyAsync(h.data(), B.out, nb * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaMemcpyAsync(&hb, B.bar, sizeof(Bar), cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	if (!use_cg && hb.timeouts)
		std::printf("INFO %s: %u-block launch: %u blocks timed out at the barrier\n", g_prog,
			    nb, hb.timeouts);
	return h;
}

int main()
{
	gpu_init("coop");
	int coop = 0;
	CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
	if (!coop) {
		check(false, "cooperative_launch_supported", "device attribute is 0");
		return gpu_finish();
	}
	int bps_t = 0, bps_c = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps_t, k_coop_timed, THREADS, 0));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps_c, k_coop_cg, THREADS, 0));
	report("occupancy %d (timed) / %d (cg) blocks of %d threads per SM, %d SMs", bps_t, bps_c,
	       THREADS, g_num_sms);

	Bufs B;
	B.max_nb = (unsigned)std::max(bps_t, bps_c) * (unsigned)g_num_sms + 1;
	CK(cudaMalloc(&B.a, 2 * B.max_nb * 4));
	CK(cudaMalloc(&B.out, B.max_nb * 4));
	CK(cudaMalloc(&B.x, (1 << 14) * 4));
	CK(cudaMalloc(&B.bar, sizeof(Bar)));
	CK(cudaMemset(B.x, 0, (1 << 14) * 4));
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> xref(1 << 14, 0);
	uint32_t step = 0;

	cudaStream_t nb;
	CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
	struct Size {
		const char *name;
		unsigned t, c;
	} sizes[3] = {
		{"8_blocks", 8, 8},
		{"8_sm_partition", (unsigned)bps_t * 8, (unsigned)bps_c * 8},
		{"whole_gpu", (unsigned)bps_t * g_num_sms, (unsigned)bps_c * g_num_sms},
	};
	for (int k = 0; k < 2; k++) {
		bool use_cg = k == 1;
		for (const Size &sz : sizes) {
			unsigned n = use_cg ? sz.c : sz.t;
			std::vector<uint32_t> want = coop_ref(n, ROUNDS);
			bool all = true;
			for (int rep = 0; rep < 4; rep++) {
				cudaStream_t s = (rep == 3) ? (cudaStream_t)0 : nb;
				std::vector<uint32_t> got = coop_once(use_cg, n, s, B, step_add(7, step));
				ref_affine(xref, step_add(7, step));
				step++;
				char name[96];
				std::snprintf(name, sizeof(name), "%s_%s_%u_blocks_%s_rep%d",
					      use_cg ? "cg_grid_sync" : "timed_barrier", sz.name, n,
					      rep == 3 ? "legacy" : "stream", rep);
				all &= check_array(name, got.data(), want.data(), n);
				if (rep == 0)
					digest_vec(got);
			}
			if (!all && !use_cg) {
				std::printf("INFO %s: timed barrier failed at %s; skipping the cg "
					    "kernels (they would hang)\n",
					    g_prog, sz.name);
				k = 2;
				break;
			}
		}
	}
	{
		std::vector<uint32_t> x(1 << 14);
		CK(cudaMemcpy(x.data(), B.x, x.size() * 4, cudaMemcpyDeviceToHost));
		char name[64];
		std::snprintf(name, sizeof(name), "interleaved_chain_%u_steps", step);
		check_array(name, x.data(), xref.data(), x.size());
	}

	/* Too large for co-residency: refused at the call, not a sticky error. */
	{
		unsigned n = (unsigned)bps_t * g_num_sms + 1;
		int rounds = ROUNDS;
		uint64_t tmo = TIMEOUT_NS;
		void *args[] = {&B.a, &B.out, &B.bar, &rounds, &tmo};
		cudaError_t e = cudaLaunchCooperativeKernel((void *)k_coop_timed, dim3(n),
							    dim3(THREADS), args, 0, nb);
		(void)cudaGetLastError();
		check(e == cudaErrorCooperativeLaunchTooLarge, "too_large_grid_refused",
		      "%u blocks: returned %s", n, cudaGetErrorName(e));
		CK(cudaStreamSynchronize(nb));
	}

	CK(cudaStreamDestroy(nb));
	CK(cudaFree(B.a));
	CK(cudaFree(B.out));
	CK(cudaFree(B.x));
	CK(cudaFree(B.bar));
	return gpu_finish();
}
