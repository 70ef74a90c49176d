/* SPDX-License-Identifier: MIT */
/*
 * Output drift over many trials (docs/evaluation.md, "Drift").
 *
 * Four workloads, each launched T times; every trial's output is read back,
 * hashed (64-bit, over its bits) and counted, and the largest ULP distance
 * from a reference output is kept:
 *   reduce_sum          grid-stride sum of 64 Mi floats: a fixed grid (1056
 *                       blocks x 256) writes block partials, one fixed block
 *                       reduces them. Nothing depends on which SMs run it.
 *   splitk_gemm         C = A B, fp32, M=N=512, K=8192, split-K S=16: tile
 *                       kernel writes S partial products, a second kernel adds
 *                       them in the order s = 0..S-1.
 *   cublas_sgemm        cublasSgemm, 256 x 256 x 16384 (few output tiles and a
 *                       long K: cuBLAS's heuristics pick split-K kernels).
 *   cublas_gemmex_bf16  cublasGemmEx, same shape, bf16 inputs, fp32 output and
 *                       compute.
 *
 * Modes (--modes, several run in order in one process; within a mode the
 * workloads are interleaved trial by trial, so each spans the whole run):
 *   native, ve_chaos, ve_tput, mps_split   the fixed configuration; the mode
 *       only labels the result (the caller runs the program natively, under
 *       ve-run, or as an MPS client);
 *   reshape_grid    reduce_sum and splitk_gemm sized to an SM count that
 *       changes per trial (grid = 8 blocks per SM; S = SMs * 8 / output
 *       tiles), the way systems that resize kernels to their SM allocation do;
 *   reshape_cublas  the cuBLAS workloads with cublasSetSmCountTarget(n)
 *       changing per trial.
 * The per-trial SM counts are drawn (seeded) from --sizes, by default the
 * allocation sizes the pool offers on an H200. At 132 SMs the reshaped
 * configuration is the fixed one.
 *
 * Reference output: <ref dir>/<workload>.bin when present (written by a
 * native run with --save-ref), else one untimed run of the fixed
 * configuration in this process. Every new distinct output is also checked
 * against a float64 host computation (a wrong kernel fails loudly instead of
 * counting as drift). The fixed kernels record which SMs ran them (%smid,
 * atomics into a separate mask), so a result also shows how many distinct
 * SM counts the launches actually got.
 *
 * Output: one JSON object per (mode, workload) line to --out (appended) or
 * stdout; progress on stderr. Exit status: 0 done, 1 a CUDA/cuBLAS error or a
 * failed correctness check, 2 bad usage.
 *
 *   drift [--modes LIST] [--workloads LIST] [--trials N] [--seed N]
 *         [--sizes LIST] [--ref DIR] [--save-ref DIR] [--out FILE] [--tag S]
 *   drift corunner [--seconds S] [--on-ms MS] [--off-ms MS]
 *       a load that changes: splitk_gemm in a loop for on-ms, idle for
 *       off-ms, until SIGTERM/SIGINT or S seconds.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

/* ------------------------------------------------------------ host helpers */

static void stamp(char *buf, size_t n)
{
	time_t t = time(nullptr);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, n, "%H:%M:%S", &tm);
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char ts[16];
	stamp(ts, sizeof(ts));
	va_list ap;
	va_start(ap, fmt);
	std::fprintf(stderr, "[%s] drift: ", ts);
	std::vfprintf(stderr, fmt, ap);
	std::fputc('\n', stderr);
	va_end(ap);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	std::fprintf(stderr, "FAIL drift: ");
	std::vfprintf(stderr, fmt, ap);
	std::fputc('\n', stderr);
	va_end(ap);
	std::fflush(stdout);
	std::_Exit(1);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			die("%s:%d: %s -> %s (%s)", __FILE__, __LINE__, #call,                     \
			    cudaGetErrorName(e_), cudaGetErrorString(e_));                         \
	} while (0)
#define CKL() CK(cudaGetLastError())
#define CKB(call)                                                                                  \
	do {                                                                                       \
		cublasStatus_t s_ = (call);                                                        \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
			die("%s:%d: %s -> %s", __FILE__, __LINE__, #call,                          \
			    cublasGetStatusName(s_));                                              \
	} while (0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 24 significant bits: exact in float. */
static float unit_sym(uint64_t seed, uint64_t i)
{
	return (float)((int64_t)(mix64(seed ^ (i * 0xd1b54a32d192ed03ull)) >> 40) - (1 << 23)) /
	       (float)(1 << 23);
}

/* 64-bit hash of an output's bits. Each step (xor a word, multiply by an odd
 * constant, xor-shift) is a bijection of the state, so outputs that differ
 * in one word always hash differently. */
static uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t h = 1469598103934665603ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		std::memcpy(&w, b + i, 8);
		h ^= w;
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	for (; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h ^ (uint64_t)n;
}

/* Floats mapped to integers in the order of their values, so that the
 * difference of two is their distance in ULPs (-0 and +0 are both 0). */
static int64_t ordered(float f)
{
	int32_t i;
	std::memcpy(&i, &f, 4);
	return i < 0 ? (int64_t)INT32_MIN - i : (int64_t)i;
}

static uint64_t max_ulp(const float *a, const float *b, size_t n)
{
	uint64_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (std::isnan(a[i]) != std::isnan(b[i]))
			return UINT64_MAX;
		if (std::isnan(a[i]))
			continue;
		int64_t d = ordered(a[i]) - ordered(b[i]);
		uint64_t u = (uint64_t)(d < 0 ? -d : d);
		m = std::max(m, u);
	}
	return m;
}

