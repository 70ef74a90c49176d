/* SPDX-License-Identifier: MIT */
/*
 * fakecuda kernels: the registry of host "kernels", modules and libraries
 * (any image; names resolve against the registry), function attributes and
 * parameter layout, occupancy, and kernel launches.
 *
 * Launch parameters are copied into a private buffer at call time, as the
 * driver does, laid out at the offsets cuFuncGetParamInfo reports.
 */
#include "fc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FC_DEF(sym, decl, call)                                                                    \
	CUresult CUDAAPI sym decl                                                                  \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return call;                                                                       \
	}

/* Default dynamic shared memory limit without cuFuncSetAttribute (sm_90). */
#define FC_DEFAULT_DYN_SMEM 49152
#define FC_OPTIN_SMEM	    232448
#define FC_SM_SMEM	    233472
#define FC_RESERVED_SMEM    1024

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_kentry *kernels;

struct fc_func;

struct fc_module {
	struct fc_ctx *ctx;
	pthread_mutex_t mu;
	struct fc_func *funcs;
};

struct fc_kern;

/* A CUfunction: of a module, or a CUkernel's function in one context. */
struct fc_func {
	struct fc_kentry *k;
	struct fc_module *mod;
	struct fc_kern *kern;
	struct fc_ctx *ctx;
	_Atomic int max_dyn_smem;
	int carveout;
	int nonportable_cluster;
	struct fc_func *next;
};

struct fc_library {
	pthread_mutex_t mu;
	struct fc_kern *kerns;
};

/* A CUkernel: context-independent; usable directly as a CUfunction. */
struct fc_kern {
	struct fc_kentry *k;
	struct fc_library *lib;
	_Atomic int max_dyn_smem;
	struct fc_func *funcs; /* per-context functions (cuKernelGetFunction) */
	struct fc_kern *next;
};

/* ---- registry ------------------------------------------------------------------------- */

static size_t natural_align(size_t size)
{
	size_t a = size & (~size + 1); /* lowest set bit */
	return a > 8 ? 8 : a;
}

int fakecuda_register_kernel_aligned(const char *name, fakecuda_kernel_fn fn, uint32_t nparams,
				     const size_t *param_sizes, const size_t *param_aligns)
{
	if (!name || !*name || !fn || nparams > FAKECUDA_MAX_PARAMS || (nparams && !param_sizes))
		return -EINVAL;
	struct fc_kentry *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	size_t off = 0;
	for (uint32_t i = 0; i < nparams; i++) {
		size_t sz = param_sizes[i];
		size_t al = param_aligns ? param_aligns[i] : natural_align(sz);
		/* The driver limits a launch's parameters to 32764 bytes (CUDA 12.1+). */
		if (!sz || sz > 32764 || !al || (al & (al - 1))) {
			free(k);
			return -EINVAL;
		}
		off = (off + al - 1) & ~(al - 1);
		k->offset[i] = off;
		k->size[i] = sz;
		off += sz;
	}
	k->total = off;
	k->nparams = nparams;
	k->fn = fn;
	k->name = strdup(name);
	if (!k->name) {
		free(k);
		return -ENOMEM;
	}
	pthread_mutex_lock(&reg_mu);
	for (struct fc_kentry *e = kernels; e; e = e->next)
		if (strcmp(e->name, name) == 0) {
			pthread_mutex_unlock(&reg_mu);
			free(k->name);
			free(k);
			return -EEXIST;
		}
	k->next = kernels;
	kernels = k;
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, uint32_t nparams,
			     const size_t *param_sizes)
{
	return fakecuda_register_kernel_aligned(name, fn, nparams, param_sizes, NULL);
}

