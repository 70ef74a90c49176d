/* SPDX-License-Identifier: MIT */
/*
 * CUDA graphs as operations (docs/semantics.md, "Capture and graphs"):
 * capture into an existing graph (a conditional node's body), conditional
 * while/if nodes, child graphs, launches of one exec on several streams
 * (CUDA orders them), concurrent replay of several execs, exec update and
 * destroy with launches pending, upload, external event nodes, and captures
 * made by several threads while others run ordinary work. Self-checking; run
 * natively and under the shim by test_shim_semantics.
 */
#include "prog_shim.h"

static CUfunction f_dec_cond, f_set_cond, f_slow_inc, f_muladd_mod;

/* The body of a do-while loop: *counter -= 1, then the loop goes on while it is non-zero. */
static int k_dec_cond(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *c = P(0, uint32_t *);
	if (*c)
		(*c)--;
	return fakecuda_cond_set(P(1, CUgraphConditionalHandle), *c != 0) ? 1 : 0;
}

/* The condition of an if node: *p != 0. */
static int k_set_cond(void *const *params, const struct fakecuda_exec *e)
{
	return fakecuda_cond_set(P(1, CUgraphConditionalHandle), *P(0, uint32_t *) != 0) ? 1 : 0;
}

/* *p += 1 with a pause between the read and the write: two runs at once lose one. */
static int k_slow_inc(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *);
	uint32_t v = *p;
	sleep_us(P(1, uint32_t));
	*p = v + 1;
	return 0;
}

static void setup(void)
{
	static const size_t cond_sz[] = {8, 8}, inc_sz[] = {8, 4};
	int r = fakecuda_register_kernel("dec_cond", k_dec_cond, 2, cond_sz);
	r |= fakecuda_register_kernel("set_cond", k_set_cond, 2, cond_sz);
	r |= fakecuda_register_kernel("slow_inc", k_slow_inc, 2, inc_sz);
	if (r) {
		fprintf(stderr, "FAIL: kernel registration\n");
		exit(1);
	}
	setup_common();
	CK(cuModuleGetFunction(&f_dec_cond, mod, "dec_cond"));
	CK(cuModuleGetFunction(&f_set_cond, mod, "set_cond"));
	CK(cuModuleGetFunction(&f_slow_inc, mod, "slow_inc"));
	/* Kernels as libcudart (and so PyTorch) launches them: CUkernels of a
	 * library, cast to CUfunction. A graph's kernel node then holds the
	 * CUkernel, and the shim can run the graph on a pool entry's SMs (a
	 * copy whose nodes name the entry's context); module_graph covers
	 * functions of modules, which it cannot move. */
	CK(cuModuleGetFunction(&f_muladd_mod, mod, "muladd"));
	CUlibrary lib;
	CUkernel k;
	CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
	static const struct {
		CUfunction *f;
		const char *name;
	} lk[] = {{&f_muladd, "muladd"},
		  {&f_add, "add"},
		  {&f_slow, "slow_set"},
		  {&f_slow_inc, "slow_inc"}};
	for (size_t i = 0; i < sizeof(lk) / sizeof(lk[0]); i++) {
		CK(cuLibraryGetKernel(&k, lib, lk[i].name));
		*lk[i].f = (CUfunction)(void *)k;
	}
}

static void cond_kernel(CUfunction f, CUstream s, CUdeviceptr p, CUgraphConditionalHandle h)
{
	void *args[] = {&p, &h};
	CK(launch1(f, s, args));
}

static void slow_inc(CUstream s, CUdeviceptr p, uint32_t us)
{
	void *args[] = {&p, &us};
	CK(launch1(f_slow_inc, s, args));
}

static void set_u32(CUstream s, CUdeviceptr p, uint32_t v)
{
	CK(cuMemsetD32Async(p, v, 1, s));
}

/* A conditional node added to g; *body gets its (first) body graph. */
static CUgraphNode add_cond(CUgraph g, CUgraphConditionalHandle h, CUgraphConditionalNodeType t,
			    CUgraph *body)
{
	CUgraphNodeParams p;
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	p.conditional.handle = h;
	p.conditional.type = t;
	p.conditional.size = 1;
	p.conditional.ctx = pctx;
	CUgraphNode n = NULL;
	CK(cuGraphAddNode(&n, g, NULL, NULL, 0, &p));
	*body = p.conditional.phGraph_out ? p.conditional.phGraph_out[0] : NULL;
	return n;
}

