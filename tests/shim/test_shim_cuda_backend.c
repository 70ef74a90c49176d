/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend (src/backend/cuda.c) against the CPU fake driver
 * (tests/fakecuda): leaves and entries, every descriptor kind it executes,
 * completion order and timestamps, errors reported through the status (a
 * refused launch, a faulting kernel), SM confinement, capacity, the event
 * completion mode and destruction.
 *
 * The fake is loaded through the real-entry-point table (VE_LIBCUDA is set to
 * $VE_BUILD/fakecuda/libcuda.so.1 before ve__real_init), exactly as the shim
 * loads the driver; its test hooks (kernel registry, launch log, SM ids of a
 * green context) are found with dlsym on that handle.
 *
 * The fault test comes last: a fault leaves the fake device in a sticky error
 * state for the rest of the process, as a GPU would.
 */
#include "backend/cuda.h"
#include "backend/cuda_desc.h"
#include "backend/cuda_driver.h"
#include "util/util.h"

#include "../fakecuda/fakecuda.h"
#include "../harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_NS 5000000000ull
#define MAX_TAGS   64
#define MAX_ORDER  4096

/* ------------------------------------------------------------------ fake kernels */

struct seen {
	_Atomic int ran;
	uint32_t nsm;
	uint32_t sms[FAKECUDA_MAX_SMS];
	int coop;
	unsigned cluster[3];
	unsigned grid[3], block[3];
	unsigned smem;
	CUgreenCtx green;
	CUstream stream;
	uint64_t value;
};
static struct seen seen[MAX_TAGS];

static _Atomic int gate[8];
static uint32_t order_log[8][MAX_ORDER];
static _Atomic uint32_t order_n[8];

/* k_probe(u32 tag, u64 value, u64 *out): records what it saw, *out = value. */
static int h_probe(void *const *p, const struct fakecuda_exec *e)
{
	uint32_t tag;
	uint64_t v, out;
	memcpy(&tag, p[0], 4);
	memcpy(&v, p[1], 8);
	memcpy(&out, p[2], 8);
	if (tag < MAX_TAGS) {
		struct seen *s = &seen[tag];
		s->nsm = e->nsm;
		memcpy(s->sms, e->sm_ids, e->nsm * sizeof(uint32_t));
		s->coop = e->cooperative;
		memcpy(s->cluster, e->cluster, sizeof(s->cluster));
		memcpy(s->grid, e->grid, sizeof(s->grid));
		memcpy(s->block, e->block, sizeof(s->block));
		s->smem = e->shared_mem;
		s->green = e->green;
		s->stream = e->stream;
		s->value = v;
		/* Pairs with the acquire in ran(): the fields above are visible. */
		atomic_store_explicit(&s->ran, 1, memory_order_release);
	}
	if (out)
		memcpy((void *)(uintptr_t)out, &v, sizeof(v));
	return 0;
}

/* k_order(u32 log, u32 idx): appends idx to order_log[log]. */
static int h_order(void *const *p, const struct fakecuda_exec *e)
{
	uint32_t log, idx;
	memcpy(&log, p[0], 4);
	memcpy(&idx, p[1], 4);
	uint32_t n = atomic_load_explicit(&order_n[log], memory_order_relaxed);
	if (n < MAX_ORDER)
		order_log[log][n] = idx;
	atomic_store_explicit(&order_n[log], n + 1, memory_order_release);
	return 0;
}

/* k_sleep(u32 ms) */
static int h_sleep(void *const *p, const struct fakecuda_exec *e)
{
	uint32_t ms;
	memcpy(&ms, p[0], 4);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	return 0;
}

/* k_block(u32 g): spins until gate[g] opens (bounded, so a failed test cannot hang). */
static int h_block(void *const *p, const struct fakecuda_exec *e)
{
	uint32_t g;
	memcpy(&g, p[0], 4);
	uint64_t end = ve__now_ns() + 10 * TIMEOUT_NS;
	while (!atomic_load_explicit(&gate[g & 7], memory_order_acquire) && ve__now_ns() < end) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int h_fault(void *const *p, const struct fakecuda_exec *e)
{
	return 1;
}

/* ------------------------------------------------------------------ setup */

static struct {
	bool tried, ok;
	char why[1024];
	CUdevice dev;
	CUcontext primary;
	CUfunction probe, order, sleep, block, fault;
	CUkernel kprobe;
	__typeof__(&fakecuda_register_kernel) reg;
	__typeof__(&fakecuda_green_sm_ids) green_sm_ids;
	__typeof__(&fakecuda_call_count_base) calls;
	__typeof__(&fakecuda_set_jitter) set_jitter;
	__typeof__(&fakecuda_launch_log) launch_log;
	__typeof__(&fakecuda_launch_seq) launch_seq;
} F;

static void *proc(const char *name)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	if (ve__real_getproc(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
		CUDA_SUCCESS ||
	    st != CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return p;
}

static int setup_once(void)
{
	const char *bd = getenv("VE_BUILD");
	char path[400];
	snprintf(path, sizeof(path), "%s/fakecuda/libcuda.so.1", bd && *bd ? bd : "build");
	if (access(path, R_OK)) {
		snprintf(F.why, sizeof(F.why), "no fake driver at %s (set VE_BUILD)", path);
		return -1;
	}
	setenv("VE_LIBCUDA", path, 1);
	if (ve__real_init()) {
		snprintf(F.why, sizeof(F.why), "cannot load %s", path);
		return -1;
	}
	void *h = ve__real_libcuda();
	*(void **)&F.reg = ve__real_dlsym(h, "fakecuda_register_kernel");
	*(void **)&F.green_sm_ids = ve__real_dlsym(h, "fakecuda_green_sm_ids");
	*(void **)&F.calls = ve__real_dlsym(h, "fakecuda_call_count_base");
	*(void **)&F.set_jitter = ve__real_dlsym(h, "fakecuda_set_jitter");
	*(void **)&F.launch_log = ve__real_dlsym(h, "fakecuda_launch_log");
	*(void **)&F.launch_seq = ve__real_dlsym(h, "fakecuda_launch_seq");
	if (!F.reg || !F.green_sm_ids || !F.calls || !F.set_jitter || !F.launch_log ||
	    !F.launch_seq) {
		snprintf(F.why, sizeof(F.why), "%s is not the fake driver", path);
		return -1;
	}
	static const size_t probe_sz[] = {4, 8, 8}, order_sz[] = {4, 4}, one_sz[] = {4};
	if (F.reg("k_probe", h_probe, 3, probe_sz) || F.reg("k_order", h_order, 2, order_sz) ||
	    F.reg("k_sleep", h_sleep, 1, one_sz) || F.reg("k_block", h_block, 1, one_sz) ||
	    F.reg("k_fault", h_fault, 0, NULL))
		return -1;
	if (ve__real.cuInit(0) || ve__real.cuDeviceGet(&F.dev, 0) ||
	    ve__real.cuDevicePrimaryCtxRetain(&F.primary, F.dev) ||
	    ve__real.cuCtxSetCurrent(F.primary))
		return -1;
	__typeof__(&cuModuleLoadData) load = proc("cuModuleLoadData");
	__typeof__(&cuModuleGetFunction) get = proc("cuModuleGetFunction");
	__typeof__(&cuLibraryLoadData) lload = proc("cuLibraryLoadData");
	__typeof__(&cuLibraryGetKernel) lget = proc("cuLibraryGetKernel");
	CUmodule mod;
	CUlibrary lib;
	if (!load || !get || !lload || !lget || load(&mod, "fake image") ||
	    get(&F.probe, mod, "k_probe") || get(&F.order, mod, "k_order") ||
	    get(&F.sleep, mod, "k_sleep") || get(&F.block, mod, "k_block") ||
	    get(&F.fault, mod, "k_fault") ||
	    lload(&lib, "fake image", NULL, NULL, 0, NULL, NULL, 0) ||
	    lget(&F.kprobe, lib, "k_probe")) {
		snprintf(F.why, sizeof(F.why), "fake modules do not work");
		return -1;
	}
	return 0;
}

static void setup(void)
{
	if (!F.tried) {
		F.tried = true;
		F.ok = setup_once() == 0;
		if (!F.ok && !F.why[0])
			snprintf(F.why, sizeof(F.why), "fake driver setup failed");
	}
	if (!F.ok)
		VE_SKIP(F.why);
	/* Every test starts on the primary context, whatever the last one left. */
	ve__real.cuCtxSetCurrent(F.primary);
}

static struct ve_backend *mk(const struct ve_cuda_config *cfg)
{
	struct ve_cuda_config c = {.ctx = F.primary};
	if (cfg)
		c = *cfg;
	char err[512];
	struct ve_backend *b = NULL;
	int rc = ve_cuda_backend_create(&c, &b, err, sizeof(err));
	VE_CHECK_MSG(rc == 0 && b, "create: %d %s", rc, err);
	return b;
}

/* The whole-GPU entry plus one entry per leaf (leaf i = entry i + 1). */
#define WHOLE 0
static uint64_t all_leaves(struct ve_backend *b)
{
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	return gi.nleaves >= 64 ? ~0ull : (1ull << gi.nleaves) - 1;
}

static void mk_pool(struct ve_backend *b, uint32_t lanes)
{
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	VE_CHECK_EQ(b->ops->entry_create(b, WHOLE, all_leaves(b), lanes), 0);
	for (uint32_t i = 0; i < gi.nleaves; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, i + 1, 1ull << i, lanes), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 2), 0);
}