/* Round to nearest even, the conversion cuBLAS's bf16 inputs need to be
 * reproduced exactly on the host. */
static uint16_t f32_to_bf16(float f)
{
	uint32_t u;
	std::memcpy(&u, &f, 4);
	uint32_t lsb = (u >> 16) & 1u;
	u += 0x7fffu + lsb;
	return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	std::memcpy(&f, &u, 4);
	return f;
}

/* ------------------------------------------------------------ kernels */

/* Which SMs ran the launch: one bit per %smid (256 bits). The mask is a
 * separate buffer: the atomics never touch the output. */
__device__ __forceinline__ void record_sm(unsigned *mask)
{
	unsigned id;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	atomicOr(&mask[(id >> 5) & 7u], 1u << (id & 31u));
}

#define RED_THREADS 256

/* Pass 1: each thread adds its grid-stride elements in index order, then a
 * fixed shared-memory tree; one partial per block. The result depends on
 * gridDim.x and nothing else. */
__global__ void __launch_bounds__(RED_THREADS)
    k_reduce_pass1(const float *__restrict__ x, size_t n, float *__restrict__ partials,
		   unsigned *mask)
{
	__shared__ float sh[RED_THREADS];
	float acc = 0.0f;
	size_t stride = (size_t)gridDim.x * RED_THREADS;
	for (size_t i = (size_t)blockIdx.x * RED_THREADS + threadIdx.x; i < n; i += stride)
		acc += x[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		partials[blockIdx.x] = sh[0];
		record_sm(mask);
	}
}

/* Pass 2: one block of RED_THREADS threads over np partials, same scheme. */
__global__ void __launch_bounds__(RED_THREADS)
    k_reduce_pass2(const float *__restrict__ partials, int np, float *__restrict__ out)
{
	__shared__ float sh[RED_THREADS];
	float acc = 0.0f;
	for (int i = threadIdx.x; i < np; i += RED_THREADS)
		acc += partials[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[0] = sh[0];
}

#define BM	     64
#define BN	     64
#define BK	     16
#define GEMM_THREADS 256

/* One 64x64 tile of the partial product over K range [s*chunk, (s+1)*chunk)
 * for split s = blockIdx.z, row-major A (M x K), B (K x N), written to
 * W[s] (M x N). 256 threads, 4x4 outputs each, products accumulated in k
 * order. Needs M, N multiples of 64, K and chunk multiples of 16. */
__global__ void __launch_bounds__(GEMM_THREADS)
    k_gemm_partial(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ W,
		   int M, int N, int K, int chunk, unsigned *mask)
{
	__shared__ __align__(16) float As[BK][BM];
	__shared__ __align__(16) float Bs[BK][BN];
	const int tid = threadIdx.x;
	const int tx = tid & 15, ty = tid >> 4;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int kbeg = blockIdx.z * chunk;
	const int kend = min(K, kbeg + chunk);
	float acc[4][4];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.0f;
	for (int k0 = kbeg; k0 < kend; k0 += BK) {
		{
			const int r = tid >> 2, c = (tid & 3) << 2;
			const float4 v =
			    *reinterpret_cast<const float4 *>(&A[(size_t)(m0 + r) * K + k0 + c]);
			As[c + 0][r] = v.x;
			As[c + 1][r] = v.y;
			As[c + 2][r] = v.z;
			As[c + 3][r] = v.w;
		}
		{
			const int r = tid >> 4, c = (tid & 15) << 2;
			*reinterpret_cast<float4 *>(&Bs[r][c]) =
			    *reinterpret_cast<const float4 *>(&B[(size_t)(k0 + r) * N + n0 + c]);
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < BK; kk++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++)
				a[i] = As[kk][ty * 4 + i];
#pragma unroll
			for (int j = 0; j < 4; j++)
				b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	float *Ws = W + (size_t)blockIdx.z * M * N;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float4 v = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
		*reinterpret_cast<float4 *>(&Ws[(size_t)(m0 + ty * 4 + i) * N + n0 + tx * 4]) = v;
	}
	if (tid == 0)
		record_sm(mask);
}

/* C[i] = W[0][i] + W[1][i] + ... + W[S-1][i], in that order. */
__global__ void k_splitk_sum(const float *__restrict__ W, float *__restrict__ C, int mn, int S)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += gridDim.x * blockDim.x) {
		float acc = W[i];
		for (int s = 1; s < S; s++)
			acc += W[(size_t)s * mn + i];
		C[i] = acc;
	}
}

/* ------------------------------------------------------------ options */

