/* SPDX-License-Identifier: MIT */
/*
 * cuGetProcAddress: driver entry points by base name, CUDA version and
 * per-thread-default-stream flag, as libcudart (and therefore PyTorch)
 * resolves nearly all of them.
 *
 * The table maps a base name to the symbol for each CUDA version where its
 * ABI changed ("cuMemAlloc" -> cuMemAlloc_v2 from 3.2) and to the _ptsz/_ptds
 * variant used with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. Symbols
 * are looked up with dlsym() on this library's own handle, never the global
 * scope, so an LD_PRELOADed interposer does not get its own wrappers back
 * (the real driver returns its internal functions too). Every row names an
 * exported function of the fake; prog_fakecuda_selftest checks that.
 */
#include "fc_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct proc {
	const char *base;
	int version; /* first CUDA version for which this row applies */
	const char *sym;
	const char *ptds; /* per-thread variant, or NULL */
};

/* clang-format off */
#define P(b, v, s)	 {#b, v, #s, NULL}
#define PT(b, v, s, t) {#b, v, #s, #t}

/*
 * Rows of one base name are consecutive and in increasing version order.
 * Checked against the real driver (580.x, CUDA 13.0) with
 * tests/fakecuda/probe/driver_probe.c: e.g. "cuCtxGetDevice" at 13.0 is
 * cuCtxGetDevice_v2 (the (device, ctx) signature), "cuGraphInstantiate" stays
 * cuGraphInstantiate_v2 (ask for "cuGraphInstantiateWithFlags"), and the
 * _v2 names are not base names. Versions before 3.2 (the 32-bit v1 ABI)
 * are not provided.
 */