/* A do-while loop: a conditional WHILE node whose handle starts at 1 at every launch,
 * its body captured into the node's graph (cuStreamBeginCaptureToGraph). Captured
 * work must not run at capture: a runtime that missed the capture would run it at once
 * (the counter changes) and the loop would then run an empty body. */
static void t_cond_while(void)
{
	graph_outside_ok = true; /* conditional graphs may run on the app's context */
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr ctr = dalloc(64), acc = dalloc(64);
	set_u32(s, ctr, 5);
	CUgraph g, body = NULL;
	CK(cuGraphCreate(&g, 0));
	CUgraphConditionalHandle h = 0;
	CK(cuGraphConditionalHandleCreate(&h, g, pctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	add_cond(g, h, CU_GRAPH_COND_TYPE_WHILE, &body);
	CHECK(body != NULL);
	if (!body)
		return;
	CK(cuStreamBeginCaptureToGraph(s, body, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	CK(cuStreamIsCapturing(s, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	muladd(s, acc, 1, 2, 1);
	cond_kernel(f_dec_cond, s, ctr, h);
	CUgraph out = NULL;
	CK(cuStreamEndCapture(s, &out));
	CHECK(out == body);
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(acc) == 0 && read_u32(ctr) == 5, "captured body ran at capture: acc %u ctr %u",
	       read_u32(acc), read_u32(ctr));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(acc) == 31 && read_u32(ctr) == 0, "while loop: acc %u (want 31), ctr %u",
	       read_u32(acc), read_u32(ctr));
	/* Again, ordered behind work on another stream through an event. */
	CUstream s2;
	CUevent e;
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	slow_set(s2, ctr, 3, 5);
	CK(cuEventRecord(e, s2));
	CK(cuStreamWaitEvent(s, e, 0));
	CK(cuGraphLaunch(x, s));
	muladd(s, acc, 1, 1, 1000);
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(acc) == 255 + 1000, "second loop: acc %u (want 1255)", read_u32(acc));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuEventDestroy(e));
	CK(cuStreamDestroy(s2));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(ctr));
	CK(cuMemFree(acc));
}

/* if (*flag) body: the condition set by a kernel captured before the node. */
static void t_cond_if(void)
{
	graph_outside_ok = true;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CUdeviceptr flag = dalloc(64), acc = dalloc(64);
	CUgraph g, body = NULL;
	CK(cuGraphCreate(&g, 0));
	CUgraphConditionalHandle h = 0;
	CK(cuGraphConditionalHandleCreate(&h, g, pctx, 0, 0));
	CK(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
	cond_kernel(f_set_cond, s, flag, h);
	CUgraph out = NULL;
	CK(cuStreamEndCapture(s, &out));
	CHECK(out == g);
	add_cond(g, h, CU_GRAPH_COND_TYPE_IF, &body);
	if (!body)
		return;
	CK(cuStreamBeginCaptureToGraph(s, body, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	muladd(s, acc, 1, 3, 1);
	CK(cuStreamEndCapture(s, &out));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	uint32_t model = 0;
	for (int k = 0; k < 6; k++) {
		set_u32(s, flag, (uint32_t)(k % 2));
		CK(cuGraphLaunch(x, s));
		if (k % 2)
			model = model * 3 + 1;
	}
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(acc) == model, "if node: acc %u want %u", read_u32(acc), model);
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(flag));
	CK(cuMemFree(acc));
}

/* Captures one muladd(p, m, a) into a new graph. */
static CUgraph capture_muladd(CUstream s, CUdeviceptr p, uint32_t m, uint32_t a)
{
	CUgraph g = NULL;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	muladd(s, p, 1, m, a);
	CK(cuStreamEndCapture(s, &g));
	return g;
}

/* A graph of two child-graph nodes, launched between ordinary work. */
static void t_child_graph(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr x = dalloc(64);
	CUgraph c = capture_muladd(s, x, 3, 1), g;
	CK(cuGraphCreate(&g, 0));
	CUgraphNode n1, n2;
	CK(cuGraphAddChildGraphNode(&n1, g, NULL, 0, c));
	CK(cuGraphAddChildGraphNode(&n2, g, &n1, 1, c));
	CUgraphExec ex;
	CK(cuGraphInstantiateWithFlags(&ex, g, 0));
	uint32_t model = 0;
	for (int k = 0; k < 3; k++) {
		muladd(s, x, 1, 2, 0);
		CK(cuGraphLaunch(ex, s));
		model = ((model * 2) * 3 + 1) * 3 + 1;
	}
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(x) == model, "child graphs: %u want %u", read_u32(x), model);
	CK(cuGraphExecDestroy(ex));
	CK(cuGraphDestroy(g));
	CK(cuGraphDestroy(c));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(x));
}

