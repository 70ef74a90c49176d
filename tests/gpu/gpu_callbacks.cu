/* SPDX-License-Identifier: MIT */
/*
 * Host functions (cudaLaunchHostFunc) and stream callbacks
 * (cudaStreamAddCallback) are stream operations: they start after the work
 * issued before them on their stream completed, and work issued after them
 * starts only after they returned (Runtime API, cudaLaunchHostFunc: "The host
 * function ... will be called after currently enqueued work and will block work
 * added after it"). Data moves through host-mapped pinned memory
 * (cudaHostAllocMapped), which kernels read and write directly:
 *  - a host function sees a slow kernel's result (and a prior D2H copy's);
 *  - a host function that sleeps before writing a value blocks the kernel that
 *    consumes it;
 *  - the same with cudaStreamAddCallback (status must be cudaSuccess);
 *  - chains that alternate kernel -> host function -> kernel ... on several
 *    streams at once, each step consuming the previous one's value;
 *  - a host function on the legacy stream after a blocking stream's kernel.
 * Host functions make no CUDA calls (the API forbids it).
 */
#include "gpu_common.h"

static const uint64_t MS = 1000000ull;

/* Spins ns, then writes v to m[0] (host-mapped) and d[0] (device). */
__global__ void k_write(volatile uint32_t *m, uint32_t *d, uint32_t v, uint64_t ns)
{
	if (ns)
		spin_ns(ns);
	m[0] = v;
	if (d)
		d[0] = v;
	__threadfence_system();
}

/* out[0] = f(m[0]) where m is host-mapped memory a host function wrote. */
__global__ void k_read(const volatile uint32_t *m, uint32_t *out)
{
	out[0] = m[0] * 7u + 1u;
}

/* One chain step on the device: d = 3d + host_in + step; host_out = d. */
__global__ void k_chain_step(uint32_t *d, const volatile uint32_t *host_in,
			     volatile uint32_t *host_out, uint32_t step)
{
	uint32_t x = d[0] * 3u + host_in[0] + step;
	d[0] = x;
	host_out[0] = x;
	__threadfence_system();
}

struct Slot {
	volatile uint32_t *m = nullptr; /* host view of mapped memory */
	uint32_t seen = 0;
	uint32_t value = 0;
	int sleep_ms = 0;
	cudaError_t status = cudaErrorUnknown;
	std::atomic<int> calls{0};
};

static void CUDART_CB fn_read(void *p)
{
	Slot *s = (Slot *)p;
	s->seen = s->m[0];
	s->calls++;
}

static void CUDART_CB fn_sleep_write(void *p)
{
	Slot *s = (Slot *)p;
	sleep_ms(s->sleep_ms);
	s->m[0] = s->value;
	std::atomic_thread_fence(std::memory_order_seq_cst);
	s->calls++;
}

static void CUDART_CB cb_read(cudaStream_t, cudaError_t status, void *p)
{
	Slot *s = (Slot *)p;
	s->status = status;
	fn_read(p);
}

static void CUDART_CB cb_sleep_write(cudaStream_t, cudaError_t status, void *p)
{
	Slot *s = (Slot *)p;
	s->status = status;
	fn_sleep_write(p);
}

/* Mapped pinned words: host pointer and device alias. */
struct Mapped {
	uint32_t *h;
	uint32_t *d;
	explicit Mapped(size_t words)
	{
		CK(cudaHostAlloc(&h, words * 4, cudaHostAllocMapped));
		CK(cudaHostGetDevicePointer(&d, h, 0));
		std::memset(h, 0, words * 4);
	}
	~Mapped() { CK(cudaFreeHost(h)); }
};

