/* SPDX-License-Identifier: MIT */
#include "backend/cuda_driver.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ve_real_table ve__real;
struct ve_real_table ve__real_ptsz;
_Atomic int ve__real_ready_flag;
CUresult (*ve__real_elapsed_v1)(float *ms, CUevent start, CUevent end);
ve__batch_v1_fn ve__real_batch_v1, ve__real_batch_v1_ptsz;
ve__batch3d_v1_fn ve__real_batch3d_v1, ve__real_batch3d_v1_ptsz;

static const char *const real_names[VE_REAL_COUNT] = {
#define VE_REAL_NAME(n) #n,
	VE_REAL_FUNCS(VE_REAL_NAME)
#undef VE_REAL_NAME
};

#define VE_XSTR(x) VE_XSTR2(x)
#define VE_XSTR2(x) #x
const char *const ve__real_symbols[VE_REAL_COUNT] = {
#define VE_REAL_SYM(n) VE_XSTR(n),
	VE_REAL_FUNCS(VE_REAL_SYM)
#undef VE_REAL_SYM
};

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_fn;
static void *libcuda;
static CUresult (*real_getproc_fn)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc = -ENOENT;

VE_NO_SANITIZE static void find_real_dlsym(void)
{
	/* The shim exports its own dlsym, so ask the dynamic linker for glibc's by
	 * version: GLIBC_2.34 where dlsym moved into libc, GLIBC_2.2.5 before. */
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17",
					       "GLIBC_2.0"};
	for (size_t i = 0; i < VE_ARRAY_SIZE(versions) && !real_dlsym_fn; i++)
		*(void **)&real_dlsym_fn = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (!real_dlsym_fn)
		for (size_t i = 0; i < VE_ARRAY_SIZE(versions) && !real_dlsym_fn; i++)
			*(void **)&real_dlsym_fn = dlvsym(RTLD_DEFAULT, "dlsym", versions[i]);
}

VE_NO_SANITIZE void *ve__real_dlsym(void *handle, const char *name)
{
	if (!real_dlsym_fn)
		find_real_dlsym();
	return real_dlsym_fn ? real_dlsym_fn(handle, name) : NULL;
}

static void resolve(struct ve_real_table *t, const char *const *symbols)
{
	void **slots = (void **)t;
	for (int i = 0; i < VE_REAL_COUNT; i++)
		slots[i] = ve__real_dlsym(libcuda, symbols[i]);
}

static void init_once(void)
{
	ve__log_init();
	find_real_dlsym();
	const char *path = getenv("VE_LIBCUDA");
	if (!path || !*path)
		path = "libcuda.so.1";
	/* RTLD_NOLOAD first: use the copy the program already has, if any. */
	libcuda = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
	if (!libcuda)
		libcuda = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!libcuda) {
		VE_WARN("cannot load the CUDA driver (%s): %s", path, dlerror());
		return;
	}
	/* The tables first: a driver too old for Vitamin-E still answers every
	 * call it has with its own error codes, through the pass-through. */
	resolve(&ve__real, ve__real_symbols);
	resolve(&ve__real_ptsz, ve__real_ptsz_symbols);
#ifdef cuEventElapsedTime /* the header's name is a later ABI: keep the first too */
	*(void **)&ve__real_elapsed_v1 = ve__real_dlsym(libcuda, "cuEventElapsedTime");
#endif
#ifdef cuMemcpyBatchAsync
	*(void **)&ve__real_batch_v1 = ve__real_dlsym(libcuda, "cuMemcpyBatchAsync");
	*(void **)&ve__real_batch_v1_ptsz = ve__real_dlsym(libcuda, "cuMemcpyBatchAsync_ptsz");
#endif
#ifdef cuMemcpy3DBatchAsync
	*(void **)&ve__real_batch3d_v1 = ve__real_dlsym(libcuda, "cuMemcpy3DBatchAsync");
	*(void **)&ve__real_batch3d_v1_ptsz = ve__real_dlsym(libcuda, "cuMemcpy3DBatchAsync_ptsz");
#endif
	/* A call with no per-thread form has the same symbol in both tables. */
	*(void **)&real_getproc_fn = ve__real_dlsym(libcuda, "cuGetProcAddress_v2");
	if (!real_getproc_fn) {
		VE_WARN("the CUDA driver %s has no cuGetProcAddress_v2 (driver too old)", path);
		return;
	}
	init_rc = 0;
}

CUresult ve__real_missing(int id)
{
	/* No driver: what a program without the driver would learn from cuInit.
	 * The load failure was logged once already. */
	if (!libcuda)
		return CUDA_ERROR_NOT_INITIALIZED;
	static _Atomic int warned;
	if (id >= 0 && id < VE_REAL_COUNT && !atomic_exchange(&warned, 1))
		VE_WARN("the CUDA driver has no %s: calls of entry points it lacks return "
			"CUDA_ERROR_NOT_FOUND",
			ve__real_symbols[id]);
	return CUDA_ERROR_NOT_FOUND;
}

int ve__real_init(void)
{
	pthread_once(&once, init_once);
	/* Pairs with the acquire load in ve__real_ready(). */
	atomic_store_explicit(&ve__real_ready_flag, 1, memory_order_release);
	return init_rc;
}

bool ve__real_ok(void)
{
	return ve__real_init() == 0;
}

void *ve__real_libcuda(void)
{
	ve__real_init();
	return libcuda;
}

CUresult ve__real_getproc(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status)
{
	if (ve__real_init() || !real_getproc_fn)
		return CUDA_ERROR_NOT_INITIALIZED;
	return real_getproc_fn(symbol, pfn, cuda_version, flags, status);
}

const char *ve__real_name(int id)
{
	return id >= 0 && id < VE_REAL_COUNT ? real_names[id] : NULL;
}

int ve__real_find(const char *name)
{
	for (int i = 0; i < VE_REAL_COUNT; i++)
		if (strcmp(real_names[i], name) == 0)
			return i;
	return -1;
}
