/* SPDX-License-Identifier: MIT */
/*
 * Simulated GPU backend tests: lane FIFO, concurrency of disjoint entries,
 * waves, the bandwidth floor, processor sharing on overlapping entries (work
 * conserved), the shared memory bandwidth (lone kernels unchanged, memory-bound
 * pairs serialised, compute/memory overlap, max-min shares, copies, private
 * floors), completion order, determinism of a seeded random workload
 * (replay with VE_SEED=<seed>), fault injection at submit and at run time,
 * the event hook's SM sets, copy lanes, host functions, bad input, capacity,
 * virtual-time semantics, statistics, a two-thread run and a speed check.
 */
/* harness.h's main() keeps its counters across setjmp; they are never changed
 * between a setjmp and its longjmp, so GCC 12's -Wclobbered at -O2 is a false
 * positive there (it fires in some translation units, not others). */
#pragma GCC diagnostic ignored "-Wclobbered"
#include "../harness.h"
#include "backend/sim.h"

#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <time.h>

#define WHOLE_H200 0xffffull /* 16 leaves */
#define MAXC	   4096

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct ve_desc kernel(uint32_t blocks, uint32_t threads)
{
	struct ve_desc d;
	memset(&d, 0, sizeof(d));
	d.kind = VE_OP_KERNEL;
	d.u.k.fn = 0x1000;
	d.u.k.grid = (struct ve_dim3){blocks, 1, 1};
	d.u.k.block = (struct ve_dim3){threads, 1, 1};
	if (ve_desc_finalize(&d) != 0)
		d.kind = VE_OP_NONE; /* makes the submit fail loudly */
	return d;
}

static struct ve_desc memcpy_desc(uint64_t bytes)
{
	struct ve_desc d;
	memset(&d, 0, sizeof(d));
	d.kind = VE_OP_MEMCPY;
	d.u.cp.bytes = bytes;
	d.u.cp.dst = 0x2000;
	d.u.cp.src = 0x3000;
	return d;
}

static struct ve_sim_config config(void)
{
	struct ve_sim_config c;
	ve_sim_config_default(&c);
	return c;
}

static struct ve_backend *make(const struct ve_sim_config *c)
{
	struct ve_backend *b = NULL;
	if (ve_sim_create(c, &b) != 0)
		return NULL;
	return b;
}

/* Runs the sim dry; returns the completions in poll order. Every successful
 * advance completes something, so a sim that stops doing so fails here
 * instead of hanging the test. */
static int drain(struct ve_backend *b, struct ve_completion *out, int max)
{
	int n = 0;
	for (int iter = 0;; iter++) {
		if (iter > 4 * max + 16)
			return -ETIMEDOUT;
		int k = b->ops->poll(b, out + n, max - n);
		if (k < 0)
			return k;
		n += k;
		if (n >= max)
			return n;
		if (ve_sim_advance(b, NULL) == -ENODATA) {
			k = b->ops->poll(b, out + n, max - n);
			return k < 0 ? k : n + k;
		}
	}
}

/* Kernel k on lane 0 of the whole H200 (cookie 1), the same kernel on lane
 * 1 (cookie 2) 10 us later, both run to the end: the backend, with their
 * completions in c (at least 4), the first one's first. */
static struct ve_backend *staggered_pair(const struct ve_sim_config *cfg, const struct ve_desc *k,
					 struct ve_completion *c)
{
	struct ve_backend *b = make(cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), k, 1), 0);
	ve_sim_advance_to(b, 10000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].cookie, 1);
	return b;
}

static const struct ve_completion *by_cookie(const struct ve_completion *c, int n, uint64_t ck)
{
	for (int i = 0; i < n; i++)
		if (c[i].cookie == ck)
			return &c[i];
	return NULL;
}

/* ---- event hook recorder and SM-overlap checker ---- */

struct rec {
	int n;
	struct ve_sim_event ev[256];
	/* running ops, for the overlap check */
	int nrun;
	struct ve_sim_event run[64];
	int overlaps;
	int max_running;
};

static void rec_hook(void *arg, const struct ve_sim_event *ev)
{
	struct rec *r = arg;
	if (r->n < (int)VE_ARRAY_SIZE(r->ev))
		r->ev[r->n++] = *ev;
	if (ev->kind == VE_SIM_EV_START) {
		for (int i = 0; i < r->nrun; i++)
			for (int w = 0; w < VE_SIM_SM_WORDS; w++)
				if (r->run[i].sms[w] & ev->sms[w]) {
					r->overlaps++;
					break;
				}
		if (r->nrun < (int)VE_ARRAY_SIZE(r->run))
			r->run[r->nrun++] = *ev;
		if (r->nrun > r->max_running)
			r->max_running = r->nrun;
	} else {
		for (int i = 0; i < r->nrun; i++)
			if (r->run[i].seq == ev->seq) {
				r->run[i] = r->run[--r->nrun];
				break;
			}
	}
}

/* ---- tests ---- */

VE_TEST(defaults_and_info)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	VE_CHECK(ve_sim_is_sim(b));
	struct ve_gpu_info gi;
	VE_CHECK_EQ(b->ops->info(b, &gi), 0);
	VE_CHECK_EQ(gi.sm_count, 132);
	VE_CHECK_EQ(gi.nleaves, 16);
	VE_CHECK_EQ(gi.min_partition_sms, 8);
	VE_CHECK_EQ(gi.max_threads_per_sm, 2048);
	VE_CHECK_EQ(gi.max_blocks_per_sm, 32);
	for (int i = 0; i < 15; i++)
		VE_CHECK_EQ(gi.leaf_sms[i], 8);
	VE_CHECK_EQ(gi.leaf_sms[15], 12);
	VE_CHECK(strlen(gi.name) > 0);
	VE_CHECK_EQ(b->ops->version, VE_BACKEND_OPS_VERSION);
	VE_CHECK_EQ(b->ops->now(b), 0);

	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 1ull << 15, 1), 0);
	uint64_t sms[VE_SIM_SM_WORDS];
	uint32_t n = 0;
	VE_CHECK_EQ(ve_sim_entry_sms(b, 0, sms, &n), 0);
	VE_CHECK_EQ(n, 132);
	VE_CHECK(sms[0] == ~0ull && sms[1] == ~0ull && sms[2] == 0xfull && sms[3] == 0);
	VE_CHECK_EQ(ve_sim_entry_sms(b, 1, sms, &n), 0);
	VE_CHECK_EQ(n, 12);
	VE_CHECK(sms[0] == 0 && sms[1] == (0xffull << 56) && sms[2] == 0xfull); /* SMs 120..131 */
	VE_CHECK_EQ(ve_sim_entry_sms(b, 2, sms, &n), -ENOENT);
	b->ops->destroy(b);

	uint32_t leaves[VE_MAX_LEAVES];
	VE_CHECK_EQ(ve_sim_default_split(132, 8, leaves), 16);
	VE_CHECK_EQ(leaves[15], 12);
	VE_CHECK_EQ(ve_sim_default_split(128, 8, leaves), 16);
	VE_CHECK_EQ(leaves[15], 8);
}

VE_TEST(fifo_per_lane)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	struct ve_desc d[5];
	for (int i = 0; i < 5; i++) {
		d[i] = kernel(1000u * (uint32_t)(5 - i), 256);
		VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d[i], (uint64_t)i), 0);
	}
	VE_CHECK_EQ(ve_sim_outstanding(b), 5);
	struct ve_completion c[8];
	VE_CHECK_EQ(drain(b, c, 8), 5);
	for (int i = 0; i < 5; i++) {
		uint64_t dur;
		VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &d[i], &dur, NULL), 0);
		VE_CHECK_EQ(c[i].cookie, i); /* FIFO even though later ops are shorter */
		VE_CHECK_EQ(c[i].status, 0);
		VE_CHECK_EQ(c[i].lane, VE_LANE(0, 0));
		VE_CHECK_EQ(c[i].t_submit_ns, 0);
		VE_CHECK_EQ(c[i].t_start_ns, i ? c[i - 1].t_end_ns : 0);
		VE_CHECK_EQ(c[i].t_end_ns - c[i].t_start_ns, dur);
	}
	VE_CHECK_EQ(ve_sim_outstanding(b), 0);
	b->ops->destroy(b);
}

VE_TEST(disjoint_entries_run_concurrently)
{
	struct ve_sim_config cfg = config();
	cfg.nleaves = 2;
	cfg.leaf_sms[0] = cfg.leaf_sms[1] = 66;
	struct rec r;
	memset(&r, 0, sizeof(r));
	cfg.on_event = rec_hook;
	cfg.on_event_arg = &r;
	struct ve_desc k = kernel(66 * 8 * 3, 256); /* 3 waves on 66 SMs */
	struct ve_completion c[4];

	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(drain(b, c, 4), 1);
	uint64_t alone = c[0].t_end_ns;
	VE_CHECK_EQ(alone, 3 * 10000 + 2000);
	b->ops->destroy(b);

	memset(&r, 0, sizeof(r));
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns, alone);
	VE_CHECK_EQ(c[1].t_end_ns, alone);
	VE_CHECK_EQ(r.overlaps, 0);
	VE_CHECK_EQ(r.max_running, 2);
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_EQ(st.peak_running_kernels, 2);
	VE_CHECK(st.sm_busy_ns == 132.0 * (double)alone);
	b->ops->destroy(b);
}