/* use_cb: cudaStreamAddCallback instead of cudaLaunchHostFunc. */
static void test_order(cudaStream_t s, bool use_cb, const char *tag)
{
	Mapped mm(16);
	uint32_t *dd, *dout;
	CK(cudaMalloc(&dd, 16 * 4));
	CK(cudaMalloc(&dout, 16 * 4));
	uint32_t *pin;
	CK(cudaMallocHost(&pin, 16 * 4));
	std::memset(pin, 0, 16 * 4);
	char name[96];

	/* 1: sees a prior slow kernel's mapped write. */
	Slot a;
	a.m = mm.h;
	a.status = cudaErrorUnknown;
	k_write<<<1, 1, 0, s>>>(mm.d, dd, 0x12345u + use_cb, 40 * MS);
	CKL();
	if (use_cb)
		CK(cudaStreamAddCallback(s, cb_read, &a, 0));
	else
		CK(cudaLaunchHostFunc(s, fn_read, &a));

	/* 2: sees a prior D2H copy into pinned (not mapped) memory. */
	Slot b;
	b.m = pin + 1;
	b.status = cudaErrorUnknown;
	k_write<<<1, 1, 0, s>>>(mm.d + 1, dd + 1, 0x777u + use_cb, 20 * MS);
	CKL();
	CK(cudaMemcpyAsync(pin + 1, dd + 1, 4, cudaMemcpyDeviceToHost, s));
	if (use_cb)
		CK(cudaStreamAddCallback(s, cb_read, &b, 0));
	else
		CK(cudaLaunchHostFunc(s, fn_read, &b));

	/* 3: blocks the consumer until it wrote (after a 50 ms sleep). */
	Slot c;
	c.m = mm.h + 2;
	c.value = 0xabcdu + use_cb;
	c.sleep_ms = 50;
	c.status = cudaErrorUnknown;
	mm.h[2] = 0xdead;
	if (use_cb)
		CK(cudaStreamAddCallback(s, cb_sleep_write, &c, 0));
	else
		CK(cudaLaunchHostFunc(s, fn_sleep_write, &c));
	k_read<<<1, 1, 0, s>>>(mm.d + 2, dout);
	CKL();
	uint32_t out = 0;
	CK(cudaMemcpyAsync(pin + 3, dout, 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	out = pin[3];

	std::snprintf(name, sizeof(name), "%s_sees_prior_kernel", tag);
	check(a.calls == 1 && a.seen == 0x12345u + use_cb, name, "calls %d, saw 0x%x",
	      a.calls.load(), a.seen);
	std::snprintf(name, sizeof(name), "%s_sees_prior_copy", tag);
	check(b.calls == 1 && b.seen == 0x777u + use_cb, name, "calls %d, saw 0x%x", b.calls.load(),
	      b.seen);
	std::snprintf(name, sizeof(name), "%s_blocks_later_kernel", tag);
	check(c.calls == 1 && out == (0xabcdu + use_cb) * 7u + 1u, name,
	      "calls %d, consumer computed 0x%x from the host value (0x%x expected)", c.calls.load(),
	      out, (0xabcdu + use_cb) * 7u + 1u);
	if (use_cb) {
		std::snprintf(name, sizeof(name), "%s_status", tag);
		check(a.status == cudaSuccess && b.status == cudaSuccess && c.status == cudaSuccess,
		      name, "statuses %s %s %s", cudaGetErrorName(a.status),
		      cudaGetErrorName(b.status), cudaGetErrorName(c.status));
	}
	uint32_t dig[3] = {a.seen, b.seen, out};
	digest_add(dig, sizeof(dig));
	CK(cudaFree(dd));
	CK(cudaFree(dout));
	CK(cudaFreeHost(pin));
}

/* Alternating kernel / host-function chain. Host step k: in = (out ^ k*golden) >> 1. */
struct ChainCtx;
struct HStep {
	ChainCtx *c;
	uint32_t k;
};
struct ChainCtx {
	volatile uint32_t *in, *out; /* host views */
	uint32_t *din, *dout;        /* device aliases */
	uint32_t *d;                 /* device state */
	std::vector<HStep> steps;
	std::atomic<uint32_t> host_calls{0};
	std::atomic<uint32_t> order_err{0};
};

static void CUDART_CB fn_chain(void *p)
{
	HStep *h = (HStep *)p;
	ChainCtx *c = h->c;
	if (c->host_calls.load() != h->k)
		c->order_err++;
	c->in[0] = (c->out[0] ^ (h->k * 0x9e3779b9u)) >> 1;
	std::atomic_thread_fence(std::memory_order_seq_cst);
	c->host_calls++;
}

static void test_chains(void)
{
	const int C = 4, STEPS = 100;
	cudaStream_t s[C];
	CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
	CK(cudaStreamCreate(&s[2]));
	s[3] = 0; /* legacy: implicitly ordered with s[2], which is fine */
	Mapped mm(2 * C);
	ChainCtx ctx[C];
	for (int j = 0; j < C; j++) {
		ctx[j].in = mm.h + 2 * j;
		ctx[j].out = mm.h + 2 * j + 1;
		ctx[j].din = mm.d + 2 * j;
		ctx[j].dout = mm.d + 2 * j + 1;
		ctx[j].in[0] = 100u + j;
		CK(cudaMalloc(&ctx[j].d, 4));
		CK(cudaMemset(ctx[j].d, 0, 4));
		ctx[j].steps.resize(STEPS);
		for (int k = 0; k < STEPS; k++)
			ctx[j].steps[k] = {&ctx[j], (uint32_t)k};
	}
	CK(cudaDeviceSynchronize());
	for (int k = 0; k < STEPS; k++) {
		for (int j = 0; j < C; j++) {
			k_chain_step<<<1, 1, 0, s[j]>>>(ctx[j].d, ctx[j].din, ctx[j].dout,
							(uint32_t)k);
			CKL();
			CK(cudaLaunchHostFunc(s[j], fn_chain, &ctx[j].steps[k]));
		}
	}
	for (int j = 0; j < C; j++)
		CK(cudaStreamSynchronize(s[j]));
	for (int j = 0; j < C; j++) {
		uint32_t d = 0, in = 100u + j, out = 0;
		for (int k = 0; k < STEPS; k++) {
			d = d * 3u + in + (uint32_t)k;
			out = d;
			in = (out ^ ((uint32_t)k * 0x9e3779b9u)) >> 1;
		}
		char name[64];
		std::snprintf(name, sizeof(name), "kernel_hostfunc_chain[%d]", j);
		uint32_t got_out = ctx[j].out[0], got_in = ctx[j].in[0];
		check(got_out == out && got_in == in && ctx[j].host_calls == (uint32_t)STEPS &&
			      ctx[j].order_err == 0,
		      name, "out 0x%x (want 0x%x), in 0x%x (want 0x%x), %u host calls, %u out of order",
		      got_out, out, got_in, in, ctx[j].host_calls.load(), ctx[j].order_err.load());
		uint32_t dig[2] = {got_out, got_in};
		digest_add(dig, sizeof(dig));
		CK(cudaFree(ctx[j].d));
	}
	CK(cudaStreamDestroy(s[0]));
	CK(cudaStreamDestroy(s[1]));
	CK(cudaStreamDestroy(s[2]));
}

/* A host function on the legacy stream runs after a blocking stream's kernel. */
static void test_legacy(void)
{
	cudaStream_t b;
	CK(cudaStreamCreate(&b));
	Mapped mm(1);
	Slot a;
	a.m = mm.h;
	k_write<<<1, 1, 0, b>>>(mm.d, nullptr, 0x5151u, 50 * MS);
	CKL();
	CK(cudaLaunchHostFunc(0, fn_read, &a));
	CK(cudaStreamSynchronize(0));
	check(a.calls == 1 && a.seen == 0x5151u, "legacy_hostfunc_after_blocking_stream",
	      "calls %d, saw 0x%x", a.calls.load(), a.seen);
	digest_add(&a.seen, sizeof(a.seen));
	CK(cudaStreamDestroy(b));
}

int main()
{
	gpu_init("callbacks");
	cudaStream_t s, nb;
	CK(cudaStreamCreate(&s));
	CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
	test_order(s, false, "hostfunc");
	test_order(nb, true, "callback");
	test_order(0, false, "hostfunc_legacy");
	test_order(cudaStreamPerThread, true, "callback_per_thread");
	test_chains();
	test_legacy();
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(nb));
	return gpu_finish();
}
