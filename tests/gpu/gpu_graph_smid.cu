/* SPDX-License-Identifier: MIT */
/*
 * Where graph kernels run when a graph is launched into a green context's
 * stream (the %smid check over graphs). Creates two green contexts of its own
 * (16 SMs each, disjoint), finds each one's SM set with a plain launch, then
 * launches into each context's stream graphs captured or built in the primary
 * context: plain kernel nodes, a child graph, a conditional IF and a WHILE
 * node, a graph that tail-launches a device-launchable graph, and a graph
 * captured on the green stream itself. Every block records its %smid.
 *
 * Prints per kind and context one line
 *   GRAPH_CONFINEMENT kind=<k> ctx=<i> launched=<0|1> confined=<0|1> sms=<n> ref=<m> err=<name>
 * (read by bench/gpu/graphs/run into bench/results/graphs.json). Plain and
 * child-graph launches must succeed (a FAIL otherwise); that their kernels
 * stay on the context's SMs was expected and is a NOTE when not (driver 580
 * on the H200 confines none). For conditional bodies and device
 * launches the line is the finding (a NOTE when not confined or refused):
 * Vitamin-E runs those graphs on the whole GPU by default (VE_GRAPHS).
 * Run natively: under Vitamin-E the program's own green contexts pass through
 * and the result is the same. Built with -rdc=true -lcudadevrt -lcuda.
 */
#include "gpu_graph_common.h"

#include <algorithm>
#include <set>
#include <string>

static const int BLOCKS = 128, THREADS = 64, SLOTS = 1 << 14;

/* Block b of launch `tag` writes its SM to smid[tag * BLOCKS + b] after a short
 * spin, so that the blocks spread over every SM the launch may use. */
__global__ void k_smid(uint32_t *smid, uint32_t *val, int tag)
{
	if (threadIdx.x == 0) {
		spin_ns(20000);
		uint32_t id;
		asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
		smid[tag * BLOCKS + blockIdx.x] = id + 1;
		val[tag * BLOCKS + blockIdx.x] = (uint32_t)tag * 1000u + blockIdx.x;
	}
}

__global__ void k_tail(cudaGraphExec_t d)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		cudaGraphLaunch(d, cudaStreamGraphTailLaunch);
}

static uint32_t *g_smid, *g_val;

static void launch_smid(cudaStream_t s, int tag)
{
	k_smid<<<BLOCKS, THREADS, 0, s>>>(g_smid, g_val, tag);
	CKL();
}

static cudaGraphNode_t add_smid_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t nd, int *tag)
{
	cudaKernelNodeParams kp = {};
	void *args[] = {&g_smid, &g_val, tag};
	kp.func = (void *)k_smid;
	kp.gridDim = dim3(BLOCKS);
	kp.blockDim = dim3(THREADS);
	kp.kernelParams = args;
	cudaGraphNode_t n;
	CK(cudaGraphAddKernelNode(&n, g, deps, nd, &kp));
	return n;
}

struct kind {
	std::string name;
	cudaGraphExec_t x;
	std::vector<int> tags; /* the launches whose blocks this graph runs */
	bool must_confine;
};

