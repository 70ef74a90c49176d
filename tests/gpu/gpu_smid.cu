/* SPDX-License-Identifier: MIT */
/*
 * Where launches ran: every block records %smid (after a short spin so that
 * blocks spread over all SMs the launch may use). Prints, per launch, the
 * number of distinct SMs and the SM set, and a summary. It does not fail on
 * the counts (a native run uses every SM; Vitamin-E with chaos confines each
 * launch to a random partition); it checks only that every block ran, that
 * every %smid is below the SM count, and that the blocks' computed values are
 * right. Note: under MPS %smid is virtualized per client (gpu-facts.md).
 */
#include "gpu_common.h"

#include <algorithm>
#include <string>

__global__ void k_smid(uint32_t *smid, uint32_t *val, uint64_t spin)
{
	if (threadIdx.x == 0) {
		spin_ns(spin);
		uint32_t id;
		asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
		smid[blockIdx.x] = id;
	}
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	val[g] = g * 2654435761u + 12345u;
}

/* "0-7,16-17,..." */
static std::string ranges(const std::vector<uint32_t> &ids)
{
	std::string s;
	for (size_t i = 0; i < ids.size();) {
		size_t j = i;
		while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1)
			j++;
		char buf[32];
		if (j == i)
			std::snprintf(buf, sizeof(buf), "%s%u", s.empty() ? "" : ",", ids[i]);
		else
			std::snprintf(buf, sizeof(buf), "%s%u-%u", s.empty() ? "" : ",", ids[i], ids[j]);
		s += buf;
		i = j + 1;
	}
	return s;
}

int main()
{
	gpu_init("smid");
	const int THREADS = 128;
	const unsigned grids[] = {8, 32, (unsigned)g_num_sms, 2u * g_num_sms, 8u * g_num_sms};
	const int NG = sizeof(grids) / sizeof(grids[0]);
	const int REPS = 4;
	cudaStream_t st[3];
	CK(cudaStreamCreate(&st[0]));
	CK(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking));
	st[2] = 0;
	const char *stname[3] = {"blocking", "nonblocking", "legacy"};

	struct Launch {
		unsigned grid;
		int stream;
		size_t off;
	};
	std::vector<Launch> launches;
	size_t total = 0;
	for (int r = 0; r < REPS; r++)
		for (int g = 0; g < NG; g++)
			for (int s = 0; s < 3; s++) {
				launches.push_back({grids[g], s, total});
				total += grids[g];
			}
	uint32_t *dsm, *dval;
	CK(cudaMalloc(&dsm, total * 4));
	CK(cudaMalloc(&dval, total * THREADS * 4));
	CK(cudaMemset(dsm, 0xff, total * 4));
	CK(cudaDeviceSynchronize());
	for (const Launch &l : launches) {
		k_smid<<<l.grid, THREADS, 0, st[l.stream]>>>(dsm + l.off, dval + l.off * THREADS,
							     20000);
		CKL();
	}
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> sm(total), val(total * THREADS);
	CK(cudaMemcpy(sm.data(), dsm, total * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(val.data(), dval, val.size() * 4, cudaMemcpyDeviceToHost));

	size_t unwritten = 0, out_of_range = 0;
	int dmin = 1 << 30, dmax = 0;
	double dsum = 0;
	std::vector<int> used(g_num_sms, 0);
	for (size_t k = 0; k < launches.size(); k++) {
		const Launch &l = launches[k];
		std::vector<uint32_t> ids;
		for (unsigned b = 0; b < l.grid; b++) {
			uint32_t id = sm[l.off + b];
			if (id == 0xffffffffu) {
				unwritten++;
				continue;
			}
			if (id >= (uint32_t)g_num_sms) {
				out_of_range++;
				continue;
			}
			ids.push_back(id);
			used[id] = 1;
		}
		std::sort(ids.begin(), ids.end());
		ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
		int d = (int)ids.size();
		dmin = std::min(dmin, d);
		dmax = std::max(dmax, d);
		dsum += d;
		std::printf("SMID launch=%zu grid=%u stream=%s distinct=%d sms=%s\n", k, l.grid,
			    stname[l.stream], d, ranges(ids).c_str());
	}
	int u = 0;
	for (int x : used)
		u += x;
	report("%zu launches, distinct SMs per launch min %d avg %.1f max %d; union %d of %d SMs",
	       launches.size(), dmin, dsum / launches.size(), dmax, u, g_num_sms);
	for (int g = 0; g < NG; g++) {
		int mn = 1 << 30, mx = 0;
		for (size_t k = 0; k < launches.size(); k++) {
			if (launches[k].grid != grids[g])
				continue;
			std::vector<uint32_t> ids(sm.begin() + launches[k].off,
						  sm.begin() + launches[k].off + grids[g]);
			std::sort(ids.begin(), ids.end());
			int d = (int)(std::unique(ids.begin(), ids.end()) - ids.begin());
			mn = std::min(mn, d);
			mx = std::max(mx, d);
		}
		report("grid %u: distinct SMs per launch %d..%d", grids[g], mn, mx);
	}
	check(unwritten == 0, "every_block_ran", "%zu blocks wrote no smid", unwritten);
	check(out_of_range == 0, "smid_in_range", "%zu smids >= %d", out_of_range, g_num_sms);
	std::vector<uint32_t> want(val.size());
	for (const Launch &l : launches)
		for (uint32_t gi = 0; gi < l.grid * (uint32_t)THREADS; gi++)
			want[l.off * THREADS + gi] = gi * 2654435761u + 12345u;
	check_array("block_values", val.data(), want.data(), val.size());
	digest_vec(val);
	CK(cudaStreamDestroy(st[0]));
	CK(cudaStreamDestroy(st[1]));
	CK(cudaFree(dsm));
	CK(cudaFree(dval));
	return gpu_finish();
}
