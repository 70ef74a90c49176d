/* SPDX-License-Identifier: MIT */
/*
 * The real CUDA driver entry points, resolved once, thread-safe, from the
 * real libcuda through its own cuGetProcAddress_v2 (the way libcudart finds
 * them). Two tables: the legacy-stream variants and the per-thread-default-
 * stream variants (_ptsz/_ptds), which differ only for calls that take a
 * stream (or imply the default one). The shim's hooks and the CUDA backend
 * call through these, never through a symbol that the shim overrides.
 *
 * The driver is found with dlopen("libcuda.so.1") unless VE_LIBCUDA names
 * another file (the test suite points it at the CPU fake).
 */
#ifndef VE_BACKEND_CUDA_DRIVER_H
#define VE_BACKEND_CUDA_DRIVER_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>

/* X(name): every driver function Vitamin-E calls or intercepts. 'name' is
 * the base name; cuda.h's macros give the current ABI's prototype. */
#define VE_REAL_FUNCS(X)                                                                           \
	X(cuInit)                                                                                  \
	X(cuDriverGetVersion)                                                                      \
	X(cuGetErrorName)                                                                          \
	X(cuGetErrorString)                                                                        \
	X(cuDeviceGet)                                                                             \
	X(cuDeviceGetCount)                                                                        \
	X(cuDeviceGetName)                                                                         \
	X(cuDeviceGetAttribute)                                                                    \
	X(cuDeviceTotalMem)                                                                        \
	X(cuDevicePrimaryCtxRetain)                                                                \
	X(cuDevicePrimaryCtxRelease)                                                               \
	X(cuCtxGetCurrent)                                                                         \
	X(cuCtxSetCurrent)                                                                         \
	X(cuCtxPushCurrent)                                                                        \
	X(cuCtxPopCurrent)                                                                         \
	X(cuCtxGetDevice)                                                                          \
	X(cuCtxSynchronize)                                                                        \
	X(cuCtxSynchronize_v2)                                                                     \
	X(cuCtxGetStreamPriorityRange)                                                             \
	X(cuDeviceGetDevResource)                                                                  \
	X(cuCtxGetDevResource)                                                                     \
	X(cuDevSmResourceSplitByCount)                                                             \
	X(cuDevResourceGenerateDesc)                                                               \
	X(cuGreenCtxCreate)                                                                        \
	X(cuGreenCtxDestroy)                                                                       \
	X(cuCtxFromGreenCtx)                                                                       \
	X(cuGreenCtxStreamCreate)                                                                  \
	X(cuStreamCreate)                                                                          \
	X(cuStreamCreateWithPriority)                                                              \
	X(cuStreamDestroy)                                                                         \
	X(cuStreamSynchronize)                                                                     \
	X(cuStreamQuery)                                                                           \
	X(cuStreamWaitEvent)                                                                       \
	X(cuStreamAddCallback)                                                                     \
	X(cuLaunchHostFunc)                                                                        \
	X(cuStreamGetFlags)                                                                        \
	X(cuStreamGetPriority)                                                                     \
	X(cuStreamGetCtx)                                                                          \
	X(cuStreamGetId)                                                                           \
	X(cuStreamBeginCapture)                                                                    \
	X(cuStreamEndCapture)                                                                      \
	X(cuStreamIsCapturing)                                                                     \
	X(cuThreadExchangeStreamCaptureMode)                                                       \
	X(cuStreamWriteValue32)                                                                    \
	X(cuStreamWriteValue64)                                                                    \
	X(cuStreamWaitValue32)                                                                     \
	X(cuStreamWaitValue64)                                                                     \
	X(cuEventCreate)                                                                           \
	X(cuEventRecord)                                                                           \
	X(cuEventRecordWithFlags)                                                                  \
	X(cuEventQuery)                                                                            \
	X(cuEventSynchronize)                                                                      \
	X(cuEventElapsedTime)                                                                      \
	X(cuEventDestroy)                                                                          \
	X(cuLaunchKernel)                                                                          \
	X(cuLaunchKernelEx)                                                                        \
	X(cuLaunchCooperativeKernel)                                                               \
	X(cuFuncGetParamInfo)                                                                      \
	X(cuKernelGetParamInfo)                                                                    \
	X(cuFuncGetName)                                                                           \
	X(cuFuncGetAttribute)                                                                      \
	X(cuFuncGetModule)                                                                         \
	X(cuModuleUnload)                                                                          \
	X(cuLibraryUnload)                                                                         \
	X(cuFuncIsLoaded)                                                                          \
	X(cuFuncLoad)                                                                              \
	X(cuKernelGetFunction)                                                                     \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                             \
	X(cuOccupancyMaxActiveClusters)                                                            \
	X(cuMemAlloc)                                                                              \
	X(cuMemFree)                                                                               \
	X(cuMemAllocAsync)                                                                         \
	X(cuMemFreeAsync)                                                                          \
	X(cuMemAllocHost)                                                                          \
	X(cuMemHostAlloc)                                                                          \
	X(cuMemFreeHost)                                                                           \
	X(cuCtxRecordEvent)                                                                        \
	X(cuCtxWaitEvent)                                                                          \
	X(cuArrayDestroy)                                                                          \
	X(cuMipmappedArrayDestroy)                                                                 \
	X(cuTexObjectDestroy)                                                                      \
	X(cuSurfObjectDestroy)                                                                     \
	X(cuDestroyExternalMemory)                                                                 \
	X(cuDevicePrimaryCtxReset)                                                                 \
	X(cuMemHostRegister)                                                                       \
	X(cuMemHostUnregister)                                                                     \
	X(cuMemHostGetDevicePointer)                                                               \
	X(cuMemGetInfo)                                                                            \
	X(cuPointerGetAttribute)                                                                   \
	X(cuPointerGetAttributes)                                                                  \
	X(cuMemcpy)                                                                                \
	X(cuMemcpyAsync)                                                                           \
	X(cuMemcpyHtoD)                                                                            \
	X(cuMemcpyDtoH)                                                                            \
	X(cuMemcpyDtoD)                                                                            \
	X(cuMemcpyHtoDAsync)                                                                       \
	X(cuMemcpyDtoHAsync)                                                                       \
	X(cuMemcpyDtoDAsync)                                                                       \
	X(cuMemcpy2D)                                                                              \
	X(cuMemcpy2DUnaligned)                                                                     \
	X(cuMemcpyHtoA)                                                                            \
	X(cuMemcpyAtoH)                                                                            \
	X(cuMemcpyDtoA)                                                                            \
	X(cuMemcpyAtoD)                                                                            \
	X(cuMemcpyAtoA)                                                                            \
	X(cuMemcpy3DPeer)                                                                          \
	X(cuMemcpy2DAsync)                                                                         \
	X(cuMemcpy3D)                                                                              \
	X(cuMemcpy3DAsync)                                                                         \
	X(cuMemcpyPeer)                                                                            \
	X(cuMemcpyPeerAsync)                                                                       \
	X(cuMemcpyBatchAsync)                                                                      \
	X(cuMemsetD8)                                                                              \
	X(cuMemsetD16)                                                                             \
	X(cuMemsetD32)                                                                             \
	X(cuMemsetD8Async)                                                                         \
	X(cuMemsetD16Async)                                                                        \
	X(cuMemsetD32Async)                                                                        \
	X(cuMemsetD2D8)                                                                            \
	X(cuMemsetD2D16)                                                                           \
	X(cuMemsetD2D32)                                                                           \
	X(cuMemsetD2D8Async)                                                                       \
	X(cuMemsetD2D16Async)                                                                      \
	X(cuMemsetD2D32Async)                                                                      \
	X(cuGraphLaunch)                                                                           \
	X(cuGraphUpload)                                                                           \
	X(cuStreamBeginCaptureToGraph)                                                             \
	X(cuStreamGetCaptureInfo)                                                                  \
	X(cuGraphInstantiateWithFlags)                                                             \
	X(cuGraphInstantiateWithParams)                                                            \
	X(cuGraphExecDestroy)                                                                      \
	X(cuGraphExecGetFlags)                                                                     \
	X(cuGraphExecUpdate)                                                                       \
	X(cuGraphExecKernelNodeSetParams)                                                          \
	X(cuGraphExecMemcpyNodeSetParams)                                                          \
	X(cuGraphExecMemsetNodeSetParams)                                                          \
	X(cuGraphExecHostNodeSetParams)                                                            \
	X(cuGraphExecChildGraphNodeSetParams)                                                      \
	X(cuGraphExecEventRecordNodeSetEvent)                                                      \
	X(cuGraphExecEventWaitNodeSetEvent)                                                        \
	X(cuGraphExecExternalSemaphoresSignalNodeSetParams)                                        \
	X(cuGraphExecExternalSemaphoresWaitNodeSetParams)                                          \
	X(cuGraphExecBatchMemOpNodeSetParams)                                                      \
	X(cuGraphExecNodeSetParams)                                                                \
	X(cuGraphNodeSetEnabled)                                                                   \
	X(cuGraphGetNodes)                                                                         \
	X(cuGraphNodeGetType)                                                                      \
	X(cuGraphKernelNodeGetParams)                                                              \
	X(cuGraphKernelNodeGetAttribute)                                                           \
	X(cuGraphChildGraphNodeGetGraph)                                                           \
	X(cuGraphKernelNodeSetParams)                                                              \
	X(cuGraphClone)                                                                            \
	X(cuGraphDestroy)                                                                          \
	X(cuStreamBatchMemOp)                                                                      \
	X(cuMemcpyAtoHAsync)                                                                       \
	X(cuMemcpyHtoAAsync)                                                                       \
	X(cuMemcpy3DPeerAsync)                                                                     \
	X(cuMemcpy3DBatchAsync)                                                                    \
	X(cuSignalExternalSemaphoresAsync)                                                         \
	X(cuWaitExternalSemaphoresAsync)                                                           \
	X(cuGraphicsMapResources)                                                                  \
	X(cuGraphicsUnmapResources)                                                                \
	X(cuStreamAttachMemAsync)                                                                  \
	X(cuMemMapArrayAsync)                                                                      \
	X(cuMemBatchDecompressAsync)                                                               \
	X(cuMemDiscardBatchAsync)                                                                  \
	X(cuMemDiscardAndPrefetchBatchAsync)

