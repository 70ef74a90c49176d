/* SPDX-License-Identifier: MIT */
/*
 * Copies, memsets and frees: results, stream order, and the host
 * synchronization rules of CUDA's "API synchronization behavior", for
 * pinned (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister) and pageable
 * (malloc) host memory. Self-checking, see prog_shim.h.
 *
 *   prog_shim_memory [test...]
 *
 * What is checked, per "API synchronization behavior" (Driver API section 2):
 *   - sync copies from pageable or pinned memory to the device: the source may
 *     be reused as soon as the call returns;
 *   - sync copies to the host return only once the copy completed;
 *   - sync device-to-device copies and sync memsets of device memory do not
 *     synchronize with the host (they return while earlier work is held);
 *   - sync memsets of pinned host memory are synchronous;
 *   - async copies between device and pageable memory "might be synchronous";
 *     what real drivers do and Vitamin-E keeps (docs/semantics.md, "The
 *     table") is checked:
 *     a pageable source may be reused when cuMemcpyHtoDAsync returns, and
 *     cuMemcpyDtoHAsync into pageable memory has completed when it returns;
 *   - async copies with pinned memory are asynchronous and stream-ordered.
 */
#include "prog_shim.h"

#define N 4096

static CUstream s_nb, s_b;

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

static bool same(const uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(i * 7 + seed))
			return false;
	return true;
}

/* same() for p[off..n) of a buffer filled from offset 0. */
static bool same_from(const uint8_t *p, size_t off, size_t n, uint32_t seed)
{
	return same(p + off, n - off, (uint32_t)(seed + off * 7));
}

static void dev_read(void *dst, CUdeviceptr src, size_t n)
{
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(dst, src, n));
}

/* The host kinds a test runs over. */
enum hk { H_PAGEABLE, H_ALLOCHOST, H_HOSTALLOC, H_HOSTALLOC_MAPPED, H_REGISTERED, H_NKINDS };
static const char *const hk_name[] = {"pageable", "cuMemAllocHost", "cuMemHostAlloc",
				      "cuMemHostAlloc(DEVICEMAP)", "cuMemHostRegister"};

static uint8_t *host_alloc(enum hk k, size_t n)
{
	void *p = NULL;
	switch (k) {
	case H_PAGEABLE:
		p = malloc(n);
		break;
	case H_ALLOCHOST:
		CK(cuMemAllocHost(&p, n));
		break;
	case H_HOSTALLOC:
		CK(cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE));
		break;
	case H_HOSTALLOC_MAPPED:
		CK(cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_DEVICEMAP));
		break;
	case H_REGISTERED:
		p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
		CK(cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_DEVICEMAP));
		break;
	default:
		break;
	}
	if (!p) {
		fprintf(stderr, "FAIL: host allocation\n");
		exit(1);
	}
	return p;
}

static void host_free(enum hk k, uint8_t *p)
{
	if (k == H_PAGEABLE) {
		free(p);
	} else if (k == H_REGISTERED) {
		CK(cuMemHostUnregister(p));
		free(p);
	} else {
		CK(cuMemFreeHost(p));
	}
}

/* HtoD: async (pinned: asynchronous, source kept until sync; pageable: reusable at once)
 * and sync (reusable at once), each queued behind slow work so it is really deferred. */