/* "Each launch is ordered behind ... any previous launches of hGraphExec": one exec
 * launched on two unrelated streams still runs one launch at a time. */
static void t_exec_order(void)
{
	CUstream s1, s2;
	CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(64);
	CUgraph g = NULL;
	CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
	slow_inc(s1, p, 1500);
	CK(cuStreamEndCapture(s1, &g));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	for (int k = 0; k < 12; k++)
		CK(cuGraphLaunch(x, k % 2 ? s2 : s1));
	CK(cuStreamSynchronize(s1));
	CK(cuStreamSynchronize(s2));
	CHECKF(read_u32(p) == 12, "launches of one exec overlapped: %u of 12", read_u32(p));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s1));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(p));
}

/* Four execs replayed on four streams at once: results, and the time it took. */
static void t_concurrent_replay(void)
{
	enum { N = 4, REPS = 3, MS = 20 };
	CUstream s[N];
	CUdeviceptr p[N];
	CUgraph g[N];
	CUgraphExec x[N];
	for (int i = 0; i < N; i++) {
		CK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
		p[i] = dalloc(64);
		CK(cuStreamBeginCapture(s[i], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
		slow_set(s[i], p[i] + 4, (uint32_t)i, MS);
		muladd(s[i], p[i], 1, 2, (uint32_t)i + 1);
		CK(cuStreamEndCapture(s[i], &g[i]));
		CK(cuGraphInstantiateWithFlags(&x[i], g[i], 0));
	}
	uint64_t t0 = now_ns();
	for (int r = 0; r < REPS; r++)
		for (int i = 0; i < N; i++)
			CK(cuGraphLaunch(x[i], s[i]));
	for (int i = 0; i < N; i++)
		CK(cuStreamSynchronize(s[i]));
	double ms = (double)(now_ns() - t0) / 1e6;
	printf("concurrent_replay: %d execs x %d replays of %d ms in %.1f ms (serial %d ms)\n", N,
	       REPS, MS, ms, N * REPS * MS);
	for (int i = 0; i < N; i++) {
		uint32_t want = 0;
		for (int r = 0; r < REPS; r++)
			want = want * 2 + (uint32_t)i + 1;
		CHECKF(read_u32(p[i]) == want, "exec %d: %u want %u", i, read_u32(p[i]), want);
		CK(cuGraphExecDestroy(x[i]));
		CK(cuGraphDestroy(g[i]));
		CK(cuStreamDestroy(s[i]));
		CK(cuMemFree(p[i]));
	}
}

/* Updates and destroys with launches still pending: a launch made before the change
 * runs the old graph, one made after it the new one. */
static void t_exec_update(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr v = dalloc(64);
	CUgraph a = capture_muladd(s, v, 2, 0), b = capture_muladd(s, v, 3, 0);
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, a, 0));
	set_u32(s, v, 1);
	slow_set(s, v + 8, 1, 30);
	CK(cuGraphLaunch(x, s)); /* still pending behind the slow kernel */
	CUgraphExecUpdateResultInfo info;
	CK(cuGraphExecUpdate(x, b, &info));
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(v) == 6, "update with a launch pending: %u (want 1*2*3 = 6)", read_u32(v));
	/* Destroyed while its launch waits. */
	slow_set(s, v + 8, 1, 30);
	CK(cuGraphLaunch(x, s));
	CK(cuGraphExecDestroy(x));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(v) == 18, "destroy with a launch pending: %u (want 18)", read_u32(v));
	/* An upload, in stream order, then a launch. */
	CUgraphExec y;
	CK(cuGraphInstantiateWithFlags(&y, a, 0));
	CK(cuGraphUpload(y, s));
	CK(cuGraphLaunch(y, s));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(v) == 36, "upload then launch: %u (want 36)", read_u32(v));
	CK(cuGraphExecDestroy(y));
	/* A destroyed exec is refused at the call. */
	CHECK(cuGraphLaunch(x, s) != CUDA_SUCCESS);
	CK(cuGraphDestroy(a));
	CK(cuGraphDestroy(b));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(v));
}

