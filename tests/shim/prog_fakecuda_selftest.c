/* SPDX-License-Identifier: MIT */
/*
 * Self-test of the fake libcuda, used natively (no Vitamin-E involved): a
 * plain driver-API program that checks the fake's CUDA semantics and its test
 * API. Exits 0 when every check passed; otherwise prints what failed and
 * exits 1. Run it with FAKECUDA_JITTER_US / FAKECUDA_SEED set to shake the
 * schedule: every check must hold for every interleaving.
 *
 *   prog_fakecuda_selftest [test-name...]
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fakecuda/fakecuda.h"

static int failures;
static const char *cur_test;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s: %s:%d: %s\n", cur_test, __FILE__, __LINE__,      \
				#cond);                                                            \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static const char *ename(CUresult r)
{
	const char *s = NULL;
	cuGetErrorName(r, &s);
	return s ? s : "?";
}

/* A CUDA call that must return @want. */
#define CK_IS(call, want)                                                                          \
	do {                                                                                       \
		CUresult ck_r_ = (call);                                                           \
		if (ck_r_ != (want)) {                                                             \
			fprintf(stderr, "FAIL %s: %s:%d: %s = %s, want %s\n", cur_test, __FILE__,  \
				__LINE__, #call, ename(ck_r_), ename(want));                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)
#define CK(call) CK_IS(call, CUDA_SUCCESS)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Spins until *p >= want or @ms elapse; returns whether it got there. */
static int spin_until(_Atomic uint32_t *p, uint32_t want, unsigned ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	while (atomic_load(p) < want) {
		if (now_ns() > end)
			return 0;
		sched_yield();
	}
	return 1;
}

#define P(i, T) (*(T *)params[i])

/* ---- kernels --------------------------------------------------------------------------- */

static int k_add(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *), n = P(1, uint32_t), add = P(2, uint32_t);
	for (uint32_t i = 0; i < n; i++)
		p[i] += add;
	return 0;
}

/* p = p * m + a: not commutative, so any reordering shows. */
static int k_muladd(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *), n = P(1, uint32_t), m = P(2, uint32_t), a = P(3, uint32_t);
	for (uint32_t i = 0; i < n; i++)
		p[i] = p[i] * m + a;
	return 0;
}

static int k_append(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *log = P(0, uint32_t *);
	_Atomic uint32_t *count = P(1, _Atomic uint32_t *);
	log[atomic_fetch_add(count, 1)] = P(2, uint32_t);
	return 0;
}

static int k_slow_set(void *const *params, const struct fakecuda_exec *e)
{
	sleep_ms(P(2, uint32_t));
	atomic_store(P(0, _Atomic uint32_t *), P(1, uint32_t));
	return 0;
}

static int k_check_eq(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t v = atomic_load(P(0, _Atomic uint32_t *));
	*P(2, uint32_t *) = v == P(1, uint32_t);
	return 0;
}

/* Two launches meet: succeeds only if they really run at the same time. */
static int k_rendezvous(void *const *params, const struct fakecuda_exec *e)
{
	_Atomic uint32_t *cell = P(0, _Atomic uint32_t *);
	atomic_fetch_add(cell, 1);
	*P(1, uint32_t *) = (uint32_t)spin_until(cell, 2, 3000);
	return 0;
}

static int k_wait_flag(void *const *params, const struct fakecuda_exec *e)
{
	*P(1, uint32_t *) = (uint32_t)spin_until(P(0, _Atomic uint32_t *), 1, 5000);
	return 0;
}

static int k_smid(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *out = P(0, uint32_t *);
	uint64_t blocks = (uint64_t)e->grid[0] * e->grid[1] * e->grid[2];
	for (uint64_t b = 0; b < blocks && b < 1024; b++)
		out[b] = fakecuda_exec_smid(e, b);
	*P(1, uint32_t *) = e->nsm;
	return 0;
}

static int k_fault(void *const *params, const struct fakecuda_exec *e)
{
	return 1;
}

/* Device code cannot call the driver. */
static CUresult k_calls_cuda_result = CUDA_SUCCESS;
static int k_calls_cuda(void *const *params, const struct fakecuda_exec *e)
{
	k_calls_cuda_result = cuCtxSynchronize();
	return 0;
}

static _Atomic int coop_seen;
static int k_coop(void *const *params, const struct fakecuda_exec *e)
{
	if (e->cooperative)
		atomic_fetch_add(&coop_seen, 1);
	return 0;
}

struct f3 {
	float x, y, z;
};
struct six {
	char c;
	double d;
	int i;
	struct f3 f;
	void *p;
	short s;
};
static int k_six(void *const *params, const struct fakecuda_exec *e)
{
	struct six *out = P(4, struct six *);
	out->c = P(0, char);
	out->d = P(1, double);
	out->i = P(2, int);
	out->f = P(3, struct f3);
	out->p = P(4, void *);
	out->s = P(5, short);
	/* The packed buffer agrees with the pointers. */
	if (params[3] != (const char *)e->param_buf + e->param_offsets[3])
		out->i = -1;
	return 0;
}

static void register_kernels(void)
{
	static const size_t add_sz[] = {8, 4, 4}, muladd_sz[] = {8, 4, 4, 4},
			    append_sz[] = {8, 8, 4}, slow_sz[] = {8, 4, 4}, check_sz[] = {8, 4, 8},
			    rdv_sz[] = {8, 8}, wait_sz[] = {8, 8}, smid_sz[] = {8, 8},
			    six_sz[] = {1, 8, 4, 12, 8, 2};
	int r = 0;
	r |= fakecuda_register_kernel("add", k_add, 3, add_sz);
	r |= fakecuda_register_kernel("muladd", k_muladd, 4, muladd_sz);
	r |= fakecuda_register_kernel("append", k_append, 3, append_sz);
	r |= fakecuda_register_kernel("slow_set", k_slow_set, 3, slow_sz);
	r |= fakecuda_register_kernel("check_eq", k_check_eq, 3, check_sz);
	r |= fakecuda_register_kernel("rendezvous", k_rendezvous, 2, rdv_sz);
	r |= fakecuda_register_kernel("wait_flag", k_wait_flag, 2, wait_sz);
	r |= fakecuda_register_kernel("smid", k_smid, 2, smid_sz);
	r |= fakecuda_register_kernel("fault", k_fault, 0, NULL);
	r |= fakecuda_register_kernel("coop", k_coop, 0, NULL);
	r |= fakecuda_register_kernel("six", k_six, 6, six_sz);
	r |= fakecuda_register_kernel("calls_cuda", k_calls_cuda, 0, NULL);
	if (r || fakecuda_register_kernel("add", k_add, 3, add_sz) != -EEXIST) {
		fprintf(stderr, "FAIL: kernel registration\n");
		exit(1);
	}
}

/* ---- shared state ----------------------------------------------------------------------- */

static CUdevice dev;
static CUcontext pctx;
static CUmodule mod;
static CUfunction f_add, f_muladd, f_append, f_slow, f_check, f_rdv, f_wait, f_smid, f_fault,
    f_coop, f_six;

static void launch1(CUfunction f, CUstream s, void **args)
{
	CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void add(CUstream s, CUdeviceptr p, uint32_t n, uint32_t v)
{
	void *a[] = {&p, &n, &v};
	launch1(f_add, s, a);
}

static void muladd(CUstream s, CUdeviceptr p, uint32_t n, uint32_t m, uint32_t v)
{
	void *a[] = {&p, &n, &m, &v};
	launch1(f_muladd, s, a);
}

static void slow_set(CUstream s, CUdeviceptr flag, uint32_t v, uint32_t ms)
{
	void *a[] = {&flag, &v, &ms};
	launch1(f_slow, s, a);
}

static void check_eq(CUstream s, CUdeviceptr flag, uint32_t want, CUdeviceptr out)
{
	void *a[] = {&flag, &want, &out};
	launch1(f_check, s, a);
}

/* Zeroed device memory, ready when this returns (the memset is not left racing with
 * work on non-blocking streams). */
static CUdeviceptr dalloc(size_t n)
{
	CUdeviceptr p = 0;
	CK(cuMemAlloc(&p, n));
	CK(cuMemsetD8(p, 0, n));
	CK(cuStreamSynchronize(NULL));
	return p;
}

/* A host-side gate in mapped pinned memory: kernels set .flag through the device
 * pointer, host functions block on it. */
struct gate {
	_Atomic uint32_t flag;
	_Atomic uint32_t timed_out;
};

static struct gate *gate_new(CUdeviceptr *dflag)
{
	struct gate *g = NULL;
	CK(cuMemHostAlloc((void **)&g, sizeof(*g), CU_MEMHOSTALLOC_DEVICEMAP));
	atomic_store(&g->flag, 0);
	atomic_store(&g->timed_out, 0);
	CK(cuMemHostGetDevicePointer(dflag, g, 0));
	return g;
}

static uint32_t read_u32(CUdeviceptr p)
{
	uint32_t v = 0xdeadbeef;
	CK(cuMemcpyDtoH(&v, p, 4));
	return v;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void t_device(void)
{
	int v, n;
	char name[64];
	size_t mem;
	CK(cuDriverGetVersion(&v));
	CHECK(v == 13000);
	CK(cuDeviceGetCount(&n));
	CHECK(n >= 1);
	CK(cuDeviceGetName(name, sizeof(name), dev));
	CHECK(strcmp(name, "Fake H200") == 0);
	int sms = atoi(getenv("FAKECUDA_SMS") ? getenv("FAKECUDA_SMS") : "132");
	CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CHECK(v == sms);
	CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CHECK(v == 9);
	CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev));
	CHECK(v == 1);
	CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev));
	CHECK(v == 2048);
	CK_IS(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, dev), CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuDeviceGet(&v, 99), CUDA_ERROR_INVALID_DEVICE);
	CK(cuDeviceTotalMem(&mem, dev));
	CHECK(mem > (size_t)100 << 30);
	unsigned flags;
	int active;
	CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active);
	int lo, hi;
	CK(cuCtxGetStreamPriorityRange(&lo, &hi));
	CHECK(lo == 0 && hi == -5);
	CUcontext c;
	CK(cuCtxGetCurrent(&c));
	CHECK(c == pctx);
	CUdevice d2;
	CK(cuCtxGetDevice(&d2));
	CHECK(d2 == dev);
	/* Push/pop of a created context. */
	CUcontext mine, popped;
	CK(cuCtxCreate(&mine, NULL, 0, dev));
	CK(cuCtxGetCurrent(&c));
	CHECK(c == mine);
	CK(cuCtxPopCurrent(&popped));
	CHECK(popped == mine);
	CK(cuCtxGetCurrent(&c));
	CHECK(c == pctx);
	CK(cuCtxDestroy(mine));
	CK_IS(cuCtxPushCurrent(mine), CUDA_ERROR_INVALID_CONTEXT);
	const char *s;
	CK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
	CHECK(strcmp(s, "invalid argument") == 0);
	CK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	CHECK(strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0);
	CK_IS(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*stream_fn)(CUstream);
