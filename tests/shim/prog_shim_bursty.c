/* SPDX-License-Identifier: MIT */
/*
 * A latency-class client shaped like a batch-1 decode server: requests of
 * 32 "tokens", each a burst of short kernels and a synchronize (the host
 * reads the token), with idle gaps between requests. Prints the slowest
 * request; exits non-zero if a request takes longer than VETEST_MAX_MS
 * (default 5000): under ved beside a busy client it must keep being
 * served (tests/shim/test_shim_ved.c, shim_ved_latency_beside_busy).
 * VETEST_CLUSTER=N launches one kernel of each token with a thread-block
 * cluster of N (placed by the driver's occupancy calculator, as the H200
 * decode server's cuBLAS kernels with clusters of 4 are). VETEST_GRAPH=1
 * captures a token's kernels once (a library's kernel, as PyTorch's are)
 * and launches that graph per token, as a decode server with CUDA graphs.
 * VETEST_WAITER=1 synchronizes and reads each token on a second thread (the
 * launching thread never waits); VETEST_H2D=1 puts a copy from pageable
 * memory in the middle of each token (tests of VE_TPOT_MS's steps).
 */
#include "prog_shim.h"

/* One add through cuLaunchKernelEx with a cluster of n blocks (the grid is
 * n blocks, one cluster; the kernel adds once per launch). */
static void add_cluster(CUfunction f, CUstream s, CUdeviceptr p, uint32_t a, unsigned n)
{
	uint32_t one = 1;
	void *args[] = {&p, &one, &a};
	CUlaunchAttribute at[1];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at[0].value.clusterDim.x = n;
	at[0].value.clusterDim.y = 1;
	at[0].value.clusterDim.z = 1;
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = n;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 32;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = s;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	CK(cuLaunchKernelEx(&cfg, f, args, NULL));
}

/* One token: six adds, the fourth in a cluster of `cluster` blocks. */
static void token(CUfunction f, CUstream s, CUdeviceptr p, unsigned cluster)
{
	for (int k = 0; k < 6; k++) {
		if (cluster > 1 && k == 3) {
			add_cluster(f, s, p, 1, cluster);
		} else {
			uint32_t n = 1, a = 1;
			void *args[] = {&p, &n, &a};
			CK(launch1(f, s, args));
		}
	}
}

/* The second thread of VETEST_WAITER=1: per token, synchronize the stream
 * and check the counter, then hand the turn back. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int posted, done; /* tokens handed to it, tokens it finished */
	bool stop;
	CUcontext ctx;
	CUstream s;
	CUdeviceptr p;
	uint32_t want;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	CK(cuCtxSetCurrent(w->ctx));
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->done == w->posted && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->done == w->posted)
			break;
		uint32_t want = w->want;
		pthread_mutex_unlock(&w->mu);
		CK(cuStreamSynchronize(w->s));
		CHECKF(read_u32(w->p) == want, "token: %u, want %u", read_u32(w->p), want);
		pthread_mutex_lock(&w->mu);
		w->done++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int main(void)
{
	setup_common();
	const char *e = getenv("VETEST_MAX_MS");
	double max_ms = e ? atof(e) : 5000.0;
	const char *c = getenv("VETEST_CLUSTER");
	unsigned cluster = c ? (unsigned)atoi(c) : 0;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(sizeof(uint32_t));
	const char *gr = getenv("VETEST_GRAPH");
	bool graph = gr && atoi(gr);
	CUfunction f = f_add;
	CUgraphExec x = NULL;
	if (graph) {
		CUlibrary lib;
		CUkernel k;
		CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
		CK(cuLibraryGetKernel(&k, lib, "add"));
		f = (CUfunction)(void *)k;
		CUgraph g;
		CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		token(f, s, p, cluster);
		CK(cuStreamEndCapture(s, &g));
		CK(cuGraphInstantiateWithFlags(&x, g, 0));
		CK(cuGraphDestroy(g));
	}
	const char *wt = getenv("VETEST_WAITER"), *hd = getenv("VETEST_H2D");
	bool waiter = wt && atoi(wt), h2d = hd && atoi(hd);
	struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
			   .s = s, .p = p};
	pthread_t wth;
	if (waiter) {
		CK(cuCtxGetCurrent(&w.ctx));
		if (pthread_create(&wth, NULL, waiter_main, &w)) {
			fprintf(stderr, "FAIL: pthread_create\n");
			return 1;
		}
	}
	CUdeviceptr scratch = dalloc(64);
	double worst = 0;
	uint32_t want = 0;
	for (int req = 0; req < 8 && !failures; req++) {
		uint64_t t0 = now_ns();
		for (int tok = 0; tok < 32; tok++) {
			if (graph)
				CK(cuGraphLaunch(x, s));
			else
				token(f, s, p, cluster);
			if (h2d) {
				/* Pageable: an ordered pass-through, not a read. */
				char host[64];
				memset(host, tok, sizeof(host));
				CK(cuMemcpyHtoDAsync(scratch, host, sizeof(host), s));
				token(f, s, p, 0);
				want += 6;
			}
			want += 6;
			if (waiter) {
				pthread_mutex_lock(&w.mu);
				w.want = want;
				w.posted++;
				pthread_cond_broadcast(&w.cv);
				while (w.done != w.posted)
					pthread_cond_wait(&w.cv, &w.mu);
				pthread_mutex_unlock(&w.mu);
				continue;
			}
			CK(cuStreamSynchronize(s));
			CHECKF(read_u32(p) == want, "request %d token %d: %u, want %u", req, tok,
			       read_u32(p), want);
		}
		double ms = (double)(now_ns() - t0) / 1e6;
		if (ms > worst)
			worst = ms;
		sleep_us(30000 + 10000 * (unsigned)(req % 3)); /* idle between requests */
	}
	if (waiter) {
		pthread_mutex_lock(&w.mu);
		w.stop = true;
		pthread_cond_broadcast(&w.cv);
		pthread_mutex_unlock(&w.mu);
		pthread_join(wth, NULL);
	}
	scan_launch_log();
	print_launch_summary();
	printf("bursty: slowest request %.1f ms (limit %.0f), %d failed checks\n", worst, max_ms,
	       (int)failures);
	return failures || worst > max_ms ? 1 : 0;
}