static const int kPoolSizes[] = {8, 12, 16, 20, 32, 36, 64, 68, 96, 100, 112, 116, 120, 124, 132};

struct Opts {
	std::vector<std::string> modes{"native"};
	std::vector<std::string> workloads; /* empty: all */
	int trials = 1000;
	uint64_t seed = 1;
	std::vector<int> sizes{std::begin(kPoolSizes), std::end(kPoolSizes)};
	std::string ref_dir, save_ref_dir, out_path, tag;
	/* corunner */
	double seconds = 120, on_ms = 300, off_ms = 300;
};

static std::vector<std::string> split_list(const char *s)
{
	std::vector<std::string> v;
	std::string cur;
	for (const char *p = s;; p++) {
		if (*p == ',' || *p == '\0') {
			if (!cur.empty())
				v.push_back(cur);
			cur.clear();
			if (!*p)
				break;
		} else {
			cur += *p;
		}
	}
	return v;
}

static long parse_long(const char *opt, const char *v, long lo, long hi)
{
	char *end = nullptr;
	errno = 0;
	long x = std::strtol(v, &end, 10);
	if (errno || !end || *end || x < lo || x > hi) {
		std::fprintf(stderr, "drift: %s wants an integer in [%ld, %ld], not '%s'\n", opt,
			     lo, hi, v);
		std::exit(2);
	}
	return x;
}

static void usage(FILE *f)
{
	std::fprintf(
	    f, "usage: drift [--modes LIST] [--workloads LIST] [--trials N] [--seed N]\n"
	       "             [--sizes LIST] [--ref DIR] [--save-ref DIR] [--out FILE] [--tag S]\n"
	       "       drift corunner [--seconds S] [--on-ms MS] [--off-ms MS]\n"
	       "modes: native ve_chaos ve_tput mps_split (fixed configuration, label only),\n"
	       "       reshape_grid, reshape_cublas\n"
	       "workloads: reduce_sum splitk_gemm cublas_sgemm cublas_gemmex_bf16 (default all)\n");
}

static bool is_fixed_mode(const std::string &m)
{
	return m == "native" || m == "ve_chaos" || m == "ve_tput" || m == "mps_split";
}

/* ------------------------------------------------------------ workloads */

struct Workload {
	std::string name;
	size_t out_elems = 0;
	bool records_sms = false;
	bool reshape_grid = false, reshape_cublas = false;
	float *d_out = nullptr;
	virtual ~Workload()
	{
	}
	virtual void setup(uint64_t seed, int max_target) = 0;
	/* Enqueues one trial: target 0 = fixed configuration, else sized for
	 * that many SMs. Returns false if the configuration cannot be applied
	 * (reason in *why). */
	virtual bool enqueue(int target, cudaStream_t s, unsigned *mask, std::string *why) = 0;
	virtual std::string config(int target) const = 0;
	/* Checks an output against float64 host arithmetic; message on failure. */
	virtual bool check(const float *out, int target, std::string *msg) const = 0;
};

struct ReduceSum : Workload {
	size_t n = (size_t)64 << 20;
	int fixed_blocks = 1056; /* 8 blocks of 256 threads per SM on 132 SMs */
	float *d_x = nullptr, *d_part = nullptr;
	double host_sum = 0, host_abs = 0;

	ReduceSum()
	{
		name = "reduce_sum";
		out_elems = 1;
		records_sms = true;
		reshape_grid = true;
	}
	int blocks(int target) const
	{
		return target ? target * 8 : fixed_blocks;
	}
	void setup(uint64_t seed, int max_target) override
	{
		std::vector<float> x(n);
		double s = 0, a = 0;
		for (size_t i = 0; i < n; i++) {
			/* Exponents over 2^-6..2^6 and mostly positive values: float
			 * rounding depends on the order of the additions. */
			uint64_t h = mix64(seed * 0x632be59bd9b4e019ull ^ i);
			int e = (int)(h % 13) - 6;
			float v = std::ldexp(unit_sym(seed + 17, i) + 0.5f, e);
			x[i] = v;
			s += v;
			a += std::fabs(v);
		}
		host_sum = s;
		host_abs = a;
		int maxb = std::max(fixed_blocks, blocks(max_target));
		CK(cudaMalloc(&d_x, n * sizeof(float)));
		CK(cudaMalloc(&d_part, (size_t)maxb * sizeof(float)));
		CK(cudaMalloc(&d_out, sizeof(float)));
		CK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
	}
	bool enqueue(int target, cudaStream_t s, unsigned *mask, std::string *) override
	{
		int nb = blocks(target);
		k_reduce_pass1<<<nb, RED_THREADS, 0, s>>>(d_x, n, d_part, mask);
		CKL();
		k_reduce_pass2<<<1, RED_THREADS, 0, s>>>(d_part, nb, d_out);
		CKL();
		return true;
	}
	std::string config(int target) const override
	{
		return "grid " + std::to_string(blocks(target)) + " x 256, then 1 x 256";
	}
	bool check(const float *out, int target, std::string *msg) const override
	{
		/* Float accumulation of ~n/threads terms per thread plus two trees. */
		double err = std::fabs((double)out[0] - host_sum), tol = 1e-3 * host_abs;
		if (err <= tol)
			return true;
		char b[256];
		std::snprintf(b, sizeof(b), "sum %.9g vs float64 %.9g (|err| %.3g > %.3g) at %s",
			      (double)out[0], host_sum, err, tol, config(target).c_str());
		*msg = b;
		return false;
	}
};