VE_TEST(waves)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 1, 1), 0);	/* leaf 0: 8 SMs */
	VE_CHECK_EQ(b->ops->entry_create(b, 2, 0xffull, 1), 0); /* 64 SMs */
	/* 256 threads: 2048 / 256 = 8 resident blocks per SM. */
	struct ve_desc k = kernel(132 * 8 * 2, 256);
	uint64_t t;
	uint32_t dem;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &k, &t, &dem), 0);
	VE_CHECK_EQ(dem, 132);
	VE_CHECK_EQ(t, 2 * 10000 + 2000);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(1, 0), &k, &t, &dem), 0);
	VE_CHECK_EQ(dem, 8);
	VE_CHECK_EQ(t, 33 * 10000 + 2000); /* ceil(2112 / 64) */
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(2, 0), &k, &t, NULL), 0);
	VE_CHECK_EQ(t, 5 * 10000 + 2000); /* ceil(2112 / 512) */
	struct ve_desc k1 = kernel(132 * 8 * 2 + 1, 256);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &k1, &t, NULL), 0);
	VE_CHECK_EQ(t, 3 * 10000 + 2000); /* one block more: a third wave */
	struct ve_desc small = kernel(4, 256);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &small, &t, &dem), 0);
	VE_CHECK_EQ(dem, 1);
	VE_CHECK_EQ(t, 12000);
	/* Occupancy: the descriptor's own value, then threads, then shared memory. */
	struct ve_desc occ = k;
	occ.u.k.blocks_per_sm = 2;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &occ, &t, NULL), 0);
	VE_CHECK_EQ(t, 8 * 10000 + 2000);
	struct ve_desc big = kernel(132 * 8 * 2, 1024); /* 2 per SM */
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &big, &t, NULL), 0);
	VE_CHECK_EQ(t, 8 * 10000 + 2000);
	struct ve_desc sm = kernel(132 * 8 * 2, 64);
	sm.u.k.smem = 100 * 1024; /* 228 KiB / (100 + 1) KiB = 2 per SM */
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &sm, &t, NULL), 0);
	VE_CHECK_EQ(t, 8 * 10000 + 2000);

	/* The run takes what predict says. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 7), 0);
	struct ve_completion c[2];
	VE_CHECK_EQ(drain(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 33 * 10000 + 2000);
	b->ops->destroy(b);
}

struct floor_model {
	uint64_t key;
	int calls;
};

static int floor_model(void *arg, const struct ve_desc *d, struct ve_sim_kernel_params *p)
{
	struct floor_model *fm = arg;
	fm->calls++;
	if (d->key != fm->key)
		return -ENOENT;
	p->t_wave_ns = 10000;
	p->t_launch_ns = 0;
	p->t_floor_ns = 50000;
	return 0;
}

VE_TEST(floor_stops_scaling)
{
	struct ve_sim_config cfg = config();
	struct ve_desc k = kernel(132 * 8 * 2, 256);
	struct ve_desc other = kernel(132 * 8 * 2, 128);
	struct floor_model fm = {k.key, 0};
	cfg.kernel_model = floor_model;
	cfg.kernel_model_arg = &fm;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 0xffull, 1), 0); /* 64 SMs */
	VE_CHECK_EQ(b->ops->entry_create(b, 2, 0xfull, 1), 0);	/* 32 SMs */
	VE_CHECK_EQ(b->ops->entry_create(b, 3, 1, 1), 0);	/* 8 SMs */
	uint64_t t132, t64, t32, t8;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &k, &t132, NULL), 0);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(1, 0), &k, &t64, NULL), 0);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(2, 0), &k, &t32, NULL), 0);
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(3, 0), &k, &t8, NULL), 0);
	VE_CHECK_EQ(t132, 50000); /* 2 waves would be 20 us: the floor holds */
	VE_CHECK_EQ(t64, 50000);  /* 5 waves: exactly the floor */
	VE_CHECK_EQ(t32, 90000);  /* 9 waves: below the floor's width it scales again */
	VE_CHECK_EQ(t8, 330000);
	VE_CHECK(fm.calls >= 4);
	/* An unknown key falls back to the defaults. */
	uint64_t t;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &other, &t, NULL), 0);
	VE_CHECK_EQ(t, 1 * 10000 + 2000); /* 128 threads: 16 per SM, one wave */
	/* And the run agrees. Two at once on disjoint entries (64 and 68 SMs):
	 * both are memory-bound (waves <= floor), so they share the bandwidth
	 * and take as long as running back to back. */
	VE_CHECK_EQ(b->ops->entry_create(b, 4, 0xff00ull, 1), 0);
	struct ve_completion c[2];
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 1), 0);
	VE_CHECK_EQ(drain(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 50000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(4, 0), &k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 2), 2);
	VE_CHECK_EQ(c[0].t_end_ns - c[0].t_start_ns, 100000);
	VE_CHECK_EQ(c[1].t_end_ns - c[1].t_start_ns, 100000);
	b->ops->destroy(b);

	/* With private floors (the model before bandwidth was shared) each
	 * runs as if alone. */
	cfg.private_bandwidth = true;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 0xffull, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 4, 0xff00ull, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(4, 0), &k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 2), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 50000);
	VE_CHECK_EQ(c[1].t_end_ns, 50000);
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK(fabs(st.bw_busy_ns - 2 * 50000.0) < 1e-6); /* twice the bandwidth there is */
	b->ops->destroy(b);
}

/* Small kernels that fit side by side on one entry do not slow each other
 * (8 SMs each, one wave: 10 us), whatever the sharing model. */
static void small_kernels_side_by_side(const struct ve_sim_config *cfg)
{
	struct ve_completion c[4];
	struct ve_backend *b = make(cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	struct ve_desc s = kernel(8 * 8, 256);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &s, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), &s, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 10000);
	VE_CHECK_EQ(c[1].t_end_ns, 10000);
	b->ops->destroy(b);
}

VE_TEST(overlap_sharing_conserves_work)
{
	struct ve_sim_config cfg = config();
	cfg.kernel.t_launch_ns = 0;
	struct rec r;
	memset(&r, 0, sizeof(r));
	cfg.on_event = rec_hook;
	cfg.on_event_arg = &r;
	struct ve_desc k = kernel(132 * 8 * 2, 256); /* 2 waves: 20 us alone */
	struct ve_completion c[4];
	struct ve_sim_stats st1, st2;

	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(drain(b, c, 4), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 20000);
	VE_CHECK_EQ(ve_sim_stats(b, &st1), 0);
	b->ops->destroy(b);

	/* Two at once on two lanes of one entry: each gets half: exactly 2x. */
	memset(&r, 0, sizeof(r));
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), &k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 40000);
	VE_CHECK_EQ(c[1].t_end_ns, 40000);
	VE_CHECK_EQ(ve_sim_stats(b, &st2), 0);
	VE_CHECK(st2.sm_busy_ns == 2 * st1.sm_busy_ns);
	VE_CHECK(st2.sm_busy_ns == 132.0 * 40000);
	VE_CHECK_EQ(r.overlaps, 1); /* the hook sees the shared SMs */
	b->ops->destroy(b);

	/* Staggered: A alone for 10 us (half done), shared 20 us, B alone 10 us. */
	b = staggered_pair(&cfg, &k, c);
	VE_CHECK_EQ(c[0].t_end_ns, 30000);
	VE_CHECK_EQ(c[1].t_start_ns, 10000);
	VE_CHECK_EQ(c[1].t_end_ns, 40000);
	VE_CHECK_EQ(ve_sim_stats(b, &st2), 0);
	VE_CHECK(st2.sm_busy_ns == 2 * st1.sm_busy_ns);
	b->ops->destroy(b);

	/* Partial overlap: A on all 132 SMs, B on leaf 0 only. Leaf 0 carries a
	 * load of 2: A gets 124 + 8/2 = 128 SMs, B gets 4. */
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 1, 1), 0);
	struct ve_desc kb = kernel(8 * 8 * 10, 256); /* 10 waves on 8 SMs: 100 us */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &kb, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].cookie, 1);
	VE_CHECK_EQ(c[0].t_end_ns, 20625); /* 20000 * 132 / 128 */
	/* B: 20625 / 200000 of its work done while shared, the rest alone. */
	double b_end = 20625 + (1.0 - 20625.0 / 200000.0) * 100000.0;
	VE_CHECK_MSG(c[1].t_end_ns >= (uint64_t)b_end && c[1].t_end_ns <= (uint64_t)b_end + 1,
		     "B ended at %" PRIu64 ", model %.1f", c[1].t_end_ns, b_end);
	VE_CHECK_EQ(ve_sim_stats(b, &st2), 0);
	VE_CHECK_MSG(fabs(st2.sm_busy_ns - (132.0 * 20000 + 8.0 * 100000)) < 200, "busy %.1f",
		     st2.sm_busy_ns);
	b->ops->destroy(b);

	small_kernels_side_by_side(&cfg);

	/* With a launch cost: "about twice". */
	cfg = config();
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), &k, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	double ratio = (double)c[1].t_end_ns / 22000.0;
	VE_CHECK_MSG(ratio > 1.8 && ratio < 2.05, "ratio %.3f", ratio);
	b->ops->destroy(b);
}