struct ve_real_table {
#define VE_REAL_FIELD(n) __typeof__(&n) n;
	VE_REAL_FUNCS(VE_REAL_FIELD)
#undef VE_REAL_FIELD
};

enum ve_real_id {
#define VE_REAL_ENUM(n) VE_REAL_ID_##n,
	VE_REAL_FUNCS(VE_REAL_ENUM)
#undef VE_REAL_ENUM
	VE_REAL_COUNT
};

/* Legacy-stream variants and per-thread-default-stream variants. */
extern struct ve_real_table ve__real;
extern struct ve_real_table ve__real_ptsz;

/* Set (release) once the tables are filled: a hook reads it before using
 * a table, so a call that arrives before anything else initialized the shim
 * still finds the real entry points. */
extern _Atomic int ve__real_ready_flag;
int ve__real_init(void);
static inline void ve__real_ready(void)
{
	if (!__atomic_load_n((int *)&ve__real_ready_flag, __ATOMIC_ACQUIRE))
		ve__real_init();
}

/* The CUDA 12.0-12.7 ABI of cuEventElapsedTime, which cuda.h 12.8+ maps to
 * cuEventElapsedTime_v2 (same prototype): a runtime built for those versions
 * asks cuGetProcAddress for it. NULL where the driver lacks it or cuda.h
 * names no later version. */