static struct fc_kentry *kernel_find(const char *name)
{
	struct fc_kentry *e;
	pthread_mutex_lock(&reg_mu);
	for (e = kernels; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			break;
	pthread_mutex_unlock(&reg_mu);
	return e;
}

/* ---- launch log ------------------------------------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fakecuda_launch_record launch_log[FAKECUDA_LAUNCH_LOG_SIZE];
static uint64_t log_seq; /* last seq handed out, under log_mu */
static _Atomic uint64_t launches_done;
static uint32_t iota[FAKECUDA_MAX_SMS];
static pthread_once_t iota_once = PTHREAD_ONCE_INIT;

static void iota_init(void)
{
	for (uint32_t i = 0; i < FAKECUDA_MAX_SMS; i++)
		iota[i] = i;
}

void fakecuda__launch_log_reset(void)
{
	pthread_mutex_lock(&log_mu);
	memset(launch_log, 0, sizeof(launch_log));
	atomic_store(&launches_done, 0);
	pthread_mutex_unlock(&log_mu);
}

uint64_t fakecuda_launch_count(void)
{
	return atomic_load(&launches_done);
}

uint64_t fakecuda_launch_seq(void)
{
	pthread_mutex_lock(&log_mu);
	uint64_t s = log_seq;
	pthread_mutex_unlock(&log_mu);
	return s;
}

size_t fakecuda_launch_log(struct fakecuda_launch_record *out, size_t max, uint64_t after_seq)
{
	size_t n = 0;
	pthread_mutex_lock(&log_mu);
	uint64_t first = after_seq + 1;
	if (log_seq >= FAKECUDA_LAUNCH_LOG_SIZE && first < log_seq - FAKECUDA_LAUNCH_LOG_SIZE + 1)
		first = log_seq - FAKECUDA_LAUNCH_LOG_SIZE + 1;
	for (uint64_t s = first; s <= log_seq && n < max; s++) {
		const struct fakecuda_launch_record *r = &launch_log[s % FAKECUDA_LAUNCH_LOG_SIZE];
		if (r->seq == s) /* still running otherwise */
			out[n++] = *r;
	}
	pthread_mutex_unlock(&log_mu);
	return n;
}

void fakecuda__kernel_run(struct fc_stream *s, struct fc_cmd *cmd, int from_graph, int *fault)
{
	pthread_once(&iota_once, iota_init);
	/* A graph's kernel node runs in its own context (fc_internal.h). */
	struct fc_ctx *c = from_graph && cmd->u.k.nctx ? cmd->u.k.nctx : s->ctx;
	struct fc_green *g = c->green;
	const struct fc_kentry *k = cmd->u.k.k;
	struct fakecuda_exec e = {
	    .name = k->name,
	    .shared_mem = cmd->u.k.smem,
	    .cooperative = cmd->u.k.coop,
	    .param_buf = cmd->u.k.params,
	    .param_size = k->total,
	    .nparams = k->nparams,
	    .param_offsets = k->offset,
	    .param_sizes = k->size,
	    .nsm = g ? g->nsm : c->dev->nsm,
	    .sm_ids = g ? g->sm_ids : iota,
	    .ctx = (CUcontext)c,
	    .green = (CUgreenCtx)g,
	    .stream = s->handle,
	    .device = c->dev->ordinal,
	    .from_graph = from_graph,
	};
	memcpy(e.grid, cmd->u.k.grid, sizeof(e.grid));
	memcpy(e.block, cmd->u.k.block, sizeof(e.block));
	memcpy(e.cluster, cmd->u.k.cluster, sizeof(e.cluster));
	pthread_mutex_lock(&log_mu);
	e.seq = ++log_seq;
	pthread_mutex_unlock(&log_mu);

	/* Device code cannot call the driver: like host functions, kernels get
	 * CUDA_ERROR_NOT_PERMITTED (and so cannot deadlock on their own stream). */
	struct fc_tls *t = fakecuda__tls();
	t->in_callback = 1;
	*fault = k->fn(cmd->u.k.pptrs, &e) != 0;
	t->in_callback = 0;

	struct fakecuda_launch_record r = {
	    .seq = e.seq,
	    .name = k->name,
	    .ctx = e.ctx,
	    .green = e.green,
	    .green_id = g ? g->id : 0,
	    .stream = e.stream,
	    .device = e.device,
	    .nsm = e.nsm,
	    .stream_nsm = s->ctx->green ? s->ctx->green->nsm : s->ctx->dev->nsm,
	    .cooperative = e.cooperative,
	    .from_graph = from_graph,
	    .fault = *fault,
	};
	for (uint32_t i = 0; i < e.nsm; i++)
		r.sm_mask[e.sm_ids[i] / 64] |= 1ull << (e.sm_ids[i] % 64);
	memcpy(r.grid, e.grid, sizeof(r.grid));
	memcpy(r.block, e.block, sizeof(r.block));
	pthread_mutex_lock(&log_mu);
	launch_log[e.seq % FAKECUDA_LAUNCH_LOG_SIZE] = r;
	pthread_mutex_unlock(&log_mu);
	atomic_fetch_add(&launches_done, 1);
	if (g)
		atomic_fetch_add(&g->launches, 1);
}

/* ---- modules ---------------------------------------------------------------------------- */

static CUresult module_new(CUmodule *out, const void *image)
{
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!out || !image)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_module *m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->ctx = c;
	pthread_mutex_init(&m->mu, NULL);
	fakecuda__registry_add(m, FC_T_MODULE);
	*out = (CUmodule)m;
	return CUDA_SUCCESS;
}