struct SplitKGemm : Workload {
	int M = 512, N = 512, K = 8192, S_fixed = 16;
	float *d_A = nullptr, *d_B = nullptr, *d_W = nullptr;
	std::vector<float> hA, hB;

	SplitKGemm()
	{
		name = "splitk_gemm";
		records_sms = true;
		reshape_grid = true;
	}
	int tiles() const
	{
		return (M / BM) * (N / BN);
	}
	int splits(int target) const
	{
		if (!target)
			return S_fixed;
		int s = target * 8 / tiles();
		return std::max(1, std::min(s, std::min(64, K / BK)));
	}
	int chunk(int S) const
	{
		int c = (K + S - 1) / S;
		return (c + BK - 1) / BK * BK;
	}
	void setup(uint64_t seed, int max_target) override
	{
		out_elems = (size_t)M * N;
		hA.resize((size_t)M * K);
		hB.resize((size_t)K * N);
		for (size_t i = 0; i < hA.size(); i++)
			hA[i] = unit_sym(seed + 101, i);
		for (size_t i = 0; i < hB.size(); i++)
			hB[i] = unit_sym(seed + 202, i);
		int smax = std::max(S_fixed, splits(max_target));
		CK(cudaMalloc(&d_A, hA.size() * sizeof(float)));
		CK(cudaMalloc(&d_B, hB.size() * sizeof(float)));
		CK(cudaMalloc(&d_W, (size_t)smax * M * N * sizeof(float)));
		CK(cudaMalloc(&d_out, out_elems * sizeof(float)));
		CK(cudaMemcpy(d_A, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
		CK(cudaMemcpy(d_B, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice));
	}
	bool enqueue(int target, cudaStream_t s, unsigned *mask, std::string *) override
	{
		int S = splits(target);
		dim3 g(N / BN, M / BM, S);
		k_gemm_partial<<<g, GEMM_THREADS, 0, s>>>(d_A, d_B, d_W, M, N, K, chunk(S), mask);
		CKL();
		int mn = M * N;
		k_splitk_sum<<<(mn + 255) / 256, 256, 0, s>>>(d_W, d_out, mn, S);
		CKL();
		return true;
	}
	std::string config(int target) const override
	{
		int S = splits(target);
		return "split-K S=" + std::to_string(S) + " (chunk " + std::to_string(chunk(S)) +
		       "), tiles " + std::to_string(N / BN) + "x" + std::to_string(M / BM) + "x" +
		       std::to_string(S);
	}
	bool check(const float *out, int target, std::string *msg) const override
	{
		for (int t = 0; t < 64; t++) {
			uint64_t h = mix64(0x5eed ^ (uint64_t)t);
			int i = (int)(h % (uint64_t)M), j = (int)((h >> 32) % (uint64_t)N);
			double d = 0, a = 0;
			for (int k = 0; k < K; k++) {
				double p = (double)hA[(size_t)i * K + k] * hB[(size_t)k * N + j];
				d += p;
				a += std::fabs(p);
			}
			double got = out[(size_t)i * N + j], err = std::fabs(got - d),
			       tol = 1e-3 * a;
			if (err > tol) {
				char b[256];
				std::snprintf(
				    b, sizeof(b),
				    "C[%d][%d] = %.9g vs float64 %.9g (|err| %.3g > %.3g) at %s", i,
				    j, got, d, err, tol, config(target).c_str());
				*msg = b;
				return false;
			}
		}
		return true;
	}
};

struct CublasGemm : Workload {
	bool bf16;
	int m = 256, n = 256, k = 16384;
	cublasHandle_t h = nullptr;
	void *d_A = nullptr, *d_B = nullptr;
	std::vector<float> hA, hB; /* column-major, bf16-rounded for bf16 */
	int cur_target = 0;
	std::string unavailable; /* why cublasSetSmCountTarget cannot be used */

	explicit CublasGemm(bool b) : bf16(b)
	{
		name = b ? "cublas_gemmex_bf16" : "cublas_sgemm";
		reshape_cublas = true;
	}
	void setup(uint64_t seed, int) override
	{
		out_elems = (size_t)m * n;
		hA.resize((size_t)m * k);
		hB.resize((size_t)k * n);
		std::vector<uint16_t> bA, bB;
		if (bf16) {
			bA.resize(hA.size());
			bB.resize(hB.size());
		}
		for (size_t i = 0; i < hA.size(); i++) {
			float v = unit_sym(seed + 303, i);
			if (bf16) {
				bA[i] = f32_to_bf16(v);
				v = bf16_to_f32(bA[i]);
			}
			hA[i] = v;
		}
		for (size_t i = 0; i < hB.size(); i++) {
			float v = unit_sym(seed + 404, i);
			if (bf16) {
				bB[i] = f32_to_bf16(v);
				v = bf16_to_f32(bB[i]);
			}
			hB[i] = v;
		}
		size_t es = bf16 ? 2 : 4;
		CK(cudaMalloc(&d_A, hA.size() * es));
		CK(cudaMalloc(&d_B, hB.size() * es));
		CK(cudaMalloc(&d_out, out_elems * sizeof(float)));
		if (bf16) {
			CK(cudaMemcpy(d_A, bA.data(), bA.size() * 2, cudaMemcpyHostToDevice));
			CK(cudaMemcpy(d_B, bB.data(), bB.size() * 2, cudaMemcpyHostToDevice));
		} else {
			CK(cudaMemcpy(d_A, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice));
			CK(cudaMemcpy(d_B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice));
		}
		CKB(cublasCreate(&h));
		CKB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
		/* Probe the SM-count target once: a cuBLAS without it makes
		 * reshape_cublas unavailable, not an error. */
		cublasStatus_t st = cublasSetSmCountTarget(h, 8);
		int back = -1;
		if (st == CUBLAS_STATUS_SUCCESS)
			st = cublasGetSmCountTarget(h, &back);
		if (st != CUBLAS_STATUS_SUCCESS)
			unavailable =
			    std::string("cublasSetSmCountTarget: ") + cublasGetStatusName(st);
		else if (back != 8)
			unavailable = "cublasGetSmCountTarget reads " + std::to_string(back) +
				      " after setting 8";
		if (unavailable.empty())
			CKB(cublasSetSmCountTarget(h, 0));
		cur_target = 0;
	}
	bool enqueue(int target, cudaStream_t s, unsigned *, std::string *why) override
	{
		if (target != cur_target) {
			if (!unavailable.empty()) {
				*why = unavailable;
				return false;
			}
			CKB(cublasSetSmCountTarget(h, target));
			cur_target = target;
		}
		CKB(cublasSetStream(h, s));
		const float one = 1.0f, zero = 0.0f;
		if (bf16)
			CKB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, d_A,
					 CUDA_R_16BF, m, d_B, CUDA_R_16BF, k, &zero, d_out,
					 CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
		else
			CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
					(const float *)d_A, m, (const float *)d_B, k, &zero, d_out,
					m));
		return true;
	}
	std::string config(int target) const override
	{
		char b[160];
		std::snprintf(b, sizeof(b), "%s %dx%dx%d, SM target %d%s",
			      bf16 ? "cublasGemmEx bf16->fp32" : "cublasSgemm", m, n, k, target,
			      target ? "" : " (default)");
		return b;
	}
	bool check(const float *out, int target, std::string *msg) const override
	{
		for (int t = 0; t < 64; t++) {
			uint64_t hh = mix64(0xb1a5 ^ (uint64_t)t);
			int i = (int)(hh % (uint64_t)m), j = (int)((hh >> 32) % (uint64_t)n);
			double d = 0, a = 0;
			for (int kk = 0; kk < k; kk++) {
				double p = (double)hA[(size_t)kk * m + i] * hB[(size_t)j * k + kk];
				d += p;
				a += std::fabs(p);
			}
			double got = out[(size_t)j * m + i], err = std::fabs(got - d),
			       tol = 1e-3 * a;
			if (err > tol) {
				char b[256];
				std::snprintf(
				    b, sizeof(b),
				    "C(%d,%d) = %.9g vs float64 %.9g (|err| %.3g > %.3g) at %s", i,
				    j, got, d, err, tol, config(target).c_str());
				*msg = b;
				return false;
			}
		}
		return true;
	}
};

