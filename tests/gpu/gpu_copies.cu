/* SPDX-License-Identifier: MIT */
/*
 * Copies and memsets, checked only against what CUDA guarantees (Runtime API,
 * "API synchronization behavior"):
 *  - synchronous cudaMemcpy from pageable memory "will return once the pageable
 *    buffer has been copied to the staging memory": the source may be
 *    overwritten right after it returns. From pinned memory it is synchronous.
 *    Device to host (pageable or pinned) "returns only once the copy has
 *    completed". Host to host is fully synchronous.
 *  - cudaMemcpyAsync between device and pageable memory "might be synchronous":
 *    overwriting its pageable source right after it returns is NOT guaranteed
 *    natively; that case is a NOTE here unless VE_GPU_STRICT_PAGEABLE=1, which
 *    run.sh sets under Vitamin-E, whose design promises it (DESIGN section 5:
 *    "a copy from pageable host memory returns to the app only after its source
 *    bytes are safe"). Everything else async is checked after a stream sync.
 *  - stream order of copies/memsets behind slow kernels (the copy must not
 *    overtake the kernel), on the legacy stream and on created streams, and a
 *    long H2D -> kernel -> D2H pipeline on one stream;
 *  - cudaMemcpy2D/3D (sync and async, sub-rectangles and sub-boxes), memsets
 *    1D/2D/3D at unaligned offsets.
 */
#include "gpu_common.h"

static const size_t BIG = 4u << 20; /* words: 16 MiB buffers */
static const uint64_t MS = 1000000ull;

static void fill(uint32_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint32_t)i * 2654435761u ^ seed;
}

static bool same(const uint32_t *got, size_t n, uint32_t seed, const char *name)
{
	std::vector<uint32_t> want(n);
	fill(want.data(), n, seed);
	return check_array(name, got, want.data(), n);
}

static bool strict_pageable(void)
{
	const char *s = std::getenv("VE_GPU_STRICT_PAGEABLE");
	return s && std::strcmp(s, "1") == 0;
}

/* Kernel that writes a different pattern after a spin: a copy ordered after it
 * must overwrite (or read) its result, never race with it. */
static void slow_poison(uint32_t *d, size_t n, cudaStream_t s, uint64_t ns)
{
	k_slow_map<<<SLOW_BLOCKS, 256, 0, s>>>(d, nullptr, (int)n, 0, 0x5a5a5a5au, ns);
	CKL();
}