/* An external event record node: waits on the event see the graph's work. */
static void t_event_node(void)
{
	CUstream s, s2;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CUdeviceptr v = dalloc(64);
	CUevent e;
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CUgraph g = NULL;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	muladd(s, v, 1, 1, 7);
	CK(cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL));
	CK(cuStreamEndCapture(s, &g));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	slow_set(s, v + 8, 1, 20);
	CK(cuGraphLaunch(x, s));
	/* The fake records the event when the node runs, not at the launch: let it
	 * run, then synchronize on the event and order other work after it. */
	CK(cuStreamSynchronize(s));
	CK(cuEventSynchronize(e));
	CK(cuEventQuery(e));
	CK(cuStreamWaitEvent(s2, e, 0));
	muladd(s2, v, 1, 10, 0);
	CK(cuStreamSynchronize(s2));
	CHECKF(read_u32(v) == 70, "wait on a graph's event node: %u (want 70)", read_u32(v));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuEventDestroy(e));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(v));
}

/* Several threads capture and replay their own graphs (global, thread-local and relaxed
 * modes) while another runs ordinary work: nothing a runtime does on its own threads may
 * invalidate a capture, and no thread waits for another's. */
enum { MT_THREADS = 4 };
static pthread_barrier_t mt_bar;

struct mt_arg {
	int id;
	CUdeviceptr p;
};

static void *mt_capture_main(void *arg)
{
	struct mt_arg *a = arg;
	CK(cuCtxSetCurrent(pctx));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	static const CUstreamCaptureMode modes[] = {
	    CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
	    CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL};
	pthread_barrier_wait(&mt_bar);
	CUgraph g = NULL;
	CK(cuStreamBeginCapture(s, modes[a->id % 4]));
	for (int k = 0; k < 3; k++)
		muladd(s, a->p, 1, 2, (uint32_t)a->id + 1);
	sleep_us(20000); /* while the others capture and the worker runs */
	CK(cuStreamEndCapture(s, &g));
	pthread_barrier_wait(&mt_bar);
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	for (int r = 0; r < 4; r++)
		CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
	return NULL;
}

/* Ordinary work during the captures: launches, copies, events (no syncs, which a
 * global-mode capture elsewhere forbids). */
static void *mt_work_main(void *arg)
{
	CUdeviceptr p = *(CUdeviceptr *)arg;
	CK(cuCtxSetCurrent(pctx));
	CUstream s, s2;
	CUevent e;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	pthread_barrier_wait(&mt_bar);
	for (int k = 0; k < 20; k++) {
		add(s, p, 1, 1);
		CK(cuEventRecord(e, s));
		CK(cuStreamWaitEvent(s2, e, 0));
		add(s2, p, 1, 1);
		CK(cuEventRecord(e, s2));
		CK(cuStreamWaitEvent(s, e, 0));
	}
	pthread_barrier_wait(&mt_bar);
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(p) == 40, "work during captures: %u (want 40)", read_u32(p));
	CK(cuEventDestroy(e));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(s2));
	return NULL;
}

static void t_mt_capture(void)
{
	pthread_t th[MT_THREADS + 1];
	struct mt_arg a[MT_THREADS];
	CUdeviceptr wp = dalloc(64);
	pthread_barrier_init(&mt_bar, NULL, MT_THREADS + 1);
	for (int i = 0; i < MT_THREADS; i++) {
		a[i] = (struct mt_arg){.id = i, .p = dalloc(64)};
		pthread_create(&th[i], NULL, mt_capture_main, &a[i]);
	}
	pthread_create(&th[MT_THREADS], NULL, mt_work_main, &wp);
	for (int i = 0; i <= MT_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&mt_bar);
	for (int i = 0; i < MT_THREADS; i++) {
		uint32_t want = 0;
		for (int r = 0; r < 4 * 3; r++)
			want = want * 2 + (uint32_t)i + 1;
		CHECKF(read_u32(a[i].p) == want, "thread %d: %u want %u", i, read_u32(a[i].p), want);
		CK(cuMemFree(a[i].p));
	}
	CK(cuMemFree(wp));
}

