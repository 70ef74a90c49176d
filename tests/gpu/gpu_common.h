/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the tests/gpu CUDA programs (runtime API, C++17, nvcc).
 *
 * Output protocol, one line each, parsed by tests/gpu/run.sh:
 *   PASS <prog>.<check>
 *   FAIL <prog>.<check>: <what>
 *   NOTE <prog>.<check>: <what>     behaviour CUDA does not guarantee; never a failure
 *   REPORT <prog>: <text>           measurements worth showing in the run.sh summary
 *   INFO <prog>: <text>
 *   DIGEST <prog> <16 hex digits>   FNV-1a 64 of the program's deterministic outputs;
 *                                   must be identical natively and under every policy
 *   SKIP <prog>: <why>              with exit status 77 (no CUDA device)
 * Exit status: 0 every check passed, 1 a check or a CUDA call failed, 77 no device.
 *
 * Every CUDA call goes through CK(), which prints the call and the error and
 * ends the program, so an unexpected error can never be mistaken for a pass.
 */
#ifndef VE_GPU_COMMON_H
#define VE_GPU_COMMON_H

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

inline const char *g_prog = "gpu";
inline std::atomic<int> g_pass{0};
inline std::atomic<int> g_fail{0};
inline uint64_t g_digest = 14695981039346656037ull; /* FNV-1a 64 offset basis */
inline int g_num_sms = 0;

[[noreturn]] inline void ck_fail(const char *call, cudaError_t e, const char *file, int line)
{
	std::printf("FAIL %s.cuda_call: %s returned %s (%s) at %s:%d\n", g_prog, call,
		    cudaGetErrorName(e), cudaGetErrorString(e), file, line);
	std::fflush(stdout);
	/* _Exit: other threads may still be inside CUDA; do not run destructors. */
	std::_Exit(1);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t ck_e_ = (call);                                                        \
		if (ck_e_ != cudaSuccess)                                                          \
			ck_fail(#call, ck_e_, __FILE__, __LINE__);                                 \
	} while (0)

/* After every <<<>>> launch: a launch error is reported here, not later. */
#define CKL() CK(cudaGetLastError())

inline void vmsg(const char *kind, const char *name, const char *fmt, va_list ap)
{
	char buf[512];
	std::vsnprintf(buf, sizeof(buf), fmt, ap);
	std::printf("%s %s.%s: %s\n", kind, g_prog, name, buf);
}

/* Records one check. Thread-safe (printf is atomic per call). */
__attribute__((format(printf, 3, 4))) inline bool check(bool ok, const char *name,
							 const char *fmt, ...)
{
	if (ok) {
		std::printf("PASS %s.%s\n", g_prog, name);
		g_pass++;
	} else {
		va_list ap;
		va_start(ap, fmt);
		vmsg("FAIL", name, fmt, ap);
		va_end(ap);
		g_fail++;
	}
	return ok;
}

__attribute__((format(printf, 2, 3))) inline void note(const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("NOTE", name, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 1, 2))) inline void report(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	std::printf("REPORT %s: %s\n", g_prog, buf);
}

/* Compares n integers; on a mismatch names the first bad index and the count. */
template <class T>
inline bool check_array(const char *name, const T *got, const T *want, size_t n)
{
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i]) {
			if (!bad)
				first = i;
			bad++;
		}
	}
	if (!bad)
		return check(true, name, "ok");
	return check(false, name, "%zu of %zu elements differ; first at [%zu]: got 0x%llx want 0x%llx",
		     bad, n, first, (unsigned long long)got[first], (unsigned long long)want[first]);
}

inline void digest_add(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++) {
		g_digest ^= b[i];
		g_digest *= 1099511628211ull;
	}
}

template <class T> inline void digest_vec(const std::vector<T> &v)
{
	digest_add(v.data(), v.size() * sizeof(T));
}

