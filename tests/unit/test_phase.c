/* SPDX-License-Identifier: MIT */
/*
 * VE_PHASE's step-phase logic (dispatch/phase.h) against a model of two
 * decode servers that share a GPU: they run in lock-step, a step takes
 * SLOW while their host gaps fall together and FAST while they alternate,
 * and a hold of half a step by one of them (not both) moves them from one
 * phase to the other.
 */
#include "../harness.h"

#include "dispatch/phase.h"

#define SLOW 775000ull /* ns a step, gaps together */
#define FAST 757000ull /* gaps apart: the other's kernels fill them (2.3%) */

struct world {
	bool apart;	     /* the phase the pair is in */
	uint32_t noise;	     /* each window's steps scaled by up to +-noise/1000 */
	uint64_t scale_ppm;  /* this window's scale (1e6: none) */
	uint64_t rng;
	uint64_t slow, fast; /* a step in each */
	uint32_t pause_every; /* a host pause longer than any step every so many steps (0: none) */
	uint64_t now;
	uint64_t holds;
	uint64_t steps_apart, steps;
};

/* One step of both clients (b may be NULL: a client alone with a phase
 * that depends only on its holds). */
static void world_step(struct world *w, struct ve__phase *a, struct ve__phase *b, bool contended)
{
	uint64_t ha = ve__phase_step(a, w->now, contended);
	uint64_t hb = b ? ve__phase_step(b, w->now, contended) : 0;
	if ((ha != 0) != (hb != 0))
		w->apart = !w->apart;
	w->holds += (ha != 0) + (hb != 0);
	if (w->noise && w->steps % 100 == 0) { /* windows that drift by themselves */
		w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
		w->scale_ppm = 1000000u - w->noise * 1000u + (w->rng >> 33) % (2u * w->noise * 1000u + 1u);
	}
	uint64_t step = w->apart ? w->fast : w->slow;
	if (w->noise)
		step = step * w->scale_ppm / 1000000u;
	w->now += step + (ha > hb ? ha : hb);
	if (w->pause_every && w->steps % w->pause_every == w->pause_every - 1)
		w->now += VE__PHASE_MAX_STEP + 1;
	w->steps++;
	w->steps_apart += w->apart;
}

/* Two clients' logic, seeded apart (as two processes are). */
static void pair_init(struct ve__phase *a, struct ve__phase *b, uint64_t seed)
{
	ve__phase_init(a, seed);
	ve__phase_init(b, seed + 1);
}

/* n windows of steps of both clients (b NULL: a alone), contended or not. */
static void run_windows(struct world *w, struct ve__phase *a, struct ve__phase *b, int n,
			bool contended)
{
	for (int i = 0; i < n * (int)VE__PHASE_WINDOW; i++)
		world_step(w, a, b, contended);
}

static struct world world(uint64_t slow, uint64_t fast)
{
	return (struct world){.slow = slow, .fast = fast, .now = 1000000000ull, .scale_ppm = 1000000u};
}

VE_TEST(alone_it_never_holds)
{
	struct ve__phase p;
	ve__phase_init(&p, 7);
	struct world w = world(SLOW, FAST);
	run_windows(&w, &p, NULL, 40, false);
	VE_CHECK_EQ(w.holds, 0u);
	VE_CHECK_EQ(p.tries, 0u);
}

/* The pair starts with its gaps together; both clients run the logic with
 * their own seeds: they find the faster phase and stay in it. */
VE_TEST(a_pair_finds_the_faster_phase_and_keeps_it)
{
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct ve__phase a, b;
		ve__phase_init(&a, seed * 2654435761u);
		ve__phase_init(&b, seed * 40503u + 99);
		struct world w = world(SLOW, FAST);
		run_windows(&w, &a, &b, 30, true);
		VE_CHECK_MSG(w.apart, "seed %llu: ends with the gaps together", (unsigned long long)seed);
		VE_CHECK_MSG(w.steps_apart * 2 > w.steps, "seed %llu: apart %llu of %llu steps",
			     (unsigned long long)seed, (unsigned long long)w.steps_apart,
			     (unsigned long long)w.steps);
		VE_CHECK_MSG(w.holds <= 12, "seed %llu: %llu holds", (unsigned long long)seed,
			     (unsigned long long)w.holds);
		/* Once found, nobody moves it: no hold in the last 10 windows. */
		uint64_t h0 = w.holds;
		run_windows(&w, &a, &b, 10, true);
		VE_CHECK_EQ(w.holds, h0);
		VE_CHECK(w.apart);
	}
}

