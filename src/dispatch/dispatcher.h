/* SPDX-License-Identifier: MIT */
/*
 * The client-side dispatcher (paper section 4.4, docs/architecture.md,
 * "Dispatch"): moves
 * ready ops from vctxs to where they run, submits bindings, and propagates
 * completions.
 *
 *   compute ops -> coordinator ready queue -> policy -> binding -> submit the
 *                  unchanged descriptor on a lane of the bound entry
 *   copies, memsets, timed event records, plain calls -> a copy lane
 *   host functions -> the host executor (a thread, or inline for the sim)
 *   completion -> vctx token satisfied (dependents become ready) and the
 *                 coordinator's outstanding count for the entry decremented
 *
 * A binding whose submission fails goes back to the coordinator's ready
 * queue at its age; the op is never lost or run twice. Strict late binding
 * (window 0): an op is submitted only after all its predecessors completed.
 *
 * Threading: ve_dispatcher_poll() does one pass and may be driven by a test
 * or ve-sim; ve_dispatcher_start() runs passes on a thread of its own that
 * spins while work is in flight and sleeps when idle.
 */
#ifndef VE_DISPATCH_DISPATCHER_H
#define VE_DISPATCH_DISPATCHER_H

#include "backend/backend.h"
#include "core/vctx.h"
#include "coord/coord.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct ve_trace;

struct ve_link;

struct ve_dispatcher_config {
	struct ve_backend *backend;
	const struct ve_link *link; /* the coordinator, embedded or ved; copied (the caller
				     * keeps what it owns and frees it after the dispatcher) */
	uint32_t lanes_per_entry; /* backend streams per pool entry (default 4) */
	uint32_t copy_lanes;	  /* default 4 */
	uint32_t max_inflight;	  /* default 16384 */
	bool host_inline;	  /* run host functions inside poll() (sim, tests) */
	uint32_t window;	  /* pipelining window K per logical stream; 0 = strict late
				   * binding (the paper's behaviour) */
	uint32_t pipe_budget;	  /* with other clients active: pipelined ops per stream
				   * between two policy bindings (0 = none then) */
	/* Grant mode (the coordinator grants entries, this dispatcher binds):
	 * a stream's successors are submitted right behind their predecessor on
	 * its lane while the lane holds less than ahead_ns of predicted work and
	 * fewer than ahead_max ops. This keeps launch-bound jobs fed and bounds
	 * how long a grant that shrinks takes to drain. */
	uint64_t ahead_ns;	  /* default 150 us; 0 = submit only ready ops */
	uint64_t ahead_alone_ns;  /* the bound while no other client could want the SMs
				   * (default 2 ms): more ahead, fewer GPU bubbles */
	uint32_t ahead_max;	  /* default 256 */
	/* An entry lent to a client for short kernels (ve_grant_plan.lend)
	 * takes kernels predicted to run at most lend_ns there, up to lend_ns
	 * of predicted work per lane (default 400 us): what taking it back
	 * waits for. */
	uint64_t lend_ns;
	/* Completion markers: at least every mark_every ops on an entry lane
	 * (default 16; 1 = after every op); deferred completions of a lane are
	 * reported at once when a thread waits, when its entry's grant ends,
	 * and after idle_flush_ns without a new submission (default 20 us). */
	uint32_t mark_every;
	uint64_t idle_flush_ns;
	/* A kernel predicted to run at least 2 * idle_flush_ns, sent to an
	 * idle lane, gets no marker of its own: the next op of its lane
	 * carries it (a copy), or it is written before that op (a kernel).
	 * One such kernel in 64 is still marked, a profile sample. Off by
	 * default (VE_MARK_LONG_TAIL): not yet measured on a GPU. */
	bool long_tail;
	/* Grant mode, with another process on the GPU: find the phase in which
	 * this client's host gaps fall while the other's kernels run
	 * (dispatch/phase.h; VE_PHASE). Off by default: not yet measured. */
	bool phase;
	/* Bind deadline (VE_WATCHDOG_MS; 0 = off): in grant mode an op waiting
	 * this long for a grant that can run it is submitted on the root
	 * entry's lane, the safe fallback (whole GPU, descriptor unchanged),
	 * sharing SMs with whatever the others are granted: the coordinator
	 * does not count those SMs busy for this client (a report cannot claim
	 * SMs beyond its grants), so the fallback costs the others a share of
	 * their SMs while it runs, not a drain. A lane with work and no
	 * completion for this long logs the dispatcher's state once. */
	uint64_t watchdog_ns;
	/* Real-clock backends, work in flight and nothing to do: after a short
	 * spin, poll completions at most this far apart (default 20 us; a
	 * notify cuts the sleep short). Shorter: completions seen sooner;
	 * longer: fewer wake-ups taking CPU from the application. */
	uint64_t poll_ns;
	/* Real-clock backends, nothing in flight and nothing ready: spin this
	 * long before sleeping (0 = sleep at once). A program that synchronizes
	 * every step (a decode loop) submits its next op microseconds after the
	 * last completes; a sleeping dispatcher costs it a futex wake-up, tens
	 * of microseconds a step. */
	uint64_t idle_spin_ns;
	/* Real-clock backends, work in flight while an application thread
	 * waits for this process's work (a synchronize, a read-back): poll
	 * without sleeping for up to this long from when the wait began (the
	 * waiter's own spin, VE_SYNC_SPIN_US; 0 = as without a waiter). A poll
	 * interval's sleep there is completion latency the waiter pays, up to
	 * poll_ns plus a wake-up every synchronized step. */
	uint64_t wait_spin_ns;
	/* What a client wants in grant mode (VE_WANT): false = the fewest SMs
	 * that hold each launch's blocks in one wave (fill), true = one SM per
	 * block up to the whole GPU (spread). */
	bool want_spread;
	struct ve_trace *trace;	  /* optional */
	/* Optional observer of every submission and completion (tests). */
	void (*on_submit)(void *arg, uint32_t client, ve_tok tok, uint32_t lane,
			  const struct ve_desc *d);
	void (*on_complete)(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status);
	/* Optional observer of every compute binding whose submission succeeded,
	 * called after on_submit, with the policy's VE_BIND_* flags in b->flags:
	 * tests check that running kernels share SMs only when a binding asked to. */
	void (*on_bind)(void *arg, const struct ve_binding *b, uint32_t lane);
	void *observer_arg;
};

