/* SPDX-License-Identifier: MIT */
/*
 * Simulated GPU backend: an event-driven model of a GPU in virtual time.
 *
 * SMs and entries. SMs have ids 0..sm_count-1; leaf i owns the next
 * leaf_sms[i] ids in order (leaf 0 = SMs 0..7 on the default H200 split).
 * These are logical ids: on the real H200 a leaf is a set of TPC pairs spread
 * over GPCs (docs/architecture.md, "GPU facts the code relies on"), which does not matter to a model in
 * which SMs are interchangeable. An entry's SM set S is the union of its
 * leaves; its lanes are FIFO queues. Copy lanes have no SMs.
 *
 * Lanes. An op is eligible at t_submit = now at submit + submit_latency and
 * starts when it is at the head of its lane and eligible. Ops on different
 * lanes run concurrently; nothing orders them but the dispatcher.
 *
 * Kernel time. blocks = grid.x*y*z; bps (resident blocks per SM) is the
 * model's, else desc u.k.blocks_per_sm, else min(max_blocks_per_sm,
 * max_threads_per_sm / threads_per_block, smem_per_sm / (dyn smem + 1 KiB))
 * (the last term only with dynamic shared memory; 1 KiB is what the driver
 * reserves per block on sm_80 and later, CUDA C++ Programming Guide,
 * "Shared Memory" of compute capability 8.x/9.0). The demand is
 *	d = min(|S|, ceil(blocks / bps))
 * SMs, and alone the kernel takes
 *	T = max(t_floor, t_launch + W * t_wave),  W = ceil(blocks / (d * bps))
 * waves: a kernel on m SMs runs ceil(blocks / (m * bps)) waves, and t_floor
 * is the time its memory traffic takes with the whole GPU's bandwidth, the
 * bound at which a memory-bound kernel stops scaling (its bytes are
 * B = t_floor * BW, with BW normalised to 1). (t_wave, t_launch, t_floor) come
 * from cfg.kernel_model keyed by the descriptor (ve-sim reads scenario
 * files), else cfg.kernel (10 us per wave, no traffic).
 *
 * Sharing, cfg.share_model. FIFO and PRIORITY: on each SM, running kernels
 * in the order they started (PRIORITY: latency ops first) take their load
 * c_i (below) while the SM has room; a later one gets what is left, possibly
 * nothing until an earlier one ends (share_in_order). A GPU starts a later
 * kernel's blocks as the earlier one's last wave drains, which this rounds
 * down; and PRIORITY hands SMs to a latency kernel at once, where a GPU
 * lets the running wave finish first (an optimistic bound).
 * FAIR (fluid processor sharing). Running kernel i puts a load of
 * c_i = d_i / |S_i| on every SM of its entry (its demand spread evenly). An
 * SM's load is L_s = sum of c_i over the kernels on it. Kernel i gets
 *	m_i = sum over s in S_i of c_i * min(1, 1 / L_s)
 * SMs' worth of throughput (m_i = d_i when none of its SMs is oversubscribed,
 * so kernels that fit side by side do not slow each other) and, at fractional
 * m < d, takes
 *	T(m) = max(t_floor, t_launch + W * t_wave * d / m)
 * i.e. its exclusive waves stretched by the share of its demand it gets. This
 * replaces the ceil of the exclusive formula by a continuous, monotone
 * function equal to T at m = d; a ceil at fractional m would let a shared
 * kernel beat its exclusive time. Its progress rate is 1 / T(m_i), a fraction
 * of its work per ns (before the bandwidth bound below). Rates are
 * recomputed whenever the set of running kernels changes; an op whose rate
 * did not change keeps its predicted end, so unshared runs have exact
 * integer times. Two identical kernels sharing one entry with t_launch = 0
 * therefore take exactly twice as long as one, and the SM-ns of work are
 * conserved.
 *
 * Memory bandwidth is one resource of the whole GPU. With Tc(m) = T(m)
 * without the floor, kernel i's compute-limited rate is v_i = 1 / Tc(m_i),
 * and sustaining it takes the bandwidth share n_i = min(1, t_floor_i * v_i).
 * Shares are handed out max-min fair (water-filling): in increasing order of
 * n_i, a need is met in full while the bandwidth left, split evenly among the
 * kernels not yet served, covers it; the rest get that even split L. A
 * kernel's share is b_i = min(n_i, L) and its progress rate
 *	min(v_i, b_i / t_floor_i),
 * so a met kernel keeps 1 / T(m_i) and a short one moves its B_i bytes at
 * b_i. Alone (n_i <= 1 = L) that is exactly T = max(t_floor, Tc): single
 * kernel times do not change. Two memory-bound kernels on disjoint SMs take
 * as long as running back to back on the whole GPU (bytes are conserved), a
 * compute-bound one next to a memory-bound one keeps its time and leaves the
 * rest to the other. Shares are recomputed with the SM shares, at every
 * start and end of a kernel (or of a copy that uses bandwidth, below); the
 * stats' bw_busy_ns integrates the sum of b_i. cfg.private_bandwidth gives
 * each kernel a whole GPU's bandwidth instead (the model before this one;
 * concurrent memory-bound kernels then get more bandwidth than there is).
 * Limits: SM shares are
 * computed first, so a kernel stalled on bandwidth keeps its share of shared
 * SMs (it does not hand issue slots to a co-resident kernel); t_floor = 0
 * means no traffic at all, not "some"; bandwidth is one pool (no per-HBM-
 * stack or L2 locality, no latency effects); t_launch is stretched with the
 * rest of a shared kernel.
 *
 * Ops without SMs run on their lane for a fixed time: memcpy latency +
 * bytes / copy rate (default 2 us + 50 GB/s), memset latency + bytes / memset
 * rate (1 us + 1 TB/s), event records and calls 1 us, unless cfg.op_model
 * says otherwise. Every lane is its own engine (no contention between copy
 * lanes). By default copies take no memory bandwidth. With
 * cfg.mem_bytes_per_ns > 0 (and shared bandwidth), a memcpy or memset of N
 * bytes joins the water-filling like a kernel with Tc = its duration and
 * t_floor = N / mem_bytes_per_ns (its duration alone is raised to that floor
 * if shorter): it slows down only if its need is not met, and it takes
 * bandwidth from kernels. N counts once (a device-to-device copy that reads
 * and writes N bytes moves 2N: halve mem_bytes_per_ns to model that).
 * Host functions never reach a backend (the dispatcher runs them),
 * but one submitted anyway runs fn(arg) at its start with zero duration.
 * VE_OP_CALL runs its fn only with cfg.invoke_calls (the lane id as stream);
 * it uses no SMs even with VE_DESC_CALL_COMPUTE (a graph launch is one opaque
 * op of call_ns, or whatever cfg.op_model says).
 * Jitter scales each op's times by U(1 - j, 1 + j), a hash of (seed, seq).
 *
 * Events. The next event is the earliest predicted end of a running op or
 * eligibility of a queued lane head; at one instant, ends are processed
 * before starts, each batch in submission order, until nothing more happens
 * at that instant (zero-length ops). The event hook sees every start and end.
 *
 * No allocation after creation except when entries or lanes are created: op
 * records, the running set and the completion ring are preallocated.
 */
#include "backend/sim.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL			UINT32_MAX
#define SIM_T_MAX		4.0e18	     /* durations are clamped here (~127 years) */
#define SIM_NOW_MAX		(1ull << 62) /* the clock stops here, so now + duration never wraps */
#define SMEM_RESERVED_PER_BLOCK 1024u