/* ---- shared memory bandwidth ---- */

/* Kernels keyed by u.k.fn: wave time and floor (launch 0). */
struct bw_kernel {
	uint64_t fn;
	uint64_t wave, floor;
};

static const struct bw_kernel bw_kernels[] = {
    {1, 10000, 60000}, /* M: memory-bound (needs all the bandwidth) at <= 6 waves */
    {2, 10000, 20000}, /* C: 10 waves = 100 us, needs 0.2 */
    {3, 10000, 0},     /* C0: no memory traffic */
    {4, 10000, 10000}, /* X: 0.1 at 10 waves */
    {5, 10000, 50000}, /* Y: 0.5 */
    {6, 10000, 80000}, /* Z: 0.8 */
    {7, 10000, 30000}, /* W: 0.3 */
    {8, 10000, 40000}, /* V: 0.4 */
};

static int bw_model(void *arg, const struct ve_desc *d, struct ve_sim_kernel_params *p)
{
	(void)arg;
	for (size_t i = 0; i < VE_ARRAY_SIZE(bw_kernels); i++)
		if (d->u.k.fn == bw_kernels[i].fn) {
			p->t_wave_ns = bw_kernels[i].wave;
			p->t_launch_ns = 0;
			p->t_floor_ns = bw_kernels[i].floor;
			return 0;
		}
	return -ENOENT;
}

/* nleaves leaves of 'sms' SMs each; bps is 8 (256 threads). */
static struct ve_sim_config bw_config(uint32_t nleaves, uint32_t sms)
{
	struct ve_sim_config c = config();
	c.sm_count = nleaves * sms;
	c.nleaves = nleaves;
	for (uint32_t i = 0; i < nleaves; i++)
		c.leaf_sms[i] = sms;
	c.kernel_model = bw_model;
	return c;
}

/* 'waves' waves on 'sms' SMs. */
static struct ve_desc bw_kernel(uint64_t fn, uint32_t sms, uint32_t waves)
{
	struct ve_desc d = kernel(sms * 8 * waves, 256);
	d.u.k.fn = fn;
	return d;
}

static bool near(uint64_t t, double want)
{
	return fabs((double)t - want) <= 1.0;
}

/* Runs 'n' kernels one after another on lane 0 of a half; returns the ends. */
static int lone_run(bool private_bw, double jitter, uint64_t *ends, int n, double *bw_busy)
{
	struct ve_sim_config cfg = bw_config(2, 66);
	cfg.private_bandwidth = private_bw;
	cfg.jitter = jitter;
	cfg.seed = 99;
	struct ve_backend *b = make(&cfg);
	if (!b || b->ops->entry_create(b, 0, 1, 1) || b->ops->entry_create(b, 1, 3, 1))
		return -1;
	static struct ve_desc d[64];
	static struct ve_completion c[64];
	for (int i = 0; i < n; i++) {
		d[i] = bw_kernel(1 + (uint64_t)(i % 8), 66, 1 + (uint32_t)(i * 7) % 12);
		if (b->ops->submit(b, VE_LANE((uint32_t)i % 2, 0), &d[i], (uint64_t)i))
			return -1;
		/* One at a time: alone on the GPU. */
		if (drain(b, c + i, 1) != 1)
			return -1;
		ends[i] = c[i].t_end_ns - c[i].t_start_ns;
	}
	struct ve_sim_stats st;
	ve_sim_stats(b, &st);
	*bw_busy = st.bw_busy_ns;
	b->ops->destroy(b);
	return 0;
}

/* cfg.share_model FIFO: the kernel that started first takes the SMs it can
 * use, a later one what is left. Staggered on one entry (A at 0, B at 10
 * us, 20 us each alone): A ends at 20 us, B waits and ends at 40 us (under
 * FAIR: 30 and 40). A on every SM and B on leaf 0: B gets nothing until A
 * ends (20 us, A unslowed), then its 100 us alone. PRIORITY with B a latency
 * op: leaf 0 is B's first, A runs on the other 124 SMs. Small kernels side
 * by side: unchanged. */
VE_TEST(share_in_start_order_or_latency_first)
{
	struct ve_sim_config cfg = config();
	cfg.kernel.t_launch_ns = 0;
	cfg.share_model = VE_SIM_SHARE_FIFO;
	struct ve_desc k = kernel(132 * 8 * 2, 256); /* 2 waves: 20 us alone */
	struct ve_completion c[4];
	struct ve_backend *b = staggered_pair(&cfg, &k, c);
	VE_CHECK_EQ(c[0].t_end_ns, 20000);
	VE_CHECK_EQ(c[1].t_end_ns, 40000);
	b->ops->destroy(b);

	struct ve_desc kb = kernel(8 * 8 * 10, 256); /* 10 waves on 8 SMs: 100 us */
	for (int prio = 0; prio < 2; prio++) {
		cfg.share_model = prio ? VE_SIM_SHARE_PRIORITY : VE_SIM_SHARE_FIFO;
		kb.flags = prio ? VE_DESC_LATENCY : 0;
		b = make(&cfg);
		VE_CHECK(b);
		VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
		VE_CHECK_EQ(b->ops->entry_create(b, 1, 1, 1), 0);
		VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
		VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &kb, 2), 0);
		VE_CHECK_EQ(drain(b, c, 4), 2);
		uint64_t a_end = c[0].cookie == 1 ? c[0].t_end_ns : c[1].t_end_ns;
		uint64_t b_end = c[0].cookie == 2 ? c[0].t_end_ns : c[1].t_end_ns;
		if (!prio) {
			VE_CHECK_EQ(a_end, 20000);
			VE_CHECK_EQ(b_end, 120000);
		} else {
			/* A on 124 SMs: 20000 * 132 / 124 ns; B alone: 100 us. */
			VE_CHECK_MSG(a_end >= 21290 && a_end <= 21291, "A ended at %" PRIu64, a_end);
			VE_CHECK_EQ(b_end, 100000);
		}
		b->ops->destroy(b);
	}

	cfg.share_model = VE_SIM_SHARE_FIFO;
	small_kernels_side_by_side(&cfg);
}

VE_TEST(bandwidth_lone_kernel_unchanged)
{
	struct ve_sim_config cfg = bw_config(2, 66);
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 3, 1), 0);
	struct ve_desc m = bw_kernel(1, 66, 2), cc = bw_kernel(2, 66, 10);
	uint64_t t;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &m, &t, NULL), 0);
	VE_CHECK_EQ(t, 60000); /* 2 waves = 20 us < the floor */
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(1, 0), &m, &t, NULL), 0);
	VE_CHECK_EQ(t, 60000); /* 1 wave on 132 SMs: the floor still */
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &cc, &t, NULL), 0);
	VE_CHECK_EQ(t, 100000);
	struct ve_completion c[2];
	struct ve_sim_stats st;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 1), 0);
	VE_CHECK_EQ(drain(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 60000);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 60000) < 1e-6, "bw %.3f", st.bw_busy_ns);
	/* A compute-bound kernel uses its traffic's worth: 0.2 for 100 us. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &cc, 2), 0);
	VE_CHECK_EQ(drain(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_end_ns - c[0].t_start_ns, 100000);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 80000) < 1e-6, "bw %.3f", st.bw_busy_ns);
	b->ops->destroy(b);

	/* Every lone kernel takes exactly what it took with private floors,
	 * jitter or not; the bandwidth integral is the same too. */
	enum { N = 48 };
	static uint64_t e_sh[N], e_pr[N];
	double bw_sh, bw_pr;
	for (int j = 0; j < 2; j++) {
		double jit = j ? 0.1 : 0;
		VE_CHECK_EQ(lone_run(false, jit, e_sh, N, &bw_sh), 0);
		VE_CHECK_EQ(lone_run(true, jit, e_pr, N, &bw_pr), 0);
		VE_CHECK(memcmp(e_sh, e_pr, sizeof(e_sh)) == 0);
		VE_CHECK_MSG(fabs(bw_sh - bw_pr) < 1e-3, "bw %.3f vs %.3f", bw_sh, bw_pr);
	}
}

