/* SPDX-License-Identifier: MIT */
/*
 * fakecuda memory: allocations (device memory is host memory), pinned and
 * registered host memory, pointer attributes, copies and memsets.
 *
 * Every allocation is tracked so that pointers and sizes are checked like the
 * driver checks them (an out-of-range device copy is CUDA_ERROR_INVALID_VALUE
 * here, where on a GPU it might corrupt memory silently) and so that the
 * host-synchronization rules of "API synchronization behavior" can be applied
 * per memory kind:
 *   sync copies: return after the copy completed, except device-to-device
 *     copies, which are asynchronous to the host (unless the context has
 *     CU_CTX_SYNC_MEMOPS);
 *   async copies: asynchronous, except that a copy into pageable memory or
 *     between two host buffers completes before returning;
 *   a pageable source is snapshotted at call time (the driver stages it), so
 *     the caller may reuse its buffer as soon as the call returns;
 *   memsets: asynchronous, except to pinned host memory.
 * Fresh device memory is filled with 0xa5 so that reads of never-written
 * memory are visible.
 */
#include "fc_internal.h"

#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_alloc *tab; /* sorted by base */
static size_t tab_n, tab_cap;

#define FC_DEF(sym, decl, call)                                                                    \
	CUresult CUDAAPI sym decl                                                                  \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return call;                                                                       \
	}