typedef CUresult (*getid_fn)(CUstream, unsigned long long *);

static launch_fn launch_ptsz;
static stream_fn sync_ptsz;
static getid_fn getid_ptsz;

static void t_procaddr(void)
{
	void *self = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	CHECK(self != NULL);
	if (!self)
		return;
	void *p;
	CUdriverProcAddressQueryResult st;
	CK(cuGetProcAddress("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS && p == dlsym(self, "cuLaunchKernel"));
	CK(cuGetProcAddress("cuLaunchKernel", &p, 12000,
			    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CHECK(p == dlsym(self, "cuLaunchKernel_ptsz"));
	launch_ptsz = (launch_fn)p;
	CK(cuGetProcAddress("cuStreamSynchronize", &p, 12000,
			    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	sync_ptsz = (stream_fn)p;
	CHECK(p == dlsym(self, "cuStreamSynchronize_ptsz"));
	CK(cuGetProcAddress("cuStreamGetId", &p, 12000,
			    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	getid_ptsz = (getid_fn)p;
	CK(cuGetProcAddress("cuMemAlloc", &p, 12000, 0, &st));
	CHECK(p == dlsym(self, "cuMemAlloc_v2"));
	CK(cuGetProcAddress("cuMemcpyHtoD", &p, 12000,
			    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CHECK(p == dlsym(self, "cuMemcpyHtoD_v2_ptds"));
	/* No per-thread variant: the legacy one. */
	CK(cuGetProcAddress("cuMemAlloc", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
			    &st));
	CHECK(p == dlsym(self, "cuMemAlloc_v2"));
	CK(cuGetProcAddress("cuStreamBeginCapture", &p, 10000, 0, &st));
	CHECK(p == dlsym(self, "cuStreamBeginCapture"));
	CK(cuGetProcAddress("cuStreamBeginCapture", &p, 12000, 0, &st));
	CHECK(p == dlsym(self, "cuStreamBeginCapture_v2"));
	/* As on the real driver: the base name keeps the 5-argument _v2. */
	CK(cuGetProcAddress("cuGraphInstantiate", &p, 12000, 0, &st));
	CHECK(p == dlsym(self, "cuGraphInstantiate_v2"));
	CK(cuGetProcAddress("cuGraphInstantiateWithFlags", &p, 12000, 0, &st));
	CHECK(p == dlsym(self, "cuGraphInstantiateWithFlags"));
	CK(cuGetProcAddress("cuCtxSynchronize", &p, 13000, 0, &st));
	CHECK(p == dlsym(self, "cuCtxSynchronize_v2"));
	/* Per-thread variants exist from CUDA 7.0, with no fallback before. */
	CK(cuGetProcAddress("cuLaunchKernel", &p, 6050,
			    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CK(cuGetProcAddress("cuGetProcAddress", &p, 12000, 0, &st));
	CHECK(p == dlsym(self, "cuGetProcAddress_v2"));
	/* Unknown or too new: CUDA_SUCCESS with a NULL pointer and the reason
	 * (what the real driver does, and what the header documents). */
	p = (void *)1;
	CK(cuGetProcAddress("cuNoSuchFunction", &p, 12000, 0, &st));
	CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	p = (void *)1;
	CK(cuGetProcAddress("cuGreenCtxCreate", &p, 11000, 0, &st));
	CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	p = (void *)1;
	CK_IS(cuGetProcAddress("cuInit", &p, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	CHECK(p == (void *)1);
	/* Entry points the fake does not implement do not exist. */
	CHECK(dlsym(self, "cuMemCreate") == NULL);
	CK(cuGetProcAddress("cuMemCreate", &p, 12000, 0, &st));
	CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	/* Every base name the table knows resolves at 13.0, with and without the flag. */
	static const char *bases[] = {
	    "cuLaunchKernelEx",
	    "cuLaunchCooperativeKernel",
	    "cuLaunchHostFunc",
	    "cuStreamCreate",
	    "cuStreamDestroy",
	    "cuStreamWaitEvent",
	    "cuEventRecord",
	    "cuEventElapsedTime",
	    "cuStreamGetCaptureInfo",
	    "cuStreamWriteValue64",
	    "cuStreamWaitValue32",
	    "cuStreamBatchMemOp",
	    "cuMemcpyBatchAsync",
	    "cuMemcpy3DAsync",
	    "cuMemsetD2D32Async",
	    "cuGraphLaunch",
	    "cuGraphInstantiateWithParams",
	    "cuGreenCtxStreamCreate",
	    "cuDevSmResourceSplitByCount",
	    "cuFuncGetParamInfo",
	    "cuKernelGetParamInfo",
	    "cuLibraryLoadData",
	    "cuMemAllocAsync",
	    "cuMemFreeAsync",
	    "cuPointerGetAttributes",
	    "cuCtxCreate",
	    "cuDevicePrimaryCtxRelease",
	    "cuStreamGetCtx",
	    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
	};
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		CUresult r = cuGetProcAddress(bases[i], &p, 13000, 0, &st);
		if (r || !p)
			fprintf(stderr, "FAIL %s: %s not resolved\n", cur_test, bases[i]);
		failures += r || !p;
		r = cuGetProcAddress(bases[i], &p, 13000,
				     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
		failures += r || !p;
	}
	/* Calls through the pointers are counted under their symbol. */
	uint64_t before = fakecuda_call_count("cuStreamSynchronize_ptsz");
	CK(sync_ptsz(NULL));
	CHECK(fakecuda_call_count("cuStreamSynchronize_ptsz") == before + 1);
	CHECK(fakecuda_call_count_base("cuStreamSynchronize") >= before + 1);
	dlclose(self);
}

/* Streams of every kind are FIFO; different streams run concurrently. */
static void t_streams(void)
{
	enum { NS = 6, NOPS = 40, N = 64 };
	CUstream s[NS];
	CK(cuStreamCreate(&s[0], CU_STREAM_DEFAULT));
	CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreateWithPriority(&s[2], CU_STREAM_NON_BLOCKING, -5));
	CK(cuStreamCreateWithPriority(&s[3], 0, 7)); /* clamped to 0 */
	CK(cuStreamCreate(&s[4], 0));
	CK(cuStreamCreate(&s[5], CU_STREAM_NON_BLOCKING));
	int prio;
	unsigned flags;
	CK(cuStreamGetPriority(s[2], &prio));
	CHECK(prio == -5);
	CK(cuStreamGetPriority(s[3], &prio));
	CHECK(prio == 0);
	CK(cuStreamGetFlags(s[1], &flags));
	CHECK(flags == CU_STREAM_NON_BLOCKING);
	CK_IS(cuStreamCreate(&s[0], 0x10), CUDA_ERROR_INVALID_VALUE);
	unsigned long long id0, id1;
	CK(cuStreamGetId(s[0], &id0));
	CK(cuStreamGetId(s[1], &id1));
	CHECK(id0 != id1);
	CUcontext c;
	CK(cuStreamGetCtx(s[0], &c));
	CHECK(c == pctx);

	CUdeviceptr buf[NS];
	uint32_t expect[NS];
	for (int i = 0; i < NS; i++) {
		buf[i] = dalloc(N * 4);
		expect[i] = 0;
	}
	for (int k = 0; k < NOPS; k++)
		for (int i = 0; i < NS; i++) {
			uint32_t m = 2 + (uint32_t)((k + i) % 3), a = (uint32_t)(k * 7 + i);
			muladd(s[i], buf[i], N, m, a);
			expect[i] = expect[i] * m + a;
		}
	for (int i = 0; i < NS; i++) {
		CK(cuStreamSynchronize(s[i]));
		uint32_t h[N];
		CK(cuMemcpyDtoH(h, buf[i], sizeof(h)));
		int ok = 1;
		for (int j = 0; j < N; j++)
			ok &= h[j] == expect[i];
		CHECK(ok);
		CK(cuStreamQuery(s[i]));
	}
	/* True concurrency: two launches on different streams meet. */
	CUdeviceptr cell = dalloc(4), ok = dalloc(8);
	void *a1[] = {&cell, &ok};
	CUdeviceptr ok2 = ok + 4;
	void *a2[] = {&cell, &ok2};
	launch1(f_rdv, s[1], a1);
	launch1(f_rdv, s[5], a2);
	CK(cuStreamSynchronize(s[1]));
	CK(cuStreamSynchronize(s[5]));
	CHECK(read_u32(ok) == 1 && read_u32(ok + 4) == 1);
	/* Query of a busy stream. */
	CUdeviceptr flag = dalloc(4);
	slow_set(s[0], flag, 1, 30);
	CK_IS(cuStreamQuery(s[0]), CUDA_ERROR_NOT_READY);
	CK(cuStreamSynchronize(s[0]));
	CK(cuStreamQuery(s[0]));
	for (int i = 0; i < NS; i++) {
		CK(cuStreamDestroy(s[i]));
		CK(cuMemFree(buf[i]));
	}
	CK_IS(cuStreamSynchronize(s[0]), CUDA_ERROR_INVALID_HANDLE);
	CK(cuMemFree(cell));
	CK(cuMemFree(ok));
	CK(cuMemFree(flag));
}

/* Legacy default stream: waits for prior blocking-stream work and blocks later work;
 * non-blocking streams are exempt. */
static void t_legacy(void)
{
	CUstream b1, b2, nb;
	CK(cuStreamCreate(&b1, 0));
	CK(cuStreamCreate(&b2, 0));
	CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	CUdeviceptr f1 = dalloc(4), f2 = dalloc(4), r = dalloc(16);
	slow_set(b1, f1, 1, 20);	       /* blocking stream, slow */
	check_eq(NULL, f1, 1, r);	       /* legacy: must see it */
	slow_set(CU_STREAM_LEGACY, f2, 1, 20); /* legacy, slow */
	check_eq(b2, f2, 1, r + 4);	       /* later blocking work waits for legacy */
	CK(cuCtxSynchronize());
	CHECK(read_u32(r) == 1);
	CHECK(read_u32(r + 4) == 1);
	/* A legacy-stream kernel and a non-blocking-stream kernel run together. */
	CUdeviceptr cell = dalloc(4);
	void *a1[] = {&cell, &r};
	CUdeviceptr r2 = r + 8;
	void *a2[] = {&cell, &r2};
	launch1(f_rdv, NULL, a1);
	launch1(f_rdv, nb, a2);
	CK(cuCtxSynchronize());
	CHECK(read_u32(r) == 1 && read_u32(r + 8) == 1);
	/* cuStreamSynchronize(NULL) also waits for blocking streams. */
	CUdeviceptr f3 = dalloc(4);
	slow_set(b1, f3, 1, 20);
	CK(cuStreamSynchronize(NULL));
	uint32_t v = 0;
	CK(cuMemcpyDtoHAsync(&v, f3, 4, nb)); /* pageable destination: returns when done */
	CHECK(v == 1);
	CK(cuStreamDestroy(b1));
	CK(cuStreamDestroy(b2));
	CK(cuStreamDestroy(nb));
	CK(cuMemFree(f1));
	CK(cuMemFree(f2));
	CK(cuMemFree(f3));
	CK(cuMemFree(r));
	CK(cuMemFree(cell));
}

/* Per-thread default stream: per host thread, blocking with respect to the legacy stream. */
struct ptds_arg {
	CUdeviceptr buf;
	uint32_t n;
	unsigned long long id;
	int bad;
};

static void *ptds_thread(void *p)
{
	struct ptds_arg *a = p;
	a->bad |= cuCtxSetCurrent(pctx) != CUDA_SUCCESS;
	for (uint32_t k = 1; k <= 20; k++) {
		uint32_t m = 3, v = k;
		void *args[] = {&a->buf, &a->n, &m, &v};
		a->bad |= launch_ptsz(f_muladd, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL) != 0;
	}
	a->bad |= getid_ptsz(NULL, &a->id) != CUDA_SUCCESS;
	a->bad |= sync_ptsz(NULL) != CUDA_SUCCESS;
	return NULL;
}

static void t_per_thread(void)
{
	enum { NT = 3, N = 16 };
	pthread_t th[NT];
	struct ptds_arg a[NT];
	for (int i = 0; i < NT; i++) {
		a[i] = (struct ptds_arg){dalloc(N * 4), N, 0, 0};
		pthread_create(&th[i], NULL, ptds_thread, &a[i]);
	}
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	uint32_t expect = 0;
	for (uint32_t k = 1; k <= 20; k++)
		expect = expect * 3 + k;
	for (int i = 0; i < NT; i++) {
		CHECK(!a[i].bad);
		CHECK(read_u32(a[i].buf) == expect);
		for (int j = 0; j < i; j++)
			CHECK(a[i].id != a[j].id);
		CK(cuMemFree(a[i].buf));
	}
	/* Per-thread stream vs legacy: per-thread work waits for earlier legacy work. */
	CUdeviceptr f = dalloc(4), r = dalloc(4);
	slow_set(CU_STREAM_LEGACY, f, 1, 20);
	uint32_t want = 1;
	void *args[] = {&f, &want, &r};
	CK(launch_ptsz(f_check, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	CK(sync_ptsz(CU_STREAM_PER_THREAD));
	CHECK(read_u32(r) == 1);
	unsigned long long idl, idp;
	CK(cuStreamGetId(CU_STREAM_LEGACY, &idl));
	CK(cuStreamGetId(CU_STREAM_PER_THREAD, &idp));
	CHECK(idl != idp);
	CK(cuMemFree(f));
	CK(cuMemFree(r));
}

/* Host function that blocks its stream until the gate opens (a kernel elsewhere or
 * the host opens it). */
static void hf_wait(void *p)
{
	struct gate *g = p;
	if (!spin_until(&g->flag, 1, 5000))
		atomic_store(&g->timed_out, 1);
}

static void t_events(void)
{
	CUstream s1, s2;
	CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CUevent e0, e1, en, et;
	CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
	CK(cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
	CK(cuEventCreate(&en, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&et, 0));
	CK_IS(cuEventCreate(&et, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
	float ms;
	/* Never recorded: query succeeds, timing refuses. */
	CK(cuEventQuery(e0));
	CK(cuEventSynchronize(e0));
	CK_IS(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);
	CUdeviceptr f = dalloc(4), r = dalloc(16);
	CK(cuEventRecord(e0, s1));
	slow_set(s1, f, 1, 30);
	CK(cuEventRecord(e1, s1));
	CK(cuEventRecord(en, s1));
	CK_IS(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
	CK_IS(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
	CK(cuStreamWaitEvent(s2, e1, 0));
	check_eq(s2, f, 1, r); /* cross-stream wait */
	CK(cuEventSynchronize(e1));
	CK(cuEventQuery(e1));
	CK(cuEventElapsedTime(&ms, e0, e1));
	CHECK(ms >= 25.0f && ms < 5000.0f);
	CK_IS(cuEventElapsedTime(&ms, e0, en), CUDA_ERROR_INVALID_HANDLE);
	CK(cuStreamSynchronize(s2));
	CHECK(read_u32(r) == 1);

	/* A wait captures the generation current at the call: re-recording afterwards
	 * must not move it. s1 blocks (host function) until s2's kernel ran, and only
	 * then re-records; a wait on the new generation would deadlock (time out). */
	CUdeviceptr f2 = dalloc(4), ok = dalloc(4), done;
	struct gate *gt = gate_new(&done);
	CK(cuEventRecord(e0, s1));
	CK(cuStreamWaitEvent(s2, e0, 0));
	slow_set(s2, done, 1, 0); /* opens the gate */
	CK(cuLaunchHostFunc(s1, hf_wait, gt));
	CK(cuEventRecord(e0, s1));
	CK(cuStreamSynchronize(s1));
	CK(cuStreamSynchronize(s2));
	CHECK(atomic_load(&gt->timed_out) == 0);
	CK(cuMemFreeHost(gt));
	/* cuEventRecordWithFlags. */
	CK(cuEventRecordWithFlags(et, s2, CU_EVENT_RECORD_DEFAULT));
	CK_IS(cuEventRecordWithFlags(et, s2, 0x40), CUDA_ERROR_INVALID_VALUE);
	CK(cuEventSynchronize(et));
	/* Event on the legacy stream, waited by a non-blocking stream. */
	slow_set(NULL, f2, 1, 20);
	CK(cuEventRecord(et, NULL));
	CK(cuStreamWaitEvent(s2, et, 0));
	check_eq(s2, f2, 1, ok);
	CK(cuStreamSynchronize(s2));
	CHECK(read_u32(ok) == 1);
	/* Destroying a pending event is fine. */
	slow_set(s1, f2, 2, 10);
	CK(cuEventRecord(en, s1));
	CK(cuEventDestroy(en));
	CK_IS(cuEventQuery(en), CUDA_ERROR_INVALID_HANDLE);
	CK(cuStreamSynchronize(s1));
	CK(cuEventDestroy(e0));
	CK(cuEventDestroy(e1));
	CK(cuEventDestroy(et));
	CK(cuStreamDestroy(s1));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(f));
	CK(cuMemFree(f2));
	CK(cuMemFree(r));
	CK(cuMemFree(ok));
}

/* Host functions and callbacks run in stream order and may not call CUDA. */
struct hlog {
	_Atomic uint32_t n;
	uint32_t v[64];
	CUresult inner;
	CUstream cb_stream;
	CUresult cb_status;
};
static struct hlog hl;

static void hf_log(void *p)
{
	hl.v[atomic_fetch_add(&hl.n, 1)] = (uint32_t)(uintptr_t)p;
	hl.inner = cuStreamQuery(NULL);
}

static void cb_log(CUstream s, CUresult status, void *p)
{
	hl.cb_stream = s;
	hl.cb_status = status;
	hl.v[atomic_fetch_add(&hl.n, 1)] = (uint32_t)(uintptr_t)p;
}

static void t_hostfn(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	memset(&hl, 0, sizeof(hl));
	CUdeviceptr log = dalloc(64 * 4), cnt = dalloc(4);
	for (uint32_t i = 0; i < 10; i++) {
		if (i % 3 == 0) {
			CK(cuLaunchHostFunc(s, hf_log, (void *)(uintptr_t)(100 + i)));
		} else if (i % 3 == 1) {
			CK(cuStreamAddCallback(s, cb_log, (void *)(uintptr_t)(100 + i), 0));
		} else {
			/* A kernel in between: order must hold across kinds. */
			uint32_t v = 100 + i;
			void *a[] = {&log, &cnt, &v};
			launch1(f_append, s, a);
			CK(cuStreamSynchronize(s));
			hl.v[atomic_fetch_add(&hl.n, 1)] = read_u32(log + 4 * (read_u32(cnt) - 1));
		}
	}
	CK_IS(cuStreamAddCallback(s, cb_log, NULL, 1), CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamSynchronize(s));
	CHECK(atomic_load(&hl.n) == 10);
	for (uint32_t i = 0; i < 10; i++)
		CHECK(hl.v[i] == 100 + i);
	CHECK(hl.inner == CUDA_ERROR_NOT_PERMITTED);
	CUfunction fcc;
	CK(cuModuleGetFunction(&fcc, mod, "calls_cuda"));
	CK(cuLaunchKernel(fcc, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	CK(cuStreamSynchronize(s));
	CHECK(k_calls_cuda_result == CUDA_ERROR_NOT_PERMITTED);
	CHECK(hl.cb_stream == s && hl.cb_status == CUDA_SUCCESS);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(log));
	CK(cuMemFree(cnt));
}

static void t_memory(void)
{
	enum { N = 4096 };
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	size_t free0, total;
	CK(cuMemGetInfo(&free0, &total));
	CUdeviceptr d = dalloc(N), d2 = dalloc(N);
	size_t free1;
	CK(cuMemGetInfo(&free1, &total));
	CHECK(free1 + 2 * N <= free0);
	unsigned char *pg = malloc(N), *pg2 = malloc(N), *pin = NULL, *pin2 = NULL;
	CK(cuMemAllocHost((void **)&pin, N));
	CK(cuMemHostAlloc((void **)&pin2, N, CU_MEMHOSTALLOC_DEVICEMAP));
	for (int i = 0; i < N; i++)
		pg[i] = (unsigned char)i;
	/* Sync pageable H2D: the source may change right after. */
	CK(cuMemcpyHtoD(d, pg, N));
	memset(pg, 0xee, N);
	CK(cuMemcpyDtoH(pg2, d, N));
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= pg2[i] == (unsigned char)i;
	CHECK(ok);
	/* Async from pageable memory: staged at the call, even behind slow work. */
	CUdeviceptr f = dalloc(4);
	slow_set(s, f, 1, 20);
	for (int i = 0; i < N; i++)
		pg[i] = (unsigned char)(i * 3);
	CK(cuMemcpyHtoDAsync(d, pg, N, s));
	memset(pg, 0, N);
	/* Async into pinned memory: asynchronous, valid after sync. */
	CK(cuMemcpyDtoHAsync(pin, d, N, s));
	CK(cuStreamSynchronize(s));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= pin[i] == (unsigned char)(i * 3);
	CHECK(ok);
	/* Pinned both directions and DtoD (asynchronous to the host for the sync API). */
	for (int i = 0; i < N; i++)
		pin[i] = (unsigned char)(255 - i);
	CK(cuMemcpyHtoDAsync(d2, pin, N, s));
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoD(d, d2, N));
	CK(cuMemcpyDtoH(pin2, d, N)); /* legacy stream: ordered after the DtoD */
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= pin2[i] == (unsigned char)(255 - i);
	CHECK(ok);
	/* Unified cuMemcpy and cuMemcpyAsync. */
	CK(cuMemcpy((CUdeviceptr)(uintptr_t)pg2, d, 16));
	CHECK(pg2[0] == 255 && pg2[15] == 240);
	CK(cuMemcpyAsync(d2, (CUdeviceptr)(uintptr_t)pg2, 16, s));
	CK(cuStreamSynchronize(s));
	/* Range checks against the allocation. */
	CK_IS(cuMemcpyHtoD(d + N - 8, pg, 16), CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)pg, pg2, 16), CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuMemsetD32(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);
	/* Memsets. */
	CK(cuMemsetD32(d, 0x01020304, N / 4));
	CK(cuMemsetD16(d2, 0xabcd, N / 2));
	CK(cuMemsetD8Async(d2, 0x5a, 8, NULL)); /* s is non-blocking: would race the D16 */
	uint32_t w;
	CK(cuMemcpyDtoH(&w, d + 100, 4));
	CHECK(w == 0x01020304);
	uint16_t h16[8];
	CK(cuMemcpyDtoH(h16, d2, sizeof(h16)));
	CHECK(h16[0] == 0x5a5a && h16[3] == 0x5a5a && h16[4] == 0xabcd);
	/* Pitched 2-D: memset and copy. */
	CUdeviceptr dp;
	size_t pitch;
	CK(cuMemAllocPitch(&dp, &pitch, 100, 10, 4));
	CHECK(pitch >= 100 && pitch % 512 == 0);
	CK_IS(cuMemAllocPitch(&dp, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemsetD2D32(dp, pitch, 7, 25, 10));
	unsigned char host2d[10][100];
	CUDA_MEMCPY2D m2 = {0};
	m2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m2.srcDevice = dp;
	m2.srcPitch = pitch;
	m2.dstMemoryType = CU_MEMORYTYPE_HOST;
	m2.dstHost = host2d;
	m2.dstPitch = 100;
	m2.WidthInBytes = 100;
	m2.Height = 10;
	CK(cuMemcpy2D(&m2));
	CHECK(host2d[9][96] == 7 && host2d[0][1] == 0);
	host2d[3][4] = 42;
	m2.srcMemoryType = CU_MEMORYTYPE_HOST;
	m2.srcHost = host2d;
	m2.srcPitch = 100;
	m2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m2.dstDevice = dp;
	m2.dstPitch = pitch;
	CK(cuMemcpy2DAsync(&m2, s));
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(&w, dp + 3 * pitch + 4, 4));
	CHECK((w & 0xff) == 42);
	m2.dstPitch = 50;
	CK_IS(cuMemcpy2D(&m2), CUDA_ERROR_INVALID_VALUE);
	/* 3-D: a 4x3x2 box out of an 8x4x3 volume. */
	unsigned char vol[3][4][8], box[2][3][4];
	for (int z = 0; z < 3; z++)
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 8; x++)
				vol[z][y][x] = (unsigned char)(z * 100 + y * 10 + x);
	CK(cuMemcpyHtoD(d, vol, sizeof(vol)));
	CUDA_MEMCPY3D m3 = {0};
	m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m3.srcDevice = d;
	m3.srcPitch = 8;
	m3.srcHeight = 4;
	m3.srcXInBytes = 2;
	m3.srcY = 1;
	m3.srcZ = 1;
	m3.dstMemoryType = CU_MEMORYTYPE_HOST;
	m3.dstHost = box;
	m3.dstPitch = 4;
	m3.dstHeight = 3;
	m3.WidthInBytes = 4;
	m3.Height = 3;
	m3.Depth = 2;
	CK(cuMemcpy3D(&m3));
	CHECK(box[0][0][0] == 112 && box[1][2][3] == 235);
	CK(cuMemcpy3DAsync(&m3, s));
	CK(cuStreamSynchronize(s));
	/* Batch copies. */
	CUdeviceptr dsts[2] = {d2, d2 + 64}, srcs[2] = {(CUdeviceptr)(uintptr_t)vol, d};
	size_t sizes[2] = {32, 32}, idx[1] = {0};
	CUmemcpyAttributes attr = {0};
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idx, 1, s));
	CK_IS(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idx, 1, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamSynchronize(s));
	unsigned char b2[96];
	CK(cuMemcpyDtoH(b2, d2, sizeof(b2)));
	CHECK(b2[5] == 5 && b2[64 + 9] == 11);
	/* Peer copy within one device. */
	CK(cuMemcpyPeer(d2, pctx, d, pctx, 16));
	CK(cuMemcpyPeerAsync(d2, pctx, d, pctx, 16, s));
	CK(cuStreamSynchronize(s));
	/* Pointer attributes: device, pinned, registered, pageable. */
	unsigned int mt = 0;
	CUdeviceptr dv = 0;
	CUcontext pc = NULL;
	int ordinal = -1;
	CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
	CHECK(mt == CU_MEMORYTYPE_DEVICE);
	CK(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, d));
	CHECK(pc == pctx);
	CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
	CHECK(ordinal == dev);
	CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				 (CUdeviceptr)(uintptr_t)pin));
	CHECK(mt == CU_MEMORYTYPE_HOST);
	CK(cuPointerGetAttribute(&dv, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				 (CUdeviceptr)(uintptr_t)pin2));
	CHECK(dv == (CUdeviceptr)(uintptr_t)pin2);
	unsigned int managed = 0xffffffffu; /* the driver writes a 4-byte boolean */
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
	CHECK(managed == 0);
	CK_IS(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    (CUdeviceptr)(uintptr_t)pg),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuPointerGetAttribute(&dv, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
	      CUDA_ERROR_INVALID_VALUE);
	CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				     CU_POINTER_ATTRIBUTE_CONTEXT};
	void *data[2] = {&mt, &pc};
	CK(cuPointerGetAttributes(2, at, data, (CUdeviceptr)(uintptr_t)pg));
	CHECK(mt == 0 && pc == NULL);
	void *hp = NULL;
	CUpointer_attribute hat = CU_POINTER_ATTRIBUTE_HOST_POINTER;
	void *hdata[1] = {&hp};
	CK(cuPointerGetAttributes(1, &hat, hdata, (CUdeviceptr)(uintptr_t)pg));
	CHECK(hp == pg);
	CK(cuPointerGetAttributes(2, at, data, d));
	CHECK(mt == CU_MEMORYTYPE_DEVICE && pc == pctx);
	CK(cuMemHostRegister(pg, N, CU_MEMHOSTREGISTER_DEVICEMAP));
	CK_IS(cuMemHostRegister(pg + 16, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CK(cuMemHostGetDevicePointer(&dv, pg + 8, 0));
	CHECK(dv == (CUdeviceptr)(uintptr_t)(pg + 8));
	CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				 (CUdeviceptr)(uintptr_t)pg));
	CHECK(mt == CU_MEMORYTYPE_HOST);
	CK(cuMemsetD8(dv, 9, 8)); /* registered memory is device-accessible */
	CK(cuCtxSynchronize());
	CHECK(pg[8] == 9 && pg[15] == 9);
	CK(cuMemHostUnregister(pg));
	CK_IS(cuMemHostUnregister(pg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CK_IS(cuMemHostGetDevicePointer(&dv, pg, 0), CUDA_ERROR_INVALID_VALUE);
	/* Stream-ordered allocation. */
	CUdeviceptr da;
	CK(cuMemAllocAsync(&da, 256, s));
	CK(cuMemsetD8Async(da, 1, 256, s));
	CK(cuMemcpyDtoDAsync(d, da, 256, s));
	CK(cuMemFreeAsync(da, s));
	CK_IS(cuMemFreeAsync(da, s), CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(&w, d, 4));
	CHECK(w == 0x01010101);
	CK_IS(cuMemFree(d + 1), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(d));
	CK(cuMemFree(d2));
	CK(cuMemFree(dp));
	CK(cuMemFree(f));
	CK(cuMemFreeHost(pin));
	CK(cuMemFreeHost(pin2));
	CK_IS(cuMemFreeHost(pg), CUDA_ERROR_INVALID_VALUE);
	free(pg);
	free(pg2);
	CK(cuStreamDestroy(s));
	size_t free2;
	CK(cuMemGetInfo(&free2, &total));
	CHECK(free2 == free0);
}

static void t_params(void)
{
	size_t off, sz;
	static const size_t want_off[] = {0, 8, 16, 20, 32, 40}, want_sz[] = {1, 8, 4, 12, 8, 2};
	for (size_t i = 0; i < 6; i++) {
		CK(cuFuncGetParamInfo(f_six, i, &off, &sz));
		CHECK(off == want_off[i] && sz == want_sz[i]);
	}
	CK_IS(cuFuncGetParamInfo(f_six, 6, &off, &sz), CUDA_ERROR_INVALID_VALUE);
	const char *name;
	CK(cuFuncGetName(&name, f_six));
	CHECK(strcmp(name, "six") == 0);
	int v;
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_six));
	CHECK(v == 1024);
	CK(cuFuncSetAttribute(f_six, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f_six));
	CHECK(v == 100000);

	struct six *out;
	CK(cuMemAllocHost((void **)&out, sizeof(*out) * 2));
	memset(out, 0, sizeof(*out) * 2);
	char c = 'x';
	double d = 2.5;
	int i = 77;
	struct f3 f = {1, 2, 3};
	void *p = out;
	short s = -3;
	CUstream st;
	CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	/* Hold the stream so the launch runs after the arguments were overwritten. */
	CUdeviceptr dgate;
	struct gate *gt = gate_new(&dgate);
	CK(cuLaunchHostFunc(st, hf_wait, gt));
	void *args[] = {&c, &d, &i, &f, &p, &s};
	CK(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 60000, st, args, NULL));
	c = 'y';
	d = 0;
	i = 0;
	f.y = 0;
	s = 0;
	atomic_store(&gt->flag, 1);
	CK(cuStreamSynchronize(st));
	CHECK(atomic_load(&gt->timed_out) == 0);
	CHECK(out->c == 'x' && out->d == 2.5 && out->i == 77 && out->f.y == 2 && out->p == out &&
	      out->s == -3);
	/* The same through an extra buffer. */
	unsigned char buf[48] = {0};
	char c2 = 'z';
	double d2 = -1.25;
	int i2 = 5;
	struct f3 f2 = {4, 5, 6};
	void *p2 = out + 1;
	short s2 = 11;
	memcpy(buf + 0, &c2, 1);
	memcpy(buf + 8, &d2, 8);
	memcpy(buf + 16, &i2, 4);
	memcpy(buf + 20, &f2, 12);
	memcpy(buf + 32, &p2, 8);
	memcpy(buf + 40, &s2, 2);
	size_t bsz = 42;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsz,
			 CU_LAUNCH_PARAM_END};
	CK(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra));
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, st, args, extra),
	      CUDA_ERROR_INVALID_VALUE);
	bsz = 64;
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	bsz = 48; /* even sizeof a padded struct is refused (measured) */
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	bsz = 0;
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra),
	      CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamSynchronize(st));
	CHECK(out[1].c == 'z' && out[1].d == -1.25 && out[1].i == 5 && out[1].f.z == 6 &&
	      out[1].s == 11);
	/* Geometry and shared memory limits. */
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1025, 1, 1, 0, st, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_six, 0, 1, 1, 1, 1, 1, 0, st, args, NULL), CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 200000, st, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	/* Library / CUkernel path: a CUkernel launches as a CUfunction too. */
	CUlibrary lib;
	CUkernel k;
	CUfunction kf;
	CK(cuLibraryLoadData(&lib, "any image", NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&k, lib, "add"));
	CK_IS(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
	CK(cuKernelGetFunction(&kf, k));
	CK(cuKernelGetParamInfo(k, 2, &off, &sz));
	CHECK(off == 12 && sz == 4);
	CK_IS(cuKernelGetParamInfo(k, 3, &off, &sz), CUDA_ERROR_INVALID_VALUE);
	CK(cuKernelGetName(&name, k));
	CHECK(strcmp(name, "add") == 0);
	CUdeviceptr acc = dalloc(4);
	add(st, acc, 1, 1);
	uint32_t n1 = 1, v3 = 3, v5 = 5;
	void *aa[] = {&acc, &n1, &v3};
	CK(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, st, aa, NULL));
	aa[2] = &v5;
	CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, st, aa, NULL));
	CK(cuStreamSynchronize(st));
	CHECK(read_u32(acc) == 9);
	CK(cuLibraryUnload(lib));
	CK(cuStreamDestroy(st));
	CK(cuMemFreeHost(out));
	CK(cuMemFreeHost(gt));
	CK(cuMemFree(acc));
}

static int all_sms(void)
{
	int v = 0;
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
	return v;
}

static void t_coop(void)
{
	int occ;
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_coop, 256, 0));
	CHECK(occ == 8);
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_coop, 32, 0));
	CHECK(occ == 32);
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_coop, 1024, 0));
	CHECK(occ == 2);
	unsigned full = (unsigned)all_sms() * 8;
	atomic_store(&coop_seen, 0);
	CK(cuLaunchCooperativeKernel(f_coop, full, 1, 1, 256, 1, 1, 0, NULL, NULL));
	CK_IS(cuLaunchCooperativeKernel(f_coop, full + 1, 1, 1, 256, 1, 1, 0, NULL, NULL),
	      CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
	CUlaunchAttribute attr[2];
	memset(attr, 0, sizeof(attr));
	attr[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	attr[0].value.cooperative = 1;
	attr[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attr[1].value.clusterDim.x = 2;
	attr[1].value.clusterDim.y = 1;
	attr[1].value.clusterDim.z = 1;
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = 64;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 128;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.attrs = attr;
	cfg.numAttrs = 2;
	CK(cuLaunchKernelEx(&cfg, f_coop, NULL, NULL));
	cfg.gridDimX = 63; /* not a multiple of the cluster */
	CK_IS(cuLaunchKernelEx(&cfg, f_coop, NULL, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	cfg.gridDimX = (unsigned)all_sms() * 16 + 2;
	CK_IS(cuLaunchKernelEx(&cfg, f_coop, NULL, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
	CK(cuCtxSynchronize());
	CHECK(atomic_load(&coop_seen) == 2);
}

static void t_capture(void)
{
	enum { N = 32 };
	CUstream s, side, run;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&run, 0));
	CUdeviceptr a = dalloc(N * 4), b = dalloc(N * 4);
	uint32_t *host;
	CK(cuMemAllocHost((void **)&host, N * 4));
	memset(&hl, 0, sizeof(hl));
	uint64_t l0 = fakecuda_launch_count();
	CUevent fork, join;
	CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUstreamCaptureStatus cs;
	CK(cuStreamIsCapturing(s, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	cuuint64_t cid = 0;
	CUgraph cg = NULL;
	const CUgraphNode *deps = NULL;
	size_t nd = 1;
	CK(cuStreamGetCaptureInfo(s, &cs, &cid, &cg, &deps, NULL, &nd));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE && cid != 0 && cg != NULL);
	CK(cuMemsetD32Async(a, 1, N, s));
	add(s, a, N, 2);	    /* a = 3 */
	CK(cuEventRecord(fork, s)); /* fork side into the capture */
	CK(cuStreamWaitEvent(side, fork, 0));
	CK(cuStreamIsCapturing(side, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	muladd(side, a, N, 10, 0); /* a = 30 */
	CK(cuEventRecord(join, side));
	CK(cuStreamWaitEvent(s, join, 0));
	CK(cuLaunchHostFunc(s, hf_log, (void *)(uintptr_t)7));
	CK(cuMemcpyDtoDAsync(b, a, N * 4, s));	  /* b = 30 */
	CK(cuMemcpyDtoHAsync(host, b, N * 4, s)); /* pinned: capturable */
	/* Synchronous copies are not "unsafe" calls (measured). */
	uint32_t one = 1;
	CK(cuMemcpyHtoD(b + 4 * N - 4, &one, 4));
	CK(cuStreamGetCaptureInfo(s, &cs, &cid, &cg, &deps, NULL, &nd));
	CHECK(nd == 1 && deps != NULL);
	/* Nothing ran. */
	CHECK(fakecuda_launch_count() == l0);
	CHECK(atomic_load(&hl.n) == 0);
	CUgraph g;
	CK(cuStreamEndCapture(s, &g));
	CHECK(fakecuda_graph_node_count(g) == 6);
	CK(cuStreamIsCapturing(side, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
	CHECK(read_u32(a) == 0);
	CUgraphExec x, x2;
	CK(cuGraphInstantiate(&x, g, 0));
	CK(cuGraphDestroy(g)); /* the exec is independent */
	for (int i = 0; i < 3; i++)
		CK(cuGraphLaunch(x, run));
	CK(cuStreamSynchronize(run));
	CHECK(fakecuda_launch_count() == l0 + 6);
	CHECK(atomic_load(&hl.n) == 3 && hl.v[0] == 7);
	CHECK(read_u32(b) == 30 && host[N - 1] == 30);
	/* An unsafe call during a global capture fails and invalidates it... */
	CUdeviceptr tmp;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK_IS(cuMemAlloc(&tmp, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	/* ...but is allowed in relaxed mode, except synchronizing the context. */
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(cuMemAlloc(&tmp, 64));
	CK(cuMemFree(tmp));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphDestroy(g));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK_IS(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	/* Querying an event recorded in the capture, or waiting on one recorded
	 * outside it, invalidates it too. */
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(cuEventRecord(fork, s));
	CK_IS(cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CK(cuEventRecord(join, run));
	CK(cuStreamSynchronize(run));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK_IS(cuStreamWaitEvent(s, join, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CK_IS(cuEventRecordWithFlags(join, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_ILLEGAL_STATE);
	/* External event nodes: recorded / waited when the graph runs. */
	CUevent ext;
	CK(cuEventCreate(&ext, 0));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	add(s, a, N, 5);
	CK(cuEventRecordWithFlags(ext, s, CU_EVENT_RECORD_EXTERNAL));
	CK(cuStreamEndCapture(s, &g));
	CHECK(fakecuda_graph_node_count(g) == 2);
	CK(cuEventQuery(ext)); /* never recorded yet */
	CK(cuGraphInstantiate(&x2, g, 0));
	CK(cuGraphLaunch(x2, run));
	CK(cuStreamSynchronize(run));
	CK(cuEventSynchronize(ext));
	CHECK(read_u32(a) == 35);
	CK(cuGraphExecDestroy(x2));
	CK(cuGraphDestroy(g));
	CK(cuEventDestroy(ext));
	/* Sync of a capturing stream invalidates the capture. */
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	add(s, a, N, 1);
	CK_IS(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK(cuStreamIsCapturing(s, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	/* So does an uncapturable operation (only cuLaunchHostFunc is capturable). */
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK_IS(cuStreamAddCallback(s, cb_log, NULL, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	/* The legacy stream cannot be used while a blocking stream captures. */
	CUstream blk;
	CK(cuStreamCreate(&blk, 0));
	CK(cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK_IS(cuStreamIsCapturing(NULL, &cs), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CK_IS(cuMemsetD8Async(a, 0, 4, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CK_IS(cuStreamEndCapture(blk, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CK_IS(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_RELAXED),
	      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
	CK(cuGraphExecDestroy(x));
	CK(cuStreamDestroy(blk));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(side));
	CK(cuStreamDestroy(run));
	CK(cuEventDestroy(fork));
	CK(cuEventDestroy(join));
	CK(cuMemFree(a));
	CK(cuMemFree(b));
	CK(cuMemFreeHost(host));
}

static int mask_equal(const uint64_t *mask, const uint32_t *ids, int n)
{
	uint64_t want[FAKECUDA_MAX_SMS / 64] = {0};
	for (int i = 0; i < n; i++)
		want[ids[i] / 64] |= 1ull << (ids[i] % 64);
	return memcmp(mask, want, sizeof(want)) == 0;
}

static void t_green(void)
{
	int nsm = all_sms();
	CUdevResource whole;
	CK(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
	CHECK((int)whole.sm.smCount == nsm && whole.sm.minSmPartitionSize == 8 &&
	      whole.sm.smCoscheduledAlignment == 8);
	unsigned nb = 0;
	CK(cuDevSmResourceSplitByCount(NULL, &nb, &whole, NULL, 0, 8));
	if (nsm == 132)
		CHECK(nb == 15);
	CUdevResource groups[32], rem;
	unsigned ng = 32;
	CK(cuDevSmResourceSplitByCount(groups, &ng, &whole, &rem, 0, 8));
	CHECK(ng == nb);
	if (nsm == 132) {
		CHECK(rem.sm.smCount == 12);
		static const uint32_t leaf0[] = {0, 1, 16, 17, 32, 33, 48, 49};
		static const uint32_t leaf8[] = {64, 65, 78, 79, 92, 93, 106, 107};
		uint32_t ids[8];
		CHECK(fakecuda_resource_sm_ids(&groups[0], ids, 8) == 8 &&
		      memcmp(ids, leaf0, sizeof(ids)) == 0);
		CHECK(fakecuda_resource_sm_ids(&groups[8], ids, 8) == 8 &&
		      memcmp(ids, leaf8, sizeof(ids)) == 0);
		unsigned n16 = 0;
		CK(cuDevSmResourceSplitByCount(NULL, &n16, &whole, NULL, 0, 16));
		CHECK(n16 == 8); /* 8 x 16 + 4 on the H200 */
	}
	/* Groups and remainder partition the device. */
	uint64_t seen[FAKECUDA_MAX_SMS / 64] = {0};
	int total = 0, disjoint = 1, have_rem = rem.type == CU_DEV_RESOURCE_TYPE_SM;
	CHECK(have_rem == (nsm % 8 != 0));
	for (unsigned i = 0; i < ng + (unsigned)have_rem; i++) {
		uint32_t ids[FAKECUDA_MAX_SMS];
		int n = fakecuda_resource_sm_ids(i < ng ? &groups[i] : &rem, ids, FAKECUDA_MAX_SMS);
		CHECK(n >= 0);
		CHECK(i == ng || n == 8);
		for (int j = 0; j < n; j++) {
			disjoint &= !((seen[ids[j] / 64] >> (ids[j] % 64)) & 1);
			seen[ids[j] / 64] |= 1ull << (ids[j] % 64);
		}
		total += n;
	}
	CHECK(disjoint && total == nsm);
	/* Split outputs cannot be split again. */
	CK_IS(cuDevSmResourceSplitByCount(NULL, &nb, &groups[0], NULL, 0, 8),
	      CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
	/* Green A = leaf 0; green B = every other group plus the remainder. */
	CUdevResourceDesc da, db, dx;
	CK(cuDevResourceGenerateDesc(&da, &groups[0], 1));
	CUdevResource rest[33];
	unsigned nr = 0;
	for (unsigned i = 1; i < ng; i++)
		rest[nr++] = groups[i];
	if (have_rem)
		rest[nr++] = rem;
	CK(cuDevResourceGenerateDesc(&db, rest, nr));
	CUdevResource other[32];
	unsigned no = 32;
	CK(cuDevSmResourceSplitByCount(other, &no, &whole, NULL, 0, 8));
	CUdevResource mix[2] = {groups[0], other[1]};
	CK_IS(cuDevResourceGenerateDesc(&dx, mix, 2), CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
	CUgreenCtx ga, gb;
	CK_IS(cuGreenCtxCreate(&ga, da, dev, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuGreenCtxCreate(&ga, da, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CK(cuGreenCtxCreate(&gb, db, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CUdevResource gr;
	CK(cuGreenCtxGetDevResource(ga, &gr, CU_DEV_RESOURCE_TYPE_SM));
	CHECK(gr.sm.smCount == 8);
	CK(cuGreenCtxGetDevResource(gb, &gr, CU_DEV_RESOURCE_TYPE_SM));
	CHECK((int)gr.sm.smCount == nsm - 8);
	uint32_t ida[FAKECUDA_MAX_SMS], idb[FAKECUDA_MAX_SMS];
	int na = fakecuda_green_sm_ids(ga, ida, FAKECUDA_MAX_SMS);
	int nbb = fakecuda_green_sm_ids(gb, idb, FAKECUDA_MAX_SMS);
	CHECK(na == 8 && nbb == nsm - 8);
	CUstream sa, sb;
	CK_IS(cuGreenCtxStreamCreate(&sa, ga, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuGreenCtxStreamCreate(&sa, ga, CU_STREAM_NON_BLOCKING, 0));
	CK(cuGreenCtxStreamCreate(&sb, gb, CU_STREAM_NON_BLOCKING, -1));
	CUgreenCtx gq;
	CUcontext cq;
	CK(cuStreamGetGreenCtx(sa, &gq));
	CHECK(gq == ga);
	CK(cuStreamGetCtx_v2(sb, &cq, &gq));
	CHECK(cq == pctx && gq == gb);
	CK(cuStreamGetGreenCtx(NULL, &gq));
	CHECK(gq == NULL);
	/* Launches on A's stream run on A's SMs; kernels see the set. */
	struct fakecuda_launch_record rec[64];
	uint64_t la = fakecuda_green_launch_count(ga), lb = fakecuda_green_launch_count(gb);
	uint64_t seq0 = fakecuda_launch_seq();
	size_t have;
	CUdeviceptr smids = dalloc(64 * 4), nsmv = dalloc(8);
	void *args[] = {&smids, &nsmv};
	CK(cuLaunchKernel(f_smid, 16, 1, 1, 64, 1, 1, 0, sa, args, NULL));
	CK(cuStreamSynchronize(sa));
	uint32_t got[16];
	CK(cuMemcpyDtoH(got, smids, sizeof(got)));
	int in_a = 1;
	for (int i = 0; i < 16; i++) {
		int hit = 0;
		for (int j = 0; j < na; j++)
			hit |= got[i] == ida[j];
		in_a &= hit;
	}
	CHECK(in_a);
	CHECK(read_u32(nsmv) == 8);
	/* Cross-green-context event ordering, B waits for A. */
	CUdeviceptr f = dalloc(4), r = dalloc(8);
	CUevent e;
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	slow_set(sa, f, 1, 20);
	CK(cuEventRecord(e, sa));
	CK(cuStreamWaitEvent(sb, e, 0));
	check_eq(sb, f, 1, r);
	CK(cuStreamSynchronize(sb));
	CHECK(read_u32(r) == 1);
	/* Context-wide record / wait: B waits for all of A's work. */
	CUdeviceptr f2 = dalloc(4);
	slow_set(sa, f2, 1, 20);
	CK(cuGreenCtxRecordEvent(ga, e));
	CK(cuGreenCtxWaitEvent(gb, e));
	check_eq(sb, f2, 1, r + 4);
	CK(cuStreamSynchronize(sb));
	CHECK(read_u32(r + 4) == 1);
	CHECK(fakecuda_green_launch_count(ga) == la + 3);
	CHECK(fakecuda_green_launch_count(gb) == lb + 2);
	have = fakecuda_launch_log(rec, 64, seq0);
	int confined = have >= 5;
	for (size_t i = 0; i < have; i++) {
		if (rec[i].green == ga)
			confined &= rec[i].nsm == 8 && mask_equal(rec[i].sm_mask, ida, na);
		else if (rec[i].green == gb)
			confined &= mask_equal(rec[i].sm_mask, idb, nbb);
	}
	CHECK(confined);
	/* With A's CUcontext current, the NULL stream is A's and runs on A's SMs. */
	CUcontext ca;
	CK(cuCtxFromGreenCtx(&ca, ga));
	CK(cuCtxPushCurrent(ca));
	CK(cuLaunchKernel(f_smid, 4, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
	CK(cuStreamSynchronize(NULL));
	CK(cuStreamGetGreenCtx(NULL, &gq));
	CHECK(gq == ga);
	CK(cuCtxPopCurrent(NULL));
	CHECK(read_u32(nsmv) == 8);
	/* A graph's kernel node runs in the context it was made in, whatever
	 * stream the graph is launched into (measured on driver 580 with
	 * tests/gpu/gpu_graph_ctx): captured in the primary context, it runs on
	 * every SM even when launched on B's stream. */
	CUstream cap;
	CK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
	CK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CK(cuLaunchKernel(f_smid, 2, 1, 1, 32, 1, 1, 0, cap, args, NULL));
	CUgraph g;
	CUgraphExec x;
	CK(cuStreamEndCapture(cap, &g));
	CK(cuGraphInstantiateWithFlags(&x, g, 0));
	uint64_t lb2 = fakecuda_green_launch_count(gb);
	CK(cuGraphLaunch(x, sb));
	CK(cuStreamSynchronize(sb));
	CHECK(fakecuda_green_launch_count(gb) == lb2);
	CHECK(read_u32(nsmv) == (uint32_t)nsm);
	/* Captured on B's stream, it runs on B's SMs even from a primary stream. */
	CUgraph gg;
	CUgraphExec xg;
	CK(cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CK(cuLaunchKernel(f_smid, 2, 1, 1, 32, 1, 1, 0, sb, args, NULL));
	CK(cuStreamEndCapture(sb, &gg));
	CK(cuGraphInstantiateWithFlags(&xg, gg, 0));
	CK(cuGraphLaunch(xg, cap));
	CK(cuStreamSynchronize(cap));
	CHECK(fakecuda_green_launch_count(gb) == lb2 + 1);
	CHECK(read_u32(nsmv) == (uint32_t)nsm - 8);
	/* A clone whose node names B's context (func NULL, kern, ctx) runs on
	 * B's SMs; with func set, ctx is ignored ("ignored if func is set").
	 * The node of a module's function has no CUkernel. */
	CUDA_KERNEL_NODE_PARAMS kp;
	CUgraphNode node;
	size_t nn = 1;
	CK(cuGraphGetNodes(g, &node, &nn));
	CK(cuGraphKernelNodeGetParams(node, &kp));
	CHECK(kp.func == f_smid && kp.kern == NULL && kp.ctx == pctx);
	CUlibrary slib;
	CUkernel ksmid;
	CK(cuLibraryLoadData(&slib, "image", NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&ksmid, slib, "smid"));
	CUcontext cb;
	CK(cuCtxFromGreenCtx(&cb, gb));
	for (int with_func = 0; with_func < 2; with_func++) {
		CUgraph gc;
		CUgraphExec xc;
		CK(cuGraphClone(&gc, g));
		CK(cuGraphGetNodes(gc, &node, &nn));
		CK(cuGraphKernelNodeGetParams(node, &kp));
		kp.func = with_func ? f_smid : NULL;
		kp.kern = ksmid;
		kp.ctx = cb;
		CK(cuGraphKernelNodeSetParams(node, &kp));
		CK(cuGraphInstantiateWithFlags(&xc, gc, 0));
		uint64_t lb3 = fakecuda_green_launch_count(gb);
		CK(cuGraphLaunch(xc, cap));
		CK(cuStreamSynchronize(cap));
		CHECK(fakecuda_green_launch_count(gb) == lb3 + (with_func ? 0 : 1));
		CHECK(read_u32(nsmv) == (uint32_t)nsm - (with_func ? 0 : 8));
		CK(cuGraphExecDestroy(xc));
		CK(cuGraphDestroy(gc));
	}
	CK(cuGraphExecDestroy(xg));
	CK(cuGraphDestroy(gg));
	CK(cuLibraryUnload(slib));
	/* Stream memory ops on a green stream into host-mapped memory. */
	uint64_t *counter;
	CUdeviceptr dcounter;
	CK(cuMemHostAlloc((void **)&counter, 8, CU_MEMHOSTALLOC_DEVICEMAP));
	*counter = 0;
	CK(cuMemHostGetDevicePointer(&dcounter, counter, 0));
	CK(cuStreamWriteValue64(sa, dcounter, 41, 0));
	CK(cuStreamWriteValue64(sa, dcounter, 42, 0));
	CK(cuStreamSynchronize(sa));
	CHECK(__atomic_load_n(counter, __ATOMIC_ACQUIRE) == 42);
	/* Destroying a green context detaches its streams. */
	CK(cuGreenCtxDestroy(ga));
	CK_IS(cuStreamSynchronize(sa), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CK_IS(cuStreamDestroy(sa), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CK_IS(cuGreenCtxStreamCreate(&sa, ga, CU_STREAM_NON_BLOCKING, 0),
	      CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CK_IS(cuGreenCtxDestroy(ga), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CK(cuStreamDestroy(sb));
	CK(cuGreenCtxDestroy(gb));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(cap));
	CK(cuEventDestroy(e));
	CK(cuMemFreeHost(counter));
	CK(cuMemFree(smids));
	CK(cuMemFree(nsmv));
	CK(cuMemFree(f));
	CK(cuMemFree(f2));
	CK(cuMemFree(r));
}

/* cuStreamWaitValue32 holds a stream until the host writes the value. */
static void t_memops(void)
{
	uint32_t *flag;
	CUdeviceptr dflag;
	CK(cuMemHostAlloc((void **)&flag, 64, CU_MEMHOSTALLOC_DEVICEMAP));
	memset(flag, 0, 64);
	CK(cuMemHostGetDevicePointer(&dflag, flag, 0));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr r = dalloc(4);
	CK(cuStreamWaitValue32(s, dflag, 5, CU_STREAM_WAIT_VALUE_GEQ));
	CK(cuMemsetD32Async(r, 7, 1, s));
	sleep_ms(20);
	CK_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	__atomic_store_n(flag, 6, __ATOMIC_RELEASE);
	CK(cuStreamSynchronize(s));
	CHECK(read_u32(r) == 7);
	CK_IS(cuStreamWaitValue32(s, dflag + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);
	uint64_t local;
	CK_IS(cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)&local, 1, 0),
	      CUDA_ERROR_INVALID_VALUE);
	CUstreamBatchMemOpParams ops[2];
	memset(ops, 0, sizeof(ops));
	ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	ops[0].writeValue.address = dflag + 8;
	ops[0].writeValue.value = 3;
	ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	ops[1].waitValue.address = dflag + 8;
	ops[1].waitValue.value = 3;
	ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
	CK(cuStreamBatchMemOp(s, 2, ops, 0));
	CK(cuStreamSynchronize(s));
	CHECK(__atomic_load_n(&flag[2], __ATOMIC_ACQUIRE) == 3);
	CK(cuStreamDestroy(s));
	CK(cuMemFreeHost(flag));
	CK(cuMemFree(r));
}

/* A faulting kernel leaves a sticky error on the whole device (measured on the
 * H200: the primary context reports it too). Runs last. */
static void t_sticky(void)
{
	CUcontext bad;
	CK(cuCtxCreate(&bad, NULL, 0, dev));
	CUmodule m;
	CUfunction ff, fa;
	CK(cuModuleLoadData(&m, "image"));
	CK(cuModuleGetFunction(&ff, m, "fault"));
	CK(cuModuleGetFunction(&fa, m, "add"));
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	CUdeviceptr p;
	CK(cuMemAlloc(&p, 4));
	CK(cuMemsetD32(p, 0, 1));
	CUevent before;
	CK(cuEventCreate(&before, 0));
	CK(cuEventRecord(before, s));
	CK(cuLaunchKernel(ff, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	uint32_t n = 1, v = 1;
	void *a[] = {&p, &n, &v};
	CUresult r =
	    cuLaunchKernel(fa, 1, 1, 1, 1, 1, 1, 0, s, a, NULL); /* may be refused already */
	CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuEventQuery(before), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuLaunchKernel(fa, 1, 1, 1, 1, 1, 1, 0, s, a, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
	CUdeviceptr q;
	CK_IS(cuMemAlloc(&q, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
	CUstream s2;
	CK_IS(cuStreamCreate(&s2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK(cuCtxPopCurrent(NULL));
	CK_IS(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS); /* the primary context too */
	CK_IS(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, a, NULL),
	      CUDA_ERROR_ILLEGAL_ADDRESS);
	CK(cuCtxDestroy(bad));
	CK_IS(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK(cuEventDestroy(before));
	CK(cuModuleUnload(m));
}

/* Stream destroy returns at once, its pending work still completes. */
static void t_destroy_pending(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr f = dalloc(4);
	slow_set(s, f, 5, 30);
	uint64_t t0 = now_ns();
	CK(cuStreamDestroy(s));
	CHECK(now_ns() - t0 < 25000000ull);
	CK(cuCtxSynchronize());
	CHECK(read_u32(f) == 5);
	/* Created and destroyed streams are reaped. */
	for (int i = 0; i < 20; i++) {
		CUstream t;
		CK(cuStreamCreate(&t, 0));
		add(t, f, 0, 0);
		CK(cuStreamDestroy(t));
	}
	CK(cuCtxSynchronize());
	/* Workers exit asynchronously; stream creation reaps the exited ones. */
	int live = 1 << 30;
	for (int i = 0; i < 100 && live >= 15; i++) {
		CUstream t;
		CK(cuStreamCreate(&t, 0));
		CK(cuStreamDestroy(t));
		live = fakecuda_live_workers();
		if (live >= 15)
			sleep_ms(10);
	}
	CHECK(live < 15);
	CK(cuMemFree(f));
}

/* Several host threads submitting concurrently, plus cross-thread event waits. */
struct mt_arg {
	int id;
	CUdeviceptr buf;
	CUevent ev;
	int bad;
};

static void *mt_thread(void *p)
{
	struct mt_arg *a = p;
	CUstream s;
	a->bad |= cuCtxSetCurrent(pctx) != 0;
	a->bad |= cuStreamCreate(&s, a->id % 2 ? CU_STREAM_NON_BLOCKING : 0) != 0;
	uint32_t expect = 1;
	a->bad |= cuMemsetD32Async(a->buf, 1, 64, s) != 0;
	for (uint32_t k = 0; k < 30; k++) {
		uint32_t m = 2 + k % 2, v = (uint32_t)a->id + k, n = 64;
		void *args[] = {&a->buf, &n, &m, &v};
		a->bad |= cuLaunchKernel(f_muladd, 1, 1, 1, 64, 1, 1, 0, s, args, NULL) != 0;
		expect = expect * m + v;
		if (k == 15)
			a->bad |= cuEventRecord(a->ev, s) != 0;
	}
	uint32_t h[64];
	a->bad |= cuMemcpyDtoHAsync(h, a->buf, sizeof(h), s) != 0;
	for (int i = 0; i < 64; i++)
		a->bad |= h[i] != expect;
	a->bad |= cuStreamDestroy(s) != 0;
	return NULL;
}

static void t_threads(void)
{
	enum { NT = 4 };
	pthread_t th[NT];
	struct mt_arg a[NT];
	for (int i = 0; i < NT; i++) {
		a[i] = (struct mt_arg){i, dalloc(64 * 4), NULL, 0};
		CK(cuEventCreate(&a[i].ev, 0));
		pthread_create(&th[i], NULL, mt_thread, &a[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		CHECK(!a[i].bad);
		CK(cuEventSynchronize(a[i].ev));
		CK(cuEventDestroy(a[i].ev));
		CK(cuMemFree(a[i].buf));
	}
}

static void t_counters(void)
{
	uint64_t c = fakecuda_call_count_base("cuLaunchKernel");
	CUdeviceptr p = dalloc(4);
	add(NULL, p, 1, 1);
	CHECK(fakecuda_call_count_base("cuLaunchKernel") == c + 1);
	CHECK(fakecuda_call_count("cuLaunchKernel") >= 1);
	CHECK(fakecuda_call_count("cuMemAlloc_v2") >= 1);
	CHECK(fakecuda_call_count_base("cuMemAlloc") == fakecuda_call_count("cuMemAlloc_v2"));
	CHECK(fakecuda_call_count("cuNoSuchFunction") == 0);
	CK(cuMemFree(p));
}

struct test {
	const char *name;
	void (*fn)(void);
};

static const struct test tests[] = {
    {"device", t_device},	  {"procaddr", t_procaddr},
    {"streams", t_streams},	  {"legacy", t_legacy},
    {"per_thread", t_per_thread}, {"events", t_events},
    {"hostfn", t_hostfn},	  {"memory", t_memory},
    {"params", t_params},	  {"coop", t_coop},
    {"capture", t_capture},	  {"green", t_green},
    {"memops", t_memops},	  {"destroy_pending", t_destroy_pending},
    {"threads", t_threads},	  {"counters", t_counters},
    {"sticky", t_sticky}, /* last: the device is dead after it */
};

int main(int argc, char **argv)
{
	/* A lost dependency can deadlock: never hang the test run. */
	alarm(120);
	register_kernels();
	CUresult r = cuInit(0);
	if (r) {
		fprintf(stderr, "FAIL: cuInit: %s\n", ename(r));
		return 1;
	}
	if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&pctx, dev) || cuCtxSetCurrent(pctx)) {
		fprintf(stderr, "FAIL: no primary context\n");
		return 1;
	}
	cur_test = "setup";
	CK(cuModuleLoad(&mod, "kernels.cubin"));
	CK(cuModuleGetFunction(&f_add, mod, "add"));
	CK(cuModuleGetFunction(&f_muladd, mod, "muladd"));
	CK(cuModuleGetFunction(&f_append, mod, "append"));
	CK(cuModuleGetFunction(&f_slow, mod, "slow_set"));
	CK(cuModuleGetFunction(&f_check, mod, "check_eq"));
	CK(cuModuleGetFunction(&f_rdv, mod, "rendezvous"));
	CK(cuModuleGetFunction(&f_wait, mod, "wait_flag"));
	CK(cuModuleGetFunction(&f_smid, mod, "smid"));
	CK(cuModuleGetFunction(&f_fault, mod, "fault"));
	CK(cuModuleGetFunction(&f_coop, mod, "coop"));
	CK(cuModuleGetFunction(&f_six, mod, "six"));
	CUfunction none;
	CK_IS(cuModuleGetFunction(&none, mod, "missing"), CUDA_ERROR_NOT_FOUND);
	if (failures)
		return 1;
	printf("fakecuda selftest: jitter %s us, seed %s\n",
	       getenv("FAKECUDA_JITTER_US") ? getenv("FAKECUDA_JITTER_US") : "0",
	       getenv("FAKECUDA_SEED") ? getenv("FAKECUDA_SEED") : "1");
	int ran = 0;
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int want = argc < 2;
		for (int j = 1; j < argc; j++)
			want |= strcmp(argv[j], tests[i].name) == 0;
		/* procaddr provides the per-thread entry points per_thread uses. */
		if (!want && strcmp(tests[i].name, "procaddr") != 0)
			continue;
		cur_test = tests[i].name;
		int before = failures;
		uint64_t t0 = now_ns();
		tests[i].fn();
		printf("%-4s %-16s %6.1f ms\n", failures == before ? "ok" : "FAIL", tests[i].name,
		       (double)(now_ns() - t0) / 1e6);
		ran++;
	}
	cur_test = "teardown";
	CK(cuModuleUnload(mod));
	r = cuCtxSynchronize();
	CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_ILLEGAL_ADDRESS); /* after "sticky" */
	CK(cuDevicePrimaryCtxRelease(dev));
	printf("%d tests, %d failed checks\n", ran, failures);
	return failures ? 1 : 0;
}
