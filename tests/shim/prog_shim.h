/* SPDX-License-Identifier: MIT */
/*
 * Shared code of the shim test programs (tests/shim/prog_shim_*.c): plain
 * driver-API programs, linked against the fake libcuda, that check CUDA's
 * semantics on their own and exit 0 when every check held. The harness
 * (tests/shim/test_shim_*.c) runs each natively and under libve.so with
 * several policies and schedules (FAKECUDA_JITTER_US / FAKECUDA_SEED).
 *
 * Environment read here:
 *   VETEST_EXPECT_GREEN=1  the program runs under an active shim: every kernel
 *                          launch the program did not direct at a foreign
 *                          context (another context, its own green context),
 *                          graph kernels included, must have run on a green
 *                          context (a test may exempt its graphs); =0 (or
 *                          unset): none may have (native, VE_DISABLE, bad
 *                          configuration).
 *   VETEST_SEED            seed of the programs' own random choices (printed).
 *   VETEST_GRAPHS_ANYWHERE=1  graph kernels may run outside green contexts
 *                          (VE_GRAPHS=stream or barrier).
 *
 * Every program prints one line "launch-log: N launches, G green, F foreign,
 * R graph" at the end, which the harness also checks.
 */
#ifndef VE_TESTS_PROG_SHIM_H
#define VE_TESTS_PROG_SHIM_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fakecuda/fakecuda.h"

static _Atomic int failures;
static const char *cur_test = "setup";

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s: %s:%d: %s\n", cur_test, __FILE__, __LINE__,      \
				#cond);                                                            \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

#define CHECKF(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s: %s:%d: %s: ", cur_test, __FILE__, __LINE__,      \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* cuGetErrorName is not intercepted: safe before and after anything. */
static inline const char *ename(CUresult r)
{
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "?";
	return s;
}

