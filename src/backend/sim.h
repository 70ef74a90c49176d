/* SPDX-License-Identifier: MIT */
/*
 * Simulated GPU backend (docs/architecture.md, "Simulated GPU"): a modelled GPU in virtual
 * time for the unit tests of the dispatcher and for ve-sim. The model itself
 * (SM sets, waves, processor sharing of SMs, one memory bandwidth shared by
 * max-min fairness, copy engines) is described at the top of sim.c and in
 * docs/architecture.md, "Simulated GPU".
 *
 * Time. Nothing runs by itself: virtual time moves only through
 * ve_sim_advance() (to the next completion) and ve_sim_advance_to(); with
 * cfg.wait_advances the backend's wait() moves it too. poll() returns the
 * completions whose end time is <= now, in time order, ties broken by
 * submission order. The backend's wait() never blocks real time.
 *
 * Determinism. The same configuration and the same sequence of calls give the
 * same completion times, statuses and order, bit for bit: all randomness
 * (jitter, fault probabilities) is a hash of (seed, submission number), never
 * of wall time or of processing order.
 *
 * Descriptors are not copied: a descriptor passed to submit must stay valid
 * and unchanged until poll() has returned its completion (the dispatcher's
 * vctx keeps it until the op's token is satisfied, which is later).
 *
 * Threads. Every entry point may be called from any thread (one mutex). The
 * models, the event hook, host functions and (with cfg.invoke_calls)
 * VE_OP_CALL functions run with that mutex held, on the thread that moves time: from inside them
 * only now(), ve_sim_now(), ve_sim_stats(), ve_sim_outstanding(),
 * ve_sim_predict() and ve_sim_entry_sms() may be called; anything that
 * changes the sim fails with -EDEADLK instead of deadlocking.
 */
#ifndef VE_BACKEND_SIM_H
#define VE_BACKEND_SIM_H

#include "backend/backend.h"

#include <stdbool.h>
#include <stdint.h>

#define VE_SIM_MAX_SMS	   256
#define VE_SIM_SM_WORDS	   (VE_SIM_MAX_SMS / 64)
#define VE_SIM_MAX_ENTRIES 256 /* = VE_POOL_MAX_ENTRIES: entry idx < 256 */
#define VE_SIM_MAX_LANES   256 /* per entry and copy lanes: VE_LANE's 8-bit stream field */

/* Per-kernel timing. Alone: T(m) = max(t_floor, t_launch + waves(m) * t_wave).
 * t_floor is the time the kernel's memory traffic takes with the whole GPU's
 * memory bandwidth; concurrent kernels share that bandwidth (sim.c). */
struct ve_sim_kernel_params {
	uint64_t t_wave_ns;	/* one wave of resident blocks on SMs the kernel owns */
	uint64_t t_launch_ns;	/* fixed per-launch cost (ramp up/down, launch latency) */
	uint64_t t_floor_ns;	/* memory traffic in ns of the whole bandwidth; 0 = none */
	uint32_t blocks_per_sm; /* resident blocks per SM; 0 = derive */
	uint32_t pad;
};

/* Kernel model: fills *out for descriptor d. *out arrives pre-filled with the
 * configured defaults and the derived blocks_per_sm, so a model sets only what
 * it knows. A non-zero return means "unknown": the defaults are used. */
typedef int (*ve_sim_kernel_model_fn)(void *arg, const struct ve_desc *d,
				      struct ve_sim_kernel_params *out);
/* Model for ops that use no SMs (copies, memsets, event records, calls):
 * *dur_ns arrives pre-filled with the copy-model duration; non-zero return =
 * use it unchanged. */
typedef int (*ve_sim_op_model_fn)(void *arg, const struct ve_desc *d, uint32_t lane,
				  uint64_t *dur_ns);

enum ve_sim_event_kind { VE_SIM_EV_START = 1, VE_SIM_EV_END = 2 };

struct ve_sim_event {
	uint32_t kind;	/* enum ve_sim_event_kind */
	uint32_t lane;	/* VE_LANE value */
	uint32_t entry; /* pool entry, VE_LANE_COPY_ENTRY for copy lanes */
	int32_t status; /* END: the completion status; START: 0 */
	uint64_t cookie;
	uint64_t seq;  /* submission number (0-based, accepted submits only) */
	uint64_t t_ns; /* virtual time of the event */
	uint64_t t_submit_ns;
	uint64_t t_start_ns;
	uint32_t demand; /* SMs the op asks for (kernels), 0 for ops that use no SMs */
	uint32_t nsms;	 /* SMs in sms[] (the entry's SM set), 0 for ops that use no SMs */
	uint64_t leaves; /* leaf mask of those SMs */
	uint64_t sms[VE_SIM_SM_WORDS]; /* SM bitmask: bit s of word s/64 = SM s */
	const struct ve_desc *desc;
};