#define COPY(k) VE_LANE(VE_LANE_COPY_ENTRY, k)

/* ------------------------------------------------------------------ descriptors */

struct kd {
	struct ve_desc d;
	_Alignas(16) uint8_t payload[2048];
};

/* A kernel descriptor as the shim builds it: parameter bytes at the offsets
 * cuFuncGetParamInfo reports, optional launch attributes in front. */
static void kd_init(struct kd *k, CUfunction f, unsigned grid, unsigned block,
		    const void *const *args, const CUlaunchAttribute *attrs, uint16_t nattrs)
{
	memset(k, 0, sizeof(*k));
	size_t off[16], sz[16];
	uint32_t n = 0, bytes = 0;
	while (n < 16 && ve__real.cuFuncGetParamInfo(f, n, &off[n], &sz[n]) == CUDA_SUCCESS) {
		if (off[n] + sz[n] > bytes)
			bytes = (uint32_t)(off[n] + sz[n]);
		n++;
	}
	k->d.kind = VE_OP_KERNEL;
	k->d.u.k.fn = (uint64_t)(uintptr_t)f;
	k->d.u.k.grid = (struct ve_dim3){grid, 1, 1};
	k->d.u.k.block = (struct ve_dim3){block, 1, 1};
	k->d.u.k.nattrs = nattrs;
	k->d.u.k.attr_size = nattrs ? sizeof(CUlaunchAttribute) : 0;
	k->d.u.k.param_bytes = bytes;
	k->d.u.k.nparams = n;
	if (nattrs)
		memcpy(k->payload, attrs, nattrs * sizeof(CUlaunchAttribute));
	k->d.payload = k->payload;
	uint8_t *params = (uint8_t *)(uintptr_t)ve_desc_params(&k->d);
	for (uint32_t i = 0; i < n; i++)
		memcpy(params + off[i], args[i], sz[i]);
	uint32_t *lay = (uint32_t *)(uintptr_t)ve_desc_param_layout(&k->d);
	for (uint32_t i = 0; i < n; i++) {
		lay[2 * i] = (uint32_t)off[i];
		lay[2 * i + 1] = (uint32_t)sz[i];
	}
	k->d.payload_len = ve_desc_kernel_payload_len(nattrs, k->d.u.k.attr_size, bytes, n);
	VE_CHECK_EQ(ve_desc_finalize(&k->d), 0);
}

static void kd_probe(struct kd *k, uint32_t tag, uint64_t value, uint64_t out, unsigned grid,
		     unsigned block)
{
	const void *args[] = {&tag, &value, &out};
	kd_init(k, F.probe, grid, block, args, NULL, 0);
}

static void kd_one(struct kd *k, CUfunction f, uint32_t v)
{
	const void *args[] = {&v};
	kd_init(k, f, 1, 1, args, NULL, 0);
}

static struct ve_desc memset_desc(CUdeviceptr dst, uint64_t value, uint32_t elem, uint64_t width,
				  uint64_t height, uint64_t pitch)
{
	struct ve_desc d = {.kind = VE_OP_MEMSET};
	d.u.ms = (struct ve_memset_desc){.dst = dst,
					 .value = value,
					 .width = width,
					 .height = height,
					 .pitch = pitch,
					 .elem_size = elem};
	return d;
}

static struct ve_desc memcpy_desc(uint32_t variant, uint64_t dst, uint64_t src, uint64_t bytes)
{
	struct ve_desc d = {.kind = VE_OP_MEMCPY};
	d.u.cp =
	    (struct ve_memcpy_desc){.dst = dst, .src = src, .bytes = bytes, .variant = variant};
	return d;
}

static bool ran(uint32_t tag)
{
	return atomic_load_explicit(&seen[tag].ran, memory_order_acquire);
}

static void reset_seen(void)
{
	for (int i = 0; i < MAX_TAGS; i++)
		atomic_store(&seen[i].ran, 0);
}

/* ------------------------------------------------------------------ polling */

static uint64_t next_cookie = 1000;

/* Polls until 'want' completions arrived (or the timeout); returns how many. */
static int drain(struct ve_backend *b, struct ve_completion *out, int want)
{
	int got = 0;
	uint64_t end = ve__now_ns() + TIMEOUT_NS;
	while (got < want && ve__now_ns() < end) {
		int n = b->ops->poll(b, out + got, want - got);
		VE_CHECK(n >= 0);
		got += n;
		if (!n)
			b->ops->wait(b, 1000000);
	}
	return got;
}

/* Submits d on lane and returns its completion status. */
/* The status of an op the driver refused at submission for a reason of its own:
 * the context stays usable, and the vctx reports it once (not sticky). */
#define REFUSED(cu) ((int32_t)(cu) | VE_STATUS_REFUSED)

static int32_t run1(struct ve_backend *b, uint32_t lane, const struct ve_desc *d)
{
	uint64_t cookie = next_cookie++;
	int rc = b->ops->submit(b, lane, d, cookie);
	VE_CHECK_MSG(rc == 0, "submit on lane %#x: %d", lane, rc);
	struct ve_completion c;
	VE_CHECK_EQ(drain(b, &c, 1), 1);
	VE_CHECK_EQ(c.cookie, cookie);
	VE_CHECK_EQ(c.lane, lane);
	VE_CHECK(c.t_submit_ns <= c.t_start_ns && c.t_start_ns <= c.t_end_ns);
	return c.status;
}

static CUdeviceptr dalloc(size_t n)
{
	CUdeviceptr p = 0;
	VE_CHECK_EQ(ve__real.cuMemAlloc(&p, n), CUDA_SUCCESS);
	return p;
}

static void *halloc(size_t n)
{
	void *p = NULL;
	VE_CHECK_EQ(ve__real.cuMemAllocHost(&p, n), CUDA_SUCCESS);
	return p;
}

static int sm_ids_of(CUgreenCtx g, uint32_t *ids)
{
	return F.green_sm_ids(g, ids, FAKECUDA_MAX_SMS);
}

/* ------------------------------------------------------------------ leaves and entries */

VE_TEST(leaves_default_split)
{
	setup();
	struct ve_backend *b = mk(NULL);
	struct ve_gpu_info gi;
	VE_CHECK_EQ(b->ops->info(b, &gi), 0);
	VE_CHECK_EQ(gi.sm_count, 132);
	VE_CHECK_EQ(gi.min_partition_sms, 8);
	VE_CHECK_EQ(gi.nleaves, 16);
	for (uint32_t i = 0; i < 15; i++)
		VE_CHECK_EQ(gi.leaf_sms[i], 8);
	VE_CHECK_EQ(gi.leaf_sms[15], 12);
	VE_CHECK(gi.name[0] != '\0');
	VE_CHECK(gi.max_threads_per_sm > 0 && gi.max_blocks_per_sm > 0);
	VE_CHECK(ve_cuda_backend_is_cuda(b));
	VE_CHECK_EQ(strcmp(b->ops->name, "cuda"), 0);
	b->ops->destroy(b);
}

VE_TEST(leaves_other_min_and_retained_primary)
{
	setup();
	/* ctx NULL: the backend retains (and at destroy releases) the primary itself. */
	struct ve_cuda_config c = {.min_leaf_sms = 16};
	struct ve_backend *b = mk(&c);
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	/* The fake's split rule, fitted to the H200: 8 x 16 + 4. */
	VE_CHECK_EQ(gi.nleaves, 9);
	for (uint32_t i = 0; i < 8; i++)
		VE_CHECK_EQ(gi.leaf_sms[i], 16);
	VE_CHECK_EQ(gi.leaf_sms[8], 4);
	VE_CHECK(ve_cuda_backend_primary(b) == F.primary);
	b->ops->destroy(b);
}