enum { OP_FREE = 0, OP_QUEUED, OP_RUNNING, OP_DONE };

struct sim_entry;

struct sim_lane {
	uint32_t id;		    /* VE_LANE value */
	uint32_t head, tail;	    /* FIFO of op indices; the head may be running */
	struct sim_entry *e;	    /* NULL for a copy lane */
	struct sim_lane *pend_next; /* s->pend list link */
	bool pending;		    /* head is queued and the lane is on s->pend */
	/* Deferred reporting (cfg.defer_reports): ops are numbered per lane;
	 * an op may be reported once a marked op at or after it finished, or a
	 * flush covered it. Done ops not yet reportable wait in 'held', in lane
	 * order. */
	uint64_t lseq_next, report_upto, flush_upto;
	uint32_t held_head, held_tail, nheld;
	struct sim_lane *held_next; /* s->held_lanes list link */
	bool on_held;
};

struct sim_entry {
	bool live;
	uint32_t nsms;
	uint32_t nlanes;
	uint64_t leaves;
	uint64_t sms[VE_SIM_SM_WORDS];
	struct sim_lane *lanes;
	uint64_t busy_ns, ops, stamp;
};

struct sim_op {
	const struct ve_desc *desc;
	struct sim_lane *lane;
	uint64_t cookie, seq;
	uint64_t lseq; /* number on its lane, from 1 */
	uint64_t t_submit, t_start, t_end;
	uint64_t t_pred; /* end at the current rate */
	uint64_t t_rate; /* when rem was last brought up to date */
	double rem;	 /* remaining fraction of the op's work */
	double t_eff;	 /* ns the whole op would take at the current rate (0 = not yet set) */
	double m_eff;	 /* SMs' worth of throughput it gets now */
	double m_ord;	 /* ... under cfg.share_model FIFO/PRIORITY, before bandwidth */
	double bw_need;	 /* bandwidth share that sustains its compute-limited rate */
	double bw_alloc; /* bandwidth share it gets now */
	/* Fixed at submit, jitter applied. */
	uint64_t dur;	/* time alone */
	double wave_ns; /* W * t_wave; a copy's own time */
	double launch_ns;
	double floor_ns; /* ns of memory traffic at the whole bandwidth */
	double share;	 /* demand / |S| */
	uint32_t demand; /* SMs; 0 = uses none */
	uint32_t next;	 /* lane FIFO or free list */
	uint32_t run_pos;
	int32_t status;
	uint8_t state, kind;
	bool fluid; /* rate set by recompute(): kernels, and copies that use bandwidth */
	bool deferred; /* submit_deferred with cfg.defer_reports */
};

struct sim {
	struct ve_backend base; /* first, so that b->ops works */
	pthread_mutex_t mu;
	/* Written under mu; read without it by now() (a timestamp that publishes
	 * nothing, so relaxed loads and stores suffice). */
	_Atomic uint64_t now;
	struct ve_sim_config cfg; /* resolved */
	char name[96];
	uint32_t first_sm[VE_MAX_LEAVES];
	struct sim_entry entries[VE_SIM_MAX_ENTRIES];
	uint32_t nentries; /* highest index + 1 */
	struct sim_lane *copy;
	uint32_t ncopy;

	struct sim_op *ops;
	uint32_t cap, free_head, nfree;
	uint32_t *running; /* op indices, swap-removed */
	uint32_t *tmp;	   /* scratch batch, as large as running */
	double *needs;	   /* scratch for the water-filling, as large as running */
	uint32_t nrunning, nrunning_kernels, run_cap;
	uint32_t *done; /* completion ring sorted by (t_end, seq) */
	uint32_t done_head, ndone;
	uint32_t nqueued;
	struct sim_lane *pend;
	struct sim_lane *held_lanes; /* lanes with held deferred completions */
	uint32_t nheld;
	bool dirty; /* set of running fluid ops changed since the last recompute */
	double sum_meff;
	double sum_bw; /* bandwidth share handed out now */
	uint32_t occupied_sms;
	uint64_t seq, step, ncompleted;
	uint64_t fail_submit_at, fail_exec_at; /* absolute call / seq numbers, 0 = none */
	int32_t fail_submit_err, fail_exec_status;
	struct ve_sim_stats st; /* counters; per-entry and live fields filled on read */
};

/* The sim whose mutex this thread holds while it runs a user callback. */
static _Thread_local struct sim *cb_sim;

static const char default_name[] = "vitamin-e sim";

static struct sim *to_sim(const struct ve_backend *b)
{
	return b && b->ops == &ve_sim_backend_ops ? (struct sim *)(uintptr_t)b : NULL;
}

bool ve_sim_is_sim(const struct ve_backend *b)
{
	return to_sim(b) != NULL;
}

static int sim_lock(struct sim *s)
{
	if (cb_sim == s)
		return -EDEADLK;
	pthread_mutex_lock(&s->mu);
	return 0;
}

static void sim_unlock(struct sim *s)
{
	pthread_mutex_unlock(&s->mu);
}