/* Index of the last entry with base <= p, or -1. Caller holds mem_mu. */
static long find_le(uintptr_t p)
{
	long lo = 0, hi = (long)tab_n - 1, r = -1;
	while (lo <= hi) {
		long mid = (lo + hi) / 2;
		if (tab[mid].base <= p) {
			r = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return r;
}

int fakecuda__mem_find(uintptr_t p, struct fc_alloc *out)
{
	int found = 0;
	pthread_mutex_lock(&mem_mu);
	long i = find_le(p);
	if (i >= 0 && p < tab[i].base + tab[i].size) {
		*out = tab[i];
		found = 1;
	}
	pthread_mutex_unlock(&mem_mu);
	return found;
}

/* Does [p, p+n) overlap any entry? Caller holds mem_mu. */
static int overlaps(uintptr_t p, size_t n)
{
	long i = find_le(p + n - 1);
	return i >= 0 && tab[i].base + tab[i].size > p;
}

static int mem_add(const struct fc_alloc *a)
{
	int r = 0;
	pthread_mutex_lock(&mem_mu);
	if (overlaps(a->base, a->size)) {
		r = -1;
		goto out;
	}
	if (tab_n == tab_cap) {
		size_t ncap = tab_cap ? tab_cap * 2 : 64;
		struct fc_alloc *nt = realloc(tab, ncap * sizeof(*nt));
		if (!nt) {
			r = -2;
			goto out;
		}
		tab = nt;
		tab_cap = ncap;
	}
	long i = find_le(a->base) + 1;
	memmove(&tab[i + 1], &tab[i], (tab_n - (size_t)i) * sizeof(*tab));
	tab[i] = *a;
	tab[i].id = fakecuda__new_id();
	tab_n++;
out:
	pthread_mutex_unlock(&mem_mu);
	return r;
}

/* Removes the entry starting at @base if its kind is @kind; 1 if removed. */
static int mem_del(uintptr_t base, int kind, struct fc_alloc *out)
{
	int r = 0;
	pthread_mutex_lock(&mem_mu);
	long i = find_le(base);
	if (i >= 0 && tab[i].base == base && tab[i].kind == kind) {
		*out = tab[i];
		memmove(&tab[i], &tab[i + 1], (tab_n - (size_t)i - 1) * sizeof(*tab));
		tab_n--;
		r = 1;
	}
	pthread_mutex_unlock(&mem_mu);
	return r;
}

static void free_alloc(const struct fc_alloc *a)
{
	if (a->kind == FC_MEM_DEVICE)
		atomic_fetch_sub(&a->ctx->dev->used_mem, a->size);
	if (a->kind != FC_MEM_REGISTERED)
		free((void *)a->base);
}

void fakecuda__mem_release(uintptr_t base)
{
	struct fc_alloc a;
	if (mem_del(base, FC_MEM_DEVICE, &a))
		free_alloc(&a);
}

void fakecuda__mem_teardown(void)
{
	pthread_mutex_lock(&mem_mu);
	for (size_t i = 0; i < tab_n; i++)
		if (tab[i].kind != FC_MEM_REGISTERED)
			free((void *)tab[i].base);
	free(tab);
	tab = NULL;
	tab_n = tab_cap = 0;
	pthread_mutex_unlock(&mem_mu);
}

/* ---- allocation ------------------------------------------------------------------ */

static CUresult dev_alloc(struct fc_ctx *c, size_t size, int async, uintptr_t *out)
{
	struct fc_device *d = c->dev;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	size_t used = atomic_fetch_add(&d->used_mem, size);
	if (used + size > d->total_mem || used + size < used) {
		atomic_fetch_sub(&d->used_mem, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	void *p = NULL;
	/* cudaMalloc: "The allocated memory is suitably aligned for any kind of
	 * variable"; the driver gives 256-byte alignment. */
	if (posix_memalign(&p, 256, size) != 0) {
		atomic_fetch_sub(&d->used_mem, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memset(p, 0xa5, FC_MIN(size, (size_t)256 << 20));
	struct fc_alloc a = {
	    .base = (uintptr_t)p, .size = size, .kind = FC_MEM_DEVICE, .ctx = c, .async = async};
	if (mem_add(&a) != 0) {
		free(p);
		atomic_fetch_sub(&d->used_mem, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = (uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	/* Injected exhaustion: this allocation and every later one fail. */
	if (g_fc.fail_alloc_at && atomic_fetch_add(&g_fc.nallocs, 1) + 1 >= g_fc.fail_alloc_at)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t p;
	if ((r = dev_alloc(c, bytesize, 0, &p)))
		return r;
	*dptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				    size_t Height, unsigned int ElementSizeBytes)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!dptr || !pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
	uintptr_t p;
	if ((r = dev_alloc(c, pitch * Height, 0, &p)))
		return r;
	*dptr = (CUdeviceptr)p;
	*pPitch = pitch;
	return CUDA_SUCCESS;
}

/*
 * cuMemFree is synchronous: like cudaFree it waits for all work on the device
 * (every context), since the memory may be in use by any of it.
 */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!dptr)
		return CUDA_SUCCESS;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	struct fc_alloc a;
	if (!fakecuda__mem_find((uintptr_t)dptr, &a) || a.base != (uintptr_t)dptr ||
	    a.kind != FC_MEM_DEVICE || a.freeing)
		return CUDA_ERROR_INVALID_VALUE;
	fakecuda__device_sync(a.ctx->dev);
	if (mem_del(a.base, FC_MEM_DEVICE, &a))
		free_alloc(&a);
	return (CUresult)atomic_load(&c->sticky);
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!free_b || !total)
		return CUDA_ERROR_INVALID_VALUE;
	size_t used = atomic_load(&c->dev->used_mem);
	*total = c->dev->total_mem;
	*free_b = used < *total ? *total - used : 0;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	struct fc_alloc a;
	if (!fakecuda__mem_find((uintptr_t)dptr, &a))
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = (CUdeviceptr)a.base;
	if (psize)
		*psize = a.size;
	return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	const unsigned ok =
	    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
	if (!pp || !size || (flags & ~ok))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	void *p = NULL;
	if (posix_memalign(&p, 4096, size) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fc_alloc a = {
	    .base = (uintptr_t)p, .size = size, .kind = FC_MEM_PINNED, .ctx = c, .flags = flags};
	if (mem_add(&a) != 0) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

FC_DEF(cuMemAllocHost_v2, (void **pp, size_t bytesize), host_alloc(pp, bytesize, 0))
FC_DEF(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags),
       host_alloc(pp, bytesize, Flags))

/* Like cudaFreeHost, waits for the device first: queued copies may still use it. */
CUresult CUDAAPI cuMemFreeHost(void *p)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	struct fc_alloc a;
	if (!p || !fakecuda__mem_find((uintptr_t)p, &a) || a.base != (uintptr_t)p ||
	    a.kind != FC_MEM_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	fakecuda__device_sync(c->dev);
	if (mem_del(a.base, FC_MEM_PINNED, &a))
		free_alloc(&a);
	return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	const unsigned ok = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
			    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
	if (!p || !size || (flags & ~ok))
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	struct fc_alloc a = {.base = (uintptr_t)p,
			     .size = size,
			     .kind = FC_MEM_REGISTERED,
			     .ctx = c,
			     .flags = flags};
	int e = mem_add(&a);
	if (e == -1)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	return e ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

FC_DEF(cuMemHostRegister, (void *p, size_t bytesize, unsigned int Flags),
       host_register(p, bytesize, Flags))
FC_DEF(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags),
       host_register(p, bytesize, Flags))

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	struct fc_alloc a;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fakecuda__mem_find((uintptr_t)p, &a) || a.kind != FC_MEM_REGISTERED)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	if (a.base != (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE; /* inside a registration: what the driver says */
	if ((r = fakecuda__capture_unsafe()))
		return r;
	fakecuda__device_sync(c->dev);
	mem_del(a.base, FC_MEM_REGISTERED, &a);
	return CUDA_SUCCESS;
}

static CUresult host_get_dptr(CUdeviceptr *pd, void *p, unsigned flags)
{
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	struct fc_alloc a;
	if (!pd || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fakecuda__mem_find((uintptr_t)p, &a) || a.kind == FC_MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	*pd = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
	return CUDA_SUCCESS;
}

FC_DEF(cuMemHostGetDevicePointer_v2, (CUdeviceptr * pdptr, void *p, unsigned int Flags),
       host_get_dptr(pdptr, p, Flags))

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	struct fc_alloc a;
	if (!pFlags || !fakecuda__mem_find((uintptr_t)p, &a) || a.kind == FC_MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	*pFlags = a.flags;
	return CUDA_SUCCESS;
}

/* Stream-ordered allocation: the memory exists from the call on (nothing can
 * use the pointer earlier); the free happens when the stream reaches it. */
static CUresult stream_capturing(struct fc_stream *s, int invalidate)
{
	int cap = 0;
	pthread_mutex_lock(&s->ctx->mu);
	if (s->capture) {
		cap = 1;
		if (invalidate)
			fakecuda__capture_invalidate(s->capture);
	}
	pthread_mutex_unlock(&s->ctx->mu);
	return cap ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream hs, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	/* Graph memory nodes are not modelled (the driver would add an allocation
	 * node): refused, and the capture is invalidated. */
	if ((r = stream_capturing(s, 1)))
		return r;
	/* On another stream during a global capture: an unsafe call (measured). */
	if ((r = fakecuda__capture_unsafe()))
		return r;
	if ((r = (CUresult)atomic_load(&s->ctx->sticky)))
		return r;
	uintptr_t p;
	if ((r = dev_alloc(s->ctx, size, 1, &p)))
		return r;
	*dptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

static CUresult free_async(CUdeviceptr dptr, CUstream hs, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if ((r = stream_capturing(s, 1)))
		return r;
	if ((r = fakecuda__capture_unsafe()))
		return r;
	int ok = 0;
	pthread_mutex_lock(&mem_mu);
	long i = find_le((uintptr_t)dptr);
	if (i >= 0 && tab[i].base == (uintptr_t)dptr && tab[i].kind == FC_MEM_DEVICE &&
	    !tab[i].freeing) {
		tab[i].freeing = 1;
		ok = 1;
	}
	pthread_mutex_unlock(&mem_mu);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_cmd cmd = {.kind = FC_CMD_FREE, .u.free.ptr = (uintptr_t)dptr};
	return fakecuda__submit(s, &cmd, NULL, NULL);
}

FC_DEF(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
       alloc_async(dptr, bytesize, hStream, 0))
FC_DEF(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
       alloc_async(dptr, bytesize, hStream, 1))
FC_DEF(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), free_async(dptr, hStream, 0))
FC_DEF(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), free_async(dptr, hStream, 1))

/* ---- pointer attributes ------------------------------------------------------------- */

/* Booleans are written as 4-byte unsigned ints, as the real driver does
 * (measured: a 0xffffffff word becomes 0x00000000 or 0x00000001). */
static CUresult ptr_attr(void *data, CUpointer_attribute attr, const struct fc_alloc *a,
			 uintptr_t p)
{
	int dev = a->kind == FC_MEM_DEVICE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)a->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = (CUdeviceptr)p;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*(void **)data = dev ? NULL : (void *)p;
		if (dev)
			return CUDA_ERROR_INVALID_VALUE; /* NULL is written too */
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(unsigned int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a->id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->ctx->dev->ordinal;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(unsigned int *)data = dev && !a->async;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = (CUdeviceptr)a->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE; /* not modelled */
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	FC_ENTER();
	struct fc_alloc a;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	/* "If ptr was not allocated by, mapped by, or registered with a CUcontext
	 * which uses unified virtual addressing then CUDA_ERROR_INVALID_VALUE is
	 * returned": plain pageable memory. */
	if (!fakecuda__mem_find((uintptr_t)ptr, &a))
		return CUDA_ERROR_INVALID_VALUE;
	return ptr_attr(data, attribute, &a, (uintptr_t)ptr);
}

/* "Unlike cuPointerGetAttribute, this function will not return an error when
 * the ptr encountered is not a valid CUDA pointer. Instead, the attributes
 * are assigned default NULL values and CUDA_SUCCESS is returned." */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
					void **data, CUdeviceptr ptr)
{
	FC_ENTER();
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_alloc a;
	int known = fakecuda__mem_find((uintptr_t)ptr, &a);
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
		CUresult r;
		if (known) {
			r = ptr_attr(data[i], attributes[i], &a, (uintptr_t)ptr);
			if (r == CUDA_ERROR_INVALID_VALUE &&
			    attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
				*(void **)data[i] = NULL;
				r = CUDA_SUCCESS;
			}
			if (r)
				return r;
			continue;
		}
		switch (attributes[i]) {
		case CU_POINTER_ATTRIBUTE_CONTEXT:
			*(CUcontext *)data[i] = NULL;
			break;
		case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
			*(unsigned int *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
			*(CUdeviceptr *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			/* Unified addressing: pageable memory is its own host pointer. */
			*(void **)data[i] = (void *)(uintptr_t)ptr;
			break;
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			*(unsigned long long *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			*(int *)data[i] = -2;
			break;
		case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
			*(size_t *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			*(CUmemoryPool *)data[i] = NULL;
			break;
		case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		case CU_POINTER_ATTRIBUTE_MAPPED:
			*(unsigned int *)data[i] = 0;
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return CUDA_SUCCESS;
}

/* ---- copies ---------------------------------------------------------------------------- */

enum { K_PAGEABLE = 0, K_PINNED, K_DEVICE };

/*
 * Classifies [p, p+span) and checks it: known memory must contain the whole
 * span; @need_dev requires device-accessible memory (device or mapped host).
 */
static CUresult classify(uintptr_t p, size_t span, int need_dev, int *kind)
{
	struct fc_alloc a;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fakecuda__mem_find(p, &a)) {
		if (need_dev)
			return CUDA_ERROR_INVALID_VALUE;
		*kind = K_PAGEABLE;
		return CUDA_SUCCESS;
	}
	if (span > a.base + a.size - p)
		return CUDA_ERROR_INVALID_VALUE;
	*kind = a.kind == FC_MEM_DEVICE ? K_DEVICE : K_PINNED;
	return CUDA_SUCCESS;
}

/* Bytes spanned by a 3-D region. */
static size_t span3(size_t width, size_t height, size_t depth, size_t pitch, size_t slice)
{
	if (!width || !height || !depth)
		return 0;
	return ((depth - 1) * slice + (height - 1)) * pitch + width;
}

static void *snapshot(struct fc_copy *c, size_t *size)
{
	size_t n = c->width * c->height * c->depth;
	char *buf = malloc(n ? n : 1);
	if (!buf)
		return NULL;
	struct fc_copy t = *c;
	t.dst = buf;
	t.dpitch = c->width;
	t.dheight = c->height;
	for (size_t z = 0; z < t.depth; z++)
		for (size_t y = 0; y < t.height; y++)
			memcpy(t.dst + (z * t.dheight + y) * t.dpitch,
			       t.src + (z * t.sheight + y) * t.spitch, t.width);
	c->src = buf;
	c->spitch = c->width;
	c->sheight = c->height;
	*size = n;
	return buf;
}

/*
 * Submits one copy on @s with the host synchronization its memory kinds and
 * API flavour call for (see the file comment).
 */
static CUresult copy_submit(struct fc_stream *s, struct fc_copy *c, int skind, int dkind,
			    int sync_api)
{
	if (!c->width || !c->height || !c->depth)
		return CUDA_SUCCESS;
	int capturing = stream_capturing(s, 0) != CUDA_SUCCESS;
	int wait;
	if (sync_api)
		wait = !(skind == K_DEVICE && dkind == K_DEVICE) ||
		       (s->ctx->flags & CU_CTX_SYNC_MEMOPS);
	else
		wait = dkind == K_PAGEABLE || (skind != K_DEVICE && dkind != K_DEVICE);
	struct fc_cmd cmd = {.kind = FC_CMD_COPY, .u.copy.c = *c};
	if (skind == K_PAGEABLE && !capturing) {
		cmd.u.copy.staging = snapshot(&cmd.u.copy.c, &cmd.u.copy.staging_size);
		if (!cmd.u.copy.staging)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return fakecuda__submit_sync(s, &cmd, wait && !capturing);
}

static CUresult copy1(uintptr_t dst, uintptr_t src, size_t n, CUstream hs, int sync_api, int ptds,
		      int dneed, int sneed)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!n)
		return CUDA_SUCCESS;
	int sk, dk;
	if ((r = classify(src, n, sneed, &sk)) || (r = classify(dst, n, dneed, &dk)))
		return r;
	struct fc_copy c = {(char *)dst, (const char *)src, n, 1, 1, n, 1, n, 1};
	return copy_submit(s, &c, sk, dk, sync_api);
}

/* Sync copies run on the legacy stream, or the per-thread one for _ptds. */
#define HOSTP(p) ((uintptr_t)(p))
FC_DEF(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
       copy1(dst, src, ByteCount, NULL, 1, 0, 0, 0))
FC_DEF(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
       copy1(dst, src, ByteCount, NULL, 1, 1, 0, 0))
FC_DEF(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
       copy1(dst, src, ByteCount, hStream, 0, 0, 0, 0))
FC_DEF(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
       copy1(dst, src, ByteCount, hStream, 0, 1, 0, 0))
FC_DEF(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
       copy1(dstDevice, HOSTP(srcHost), ByteCount, NULL, 1, 0, 1, 0))
FC_DEF(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
       copy1(dstDevice, HOSTP(srcHost), ByteCount, NULL, 1, 1, 1, 0))
FC_DEF(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
       copy1(HOSTP(dstHost), srcDevice, ByteCount, NULL, 1, 0, 0, 1))
FC_DEF(cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
       copy1(HOSTP(dstHost), srcDevice, ByteCount, NULL, 1, 1, 0, 1))
FC_DEF(cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
       copy1(dstDevice, srcDevice, ByteCount, NULL, 1, 0, 1, 1))
FC_DEF(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
       copy1(dstDevice, srcDevice, ByteCount, NULL, 1, 1, 1, 1))
FC_DEF(cuMemcpyHtoDAsync_v2,
       (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
       copy1(dstDevice, HOSTP(srcHost), ByteCount, hStream, 0, 0, 1, 0))
FC_DEF(cuMemcpyHtoDAsync_v2_ptsz,
       (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
       copy1(dstDevice, HOSTP(srcHost), ByteCount, hStream, 0, 1, 1, 0))
FC_DEF(cuMemcpyDtoHAsync_v2,
       (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
       copy1(HOSTP(dstHost), srcDevice, ByteCount, hStream, 0, 0, 0, 1))
FC_DEF(cuMemcpyDtoHAsync_v2_ptsz,
       (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
       copy1(HOSTP(dstHost), srcDevice, ByteCount, hStream, 0, 1, 0, 1))
FC_DEF(cuMemcpyDtoDAsync_v2,
       (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
       copy1(dstDevice, srcDevice, ByteCount, hStream, 0, 0, 1, 1))
FC_DEF(cuMemcpyDtoDAsync_v2_ptsz,
       (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
       copy1(dstDevice, srcDevice, ByteCount, hStream, 0, 1, 1, 1))

/* CUDA arrays, as far as the shim's tests need them: an array is a device
 * allocation of Width x Height x NumChannels elements, its handle the
 * allocation's address, and the array copies address it by byte offset. */
static size_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 0;
	}
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	size_t eb = d ? format_bytes(d->Format) : 0;
	if (!pHandle || !eb || !d->Width || (d->NumChannels != 1 && d->NumChannels != 2 &&
					     d->NumChannels != 4))
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t p;
	if ((r = dev_alloc(c, d->Width * (d->Height ? d->Height : 1) * d->NumChannels * eb, 0, &p)))
		return r;
	*pHandle = (CUarray)p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayDestroy(CUarray a)
{
	FC_ENTER();
	struct fc_alloc al;
	if (!a || !fakecuda__mem_find((uintptr_t)a, &al) || al.base != (uintptr_t)a ||
	    al.kind != FC_MEM_DEVICE || al.freeing)
		return CUDA_ERROR_INVALID_HANDLE;
	fakecuda__device_sync(al.ctx->dev);
	if (mem_del(al.base, FC_MEM_DEVICE, &al))
		free_alloc(&al);
	return CUDA_SUCCESS;
}

#define ARR(a, off) ((uintptr_t)(a) + (off))
FC_DEF(cuMemcpyHtoA_v2, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t n),
       copy1(ARR(dstArray, dstOffset), HOSTP(srcHost), n, NULL, 1, 0, 1, 0))
FC_DEF(cuMemcpyHtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t n),
       copy1(ARR(dstArray, dstOffset), HOSTP(srcHost), n, NULL, 1, 1, 1, 0))
FC_DEF(cuMemcpyAtoH_v2, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(HOSTP(dstHost), ARR(srcArray, srcOffset), n, NULL, 1, 0, 0, 1))
FC_DEF(cuMemcpyAtoH_v2_ptds, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(HOSTP(dstHost), ARR(srcArray, srcOffset), n, NULL, 1, 1, 0, 1))
FC_DEF(cuMemcpyDtoA_v2, (CUarray dstArray, size_t dstOffset, CUdeviceptr src, size_t n),
       copy1(ARR(dstArray, dstOffset), src, n, NULL, 1, 0, 1, 1))
FC_DEF(cuMemcpyDtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, CUdeviceptr src, size_t n),
       copy1(ARR(dstArray, dstOffset), src, n, NULL, 1, 1, 1, 1))
FC_DEF(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(dst, ARR(srcArray, srcOffset), n, NULL, 1, 0, 1, 1))
FC_DEF(cuMemcpyAtoD_v2_ptds, (CUdeviceptr dst, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(dst, ARR(srcArray, srcOffset), n, NULL, 1, 1, 1, 1))
FC_DEF(cuMemcpyAtoA_v2,
       (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(ARR(dstArray, dstOffset), ARR(srcArray, srcOffset), n, NULL, 1, 0, 1, 1))
FC_DEF(cuMemcpyAtoA_v2_ptds,
       (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t n),
       copy1(ARR(dstArray, dstOffset), ARR(srcArray, srcOffset), n, NULL, 1, 1, 1, 1))
FC_DEF(cuMemcpyHtoAAsync_v2,
       (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t n, CUstream hStream),
       copy1(ARR(dstArray, dstOffset), HOSTP(srcHost), n, hStream, 0, 0, 1, 0))
FC_DEF(cuMemcpyHtoAAsync_v2_ptsz,
       (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t n, CUstream hStream),
       copy1(ARR(dstArray, dstOffset), HOSTP(srcHost), n, hStream, 0, 1, 1, 0))
FC_DEF(cuMemcpyAtoHAsync_v2,
       (void *dstHost, CUarray srcArray, size_t srcOffset, size_t n, CUstream hStream),
       copy1(HOSTP(dstHost), ARR(srcArray, srcOffset), n, hStream, 0, 0, 0, 1))
FC_DEF(cuMemcpyAtoHAsync_v2_ptsz,
       (void *dstHost, CUarray srcArray, size_t srcOffset, size_t n, CUstream hStream),
       copy1(HOSTP(dstHost), ARR(srcArray, srcOffset), n, hStream, 0, 1, 0, 1))

/* Resolves one side of a 2-D/3-D descriptor into a pointer and a checked kind. */
static CUresult side(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray arr, size_t x,
		     size_t y, size_t z, size_t pitch, size_t slice, size_t w, size_t h, size_t d,
		     uintptr_t *out, int *kind)
{
	uintptr_t base;
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = (uintptr_t)host;
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		base = (uintptr_t)dev;
		break;
	default: /* CUDA arrays are not modelled */
		(void)arr;
		return CUDA_ERROR_INVALID_VALUE;
	}
	if ((h > 1 || d > 1) && pitch < w)
		return CUDA_ERROR_INVALID_VALUE;
	if (d > 1 && slice < h)
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t p = base + (z * slice + y) * pitch + x;
	CUresult r = classify(p, span3(w, h, d, pitch, slice), type == CU_MEMORYTYPE_DEVICE, kind);
	if (r)
		return r;
	*out = p;
	return CUDA_SUCCESS;
}

static CUresult copy3(const CUDA_MEMCPY3D *m, CUstream hs, int sync_api, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!m || m->reserved0 || m->reserved1 || m->srcLOD || m->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m->WidthInBytes || !m->Height || !m->Depth)
		return CUDA_SUCCESS;
	size_t sh = m->Depth > 1 ? m->srcHeight : m->Height,
	       dh = m->Depth > 1 ? m->dstHeight : m->Height;
	size_t sp = m->Height > 1 || m->Depth > 1 ? m->srcPitch : m->WidthInBytes;
	size_t dp = m->Height > 1 || m->Depth > 1 ? m->dstPitch : m->WidthInBytes;
	uintptr_t src, dst;
	int sk, dk;
	r = side(m->srcMemoryType, m->srcHost, m->srcDevice, m->srcArray, m->srcXInBytes, m->srcY,
		 m->srcZ, sp, sh, m->WidthInBytes, m->Height, m->Depth, &src, &sk);
	if (!r)
		r = side(m->dstMemoryType, m->dstHost, m->dstDevice, m->dstArray, m->dstXInBytes,
			 m->dstY, m->dstZ, dp, dh, m->WidthInBytes, m->Height, m->Depth, &dst, &dk);
	if (r)
		return r;
	struct fc_copy c = {
	    (char *)dst, (const char *)src, m->WidthInBytes, m->Height, m->Depth, sp, sh, dp, dh};
	return copy_submit(s, &c, sk, dk, sync_api);
}

static CUresult copy2(const CUDA_MEMCPY2D *m, CUstream hs, int sync_api, int ptds)
{
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_MEMCPY3D t = {
	    .srcXInBytes = m->srcXInBytes,
	    .srcY = m->srcY,
	    .srcMemoryType = m->srcMemoryType,
	    .srcHost = m->srcHost,
	    .srcDevice = m->srcDevice,
	    .srcArray = m->srcArray,
	    .srcPitch = m->srcPitch,
	    .srcHeight = m->Height,
	    .dstXInBytes = m->dstXInBytes,
	    .dstY = m->dstY,
	    .dstMemoryType = m->dstMemoryType,
	    .dstHost = m->dstHost,
	    .dstDevice = m->dstDevice,
	    .dstArray = m->dstArray,
	    .dstPitch = m->dstPitch,
	    .dstHeight = m->Height,
	    .WidthInBytes = m->WidthInBytes,
	    .Height = m->Height,
	    .Depth = 1,
	};
	return copy3(&t, hs, sync_api, ptds);
}

FC_DEF(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *pCopy), copy2(pCopy, NULL, 1, 0))
FC_DEF(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *pCopy), copy2(pCopy, NULL, 1, 1))
FC_DEF(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *pCopy), copy2(pCopy, NULL, 1, 0))
FC_DEF(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *pCopy), copy2(pCopy, NULL, 1, 1))
FC_DEF(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *pCopy, CUstream hStream),
       copy2(pCopy, hStream, 0, 0))
FC_DEF(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *pCopy, CUstream hStream),
       copy2(pCopy, hStream, 0, 1))
FC_DEF(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *pCopy), copy3(pCopy, NULL, 1, 0))
FC_DEF(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *pCopy), copy3(pCopy, NULL, 1, 1))
FC_DEF(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *pCopy, CUstream hStream),
       copy3(pCopy, hStream, 0, 0))
FC_DEF(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *pCopy, CUstream hStream),
       copy3(pCopy, hStream, 0, 1))