VE_TEST(bandwidth_two_memory_bound_serialize)
{
	struct ve_sim_config cfg = bw_config(2, 66);
	struct ve_desc m = bw_kernel(1, 66, 2); /* 60 us alone, on a half or on all */
	struct ve_completion c[4];
	struct ve_sim_stats st;

	/* Disjoint halves at once: each gets half the bandwidth, so both end
	 * when the two would have ended back to back. */
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 2, 3, 2), 0);
	uint64_t whole;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(2, 0), &m, &whole, NULL), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &m, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 2 * whole);
	VE_CHECK_EQ(c[1].t_end_ns, 2 * whole);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 120000) < 1e-6, "bw %.3f", st.bw_busy_ns);
	VE_CHECK(st.sm_busy_ns == 132.0 * 120000); /* SMs stay resident while they wait */

	/* Staggered: A alone 30 us (half done), both at half speed 60 us, then
	 * B alone for its last 30 us: still 120 us of traffic in 120 us. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 3), 0);
	uint64_t t0 = ve_sim_now(b);
	ve_sim_advance_to(b, t0 + 30000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &m, 4), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].cookie, 3);
	VE_CHECK_EQ(c[0].t_end_ns - t0, 90000);
	VE_CHECK_EQ(c[1].t_end_ns - t0, 120000);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 240000) < 1e-6, "bw %.3f", st.bw_busy_ns);
	VE_CHECK(st.bw_busy_ns <= (double)st.now_ns);

	/* Two lanes of one entry: SM sharing (33 us compute at 66 SMs' worth)
	 * and bandwidth sharing together; the bandwidth binds. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &m, 5), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 1), &m, 6), 0);
	t0 = ve_sim_now(b);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns - t0, 120000);
	VE_CHECK_EQ(c[1].t_end_ns - t0, 120000);
	b->ops->destroy(b);

	/* private_bandwidth: the old model, each as if alone. */
	cfg.private_bandwidth = true;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 2, 3, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &m, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 60000);
	VE_CHECK_EQ(c[1].t_end_ns, 60000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &m, 5), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 1), &m, 6), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns - c[0].t_start_ns, 60000);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK(st.bw_busy_ns > 1.99 * (double)st.now_ns); /* overcommitted 2x */
	b->ops->destroy(b);
}

VE_TEST(bandwidth_compute_and_memory_overlap)
{
	struct ve_sim_config cfg = bw_config(2, 66);
	struct ve_desc m = bw_kernel(1, 66, 2), c0 = bw_kernel(3, 66, 10),
		       cc = bw_kernel(2, 66, 10);
	struct ve_completion c[4];
	struct ve_sim_stats st;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);

	/* No traffic on the compute side: both run exactly as alone on their
	 * halves, which is what colocation really gains. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &c0, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &m, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(by_cookie(c, 2, 1)->t_end_ns, 100000);
	VE_CHECK_EQ(by_cookie(c, 2, 2)->t_end_ns, 60000);

	/* The compute side needs 0.2, less than an even split: it gets that and
	 * keeps its time; the memory-bound side gets the other 0.8 while they
	 * overlap: 60 us / 0.8 = 75 us. */
	uint64_t t0 = ve_sim_now(b);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &cc, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &m, 4), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(by_cookie(c, 2, 3)->t_end_ns - t0, 100000);
	uint64_t tm = by_cookie(c, 2, 4)->t_end_ns - t0;
	VE_CHECK_MSG(near(tm, 75000), "memory-bound kernel took %" PRIu64, tm);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - (60000 + 20000 + 60000)) < 0.1, "bw %.3f", st.bw_busy_ns);
	b->ops->destroy(b);
}

VE_TEST(bandwidth_max_min_fairness)
{
	struct ve_sim_config cfg = bw_config(4, 33);
	/* 10 waves on 33 SMs: 100 us of compute each, needs 0.1, 0.5, 0.8. */
	struct ve_desc x = bw_kernel(4, 33, 10), y = bw_kernel(5, 33, 10), z = bw_kernel(6, 33, 10),
		       w = bw_kernel(7, 33, 10), c0 = bw_kernel(3, 33, 10);
	struct ve_completion c[8];
	struct ve_sim_stats st;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, i, 1ull << i, 1), 0);

	/* 1.4 asked: X gets its 0.1, Y and Z split the 0.9 left: 0.45 each. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &x, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &y, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &z, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &c0, 4), 0); /* takes none */
	ve_sim_advance_to(b, 50000);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 50000) < 1e-6, "bw %.3f", st.bw_busy_ns);
	VE_CHECK_EQ(drain(b, c, 8), 4);
	/* X and C0 keep their alone time. */
	VE_CHECK_EQ(by_cookie(c, 4, 1)->t_end_ns, 100000);
	VE_CHECK_EQ(by_cookie(c, 4, 4)->t_end_ns, 100000);
	/* Y: 0.45 of 0.5 for 100 us (90% done), then its full 0.5 (Y and Z ask
	 * 1.3, and 0.5 is the even split): the last 10% in 10 us. */
	double y_end = 100000 + (1 - 100000 * 0.45 / 50000) * 100000;
	VE_CHECK_MSG(near(by_cookie(c, 4, 2)->t_end_ns, y_end), "Y ended at %" PRIu64 ", want %.1f",
		     by_cookie(c, 4, 2)->t_end_ns, y_end);
	/* Z: 0.45 for 100 us, 0.5 for 10 us, then all it needs (0.8). */
	double z_done = 100000 * 0.45 / 80000 + 10000 * 0.5 / 80000;
	double z_end = 110000 + (1 - z_done) * 100000;
	VE_CHECK_MSG(near(by_cookie(c, 4, 3)->t_end_ns, z_end), "Z ended at %" PRIu64 ", want %.1f",
		     by_cookie(c, 4, 3)->t_end_ns, z_end);
	VE_CHECK_MSG(near(by_cookie(c, 4, 3)->t_end_ns, 147500), "Z");
	/* Traffic is conserved: 10 + 50 + 80 us of it. */
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 140000) < 0.1, "bw %.3f", st.bw_busy_ns);
	VE_CHECK(st.bw_busy_ns <= (double)st.now_ns + 1e-6);
	b->ops->destroy(b);

	/* 0.1 + 0.3 + 0.5 fits: nobody slows down. */
	b = make(&cfg);
	VE_CHECK(b);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, i, 1ull << i, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &x, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &w, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &y, 3), 0);
	VE_CHECK_EQ(drain(b, c, 8), 3);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(c[i].t_end_ns, 100000);
	b->ops->destroy(b);

	/* Needs summing to exactly 1 (0.5 + 0.5, 0.2 + 0.8, 0.3 + 0.3 + 0.4,
	 * whose binary sum falls short of 1 by an ulp): all met, exact. */
	b = make(&cfg);
	VE_CHECK(b);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, i, 1ull << i, 1), 0);
	struct ve_desc m2 = bw_kernel(2, 33, 10);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &y, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &y, 2), 0);
	VE_CHECK_EQ(drain(b, c, 8), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 100000);
	VE_CHECK_EQ(c[1].t_end_ns, 100000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m2, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &z, 4), 0);
	VE_CHECK_EQ(drain(b, c, 8), 2);
	VE_CHECK_EQ(c[0].t_end_ns, 200000);
	VE_CHECK_EQ(c[1].t_end_ns, 200000);
	struct ve_desc v = bw_kernel(8, 33, 10);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &w, 5), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &w, 6), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &v, 7), 0);
	VE_CHECK_EQ(drain(b, c, 8), 3);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(c[i].t_end_ns, 300000);
	b->ops->destroy(b);
}

VE_TEST(bandwidth_copies)
{
	struct ve_sim_config cfg = bw_config(2, 66);
	struct ve_desc m = bw_kernel(1, 66, 2);
	struct ve_desc cp = memcpy_desc(1000000); /* 22 us on its engine */
	const uint32_t c0 = VE_LANE(VE_LANE_COPY_ENTRY, 0), c1 = VE_LANE(VE_LANE_COPY_ENTRY, 1);
	struct ve_completion c[4];
	struct ve_sim_stats st;
	uint64_t t;

	/* Default: copies take no bandwidth. */
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(by_cookie(c, 2, 1)->t_end_ns, 60000);
	VE_CHECK_EQ(by_cookie(c, 2, 2)->t_end_ns, 22000);
	b->ops->destroy(b);

	/* 100 bytes/ns: the copy's 1 MB is 10 us of the whole bandwidth, a need
	 * of 10/22; it is met, and the kernel gets the rest while they overlap:
	 * 12 us of its 60 us of traffic in the first 22 us, 48 us after. */
	cfg.mem_bytes_per_ns = 100;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 2), 0);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &cp, &t, NULL), 0);
	VE_CHECK_EQ(t, 22000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &m, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 2), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(by_cookie(c, 2, 2)->t_end_ns, 22000);
	VE_CHECK_MSG(near(by_cookie(c, 2, 1)->t_end_ns, 70000), "kernel ended at %" PRIu64,
		     by_cookie(c, 2, 1)->t_end_ns);
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_MSG(fabs(st.bw_busy_ns - 70000) < 0.1, "bw %.3f", st.bw_busy_ns);
	VE_CHECK_EQ(st.copy_busy_ns, 22000);
	/* Two copies (10/22 each) fit together: neither slows. */
	uint64_t t0 = ve_sim_now(b);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, c1, &cp, 4), 0);
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].t_end_ns - t0, 22000);
	VE_CHECK_EQ(c[1].t_end_ns - t0, 22000);
	/* Three do not (30/22): each gets a third and takes 30 us. */
	struct ve_desc k3 = memcpy_desc(1000000);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);
	t0 = ve_sim_now(b);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 5), 0);
	VE_CHECK_EQ(b->ops->submit(b, c1, &cp, 6), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k3, 7), 0); /* a copy on an entry lane */
	VE_CHECK_EQ(drain(b, c, 4), 3);
	for (int i = 0; i < 3; i++)
		VE_CHECK_MSG(near(c[i].t_end_ns - t0, 30000), "copy %d took %" PRIu64, i,
			     c[i].t_end_ns - t0);
	b->ops->destroy(b);

	/* A copy cannot beat its bytes at the whole bandwidth: at 20 bytes/ns
	 * 1 MB takes 50 us (a memset too); with private floors copies take none. */
	cfg.mem_bytes_per_ns = 20;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	struct ve_desc ms;
	memset(&ms, 0, sizeof(ms));
	ms.kind = VE_OP_MEMSET;
	ms.u.ms.width = 250000;
	ms.u.ms.height = 1;
	ms.u.ms.elem_size = 4;
	VE_CHECK_EQ(ve_sim_predict(b, c0, &cp, &t, NULL), 0);
	VE_CHECK_EQ(t, 50000);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &ms, &t, NULL), 0);
	VE_CHECK_EQ(t, 50000);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 1), 0);
	VE_CHECK_EQ(drain(b, c, 4), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 50000);
	b->ops->destroy(b);
	cfg.private_bandwidth = true;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &cp, &t, NULL), 0);
	VE_CHECK_EQ(t, 22000);
	b->ops->destroy(b);

	cfg = config();
	cfg.mem_bytes_per_ns = -1;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
}