static uint64_t now_of(const struct sim *s)
{
	return atomic_load_explicit(&s->now, memory_order_relaxed);
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static uint64_t to_ns(double t)
{
	if (!(t > 0))
		return 0;
	if (t > SIM_T_MAX)
		t = SIM_T_MAX;
	return (uint64_t)llround(t);
}

/* Uniform [0, 1) from (seed, salt, n): the same for a given submission
 * whatever order the simulation processes things in. */
static double hash_unit(const struct sim *s, uint64_t salt, uint64_t n)
{
	uint64_t h = ve__mix64(s->cfg.seed ^ ve__mix64(salt + 0x9e3779b97f4a7c15ull * (n + 1)));
	return (double)(h >> 11) * 0x1.0p-53;
}

enum { SALT_JITTER = 1, SALT_SUBMIT_FAULT = 2, SALT_EXEC_FAULT = 3 };

/* ---- configuration ---------------------------------------------------- */

void ve_sim_config_default(struct ve_sim_config *c)
{
	memset(c, 0, sizeof(*c));
	c->name = default_name;
	c->sm_count = 132;
	c->min_partition_sms = 8;
	c->nleaves = (uint32_t)ve_sim_default_split(c->sm_count, c->min_partition_sms, c->leaf_sms);
	c->max_blocks_per_sm = 32;
	c->max_threads_per_sm = 2048;
	c->smem_per_sm = 228u * 1024u;
	c->max_lanes_per_entry = 32;
	c->capacity = 65536;
	c->kernel.t_wave_ns = 10000;
	c->kernel.t_launch_ns = 2000;
	c->copy_bytes_per_ns = 50.0;
	c->copy_latency_ns = 2000;
	c->memset_bytes_per_ns = 1000.0;
	c->memset_latency_ns = 1000;
	c->event_ns = 1000;
	c->call_ns = 1000;
	c->fail_submit_err = -EIO;
	c->fail_exec_status = -EFAULT;
}

int ve_sim_default_split(uint32_t sm_count, uint32_t min_sms, uint32_t leaf_sms[VE_MAX_LEAVES])
{
	if (!sm_count || !min_sms)
		return -EINVAL;
	uint32_t n = sm_count / min_sms;
	if (n == 0) {
		leaf_sms[0] = sm_count;
		return 1;
	}
	if (n > VE_MAX_LEAVES)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		leaf_sms[i] = min_sms;
	leaf_sms[n - 1] += sm_count % min_sms;
	return (int)n;
}

static int bad_cfg(const char *field)
{
	VE_ERR("sim: invalid configuration: %s", field);
	return -EINVAL;
}

static bool prob_ok(double p)
{
	return p >= 0.0 && p <= 1.0;
}

static int resolve_config(struct ve_sim_config *c)
{
	if (!c->sm_count)
		c->sm_count = 132;
	if (c->sm_count > VE_SIM_MAX_SMS)
		return bad_cfg("sm_count (at most 256)");
	if (!c->min_partition_sms)
		c->min_partition_sms = 8;
	if (!c->nleaves) {
		int n = ve_sim_default_split(c->sm_count, c->min_partition_sms, c->leaf_sms);
		if (n < 0)
			return bad_cfg("nleaves (default split needs more than 64 leaves)");
		c->nleaves = (uint32_t)n;
	}
	if (c->nleaves > VE_MAX_LEAVES)
		return bad_cfg("nleaves (at most 64)");
	uint32_t sum = 0;
	for (uint32_t i = 0; i < c->nleaves; i++) {
		if (!c->leaf_sms[i])
			return bad_cfg("leaf_sms (a leaf of 0 SMs)");
		sum += c->leaf_sms[i];
	}
	if (sum > c->sm_count)
		return bad_cfg("leaf_sms (leaves hold more SMs than sm_count)");
	if (!c->max_blocks_per_sm)
		c->max_blocks_per_sm = 32;
	if (!c->max_threads_per_sm)
		c->max_threads_per_sm = 2048;
	if (!c->smem_per_sm)
		c->smem_per_sm = 228u * 1024u;
	if (!c->max_lanes_per_entry)
		c->max_lanes_per_entry = 32;
	if (c->max_lanes_per_entry > VE_SIM_MAX_LANES)
		return bad_cfg("max_lanes_per_entry (at most 256)");
	if (!c->capacity)
		c->capacity = 65536;
	if (c->capacity > (1u << 26))
		return bad_cfg("capacity (at most 2^26)");
	if (!c->kernel.t_wave_ns)
		c->kernel.t_wave_ns = 10000;
	if (c->copy_bytes_per_ns == 0)
		c->copy_bytes_per_ns = 50.0;
	if (!(c->copy_bytes_per_ns > 0) || !isfinite(c->copy_bytes_per_ns))
		return bad_cfg("copy_bytes_per_ns");
	if (c->memset_bytes_per_ns == 0)
		c->memset_bytes_per_ns = 1000.0;
	if (!(c->memset_bytes_per_ns > 0) || !isfinite(c->memset_bytes_per_ns))
		return bad_cfg("memset_bytes_per_ns");
	if (!(c->mem_bytes_per_ns >= 0) || !isfinite(c->mem_bytes_per_ns))
		return bad_cfg("mem_bytes_per_ns (0 or a bandwidth in bytes per ns)");
	if (!(c->jitter >= 0.0 && c->jitter < 0.5))
		return bad_cfg("jitter (must be in [0, 0.5))");
	if (!prob_ok(c->fail_submit_prob))
		return bad_cfg("fail_submit_prob (must be in [0, 1])");
	if (!prob_ok(c->fail_exec_prob))
		return bad_cfg("fail_exec_prob (must be in [0, 1])");
	if (!c->fail_submit_err)
		c->fail_submit_err = -EIO;
	if (c->fail_submit_err > 0)
		return bad_cfg("fail_submit_err (a negative errno)");
	if (!c->fail_exec_status)
		c->fail_exec_status = -EFAULT;
	if (!c->name)
		c->name = default_name;
	return 0;
}

/* ---- the model ---------------------------------------------------------- */

static struct sim_lane *find_lane(struct sim *s, uint32_t lane)
{
	uint32_t e = VE_LANE_ENTRY(lane), k = VE_LANE_STREAM(lane);
	if (e == VE_LANE_COPY_ENTRY)
		return k < s->ncopy ? &s->copy[k] : NULL;
	if (e >= VE_SIM_MAX_ENTRIES || !s->entries[e].live || k >= s->entries[e].nlanes)
		return NULL;
	return &s->entries[e].lanes[k];
}

static uint32_t derive_bps(const struct sim *s, uint64_t threads, uint32_t smem)
{
	uint64_t bps = s->cfg.max_blocks_per_sm;
	uint64_t by_threads = s->cfg.max_threads_per_sm / threads;
	if (by_threads < bps)
		bps = by_threads;
	if (smem) {
		uint64_t by_smem = s->cfg.smem_per_sm / ((uint64_t)smem + SMEM_RESERVED_PER_BLOCK);
		if (by_smem < bps)
			bps = by_smem;
	}
	return (uint32_t)bps;
}

static int model_kernel(struct sim *s, const struct sim_entry *e, const struct ve_desc *d,
			struct sim_op *o)
{
	const struct ve_kernel_desc *k = &d->u.k;
	uint64_t blocks = ve_desc_blocks(d);
	uint64_t threads = (uint64_t)k->block.x * k->block.y * k->block.z;
	if (!blocks || !threads)
		return -EINVAL;
	struct ve_sim_kernel_params p = s->cfg.kernel;
	p.blocks_per_sm = k->blocks_per_sm ? k->blocks_per_sm : derive_bps(s, threads, k->smem);
	if (s->cfg.kernel_model) {
		struct ve_sim_kernel_params q = p;
		struct sim *prev = cb_sim;
		cb_sim = s;
		int rc = s->cfg.kernel_model(s->cfg.kernel_model_arg, d, &q);
		cb_sim = prev;
		if (rc == 0)
			p = q;
	}
	if (!p.blocks_per_sm)
		return -EINVAL; /* a block that fits on no SM cannot launch */
	if (k->min_sms > e->nsms)
		return -EINVAL;
	uint64_t need = ceil_div(blocks, p.blocks_per_sm);
	/* A cooperative launch needs every block resident at once. */
	if ((d->flags & VE_DESC_COOPERATIVE) && need > e->nsms)
		return -EINVAL;
	uint32_t dem = need < e->nsms ? (uint32_t)need : e->nsms;
	uint64_t waves = ceil_div(blocks, (uint64_t)dem * p.blocks_per_sm);
	o->demand = dem;
	o->share = (double)dem / (double)e->nsms;
	o->wave_ns = (double)waves * (double)p.t_wave_ns;
	o->launch_ns = (double)p.t_launch_ns;
	o->floor_ns = (double)p.t_floor_ns;
	return 0;
}

static int model_lane_op(struct sim *s, const struct sim_lane *l, const struct ve_desc *d,
			 struct sim_op *o)
{
	const struct ve_sim_config *c = &s->cfg;
	double t, bytes = 0;
	switch (d->kind) {
	case VE_OP_MEMCPY:
		bytes = (double)d->u.cp.bytes;
		t = (double)c->copy_latency_ns + ceil(bytes / c->copy_bytes_per_ns);
		break;
	case VE_OP_MEMSET:
		bytes = (double)d->u.ms.width * (double)d->u.ms.height * (double)d->u.ms.elem_size;
		t = (double)c->memset_latency_ns + ceil(bytes / c->memset_bytes_per_ns);
		break;
	case VE_OP_EVENT_RECORD:
		t = (double)c->event_ns;
		break;
	case VE_OP_CALL:
		if (!d->u.call.fn && c->invoke_calls)
			return -EINVAL;
		t = (double)c->call_ns;
		break;
	case VE_OP_HOST_FN:
		if (!d->u.host.fn)
			return -EINVAL;
		t = 0;
		break;
	default:
		return -EINVAL;
	}
	uint64_t dur = to_ns(t);
	if (c->op_model && d->kind != VE_OP_HOST_FN) {
		uint64_t q = dur;
		struct sim *prev = cb_sim;
		cb_sim = s;
		int rc = c->op_model(c->op_model_arg, d, l->id, &q);
		cb_sim = prev;
		if (rc == 0)
			dur = q < (uint64_t)SIM_T_MAX ? q : (uint64_t)SIM_T_MAX;
	}
	o->demand = 0;
	o->share = 0;
	o->wave_ns = (double)dur;
	o->launch_ns = 0;
	o->floor_ns = 0;
	o->fluid = bytes > 0 && c->mem_bytes_per_ns > 0 && !c->private_bandwidth;
	if (o->fluid) {
		/* Its traffic bounds it like a kernel's floor: alone it cannot
		 * be faster than its bytes at the whole bandwidth. */
		o->floor_ns = bytes / c->mem_bytes_per_ns;
		if (o->floor_ns > (double)dur)
			dur = to_ns(o->floor_ns);
	}
	o->dur = dur;
	return 0;
}

/* Fills the op's model fields for 'd' on 'l' (no jitter); -EINVAL if d
 * cannot run there. */
static int model_op(struct sim *s, const struct sim_lane *l, const struct ve_desc *d,
		    struct sim_op *o)
{
	if (!d)
		return -EINVAL;
	if (d->kind == VE_OP_KERNEL) {
		if (!l->e)
			return -EINVAL; /* a copy lane has no SMs */
		int rc = model_kernel(s, l->e, d, o);
		if (rc)
			return rc;
		o->fluid = true;
		double t = o->launch_ns + o->wave_ns;
		o->dur = to_ns(t > o->floor_ns ? t : o->floor_ns);
		return 0;
	}
	return model_lane_op(s, l, d, o);
}

static void apply_jitter(struct sim *s, struct sim_op *o)
{
	if (s->cfg.jitter == 0 || o->kind == VE_OP_HOST_FN)
		return;
	double f = 1.0 + s->cfg.jitter * (2.0 * hash_unit(s, SALT_JITTER, o->seq) - 1.0);
	if (o->fluid) {
		o->wave_ns *= f;
		o->launch_ns *= f;
		o->floor_ns *= f;
		double t = o->launch_ns + o->wave_ns;
		o->dur = to_ns(t > o->floor_ns ? t : o->floor_ns);
	} else {
		o->dur = to_ns((double)o->dur * f);
	}
}

/* T(m), the time at m SMs' worth with all the bandwidth it asks for (see the
 * comment at the top): exactly dur at its whole demand, so unshared runs
 * keep integer times. A copy (demand 0) always gets dur. */
static double kernel_time(const struct sim_op *o, double m)
{
	if (m >= (double)o->demand)
		return (double)o->dur;
	if (m < 1e-9)
		m = 1e-9;
	double t = o->launch_ns + o->wave_ns * ((double)o->demand / m);
	if (t < o->floor_ns)
		t = o->floor_ns;
	return t < SIM_T_MAX ? t : SIM_T_MAX;
}

/* Bandwidth share that sustains the compute-limited rate 1 / Tc(m), Tc being
 * T(m) without the floor: floor / Tc, capped at 1 (then the floor binds even
 * with the whole bandwidth). */
static double bw_need(const struct sim_op *o, double m)
{
	if (!(o->floor_ns > 0))
		return 0;
	double tc = o->launch_ns + o->wave_ns;
	if (m < (double)o->demand)
		tc = o->launch_ns + o->wave_ns * ((double)o->demand / (m < 1e-9 ? 1e-9 : m));
	return tc > o->floor_ns ? o->floor_ns / tc : 1.0;
}

static void sift_down(double *v, uint32_t i, uint32_t n)
{
	double x = v[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && v[c + 1] > v[c])
			c++;
		if (!(v[c] > x))
			break;
		v[i] = v[c];
		i = c;
	}
	v[i] = x;
}