/* ------------------------------------------------------------ trials */

struct Ctx {
	cudaStream_t s;
	unsigned *d_mask, *h_mask;
	float *h_out;
	size_t h_out_elems;
	int device_sms;
	std::string device_name;
	FILE *out;
	bool failed = false;
};

static bool read_file(const std::string &path, std::vector<float> &v, size_t elems)
{
	FILE *f = std::fopen(path.c_str(), "rb");
	if (!f)
		return false;
	v.resize(elems);
	size_t got = std::fread(v.data(), sizeof(float), elems, f);
	int extra = std::fgetc(f);
	std::fclose(f);
	return got == elems && extra == EOF;
}

static void write_file(const std::string &path, const float *p, size_t elems)
{
	FILE *f = std::fopen(path.c_str(), "wb");
	if (!f || std::fwrite(p, sizeof(float), elems, f) != elems)
		die("cannot write %s: %s", path.c_str(), std::strerror(errno));
	std::fclose(f);
}

/* One trial into ctx.h_out; returns the SMs its first kernel ran on (0 when
 * the workload does not record them), -1 if the configuration could not be
 * applied. */
static int one_trial(Ctx &c, Workload &w, int target, std::string *why)
{
	CK(cudaMemsetAsync(c.d_mask, 0, 8 * sizeof(unsigned), c.s));
	if (!w.enqueue(target, c.s, c.d_mask, why))
		return -1;
	CK(cudaMemcpyAsync(c.h_out, w.d_out, w.out_elems * sizeof(float), cudaMemcpyDeviceToHost,
			   c.s));
	CK(cudaMemcpyAsync(c.h_mask, c.d_mask, 8 * sizeof(unsigned), cudaMemcpyDeviceToHost, c.s));
	CK(cudaStreamSynchronize(c.s));
	if (!w.records_sms)
		return 0;
	int n = 0;
	for (int i = 0; i < 8; i++)
		n += __builtin_popcount(c.h_mask[i]);
	return n;
}

