/* SPDX-License-Identifier: MIT */
/*
 * Why does a per-entry copy of a CUDA graph run slower than the
 * application's own exec on the same SMs? (bench/results/gpu-2026-12-05e:
 * the decode replay's graph was about 1% slower as the copy on the 132-SM
 * entry.) A chain of NK short kernels (spin: SPIN_NS of %globaltimer on
 * every SM, so the step time is the kernels' own plus the gaps between
 * them) as one graph whose kernel nodes name the primary context, and as
 * the copy src/shim/graph_copies.c makes of it (a clone whose kernel nodes
 * name a green context with every SM, instantiated), each replayed and
 * synchronized STEPS times per round on:
 *   app_primary  the graph on a stream of the primary context (native)
 *   app_green    the graph on the green context's stream (the runtime on a
 *                whole-GPU entry since this session)
 *   copy_green   the copy on the green context's stream (before)
 *   copy_attr    the copy with every node's attributes copied again from the
 *                original node after the rewrite
 *   copy_prim    the same rewrite naming the primary context, on the primary's
 *                stream (is it the green context, or the rewrite itself?)
 *   clone_green  a clone instantiated without any rewrite, on the green
 *                context's stream (is it the clone?)
 *   eager_primary / eager_green  the NK kernels launched one by one
 * ROUNDS rounds alternate the variants; prints the median us per step of
 * each round and a median over rounds last.
 *   cc -O2 -I$CUDA/include graph_copy.c -lcuda -o graph_copy && ./graph_copy [NK] [SPIN_NS]
 */
#define _GNU_SOURCE
#include "../cu_bench.h"

#include <string.h>

#define STEPS 300
#define ROUNDS 5
#define NV 8

static const char *const vname[NV] = {"app_primary", "app_green",   "copy_green",
				      "copy_attr",   "copy_prim",   "clone_green",
				      "eager_primary", "eager_green"};
/* Per variant: its exec (NULL: eager) and whether it runs on the primary. */
static CUgraphExec vexec[NV];
static const int vprim[NV] = {1, 0, 0, 0, 1, 0, 1, 0};

static CUkernel k_spin;
static unsigned nsm;

