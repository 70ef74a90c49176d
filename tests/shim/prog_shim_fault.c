/* SPDX-License-Identifier: MIT */
/*
 * A kernel that faults (the fake's kernel returns nonzero: the device gets the
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU) must be reported as that
 * error by the next synchronizing call, promptly, with no hang, and by later
 * calls too. One fault per process (the error is sticky), so the call that
 * must report it is chosen on the command line:
 *
 *   prog_shim_fault stream|event|ctx|memcpy|legacy
 *
 * Exits 0 when the chosen call returned CUDA_ERROR_ILLEGAL_ADDRESS within
 * 5 s and later calls kept reporting it. See prog_shim.h for the environment.
 */
#include "prog_shim.h"

int main(int argc, char **argv)
{
	alarm(60);
	if (argc != 2) {
		fprintf(stderr, "usage: prog_shim_fault stream|event|ctx|memcpy|legacy|readback\n");
		return 2;
	}
	const char *mode = argv[1];
	cur_test = mode;
	setup_common();
	CUstream s;
	CK(cuStreamCreate(&s, strcmp(mode, "legacy") ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
	CUevent e;
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CUdeviceptr b = dalloc(4);
	/* Good work first, then the fault, then more work behind it. */
	muladd(s, b, 1, 3, 1);
	CK(cuStreamSynchronize(s));
	CHECK(read_u32(b) == 1);
	if (failures)
		return 1;
	/* Long enough that the fault cannot have happened before the calls below
	 * are made (on a busy machine 2 ms was not): they must succeed, only the
	 * synchronizing one reports the fault. */
	slow_set(s, b, 5, 300);
	/* readback: the fault on another stream while a read-back into pageable
	 * memory waits behind the slow kernel (VE_READ_SELF keeps it for this
	 * thread: it must still complete, or every later sync of s hangs). */
	bool rb = strcmp(mode, "readback") == 0;
	CUstream s2;
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(launch1(f_fault, rb ? s2 : s, NULL));
	if (!rb)
		muladd(s, b, 1, 3, 1);
	uint64_t t0 = now_ns();
	CUresult r;
	if (strcmp(mode, "stream") == 0) {
		r = cuStreamSynchronize(s);
	} else if (strcmp(mode, "event") == 0) {
		CK(cuEventRecord(e, s));
		r = cuEventSynchronize(e);
	} else if (strcmp(mode, "ctx") == 0) {
		r = cuCtxSynchronize();
	} else if (strcmp(mode, "memcpy") == 0) {
		CUevent e2;
		CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
		CK(cuEventRecord(e2, s));
		CK(cuStreamWaitEvent(NULL, e2, 0));
		uint32_t v;
		r = cuMemcpyDtoH(&v, b, 4); /* a legacy-stream call after the fault */
	} else if (rb) {
		uint32_t v;
		r = cuMemcpyDtoHAsync(&v, b, 4, s);
	} else if (strcmp(mode, "legacy") == 0) {
		r = cuStreamSynchronize(NULL); /* s is blocking: the legacy stream waits for it */
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	double ms = (double)(now_ns() - t0) / 1e6;
	printf("fault %s: %s after %.1f ms\n", mode, ename(r), ms);
	CHECKF(r == CUDA_ERROR_ILLEGAL_ADDRESS, "the %s call returned %s", mode, ename(r));
	CHECKF(ms < 5000, "the error took %.0f ms to be reported", ms);
	/* Sticky: later synchronizing calls report it too. */
	CK_IS(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuEventSynchronize(e), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CK_IS(cuEventQuery(e), CUDA_ERROR_ILLEGAL_ADDRESS);
	/* Calls that only enqueue or create "may also return error codes from previous,
	 * asynchronous launches" (cuLaunchKernel): the driver does, the shim need not, so they are
	 * not checked; every synchronizing call must report it. */
	CK_IS(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
	uint32_t v;
	CK_IS(cuMemcpyDtoH(&v, b, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
	scan_launch_log();
	print_launch_summary();
	printf("%d failed checks\n", (int)failures);
	return failures ? 1 : 0;
}
