/* SPDX-License-Identifier: MIT */
/*
 * driver_probe: prints how the CUDA driver answers the edge cases the fake
 * libcuda models (return codes, values, cuGetProcAddress resolution), one
 * "key: value" line each, so the real driver on a GPU machine and the fake
 * can be compared with diff:
 *
 *   cc -std=c11 -D_GNU_SOURCE -I$CUDA_HOME/include driver_probe.c -o driver_probe \
 *      -L$CUDA_HOME/lib64/stubs -lcuda -ldl -lpthread
 *   ./driver_probe > real.txt                               # on the GPU machine
 *   LD_LIBRARY_PATH=$BUILD/fakecuda ./driver_probe > fake.txt  # anywhere
 *
 * Its kernels are PTX for the real driver; under the fake (detected by
 * fakecuda_register_kernel being present) host stand-ins of the same names
 * and parameter layout are registered. Not built by the Makefile; it is a
 * calibration tool, and the last section deliberately faults the GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

static const char *en(CUresult r)
{
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "?";
	return s;
}

#define R(key, call)	 printf("%s: %s\n", key, en(call))
#define V(key, fmt, ...) printf("%s: " fmt "\n", key, __VA_ARGS__)

static const char ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry k_empty()\n"
    "{\n"
    "	ret;\n"
    "}\n"
    ".visible .entry k_params(.param .u8 p0, .param .f64 p1, .param .u32 p2,\n"
    "	.param .align 4 .b8 p3[12], .param .u64 p4, .param .u16 p5)\n"
    "{\n"
    "	ret;\n"
    "}\n"
    ".visible .entry k_sleep(.param .u32 n)\n"
    "{\n"
    "	.reg .u32 %r<3>;\n"
    "	.reg .pred %p;\n"
    "	ld.param.u32 %r1, [n];\n"
    "	mov.u32 %r2, 0;\n"
    "L:\n"
    "	nanosleep.u32 1000000;\n"
    "	add.u32 %r2, %r2, 1;\n"
    "	setp.lt.u32 %p, %r2, %r1;\n"
    "	@%p bra L;\n"
    "	ret;\n"
    "}\n"
    ".visible .entry k_fault()\n"
    "{\n"
    "	.reg .u64 %rd<2>;\n"
    "	.reg .u32 %r<2>;\n"
    "	mov.u64 %rd1, 0;\n"
    "	mov.u32 %r1, 1;\n"
    "	st.global.u32 [%rd1], %r1;\n"
    "	ret;\n"
    "}\n";

/* Host stand-ins when running against the fake. */
struct fexec;
typedef int (*fkern)(void *const *params, const struct fexec *e);
static int h_empty(void *const *p, const struct fexec *e)
{
	return 0;
}
static int h_sleep(void *const *p, const struct fexec *e)
{
	unsigned ms = *(const unsigned *)p[0];
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	return 0;
}
static int h_fault(void *const *p, const struct fexec *e)
{
	return 1;
}

static int is_fake;

static void register_fakes(void)
{
	int (*reg)(const char *, fkern, uint32_t, const size_t *) =
	    (int (*)(const char *, fkern, uint32_t, const size_t *))dlsym(
		RTLD_DEFAULT, "fakecuda_register_kernel");
	if (!reg)
		return;
	is_fake = 1;
	static const size_t params_sz[] = {1, 8, 4, 12, 8, 2}, sleep_sz[] = {4};
	reg("k_empty", h_empty, 0, NULL);
	reg("k_params", h_empty, 6, params_sz);
	reg("k_sleep", h_sleep, 1, sleep_sz);
	reg("k_fault", h_fault, 0, NULL);
}