/* Heapsort: in place and without allocation (glibc's qsort may malloc). Only
 * the sorted values are used, so ties cannot make the result depend on the
 * algorithm. */
static void sort_doubles(double *v, uint32_t n)
{
	for (uint32_t i = n / 2; i-- > 0;)
		sift_down(v, i, n);
	for (uint32_t e = n; e-- > 1;) {
		double t = v[0];
		v[0] = v[e];
		v[e] = t;
		sift_down(v, 0, e);
	}
}

/* Slack in "the bandwidth left covers this need", so that needs summing to
 * exactly 1 in decimal are all met despite binary rounding. */
#define BW_EPS 1e-12

/* Max-min fair (water-filling) level for needs v[0..n) in (0, 1] sharing a
 * bandwidth of 1: each op gets min(need, level). In increasing order, a need
 * is met in full while the bandwidth left, split evenly among the ops not yet
 * served, still covers it; the first one it does not cover and all larger
 * ones get that even split. 1.0 (every need met) if the sum fits. Sorts v. */
static double water_level(double *v, uint32_t n)
{
	sort_doubles(v, n);
	double left = 1.0;
	for (uint32_t j = 0; j < n; j++) {
		double k = (double)(n - j);
		if (v[j] * k > left + BW_EPS)
			return left > 0 ? left / k : 0;
		left -= v[j];
	}
	return 1.0;
}

/* Brings rem up to date and sets the op's new time; keeps t_pred when the
 * rate did not change, so unshared ops keep their exact integer ends. */
static void set_rate(struct sim_op *o, double t, uint64_t now)
{
	if (t == o->t_eff)
		return;
	if (o->t_eff > 0) {
		o->rem -= (double)(now - o->t_rate) / o->t_eff;
		if (o->rem < 0)
			o->rem = 0;
	}
	o->t_rate = now;
	o->t_eff = t;
	/* The tolerance keeps float noise from adding a ns to exact ends. */
	o->t_pred = now + to_ns(ceil(o->rem * t - 1e-6));
}

/* Who gets a shared SM first (cfg.share_model): latency ops first under
 * _PRIORITY, then by start (then issue) order. */
static bool ahead_of(const struct sim *s, const struct sim_op *a, const struct sim_op *b)
{
	bool la = a->desc && (a->desc->flags & VE_DESC_LATENCY);
	bool lb = b->desc && (b->desc->flags & VE_DESC_LATENCY);
	if (s->cfg.share_model == VE_SIM_SHARE_PRIORITY && la != lb)
		return la;
	if (a->t_start != b->t_start)
		return a->t_start < b->t_start;
	return a->seq < b->seq;
}

/* cfg.share_model FIFO/PRIORITY: each running kernel's SMs' worth (m_ord), leaf by
 * leaf, in ahead_of order. Uses s->tmp (free between batches). */
static void share_in_order(struct sim *s)
{
	uint32_t n = 0;
	for (uint32_t r = 0; r < s->nrunning; r++)
		if (s->ops[s->running[r]].demand)
			s->tmp[n++] = s->running[r];
	for (uint32_t i = 1; i < n; i++) {
		uint32_t x = s->tmp[i], j = i;
		while (j > 0 && ahead_of(s, &s->ops[x], &s->ops[s->tmp[j - 1]])) {
			s->tmp[j] = s->tmp[j - 1];
			j--;
		}
		s->tmp[j] = x;
	}
	double cap[VE_MAX_LEAVES];
	for (uint32_t l = 0; l < VE_MAX_LEAVES; l++)
		cap[l] = 1.0;
	for (uint32_t i = 0; i < n; i++) {
		struct sim_op *o = &s->ops[s->tmp[i]];
		double m = 0;
		bool full = true;
		for (uint64_t lv = o->lane->e->leaves; lv; lv &= lv - 1) {
			int l = __builtin_ctzll(lv);
			double g = o->share <= cap[l] + 1e-12 ? o->share : cap[l];
			full = full && g >= o->share;
			cap[l] = cap[l] > g ? cap[l] - g : 0;
			m += (double)s->cfg.leaf_sms[l] * g;
		}
		o->m_ord = full ? (double)o->demand : m;
	}
}

