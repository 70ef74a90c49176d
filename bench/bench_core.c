/* SPDX-License-Identifier: MIT */
/*
 * Per-op cost of the core (vctx + token table), no backend.
 *
 * One "op" is a kernel descriptor with 64 bytes of parameters (8 params and
 * their offset table) recorded on a stream with its dependencies, popped
 * ready, marked dispatched and completed. The mix: 4 blocking streams taking
 * ops round-robin, every 16th op on the legacy stream (so it joins all four
 * and the next op of each stream depends on it), and every 8th op preceded
 * by an event record plus a cross-stream wait (inline markers, counted in
 * the cost of the op they precede). Ops are recorded in batches of 64 before
 * the batch is executed, so every op really depends on live tokens.
 *
 *   bench_core [--threads] [--reps N] [--ops N] [--out FILE]
 *
 * Reports the median ns per op over the repetitions with p10/p90 and
 * min/max, and writes JSON (default bench/results/core.json). --threads also
 * runs one app thread submitting and one dispatcher thread popping and
 * completing, reported separately (it measures hand-off and lock traffic
 * between two threads, not just the core's work).
 */
#include "core/vctx.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"

#define NSTREAMS 4
#define BATCH	 64

struct bench {
	struct ve_vctx *v;
	ve_stream st[NSTREAMS];
	ve_event ev[NSTREAMS];
	struct ve_desc d;
	uint8_t payload[256];
};

static void dummy_kernel(void)
{
}

static void bench_init(struct bench *b)
{
	memset(b, 0, sizeof(*b));
	if (ve_vctx_create(NULL, &b->v)) {
		fprintf(stderr, "bench_core: vctx_create failed\n");
		exit(1);
	}
	for (int i = 0; i < NSTREAMS; i++) {
		if (ve_vctx_stream_create(b->v, VE_STREAM_DEFAULT, 0, &b->st[i]) ||
		    ve_vctx_event_create(b->v, VE_EVENT_DISABLE_TIMING, &b->ev[i])) {
			fprintf(stderr, "bench_core: setup failed\n");
			exit(1);
		}
	}
	/* 64 bytes of parameters: eight 8-byte params, with their offset table. */
	const uint32_t np = 8, pb = 64;
	struct ve_desc *d = &b->d;
	d->kind = VE_OP_KERNEL;
	d->u.k.fn = (uint64_t)(uintptr_t)&dummy_kernel;
	d->u.k.grid = (struct ve_dim3){108, 1, 1};
	d->u.k.block = (struct ve_dim3){256, 1, 1};
	d->u.k.param_bytes = pb;
	d->u.k.nparams = np;
	d->payload_len = ve_desc_kernel_payload_len(0, 0, pb, np);
	for (uint32_t i = 0; i < pb; i++)
		b->payload[i] = (uint8_t)i;
	uint32_t *lay = (uint32_t *)(void *)(b->payload + pb);
	for (uint32_t i = 0; i < np; i++) {
		lay[2 * i] = 8 * i;
		lay[2 * i + 1] = 8;
	}
	d->payload = b->payload;
}

/* Records op j of the mix. */
static void submit_one(struct bench *b, uint64_t j, unsigned flags)
{
	ve_stream s = (j % 16 == 15) ? VE_STREAM_LEGACY : b->st[j % NSTREAMS];
	if (j % 8 == 3) {
		ve_vctx_event_record(b->v, b->ev[j % NSTREAMS], b->st[j % NSTREAMS], 0);
		ve_vctx_stream_wait_event(b->v, b->st[(j + 1) % NSTREAMS], b->ev[j % NSTREAMS]);
	}
	b->d.u.k.name_id = j;
	int rc = ve_vctx_submit(b->v, s, &b->d, flags, NULL);
	if (rc) {
		fprintf(stderr, "bench_core: submit: %d\n", rc);
		exit(1);
	}
}

/* Pops, dispatches and completes up to 'want' ops; returns how many. */
static int run_ready(struct bench *b, int want)
{
	struct ve_ready_info ri[BATCH];
	int n = ve_vctx_pop_ready(b->v, ri, want < BATCH ? want : BATCH);
	for (int k = 0; k < n; k++) {
		ve_vctx_dispatched(b->v, ri[k].tok, 0);
		ve_vctx_complete(b->v, ri[k].tok, 0, 0);
	}
	return n;
}

struct rep {
	double ns_per_op, submit_ns, exec_ns;
};

static struct rep rep_single(struct bench *b, uint64_t *j, int ops)
{
	uint64_t t_sub = 0, t_exec = 0;
	uint64_t t0 = ve__now_ns();
	for (int i = 0; i < ops;) {
		int nb = ops - i < BATCH ? ops - i : BATCH;
		uint64_t a = ve__now_ns();
		for (int k = 0; k < nb; k++)
			submit_one(b, (*j)++, VE_SUBMIT_NONBLOCK);
		uint64_t m = ve__now_ns();
		for (int left = nb; left > 0;) {
			int n = run_ready(b, left);
			if (n == 0) {
				fprintf(stderr, "bench_core: nothing ready with %d ops left\n",
					left);
				exit(1);
			}
			left -= n;
		}
		uint64_t e = ve__now_ns();
		t_sub += m - a;
		t_exec += e - m;
		i += nb;
	}
	uint64_t t = ve__now_ns() - t0;
	return (struct rep){(double)t / ops, (double)t_sub / ops, (double)t_exec / ops};
}

