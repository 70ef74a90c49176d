/* SPDX-License-Identifier: MIT */
/*
 * What a pool of SM partitions costs on a real GPU (docs/evaluation.md,
 * "Pool cost"), driver API only. Variants:
 *
 *   hierarchical  today's pool: the leaves of ONE cuDevSmResourceSplitByCount
 *                 (minCount --leaf-sms, default 8), the entries of ve_pool_init
 *                 (src/pool/pool.c, the same code the runtime uses: 59 on an
 *                 H200), each a green context over the union of its leaves
 *                 with --lanes streams, all created up front;
 *   flat          every allocation size the hierarchical pool offers created
 *                 on its own: for each size, one split with that minCount and
 *                 a green context for every group it gives (as many disjoint
 *                 contexts of that size as fit), no composition across sizes;
 *   on_demand     nothing up front: every binding splits, generates the
 *                 descriptor, creates the green context and a stream,
 *                 launches, waits, and destroys it again;
 *   mps           (subcommand "mps", with an MPS control daemon running)
 *                 partitions as MPS clients with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:
 *                 moving a job to another partition means a new process, so
 *                 its "binding" is the client start-up, from fork to its
 *                 first kernel done.
 *
 * Measured: start-up (creating everything the variant keeps), device memory
 * (cuMemGetInfo delta, after one launch on every stream so that lazily
 * allocated state counts), host RSS delta (/proc/self/status), and binding
 * latency p50/p99: from picking a partition to a tiny kernel launched there
 * having completed (cuStreamSynchronize), over --binds random partitions.
 * One JSON line per variant on stdout, progress on stderr.
 *
 *   pool_bench [--variants LIST] [--binds N] [--binds-on-demand N]
 *              [--lanes N] [--leaf-sms N] [--seed N]
 *   pool_bench mps [--percentages LIST] [--reps N]
 *   pool_bench mps-client            (internal: one MPS client)
 *
 * Build (repository root):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include \
 *       bench/gpu/pool/pool_bench.c src/pool/pool.c src/util/log.c \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -lpthread -lm -o build/pool_bench
 * Exit status: 0 done, 1 a CUDA error (the call and its error are printed),
 * 2 bad usage.
 */
#include "pool/pool.h"

#include <cuda.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CTX	  512
#define MAX_LANES 8
#define MAX_SIZES 64
#define MAX_PCTS  16

/* Assembled by the driver for whatever GPU is present. */
static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
			  ".visible .entry empty()\n{\n\tret;\n}\n";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char ts[16];
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] pool_bench: ", ts);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

