/* SPDX-License-Identifier: MIT */
/*
 * Interposition: the legacy entry points (hooks_body.h), plus how programs
 * find them. libcudart (and so PyTorch, cuBLAS, Triton) never calls driver
 * symbols by name: it dlsym()s cuGetProcAddress_v2 from libcuda and asks it
 * for every entry point. So the shim overrides dlsym (for the cu* names it
 * hooks and for cuGetProcAddress itself) and wraps what cuGetProcAddress
 * returns; programs linked against libcuda directly bind to the exported
 * hooks through LD_PRELOAD. Everything not hooked passes through untouched.
 */
#define VE_PTSZ 0
#include "shim/hooks_body.h"

#include <dlfcn.h>

/* Older ABIs still hooked (end of this file): the driver's entry point, the
 * literal name it is exported under, and the hook. */
struct old_abi {
	void *const *real;
	const char *name;
	void *hook;
};
static const struct old_abi *old_abis(void);

/* A hook replaces the driver's pointer only if the driver gave the very
 * version the hook was written for (our table's pointer, or an older ABI we
 * have a hook for); any other version passes through untouched. */
static void *hook_for(const char *symbol, void *real, bool ptsz)
{
	(void)symbol;
	if (!real)
		return NULL;
	for (const struct old_abi *o = old_abis(); o->name; o++)
		if (*o->real == real)
			return o->hook;
	/* Match by pointer, not by name: the hook whose real counterpart is the
	 * very function the driver returned has the right prototype, whatever
	 * version or variant was asked for (cuCtxSynchronize at 13.0 is the
	 * _v2 ABI, for instance). No match: an ABI we have no hook for. */
	const struct ve_hook *tabs[2] = {ptsz ? ve__hooks_ptsz : ve__hooks_legacy,
					 ptsz ? ve__hooks_legacy : ve__hooks_ptsz};
	const void *const *rt[2] = {
		(const void *const *)(const void *)(ptsz ? &ve__real_ptsz : &ve__real),
		(const void *const *)(const void *)(ptsz ? &ve__real : &ve__real_ptsz)};
	for (int k = 0; k < 2; k++)
		for (const struct ve_hook *h = tabs[k]; h->fn; h++)
			if (rt[k][h->id] == real)
				return h->fn;
	return NULL;
}

static bool hooks_enabled(void)
{
	/* Only the configuration decides here: the runtime itself starts at the
	 * first intercepted call, after the app's cuInit (libcudart looks up
	 * its entry points before it initializes the driver). */
	return ve__shim_hooking();
}

static CUresult getproc_common(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			       CUdriverProcAddressQueryResult *st);

CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *st)
{
	return getproc_common(symbol, pfn, ver, flags, st);
}

/* The pre-12.5 form, still exported by the driver as "cuGetProcAddress". */
CUresult ve__cuGetProcAddress_v1(const char *symbol, void **pfn, int ver, cuuint64_t flags);
CUresult ve__cuGetProcAddress_v1(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	return getproc_common(symbol, pfn, ver, flags, NULL);
}

static CUresult getproc_common(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			       CUdriverProcAddressQueryResult *st)
{
	CUdriverProcAddressQueryResult local;
	CUresult r = ve__real_getproc(symbol, pfn, ver, flags, st ? st : &local);
	if (r != CUDA_SUCCESS || !pfn || !*pfn || !symbol)
		return r;
	if (strcmp(symbol, "cuGetProcAddress") == 0) {
		/* The runtime asks for the lookup itself; keep it ours. */
		*pfn = ver >= 12000 ? (void *)&cuGetProcAddress : (void *)&ve__cuGetProcAddress_v1;
		return r;
	}
	if (!hooks_enabled())
		return r;
	void *h = hook_for(symbol, *pfn, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
	if (h)
		*pfn = h;
	else if (ve__real_find(symbol) >= 0)
		VE_DEBUG("cuGetProcAddress(%s, version %d): driver returned another ABI version; "
			 "passing it through",
			 symbol, ver);
	return r;
}

/* True if 'addr' lies in the driver library or in libve.so itself: their own
 * lookups must get the real symbols (a driver may resolve its entry points
 * through dlsym, and must never be handed a hook that calls back into it). */
static bool internal_caller(const void *addr)
{
	static const void *self_base;
	Dl_info info;
	if (!self_base && dladdr((const void *)&internal_caller, &info))
		self_base = info.dli_fbase;
	if (!dladdr(addr, &info) || !info.dli_fname)
		return false;
	if (info.dli_fbase == self_base)
		return true;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (strncmp(base, "libcuda.so", 10) == 0)
		return true;
	const char *env = getenv("VE_LIBCUDA");
	return env && *env && strcmp(info.dli_fname, env) == 0;
}

/* dlsym override: cu* names the shim hooks resolve to the hooks; everything
 * else, and every lookup made by the driver itself, goes to glibc's dlsym.
 * Never initializes anything: the driver may call it during our own init. */
VE_NO_SANITIZE void *dlsym(void *handle, const char *symbol)
{
	void *real = ve__real_dlsym(handle, symbol);
	if (!real || symbol[0] != 'c' || symbol[1] != 'u')
		return real;
	if (!hooks_enabled() || internal_caller(__builtin_return_address(0)))
		return real;
	if (strcmp(symbol, "cuGetProcAddress_v2") == 0)
		return (void *)&cuGetProcAddress;
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		return (void *)&ve__cuGetProcAddress_v1;
	for (const struct old_abi *o = old_abis(); o->name; o++)
		if (strcmp(symbol, o->name) == 0)
			return o->hook; /* the literal name: the older ABI */
	const struct ve_hook *tabs[2] = {ve__hooks_legacy, ve__hooks_ptsz};
	for (int k = 0; k < 2; k++)
		for (const struct ve_hook *h = tabs[k]; h->fn; h++)
			if (strcmp(h->export_name, symbol) == 0)
				return h->fn;
	return real;
}

/* The pre-12.8 ABI of cuEventElapsedTime. A runtime built for CUDA 12.0-12.7
 * (PyTorch's cu121 to cu126 wheels, on any driver) asks cuGetProcAddress for
 * "cuEventElapsedTime" at its own version and gets this entry point, which
 * cuda.h 12.8+ no longer names: unhooked, it read the real events before
 * their logical records reached them (the previous record's time instead of
 * CUDA_ERROR_NOT_READY). Programs linked against libcuda with those headers
 * call it by this name too. */
#ifdef cuEventElapsedTime
#undef cuEventElapsedTime
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b);
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	ve__real_ready();
	return elapsed_time(ms, a, b, ve__real_elapsed_v1);
}
#define ELAPSED_V1                                                                                 \
	{(void *const *)&ve__real_elapsed_v1, "cuEventElapsedTime", (void *)&cuEventElapsedTime},