typedef void (*ve_sim_event_fn)(void *arg, const struct ve_sim_event *ev);

/*
 * Configuration. Start from ve_sim_config_default() (create(NULL) means
 * exactly that). Shape fields where 0 is meaningless (marked "0 = default")
 * fall back to their default when left 0; time fields are taken as given, so
 * a zeroed struct means zero latencies.
 */
enum { VE_SIM_SHARE_FAIR = 0, VE_SIM_SHARE_FIFO, VE_SIM_SHARE_PRIORITY };

struct ve_sim_config {
	const char *name; /* info()->name; NULL = "vitamin-e sim" */
	/* Shape. */
	uint32_t sm_count;		  /* 0 = 132 (H200); at most VE_SIM_MAX_SMS */
	uint32_t nleaves;		  /* 0 = derived split (see ve_sim_default_split) */
	uint32_t leaf_sms[VE_MAX_LEAVES]; /* leaf i = the next leaf_sms[i] SM ids */
	uint32_t min_partition_sms;	  /* 0 = 8 */
	uint32_t max_blocks_per_sm;	  /* 0 = 32 */
	uint32_t max_threads_per_sm;	  /* 0 = 2048 */
	uint32_t smem_per_sm;		  /* bytes, 0 = 233472 (228 KiB, Hopper) */
	uint32_t max_lanes_per_entry;	  /* 0 = 32, at most VE_SIM_MAX_LANES */
	uint32_t capacity;		  /* ops submitted and not yet polled; 0 = 65536 */
	uint64_t seed;
	/* Kernels. */
	struct ve_sim_kernel_params kernel;  /* defaults; t_wave_ns 0 = 10 us */
	ve_sim_kernel_model_fn kernel_model; /* NULL = defaults only */
	void *kernel_model_arg;
	/* Memory bandwidth. false: one bandwidth shared by every running kernel
	 * (max-min fair); true: each kernel's t_floor is its own (the model
	 * before bandwidth was shared: concurrent memory-bound kernels then get
	 * more bandwidth than the GPU has). */
	bool private_bandwidth;
	/* Kernels on common SMs (one entry's lanes, or overlapping entries).
	 * VE_SIM_SHARE_FAIR: fair processor sharing (each gets its demand's
	 * share of an oversubscribed SM); _FIFO: in the order the kernels
	 * started, each taking what it can use of an SM before a later one
	 * gets the rest (a kernel behind a wide one waits; the GPU starts a
	 * later kernel's blocks as the earlier one's last wave drains, which
	 * this rounds down to nothing); _PRIORITY: the same with kernels of
	 * latency ops (VE_DESC_LATENCY, whose lanes run at a higher stream
	 * priority) ahead of all others, at once (a GPU lets the running wave
	 * finish: an optimistic bound for the latency ops). */
	uint32_t share_model;
	/* Bytes per ns of that bandwidth, only for memcpy/memset: with it, a
	 * copy of N bytes needs N / mem_bytes_per_ns ns of the whole bandwidth
	 * and shares it with kernels. 0 (default) = copies take none. */
	double mem_bytes_per_ns;
	/* Ops without SMs: latency + bytes / rate; each lane is its own engine. */
	double copy_bytes_per_ns;    /* 0 = 50 (50 GB/s) */
	uint64_t copy_latency_ns;    /* default 2000 */
	double memset_bytes_per_ns;  /* 0 = 1000 (1 TB/s) */
	uint64_t memset_latency_ns;  /* default 1000 */
	uint64_t event_ns;	     /* VE_OP_EVENT_RECORD, default 1000 */
	uint64_t call_ns;	     /* VE_OP_CALL, default 1000 */
	ve_sim_op_model_fn op_model; /* NULL = the copy model above */
	void *op_model_arg;
	/* Host view. */
	uint64_t submit_latency_ns; /* op reaches its lane this long after submit; default 0 */
	double jitter;		    /* [0, 0.5): each duration scaled by U(1-j, 1+j) */
	bool wait_advances;	    /* wait(t) advances virtual time (<= t) to a completion */
	bool invoke_calls;	    /* run VE_OP_CALL's fn(lane, payload, len) at its start */
	/* submit_deferred really defers: such an op's completion is reported only
	 * with its lane's next marked op or after a flush of the lane, as the CUDA
	 * backend does (tests use it to prove nobody waits for an unflushed op).
	 * false: submit_deferred is submit. */
	bool defer_reports;
	/* Fault injection, decided at submit from the seed. Submit calls are
	 * counted once they pass validation and find a free op record. */
	uint64_t fail_submit_nth; /* the Nth submit call (1-based) fails; 0 = none */
	int32_t fail_submit_err;  /* 0 = -EIO */
	double fail_submit_prob;  /* each submit call fails with this probability */
	uint64_t fail_exec_nth;	  /* the Nth accepted op completes with fail_exec_status */
	int32_t fail_exec_status; /* 0 = -EFAULT (as an illegal address would) */
	double fail_exec_prob;
	/* Called at every op start and end, in virtual-time order. */
	ve_sim_event_fn on_event;
	void *on_event_arg;
};