/* Rates of every running fluid op after the running set changed: SM shares
 * first, then the bandwidth those shares ask for, water-filled. */
static void recompute(struct sim *s)
{
	double load[VE_MAX_LEAVES] = {0};
	uint64_t now = now_of(s);
	if (s->cfg.share_model != VE_SIM_SHARE_FAIR)
		share_in_order(s);
	for (uint32_t r = 0; r < s->nrunning; r++) {
		const struct sim_op *o = &s->ops[s->running[r]];
		if (!o->demand)
			continue;
		for (uint64_t m = o->lane->e->leaves; m; m &= m - 1)
			load[__builtin_ctzll(m)] += o->share;
	}
	uint32_t occ = 0;
	for (uint32_t l = 0; l < s->cfg.nleaves; l++)
		if (load[l] > 0)
			occ += s->cfg.leaf_sms[l];
	double sum = 0, need_sum = 0;
	uint32_t nneed = 0; /* ops that use bandwidth, in s->tmp (free between batches) */
	for (uint32_t r = 0; r < s->nrunning; r++) {
		struct sim_op *o = &s->ops[s->running[r]];
		if (!o->fluid)
			continue;
		double m_eff = o->demand;
		if (o->demand && s->cfg.share_model != VE_SIM_SHARE_FAIR) {
			m_eff = o->m_ord;
		} else if (o->demand) {
			uint64_t leaves = o->lane->e->leaves;
			bool over = false;
			for (uint64_t m = leaves; m; m &= m - 1)
				if (load[__builtin_ctzll(m)] > 1.0 + 1e-9)
					over = true;
			if (over) {
				m_eff = 0;
				for (uint64_t m = leaves; m; m &= m - 1) {
					int l = __builtin_ctzll(m);
					double f = load[l] > 1.0 ? 1.0 / load[l] : 1.0;
					m_eff += (double)s->cfg.leaf_sms[l] * o->share * f;
				}
			}
		}
		o->m_eff = m_eff;
		o->bw_need = bw_need(o, m_eff);
		sum += m_eff;
		if (o->bw_need > 0) {
			s->needs[nneed] = o->bw_need;
			s->tmp[nneed++] = s->running[r];
			need_sum += o->bw_need;
		} else {
			o->bw_alloc = 0;
			set_rate(o, kernel_time(o, m_eff), now);
		}
	}
	double level = 1.0; /* meets every need */
	if (!s->cfg.private_bandwidth && need_sum > 1.0 + BW_EPS)
		level = water_level(s->needs, nneed);
	double bw = 0;
	for (uint32_t j = 0; j < nneed; j++) {
		struct sim_op *o = &s->ops[s->tmp[j]];
		double t = kernel_time(o, o->m_eff);
		double a = o->bw_need;
		if (a > level) {
			/* Bandwidth-bound: its traffic at the share it gets. */
			a = level;
			double tb = a > 0 ? o->floor_ns / a : SIM_T_MAX;
			if (tb > t)
				t = tb < SIM_T_MAX ? tb : SIM_T_MAX;
		}
		o->bw_alloc = a;
		bw += a;
		set_rate(o, t, now);
	}
	s->sum_meff = sum;
	s->sum_bw = bw;
	s->occupied_sms = occ;
	s->dirty = false;
}

/* ---- events ------------------------------------------------------------- */

static void emit(struct sim *s, uint32_t kind, const struct sim_op *o)
{
	if (!s->cfg.on_event)
		return;
	struct ve_sim_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.lane = o->lane->id;
	ev.entry = VE_LANE_ENTRY(o->lane->id);
	ev.status = kind == VE_SIM_EV_END ? o->status : 0;
	ev.cookie = o->cookie;
	ev.seq = o->seq;
	ev.t_ns = now_of(s);
	ev.t_submit_ns = o->t_submit;
	ev.t_start_ns = o->t_start;
	ev.demand = o->demand;
	if (o->demand) {
		ev.nsms = o->lane->e->nsms;
		ev.leaves = o->lane->e->leaves;
		memcpy(ev.sms, o->lane->e->sms, sizeof(ev.sms));
	}
	ev.desc = o->desc;
	struct sim *prev = cb_sim;
	cb_sim = s;
	s->cfg.on_event(s->cfg.on_event_arg, &ev);
	cb_sim = prev;
}

static void pend_add(struct sim *s, struct sim_lane *l)
{
	if (l->pending)
		return;
	l->pending = true;
	l->pend_next = s->pend;
	s->pend = l;
}

/* Batches are small and nearly sorted already (ops start in seq order). */
static void sort_by_seq(struct sim *s, uint32_t *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		uint32_t x = v[i];
		uint64_t k = s->ops[x].seq;
		uint32_t j = i;
		while (j > 0 && s->ops[v[j - 1]].seq > k) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
}

typedef void (*host_cb_fn)(void *stream, int status, void *arg);

static void start_op(struct sim *s, uint32_t i)
{
	struct sim_op *o = &s->ops[i];
	uint64_t now = now_of(s);
	o->state = OP_RUNNING;
	o->t_start = now;
	o->t_rate = now;
	o->rem = 1.0;
	o->run_pos = s->nrunning;
	s->running[s->nrunning++] = i;
	s->nqueued--;
	if (o->demand)
		s->nrunning_kernels++;
	o->m_eff = 0;
	o->bw_need = o->bw_alloc = 0;
	if (o->fluid) {
		s->dirty = true;
		o->t_eff = 0;
		o->t_pred = UINT64_MAX; /* set by recompute() before time moves */
	} else {
		o->t_eff = (double)o->dur;
		o->t_pred = now + o->dur;
	}
	s->st.started[o->kind]++;
	if (s->nrunning > s->st.peak_running)
		s->st.peak_running = s->nrunning;
	if (s->nrunning_kernels > s->st.peak_running_kernels)
		s->st.peak_running_kernels = s->nrunning_kernels;
	emit(s, VE_SIM_EV_START, o);

	const struct ve_desc *d = o->desc;
	struct sim *prev = cb_sim;
	cb_sim = s;
	if (d->kind == VE_OP_HOST_FN) {
		if (d->u.host.style == 1)
			((host_cb_fn)(void (*)(void))d->u.host.fn)(
			    (void *)(uintptr_t)d->u.host.stream_handle, 0, d->u.host.arg);
		else
			d->u.host.fn(d->u.host.arg);
	} else if (d->kind == VE_OP_CALL && s->cfg.invoke_calls) {
		int rc = d->u.call.fn(o->lane->id, d->payload, d->payload_len);
		if (rc && !o->status)
			o->status = rc;
	}
	cb_sim = prev;
}

static bool later(const struct sim_op *a, const struct sim_op *b)
{
	return a->t_end > b->t_end || (a->t_end == b->t_end && a->seq > b->seq);
}