static int hosts_seen;
static uint64_t host_t;
static int host_submit_rc;
static struct ve_backend *host_b;

static void host_fn(void *arg)
{
	hosts_seen++;
	host_t = ve_sim_now(host_b);
	struct ve_desc *d = arg;
	host_submit_rc = host_b->ops->submit(host_b, VE_LANE(0, 0), d, 99);
}

VE_TEST(completion_order)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, i, 1ull << i, 1), 0);
	struct ve_desc shortk = kernel(64, 256), longk = kernel(64 * 5, 256),
		       midk = kernel(64 * 3, 256);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &shortk, 30), 0); /* seq 0 */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &longk, 0), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &midk, 10), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(2, 0), &shortk, 20), 0); /* seq 3, ties seq 0 */
	ve_sim_advance_to(b, 1000000);
	struct ve_completion c[8];
	int n = 0;
	for (int k; (k = b->ops->poll(b, c + n, 1)) > 0;)
		n += k;
	VE_CHECK_EQ(n, 4);
	VE_CHECK_EQ(c[0].cookie, 30);
	VE_CHECK_EQ(c[1].cookie, 20);
	VE_CHECK_EQ(c[0].t_end_ns, c[1].t_end_ns);
	VE_CHECK_EQ(c[2].cookie, 10);
	VE_CHECK_EQ(c[3].cookie, 0);
	for (int i = 1; i < n; i++)
		VE_CHECK(c[i].t_end_ns >= c[i - 1].t_end_ns);
	b->ops->destroy(b);

	/* A zero-length op that starts because of an end at t ends at t too and
	 * takes its place by submission order among the ends at t. */
	b = make(NULL);
	VE_CHECK(b);
	host_b = b;
	hosts_seen = 0;
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 1, 2, 1), 0);
	struct ve_desc h;
	memset(&h, 0, sizeof(h));
	h.kind = VE_OP_HOST_FN;
	h.u.host.fn = host_fn;
	h.u.host.arg = &shortk;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &shortk, 1), 0); /* seq 0, ends 12 us */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &h, 2), 0);      /* seq 1, 0 ns */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &shortk, 3), 0); /* seq 2, ends 12 us */
	uint64_t t = 0;
	VE_CHECK_EQ(ve_sim_advance(b, &t), 0);
	VE_CHECK_EQ(t, 12000);
	VE_CHECK_EQ(b->ops->poll(b, c, 8), 3);
	VE_CHECK_EQ(c[0].cookie, 1);
	VE_CHECK_EQ(c[1].cookie, 2);
	VE_CHECK_EQ(c[2].cookie, 3);
	VE_CHECK_EQ(c[1].t_start_ns, 12000);
	VE_CHECK_EQ(c[1].t_end_ns, 12000);
	/* The host function ran at its start time; the sim refused re-entry. */
	VE_CHECK_EQ(hosts_seen, 1);
	VE_CHECK_EQ(host_t, 12000);
	VE_CHECK_EQ(host_submit_rc, -EDEADLK);
	VE_CHECK_EQ(ve_sim_outstanding(b), 0);
	b->ops->destroy(b);
}

/* ---- determinism: a seeded random workload ---- */

struct trace {
	uint64_t h;
	uint64_t nev;
};

static void trace_hook(void *arg, const struct ve_sim_event *ev)
{
	struct trace *t = arg;
	uint64_t v[] = {ev->kind,
			ev->lane,
			ev->cookie,
			ev->seq,
			ev->t_ns,
			(uint64_t)ev->status,
			ev->sms[0] ^ ev->sms[1] ^ ev->sms[2]};
	for (size_t i = 0; i < VE_ARRAY_SIZE(v); i++)
		t->h = ve__hash_combine(t->h, v[i]);
	t->nev++;
}

/* Floors for a third of random_run's kernels: memory-bound when large. */
static int random_floor_model(void *arg, const struct ve_desc *d, struct ve_sim_kernel_params *p)
{
	(void)arg;
	uint64_t blocks = ve_desc_blocks(d);
	if (blocks % 3)
		return -ENOENT;
	p->t_floor_ns = 15 * blocks;
	return 0;
}

enum { RUN_PLAIN, RUN_SHARED_BW, RUN_PRIVATE_BW };

static int random_run(uint64_t seed, int mode, struct trace *t, uint64_t *n_done, uint64_t *t_end,
		      struct ve_sim_stats *st)
{
	struct ve_sim_config cfg = config();
	if (mode != RUN_PLAIN) {
		cfg.kernel_model = random_floor_model;
		cfg.mem_bytes_per_ns = 200;
		cfg.private_bandwidth = mode == RUN_PRIVATE_BW;
	}
	cfg.seed = seed;
	cfg.jitter = 0.1;
	cfg.submit_latency_ns = 700;
	cfg.fail_submit_prob = 0.05;
	cfg.fail_exec_prob = 0.05;
	cfg.on_event = trace_hook;
	cfg.on_event_arg = t;
	cfg.capacity = 512;
	memset(t, 0, sizeof(*t));
	struct ve_backend *b = make(&cfg);
	if (!b)
		return -1;
	/* A pool-like set: whole, halves, quarters, leaves; 2 lanes each. */
	uint64_t masks[16 + 8];
	uint32_t ne = 0;
	masks[ne++] = WHOLE_H200;
	masks[ne++] = 0xffull;
	masks[ne++] = 0xff00ull;
	for (int i = 0; i < 4; i++)
		masks[ne++] = 0xfull << (4 * i);
	for (int i = 0; i < 16; i++)
		masks[ne++] = 1ull << i;
	for (uint32_t i = 0; i < ne; i++)
		if (b->ops->entry_create(b, i, masks[i], 2))
			return -1;
	if (b->ops->copy_lanes_create(b, 2))
		return -1;
	static struct ve_desc descs[64];
	for (int i = 0; i < 48; i++)
		descs[i] = kernel(1 + (uint32_t)(i * 97) % 4000, 64u << (i % 4));
	for (int i = 48; i < 64; i++)
		descs[i] = memcpy_desc(4096ull << (i % 12));
	uint64_t rs = seed;
	uint64_t cookie = 0;
	*n_done = 0;
	struct ve_completion c[64];
	for (int step = 0; step < 3000; step++) {
		uint32_t r = ve__rand_below(&rs, 10);
		if (r < 6) {
			uint32_t di = ve__rand_below(&rs, 64);
			uint32_t e = di < 48 ? ve__rand_below(&rs, ne) : VE_LANE_COPY_ENTRY;
			uint32_t lane = VE_LANE(e, ve__rand_below(&rs, 2));
			int rc = b->ops->submit(b, lane, &descs[di], cookie);
			if (rc == 0)
				cookie++;
			else if (rc != -EIO && rc != -EAGAIN)
				return -1;
		} else if (r < 8) {
			ve_sim_advance(b, NULL);
		} else {
			ve_sim_advance_to(b, ve_sim_now(b) + ve__rand_below(&rs, 20000));
		}
		int k = b->ops->poll(b, c, 64);
		for (int i = 0; i < k; i++) {
			t->h = ve__hash_combine(t->h, c[i].cookie ^ (c[i].t_end_ns << 20));
			t->h = ve__hash_combine(t->h, (uint64_t)c[i].status);
		}
		*n_done += (uint64_t)k;
	}
	int k;
	while ((k = drain(b, c, 64)) > 0)
		*n_done += (uint64_t)k;
	if ((uint64_t)cookie != *n_done)
		return -2; /* an accepted op was lost or duplicated */
	*t_end = ve_sim_now(b);
	ve_sim_stats(b, st);
	b->ops->destroy(b);
	return 0;
}