#define CK_IS(call, want)                                                                          \
	do {                                                                                       \
		CUresult ck_r_ = (call);                                                           \
		if (ck_r_ != (want)) {                                                             \
			fprintf(stderr, "FAIL %s: %s:%d: %s = %s, want %s\n", cur_test, __FILE__,  \
				__LINE__, #call, ename(ck_r_), ename(want));                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)
#define CK(call) CK_IS(call, CUDA_SUCCESS)

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void sleep_us(unsigned us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* splitmix64: the programs' own deterministic choices. */
static inline uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t prog_seed(void)
{
	const char *s = getenv("VETEST_SEED");
	return s && *s ? strtoull(s, NULL, 0) : 12345;
}

/* ---- kernels (host functions run by the fake on the stream's worker) ----------------------- */

#define P(i, T) (*(T *)params[i])

/* p[i] = p[i] * m + a: not commutative, so any reordering of two shows. */
static int k_muladd(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *), n = P(1, uint32_t), m = P(2, uint32_t), a = P(3, uint32_t);
	for (uint32_t i = 0; i < n; i++)
		p[i] = p[i] * m + a;
	return 0;
}

/* p[i] += a, read-modify-write without atomics: concurrent runs lose updates. */
static int k_add(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *), n = P(1, uint32_t), a = P(2, uint32_t);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t v = p[i];
		if ((i & 63) == 0)
			sched_yield(); /* widen the window a concurrent run would need */
		p[i] = v + a;
	}
	return 0;
}

/* Appends a tag to a log in (host-mapped) memory. */
struct tag_log {
	_Atomic uint32_t n;
	uint32_t tag[1023];
};

static int k_append(void *const *params, const struct fakecuda_exec *e)
{
	struct tag_log *log = P(0, struct tag_log *);
	uint32_t i = atomic_fetch_add(&log->n, 1);
	if (i < 1023)
		log->tag[i] = P(1, uint32_t);
	return 0;
}

/* Sleeps ms, then p[0] = v. */
static int k_slow_set(void *const *params, const struct fakecuda_exec *e)
{
	sleep_us(P(2, uint32_t) * 1000);
	atomic_store(P(0, _Atomic uint32_t *), P(1, uint32_t));
	return 0;
}

/*
 * A kernel that holds its stream until the host opens a gate (a flag in
 * host-mapped memory), or gives up after a few seconds and records that it
 * timed out: a host call that wrongly blocks on it shows as a timeout, never
 * as a hang. When released it sets *out = v.
 */
struct gate {
	_Atomic uint32_t open;
	_Atomic uint32_t timed_out;
	_Atomic uint32_t running;
	_Atomic uint32_t done;
};

#define GATE_TIMEOUT_MS 4000

static int k_gate(void *const *params, const struct fakecuda_exec *e)
{
	struct gate *g = P(0, struct gate *);
	atomic_fetch_add(&g->running, 1);
	uint64_t end = now_ns() + (uint64_t)GATE_TIMEOUT_MS * 1000000;
	while (!atomic_load(&g->open)) {
		if (now_ns() > end) {
			atomic_store(&g->timed_out, 1);
			break;
		}
		sleep_us(100);
	}
	uint32_t *out = P(1, uint32_t *);
	if (out)
		*out = P(2, uint32_t);
	atomic_fetch_add(&g->done, 1);
	return 0;
}

/* *out = (*p == want), for in-stream checks of device state. */
static int k_expect(void *const *params, const struct fakecuda_exec *e)
{
	uint32_t *p = P(0, uint32_t *), want = P(1, uint32_t);
	_Atomic uint32_t *bad = P(2, _Atomic uint32_t *);
	if (*p != want)
		atomic_fetch_add(bad, 1);
	return 0;
}

static int k_fault(void *const *params, const struct fakecuda_exec *e)
{
	return 1;
}

static inline void register_common_kernels(void)
{
	static const size_t muladd_sz[] = {8, 4, 4, 4}, add_sz[] = {8, 4, 4}, append_sz[] = {8, 4},
			    slow_sz[] = {8, 4, 4}, gate_sz[] = {8, 8, 4}, expect_sz[] = {8, 4, 8};
	int r = 0;
	r |= fakecuda_register_kernel("muladd", k_muladd, 4, muladd_sz);
	r |= fakecuda_register_kernel("add", k_add, 3, add_sz);
	r |= fakecuda_register_kernel("append", k_append, 2, append_sz);
	r |= fakecuda_register_kernel("slow_set", k_slow_set, 3, slow_sz);
	r |= fakecuda_register_kernel("gate", k_gate, 3, gate_sz);
	r |= fakecuda_register_kernel("expect", k_expect, 3, expect_sz);
	r |= fakecuda_register_kernel("fault", k_fault, 0, NULL);
	if (r) {
		fprintf(stderr, "FAIL: kernel registration\n");
		exit(1);
	}
}

/* ---- shared state and helpers -------------------------------------------------------------- */

static CUdevice dev;
static CUcontext pctx;
static CUmodule mod;
static CUfunction f_muladd, f_add, f_append, f_slow, f_gate, f_expect, f_fault;

static inline void setup_common(void)
{
	register_common_kernels();
	CUresult r = cuInit(0);
	if (r) {
		fprintf(stderr, "FAIL: cuInit: %s\n", ename(r));
		exit(1);
	}
	if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&pctx, dev) || cuCtxSetCurrent(pctx)) {
		fprintf(stderr, "FAIL: no primary context\n");
		exit(1);
	}
	CK(cuModuleLoadData(&mod, "image"));
	CK(cuModuleGetFunction(&f_muladd, mod, "muladd"));
	CK(cuModuleGetFunction(&f_add, mod, "add"));
	CK(cuModuleGetFunction(&f_append, mod, "append"));
	CK(cuModuleGetFunction(&f_slow, mod, "slow_set"));
	CK(cuModuleGetFunction(&f_gate, mod, "gate"));
	CK(cuModuleGetFunction(&f_expect, mod, "expect"));
	CK(cuModuleGetFunction(&f_fault, mod, "fault"));
	if (failures)
		exit(1);
}