static void t_htod(void)
{
	CUdeviceptr d = dalloc(N), flag = dalloc(4);
	uint8_t *back = malloc(N);
	for (int k = 0; k < H_NKINDS; k++) {
		uint8_t *h = host_alloc((enum hk)k, N);
		CUstream streams[] = {s_nb, s_b, NULL, CU_STREAM_PER_THREAD};
		for (int si = 0; si < 4; si++) {
			uint32_t seed = (uint32_t)(k * 16 + si);
			fill(h, N, seed);
			slow_set(streams[si], flag, 1, 5);
			CK(cuMemcpyHtoDAsync(d, h, N, streams[si]));
			if (k == H_PAGEABLE) {
				memset(h, 0xee, N); /* reused at once: the old bytes must arrive */
			}
			CK(cuStreamSynchronize(streams[si]));
			dev_read(back, d, N);
			CHECKF(same(back, N, seed), "HtoDAsync from %s on stream %d", hk_name[k],
			       si);
			/* cuMemcpyAsync with a host pointer as the source (unified addressing). */
			fill(h, N, seed + 1);
			slow_set(streams[si], flag, 1, 2);
			CK(cuMemcpyAsync(d, (CUdeviceptr)(uintptr_t)h, N, streams[si]));
			if (k == H_PAGEABLE)
				memset(h, 0xee, N);
			CK(cuStreamSynchronize(streams[si]));
			dev_read(back, d, N);
			CHECKF(same(back, N, seed + 1), "cuMemcpyAsync from %s on stream %d",
			       hk_name[k], si);
		}
		/* Sync HtoD: the source may change as soon as it returns, pinned or not. */
		fill(h, N, 99);
		slow_set(s_b, flag, 1, 5); /* the legacy stream waits for it */
		CK(cuMemcpyHtoD(d, h, N));
		memset(h, 0xee, N);
		dev_read(back, d, N);
		CHECKF(same(back, N, 99), "cuMemcpyHtoD from %s", hk_name[k]);
		fill(h, N, 98);
		CK(cuMemcpy(d, (CUdeviceptr)(uintptr_t)h, N));
		memset(h, 0xee, N);
		dev_read(back, d, N);
		CHECKF(same(back, N, 98), "cuMemcpy from %s", hk_name[k]);
		host_free((enum hk)k, h);
	}
	free(back);
	CK(cuMemFree(d));
	CK(cuMemFree(flag));
}

/* DtoH: sync copies and async copies into pageable memory are complete on return; async
 * copies into pinned memory complete in stream order. */
static void t_dtoh(void)
{
	CUdeviceptr d = dalloc(N), flag = dalloc(4);
	uint8_t *src = malloc(N);
	for (int k = 0; k < H_NKINDS; k++) {
		uint8_t *h = host_alloc((enum hk)k, N);
		CUstream streams[] = {s_nb, s_b, NULL, CU_STREAM_PER_THREAD};
		for (int si = 0; si < 4; si++) {
			uint32_t seed = (uint32_t)(k * 16 + si + 3);
			fill(src, N, seed);
			CK(cuMemcpyHtoD(d, src, N));
			memset(h, 0, N);
			/* A kernel writes the first word late: the copy must see it. */
			slow_set(streams[si], d, 0xabababab, 5);
			CK(cuMemcpyDtoHAsync(h, d, N, streams[si]));
			if (k == H_PAGEABLE) {
				/* complete on return, without any sync */
				CHECKF(same_from(h, 4, N, seed) && *(uint32_t *)h == 0xabababab,
				       "DtoHAsync into pageable memory on stream %d not complete",
				       si);
			}
			CK(cuStreamSynchronize(streams[si]));
			CHECKF(same_from(h, 4, N, seed) && *(uint32_t *)h == 0xabababab,
			       "DtoHAsync into %s on stream %d", hk_name[k], si);
			memset(h, 0, N);
			slow_set(streams[si], d, 0xcdcdcdcd, 2);
			CK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)h, d, N, streams[si]));
			if (k == H_PAGEABLE)
				CHECKF(*(uint32_t *)h == 0xcdcdcdcd,
				       "cuMemcpyAsync into pageable memory not complete");
			CK(cuStreamSynchronize(streams[si]));
			CHECK(*(uint32_t *)h == 0xcdcdcdcd && same_from(h, 4, N, seed));
		}
		/* Sync DtoH (legacy stream): after blocking-stream work, complete on return. */
		memset(h, 0, N);
		slow_set(s_b, d, 0x12345678, 5);
		CK(cuMemcpyDtoH(h, d, N));
		CHECKF(*(uint32_t *)h == 0x12345678, "cuMemcpyDtoH into %s", hk_name[k]);
		memset(h, 0, N);
		slow_set(CU_STREAM_PER_THREAD, d, 0x87654321, 5);
		CK(cuMemcpy((CUdeviceptr)(uintptr_t)h, d, N));
		CHECKF(*(uint32_t *)h == 0x87654321, "cuMemcpy into %s", hk_name[k]);
		/* Host to host: fully synchronous. */
		uint8_t *h2 = malloc(N);
		fill(h, N, 5);
		CK(cuMemcpy((CUdeviceptr)(uintptr_t)h2, (CUdeviceptr)(uintptr_t)h, N));
		CHECK(same(h2, N, 5));
		free(h2);
		host_free((enum hk)k, h);
	}
	/* A source past the end of its allocation: refused at the call, as the
	 * driver does, and not a sticky error of later calls (a copy into
	 * pageable memory may run as a logical op through a bounce buffer,
	 * which checks the range first). */
	uint8_t small[64];
	CHECK(cuMemcpyDtoHAsync(small, d + N - 16, sizeof(small), s_nb) != CUDA_SUCCESS);
	CHECK(cuMemcpyDtoH(small, d + N - 16, sizeof(small)) != CUDA_SUCCESS);
	CK(cuStreamSynchronize(s_nb));
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoHAsync(small, d, sizeof(small), s_nb));
	CHECKF(*(uint32_t *)small == 0x87654321, "DtoHAsync after a refused copy read %#x",
	       *(uint32_t *)small);
	/* While a capture is open (on another stream), a copy into pageable
	 * memory goes to the driver, which decides what it does to the
	 * capture; it is not bounced (test_shim_config counts those). */
	CUstream cs, other;
	CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
	memset(small, 0, sizeof(small));
	CK(cuMemcpyDtoHAsync(small, d, sizeof(small), other));
	CHECKF(*(uint32_t *)small == 0x87654321, "DtoHAsync during a capture read %#x",
	       *(uint32_t *)small);
	CUgraph g;
	CK(cuStreamEndCapture(cs, &g));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(cs));
	CK(cuStreamDestroy(other));
	free(src);
	CK(cuMemFree(d));
	CK(cuMemFree(flag));
}