VE_TEST(entries_leaves_unions_whole)
{
	setup();
	struct ve_backend *b = mk(NULL);
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	static uint32_t leaf_ids[VE_MAX_LEAVES][FAKECUDA_MAX_SMS];
	int leaf_n[VE_MAX_LEAVES];
	uint8_t owner[FAKECUDA_MAX_SMS];
	memset(owner, 0xff, sizeof(owner));
	/* Leaves: the sizes info() promised, disjoint, covering the GPU. */
	for (uint32_t i = 0; i < gi.nleaves; i++) {
		VE_CHECK_EQ(b->ops->entry_create(b, i, 1ull << i, 1), 0);
		CUgreenCtx g;
		CUcontext c;
		VE_CHECK_EQ(ve_cuda_backend_entry_ctx(b, i, &g, &c), 0);
		VE_CHECK(g && c);
		leaf_n[i] = sm_ids_of(g, leaf_ids[i]);
		VE_CHECK_EQ(leaf_n[i], gi.leaf_sms[i]);
		for (int k = 0; k < leaf_n[i]; k++) {
			VE_CHECK(leaf_ids[i][k] < 132);
			VE_CHECK_EQ(owner[leaf_ids[i][k]], 0xff);
			owner[leaf_ids[i][k]] = (uint8_t)i;
		}
	}
	for (int s = 0; s < 132; s++)
		VE_CHECK(owner[s] != 0xff);
	/* The H200's leaf 0 (docs/architecture.md, "GPU facts the code relies on"),
	 * which the fake reproduces. */
	static const uint32_t leaf0[] = {0, 1, 16, 17, 32, 33, 48, 49};
	for (int k = 0; k < 8; k++)
		VE_CHECK_EQ(leaf_ids[0][k], leaf0[k]);
	/* Unions: two leaves, half the GPU, the complement of leaf 0 (with the
	 * remainder) and the whole GPU; each is exactly the union of its leaves. */
	const uint64_t all = all_leaves(b);
	const uint64_t masks[] = {0x3, 0xff, all & ~1ull, all, 1ull << 15 | 1};
	for (uint32_t m = 0; m < VE_ARRAY_SIZE(masks); m++) {
		uint32_t idx = 100 + m;
		VE_CHECK_EQ(b->ops->entry_create(b, idx, masks[m], 2), 0);
		CUgreenCtx g;
		VE_CHECK_EQ(ve_cuda_backend_entry_ctx(b, idx, &g, NULL), 0);
		uint32_t ids[FAKECUDA_MAX_SMS];
		int n = sm_ids_of(g, ids);
		int want = 0;
		for (uint32_t i = 0; i < gi.nleaves; i++)
			if (masks[m] >> i & 1)
				want += leaf_n[i];
		VE_CHECK_EQ(n, want);
		for (int k = 0; k < n; k++)
			VE_CHECK_MSG(masks[m] >> owner[ids[k]] & 1, "entry %u has SM %u of leaf %u",
				     idx, ids[k], owner[ids[k]]);
	}
	CUstream s0, s1;
	VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(100, 0), &s0), 0);
	VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(100, 1), &s1), 0);
	VE_CHECK(s0 && s1 && s0 != s1);
	VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(100, 2), &s0), -ENOENT);
	b->ops->destroy(b);
}

VE_TEST(entry_create_errors)
{
	setup();
	struct ve_backend *b = mk(NULL);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 2, 1), -EEXIST);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 0, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 1ull << 16, 1), -EINVAL); /* no such leaf */
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 0), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 257), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 256, 2, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 0), -EINVAL);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), -EEXIST);
	struct kd k;
	kd_probe(&k, 0, 1, 0, 1, 1);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k.d, 1), -ENOENT); /* entry never made */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), &k.d, 1), -ENOENT); /* one lane only */
	VE_CHECK_EQ(b->ops->submit(b, COPY(1), &k.d, 1), -ENOENT);
	/* A lane budget that runs out refuses the entry and leaves nothing behind. */
	struct ve_cuda_config c = {.ctx = F.primary, .max_lanes = 3};
	struct ve_backend *b2 = mk(&c);
	VE_CHECK_EQ(b2->ops->entry_create(b2, 0, 1, 4), -ENOSPC);
	VE_CHECK_EQ(b2->ops->entry_create(b2, 0, 1, 3), 0);
	VE_CHECK_EQ(b2->ops->copy_lanes_create(b2, 1), -ENOSPC);
	b2->ops->destroy(b2);
	b->ops->destroy(b);
}

VE_TEST(create_errors)
{
	setup();
	char err[512];
	struct ve_backend *b = (struct ve_backend *)1;
	struct ve_cuda_config c = {.device = 7};
	VE_CHECK_EQ(ve_cuda_backend_create(&c, &b, err, sizeof(err)), -ENODEV);
	VE_CHECK(b == NULL);
	VE_CHECK_MSG(strstr(err, "no CUDA device 7") != NULL, "%s", err);
	c = (struct ve_cuda_config){.min_leaf_sms = 200};
	VE_CHECK(ve_cuda_backend_create(&c, &b, err, sizeof(err)) < 0);
	VE_CHECK_MSG(strstr(err, "200") != NULL, "%s", err);
	c = (struct ve_cuda_config){.completion = 9};
	VE_CHECK_EQ(ve_cuda_backend_create(&c, &b, err, sizeof(err)), -EINVAL);
	setenv("VE_COMPLETION", "sometimes", 1);
	c = (struct ve_cuda_config){0};
	VE_CHECK_EQ(ve_cuda_backend_create(&c, &b, err, sizeof(err)), -EINVAL);
	unsetenv("VE_COMPLETION");
	VE_CHECK_MSG(strstr(err, "VE_COMPLETION") != NULL, "%s", err);
	VE_CHECK_EQ(ve_cuda_backend_create(NULL, NULL, err, sizeof(err)), -EINVAL);
}

static __typeof__(&cuDeviceGetAttribute) real_get_attr;
static CUresult CUDAAPI no_memops_attr(int *v, CUdevice_attribute a, CUdevice dev)
{
	if (a == CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) {
		*v = 0;
		return CUDA_SUCCESS;
	}
	return real_get_attr(v, a, dev);
}
static CUresult CUDAAPI no_green_resource(CUdevice dev, CUdevResource *r, CUdevResourceType t)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* A driver without green contexts or stream memory ops, by editing the table
 * of real entry points (as an older libcuda would leave it). */
VE_TEST(create_on_a_lesser_driver)
{
	setup();
	char err[512];
	struct ve_backend *b = NULL;
	struct ve_cuda_config c = {.ctx = F.primary};
	__typeof__(&cuGreenCtxCreate) gc = ve__real.cuGreenCtxCreate;
	ve__real.cuGreenCtxCreate = NULL;
	int rc = ve_cuda_backend_create(&c, &b, err, sizeof(err));
	ve__real.cuGreenCtxCreate = gc;
	VE_CHECK_EQ(rc, -ENOTSUP);
	VE_CHECK_MSG(strstr(err, "green contexts") && strstr(err, "cuGreenCtxCreate"), "%s", err);
	__typeof__(&cuDeviceGetDevResource) gr = ve__real.cuDeviceGetDevResource;
	ve__real.cuDeviceGetDevResource = no_green_resource;
	rc = ve_cuda_backend_create(&c, &b, err, sizeof(err));
	ve__real.cuDeviceGetDevResource = gr;
	VE_CHECK_EQ(rc, -ENOTSUP);
	VE_CHECK_MSG(strstr(err, "CUDA_ERROR_NOT_SUPPORTED") != NULL, "%s", err);
	/* No 64-bit stream memory ops: events are used, unless counters are demanded. */
	real_get_attr = ve__real.cuDeviceGetAttribute;
	ve__real.cuDeviceGetAttribute = no_memops_attr;
	rc = ve_cuda_backend_create(&c, &b, err, sizeof(err));
	struct ve_backend *b2 = NULL;
	c.completion = VE_CUDA_COMPLETION_COUNTER;
	int rc2 = ve_cuda_backend_create(&c, &b2, err, sizeof(err));
	ve__real.cuDeviceGetAttribute = real_get_attr;
	VE_CHECK_EQ(rc, 0);
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.completion, VE_CUDA_COMPLETION_EVENT);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	struct kd k;
	kd_probe(&k, 0, 1, 0, 1, 1);
	VE_CHECK_EQ(run1(b, COPY(0), &k.d), 0);
	b->ops->destroy(b);
	VE_CHECK_EQ(rc2, -ENOTSUP);
	VE_CHECK_MSG(strstr(err, "VE_COMPLETION=event") != NULL, "%s", err);
}

/* ------------------------------------------------------------------ kernels */