/* What one workload gathered over the trials of one mode. */
struct Tally {
	Workload *w;
	std::vector<float> ref;
	std::string ref_src, unavailable, check_msg;
	uint64_t ref_digest = 0;
	std::map<uint64_t, int> hist;
	std::map<uint64_t, uint64_t> ulp;
	std::map<int, int> sm_seen;
	std::map<int, std::set<uint64_t>> by_target;
	int matches_ref = 0, done = 0;
	bool check_ok = true;
	double secs = 0;
};

static void emit(Ctx &c, const Opts &o, const std::string &mode, bool fixed, const Tally &r)
{
	const Workload &w = *r.w;
	FILE *f = c.out;
	std::fprintf(f, "{\"workload\":\"%s\",\"mode\":\"%s\"", w.name.c_str(), mode.c_str());
	if (!o.tag.empty())
		std::fprintf(f, ",\"tag\":\"%s\"", o.tag.c_str());
	std::fprintf(f, ",\"device\":\"%s\",\"device_sms\":%d", c.device_name.c_str(),
		     c.device_sms);
	if (!r.unavailable.empty()) {
		std::fprintf(f, ",\"unavailable\":\"%s\"}\n", r.unavailable.c_str());
		std::fflush(f);
		say("%s %s: unavailable: %s", mode.c_str(), w.name.c_str(), r.unavailable.c_str());
		return;
	}
	uint64_t mu = 0;
	for (auto &kv : r.ulp)
		mu = std::max(mu, kv.second);
	std::fprintf(f, ",\"trials\":%d,\"distinct_outputs\":%zu,\"max_ulp\":%" PRIu64, r.done,
		     r.hist.size(), mu);
	std::fprintf(f,
		     ",\"reference\":\"%s\",\"ref_digest\":\"%016" PRIx64 "\",\"matches_ref\":%d",
		     r.ref_src.c_str(), r.ref_digest, r.matches_ref);
	std::fprintf(f, ",\"config\":\"%s\"", w.config(0).c_str());
	std::fprintf(f, ",\"hist\":{");
	bool first = true;
	for (auto &kv : r.hist) {
		std::fprintf(f, "%s\"%016" PRIx64 "\":%d", first ? "" : ",", kv.first, kv.second);
		first = false;
	}
	std::fprintf(f, "},\"ulp\":{");
	first = true;
	for (auto &kv : r.ulp) {
		std::fprintf(f, "%s\"%016" PRIx64 "\":%" PRIu64, first ? "" : ",", kv.first,
			     kv.second);
		first = false;
	}
	std::fprintf(f, "}");
	if (w.records_sms) {
		std::fprintf(f, ",\"sm_seen\":{");
		first = true;
		for (auto &kv : r.sm_seen) {
			std::fprintf(f, "%s\"%d\":%d", first ? "" : ",", kv.first, kv.second);
			first = false;
		}
		std::fprintf(f, "}");
	}
	if (!fixed) {
		std::fprintf(f, ",\"by_target\":{");
		first = true;
		for (auto &kv : r.by_target) {
			std::fprintf(f, "%s\"%d\":[", first ? "" : ",", kv.first);
			bool f2 = true;
			for (uint64_t d : kv.second) {
				std::fprintf(f, "%s\"%016" PRIx64 "\"", f2 ? "" : ",", d);
				f2 = false;
			}
			std::fprintf(f, "]");
			first = false;
		}
		std::fprintf(f, "}");
	}
	std::fprintf(f, ",\"check\":\"%s\",\"seconds\":%.3f,\"ms_per_trial\":%.4f}\n",
		     r.check_ok ? "ok" : "FAILED", r.secs, r.done ? 1e3 * r.secs / r.done : 0.0);
	std::fflush(f);
	int smin = r.sm_seen.empty() ? 0 : r.sm_seen.begin()->first;
	int smax = r.sm_seen.empty() ? 0 : r.sm_seen.rbegin()->first;
	say("%s %s: %d trials, %zu distinct, max ulp %" PRIu64 ", %d equal to the reference, SMs "
	    "seen %d..%d (%zu counts), %.2f s",
	    mode.c_str(), w.name.c_str(), r.done, r.hist.size(), mu, r.matches_ref, smin, smax,
	    r.sm_seen.size(), r.secs);
	if (!r.check_ok) {
		std::fprintf(stderr, "FAIL drift.%s.%s: %s\n", mode.c_str(), w.name.c_str(),
			     r.check_msg.c_str());
		c.failed = true;
	}
	if (fixed && r.hist.size() > 1)
		std::fprintf(stderr,
			     "NOTE drift.%s.%s: %zu distinct outputs of a fixed configuration\n",
			     mode.c_str(), w.name.c_str(), r.hist.size());
}