/* Device-to-device copies and memsets of device memory do not block the host, but stay in
 * order on their stream; memsets of pinned memory complete before returning. */
static void t_dtod_memset(void)
{
	CUdeviceptr a = dalloc(N), b = dalloc(N), c = dalloc(N);
	uint8_t *h = malloc(N);
	/* cuMemcpyDtoD and cuMemsetD32 return while a gate holds the legacy stream. */
	struct gate_h g = gate_new();
	gate_launch(NULL, g, a, 0x11111111);
	CK(cuMemcpyDtoD(b, a, 4));
	CK(cuMemcpy(c, a, 4));
	CK(cuMemsetD32(a + 64, 0x22222222, 4));
	CK(cuMemsetD16(a + 128, 0x3333, 4));
	CK(cuMemsetD8(a + 192, 0x44, 4));
	CK(cuMemcpyDtoDAsync(b + 64, a + 64, 16, NULL));
	CHECK(atomic_load(&g.g->done) == 0);
	gate_open(g);
	CK(cuStreamSynchronize(NULL));
	GATE_OK(g);
	gate_free(g);
	uint32_t w[4];
	CHECK(read_u32(b) == 0x11111111 && read_u32(c) == 0x11111111);
	CK(cuMemcpyDtoH(w, b + 64, 16));
	CHECK(w[0] == 0x22222222 && w[3] == 0x22222222);
	CHECK(read_u32(a + 128) == 0x33333333 && read_u32(a + 192) == 0x44444444);
	/* Async memsets of every width, in stream order with kernels. */
	CUstream streams[] = {s_nb, s_b, NULL, CU_STREAM_PER_THREAD};
	for (int si = 0; si < 4; si++) {
		CUstream s = streams[si];
		CK(cuMemsetD32Async(a, 0x01010101, N / 4, s));
		muladd(s, a, 4, 2, 1); /* 0x02020203 */
		CK(cuMemsetD16Async(a + 16, 0x0505, 8, s));
		CK(cuMemsetD8Async(a + 33, 0x7f, 3, s));
		CK(cuMemcpyDtoDAsync(b, a, 64, s));
		CK(cuMemcpyAsync(c, b, 64, s));
		muladd(s, c, 1, 3, 0);
		CK(cuStreamSynchronize(s));
		uint8_t r[64];
		CK(cuMemcpyDtoH(r, b, 64));
		uint32_t c0 = read_u32(c);
		CHECKF(*(uint32_t *)r == 0x02020203 && r[16] == 5 && r[31] == 5 && r[32] == 1 &&
			   r[33] == 0x7f && r[35] == 0x7f && r[36] == 1 && c0 == 0x02020203u * 3,
		       "memsets on stream %d: %08x %02x %02x %08x", si, *(uint32_t *)r, r[16],
		       r[33], c0);
	}
	/* Memsets of pinned host memory (through its device pointer) are synchronous. */
	CUdeviceptr dp;
	uint8_t *mp = mapped_alloc(256, &dp);
	slow_set(s_b, a, 1, 5);
	CK(cuMemsetD32(dp, 0x5a5a5a5a, 16));
	CHECK(*(uint32_t *)mp == 0x5a5a5a5a && *(uint32_t *)(mp + 60) == 0x5a5a5a5a);
	CK(cuMemsetD8(dp + 64, 0x3c, 8));
	CHECK(mp[64] == 0x3c && mp[71] == 0x3c);
	CK(cuMemsetD16(dp + 128, 0x1234, 4));
	CHECK(*(uint16_t *)(mp + 134) == 0x1234);
	CK(cuMemsetD2D8(dp + 192, 16, 0x77, 4, 2));
	CHECK(mp[192] == 0x77 && mp[211] == 0x77 && mp[196] == 0);
	CK(cuMemFreeHost(mp));
	free(h);
	CK(cuMemFree(a));
	CK(cuMemFree(b));
	CK(cuMemFree(c));
}