VE_TEST(determinism)
{
	uint64_t seed = ve_test_seed(0x5eedull);
	printf("# determinism seed %" PRIu64 " (replay with VE_SEED=%" PRIu64 ")\n", seed, seed);
	struct trace t1, t2, t3, tp;
	uint64_t n1, n2, n3, e1, e2, e3, np, ep;
	struct ve_sim_stats s1, s2, s3, sp;
	for (int mode = RUN_PLAIN; mode <= RUN_SHARED_BW; mode++) {
		VE_CHECK_EQ(random_run(seed, mode, &t1, &n1, &e1, &s1), 0);
		VE_CHECK_EQ(random_run(seed, mode, &t2, &n2, &e2, &s2), 0);
		VE_CHECK(n1 > 500);
		VE_CHECK_EQ(n1, n2);
		VE_CHECK_EQ(t1.nev, t2.nev);
		VE_CHECK_EQ(e1, e2);
		VE_CHECK(t1.h == t2.h);
		VE_CHECK(s1.bw_busy_ns == s2.bw_busy_ns);
		VE_CHECK(s1.sm_busy_ns == s2.sm_busy_ns);
		/* A different seed really gives a different run (the check can fail). */
		VE_CHECK_EQ(random_run(seed + 1, mode, &t3, &n3, &e3, &s3), 0);
		VE_CHECK(t3.h != t1.h);
	}
	/* With floors the bandwidth is contended at times: the shared run never
	 * hands out more than there is, and differs from private floors. */
	VE_CHECK_EQ(random_run(seed, RUN_PRIVATE_BW, &tp, &np, &ep, &sp), 0);
	printf("# bandwidth busy: shared %.1f%%, private %.1f%% of the run\n",
	       100.0 * s1.bw_busy_ns / (double)e1, 100.0 * sp.bw_busy_ns / (double)ep);
	VE_CHECK(s1.bw_busy_ns > 0);
	VE_CHECK(s1.bw_busy_ns <= (double)e1 * (1 + 1e-9));
	VE_CHECK(tp.h != t1.h);
}

static int jitter_durations(uint64_t seed, uint64_t *dur, int n)
{
	struct ve_sim_config cfg = config();
	cfg.seed = seed;
	cfg.jitter = 0.1;
	struct ve_backend *b = make(&cfg);
	if (!b || b->ops->entry_create(b, 0, 1, 1) || b->ops->copy_lanes_create(b, 1))
		return -1;
	static struct ve_completion c[256];
	struct ve_desc k = kernel(64 * 3, 256), cp = memcpy_desc(1000000);
	for (int i = 0; i < n; i++) {
		uint32_t lane = i % 2 ? VE_LANE(VE_LANE_COPY_ENTRY, 0) : VE_LANE(0, 0);
		if (b->ops->submit(b, lane, i % 2 ? &cp : &k, (uint64_t)i))
			return -1;
	}
	if (drain(b, c, 256) != n)
		return -1;
	for (int i = 0; i < n; i++) {
		const struct ve_completion *x = by_cookie(c, n, (uint64_t)i);
		if (!x)
			return -1;
		dur[i] = x->t_end_ns - x->t_start_ns;
	}
	b->ops->destroy(b);
	return 0;
}

VE_TEST(jitter)
{
	uint64_t seed = ve_test_seed(42);
	printf("# jitter seed %" PRIu64 "\n", seed);
	enum { N = 200 };
	static uint64_t d1[N], d2[N], d3[N];
	VE_CHECK_EQ(jitter_durations(seed, d1, N), 0);
	VE_CHECK_EQ(jitter_durations(seed, d2, N), 0);
	VE_CHECK_EQ(jitter_durations(seed + 1, d3, N), 0);
	VE_CHECK(memcmp(d1, d2, sizeof(d1)) == 0);
	VE_CHECK(memcmp(d1, d3, sizeof(d1)) != 0);
	double mean[2] = {0, 0};
	int distinct = 0;
	for (int i = 0; i < N; i++) {
		double base = i % 2 ? 22000.0 : 32000.0; /* copy: 2 us + 20 us; kernel: 3 waves */
		VE_CHECK_MSG(d1[i] >= 0.9 * base - 1 && d1[i] <= 1.1 * base + 1,
			     "op %d took %" PRIu64, i, d1[i]);
		mean[i % 2] += (double)d1[i] / base / (N / 2);
		distinct += i >= 2 && d1[i] != d1[i - 2];
	}
	VE_CHECK(distinct > N / 2);
	VE_CHECK_MSG(fabs(mean[0] - 1) < 0.03 && fabs(mean[1] - 1) < 0.03, "means %.4f %.4f",
		     mean[0], mean[1]);
}

VE_TEST(submit_fault_leaves_nothing_enqueued)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	struct ve_desc k = kernel(1000, 256);
	VE_CHECK_EQ(ve_sim_fail_submit(b, 2, 0), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 2), -EIO);
	VE_CHECK_EQ(ve_sim_outstanding(b), 1);
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_EQ(st.submit_faults, 1);
	VE_CHECK_EQ(st.submitted[VE_OP_KERNEL], 1);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 2), 0); /* the retry */
	struct ve_completion c[4];
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(c[0].cookie, 1);
	VE_CHECK_EQ(c[1].cookie, 2);
	VE_CHECK_EQ(ve_sim_fail_submit(b, 1, -ENOSPC), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 3), -ENOSPC);
	VE_CHECK_EQ(ve_sim_outstanding(b), 0);
	VE_CHECK_EQ(ve_sim_advance(b, NULL), -ENODATA);
	b->ops->destroy(b);

	/* Probabilistic: every op is retried until accepted, each completes once. */
	struct ve_sim_config cfg = config();
	cfg.fail_submit_prob = 0.3;
	cfg.seed = ve_test_seed(7);
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 4), 0);
	int faults = 0;
	for (uint64_t i = 0; i < 200; i++) {
		int rc, tries = 0;
		while ((rc = b->ops->submit(b, VE_LANE(0, i % 4), &k, i)) == -EIO && tries++ < 100)
			faults++;
		VE_CHECK_EQ(rc, 0);
	}
	VE_CHECK(faults > 20 && faults < 200);
	static struct ve_completion cc[256];
	VE_CHECK_EQ(drain(b, cc, 256), 200);
	static bool seen[200];
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 200; i++) {
		VE_CHECK(cc[i].cookie < 200 && !seen[cc[i].cookie]);
		seen[cc[i].cookie] = true;
	}
	b->ops->destroy(b);

	/* The Nth submit from the configuration. */
	cfg = config();
	cfg.fail_submit_nth = 1;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), -EIO);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	b->ops->destroy(b);
}

static int call_fn(uint64_t lane, const void *payload, uint32_t len)
{
	(void)payload;
	(void)len;
	return lane == VE_LANE(VE_LANE_COPY_ENTRY, 0) ? -EIO : 0;
}

VE_TEST(exec_fault_status)
{
	struct ve_sim_config cfg = config();
	cfg.invoke_calls = true;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	struct ve_desc k = kernel(1000, 256);
	VE_CHECK_EQ(ve_sim_fail_exec(b, 2, 0), 0);
	for (uint64_t i = 0; i < 3; i++)
		VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, i), 0);
	struct ve_desc call;
	memset(&call, 0, sizeof(call));
	call.kind = VE_OP_CALL;
	call.u.call.fn = call_fn;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(VE_LANE_COPY_ENTRY, 0), &call, 10), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &call, 11), 0);
	struct ve_completion c[8];
	VE_CHECK_EQ(drain(b, c, 8), 5);
	VE_CHECK_EQ(by_cookie(c, 5, 0)->status, 0);
	VE_CHECK_EQ(by_cookie(c, 5, 1)->status, -EFAULT);
	VE_CHECK_EQ(by_cookie(c, 5, 2)->status, 0);
	VE_CHECK_EQ(by_cookie(c, 5, 10)->status, -EIO);
	VE_CHECK_EQ(by_cookie(c, 5, 11)->status, 0);
	VE_CHECK_EQ(by_cookie(c, 5, 10)->t_end_ns, 1000); /* calls take 1 us */
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_EQ(st.exec_faults, 2);
	b->ops->destroy(b);

	cfg = config();
	cfg.fail_exec_prob = 1.0;
	cfg.fail_exec_status = -EILSEQ;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(drain(b, c, 8), 1);
	VE_CHECK_EQ(c[0].status, -EILSEQ);
	b->ops->destroy(b);
}

VE_TEST(event_hook_reports_sm_sets)
{
	struct ve_sim_config cfg = config();
	static struct rec r;
	memset(&r, 0, sizeof(r));
	cfg.on_event = rec_hook;
	cfg.on_event_arg = &r;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 3, 1ull << 3, 1), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	struct ve_desc k = kernel(1000, 256), cp = memcpy_desc(1 << 20);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(3, 0), &k, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(VE_LANE_COPY_ENTRY, 0), &cp, 9), 0);
	struct ve_completion c[4];
	VE_CHECK_EQ(drain(b, c, 4), 2);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 0), 0);
	VE_CHECK_EQ(drain(b, c + 2, 2), 1);
	VE_CHECK_EQ(r.n, 6);
	int starts = 0, ends = 0;
	for (int i = 0; i < r.n; i++) {
		const struct ve_sim_event *ev = &r.ev[i];
		if (ev->kind == VE_SIM_EV_START) {
			starts++;
			VE_CHECK_EQ(ev->t_ns, ev->t_start_ns);
		} else {
			ends++;
			const struct ve_completion *cc = by_cookie(c, 3, ev->cookie);
			VE_CHECK(cc);
			VE_CHECK_EQ(ev->t_ns, cc->t_end_ns);
			VE_CHECK_EQ(ev->t_start_ns, cc->t_start_ns);
		}
		if (ev->cookie == 3) {
			VE_CHECK(ev->desc == &k);
			VE_CHECK_EQ(ev->entry, 3);
			VE_CHECK_EQ(ev->nsms, 8);
			VE_CHECK_EQ(ev->leaves, 1ull << 3);
			VE_CHECK(ev->sms[0] == 0xff000000ull && !ev->sms[1] && !ev->sms[2]);
			VE_CHECK_EQ(ev->demand, 8);
		} else if (ev->cookie == 9) {
			VE_CHECK(ev->desc == &cp);
			VE_CHECK_EQ(ev->entry, VE_LANE_COPY_ENTRY);
			VE_CHECK_EQ(ev->nsms, 0);
			VE_CHECK_EQ(ev->demand, 0);
			VE_CHECK(!ev->sms[0] && !ev->sms[1] && !ev->sms[2] && !ev->sms[3]);
		} else {
			VE_CHECK_EQ(ev->nsms, 132);
			VE_CHECK(ev->sms[0] == ~0ull && ev->sms[1] == ~0ull && ev->sms[2] == 0xf);
			VE_CHECK_EQ(ev->leaves, WHOLE_H200);
			VE_CHECK_EQ(ev->demand, 125); /* ceil(1000 / 8) */
		}
	}
	VE_CHECK_EQ(starts, 3);
	VE_CHECK_EQ(ends, 3);
	VE_CHECK_EQ(r.overlaps, 0);
	b->ops->destroy(b);
}

