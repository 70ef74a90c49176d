/* Step phase of a client that shares the GPU (VE_PHASE): a program that
 * synchronizes every step (a decode server: a graph, a read-back, a few
 * microseconds of host work, the next graph) leaves the GPU a host gap per
 * step. Two such programs side by side lock into a phase and keep it: with
 * their gaps together the GPU idles in both; with their gaps apart each
 * gap is filled by the other's kernels. Which one a pair falls into is an
 * accident of how they started.
 *
 * This is the client's side of it, alone (no word from the other client is
 * needed): it times its own steps (from one op after an idle gap to the
 * next) over windows; while another process shares the GPU it now and then
 * holds one step's first op for half a step, which moves its phase against
 * the other's by half a step. The next window says what that did: steps
 * shorter, the new phase is kept; longer, it is taken back at once (another
 * half step) and the old one kept; no change beyond the windows' own noise,
 * the next try waits longer each time. Holding an op changes when it runs,
 * never what it computes. Off by default until measured on a GPU. Pure
 * logic on the caller's clock: unit-tested apart (tests/unit/test_phase.c).
 */
#ifndef VE_DISPATCH_PHASE_H
#define VE_DISPATCH_PHASE_H

#include <stdbool.h>
#include <stdint.h>

#define VE__PHASE_WINDOW 256u	   /* steps a window */
#define VE__PHASE_MAX_STEP 20000000ull /* a longer step is a pause, not a step: not counted */
#define VE__PHASE_GAIN_PPM 3000u   /* a try succeeds when steps get this much shorter */
#define VE__PHASE_WORSE_PPM 8000u  /* a kept phase this much slower than its best: try again */
#define VE__PHASE_MAX_BACKOFF 16u  /* windows between failed tries, at most */

enum ve__phase_state {
	VE__PHASE_MEASURE = 0, /* timing windows; a try when backoff runs out */
	VE__PHASE_TRY = 1,     /* a step was held: this window says whether it paid */
	VE__PHASE_KEEP = 2,    /* a try paid: keep it while it stays that fast */
};

struct ve__phase {
	uint64_t last_start;   /* the previous step's start (0: none yet) */
	uint64_t sum, n;       /* this window's step times */
	uint64_t base;	       /* the mean step before the try (ns) */
	uint64_t best;	       /* KEEP: the mean step the try reached */
	uint64_t prev;	       /* the previous window's mean step (0: none) */
	uint32_t noise_ppm;    /* how much a window's mean moves on its own (EWMA) */
	bool moved;	       /* a hold of ours or a pause lies in this window: no noise sample */
	uint64_t rng;	       /* decides which windows try (two clients must not try together) */
	uint32_t backoff;      /* windows to wait before the next try */
	uint32_t wait;	       /* windows left to wait */
	uint8_t state;	       /* enum ve__phase_state */
	bool skip;	       /* the next step time holds a hold: not counted */
	/* Counters, for the exit line. */
	uint64_t tries, kept, holds_ns;
};

void ve__phase_init(struct ve__phase *p, uint64_t seed);
/* A step starts at 'now' (the first op after the client had nothing in
 * flight and nothing waiting). 'contended': another process shares the GPU.
 * Returns how long to hold that op (0: submit it now). */
uint64_t ve__phase_step(struct ve__phase *p, uint64_t now, bool contended);

#endif