static void test_1d(void)
{
	uint32_t *d, *d2, *pin, *pin2;
	CK(cudaMalloc(&d, BIG * 4));
	CK(cudaMalloc(&d2, BIG * 4));
	CK(cudaMallocHost(&pin, BIG * 4));
	CK(cudaMallocHost(&pin2, BIG * 4));
	std::vector<uint32_t> pg(BIG), pg2(BIG);
	cudaStream_t s, nb;
	CK(cudaStreamCreate(&s));
	CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));

	/* Sync pageable H2D behind a slow legacy kernel, source overwritten at once. */
	fill(pg.data(), BIG, 0x1111);
	slow_poison(d, BIG, 0, 30 * MS);
	CK(cudaMemcpy(d, pg.data(), BIG * 4, cudaMemcpyHostToDevice));
	fill(pg.data(), BIG, 0x2222);
	CK(cudaMemcpy(pg2.data(), d, BIG * 4, cudaMemcpyDeviceToHost));
	same(pg2.data(), BIG, 0x1111, "sync_h2d_pageable_source_reuse");
	digest_vec(pg2);

	/* Sync pinned H2D, same. */
	fill(pin, BIG, 0x3333);
	slow_poison(d, BIG, 0, 30 * MS);
	CK(cudaMemcpy(d, pin, BIG * 4, cudaMemcpyHostToDevice));
	fill(pin, BIG, 0x4444);
	CK(cudaMemcpy(pin2, d, BIG * 4, cudaMemcpyDeviceToHost));
	same(pin2, BIG, 0x3333, "sync_h2d_pinned_source_reuse");
	digest_add(pin2, BIG * 4);

	/* Sync D2H after a slow kernel on a blocking stream (the legacy copy waits
	 * for it): the data is there when cudaMemcpy returns. */
	k_slow_map<<<SLOW_BLOCKS, 256, 0, s>>>(d, nullptr, (int)BIG, 7, 1, 30 * MS);
	CKL();
	CK(cudaMemcpy(pg2.data(), d, BIG * 4, cudaMemcpyDeviceToHost));
	{
		std::vector<uint32_t> r(BIG);
		ref_slow_map(r, nullptr, 7, 1);
		check_array("sync_d2h_pageable_after_blocking_stream_kernel", pg2.data(), r.data(),
			    BIG);
	}
	k_slow_map<<<SLOW_BLOCKS, 256, 0, s>>>(d, nullptr, (int)BIG, 9, 2, 30 * MS);
	CKL();
	CK(cudaMemcpy(pin2, d, BIG * 4, cudaMemcpyDeviceToHost));
	{
		std::vector<uint32_t> r(BIG);
		ref_slow_map(r, nullptr, 9, 2);
		check_array("sync_d2h_pinned_after_blocking_stream_kernel", pin2, r.data(), BIG);
	}

	/* Async pinned round trip on a created stream. */
	fill(pin, BIG, 0x5555);
	slow_poison(d, BIG, s, 20 * MS);
	CK(cudaMemcpyAsync(d, pin, BIG * 4, cudaMemcpyHostToDevice, s));
	k_affine<<<1024, 256, 0, s>>>(d, (int)BIG, 0x99u);
	CKL();
	CK(cudaMemcpyAsync(pin2, d, BIG * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	{
		std::vector<uint32_t> r(BIG);
		fill(r.data(), BIG, 0x5555);
		ref_affine(r, 0x99u);
		check_array("async_pinned_roundtrip", pin2, r.data(), BIG);
		digest_add(pin2, BIG * 4);
	}

	/* Async pageable round trip, checked after the sync. */
	fill(pg.data(), BIG, 0x6666);
	slow_poison(d, BIG, nb, 20 * MS);
	CK(cudaMemcpyAsync(d, pg.data(), BIG * 4, cudaMemcpyHostToDevice, nb));
	k_affine<<<1024, 256, 0, nb>>>(d, (int)BIG, 0x98u);
	CKL();
	CK(cudaMemcpyAsync(pg2.data(), d, BIG * 4, cudaMemcpyDeviceToHost, nb));
	CK(cudaStreamSynchronize(nb));
	{
		std::vector<uint32_t> r(BIG);
		fill(r.data(), BIG, 0x6666);
		ref_affine(r, 0x98u);
		check_array("async_pageable_roundtrip", pg2.data(), r.data(), BIG);
		digest_vec(pg2);
	}

	/* Async pageable H2D behind a slow kernel, source overwritten right after
	 * the call returns (not guaranteed by CUDA; see the header). */
	fill(pg.data(), BIG, 0x7777);
	slow_poison(d, BIG, nb, 50 * MS);
	CK(cudaMemcpyAsync(d, pg.data(), BIG * 4, cudaMemcpyHostToDevice, nb));
	fill(pg.data(), BIG, 0x8888);
	CK(cudaMemcpyAsync(pg2.data(), d, BIG * 4, cudaMemcpyDeviceToHost, nb));
	CK(cudaStreamSynchronize(nb));
	{
		std::vector<uint32_t> want(BIG);
		fill(want.data(), BIG, 0x7777);
		bool ok = std::memcmp(pg2.data(), want.data(), BIG * 4) == 0;
		if (ok || strict_pageable())
			check_array("async_h2d_pageable_source_reuse", pg2.data(), want.data(), BIG);
		else
			note("async_h2d_pageable_source_reuse",
			     "the copy did not take the bytes present at the call; CUDA allows "
			     "this for cudaMemcpyAsync from pageable memory");
	}

	/* D2D, sync (legacy stream, ordered after a slow legacy kernel) and async. */
	k_slow_map<<<SLOW_BLOCKS, 256, 0, 0>>>(d, nullptr, (int)BIG, 11, 3, 30 * MS);
	CKL();
	CK(cudaMemcpy(d2, d, BIG * 4, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(pg2.data(), d2, BIG * 4, cudaMemcpyDeviceToHost));
	{
		std::vector<uint32_t> r(BIG);
		ref_slow_map(r, nullptr, 11, 3);
		check_array("sync_d2d_after_legacy_kernel", pg2.data(), r.data(), BIG);
		digest_vec(pg2);
	}
	k_slow_map<<<SLOW_BLOCKS, 256, 0, nb>>>(d, nullptr, (int)BIG, 13, 4, 30 * MS);
	CKL();
	CK(cudaMemcpyAsync(d2, d, BIG * 4, cudaMemcpyDeviceToDevice, nb));
	k_affine<<<1024, 256, 0, nb>>>(d2, (int)BIG, 0x42u);
	CKL();
	CK(cudaMemcpyAsync(pin2, d2, BIG * 4, cudaMemcpyDeviceToHost, nb));
	CK(cudaStreamSynchronize(nb));
	{
		std::vector<uint32_t> r(BIG);
		ref_slow_map(r, nullptr, 13, 4);
		ref_affine(r, 0x42u);
		check_array("async_d2d_then_kernel", pin2, r.data(), BIG);
		digest_add(pin2, BIG * 4);
	}

	/* cudaMemcpyDefault (kind inferred through UVA), pinned and pageable. */
	fill(pin, BIG / 4, 0x9999);
	fill(pg.data(), BIG / 4, 0xaaaa);
	CK(cudaMemcpy(d, pin, BIG, cudaMemcpyDefault));
	CK(cudaMemcpy(d + BIG / 4, pg.data(), BIG, cudaMemcpyDefault));
	CK(cudaMemcpy(pg2.data(), d, 2 * BIG, cudaMemcpyDefault));
	{
		std::vector<uint32_t> r(BIG / 2);
		fill(r.data(), BIG / 4, 0x9999);
		fill(r.data() + BIG / 4, BIG / 4, 0xaaaa);
		check_array("memcpy_default_kind", pg2.data(), r.data(), BIG / 2);
	}

	/* Host to host: fully synchronous, checked at once. */
	fill(pg.data(), BIG, 0xbbbb);
	CK(cudaMemcpy(pg2.data(), pg.data(), BIG * 4, cudaMemcpyHostToHost));
	same(pg2.data(), BIG, 0xbbbb, "h2h_sync");
	fill(pin, BIG, 0xcccc);
	CK(cudaMemcpyAsync(pg2.data(), pin, BIG * 4, cudaMemcpyHostToHost, s));
	same(pg2.data(), BIG, 0xcccc, "h2h_async_is_synchronous");
	CK(cudaStreamSynchronize(s));

	/* Memsets: stream order behind slow kernels, unaligned ranges. */
	slow_poison(d, BIG, s, 30 * MS);
	CK(cudaMemsetAsync(d, 0xab, BIG * 4, s));
	CK(cudaMemcpyAsync(pin2, d, BIG * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	{
		std::vector<uint32_t> r(BIG, 0xabababab);
		check_array("memset_async_after_kernel", pin2, r.data(), BIG);
	}
	slow_poison(d, BIG, s, 30 * MS); /* blocking stream; the legacy memset waits */
	CK(cudaMemset(d, 0x00, BIG * 4));
	{
		unsigned char *db = (unsigned char *)d;
		CK(cudaMemset(db + 3, 0x7f, 1001));
		/* s is blocking: ordered after the legacy memsets, and the legacy
		 * copy below after it. */
		CK(cudaMemsetAsync(db + 2000, 0xc3, 4097, s));
		std::vector<unsigned char> got(8192), want(8192, 0);
		std::memset(want.data() + 3, 0x7f, 1001);
		std::memset(want.data() + 2000, 0xc3, 4097);
		CK(cudaMemcpy(got.data(), db, 8192, cudaMemcpyDeviceToHost));
		check_array("memset_unaligned", got.data(), want.data(), 8192);
		digest_vec(got);
	}

	/* A pipeline on one stream: H2D patch -> kernel -> D2H snapshot, x64. */
	{
		const int ITER = 64, M = 4096;
		uint32_t *in, *out, *x, *tmp;
		CK(cudaMallocHost(&in, (size_t)ITER * M * 4));
		CK(cudaMallocHost(&out, (size_t)ITER * M * 4));
		CK(cudaMalloc(&x, M * 4));
		CK(cudaMalloc(&tmp, M * 4));
		for (int k = 0; k < ITER; k++)
			fill(in + (size_t)k * M, M, 0x100u + k);
		CK(cudaMemsetAsync(x, 0, M * 4, nb));
		for (int k = 0; k < ITER; k++) {
			CK(cudaMemcpyAsync(tmp, in + (size_t)k * M, M * 4, cudaMemcpyHostToDevice, nb));
			k_mix<<<CHAIN_BLOCKS(M), 256, 0, nb>>>(x, tmp, M);
			CKL();
			CK(cudaMemcpyAsync(out + (size_t)k * M, x, M * 4, cudaMemcpyDeviceToHost, nb));
		}
		CK(cudaStreamSynchronize(nb));
		std::vector<uint32_t> r(M, 0), want((size_t)ITER * M), y(M);
		for (int k = 0; k < ITER; k++) {
			fill(y.data(), M, 0x100u + k);
			ref_mix(r, y);
			std::memcpy(want.data() + (size_t)k * M, r.data(), M * 4);
		}
		check_array("pipeline_h2d_kernel_d2h", out, want.data(), (size_t)ITER * M);
		digest_add(out, (size_t)ITER * M * 4);
		CK(cudaFreeHost(in));
		CK(cudaFreeHost(out));
		CK(cudaFree(x));
		CK(cudaFree(tmp));
	}

	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(nb));
	CK(cudaFree(d));
	CK(cudaFree(d2));
	CK(cudaFreeHost(pin));
	CK(cudaFreeHost(pin2));
}

static void test_2d(void)
{
	const size_t W = 300, H = 200;  /* words */
	const size_t HP = 320;          /* host pitch, words */
	std::vector<uint32_t> src(HP * H), dst(HP * H, 0);
	fill(src.data(), src.size(), 0xd00d);
	uint32_t *d1, *d2;
	size_t p1, p2;
	CK(cudaMallocPitch(&d1, &p1, W * 4, H));
	CK(cudaMallocPitch(&d2, &p2, W * 4, H));
	/* Whole matrix in. */
	CK(cudaMemcpy2D(d1, p1, src.data(), HP * 4, W * 4, H, cudaMemcpyHostToDevice));
	/* 2D memset of d2, then a sub-rectangle d1[10.., 20..] (100 x 50) to d2[5.., 7..]. */
	CK(cudaMemset2D(d2, p2, 0x11, W * 4, H));
	CK(cudaMemcpy2D((char *)d2 + 7 * p2 + 5 * 4, p2, (char *)d1 + 20 * p1 + 10 * 4, p1, 100 * 4,
			50, cudaMemcpyDeviceToDevice));
	/* 2D memset of a sub-rectangle at an odd byte offset. */
	CK(cudaMemset2D((char *)d2 + 150 * p2 + 3, p2, 0x22, 33, 9));
	CK(cudaMemcpy2D(dst.data(), HP * 4, d2, p2, W * 4, H, cudaMemcpyDeviceToHost));
	std::vector<uint32_t> want(HP * H, 0);
	for (size_t r = 0; r < H; r++)
		for (size_t c = 0; c < W; c++)
			want[r * HP + c] = 0x11111111u;
	for (size_t r = 0; r < 50; r++)
		for (size_t c = 0; c < 100; c++)
			want[(7 + r) * HP + 5 + c] = src[(20 + r) * HP + 10 + c];
	for (size_t r = 0; r < 9; r++)
		std::memset((char *)want.data() + (150 + r) * HP * 4 + 3, 0x22, 33);
	check_array("memcpy2d_memset2d_sync", dst.data(), want.data(), want.size());
	digest_vec(dst);

	/* Async, pinned, on a stream, behind a slow kernel that poisons d2. */
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *hp;
	CK(cudaMallocHost(&hp, HP * H * 4));
	fill(hp, HP * H, 0xbeef);
	k_slow_map<<<SLOW_BLOCKS, 256, 0, s>>>(d2, nullptr, (int)(p2 / 4 * H), 0, 0x5a5a5a5au,
					       30 * MS);
	CKL();
	CK(cudaMemcpy2DAsync(d2, p2, hp, HP * 4, W * 4, H, cudaMemcpyHostToDevice, s));
	CK(cudaMemset2DAsync((char *)d2 + 3 * p2, p2, 0x33, 64, 4, s));
	uint32_t *hout;
	CK(cudaMallocHost(&hout, HP * H * 4));
	std::memset(hout, 0, HP * H * 4);
	CK(cudaMemcpy2DAsync(hout, HP * 4, d2, p2, W * 4, H, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	std::vector<uint32_t> want2(HP * H, 0);
	for (size_t r = 0; r < H; r++)
		for (size_t c = 0; c < W; c++)
			want2[r * HP + c] = hp[r * HP + c];
	for (size_t r = 0; r < 4; r++)
		std::memset((char *)want2.data() + (3 + r) * HP * 4, 0x33, 64);
	check_array("memcpy2d_memset2d_async", hout, want2.data(), want2.size());
	digest_add(hout, HP * H * 4);
	CK(cudaFreeHost(hp));
	CK(cudaFreeHost(hout));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d1));
	CK(cudaFree(d2));
}

static void test_3d(void)
{
	const size_t X = 64, Y = 32, Z = 16; /* words, rows, slices */
	std::vector<uint32_t> src(X * Y * Z);
	fill(src.data(), src.size(), 0xf00d);
	cudaExtent ext = make_cudaExtent(X * 4, Y, Z);
	cudaPitchedPtr d1, d2;
	CK(cudaMalloc3D(&d1, ext));
	CK(cudaMalloc3D(&d2, ext));
	CK(cudaMemset3D(d2, 0x44, ext));

	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(src.data(), X * 4, X * 4, Y);
	p.dstPtr = d1;
	p.extent = ext;
	p.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&p));

	/* Sub-box d1[x 8..24, y 4..12, z 2..6] -> d2 at [x 1.., y 2.., z 3..] (async). */
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	cudaMemcpy3DParms q = {};
	q.srcPtr = d1;
	q.srcPos = make_cudaPos(8 * 4, 4, 2);
	q.dstPtr = d2;
	q.dstPos = make_cudaPos(1 * 4, 2, 3);
	q.extent = make_cudaExtent(16 * 4, 8, 4);
	q.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3DAsync(&q, s));
	/* 3D memset of a small box inside a row, after the copy. */
	cudaPitchedPtr d2off = d2;
	d2off.ptr = (char *)d2.ptr + 8 + 20 * d2.pitch + 10 * d2.pitch * Y;
	CK(cudaMemset3DAsync(d2off, 0x55, make_cudaExtent(12, 3, 2), s));
	uint32_t *dst; /* pinned: the async copy is truly asynchronous */
	CK(cudaMallocHost(&dst, X * Y * Z * 4));
	std::memset(dst, 0, X * Y * Z * 4);
	cudaMemcpy3DParms r = {};
	r.srcPtr = d2;
	r.dstPtr = make_cudaPitchedPtr(dst, X * 4, X * 4, Y);
	r.extent = ext;
	r.kind = cudaMemcpyDeviceToHost;
	CK(cudaMemcpy3DAsync(&r, s));
	CK(cudaStreamSynchronize(s));

	std::vector<uint32_t> want(X * Y * Z, 0x44444444u);
	for (size_t z = 0; z < 4; z++)
		for (size_t y = 0; y < 8; y++)
			for (size_t x = 0; x < 16; x++)
				want[((3 + z) * Y + 2 + y) * X + 1 + x] =
					src[((2 + z) * Y + 4 + y) * X + 8 + x];
	for (size_t z = 0; z < 2; z++)
		for (size_t y = 0; y < 3; y++)
			std::memset((char *)want.data() + ((10 + z) * Y + 20 + y) * X * 4 + 8, 0x55, 12);
	check_array("memcpy3d_memset3d", dst, want.data(), want.size());
	digest_add(dst, X * Y * Z * 4);
	CK(cudaFreeHost(dst));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d1.ptr));
	CK(cudaFree(d2.ptr));
}

int main()
{
	gpu_init("copies");
	test_1d();
	test_2d();
	test_3d();
	return gpu_finish();
}