static void finish_op(struct sim *s, uint32_t i)
{
	struct sim_op *o = &s->ops[i];
	struct sim_lane *l = o->lane;
	o->t_end = now_of(s);
	o->state = OP_DONE;
	uint32_t last = s->running[--s->nrunning];
	s->running[o->run_pos] = last;
	s->ops[last].run_pos = o->run_pos;
	if (o->demand)
		s->nrunning_kernels--;
	if (o->fluid)
		s->dirty = true;
	/* FIFO: a lane runs only its head. */
	l->head = o->next;
	o->next = NIL;
	if (l->head == NIL)
		l->tail = NIL;
	else
		pend_add(s, l);
	if (!o->deferred && o->lseq > l->report_upto)
		l->report_upto = o->lseq;
	s->st.finished[o->kind]++;
	if (o->status)
		s->st.exec_faults++;
	if (l->e)
		l->e->ops++;
	/* Same-instant ends may be found in a later batch than a higher seq. */
	uint32_t k = s->ndone;
	while (k > 0) {
		uint32_t p = s->done[(s->done_head + k - 1) % s->cap];
		if (!later(&s->ops[p], o))
			break;
		s->done[(s->done_head + k) % s->cap] = p;
		k--;
	}
	s->done[(s->done_head + k) % s->cap] = i;
	s->ndone++;
	s->ncompleted++;
	emit(s, VE_SIM_EV_END, o);
}

static bool complete_due(struct sim *s)
{
	uint64_t now = now_of(s);
	uint32_t n = 0;
	for (uint32_t r = 0; r < s->nrunning; r++)
		if (s->ops[s->running[r]].t_pred <= now)
			s->tmp[n++] = s->running[r];
	sort_by_seq(s, s->tmp, n);
	for (uint32_t j = 0; j < n; j++)
		finish_op(s, s->tmp[j]);
	return n > 0;
}

static bool start_ready(struct sim *s)
{
	uint64_t now = now_of(s);
	uint32_t n = 0;
	for (struct sim_lane **pp = &s->pend; *pp;) {
		struct sim_lane *l = *pp;
		if (s->ops[l->head].t_submit <= now) {
			*pp = l->pend_next;
			l->pending = false;
			l->pend_next = NULL;
			s->tmp[n++] = l->head;
		} else {
			pp = &l->pend_next;
		}
	}
	sort_by_seq(s, s->tmp, n);
	for (uint32_t j = 0; j < n; j++)
		start_op(s, s->tmp[j]);
	return n > 0;
}

/* Runs everything that happens at the current instant. */
static void settle(struct sim *s)
{
	bool more = true;
	while (more) {
		bool a = complete_due(s);
		bool b = start_ready(s);
		if (s->dirty)
			recompute(s);
		more = a || b;
	}
}

static uint64_t next_event(const struct sim *s)
{
	uint64_t t = UINT64_MAX;
	for (uint32_t r = 0; r < s->nrunning; r++)
		if (s->ops[s->running[r]].t_pred < t)
			t = s->ops[s->running[r]].t_pred;
	for (const struct sim_lane *l = s->pend; l; l = l->pend_next)
		if (s->ops[l->head].t_submit < t)
			t = s->ops[l->head].t_submit;
	return t;
}

/* Integrals over [now, t) of the current state, then now = t. */
static void move_to(struct sim *s, uint64_t t)
{
	uint64_t now = now_of(s);
	if (t > SIM_NOW_MAX)
		t = SIM_NOW_MAX;
	if (t <= now)
		return;
	uint64_t dt = t - now;
	s->step++;
	s->st.sm_busy_ns += (double)dt * s->sum_meff;
	s->st.sm_occupied_ns += (double)dt * s->occupied_sms;
	s->st.bw_busy_ns += (double)dt * s->sum_bw;
	for (uint32_t r = 0; r < s->nrunning; r++) {
		const struct sim_op *o = &s->ops[s->running[r]];
		struct sim_entry *e = o->lane->e;
		if (!o->demand)
			s->st.copy_busy_ns += dt;
		if (e && e->stamp != s->step) {
			e->stamp = s->step;
			e->busy_ns += dt;
		}
	}
	atomic_store_explicit(&s->now, t, memory_order_relaxed);
}

/* Runs events up to 'limit' (inclusive); with 'one', stops after the first
 * instant at which something completed. */
static void run(struct sim *s, uint64_t limit, bool one)
{
	uint64_t c0 = s->ncompleted;
	settle(s);
	for (;;) {
		if (one && s->ncompleted > c0)
			break;
		uint64_t t = next_event(s);
		if (t == UINT64_MAX || t > limit || t > SIM_NOW_MAX)
			break;
		move_to(s, t);
		settle(s);
	}
}

/* ---- backend ops ---------------------------------------------------------- */

static int sim_info(struct ve_backend *b, struct ve_gpu_info *out)
{
	struct sim *s = to_sim(b);
	if (!s || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", s->name);
	out->sm_count = s->cfg.sm_count;
	out->min_partition_sms = s->cfg.min_partition_sms;
	out->nleaves = s->cfg.nleaves;
	memcpy(out->leaf_sms, s->cfg.leaf_sms, sizeof(out->leaf_sms));
	out->max_threads_per_sm = s->cfg.max_threads_per_sm;
	out->max_blocks_per_sm = s->cfg.max_blocks_per_sm;
	return 0;
}

/* Room in the running set and scratch for 'more' lanes (creation time only). */
static int grow_run(struct sim *s, uint32_t more)
{
	uint32_t want = s->run_cap + more;
	uint32_t *r = realloc(s->running, (size_t)want * sizeof(*r));
	if (!r)
		return -ENOMEM;
	s->running = r;
	uint32_t *t = realloc(s->tmp, (size_t)want * sizeof(*t));
	if (!t)
		return -ENOMEM; /* running is larger than needed: harmless */
	s->tmp = t;
	double *n = realloc(s->needs, (size_t)want * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->needs = n;
	s->run_cap = want;
	return 0;
}

static void lanes_init(struct sim_lane *v, uint32_t n, uint32_t entry, struct sim_entry *e)
{
	for (uint32_t k = 0; k < n; k++) {
		v[k].id = VE_LANE(entry, k);
		v[k].head = v[k].tail = NIL;
		v[k].e = e;
		v[k].pend_next = NULL;
		v[k].pending = false;
		v[k].held_head = v[k].held_tail = NIL;
	}
}

/* n zeroed lanes, with room for them in the run list; allocation happens
 * only here and at creation, never per op. */
static int lanes_alloc(struct sim *s, uint32_t n, struct sim_lane **out)
{
	struct sim_lane *lanes = calloc(n, sizeof(*lanes));
	if (!lanes)
		return -ENOMEM;
	int rc = grow_run(s, n);
	if (rc) {
		free(lanes);
		return rc;
	}
	*out = lanes;
	return 0;
}

static int sim_entry_create(struct ve_backend *b, uint32_t idx, uint64_t leaf_mask,
			    uint32_t nstreams)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	uint64_t known = s->cfg.nleaves >= 64 ? ~0ull : (1ull << s->cfg.nleaves) - 1;
	struct sim_entry *e = idx < VE_SIM_MAX_ENTRIES ? &s->entries[idx] : NULL;
	if (!e || !leaf_mask || (leaf_mask & ~known) || !nstreams ||
	    nstreams > s->cfg.max_lanes_per_entry) {
		rc = -EINVAL;
		goto out;
	}
	if (e->live) {
		rc = -EEXIST;
		goto out;
	}
	struct sim_lane *lanes;
	rc = lanes_alloc(s, nstreams, &lanes);
	if (rc)
		goto out;
	memset(e, 0, sizeof(*e));
	e->leaves = leaf_mask;
	for (uint64_t m = leaf_mask; m; m &= m - 1) {
		int l = __builtin_ctzll(m);
		for (uint32_t k = 0; k < s->cfg.leaf_sms[l]; k++) {
			uint32_t sm = s->first_sm[l] + k;
			e->sms[sm / 64] |= 1ull << (sm % 64);
		}
		e->nsms += s->cfg.leaf_sms[l];
	}
	e->nlanes = nstreams;
	e->lanes = lanes;
	lanes_init(lanes, nstreams, idx, e);
	e->live = true;
	if (idx + 1 > s->nentries)
		s->nentries = idx + 1;
out:
	sim_unlock(s);
	return rc;
}

static int sim_copy_lanes_create(struct ve_backend *b, uint32_t n)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	if (!n || n > VE_SIM_MAX_LANES) {
		rc = -EINVAL;
		goto out;
	}
	if (s->copy) {
		rc = -EEXIST;
		goto out;
	}
	struct sim_lane *lanes;
	rc = lanes_alloc(s, n, &lanes);
	if (rc)
		goto out;
	lanes_init(lanes, n, VE_LANE_COPY_ENTRY, NULL);
	s->copy = lanes;
	s->ncopy = n;
out:
	sim_unlock(s);
	return rc;
}