/* Pitched 2-D copies and memsets, 3-D boxes, peer copies within the device. */
static void t_2d_3d_peer(void)
{
	enum { W = 100, H = 10 };
	CUdeviceptr dp;
	size_t pitch;
	CK(cuMemAllocPitch(&dp, &pitch, W, H, 4));
	CK(cuMemsetD2D32(dp, pitch, 0x07070707, W / 4, H));
	uint8_t img[H][W], pg[H][W];
	CUDA_MEMCPY2D m = {0};
	m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m.srcDevice = dp;
	m.srcPitch = pitch;
	m.dstMemoryType = CU_MEMORYTYPE_HOST;
	m.dstHost = img;
	m.dstPitch = W;
	m.WidthInBytes = W;
	m.Height = H;
	CK(cuMemcpy2D(&m));
	CHECK(img[0][0] == 7 && img[9][99] == 7);
	/* 2-D memsets of each width, async, on a stream, then 2-D copies into pinned and
	 * pageable memory and back. */
	uint8_t *pin = host_alloc(H_ALLOCHOST, W * H);
	CUstream streams[] = {s_nb, NULL};
	for (int si = 0; si < 2; si++) {
		CUstream s = streams[si];
		CK(cuMemsetD2D8Async(dp, pitch, 0x01, W, H, s));
		CK(cuMemsetD2D16Async(dp + pitch, pitch, 0x0202, W / 2, 2, s));
		CK(cuMemsetD2D32Async(dp + 4 * pitch + 8, pitch, 0x03030303, 4, 3, s));
		m.dstHost = pin;
		CK(cuMemcpy2DAsync(&m, s));
		CK(cuStreamSynchronize(s));
		CHECKF(pin[0] == 1 && pin[W] == 2 && pin[2 * W + 99] == 2 && pin[3 * W] == 1 &&
			   pin[4 * W + 8] == 3 && pin[6 * W + 23] == 3 && pin[6 * W + 24] == 1 &&
			   pin[9 * W + 99] == 1,
		       "2-D memsets on stream %d", si);
		/* pageable destination, async: complete on return */
		memset(pg, 0, sizeof(pg));
		m.dstHost = pg;
		slow_set(s, dp, 0x09090909, 3);
		CK(cuMemcpy2DAsync(&m, s));
		CHECKF(pg[0][0] == 9 && pg[4][8] == 3,
		       "2-D async into pageable memory on stream %d", si);
		CK(cuStreamSynchronize(s));
	}
	/* Host to pitched device, from pageable (reused at once) and pinned memory. */
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			pg[y][x] = (uint8_t)(y * 16 + x);
	CUDA_MEMCPY2D u = {0};
	u.srcMemoryType = CU_MEMORYTYPE_HOST;
	u.srcHost = pg;
	u.srcPitch = W;
	u.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	u.dstDevice = dp;
	u.dstPitch = pitch;
	u.WidthInBytes = W;
	u.Height = H;
	slow_set(s_nb, dp, 0, 3);
	CK(cuMemcpy2DAsync(&u, s_nb));
	memset(pg, 0xee, sizeof(pg));
	CK(cuStreamSynchronize(s_nb));
	m.dstHost = img;
	CK(cuMemcpy2D(&m));
	CHECK(img[0][0] == 0 && img[3][4] == 52 && img[9][99] == (uint8_t)(9 * 16 + 99));
	memcpy(pin, img, W * H);
	pin[5] = 0xaa;
	u.srcHost = pin;
	CK(cuMemcpy2D(&u));
	pin[5] = 0;
	CK(cuMemcpy2DUnaligned(&m));
	CHECK(img[0][5] == 0xaa && img[3][4] == 52);
	/* Device to device, 2-D, into a second pitched buffer. */
	CUdeviceptr dq;
	size_t qpitch;
	CK(cuMemAllocPitch(&dq, &qpitch, W, H, 4));
	CUDA_MEMCPY2D dd = {0};
	dd.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	dd.srcDevice = dp;
	dd.srcPitch = pitch;
	dd.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	dd.dstDevice = dq;
	dd.dstPitch = qpitch;
	dd.WidthInBytes = W;
	dd.Height = H;
	CK(cuMemcpy2D(&dd));
	CK(cuMemcpy2DAsync(&dd, s_b));
	CK(cuStreamSynchronize(s_b));
	uint8_t q[W];
	CK(cuMemcpyDtoH(q, dq + 3 * qpitch, W));
	CHECK(q[4] == 52);

	/* 3-D: a 4x3x2 box out of an 8x4x3 volume, both directions and device to device. */
	uint8_t vol[3][4][8], box[2][3][4];
	for (int z = 0; z < 3; z++)
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 8; x++)
				vol[z][y][x] = (uint8_t)(z * 100 + y * 10 + x);
	CUdeviceptr dv = dalloc(sizeof(vol)), dv2 = dalloc(sizeof(vol));
	CK(cuMemcpyHtoD(dv, vol, sizeof(vol)));
	CUDA_MEMCPY3D m3 = {0};
	m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m3.srcDevice = dv;
	m3.srcPitch = 8;
	m3.srcHeight = 4;
	m3.srcXInBytes = 2;
	m3.srcY = 1;
	m3.srcZ = 1;
	m3.dstMemoryType = CU_MEMORYTYPE_HOST;
	m3.dstHost = box;
	m3.dstPitch = 4;
	m3.dstHeight = 3;
	m3.WidthInBytes = 4;
	m3.Height = 3;
	m3.Depth = 2;
	memset(box, 0, sizeof(box));
	CK(cuMemcpy3D(&m3));
	CHECK(box[0][0][0] == 112 && box[1][2][3] == 235);
	memset(box, 0, sizeof(box));
	slow_set(s_nb, dv + 72, 0xd4d4d4d4, 3); /* vol[2][1][0..3]: box[1][0][0..1] */
	CK(cuMemcpy3DAsync(&m3, s_nb));
	CHECKF(box[1][0][0] == 212 && box[1][2][3] == 235, "3-D async into pageable memory");
	CK(cuStreamSynchronize(s_nb));
	CUDA_MEMCPY3D d3 = m3;
	d3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	d3.dstDevice = dv2;
	d3.dstPitch = 8;
	d3.dstHeight = 4;
	d3.dstXInBytes = 2;
	d3.dstY = 1;
	d3.dstZ = 1;
	CK(cuMemcpy3DAsync(&d3, s_b));
	CK(cuStreamSynchronize(s_b));
	uint8_t vol2[3][4][8];
	CK(cuMemcpyDtoH(vol2, dv2, sizeof(vol2)));
	CHECK(vol2[1][1][2] == 112 && vol2[2][3][5] == 235 && vol2[0][0][0] == 0);
	/* Host to device 3-D from pageable memory, reused at once. */
	uint8_t hb[2][3][4];
	for (int i = 0; i < 24; i++)
		(&hb[0][0][0])[i] = (uint8_t)(i + 1);
	CUDA_MEMCPY3D u3 = d3;
	u3.srcMemoryType = CU_MEMORYTYPE_HOST;
	u3.srcHost = hb;
	u3.srcPitch = 4;
	u3.srcHeight = 3;
	u3.srcXInBytes = u3.srcY = u3.srcZ = 0;
	slow_set(s_b, dv2, 0, 3);
	CK(cuMemcpy3DAsync(&u3, s_b));
	memset(hb, 0xee, sizeof(hb));
	CK(cuMemcpy3D(&u3)); /* sync, from the overwritten buffer: runs after the async one */
	CK(cuStreamSynchronize(s_b));
	CK(cuMemcpyDtoH(vol2, dv2, sizeof(vol2)));
	CHECK(vol2[1][1][2] == 0xee);
	for (int i = 0; i < 24; i++)
		(&hb[0][0][0])[i] = (uint8_t)(i + 1);
	CK(cuMemcpy3D(&u3));
	memset(hb, 0, sizeof(hb));
	CK(cuMemcpyDtoH(vol2, dv2, sizeof(vol2)));
	CHECK(vol2[1][1][2] == 1 && vol2[2][3][5] == 24);

	/* Peer copies within one device (both contexts the primary one), in stream order. */
	CUdeviceptr pa = dalloc(64), pb = dalloc(64);
	CK(cuMemsetD32(pa, 0x0a0a0a0a, 16));
	slow_set(s_b, pa, 0x0b0b0b0b, 5);
	CK(cuMemcpyPeer(pb, pctx, pa, pctx, 64)); /* legacy stream: after s_b's kernel */
	CHECKF(read_u32(pb) == 0x0b0b0b0b && read_u32(pb + 60) == 0x0a0a0a0a, "cuMemcpyPeer: %08x",
	       read_u32(pb));
	slow_set(s_nb, pa, 0x0c0c0c0c, 5);
	CK(cuMemcpyPeerAsync(pb, pctx, pa, pctx, 64, s_nb));
	muladd(s_nb, pb, 1, 2, 0);
	CK(cuStreamSynchronize(s_nb));
	CHECK(read_u32(pb) == 0x18181818 && read_u32(pb + 4) == 0x0a0a0a0a);
	CK_IS(cuMemcpyPeer(pb, NULL, pa, pctx, 4), CUDA_ERROR_INVALID_CONTEXT);

	CK(cuMemFree(pa));
	CK(cuMemFree(pb));
	CK(cuMemFree(dv));
	CK(cuMemFree(dv2));
	CK(cuMemFree(dp));
	CK(cuMemFree(dq));
	host_free(H_ALLOCHOST, pin);
}

