/* SPDX-License-Identifier: MIT */
/*
 * A program linked against libve.so alone (as if libve.so were its CUDA
 * driver), run with no driver or a driver too old for Vitamin-E: every
 * intercepted entry point it calls must return an error code, never crash.
 * Prints "NAME=CODE" per call; exits 0 once every call returned.
 */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
	CUstream s = NULL;
	CUevent e = NULL;
	char buf[16];
	printf("cuCtxSynchronize=%d\n", (int)cuCtxSynchronize());
	printf("cuStreamSynchronize=%d\n", (int)cuStreamSynchronize(NULL));
	printf("cuStreamCreate=%d\n", (int)cuStreamCreate(&s, 0));
	printf("cuEventCreate=%d\n", (int)cuEventCreate(&e, 0));
	printf("cuEventQuery=%d\n", (int)cuEventQuery(e));
	printf("cuMemcpyHtoD=%d\n", (int)cuMemcpyHtoD((CUdeviceptr)0x1000, buf, sizeof(buf)));
	printf("cuMemsetD8Async=%d\n", (int)cuMemsetD8Async((CUdeviceptr)0x1000, 0, 16, NULL));
	printf("cuLaunchKernel=%d\n",
	       (int)cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	printf("cuMemFree=%d\n", (int)cuMemFree((CUdeviceptr)0x1000));
	printf("done\n");
	return 0;
}