/* The shape of a multi-threaded library workload (cuSPARSE under PyTorch): threads each
 * on their own non-blocking stream, kernels mixed with calls that make the caller wait
 * (pageable copies, stream-ordered frees, syncs of the legacy stream, stream syncs),
 * while another thread captures and replays graphs in global mode. Nothing may wait
 * forever: no host wait may need an op of another thread that cannot bind meanwhile. */
enum { MIX_THREADS = 3, MIX_ITERS = 150 };

static void *mix_main(void *arg)
{
	CUdeviceptr p = *(CUdeviceptr *)arg;
	CK(cuCtxSetCurrent(pctx));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	pthread_barrier_wait(&mt_bar);
	uint32_t host = 0;
	for (int k = 0; k < MIX_ITERS; k++) {
		add(s, p, 1, 1);
		switch (k % 5) {
		case 0:
			CK(cuMemcpyDtoHAsync(&host, p, 4, s)); /* pageable: the caller waits */
			CHECKF(host == (uint32_t)k + 1, "pageable copy saw %u, want %u", host, k + 1);
			break;
		case 1: {
			CUdeviceptr t = 0;
			CK(cuMemAllocAsync(&t, 256, s));
			CK(cuMemsetD32Async(t, 1, 64, s));
			CK(cuMemFreeAsync(t, s));
			break;
		}
		case 2:
			CK(cuMemcpyHtoD(p + 8, &host, 4)); /* legacy stream, pageable source */
			break;
		case 3:
			CK(cuStreamSynchronize(s));
			break;
		default:
			CK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : cuStreamQuery(s));
			break;
		}
	}
	CK(cuCtxSynchronize());
	CHECKF(read_u32(p) == MIX_ITERS, "thread work: %u want %u", read_u32(p), MIX_ITERS);
	CK(cuStreamDestroy(s));
	return NULL;
}

static void t_mt_mixed(void)
{
	pthread_t th[MIX_THREADS];
	CUdeviceptr p[MIX_THREADS];
	pthread_barrier_init(&mt_bar, NULL, MIX_THREADS + 1);
	for (int i = 0; i < MIX_THREADS; i++) {
		p[i] = dalloc(64);
		pthread_create(&th[i], NULL, mix_main, &p[i]);
	}
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr v = dalloc(64);
	pthread_barrier_wait(&mt_bar);
	uint32_t model = 0;
	for (int r = 0; r < 5; r++) {
		CUgraph g = NULL;
		CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
		muladd(s, v, 1, 3, (uint32_t)r);
		CK(cuStreamEndCapture(s, &g));
		CUgraphExec x;
		CK(cuGraphInstantiateWithFlags(&x, g, 0));
		for (int k = 0; k < 4; k++) {
			CK(cuGraphLaunch(x, s));
			model = model * 3 + (uint32_t)r;
		}
		CK(cuStreamSynchronize(s));
		CK(cuGraphExecDestroy(x));
		CK(cuGraphDestroy(g));
	}
	for (int i = 0; i < MIX_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&mt_bar);
	CHECKF(read_u32(v) == model, "graphs during threads: %u want %u", read_u32(v), model);
	for (int i = 0; i < MIX_THREADS; i++)
		CK(cuMemFree(p[i]));
	CK(cuMemFree(v));
	CK(cuStreamDestroy(s));
}

/* A graph of a module's function (cuModuleGetFunction, as Triton loads its
 * kernels): its kernel node has no CUkernel, so it cannot be given a pool
 * entry's context and runs in the app's context, on every SM, as natively
 * (measured on driver 580). Results are the same either way. */
static void t_module_graph(void)
{
	graph_outside_ok = true;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr v = dalloc(64);
	set_u32(s, v, 1);
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	void *args[] = {&v, &(uint32_t){1}, &(uint32_t){5}, &(uint32_t){1}};
	CK(launch1(f_muladd_mod, s, args));
	CUgraph g;
	CK(cuStreamEndCapture(s, &g));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	for (int i = 0; i < 3; i++)
		CK(cuGraphLaunch(x, s));
	muladd(s, v, 1, 1, 0); /* a plain launch of the same kernel, on a pool entry */
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(v) == 156, "module graph: %u (want ((1*5+1)*5+1)*5+1 = 156)", read_u32(v));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(v));
}

/* A copy into pageable memory while a stream captures in global mode: the
 * driver allows it (the H200 answers CUDA_SUCCESS), and the capture stays
 * valid. The shim's own query of the app's real stream after such an
 * ordered pass-through counted as an unsafe call and invalidated it
 * (torch.cuda.graph captures in global mode). */