static int submit_op(struct ve_backend *b, uint32_t lane, const struct ve_desc *d, uint64_t cookie,
		     bool defer)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	struct sim_lane *l = find_lane(s, lane);
	struct sim_op m;
	memset(&m, 0, sizeof(m));
	if (!l || !d) {
		rc = -EINVAL;
		goto out;
	}
	rc = model_op(s, l, d, &m);
	if (rc)
		goto out;
	if (!s->nfree) {
		rc = -EAGAIN;
		goto out;
	}
	uint64_t call = ++s->st.submit_calls;
	if (call == s->fail_submit_at ||
	    (s->cfg.fail_submit_prob > 0 &&
	     hash_unit(s, SALT_SUBMIT_FAULT, call) < s->cfg.fail_submit_prob)) {
		if (call == s->fail_submit_at)
			s->fail_submit_at = 0;
		s->st.submit_faults++;
		rc = s->fail_submit_err;
		goto out;
	}
	uint32_t i = s->free_head;
	struct sim_op *o = &s->ops[i];
	s->free_head = o->next;
	s->nfree--;
	*o = m;
	o->desc = d;
	o->lane = l;
	o->cookie = cookie;
	o->seq = s->seq++;
	o->kind = d->kind;
	o->state = OP_QUEUED;
	o->next = NIL;
	o->lseq = ++l->lseq_next;
	o->deferred = defer && s->cfg.defer_reports;
	o->t_submit = now_of(s) + s->cfg.submit_latency_ns;
	apply_jitter(s, o);
	/* Execution faults are numbered like seq, 1-based. */
	if (o->seq + 1 == s->fail_exec_at) {
		o->status = s->fail_exec_status;
		s->fail_exec_at = 0;
	} else if (s->cfg.fail_exec_prob > 0 &&
		   hash_unit(s, SALT_EXEC_FAULT, o->seq) < s->cfg.fail_exec_prob) {
		o->status = s->fail_exec_status;
	}
	if (l->tail == NIL) {
		l->head = l->tail = i;
		pend_add(s, l);
	} else {
		s->ops[l->tail].next = i;
		l->tail = i;
	}
	s->nqueued++;
	s->st.submitted[o->kind]++;
out:
	sim_unlock(s);
	return rc;
}

static int sim_submit(struct ve_backend *b, uint32_t lane, const struct ve_desc *d, uint64_t cookie)
{
	return submit_op(b, lane, d, cookie, false);
}

static int sim_submit_deferred(struct ve_backend *b, uint32_t lane, const struct ve_desc *d,
			       uint64_t cookie)
{
	return submit_op(b, lane, d, cookie, true);
}

static int sim_flush(struct ve_backend *b, uint32_t lane)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	struct sim_lane *l = find_lane(s, lane);
	if (l)
		l->flush_upto = l->lseq_next;
	sim_unlock(s);
	return l ? 0 : -ENOENT;
}

static bool reportable(const struct sim_op *o)
{
	const struct sim_lane *l = o->lane;
	return !o->deferred || o->lseq <= l->report_upto || o->lseq <= l->flush_upto;
}

static void hold(struct sim *s, uint32_t i)
{
	struct sim_lane *l = s->ops[i].lane;
	s->ops[i].next = NIL;
	if (l->held_tail == NIL)
		l->held_head = i;
	else
		s->ops[l->held_tail].next = i;
	l->held_tail = i;
	l->nheld++;
	s->nheld++;
	if (!l->on_held) {
		l->on_held = true;
		l->held_next = s->held_lanes;
		s->held_lanes = l;
	}
}

static void report(struct sim *s, uint32_t i, struct ve_completion *out)
{
	struct sim_op *o = &s->ops[i];
	out->cookie = o->cookie;
	out->status = o->status;
	out->lane = o->lane->id;
	out->t_submit_ns = o->t_submit;
	out->t_start_ns = o->t_start;
	out->t_end_ns = o->t_end;
	o->state = OP_FREE;
	o->desc = NULL;
	o->next = s->free_head;
	s->free_head = i;
	s->nfree++;
}

/* Reports lane l's held ops up to (and including) lane number upto, in order. */
static int release_held(struct sim *s, struct sim_lane *l, uint64_t upto, struct ve_completion *out,
			int max)
{
	int n = 0;
	while (n < max && l->held_head != NIL && s->ops[l->held_head].lseq <= upto) {
		uint32_t i = l->held_head;
		l->held_head = s->ops[i].next;
		if (l->held_head == NIL)
			l->held_tail = NIL;
		l->nheld--;
		s->nheld--;
		report(s, i, &out[n++]);
	}
	return n;
}

static int sim_poll(struct ve_backend *b, struct ve_completion *out, int max)
{
	struct sim *s = to_sim(b);
	if (!s || (max > 0 && !out))
		return -EINVAL;
	if (max <= 0)
		return 0;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	int n = 0;
	/* Held ops a flush made reportable since the last poll. */
	for (struct sim_lane **pl = &s->held_lanes; *pl && n < max;) {
		struct sim_lane *l = *pl;
		n += release_held(s, l, l->flush_upto, out + n, max - n);
		if (l->held_head == NIL) {
			l->on_held = false;
			*pl = l->held_next;
		} else {
			pl = &l->held_next;
		}
	}
	while (n < max && s->ndone) {
		uint32_t i = s->done[s->done_head];
		struct sim_op *o = &s->ops[i];
		struct sim_lane *l = o->lane;
		if (reportable(o) && l->held_head != NIL) {
			/* Everything held before it on its lane goes first. */
			n += release_held(s, l, o->lseq, out + n, max - n);
			if (n == max)
				break;
		}
		s->done_head = (s->done_head + 1) % s->cap;
		s->ndone--;
		if (!reportable(o)) {
			hold(s, i);
			continue;
		}
		report(s, i, &out[n++]);
	}
	sim_unlock(s);
	return n;
}