#define CK(x)                                                                                      \
	do {                                                                                       \
		CUresult r_ = (x);                                                                 \
		if (r_ != CUDA_SUCCESS) {                                                          \
			const char *s_ = "?";                                                      \
			cuGetErrorName(r_, &s_);                                                   \
			fprintf(stderr, "FAIL pool_bench: %s:%d: %s -> %s\n", __FILE__, __LINE__,  \
				#x, s_);                                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0) {
			v = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n values (sorts v). */
static double pct(double *v, int n, double q)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	int k = (int)(q * n + 0.999999) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return v[k];
}

/* ------------------------------------------------------------ GPU state */

static CUdevice dev;
static CUcontext primary;
static CUfunction fn_empty;
static CUdevResource whole;

static uint64_t used_bytes(void)
{
	size_t f = 0, t = 0;
	CK(cuMemGetInfo(&f, &t));
	return (uint64_t)(t - f);
}

static double mib(int64_t b)
{
	return (double)b / (1024.0 * 1024.0);
}

struct gctx {
	CUgreenCtx g;
	CUstream s[MAX_LANES];
	unsigned nl, sms;
};

static void gctx_create(struct gctx *o, CUdevResource *res, unsigned n, unsigned lanes)
{
	CUdevResourceDesc desc;
	CK(cuDevResourceGenerateDesc(&desc, res, n));
	CK(cuGreenCtxCreate(&o->g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	o->sms = 0;
	for (unsigned i = 0; i < n; i++)
		o->sms += res[i].sm.smCount;
	o->nl = lanes;
	for (unsigned k = 0; k < lanes; k++)
		CK(cuGreenCtxStreamCreate(&o->s[k], o->g, CU_STREAM_NON_BLOCKING, 0));
}

static void gctx_destroy(struct gctx *o)
{
	for (unsigned k = 0; k < o->nl; k++)
		CK(cuStreamDestroy(o->s[k]));
	CK(cuGreenCtxDestroy(o->g));
}

/* A tiny kernel on s, waited for: microseconds; *launch_us gets the part
 * up to cuLaunchKernel's return. */
static double launch_wait(CUstream s, double *launch_us)
{
	uint64_t t0 = now_ns();
	CK(cuLaunchKernel(fn_empty, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	uint64_t t1 = now_ns();
	CK(cuStreamSynchronize(s));
	if (launch_us)
		*launch_us = (double)(t1 - t0) / 1e3;
	return (double)(now_ns() - t0) / 1e3;
}

static void gpu_init(void)
{
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&primary, dev));
	CK(cuCtxSetCurrent(primary));
	CUmodule mod;
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&fn_empty, mod, "empty"));
	launch_wait(NULL, NULL); /* primary context fully up before any baseline */
	memset(&whole, 0, sizeof(whole));
	CK(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
}

/* ------------------------------------------------------------ variants */

struct opts {
	bool v_hier, v_flat, v_od;
	int binds, binds_od;
	unsigned lanes, leaf_sms;
	uint64_t seed;
	int pcts[MAX_PCTS], npcts, reps;
};

struct result {
	const char *variant;
	double startup_ms, p50, p99, launch_p50, dev_mib, rss_mib;
	int allocations, binds;
	char detail[512];
};

static void print_result(const struct result *r)
{
	printf("{\"variant\":\"%s\",\"startup_ms\":%.3f,\"bind_us_p50\":%.2f,\"bind_us_p99\":%.2f,"
	       "\"device_mib\":%.1f,\"host_rss_mib\":%.1f,\"allocations\":%d,\"binds\":%d,"
	       "\"launch_us_p50\":%.2f,\"detail\":\"%s\"}\n",
	       r->variant, r->startup_ms, r->p50, r->p99, r->dev_mib, r->rss_mib, r->allocations,
	       r->binds, r->launch_p50, r->detail);
	fflush(stdout);
	say("%s: start-up %.1f ms, bind p50 %.1f us p99 %.1f us, %.1f MiB device, %.1f MiB RSS, "
	    "%d allocations (%s)",
	    r->variant, r->startup_ms, r->p50, r->p99, r->dev_mib, r->rss_mib, r->allocations,
	    r->detail);
}

/* Random binds over every (context, lane); warm-up launches first. */
static void bind_bench(struct gctx *c, int n, int binds, struct result *r)
{
	double *v = calloc((size_t)binds, sizeof(double)),
	       *l = calloc((size_t)binds, sizeof(double));
	if (!v || !l) {
		fprintf(stderr, "FAIL pool_bench: out of memory\n");
		exit(1);
	}
	for (int b = 0; b < binds; b++) {
		uint64_t t0 = now_ns();
		struct gctx *g = &c[rng() % (uint64_t)n];
		CUstream s = g->s[rng() % g->nl];
		double pick = (double)(now_ns() - t0) / 1e3;
		v[b] = pick + launch_wait(s, &l[b]);
	}
	r->binds = binds;
	r->p50 = pct(v, binds, 0.50);
	r->p99 = pct(v, binds, 0.99);
	r->launch_p50 = pct(l, binds, 0.50);
	free(v);
	free(l);
}

static void warm(struct gctx *c, int n)
{
	for (int i = 0; i < n; i++)
		for (unsigned k = 0; k < c[i].nl; k++)
			launch_wait(c[i].s[k], NULL);
}

static struct ve_pool pool; /* large: static */
static CUdevResource leaves[VE_POOL_MAX_LEAVES];
static uint32_t nleaves;
static struct gctx ctxs[MAX_CTX];
static unsigned sizes[MAX_SIZES];
static int nsizes;

/* The one split and the entry list: pure bookkeeping, nothing allocated on
 * the GPU (a split only describes SMs). */
static void make_leaves(unsigned leaf_sms)
{
	unsigned nb = 0;
	CK(cuDevSmResourceSplitByCount(NULL, &nb, &whole, NULL, 0, leaf_sms));
	if (nb > VE_POOL_MAX_LEAVES - 1)
		nb = VE_POOL_MAX_LEAVES - 1;
	CUdevResource rem;
	memset(&rem, 0, sizeof(rem));
	CK(cuDevSmResourceSplitByCount(leaves, &nb, &whole, &rem, 0, leaf_sms));
	nleaves = nb;
	if (rem.type == CU_DEV_RESOURCE_TYPE_SM && rem.sm.smCount > 0)
		leaves[nleaves++] = rem;
	uint32_t ls[VE_POOL_MAX_LEAVES];
	for (uint32_t i = 0; i < nleaves; i++)
		ls[i] = leaves[i].sm.smCount;
	int rc = ve_pool_init(&pool, ls, nleaves, 0);
	if (rc) {
		fprintf(stderr, "FAIL pool_bench: ve_pool_init(%u leaves): %s\n", nleaves,
			strerror(-rc));
		exit(1);
	}
	nsizes = 0;
	for (uint32_t i = 0; i < pool.nentries; i++) {
		unsigned s = pool.e[i].sms;
		bool seen = false;
		for (int k = 0; k < nsizes; k++)
			seen |= sizes[k] == s;
		if (!seen && nsizes < MAX_SIZES)
			sizes[nsizes++] = s;
	}
	for (int i = 1; i < nsizes; i++) /* ascending, for readable output */
		for (int j = i; j > 0 && sizes[j - 1] > sizes[j]; j--) {
			unsigned t = sizes[j];
			sizes[j] = sizes[j - 1];
			sizes[j - 1] = t;
		}
	say("%u SMs: %u leaves of one split (minCount %u), %u pool entries, %d sizes",
	    whole.sm.smCount, nleaves, leaf_sms, pool.nentries, nsizes);
}

static void report_freed(const char *what, uint64_t u0)
{
	say("%s destroyed: device memory %+.1f MiB vs before it", what,
	    mib((int64_t)used_bytes() - (int64_t)u0));
}

static void v_hierarchical(const struct opts *o)
{
	struct result r = {.variant = "hierarchical"};
	uint64_t u0 = used_bytes();
	long r0 = rss_kib();
	uint64_t t0 = now_ns();
	int n = (int)pool.nentries;
	for (int i = 0; i < n; i++) {
		CUdevResource res[VE_POOL_MAX_LEAVES];
		unsigned k = 0;
		for (uint64_t m = pool.e[i].leaves; m; m &= m - 1)
			res[k++] = leaves[__builtin_ctzll(m)];
		gctx_create(&ctxs[i], res, k, o->lanes);
	}
	r.startup_ms = (double)(now_ns() - t0) / 1e6;
	warm(ctxs, n);
	r.dev_mib = mib((int64_t)used_bytes() - (int64_t)u0);
	r.rss_mib = (double)(rss_kib() - r0) / 1024.0;
	r.allocations = n;
	bind_bench(ctxs, n, o->binds, &r);
	char lst[256] = "";
	for (uint32_t i = 0; i < nleaves && strlen(lst) < 200; i++)
		snprintf(lst + strlen(lst), sizeof(lst) - strlen(lst), "%s%u", i ? "+" : "",
			 leaves[i].sm.smCount);
	snprintf(r.detail, sizeof(r.detail),
		 "%d green contexts x %u streams over %u leaves of one split (%s SMs), %d sizes", n,
		 o->lanes, nleaves, lst, nsizes);
	print_result(&r);
	for (int i = 0; i < n; i++)
		gctx_destroy(&ctxs[i]);
	report_freed("hierarchical pool", u0);
}

static void v_flat(const struct opts *o)
{
	struct result r = {.variant = "flat"};
	uint64_t u0 = used_bytes();
	long r0 = rss_kib();
	uint64_t t0 = now_ns();
	int n = 0;
	char det[512] = "";
	for (int si = 0; si < nsizes && n < MAX_CTX; si++) {
		unsigned s = sizes[si], nb = 0;
		CUdevResource grp[VE_POOL_MAX_LEAVES * 2];
		CUresult q = cuDevSmResourceSplitByCount(NULL, &nb, &whole, NULL, 0, s);
		if (q == CUDA_SUCCESS && nb > 0) {
			if (nb > sizeof(grp) / sizeof(grp[0]))
				nb = sizeof(grp) / sizeof(grp[0]);
			CK(cuDevSmResourceSplitByCount(grp, &nb, &whole, NULL, 0, s));
		} else if (s >= whole.sm.smCount) {
			grp[0] = whole; /* the whole GPU is its own one group */
			nb = 1;
		} else {
			const char *e = "?";
			cuGetErrorName(q, &e);
			say("flat: no split with minCount %u (%s): size skipped", s, e);
			continue;
		}
		for (unsigned g = 0; g < nb && n < MAX_CTX; g++)
			gctx_create(&ctxs[n++], &grp[g], 1, o->lanes);
		snprintf(det + strlen(det), sizeof(det) - strlen(det), "%s%u:%ux%u", si ? " " : "",
			 s, nb, grp[0].sm.smCount);
	}
	r.startup_ms = (double)(now_ns() - t0) / 1e6;
	warm(ctxs, n);
	r.dev_mib = mib((int64_t)used_bytes() - (int64_t)u0);
	r.rss_mib = (double)(rss_kib() - r0) / 1024.0;
	r.allocations = n;
	bind_bench(ctxs, n, o->binds, &r);
	snprintf(r.detail, sizeof(r.detail),
		 "%d green contexts x %u streams; per size requested:groups x SMs each: %s", n,
		 o->lanes, det);
	print_result(&r);
	for (int i = 0; i < n; i++)
		gctx_destroy(&ctxs[i]);
	report_freed("flat pool", u0);
}

static void v_on_demand(const struct opts *o)
{
	struct result r = {.variant = "on_demand"};
	int nb_ = o->binds_od;
	double *v = calloc((size_t)nb_, sizeof(double)), *d = calloc((size_t)nb_, sizeof(double));
	double *l = calloc((size_t)nb_, sizeof(double));
	if (!v || !d || !l) {
		fprintf(stderr, "FAIL pool_bench: out of memory\n");
		exit(1);
	}
	uint64_t u0 = used_bytes();
	long r0 = rss_kib();
	for (int b = 0; b < nb_; b++) {
		unsigned s = sizes[rng() % (uint64_t)nsizes];
		uint64_t t0 = now_ns();
		CUdevResource grp, rem;
		unsigned nb = 1;
		memset(&rem, 0, sizeof(rem));
		CUresult q = cuDevSmResourceSplitByCount(&grp, &nb, &whole, &rem, 0, s);
		if (q != CUDA_SUCCESS || nb < 1) {
			if (s < whole.sm.smCount)
				CK(q != CUDA_SUCCESS ? q
						     : CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
			grp = whole;
		}
		struct gctx c;
		gctx_create(&c, &grp, 1, 1);
		v[b] = (double)(now_ns() - t0) / 1e3 + launch_wait(c.s[0], &l[b]);
		if (b == 0) {
			r.dev_mib = mib((int64_t)used_bytes() - (int64_t)u0);
			r.rss_mib = (double)(rss_kib() - r0) / 1024.0;
		}
		uint64_t t2 = now_ns();
		gctx_destroy(&c);
		d[b] = (double)(now_ns() - t2) / 1e3;
	}
	r.startup_ms = 0;
	r.allocations = nsizes;
	r.binds = nb_;
	r.p50 = pct(v, nb_, 0.50);
	r.p99 = pct(v, nb_, 0.99);
	r.launch_p50 = pct(l, nb_, 0.50);
	snprintf(r.detail, sizeof(r.detail),
		 "split + descriptor + cuGreenCtxCreate + 1 stream + launch + wait per binding, "
		 "sizes drawn from the pool's %d; destroy afterwards p50 %.0f us (not counted); "
		 "memory = one live context",
		 nsizes, pct(d, nb_, 0.50));
	print_result(&r);
	free(v);
	free(d);
	free(l);
	report_freed("on-demand contexts", u0);
}

/* ------------------------------------------------------------ MPS */

static int mps_client(void)
{
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&primary, dev));
	CK(cuCtxSetCurrent(primary));
	CUmodule mod;
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&fn_empty, mod, "empty"));
	launch_wait(NULL, NULL);
	uint64_t t_done = now_ns();
	int sms = 0;
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	printf("MPSCLIENT %llu %d %ld\n", (unsigned long long)t_done, sms, rss_kib());
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof(buf)) > 0) {
	}
	CK(cuDevicePrimaryCtxRelease(dev));
	return 0;
}