/* Exits 77 when no CUDA device (or no driver) is present. */
inline void gpu_init(const char *prog)
{
	g_prog = prog;
	/* Line-buffered even into a file, so a run killed by its timeout keeps its lines. */
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		std::printf("SKIP %s: no CUDA device (%s)\n", prog,
			    e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
		std::exit(77);
	}
	CK(cudaSetDevice(0));
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	g_num_sms = p.multiProcessorCount;
	std::printf("INFO %s: device %s, cc %d.%d, %d SMs\n", prog, p.name, p.major, p.minor,
		    g_num_sms);
	CK(cudaFree(nullptr)); /* create the primary context now */
}

inline int gpu_finish(void)
{
	CK(cudaDeviceSynchronize());
	CK(cudaGetLastError());
	std::printf("DIGEST %s %016" PRIx64 "\n", g_prog, g_digest);
	std::printf("SUMMARY %s: %d passed, %d failed\n", g_prog, g_pass.load(), g_fail.load());
	return g_fail.load() ? 1 : 0;
}

inline uint64_t host_ns(void)
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
		       std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

inline void sleep_ms(int ms)
{
	std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

/* Fixed-seed generator for host data (splitmix64). */
struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed) {}
	uint64_t next()
	{
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	uint32_t u32() { return (uint32_t)next(); }
};

/* ------------------------------------------------------------ device side */

__device__ __forceinline__ uint64_t gtimer(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Wall-clock spin: the duration does not depend on how many SMs the launch got. */
__device__ __forceinline__ void spin_ns(uint64_t ns)
{
	uint64_t t0 = gtimer();
	while (gtimer() - t0 < ns) {
	}
}

/* One step of an order-sensitive chain: x = 3x + (add ^ i) mod 2^32. Two steps
 * with different `add` do not commute, so a chain's final value proves its
 * launches ran in issue order and one at a time. */
__host__ __device__ __forceinline__ uint32_t affine(uint32_t x, uint32_t add, uint32_t i)
{
	return x * 3u + (add ^ i);
}

__global__ void k_affine(uint32_t *x, int n, uint32_t add)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = affine(x[i], add, (uint32_t)i);
}

__global__ void k_init(uint32_t *x, int n, uint32_t salt)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = (uint32_t)i * 2654435761u ^ salt;
}

/* Every block first spins ns (thread 0, the others wait at the barrier), then
 * writes dst[i] = (src ? src[i] : i) * mul + add. Launch with few blocks (16)
 * so that the spin is the duration on any partition. */
__global__ void k_slow_map(uint32_t *dst, const uint32_t *src, int n, uint32_t mul, uint32_t add,
			   uint64_t ns)
{
	if (threadIdx.x == 0 && ns)
		spin_ns(ns);
	__syncthreads();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		dst[i] = (src ? src[i] : (uint32_t)i) * mul + add;
}

/* x[i] = 3x[i] + y[i] */
__global__ void k_mix(uint32_t *x, const uint32_t *y, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = x[i] * 3u + y[i];
}

inline uint32_t step_add(uint32_t salt, int step)
{
	return salt + (uint32_t)step * 0x9e3779b9u;
}

inline void ref_init(std::vector<uint32_t> &v, uint32_t salt)
{
	for (size_t i = 0; i < v.size(); i++)
		v[i] = (uint32_t)i * 2654435761u ^ salt;
}

inline void ref_affine(std::vector<uint32_t> &v, uint32_t add)
{
	for (size_t i = 0; i < v.size(); i++)
		v[i] = affine(v[i], add, (uint32_t)i);
}

inline void ref_slow_map(std::vector<uint32_t> &dst, const std::vector<uint32_t> *src, uint32_t mul,
			 uint32_t add)
{
	for (size_t i = 0; i < dst.size(); i++)
		dst[i] = (src ? (*src)[i] : (uint32_t)i) * mul + add;
}

inline void ref_mix(std::vector<uint32_t> &x, const std::vector<uint32_t> &y)
{
	for (size_t i = 0; i < x.size(); i++)
		x[i] = x[i] * 3u + y[i];
}

/* Launch geometry of the helpers above. */
#define CHAIN_BLOCKS(n) (((n) + 255) / 256)
#define SLOW_BLOCKS 16

#endif /* VE_GPU_COMMON_H */