struct q {
	const char *base;
	int version;
};
static const struct q queries[] = {
    {"cuInit", 2000},
    {"cuInit", 13000},
    {"cuDriverGetVersion", 2020},
    {"cuDriverGetVersion", 13000},
    {"cuGetErrorName", 6000},
    {"cuGetErrorName", 13000},
    {"cuGetErrorString", 6000},
    {"cuGetErrorString", 13000},
    {"cuGetProcAddress", 11030},
    {"cuGetProcAddress", 13000},
    {"cuGetProcAddress", 12000},
    {"cuDeviceGet", 2000},
    {"cuDeviceGet", 13000},
    {"cuDeviceGetCount", 2000},
    {"cuDeviceGetCount", 13000},
    {"cuDeviceGetName", 2000},
    {"cuDeviceGetName", 13000},
    {"cuDeviceGetUuid", 9020},
    {"cuDeviceGetUuid", 13000},
    {"cuDeviceGetUuid", 11040},
    {"cuDeviceTotalMem", 3020},
    {"cuDeviceTotalMem", 13000},
    {"cuDeviceGetAttribute", 2000},
    {"cuDeviceGetAttribute", 13000},
    {"cuDeviceGetPCIBusId", 4010},
    {"cuDeviceGetPCIBusId", 13000},
    {"cuDeviceCanAccessPeer", 4000},
    {"cuDeviceCanAccessPeer", 13000},
    {"cuDevicePrimaryCtxRetain", 7000},
    {"cuDevicePrimaryCtxRetain", 13000},
    {"cuDevicePrimaryCtxRelease", 7000},
    {"cuDevicePrimaryCtxRelease", 13000},
    {"cuDevicePrimaryCtxRelease", 11000},
    {"cuDevicePrimaryCtxReset", 7000},
    {"cuDevicePrimaryCtxReset", 13000},
    {"cuDevicePrimaryCtxReset", 11000},
    {"cuDevicePrimaryCtxSetFlags", 7000},
    {"cuDevicePrimaryCtxSetFlags", 13000},
    {"cuDevicePrimaryCtxSetFlags", 11000},
    {"cuDevicePrimaryCtxGetState", 7000},
    {"cuDevicePrimaryCtxGetState", 13000},
    {"cuCtxCreate", 2000},
    {"cuCtxCreate", 13000},
    {"cuCtxCreate", 3020},
    {"cuCtxCreate", 11040},
    {"cuCtxCreate", 12050},
    {"cuCtxDestroy", 2000},
    {"cuCtxDestroy", 13000},
    {"cuCtxDestroy", 4000},
    {"cuCtxPushCurrent", 2000},
    {"cuCtxPushCurrent", 13000},
    {"cuCtxPushCurrent", 4000},
    {"cuCtxPopCurrent", 2000},
    {"cuCtxPopCurrent", 13000},
    {"cuCtxPopCurrent", 4000},
    {"cuCtxGetCurrent", 4000},
    {"cuCtxGetCurrent", 13000},
    {"cuCtxSetCurrent", 4000},
    {"cuCtxSetCurrent", 13000},
    {"cuCtxGetDevice", 2000},
    {"cuCtxGetDevice", 13000},
    {"cuCtxGetDevice_v2", 13000},
    {"cuCtxGetFlags", 7000},
    {"cuCtxGetFlags", 13000},
    {"cuCtxGetId", 12000},
    {"cuCtxGetId", 13000},
    {"cuCtxGetApiVersion", 3020},
    {"cuCtxGetApiVersion", 13000},
    {"cuCtxSynchronize", 2000},
    {"cuCtxSynchronize", 13000},
    {"cuCtxSynchronize_v2", 13000},
    {"cuCtxGetStreamPriorityRange", 5050},
    {"cuCtxGetStreamPriorityRange", 13000},
    {"cuCtxRecordEvent", 12050},
    {"cuCtxRecordEvent", 13000},
    {"cuCtxWaitEvent", 12050},
    {"cuCtxWaitEvent", 13000},
    {"cuCtxGetDevResource", 12040},
    {"cuCtxGetDevResource", 13000},
    {"cuMemAlloc", 3020},
    {"cuMemAlloc", 13000},
    {"cuMemAllocPitch", 3020},
    {"cuMemAllocPitch", 13000},
    {"cuMemFree", 3020},
    {"cuMemFree", 13000},
    {"cuMemGetInfo", 3020},
    {"cuMemGetInfo", 13000},
    {"cuMemGetAddressRange", 3020},
    {"cuMemGetAddressRange", 13000},
    {"cuMemAllocHost", 3020},
    {"cuMemAllocHost", 13000},
    {"cuMemHostAlloc", 2020},
    {"cuMemHostAlloc", 13000},
    {"cuMemFreeHost", 2000},
    {"cuMemFreeHost", 13000},
    {"cuMemHostGetDevicePointer", 3020},
    {"cuMemHostGetDevicePointer", 13000},
    {"cuMemHostGetFlags", 2030},
    {"cuMemHostGetFlags", 13000},
    {"cuMemHostRegister", 4000},
    {"cuMemHostRegister", 13000},
    {"cuMemHostRegister", 6050},
    {"cuMemHostUnregister", 4000},
    {"cuMemHostUnregister", 13000},
    {"cuMemAllocAsync", 11020},
    {"cuMemAllocAsync", 13000},
    {"cuMemFreeAsync", 11020},
    {"cuMemFreeAsync", 13000},
    {"cuPointerGetAttribute", 4000},
    {"cuPointerGetAttribute", 13000},
    {"cuPointerGetAttributes", 7000},
    {"cuPointerGetAttributes", 13000},
    {"cuMemcpy", 4000},
    {"cuMemcpy", 13000},
    {"cuMemcpyAsync", 4000},
    {"cuMemcpyAsync", 13000},
    {"cuMemcpyPeer", 4000},
    {"cuMemcpyPeer", 13000},
    {"cuMemcpyPeerAsync", 4000},
    {"cuMemcpyPeerAsync", 13000},
    {"cuMemcpyHtoD", 3020},
    {"cuMemcpyHtoD", 13000},
    {"cuMemcpyDtoH", 3020},
    {"cuMemcpyDtoH", 13000},
    {"cuMemcpyDtoD", 3020},
    {"cuMemcpyDtoD", 13000},
    {"cuMemcpyHtoDAsync", 3020},
    {"cuMemcpyHtoDAsync", 13000},
    {"cuMemcpyDtoHAsync", 3020},
    {"cuMemcpyDtoHAsync", 13000},
    {"cuMemcpyDtoDAsync", 3020},
    {"cuMemcpyDtoDAsync", 13000},
    {"cuMemcpy2D", 3020},
    {"cuMemcpy2D", 13000},
    {"cuMemcpy2DUnaligned", 3020},
    {"cuMemcpy2DUnaligned", 13000},
    {"cuMemcpy2DAsync", 3020},
    {"cuMemcpy2DAsync", 13000},
    {"cuMemcpy3D", 3020},
    {"cuMemcpy3D", 13000},
    {"cuMemcpy3DAsync", 3020},
    {"cuMemcpy3DAsync", 13000},
    {"cuMemcpyBatchAsync", 12080},
    {"cuMemcpyBatchAsync", 13000},
    {"cuMemsetD8", 3020},
    {"cuMemsetD8", 13000},
    {"cuMemsetD16", 3020},
    {"cuMemsetD16", 13000},
    {"cuMemsetD32", 3020},
    {"cuMemsetD32", 13000},
    {"cuMemsetD2D8", 3020},
    {"cuMemsetD2D8", 13000},
    {"cuMemsetD2D16", 3020},
    {"cuMemsetD2D16", 13000},
    {"cuMemsetD2D32", 3020},
    {"cuMemsetD2D32", 13000},
    {"cuMemsetD8Async", 3020},
    {"cuMemsetD8Async", 13000},
    {"cuMemsetD16Async", 3020},
    {"cuMemsetD16Async", 13000},
    {"cuMemsetD32Async", 3020},
    {"cuMemsetD32Async", 13000},
    {"cuMemsetD2D8Async", 3020},
    {"cuMemsetD2D8Async", 13000},
    {"cuMemsetD2D16Async", 3020},
    {"cuMemsetD2D16Async", 13000},
    {"cuMemsetD2D32Async", 3020},
    {"cuMemsetD2D32Async", 13000},
    {"cuModuleLoad", 2000},
    {"cuModuleLoad", 13000},
    {"cuModuleLoadData", 2000},
    {"cuModuleLoadData", 13000},
    {"cuModuleLoadDataEx", 2010},
    {"cuModuleLoadDataEx", 13000},
    {"cuModuleLoadFatBinary", 2000},
    {"cuModuleLoadFatBinary", 13000},
    {"cuModuleUnload", 2000},
    {"cuModuleUnload", 13000},
    {"cuModuleGetFunction", 2000},
    {"cuModuleGetFunction", 13000},
    {"cuFuncGetModule", 11000},
    {"cuFuncGetModule", 13000},
    {"cuFuncGetName", 12030},
    {"cuFuncGetName", 13000},
    {"cuFuncGetParamInfo", 12040},
    {"cuFuncGetParamInfo", 13000},
    {"cuFuncGetAttribute", 2020},
    {"cuFuncGetAttribute", 13000},
    {"cuFuncSetAttribute", 9000},
    {"cuFuncSetAttribute", 13000},
    {"cuFuncSetCacheConfig", 3000},
    {"cuFuncSetCacheConfig", 13000},
    {"cuLibraryLoadData", 12000},
    {"cuLibraryLoadData", 13000},
    {"cuLibraryLoadFromFile", 12000},
    {"cuLibraryLoadFromFile", 13000},
    {"cuLibraryUnload", 12000},
    {"cuLibraryUnload", 13000},
    {"cuLibraryGetKernel", 12000},
    {"cuLibraryGetKernel", 13000},
    {"cuKernelGetFunction", 12000},
    {"cuKernelGetFunction", 13000},
    {"cuKernelGetLibrary", 12050},
    {"cuKernelGetLibrary", 13000},
    {"cuKernelGetName", 12030},
    {"cuKernelGetName", 13000},
    {"cuKernelGetParamInfo", 12040},
    {"cuKernelGetParamInfo", 13000},
    {"cuKernelGetAttribute", 12000},
    {"cuKernelGetAttribute", 13000},
    {"cuKernelSetAttribute", 12000},
    {"cuKernelSetAttribute", 13000},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 13000},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 13000},
    {"cuLaunchKernel", 4000},
    {"cuLaunchKernel", 13000},
    {"cuLaunchKernelEx", 11060},
    {"cuLaunchKernelEx", 13000},
    {"cuLaunchCooperativeKernel", 9000},
    {"cuLaunchCooperativeKernel", 13000},
    {"cuLaunchHostFunc", 10000},
    {"cuLaunchHostFunc", 13000},
    {"cuStreamCreate", 2000},
    {"cuStreamCreate", 13000},
    {"cuStreamCreateWithPriority", 5050},
    {"cuStreamCreateWithPriority", 13000},
    {"cuStreamDestroy", 2000},
    {"cuStreamDestroy", 13000},
    {"cuStreamDestroy", 4000},
    {"cuStreamSynchronize", 2000},
    {"cuStreamSynchronize", 13000},
    {"cuStreamQuery", 2000},
    {"cuStreamQuery", 13000},
    {"cuStreamWaitEvent", 3020},
    {"cuStreamWaitEvent", 13000},
    {"cuStreamAddCallback", 5000},
    {"cuStreamAddCallback", 13000},
    {"cuStreamGetFlags", 5050},
    {"cuStreamGetFlags", 13000},
    {"cuStreamGetPriority", 5050},
    {"cuStreamGetPriority", 13000},
    {"cuStreamGetCtx", 9020},
    {"cuStreamGetCtx", 13000},
    {"cuStreamGetCtx_v2", 12050},
    {"cuStreamGetCtx_v2", 13000},
    {"cuStreamGetId", 12000},
    {"cuStreamGetId", 13000},
    {"cuStreamGetDevice", 12080},
    {"cuStreamGetDevice", 13000},
    {"cuStreamGetGreenCtx", 12040},
    {"cuStreamGetGreenCtx", 13000},
    {"cuStreamWriteValue32", 8000},
    {"cuStreamWriteValue32", 13000},
    {"cuStreamWriteValue32", 11070},
    {"cuStreamWaitValue32", 8000},
    {"cuStreamWaitValue32", 13000},
    {"cuStreamWaitValue32", 11070},
    {"cuStreamWriteValue64", 9000},
    {"cuStreamWriteValue64", 13000},
    {"cuStreamWriteValue64", 11070},
    {"cuStreamWaitValue64", 9000},
    {"cuStreamWaitValue64", 13000},
    {"cuStreamWaitValue64", 11070},
    {"cuStreamBatchMemOp", 8000},
    {"cuStreamBatchMemOp", 13000},
    {"cuStreamBatchMemOp", 11070},
    {"cuEventCreate", 2000},
    {"cuEventCreate", 13000},
    {"cuEventRecord", 2000},
    {"cuEventRecord", 13000},
    {"cuEventRecordWithFlags", 11010},
    {"cuEventRecordWithFlags", 13000},
    {"cuEventQuery", 2000},
    {"cuEventQuery", 13000},
    {"cuEventSynchronize", 2000},
    {"cuEventSynchronize", 13000},
    {"cuEventDestroy", 2000},
    {"cuEventDestroy", 13000},
    {"cuEventDestroy", 4000},
    {"cuEventElapsedTime", 2000},
    {"cuEventElapsedTime", 13000},
    {"cuEventElapsedTime", 12080},
    {"cuStreamBeginCapture", 10000},
    {"cuStreamBeginCapture", 13000},
    {"cuStreamBeginCapture", 10010},
    {"cuStreamEndCapture", 10000},
    {"cuStreamEndCapture", 13000},
    {"cuStreamIsCapturing", 10000},
    {"cuStreamIsCapturing", 13000},
    {"cuStreamGetCaptureInfo", 10010},
    {"cuStreamGetCaptureInfo", 13000},
    {"cuStreamGetCaptureInfo", 11030},
    {"cuStreamGetCaptureInfo", 12030},
    {"cuGraphCreate", 10000},
    {"cuGraphCreate", 13000},
    {"cuGraphDestroy", 10000},
    {"cuGraphDestroy", 13000},
    {"cuGraphInstantiate", 10000},
    {"cuGraphInstantiate", 13000},
    {"cuGraphInstantiate", 11000},
    {"cuGraphInstantiate", 12000},
    {"cuGraphInstantiateWithFlags", 11040},
    {"cuGraphInstantiateWithFlags", 13000},
    {"cuGraphInstantiateWithParams", 12000},
    {"cuGraphInstantiateWithParams", 13000},
    {"cuGraphExecDestroy", 10000},
    {"cuGraphExecDestroy", 13000},
    {"cuGraphLaunch", 10000},
    {"cuGraphLaunch", 13000},
    {"cuGraphUpload", 11010},
    {"cuGraphUpload", 13000},
    {"cuDeviceGetDevResource", 12040},
    {"cuDeviceGetDevResource", 13000},
    {"cuDevSmResourceSplitByCount", 12040},
    {"cuDevSmResourceSplitByCount", 13000},
    {"cuDevResourceGenerateDesc", 12040},
    {"cuDevResourceGenerateDesc", 13000},
    {"cuGreenCtxCreate", 12040},
    {"cuGreenCtxCreate", 13000},
    {"cuGreenCtxDestroy", 12040},
    {"cuGreenCtxDestroy", 13000},
    {"cuCtxFromGreenCtx", 12040},
    {"cuCtxFromGreenCtx", 13000},
    {"cuGreenCtxGetDevResource", 12040},
    {"cuGreenCtxGetDevResource", 13000},
    {"cuGreenCtxRecordEvent", 12040},
    {"cuGreenCtxRecordEvent", 13000},
    {"cuGreenCtxWaitEvent", 12040},
    {"cuGreenCtxWaitEvent", 13000},
    {"cuGreenCtxStreamCreate", 12050},
    {"cuGreenCtxStreamCreate", 13000},
    {"cuGreenCtxGetId", 12090},
    {"cuGreenCtxGetId", 13000},
    {"cuDriverGetVersion", 2010},
    {"cuGetErrorName", 5990},
    {"cuGetErrorString", 5990},
    {"cuGetProcAddress", 11020},
    {"cuDeviceGetUuid", 9010},
    {"cuDeviceTotalMem", 3010},
    {"cuDeviceGetPCIBusId", 4000},
    {"cuDeviceCanAccessPeer", 3990},
    {"cuDevicePrimaryCtxRetain", 6990},
    {"cuDevicePrimaryCtxRelease", 6990},
    {"cuDevicePrimaryCtxReset", 6990},
    {"cuDevicePrimaryCtxSetFlags", 6990},
    {"cuDevicePrimaryCtxGetState", 6990},
    {"cuCtxGetCurrent", 3990},
    {"cuCtxSetCurrent", 3990},
    {"cuCtxGetDevice_v2", 12990},
    {"cuCtxGetFlags", 6990},
    {"cuCtxGetId", 11990},
    {"cuCtxGetApiVersion", 3010},
    {"cuCtxSynchronize_v2", 12990},
    {"cuCtxGetStreamPriorityRange", 5040},
    {"cuCtxRecordEvent", 12040},
    {"cuCtxWaitEvent", 12040},
    {"cuCtxGetDevResource", 12030},
    {"cuMemAlloc", 3010},
    {"cuMemAllocPitch", 3010},
    {"cuMemFree", 3010},
    {"cuMemGetInfo", 3010},
    {"cuMemGetAddressRange", 3010},
    {"cuMemAllocHost", 3010},
    {"cuMemHostAlloc", 2010},
    {"cuMemHostGetDevicePointer", 3010},
    {"cuMemHostGetFlags", 2020},
    {"cuMemHostRegister", 3990},
    {"cuMemHostUnregister", 3990},
    {"cuMemAllocAsync", 11010},
    {"cuMemFreeAsync", 11010},
    {"cuPointerGetAttribute", 3990},
    {"cuPointerGetAttributes", 6990},
    {"cuMemcpy", 3990},
    {"cuMemcpyAsync", 3990},
    {"cuMemcpyPeer", 3990},
    {"cuMemcpyPeerAsync", 3990},
    {"cuMemcpyHtoD", 3010},
    {"cuMemcpyDtoH", 3010},
    {"cuMemcpyDtoD", 3010},
    {"cuMemcpyHtoDAsync", 3010},
    {"cuMemcpyDtoHAsync", 3010},
    {"cuMemcpyDtoDAsync", 3010},
    {"cuMemcpy2D", 3010},
    {"cuMemcpy2DUnaligned", 3010},
    {"cuMemcpy2DAsync", 3010},
    {"cuMemcpy3D", 3010},
    {"cuMemcpy3DAsync", 3010},
    {"cuMemcpyBatchAsync", 12070},
    {"cuMemsetD8", 3010},
    {"cuMemsetD16", 3010},
    {"cuMemsetD32", 3010},
    {"cuMemsetD2D8", 3010},
    {"cuMemsetD2D16", 3010},
    {"cuMemsetD2D32", 3010},
    {"cuMemsetD8Async", 3010},
    {"cuMemsetD16Async", 3010},
    {"cuMemsetD32Async", 3010},
    {"cuMemsetD2D8Async", 3010},
    {"cuMemsetD2D16Async", 3010},
    {"cuMemsetD2D32Async", 3010},
    {"cuModuleLoadDataEx", 2000},
    {"cuFuncGetModule", 10990},
    {"cuFuncGetName", 12020},
    {"cuFuncGetParamInfo", 12030},
    {"cuFuncGetAttribute", 2010},
    {"cuFuncSetAttribute", 8990},
    {"cuFuncSetCacheConfig", 2990},
    {"cuLibraryLoadData", 11990},
    {"cuLibraryLoadFromFile", 11990},
    {"cuLibraryUnload", 11990},
    {"cuLibraryGetKernel", 11990},
    {"cuKernelGetFunction", 11990},
    {"cuKernelGetLibrary", 12040},
    {"cuKernelGetName", 12020},
    {"cuKernelGetParamInfo", 12030},
    {"cuKernelGetAttribute", 11990},
    {"cuKernelSetAttribute", 11990},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6040},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 6990},
    {"cuLaunchKernel", 3990},
    {"cuLaunchKernelEx", 11050},
    {"cuLaunchCooperativeKernel", 8990},
    {"cuLaunchHostFunc", 9990},
    {"cuStreamCreateWithPriority", 5040},
    {"cuStreamWaitEvent", 3010},
    {"cuStreamAddCallback", 4990},
    {"cuStreamGetFlags", 5040},
    {"cuStreamGetPriority", 5040},
    {"cuStreamGetCtx", 9010},
    {"cuStreamGetCtx_v2", 12040},
    {"cuStreamGetId", 11990},
    {"cuStreamGetDevice", 12070},
    {"cuStreamGetGreenCtx", 12030},
    {"cuStreamWriteValue32", 7990},
    {"cuStreamWaitValue32", 7990},
    {"cuStreamWriteValue64", 8990},
    {"cuStreamWaitValue64", 8990},
    {"cuStreamBatchMemOp", 7990},
    {"cuEventRecordWithFlags", 11000},
    {"cuStreamBeginCapture", 9990},
    {"cuStreamEndCapture", 9990},
    {"cuStreamIsCapturing", 9990},
    {"cuStreamGetCaptureInfo", 10000},
    {"cuGraphCreate", 9990},
    {"cuGraphDestroy", 9990},
    {"cuGraphInstantiate", 9990},
    {"cuGraphInstantiateWithFlags", 11030},
    {"cuGraphInstantiateWithParams", 11990},
    {"cuGraphExecDestroy", 9990},
    {"cuGraphLaunch", 9990},
    {"cuGraphUpload", 11000},
    {"cuDeviceGetDevResource", 12030},
    {"cuDevSmResourceSplitByCount", 12030},
    {"cuDevResourceGenerateDesc", 12030},
    {"cuGreenCtxCreate", 12030},
    {"cuGreenCtxDestroy", 12030},
    {"cuCtxFromGreenCtx", 12030},
    {"cuGreenCtxGetDevResource", 12030},
    {"cuGreenCtxRecordEvent", 12030},
    {"cuGreenCtxWaitEvent", 12030},
    {"cuGreenCtxStreamCreate", 12040},
    {"cuGreenCtxGetId", 12080},
    {"cuStreamGetCtx", 12050},
    {"cuStreamGetCtx", 12040},
    {"cuCtxGetDevice", 12090},
};