VE_TEST(kernel_params_pointer_array_and_extra)
{
	setup();
	reset_seen();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 2);
	CUdeviceptr out = dalloc(64);
	struct kd k;
	/* kernelParams form: pointers into the payload's parameter bytes. */
	kd_probe(&k, 1, 0x1122334455667788ull, out, 3, 32);
	uint64_t before = F.calls("cuLaunchKernel");
	VE_CHECK_EQ(run1(b, VE_LANE(3, 1), &k.d), 0);
	VE_CHECK_EQ(F.calls("cuLaunchKernel"), before + 1);
	VE_CHECK(ran(1));
	VE_CHECK_EQ(seen[1].value, 0x1122334455667788ull);
	VE_CHECK_EQ(seen[1].grid[0], 3);
	VE_CHECK_EQ(seen[1].block[0], 32);
	uint64_t v = 0;
	memcpy(&v, (void *)(uintptr_t)out, 8);
	VE_CHECK_EQ(v, 0x1122334455667788ull);
	/* 'extra' form: the same bytes handed over as one buffer. */
	kd_probe(&k, 2, 42, out + 8, 1, 1);
	k.d.flags |= VE_DESC_PARAMS_EXTRA;
	VE_CHECK_EQ(run1(b, VE_LANE(3, 1), &k.d), 0);
	VE_CHECK(ran(2));
	VE_CHECK_EQ(seen[2].value, 42);
	memcpy(&v, (void *)(uintptr_t)(out + 8), 8);
	VE_CHECK_EQ(v, 42);
	/* No layout recorded at all: the extra form as well. */
	kd_probe(&k, 3, 43, 0, 1, 1);
	k.d.u.k.nparams = 0;
	k.d.payload_len = ve_desc_kernel_payload_len(0, 0, k.d.u.k.param_bytes, 0);
	VE_CHECK_EQ(run1(b, VE_LANE(WHOLE, 0), &k.d), 0);
	VE_CHECK(ran(3) && seen[3].value == 43);
	/* A CUkernel (library) handle launches the same way. */
	kd_probe(&k, 4, 44, 0, 1, 1);
	k.d.u.k.fn = (uint64_t)(uintptr_t)F.kprobe;
	k.d.flags |= VE_DESC_FN_IS_KERNEL;
	VE_CHECK_EQ(run1(b, VE_LANE(2, 0), &k.d), 0);
	VE_CHECK(ran(4) && seen[4].value == 44);
	/* A malformed layout (offset beyond the bytes) is reported, not launched. */
	kd_probe(&k, 5, 45, 0, 1, 1);
	uint32_t *lay = (uint32_t *)(uintptr_t)ve_desc_param_layout(&k.d);
	lay[2] = 4096;
	VE_CHECK_EQ(run1(b, VE_LANE(2, 0), &k.d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	VE_CHECK(!ran(5));
	ve__real.cuMemFree(out);
	b->ops->destroy(b);
}

VE_TEST(launch_ex_with_attributes)
{
	setup();
	reset_seen();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	CUlaunchAttribute at[2];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at[0].value.clusterDim.x = 2;
	at[0].value.clusterDim.y = 1;
	at[0].value.clusterDim.z = 1;
	at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	at[1].value.priority = 0;
	uint32_t tag = 6;
	uint64_t value = 66, out = 0;
	const void *args[] = {&tag, &value, &out};
	struct kd k;
	kd_init(&k, F.probe, 4, 64, args, at, 2);
	k.d.u.k.smem = 128;
	uint64_t before = F.calls("cuLaunchKernelEx");
	VE_CHECK_EQ(run1(b, VE_LANE(5, 0), &k.d), 0);
	VE_CHECK_EQ(F.calls("cuLaunchKernelEx"), before + 1);
	VE_CHECK(ran(6));
	VE_CHECK_EQ(seen[6].cluster[0], 2);
	VE_CHECK_EQ(seen[6].cluster[1], 1);
	VE_CHECK_EQ(seen[6].smem, 128);
	VE_CHECK_EQ(seen[6].value, 66);
	/* hStream is the lane's: the launch ran in entry 5's green context. */
	CUgreenCtx g;
	CUstream s;
	VE_CHECK_EQ(ve_cuda_backend_entry_ctx(b, 5, &g, NULL), 0);
	VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(5, 0), &s), 0);
	VE_CHECK(seen[6].green == g);
	VE_CHECK(seen[6].stream == s);
	/* An attribute size the backend does not know is refused through the status. */
	kd_init(&k, F.probe, 4, 64, args, at, 2);
	k.d.u.k.attr_size = sizeof(CUlaunchAttribute) + 8;
	k.d.payload_len =
	    ve_desc_kernel_payload_len(2, k.d.u.k.attr_size, k.d.u.k.param_bytes, k.d.u.k.nparams);
	VE_CHECK_EQ(run1(b, VE_LANE(5, 0), &k.d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	b->ops->destroy(b);
}

VE_TEST(cooperative)
{
	setup();
	reset_seen();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	struct kd k;
	/* 32 blocks of 1024 threads: co-resident on the whole GPU (2 per SM). */
	kd_probe(&k, 7, 77, 0, 32, 1024);
	k.d.flags |= VE_DESC_COOPERATIVE;
	uint64_t before = F.calls("cuLaunchCooperativeKernel");
	VE_CHECK_EQ(run1(b, VE_LANE(WHOLE, 0), &k.d), 0);
	VE_CHECK_EQ(F.calls("cuLaunchCooperativeKernel"), before + 1);
	VE_CHECK(ran(7) && seen[7].coop == 1);
	/* With the extra form it goes through cuLaunchKernelEx + the attribute. */
	kd_probe(&k, 8, 78, 0, 32, 1024);
	k.d.flags |= VE_DESC_COOPERATIVE | VE_DESC_PARAMS_EXTRA;
	before = F.calls("cuLaunchKernelEx");
	VE_CHECK_EQ(run1(b, VE_LANE(WHOLE, 0), &k.d), 0);
	VE_CHECK_EQ(F.calls("cuLaunchKernelEx"), before + 1);
	VE_CHECK(ran(8) && seen[8].coop == 1 && seen[8].value == 78);
	/* On an 8-SM leaf the same launch cannot be co-resident: the driver's
	 * permanent refusal comes back as the status, not as a retry. */
	kd_probe(&k, 9, 79, 0, 32, 1024);
	k.d.flags |= VE_DESC_COOPERATIVE;
	VE_CHECK_EQ(run1(b, VE_LANE(1, 0), &k.d), REFUSED(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE));
	VE_CHECK(!ran(9));
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.rejected, 1);
	b->ops->destroy(b);
}

VE_TEST(refused_launch_keeps_lane_order)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	uint32_t lane = VE_LANE(4, 0);
	struct kd slow, bad, big, ok;
	kd_one(&slow, F.sleep, 20);
	kd_probe(&bad, 10, 1, 0, 1, 1);
	int not_a_function;
	bad.d.u.k.fn = (uint64_t)(uintptr_t)&not_a_function;
	kd_probe(&big, 11, 1, 0, 1, 2048); /* more threads per block than allowed */
	kd_probe(&ok, 12, 1, 0, 1, 1);
	VE_CHECK_EQ(b->ops->submit(b, lane, &slow.d, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &bad.d, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &big.d, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &ok.d, 4), 0);
	struct ve_completion c[4];
	VE_CHECK_EQ(drain(b, c, 4), 4);
	/* FIFO: the refused ops complete after the 20 ms kernel before them. */
	for (int i = 0; i < 4; i++)
		VE_CHECK_EQ(c[i].cookie, (uint64_t)i + 1);
	VE_CHECK_EQ(c[0].status, 0);
	VE_CHECK_EQ(c[1].status, REFUSED(CUDA_ERROR_INVALID_HANDLE));
	VE_CHECK_EQ(c[2].status, REFUSED(CUDA_ERROR_INVALID_VALUE));
	VE_CHECK_EQ(c[3].status, 0);
	VE_CHECK(c[1].t_end_ns >= c[0].t_end_ns);
	VE_CHECK(c[0].t_end_ns - c[0].t_submit_ns >= 20000000ull);
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.rejected, 2);
	VE_CHECK_EQ(ps.submitted, 4);
	VE_CHECK_EQ(ps.completed, 4);
	VE_CHECK_EQ(ps.exec_errors, 0);
	b->ops->destroy(b);
}

/* ------------------------------------------------------------------ copies and memsets */