struct ve_dispatcher_stats {
	uint64_t passes, popped, bound, submitted, submit_failures, completed, host_fns, copies;
	uint64_t pipelined; /* ops submitted behind their in-flight predecessor */
	uint64_t sleeps, wakeups;
	uint64_t idle_sleeps; /* sleeps with nothing in flight (a notify wakes them) */
	uint64_t wait_sleeps; /* sleeps with work in flight while an app thread waited */
	uint32_t inflight;
	/* Grant mode. */
	uint64_t local_binds;	/* ready ops bound to their client's grant here */
	uint64_t granted;	/* kernels submitted on their client's grant or lend */
	uint64_t lend_binds;	/* ... of them on an entry lent to their client */
	uint64_t grant_waits;	/* ops that waited for a (wider) grant */
	uint64_t grant_changes; /* grant changes seen */
	uint64_t ahead_full;	/* candidates held back by the lane's bound, retried later */
	uint64_t deferred, marks, flushes; /* completion markers saved, written, forced */
	uint64_t long_tails; /* long kernels whose marker waited for their stream's next op */
	uint64_t phase_holds, phase_hold_ns; /* VE_PHASE: steps held, and for how long */
	uint64_t phase_tries, phase_kept;    /* ... tries of a new phase, and those kept */
	uint64_t watchdog_binds;	   /* ops the bind deadline sent to the root entry */
	uint64_t stuck_lanes;		   /* lanes found without progress for the deadline */
	uint64_t late_ops; /* latency ops that finished after their deadline (advice, VE_TPOT_MS) */
	/* Driver submissions that held this thread 1 ms or more (a kernel's
	 * lazy loading, a driver lock): it neither polls nor answers the
	 * coordinator meanwhile. */
	uint64_t slow_submits, slow_submit_ns, submit_ns_max;
};

struct ve_dispatcher;

int ve_dispatcher_create(const struct ve_dispatcher_config *cfg, struct ve_dispatcher **out);

/* SMs a launch of 'blocks' blocks could use at once, at most 'total': with
 * spread, one per block; else its blocks over the blocks an SM holds (bps,
 * or 2048 / threads when unknown), the fewest SMs that run it in one wave.
 * Fill is what the simulator's wave model rewards; on a GPU a narrow,
 * memory-bound kernel also runs faster with its blocks on more SMs. */
uint32_t ve__launch_sms(uint64_t blocks, uint32_t bps, uint32_t threads, uint32_t total,
			bool spread);
/* Stops the thread if running; in-flight work is abandoned (sync first). */
void ve_dispatcher_destroy(struct ve_dispatcher *d);

/* Attach a vctx as client 'client' (also registers it with the coordinator).
 * -EBUSY while the work of a client detached from that slot still runs.
 * Set the vctx's notify_ready to ve_dispatcher_notify with the dispatcher as
 * its argument so a sleeping dispatcher thread wakes for new work. */
int ve_dispatcher_attach(struct ve_dispatcher *d, struct ve_vctx *v, uint32_t client,
			 uint32_t flags);
int ve_dispatcher_detach(struct ve_dispatcher *d, uint32_t client);
void ve_dispatcher_notify(void *dispatcher);

/* One pass: ready ops in, bindings out, completions back. Returns the number
 * of things it moved (0 = nothing to do right now). */
int ve_dispatcher_poll(struct ve_dispatcher *d);
/* Nothing ready, nothing in flight, nothing queued for the host executor. */
bool ve_dispatcher_quiescent(struct ve_dispatcher *d);
uint32_t ve_dispatcher_inflight(struct ve_dispatcher *d);
/* Grant mode: ops waiting for a grant (their client's grant cannot run
 * them yet). While there are any, the dispatcher thread polls, and so
 * ticks the coordinator, every VE_POLL_US; a driver of virtual time
 * (ve-sim) must let it run at least every grant tick. */
uint32_t ve_dispatcher_waiting(struct ve_dispatcher *d);

/* A lookahead advisory (e.g. a decode step is about to start) for the policy. */
int ve_dispatcher_hint(struct ve_dispatcher *d, const struct ve_hint *h);

int ve_dispatcher_start(struct ve_dispatcher *d);
void ve_dispatcher_stop(struct ve_dispatcher *d);
/* The dispatcher thread's own counters, unsynchronized: read them with the
 * thread stopped (or from it). */
void ve_dispatcher_stats(struct ve_dispatcher *d, struct ve_dispatcher_stats *st);
/* Grant state, waiting ops and lanes with work, for stuck-state dumps. Read
 * from the dispatcher's own thread (or with it stopped). */
void ve_dispatcher_dump(struct ve_dispatcher *d, FILE *f);

#endif