/* Freeing memory that pending work still uses waits for that work. */
static void t_free_pending(void)
{
	for (int round = 0; round < 3; round++) {
		CUdeviceptr d = dalloc(N), out = dalloc(N);
		uint8_t *pin = host_alloc(H_ALLOCHOST, N), *src = host_alloc(H_ALLOCHOST, N);
		uint8_t *reg = host_alloc(H_REGISTERED, N);
		fill(src, N, 40);
		CUstream s = round == 0 ? s_nb : round == 1 ? s_b : CU_STREAM_PER_THREAD;
		slow_set(s, out, 1, 10);
		CK(cuMemcpyHtoDAsync(d, src, N, s));
		CK(cuMemcpyDtoDAsync(out, d, N, s));
		CK(cuMemcpyDtoHAsync(pin, out, N, s));
		CK(cuMemcpyDtoHAsync(reg, d, N, s));
		CK(cuMemFree(d));	/* must wait for the copies that read it */
		CK(cuMemFreeHost(src)); /* ... and for the one that reads this */
		CHECKF(same(pin, N, 40),
		       "round %d: cuMemFree returned before the work using the "
		       "memory completed",
		       round);
		CK(cuMemHostUnregister(reg));
		CHECK(same(reg, N, 40));
		free(reg);
		host_free(H_ALLOCHOST, pin);
		CK(cuMemFree(out));
	}
	/* Stream-ordered free: after the work before it on the stream. */
	CUdeviceptr a, keep = dalloc(64);
	CK(cuMemAllocAsync(&a, 64, s_nb));
	CK(cuMemsetD32Async(a, 0x61616161, 16, s_nb));
	slow_set(s_nb, keep, 2, 5);
	CK(cuMemcpyDtoDAsync(keep + 4, a, 4, s_nb));
	CK(cuMemFreeAsync(a, s_nb));
	CK(cuStreamSynchronize(s_nb));
	CHECK(read_u32(keep + 4) == 0x61616161 && read_u32(keep) == 2);
	CK(cuMemFree(keep));
}