/* Device-wide used memory in MiB from nvidia-smi, -1 if unavailable. The
 * parent never creates a CUDA context (it would become an MPS client). */
static double smi_used_mib(void)
{
	FILE *p = popen("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 "
			"2>/dev/null",
			"r");
	if (!p)
		return -1;
	char line[64] = "";
	double v = -1;
	if (fgets(line, sizeof(line), p))
		v = strtod(line, NULL);
	pclose(p);
	return v > 0 ? v : -1;
}

struct client {
	pid_t pid;
	int to_child, from_child;
};

static bool spawn_client(const char *self, int pctv, struct client *c, uint64_t *t_fork)
{
	int in[2], out[2];
	if (pipe(in) || pipe(out))
		return false;
	*t_fork = now_ns();
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		char v[16];
		snprintf(v, sizeof(v), "%d", pctv);
		setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v, 1);
		execl(self, self, "mps-client", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->pid = pid;
	c->to_child = in[1];
	c->from_child = out[0];
	return true;
}

/* Reads the client's report line (60 s at most). */
static bool client_report(struct client *c, unsigned long long *t_done, int *sms, long *rss)
{
	char buf[256];
	size_t n = 0;
	uint64_t until = now_ns() + 60000000000ull;
	while (n < sizeof(buf) - 1) {
		struct pollfd pf = {.fd = c->from_child, .events = POLLIN};
		int left = (int)((until - now_ns()) / 1000000);
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return false;
		ssize_t k = read(c->from_child, buf + n, 1);
		if (k <= 0)
			return false;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return sscanf(buf, "MPSCLIENT %llu %d %ld", t_done, sms, rss) == 3;
}

static void client_end(struct client *c)
{
	close(c->to_child);
	close(c->from_child);
	for (int i = 0; i < 200; i++) {
		if (waitpid(c->pid, NULL, WNOHANG) == c->pid)
			return;
		usleep(50000);
	}
	say("MPS client %d did not exit in 10 s: SIGKILL", (int)c->pid);
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
}

static int run_mps(const struct opts *o)
{
	char self[4096];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k <= 0) {
		fprintf(stderr, "FAIL pool_bench: readlink /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	self[k] = '\0';
	if (!getenv("CUDA_MPS_PIPE_DIRECTORY"))
		say("CUDA_MPS_PIPE_DIRECTORY unset: clients look for MPS at the default pipe "
		    "directory");
	/* The first client starts the MPS server; that cost is not a binding. */
	struct client c = {.pid = -1};
	uint64_t tf;
	unsigned long long td;
	int sms;
	long rss;
	if (!spawn_client(self, 100, &c, &tf)) {
		fprintf(stderr, "FAIL pool_bench: cannot start a client: %s\n", strerror(errno));
		return 1;
	}
	if (!client_report(&c, &td, &sms, &rss)) {
		fprintf(stderr, "FAIL pool_bench: the warm-up MPS client did not report (is MPS "
				"running?)\n");
		client_end(&c);
		return 1;
	}
	client_end(&c);
	say("warm-up client: %.1f ms (includes the MPS server start)", (double)(td - tf) / 1e6);
	double st[MAX_PCTS * 64], devm[MAX_PCTS], rssm[MAX_PCTS];
	int nst = 0, ndev = 0, nrss = 0;
	char det[512] = "";
	for (int i = 0; i < o->npcts; i++) {
		for (int r = 0; r < o->reps; r++) {
			double before = -1;
			if (r == 0) {
				usleep(300000); /* the previous client's memory is released */
				before = smi_used_mib();
			}
			if (!spawn_client(self, o->pcts[i], &c, &tf)) {
				say("cannot start a client: %s", strerror(errno));
				continue;
			}
			if (!client_report(&c, &td, &sms, &rss)) {
				say("MPS client at %d%% failed to report", o->pcts[i]);
				client_end(&c);
				continue;
			}
			st[nst++] = (double)(td - tf) / 1e3; /* us */
			if (r == 0) {
				double during = smi_used_mib();
				if (before > 0 && during > 0)
					devm[ndev++] = during - before;
				rssm[nrss++] = (double)rss / 1024.0;
				snprintf(det + strlen(det), sizeof(det) - strlen(det),
					 "%s%d%%:%d SMs", i ? " " : "", o->pcts[i], sms);
			}
			client_end(&c);
		}
	}
	if (!nst) {
		fprintf(stderr, "FAIL pool_bench: no MPS client reported\n");
		return 1;
	}
	struct result res = {.variant = "mps"};
	double tmp[MAX_PCTS * 64];
	memcpy(tmp, st, sizeof(double) * (size_t)nst);
	res.startup_ms = pct(tmp, nst, 0.50) / 1e3;
	res.p50 = pct(st, nst, 0.50);
	res.p99 = pct(st, nst, 0.99);
	res.launch_p50 = 0;
	res.dev_mib = ndev ? pct(devm, ndev, 0.50) : -1;
	res.rss_mib = nrss ? pct(rssm, nrss, 0.50) : -1;
	res.allocations = o->npcts;
	res.binds = nst;
	snprintf(res.detail, sizeof(res.detail),
		 "one client process per partition; binding = client start-up, fork to first "
		 "kernel done; device memory = nvidia-smi device-wide delta per client (median), "
		 "RSS = client VmRSS (median); clients see %s",
		 det);
	print_result(&res);
	return 0;
}

/* ------------------------------------------------------------ main */

static long num(const char *opt, const char *v, long lo, long hi)
{
	char *end = NULL;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || !end || *end || x < lo || x > hi) {
		fprintf(stderr, "pool_bench: %s wants an integer in [%ld, %ld], not '%s'\n", opt,
			lo, hi, v);
		exit(2);
	}
	return x;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pool_bench [--variants hierarchical,flat,on_demand] [--binds N]\n"
		   "                  [--binds-on-demand N] [--lanes N] [--leaf-sms N] [--seed N]\n"
		   "       pool_bench mps [--percentages 25,50,75,100] [--reps N]\n");
}