/* A graph of nk spin kernels in a chain, their nodes naming ctx. */
static CUgraph make_graph(int nk, unsigned long long ns, CUcontext ctx)
{
	CUgraph g;
	CK(cuGraphCreate(&g, 0));
	CUgraphNode prev = NULL;
	for (int i = 0; i < nk; i++) {
		void *args[] = {&ns};
		CUDA_KERNEL_NODE_PARAMS p;
		memset(&p, 0, sizeof(p));
		p.kern = k_spin;
		p.ctx = ctx;
		p.gridDimX = nsm;
		p.gridDimY = p.gridDimZ = 1;
		p.blockDimX = 128;
		p.blockDimY = p.blockDimZ = 1;
		p.kernelParams = args;
		CUgraphNode n;
		CK(cuGraphAddKernelNode(&n, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
		prev = n;
	}
	return g;
}

/* The copy as graph_copies.c makes it: a clone, every kernel node naming
 * ctx (func NULL, kern kept), optionally the original node's attributes
 * copied back onto it. */
static CUgraphExec make_copy(CUgraph src, CUcontext ctx, int attrs, int rewrite)
{
	CUgraph g;
	CK(cuGraphClone(&g, src));
	size_t n = 0;
	CK(cuGraphGetNodes(g, NULL, &n));
	CUgraphNode *nodes = calloc(n ? n : 1, sizeof(*nodes));
	CUgraphNode *orig = calloc(n ? n : 1, sizeof(*orig));
	if (!nodes || !orig)
		exit(1);
	CK(cuGraphGetNodes(g, nodes, &n));
	size_t no = n;
	CK(cuGraphGetNodes(src, orig, &no));
	for (size_t i = 0; rewrite && i < n; i++) {
		CUDA_KERNEL_NODE_PARAMS p;
		memset(&p, 0, sizeof(p));
		CK(cuGraphKernelNodeGetParams(nodes[i], &p));
		p.func = NULL;
		p.ctx = ctx;
		CK(cuGraphKernelNodeSetParams(nodes[i], &p));
	}
	if (attrs)
		for (size_t i = 0; i < no; i++) {
			CUgraphNode c;
			CK(cuGraphNodeFindInClone(&c, orig[i], g));
			/* Refused between nodes of different contexts on driver 580
			 * (INVALID_VALUE): then copy_attr is the plain copy. */
			CUresult e = cuGraphKernelNodeCopyAttributes(c, orig[i]);
			if (e != CUDA_SUCCESS) {
				const char *nm = "?";
				cuGetErrorName(e, &nm);
				printf("copy_attr: cuGraphKernelNodeCopyAttributes -> %s; "
				       "copy_attr is copy_green\n", nm);
				break;
			}
		}
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	CK(cuGraphDestroy(g));
	free(nodes);
	free(orig);
	return x;
}

static double run(int v, CUstream sp, CUstream sg, int nk, unsigned long long ns)
{
	static double t[STEPS];
	CUstream s = vprim[v] ? sp : sg;
	for (int i = 0; i < STEPS; i++) {
		double t0 = now_us();
		if (vexec[v]) {
			CK(cuGraphLaunch(vexec[v], s));
		} else {
			void *args[] = {&ns};
			for (int k = 0; k < nk; k++)
				CK(cuLaunchKernel((CUfunction)k_spin, nsm, 1, 1, 128, 1, 1, 0, s, args,
						  NULL));
		}
		CK(cuStreamSynchronize(s));
		t[i] = now_us() - t0;
	}
	qsort(t, STEPS, sizeof(t[0]), cmp_double);
	return t[STEPS / 2];
}

int main(int argc, char **argv)
{
	int nk = argc > 1 ? atoi(argv[1]) : 150;
	unsigned long long ns = argc > 2 ? strtoull(argv[2], NULL, 10) : 3000;
	if (nk < 1 || nk > 10000) {
		fprintf(stderr, "usage: graph_copy [NK 1..10000] [SPIN_NS]\n");
		return 2;
	}
	CK(cuInit(0));
	CUdevice dev;
	CK(cuDeviceGet(&dev, 0));
	CUcontext prim;
	CK(cuDevicePrimaryCtxRetain(&prim, dev));
	CK(cuCtxSetCurrent(prim));
	CUlibrary lib;
	CK(cuLibraryLoadData(&lib, cu_bench_ptx, NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&k_spin, lib, "spin"));
	/* A green context with every SM (one resource: the whole device's). */
	CUdevResource all;
	CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
	nsm = all.sm.smCount;
	CUdevResourceDesc desc;
	CK(cuDevResourceGenerateDesc(&desc, &all, 1));
	CUgreenCtx green;
	CK(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CUcontext gctx;
	CK(cuCtxFromGreenCtx(&gctx, green));
	CUstream sp, sg;
	CK(cuStreamCreate(&sp, CU_STREAM_NON_BLOCKING));
	CK(cuGreenCtxStreamCreate(&sg, green, CU_STREAM_NON_BLOCKING, 0));

	CUgraph g = make_graph(nk, ns, prim);
	CUgraphExec app;
	CK(cuGraphInstantiateWithFlags(&app, g, 0));
	vexec[0] = vexec[1] = app;
	vexec[2] = make_copy(g, gctx, 0, 1);
	vexec[3] = make_copy(g, gctx, 1, 1);
	vexec[4] = make_copy(g, prim, 0, 1);
	vexec[5] = make_copy(g, gctx, 0, 0);
	printf("%u SMs, %d kernels of %llu ns a step, %d steps a run (median us a step)\n", nsm,
	       nk, ns, STEPS);
	double r[ROUNDS][NV];
	for (int v = 0; v < NV; v++) /* warm-up */
		run(v, sp, sg, nk, ns);
	for (int k = 0; k < ROUNDS; k++) {
		for (int i = 0; i < NV; i++) {
			int v = (i + k) % NV; /* rotate the order */
			r[k][v] = run(v, sp, sg, nk, ns);
		}
		printf("round %d:", k);
		for (int v = 0; v < NV; v++)
			printf(" %s %.1f", vname[v], r[k][v]);
		printf("\n");
	}
	printf("== median over rounds (us a step)\n");
	for (int v = 0; v < NV; v++) {
		double m[ROUNDS];
		for (int k = 0; k < ROUNDS; k++)
			m[k] = r[k][v];
		qsort(m, ROUNDS, sizeof(m[0]), cmp_double);
		printf("%-14s %.1f\n", vname[v], m[ROUNDS / 2]);
	}
	return 0;
}