static void t_global_capture_pageable_copy(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr a = dalloc(64);
	static uint32_t pageable[16] = {5};
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	add(s, a, 16, 1);
	CK(cuMemcpyHtoD(a, pageable, 4));
	CUgraph g = NULL;
	CK(cuStreamEndCapture(s, &g));
	if (g)
		CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(a));
}

/* A per-thread default stream forks into a capture by waiting on an event recorded in
 * it (CUDA Programming Guide, "Cross-stream Dependencies and Events"): its work from
 * then on is recorded into the graph, not run, until the capture ends, on this thread
 * or on another; then it runs again, virtualized. */
struct ptds_join {
	CUevent e, e2;
	CUdeviceptr p, q;
	pthread_barrier_t forked, ended;
};

static void *ptds_join_main(void *arg)
{
	struct ptds_join *j = arg;
	CK(cuCtxSetCurrent(pctx));
	CK(cuStreamWaitEvent(CU_STREAM_PER_THREAD, j->e, 0));
	add(CU_STREAM_PER_THREAD, j->p, 1, 100); /* captured */
	CK(cuEventRecord(j->e2, CU_STREAM_PER_THREAD));
	pthread_barrier_wait(&j->forked);
	pthread_barrier_wait(&j->ended); /* the main thread ended the capture */
	add(CU_STREAM_PER_THREAD, j->q, 1, 1); /* runs */
	CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CHECKF(read_u32(j->q) == 1, "after the capture: %u", read_u32(j->q));
	return NULL;
}

static void t_ptds_fork(void)
{
	CUstream s;
	struct ptds_join j = {.p = dalloc(64), .q = dalloc(64)};
	CUevent e3;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&j.e, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&j.e2, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&e3, CU_EVENT_DISABLE_TIMING));
	pthread_barrier_init(&j.forked, NULL, 2);
	pthread_barrier_init(&j.ended, NULL, 2);
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	add(s, j.p, 1, 1);
	CK(cuEventRecord(j.e, s));
	CK(cuStreamWaitEvent(CU_STREAM_PER_THREAD, j.e, 0)); /* this thread's joins */
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	add(CU_STREAM_PER_THREAD, j.p, 1, 10); /* captured */
	CK(cuEventRecord(e3, CU_STREAM_PER_THREAD));
	pthread_t th;
	pthread_create(&th, NULL, ptds_join_main, &j); /* another thread's joins too */
	pthread_barrier_wait(&j.forked);
	CK(cuStreamWaitEvent(s, e3, 0));
	CK(cuStreamWaitEvent(s, j.e2, 0));
	CUgraph g = NULL;
	CK(cuStreamEndCapture(s, &g));
	pthread_barrier_wait(&j.ended);
	pthread_join(th, NULL);
	sleep_us(5000);
	CHECKF(read_u32(j.p) == 0, "captured work ran at once: %u", read_u32(j.p));
	add(CU_STREAM_PER_THREAD, j.q, 1, 2); /* runs, after the other thread's 1 */
	CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CHECKF(read_u32(j.q) == 3, "%u", read_u32(j.q));
	CUgraphExec x;
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	CK(cuGraphLaunch(x, s));
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(j.p) == 222, "two replays: %u, want 222", read_u32(j.p));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	pthread_barrier_destroy(&j.forked);
	pthread_barrier_destroy(&j.ended);
	CK(cuEventDestroy(j.e));
	CK(cuEventDestroy(j.e2));
	CK(cuEventDestroy(e3));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(j.p));
	CK(cuMemFree(j.q));
}

static const struct prog_test tests[] = {
    {"cond_while", t_cond_while},     {"cond_if", t_cond_if},
    {"child_graph", t_child_graph},   {"exec_order", t_exec_order},
    {"concurrent_replay", t_concurrent_replay}, {"exec_update", t_exec_update},
    {"event_node", t_event_node},     {"mt_capture", t_mt_capture},
    {"mt_mixed", t_mt_mixed},         {"module_graph", t_module_graph},
    {"global_capture_pageable_copy", t_global_capture_pageable_copy},
    {"ptds_fork", t_ptds_fork},
};

int main(int argc, char **argv)
{
	setup();
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv, "prog_shim_graphs");
}