/* --threads: an app thread submits (blocking on back-pressure), a
 * dispatcher thread pops and completes. */
struct tctx {
	struct bench *b;
	uint64_t j0;
	int ops;
	atomic_int go;
};

static void *app_main(void *arg)
{
	struct tctx *t = arg;
	while (!atomic_load_explicit(&t->go, memory_order_acquire))
		; /* pairs with the release store in rep_threads() */
	for (int i = 0; i < t->ops; i++)
		submit_one(t->b, t->j0 + (uint64_t)i, 0);
	return NULL;
}

static double rep_threads(struct bench *b, uint64_t *j, int ops)
{
	struct tctx t = {.b = b, .j0 = *j, .ops = ops};
	pthread_t th;
	if (pthread_create(&th, NULL, app_main, &t)) {
		fprintf(stderr, "bench_core: pthread_create failed\n");
		exit(1);
	}
	uint64_t t0 = ve__now_ns();
	atomic_store_explicit(&t.go, 1, memory_order_release);
	int done = 0, idle = 0;
	while (done < ops) {
		int n = run_ready(b, BATCH);
		done += n;
		if (n) {
			idle = 0;
		} else if (++idle > 64) {
			sched_yield(); /* two shared cores: let the app thread run */
			idle = 0;
		}
	}
	uint64_t t1 = ve__now_ns();
	pthread_join(th, NULL);
	*j += (uint64_t)ops;
	return (double)(t1 - t0) / ops;
}

/* --threads, paced: the app thread records one op every PACE_NS (a busy
 * wait, like host work between launches) while the dispatcher thread polls
 * on every pass, as the real one does between kernels (pop ready, pop
 * pipeline candidates), mostly finding nothing. Measures what a launch
 * costs the application then: its time inside the record call. */
#define PACE_NS 2000

struct pctx {
	struct bench *b;
	uint64_t j0;
	int ops;
	atomic_int go, stop;
	uint64_t record_ns;
};

static void *paced_app(void *arg)
{
	struct pctx *t = arg;
	while (!atomic_load_explicit(&t->go, memory_order_acquire))
		;
	uint64_t sum = 0, next = ve__now_ns();
	for (int i = 0; i < t->ops; i++) {
		next += PACE_NS;
		while (ve__now_ns() < next)
			;
		uint64_t a = ve__now_ns();
		submit_one(t->b, t->j0 + (uint64_t)i, 0);
		sum += ve__now_ns() - a;
	}
	t->record_ns = sum;
	atomic_store_explicit(&t->stop, 1, memory_order_release);
	return NULL;
}