/* Where the phase does not matter, tries get rarer: the cost is bounded
 * (at most one hold of half a step every VE__PHASE_MAX_BACKOFF windows once
 * backed off). */
VE_TEST(tries_that_do_not_pay_back_off)
{
	struct ve__phase a, b;
	pair_init(&a, &b, 11);
	struct world w = world(SLOW, SLOW);
	run_windows(&w, &a, &b, 200, true);
	VE_CHECK_MSG(w.holds >= 4, "%llu holds: it stopped trying", (unsigned long long)w.holds);
	VE_CHECK_MSG(w.holds <= 2 * (200 / VE__PHASE_MAX_BACKOFF + 8), "%llu holds in 200 windows",
		     (unsigned long long)w.holds);
	VE_CHECK_EQ(a.kept + b.kept, 0u);
}

/* A try that lands in a slower phase is taken back at once: a pair that
 * starts in its faster phase spends nearly all its steps there. */
VE_TEST(a_slower_phase_is_taken_back)
{
	struct ve__phase a, b;
	pair_init(&a, &b, 5);
	struct world w = world(FAST, SLOW); /* gaps together is the fast phase here */
	run_windows(&w, &a, &b, 100, true);
	VE_CHECK_MSG(w.steps_apart * 20 < w.steps, "slow phase %llu of %llu steps",
		     (unsigned long long)w.steps_apart, (unsigned long long)w.steps);
	VE_CHECK(!w.apart);
}

/* Kept, then moved by something else (the other process restarted, its
 * load changed): it looks again and gets back. */
VE_TEST(a_kept_phase_that_drifts_is_found_again)
{
	struct ve__phase a, b;
	pair_init(&a, &b, 21);
	struct world w = world(SLOW, FAST);
	run_windows(&w, &a, &b, 30, true);
	VE_CHECK(w.apart);
	w.apart = false; /* knocked back */
	run_windows(&w, &a, &b, 30, true);
	VE_CHECK(w.apart);
}

/* Windows that move by several percent on their own (a busy host, the fake
 * driver): no such move reads as a try that paid or as another client's
 * try, so tries still happen, and back off as where nothing pays. */
VE_TEST(noisy_windows_still_try_and_back_off)
{
	struct ve__phase a, b;
	pair_init(&a, &b, 31);
	struct world w = world(SLOW, SLOW);
	w.noise = 50; /* +-5% */
	w.rng = 77;
	run_windows(&w, &a, &b, 100, true);
	printf("# +-5%% windows: %llu holds in 100 windows, noise %u / %u ppm\n",
	       (unsigned long long)w.holds, a.noise_ppm, b.noise_ppm);
	VE_CHECK_MSG(w.holds >= 3, "%llu holds: noise read as gains", (unsigned long long)w.holds);
	VE_CHECK(w.holds <= 2 * (100 / VE__PHASE_MAX_BACKOFF + 8));
	VE_CHECK(a.noise_ppm > 10000 && b.noise_ppm > 10000);
}

/* Steps longer than VE__PHASE_MAX_STEP are no step loop: never held. */
VE_TEST(long_steps_are_never_held)
{
	struct ve__phase a;
	ve__phase_init(&a, 3);
	struct world w = world(VE__PHASE_MAX_STEP + 1, VE__PHASE_MAX_STEP + 1);
	run_windows(&w, &a, NULL, 20, true);
	VE_CHECK_EQ(w.holds, 0u);
}

/* A busy host pauses both step loops (a preempted thread, a gap between
 * requests) more often than once a window: the pauses are not counted,
 * windows still end, and the pair still finds the faster phase. */
VE_TEST(host_pauses_do_not_stop_the_search)
{
	for (uint32_t every = 100; every <= 1000; every *= 10) {
		struct ve__phase a, b;
		pair_init(&a, &b, 5);
		struct world w = world(SLOW, FAST);
		w.pause_every = every;
		run_windows(&w, &a, &b, 40, true);
		printf("# a pause every %u steps: %llu holds, %llu tries, apart %llu of %llu steps\n",
		       every, (unsigned long long)w.holds, (unsigned long long)(a.tries + b.tries),
		       (unsigned long long)w.steps_apart, (unsigned long long)w.steps);
		VE_CHECK_MSG(a.tries + b.tries >= 1, "a pause every %u steps: no try", every);
		VE_CHECK_MSG(w.apart, "a pause every %u steps: ends with the gaps together", every);
	}
}