/*
 * cuMemcpyPeer: "asynchronous with respect to the host, but serialized with
 * respect all pending and future asynchronous work in to the current context,
 * srcContext, and dstContext". Modelled more strictly: the three contexts are
 * drained and the copy is done before returning.
 */
static CUresult copy_peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)
{
	struct fc_ctx *cur;
	CUresult r = fakecuda__ctx_get(&cur);
	if (r)
		return r;
	if (!fakecuda__registry_is(dc, FC_T_CTX) || !fakecuda__registry_is(sc, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!n)
		return CUDA_SUCCESS;
	int sk, dk;
	if ((r = classify(src, n, 1, &sk)) || (r = classify(dst, n, 1, &dk)))
		return r;
	fakecuda__ctx_sync(cur);
	fakecuda__ctx_sync((struct fc_ctx *)dc);
	fakecuda__ctx_sync((struct fc_ctx *)sc);
	memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return (CUresult)atomic_load(&cur->sticky);
}

static CUresult copy_peer_async(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc,
				size_t n, CUstream hs, int ptds)
{
	if (!fakecuda__registry_is(dc, FC_T_CTX) || !fakecuda__registry_is(sc, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	return copy1(dst, src, n, hs, 0, ptds, 1, 1);
}

FC_DEF(cuMemcpyPeer,
       (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
	size_t ByteCount),
       copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount))
FC_DEF(cuMemcpyPeer_ptds,
       (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
	size_t ByteCount),
       copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount))
FC_DEF(cuMemcpyPeerAsync,
       (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
	size_t ByteCount, CUstream hStream),
       copy_peer_async(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 0))
FC_DEF(cuMemcpyPeerAsync_ptsz,
       (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
	size_t ByteCount, CUstream hStream),
       copy_peer_async(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 1))

/*
 * cuMemcpyBatchAsync: "The batch as a whole executes in stream order but
 * copies within a batch are not guaranteed to execute in any specific
 * order." Sources that are pageable, or marked
 * CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL, are snapshotted at the call.
 */
static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			   CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
			   CUstream hs, int ptds)
{
	if (fail)
		*fail = SIZE_MAX;
	/* "hStream - ... Must not be legacy NULL stream." */
	if (hs == CU_STREAM_LEGACY || (!hs && !ptds))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!count || !dsts || !srcs || !sizes || !attrs || !idxs || !nattrs || nattrs > count ||
	    idxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < nattrs; k++) {
		if ((k && idxs[k] <= idxs[k - 1]) || idxs[k] >= count)
			return CUDA_ERROR_INVALID_VALUE;
		if (attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
		    attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct fc_copy *v = calloc(count, sizeof(*v));
	int *snap = calloc(count, sizeof(*snap));
	if (!v || !snap) {
		free(v);
		free(snap);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	int capturing = stream_capturing(s, 0) != CUDA_SUCCESS;
	int wait = 0;
	size_t stage = 0, k = 0;
	for (size_t i = 0; i < count; i++) {
		while (k + 1 < nattrs && idxs[k + 1] <= i)
			k++;
		int sk, dk;
		if ((r = classify(srcs[i], sizes[i], 0, &sk)) ||
		    (r = classify(dsts[i], sizes[i], 0, &dk))) {
			if (fail)
				*fail = i;
			free(v);
			free(snap);
			return r;
		}
		v[i] = (struct fc_copy){(char *)(uintptr_t)dsts[i],
					(const char *)(uintptr_t)srcs[i],
					sizes[i],
					1,
					1,
					sizes[i],
					1,
					sizes[i],
					1};
		if (!sizes[i])
			v[i].height = 0; /* nothing to copy */
		snap[i] = !capturing &&
			  (sk == K_PAGEABLE ||
			   attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
		if (snap[i])
			stage += sizes[i];
		if (dk == K_PAGEABLE)
			wait = 1;
	}
	char *buf = NULL;
	if (stage) {
		buf = malloc(stage);
		if (!buf) {
			free(v);
			free(snap);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		size_t off = 0;
		for (size_t i = 0; i < count; i++)
			if (snap[i]) {
				memcpy(buf + off, v[i].src, sizes[i]);
				v[i].src = buf + off;
				off += sizes[i];
			}
	}
	free(snap);
	struct fc_cmd cmd = {.kind = FC_CMD_COPYV, .u.copyv = {count, v, buf, stage}};
	return fakecuda__submit_sync(s, &cmd, wait && !capturing);
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				       size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				       size_t numAttrs, CUstream hStream)
{
	FC_ENTER();
	return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 0);
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					    size_t count, CUmemcpyAttributes *attrs,
					    size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
	FC_ENTER();
	return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 1);
}

CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				    size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	FC_ENTER();
	return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream,
			  0);
}

CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					 size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
					 size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	FC_ENTER();
	return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream,
			  1);
}

/* ---- memset ------------------------------------------------------------------------------ */

static CUresult memset_any(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem,
			   size_t width, size_t height, CUstream hs, int sync_api, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (dst % elem)
		return CUDA_ERROR_INVALID_VALUE;
	if (!width || !height)
		return CUDA_SUCCESS;
	if (height == 1)
		pitch = width * elem;
	if (pitch < width * elem)
		return CUDA_ERROR_INVALID_VALUE;
	int kind;
	if ((r = classify((uintptr_t)dst, (height - 1) * pitch + width * elem, 1, &kind)))
		return r;
	int capturing = stream_capturing(s, 0) != CUDA_SUCCESS;
	/* "The memset functions are asynchronous with respect to the host except
	 * when the target memory is pinned host memory." */
	int wait = sync_api && (kind == K_PINNED || (s->ctx->flags & CU_CTX_SYNC_MEMOPS));
	struct fc_cmd cmd = {
	    .kind = FC_CMD_MEMSET,
	    .u.memset = {(char *)(uintptr_t)dst, pitch, width, height, elem, value}};
	return fakecuda__submit_sync(s, &cmd, wait && !capturing);
}

#define FC_MEMSET1(sym, T, elem, sync_api, ptds)                                                   \
	FC_DEF(sym, (CUdeviceptr dstDevice, T v, size_t N),                                        \
	       memset_any(dstDevice, 0, v, elem, N, 1, NULL, sync_api, ptds))
