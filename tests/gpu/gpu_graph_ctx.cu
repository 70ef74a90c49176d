/* SPDX-License-Identifier: MIT */
/*
 * Which way of building a graph makes its kernel nodes run on a green
 * context's SMs when the graph is launched into that context's stream.
 * gpu_graph_smid shows that a graph captured or built in the primary context
 * runs on every SM whatever stream it is launched into (driver 580, H200):
 * the kernel node keeps the context it was made in. This program tries each
 * way the driver API offers to give a node another context, one graph per
 * way, all launched into a 16-SM green context's stream:
 *
 *   primary_capture     captured on a primary-context stream (the reference)
 *   green_capture       captured on the green context's own stream
 *   green_capture_prim  the same graph launched into a primary stream
 *   set_ctx_func        a clone whose kernel nodes get ctx = the green
 *                       context, func kept (the header says ctx is then
 *                       ignored)
 *   set_ctx_kern        a clone whose kernel nodes get func = NULL,
 *                       kern = the CUkernel, ctx = the green context
 *   set_func_green      a clone whose nodes get func = cuKernelGetFunction
 *                       with the green context current
 *   inst_green_current  the primary graph instantiated with the green
 *                       context current
 *   exec_set_ctx_kern   cuGraphExecKernelNodeSetParams on the primary
 *                       graph's exec with kern + ctx = the green context
 *   add_node_ctx        a graph built with cuGraphAddNode, kernel.kern and
 *                       kernel.ctx = the green context
 *
 * One line per way:
 *   GRAPH_CTX way=<w> rc=<driver error name> sms=<n> outside=<n> confined=<0|1> ok=<0|1>
 * ok: the values the kernels wrote are right. Checks (PASS/FAIL): every
 * launch that ran wrote the right values, and set_ctx_kern (the way
 * src/shim/graph.c gives a graph to a pool entry) runs on the green context's
 * SMs; the other ways are measurements of the driver.
 * Built with -lcuda. Run natively.
 */
#include "gpu_graph_common.h"

#include <set>
#include <string>

static const int BLOCKS = 128, THREADS = 64;

static uint32_t *g_smid, *g_val;
static std::set<uint32_t> g_ref;
/* Both streams a graph may be launched into: a context synchronize covers
 * only the current (primary) context, not the green context's stream. */
static CUstream g_gs, g_ps;

static const char *errname(CUresult r)
{
	const char *n = "?";
	cuGetErrorName(r, &n);
	return n;
}

/* The line of a way that failed before anything ran. */
static bool failed(const char *way, CUresult r)
{
	std::printf("GRAPH_CTX way=%s rc=%s sms=0 outside=0 confined=0 ok=0\n", way, errname(r));
	return false;
}