static inline CUresult launch1(CUfunction f, CUstream s, void **args)
{
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static inline void muladd(CUstream s, CUdeviceptr p, uint32_t n, uint32_t m, uint32_t a)
{
	void *args[] = {&p, &n, &m, &a};
	CK(launch1(f_muladd, s, args));
}

static inline void add(CUstream s, CUdeviceptr p, uint32_t n, uint32_t a)
{
	void *args[] = {&p, &n, &a};
	CK(launch1(f_add, s, args));
}

static inline void slow_set(CUstream s, CUdeviceptr p, uint32_t v, uint32_t ms)
{
	void *args[] = {&p, &v, &ms};
	CK(launch1(f_slow, s, args));
}

static inline void expect_val(CUstream s, CUdeviceptr p, uint32_t want, CUdeviceptr bad)
{
	void *args[] = {&p, &want, &bad};
	CK(launch1(f_expect, s, args));
}

/* Zeroed device memory, ready when this returns. */
static inline CUdeviceptr dalloc(size_t n)
{
	CUdeviceptr p = 0;
	CK(cuMemAlloc(&p, n));
	CK(cuMemsetD8(p, 0, n));
	CK(cuCtxSynchronize());
	return p;
}

/* Host-mapped pinned memory, zeroed; *dp gets its device pointer. */
static inline void *mapped_alloc(size_t n, CUdeviceptr *dp)
{
	void *h = NULL;
	CK(cuMemHostAlloc(&h, n, CU_MEMHOSTALLOC_DEVICEMAP));
	if (!h) {
		fprintf(stderr, "FAIL: cuMemHostAlloc\n");
		exit(1);
	}
	memset(h, 0, n);
	CK(cuMemHostGetDevicePointer(dp, h, 0));
	return h;
}

struct gate_h {
	struct gate *g; /* host view */
	CUdeviceptr d;	/* device view */
};

static inline struct gate_h gate_new(void)
{
	struct gate_h h;
	h.g = mapped_alloc(sizeof(struct gate), &h.d);
	return h;
}

static inline void gate_free(struct gate_h h)
{
	CK(cuMemFreeHost(h.g));
}

/* Launches a gate kernel on s; when released it writes v to out (if out != 0). */
static inline void gate_launch(CUstream s, struct gate_h h, CUdeviceptr out, uint32_t v)
{
	void *args[] = {&h.d, &out, &v};
	CK(launch1(f_gate, s, args));
}

/* Waits until a gate kernel of h is running (so later checks see it pending). */
static inline bool gate_wait_running(struct gate_h h, unsigned n)
{
	uint64_t end = now_ns() + 3000000000ull;
	while (atomic_load(&h.g->running) < n)
		if (now_ns() > end)
			return false;
		else
			sleep_us(100);
	return true;
}

static inline void gate_open(struct gate_h h)
{
	atomic_store(&h.g->open, 1);
}

#define GATE_OK(h) CHECKF(!atomic_load(&(h).g->timed_out), "a host call blocked on pending work")

static inline uint32_t read_u32(CUdeviceptr p)
{
	uint32_t v = 0xdeadbeef;
	CK(cuMemcpyDtoH(&v, p, 4));
	return v;
}

/* ---- launch log: where did the kernels run? ----------------------------------------------- */

#define MAX_FOREIGN 16
static CUcontext foreign[MAX_FOREIGN];
static int nforeign;
static uint64_t log_seen;
static uint64_t n_launch, n_green, n_foreign, n_graph;
/* Graph kernels may run outside green contexts in this test (see scan_launch_log). */
static bool graph_outside_ok;

/* A context the shim must leave alone (another context of the app, the CUcontext of the
 * app's own green context): launches in it run where the app put them. */
static inline void foreign_add(CUcontext c)
{
	if (nforeign < MAX_FOREIGN)
		foreign[nforeign++] = c;
}

static inline bool expect_green(void)
{
	const char *e = getenv("VETEST_EXPECT_GREEN");
	return e && strcmp(e, "1") == 0;
}

/* Checks every launch executed since the last call. Call after each test, with no work
 * pending (the log only lists executed launches, and keeps the last 4096). */
static inline void scan_launch_log(void)
{
	static struct fakecuda_launch_record rec[FAKECUDA_LAUNCH_LOG_SIZE];
	uint64_t seq = fakecuda_launch_seq();
	if (seq - log_seen > FAKECUDA_LAUNCH_LOG_SIZE) {
		fprintf(stderr, "FAIL %s: more than %d launches between log scans\n", cur_test,
			FAKECUDA_LAUNCH_LOG_SIZE);
		failures++;
	}
	size_t n = fakecuda_launch_log(rec, FAKECUDA_LAUNCH_LOG_SIZE, log_seen);
	bool want = expect_green();
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		const struct fakecuda_launch_record *r = &rec[i];
		if (r->seq > log_seen)
			log_seen = r->seq;
		n_launch++;
		n_green += r->green != NULL;
		bool is_foreign = false;
		for (int k = 0; k < nforeign; k++)
			is_foreign |= r->ctx == foreign[k];
		if (is_foreign) {
			n_foreign++;
			continue; /* checked by the test that made it */
		}
		if (r->from_graph) {
			/* Graph launches are bound like kernels under the shim; a test
			 * whose graphs may run on the app's context (conditional nodes,
			 * VE_GRAPHS=stream) says so. Launched into a lane of an entry
			 * with every SM, the app's own exec runs there: on the same
			 * SMs as a copy would (src/shim/graph.c, lane_whole). */
			n_graph++;
			bool anywhere = graph_outside_ok || getenv("VETEST_GRAPHS_ANYWHERE") ||
					(!r->green && r->stream_nsm == r->nsm);
			if (((r->green != NULL) != want && !(want && anywhere)) &&
			    bad++ < 5)
				fprintf(stderr, "FAIL %s: graph launch #%llu (%s) ran %s a green context\n",
					cur_test, (unsigned long long)r->seq, r->name,
					r->green ? "on" : "outside");
			continue;
		}
		if ((r->green != NULL) != want && bad++ < 5)
			fprintf(stderr, "FAIL %s: launch #%llu (%s) ran %s a green context\n",
				cur_test, (unsigned long long)r->seq, r->name,
				r->green ? "on" : "outside");
	}
	if (bad)
		failures++;
	if (seq > log_seen)
		log_seen = seq; /* skipped launches (after a fault) are not in the log */
}