static double rep_paced(struct bench *b, uint64_t *j, int ops)
{
	struct pctx t = {.b = b, .j0 = *j, .ops = ops};
	pthread_t th;
	if (pthread_create(&th, NULL, paced_app, &t)) {
		fprintf(stderr, "bench_core: pthread_create failed\n");
		exit(1);
	}
	atomic_store_explicit(&t.go, 1, memory_order_release);
	struct ve_pipe_info pi[BATCH];
	int done = 0;
	while (done < ops) {
		done += run_ready(b, BATCH);
		/* Candidates are only offered: left alone they become ready. */
		(void)ve_vctx_pop_pipeline(b->v, pi, BATCH);
		if (atomic_load_explicit(&t.stop, memory_order_acquire) && done >= ops)
			break;
	}
	pthread_join(th, NULL);
	*j += (uint64_t)ops;
	return (double)t.record_ns / ops;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct stats {
	double med, p10, p90, min, max;
};

static double pct(const double *s, int n, double p)
{
	double idx = p * (n - 1);
	int lo = (int)idx;
	int hi = lo + 1 < n ? lo + 1 : lo;
	return s[lo] + (s[hi] - s[lo]) * (idx - lo);
}

static struct stats summarize(double *x, int n)
{
	qsort(x, (size_t)n, sizeof(*x), cmp_double);
	return (struct stats){pct(x, n, 0.5), pct(x, n, 0.1), pct(x, n, 0.9), x[0], x[n - 1]};
}




static void json_stats(FILE *f, const char *indent, const struct stats *s)
{
	fprintf(f, "%s\"ns_per_op\": %.1f,\n%s\"p10\": %.1f,\n%s\"p90\": %.1f,\n", indent, s->med,
		indent, s->p10, indent, s->p90);
	fprintf(f, "%s\"min\": %.1f,\n%s\"max\": %.1f,\n", indent, s->min, indent, s->max);
}

int main(int argc, char **argv)
{
	int reps = 30, ops = 100000;
	bool threads = false;
	const char *out = "bench/results/core.json";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads"))
			threads = true;
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--threads] [--reps N] [--ops N] [--out FILE]\n",
				argv[0]);
			return 2;
		}
	}
	if (reps < 1 || ops < 1)
		return 2;
	double *x = calloc((size_t)reps, sizeof(double));
	double *xs = calloc((size_t)reps, sizeof(double));
	double *xe = calloc((size_t)reps, sizeof(double));
	double *xt = calloc((size_t)reps, sizeof(double));
	if (!x || !xs || !xe || !xt)
		return 1;

	struct bench b;
	bench_init(&b);
	uint64_t j = 0;
	rep_single(&b, &j, ops); /* warm-up: page in the tables */
	for (int r = 0; r < reps; r++) {
		struct rep rr = rep_single(&b, &j, ops);
		x[r] = rr.ns_per_op;
		xs[r] = rr.submit_ns;
		xe[r] = rr.exec_ns;
	}
	struct stats s = summarize(x, reps), ss = summarize(xs, reps), se = summarize(xe, reps);
	struct stats st = {0}, sp = {0};
	if (threads) {
		rep_threads(&b, &j, ops);
		for (int r = 0; r < reps; r++)
			xt[r] = rep_threads(&b, &j, ops);
		st = summarize(xt, reps);
		int pops = ops < 20000 ? ops : 20000; /* 2 us apart: 40 ms a rep */
		rep_paced(&b, &j, pops);
		for (int r = 0; r < reps; r++)
			xt[r] = rep_paced(&b, &j, pops);
		sp = summarize(xt, reps);
	}
	struct ve_vctx_stats vs;
	ve_vctx_stats(b.v, &vs);
	if (vs.live_ops != 0) {
		fprintf(stderr, "bench_core: %u ops left live\n", vs.live_ops);
		return 1;
	}
	ve_vctx_destroy(b.v);

	char cpu[256], commit[80], date[64], machine[512];
	cpu_model(cpu, sizeof(cpu));
	git_commit(commit, sizeof(commit));
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(machine, sizeof(machine), "%s %s %s, %ld cpus, %s", u.sysname, u.release,
			 u.machine, nproc, cpu);
	else
		snprintf(machine, sizeof(machine), "%ld cpus, %s", nproc, cpu);
	time_t now = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

	printf("bench_core: %s\n", machine);
	printf("  single thread: %.1f ns/op median (p10 %.1f, p90 %.1f, min %.1f, max %.1f) over "
	       "%d x %d ops; target <= 150\n",
	       s.med, s.p10, s.p90, s.min, s.max, reps, ops);
	printf("    of which record %.1f ns, pop+dispatched+complete %.1f ns (medians)\n", ss.med,
	       se.med);
	if (threads)
		printf("  two threads (app submits, dispatcher pops/completes): %.1f ns/op median "
		       "(p10 %.1f, p90 %.1f, min %.1f, max %.1f)\n",
		       st.med, st.p10, st.p90, st.min, st.max);
	if (threads)
		printf("  paced (an op every %d ns, the dispatcher polling every pass): the app's "
		       "record call %.1f ns/op median (p10 %.1f, p90 %.1f)\n",
		       PACE_NS, sp.med, sp.p10, sp.p90);

	char dir[512];
	snprintf(dir, sizeof(dir), "%s", out);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		mkdir(dir, 0777); /* best effort: usually exists */
	}
	FILE *f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "bench_core: cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	fprintf(f, "{\n  \"bench\": \"core\",\n");
	fprintf(f, "  \"what\": \"record a kernel op (64 B params) with its dependencies, pop, "
		   "dispatched, complete; 4 blocking streams, 1/16 legacy, 1/8 with event "
		   "record+wait\",\n");
	json_stats(f, "  ", &s);
	fprintf(f, "  \"record_ns_per_op\": %.1f,\n  \"exec_ns_per_op\": %.1f,\n", ss.med, se.med);
	fprintf(f, "  \"reps\": %d,\n  \"ops_per_rep\": %d,\n  \"target_ns_per_op\": 150,\n", reps,
		ops);
	fprintf(f, "  \"machine\": ");
	json_str(f, machine);
	fprintf(f, ",\n  \"cpu\": ");
	json_str(f, cpu);
	fprintf(f, ",\n  \"nproc\": %ld,\n  \"date\": \"%s\",\n  \"commit\": ", nproc, date);
	json_str(f, commit);
	if (threads) {
		fprintf(f, ",\n  \"threads\": {\n");
		json_stats(f, "    ", &st);
		fprintf(f, "    \"mode\": \"one app thread submitting, one dispatcher thread "
			   "popping/completing\"\n  },\n  \"paced\": {\n");
		json_stats(f, "    ", &sp);
		fprintf(f, "    \"mode\": \"the app thread records an op every %d ns; ns_per_op is "
			   "its time in the record call while a dispatcher thread polls every "
			   "pass\"\n  }\n}\n",
			PACE_NS);
	} else {
		fprintf(f, ",\n  \"threads\": null\n}\n");
	}
	fclose(f);
	printf("  wrote %s\n", out);
	free(x);
	free(xs);
	free(xe);
	free(xt);
	return 0;
}