static const struct proc procs[] = {
	P(cuInit, 2000, cuInit),
	P(cuDriverGetVersion, 2020, cuDriverGetVersion),
	P(cuGetErrorName, 6000, cuGetErrorName),
	P(cuGetErrorString, 6000, cuGetErrorString),
	P(cuGetProcAddress, 11030, cuGetProcAddress),
	P(cuGetProcAddress, 12000, cuGetProcAddress_v2),

	P(cuDeviceGet, 2000, cuDeviceGet),
	P(cuDeviceGetCount, 2000, cuDeviceGetCount),
	P(cuDeviceGetName, 2000, cuDeviceGetName),
	P(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
	P(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
	P(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
	P(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
	P(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId),
	P(cuDeviceCanAccessPeer, 4000, cuDeviceCanAccessPeer),
	P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
	P(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
	P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
	P(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
	P(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
	P(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
	P(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
	P(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),

	P(cuCtxCreate, 2000, cuCtxCreate),
	P(cuCtxCreate, 3020, cuCtxCreate_v2),
	P(cuCtxCreate, 11040, cuCtxCreate_v3),
	P(cuCtxCreate, 12050, cuCtxCreate_v4),
	P(cuCtxDestroy, 2000, cuCtxDestroy),
	P(cuCtxDestroy, 4000, cuCtxDestroy_v2),
	P(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
	P(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
	P(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
	P(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
	P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
	P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
	P(cuCtxGetDevice, 2000, cuCtxGetDevice),
	P(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
	P(cuCtxGetFlags, 7000, cuCtxGetFlags),
	P(cuCtxGetId, 12000, cuCtxGetId),
	P(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion),
	P(cuCtxSynchronize, 2000, cuCtxSynchronize),
	P(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
	P(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
	P(cuCtxRecordEvent, 12050, cuCtxRecordEvent),
	P(cuCtxWaitEvent, 12050, cuCtxWaitEvent),
	P(cuCtxGetDevResource, 12040, cuCtxGetDevResource),

	P(cuMemAlloc, 3020, cuMemAlloc_v2),
	P(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
	P(cuMemFree, 3020, cuMemFree_v2),
	P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
	P(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
	P(cuMemAllocHost, 3020, cuMemAllocHost_v2),
	P(cuMemHostAlloc, 2020, cuMemHostAlloc),
	P(cuMemFreeHost, 2000, cuMemFreeHost),
	P(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
	P(cuMemHostGetFlags, 2030, cuMemHostGetFlags),
	P(cuMemHostRegister, 4000, cuMemHostRegister),
	P(cuMemHostRegister, 6050, cuMemHostRegister_v2),
	P(cuMemHostUnregister, 4000, cuMemHostUnregister),
	PT(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
	PT(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
	P(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
	P(cuPointerGetAttributes, 7000, cuPointerGetAttributes),

	PT(cuMemcpy, 4000, cuMemcpy, cuMemcpy_ptds),
	PT(cuMemcpyAsync, 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
	PT(cuMemcpyPeer, 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
	PT(cuMemcpyPeerAsync, 4000, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz),
	PT(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
	PT(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
	PT(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
	PT(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
	PT(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
	PT(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
	PT(cuMemcpy2D, 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
	PT(cuMemcpy2DUnaligned, 3020, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
	PT(cuMemcpyHtoA, 3020, cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds),
	PT(cuMemcpyAtoH, 3020, cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds),
	PT(cuMemcpyDtoA, 3020, cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds),
	PT(cuMemcpyAtoD, 3020, cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds),
	PT(cuMemcpyAtoA, 3020, cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds),
	PT(cuMemcpyHtoAAsync, 3020, cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz),
	PT(cuMemcpyAtoHAsync, 3020, cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz),
	P(cuArrayCreate, 3020, cuArrayCreate_v2),
	P(cuArrayDestroy, 2000, cuArrayDestroy),
	PT(cuMemcpy2DAsync, 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
	PT(cuMemcpy3D, 3020, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds),
	PT(cuMemcpy3DAsync, 3020, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz),
	PT(cuMemcpyBatchAsync, 12080, cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz),
	PT(cuMemcpyBatchAsync, 13000, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz),
	PT(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
	PT(cuMemsetD16, 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
	PT(cuMemsetD32, 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
	PT(cuMemsetD2D8, 3020, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds),
	PT(cuMemsetD2D16, 3020, cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds),
	PT(cuMemsetD2D32, 3020, cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds),
	PT(cuMemsetD8Async, 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
	PT(cuMemsetD16Async, 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
	PT(cuMemsetD32Async, 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
	PT(cuMemsetD2D8Async, 3020, cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz),
	PT(cuMemsetD2D16Async, 3020, cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz),
	PT(cuMemsetD2D32Async, 3020, cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz),

	P(cuModuleLoad, 2000, cuModuleLoad),
	P(cuModuleLoadData, 2000, cuModuleLoadData),
	P(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
	P(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary),
	P(cuModuleUnload, 2000, cuModuleUnload),
	P(cuModuleGetFunction, 2000, cuModuleGetFunction),
	P(cuFuncGetModule, 11000, cuFuncGetModule),
	P(cuFuncGetName, 12030, cuFuncGetName),
	P(cuFuncGetParamInfo, 12040, cuFuncGetParamInfo),
	P(cuFuncGetAttribute, 2020, cuFuncGetAttribute),
	P(cuFuncIsLoaded, 12040, cuFuncIsLoaded),
	P(cuFuncLoad, 12040, cuFuncLoad),
	P(cuFuncSetAttribute, 9000, cuFuncSetAttribute),
	P(cuFuncSetCacheConfig, 3000, cuFuncSetCacheConfig),
	P(cuLibraryLoadData, 12000, cuLibraryLoadData),
	P(cuLibraryLoadFromFile, 12000, cuLibraryLoadFromFile),
	P(cuLibraryUnload, 12000, cuLibraryUnload),
	P(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
	P(cuKernelGetFunction, 12000, cuKernelGetFunction),
	P(cuKernelGetLibrary, 12050, cuKernelGetLibrary),
	P(cuKernelGetName, 12030, cuKernelGetName),
	P(cuKernelGetParamInfo, 12040, cuKernelGetParamInfo),
	P(cuKernelGetAttribute, 12000, cuKernelGetAttribute),
	P(cuKernelSetAttribute, 12000, cuKernelSetAttribute),
	P(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050,
	  cuOccupancyMaxActiveBlocksPerMultiprocessor),
	P(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000,
	  cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
	P(cuOccupancyMaxActiveClusters, 11070, cuOccupancyMaxActiveClusters),
	PT(cuLaunchKernel, 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
	PT(cuLaunchKernelEx, 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
	PT(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel,
	   cuLaunchCooperativeKernel_ptsz),
	PT(cuLaunchHostFunc, 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),

	P(cuStreamCreate, 2000, cuStreamCreate),
	P(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
	P(cuStreamDestroy, 2000, cuStreamDestroy),
	P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
	PT(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
	PT(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz),
	PT(cuStreamWaitEvent, 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
	PT(cuStreamAddCallback, 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz),
	PT(cuStreamGetFlags, 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
	PT(cuStreamGetPriority, 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
	PT(cuStreamGetCtx, 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
	PT(cuStreamGetCtx, 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz),
	PT(cuStreamGetId, 12000, cuStreamGetId, cuStreamGetId_ptsz),
	PT(cuStreamGetDevice, 12080, cuStreamGetDevice, cuStreamGetDevice_ptsz),
	P(cuStreamGetGreenCtx, 12040, cuStreamGetGreenCtx),
	PT(cuStreamWriteValue32, 8000, cuStreamWriteValue32, cuStreamWriteValue32_ptsz),
	PT(cuStreamWriteValue32, 11070, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz),
	PT(cuStreamWaitValue32, 8000, cuStreamWaitValue32, cuStreamWaitValue32_ptsz),
	PT(cuStreamWaitValue32, 11070, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz),
	PT(cuStreamWriteValue64, 9000, cuStreamWriteValue64, cuStreamWriteValue64_ptsz),
	PT(cuStreamWriteValue64, 11070, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz),
	PT(cuStreamWaitValue64, 9000, cuStreamWaitValue64, cuStreamWaitValue64_ptsz),
	PT(cuStreamWaitValue64, 11070, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz),
	PT(cuStreamBatchMemOp, 8000, cuStreamBatchMemOp, cuStreamBatchMemOp_ptsz),
	PT(cuStreamBatchMemOp, 11070, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz),

	P(cuEventCreate, 2000, cuEventCreate),
	PT(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz),
	PT(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
	P(cuEventQuery, 2000, cuEventQuery),
	P(cuEventSynchronize, 2000, cuEventSynchronize),
	P(cuEventDestroy, 2000, cuEventDestroy),
	P(cuEventDestroy, 4000, cuEventDestroy_v2),
	P(cuEventElapsedTime, 2000, cuEventElapsedTime),
	P(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),

	PT(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
	PT(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
	PT(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
	PT(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
	PT(cuStreamGetCaptureInfo, 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
	PT(cuStreamGetCaptureInfo, 11030, cuStreamGetCaptureInfo_v2,
	   cuStreamGetCaptureInfo_v2_ptsz),
	PT(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3,
	   cuStreamGetCaptureInfo_v3_ptsz),
	P(cuGraphCreate, 10000, cuGraphCreate),
	P(cuGraphDestroy, 10000, cuGraphDestroy),
	P(cuGraphInstantiate, 10000, cuGraphInstantiate),
	P(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
	P(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
	PT(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams,
	   cuGraphInstantiateWithParams_ptsz),
	P(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
	PT(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
	PT(cuGraphUpload, 11010, cuGraphUpload, cuGraphUpload_ptsz),
	PT(cuStreamBeginCaptureToGraph, 12030, cuStreamBeginCaptureToGraph,
	   cuStreamBeginCaptureToGraph_ptsz),
	P(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
	P(cuGraphGetNodes, 10000, cuGraphGetNodes),
	P(cuGraphNodeGetType, 10000, cuGraphNodeGetType),
	P(cuGraphKernelNodeGetParams, 12000, cuGraphKernelNodeGetParams_v2),
	P(cuGraphKernelNodeSetParams, 12000, cuGraphKernelNodeSetParams_v2),
	P(cuGraphClone, 10000, cuGraphClone),
	P(cuGraphKernelNodeGetAttribute, 11000, cuGraphKernelNodeGetAttribute),
	P(cuGraphChildGraphNodeGetGraph, 10000, cuGraphChildGraphNodeGetGraph),
	P(cuGraphAddChildGraphNode, 10000, cuGraphAddChildGraphNode),
	P(cuGraphAddEmptyNode, 10000, cuGraphAddEmptyNode),
	P(cuGraphAddNode, 12020, cuGraphAddNode),
	P(cuGraphAddNode, 12030, cuGraphAddNode_v2),
	P(cuGraphConditionalHandleCreate, 12030, cuGraphConditionalHandleCreate),
	P(cuGraphExecGetFlags, 12000, cuGraphExecGetFlags),
	P(cuGraphExecUpdate, 12000, cuGraphExecUpdate_v2),

	P(cuDeviceGetDevResource, 12040, cuDeviceGetDevResource),
	P(cuDevSmResourceSplitByCount, 12040, cuDevSmResourceSplitByCount),
	P(cuDevResourceGenerateDesc, 12040, cuDevResourceGenerateDesc),
	P(cuGreenCtxCreate, 12040, cuGreenCtxCreate),
	P(cuGreenCtxDestroy, 12040, cuGreenCtxDestroy),
	P(cuCtxFromGreenCtx, 12040, cuCtxFromGreenCtx),
	P(cuGreenCtxGetDevResource, 12040, cuGreenCtxGetDevResource),
	P(cuGreenCtxRecordEvent, 12040, cuGreenCtxRecordEvent),
	P(cuGreenCtxWaitEvent, 12040, cuGreenCtxWaitEvent),
	P(cuGreenCtxStreamCreate, 12050, cuGreenCtxStreamCreate),
	P(cuGreenCtxGetId, 12090, cuGreenCtxGetId),
};
/* clang-format on */

static void *self_handle;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void self_init(void)
{
	Dl_info info;
	if (dladdr((void *)&self_init, &info) && info.dli_fname)
		self_handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!self_handle)
		fprintf(stderr, "fakecuda: cannot open its own handle: %s\n", dlerror());
}

/* The per-thread variants appeared in CUDA 7.0. */
#define FC_PTDS_VERSION 7000

/*
 * As measured on the real driver (the header documents the same): an unknown
 * name or one too new for @version returns CUDA_SUCCESS with *pfn = NULL and
 * the reason in *symbolStatus; a version above the driver's returns
 * CUDA_ERROR_INVALID_VALUE and leaves *pfn alone. With the per-thread flag a
 * function that has a per-thread variant never falls back to the legacy one:
 * below 7.0 it is VERSION_NOT_SUFFICIENT.
 */
static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (version > FC_DRIVER_VERSION ||
	    (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	const struct proc *best = NULL;
	int found = 0;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].base, symbol) != 0)
			continue;
		found = 1;
		if (procs[i].version <= version)
			best = &procs[i];
	}
	int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best && best->ptds;
	if (!best || (ptds && version < FC_PTDS_VERSION)) {
		if (status)
			*status = found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
					: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_SUCCESS;
	}
	/* "If a per-thread version is not found, the API will return the legacy
	 * version of the driver function." */
	const char *name = ptds ? best->ptds : best->sym;
	pthread_once(&self_once, self_init);
	void *fn = self_handle ? dlsym(self_handle, name) : NULL;
	if (status)
		*status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	*pfn = fn;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	FC_ENTER_ANY();
	return get_proc(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	FC_ENTER_ANY();
	return get_proc(symbol, pfn, cudaVersion, flags, symbolStatus);
}