/* Batched copies pass through, in stream order. */
static void t_batch(void)
{
	CUdeviceptr d = dalloc(256), e = dalloc(256);
	uint8_t *pin = host_alloc(H_ALLOCHOST, 64);
	fill(pin, 64, 3);
	slow_set(s_nb, d, 0x01020304, 5);
	CUdeviceptr dsts[2] = {e, e + 64}, srcs[2] = {d, (CUdeviceptr)(uintptr_t)pin};
	size_t sizes[2] = {32, 32}, idx[1] = {0};
	CUmemcpyAttributes attr = {0};
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idx, 1, s_nb));
	muladd(s_nb, e, 1, 2, 0);
	CK(cuStreamSynchronize(s_nb));
	uint8_t r[96];
	CK(cuMemcpyDtoH(r, e, sizeof(r)));
	CHECK(*(uint32_t *)r == 0x02040608 && same(r + 64, 32, 3));
	host_free(H_ALLOCHOST, pin);
	CK(cuMemFree(d));
	CK(cuMemFree(e));
}

/* Both ABIs of the batched copies, as a runtime asks cuGetProcAddress for
 * them: 12.8-12.9 (a failIdx before the stream: PyTorch's cu128/cu129 wheels)
 * and 13.0, each also in its per-thread form. Each copy reads what a slow
 * kernel just before it on the stream writes. */