extern CUresult (*ve__real_elapsed_v1)(float *ms, CUevent start, CUevent end);

/* The CUDA 12.8-12.9 ABIs of the batched copies (a failIdx argument before
 * the stream), which cuda.h 13 maps to their _v2 forms: PyTorch's cu128 and
 * cu129 wheels ask for them by these names. NULL where the driver lacks them
 * or cuda.h names no later version. */
typedef CUresult (*ve__batch_v1_fn)(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				    size_t count, CUmemcpyAttributes *attrs, size_t *attrIdxs,
				    size_t numAttrs, size_t *failIdx, CUstream s);
typedef CUresult (*ve__batch3d_v1_fn)(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx,
				      unsigned long long flags, CUstream s);
extern ve__batch_v1_fn ve__real_batch_v1, ve__real_batch_v1_ptsz;
extern ve__batch3d_v1_fn ve__real_batch3d_v1, ve__real_batch3d_v1_ptsz;

/* Resolves everything once (later calls return the first result):
 * 0, or -ENOENT when no driver could be loaded (message logged). */
int ve__real_init(void);
bool ve__real_ok(void);
/* What a call of table slot 'id' returns when the slot is empty:
 * CUDA_ERROR_NOT_INITIALIZED without a driver, CUDA_ERROR_NOT_FOUND (and
 * one warning per entry point) when the driver lacks that entry point. */
CUresult ve__real_missing(int id);
/* The real dlsym, bypassing the shim's override. */
void *ve__real_dlsym(void *handle, const char *name);
/* For dlsym and what it calls first: sanitizer runtimes look their interceptors up
 * with dlsym while they initialize and find the shim's, so this code runs before
 * their shadow memory exists and must not be instrumented (SAN= builds, test_shim_*). */
#define VE_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
/* Handle of the real driver library. */
void *ve__real_libcuda(void);
/* The real cuGetProcAddress_v2. */
CUresult ve__real_getproc(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status);
/* Exported symbol of slot i in each table ("cuMemcpyHtoD_v2" and
 * "cuMemcpyHtoD_v2_ptds"): the tables are filled by these names, so every
 * pointer has exactly the prototype cuda.h gave it here. (Asking
 * cuGetProcAddress for a base name at CUDA_VERSION would not: at 13.0 it
 * returns the _v2 ABI of cuCtxSynchronize, cuCtxGetDevice, cuStreamGetCtx.) */
extern const char *const ve__real_symbols[VE_REAL_COUNT];
extern const char *const ve__real_ptsz_symbols[VE_REAL_COUNT];
/* Base name of table slot i ("cuLaunchKernel"). */
const char *ve__real_name(int id);
/* Table slot of a base name, or -1. */
int ve__real_find(const char *name);

#endif