VE_TEST(copies_1d)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	enum { N = 4096 };
	uint8_t *h = halloc(N), *h2 = halloc(N);
	CUdeviceptr d1 = dalloc(N), d2 = dalloc(N);
	for (int i = 0; i < N; i++)
		h[i] = (uint8_t)(i * 7 + 1);
	memset(h2, 0, N);
	struct ve_desc d = memcpy_desc(VE_CP_HTOD, d1, (uint64_t)(uintptr_t)h, N);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	d = memcpy_desc(VE_CP_DTOD, d2, d1, N);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	d = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h2, d2, N);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	VE_CHECK_EQ(memcmp(h, h2, N), 0);
	/* Unified addressing: cuMemcpyAsync, both directions, on a compute lane too. */
	memset(h2, 0, N);
	d = memcpy_desc(VE_CP_DEFAULT, d1 + 100, (uint64_t)(uintptr_t)h + 1, 1000);
	VE_CHECK_EQ(run1(b, VE_LANE(WHOLE, 0), &d), 0);
	d = memcpy_desc(VE_CP_DEFAULT, (uint64_t)(uintptr_t)h2, d1 + 100, 1000);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	VE_CHECK_EQ(memcmp(h + 1, h2, 1000), 0);
	/* A copy the driver refuses (out of bounds) is reported through the status. */
	d = memcpy_desc(VE_CP_DTOD, d2, d1, 2 * N);
	VE_CHECK_EQ(run1(b, COPY(0), &d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	d = memcpy_desc(99, d2, d1, 1);
	VE_CHECK_EQ(run1(b, COPY(0), &d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	ve__real.cuMemFreeHost(h);
	ve__real.cuMemFreeHost(h2);
	ve__real.cuMemFree(d1);
	ve__real.cuMemFree(d2);
	b->ops->destroy(b);
}

VE_TEST(copies_peer_2d_3d)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	enum { W = 48, H = 10, D = 3, PITCH = 64 };
	uint8_t *h = halloc(PITCH * H * D), *h2 = halloc(PITCH * H * D);
	CUdeviceptr dv = dalloc(PITCH * H * D), dv2 = dalloc(PITCH * H * D);
	for (int i = 0; i < PITCH * H * D; i++)
		h[i] = (uint8_t)(i ^ 0x5a);
	memset(h2, 0, PITCH * H * D);
	/* Peer (same context on both sides, as on a single GPU). */
	struct ve_desc d = memcpy_desc(VE_CP_HTOD, dv, (uint64_t)(uintptr_t)h, PITCH * H * D);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	struct ve_cp_peer peer = {.dst_ctx = F.primary, .src_ctx = F.primary};
	d = memcpy_desc(VE_CP_PEER, dv2, dv, PITCH * H * D);
	d.payload = (const uint8_t *)&peer;
	d.payload_len = sizeof(peer);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	d = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h2, dv2, PITCH * H * D);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	VE_CHECK_EQ(memcmp(h, h2, PITCH * H * D), 0);
	/* 2D: W x H bytes from a pitched device region into a tight host one. */
	memset(h2, 0, PITCH * H * D);
	CUDA_MEMCPY2D m2;
	memset(&m2, 0, sizeof(m2));
	m2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m2.srcDevice = dv;
	m2.srcPitch = PITCH;
	m2.srcXInBytes = 4;
	m2.srcY = 1;
	m2.dstMemoryType = CU_MEMORYTYPE_HOST;
	m2.dstHost = h2;
	m2.dstPitch = W;
	m2.WidthInBytes = W;
	m2.Height = H - 1;
	d = memcpy_desc(VE_CP_2D, 0, 0, W * (H - 1));
	/* An unaligned payload: the backend copies the struct out of it. */
	uint8_t raw[sizeof(m2) + 1];
	memcpy(raw + 1, &m2, sizeof(m2));
	d.payload = raw + 1;
	d.payload_len = sizeof(m2);
	VE_CHECK_EQ(run1(b, VE_LANE(2, 0), &d), 0);
	for (int y = 0; y < H - 1; y++)
		VE_CHECK_EQ(memcmp(h2 + y * W, h + (y + 1) * PITCH + 4, W), 0);
	/* 3D: W x H x D from host (pitched) to device (pitched), then back. */
	CUDA_MEMCPY3D m3;
	memset(&m3, 0, sizeof(m3));
	m3.srcMemoryType = CU_MEMORYTYPE_HOST;
	m3.srcHost = h;
	m3.srcPitch = PITCH;
	m3.srcHeight = H;
	m3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m3.dstDevice = dv2;
	m3.dstPitch = W;
	m3.dstHeight = H;
	m3.WidthInBytes = W;
	m3.Height = H;
	m3.Depth = D;
	d = memcpy_desc(VE_CP_3D, 0, 0, W * H * D);
	d.payload = (const uint8_t *)&m3;
	d.payload_len = sizeof(m3);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	memset(h2, 0, PITCH * H * D);
	d = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h2, dv2, W * H * D);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	for (int z = 0; z < D; z++)
		for (int y = 0; y < H; y++)
			VE_CHECK_EQ(memcmp(h2 + (z * H + y) * W, h + (z * H + y) * PITCH, W), 0);
	/* A payload too short for its shape is refused through the status. */
	d.u.cp.variant = VE_CP_3D;
	d.payload_len = sizeof(m3) - 1;
	VE_CHECK_EQ(run1(b, COPY(1), &d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	ve__real.cuMemFreeHost(h);
	ve__real.cuMemFreeHost(h2);
	ve__real.cuMemFree(dv);
	ve__real.cuMemFree(dv2);
	b->ops->destroy(b);
}

VE_TEST(copy_snapshots_and_staging)
{
	setup();
	atomic_store(&gate[1], 0);
	struct ve_cuda_config cfg = {.ctx = F.primary, .staging_bytes = 256};
	struct ve_backend *b = mk(&cfg);
	mk_pool(b, 1);
	enum { N = 1024 };
	CUdeviceptr dv = dalloc(N);
	uint8_t *h2 = halloc(N);
	uint8_t snap[3][N];
	for (int s = 0; s < 3; s++)
		for (int i = 0; i < N; i++)
			snap[s][i] = (uint8_t)(s * 31 + i);
	/* Block the copy lane so the snapshot copies wait behind a kernel. */
	struct kd blk;
	kd_one(&blk, F.block, 1);
	VE_CHECK_EQ(b->ops->submit(b, COPY(0), &blk.d, 1), 0);
	/* Two 100-byte snapshots fit the 256-byte ring (64-byte chunks), a third
	 * does not yet: transient, nothing enqueued. */
	struct ve_desc d[4];
	for (int s = 0; s < 3; s++) {
		d[s] = memcpy_desc(s == 1 ? VE_CP_DEFAULT : VE_CP_HTOD, dv + 128 * s, 0, 100);
		d[s].flags = VE_DESC_SRC_SNAPSHOT;
		d[s].payload = snap[s];
		d[s].payload_len = 100;
	}
	VE_CHECK_EQ(b->ops->submit(b, COPY(0), &d[0], 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, COPY(0), &d[1], 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, COPY(0), &d[2], 4), -EAGAIN);
	/* The source bytes were taken at submit: changing them now changes nothing. */
	memset(snap[0], 0xee, 100);
	/* Bigger than the whole ring: handed to the driver as pageable memory. */
	d[3] = memcpy_desc(VE_CP_HTOD, dv + 512, 0, 300);
	d[3].flags = VE_DESC_SRC_SNAPSHOT;
	d[3].payload = snap[2];
	d[3].payload_len = 300;
	VE_CHECK_EQ(b->ops->submit(b, COPY(0), &d[3], 5), 0);
	struct ve_completion c[4];
	VE_CHECK_EQ(b->ops->poll(b, c, 4), 0);
	atomic_store_explicit(&gate[1], 1, memory_order_release);
	VE_CHECK_EQ(drain(b, c, 4), 4);
	for (int i = 0; i < 4; i++)
		VE_CHECK(c[i].status == 0 && c[i].cookie == (uint64_t)i + 1 + (i >= 3));
	/* The ring drained with its copies: the third fits now. */
	VE_CHECK_EQ(run1(b, COPY(0), &d[2]), 0);
	struct ve_desc back = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h2, dv, N);
	VE_CHECK_EQ(run1(b, COPY(0), &back), 0);
	for (int i = 0; i < 100; i++) {
		VE_CHECK_EQ(h2[i], (uint8_t)(0 * 31 + i));
		VE_CHECK_EQ(h2[128 + i], (uint8_t)(1 * 31 + i));
		VE_CHECK_EQ(h2[256 + i], (uint8_t)(2 * 31 + i));
	}
	for (int i = 0; i < 300; i++)
		VE_CHECK_EQ(h2[512 + i], (uint8_t)(2 * 31 + i));
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.staged_bytes, 300);
	VE_CHECK(ps.eagain >= 1);
	/* Snapshots on a compute lane (no staging there), and with staging off. */
	memset(h2, 0, N);
	VE_CHECK_EQ(run1(b, VE_LANE(1, 0), &d[1]), 0);
	/* A snapshot is only for host-to-device copies. */
	struct ve_desc wrong = d[0];
	wrong.u.cp.variant = VE_CP_DTOD;
	VE_CHECK_EQ(run1(b, COPY(1), &wrong), REFUSED(CUDA_ERROR_INVALID_VALUE));
	wrong = d[0];
	wrong.payload_len = 50; /* shorter than the copy */
	VE_CHECK_EQ(run1(b, COPY(1), &wrong), REFUSED(CUDA_ERROR_INVALID_VALUE));
	b->ops->destroy(b);
	cfg.no_staging = true;
	b = mk(&cfg);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	VE_CHECK_EQ(run1(b, COPY(0), &d[2]), 0);
	VE_CHECK_EQ(run1(b, COPY(0), &back), 0);
	for (int i = 0; i < 100; i++)
		VE_CHECK_EQ(h2[256 + i], (uint8_t)(2 * 31 + i));
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.staged_bytes, 0);
	b->ops->destroy(b);
	ve__real.cuMemFreeHost(h2);
	ve__real.cuMemFree(dv);
}