typedef CUresult (*batch_v1_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);
typedef CUresult (*batch_v2_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				CUmemcpyAttributes *, size_t *, size_t, CUstream);
static void t_batch_abis(void)
{
	CUdeviceptr d = dalloc(64), e = dalloc(64);
	CUmemcpyAttributes attr = {0};
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	CUdriverProcAddressQueryResult q;
	for (int k = 0; k < 4; k++) {
		bool v1 = k < 2, ptsz = k % 2;
		void *fn = NULL;
		CK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, v1 ? 12080 : 13000,
				    ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &q));
		CHECK(fn != NULL);
		uint32_t v = 0x100u + (uint32_t)k;
		slow_set(s_nb, d, v, 5);
		CUdeviceptr dsts[1] = {e}, srcs[1] = {d};
		size_t sizes[1] = {4}, idx[1] = {0}, fail = 0;
		if (v1)
			CK(((batch_v1_fn)fn)(dsts, srcs, sizes, 1, &attr, idx, 1, &fail, s_nb));
		else
			CK(((batch_v2_fn)fn)(dsts, srcs, sizes, 1, &attr, idx, 1, s_nb));
		CK(cuStreamSynchronize(s_nb));
		uint32_t got = read_u32(e);
		CHECKF(got == v, "%s%s ABI: the copy read %#x, not the kernel's %#x", v1 ? "12.8" : "13.0",
		       ptsz ? " per-thread" : "", got, v);
	}
	CK(cuMemFree(d));
	CK(cuMemFree(e));
}