static int op_model(void *arg, const struct ve_desc *d, uint32_t lane, uint64_t *dur)
{
	(void)arg;
	(void)lane;
	if (d->kind != VE_OP_MEMCPY || d->u.cp.dir != 7)
		return -ENOENT;
	*dur = 5;
	return 0;
}

VE_TEST(copy_lanes)
{
	struct ve_sim_config cfg = config();
	cfg.op_model = op_model;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 2), 0);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 2), -EEXIST);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	const uint32_t c0 = VE_LANE(VE_LANE_COPY_ENTRY, 0), c1 = VE_LANE(VE_LANE_COPY_ENTRY, 1);
	struct ve_desc cp = memcpy_desc(1000000); /* 2 us + 1 MB / 50 GB/s = 22 us */
	struct ve_desc ms;
	memset(&ms, 0, sizeof(ms));
	ms.kind = VE_OP_MEMSET;
	ms.u.ms.width = 250000;
	ms.u.ms.height = 1;
	ms.u.ms.elem_size = 4; /* 1 MB: 1 us + 1 us */
	struct ve_desc ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = VE_OP_EVENT_RECORD;
	ev.flags = VE_DESC_TIMED;
	struct ve_desc fast = memcpy_desc(1000000);
	fast.u.cp.dir = 7;
	uint64_t t;
	VE_CHECK_EQ(ve_sim_predict(b, c0, &cp, &t, NULL), 0);
	VE_CHECK_EQ(t, 22000);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &ms, &t, NULL), 0);
	VE_CHECK_EQ(t, 2000);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &ev, &t, NULL), 0);
	VE_CHECK_EQ(t, 1000);
	VE_CHECK_EQ(ve_sim_predict(b, c0, &fast, &t, NULL), 0);
	VE_CHECK_EQ(t, 5);

	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, c0, &cp, 2), 0);
	VE_CHECK_EQ(b->ops->submit(b, c1, &cp, 3), 0);
	VE_CHECK_EQ(b->ops->submit(b, c1, &ms, 4), 0);
	VE_CHECK_EQ(b->ops->submit(b, c1, &ev, 5), 0);
	/* A kernel and a copy on the same entry: the copy uses no SMs. */
	struct ve_desc k = kernel(132 * 8, 256);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 6), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 1), &cp, 7), 0);
	struct ve_completion c[8];
	VE_CHECK_EQ(drain(b, c, 8), 7);
	VE_CHECK_EQ(by_cookie(c, 7, 1)->t_end_ns, 22000);
	VE_CHECK_EQ(by_cookie(c, 7, 2)->t_end_ns, 44000); /* FIFO on one copy engine */
	VE_CHECK_EQ(by_cookie(c, 7, 3)->t_end_ns, 22000); /* its own engine */
	VE_CHECK_EQ(by_cookie(c, 7, 4)->t_end_ns, 24000);
	VE_CHECK_EQ(by_cookie(c, 7, 5)->t_end_ns, 25000);
	VE_CHECK_EQ(by_cookie(c, 7, 6)->t_end_ns, 12000);
	VE_CHECK_EQ(by_cookie(c, 7, 7)->t_end_ns, 22000);
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_EQ(st.copy_busy_ns, 22000 * 4 + 2000 + 1000);
	VE_CHECK(st.sm_busy_ns == 132.0 * 12000);
	VE_CHECK_EQ(st.finished[VE_OP_MEMCPY], 4);
	VE_CHECK_EQ(st.finished[VE_OP_MEMSET], 1);
	VE_CHECK_EQ(st.finished[VE_OP_EVENT_RECORD], 1);
	VE_CHECK_EQ(st.finished[VE_OP_KERNEL], 1);
	VE_CHECK_EQ(st.entry_busy_ns[0], 22000);
	VE_CHECK_EQ(st.entry_ops[0], 2);
	VE_CHECK_EQ(st.peak_running, 4);
	b->ops->destroy(b);
}

static struct ve_backend *dummy_destroyed;
static void dummy_destroy(struct ve_backend *b)
{
	dummy_destroyed = b;
}

VE_TEST(bad_input)
{
	struct ve_backend *b = make(NULL);
	VE_CHECK(b);
	struct ve_desc k = kernel(100, 256);
	/* Entries. */
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1ull << 16, 1), -EINVAL); /* no leaf 16 */
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 0, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 0), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 33), -EINVAL); /* default limit 32 */
	VE_CHECK_EQ(b->ops->entry_create(b, VE_SIM_MAX_ENTRIES, 1, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 1, 2), 0);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, 2, 2), -EEXIST);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 0), -EINVAL);
	/* Lanes. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(1, 0), &k, 1), -EINVAL); /* no entry 1 */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 2), &k, 1), -EINVAL); /* no stream 2 */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(VE_LANE_COPY_ENTRY, 0), &k, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->submit(b, 0xffffffffu, &k, 1), -EINVAL);
	VE_CHECK_EQ(b->ops->copy_lanes_create(b, 1), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(VE_LANE_COPY_ENTRY, 0), &k, 1), -EINVAL); /* no SMs */
	/* Descriptors. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), NULL, 1), -EINVAL);
	struct ve_desc d = k;
	d.kind = VE_OP_EVENT_WAIT; /* completed inside the vctx, never a backend's */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d, 1), -EINVAL);
	d.kind = VE_OP_KIND_MAX;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d, 1), -EINVAL);
	d = kernel(100, 4096); /* a block larger than an SM */
	d.kind = VE_OP_KERNEL;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d, 1), -EINVAL);
	d = kernel(8 * 8 + 1, 256);
	d.flags |= VE_DESC_COOPERATIVE; /* needs 9 SMs resident, the entry has 8 */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d, 1), -EINVAL);
	d = kernel(8 * 8, 256);
	d.flags |= VE_DESC_COOPERATIVE;
	VE_CHECK_EQ(ve_sim_predict(b, VE_LANE(0, 0), &d, NULL, NULL), 0);
	d = k;
	d.u.k.min_sms = 9;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &d, 1), -EINVAL);
	struct ve_desc h;
	memset(&h, 0, sizeof(h));
	h.kind = VE_OP_HOST_FN;
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &h, 1), -EINVAL); /* no fn */
	VE_CHECK_EQ(ve_sim_outstanding(b), 0);
	VE_CHECK_EQ(b->ops->poll(b, NULL, 4), -EINVAL);
	VE_CHECK_EQ(b->ops->poll(b, NULL, 0), 0);
	VE_CHECK_EQ(b->ops->info(b, NULL), -EINVAL);
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	VE_CHECK_EQ(st.submit_calls, 0); /* refused calls are not submissions */
	b->ops->destroy(b);

	/* Configurations. */
	struct ve_sim_config cfg = config();
	cfg.sm_count = 300;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	VE_CHECK(b == NULL);
	cfg = config();
	cfg.leaf_sms[3] = 20; /* 144 SMs in leaves */
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	cfg = config();
	cfg.leaf_sms[3] = 0;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	cfg = config();
	cfg.jitter = 0.7;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	cfg = config();
	cfg.fail_exec_prob = 2;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	cfg = config();
	cfg.max_lanes_per_entry = 257;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	cfg = config();
	cfg.copy_bytes_per_ns = -1;
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), -EINVAL);
	VE_CHECK_EQ(ve_sim_create(&cfg, NULL), -EINVAL);
	/* A zeroed configuration gets the shape defaults. */
	memset(&cfg, 0, sizeof(cfg));
	VE_CHECK_EQ(ve_sim_create(&cfg, &b), 0);
	struct ve_gpu_info gi;
	VE_CHECK_EQ(b->ops->info(b, &gi), 0);
	VE_CHECK_EQ(gi.nleaves, 16);
	b->ops->destroy(b);

	/* Sim-only calls on another backend. */
	static const struct ve_backend_ops other_ops = {
	    .version = 1, .name = "other", .destroy = dummy_destroy};
	struct ve_backend other = {&other_ops};
	VE_CHECK(!ve_sim_is_sim(&other));
	VE_CHECK_EQ(ve_sim_advance(&other, NULL), -EINVAL);
	VE_CHECK_EQ(ve_sim_outstanding(&other), -EINVAL);
	VE_CHECK_EQ(ve_sim_stats(&other, &st), -EINVAL);
	VE_CHECK_EQ(ve_sim_now(&other), 0);
	VE_CHECK_EQ(ve_sim_fail_submit(&other, 1, 0), -EINVAL);
	ve_sim_advance_to(&other, 5); /* ignored */
	other.ops->destroy(&other);
	VE_CHECK(dummy_destroyed == &other);
}

