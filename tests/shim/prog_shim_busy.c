/* SPDX-License-Identifier: MIT */
/*
 * A client that stays busy for a while: two streams of short kernels (each
 * holds its SMs ~1 ms in the fake driver) for VETEST_SECONDS seconds
 * (default 2), checking the result as it goes. tests/ved_ops.sh runs two of
 * them under ved to have clients with grants, leases and waits to measure.
 */
#include "prog_shim.h"

int main(void)
{
	setup_common();
	const char *e = getenv("VETEST_SECONDS");
	double secs = e ? atof(e) : 2.0;
	if (!(secs > 0 && secs < 600))
		secs = 2.0;
	CUstream s[2];
	CK(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(2 * sizeof(uint32_t));
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	uint32_t rounds = 0;
	while (now_ns() < end && !failures) {
		for (int k = 0; k < 2; k++) {
			slow_set(s[k], p + 4 * (CUdeviceptr)k, rounds, 1);
			add(s[k], p + 4 * (CUdeviceptr)k, 1, 1);
		}
		for (int k = 0; k < 2; k++) {
			CK(cuStreamSynchronize(s[k]));
			CHECKF(read_u32(p + 4 * (CUdeviceptr)k) == rounds + 1, "stream %d round %u", k,
			       rounds);
		}
		rounds++;
		if (rounds % 256 == 0)
			scan_launch_log(); /* the fake's launch log holds 4096 */
	}
	scan_launch_log();
	print_launch_summary();
	printf("busy: %u rounds in %.1f s, %d failed checks\n", rounds, secs, (int)failures);
	return failures ? 1 : 0;
}