#else
#define ELAPSED_V1 /* the header's cuEventElapsedTime is the first ABI: hooked as such */
#endif

/* The CUDA 12.8-12.9 ABIs of the batched copies (PyTorch's cu128 and cu129
 * wheels): unhooked, they ran at once, before the stream's logical work (a
 * copy read its source before the kernel writing it had run). The ordered
 * pass-through, as their _v2 forms. */
static CUresult batch_v1(ve__batch_v1_fn real, bool ptsz, CUdeviceptr *dsts, CUdeviceptr *srcs,
			 size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrIdxs,
			 size_t numAttrs, size_t *failIdx, CUstream s)
{
	ve__real_ready();
	if (!real)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct ve_target t;
	ve__resolve_stream(s, ptsz, &t);
	if (!t.virt)
		return real(dsts, srcs, sizes, count, attrs, attrIdxs, numAttrs, failIdx, s);
	ve__notice_once(VE_NOTE_BATCH, "batched copies pass through in order");
	BARRIER_CALL(&t, real(dsts, srcs, sizes, count, attrs, attrIdxs, numAttrs, failIdx, s));
}

static CUresult batch3d_v1(ve__batch3d_v1_fn real, bool ptsz, size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
			   size_t *failIdx, unsigned long long flags, CUstream s)
{
	ve__real_ready();
	if (!real)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct ve_target t;
	ve__resolve_stream(s, ptsz, &t);
	if (!t.virt)
		return real(n, ops, failIdx, flags, s);
	BARRIER_CALL(&t, real(n, ops, failIdx, flags, s));
}

#ifdef cuMemcpyBatchAsync
#undef cuMemcpyBatchAsync
#define BATCH_V1_PARAMS                                                                            \
	CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                        \
	    CUmemcpyAttributes *attrs, size_t *attrIdxs, size_t numAttrs, size_t *failIdx,         \
	    CUstream s
#define BATCH_V1_ARGS dsts, srcs, sizes, count, attrs, attrIdxs, numAttrs, failIdx, s
CUresult CUDAAPI cuMemcpyBatchAsync(BATCH_V1_PARAMS);
CUresult CUDAAPI cuMemcpyBatchAsync(BATCH_V1_PARAMS)
{
	return batch_v1(ve__real_batch_v1, false, BATCH_V1_ARGS);
}
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(BATCH_V1_PARAMS);
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(BATCH_V1_PARAMS)
{
	return batch_v1(ve__real_batch_v1_ptsz, true, BATCH_V1_ARGS);
}
#define BATCH_V1                                                                                   \
	{(void *const *)&ve__real_batch_v1, "cuMemcpyBatchAsync", (void *)&cuMemcpyBatchAsync},    \
	    {(void *const *)&ve__real_batch_v1_ptsz, "cuMemcpyBatchAsync_ptsz",                    \
	     (void *)&cuMemcpyBatchAsync_ptsz},
#else
#define BATCH_V1
#endif

#ifdef cuMemcpy3DBatchAsync
#undef cuMemcpy3DBatchAsync
#define BATCH3D_V1_PARAMS                                                                          \
	size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx, unsigned long long flags, CUstream s
CUresult CUDAAPI cuMemcpy3DBatchAsync(BATCH3D_V1_PARAMS);
CUresult CUDAAPI cuMemcpy3DBatchAsync(BATCH3D_V1_PARAMS)
{
	return batch3d_v1(ve__real_batch3d_v1, false, n, ops, failIdx, flags, s);
}
CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(BATCH3D_V1_PARAMS);
CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(BATCH3D_V1_PARAMS)
{
	return batch3d_v1(ve__real_batch3d_v1_ptsz, true, n, ops, failIdx, flags, s);
}
#define BATCH3D_V1                                                                                 \
	{(void *const *)&ve__real_batch3d_v1, "cuMemcpy3DBatchAsync",                              \
	 (void *)&cuMemcpy3DBatchAsync},                                                           \
	    {(void *const *)&ve__real_batch3d_v1_ptsz, "cuMemcpy3DBatchAsync_ptsz",                \
	     (void *)&cuMemcpy3DBatchAsync_ptsz},
#else
#define BATCH3D_V1
#endif

static const struct old_abi *old_abis(void)
{
	static const struct old_abi tab[] = {ELAPSED_V1 BATCH_V1 BATCH3D_V1{NULL, NULL, NULL}};
	return tab;
}
