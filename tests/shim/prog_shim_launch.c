/* SPDX-License-Identifier: MIT */
/*
 * Kernel launches: parameters copied at call time (kernelParams and the
 * 'extra' buffer, many and odd-sized parameters), cuLaunchKernelEx with
 * attributes, cooperative launches, CUkernel handles, stream capture and
 * graph launches against surrounding work, calls the shim does not hook,
 * work on contexts the shim does not virtualize, and launch errors that the
 * driver reports at call time. Self-checking, see prog_shim.h.
 *
 *   prog_shim_launch [test...]
 */
#include "prog_shim.h"

/* ---- kernels of this program ------------------------------------------------------------- */

struct f3 {
	float x, y, z;
};
struct six {
	char c;
	double d;
	int i;
	struct f3 f;
	void *p;
	short s;
};

/* Writes its six odd-sized parameters into *p (parameter 4). */
static int k_six(void *const *params, const struct fakecuda_exec *e)
{
	struct six *out = P(4, struct six *);
	out->c = P(0, char);
	out->d = P(1, double);
	out->i = P(2, int);
	out->f = P(3, struct f3);
	out->p = P(4, void *);
	out->s = P(5, short);
	return 0;
}

/* FNV-1a over the bytes of every parameter after the first (the output pointer). */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static int k_many(void *const *params, const struct fakecuda_exec *e)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 1; i < e->nparams; i++)
		h = fnv(h, params[i], e->param_sizes[i]);
	*P(0, uint64_t *) = h;
	return 0;
}

/* What the launch configuration looked like to the "device". */
struct probe {
	uint32_t grid[3], block[3], smem, coop, cluster[3], nsm;
};

static int k_probe(void *const *params, const struct fakecuda_exec *e)
{
	struct probe *p = P(0, struct probe *);
	memcpy(p->grid, e->grid, sizeof(p->grid));
	memcpy(p->block, e->block, sizeof(p->block));
	p->smem = e->shared_mem;
	p->coop = (uint32_t)e->cooperative;
	memcpy(p->cluster, e->cluster, sizeof(p->cluster));
	p->nsm = e->nsm;
	return 0;
}

static int k_empty(void *const *params, const struct fakecuda_exec *e)
{
	return 0;
}

#define NMANY 40
static size_t many_sz[NMANY], many_al[NMANY];

static CUfunction f_six, f_many, f_probe, f_empty;

