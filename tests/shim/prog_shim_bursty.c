/* SPDX-License-Identifier: MIT */
/*
 * A latency-class client shaped like a batch-1 decode server: requests of
 * 32 "tokens", each a burst of short kernels and a synchronize (the host
 * reads the token), with idle gaps between requests. Prints the slowest
 * request; exits non-zero if a request takes longer than VETEST_MAX_MS
 * (default 5000): under ved beside a busy client it must keep being
 * served (tests/shim/test_shim_ved.c, shim_ved_latency_beside_busy).
 */
#include "prog_shim.h"

int main(void)
{
	setup_common();
	const char *e = getenv("VETEST_MAX_MS");
	double max_ms = e ? atof(e) : 5000.0;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(sizeof(uint32_t));
	double worst = 0;
	uint32_t want = 0;
	for (int req = 0; req < 8 && !failures; req++) {
		uint64_t t0 = now_ns();
		for (int tok = 0; tok < 32; tok++) {
			for (int k = 0; k < 6; k++) {
				add(s, p, 1, 1);
				want++;
			}
			CK(cuStreamSynchronize(s));
			CHECKF(read_u32(p) == want, "request %d token %d: %u, want %u", req, tok,
			       read_u32(p), want);
		}
		double ms = (double)(now_ns() - t0) / 1e6;
		if (ms > worst)
			worst = ms;
		sleep_us(30000 + 10000 * (unsigned)(req % 3)); /* idle between requests */
	}
	scan_launch_log();
	print_launch_summary();
	printf("bursty: slowest request %.1f ms (limit %.0f), %d failed checks\n", worst, max_ms,
	       (int)failures);
	return failures || worst > max_ms ? 1 : 0;
}