#define FC_MEMSET1A(sym, T, elem, ptds)                                                            \
	FC_DEF(sym, (CUdeviceptr dstDevice, T v, size_t N, CUstream hStream),                      \
	       memset_any(dstDevice, 0, v, elem, N, 1, hStream, 0, ptds))
#define FC_MEMSET2(sym, T, elem, sync_api, ptds)                                                   \
	FC_DEF(sym, (CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, size_t Height),    \
	       memset_any(dstDevice, dstPitch, v, elem, Width, Height, NULL, sync_api, ptds))
#define FC_MEMSET2A(sym, T, elem, ptds)                                                            \
	FC_DEF(sym,                                                                                \
	       (CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, size_t Height,          \
		CUstream hStream),                                                                 \
	       memset_any(dstDevice, dstPitch, v, elem, Width, Height, hStream, 0, ptds))

FC_MEMSET1(cuMemsetD8_v2, unsigned char, 1, 1, 0)
FC_MEMSET1(cuMemsetD8_v2_ptds, unsigned char, 1, 1, 1)
FC_MEMSET1(cuMemsetD16_v2, unsigned short, 2, 1, 0)
FC_MEMSET1(cuMemsetD16_v2_ptds, unsigned short, 2, 1, 1)
FC_MEMSET1(cuMemsetD32_v2, unsigned int, 4, 1, 0)
FC_MEMSET1(cuMemsetD32_v2_ptds, unsigned int, 4, 1, 1)
FC_MEMSET1A(cuMemsetD8Async, unsigned char, 1, 0)
FC_MEMSET1A(cuMemsetD8Async_ptsz, unsigned char, 1, 1)
FC_MEMSET1A(cuMemsetD16Async, unsigned short, 2, 0)
FC_MEMSET1A(cuMemsetD16Async_ptsz, unsigned short, 2, 1)
FC_MEMSET1A(cuMemsetD32Async, unsigned int, 4, 0)
FC_MEMSET1A(cuMemsetD32Async_ptsz, unsigned int, 4, 1)
FC_MEMSET2(cuMemsetD2D8_v2, unsigned char, 1, 1, 0)
FC_MEMSET2(cuMemsetD2D8_v2_ptds, unsigned char, 1, 1, 1)
FC_MEMSET2(cuMemsetD2D16_v2, unsigned short, 2, 1, 0)
FC_MEMSET2(cuMemsetD2D16_v2_ptds, unsigned short, 2, 1, 1)
FC_MEMSET2(cuMemsetD2D32_v2, unsigned int, 4, 1, 0)
FC_MEMSET2(cuMemsetD2D32_v2_ptds, unsigned int, 4, 1, 1)
FC_MEMSET2A(cuMemsetD2D8Async, unsigned char, 1, 0)
FC_MEMSET2A(cuMemsetD2D8Async_ptsz, unsigned char, 1, 1)
FC_MEMSET2A(cuMemsetD2D16Async, unsigned short, 2, 0)
FC_MEMSET2A(cuMemsetD2D16Async_ptsz, unsigned short, 2, 1)
FC_MEMSET2A(cuMemsetD2D32Async, unsigned int, 4, 0)
FC_MEMSET2A(cuMemsetD2D32Async_ptsz, unsigned int, 4, 1)