FC_DEF(cuModuleLoad, (CUmodule * module, const char *fname), module_new(module, fname))
FC_DEF(cuModuleLoadData, (CUmodule * module, const void *image), module_new(module, image))
FC_DEF(cuModuleLoadDataEx,
       (CUmodule * module, const void *image, unsigned int numOptions, CUjit_option *options,
	void **optionValues),
       module_new(module, image))
FC_DEF(cuModuleLoadFatBinary, (CUmodule * module, const void *fatCubin),
       module_new(module, fatCubin))

static void func_free_list(struct fc_func *f)
{
	while (f) {
		struct fc_func *next = f->next;
		fakecuda__registry_del(f);
		free(f);
		f = next;
	}
}

static void module_free(struct fc_module *m)
{
	func_free_list(m->funcs);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hmod, FC_T_MODULE))
		return CUDA_ERROR_INVALID_HANDLE;
	fakecuda__registry_del(hmod);
	module_free((struct fc_module *)hmod);
	return CUDA_SUCCESS;
}

static uint32_t kentry_max_threads(const struct fc_kentry *k)
{
	uint32_t m = atomic_load(&k->max_threads);
	return m ? m : 1024;
}

int fakecuda_kernel_set_max_threads(const char *name, uint32_t max_threads)
{
	struct fc_kentry *k = name ? kernel_find(name) : NULL;
	if (!k)
		return -ENOENT;
	atomic_store(&k->max_threads, max_threads);
	return 0;
}

static struct fc_func *func_new(struct fc_kentry *k, struct fc_ctx *c)
{
	struct fc_func *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->k = k;
	f->ctx = c;
	f->carveout = -1;
	atomic_init(&f->max_dyn_smem, FC_DEFAULT_DYN_SMEM);
	fakecuda__registry_add(f, FC_T_FUNC);
	return f;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hmod, FC_T_MODULE))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_module *m = (struct fc_module *)hmod;
	struct fc_kentry *k = kernel_find(name);
	if (!k)
		return CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&m->mu);
	struct fc_func *f;
	for (f = m->funcs; f; f = f->next)
		if (f->k == k)
			break;
	if (!f && (f = func_new(k, m->ctx))) {
		f->mod = m;
		f->next = m->funcs;
		m->funcs = f;
	}
	pthread_mutex_unlock(&m->mu);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*hfunc = (CUfunction)f;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hfunc, FC_T_FUNC))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!hmod)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_func *f = (struct fc_func *)hfunc;
	if (!f->mod)
		return CUDA_ERROR_NOT_FOUND;
	*hmod = (CUmodule)f->mod;
	return CUDA_SUCCESS;
}

/* ---- libraries ---------------------------------------------------------------------------- */

static CUresult library_new(CUlibrary *out, const void *code)
{
	if (!out || !code)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_library *l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_init(&l->mu, NULL);
	fakecuda__registry_add(l, FC_T_LIBRARY);
	*out = (CUlibrary)l;
	return CUDA_SUCCESS;
}

FC_DEF(cuLibraryLoadData,
       (CUlibrary * library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
	unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
	unsigned int numLibraryOptions),
       library_new(library, code))
FC_DEF(cuLibraryLoadFromFile,
       (CUlibrary * library, const char *fileName, CUjit_option *jitOptions,
	void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
	void **libraryOptionValues, unsigned int numLibraryOptions),
       library_new(library, fileName))