static void probe_procaddr(void *lib)
{
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		for (int pt = 0; pt < 2; pt++) {
			void *p = (void *)1;
			CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
			CUresult r =
			    cuGetProcAddress(queries[i].base, &p, queries[i].version,
					     pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
						: CU_GET_PROC_ADDRESS_DEFAULT,
					     &st);
			Dl_info info;
			const char *name = "-";
			if (r == CUDA_SUCCESS && p && p != (void *)1 && dladdr(p, &info) &&
			    info.dli_sname && info.dli_saddr == p)
				name = info.dli_sname;
			else if (r == CUDA_SUCCESS && p && p != (void *)1)
				name = "(unnamed)";
			printf("procaddr %s@%d%s: %s st=%d p=%s\n", queries[i].base,
			       queries[i].version, pt ? "+ptds" : "", en(r), (int)st,
			       p == NULL	? "NULL"
			       : p == (void *)1 ? "untouched"
						: name);
		}
	}
	void *p = (void *)1;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
	CUresult r = cuGetProcAddress("cuNoSuchFunction", &p, 12000, 0, &st);
	printf("procaddr unknown: %s st=%d p=%s\n", en(r), (int)st, p ? "set" : "NULL");
	p = (void *)1;
	r = cuGetProcAddress("cuInit", &p, 99000, 0, &st);
	printf("procaddr future version: %s st=%d p=%s\n", en(r), (int)st, p ? "set" : "NULL");
	p = (void *)1;
	r = cuGetProcAddress("cuInit", &p, 12000, 4, &st);
	printf("procaddr bad flags: %s\n", en(r));
	(void)lib;
}