int main(int argc, char **argv)
{
	setvbuf(stderr, NULL, _IOLBF, 0);
	struct opts o = {.v_hier = true,
			 .v_flat = true,
			 .v_od = true,
			 .binds = 2000,
			 .binds_od = 300,
			 .lanes = 4,
			 .leaf_sms = 8,
			 .seed = 1,
			 .pcts = {25, 50, 75, 100},
			 .npcts = 4,
			 .reps = 3};
	int i = 1;
	bool mps = false;
	if (argc > 1 && strcmp(argv[1], "mps-client") == 0)
		return mps_client();
	if (argc > 1 && strcmp(argv[1], "mps") == 0) {
		mps = true;
		i = 2;
	}
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "pool_bench: %s needs a value (or is unknown)\n", a);
			usage(stderr);
			return 2;
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--variants")) {
			o.v_hier = strstr(v, "hierarchical") != NULL;
			o.v_flat = strstr(v, "flat") != NULL;
			o.v_od = strstr(v, "on_demand") != NULL;
			if (!o.v_hier && !o.v_flat && !o.v_od) {
				fprintf(stderr,
					"pool_bench: --variants: none of hierarchical, flat, "
					"on_demand in '%s'\n",
					v);
				return 2;
			}
		} else if (!strcmp(a, "--binds"))
			o.binds = (int)num(a, v, 1, 1000000);
		else if (!strcmp(a, "--binds-on-demand"))
			o.binds_od = (int)num(a, v, 1, 100000);
		else if (!strcmp(a, "--lanes"))
			o.lanes = (unsigned)num(a, v, 1, MAX_LANES);
		else if (!strcmp(a, "--leaf-sms"))
			o.leaf_sms = (unsigned)num(a, v, 1, 1024);
		else if (!strcmp(a, "--seed"))
			o.seed = (uint64_t)num(a, v, 0, 1L << 40);
		else if (!strcmp(a, "--reps"))
			o.reps = (int)num(a, v, 1, 64);
		else if (!strcmp(a, "--percentages")) {
			o.npcts = 0;
			char *dup = strdup(v), *save = NULL;
			for (char *t = strtok_r(dup, ",", &save); t;
			     t = strtok_r(NULL, ",", &save)) {
				if (o.npcts >= MAX_PCTS) {
					fprintf(stderr, "pool_bench: at most %d percentages\n",
						MAX_PCTS);
					return 2;
				}
				o.pcts[o.npcts++] = (int)num(a, t, 1, 100);
			}
			free(dup);
			if (!o.npcts) {
				fprintf(stderr, "pool_bench: --percentages is empty\n");
				return 2;
			}
		} else {
			fprintf(stderr, "pool_bench: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
	}
	rng_state ^= o.seed * 0xd1b54a32d192ed03ull;
	if (mps)
		return run_mps(&o);
	gpu_init();
	char name[128] = "";
	cuDeviceGetName(name, sizeof(name), dev);
	say("device %s", name);
	make_leaves(o.leaf_sms);
	if (o.v_hier)
		v_hierarchical(&o);
	if (o.v_flat)
		v_flat(&o);
	if (o.v_od)
		v_on_demand(&o);
	CK(cuCtxSynchronize());
	return 0;
}