static void library_free(struct fc_library *l)
{
	struct fc_kern *k = l->kerns;
	while (k) {
		struct fc_kern *next = k->next;
		func_free_list(k->funcs);
		fakecuda__registry_del(k);
		free(k);
		k = next;
	}
	pthread_mutex_destroy(&l->mu);
	free(l);
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	FC_ENTER();
	if (!fakecuda__registry_is(library, FC_T_LIBRARY))
		return CUDA_ERROR_INVALID_HANDLE;
	fakecuda__registry_del(library);
	library_free((struct fc_library *)library);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	FC_ENTER();
	if (!fakecuda__registry_is(library, FC_T_LIBRARY))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pKernel || !name)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_library *l = (struct fc_library *)library;
	struct fc_kentry *k = kernel_find(name);
	if (!k)
		return CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&l->mu);
	struct fc_kern *kn;
	for (kn = l->kerns; kn; kn = kn->next)
		if (kn->k == k)
			break;
	if (!kn && (kn = calloc(1, sizeof(*kn)))) {
		kn->k = k;
		kn->lib = l;
		atomic_init(&kn->max_dyn_smem, FC_DEFAULT_DYN_SMEM);
		kn->next = l->kerns;
		l->kerns = kn;
		fakecuda__registry_add(kn, FC_T_KERNEL);
	}
	pthread_mutex_unlock(&l->mu);
	if (!kn)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pKernel = (CUkernel)kn;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!fakecuda__registry_is(kernel, FC_T_KERNEL))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_kern *kn = (struct fc_kern *)kernel;
	pthread_mutex_lock(&kn->lib->mu);
	struct fc_func *f;
	for (f = kn->funcs; f; f = f->next)
		if (f->ctx == c)
			break;
	if (!f && (f = func_new(kn->k, c))) {
		f->kern = kn;
		atomic_store(&f->max_dyn_smem, atomic_load(&kn->max_dyn_smem));
		f->next = kn->funcs;
		kn->funcs = f;
	}
	pthread_mutex_unlock(&kn->lib->mu);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pFunc = (CUfunction)f;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	FC_ENTER();
	if (!fakecuda__registry_is(kernel, FC_T_KERNEL))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pLib)
		return CUDA_ERROR_INVALID_VALUE;
	*pLib = (CUlibrary)((struct fc_kern *)kernel)->lib;
	return CUDA_SUCCESS;
}

/* A CUfunction or a CUkernel used as one (the driver accepts a CUkernel cast). */
struct fc_callee {
	struct fc_kentry *k;
	_Atomic int *max_dyn_smem;
	struct fc_func *f; /* NULL for a CUkernel */
};