struct ve_sim_stats {
	uint64_t now_ns;
	uint64_t submit_calls;	/* valid submit calls, injected failures included */
	uint64_t submit_faults; /* injected submit failures */
	uint64_t submitted[VE_OP_KIND_MAX];
	uint64_t started[VE_OP_KIND_MAX];
	uint64_t finished[VE_OP_KIND_MAX];
	uint64_t exec_faults;  /* completions with a non-zero status */
	double sm_busy_ns;     /* integral of sum over SMs of min(1, load): SM-ns of work */
	double sm_occupied_ns; /* integral of the number of SMs with any load */
	double bw_busy_ns;     /* integral of the bandwidth share handed out (1 = all of it);
				* <= now_ns unless private_bandwidth */
	uint64_t copy_busy_ns; /* sum over lanes of time running ops that use no SMs */
	uint32_t running;      /* ops running now */
	uint32_t queued;       /* ops submitted, not started */
	uint32_t unpolled;     /* completed, not yet returned by poll */
	uint32_t held;	       /* completed deferred ops waiting for a marker or a flush */
	uint32_t peak_running; /* most ops running at once (all kinds) */
	uint32_t peak_running_kernels;
	uint32_t nentries;			    /* highest created entry index + 1 */
	uint64_t entry_busy_ns[VE_SIM_MAX_ENTRIES]; /* time with >= 1 op running on the entry */
	uint64_t entry_ops[VE_SIM_MAX_ENTRIES];	    /* ops finished on the entry's lanes */
};

extern const struct ve_backend_ops ve_sim_backend_ops;

/* Fills every field with its documented default (H200: 132 SMs, 15 x 8 + 12). */
void ve_sim_config_default(struct ve_sim_config *cfg);

/* The split used when cfg.nleaves is 0: sm_count / min SMs leaves of 'min'
 * SMs, the remainder added to the last one (132 / 8 -> 15 x 8 + 12, as the
 * driver's cuDevSmResourceSplitByCount gives on the H200). Returns nleaves,
 * or -EINVAL if that needs more than VE_MAX_LEAVES leaves. */
int ve_sim_default_split(uint32_t sm_count, uint32_t min_sms, uint32_t leaf_sms[VE_MAX_LEAVES]);

/* -EINVAL for a bad configuration (the log names the field), -ENOMEM. */
int ve_sim_create(const struct ve_sim_config *cfg, struct ve_backend **out);

/* True if b was made by ve_sim_create (the functions below check it). */
bool ve_sim_is_sim(const struct ve_backend *b);

uint64_t ve_sim_now(struct ve_backend *b);
/* Runs virtual time until at least one more op completes (those that end at
 * that same instant complete too) and stores that time in *t_next (may be
 * NULL). -ENODATA if nothing is running or queued (time does not move). */
int ve_sim_advance(struct ve_backend *b, uint64_t *t_next);
/* Runs virtual time to t (no-op if t <= now, except that work due now runs).
 * t >= 2^62 means "until idle": everything runs and the clock stays at the
 * last event, so advance_to(UINT64_MAX) drains the sim. */
void ve_sim_advance_to(struct ve_backend *b, uint64_t t);
/* Runs what is due at the current instant (time does not move), then stores
 * in *t_next the time of the next event: an op's end, or a queued op reaching
 * its lane. That is a lower bound of the next completion, so advancing to it
 * never skips one. -ENODATA if nothing is running or queued. */
int ve_sim_peek(struct ve_backend *b, uint64_t *t_next);
/* Ops submitted and not yet completed (running or queued). */
int ve_sim_outstanding(struct ve_backend *b);
int ve_sim_stats(struct ve_backend *b, struct ve_sim_stats *out);

/* Arm fault injection relative to now: the nth next submit call fails with
 * err (0 = -EIO), or the nth next accepted op completes with status (0 =
 * -EFAULT). nth 0 disarms. One of each can be armed at a time. */
int ve_sim_fail_submit(struct ve_backend *b, uint64_t nth, int err);
int ve_sim_fail_exec(struct ve_backend *b, uint64_t nth, int status);

/* Duration d would take alone on 'lane' (no sharing, no jitter); also
 * validates d for that lane exactly as submit does (-EINVAL). *demand (may
 * be NULL) gets the SMs it would ask for. */
int ve_sim_predict(struct ve_backend *b, uint32_t lane, const struct ve_desc *d, uint64_t *dur_ns,
		   uint32_t *demand);

/* SM set of entry idx (-ENOENT if not created). */
int ve_sim_entry_sms(struct ve_backend *b, uint32_t idx, uint64_t sms[VE_SIM_SM_WORDS],
		     uint32_t *nsms);

#endif
