/* SPDX-License-Identifier: MIT */
/*
 * A driver that returns errors (the fake's FAKECUDA_FAIL_ALLOC_AT,
 * FAKECUDA_FAIL_LAUNCH_AT, FAKECUDA_FAULT_LAUNCH_AT): the program sees the
 * error the driver gave, promptly, and nothing hangs, natively and under
 * the shim.
 *
 *   prog_fault_driver alloc    allocations fail with CUDA_ERROR_OUT_OF_MEMORY
 *                              from the Nth on; the buffers made before still
 *                              compute right
 *   prog_fault_driver launch   one launch is refused by the driver
 *                              (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES): the call
 *                              returns it natively; under the shim the launch
 *                              was already accepted, so the next synchronizing
 *                              call reports it (docs/semantics.md)
 *   prog_fault_driver fault    one launch faults on the device: every later
 *                              synchronizing call reports the sticky error
 *                              (FAKECUDA_FAULT_CODE, e.g. 719, launch failed)
 *   prog_fault_driver slow     one kernel that runs 1.5 s (a stuck lane for
 *                              the watchdog, test_fault_watchdog)
 * Exits 0 when every check held. See tests/shim/prog_shim.h for the rest.
 */
#include "../shim/prog_shim.h"

static CUresult first_error;

static void note(CUresult r)
{
	if (r != CUDA_SUCCESS && first_error == CUDA_SUCCESS)
		first_error = r;
}

int main(int argc, char **argv)
{
	alarm(60);
	if (argc != 2) {
		fprintf(stderr, "usage: prog_fault_driver alloc|launch|fault\n");
		return 2;
	}
	const char *mode = argv[1];
	cur_test = mode;
	setup_common();
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint64_t t0 = now_ns();
	if (strcmp(mode, "alloc") == 0) {
		CUdeviceptr b[8] = {0};
		int failed_at = -1;
		for (int i = 0; i < 8; i++) {
			CUresult r = cuMemAlloc(&b[i], 64);
			if (r != CUDA_SUCCESS) {
				CHECKF(r == CUDA_ERROR_OUT_OF_MEMORY, "allocation %d: %s", i, ename(r));
				if (failed_at < 0)
					failed_at = i;
				b[i] = 0;
			} else {
				CHECKF(failed_at < 0, "allocation %d succeeded after one failed", i);
			}
		}
		printf("first failed allocation: #%d\n", failed_at + 1);
		CHECK(failed_at >= 0);
		/* What was allocated still works. */
		for (int i = 0; i < 8 && b[i]; i++) {
			CK(cuMemsetD8Async(b[i], 0, 64, s));
			muladd(s, b[i], 16, 1, (uint32_t)i + 1);
		}
		CK(cuStreamSynchronize(s));
		for (int i = 0; i < 8 && b[i]; i++)
			CHECKF(read_u32(b[i]) == (uint32_t)i + 1, "buffer %d holds %u", i,
			       read_u32(b[i]));
	} else if (strcmp(mode, "launch") == 0 || strcmp(mode, "fault") == 0) {
		CUdeviceptr b = dalloc(4);
		int want = (int)strtol(getenv("VETEST_WANT") ? getenv("VETEST_WANT") : "0", NULL, 0);
		/* Twenty launches; the driver refuses or faults one of them. */
		for (int i = 0; i < 20; i++) {
			uint32_t n = 1, m = 1, a = 1;
			void *args[] = {&b, &n, &m, &a};
			note(launch1(f_muladd, s, args));
		}
		CUresult r = cuStreamSynchronize(s);
		note(r);
		printf("first error: %s (%d); stream sync: %s\n", ename(first_error), first_error,
		       ename(r));
		CHECKF((int)first_error == want, "first error %s, want %d", ename(first_error), want);
		if (strcmp(mode, "fault") == 0) {
			/* Sticky: later synchronizing calls report it too. */
			CK_IS(cuStreamSynchronize(s), (CUresult)want);
			CK_IS(cuCtxSynchronize(), (CUresult)want);
		} else {
			/* The other launches ran: 19 increments (one refused). */
			uint32_t v = 0;
			CUresult rr = cuMemcpyDtoH(&v, b, 4);
			printf("after the refused launch: %s, value %u\n", ename(rr), v);
			CHECKF(rr == CUDA_SUCCESS ? v == 19 : rr == (CUresult)want,
			       "read back %s, value %u", ename(rr), v);
		}
	} else if (strcmp(mode, "slow") == 0) {
		/* One kernel that runs 1.5 s: a lane without progress for that long. */
		CUdeviceptr b = dalloc(4);
		slow_set(s, b, 5, 1500);
		CK(cuStreamSynchronize(s));
		CHECK(read_u32(b) == 5);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	double ms = (double)(now_ns() - t0) / 1e6;
	CHECKF(ms < 10000, "took %.0f ms", ms);
	scan_launch_log();
	print_launch_summary();
	printf("%d failed checks\n", (int)failures);
	return failures ? 1 : 0;
}