static CUresult callee(const void *h, struct fc_callee *out)
{
	if (fakecuda__registry_is(h, FC_T_FUNC)) {
		struct fc_func *f = (struct fc_func *)h;
		*out = (struct fc_callee){f->k, &f->max_dyn_smem, f};
		return CUDA_SUCCESS;
	}
	if (fakecuda__registry_is(h, FC_T_KERNEL)) {
		struct fc_kern *kn = (struct fc_kern *)h;
		*out = (struct fc_callee){kn->k, &kn->max_dyn_smem, NULL};
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_HANDLE;
}

/* Lazy loading (FAKECUDA_LOAD_US): the first launch or cuFuncLoad of a
 * kernel loads its code in the calling thread, once per process (green
 * contexts share the primary context's modules). */
static void load_code(struct fc_kentry *k)
{
	if (!g_fc.load_us || atomic_load(&k->loaded))
		return;
	int expected = 0;
	if (atomic_compare_exchange_strong(&k->loaded, &expected, 1))
		usleep((useconds_t)g_fc.load_us);
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	FC_ENTER();
	struct fc_callee ce;
	CUresult r = callee(function, &ce);
	if (r)
		return r;
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	*state = !g_fc.load_us || atomic_load(&ce.k->loaded) ? CU_FUNCTION_LOADING_STATE_LOADED
							      : CU_FUNCTION_LOADING_STATE_UNLOADED;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
	FC_ENTER();
	struct fc_callee ce;
	CUresult r = callee(function, &ce);
	if (r)
		return r;
	load_code(ce.k);
	return CUDA_SUCCESS;
}

static CUresult get_name(const char **name, const void *h)
{
	struct fc_callee ce;
	CUresult r = callee(h, &ce);
	if (r)
		return r;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	*name = ce.k->name;
	return CUDA_SUCCESS;
}

/* "CUDA_ERROR_INVALID_VALUE ... if paramIndex is greater than the number of
 * parameters of the function". */
static CUresult param_info(const void *h, size_t idx, size_t *off, size_t *size)
{
	struct fc_callee ce;
	CUresult r = callee(h, &ce);
	if (r)
		return r;
	if (idx >= ce.k->nparams || !off)
		return CUDA_ERROR_INVALID_VALUE;
	*off = ce.k->offset[idx];
	if (size)
		*size = ce.k->size[idx];
	return CUDA_SUCCESS;
}

FC_DEF(cuFuncGetName, (const char **name, CUfunction hfunc), get_name(name, hfunc))
FC_DEF(cuKernelGetName, (const char **name, CUkernel hfunc), get_name(name, hfunc))
FC_DEF(cuFuncGetParamInfo,
       (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize),
       param_info(func, paramIndex, paramOffset, paramSize))
FC_DEF(cuKernelGetParamInfo,
       (CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize),
       param_info(kernel, paramIndex, paramOffset, paramSize))

static CUresult func_attr(int *pi, CUfunction_attribute a, const void *h)
{
	struct fc_callee ce;
	CUresult r = callee(h, &ce);
	if (r)
		return r;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	/* clang-format off */
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = (int)kentry_max_threads(ce.k); break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
	case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		*pi = atomic_load(ce.max_dyn_smem);
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		*pi = ce.f ? ce.f->carveout : -1;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		*pi = ce.f ? ce.f->nonportable_cluster : 0;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = 0; break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* clang-format on */
	return CUDA_SUCCESS;
}

static CUresult func_set_attr(const void *h, CUfunction_attribute a, int v)
{
	struct fc_callee ce;
	CUresult r = callee(h, &ce);
	if (r)
		return r;
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		if (v < 0 || v > FC_OPTIN_SMEM)
			return CUDA_ERROR_INVALID_VALUE;
		atomic_store(ce.max_dyn_smem, v);
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		if (v < -1 || v > 100)
			return CUDA_ERROR_INVALID_VALUE;
		if (ce.f)
			ce.f->carveout = v;
		break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		if (v != 0 && v != 1)
			return CUDA_ERROR_INVALID_VALUE;
		if (ce.f)
			ce.f->nonportable_cluster = v;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

FC_DEF(cuFuncGetAttribute, (int *pi, CUfunction_attribute attrib, CUfunction hfunc),
       func_attr(pi, attrib, hfunc))
FC_DEF(cuFuncSetAttribute, (CUfunction hfunc, CUfunction_attribute attrib, int value),
       func_set_attr(hfunc, attrib, value))
FC_DEF(cuKernelGetAttribute, (int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev),
       func_attr(pi, attrib, kernel))
FC_DEF(cuKernelSetAttribute, (CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev),
       func_set_attr(kernel, attrib, val))

/* The fake has no caches: the preference is accepted and has no effect. */
static CUresult set_cache_config(const void *h, CUfunc_cache config)
{
	struct fc_callee ce;
	CUresult r = callee(h, &ce);
	if (r)
		return r;
	if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

FC_DEF(cuFuncSetCacheConfig, (CUfunction hfunc, CUfunc_cache config),
       set_cache_config(hfunc, config))

/* ---- occupancy ------------------------------------------------------------------------------ */

/* Blocks per SM: 64 warps, 32 blocks, and shared memory (233472 per SM, 1 KiB reserved per block).
 */
static int occupancy(int block, size_t smem, int max_dyn)
{
	if (block <= 0 || block > 1024 || smem > (size_t)max_dyn)
		return 0;
	int warps = (block + 31) / 32;
	int n = FC_MIN(32, 64 / warps);
	if (smem)
		n = FC_MIN(n, (int)(FC_SM_SMEM / (smem + FC_RESERVED_SMEM)));
	return n;
}

static CUresult occ_api(int *num, CUfunction func, int block, size_t smem, unsigned flags)
{
	struct fc_callee ce;
	CUresult r = callee(func, &ce);
	if (r)
		return r;
	if (!num || block <= 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
		return CUDA_ERROR_INVALID_VALUE;
	*num = occupancy(block, smem, atomic_load(ce.max_dyn_smem));
	return CUDA_SUCCESS;
}

FC_DEF(cuOccupancyMaxActiveBlocksPerMultiprocessor,
       (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize),
       occ_api(numBlocks, func, blockSize, dynamicSMemSize, 0))
FC_DEF(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
       (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags),
       occ_api(numBlocks, func, blockSize, dynamicSMemSize, flags))

/* Clusters of cs blocks (occ blocks per SM) the SMs of context c hold at
 * once: a cluster's blocks share one GPC. */
static int cluster_capacity(const struct fc_ctx *c, int occ, uint64_t cs)
{
	pthread_once(&iota_once, iota_init);
	const struct fc_green *g = c->green;
	uint32_t n = g ? g->nsm : c->dev->nsm;
	const uint32_t *ids = g ? g->sm_ids : iota;
	uint32_t per[FAKECUDA_MAX_SMS / 2 + 1];
	memset(per, 0, sizeof(per));
	for (uint32_t i = 0; i < n; i++)
		per[fakecuda__gpc_of(c->dev, ids[i])]++;
	uint64_t total = 0;
	for (uint32_t i = 0; i < FAKECUDA_MAX_SMS / 2 + 1; i++)
		total += (uint64_t)per[i] * (uint64_t)occ / cs;
	return total > 1u << 30 ? 1 << 30 : (int)total;
}

static CUresult clusters_api(int *num, CUfunction func, const CUlaunchConfig *config)
{
	struct fc_callee ce;
	CUresult r = callee(func, &ce);
	if (r)
		return r;
	if (!num || !config)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_stream *s;
	if ((r = fakecuda__stream_resolve(config->hStream, 0, &s)))
		return r;
	uint64_t cs = 0;
	for (unsigned i = 0; i < config->numAttrs; i++)
		if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
			const CUlaunchAttributeValue *v = &config->attrs[i].value;
			cs = (uint64_t)v->clusterDim.x * v->clusterDim.y * v->clusterDim.z;
		}
	unsigned lim = ce.f && ce.f->nonportable_cluster ? 16 : 8;
	if (!cs || cs > lim)
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	int occ = occupancy((int)(config->blockDimX * config->blockDimY * config->blockDimZ),
			    config->sharedMemBytes, atomic_load(ce.max_dyn_smem));
	*num = cluster_capacity(s->ctx, occ, cs);
	return CUDA_SUCCESS;
}

FC_DEF(cuOccupancyMaxActiveClusters, (int *num, CUfunction func, const CUlaunchConfig *config),
       clusters_api(num, func, config))

/* ---- launches -------------------------------------------------------------------------------- */

struct launch {
	unsigned grid[3], block[3], smem;
	int coop;
	unsigned cluster[3];
};

/* A kernel command's argument buffer for k (packed, k->total bytes) and one
 * pointer per parameter into it; 0, or -1 with nothing allocated. */
int fakecuda__kargs_alloc(const struct fc_kentry *k, void **params, void ***pptrs)
{
	*params = malloc(k->total ? k->total : 1);
	*pptrs = calloc(k->nparams ? k->nparams : 1, sizeof(void *));
	if (!*params || !*pptrs) {
		free(*params);
		free(*pptrs);
		*params = NULL;
		*pptrs = NULL;
		return -1;
	}
	for (uint32_t i = 0; i < k->nparams; i++)
		(*pptrs)[i] = (char *)*params + k->offset[i];
	return 0;
}

static CUresult launch(CUfunction fh, const struct launch *L, CUstream hs, void **params,
		       void **extra, int ptds)
{
	struct fc_callee ce;
	struct fc_stream *s;
	CUresult r = callee(fh, &ce);
	if (r)
		return r;
	if ((r = fakecuda__stream_resolve(hs, ptds, &s)))
		return r;
	const struct fc_kentry *k = ce.k;
	if (!L->grid[0] || !L->grid[1] || !L->grid[2] || L->grid[0] > 2147483647u ||
	    L->grid[1] > 65535 || L->grid[2] > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	if (!L->block[0] || !L->block[1] || !L->block[2] || L->block[0] > 1024 ||
	    L->block[1] > 1024 || L->block[2] > 64 ||
	    (uint64_t)L->block[0] * L->block[1] * L->block[2] > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	int max_dyn = atomic_load(ce.max_dyn_smem);
	if (L->smem > (unsigned)max_dyn)
		return CUDA_ERROR_INVALID_VALUE;
	if ((uint64_t)L->block[0] * L->block[1] * L->block[2] > kentry_max_threads(ce.k))
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; /* too many threads for its registers */
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE;
	const char *ebuf = NULL;
	size_t esize = 0;
	int have_size = 0;
	if (extra) {
		for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
				ebuf = extra[i + 1];
			} else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
				if (!extra[i + 1])
					return CUDA_ERROR_INVALID_VALUE;
				esize = *(size_t *)extra[i + 1];
				have_size = 1;
			} else {
				return CUDA_ERROR_INVALID_VALUE;
			}
		}
		/* Measured for a 42-byte layout: sizes 1..42 are accepted (a short
		 * buffer leaves the rest undefined: zero here), 0 is
		 * CUDA_ERROR_INVALID_VALUE, and anything larger, even the 48 of a padded
		 * struct, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES. */
		if (k->total && (!ebuf || !have_size || !esize))
			return CUDA_ERROR_INVALID_VALUE;
		if (esize > k->total)
			return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	} else if (k->nparams && !params) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (L->cluster[0] || L->cluster[1] || L->cluster[2]) {
		unsigned cx = L->cluster[0], cy = L->cluster[1], cz = L->cluster[2];
		unsigned lim = ce.f && ce.f->nonportable_cluster ? 16 : 8;
		if (!cx || !cy || !cz || (uint64_t)cx * cy * cz > lim || L->grid[0] % cx ||
		    L->grid[1] % cy || L->grid[2] % cz)
			return CUDA_ERROR_INVALID_CLUSTER_SIZE;
		/* A cluster no GPC of the context can hold never runs: refused,
		 * so a runtime that places it there is caught. */
		int occ = occupancy((int)(L->block[0] * L->block[1] * L->block[2]), L->smem,
				    max_dyn);
		if (cluster_capacity(s->ctx, occ, (uint64_t)cx * cy * cz) == 0)
			return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	}
	if (L->coop) {
		/* All blocks must be co-resident on the SMs of the stream's context. */
		struct fc_ctx *c = s->ctx;
		uint64_t nsm = c->green ? c->green->nsm : c->dev->nsm;
		uint64_t blocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
		int occ =
		    occupancy((int)(L->block[0] * L->block[1] * L->block[2]), L->smem, max_dyn);
		if (blocks > nsm * (uint64_t)occ)
			return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	}
	/* Injected errors: a launch refused at the call, or one that faults on
	 * the device (sticky, like an illegal address). */
	load_code((struct fc_kentry *)k);
	long nth = atomic_fetch_add(&g_fc.nlaunches, 1) + 1;
	if (g_fc.fail_launch_at && nth == g_fc.fail_launch_at)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	struct fc_cmd cmd = {.kind = FC_CMD_KERNEL};
	cmd.u.k.inject_fault = g_fc.fault_launch_at && nth == g_fc.fault_launch_at;
	cmd.u.k.k = (struct fc_kentry *)k;
	cmd.u.k.fn = fh;
	cmd.u.k.kern = ce.f ? (CUkernel)ce.f->kern : (CUkernel)(void *)fh;
	cmd.u.k.nctx = s->ctx;
	memcpy(cmd.u.k.grid, L->grid, sizeof(L->grid));
	memcpy(cmd.u.k.block, L->block, sizeof(L->block));
	memcpy(cmd.u.k.cluster, L->cluster, sizeof(L->cluster));
	cmd.u.k.smem = L->smem;
	cmd.u.k.coop = L->coop;
	if (fakecuda__kargs_alloc(k, &cmd.u.k.params, &cmd.u.k.pptrs) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* The driver copies the arguments at launch: the caller may reuse them. */
	if (ebuf) {
		size_t n = FC_MIN(esize, k->total);
		memcpy(cmd.u.k.params, ebuf, n);
		memset((char *)cmd.u.k.params + n, 0, k->total - n);
	}
	for (uint32_t i = 0; i < k->nparams && !ebuf; i++) {
		if (!params[i]) {
			fakecuda__cmd_fini(&cmd);
			return CUDA_ERROR_INVALID_VALUE;
		}
		memcpy(cmd.u.k.pptrs[i], params[i], k->size[i]);
	}
	return fakecuda__submit(s, &cmd, NULL, NULL);
}

/*
 * cuGraphKernelNodeSetParams on a kernel node: "kern: will only be referenced
 * if func is NULL"; "ctx: ... NULL will indicate the current context should
 * be used ... ignored if func is set" (then the node runs in the function's
 * context: measured, a primary-context function stays there). Arguments come
 * from kernelParams (extra is not modelled).
 */
CUresult fakecuda__kernel_node_set(struct fc_cmd *c, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct fc_callee ce;
	const void *h = p->func ? (const void *)p->func : (const void *)p->kern;
	if (!h || callee(h, &ce) || (!p->func && ce.f))
		return CUDA_ERROR_INVALID_VALUE;
	if (p->extra)
		return CUDA_ERROR_NOT_SUPPORTED;
	const struct fc_kentry *k = ce.k;
	if (k->nparams && !p->kernelParams)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_ctx *nctx;
	if (p->func)
		nctx = ce.f ? ce.f->ctx : fakecuda__ctx_current();
	else
		nctx = p->ctx ? (struct fc_ctx *)p->ctx : fakecuda__ctx_current();
	if (!nctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	void *params;
	void **pptrs;
	if (fakecuda__kargs_alloc(k, &params, &pptrs) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* The new arguments may point into the node's own (as after a get). */
	for (uint32_t i = 0; i < k->nparams; i++)
		memcpy(pptrs[i], p->kernelParams[i], k->size[i]);
	free(c->u.k.params);
	free(c->u.k.pptrs);
	c->u.k.params = params;
	c->u.k.pptrs = pptrs;
	c->u.k.k = (struct fc_kentry *)k;
	c->u.k.fn = p->func;
	c->u.k.kern = p->func ? (ce.f ? (CUkernel)ce.f->kern : (CUkernel)(void *)p->func) : p->kern;
	c->u.k.nctx = nctx;
	c->u.k.grid[0] = p->gridDimX;
	c->u.k.grid[1] = p->gridDimY;
	c->u.k.grid[2] = p->gridDimZ;
	c->u.k.block[0] = p->blockDimX;
	c->u.k.block[1] = p->blockDimY;
	c->u.k.block[2] = p->blockDimZ;
	c->u.k.smem = p->sharedMemBytes;
	return CUDA_SUCCESS;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			      unsigned by, unsigned bz, unsigned smem, CUstream hs, void **params,
			      void **extra, int coop, int ptds)
{
	struct launch L = {{gx, gy, gz}, {bx, by, bz}, smem, coop, {0, 0, 0}};
	return launch(f, &L, hs, params, extra, ptds);
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra,
			  int ptds)
{
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	struct launch L = {{cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ},
			   {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ},
			   cfg->sharedMemBytes,
			   0,
			   {0, 0, 0}};
	for (unsigned i = 0; i < cfg->numAttrs; i++) {
		const CUlaunchAttribute *a = &cfg->attrs[i];
		switch (a->id) {
		case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
			L.coop = a->value.cooperative != 0;
			break;
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
			L.cluster[0] = a->value.clusterDim.x;
			L.cluster[1] = a->value.clusterDim.y;
			L.cluster[2] = a->value.clusterDim.z;
			break;
		case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
		case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
			/* They would record events: not modelled, so refused. */
			return CUDA_ERROR_NOT_SUPPORTED;
		default:
			/* Scheduling hints and policies: no effect on results. */
			if ((int)a->id < 0 || a->id >= CU_LAUNCH_ATTRIBUTE_MAX)
				return CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	return launch(f, &L, cfg->hStream, params, extra, ptds);
}

#define FC_LAUNCH_DECL                                                                             \
	(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,        \
	 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                   \
	 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
#define FC_COOP_DECL                                                                               \
	(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,        \
	 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                   \
	 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)

FC_DEF(cuLaunchKernel, FC_LAUNCH_DECL,
       launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		     sharedMemBytes, hStream, kernelParams, extra, 0, 0))
FC_DEF(cuLaunchKernel_ptsz, FC_LAUNCH_DECL,
       launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		     sharedMemBytes, hStream, kernelParams, extra, 0, 1))
FC_DEF(cuLaunchCooperativeKernel, FC_COOP_DECL,
       launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		     sharedMemBytes, hStream, kernelParams, NULL, 1, 0))
FC_DEF(cuLaunchCooperativeKernel_ptsz, FC_COOP_DECL,
       launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		     sharedMemBytes, hStream, kernelParams, NULL, 1, 1))
FC_DEF(cuLaunchKernelEx,
       (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
       launch_ex(config, f, kernelParams, extra, 0))
FC_DEF(cuLaunchKernelEx_ptsz,
       (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
       launch_ex(config, f, kernelParams, extra, 1))

/* ---- teardown -------------------------------------------------------------------------------- */

void fakecuda__module_teardown(void)
{
	void **v;
	size_t n = fakecuda__registry_take(FC_T_MODULE, &v);
	for (size_t i = 0; i < n; i++)
		module_free(v[i]);
	free(v);
	n = fakecuda__registry_take(FC_T_LIBRARY, &v);
	for (size_t i = 0; i < n; i++)
		library_free(v[i]);
	free(v);
	pthread_mutex_lock(&reg_mu);
	struct fc_kentry *k = kernels;
	kernels = NULL;
	pthread_mutex_unlock(&reg_mu);
	while (k) {
		struct fc_kentry *next = k->next;
		free(k->name);
		free(k);
		k = next;
	}
}