int main()
{
	gpu_init("graph_smid");
	CU(cuInit(0));
	CUdevice dev;
	CU(cuDeviceGet(&dev, 0));
	CUdevResource whole, groups[2], rem;
	CU(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
	unsigned ng = 2;
	CU(cuDevSmResourceSplitByCount(groups, &ng, &whole, &rem, 0, 16));
	check(ng == 2, "two_groups", "%u groups of 16 SMs", ng);
	CUgreenCtx gc[2];
	CUstream gs[2];
	for (unsigned i = 0; i < ng; i++) {
		CUdevResourceDesc d;
		CU(cuDevResourceGenerateDesc(&d, &groups[i], 1));
		CU(cuGreenCtxCreate(&gc[i], d, dev, CU_GREEN_CTX_DEFAULT_STREAM));
		CU(cuGreenCtxStreamCreate(&gs[i], gc[i], CU_STREAM_NON_BLOCKING, 0));
	}
	CK(cudaMalloc(&g_smid, SLOTS * BLOCKS * 4));
	CK(cudaMalloc(&g_val, SLOTS * BLOCKS * 4));
	cudaStream_t cap;
	CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));

	int next_tag = 0;
	std::vector<kind> kinds;
	/* 1. captured kernels */
	{
		kind k{"captured", nullptr, {next_tag, next_tag + 1}, true};
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
		launch_smid(cap, next_tag++);
		launch_smid(cap, next_tag++);
		CK(cudaStreamEndCapture(cap, &g));
		CK(cudaGraphInstantiate(&k.x, g, 0));
		kinds.push_back(k);
	}
	/* 2. a child graph */
	{
		kind k{"child", nullptr, {next_tag, next_tag + 1}, true};
		cudaGraph_t c, g;
		CK(cudaGraphCreate(&c, 0));
		int t0 = next_tag++, t1 = next_tag++;
		cudaGraphNode_t n0 = add_smid_node(c, nullptr, 0, &t0);
		add_smid_node(c, &n0, 1, &t1);
		CK(cudaGraphCreate(&g, 0));
		cudaGraphNode_t cn;
		CK(cudaGraphAddChildGraphNode(&cn, g, nullptr, 0, c));
		CK(cudaGraphInstantiate(&k.x, g, 0));
		kinds.push_back(k);
	}
	/* 3. conditional IF (taken) and 4. WHILE (three rounds, each its own slot) */
	int *cnt;
	CK(cudaMalloc(&cnt, 64));
	for (int w = 0; w < 2; w++) {
		kind k{w ? "cond_while" : "cond_if", nullptr, {}, false};
		cudaGraph_t g, body;
		CK(cudaGraphCreate(&g, 0));
		cudaGraphConditionalHandle h;
		CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
		add_conditional(g, nullptr, 0, h, w ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf, 1,
				&body);
		int t = next_tag;
		k.tags.push_back(next_tag++);
		CK(cudaStreamBeginCaptureToGraph(cap, body, nullptr, nullptr, 0,
						 cudaStreamCaptureModeGlobal));
		launch_smid(cap, t);
		if (w)
			k_dec_cond<<<1, 32, 0, cap>>>(h, cnt);
		CK(cudaStreamEndCapture(cap, &body));
		CK(cudaGraphInstantiate(&k.x, g, 0));
		kinds.push_back(k);
	}
	/* 5. a tail launch of a device-launchable graph */
	{
		kind k{"device_launch", nullptr, {}, false};
		cudaGraph_t gd, g;
		CK(cudaGraphCreate(&gd, 0));
		int t = next_tag++;
		k.tags.push_back(t);
		add_smid_node(gd, nullptr, 0, &t);
		cudaGraphExec_t xd;
		CK(cudaGraphInstantiate(&xd, gd, cudaGraphInstantiateFlagDeviceLaunch));
		CK(cudaGraphUpload(xd, cap));
		CK(cudaGraphCreate(&g, 0));
		cudaKernelNodeParams kp = {};
		void *args[] = {&xd};
		kp.func = (void *)k_tail;
		kp.gridDim = dim3(1);
		kp.blockDim = dim3(32);
		kp.kernelParams = args;
		cudaGraphNode_t n;
		CK(cudaGraphAddKernelNode(&n, g, nullptr, 0, &kp));
		CK(cudaGraphInstantiate(&k.x, g, 0));
		kinds.push_back(k);
	}
	CK(cudaStreamSynchronize(cap));

	for (unsigned i = 0; i < ng; i++) {
		/* the context's SM set, from a plain launch */
		int rt = next_tag++;
		launch_smid((cudaStream_t)gs[i], rt);
		CU(cuStreamSynchronize(gs[i]));
		std::vector<uint32_t> sm(SLOTS * BLOCKS), val(SLOTS * BLOCKS);
		CK(cudaMemcpy(sm.data(), g_smid, sm.size() * 4, cudaMemcpyDeviceToHost));
		std::set<uint32_t> ref;
		for (int b = 0; b < BLOCKS; b++)
			ref.insert(sm[rt * BLOCKS + b]);
		check(ref.size() <= 16 && !ref.count(0), "plain_launch_confined",
		      "ctx %u: a plain launch used %zu SMs", i, ref.size());
		for (kind &k : kinds) {
			CK(cudaMemset(g_smid, 0, SLOTS * BLOCKS * 4));
			const int three = 3;
			CK(cudaMemcpy(cnt, &three, 4, cudaMemcpyHostToDevice));
			cudaError_t e = cudaGraphLaunch(k.x, (cudaStream_t)gs[i]);
			if (e == cudaSuccess)
				e = cudaStreamSynchronize((cudaStream_t)gs[i]);
			(void)cudaGetLastError();
			CK(cudaMemcpy(sm.data(), g_smid, sm.size() * 4, cudaMemcpyDeviceToHost));
			std::set<uint32_t> seen;
			size_t ran = 0;
			for (int t : k.tags)
				for (int b = 0; b < BLOCKS; b++)
					if (sm[t * BLOCKS + b]) {
						seen.insert(sm[t * BLOCKS + b]);
						ran++;
					}
			bool confined = ran && std::includes(ref.begin(), ref.end(), seen.begin(),
							     seen.end());
			std::printf("GRAPH_CONFINEMENT kind=%s ctx=%u launched=%d confined=%d sms=%zu "
				    "ref=%zu err=%s\n",
				    k.name.c_str(), i, e == cudaSuccess && ran > 0, confined, seen.size(),
				    ref.size(), cudaGetErrorName(e));
			/* Driver 580 on the H200 confines none of them (2026-12-03):
			 * the kernel nodes keep the context they were captured in. That
			 * is the driver's behaviour, not a fault of the program: a NOTE,
			 * with the GRAPH_CONFINEMENT line as the record. */
			if (k.must_confine)
				check(e == cudaSuccess, (k.name + "_launched").c_str(), "ctx %u: %s", i,
				      cudaGetErrorName(e));
			if (k.must_confine && e == cudaSuccess && !confined)
				note((k.name + "_confined").c_str(),
				     "ctx %u: %zu SMs seen, %zu outside the context's", i, seen.size(),
				     (size_t)std::count_if(seen.begin(), seen.end(),
							   [&](uint32_t v) { return !ref.count(v); }));
			else if (!k.must_confine && (e != cudaSuccess || !confined))
				note(k.name.c_str(), "ctx %u: %s, %zu SMs seen (%s)", i, cudaGetErrorName(e),
				     seen.size(), confined ? "confined" : "not confined");
			if (e != cudaSuccess) /* a refused launch may leave the context unusable */
				break;
		}
	}
	/* values (not SM ids) are deterministic */
	std::vector<uint32_t> val(BLOCKS);
	CK(cudaMemcpy(val.data(), g_val, BLOCKS * 4, cudaMemcpyDeviceToHost));
	digest_vec(val);
	return gpu_finish();
}
