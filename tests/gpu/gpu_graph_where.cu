/* SPDX-License-Identifier: MIT */
/*
 * Where a CUDA graph's kernels run, against where a plain launch of the same
 * kernel runs, in the same process: the check that Vitamin-E places a graph
 * on the SMs of the pool entry it binds it to, as it does a kernel.
 *
 * A kernel whose 128 blocks each record their %smid (after a spin, so that
 * they spread over every SM the launch may use) runs R times as a plain
 * launch and R times as a replay of a graph captured with the runtime API
 * (so its node holds a CUkernel, as PyTorch's do). Natively both see every
 * SM. Under ve-run with a policy that keeps the process on part of the GPU
 * (`--policy fixed:leaves=4/12`: 32 SMs), both must stay there:
 *   check graph_within_plain: the most distinct SMs one graph replay used is
 *   at most the most one plain launch used (+0: the same entry).
 * A digest of the values the blocks computed is printed (same natively and
 * under any policy). Prints WHERE lines: plain=<max distinct> graph=<max
 * distinct>.
 */
#include "gpu_graph_common.h"

#include <set>

static const int BLOCKS = 128, THREADS = 64, R = 8;

static int distinct(const uint32_t *dsm)
{
	std::vector<uint32_t> s(BLOCKS);
	CK(cudaMemcpy(s.data(), dsm, BLOCKS * 4, cudaMemcpyDeviceToHost));
	std::set<uint32_t> seen;
	for (uint32_t x : s)
		if (x)
			seen.insert(x);
	return (int)seen.size();
}

int main()
{
	gpu_init("graph_where");
	uint32_t *dsm, *dval;
	CK(cudaMalloc(&dsm, BLOCKS * 4));
	CK(cudaMalloc(&dval, BLOCKS * 4));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	int tag = 7;
	cudaGraph_t g;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	k_where<<<BLOCKS, THREADS, 0, s>>>(dsm, dval, tag);
	CKL();
	CK(cudaStreamEndCapture(s, &g));
	cudaGraphExec_t x;
	CK(cudaGraphInstantiate(&x, g, 0));
	int plain = 0, graph = 0;
	for (int r = 0; r < R; r++) {
		CK(cudaMemsetAsync(dsm, 0, BLOCKS * 4, s));
		k_where<<<BLOCKS, THREADS, 0, s>>>(dsm, dval, tag);
		CKL();
		CK(cudaStreamSynchronize(s));
		plain = std::max(plain, distinct(dsm));
		CK(cudaMemsetAsync(dsm, 0, BLOCKS * 4, s));
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		graph = std::max(graph, distinct(dsm));
		std::vector<uint32_t> v(BLOCKS);
		CK(cudaMemcpy(v.data(), dval, BLOCKS * 4, cudaMemcpyDeviceToHost));
		digest_vec(v);
	}
	std::printf("WHERE plain=%d graph=%d (most distinct SMs of one launch, of %d blocks)\n", plain,
		    graph, BLOCKS);
	check(graph <= plain, "graph_within_plain",
	      "a graph replay used %d SMs, a plain launch of the same kernel at most %d", graph,
	      plain);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	return gpu_finish();
}
