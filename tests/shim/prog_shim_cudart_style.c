/* SPDX-License-Identifier: MIT */
/*
 * Finds the driver the way libcudart does (docs/architecture.md, "GPU
 * facts the code relies on"): it never calls a cu* symbol directly. It dlopen()s
 * "libcuda.so.1", dlsym()s "cuGetProcAddress_v2" (and the pre-12.5
 * "cuGetProcAddress"), then asks it for every entry point it uses, with
 * cudaVersion 13000 and the legacy or per-thread-default-stream flag, and
 * runs a small multi-stream workload through those pointers. The fake's test
 * API is looked up with dlsym too.
 *
 * Under Vitamin-E every launch must end up on a green context (the shim
 * overrides dlsym and wraps what cuGetProcAddress returns); natively none
 * does. VETEST_EXPECT_GREEN=1 says which is expected (see prog_shim.h).
 * Prints "launch-log: N launches, G green, ..." like the other programs.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fakecuda/fakecuda.h"

static int failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* Entry points, typed from cuda.h's prototypes. */
static __typeof__(&cuGetProcAddress) getproc;
static CUresult (*getproc_v1)(const char *, void **, int, cuuint64_t);
static struct {
	__typeof__(&cuGetErrorName) GetErrorName;
	__typeof__(&cuInit) Init;
	__typeof__(&cuDeviceGet) DeviceGet;
	__typeof__(&cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain;
	__typeof__(&cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease;
	__typeof__(&cuCtxSetCurrent) CtxSetCurrent;
	__typeof__(&cuCtxSynchronize_v2) CtxSynchronize; /* 13.0 resolves the base name to _v2 */
	__typeof__(&cuModuleLoadData) ModuleLoadData;
	__typeof__(&cuModuleGetFunction) ModuleGetFunction;
	__typeof__(&cuMemAlloc) MemAlloc;
	__typeof__(&cuMemFree) MemFree;
	__typeof__(&cuMemAllocHost) MemAllocHost;
	__typeof__(&cuMemFreeHost) MemFreeHost;
	__typeof__(&cuMemcpyHtoD) MemcpyHtoD;
	__typeof__(&cuMemcpyDtoH) MemcpyDtoH;
	__typeof__(&cuMemcpyHtoDAsync) MemcpyHtoDAsync;
	__typeof__(&cuMemcpyDtoHAsync) MemcpyDtoHAsync;
	__typeof__(&cuMemsetD32Async) MemsetD32Async;
	__typeof__(&cuStreamCreate) StreamCreate;
	__typeof__(&cuStreamDestroy) StreamDestroy;
	__typeof__(&cuStreamSynchronize) StreamSynchronize;
	__typeof__(&cuStreamWaitEvent) StreamWaitEvent;
	__typeof__(&cuEventCreate) EventCreate;
	__typeof__(&cuEventRecord) EventRecord;
	__typeof__(&cuEventSynchronize) EventSynchronize;
	__typeof__(&cuEventElapsedTime) EventElapsedTime;
	__typeof__(&cuEventDestroy) EventDestroy;
	__typeof__(&cuLaunchKernel) LaunchKernel;
	__typeof__(&cuLaunchKernelEx) LaunchKernelEx;
	__typeof__(&cuLaunchHostFunc) LaunchHostFunc;
	__typeof__(&cuGetProcAddress) GetProcAddress;
} cu;
/* Per-thread-default-stream variants. */
static struct {
	__typeof__(&cuLaunchKernel) LaunchKernel;
	__typeof__(&cuStreamSynchronize) StreamSynchronize;
	__typeof__(&cuMemsetD32Async) MemsetD32Async;
	__typeof__(&cuMemcpyDtoH) MemcpyDtoH;
	__typeof__(&cuEventRecord) EventRecord;
} pt;
/* Through the pre-12.5 lookup, as an older runtime would. */
static __typeof__(&cuLaunchKernel) old_launch;
static __typeof__(&cuStreamSynchronize) old_sync;

static const char *ename(CUresult r)
{
	const char *s = NULL;
	if (!cu.GetErrorName || cu.GetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "?";
	return s;
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult ck_r_ = (call);                                                           \
		if (ck_r_ != CUDA_SUCCESS) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s = %s\n", __FILE__, __LINE__, #call,        \
				ename(ck_r_));                                                     \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static void *lookup(const char *name, cuuint64_t flags)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r = getproc(name, &p, 13000, flags, &st);
	if (r != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
		fprintf(stderr, "FAIL: cuGetProcAddress_v2(%s, 13000, %llu): %d, status %d\n", name,
			(unsigned long long)flags, (int)r, (int)st);
		failures++;
	}
	return p;
}

#define GET(field, name) (*(void **)&cu.field = lookup(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM))
#define GETPT(field, name)                                                                         \
	(*(void **)&pt.field = lookup(name, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))

/* The fake's test API. */
static __typeof__(&fakecuda_register_kernel) fc_register;
static __typeof__(&fakecuda_launch_log) fc_log;

static int k_muladd(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = *(uint32_t **)params[0], n = *(uint32_t *)params[1];
	uint32_t m = *(uint32_t *)params[2], a = *(uint32_t *)params[3];
	for (uint32_t i = 0; i < n; i++)
		p[i] = p[i] * m + a;
	return 0;
}

static CUcontext pctx;
static CUfunction f_muladd;

static void muladd(__typeof__(&cuLaunchKernel) launch, CUstream s, CUdeviceptr p, uint32_t n,
		   uint32_t m, uint32_t a)
{
	void *args[] = {&p, &n, &m, &a};
	CK(launch(f_muladd, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static _Atomic int host_ran;
static void CUDA_CB host_fn(void *arg)
{
	atomic_fetch_add(&host_ran, 1);
}

/* A second thread works on its per-thread default stream through the _ptsz pointers. */
static void *ptds_thread(void *arg)
{
	CUdeviceptr b = *(CUdeviceptr *)arg;
	CK(cu.CtxSetCurrent(pctx));
	CK(pt.MemsetD32Async(b, 2, 16, NULL));
	for (int k = 0; k < 20; k++)
		muladd(pt.LaunchKernel, NULL, b, 16, 3, (uint32_t)k);
	CK(pt.StreamSynchronize(NULL));
	uint32_t h[16];
	CK(pt.MemcpyDtoH(h, b, sizeof(h)));
	uint32_t want = 2;
	for (int k = 0; k < 20; k++)
		want = want * 3 + (uint32_t)k;
	CHECK(h[0] == want && h[15] == want);
	return NULL;
}

int main(void)
{
	alarm(60);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "FAIL: dlopen(libcuda.so.1): %s\n", dlerror());
		return 1;
	}
	*(void **)&getproc = dlsym(h, "cuGetProcAddress_v2");
	*(void **)&getproc_v1 = dlsym(h, "cuGetProcAddress");
	*(void **)&fc_register = dlsym(h, "fakecuda_register_kernel");
	*(void **)&fc_log = dlsym(h, "fakecuda_launch_log");
	if (!getproc || !getproc_v1 || !fc_register || !fc_log) {
		fprintf(stderr, "FAIL: dlsym on libcuda.so.1\n");
		return 1;
	}
	Dl_info di;
	if (dladdr((void *)getproc, &di) && di.dli_fname)
		printf("cuGetProcAddress_v2 from %s\n", di.dli_fname);
	static const size_t sz[] = {8, 4, 4, 4};
	if (fc_register("muladd", k_muladd, 4, sz)) {
		fprintf(stderr, "FAIL: kernel registration\n");
		return 1;
	}
	GET(GetErrorName, "cuGetErrorName");
	GET(Init, "cuInit");
	GET(DeviceGet, "cuDeviceGet");
	GET(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	GET(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
	GET(CtxSetCurrent, "cuCtxSetCurrent");
	GET(CtxSynchronize, "cuCtxSynchronize");
	GET(ModuleLoadData, "cuModuleLoadData");
	GET(ModuleGetFunction, "cuModuleGetFunction");
	GET(MemAlloc, "cuMemAlloc");
	GET(MemFree, "cuMemFree");
	GET(MemAllocHost, "cuMemAllocHost");
	GET(MemFreeHost, "cuMemFreeHost");
	GET(MemcpyHtoD, "cuMemcpyHtoD");
	GET(MemcpyDtoH, "cuMemcpyDtoH");
	GET(MemcpyHtoDAsync, "cuMemcpyHtoDAsync");
	GET(MemcpyDtoHAsync, "cuMemcpyDtoHAsync");
	GET(MemsetD32Async, "cuMemsetD32Async");
	GET(StreamCreate, "cuStreamCreate");
	GET(StreamDestroy, "cuStreamDestroy");
	GET(StreamSynchronize, "cuStreamSynchronize");
	GET(StreamWaitEvent, "cuStreamWaitEvent");
	GET(EventCreate, "cuEventCreate");
	GET(EventRecord, "cuEventRecord");
	GET(EventSynchronize, "cuEventSynchronize");
	GET(EventElapsedTime, "cuEventElapsedTime");
	GET(EventDestroy, "cuEventDestroy");
	GET(LaunchKernel, "cuLaunchKernel");
	GET(LaunchKernelEx, "cuLaunchKernelEx");
	GET(LaunchHostFunc, "cuLaunchHostFunc");
	GET(GetProcAddress, "cuGetProcAddress");
	GETPT(LaunchKernel, "cuLaunchKernel");
	GETPT(StreamSynchronize, "cuStreamSynchronize");
	GETPT(MemsetD32Async, "cuMemsetD32Async");
	GETPT(MemcpyDtoH, "cuMemcpyDtoH");
	GETPT(EventRecord, "cuEventRecord");
	if (failures)
		return 1;
	CHECK((void *)pt.LaunchKernel != (void *)cu.LaunchKernel);
	/* The lookup hands out a working lookup. */
	void *p2 = NULL;
	CUdriverProcAddressQueryResult st;
	CK(cu.GetProcAddress("cuStreamQuery", &p2, 13000, 0, &st));
	CHECK(p2 != NULL);
	/* The old lookup, as a runtime built before 12.5 uses it. */
	CK(getproc_v1("cuLaunchKernel", (void **)&old_launch, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
	CK(getproc_v1("cuStreamSynchronize", (void **)&old_sync, 12000,
		      CU_GET_PROC_ADDRESS_DEFAULT));
	if (!old_launch || !old_sync) {
		fprintf(stderr, "FAIL: the pre-12.5 cuGetProcAddress found nothing\n");
		return 1;
	}

	CUdevice dev;
	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, 0));
	CK(cu.DevicePrimaryCtxRetain(&pctx, dev));
	CK(cu.CtxSetCurrent(pctx));
	CUmodule mod;
	CK(cu.ModuleLoadData(&mod, "image"));
	CK(cu.ModuleGetFunction(&f_muladd, mod, "muladd"));
	if (failures)
		return 1;

	/* Three streams of every kind joined by events, copies in and out. */
	enum { N = 64, K = 30 };
	CUstream sb, snb;
	CK(cu.StreamCreate(&sb, CU_STREAM_DEFAULT));
	CK(cu.StreamCreate(&snb, CU_STREAM_NON_BLOCKING));
	CUdeviceptr a, b, c;
	CK(cu.MemAlloc(&a, N * 4));
	CK(cu.MemAlloc(&b, N * 4));
	CK(cu.MemAlloc(&c, 16 * 4));
	uint32_t *pin;
	CK(cu.MemAllocHost((void **)&pin, N * 4));
	for (int i = 0; i < N; i++)
		pin[i] = (uint32_t)i;
	CUevent e, t0, t1;
	CK(cu.EventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CK(cu.EventCreate(&t0, CU_EVENT_DEFAULT));
	CK(cu.EventCreate(&t1, CU_EVENT_DEFAULT));
	CK(cu.MemcpyHtoDAsync(a, pin, N * 4, snb));
	CK(cu.MemsetD32Async(b, 1, N, sb));
	CK(cu.EventRecord(t0, snb));
	uint32_t ma = 0, mb = 1; /* element 0 of a and b */
	for (int k = 0; k < K; k++) {
		muladd(cu.LaunchKernel, snb, a, N, 3, (uint32_t)k);
		ma = ma * 3 + (uint32_t)k;
		CK(cu.EventRecord(e, snb));
		CK(cu.StreamWaitEvent(sb, e, 0));
		/* b = b * 5 + 1, through cuLaunchKernelEx */
		uint32_t n = N, m = 5, add = 1;
		void *args[] = {&b, &n, &m, &add};
		CUlaunchConfig cfg = {0};
		cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
		cfg.blockDimX = 32;
		cfg.blockDimY = cfg.blockDimZ = 1;
		cfg.hStream = sb;
		CK(cu.LaunchKernelEx(&cfg, f_muladd, args, NULL));
		mb = mb * 5 + 1;
		if (k % 3 == 0) {
			muladd(old_launch, NULL, b, N, 1, 1); /* legacy stream, old lookup */
			mb += 1;
		}
		CK(cu.EventRecord(e, sb));
		CK(cu.StreamWaitEvent(snb, e, 0));
	}
	CK(cu.LaunchHostFunc(snb, host_fn, NULL));
	CK(cu.EventRecord(t1, snb));
	CK(cu.EventSynchronize(t1));
	float ms = -1;
	CK(cu.EventElapsedTime(&ms, t0, t1));
	CHECK(ms >= 0);
	CHECK(atomic_load(&host_ran) == 1);
	CK(old_sync(sb));
	uint32_t ha[N], hb[N];
	CK(cu.MemcpyDtoHAsync(ha, a, sizeof(ha), snb)); /* pageable: complete on return */
	CK(cu.MemcpyDtoH(hb, b, sizeof(hb)));
	CHECK(ha[0] == ma && hb[0] == mb && hb[N - 1] == mb);
	uint32_t m1 = 1;
	for (int k = 0; k < K; k++)
		m1 = m1 * 3 + (uint32_t)k;
	CHECK(ha[1] == m1);
	/* The per-thread default stream of another thread. */
	pthread_t th;
	pthread_create(&th, NULL, ptds_thread, &c);
	pthread_join(th, NULL);
	CK(cu.CtxSynchronize(NULL));
	CK(cu.EventDestroy(e));
	CK(cu.EventDestroy(t0));
	CK(cu.EventDestroy(t1));
	CK(cu.StreamDestroy(sb));
	CK(cu.StreamDestroy(snb));
	CK(cu.MemFree(a));
	CK(cu.MemFree(b));
	CK(cu.MemFree(c));
	CK(cu.MemFreeHost(pin));

	/* Where did the launches run? */
	static struct fakecuda_launch_record rec[FAKECUDA_LAUNCH_LOG_SIZE];
	size_t nr = fc_log(rec, FAKECUDA_LAUNCH_LOG_SIZE, 0);
	size_t green = 0;
	for (size_t i = 0; i < nr; i++)
		green += rec[i].green != NULL;
	const char *ex = getenv("VETEST_EXPECT_GREEN");
	bool want = ex && strcmp(ex, "1") == 0;
	printf("launch-log: %zu launches, %zu green, 0 foreign, 0 graph\n", nr, green);
	size_t expect_n = K * 2 + (K + 2) / 3 + 20;
	CHECK(nr == expect_n);
	if (want)
		CHECK(green == nr);
	else
		CHECK(green == 0);
	CK(cu.DevicePrimaryCtxRelease(dev));
	printf("%d failed checks\n", failures);
	return failures ? 1 : 0;
}