/* All workloads of a mode, interleaved trial by trial: each of them then
 * spans the whole run, and so every change of allocation a co-runner or the
 * policy causes while it lasts. */
static void run_mode(Ctx &c, const Opts &o, const std::vector<Workload *> &ws,
		     const std::string &mode)
{
	const bool fixed = is_fixed_mode(mode);
	std::vector<Tally> ts;
	for (auto *w : ws) {
		if ((mode == "reshape_grid" && !w->reshape_grid) ||
		    (mode == "reshape_cublas" && !w->reshape_cublas))
			continue; /* does not apply to this workload */
		Tally r;
		r.w = w;
		const size_t ne = w->out_elems;
		r.ref_src = "native run";
		if (o.ref_dir.empty() ||
		    !read_file(o.ref_dir + "/" + w->name + ".bin", r.ref, ne)) {
			std::string why;
			if (one_trial(c, *w, 0, &why) < 0)
				die("%s: fixed configuration refused: %s", w->name.c_str(),
				    why.c_str());
			r.ref.assign(c.h_out, c.h_out + ne);
			r.ref_src = "fixed configuration, this process";
		}
		r.ref_digest = hash_bytes(r.ref.data(), ne * sizeof(float));
		ts.push_back(std::move(r));
	}
	if (ts.empty())
		return;

	/* Per-trial SM targets: seeded, identical in every run. */
	std::vector<int> targets(o.trials, 0);
	if (!fixed) {
		uint64_t x = o.seed * 0x9e3779b97f4a7c15ull + 7;
		for (int t = 0; t < o.trials; t++) {
			x = mix64(x);
			targets[t] = o.sizes[x % o.sizes.size()];
		}
	}
	say("%s: %zu workloads, %d trials each", mode.c_str(), ts.size(), o.trials);
	for (int t = 0; t < o.trials; t++) {
		for (auto &r : ts) {
			if (!r.unavailable.empty())
				continue;
			Workload &w = *r.w;
			const size_t ne = w.out_elems;
			std::string why;
			double t0 = now_s();
			int sms = one_trial(c, w, targets[t], &why);
			r.secs += now_s() - t0;
			if (sms < 0) {
				r.unavailable = why;
				continue;
			}
			uint64_t d = hash_bytes(c.h_out, ne * sizeof(float));
			if (!r.hist.count(d)) {
				r.ulp[d] = max_ulp(c.h_out, r.ref.data(), ne);
				std::string msg;
				if (!w.check(c.h_out, targets[t], &msg)) {
					r.check_ok = false;
					if (r.check_msg.empty())
						r.check_msg = msg;
				}
			}
			if (t == 0 && mode == "native" && !o.save_ref_dir.empty())
				write_file(o.save_ref_dir + "/" + w.name + ".bin", c.h_out, ne);
			r.hist[d]++;
			r.matches_ref += d == r.ref_digest;
			r.by_target[targets[t]].insert(d);
			if (w.records_sms)
				r.sm_seen[sms]++;
			r.done++;
		}
	}
	for (auto &r : ts)
		emit(c, o, mode, fixed, r);
}

/* ------------------------------------------------------------ corunner */

static volatile sig_atomic_t g_stop;
static void on_signal(int)
{
	g_stop = 1;
}