static inline void print_launch_summary(void)
{
	printf("launch-log: %llu launches, %llu green, %llu foreign, %llu graph\n",
	       (unsigned long long)n_launch, (unsigned long long)n_green,
	       (unsigned long long)n_foreign, (unsigned long long)n_graph);
}

/* ---- test table and main ---------------------------------------------------------------- */

/* A test named scale_* is heavy: it runs only when named (a test of its own
 * runs it once, not in every policy's run of the whole program). */
struct prog_test {
	const char *name;
	void (*fn)(void);
};

static inline int run_tests(const struct prog_test *tests, size_t ntests, int argc, char **argv,
			    const char *prog)
{
	int ran = 0;
	printf("%s: seed %llu, jitter %s us, fake seed %s, expect green %d\n", prog,
	       (unsigned long long)prog_seed(),
	       getenv("FAKECUDA_JITTER_US") ? getenv("FAKECUDA_JITTER_US") : "0",
	       getenv("FAKECUDA_SEED") ? getenv("FAKECUDA_SEED") : "1", expect_green());
	scan_launch_log();
	for (size_t i = 0; i < ntests; i++) {
		int want = argc < 2 && strncmp(tests[i].name, "scale_", 6) != 0;
		for (int j = 1; j < argc; j++)
			want |= strcmp(argv[j], tests[i].name) == 0;
		if (!want)
			continue;
		cur_test = tests[i].name;
		int before = failures;
		uint64_t t0 = now_ns();
		tests[i].fn();
		CK(cuCtxSynchronize());
		scan_launch_log();
		graph_outside_ok = false;
		printf("%-4s %-22s %7.1f ms\n", failures == before ? "ok" : "FAIL", tests[i].name,
		       (double)(now_ns() - t0) / 1e6);
		fflush(stdout);
		ran++;
	}
	cur_test = "teardown";
	print_launch_summary();
	printf("%d tests, %d failed checks\n", ran, (int)failures);
	return failures ? 1 : 0;
}

#endif
