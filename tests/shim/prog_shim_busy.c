/* SPDX-License-Identifier: MIT */
/*
 * A client that stays busy for a while: two streams of short kernels (each
 * holds its SMs ~1 ms in the fake driver) for VETEST_SECONDS seconds
 * (default 2), checking the result as it goes. tests/ved_ops.sh runs two of
 * them under ved to have clients with grants, leases and waits to measure.
 * VETEST_WIDE=MS: the slow kernels are as wide as the GPU (4096 blocks of
 * 256 threads) and hold it MS ms, as a training job's GEMMs do;
 * VETEST_BURST=N and VETEST_HOST_MS=MS: after every N rounds the host
 * works MS ms (a host phase: data loading, an optimizer on the CPU);
 * VETEST_STOP_FILE=PATH: it also stops once PATH exists (a test's clients
 * then outlast a slow machine and still end when the test says).
 */
#include "prog_shim.h"

static uint32_t env_u32(const char *name, uint32_t def, uint32_t max)
{
	const char *e = getenv(name);
	long v = e ? atol(e) : (long)def;
	return v >= 0 && v <= (long)max ? (uint32_t)v : def;
}

static void slow_step(CUstream s, CUdeviceptr p, uint32_t v, uint32_t wide_ms)
{
	if (!wide_ms) {
		slow_set(s, p, v, 1);
		return;
	}
	void *args[] = {&p, &v, &wide_ms};
	CK(cuLaunchKernel(f_slow, 4096, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

int main(void)
{
	setup_common();
	const char *e = getenv("VETEST_SECONDS");
	double secs = e ? atof(e) : 2.0;
	if (!(secs > 0 && secs < 600))
		secs = 2.0;
	uint32_t wide_ms = env_u32("VETEST_WIDE", 0, 1000);
	uint32_t burst = env_u32("VETEST_BURST", 0, 1u << 20);
	uint32_t host_ms = env_u32("VETEST_HOST_MS", 0, 10000);
	const char *stop = getenv("VETEST_STOP_FILE");
	CUstream s[2];
	CK(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(2 * sizeof(uint32_t));
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	uint32_t rounds = 0;
	while (now_ns() < end && !failures && !(stop && access(stop, F_OK) == 0)) {
		for (int k = 0; k < 2; k++) {
			slow_step(s[k], p + 4 * (CUdeviceptr)k, rounds, wide_ms);
			add(s[k], p + 4 * (CUdeviceptr)k, 1, 1);
		}
		for (int k = 0; k < 2; k++) {
			CK(cuStreamSynchronize(s[k]));
			CHECKF(read_u32(p + 4 * (CUdeviceptr)k) == rounds + 1, "stream %d round %u", k,
			       rounds);
		}
		rounds++;
		if (burst && host_ms && rounds % burst == 0)
			sleep_us(host_ms * 1000);
		if (rounds % 256 == 0)
			scan_launch_log(); /* the fake's launch log holds 4096 */
	}
	scan_launch_log();
	print_launch_summary();
	printf("busy: %u rounds in %.1f s, %d failed checks\n", rounds, secs, (int)failures);
	return failures ? 1 : 0;
}