static int corunner(const Opts &o)
{
	struct sigaction sa;
	std::memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGINT, &sa, nullptr);
	SplitKGemm w;
	w.setup(99, 0);
	unsigned *mask;
	CK(cudaMalloc(&mask, 8 * sizeof(unsigned)));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	double t0 = now_s();
	long gemms = 0, phases = 0;
	say("corunner: %.0f ms on, %.0f ms off, at most %.0f s", o.on_ms, o.off_ms, o.seconds);
	while (!g_stop && now_s() - t0 < o.seconds) {
		double p0 = now_s();
		phases++;
		while (!g_stop && (now_s() - p0) * 1e3 < o.on_ms) {
			std::string why;
			for (int i = 0; i < 4; i++)
				w.enqueue(0, s, mask, &why);
			CK(cudaStreamSynchronize(s));
			gemms += 4;
		}
		double q0 = now_s();
		while (!g_stop && (now_s() - q0) * 1e3 < o.off_ms)
			usleep(5000);
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaDeviceSynchronize());
	say("corunner: %ld GEMMs in %ld on-phases over %.1f s", gemms, phases, now_s() - t0);
	std::printf("{\"corunner_gemms\":%ld,\"on_phases\":%ld,\"seconds\":%.3f}\n", gemms, phases,
		    now_s() - t0);
	return 0;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	setvbuf(stderr, nullptr, _IOLBF, 0);
	Opts o;
	bool co = argc > 1 && std::strcmp(argv[1], "corunner") == 0;
	for (int i = co ? 2 : 1; i < argc; i++) {
		const char *a = argv[i];
		if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			std::fprintf(stderr, "drift: %s needs a value (or is unknown)\n", a);
			usage(stderr);
			return 2;
		}
		const char *v = argv[++i];
		if (!std::strcmp(a, "--modes"))
			o.modes = split_list(v);
		else if (!std::strcmp(a, "--workloads"))
			o.workloads = split_list(v);
		else if (!std::strcmp(a, "--trials"))
			o.trials = (int)parse_long(a, v, 1, 10000000);
		else if (!std::strcmp(a, "--seed"))
			o.seed = (uint64_t)parse_long(a, v, 0, LONG_MAX);
		else if (!std::strcmp(a, "--sizes")) {
			o.sizes.clear();
			for (auto &s : split_list(v))
				o.sizes.push_back((int)parse_long(a, s.c_str(), 1, 1024));
		} else if (!std::strcmp(a, "--ref"))
			o.ref_dir = v;
		else if (!std::strcmp(a, "--save-ref"))
			o.save_ref_dir = v;
		else if (!std::strcmp(a, "--out"))
			o.out_path = v;
		else if (!std::strcmp(a, "--tag"))
			o.tag = v;
		else if (!std::strcmp(a, "--seconds"))
			o.seconds = (double)parse_long(a, v, 1, 3600);
		else if (!std::strcmp(a, "--on-ms"))
			o.on_ms = (double)parse_long(a, v, 1, 60000);
		else if (!std::strcmp(a, "--off-ms"))
			o.off_ms = (double)parse_long(a, v, 0, 60000);
		else {
			std::fprintf(stderr, "drift: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
	}
	for (auto &m : o.modes)
		if (!is_fixed_mode(m) && m != "reshape_grid" && m != "reshape_cublas") {
			std::fprintf(stderr, "drift: unknown mode '%s'\n", m.c_str());
			return 2;
		}
	if (o.sizes.empty()) {
		std::fprintf(stderr, "drift: --sizes is empty\n");
		return 2;
	}
	for (char ch : o.tag)
		if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) {
			std::fprintf(
			    stderr, "drift: --tag must not contain quotes or control characters\n");
			return 2;
		}

	static const char *const kWorkloads[] = {"reduce_sum", "splitk_gemm", "cublas_sgemm",
						 "cublas_gemmex_bf16"};
	for (auto &n : o.workloads) {
		bool ok = false;
		for (const char *k : kWorkloads)
			ok |= n == k;
		if (!ok) {
			std::fprintf(stderr, "drift: unknown workload '%s'\n", n.c_str());
			return 2;
		}
	}

	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		std::fprintf(stderr, "FAIL drift: no CUDA device (%s)\n",
			     e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
		return 1;
	}
	CK(cudaSetDevice(0));
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	CK(cudaFree(nullptr));
	if (co)
		return corunner(o);

	Ctx c;
	c.device_sms = p.multiProcessorCount;
	c.device_name = p.name;
	for (auto &ch : c.device_name)
		if (ch == '"' || ch == '\\')
			ch = ' ';
	c.out = stdout;
	if (!o.out_path.empty()) {
		c.out = std::fopen(o.out_path.c_str(), "a");
		if (!c.out)
			die("cannot open %s: %s", o.out_path.c_str(), std::strerror(errno));
	}
	say("device %s, %d SMs; modes %zu, %d trials each", p.name, p.multiProcessorCount,
	    o.modes.size(), o.trials);

	std::vector<Workload *> all = {new ReduceSum(), new SplitKGemm(), new CublasGemm(false),
				       new CublasGemm(true)};
	std::vector<Workload *> ws;
	if (o.workloads.empty()) {
		ws = all;
	} else {
		for (auto &n : o.workloads) {
			Workload *hit = nullptr;
			for (auto *w : all)
				if (w->name == n)
					hit = w;
			if (!hit) {
				std::fprintf(stderr, "drift: unknown workload '%s'\n", n.c_str());
				return 2;
			}
			ws.push_back(hit);
		}
	}
	int max_target = *std::max_element(o.sizes.begin(), o.sizes.end());
	size_t max_out = 1;
	double t0 = now_s();
	for (auto *w : ws) {
		w->setup(o.seed, max_target);
		max_out = std::max(max_out, w->out_elems);
	}
	CK(cudaDeviceSynchronize());
	say("set-up %.2f s", now_s() - t0);
	CK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
	CK(cudaMalloc(&c.d_mask, 8 * sizeof(unsigned)));
	CK(cudaMallocHost(&c.h_mask, 8 * sizeof(unsigned)));
	CK(cudaMallocHost(&c.h_out, max_out * sizeof(float)));
	c.h_out_elems = max_out;

	for (auto &m : o.modes)
		run_mode(c, o, ws, m);
	CK(cudaDeviceSynchronize());
	if (c.out != stdout)
		std::fclose(c.out);
	say("done in %.1f s%s", now_s() - t0, c.failed ? " (a correctness check FAILED)" : "");
	return c.failed ? 1 : 0;
}