static void register_kernels(void)
{
	static const size_t six_sz[] = {1, 8, 4, 12, 8, 2}, probe_sz[] = {8};
	static const size_t cyc[] = {1, 2, 4, 8, 12, 16, 3, 6};
	many_sz[0] = 8;
	many_al[0] = 8;
	for (int i = 1; i < NMANY; i++) {
		many_sz[i] = cyc[i % 8];
		many_al[i] = many_sz[i] == 16	? 16
			     : many_sz[i] == 12 ? 4
			     : many_sz[i] == 6	? 2
			     : many_sz[i] == 3	? 1
						: many_sz[i];
	}
	int r = fakecuda_register_kernel("six", k_six, 6, six_sz);
	r |= fakecuda_register_kernel_aligned("many", k_many, NMANY, many_sz, many_al);
	r |= fakecuda_register_kernel("probe", k_probe, 1, probe_sz);
	r |= fakecuda_register_kernel("empty", k_empty, 0, NULL);
	if (r) {
		fprintf(stderr, "FAIL: kernel registration\n");
		exit(1);
	}
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Parameters are copied when the launch is issued: the program changes its argument variables
 * right after each call, while the launches are still held behind a gate. */
static void t_params(void)
{
	enum { L = 40 };
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr dout, dmany;
	struct six *out = mapped_alloc(L * sizeof(struct six), &dout);
	uint64_t *hmany = mapped_alloc(3 * L * sizeof(uint64_t), &dmany);
	uint64_t want_many[3 * L];
	struct gate_h g = gate_new();
	gate_launch(s, g, 0, 0);
	char c;
	double d;
	int i;
	struct f3 f;
	CUdeviceptr p;
	short sh;
	void *args[] = {&c, &d, &i, &f, &p, &sh};
	for (int k = 0; k < L; k++) {
		c = (char)('a' + k);
		d = 1.5 * k;
		i = -k;
		f = (struct f3){(float)k, 2.0f * k, 3.0f * k};
		p = dout + (CUdeviceptr)k * sizeof(struct six);
		sh = (short)(1000 + k);
		CK(cuLaunchKernel(f_six, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
		/* Scribble over everything the launch referenced. */
		c = 0;
		d = -1;
		i = 12345;
		f = (struct f3){-1, -1, -1};
		p = 0;
		sh = -1;
	}
	/* Forty parameters of odd sizes and alignments, three ways: kernelParams, the extra
	 * buffer, and cuLaunchKernelEx. */
	uint8_t vals[NMANY][16];
	void *margs[NMANY];
	size_t off[NMANY], sz;
	uint8_t buf[1024];
	for (int j = 0; j < NMANY; j++) {
		margs[j] = vals[j];
		CK(cuFuncGetParamInfo(f_many, (size_t)j, &off[j], &sz));
		CHECK(sz == many_sz[j]);
	}
	size_t bufsize = off[NMANY - 1] + many_sz[NMANY - 1];
	for (int k = 0; k < 3 * L; k++) {
		CUdeviceptr o = dmany + (CUdeviceptr)k * 8;
		memcpy(vals[0], &o, 8);
		uint64_t h = 0xcbf29ce484222325ull;
		for (int j = 1; j < NMANY; j++) {
			for (size_t b = 0; b < many_sz[j]; b++)
				vals[j][b] = (uint8_t)(k * 31 + j * 7 + (int)b);
			h = fnv(h, vals[j], many_sz[j]);
		}
		want_many[k] = h;
		int how = k % 3;
		if (how == 0) {
			CK(cuLaunchKernel(f_many, 1, 1, 1, 1, 1, 1, 0, s, margs, NULL));
		} else {
			memset(buf, 0, sizeof(buf));
			for (int j = 0; j < NMANY; j++)
				memcpy(buf + off[j], vals[j], many_sz[j]);
			void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
					 CU_LAUNCH_PARAM_BUFFER_SIZE, &bufsize,
					 CU_LAUNCH_PARAM_END};
			if (how == 1) {
				CK(cuLaunchKernel(f_many, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
			} else {
				CUlaunchConfig cfg = {0};
				cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
				cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
				cfg.hStream = s;
				CK(cuLaunchKernelEx(&cfg, f_many, (k & 1) ? margs : NULL,
						    (k & 1) ? NULL : extra));
			}
			memset(buf, 0xee, sizeof(buf));
		}
		for (int j = 0; j < NMANY; j++)
			memset(vals[j], 0xdd, 16);
	}
	CHECK(gate_wait_running(g, 1));
	CHECK(atomic_load(&g.g->done) == 0); /* every launch above was issued while held */
	gate_open(g);
	CK(cuStreamSynchronize(s));
	GATE_OK(g);
	int bad = 0;
	for (int k = 0; k < L; k++) {
		struct six *o = &out[k];
		bad += o->c != (char)('a' + k) || o->d != 1.5 * k || o->i != -k ||
		       o->f.x != (float)k || o->f.z != 3.0f * k ||
		       o->p != (void *)(uintptr_t)(dout + (CUdeviceptr)k * sizeof(struct six)) ||
		       o->s != (short)(1000 + k);
	}
	CHECKF(bad == 0, "%d of %d launches saw parameters changed after the call", bad, L);
	bad = 0;
	for (int k = 0; k < 3 * L; k++)
		bad += hmany[k] != want_many[k];
	CHECKF(bad == 0, "%d of %d 40-parameter launches saw wrong bytes", bad, 3 * L);
	gate_free(g);
	CK(cuMemFreeHost(out));
	CK(cuMemFreeHost(hmany));
	CK(cuStreamDestroy(s));
}

/* cuLaunchKernelEx attributes reach the driver unchanged; cooperative launches fit or are
 * refused as natively; CUkernel handles launch like CUfunctions. */
static void t_launch_ex(void)
{
	CUdeviceptr dp;
	struct probe *pr = mapped_alloc(sizeof(*pr), &dp);
	void *args[] = {&dp};
	int sms = 0, occ = 0;
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f_probe, 256, 0));
	CHECK(occ > 0);
	CUlaunchAttribute at[3];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at[0].value.clusterDim.x = 2;
	at[0].value.clusterDim.y = 1;
	at[0].value.clusterDim.z = 1;
	at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	at[1].value.priority = -1;
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = 64;
	cfg.gridDimY = 2;
	cfg.gridDimZ = 1;
	cfg.blockDimX = 128;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.sharedMemBytes = 1024;
	cfg.hStream = NULL;
	cfg.attrs = at;
	cfg.numAttrs = 2;
	CK(cuLaunchKernelEx(&cfg, f_probe, args, NULL));
	CK(cuStreamSynchronize(NULL));
	CHECKF(pr->grid[0] == 64 && pr->grid[1] == 2 && pr->block[0] == 128 && pr->smem == 1024 &&
		   pr->cluster[0] == 2 && pr->cluster[1] == 1 && !pr->coop,
	       "cluster launch seen as grid %u cluster %u smem %u coop %u", pr->grid[0],
	       pr->cluster[0], pr->smem, pr->coop);
	/* Larger clusters: their blocks share a GPC, so they run only on
	 * entries with enough SMs of one GPC at the kernel's occupancy (the
	 * driver's occupancy calculator says which; the fake refuses a launch
	 * placed where it cannot run). At this occupancy every entry holds a
	 * cluster of 4. */
	at[0].value.clusterDim.x = 4;
	CK(cuLaunchKernelEx(&cfg, f_probe, args, NULL));
	CK(cuStreamSynchronize(NULL));
	CHECKF(pr->cluster[0] == 4 && pr->nsm >= 8, "cluster of 4 ran on %u SMs", pr->nsm);
	/* 1024 threads a block (two blocks an SM): a cluster of 8 needs four SMs
	 * of one GPC, which no 8-SM leaf has (one TPC of each of four GPCs). */
	memset(pr, 0, sizeof(*pr));
	at[0].value.clusterDim.x = 8;
	cfg.gridDimX = 64;
	cfg.gridDimY = 1;
	cfg.blockDimX = 1024;
	cfg.sharedMemBytes = 0;
	for (int i = 0; i < 8; i++) {
		CK(cuLaunchKernelEx(&cfg, f_probe, args, NULL));
		CK(cuStreamSynchronize(NULL));
		CHECKF(pr->cluster[0] == 8 && pr->nsm > 8, "cluster of 8 ran on %u SMs", pr->nsm);
	}
	cfg.gridDimY = 2;
	cfg.blockDimX = 128;
	cfg.sharedMemBytes = 1024;
	/* Cooperative attribute, fitting. */
	memset(pr, 0, sizeof(*pr));
	at[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	at[0].value.cooperative = 1;
	cfg.gridDimY = 1;
	cfg.blockDimX = 256;
	cfg.sharedMemBytes = 0;
	cfg.gridDimX = (unsigned)occ * 8;
	cfg.numAttrs = 1;
	CK(cuLaunchKernelEx(&cfg, f_probe, args, NULL));
	CK(cuCtxSynchronize());
	CHECK(pr->coop == 1 && pr->grid[0] == (unsigned)occ * 8);
	/* cuLaunchCooperativeKernel: the whole device's worth fits, one block more does not. */
	memset(pr, 0, sizeof(*pr));
	unsigned full = (unsigned)(sms * occ);
	CK(cuLaunchCooperativeKernel(f_probe, full, 1, 1, 256, 1, 1, 0, NULL, args));
	CK(cuStreamSynchronize(NULL));
	CHECKF(pr->coop == 1 && pr->grid[0] == full && pr->nsm == (uint32_t)sms,
	       "cooperative launch: coop %u grid %u on %u SMs", pr->coop, pr->grid[0], pr->nsm);
	CK_IS(cuLaunchCooperativeKernel(f_probe, full + 1, 1, 1, 256, 1, 1, 0, NULL, args),
	      CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuLaunchCooperativeKernel(f_probe, 8, 1, 1, 256, 1, 1, 0, s, args));
	CK(cuStreamSynchronize(s));
	CHECK(pr->coop == 1 && pr->grid[0] == 8);
	/* A CUkernel from a library, launched as a CUfunction (what libcudart does). */
	CUlibrary lib;
	CUkernel kern;
	CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&kern, lib, "probe"));
	memset(pr, 0, sizeof(*pr));
	CK(cuLaunchKernel((CUfunction)kern, 3, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CK(cuStreamSynchronize(s));
	CHECK(pr->grid[0] == 3 && pr->block[0] == 32);
	CK(cuLibraryUnload(lib));
	CK(cuStreamDestroy(s));
	CK(cuMemFreeHost(pr));
}

/* The launch errors the driver reports at the call, reported by the call under the shim too,
 * with nothing sticky left behind. */
static void t_launch_errors(void)
{
	CUdeviceptr b = dalloc(4);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint32_t n = 1, m = 3, a = 1;
	void *args[] = {&b, &n, &m, &a};
	CUfunction bogus = (CUfunction)(uintptr_t)0x1000;
	CK_IS(cuLaunchKernel(bogus, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK_IS(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_ERROR_INVALID_HANDLE);
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = s;
	CK_IS(cuLaunchKernelEx(&cfg, bogus, args, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK_IS(cuLaunchCooperativeKernel(bogus, 1, 1, 1, 1, 1, 1, 0, s, args),
	      CUDA_ERROR_INVALID_HANDLE);
	/* The stream and the context are still fine, and work still runs. */
	CK(cuStreamSynchronize(s));
	muladd(s, b, 1, 3, 1);
	CK(cuStreamSynchronize(s));
	CK(cuCtxSynchronize());
	CHECK(read_u32(b) == 1);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(b));
}

/* A one-dimensional launch of 'grid' blocks of 'block' threads on s with one cluster
 * attribute of cx x cy x 1 blocks. */
static void cluster_config(CUlaunchConfig *cfg, CUlaunchAttribute *at, CUstream s, unsigned grid,
			   unsigned block, unsigned cx, unsigned cy)
{
	memset(at, 0, sizeof(*at));
	at->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at->value.clusterDim.x = cx;
	at->value.clusterDim.y = cy;
	at->value.clusterDim.z = 1;
	memset(cfg, 0, sizeof(*cfg));
	cfg->gridDimX = grid;
	cfg->gridDimY = cfg->gridDimZ = 1;
	cfg->blockDimX = block;
	cfg->blockDimY = cfg->blockDimZ = 1;
	cfg->hStream = s;
	cfg->attrs = at;
	cfg->numAttrs = 1;
}

/* The same, for errors found in the launch configuration and in the extra buffer. */
static void t_config_errors(void)
{
	CUdeviceptr b = dalloc(4), dp;
	struct probe *pr = mapped_alloc(sizeof(*pr), &dp);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint32_t n = 1, m = 3, a = 1;
	uint32_t packed[5]; /* muladd's packed parameters: ptr, n, m, a */
	memcpy(packed, &b, 8);
	packed[2] = n;
	packed[3] = m;
	packed[4] = a;
	size_t psize = sizeof(packed);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
			 &psize, CU_LAUNCH_PARAM_END};
	CUfunction bogus = (CUfunction)(uintptr_t)0x1000;
	CK_IS(cuLaunchKernel(bogus, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra),
	      CUDA_ERROR_INVALID_HANDLE);
	CK_IS(cuLaunchKernel(bogus, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	/* Both forms, or neither for a kernel with parameters: invalid (H200 probe). */
	void *kp[] = {&b, &n, &m, &a};
	CK_IS(cuLaunchKernel(f_muladd, 1, 1, 1, 1, 1, 1, 0, s, kp, extra),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_muladd, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	/* An empty buffer: invalid for a kernel with parameters, fine for one without; a
	 * non-empty one for a kernel without parameters is too large. */
	size_t zero = 0, eight = 8;
	void *extra0[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
			  &zero, CU_LAUNCH_PARAM_END};
	void *extra8[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
			  &eight, CU_LAUNCH_PARAM_END};
	CK_IS(cuLaunchKernel(f_muladd, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra0),
	      CUDA_ERROR_INVALID_VALUE);
	CK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra0));
	CK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	CK_IS(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra8),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	size_t big = psize + 8;
	void *extra_big[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
			     &big, CU_LAUNCH_PARAM_END};
	CK_IS(cuLaunchKernel(f_muladd, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra_big),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	void *args[] = {&dp};
	CUlaunchAttribute at[1];
	CUlaunchConfig cfg;
	cluster_config(&cfg, at, s, 63, 128, 2, 1); /* grid not a multiple of the cluster */
	CK_IS(cuLaunchKernelEx(&cfg, f_probe, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	int sms = 0;
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	at[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	at[0].value.cooperative = 1;
	cfg.gridDimX = (unsigned)sms * 16 + 2; /* 16 blocks of 128 threads fit per SM */
	CK_IS(cuLaunchKernelEx(&cfg, f_probe, args, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
	CK(cuStreamSynchronize(s));
	muladd(s, b, 1, 3, 1);
	CK(cuStreamSynchronize(s));
	CK(cuCtxSynchronize());
	CHECK(read_u32(b) == 1);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(b));
	CK(cuMemFreeHost(pr));
}

/* Launch configurations beyond the device's or the function's limits fail at the call, and
 * the stream stays usable (no sticky error): the shim checks them before recording. */
static void t_block_errors(void)
{
	CUdeviceptr b = dalloc(4), dp;
	struct probe *pr = mapped_alloc(sizeof(*pr), &dp);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	void *args[] = {&dp};
	CK_IS(cuLaunchKernel(f_probe, 1, 1, 1, 2048, 1, 1, 0, s, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_probe, 1, 1, 1, 1, 1, 65, 0, s, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_probe, 0, 1, 1, 32, 1, 1, 0, s, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK_IS(cuLaunchKernel(f_probe, 1, 70000, 1, 32, 1, 1, 0, s, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	/* Dynamic shared memory beyond the function's limit, until it is raised. */
	CK_IS(cuLaunchKernel(f_probe, 1, 1, 1, 32, 1, 1, 64 * 1024, s, args, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CK(cuFuncSetAttribute(f_probe, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024));
	CK(cuLaunchKernel(f_probe, 1, 1, 1, 32, 1, 1, 64 * 1024, s, args, NULL));
	CK(cuStreamSynchronize(s));
	CK(cuFuncSetAttribute(f_probe, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
	/* Cluster dimensions: none 0, at most 8 blocks without the non-portable attribute. */
	CUlaunchAttribute at[1];
	CUlaunchConfig cfg;
	cluster_config(&cfg, at, s, 16, 32, 2, 0);
	CK_IS(cuLaunchKernelEx(&cfg, f_probe, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	cluster_config(&cfg, at, s, 16, 32, 16, 1);
	CK_IS(cuLaunchKernelEx(&cfg, f_probe, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	CK(cuStreamSynchronize(s));
	muladd(s, b, 1, 3, 1);
	CK(cuStreamSynchronize(s));
	CHECK(read_u32(b) == 1);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(b));
	CK(cuMemFreeHost(pr));
}

/* Stream capture and graph launches, ordered against the work around them. */
static void t_graphs(void)
{
	/* Graphs of module functions: their kernel nodes have no CUkernel and
	 * run in the app's context, on every SM, as natively (prog_shim_graphs
	 * covers graphs of CUkernels, which run on their entry's SMs). */
	graph_outside_ok = true;
	CUstream s, s2, s3;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s3, CU_STREAM_DEFAULT));
	CUdeviceptr b = dalloc(64), c = dalloc(64);
	uint32_t model = 0, cmodel = 0;
	/* Work before the capture, still running when it begins. */
	slow_set(s, b, 2, 5);
	muladd(s, b, 16, 3, 1); /* 7 */
	model = 7;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUstreamCaptureStatus cs;
	CK(cuStreamIsCapturing(s, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	muladd(s, b, 16, 5, 2);
	/* fork s2 into the capture and join it back */
	CUevent fork, join;
	CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
	CK(cuEventRecord(fork, s));
	CK(cuStreamWaitEvent(s2, fork, 0));
	muladd(s2, c, 16, 7, 3);
	CK(cuMemsetD32Async(c + 32, 9, 8, s2));
	CK(cuEventRecord(join, s2));
	CK(cuStreamWaitEvent(s, join, 0));
	CK(cuMemcpyDtoDAsync(b + 32, c + 32, 32, s));
	muladd(s, b, 1, 1, 100);
	CUgraph graph;
	CK(cuStreamEndCapture(s, &graph));
	CK(cuStreamIsCapturing(s2, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
	CHECK(fakecuda_graph_node_count(graph) >= 5);
	/* Captured work did not run. */
	CK(cuStreamSynchronize(s));
	CK(cuStreamSynchronize(s2));
	CHECKF(read_u32(b) == 7 && read_u32(c) == 0, "captured work ran at capture: %u %u",
	       read_u32(b), read_u32(c));
	CUgraphExec exec;
	CK(cuGraphInstantiateWithFlags(&exec, graph, 0));
	/* s2 works normally again after the capture. */
	muladd(s2, c + 4, 1, 1, 1);
	CK(cuStreamSynchronize(s2));
	CHECK(read_u32(c + 4) == 1);
	/* Graph launches between ordinary work, on s, on another stream, on the legacy stream. */
	const CUstream on[] = {s, s2, NULL, s3, CU_STREAM_PER_THREAD};
	for (int k = 0; k < 5; k++) {
		CUstream t = on[k];
		slow_set(t, b + 60, 0, 3);
		muladd(t, b, 1, 2, 0);
		CK(cuGraphLaunch(exec, t));
		muladd(t, b, 1, 3, 0);
		CK(cuStreamSynchronize(t));
		model = model * 2;
		model = model * 5 + 2;
		cmodel = cmodel * 7 + 3;
		model = model + 100;
		model = model * 3;
		CHECKF(read_u32(b) == model && read_u32(c) == cmodel && read_u32(b + 32) == 9,
		       "graph launch %d: b %u want %u, c %u want %u", k, read_u32(b), model,
		       read_u32(c), cmodel);
	}
	/* A graph launch ordered through events with other streams. */
	CUevent e;
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	slow_set(s3, b, 1, 5);
	CK(cuEventRecord(e, s3));
	CK(cuStreamWaitEvent(s2, e, 0));
	CK(cuGraphLaunch(exec, s2));
	CK(cuEventRecord(e, s2));
	CK(cuStreamWaitEvent(s, e, 0));
	muladd(s, b, 1, 2, 0);
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(b) == ((1 * 5 + 2) + 100) * 2, "graph after event: %u", read_u32(b));
	/* Capture of the per-thread default stream. */
	CK(cuMemsetD32(b, 1, 16));
	CK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	muladd(CU_STREAM_PER_THREAD, b, 1, 4, 0);
	CUgraph g2;
	CUgraphExec x2;
	CK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g2));
	CK(cuGraphInstantiateWithFlags(&x2, g2, 0));
	muladd(CU_STREAM_PER_THREAD, b, 1, 1, 1); /* runs: capture ended */
	CK(cuGraphLaunch(x2, CU_STREAM_PER_THREAD));
	CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CHECKF(read_u32(b) == 8, "per-thread capture: %u", read_u32(b));
	CK(cuGraphExecDestroy(x2));
	CK(cuGraphDestroy(g2));
	CK(cuGraphExecDestroy(exec));
	CK(cuGraphDestroy(graph));
	CK(cuEventDestroy(e));
	CK(cuEventDestroy(fork));
	CK(cuEventDestroy(join));
	CK(cuMemFree(b));
	CK(cuMemFree(c));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(s2));
	CK(cuStreamDestroy(s3));
}

/* A GLOBAL-mode capture while other streams still run work: "potentially unsafe" calls
 * (stream or event queries, syncs) are then prohibited in every thread in global mode, so a
 * runtime's own threads (the dispatcher's stall queries) must run in relaxed mode, or the
 * app's capture is invalidated (docs/semantics.md, "Capture and graphs"). */
static void t_capture_busy(void)
{
	/* Graphs of module functions: their kernel nodes have no CUkernel and
	 * run in the app's context, on every SM, as natively (prog_shim_graphs
	 * covers graphs of CUkernels, which run on their entry's SMs). */
	graph_outside_ok = true;
	CUstream s, s4;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s4, CU_STREAM_NON_BLOCKING));
	CUdeviceptr b = dalloc(64), c = dalloc(64);
	for (int k = 0; k < 4; k++)
		slow_set(s4, c + 60, (uint32_t)k, 10);
	CK(cuMemsetD32Async(b, 3, 1, s));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	muladd(s, b, 1, 2, 0);
	sleep_us(30000); /* while s4's work runs */
	CUgraph g3 = NULL;
	CK(cuStreamEndCapture(s, &g3));
	CUgraphExec x3;
	CK(cuGraphInstantiateWithFlags(&x3, g3, 0));
	CK(cuGraphLaunch(x3, s));
	CK(cuStreamSynchronize(s));
	CHECK(read_u32(b) == 6);
	CK(cuGraphExecDestroy(x3));
	CK(cuGraphDestroy(g3));
	CK(cuStreamSynchronize(s4));
	CK(cuMemFree(b));
	CK(cuMemFree(c));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(s4));
}

/* Calls the shim does not hook reach the driver unchanged, with the app's real handles. */
static void t_passthrough(void)
{
	char name[64] = "";
	CK(cuDeviceGetName(name, sizeof(name), dev));
	CHECK(strcmp(name, "Fake H200") == 0);
	size_t fr0, tot, fr1;
	CK(cuMemGetInfo(&fr0, &tot));
	CUdeviceptr d;
	CK(cuMemAlloc(&d, 1 << 20));
	CK(cuMemGetInfo(&fr1, &tot));
	CHECK(fr1 + (1 << 20) <= fr0 && tot >= fr0);
	int v = 0;
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_muladd));
	CHECK(v == 1024);
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f_muladd));
	CHECK(v == 32);
	const char *fname = NULL;
	CK(cuFuncGetName(&fname, f_many));
	CHECK(fname && strcmp(fname, "many") == 0);
	CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CHECK(v == 9);
	CUstream s;
	CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -2));
	unsigned fl = 99;
	int prio = 99;
	CK(cuStreamGetFlags(s, &fl));
	CK(cuStreamGetPriority(s, &prio));
	CHECK(fl == CU_STREAM_NON_BLOCKING && prio == -2);
	unsigned long long id1 = 0, id2 = 0;
	CK(cuStreamGetId(s, &id1));
	CK(cuStreamGetId(NULL, &id2));
	CHECK(id1 != 0 && id1 != id2);
	CUstreamCaptureStatus cs;
	CK(cuStreamIsCapturing(s, &cs));
	CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
	CUcontext c = NULL;
	CK(cuCtxGetCurrent(&c));
	CHECK(c == pctx);
	CUdevice dd = -1;
	CK(cuCtxGetDevice(&dd));
	CHECK(dd == dev);
	unsigned mt = 0;
	CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
	CHECK(mt == CU_MEMORYTYPE_DEVICE);
	/* The stream handle the shim gave back is a real one: work on it runs. */
	CUdeviceptr b = dalloc(4);
	muladd(s, b, 1, 3, 4);
	CK(cuStreamSynchronize(s));
	CHECK(read_u32(b) == 4);
	CK(cuMemFree(b));
	uint64_t before = fakecuda_call_count("cuDeviceGetName");
	CK(cuDeviceGetName(name, sizeof(name), dev));
	CHECK(fakecuda_call_count("cuDeviceGetName") == before + 1);
	CK(cuMemFree(d));
	CK(cuStreamDestroy(s));
}

/* Work the shim leaves to the driver: another context, and a green context of the app's own.
 * It runs there, correctly, and in order with the virtualized work it is joined to. */
static void t_foreign(void)
{
	/* Another context of the same device. */
	CUcontext c2, popped;
	CK(cuCtxCreate(&c2, NULL, 0, dev));
	foreign_add(c2);
	CUstream s2;
	/* Blocking: it must wait for the legacy-stream kernel before it (a
	 * non-blocking stream would race with it, natively too). */
	CK(cuStreamCreate(&s2, 0));
	CUdeviceptr b2 = dalloc(4);
	muladd(NULL, b2, 1, 3, 1);
	muladd(s2, b2, 1, 5, 2);
	CK(cuStreamSynchronize(s2));
	CHECK(read_u32(b2) == 7);
	CK(cuCtxPopCurrent(&popped));
	CHECK(popped == c2);
	CUcontext cur;
	CK(cuCtxGetCurrent(&cur));
	CHECK(cur == pctx);

	/* A green context the app made itself, from its own split. */
	CUdevResource whole, groups[32], rem;
	unsigned ng = 32;
	CK(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
	CK(cuDevSmResourceSplitByCount(groups, &ng, &whole, &rem, 0, 8));
	CUdevResourceDesc desc;
	CK(cuDevResourceGenerateDesc(&desc, &groups[1], 1));
	CUgreenCtx gc;
	CK(cuGreenCtxCreate(&gc, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CUcontext gctx;
	CK(cuCtxFromGreenCtx(&gctx, gc));
	foreign_add(gctx);
	CUstream gs;
	CK(cuGreenCtxStreamCreate(&gs, gc, CU_STREAM_NON_BLOCKING, 0));
	/* Joined to virtualized work both ways through events. */
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr b = dalloc(4);
	CUevent e1, e2;
	CK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
	uint64_t seq0 = fakecuda_launch_seq();
	slow_set(s, b, 2, 5);
	CK(cuEventRecord(e1, s));
	CK(cuStreamWaitEvent(gs, e1, 0));
	muladd(gs, b, 1, 3, 1); /* 7 */
	CK(cuEventRecord(e2, gs));
	CK(cuStreamWaitEvent(s, e2, 0));
	muladd(s, b, 1, 5, 0); /* 35 */
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(b) == 35, "green-context app stream joined by events: %u", read_u32(b));
	struct fakecuda_launch_record rec[8];
	size_t nr = fakecuda_launch_log(rec, 8, seq0);
	int on_own = 0;
	for (size_t i = 0; i < nr; i++)
		on_own += rec[i].green == gc && rec[i].stream == gs;
	CHECKF(on_own == 1, "%d launches ran on the app's own green context", on_own);
	CK(cuStreamDestroy(gs));
	CK(cuGreenCtxDestroy(gc));
	CK(cuStreamDestroy(s));
	CK(cuEventDestroy(e1));
	CK(cuEventDestroy(e2));
	CK(cuMemFree(b));
	CK(cuCtxPushCurrent(c2));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(b2));
	CK(cuCtxDestroy(c2));
	CK(cuCtxGetCurrent(&cur));
	if (cur != pctx)
		CK(cuCtxSetCurrent(pctx));
}

/* The function's own thread limit (its register use) is the driver's to check at
 * the call; so is a handle whose module was unloaded. Launches still queued when
 * their module is unloaded run first, as they were enqueued natively. */
static void t_function_limits(void)
{
	static const size_t sz[] = {8, 4, 4, 4};
	CHECK(fakecuda_register_kernel("heavy", k_muladd, 4, sz) == 0);
	CHECK(fakecuda_kernel_set_max_threads("heavy", 256) == 0);
	CUmodule m2;
	CUfunction fh;
	CK(cuModuleLoadData(&m2, "image"));
	CK(cuModuleGetFunction(&fh, m2, "heavy"));
	CUdeviceptr b = dalloc(4);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint32_t n = 1, m = 3, a = 1;
	void *args[] = {&b, &n, &m, &a};
	CK_IS(cuLaunchKernel(fh, 1, 1, 1, 512, 1, 1, 0, s, args, NULL),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	CK_IS(cuLaunchKernel(fh, 1, 1, 1, 16, 1, 32, 0, s, args, NULL),
	      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	CK(cuLaunchKernel(fh, 1, 1, 1, 256, 1, 1, 0, s, args, NULL)); /* 0 * 3 + 1 */
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(b) == 1, "%u", read_u32(b));
	/* Queued behind a slow kernel when the module goes. */
	slow_set(s, b, 7, 20);
	CK(cuLaunchKernel(fh, 1, 1, 1, 256, 1, 1, 0, s, args, NULL)); /* 7 * 3 + 1 */
	CK(cuModuleUnload(m2));
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(b) == 22, "a launch queued before its module was unloaded: %u",
	       read_u32(b));
	CK_IS(cuLaunchKernel(fh, 1, 1, 1, 32, 1, 1, 0, s, args, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK(cuStreamSynchronize(s));
	CK(cuCtxSynchronize());
	muladd(s, b, 1, 2, 0);
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(b) == 44, "%u", read_u32(b));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(b));
}

/* A launch the driver refuses only when it is submitted (here: over a dynamic
 * shared memory limit lowered after a launch with more, which the shim does not
 * see) fails natively at its call and leaves nothing sticky. Under the shim the
 * call succeeded, so the next sync reports it, once: later syncs succeed and the
 * work after it runs. */
static void t_refused_once(void)
{
	CUdeviceptr b = dalloc(4), dp;
	struct probe *pr = mapped_alloc(sizeof(*pr), &dp);
	CUstream s, s2;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	void *args[] = {&dp};
	CK(cuFuncSetAttribute(f_probe, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024));
	CK(cuLaunchKernel(f_probe, 1, 1, 1, 32, 1, 1, 64 * 1024, s, args, NULL));
	CK(cuStreamSynchronize(s));
	CK(cuFuncSetAttribute(f_probe, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
	CUresult r = cuLaunchKernel(f_probe, 1, 1, 1, 32, 1, 1, 64 * 1024, s, args, NULL);
	muladd(s, b, 1, 3, 5); /* runs: 5 */
	if (r == CUDA_SUCCESS) { /* deferred: the next sync reports it */
		CK_IS(cuStreamSynchronize(s), CUDA_ERROR_INVALID_VALUE);
	} else {
		CK_IS(r, CUDA_ERROR_INVALID_VALUE);
	}
	CK(cuStreamSynchronize(s));
	CK(cuCtxSynchronize());
	CHECKF(read_u32(b) == 5, "%u", read_u32(b));
	muladd(s2, b, 1, 2, 1); /* 11 */
	CK(cuStreamSynchronize(s2));
	CK(cuStreamQuery(s));
	CHECKF(read_u32(b) == 11, "%u", read_u32(b));
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(b));
	CK(cuMemFreeHost(pr));
}

/* A process that launches more distinct functions than the shim first caches layouts
 * for (a JIT such as Triton loads a module per kernel and never unloads it): every
 * launch still runs. */
static void t_many_functions(void)
{
	enum { NFUNC = 5000 };
	CUdeviceptr p = dalloc(4);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	int bad = 0;
	for (int i = 0; i < NFUNC; i++) {
		CUmodule m;
		CUfunction f;
		CK(cuModuleLoadData(&m, "image"));
		CK(cuModuleGetFunction(&f, m, "add"));
		uint32_t n = 1, a = 1;
		void *args[] = {&p, &n, &a};
		bad += cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL) != CUDA_SUCCESS;
		if (i % 1024 == 1023) {
			CK(cuStreamSynchronize(s));
			scan_launch_log(); /* the fake's log holds 4096 */
		}
	}
	CK(cuStreamSynchronize(s));
	CHECKF(bad == 0, "%d of %d launches refused", bad, NFUNC);
	CHECKF(read_u32(p) == NFUNC, "%u of %d ran", read_u32(p), NFUNC);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(p));
}

/* Launches of a loaded function go on, with their parameters intact, while another
 * thread loads and unloads libraries and modules (what the shim cached about the
 * launched function may be forgotten meanwhile, never freed under a launch). */
struct churn_arg {
	atomic_int stop;
	int loads;
};

static void *unload_churn(void *arg)
{
	struct churn_arg *c = arg;
	CK(cuCtxSetCurrent(pctx));
	while (!atomic_load(&c->stop) && !failures) {
		CUlibrary lib;
		CUmodule m;
		CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
		CK(cuLibraryUnload(lib));
		CK(cuModuleLoadData(&m, "image"));
		CK(cuModuleUnload(m));
		c->loads++;
	}
	return NULL;
}

static void t_unload_while_launching(void)
{
	CUdeviceptr p = dalloc(4);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	struct churn_arg c = {0};
	pthread_t th;
	CHECK(pthread_create(&th, NULL, unload_churn, &c) == 0);
	uint32_t want = 0;
	for (int i = 0; i < 3000 && !failures; i++) {
		muladd(s, p, 1, 1, 1);
		want++;
		if (i % 500 == 499) {
			CK(cuStreamSynchronize(s));
			scan_launch_log();
		}
	}
	CK(cuStreamSynchronize(s));
	atomic_store(&c.stop, 1);
	pthread_join(th, NULL);
	CHECKF(read_u32(p) == want, "%u, want %u (%d loads meanwhile)", read_u32(p), want, c.loads);
	CK(cuStreamDestroy(s));
	CK(cuMemFree(p));
}

static const struct prog_test tests[] = {
    {"params", t_params},
    {"launch_ex", t_launch_ex},
    {"launch_errors", t_launch_errors},
    {"config_errors", t_config_errors},
    {"graphs", t_graphs},
    {"passthrough", t_passthrough},
    {"foreign", t_foreign},
    {"block_errors", t_block_errors},
    {"capture_busy", t_capture_busy},
    {"function_limits", t_function_limits},
    {"refused_once", t_refused_once},
    {"scale_functions", t_many_functions},
    {"unload_while_launching", t_unload_while_launching},
};

int main(int argc, char **argv)
{
	alarm(100);
	register_kernels();
	setup_common();
	CK(cuModuleGetFunction(&f_six, mod, "six"));
	CK(cuModuleGetFunction(&f_many, mod, "many"));
	CK(cuModuleGetFunction(&f_probe, mod, "probe"));
	CK(cuModuleGetFunction(&f_empty, mod, "empty"));
	if (failures)
		return 1;
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv, "prog_shim_launch");
}