static void probe_attrs(CUdevice dev)
{
	for (int a = 1; a < 150; a++) {
		int v = -12345;
		CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
		printf("attr %d: %s %d\n", a, en(r), v);
	}
	int v;
	R("attr 100000", cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, dev));
	char name[128];
	cuDeviceGetName(name, sizeof(name), dev);
	printf("name: %s\n", name);
	size_t mem = 0;
	cuDeviceTotalMem(&mem, dev);
	printf("totalmem MiB: %zu\n", mem >> 20);
	int lo = 99, hi = 99;
	R("prio range", cuCtxGetStreamPriorityRange(&lo, &hi));
	V("prio range values", "%d %d", lo, hi);
	int dv = 0;
	cuDriverGetVersion(&dv);
	V("driver version", "%d", dv);
	static const CUresult errs[] = {CUDA_SUCCESS,
					CUDA_ERROR_INVALID_VALUE,
					CUDA_ERROR_NOT_READY,
					CUDA_ERROR_ILLEGAL_ADDRESS,
					CUDA_ERROR_INVALID_HANDLE,
					CUDA_ERROR_NOT_FOUND,
					CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
					CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
					CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
					CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
					CUDA_ERROR_NOT_PERMITTED,
					CUDA_ERROR_CONTEXT_IS_DESTROYED,
					CUDA_ERROR_INVALID_CONTEXT,
					CUDA_ERROR_NOT_INITIALIZED};
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const char *s = NULL;
		cuGetErrorString(errs[i], &s);
		printf("errstr %s: %s\n", en(errs[i]), s ? s : "NULL");
	}
	const char *s = (const char *)1;
	R("errname 12345", cuGetErrorName((CUresult)12345, &s));
	printf("errname 12345 str: %s\n", s == NULL		 ? "NULL"
					  : s == (const char *)1 ? "untouched"
								 : s);
}

static CUfunction f_empty, f_params, f_sleep, f_fault;

static void sleep_k(CUstream s, unsigned ms)
{
	void *a[] = {&ms};
	CUresult r = cuLaunchKernel(f_sleep, 1, 1, 1, 1, 1, 1, 0, s, a, NULL);
	if (r)
		printf("sleep launch: %s\n", en(r));
}

static void probe_events(void)
{
	CUevent a, b, nt, ip;
	CUstream s;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuEventCreate(&a, 0);
	cuEventCreate(&b, 0);
	cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING);
	R("event interprocess without disable_timing", cuEventCreate(&ip, CU_EVENT_INTERPROCESS));
	R("event bad flags", cuEventCreate(&ip, 0x100));
	float ms = -1;
	R("event query never recorded", cuEventQuery(a));
	R("event sync never recorded", cuEventSynchronize(a));
	R("elapsed never recorded", cuEventElapsedTime(&ms, a, b));
	cuEventRecord(a, s);
	R("elapsed one recorded", cuEventElapsedTime(&ms, a, b));
	sleep_k(s, 50);
	cuEventRecord(b, s);
	R("event query pending", cuEventQuery(b));
	R("elapsed pending", cuEventElapsedTime(&ms, a, b));
	R("event sync", cuEventSynchronize(b));
	R("elapsed done", cuEventElapsedTime(&ms, a, b));
	V("elapsed >= 45ms", "%d", ms >= 45.0f);
	cuEventRecord(nt, s);
	cuStreamSynchronize(s);
	R("elapsed disable timing", cuEventElapsedTime(&ms, a, nt));
	R("elapsed disable timing first", cuEventElapsedTime(&ms, nt, b));
	R("record bad flags", cuEventRecordWithFlags(a, s, 0x40));
	R("record external outside capture",
	  cuEventRecordWithFlags(a, s, CU_EVENT_RECORD_EXTERNAL));
	R("wait bad flags", cuStreamWaitEvent(s, a, 0x40));
	R("wait never recorded", cuStreamWaitEvent(s, ip == NULL ? a : a, 0));
	cuStreamSynchronize(s);
	cuEventDestroy(a);
	cuEventDestroy(b);
	cuEventDestroy(nt);
	cuStreamDestroy(s);
}