/* Clears the output, runs launch(), reads where the blocks ran. */
template <class F> static bool measure(const char *way, int tag, F launch)
{
	CK(cudaMemset(g_smid, 0, BLOCKS * 4));
	CK(cudaMemset(g_val, 0, BLOCKS * 4));
	CK(cudaDeviceSynchronize());
	CUresult r = launch();
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(g_gs);
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(g_ps);
	std::vector<uint32_t> s(BLOCKS), v(BLOCKS);
	std::set<uint32_t> seen;
	int outside = 0, ok = r == CUDA_SUCCESS;
	if (r == CUDA_SUCCESS) {
		CK(cudaMemcpy(s.data(), g_smid, BLOCKS * 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(v.data(), g_val, BLOCKS * 4, cudaMemcpyDeviceToHost));
		for (int b = 0; b < BLOCKS; b++) {
			if (!s[b] || v[b] != (uint32_t)tag * 1000u + b)
				ok = 0;
			if (s[b]) {
				seen.insert(s[b]);
				outside += !g_ref.count(s[b]);
			}
		}
	}
	std::printf("GRAPH_CTX way=%s rc=%s sms=%zu outside=%d confined=%d ok=%d\n", way, errname(r),
		    seen.size(), outside, r == CUDA_SUCCESS && ok && outside == 0, ok);
	std::fflush(stdout);
	check(ok, (std::string(way) + "_values").c_str(), "%s: %s, the kernels' values %s", way,
	      errname(r), ok ? "right" : "wrong or missing");
	return r == CUDA_SUCCESS && ok && outside == 0;
}

/* A clone of g whose kernel nodes are rewritten by fix(params). */
template <class F> static CUresult rewrite(CUgraph g, CUgraph *out, F fix)
{
	CUresult r = cuGraphClone(out, g);
	size_t n = 0;
	if (!r)
		r = cuGraphGetNodes(*out, nullptr, &n);
	std::vector<CUgraphNode> nodes(n);
	if (!r && n)
		r = cuGraphGetNodes(*out, nodes.data(), &n);
	for (size_t i = 0; i < n && !r; i++) {
		CUgraphNodeType t;
		r = cuGraphNodeGetType(nodes[i], &t);
		if (r || t != CU_GRAPH_NODE_TYPE_KERNEL)
			continue;
		CUDA_KERNEL_NODE_PARAMS p;
		std::memset(&p, 0, sizeof(p));
		r = cuGraphKernelNodeGetParams(nodes[i], &p);
		if (!r)
			r = fix(p);
		if (!r)
			r = cuGraphKernelNodeSetParams(nodes[i], &p);
	}
	return r;
}

int main()
{
	gpu_init("graph_ctx");
	CU(cuInit(0));
	CUdevice dev;
	CU(cuDeviceGet(&dev, 0));
	CK(cudaFree(nullptr)); /* the primary context, current */
	CUcontext prim;
	CU(cuCtxGetCurrent(&prim));
	CUdevResource whole, group, rem;
	CU(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
	unsigned ng = 1;
	CU(cuDevSmResourceSplitByCount(&group, &ng, &whole, &rem, 0, 16));
	CUdevResourceDesc d;
	CU(cuDevResourceGenerateDesc(&d, &group, 1));
	CUgreenCtx gc;
	CU(cuGreenCtxCreate(&gc, d, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CUcontext gctx;
	CU(cuCtxFromGreenCtx(&gctx, gc));
	CUstream gs;
	CU(cuGreenCtxStreamCreate(&gs, gc, CU_STREAM_NON_BLOCKING, 0));
	CK(cudaMalloc(&g_smid, BLOCKS * 4));
	CK(cudaMalloc(&g_val, BLOCKS * 4));
	cudaStream_t ps;
	CK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
	g_gs = gs;
	g_ps = (CUstream)ps;
	cudaKernel_t rk;
	CK(cudaGetKernel(&rk, k_where));
	CUkernel kern = (CUkernel)rk;

	/* The green context's SMs: where a plain launch into its stream runs. */
	k_where<<<BLOCKS, THREADS, 0, (cudaStream_t)gs>>>(g_smid, g_val, 0);
	CKL();
	CU(cuStreamSynchronize(gs));
	{
		std::vector<uint32_t> s(BLOCKS);
		CK(cudaMemcpy(s.data(), g_smid, BLOCKS * 4, cudaMemcpyDeviceToHost));
		for (uint32_t x : s)
			if (x)
				g_ref.insert(x);
		std::printf("GRAPH_CTX_REF sms=%zu (plain launch into the 16-SM green stream)\n",
			    g_ref.size());
	}

	int tag = 1;
	/* primary_capture: the reference graph. */
	cudaGraph_t pg;
	CK(cudaStreamBeginCapture(ps, cudaStreamCaptureModeGlobal));
	k_where<<<BLOCKS, THREADS, 0, ps>>>(g_smid, g_val, tag);
	CKL();
	CK(cudaStreamEndCapture(ps, &pg));
	CUgraphExec px;
	CU(cuGraphInstantiate(&px, (CUgraph)pg, 0));
	measure("primary_capture", tag, [&] { return cuGraphLaunch(px, gs); });
	{ /* what a captured runtime launch's node holds: func, kern, ctx */
		size_t n = 1;
		CUgraphNode node;
		CU(cuGraphGetNodes((CUgraph)pg, &node, &n));
		CUDA_KERNEL_NODE_PARAMS p;
		std::memset(&p, 0, sizeof(p));
		CU(cuGraphKernelNodeGetParams(node, &p));
		CUfunction kf = nullptr;
		CU(cuKernelGetFunction(&kf, kern));
		std::printf("GRAPH_CTX_NODE captured: func %p kern %p ctx %p; cudaGetKernel %p, its "
			    "function %p, primary ctx %p\n",
			    (void *)p.func, (void *)p.kern, (void *)p.ctx, (void *)kern, (void *)kf,
			    (void *)prim);
	}
	/* A module's function (loaded from PTX, as Triton loads its kernels):
	 * does its captured node hold a CUkernel? Without one the node cannot
	 * be given another context. */
	{
		static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
					  ".visible .entry nop_k(.param .u64 p)\n{\n\tret;\n}\n";
		CUmodule mod;
		CUfunction mf;
		CUresult r = cuModuleLoadData(&mod, ptx);
		if (!r)
			r = cuModuleGetFunction(&mf, mod, "nop_k");
		if (r) {
			std::printf("GRAPH_CTX_NODE module: %s loading a PTX module\n", errname(r));
		} else {
			void *margs[] = {&g_smid};
			cudaGraph_t g;
			CK(cudaStreamBeginCapture(ps, cudaStreamCaptureModeGlobal));
			CU(cuLaunchKernel(mf, 1, 1, 1, 32, 1, 1, 0, (CUstream)ps, margs, nullptr));
			CK(cudaStreamEndCapture(ps, &g));
			size_t n = 1;
			CUgraphNode node;
			CU(cuGraphGetNodes((CUgraph)g, &node, &n));
			CUDA_KERNEL_NODE_PARAMS p;
			std::memset(&p, 0, sizeof(p));
			CU(cuGraphKernelNodeGetParams(node, &p));
			std::printf("GRAPH_CTX_NODE module: func %p kern %p ctx %p\n", (void *)p.func,
				    (void *)p.kern, (void *)p.ctx);
		}
	}
	/* captured_kern_launch: a driver launch of the CUkernel cast to a
	 * function (as the runtime may launch), captured, then rewritten. */
	{
		void *args[] = {&g_smid, &g_val, &tag};
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(ps, cudaStreamCaptureModeGlobal));
		CU(cuLaunchKernel((CUfunction)kern, BLOCKS, 1, 1, THREADS, 1, 1, 0, (CUstream)ps, args,
				  nullptr));
		CK(cudaStreamEndCapture(ps, &g));
		size_t n = 1;
		CUgraphNode node;
		CU(cuGraphGetNodes((CUgraph)g, &node, &n));
		CUDA_KERNEL_NODE_PARAMS p;
		std::memset(&p, 0, sizeof(p));
		CU(cuGraphKernelNodeGetParams(node, &p));
		std::printf("GRAPH_CTX_NODE kern_launch: func %p kern %p ctx %p\n", (void *)p.func,
			    (void *)p.kern, (void *)p.ctx);
	}

	/* green_capture: captured on the green context's stream. */
	{
		CUresult r = cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL);
		CUgraph g = nullptr;
		CUgraphExec x = nullptr;
		if (!r) {
			k_where<<<BLOCKS, THREADS, 0, (cudaStream_t)gs>>>(g_smid, g_val, tag);
			r = cuStreamEndCapture(gs, &g);
		}
		if (!r)
			r = cuGraphInstantiate(&x, g, 0);
		if (r) {
			failed("green_capture", r);
		} else {
			measure("green_capture", tag, [&] { return cuGraphLaunch(x, gs); });
			measure("green_capture_prim", tag,
				[&] { return cuGraphLaunch(x, (CUstream)ps); });
		}
	}

	auto try_clone = [&](const char *way, auto fix) -> bool {
		CUgraph g = nullptr;
		CUgraphExec x = nullptr;
		CUresult r = rewrite((CUgraph)pg, &g, fix);
		if (!r)
			r = cuGraphInstantiate(&x, g, 0);
		if (r)
			return failed(way, r);
		return measure(way, tag, [&] { return cuGraphLaunch(x, gs); });
	};
	try_clone("set_ctx_func", [&](CUDA_KERNEL_NODE_PARAMS &p) {
		p.ctx = gctx;
		return CUDA_SUCCESS;
	});
	/* The way Vitamin-E places graphs on pool entries (src/shim/graph.c):
	 * a check, so that a driver that changes it shows. */
	bool kern_ok = try_clone("set_ctx_kern", [&](CUDA_KERNEL_NODE_PARAMS &p) {
		p.func = nullptr;
		p.kern = kern;
		p.ctx = gctx;
		return CUDA_SUCCESS;
	});
	check(kern_ok, "set_ctx_kern_confined",
	      "a clone with kern + ctx = the green context %s on its SMs",
	      kern_ok ? "runs" : "does not run");
	try_clone("set_func_green", [&](CUDA_KERNEL_NODE_PARAMS &p) {
		void *was = (void *)p.func;
		CUresult r = cuCtxPushCurrent(gctx);
		CUfunction f = nullptr;
		if (!r)
			r = cuKernelGetFunction(&f, kern);
		CUcontext dummy;
		cuCtxPopCurrent(&dummy);
		p.func = f;
		p.kern = nullptr;
		p.ctx = nullptr;
		std::printf("GRAPH_CTX_NOTE set_func_green: function %p (captured node's %p)\n",
			    (void *)f, was);
		return r;
	});
	{ /* inst_green_current */
		CUgraphExec x = nullptr;
		CUresult r = cuCtxPushCurrent(gctx);
		if (!r)
			r = cuGraphInstantiate(&x, (CUgraph)pg, 0);
		CUcontext dummy;
		cuCtxPopCurrent(&dummy);
		if (r)
			failed("inst_green_current", r);
		else
			measure("inst_green_current", tag, [&] { return cuGraphLaunch(x, gs); });
	}
	{ /* exec_set_ctx_kern */
		size_t n = 1;
		CUgraphNode node;
		CUresult r = cuGraphGetNodes((CUgraph)pg, &node, &n);
		CUgraphExec x = nullptr;
		if (!r)
			r = cuGraphInstantiate(&x, (CUgraph)pg, 0);
		CUDA_KERNEL_NODE_PARAMS p;
		std::memset(&p, 0, sizeof(p));
		if (!r)
			r = cuGraphKernelNodeGetParams(node, &p);
		if (!r) {
			p.func = nullptr;
			p.kern = kern;
			p.ctx = gctx;
			r = cuGraphExecKernelNodeSetParams(x, node, &p);
		}
		if (r)
			failed("exec_set_ctx_kern", r);
		else
			measure("exec_set_ctx_kern", tag, [&] { return cuGraphLaunch(x, gs); });
	}
	{ /* add_node_ctx */
		CUgraph g;
		CU(cuGraphCreate(&g, 0));
		void *args[] = {&g_smid, &g_val, &tag};
		CUgraphNodeParams np;
		std::memset(&np, 0, sizeof(np));
		np.type = CU_GRAPH_NODE_TYPE_KERNEL;
		np.kernel.kern = kern;
		np.kernel.ctx = gctx;
		np.kernel.gridDimX = BLOCKS;
		np.kernel.gridDimY = np.kernel.gridDimZ = 1;
		np.kernel.blockDimX = THREADS;
		np.kernel.blockDimY = np.kernel.blockDimZ = 1;
		np.kernel.kernelParams = args;
		CUgraphNode n;
		CUgraphExec x = nullptr;
		CUresult r = cuGraphAddNode(&n, g, nullptr, nullptr, 0, &np);
		if (!r)
			r = cuGraphInstantiate(&x, g, 0);
		if (r)
			failed("add_node_ctx", r);
		else
			measure("add_node_ctx", tag, [&] { return cuGraphLaunch(x, gs); });
	}
	return gpu_finish();
}