static int sim_wait(struct ve_backend *b, uint64_t timeout_ns)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	if (!s->ndone && s->cfg.wait_advances && s->nrunning + s->nqueued) {
		uint64_t now = now_of(s);
		uint64_t limit = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
		run(s, limit, true);
		if (!s->ndone && limit != UINT64_MAX) {
			move_to(s, limit);
			settle(s);
		}
	}
	bool flushed = false;
	for (struct sim_lane *l = s->held_lanes; l && !flushed; l = l->held_next)
		flushed = l->held_head != NIL && s->ops[l->held_head].lseq <= l->flush_upto;
	rc = s->ndone || flushed ? 0 : -EAGAIN;
	sim_unlock(s);
	return rc;
}

static uint64_t sim_now(struct ve_backend *b)
{
	struct sim *s = to_sim(b);
	return s ? now_of(s) : 0;
}

static void sim_destroy(struct ve_backend *b)
{
	struct sim *s = to_sim(b);
	if (!s)
		return;
	for (uint32_t i = 0; i < VE_SIM_MAX_ENTRIES; i++)
		free(s->entries[i].lanes);
	free(s->copy);
	free(s->ops);
	free(s->running);
	free(s->tmp);
	free(s->needs);
	free(s->done);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

const struct ve_backend_ops ve_sim_backend_ops = {
    .version = VE_BACKEND_OPS_VERSION,
    .name = "sim",
    .info = sim_info,
    .entry_create = sim_entry_create,
    .copy_lanes_create = sim_copy_lanes_create,
    .submit = sim_submit,
    .poll = sim_poll,
    .wait = sim_wait,
    .now = sim_now,
    .destroy = sim_destroy,
    .submit_deferred = sim_submit_deferred,
    .flush = sim_flush,
    .caps = VE_BACKEND_CAP_VIRTUAL_CLOCK,
};

int ve_sim_create(const struct ve_sim_config *cfg, struct ve_backend **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	struct ve_sim_config c;
	if (cfg)
		c = *cfg;
	else
		ve_sim_config_default(&c);
	int rc = resolve_config(&c);
	if (rc)
		return rc;
	struct sim *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &ve_sim_backend_ops;
	s->cfg = c;
	snprintf(s->name, sizeof(s->name), "%s", c.name);
	s->cfg.name = s->name;
	uint32_t sm = 0;
	for (uint32_t l = 0; l < c.nleaves; l++) {
		s->first_sm[l] = sm;
		sm += c.leaf_sms[l];
	}
	s->cap = c.capacity;
	s->ops = calloc(s->cap, sizeof(*s->ops));
	s->done = calloc(s->cap, sizeof(*s->done));
	if (!s->ops || !s->done) {
		free(s->ops);
		free(s->done);
		free(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->cap; i++)
		s->ops[i].next = i + 1 < s->cap ? i + 1 : NIL;
	s->free_head = 0;
	s->nfree = s->cap;
	s->fail_submit_at = c.fail_submit_nth;
	s->fail_submit_err = c.fail_submit_err;
	s->fail_exec_at = c.fail_exec_nth;
	s->fail_exec_status = c.fail_exec_status;
	atomic_init(&s->now, 0);
	pthread_mutex_init(&s->mu, NULL);
	*out = &s->base;
	return 0;
}

/* ---- sim-only API --------------------------------------------------------- */

uint64_t ve_sim_now(struct ve_backend *b)
{
	return sim_now(b);
}

int ve_sim_advance(struct ve_backend *b, uint64_t *t_next)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	if (!s->nrunning && !s->nqueued) {
		rc = -ENODATA;
	} else {
		run(s, UINT64_MAX, true);
		if (t_next)
			*t_next = now_of(s);
	}
	sim_unlock(s);
	return rc;
}

void ve_sim_advance_to(struct ve_backend *b, uint64_t t)
{
	struct sim *s = to_sim(b);
	if (!s || sim_lock(s))
		return;
	run(s, t, false);
	if (t < SIM_NOW_MAX) {
		move_to(s, t);
		settle(s);
	}
	sim_unlock(s);
}

int ve_sim_peek(struct ve_backend *b, uint64_t *t_next)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	settle(s);
	uint64_t t = next_event(s);
	if (t == UINT64_MAX) {
		rc = -ENODATA;
	} else if (t_next) {
		*t_next = t;
	}
	sim_unlock(s);
	return rc;
}

int ve_sim_outstanding(struct ve_backend *b)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	bool held = cb_sim == s; /* a callback of ours: the lock is this thread's */
	if (!held)
		pthread_mutex_lock(&s->mu);
	int n = (int)(s->nrunning + s->nqueued);
	if (!held)
		pthread_mutex_unlock(&s->mu);
	return n;
}

int ve_sim_stats(struct ve_backend *b, struct ve_sim_stats *out)
{
	struct sim *s = to_sim(b);
	if (!s || !out)
		return -EINVAL;
	bool held = cb_sim == s;
	if (!held)
		pthread_mutex_lock(&s->mu);
	*out = s->st;
	out->now_ns = now_of(s);
	out->running = s->nrunning;
	out->queued = s->nqueued;
	out->unpolled = s->ndone;
	out->held = s->nheld;
	out->nentries = s->nentries;
	for (uint32_t i = 0; i < VE_SIM_MAX_ENTRIES; i++) {
		out->entry_busy_ns[i] = s->entries[i].busy_ns;
		out->entry_ops[i] = s->entries[i].ops;
	}
	if (!held)
		pthread_mutex_unlock(&s->mu);
	return 0;
}

int ve_sim_fail_submit(struct ve_backend *b, uint64_t nth, int err)
{
	struct sim *s = to_sim(b);
	if (!s || err > 0)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	s->fail_submit_at = nth ? s->st.submit_calls + nth : 0;
	s->fail_submit_err = err ? err : -EIO;
	sim_unlock(s);
	return 0;
}

int ve_sim_fail_exec(struct ve_backend *b, uint64_t nth, int status)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	int rc = sim_lock(s);
	if (rc)
		return rc;
	s->fail_exec_at = nth ? s->seq + nth : 0;
	s->fail_exec_status = status ? status : -EFAULT;
	sim_unlock(s);
	return 0;
}

int ve_sim_predict(struct ve_backend *b, uint32_t lane, const struct ve_desc *d, uint64_t *dur_ns,
		   uint32_t *demand)
{
	struct sim *s = to_sim(b);
	if (!s)
		return -EINVAL;
	bool held = cb_sim == s;
	if (!held)
		pthread_mutex_lock(&s->mu);
	struct sim_op m;
	memset(&m, 0, sizeof(m));
	struct sim_lane *l = find_lane(s, lane);
	int rc = l ? model_op(s, l, d, &m) : -EINVAL;
	if (!held)
		pthread_mutex_unlock(&s->mu);
	if (rc)
		return rc;
	if (dur_ns)
		*dur_ns = m.dur;
	if (demand)
		*demand = m.demand;
	return 0;
}

int ve_sim_entry_sms(struct ve_backend *b, uint32_t idx, uint64_t sms[VE_SIM_SM_WORDS],
		     uint32_t *nsms)
{
	struct sim *s = to_sim(b);
	if (!s || !sms)
		return -EINVAL;
	bool held = cb_sim == s;
	if (!held)
		pthread_mutex_lock(&s->mu);
	int rc = 0;
	if (idx >= VE_SIM_MAX_ENTRIES || !s->entries[idx].live) {
		rc = -ENOENT;
	} else {
		memcpy(sms, s->entries[idx].sms, sizeof(s->entries[idx].sms));
		if (nsms)
			*nsms = s->entries[idx].nsms;
	}
	if (!held)
		pthread_mutex_unlock(&s->mu);
	return rc;
}