static void probe_memory(void)
{
	CUdeviceptr d = 0, d2;
	R("memalloc 0", cuMemAlloc(&d2, 0));
	R("memfree 0", cuMemFree(0));
	cuMemAlloc(&d, 4096);
	V("memalloc align 256", "%d", (int)(d % 256 == 0));
	R("memfree interior", cuMemFree(d + 16));
	size_t pitch = 0;
	R("allocpitch 100x10x4", cuMemAllocPitch(&d2, &pitch, 100, 10, 4));
	V("allocpitch pitch", "%zu", pitch);
	cuMemFree(d2);
	R("allocpitch elem 3", cuMemAllocPitch(&d2, &pitch, 100, 10, 3));
	char *pg = malloc(8192);
	memset(pg, 0, 8192);
	unsigned int mt = 77;
	R("ptrattr pageable memtype",
	  cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)pg));
	unsigned int word = 0xffffffffu;
	R("ptrattr is_managed", cuPointerGetAttribute(&word, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
	V("ptrattr is_managed word", "%08x", word);
	word = 0xffffffffu;
	R("ptrattr mapped", cuPointerGetAttribute(&word, CU_POINTER_ATTRIBUTE_MAPPED, d));
	V("ptrattr mapped word", "%08x", word);
	word = 0xffffffffu;
	R("ptrattr sync_memops", cuPointerGetAttribute(&word, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
	V("ptrattr sync_memops word", "%08x", word);
	word = 0xffffffffu;
	R("ptrattr ipc capable",
	  cuPointerGetAttribute(&word, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
	V("ptrattr ipc capable word", "%08x", word);
	void *hp = (void *)1;
	R("ptrattr device hostptr",
	  cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
	V("ptrattr device hostptr value", "%s",
	  hp == NULL	    ? "NULL"
	  : hp == (void *)1 ? "untouched"
			    : "set");
	CUdeviceptr rs = 0;
	R("ptrattr range start",
	  cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 100));
	V("ptrattr range start ok", "%d", rs == d);
	size_t rsz = 0;
	R("ptrattr range size",
	  cuPointerGetAttribute(&rsz, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 100));
	V("ptrattr range size value", "%zu", rsz);
	{
		CUpointer_attribute at[6] = {
		    CU_POINTER_ATTRIBUTE_MEMORY_TYPE,	 CU_POINTER_ATTRIBUTE_CONTEXT,
		    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_IS_MANAGED,
		    CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER};
		unsigned int m = 77, man = 0xffffffffu;
		CUcontext c = (CUcontext)1;
		int ord = 77;
		CUdeviceptr dp = 1;
		void *hptr = (void *)1;
		void *data[6] = {&m, &c, &ord, &man, &dp, &hptr};
		R("ptrattrs pageable",
		  cuPointerGetAttributes(6, at, data, (CUdeviceptr)(uintptr_t)pg));
		printf("ptrattrs pageable values: memtype=%u ctx=%s ordinal=%d managed=%08x "
		       "dptr=%llx hptr=%s\n",
		       m, c ? "set" : "NULL", ord, man, (unsigned long long)dp,
		       hptr == NULL	    ? "NULL"
		       : hptr == (void *)pg ? "same"
					    : "other");
		m = 77;
		hptr = (void *)1;
		R("ptrattrs device", cuPointerGetAttributes(6, at, data, d));
		printf("ptrattrs device values: memtype=%u ordinal=%d managed=%08x dptr_same=%d "
		       "hptr=%s\n",
		       m, ord, man, dp == d,
		       hptr == NULL	   ? "NULL"
		       : hptr == (void *)1 ? "untouched"
					   : "set");
	}
	R("hostregister", cuMemHostRegister(pg, 8192, 0));
	R("hostregister again", cuMemHostRegister(pg + 4096, 4096, 0));
	mt = 77;
	R("ptrattr registered memtype", cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
							      (CUdeviceptr)(uintptr_t)(pg + 16)));
	V("ptrattr registered memtype value", "%u", mt);
	CUdeviceptr dv = 0;
	R("hostgetdeviceptr registered", cuMemHostGetDevicePointer(&dv, pg + 16, 0));
	V("hostgetdeviceptr registered same", "%d", dv == (CUdeviceptr)(uintptr_t)(pg + 16));
	R("hostgetdeviceptr flags", cuMemHostGetDevicePointer(&dv, pg, 1));
	R("hostunregister interior", cuMemHostUnregister(pg + 16));
	R("hostunregister", cuMemHostUnregister(pg));
	R("hostunregister again", cuMemHostUnregister(pg));
	R("hostgetdeviceptr pageable", cuMemHostGetDevicePointer(&dv, pg, 0));
	void *pin = NULL;
	R("hostalloc bad flags", cuMemHostAlloc(&pin, 64, 0x100));
	cuMemHostAlloc(&pin, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	R("freehost pageable", cuMemFreeHost(pg));
	R("htod pageable dst", cuMemcpyHtoD((CUdeviceptr)(uintptr_t)pg, pin, 16));
	R("htod out of range", cuMemcpyHtoD(d + 4096 - 8, pin, 16));
	R("htod size 0", cuMemcpyHtoD(d, pin, 0));
	R("dtoh pageable dst", cuMemcpyDtoH(pg, d, 16));
	R("memsetd32 misaligned", cuMemsetD32(d + 2, 0, 1));
	R("memsetd16 misaligned", cuMemsetD16(d + 1, 0, 1));
	R("memsetd8 pageable", cuMemsetD8((CUdeviceptr)(uintptr_t)pg, 0, 16));
	R("memsetd8 out of range", cuMemsetD8(d + 4090, 0, 16));
	R("memsetd2d32 pitch too small", cuMemsetD2D32(d, 8, 0, 4, 2));
	CUdeviceptr dsts[1] = {d}, srcs[1] = {(CUdeviceptr)(uintptr_t)pin};
	size_t sizes[1] = {16}, idx[1] = {0};
	CUmemcpyAttributes at = {0};
	at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	R("batch legacy", cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &at, idx, 1, CU_STREAM_LEGACY));
	R("batch null", cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &at, idx, 1, NULL));
	CUstream s;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	R("batch stream", cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &at, idx, 1, s));
	at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
	R("batch invalid order", cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &at, idx, 1, s));
	CUDA_MEMCPY2D m2;
	memset(&m2, 0, sizeof(m2));
	m2.srcMemoryType = CU_MEMORYTYPE_HOST;
	m2.srcHost = pin;
	m2.srcPitch = 8;
	m2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m2.dstDevice = d;
	m2.dstPitch = 16;
	m2.WidthInBytes = 16;
	m2.Height = 2;
	R("memcpy2d pitch < width", cuMemcpy2D(&m2));
	m2.srcPitch = 16;
	m2.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	R("memcpy2d array", cuMemcpy2D(&m2));
	CUdeviceptr da = 0;
	R("allocasync", cuMemAllocAsync(&da, 256, s));
	R("freeasync", cuMemFreeAsync(da, s));
	R("freeasync twice", cuMemFreeAsync(da, s));
	R("stream sync", cuStreamSynchronize(s));
	/* memops */
	uint32_t *mp = pin;
	CUdeviceptr dm = 0;
	cuMemHostGetDevicePointer(&dm, pin, 0);
	R("waitvalue32 misaligned", cuStreamWaitValue32(s, dm + 2, 0, 0));
	R("writevalue32 pageable", cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)pg, 0, 0));
	R("writevalue32 v2 nobarrier",
	  cuStreamWriteValue32(s, dm, 0, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
	R("waitvalue32 flush", cuStreamWaitValue32(s, dm, 0, CU_STREAM_WAIT_VALUE_FLUSH));
	R("waitvalue32 bad op", cuStreamWaitValue32(s, dm, 0, 7));
	R("writevalue64", cuStreamWriteValue64(s, dm + 8, 0x1122334455667788ull, 0));
	R("stream sync memops", cuStreamSynchronize(s));
	V("writevalue64 landed", "%d", *(volatile uint64_t *)(mp + 2) == 0x1122334455667788ull);
	cuStreamDestroy(s);
	size_t fr = 0, tot = 0;
	R("meminfo", cuMemGetInfo(&fr, &tot));
	cuMemFree(d);
	cuMemFreeHost(pin);
	free(pg);
}

static void hf_query(void *p)
{
	*(CUresult *)p = cuStreamQuery(NULL);
}

static void cb_nop(CUstream s, CUresult st, void *p)
{
}

static void probe_streams(void)
{
	CUstream s;
	R("streamcreate bad flags", cuStreamCreate(&s, 0x10));
	R("streamcreateprio 7", cuStreamCreateWithPriority(&s, 0, 7));
	int pr = 99;
	cuStreamGetPriority(s, &pr);
	V("streamcreateprio 7 value", "%d", pr);
	cuStreamDestroy(s);
	R("streamcreateprio -9", cuStreamCreateWithPriority(&s, 0, -9));
	cuStreamGetPriority(s, &pr);
	V("streamcreateprio -9 value", "%d", pr);
	R("streamdestroy null", cuStreamDestroy(NULL));
	R("streamdestroy legacy", cuStreamDestroy(CU_STREAM_LEGACY));
	R("streamdestroy per-thread", cuStreamDestroy(CU_STREAM_PER_THREAD));
	unsigned long long a = 0, b = 0, c = 0;
	R("getid legacy", cuStreamGetId(CU_STREAM_LEGACY, &a));
	R("getid null", cuStreamGetId(NULL, &b));
	R("getid per-thread", cuStreamGetId(CU_STREAM_PER_THREAD, &c));
	V("getid legacy==null", "%d", a == b);
	V("getid legacy!=ptds", "%d", a != c);
	unsigned fl = 99;
	R("getflags legacy", cuStreamGetFlags(NULL, &fl));
	V("getflags legacy value", "%u", fl);
	CUresult inner = (CUresult)-1;
	cuStreamCreate(&s, 0);
	R("hostfunc null fn", cuLaunchHostFunc(s, NULL, NULL));
	cuLaunchHostFunc(s, hf_query, &inner);
	cuStreamSynchronize(s);
	V("cuda call inside host func", "%s", en(inner));
	R("addcallback flags 1", cuStreamAddCallback(s, cb_nop, NULL, 1));
	sleep_k(s, 30);
	R("streamquery busy", cuStreamQuery(s));
	R("streamsync", cuStreamSynchronize(s));
	/* Destroy with pending work returns at once. */
	sleep_k(s, 30);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	R("streamdestroy pending", cuStreamDestroy(s));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	V("streamdestroy pending fast", "%d",
	  (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 20000000L);
	cuCtxSynchronize();
}

static void probe_launch(void)
{
	size_t off = 77, sz = 77;
	for (size_t i = 0; i < 7; i++) {
		off = sz = 77;
		CUresult r = cuFuncGetParamInfo(f_params, i, &off, &sz);
		printf("paraminfo %zu: %s off=%zu size=%zu\n", i, en(r), off, sz);
	}
	R("paraminfo null size", cuFuncGetParamInfo(f_params, 0, &off, NULL));
	R("paraminfo null off", cuFuncGetParamInfo(f_params, 0, NULL, &sz));
	const char *name = NULL;
	R("funcgetname", cuFuncGetName(&name, f_params));
	V("funcgetname value", "%s", name ? name : "NULL");
	static const CUfunction_attribute fa[] = {
	    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
	    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
	    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
	    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
	    CU_FUNC_ATTRIBUTE_NUM_REGS,
	    CU_FUNC_ATTRIBUTE_PTX_VERSION,
	    CU_FUNC_ATTRIBUTE_BINARY_VERSION,
	    CU_FUNC_ATTRIBUTE_CACHE_MODE_CA,
	    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
	    CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
	    CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET,
	    CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
	    CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
	    CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE};
	for (size_t i = 0; i < sizeof(fa) / sizeof(fa[0]); i++) {
		int v = -12345;
		CUresult r = cuFuncGetAttribute(&v, fa[i], f_empty);
		printf("funcattr %d: %s %d\n", (int)fa[i], en(r), v);
	}
	int occ = -1;
	static const int bs[] = {1, 32, 33, 96, 128, 256, 512, 640, 1024, 1025};
	for (size_t i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
		occ = -1;
		CUresult r = cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_empty, bs[i], 0);
		printf("occupancy %d: %s %d\n", bs[i], en(r), occ);
	}
	static const size_t sm[] = {1, 1024, 16384, 49152};
	for (size_t i = 0; i < sizeof(sm) / sizeof(sm[0]); i++) {
		occ = -1;
		CUresult r = cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_empty, 128, sm[i]);
		printf("occupancy 128 smem %zu: %s %d\n", sm[i], en(r), occ);
	}
	occ = -1;
	R("occupancy 0", cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_empty, 0, 0));
	int nsm = 0;
	cuDeviceGetAttribute(&nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
	cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_empty, 256, 0);
	unsigned full = (unsigned)(nsm * occ);
	R("coop full", cuLaunchCooperativeKernel(f_empty, full, 1, 1, 256, 1, 1, 0, NULL, NULL));
	R("coop full+1",
	  cuLaunchCooperativeKernel(f_empty, full + 1, 1, 1, 256, 1, 1, 0, NULL, NULL));
	R("launch block 1025", cuLaunchKernel(f_empty, 1, 1, 1, 1025, 1, 1, 0, NULL, NULL, NULL));
	R("launch block z 65", cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 65, 0, NULL, NULL, NULL));
	R("launch grid 0", cuLaunchKernel(f_empty, 0, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	R("launch grid y 65536",
	  cuLaunchKernel(f_empty, 1, 65536, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	R("launch smem 49153", cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 49153, NULL, NULL, NULL));
	R("setattr dyn smem 100000",
	  cuFuncSetAttribute(f_empty, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
	R("launch smem 100000",
	  cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 100000, NULL, NULL, NULL));
	R("setattr dyn smem 300000",
	  cuFuncSetAttribute(f_empty, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300000));
	char c = 1;
	double d = 2;
	unsigned u = 3;
	float f3[3] = {4, 5, 6};
	void *p = NULL;
	short sh = 7;
	void *args[] = {&c, &d, &u, f3, &p, &sh};
	unsigned char buf[64] = {0};
	size_t bsz = 42;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsz,
			 CU_LAUNCH_PARAM_END};
	R("launch params", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	R("launch extra", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
	R("launch both", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra));
	R("launch neither", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	bsz = 8;
	R("launch extra small", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
	bsz = 64;
	R("launch extra large", cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
	static const size_t esz[] = {0,	 1,  41, 42, 43, 44, 46,  48,
				     49, 50, 52, 56, 63, 64, 128, 4096};
	for (size_t i = 0; i < sizeof(esz) / sizeof(esz[0]); i++) {
		bsz = esz[i];
		CUresult r = cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra);
		printf("launch extra size %zu: %s\n", esz[i], en(r));
	}
	{
		size_t z = 0;
		void *extra_empty[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
				       CU_LAUNCH_PARAM_BUFFER_SIZE, &z, CU_LAUNCH_PARAM_END};
		R("launch empty kernel extra 0",
		  cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_empty));
		z = 8;
		R("launch empty kernel extra 8",
		  cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_empty));
	}
	void *extra_nosize[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
	R("launch extra no size",
	  cuLaunchKernel(f_params, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_nosize));
	CUlaunchAttribute at[2];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at[0].value.clusterDim.x = 2;
	at[0].value.clusterDim.y = 1;
	at[0].value.clusterDim.z = 1;
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = 64;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 128;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	R("launchex cluster 2", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	cfg.gridDimX = 63;
	R("launchex cluster 2 grid 63", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	cfg.gridDimX = 64;
	at[0].value.clusterDim.x = 16;
	R("launchex cluster 16", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	at[0].value.clusterDim.x = 0;
	R("launchex cluster 0", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	at[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	at[0].value.cooperative = 1;
	cfg.gridDimX = full;
	cfg.blockDimX = 256;
	R("launchex coop full", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	cfg.gridDimX = full + 1;
	R("launchex coop full+1", cuLaunchKernelEx(&cfg, f_empty, NULL, NULL));
	R("ctx sync after launches", cuCtxSynchronize());
	/* Library path. */
	CUlibrary lib;
	CUkernel k;
	R("libraryloaddata", cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	R("librarygetkernel", cuLibraryGetKernel(&k, lib, "k_params"));
	CUkernel k2;
	R("librarygetkernel missing", cuLibraryGetKernel(&k2, lib, "k_missing"));
	cuLibraryGetKernel(&k, lib, "k_params");
	off = sz = 77;
	R("kernelparaminfo 3", cuKernelGetParamInfo(k, 3, &off, &sz));
	V("kernelparaminfo 3 values", "%zu %zu", off, sz);
	R("kernelparaminfo 6", cuKernelGetParamInfo(k, 6, &off, &sz));
	R("launch CUkernel as CUfunction",
	  cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	CUfunction kf;
	R("kernelgetfunction", cuKernelGetFunction(&kf, k));
	R("ctx sync after library", cuCtxSynchronize());
	cuLibraryUnload(lib);
}

static CUresult hf_result;

/* One capture session on @s around one questionable call; prints rc, status after and end rc. */
#define CAPTURE_TRY(label, mode, call)                                                             \
	do {                                                                                       \
		CUstreamCaptureStatus st_ = (CUstreamCaptureStatus)77;                             \
		CUgraph g_ = NULL;                                                                 \
		cuStreamBeginCapture(s, mode);                                                     \
		cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);                       \
		CUresult r_ = (call);                                                              \
		cuStreamIsCapturing(s, &st_);                                                      \
		CUresult e_ = cuStreamEndCapture(s, &g_);                                          \
		printf("capture %s: %s status=%d end=%s\n", label, en(r_), (int)st_, en(e_));      \
		if (g_)                                                                            \
			cuGraphDestroy(g_);                                                        \
	} while (0)

static void probe_capture(void)
{
	CUstream s, side, blk;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&side, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&blk, 0);
	CUdeviceptr a;
	cuMemAlloc(&a, 1024);
	void *pin;
	cuMemAllocHost(&pin, 1024);
	CUevent fork, join, outside;
	cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
	cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
	cuEventCreate(&outside, CU_EVENT_DISABLE_TIMING);
	CUstreamCaptureStatus cs = (CUstreamCaptureStatus)77;
	R("begincapture global", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	R("begincapture again", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cuMemsetD32Async(a, 1, 256, s);
	cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
	cuEventRecord(fork, s);
	cuStreamWaitEvent(side, fork, 0);
	R("side is capturing", cuStreamIsCapturing(side, &cs));
	V("side status", "%d", (int)cs);
	cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, side, NULL, NULL);
	cuEventRecord(join, side);
	cuStreamWaitEvent(s, join, 0);
	cuLaunchHostFunc(s, hf_query, &hf_result);
	cuMemcpyDtoDAsync(a + 512, a, 256, s);
	cuMemcpyDtoHAsync(pin, a, 256, s);
	cuuint64_t id = 0;
	CUgraph cg = NULL;
	const CUgraphNode *deps = NULL;
	size_t nd = 99;
	R("getcaptureinfo", cuStreamGetCaptureInfo(s, &cs, &id, &cg, &deps, NULL, &nd));
	V("getcaptureinfo values", "status=%d id_set=%d graph_set=%d ndeps=%zu", (int)cs, id != 0,
	  cg != NULL, nd);
	CUgraph g = NULL;
	R("endcapture", cuStreamEndCapture(s, &g));
	R("side after end", cuStreamIsCapturing(side, &cs));
	V("side status after end", "%d", (int)cs);
	size_t nn = 0;
	CUresult (*getnodes)(CUgraph, CUgraphNode *, size_t *) =
	    (CUresult(*)(CUgraph, CUgraphNode *, size_t *))dlsym(RTLD_DEFAULT, "cuGraphGetNodes");
	long (*fakecount)(CUgraph) =
	    (long (*)(CUgraph))dlsym(RTLD_DEFAULT, "fakecuda_graph_node_count");
	if (getnodes && g)
		getnodes(g, NULL, &nn);
	else if (fakecount && g)
		nn = (size_t)fakecount(g);
	V("graph nodes", "%zu", nn);
	CUgraphExec x = NULL;
	if (g) {
		R("instantiate", cuGraphInstantiate(&x, g, 0));
		R("graphlaunch", cuGraphLaunch(x, blk));
		R("graphlaunch again", cuGraphLaunch(x, blk));
		R("graph sync", cuStreamSynchronize(blk));
		V("hostfn in graph result", "%s", en(hf_result));
		cuGraphExecDestroy(x);
		cuGraphDestroy(g);
	}
	CUdeviceptr tmp = 0;
	void *h2 = NULL;
	CAPTURE_TRY("global memalloc", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemAlloc(&tmp, 64));
	if (tmp)
		cuMemFree(tmp);
	tmp = 0;
	CAPTURE_TRY("relaxed memalloc", CU_STREAM_CAPTURE_MODE_RELAXED, cuMemAlloc(&tmp, 64));
	if (tmp)
		cuMemFree(tmp);
	tmp = 0;
	CAPTURE_TRY("thread_local memalloc", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
		    cuMemAlloc(&tmp, 64));
	if (tmp)
		cuMemFree(tmp);
	CAPTURE_TRY("global memallochost", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemAllocHost(&h2, 64));
	if (h2)
		cuMemFreeHost(h2);
	CAPTURE_TRY("global ctxsync", CU_STREAM_CAPTURE_MODE_GLOBAL, cuCtxSynchronize());
	CAPTURE_TRY("relaxed ctxsync", CU_STREAM_CAPTURE_MODE_RELAXED, cuCtxSynchronize());
	CAPTURE_TRY("global sync memcpy", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemcpyHtoD(a, pin, 16));
	CAPTURE_TRY("global sync memset", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemsetD8(a, 0, 16));
	{
		CUdeviceptr t1 = 0;
		cuMemAlloc(&t1, 64);
		CAPTURE_TRY("global memfree", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemFree(t1));
		void *h3 = NULL;
		cuMemAllocHost(&h3, 64);
		CAPTURE_TRY("global memfreehost", CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemFreeHost(h3));
		static char regbuf[8192];
		CAPTURE_TRY("global hostregister", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemHostRegister(regbuf, 8192, 0));
		cuMemHostUnregister(regbuf);
		void *h4 = NULL;
		CAPTURE_TRY("global hostalloc", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemHostAlloc(&h4, 64, 0));
		if (h4)
			cuMemFreeHost(h4);
		CUevent ev2;
		cuEventCreate(&ev2, 0);
		cuEventRecord(ev2, side);
		CAPTURE_TRY("global eventsync other", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuEventSynchronize(ev2));
		CAPTURE_TRY("global eventquery other", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuEventQuery(ev2));
		CAPTURE_TRY("global streamsync other", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuStreamSynchronize(side));
		CAPTURE_TRY("global streamquery other", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuStreamQuery(side));
		CAPTURE_TRY("global legacy sync", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuStreamSynchronize(NULL));
		size_t f1, f2;
		CAPTURE_TRY("global meminfo", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemGetInfo(&f1, &f2));
		CUstream s9 = NULL;
		CAPTURE_TRY("global streamcreate", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuStreamCreate(&s9, 0));
		if (s9)
			cuStreamDestroy(s9);
		CUevent e9 = NULL;
		CAPTURE_TRY("global eventcreate", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuEventCreate(&e9, 0));
		if (e9)
			cuEventDestroy(e9);
		CUmodule m9 = NULL;
		CAPTURE_TRY("global moduleload", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuModuleLoadData(&m9, ptx));
		if (m9)
			cuModuleUnload(m9);
		CUdeviceptr a9 = 0;
		CAPTURE_TRY("global allocasync other stream", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemAllocAsync(&a9, 64, side));
		if (a9)
			cuMemFreeAsync(a9, side);
		CAPTURE_TRY("global legacy memset async", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemsetD8Async(a, 0, 4, NULL));
		CAPTURE_TRY("global legacy launch", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
		CAPTURE_TRY("global sync dtoh pinned", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemcpyDtoH(pin, a, 16));
		CAPTURE_TRY("global sync dtod", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuMemcpyDtoD(a + 64, a, 16));
		CAPTURE_TRY("global wait recorded event", CU_STREAM_CAPTURE_MODE_GLOBAL,
			    cuStreamWaitEvent(s, ev2, 0));
		CUevent never;
		cuEventCreate(&never, 0);
		CAPTURE_TRY("relaxed wait never recorded", CU_STREAM_CAPTURE_MODE_RELAXED,
			    cuStreamWaitEvent(s, never, 0));
		CAPTURE_TRY("relaxed hostfunc", CU_STREAM_CAPTURE_MODE_RELAXED,
			    cuLaunchHostFunc(s, hf_query, &hf_result));
		CAPTURE_TRY("relaxed writevalue", CU_STREAM_CAPTURE_MODE_RELAXED,
			    cuStreamWriteValue32(s, a, 1, 0));
		cuEventDestroy(never);
		cuStreamSynchronize(side);
		cuEventDestroy(ev2);
	}
	CAPTURE_TRY("addcallback", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuStreamAddCallback(s, cb_nop, NULL, 0));
	CAPTURE_TRY("streamsync", CU_STREAM_CAPTURE_MODE_RELAXED, cuStreamSynchronize(s));
	CAPTURE_TRY("streamquery", CU_STREAM_CAPTURE_MODE_RELAXED, cuStreamQuery(s));
	CAPTURE_TRY("eventrecord+query", CU_STREAM_CAPTURE_MODE_RELAXED,
		    (cuEventRecord(fork, s), cuEventQuery(fork)));
	CAPTURE_TRY("eventrecord+sync", CU_STREAM_CAPTURE_MODE_RELAXED,
		    (cuEventRecord(fork, s), cuEventSynchronize(fork)));
	CAPTURE_TRY("record external", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuEventRecordWithFlags(fork, s, CU_EVENT_RECORD_EXTERNAL));
	sleep_k(side, 20);
	cuEventRecord(outside, side);
	CAPTURE_TRY("wait uncaptured pending event", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuStreamWaitEvent(s, outside, 0));
	cuStreamSynchronize(side);
	CAPTURE_TRY("wait uncaptured done event", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuStreamWaitEvent(s, outside, 0));
	CUdeviceptr cap_alloc = 0;
	CAPTURE_TRY("allocasync", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuMemAllocAsync(&cap_alloc, 256, s));
	CAPTURE_TRY("pageable htod async", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuMemcpyHtoDAsync(a, &nd, 8, s));
	CAPTURE_TRY("pageable dtoh async", CU_STREAM_CAPTURE_MODE_RELAXED,
		    cuMemcpyDtoHAsync(&nd, a, 8, s));
	R("begin blocking", cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_RELAXED));
	R("iscapturing legacy during blocking capture", cuStreamIsCapturing(NULL, &cs));
	R("legacy memset during blocking capture", cuMemsetD8Async(a, 0, 4, NULL));
	cuStreamIsCapturing(blk, &cs);
	V("blocking status after legacy op", "%d", (int)cs);
	R("end blocking", cuStreamEndCapture(blk, &g));
	if (g)
		cuGraphDestroy(g);
	g = NULL;
	R("begin on legacy", cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_RELAXED));
	R("begin on per-thread",
	  cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
	R("end per-thread", cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
	if (g)
		cuGraphDestroy(g);
	R("end not capturing", cuStreamEndCapture(s, &g));
	R("begin bad mode", cuStreamBeginCapture(s, (CUstreamCaptureMode)7));
	R("ctxsync after capture probes", cuCtxSynchronize());
	cuEventDestroy(fork);
	cuEventDestroy(join);
	cuEventDestroy(outside);
	cuStreamDestroy(s);
	cuStreamDestroy(side);
	cuStreamDestroy(blk);
	cuMemFree(a);
	cuMemFreeHost(pin);
}

static void res_line(const char *key, const CUdevResource *r)
{
	printf("%s: type=%d smCount=%u minPart=%u align=%u\n", key, (int)r->type, r->sm.smCount,
	       r->sm.minSmPartitionSize, r->sm.smCoscheduledAlignment);
}

static void probe_green(CUdevice dev, CUcontext primary)
{
	CUdevResource whole;
	R("getdevresource", cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
	res_line("whole", &whole);
	R("getdevresource bad type", cuDeviceGetDevResource(dev, &whole, (CUdevResourceType)7));
	cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM);
	static const unsigned mins[] = {0,  1,	2,  4,	8,  9,	 12,  16,  24,
					32, 40, 48, 64, 66, 100, 128, 132, 133};
	for (int fl = 0; fl < 2; fl++)
		for (size_t i = 0; i < sizeof(mins) / sizeof(mins[0]); i++) {
			unsigned nb = 777;
			CUresult r = cuDevSmResourceSplitByCount(
			    NULL, &nb, &whole, NULL,
			    fl ? CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING : 0, mins[i]);
			CUdevResource grp[140], rem;
			memset(&rem, 0, sizeof(rem));
			unsigned ng = 140;
			CUresult r2 = cuDevSmResourceSplitByCount(
			    grp, &ng, &whole, &rem,
			    fl ? CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING : 0, mins[i]);
			printf("split%s min %u: query %s nb=%u; split %s ng=%u grp0=%u/%u/%u "
			       "rem=%u/%u/%u type=%d\n",
			       fl ? " ignore" : "", mins[i], en(r), nb, en(r2), ng,
			       r2 || !ng ? 0 : grp[0].sm.smCount,
			       r2 || !ng ? 0 : grp[0].sm.minSmPartitionSize,
			       r2 || !ng ? 0 : grp[0].sm.smCoscheduledAlignment, rem.sm.smCount,
			       rem.sm.minSmPartitionSize, rem.sm.smCoscheduledAlignment,
			       (int)rem.type);
		}
	CUdevResource g8[32], rem8, o8[32];
	unsigned n8 = 4;
	R("split nbGroups 4", cuDevSmResourceSplitByCount(g8, &n8, &whole, &rem8, 0, 8));
	V("split nbGroups 4 result", "ng=%u rem=%u", n8, rem8.sm.smCount);
	n8 = 0;
	R("split nbGroups 0", cuDevSmResourceSplitByCount(g8, &n8, &whole, &rem8, 0, 8));
	n8 = 32;
	cuDevSmResourceSplitByCount(g8, &n8, &whole, &rem8, 0, 8);
	unsigned no = 32;
	cuDevSmResourceSplitByCount(o8, &no, &whole, NULL, 0, 8);
	unsigned nn = 9;
	R("split of split", cuDevSmResourceSplitByCount(NULL, &nn, &g8[0], NULL, 0, 8));
	R("split of remainder", cuDevSmResourceSplitByCount(NULL, &nn, &rem8, NULL, 0, 8));
	CUdevResourceDesc d0, dmix, ddup, drest, dwhole;
	R("gendesc one", cuDevResourceGenerateDesc(&d0, &g8[0], 1));
	CUdevResource mix[2] = {g8[0], o8[1]};
	R("gendesc two splits", cuDevResourceGenerateDesc(&dmix, mix, 2));
	CUdevResource dup[2] = {g8[0], g8[0]};
	R("gendesc duplicate", cuDevResourceGenerateDesc(&ddup, dup, 2));
	CUdevResource rest[33];
	unsigned nr = 0;
	for (unsigned i = 1; i < n8; i++)
		rest[nr++] = g8[i];
	rest[nr++] = rem8;
	R("gendesc rest+remainder", cuDevResourceGenerateDesc(&drest, rest, nr));
	R("gendesc whole", cuDevResourceGenerateDesc(&dwhole, &whole, 1));
	CUdevResource wmix[2] = {whole, g8[0]};
	R("gendesc whole+group", cuDevResourceGenerateDesc(&ddup, wmix, 2));
	{
		struct {
			const char *name;
			unsigned first, n;
			int rem;
		} v[] = {{"2 groups", 0, 2, 0},		 {"3 groups", 0, 3, 0},
			 {"14 groups", 1, 14, 0},	 {"remainder", 0, 0, 1},
			 {"1 group+remainder", 0, 1, 1}, {"15 groups", 0, 15, 0}};
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			CUdevResource rs[17];
			unsigned k = 0;
			for (unsigned j = 0; j < v[i].n; j++)
				rs[k++] = g8[v[i].first + j];
			if (v[i].rem)
				rs[k++] = rem8;
			CUdevResourceDesc dd;
			CUgreenCtx gg;
			CUresult r1 = cuDevResourceGenerateDesc(&dd, rs, k);
			CUresult r2 =
			    r1 ? r1 : cuGreenCtxCreate(&gg, dd, dev, CU_GREEN_CTX_DEFAULT_STREAM);
			CUdevResource out;
			memset(&out, 0, sizeof(out));
			if (!r2)
				cuGreenCtxGetDevResource(gg, &out, CU_DEV_RESOURCE_TYPE_SM);
			unsigned sn = 777;
			CUresult r3 =
			    r2 ? r2 : cuDevSmResourceSplitByCount(NULL, &sn, &out, NULL, 0, 8);
			printf("green %s: %s %s smCount=%u minPart=%u align=%u split8=%s/%u\n",
			       v[i].name, en(r1), en(r2), out.sm.smCount, out.sm.minSmPartitionSize,
			       out.sm.smCoscheduledAlignment, en(r3), sn);
			if (!r2)
				cuGreenCtxDestroy(gg);
		}
	}
	CUgreenCtx ga, gb;
	R("greencreate flags 0", cuGreenCtxCreate(&ga, d0, dev, 0));
	R("greencreate", cuGreenCtxCreate(&ga, d0, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	R("greencreate rest", cuGreenCtxCreate(&gb, drest, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CUdevResource gr;
	cuGreenCtxGetDevResource(ga, &gr, CU_DEV_RESOURCE_TYPE_SM);
	res_line("green A resource", &gr);
	cuGreenCtxGetDevResource(gb, &gr, CU_DEV_RESOURCE_TYPE_SM);
	res_line("green B resource", &gr);
	CUcontext ca = NULL;
	cuCtxFromGreenCtx(&ca, ga);
	cuCtxGetDevResource(ca, &gr, CU_DEV_RESOURCE_TYPE_SM);
	res_line("green A ctx resource", &gr);
	cuCtxGetDevResource(primary, &gr, CU_DEV_RESOURCE_TYPE_SM);
	res_line("primary ctx resource", &gr);
	unsigned ns = 7;
	R("split of green resource", cuDevSmResourceSplitByCount(NULL, &ns, &gr, NULL, 0, 8));
	CUstream sa, sb;
	R("greenstream flags 0", cuGreenCtxStreamCreate(&sa, ga, 0, 0));
	R("greenstream", cuGreenCtxStreamCreate(&sa, ga, CU_STREAM_NON_BLOCKING, 0));
	cuGreenCtxStreamCreate(&sb, gb, CU_STREAM_NON_BLOCKING, 0);
	CUcontext sc = NULL;
	CUgreenCtx sg = NULL;
	R("streamgetctx green", cuStreamGetCtx(sa, &sc));
	V("streamgetctx green is green ctx", "%d", sc == ca);
	V("streamgetctx green is primary", "%d", sc == primary);
	R("streamgetctx_v2 green", cuStreamGetCtx_v2(sa, &sc, &sg));
	V("streamgetctx_v2 green values", "primary=%d green=%d", sc == primary, sg == ga);
	R("streamgetgreenctx", cuStreamGetGreenCtx(sa, &sg));
	V("streamgetgreenctx value", "%d", sg == ga);
	sg = (CUgreenCtx)1;
	R("streamgetgreenctx null primary", cuStreamGetGreenCtx(NULL, &sg));
	V("streamgetgreenctx null primary value", "%s", sg == NULL ? "NULL" : "set");
	unsigned fl = 99;
	cuStreamGetFlags(sa, &fl);
	V("green stream flags", "%u", fl);
	int occ = 0;
	cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_empty, 256, 0);
	R("green coop 8*occ",
	  cuLaunchCooperativeKernel(f_empty, 8 * occ, 1, 1, 256, 1, 1, 0, sa, NULL));
	R("green coop 8*occ+1",
	  cuLaunchCooperativeKernel(f_empty, 8 * occ + 1, 1, 1, 256, 1, 1, 0, sa, NULL));
	R("green sync", cuStreamSynchronize(sa));
	cuCtxPushCurrent(ca);
	sg = NULL;
	R("streamgetgreenctx null green current", cuStreamGetGreenCtx(NULL, &sg));
	V("streamgetgreenctx null green current value", "%d", sg == ga);
	R("streamgetctx_v2 per-thread green current",
	  cuStreamGetCtx_v2(CU_STREAM_PER_THREAD, &sc, &sg));
	R("streamgetctx_v2 null green current", cuStreamGetCtx_v2(NULL, &sc, &sg));
	V("streamgetctx_v2 null green current values", "primary=%d green=%d", sc == primary,
	  sg == ga);
	CUstream sc2;
	R("streamcreate in green current", cuStreamCreate(&sc2, 0));
	sg = NULL;
	cuStreamGetGreenCtx(sc2, &sg);
	V("streamcreate in green current is green", "%d", sg == ga);
	R("launch null stream green current",
	  cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	R("sync green current", cuCtxSynchronize());
	cuStreamDestroy(sc2);
	cuCtxPopCurrent(NULL);
	CUevent e;
	cuEventCreate(&e, 0);
	sleep_k(sa, 20);
	R("greenrecordevent", cuGreenCtxRecordEvent(ga, e));
	R("greenrecordevent query", cuEventQuery(e));
	R("greenwaitevent", cuGreenCtxWaitEvent(gb, e));
	R("ctxrecordevent primary", cuCtxRecordEvent(primary, e));
	cuCtxSynchronize();
	unsigned long long gid = 0;
	R("greengetid", cuGreenCtxGetId(ga, &gid));
	R("greendestroy with stream", cuGreenCtxDestroy(ga));
	R("stream sync after greendestroy", cuStreamSynchronize(sa));
	R("stream query after greendestroy", cuStreamQuery(sa));
	R("stream destroy after greendestroy", cuStreamDestroy(sa));
	R("greendestroy again", cuGreenCtxDestroy(ga));
	cuStreamDestroy(sb);
	R("greendestroy B", cuGreenCtxDestroy(gb));
	cuEventDestroy(e);
}

static void probe_ctx(CUdevice dev, CUcontext primary)
{
	CUcontext c, cur;
	R("ctxcreate_v4 null params", cuCtxCreate(&c, NULL, 0, dev));
	cuCtxGetCurrent(&cur);
	V("ctxcreate makes current", "%d", cur == c);
	R("ctxdestroy", cuCtxDestroy(c));
	cuCtxGetCurrent(&cur);
	V("after destroy current is primary", "%d", cur == primary);
	R("ctxsetcurrent null", cuCtxSetCurrent(NULL));
	cuCtxGetCurrent(&cur);
	V("after setcurrent null", "%s",
	  cur == NULL	   ? "NULL"
	  : cur == primary ? "primary"
			   : "other");
	R("ctxsync no ctx", cuCtxSynchronize());
	CUdeviceptr p;
	R("memalloc no ctx", cuMemAlloc(&p, 16));
	R("ctxpop empty", cuCtxPopCurrent(&cur));
	cuCtxSetCurrent(primary);
	unsigned flags = 99;
	int active = 99;
	cuDevicePrimaryCtxGetState(dev, &flags, &active);
	V("primary state", "flags=%u active=%d", flags, active);
	R("primary setflags v2 active", cuDevicePrimaryCtxSetFlags(dev, 0));
	R("ctxsync_v2 null", cuCtxSynchronize_v2(NULL));
	CUdevice d2 = 99;
	R("ctxgetdevice_v2 null", cuCtxGetDevice_v2(&d2, NULL));
}

static void probe_fault(CUdevice dev, CUcontext primary)
{
	CUcontext bad;
	cuCtxCreate(&bad, NULL, 0, dev);
	CUmodule m;
	CUfunction ff, fe;
	cuModuleLoadData(&m, ptx);
	cuModuleGetFunction(&ff, m, "k_fault");
	cuModuleGetFunction(&fe, m, "k_empty");
	CUstream s;
	cuStreamCreate(&s, 0);
	CUevent before;
	cuEventCreate(&before, 0);
	cuEventRecord(before, s);
	cuStreamSynchronize(s);
	R("fault launch", cuLaunchKernel(ff, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	R("fault streamsync", cuStreamSynchronize(s));
	R("fault streamquery", cuStreamQuery(s));
	R("fault ctxsync", cuCtxSynchronize());
	R("fault launch after", cuLaunchKernel(fe, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	CUdeviceptr p;
	R("fault memalloc after", cuMemAlloc(&p, 16));
	R("fault eventquery old", cuEventQuery(before));
	R("fault eventrecord after", cuEventRecord(before, s));
	CUstream s2;
	R("fault streamcreate after", cuStreamCreate(&s2, 0));
	cuCtxPopCurrent(NULL);
	R("fault primary ctxsync", cuCtxSynchronize());
	R("fault primary launch", cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	R("fault primary sync2", cuCtxSynchronize());
	R("fault ctxdestroy", cuCtxDestroy(bad));
	R("primary after destroy", cuCtxSynchronize());
}

int main(void)
{
	register_fakes();
	setvbuf(stdout, NULL, _IOLBF, 0);
	R("init bad flags", cuInit(1));
	CUresult r = cuInit(0);
	R("init", r);
	if (r)
		return 1;
	printf("backend: %s\n", is_fake ? "fake" : "real");
	CUdevice dev;
	CUcontext primary;
	cuDeviceGet(&dev, 0);
	R("primaryretain", cuDevicePrimaryCtxRetain(&primary, dev));
	cuCtxSetCurrent(primary);
	void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	probe_procaddr(lib);
	probe_attrs(dev);
	CUmodule mod;
	R("moduleloaddata ptx", cuModuleLoadData(&mod, ptx));
	R("getfunction empty", cuModuleGetFunction(&f_empty, mod, "k_empty"));
	R("getfunction params", cuModuleGetFunction(&f_params, mod, "k_params"));
	R("getfunction sleep", cuModuleGetFunction(&f_sleep, mod, "k_sleep"));
	R("getfunction fault", cuModuleGetFunction(&f_fault, mod, "k_fault"));
	CUfunction fx;
	R("getfunction missing", cuModuleGetFunction(&fx, mod, "k_missing"));
	probe_events();
	probe_memory();
	probe_streams();
	probe_launch();
	probe_capture();
	probe_green(dev, primary);
	probe_ctx(dev, primary);
	R("primary sync before fault", cuCtxSynchronize());
	probe_fault(dev, primary);
	printf("done\n");
	return 0;
}