VE_TEST(capacity)
{
	struct ve_sim_config cfg = config();
	cfg.capacity = 4;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 2), 0);
	struct ve_desc k = kernel(100, 256);
	for (uint64_t i = 0; i < 4; i++)
		VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, i % 2), &k, i), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 4), -EAGAIN);
	VE_CHECK_EQ(ve_sim_outstanding(b), 4);
	VE_CHECK_EQ(ve_sim_advance(b, NULL), 0);
	/* Completed but not yet polled: the records are still held. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 4), -EAGAIN);
	struct ve_completion c[4];
	VE_CHECK_EQ(b->ops->poll(b, c, 1), 1);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 4), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 5), -EAGAIN);
	b->ops->destroy(b);
}

VE_TEST(virtual_time)
{
	struct ve_sim_config cfg = config();
	cfg.submit_latency_ns = 3000;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	uint64_t t = 123;
	VE_CHECK_EQ(ve_sim_advance(b, &t), -ENODATA);
	VE_CHECK_EQ(t, 123);
	VE_CHECK_EQ(ve_sim_now(b), 0);
	ve_sim_advance_to(b, 1000);
	VE_CHECK_EQ(b->ops->now(b), 1000);
	ve_sim_advance_to(b, 500); /* never backwards */
	VE_CHECK_EQ(ve_sim_now(b), 1000);
	struct ve_desc k = kernel(132 * 8 * 2, 256); /* 22 us */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	/* wait() never blocks real time. */
	uint64_t w0 = wall_ns();
	VE_CHECK_EQ(b->ops->wait(b, 1000000000ull), -EAGAIN);
	VE_CHECK(wall_ns() - w0 < 100000000ull);
	VE_CHECK_EQ(ve_sim_now(b), 1000);
	ve_sim_advance_to(b, 4000 + 22000 - 1);
	VE_CHECK_EQ(b->ops->wait(b, 0), -EAGAIN);
	struct ve_completion c[2];
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 0);
	ve_sim_advance_to(b, 4000 + 22000);
	VE_CHECK_EQ(b->ops->wait(b, 0), 0);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_submit_ns, 4000); /* 1000 + submit latency */
	VE_CHECK_EQ(c[0].t_start_ns, 4000);
	VE_CHECK_EQ(c[0].t_end_ns, 26000);
	/* advance_to(UINT64_MAX) runs until idle; the clock stays at the last end. */
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 2), 0);
	ve_sim_advance_to(b, UINT64_MAX);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 1);
	VE_CHECK_EQ(c[0].t_end_ns, 26000 + 3000 + 22000);
	VE_CHECK_EQ(ve_sim_now(b), 51000);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 3), 0);
	VE_CHECK_EQ(ve_sim_advance(b, &t), 0);
	VE_CHECK_EQ(t, 51000 + 3000 + 22000);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 1);

	/* peek: the next event, without moving time; advancing there is safe. */
	VE_CHECK_EQ(ve_sim_peek(b, &t), -ENODATA);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 4), 0); /* arrives 3 us later */
	VE_CHECK_EQ(ve_sim_peek(b, &t), 0);
	VE_CHECK_EQ(t, 76000 + 3000);
	VE_CHECK_EQ(ve_sim_now(b), 76000);
	ve_sim_advance_to(b, t);
	VE_CHECK_EQ(ve_sim_peek(b, &t), 0);
	VE_CHECK_EQ(t, 79000 + 22000);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 0);
	ve_sim_advance_to(b, t);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 1);
	VE_CHECK_EQ(ve_sim_peek(b, &t), -ENODATA);
	b->ops->destroy(b);

	/* wait_advances: wait(t) moves time by up to t, to the next completion. */
	cfg = config();
	cfg.wait_advances = true;
	b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 1), 0);
	VE_CHECK_EQ(b->ops->wait(b, 5000), -EAGAIN); /* idle: time stays */
	VE_CHECK_EQ(ve_sim_now(b), 0);
	VE_CHECK_EQ(b->ops->submit(b, VE_LANE(0, 0), &k, 1), 0);
	VE_CHECK_EQ(b->ops->wait(b, 5000), -EAGAIN);
	VE_CHECK_EQ(ve_sim_now(b), 5000);
	VE_CHECK_EQ(b->ops->wait(b, 1000000), 0);
	VE_CHECK_EQ(ve_sim_now(b), 22000);
	VE_CHECK_EQ(b->ops->poll(b, c, 2), 1);
	b->ops->destroy(b);
}

/* ---- two threads: a submitter and a time driver ---- */

struct mt {
	struct ve_backend *b;
	struct ve_desc k;
	int n;
	int submit_errors;
};

static void *submitter(void *arg)
{
	struct mt *m = arg;
	uint64_t deadline = wall_ns() + 5000000000ull;
	for (int i = 0; i < m->n; i++) {
		int rc;
		while ((rc = m->b->ops->submit(m->b, VE_LANE(i % 4, 0), &m->k, (uint64_t)i)) ==
			   -EAGAIN &&
		       wall_ns() < deadline)
			sched_yield();
		if (rc)
			m->submit_errors++;
	}
	return NULL;
}

VE_TEST(two_threads)
{
	struct ve_sim_config cfg = config();
	cfg.capacity = 64;
	struct mt m = {.n = 3000};
	m.b = make(&cfg);
	VE_CHECK(m.b);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK_EQ(m.b->ops->entry_create(m.b, i, 1ull << i, 1), 0);
	m.k = kernel(64, 256);
	pthread_t th;
	VE_CHECK_EQ(pthread_create(&th, NULL, submitter, &m), 0);
	static bool seen[3000];
	memset(seen, 0, sizeof(seen));
	int got = 0, dups = 0;
	uint64_t deadline = wall_ns() + 5000000000ull;
	struct ve_completion c[32];
	while (got < m.n && wall_ns() < deadline) {
		if (ve_sim_advance(m.b, NULL) == -ENODATA)
			sched_yield();
		(void)m.b->ops->now(m.b);
		int k = m.b->ops->poll(m.b, c, 32);
		for (int i = 0; i < k; i++) {
			if (seen[c[i].cookie])
				dups++;
			seen[c[i].cookie] = true;
		}
		got += k > 0 ? k : 0;
	}
	pthread_join(th, NULL);
	VE_CHECK_EQ(m.submit_errors, 0);
	VE_CHECK_EQ(got, m.n);
	VE_CHECK_EQ(dups, 0);
	m.b->ops->destroy(m.b);
}

VE_TEST(speed)
{
	struct ve_sim_config cfg = config();
	cfg.jitter = 0.05;
	cfg.capacity = 4096;
	struct ve_backend *b = make(&cfg);
	VE_CHECK(b);
	VE_CHECK_EQ(b->ops->entry_create(b, 0, WHOLE_H200, 4), 0);
	for (uint32_t i = 0; i < 16; i++)
		VE_CHECK_EQ(b->ops->entry_create(b, 1 + i, 1ull << i, 2), 0);
	struct ve_desc ks[4] = {kernel(64, 256), kernel(640, 256), kernel(2112, 256),
				kernel(7, 512)};
	/* ThreadSanitizer builds (make check sets VE_TSAN) run ~15x slower. */
	const int total =
	    (int)ve_test_env_long("VE_SIM_SPEED_OPS", getenv("VE_TSAN") ? 20000 : 100000);
	uint64_t w0 = wall_ns();
	int submitted = 0, done = 0;
	uint64_t rs = 1;
	struct ve_completion c[256];
	while (done < total) {
		while (submitted < total && ve_sim_outstanding(b) < 48) {
			uint32_t e = ve__rand_below(&rs, 17);
			uint32_t lane = VE_LANE(e, ve__rand_below(&rs, e ? 2 : 4));
			VE_CHECK_EQ(
			    b->ops->submit(b, lane, &ks[submitted % 4], (uint64_t)submitted), 0);
			submitted++;
		}
		VE_CHECK_EQ(ve_sim_advance(b, NULL), 0);
		int k = b->ops->poll(b, c, 256);
		VE_CHECK(k > 0);
		done += k;
	}
	double s = (double)(wall_ns() - w0) * 1e-9;
	struct ve_sim_stats st;
	VE_CHECK_EQ(ve_sim_stats(b, &st), 0);
	printf("# speed: %d ops in %.3f s (%.0f ops/s), virtual %.3f ms, peak running %u, "
	       "SM utilisation %.1f%%\n",
	       total, s, total / s, st.now_ns * 1e-6, st.peak_running,
	       100.0 * st.sm_busy_ns / (132.0 * (double)st.now_ns));
	VE_CHECK(s < 4.0);
	b->ops->destroy(b);
}