VE_TEST(memsets)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	enum { PITCH = 256, H = 4, N = PITCH * H };
	CUdeviceptr dv = dalloc(N);
	uint8_t *h = halloc(N);
	struct ve_desc back = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h, dv, N);
	struct ve_desc d = memset_desc(dv, 0, 1, N, 1, 0);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	/* 1D, each element size; the value is truncated to the element. */
	d = memset_desc(dv, 0x1ab, 1, 10, 1, 0);
	VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
	d = memset_desc(dv + 16, 0x1beef, 2, 5, 1, 0);
	VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
	d = memset_desc(dv + 32, 0x1234567890ull, 4, 3, 0, 0);
	VE_CHECK_EQ(run1(b, VE_LANE(1, 0), &d), 0);
	VE_CHECK_EQ(run1(b, COPY(0), &back), 0);
	for (int i = 0; i < 10; i++)
		VE_CHECK_EQ(h[i], 0xab);
	VE_CHECK_EQ(h[10], 0);
	uint16_t v16;
	uint32_t v32;
	for (int i = 0; i < 5; i++) {
		memcpy(&v16, h + 16 + 2 * i, 2);
		VE_CHECK_EQ(v16, 0xbeef);
	}
	for (int i = 0; i < 3; i++) {
		memcpy(&v32, h + 32 + 4 * i, 4);
		VE_CHECK_EQ(v32, 0x34567890u);
	}
	VE_CHECK_EQ(h[44], 0);
	/* 2D, each element size: width elements per row, pitch bytes apart. */
	for (uint32_t es = 1; es <= 4; es *= 2) {
		d = memset_desc(dv, 0, 1, N, 1, 0);
		VE_CHECK_EQ(run1(b, COPY(0), &d), 0);
		d = memset_desc(dv + PITCH, 0x7f7f7f7fu, es, 6, 2, PITCH);
		VE_CHECK_EQ(run1(b, COPY(1), &d), 0);
		VE_CHECK_EQ(run1(b, COPY(0), &back), 0);
		for (int y = 0; y < H; y++)
			for (uint32_t x = 0; x < 8 * es; x++)
				VE_CHECK_EQ(h[y * PITCH + x],
					    (y == 1 || y == 2) && x < 6 * es ? 0x7f : 0);
	}
	d = memset_desc(dv, 0, 3, 1, 1, 0);
	VE_CHECK_EQ(run1(b, COPY(0), &d), REFUSED(CUDA_ERROR_INVALID_VALUE));
	ve__real.cuMemFreeHost(h);
	ve__real.cuMemFree(dv);
	b->ops->destroy(b);
}

/* ------------------------------------------------------------------ events, host fns, calls */

VE_TEST(timed_event_record)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	CUevent e1, e2;
	VE_CHECK_EQ(ve__real.cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);
	VE_CHECK_EQ(ve__real.cuEventCreate(&e2, CU_EVENT_DEFAULT), CUDA_SUCCESS);
	struct ve_desc r1 = {.kind = VE_OP_EVENT_RECORD, .flags = VE_DESC_TIMED};
	r1.u.ev.app_event = (uint64_t)(uintptr_t)e1;
	struct ve_desc r2 = r1;
	r2.u.ev.app_event = (uint64_t)(uintptr_t)e2;
	struct kd slow;
	kd_one(&slow, F.sleep, 10);
	uint32_t lane = COPY(1);
	VE_CHECK_EQ(b->ops->submit(b, lane, &r1, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &slow.d, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &r2, 3), 0);
	struct ve_completion c[3];
	VE_CHECK_EQ(drain(b, c, 3), 3);
	for (int i = 0; i < 3; i++)
		VE_CHECK(c[i].cookie == (uint64_t)i + 1 && c[i].status == 0);
	VE_CHECK_EQ(ve__real.cuEventQuery(e2), CUDA_SUCCESS);
	float ms = 0;
	VE_CHECK_EQ(ve__real.cuEventElapsedTime(&ms, e1, e2), CUDA_SUCCESS);
	VE_CHECK_MSG(ms >= 9.0f && ms < 1000.0f, "elapsed %f ms", (double)ms);
	/* An untimed marker (no app event) and an event-wait marker are plain markers. */
	struct ve_desc m = {.kind = VE_OP_EVENT_RECORD};
	VE_CHECK_EQ(run1(b, lane, &m), 0);
	m.kind = VE_OP_EVENT_WAIT;
	VE_CHECK_EQ(run1(b, lane, &m), 0);
	m.kind = VE_OP_NONE;
	VE_CHECK_EQ(run1(b, lane, &m), REFUSED(CUDA_ERROR_INVALID_VALUE));
	ve__real.cuEventDestroy(e1);
	ve__real.cuEventDestroy(e2);
	b->ops->destroy(b);
}

static _Atomic int host_calls;
static _Atomic uintptr_t cb_stream_seen;
static _Atomic int cb_status_seen = -1;
static void host_fn(void *arg)
{
	atomic_fetch_add(&host_calls, (int)(intptr_t)arg);
}
static void CUDA_CB stream_cb(CUstream s, CUresult st, void *arg)
{
	atomic_store(&cb_stream_seen, (uintptr_t)s);
	atomic_store(&cb_status_seen, (int)st);
	atomic_fetch_add(&host_calls, (int)(intptr_t)arg);
}

static _Atomic uint64_t call_stream;
static _Atomic int call_rc;
static int call_fn(uint64_t lane_stream, const void *payload, uint32_t len)
{
	atomic_store(&call_stream, lane_stream);
	if (len != 4 || memcmp(payload, "abcd", 4) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return atomic_load(&call_rc);
}

VE_TEST(host_functions_and_calls)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	atomic_store(&host_calls, 0);
	struct ve_desc h = {.kind = VE_OP_HOST_FN};
	h.u.host.fn = host_fn;
	h.u.host.arg = (void *)(intptr_t)1;
	VE_CHECK_EQ(run1(b, COPY(0), &h), 0);
	VE_CHECK_EQ(atomic_load(&host_calls), 1);
	/* cuStreamAddCallback style: the app's stream handle and the status. */
	h.u.host.fn = (void (*)(void *))(void (*)(void))stream_cb;
	h.u.host.arg = (void *)(intptr_t)10;
	h.u.host.style = 1;
	h.u.host.stream_handle = 0xabc0;
	VE_CHECK_EQ(run1(b, VE_LANE(3, 0), &h), 0);
	VE_CHECK_EQ(atomic_load(&host_calls), 11);
	VE_CHECK_EQ(atomic_load(&cb_stream_seen), 0xabc0);
	VE_CHECK_EQ(atomic_load(&cb_status_seen), CUDA_SUCCESS);
	/* Calls get the lane's stream; -EAGAIN is transient, a CUresult permanent. */
	struct ve_desc c = {
	    .kind = VE_OP_CALL, .payload = (const uint8_t *)"abcd", .payload_len = 4};
	c.u.call.fn = call_fn;
	atomic_store(&call_rc, 0);
	VE_CHECK_EQ(run1(b, VE_LANE(WHOLE, 0), &c), 0);
	CUstream s;
	VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(WHOLE, 0), &s), 0);
	VE_CHECK_EQ(atomic_load(&call_stream), (uint64_t)(uintptr_t)s);
	atomic_store(&call_rc, -EAGAIN);
	VE_CHECK_EQ(b->ops->submit(b, COPY(1), &c, 77), -EAGAIN);
	struct ve_completion cp;
	VE_CHECK_EQ(b->ops->poll(b, &cp, 1), 0);
	atomic_store(&call_rc, CUDA_ERROR_NOT_PERMITTED);
	VE_CHECK_EQ(run1(b, COPY(1), &c), REFUSED(CUDA_ERROR_NOT_PERMITTED));
	atomic_store(&call_rc, -EINVAL);
	VE_CHECK_EQ(run1(b, COPY(1), &c), -EINVAL);
	b->ops->destroy(b);
}

/* ------------------------------------------------------------------ order, stalls, capacity */