/* Copies to and from CUDA arrays (cudaMemcpyToArray and friends) on the
 * default stream, synchronous and asynchronous: each reads what a slow kernel
 * just before it on the same stream writes. */
static void t_arrays(void)
{
	CUDA_ARRAY_DESCRIPTOR desc = {.Width = 16, .Height = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
				      .NumChannels = 1};
	CUarray a, b;
	CK(cuArrayCreate(&a, &desc));
	CK(cuArrayCreate(&b, &desc));
	CUdeviceptr d = dalloc(64), e = dalloc(64);
	uint32_t v = 0;
	/* device -> array -> array -> device, each behind a slow kernel */
	slow_set(NULL, d, 0x11, 5);
	CK(cuMemcpyDtoA(a, 4, d, 4));
	CK(cuMemcpyAtoA(b, 8, a, 4, 4));
	CK(cuMemcpyAtoD(e, b, 8, 4));
	CK(cuCtxSynchronize());
	CHECKF(read_u32(e) == 0x11, "array copies after a kernel read %#x, not 0x11", read_u32(e));
	/* array -> host (synchronous, pageable: returns with the data) */
	slow_set(NULL, d, 0x22, 5);
	CK(cuMemcpyDtoA(a, 0, d, 4));
	CK(cuMemcpyAtoH(&v, a, 0, 4));
	CHECKF(v == 0x22, "cuMemcpyAtoH read %#x, not 0x22", v);
	/* host -> array behind a kernel that reads the array */
	uint32_t w = 0x33;
	CK(cuMemcpyHtoA(a, 12, &w, 4));
	CK(cuMemcpyAtoD(e, a, 12, 4));
	CK(cuCtxSynchronize());
	CHECK(read_u32(e) == 0x33);
	/* the asynchronous forms on a stream, from and to pinned memory */
	uint8_t *pinb = host_alloc(H_ALLOCHOST, 8);
	uint32_t *pin = (uint32_t *)(void *)pinb;
	slow_set(s_nb, d, 0x44, 5);
	CK(cuMemcpyDtoDAsync(d + 4, d, 4, s_nb));
	pin[0] = 0x55;
	CK(cuMemcpyHtoAAsync(b, 0, pin, 4, s_nb));
	CK(cuMemcpyAtoHAsync(pin + 1, b, 0, 4, s_nb));
	CK(cuStreamSynchronize(s_nb));
	CHECKF(read_u32(d + 4) == 0x44 && pin[1] == 0x55, "async array copies: %#x %#x",
	       read_u32(d + 4), pin[1]);
	/* Destroying an array waits for the logical work before it, as cuMemFree
	 * does (a queued kernel may read it through a texture object). */
	slow_set(s_nb, d, 0x66, 10);
	CK(cuMemcpyDtoHAsync(pin, d, 4, s_nb));
	CK(cuArrayDestroy(a));
	CHECKF(pin[0] == 0x66, "cuArrayDestroy returned before the work queued before it ran");
	host_free(H_ALLOCHOST, pinb);
	CK(cuArrayDestroy(b));
	CK(cuMemFree(d));
	CK(cuMemFree(e));
}

static const struct prog_test tests[] = {
    {"htod", t_htod},
    {"dtoh", t_dtoh},
    {"dtod_memset", t_dtod_memset},
    {"2d_3d_peer", t_2d_3d_peer},
    {"free_pending", t_free_pending},
    {"batch", t_batch},
    {"batch_abis", t_batch_abis},
    {"arrays", t_arrays},
};

int main(int argc, char **argv)
{
	alarm(100);
	setup_common();
	CK(cuStreamCreate(&s_nb, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s_b, CU_STREAM_DEFAULT));
	if (failures)
		return 1;
	int rc = run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv, "prog_shim_memory");
	CK(cuStreamDestroy(s_nb));
	CK(cuStreamDestroy(s_b));
	return rc || failures;
}