VE_TEST(completion_order_per_lane)
{
	setup();
	uint64_t seed = ve_test_seed(0x5eed);
	printf("# seed %llu (VE_SEED to replay)\n", (unsigned long long)seed);
	F.set_jitter(30, seed); /* every fake op sleeps 0..30 us: lanes interleave */
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 2);
	const uint32_t lanes[4] = {VE_LANE(1, 0), VE_LANE(1, 1), VE_LANE(WHOLE, 0), COPY(0)};
	for (int l = 0; l < 4; l++)
		atomic_store(&order_n[l], 0);
	CUdeviceptr dv = dalloc(64);
	enum { N = 400 };
	uint32_t per_lane[4] = {0};
	uint64_t s = seed;
	int submitted = 0, got = 0;
	static struct ve_completion c[N];
	uint64_t last_cookie[4] = {0}, last_end[4] = {0};
	uint32_t done_per_lane[4] = {0};
	while (got < N) {
		if (submitted < N) {
			int l = (int)ve__rand_below(&s, 4);
			/* cookie = lane * 1e6 + index on that lane */
			uint64_t cookie = (uint64_t)l * 1000000 + per_lane[l];
			struct kd k;
			struct ve_desc d;
			const struct ve_desc *dp = &k.d;
			if (ve__rand_below(&s, 4) == 0) {
				/* Each lane its own bytes: lanes run concurrently. */
				d = memset_desc(dv + 16 * (uint64_t)l, per_lane[l], 4, 4, 1, 0);
				dp = &d;
			} else {
				uint32_t log = (uint32_t)l, idx = per_lane[l];
				const void *args[] = {&log, &idx};
				kd_init(&k, F.order, 1, 1, args, NULL, 0);
			}
			int rc = b->ops->submit(b, lanes[l], dp, cookie);
			VE_CHECK_EQ(rc, 0);
			per_lane[l]++;
			submitted++;
		}
		int n = b->ops->poll(b, c + got, N - got);
		VE_CHECK(n >= 0);
		for (int i = got; i < got + n; i++) {
			int l = (int)(c[i].cookie / 1000000);
			VE_CHECK(l >= 0 && l < 4);
			VE_CHECK_EQ(c[i].lane, lanes[l]);
			VE_CHECK_EQ(c[i].status, 0);
			VE_CHECK_EQ(c[i].cookie % 1000000, done_per_lane[l]);
			VE_CHECK(!done_per_lane[l] || c[i].cookie > last_cookie[l]);
			VE_CHECK(c[i].t_start_ns >= c[i].t_submit_ns);
			VE_CHECK(c[i].t_start_ns >= last_end[l]);
			VE_CHECK(c[i].t_end_ns >= c[i].t_start_ns);
			last_cookie[l] = c[i].cookie;
			last_end[l] = c[i].t_end_ns;
			done_per_lane[l]++;
		}
		got += n;
		if (submitted == N && !n)
			VE_CHECK(b->ops->wait(b, TIMEOUT_NS) == 0);
	}
	F.set_jitter(0, seed);
	/* Kernels ran in submission order on each lane, too. */
	for (int l = 0; l < 4; l++) {
		uint32_t n = atomic_load_explicit(&order_n[l], memory_order_acquire);
		for (uint32_t i = 1; i < n; i++)
			VE_CHECK(order_log[l][i] > order_log[l][i - 1]);
	}
	/* Nothing outstanding: poll returns nothing and wait times out quickly. */
	VE_CHECK_EQ(b->ops->poll(b, c, N), 0);
	uint64_t t0 = ve__now_ns();
	VE_CHECK_EQ(b->ops->wait(b, 2000000), -EAGAIN);
	VE_CHECK(ve__now_ns() - t0 >= 2000000);
	ve__real.cuMemFree(dv);
	b->ops->destroy(b);
}

VE_TEST(long_kernel_is_not_an_error)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	struct kd slow;
	kd_one(&slow, F.sleep, 30);
	VE_CHECK_EQ(run1(b, VE_LANE(2, 0), &slow.d), 0);
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	/* Stalled for 30 ms > 2 ms: the stream was asked, and said NOT_READY. */
	VE_CHECK(ps.stall_queries >= 1);
	VE_CHECK_EQ(ps.exec_errors, 0);
	b->ops->destroy(b);
}

VE_TEST(capacity_is_transient)
{
	setup();
	atomic_store(&gate[2], 0);
	struct ve_cuda_config cfg = {.ctx = F.primary, .lane_depth = 3}; /* rounded up to 4 */
	struct ve_backend *b = mk(&cfg);
	mk_pool(b, 1);
	struct kd blk, k;
	kd_one(&blk, F.block, 2);
	kd_probe(&k, 20, 1, 0, 1, 1);
	uint32_t lane = VE_LANE(6, 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &blk.d, 1), 0);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(b->ops->submit(b, lane, &k.d, 2 + (uint64_t)i), 0);
	uint64_t seq = F.launch_seq();
	VE_CHECK_EQ(b->ops->submit(b, lane, &k.d, 9), -EAGAIN);
	VE_CHECK_EQ(F.launch_seq(), seq); /* nothing was enqueued */
	/* Other lanes are not affected. */
	VE_CHECK_EQ(run1(b, COPY(0), &k.d), 0);
	atomic_store_explicit(&gate[2], 1, memory_order_release);
	struct ve_completion c[4];
	VE_CHECK_EQ(drain(b, c, 4), 4);
	VE_CHECK_EQ(b->ops->submit(b, lane, &k.d, 10), 0);
	VE_CHECK_EQ(drain(b, c, 1), 1);
	VE_CHECK_EQ(c[0].cookie, 10);
	b->ops->destroy(b);

	/* Event mode: the event pool is the limit. */
	atomic_store(&gate[3], 0);
	cfg = (struct ve_cuda_config){
	    .ctx = F.primary, .completion = VE_CUDA_COMPLETION_EVENT, .event_pool = 2};
	b = mk(&cfg);
	mk_pool(b, 1);
	kd_one(&blk, F.block, 3);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &blk.d, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &k.d, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &k.d, 3), -EAGAIN);
	atomic_store_explicit(&gate[3], 1, memory_order_release);
	VE_CHECK_EQ(drain(b, c, 2), 2);
	VE_CHECK_EQ(run1(b, VE_LANE(3, 0), &k.d), 0);
	b->ops->destroy(b);
}

VE_TEST(event_completion_mode)
{
	setup();
	setenv("VE_COMPLETION", "event", 1);
	struct ve_backend *b = mk(NULL);
	unsetenv("VE_COMPLETION");
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.completion, VE_CUDA_COMPLETION_EVENT);
	mk_pool(b, 2);
	CUdeviceptr dv = dalloc(64);
	uint8_t *h = halloc(64);
	struct kd k;
	kd_probe(&k, 21, 0xfeed, dv, 2, 2);
	struct kd slow;
	kd_one(&slow, F.sleep, 5);
	uint32_t lane = VE_LANE(7, 1);
	VE_CHECK_EQ(b->ops->submit(b, lane, &slow.d, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &k.d, 2), 0);
	struct ve_desc back = memcpy_desc(VE_CP_DTOH, (uint64_t)(uintptr_t)h, dv, 8);
	VE_CHECK_EQ(b->ops->submit(b, lane, &back, 3), 0);
	struct kd bad;
	kd_probe(&bad, 22, 0, 0, 1, 4096);
	VE_CHECK_EQ(b->ops->submit(b, lane, &bad.d, 4), 0);
	struct ve_completion c[4];
	VE_CHECK_EQ(drain(b, c, 4), 4);
	for (int i = 0; i < 4; i++)
		VE_CHECK_EQ(c[i].cookie, (uint64_t)i + 1);
	VE_CHECK(c[0].status == 0 && c[1].status == 0 && c[2].status == 0);
	VE_CHECK_EQ(c[3].status, REFUSED(CUDA_ERROR_INVALID_VALUE));
	uint64_t v;
	memcpy(&v, h, 8);
	VE_CHECK_EQ(v, 0xfeed);
	b->ops->destroy(b);
	/* Asked for explicitly, too. */
	struct ve_cuda_config cfg = {.ctx = F.primary, .completion = VE_CUDA_COMPLETION_EVENT};
	b = mk(&cfg);
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.completion, VE_CUDA_COMPLETION_EVENT);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	VE_CHECK_EQ(run1(b, COPY(0), &k.d), 0);
	b->ops->destroy(b);
	cfg.completion = VE_CUDA_COMPLETION_COUNTER;
	b = mk(&cfg);
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.completion, VE_CUDA_COMPLETION_COUNTER);
	b->ops->destroy(b);
	ve__real.cuMemFreeHost(h);
	ve__real.cuMemFree(dv);
}

/* ------------------------------------------------------------------ confinement, stats */

VE_TEST(sm_confinement)
{
	setup();
	reset_seen();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 1);
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	/* SM sets of the leaves, from their entries. */
	static uint32_t leaf_ids[VE_MAX_LEAVES][FAKECUDA_MAX_SMS];
	int8_t owner[FAKECUDA_MAX_SMS];
	memset(owner, -1, sizeof(owner));
	for (uint32_t i = 0; i < gi.nleaves; i++) {
		CUgreenCtx g;
		VE_CHECK_EQ(ve_cuda_backend_entry_ctx(b, i + 1, &g, NULL), 0);
		int n = sm_ids_of(g, leaf_ids[i]);
		for (int k = 0; k < n; k++)
			owner[leaf_ids[i][k]] = (int8_t)i;
	}
	const uint64_t masks[] = {1ull << 3, 0x3, 0xf0f0, all_leaves(b) & ~1ull, 1ull << 15};
	uint32_t tag = 30;
	for (uint32_t m = 0; m < VE_ARRAY_SIZE(masks); m++, tag++) {
		uint32_t idx = 200 + m;
		VE_CHECK_EQ(b->ops->entry_create(b, idx, masks[m], 1), 0);
		struct kd k;
		kd_probe(&k, tag, m, 0, 64, 32);
		VE_CHECK_EQ(run1(b, VE_LANE(idx, 0), &k.d), 0);
		VE_CHECK(ran(tag));
		uint32_t want = 0;
		for (uint32_t i = 0; i < gi.nleaves; i++)
			if (masks[m] >> i & 1)
				want += gi.leaf_sms[i];
		VE_CHECK_EQ(seen[tag].nsm, want);
		for (uint32_t s = 0; s < seen[tag].nsm; s++) {
			int o = owner[seen[tag].sms[s]];
			VE_CHECK_MSG(o >= 0 && (masks[m] >> o & 1),
				     "entry %u (leaves %#llx) ran on SM %u of leaf %d", idx,
				     (unsigned long long)masks[m], seen[tag].sms[s], o);
		}
		CUgreenCtx g;
		VE_CHECK_EQ(ve_cuda_backend_entry_ctx(b, idx, &g, NULL), 0);
		VE_CHECK(seen[tag].green == g);
	}
	/* A kernel on a copy lane runs in the primary context, on every SM. */
	struct kd k;
	kd_probe(&k, tag, 0, 0, 1, 1);
	VE_CHECK_EQ(run1(b, COPY(0), &k.d), 0);
	VE_CHECK_EQ(seen[tag].nsm, 132);
	VE_CHECK(seen[tag].green == NULL);
	b->ops->destroy(b);
}

VE_TEST(pool_stats)
{
	setup();
	struct ve_backend *b = mk(NULL);
	struct ve_cuda_pool_stats ps;
	VE_CHECK_EQ(ve_cuda_backend_pool_stats(b, &ps), 0);
	VE_CHECK_EQ(ps.entries, 0);
	VE_CHECK_EQ(ps.completion, VE_CUDA_COMPLETION_COUNTER);
	VE_CHECK(ps.mem_total > 0 && ps.mem_free_before > 0);
	mk_pool(b, 3);
	VE_CHECK_EQ(ve_cuda_backend_pool_stats(b, &ps), 0);
	VE_CHECK_EQ(ps.entries, 17);
	VE_CHECK_EQ(ps.streams, 17 * 3 + 2);
	VE_CHECK_EQ(ps.copy_lanes, 2);
	VE_CHECK(ps.create_ns > 0 && ps.entry_max_ns > 0 && ps.entry_max_ns <= ps.create_ns);
	VE_CHECK(ps.pinned_bytes >= 2u * (1u << 20)); /* staging of two copy lanes */
	VE_CHECK_EQ(ve_cuda_backend_pool_stats(NULL, &ps), -EINVAL);
	printf("# pool of %u entries, %u streams: %.2f ms, %llu bytes of device memory\n",
	       ps.entries, ps.streams, (double)ps.create_ns / 1e6,
	       (unsigned long long)ps.mem_used_bytes);
	b->ops->destroy(b);
}

/* Lanes of a latency-class process are at the context's greatest stream
 * priority (the fake's range is 0 .. -5, as the H200's); otherwise at the
 * default 0. Entry and copy lanes alike. */
VE_TEST(lane_priority)
{
	setup();
	for (int high = 0; high < 2; high++) {
		struct ve_cuda_config c = {.ctx = F.primary, .priority_high = high != 0};
		struct ve_backend *b = mk(&c);
		mk_pool(b, 2);
		CUstream s;
		int prio = 99;
		VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, VE_LANE(WHOLE, 1), &s), 0);
		VE_CHECK_EQ(ve__real.cuStreamGetPriority(s, &prio), CUDA_SUCCESS);
		VE_CHECK_EQ(prio, high ? -5 : 0);
		VE_CHECK_EQ(ve_cuda_backend_lane_stream(b, COPY(0), &s), 0);
		VE_CHECK_EQ(ve__real.cuStreamGetPriority(s, &prio), CUDA_SUCCESS);
		VE_CHECK_EQ(prio, high ? -5 : 0);
		b->ops->destroy(b);
	}
}

/* ------------------------------------------------------------------ destroy */

static void *destroy_thread(void *arg)
{
	struct ve_backend *b = arg;
	b->ops->destroy(b);
	return NULL;
}

VE_TEST(destroy_with_work_from_another_thread)
{
	setup();
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 2);
	struct kd slow, k;
	kd_one(&slow, F.sleep, 20);
	kd_probe(&k, 40, 1, 0, 1, 1);
	/* Submitted and never polled: destroy waits for it, then frees everything. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &slow.d, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &k.d, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, COPY(1), &k.d, 3), 0);
	pthread_t t;
	uint64_t t0 = ve__now_ns();
	VE_CHECK_EQ(pthread_create(&t, NULL, destroy_thread, b), 0);
	pthread_join(t, NULL);
	VE_CHECK(ve__now_ns() - t0 < TIMEOUT_NS);
	VE_CHECK(ran(40));
}

VE_TEST(destroy_gives_up_on_stuck_work)
{
	setup();
#if defined(__SANITIZE_ADDRESS__)
	VE_SKIP("leaks the stuck pool on purpose (LeakSanitizer would report it)");
#endif
	atomic_store(&gate[4], 0);
	struct ve_cuda_config cfg = {.ctx = F.primary, .destroy_timeout_ns = 50000000};
	struct ve_backend *b = mk(&cfg);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	struct kd blk;
	kd_one(&blk, F.block, 4);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &blk.d, 1), 0);
	uint64_t t0 = ve__now_ns();
	b->ops->destroy(b);
	uint64_t dt = ve__now_ns() - t0;
	VE_CHECK_MSG(dt >= 50000000 && dt < TIMEOUT_NS, "destroy took %llu ns",
		     (unsigned long long)dt);
	atomic_store_explicit(&gate[4], 1, memory_order_release);
}

/* ------------------------------------------------------------------ faults (last) */

/* One test: a fault is sticky for the whole device (the fake models what the
 * H200 does), so both backends are made before it happens. */
VE_TEST(faults_complete_with_errors)
{
	setup();
	atomic_store(&gate[5], 0);
	atomic_store(&gate[6], 0);
	struct ve_backend *b = mk(NULL);
	mk_pool(b, 2);
	struct ve_cuda_config ec = {.ctx = F.primary, .completion = VE_CUDA_COMPLETION_EVENT};
	struct ve_backend *eb = mk(&ec);
	mk_pool(eb, 1);
	struct kd f, k, blk5, blk6;
	kd_init(&f, F.fault, 1, 1, NULL, NULL, 0);
	kd_probe(&k, 50, 1, 0, 1, 1);
	kd_one(&blk5, F.block, 5);
	kd_one(&blk6, F.block, 6);
	uint32_t lane = VE_LANE(5, 0), elane = VE_LANE(9, 0);
	VE_CHECK_EQ(run1(b, lane, &k.d), 0);
	VE_CHECK_EQ(run1(eb, elane, &k.d), 0);
	/* The fault happens after everything was submitted (as on a GPU, where
	 * it surfaces long after the launch returned): the markers behind it,
	 * counters and events alike, are never written. */
	VE_CHECK_EQ(b->ops->submit(b, lane, &blk5.d, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &f.d, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, lane, &k.d, 3), 0);
	VE_CHECK_EQ(eb->ops->submit(eb, elane, &blk6.d, 11), 0);
	VE_CHECK_EQ(eb->ops->submit(eb, elane, &k.d, 12), 0);
	VE_CHECK_EQ(eb->ops->submit(eb, elane, &k.d, 13), 0);
	uint64_t t0 = ve__now_ns();
	atomic_store_explicit(&gate[5], 1, memory_order_release);
	struct ve_completion c[3];
	int n = drain(b, c, 3);
	uint64_t dt = ve__now_ns() - t0;
	VE_CHECK_MSG(n == 3, "only %d of 3 completions after a fault", n);
	printf("# fault detected in %.2f ms (counter completion)\n", (double)dt / 1e6);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(c[i].cookie, (uint64_t)i + 1);
	VE_CHECK_EQ(c[0].status, 0);
	VE_CHECK_EQ(c[1].status, CUDA_ERROR_ILLEGAL_ADDRESS);
	VE_CHECK_EQ(c[2].status, CUDA_ERROR_ILLEGAL_ADDRESS);
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(b, &ps);
	VE_CHECK_EQ(ps.exec_errors, 2);
	VE_CHECK(ps.stall_queries >= 1);
	/* The event-mode backend's context died with the device: its queued
	 * work completes with the error as well, instead of hanging. */
	atomic_store_explicit(&gate[6], 1, memory_order_release);
	VE_CHECK_EQ(drain(eb, c, 3), 3);
	for (int i = 0; i < 3; i++) {
		VE_CHECK_EQ(c[i].cookie, (uint64_t)i + 11);
		VE_CHECK(i == 0 || c[i].status == CUDA_ERROR_ILLEGAL_ADDRESS);
	}
	/* Later work is refused at submit and reported too, on this lane,
	 * another lane of the same green context and another entry. */
	VE_CHECK_EQ(run1(b, lane, &k.d), CUDA_ERROR_ILLEGAL_ADDRESS);
	VE_CHECK_EQ(run1(b, VE_LANE(5, 1), &k.d), CUDA_ERROR_ILLEGAL_ADDRESS);
	VE_CHECK_EQ(run1(b, VE_LANE(6, 0), &f.d), CUDA_ERROR_ILLEGAL_ADDRESS);
	VE_CHECK_EQ(run1(eb, elane, &k.d), CUDA_ERROR_ILLEGAL_ADDRESS);
	t0 = ve__now_ns();
	b->ops->destroy(b);
	eb->ops->destroy(eb);
	VE_CHECK(ve__now_ns() - t0 < TIMEOUT_NS);
}
